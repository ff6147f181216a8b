-- 002: the shared pacer. Its arithmetic is gcra.Decide, gcra.Reserve and the
-- limiter's unreserve, pause and rescale, restated exactly in SQL: int64
-- nanoseconds, saturating instead of overflowing (computed in numeric, then
-- clamped). pgstore's tests check each function against the Go original.

-- pacers: one row per provider key, so every process that paces the
-- provider draws on one budget. tat is the theoretical arrival time in
-- nanoseconds since the Unix epoch on the database clock (the minimum bigint
-- for a pacer that never booked), interval_ns the emission interval 1/rate,
-- burst how many unit requests may go back to back.
CREATE TABLE IF NOT EXISTS {{schema}}.pacers (
	key         text   PRIMARY KEY,
	tat         bigint NOT NULL,
	interval_ns bigint NOT NULL CHECK (interval_ns > 0),
	burst       bigint NOT NULL CHECK (burst >= 1),
	CHECK (burst::numeric * interval_ns <= 9223372036854775807)
);

-- clock_ns reads the database clock, in nanoseconds since the Unix epoch
-- (microsecond resolution). It is the time base every process shares.
CREATE OR REPLACE FUNCTION {{schema}}.clock_ns() RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL SAFE
AS $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000000000)::bigint $$;

-- gcra_sat clamps an exact value to the bigint range (gcra's satAdd/satSub).
CREATE OR REPLACE FUNCTION {{schema}}.gcra_sat(x numeric) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT LEAST(GREATEST(x, -9223372036854775808), 9223372036854775807)::bigint $$;

-- gcra_tolerance is L + I = burst × interval, or NULL when the parameters
-- are invalid (gcra's tolerance).
CREATE OR REPLACE FUNCTION {{schema}}.gcra_tolerance(iv bigint, burst bigint) RETURNS numeric
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT CASE WHEN iv <= 0 OR burst < 1 OR burst::numeric * iv > 9223372036854775807
	THEN NULL ELSE burst::numeric * iv END $$;

-- gcra_reserve is gcra.Reserve: it books n units whether or not they conform
-- and returns the new TAT and the wait until they do (9223372036854775807,
-- gcra.Never, for a cost outside [0, burst] or invalid parameters).
CREATE OR REPLACE FUNCTION {{schema}}.gcra_reserve(tat bigint, now bigint, iv bigint, burst bigint, n bigint,
	OUT new_tat bigint, OUT wait bigint)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
	tau     numeric := {{schema}}.gcra_tolerance(iv, burst);
	tatp    bigint  := GREATEST(tat, now);
	cost    numeric;
	backlog numeric;
BEGIN
	new_tat := tat;
	wait := 9223372036854775807;
	IF tau IS NULL OR n < 0 OR n > burst THEN
		RETURN;
	END IF;
	cost := n::numeric * iv;
	backlog := {{schema}}.gcra_sat(tatp::numeric - now);
	wait := CASE WHEN backlog > tau - cost THEN backlog - (tau - cost) ELSE 0 END;
	IF n > 0 THEN
		new_tat := {{schema}}.gcra_sat(tatp + cost);
	END IF;
END $$;

-- gcra_decide is gcra.Decide: it books n units only if they conform, and
-- returns the new TAT and the fields of gcra.Result.
CREATE OR REPLACE FUNCTION {{schema}}.gcra_decide(tat bigint, now bigint, iv bigint, burst bigint, n bigint,
	OUT new_tat bigint, OUT allowed boolean, OUT remaining bigint, OUT retry_after bigint, OUT reset_after bigint)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
	tau     numeric := {{schema}}.gcra_tolerance(iv, burst);
	cost    numeric;
	backlog numeric;
BEGIN
	new_tat := tat;
	allowed := false;
	remaining := 0;
	retry_after := 9223372036854775807;
	reset_after := 0;
	IF tau IS NULL THEN
		RETURN;
	END IF;
	backlog := {{schema}}.gcra_sat(GREATEST(tat, now)::numeric - now);
	IF n >= 0 AND n <= burst THEN
		cost := n::numeric * iv;
		IF backlog > tau - cost THEN
			retry_after := backlog - (tau - cost);
		ELSE
			allowed := true;
			retry_after := 0;
			IF n > 0 THEN
				new_tat := {{schema}}.gcra_sat(GREATEST(tat, now) + cost);
				backlog := backlog + cost;
			END IF;
		END IF;
	END IF;
	reset_after := backlog;
	IF backlog < tau THEN
		remaining := div(tau - backlog, iv);
	END IF;
END $$;

-- gcra_unreserve gives back n·interval of booked time, never moving TAT
-- below now (the limiter's unreserve).
CREATE OR REPLACE FUNCTION {{schema}}.gcra_unreserve(tat bigint, now bigint, iv bigint, n bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT CASE
	WHEN n <= 0 OR tat <= now THEN tat
	WHEN n::numeric * iv >= {{schema}}.gcra_sat(tat::numeric - now) THEN now
	ELSE tat - n * iv END $$;

-- gcra_pause moves TAT forward to at least until + L, never backwards (the
-- limiter's pause).
CREATE OR REPLACE FUNCTION {{schema}}.gcra_pause(tat bigint, until bigint, iv bigint, burst bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT CASE
	WHEN {{schema}}.gcra_tolerance(iv, burst) IS NULL THEN tat
	ELSE GREATEST(tat, {{schema}}.gcra_sat(until::numeric + {{schema}}.gcra_tolerance(iv, burst) - iv)) END $$;

-- gcra_rescale converts the backlog TAT − now from the old interval to the
-- new one, rounded up so that a rate change never creates credit; an idle
-- pacer stays idle. It mirrors the limiter's rescale to the nanosecond,
-- including the nudge that keeps the result different from tat.
CREATE OR REPLACE FUNCTION {{schema}}.gcra_rescale(tat bigint, now bigint, old_iv bigint, new_iv bigint) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
	q numeric;
	u bigint;
BEGIN
	IF tat <= now THEN
		RETURN CASE WHEN tat = now THEN {{schema}}.gcra_sat(tat::numeric - 1) ELSE tat + 1 END;
	END IF;
	q := {{schema}}.gcra_sat(tat::numeric - now)::numeric * new_iv;
	IF q >= 18446744073709551616::numeric * old_iv THEN
		RETURN {{schema}}.gcra_sat(now::numeric + 9223372036854775807);
	END IF;
	q := LEAST(div(q + old_iv - 1, old_iv), 9223372036854775807);
	u := {{schema}}.gcra_sat(now::numeric + q);
	IF u <> tat THEN
		RETURN u;
	END IF;
	RETURN {{schema}}.gcra_sat(tat::numeric + 1);
END $$;
