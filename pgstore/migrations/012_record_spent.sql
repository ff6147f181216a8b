-- 012: each known limit's accounted time in each provider's record.
-- {{schema}} is the quoted schema name.
--
-- forage.ProviderRecord.Spent: per known limit, the time until which its
-- allowance is accounted for, so a process that restarts does not spend
-- again a window the process before it spent. A JSON object of key to
-- RFC 3339 time; a save replaces it.
ALTER TABLE {{schema}}.provider_records
	ADD COLUMN IF NOT EXISTS spent jsonb NOT NULL DEFAULT '{}';
