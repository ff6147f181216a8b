-- 008: one job per stream at once. {{schema}} is the quoted schema name.
--
-- Jobs of one provider on one stream contend for the stream's checkpoint
-- and lease, so a claim never leases one while another is under a live
-- lease, nor two in one claim (see schedule.JobStore.Claim). A job held
-- back that way is not claimable, so it does not hold its provider's
-- backfills back either. claim_candidates is the function of 004 with
-- that rule added; jobs_stream_leased finds a stream's live leases.
CREATE INDEX IF NOT EXISTS jobs_stream_leased ON {{schema}}.jobs (provider, stream)
	WHERE lease_owner IS NOT NULL;

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
				SELECT j.provider, j.kind = 'backfill' AS tail, j.priority, j.next_run, j.id, j.lease_owner, j.lease_until, j.stream
				FROM {{schema}}.jobs j
				WHERE j.provider = s.provider AND j.state NOT IN ('paused', 'success')
				ORDER BY j.kind = 'backfill', j.priority, j.next_run, j.id LIMIT 1) f
			WHERE s.provider <> ALL(excluded)
		UNION ALL
			SELECT n.* FROM grp g CROSS JOIN LATERAL (
				SELECT j.provider, j.kind = 'backfill' AS tail, j.priority, j.next_run, j.id, j.lease_owner, j.lease_until, j.stream
				FROM {{schema}}.jobs j
				WHERE j.provider = g.provider AND j.state NOT IN ('paused', 'success')
					AND (j.kind = 'backfill', j.priority) > (g.tail, g.priority)
				ORDER BY j.kind = 'backfill', j.priority, j.next_run, j.id LIMIT 1) n
		), head AS (
			-- Each group's best claimable job: its first job, unless that
			-- is under a live lease or its stream is (then the next one
			-- neither is) or not due (then none is).
			SELECT g.provider, g.tail, g.id, g.priority, g.next_run FROM grp g
			WHERE g.next_run <= t_now AND (g.lease_owner IS NULL OR g.lease_until <= t_now)
				AND NOT EXISTS (SELECT 1 FROM {{schema}}.jobs o WHERE o.provider = g.provider AND o.stream = g.stream AND o.id <> g.id
					AND o.lease_owner IS NOT NULL AND o.lease_until > t_now)
		UNION ALL
			SELECT g.provider, g.tail, h.id, h.priority, h.next_run FROM grp g CROSS JOIN LATERAL (
				SELECT j.id, j.priority, j.next_run FROM {{schema}}.jobs j
				WHERE j.provider = g.provider AND (j.kind = 'backfill') = g.tail AND j.priority = g.priority
					AND j.state NOT IN ('paused', 'success') AND (j.next_run, j.id) > (g.next_run, g.id)
					AND j.next_run <= t_now AND (j.lease_owner IS NULL OR j.lease_until <= t_now)
					AND NOT EXISTS (SELECT 1 FROM {{schema}}.jobs o WHERE o.provider = j.provider AND o.stream = j.stream AND o.id <> j.id
					AND o.lease_owner IS NOT NULL AND o.lease_until > t_now)
				ORDER BY j.next_run, j.id LIMIT 1) h
			WHERE g.next_run <= t_now AND (g.lease_owner IS NOT NULL AND g.lease_until > t_now OR EXISTS (SELECT 1 FROM {{schema}}.jobs o WHERE o.provider = g.provider AND o.stream = g.stream AND o.id <> g.id
					AND o.lease_owner IS NOT NULL AND o.lease_until > t_now))
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
		-- Up to 3 × lim per group: a stream has at most three head jobs
		-- (gap fill, incremental, refresh), of which a claim takes one.
		SELECT g.provider, g.tail, h.id, h.priority, h.next_run, h.stream FROM grp g CROSS JOIN LATERAL (
			SELECT j.id, j.priority, j.next_run, j.stream FROM {{schema}}.jobs j
			WHERE j.provider = g.provider AND (j.kind = 'backfill') = g.tail AND j.priority = g.priority
				AND j.state NOT IN ('paused', 'success') AND j.next_run <= t_now
				AND (j.lease_owner IS NULL OR j.lease_until <= t_now)
				AND NOT EXISTS (SELECT 1 FROM {{schema}}.jobs o WHERE o.provider = j.provider AND o.stream = j.stream AND o.id <> j.id
					AND o.lease_owner IS NOT NULL AND o.lease_until > t_now)
			ORDER BY j.next_run, j.id LIMIT 3 * lim) h
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
	), ranked AS (
		SELECT h.id, h.provider, h.tail, h.priority, h.next_run, h.stream, p.leased,
			CASE WHEN aging > 0 THEN extract(epoch FROM h.next_run) * 1000000000 + h.priority::numeric * aging
			ELSE 0 END AS rank
		FROM head h JOIN prov p ON p.provider = h.provider
		WHERE NOT h.tail OR NOT p.head_busy
	), uniq AS (
		-- One job per stream: the best of each.
		SELECT DISTINCT ON (r.provider, r.stream) r.* FROM ranked r
		ORDER BY r.provider, r.stream, r.rank, r.priority, r.next_run, r.id
	), cand AS (
		SELECT u.id, u.provider, u.tail, u.priority, u.next_run, u.leased,
			row_number() OVER (PARTITION BY u.provider ORDER BY u.rank, u.priority, u.next_run, u.id) AS n
		FROM uniq u
	)
	SELECT c.id, c.provider, c.tail, c.priority, c.next_run FROM cand c
	WHERE c.n <= lim AND (per_provider = 0 OR c.n <= per_provider - c.leased);

	RETURN QUERY SELECT NULL::bigint, s.p, NULL::boolean, NULL::integer, NULL::timestamptz FROM unnest(locked) s(p);
END $$;
