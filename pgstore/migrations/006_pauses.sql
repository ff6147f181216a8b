-- 006: providers' pauses. {{schema}} is the quoted schema name.
--
-- A provider that asked the collectors to stay away (a 429 with
-- Retry-After, a ban, a spent quota) is not called before until, by any
-- process, even one started after the pause began. until only grows: a
-- save never shortens a pause.
CREATE TABLE IF NOT EXISTS {{schema}}.pauses (
	provider text        PRIMARY KEY,
	until    timestamptz NOT NULL
);
