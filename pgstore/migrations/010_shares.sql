-- 010: shared capacity by leases. {{schema}} is the quoted schema name.
--
-- provider_shares holds one document per provider key, through which the
-- processes calling the provider share its rate (budget.ShareStore): the
-- rate they learned together and a lease per process on a share of it.
-- The document is the budget package's; the store only keeps it and
-- updates it atomically (version: compare-and-swap).
CREATE TABLE IF NOT EXISTS {{schema}}.provider_shares (
	key     text   PRIMARY KEY,
	doc     bytea  NOT NULL,
	version bigint NOT NULL
);

-- The shared pacer of 002/003 booked every admission in a row of pacers
-- (one round trip per request) under a rate policy written in PL/pgSQL;
-- leases replace both.
DROP FUNCTION IF EXISTS {{schema}}.pacer_adjust(text, bigint, bigint, bigint, bigint, bigint, bigint, double precision);
DROP TABLE IF EXISTS {{schema}}.pacers;
DROP FUNCTION IF EXISTS {{schema}}.gcra_rescale(bigint, bigint, bigint, bigint);
DROP FUNCTION IF EXISTS {{schema}}.gcra_pause(bigint, bigint, bigint, bigint);
DROP FUNCTION IF EXISTS {{schema}}.gcra_unreserve(bigint, bigint, bigint, bigint);
DROP FUNCTION IF EXISTS {{schema}}.gcra_decide(bigint, bigint, bigint, bigint, bigint);
DROP FUNCTION IF EXISTS {{schema}}.gcra_reserve(bigint, bigint, bigint, bigint, bigint);
DROP FUNCTION IF EXISTS {{schema}}.gcra_tolerance(bigint, bigint);
DROP FUNCTION IF EXISTS {{schema}}.gcra_sat(numeric);
DROP FUNCTION IF EXISTS {{schema}}.clock_ns();
