-- 001: the checkpoint.Store tables. {{schema}} is the quoted schema name.
--
-- Times the store stamps from its clock (updated_at, created, lease_expires)
-- are timestamptz (microseconds). Ranges are exact: numeric seconds since the
-- Unix epoch with nine decimals, so any time.Time round-trips to the
-- nanosecond.

-- streams: the lease of each stream that was ever leased. The token only
-- grows (a takeover adds one), so tokens are never reused, even after a
-- release. A stream without a row has never been leased.
CREATE TABLE IF NOT EXISTS {{schema}}.streams (
	stream        text        PRIMARY KEY,
	lease_owner   text        NOT NULL CHECK (lease_owner <> ''),
	lease_token   bigint      NOT NULL CHECK (lease_token > 0),
	lease_expires timestamptz NOT NULL,
	released      boolean     NOT NULL DEFAULT false
);

-- checkpoints: one bookmark per (stream, mode); mode 1 is catch_up, 2 is
-- steady_state. The primary key is what a commit's compare-and-swap hits.
CREATE TABLE IF NOT EXISTS {{schema}}.checkpoints (
	stream     text        NOT NULL,
	mode       smallint    NOT NULL CHECK (mode IN (1, 2)),
	cursor     bytea       NOT NULL,
	version    bigint      NOT NULL CHECK (version > 0),
	updated_at timestamptz NOT NULL,
	PRIMARY KEY (stream, mode)
);

-- gap_ids: the last gap ID issued, in a single row. AddGap takes the row
-- lock to draw the next ID, so IDs are issued in commit order and a drain
-- that pages by ID never skips a gap committed late.
CREATE TABLE IF NOT EXISTS {{schema}}.gap_ids (
	one     boolean PRIMARY KEY DEFAULT true CHECK (one),
	last_id bigint  NOT NULL
);
INSERT INTO {{schema}}.gap_ids (one, last_id) VALUES (true, 0) ON CONFLICT DO NOTHING;

-- gaps: unresolved gap records; ResolveGap deletes the row.
CREATE TABLE IF NOT EXISTS {{schema}}.gaps (
	id          bigint      PRIMARY KEY CHECK (id > 0),
	stream      text        NOT NULL,
	mode        smallint    NOT NULL CHECK (mode IN (1, 2)),
	cursor      bytea       NOT NULL,
	range_start numeric,
	range_end   numeric,
	reason      text        NOT NULL CHECK (reason <> ''),
	created     timestamptz NOT NULL,
	CHECK (range_start IS NULL AND range_end IS NULL
		OR range_start IS NOT NULL AND range_end IS NOT NULL AND range_start < range_end)
);
-- ListGaps filtered by stream (and mode), oldest first.
CREATE INDEX IF NOT EXISTS gaps_stream_mode_id ON {{schema}}.gaps (stream, mode, id);

-- coverage: per series, the covered ranges as one multirange, which keeps
-- its ranges sorted, disjoint and merged on overlap or touch. AddCoverage is
-- one upsert: the row lock serializes concurrent merges of a series.
CREATE TABLE IF NOT EXISTS {{schema}}.coverage (
	series text          PRIMARY KEY,
	ranges nummultirange NOT NULL
);
