-- 009: one record per provider key. {{schema}} is the quoted schema name.
--
-- What the collectors keep about each provider between runs (see
-- forage.ProviderRecord): an operator's status and why, the learned rate
-- and ceiling, the pause the provider asked for with its reason, and
-- counters. paused_until only grows: a save never shortens a pause. A zero
-- time is stored as 0001-01-01 UTC, Go's zero time.
--
-- The pauses of 006/007 move into it, one record per provider holding only
-- the pause; the pauses table is no longer read or written.
CREATE TABLE IF NOT EXISTS {{schema}}.provider_records (
	key          text             PRIMARY KEY,
	status       text             NOT NULL DEFAULT '',
	why          text             NOT NULL DEFAULT '',
	rate         double precision NOT NULL DEFAULT 0,
	ceiling      double precision NOT NULL DEFAULT 0,
	confirmed    boolean          NOT NULL DEFAULT false,
	paused_until timestamptz      NOT NULL DEFAULT '0001-01-01 00:00:00+00',
	pause_reason text             NOT NULL DEFAULT '',
	requests     bigint           NOT NULL DEFAULT 0,
	ok           bigint           NOT NULL DEFAULT 0,
	throttled    bigint           NOT NULL DEFAULT 0,
	updated      timestamptz      NOT NULL DEFAULT '0001-01-01 00:00:00+00'
);

INSERT INTO {{schema}}.provider_records AS r (key, paused_until, pause_reason)
SELECT provider, until, reason FROM {{schema}}.pauses
ON CONFLICT (key) DO UPDATE SET
	paused_until = excluded.paused_until,
	pause_reason = excluded.pause_reason
WHERE excluded.paused_until > r.paused_until;
