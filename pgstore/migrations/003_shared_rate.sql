-- 003: the shared rate policy. Every process's rate controller proposes
-- rates; pacer_adjust applies each proposal to the shared interval as the
-- step the proposer's controller took, so that all processes slow down
-- together on a refusal and one process's stale rate cannot undo another's
-- cut. See Pacer.SetRate for the rules; the times are nanoseconds on the
-- database clock, like tat.

-- cut_ns, cut_by, cut_base_iv: the start of the current cut episode (the
-- first cut of an overshoot), the pacer that made it, and the interval
-- before it. calm_ns: climbs by other pacers are ignored until then (the
-- latest cut plus the cool-off). grown_ns: how far the climb budget (at
-- most the growth factor per second) has been spent.
ALTER TABLE {{schema}}.pacers
	ADD COLUMN IF NOT EXISTS cut_ns      bigint,
	ADD COLUMN IF NOT EXISTS cut_by      bigint,
	ADD COLUMN IF NOT EXISTS cut_base_iv bigint,
	ADD COLUMN IF NOT EXISTS calm_ns     bigint,
	ADD COLUMN IF NOT EXISTS grown_ns    bigint;

-- pacer_adjust applies pacer who's proposal to the shared interval of key k
-- at time at (NULL: the database clock, read after the row lock). The
-- proposer's controller moved from interval last_iv to prop_iv; last_iv 0
-- means it never proposed before (it joins: the row is created at prop_iv
-- if missing and left alone otherwise). It returns the interval after the
-- call and what happened: created, joined, cut, merged (a cut of the same
-- overshoot by another pacer: the deepest applies, cuts do not compound),
-- calm (a climb within another pacer's cool-off: ignored), capped (a climb
-- the growth budget or the proposal's own rate left at nothing), climbed.
CREATE OR REPLACE FUNCTION {{schema}}.pacer_adjust(k text, at bigint, last_iv bigint, prop_iv bigint,
	new_burst bigint, who bigint, cooloff bigint, growth double precision,
	OUT iv bigint, OUT verdict text)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	r     {{schema}}.pacers%ROWTYPE;
	now   bigint;
	maxiv bigint;
	niv   bigint;
	base  bigint;
	capf  double precision;
BEGIN
	SELECT * INTO r FROM {{schema}}.pacers WHERE key = k FOR UPDATE;
	IF NOT FOUND THEN
		INSERT INTO {{schema}}.pacers (key, tat, interval_ns, burst)
		VALUES (k, -9223372036854775808, prop_iv, new_burst) ON CONFLICT (key) DO NOTHING;
		IF FOUND THEN
			iv := prop_iv;
			verdict := 'created';
			RETURN;
		END IF;
		SELECT * INTO r FROM {{schema}}.pacers WHERE key = k FOR UPDATE;
	END IF;
	iv := r.interval_ns;
	now := coalesce(at, {{schema}}.clock_ns());
	maxiv := 9223372036854775807 / r.burst;
	IF last_iv <= 0 OR last_iv = prop_iv THEN
		verdict := 'joined';
		RETURN;
	END IF;
	IF prop_iv > last_iv THEN
		-- A cut: at once, by the proposer's factor. Within the cool-off
		-- of an episode another pacer started, it is the same overshoot
		-- seen elsewhere: the deepest cut of the episode applies.
		IF r.cut_ns IS NOT NULL AND now >= r.cut_ns AND now::numeric - r.cut_ns < cooloff AND r.cut_by <> who THEN
			niv := GREATEST(r.interval_ns, LEAST(maxiv, ceil(r.cut_base_iv::numeric * prop_iv / last_iv)));
			verdict := 'merged';
		ELSE
			niv := LEAST(maxiv, ceil(r.interval_ns::numeric * prop_iv / last_iv));
			r.cut_ns := now;
			r.cut_by := who;
			r.cut_base_iv := r.interval_ns;
			verdict := 'cut';
		END IF;
		r.calm_ns := GREATEST(r.calm_ns, {{schema}}.gcra_sat(now::numeric + cooloff));
	ELSE
		-- A climb: not while another pacer's cut cools off; by at most
		-- the proposer's factor, the growth budget, and the proposal.
		IF now < r.calm_ns AND r.cut_by IS DISTINCT FROM who THEN
			verdict := 'calm';
			RETURN;
		END IF;
		base := GREATEST(r.grown_ns, {{schema}}.gcra_sat(now::numeric - 1000000000));
		IF r.cut_by IS DISTINCT FROM who THEN
			base := GREATEST(base, r.calm_ns);
		END IF;
		base := LEAST(base, now);
		capf := power(growth, ((now::numeric - base) / 1e9)::double precision);
		niv := GREATEST(1,
			ceil(r.interval_ns::numeric * prop_iv / last_iv),
			ceil(r.interval_ns::numeric / capf::numeric),
			LEAST(r.interval_ns, prop_iv));
		IF niv >= r.interval_ns THEN
			verdict := 'capped';
			RETURN;
		END IF;
		r.grown_ns := LEAST(now, {{schema}}.gcra_sat(base::numeric
			+ ceil(ln(r.interval_ns::double precision / niv) / ln(growth) * 1e9)::numeric));
		verdict := 'climbed';
	END IF;
	IF niv <> r.interval_ns THEN
		r.tat := {{schema}}.gcra_rescale(r.tat, now, r.interval_ns, niv);
	END IF;
	UPDATE {{schema}}.pacers SET tat = r.tat, interval_ns = niv, cut_ns = r.cut_ns, cut_by = r.cut_by,
		cut_base_iv = r.cut_base_iv, calm_ns = r.calm_ns, grown_ns = r.grown_ns
	WHERE key = k;
	iv := niv;
END $$;
