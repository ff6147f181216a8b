-- 004: the schedule.JobStore tables. Times are timestamptz (microseconds);
-- a zero time.Time is stored as NULL where the field is optional (LastRun,
-- LastSuccess, Lease.Until), and an empty lease owner as NULL, so that "no
-- lease" reads as NULL to an operator too.

-- jobs: one row per (provider, kind, stream). The ID comes from the
-- identity's sequence: increasing, never reused (an upsert that updates
-- burns a value, which is harmless).
CREATE TABLE IF NOT EXISTS {{schema}}.jobs (
	id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	provider     text        NOT NULL CHECK (provider <> ''),
	kind         text        NOT NULL CHECK (kind IN ('gap_fill', 'incremental', 'refresh', 'backfill')),
	stream       text        NOT NULL CHECK (stream <> ''),
	priority     integer     NOT NULL CHECK (priority BETWEEN 0 AND 1000),
	interval_ns  bigint      NOT NULL CHECK (interval_ns >= 0),
	payload      bytea,
	state        text        NOT NULL CHECK (state IN ('idle', 'queued', 'running', 'waiting_rate_limit',
		'success', 'failed', 'paused')),
	next_run     timestamptz NOT NULL,
	runs         bigint      NOT NULL,
	successes    bigint      NOT NULL,
	failures     bigint      NOT NULL,
	streak       bigint      NOT NULL,
	last_error   text        NOT NULL,
	last_run     timestamptz,
	last_success timestamptz,
	lease_owner  text        CHECK (lease_owner <> ''),
	lease_until  timestamptz CHECK (lease_owner IS NULL OR lease_until IS NOT NULL),
	version      bigint      NOT NULL CHECK (version > 0),
	created      timestamptz NOT NULL,
	updated      timestamptz NOT NULL,
	CONSTRAINT jobs_identity UNIQUE (provider, kind, stream)
);

-- jobs_claim: the claim's walk over due work. Within a group of a
-- provider's active jobs (head or backfill, one priority) the claim's rank
-- follows NextRun, then ID, so the group's best job is its first entry
-- here, unless that one is leased (then the next unleased one) or not due
-- (then none is). Claim visits the groups by a skip scan of this index, one
-- probe per group (two when the first job is leased): its cost grows with
-- the number of groups, not with the backlog of due jobs.
CREATE INDEX IF NOT EXISTS jobs_claim ON {{schema}}.jobs (provider, (kind = 'backfill'), priority, next_run, id)
	WHERE state NOT IN ('paused', 'success');

-- jobs_leased: jobs under a lease, so that counting each provider's live
-- leases (lease_until > now) reads only leased jobs.
CREATE INDEX IF NOT EXISTS jobs_leased ON {{schema}}.jobs (lease_until, provider)
	WHERE lease_owner IS NOT NULL;

-- job_providers: one row per provider that ever had a job. A claim locks
-- the rows of the providers it takes jobs from (FOR UPDATE SKIP LOCKED), so
-- that claims on one provider take turns and its per-provider cap and
-- head-first rule hold across processes, while claims on other providers
-- go ahead; a provider another claim holds is skipped, never waited for.
CREATE TABLE IF NOT EXISTS {{schema}}.job_providers (
	provider text PRIMARY KEY
);

