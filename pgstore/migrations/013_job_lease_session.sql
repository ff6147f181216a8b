-- 013: a job's lease tied to its holder's session, as a stream's is
-- (005). {{schema}} is the quoted schema name.
--
-- lease_session is the key of the session-level advisory lock that the
-- claiming process holds on a connection of its own for as long as it
-- lives (see session.go); NULL means none (a lease granted by an older
-- pgstore, by Upsert, or with Config.NoLeaseSession). A claim records it,
-- a renewal records the key as it is then, a release clears it. When the
-- process dies, PostgreSQL ends its session and drops the lock, and the
-- job's lease counts as ended at once: the job is claimable again (taken
-- over, as an expired lease is), and it no longer counts against its
-- provider's per-provider cap nor holds its stream's other jobs back.
-- Without that, a killed process's leases held its providers' slots in
-- every process until they expired (LeaseTTL, a minute by default).
ALTER TABLE {{schema}}.jobs ADD COLUMN IF NOT EXISTS lease_session bigint;

-- job_lease_ended reports whether a lease (its end until and its session
-- sess; the caller checks that it has an owner) has ended at t_now: it
-- has expired, or it records a session whose advisory lock can be taken,
-- the holder's process being gone. The lock is tried only for a lease
-- that has not expired (a CASE), so the cost is one try per otherwise
-- live lease a statement reads (about a microsecond each): a live
-- holder's try fails and takes nothing, and a dead holder's lock, taken
-- for the claim's transaction, goes with its commit; one lock per dead
-- process, however many jobs it held. A lease taken over records its new
-- holder's session, and an expired one is never tried, so no row is
-- tried for longer than its lease would have lasted.
--
-- It is declared STABLE though it takes a lock: declared VOLATILE, it
-- kept the claim's NOT EXISTS tests from becoming anti-joins, and the
-- probe for a group's next claimable job became a scan and sort of the
-- whole group instead of one ordered index probe. Within a transaction
-- its answer for a lease moves only from live to ended (a lock it took
-- stays taken, and taking it again is a no-op), so however often the
-- planner calls it, a claim at worst sees as live a lease that ended a
-- moment ago, which the next claim takes over. In PL/pgSQL because a
-- STABLE SQL function around a volatile call is not inlined either, and
-- its calls cost twice as much.
CREATE OR REPLACE FUNCTION {{schema}}.job_lease_ended(until timestamptz, sess bigint, t_now timestamptz)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
	RETURN CASE WHEN until > t_now AND sess IS NOT NULL THEN pg_try_advisory_xact_lock(sess) ELSE until <= t_now END;
END $$;

-- claim_candidates is the function of 008 with every test of a live lease
-- (the job's own, its stream's other jobs', the per-provider count) also
-- asking job_lease_ended.
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
				SELECT j.provider, j.kind = 'backfill' AS tail, j.priority, j.next_run, j.id, j.lease_owner, j.lease_until, j.lease_session, j.stream
				FROM {{schema}}.jobs j
				WHERE j.provider = s.provider AND j.state NOT IN ('paused', 'success')
				ORDER BY j.kind = 'backfill', j.priority, j.next_run, j.id LIMIT 1) f
			WHERE s.provider <> ALL(excluded)
		UNION ALL
			SELECT n.* FROM grp g CROSS JOIN LATERAL (
				SELECT j.provider, j.kind = 'backfill' AS tail, j.priority, j.next_run, j.id, j.lease_owner, j.lease_until, j.lease_session, j.stream
				FROM {{schema}}.jobs j
				WHERE j.provider = g.provider AND j.state NOT IN ('paused', 'success')
					AND (j.kind = 'backfill', j.priority) > (g.tail, g.priority)
				ORDER BY j.kind = 'backfill', j.priority, j.next_run, j.id LIMIT 1) n
		), head AS (
			-- Each group's best claimable job: its first job, unless that
			-- is under a live lease or its stream is (then the next one
			-- neither is) or not due (then none is).
			SELECT g.provider, g.tail, g.id, g.priority, g.next_run FROM grp g
			WHERE g.next_run <= t_now AND (g.lease_owner IS NULL OR {{schema}}.job_lease_ended(g.lease_until, g.lease_session, t_now))
				AND NOT EXISTS (SELECT 1 FROM {{schema}}.jobs o WHERE o.provider = g.provider AND o.stream = g.stream AND o.id <> g.id
					AND o.lease_owner IS NOT NULL AND o.lease_until > t_now
					AND NOT {{schema}}.job_lease_ended(o.lease_until, o.lease_session, t_now))
		UNION ALL
			SELECT g.provider, g.tail, h.id, h.priority, h.next_run FROM grp g CROSS JOIN LATERAL (
				SELECT j.id, j.priority, j.next_run FROM {{schema}}.jobs j
				WHERE j.provider = g.provider AND (j.kind = 'backfill') = g.tail AND j.priority = g.priority
					AND j.state NOT IN ('paused', 'success') AND (j.next_run, j.id) > (g.next_run, g.id)
					AND j.next_run <= t_now AND (j.lease_owner IS NULL OR {{schema}}.job_lease_ended(j.lease_until, j.lease_session, t_now))
					AND NOT EXISTS (SELECT 1 FROM {{schema}}.jobs o WHERE o.provider = j.provider AND o.stream = j.stream AND o.id <> j.id
					AND o.lease_owner IS NOT NULL AND o.lease_until > t_now
					AND NOT {{schema}}.job_lease_ended(o.lease_until, o.lease_session, t_now))
				ORDER BY j.next_run, j.id LIMIT 1) h
			WHERE g.next_run <= t_now AND (g.lease_owner IS NOT NULL AND g.lease_until > t_now
					AND NOT {{schema}}.job_lease_ended(g.lease_until, g.lease_session, t_now) OR EXISTS (SELECT 1 FROM {{schema}}.jobs o WHERE o.provider = g.provider AND o.stream = g.stream AND o.id <> g.id
					AND o.lease_owner IS NOT NULL AND o.lease_until > t_now
					AND NOT {{schema}}.job_lease_ended(o.lease_until, o.lease_session, t_now)))
		), live AS (
			SELECT j.provider, count(*) AS leased,
				bool_or(j.kind <> 'backfill' AND j.state NOT IN ('paused', 'success')) AS head_leased
			FROM {{schema}}.jobs j
			WHERE j.lease_owner IS NOT NULL AND j.lease_until > t_now
					AND NOT {{schema}}.job_lease_ended(j.lease_until, j.lease_session, t_now)
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
				AND (j.lease_owner IS NULL OR {{schema}}.job_lease_ended(j.lease_until, j.lease_session, t_now))
				AND NOT EXISTS (SELECT 1 FROM {{schema}}.jobs o WHERE o.provider = j.provider AND o.stream = j.stream AND o.id <> j.id
					AND o.lease_owner IS NOT NULL AND o.lease_until > t_now
					AND NOT {{schema}}.job_lease_ended(o.lease_until, o.lease_session, t_now))
			ORDER BY j.next_run, j.id LIMIT 3 * lim) h
	), live AS (
		SELECT j.provider, count(*) AS leased,
			bool_or(j.kind <> 'backfill' AND j.state NOT IN ('paused', 'success')) AS head_leased
		FROM {{schema}}.jobs j
		WHERE j.lease_owner IS NOT NULL AND j.lease_until > t_now
					AND NOT {{schema}}.job_lease_ended(j.lease_until, j.lease_session, t_now) AND j.provider = ANY(locked)
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
