-- 011: the refusals of the last minute in each provider's record.
-- {{schema}} is the quoted schema name.
--
-- forage.ProviderRecord.Refusals: the times of the requests the provider
-- refused for rate in the minute before the save, so a process that
-- restarts counts the refusal budget already spent. A save replaces them.
ALTER TABLE {{schema}}.provider_records
	ADD COLUMN IF NOT EXISTS refusals timestamptz[] NOT NULL DEFAULT '{}';