-- claim_candidates is the first half of a claim, run inside its
-- transaction (READ COMMITTED: each statement below sees what committed
-- before it). Over the providers not in excluded it ranks each provider by
-- its best eligible job (claimable at t_now: active, due, its lease empty or
-- expired; a backfill only if the provider has no head job claimable or
-- under a live lease; the provider under its per_provider cap of live
-- leases, 0 for none) and locks the rows of the best need providers,
-- skipping those other claims hold. Then, with a fresh snapshot, it
-- returns the locked providers' candidates, each provider's best
-- min(lim, free slots) eligible jobs, and one row per locked provider with
-- a NULL id. The rank is NextRun + Priority × aging (nanoseconds, exact),
-- then Priority, NextRun, ID; with aging 0, Priority first.
--
-- The caller asks ClaimFilter.Tail, picks, and leases in the same
-- transaction. JIT is off: the skip scans' row estimates are far too high,
-- and compiling would cost a hundred times the query. The plans are
-- generic, made once per connection: planning these statements costs as
-- much as running them, and no parameter changes the best plan (index
-- probes per provider and group).
CREATE OR REPLACE FUNCTION {{schema}}.claim_candidates(t_now timestamptz, excluded text[],
	per_provider integer, need integer, lim integer, aging bigint)
RETURNS TABLE (id bigint, provider text, tail boolean, priority integer, next_run timestamptz)
LANGUAGE plpgsql VOLATILE SET jit = off SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
	locked text[];
