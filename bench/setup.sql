-- bench/setup.sql — schema for bench/run.sh: baselines (plain SQL doing the
-- same job as lake) and payload generators. Loaded once into the throwaway
-- benchmark cluster, after CREATE EXTENSION lake.
\set ON_ERROR_STOP on
SET client_min_messages = warning;

CREATE SCHEMA bench;

-- A 256-byte JSON line, deterministic in the operation id. md5/hashtext
-- give it realistic entropy. STABLE (format and convert_to are), so the
-- planner inlines it into the calling statement: no SQL-function call per
-- row, the same cost on both sides of a comparison.
CREATE FUNCTION bench.payload256(op text) RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT pg_catalog.convert_to(
    pg_catalog.rpad(pg_catalog.format(
      '{"op":"%s","tenant":"t1","event":"order.updated","order":%s,"status":"shipped","carrier":"dhl","items":[{"sku":"SKU-%s","qty":%s}],"trace":"%s","note":"',
      op, abs(hashtext(op)) % 1000000, abs(hashtext(op || 's')) % 10000,
      abs(hashtext(op || 'q')) % 9 + 1, md5(op)), 254, md5(op || 'n')) || '"}',
    'UTF8')
$$;

-- The replay payload of measurement 3, as a constant: an IMMUTABLE SQL
-- function returning a literal is inlined and folded at plan time, so the
-- replay statement carries the 256 bytes as a prepared constant.
DO $$
BEGIN
    EXECUTE format('CREATE FUNCTION bench.replay_payload() RETURNS bytea '
                   'LANGUAGE sql IMMUTABLE PARALLEL SAFE AS %L',
                   format('SELECT %L::bytea', bench.payload256('replay')));
END
$$;

SET search_path = bench;
\ir jsonl.sql
RESET search_path;

-- Pool of 64 kB JSON-lines documents; each WAL-test append prefixes a line
-- naming its operation, so no two payloads are identical.
CREATE TABLE bench.doc (id int PRIMARY KEY, body bytea NOT NULL);
INSERT INTO bench.doc
  SELECT s, convert_to(bench.jsonl(s, 65536), 'UTF8') FROM generate_series(0, 19) AS s;

-- Measurement 1 and 4 baseline: the plain table an application would use,
-- a unique index on (tenant, operation_id) giving idempotency.
CREATE TABLE bench.plain (
    tenant       text  NOT NULL,
    operation_id text  NOT NULL,
    payload      bytea NOT NULL,
    UNIQUE (tenant, operation_id)
);
CREATE TABLE bench.plain_replay (LIKE bench.plain INCLUDING ALL);
-- Measurement 4: like lake_data.version, ONE table takes the 256-byte and then
-- the 64 kB batch (and the same 2000 seed rows first, see run.sh), so
-- both sides fill and reuse pages the same way.
CREATE TABLE bench.wal (LIKE bench.plain INCLUDING ALL);
CREATE TABLE bench.wal_oc (LIKE bench.plain INCLUDING ALL);

-- Measurement 2 baseline: what a user writes to get lake.append's
-- guarantees in plain SQL — gap-free per-dataset versions in commit order
-- (a counter row locked by UPDATE ... RETURNING until commit), idempotency
-- on (dataset, tenant, operation_id), SHA-256 replay check, no
-- unique_violation leaking to concurrent retries.
CREATE TABLE bench.ds_head (
    name text PRIMARY KEY,
    head bigint NOT NULL DEFAULT 0
);
CREATE TABLE bench.ds_version (
    dataset      text        NOT NULL,
    version      bigint      NOT NULL,
    tenant       text        NOT NULL,
    operation_id text        NOT NULL,
    digest       bytea       NOT NULL,
    payload      bytea       NOT NULL,
    committed_at timestamptz NOT NULL,
    PRIMARY KEY (dataset, version),
    UNIQUE (dataset, tenant, operation_id)
);

CREATE FUNCTION bench.plain_append(p_dataset text, p_tenant text, p_op text, p_payload bytea)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    d     bytea := sha256(p_payload);
    v     bigint;
    old_d bytea;
BEGIN
    -- Replay: answered without any lock.
    SELECT x.version, x.digest INTO v, old_d FROM bench.ds_version x
     WHERE x.dataset = p_dataset AND x.tenant = p_tenant AND x.operation_id = p_op;
    IF FOUND THEN
        IF old_d <> d THEN
            RAISE EXCEPTION USING ERRCODE = 'LK001', MESSAGE = 'operation already committed with different content';
        END IF;
        RETURN v;
    END IF;
    -- Serialize appends to the dataset: the counter row stays locked to commit.
    UPDATE bench.ds_head h SET head = h.head + 1 WHERE h.name = p_dataset RETURNING h.head INTO v;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format('dataset %s does not exist', p_dataset);
    END IF;
    INSERT INTO bench.ds_version VALUES (p_dataset, v, p_tenant, p_op, d, p_payload, clock_timestamp())
        ON CONFLICT (dataset, tenant, operation_id) DO NOTHING;
    IF FOUND THEN
        RETURN v;
    END IF;
    -- A contender committed this operation while we waited for the counter:
    -- give the version number back (we still hold the row) and answer as a replay.
    UPDATE bench.ds_head h SET head = h.head - 1 WHERE h.name = p_dataset;
    SELECT x.version, x.digest INTO v, old_d FROM bench.ds_version x
     WHERE x.dataset = p_dataset AND x.tenant = p_tenant AND x.operation_id = p_op;
    IF old_d <> d THEN
        RAISE EXCEPTION USING ERRCODE = 'LK001', MESSAGE = 'operation already committed with different content';
    END IF;
    RETURN v;
END
$$;

INSERT INTO bench.ds_head (name) VALUES ('one');

-- lake datasets: one per client for measurement 1 (up to 32 clients), one
-- shared for measurement 2, the replay set and the WAL sets.
SELECT lake.create_dataset('ds' || i) FROM generate_series(0, 31) AS i;
SELECT lake.create_dataset(n) FROM unnest(ARRAY['one', 'replay', 'wal_256', 'wal_64k', 'wal_256_dict']) AS n;
