-- bench/cycles_setup.sql — schema for bench/cycles.sh: payloads, owners,
-- the baselines and the helpers. Loaded once into the throwaway cluster,
-- after CREATE EXTENSION lake (and pgq, when it is installed).
\set ON_ERROR_STOP on
SET client_min_messages = warning;

CREATE SCHEMA cycles;

-- A 256-byte JSON line, deterministic in its key: the same generator as
-- bench/setup.sql's bench.payload256. STABLE SQL, so the planner inlines it
-- into the calling statement: the same cost on every side of a comparison.
CREATE FUNCTION cycles.payload_text(op text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT pg_catalog.rpad(pg_catalog.format(
      '{"op":"%s","tenant":"t1","event":"order.updated","order":%s,"status":"shipped","carrier":"dhl","items":[{"sku":"SKU-%s","qty":%s}],"trace":"%s","note":"',
      op, abs(hashtext(op)) % 1000000, abs(hashtext(op || 's')) % 10000,
      abs(hashtext(op || 'q')) % 9 + 1, md5(op)), 254, md5(op || 'n')) || '"}'
$$;
CREATE FUNCTION cycles.payload(op text) RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT pg_catalog.convert_to(cycles.payload_text(op), 'UTF8')
$$;

-- The fire-and-forget baseline: "a trivial SQL call of the same shape" —
-- the same four arguments, a composite (lake.receipt) back.
CREATE FUNCTION cycles.trivial(owner text, from_phase text, to_phase text, payload bytea)
RETURNS lake.receipt LANGUAGE sql STABLE AS $$
  SELECT ROW(0, pg_catalog.length(payload))::lake.receipt
$$;

-- The durable baseline: one row per transaction, 256-byte payload, unique index.
CREATE TABLE cycles.plain (
    owner         text  NOT NULL,
    operation_id  text  NOT NULL,
    payload       bytea NOT NULL,
    UNIQUE (owner, operation_id)
);

-- One owner per pgbench client (client_id 0..127), and the log fillers.
SELECT count(*) FROM (SELECT lake.create_owner('c' || g) FROM generate_series(0, 127) AS g) x;
SELECT count(*) FROM (SELECT lake.create_owner('o' || g) FROM generate_series(1, 1000) AS g) x;
SELECT lake.create_owner('traj');
SELECT lake.create_owner('traj_spread');
SELECT lake.create_owner('probe');

-- Minimum, median and 90th percentile (ms) of n executions of a statement.
CREATE FUNCTION cycles.time_it(stmt text, n int, OUT min_ms float8, OUT median_ms float8, OUT p90_ms float8, OUT result bigint)
LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz;
    ms float8[] := '{}';
BEGIN
    FOR i IN 1 .. n LOOP
        t0 := clock_timestamp();
        EXECUTE stmt INTO result;
        ms := ms || (extract(epoch FROM clock_timestamp() - t0) * 1000)::float8;
    END LOOP;
    SELECT min(x), percentile_cont(0.5) WITHIN GROUP (ORDER BY x), percentile_cont(0.9) WITHIN GROUP (ORDER BY x)
      INTO min_ms, median_ms, p90_ms FROM unnest(ms) AS x;
END
$$;

-- The latency probe: for 'seconds', cast a 256-byte payload to owner
-- 'probe' every few ms while the load runs. mode 'await': cast, then
-- await_durable, and record clock_timestamp() before the cast and after the
-- await. mode 'ff': cast only, record the time and the receipt (resolved
-- after the run to the cycle's sealed_at, without waking the worker).
CREATE TABLE cycles.probe (
    mode  text NOT NULL,
    t0    timestamptz NOT NULL,
    t1    timestamptz,
    r     lake.receipt NOT NULL
);
CREATE FUNCTION cycles.probe(mode text, seconds float8) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    stop timestamptz := clock_timestamp() + seconds * interval '1 second';
    t0 timestamptz;
    rc lake.receipt;
    n int := 0;
BEGIN
    WHILE clock_timestamp() < stop LOOP
        n := n + 1;
        t0 := clock_timestamp();
        rc := lake.cast('probe', NULL, NULL, cycles.payload('probe-' || mode || n));
        IF mode = 'await' THEN
            PERFORM lake.await_durable(rc);
            INSERT INTO cycles.probe VALUES (mode, t0, clock_timestamp(), rc);
        ELSE
            INSERT INTO cycles.probe VALUES (mode, t0, NULL, rc);
        END IF;
        PERFORM pg_sleep(0.002 + random() * 0.003);
    END LOOP;
    RETURN n;
END
$$;