BEGIN
	SELECT array_agg(b.provider) INTO locked FROM (
		WITH RECURSIVE grp AS (
			-- Each group's first job by (NextRun, ID), or none.
			SELECT f.* FROM {{schema}}.job_providers s CROSS JOIN LATERAL (
				SELECT j.provider, j.kind = 'backfill' AS tail, j.priority, j.next_run, j.id, j.lease_owner, j.lease_until
				FROM {{schema}}.jobs j
				WHERE j.provider = s.provider AND j.state NOT IN ('paused', 'success')
				ORDER BY j.kind = 'backfill', j.priority, j.next_run, j.id LIMIT 1) f
			WHERE s.provider <> ALL(excluded)
		UNION ALL
			SELECT n.* FROM grp g CROSS JOIN LATERAL (
				SELECT j.provider, j.kind = 'backfill' AS tail, j.priority, j.next_run, j.id, j.lease_owner, j.lease_until
				FROM {{schema}}.jobs j
				WHERE j.provider = g.provider AND j.state NOT IN ('paused', 'success')
					AND (j.kind = 'backfill', j.priority) > (g.tail, g.priority)
				ORDER BY j.kind = 'backfill', j.priority, j.next_run, j.id LIMIT 1) n
		), head AS (
			-- Each group's best claimable job: its first job, unless that
			-- is under a live lease (then the next one not) or not due
			-- (then none is).
			SELECT g.provider, g.tail, g.id, g.priority, g.next_run FROM grp g
			WHERE g.next_run <= t_now AND (g.lease_owner IS NULL OR g.lease_until <= t_now)
		UNION ALL
			SELECT g.provider, g.tail, h.id, h.priority, h.next_run FROM grp g CROSS JOIN LATERAL (
				SELECT j.id, j.priority, j.next_run FROM {{schema}}.jobs j
				WHERE j.provider = g.provider AND (j.kind = 'backfill') = g.tail AND j.priority = g.priority
					AND j.state NOT IN ('paused', 'success') AND (j.next_run, j.id) > (g.next_run, g.id)
					AND j.next_run <= t_now AND (j.lease_owner IS NULL OR j.lease_until <= t_now)
				ORDER BY j.next_run, j.id LIMIT 1) h
			WHERE g.next_run <= t_now AND g.lease_owner IS NOT NULL AND g.lease_until > t_now
		), live AS (
			SELECT j.provider, count(*) AS leased,
				bool_or(j.kind <> 'backfill' AND j.state NOT IN ('paused', 'success')) AS head_leased
			FROM {{schema}}.jobs j
			WHERE j.lease_owner IS NOT NULL AND j.lease_until > t_now
			GROUP BY j.provider
		), prov AS (
			SELECT h.provider, bool_or(NOT h.tail) OR coalesce(bool_or(l.head_leased), false) AS head_busy,
				coalesce(max(l.leased), 0) AS leased
			FROM head h LEFT JOIN live l ON l.provider = h.provider
			GROUP BY h.provider
		), best AS (
			SELECT DISTINCT ON (h.provider) h.provider, h.priority, h.next_run, h.id,
				CASE WHEN aging > 0 THEN extract(epoch FROM h.next_run) * 1000000000 + h.priority::numeric * aging
				ELSE 0 END AS rank
			FROM head h JOIN prov p ON p.provider = h.provider
			WHERE (NOT h.tail OR NOT p.head_busy) AND (per_provider = 0 OR p.leased < per_provider)
			ORDER BY h.provider, rank, h.priority, h.next_run, h.id
		)
		SELECT p.provider FROM {{schema}}.job_providers p JOIN best b ON b.provider = p.provider
		ORDER BY b.rank, b.priority, b.next_run, b.id
		LIMIT need
		FOR UPDATE OF p SKIP LOCKED
	) b;
	IF locked IS NULL THEN
		RETURN;
	END IF;

	RETURN QUERY
	WITH RECURSIVE grp AS (
		SELECT f.provider, f.tail, f.priority
		FROM unnest(locked) s(provider) CROSS JOIN LATERAL (
			SELECT j.provider, j.kind = 'backfill' AS tail, j.priority FROM {{schema}}.jobs j
			WHERE j.provider = s.provider AND j.state NOT IN ('paused', 'success')
			ORDER BY j.kind = 'backfill', j.priority LIMIT 1) f
	UNION ALL
		SELECT n.provider, n.tail, n.priority FROM grp g CROSS JOIN LATERAL (
			SELECT j.provider, j.kind = 'backfill' AS tail, j.priority FROM {{schema}}.jobs j
			WHERE j.provider = g.provider AND j.state NOT IN ('paused', 'success')
				AND (j.kind = 'backfill', j.priority) > (g.tail, g.priority)
			ORDER BY j.kind = 'backfill', j.priority LIMIT 1) n
	), head AS (
		SELECT g.provider, g.tail, h.id, h.priority, h.next_run FROM grp g CROSS JOIN LATERAL (
			SELECT j.id, j.priority, j.next_run FROM {{schema}}.jobs j
			WHERE j.provider = g.provider AND (j.kind = 'backfill') = g.tail AND j.priority = g.priority
				AND j.state NOT IN ('paused', 'success') AND j.next_run <= t_now
				AND (j.lease_owner IS NULL OR j.lease_until <= t_now)
			ORDER BY j.next_run, j.id LIMIT lim) h
	), live AS (
		SELECT j.provider, count(*) AS leased,
			bool_or(j.kind <> 'backfill' AND j.state NOT IN ('paused', 'success')) AS head_leased
		FROM {{schema}}.jobs j
		WHERE j.lease_owner IS NOT NULL AND j.lease_until > t_now AND j.provider = ANY(locked)
		GROUP BY j.provider
	), prov AS (
		SELECT h.provider, bool_or(NOT h.tail) OR coalesce(bool_or(l.head_leased), false) AS head_busy,
			coalesce(max(l.leased), 0) AS leased
		FROM head h LEFT JOIN live l ON l.provider = h.provider
		GROUP BY h.provider
	), cand AS (
		SELECT h.id, h.provider, h.tail, h.priority, h.next_run, p.leased,
			row_number() OVER (PARTITION BY h.provider ORDER BY
				CASE WHEN aging > 0 THEN extract(epoch FROM h.next_run) * 1000000000 + h.priority::numeric * aging
				ELSE 0 END, h.priority, h.next_run, h.id) AS n
		FROM head h JOIN prov p ON p.provider = h.provider
		WHERE NOT h.tail OR NOT p.head_busy
	)
	SELECT c.id, c.provider, c.tail, c.priority, c.next_run FROM cand c
	WHERE c.n <= lim AND (per_provider = 0 OR c.n <= per_provider - c.leased);

	RETURN QUERY SELECT NULL::bigint, s.p, NULL::boolean, NULL::integer, NULL::timestamptz FROM unnest(locked) s(p);
END $$;
