-- 007: why each provider's pause was asked for. {{schema}} is the quoted
-- schema name.
--
-- reason is a budget.Reason's wire name ("banned", "throttled"), kept with
-- the pause's end so a process started during a ban reports banned rather
-- than throttled. Rows saved before this migration read as '' (unknown),
-- which budget reads as throttled.
ALTER TABLE {{schema}}.pauses ADD COLUMN IF NOT EXISTS reason text NOT NULL DEFAULT '';
