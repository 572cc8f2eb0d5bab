-- bench/staged_setup.sql — schema for bench/staged.sh: the payload sources
-- and the plain-table baseline. Loaded once into the throwaway cluster,
-- after CREATE EXTENSION lake.
\set ON_ERROR_STOP on
SET client_min_messages = warning;

CREATE SCHEMA staged;

-- About 'target' bytes of realistic JSON lines (application log events):
-- repeated keys, enumerated values, timestamps, random trace ids. The same
-- generator as bench/setup.sql's bench.jsonl.
CREATE FUNCTION staged.jsonl(seed int, target int) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT left(string_agg(format(
    '{"ts":"%s","level":"%s","service":"%s","trace_id":"%s","user_id":%s,"path":"/api/v1/orders/%s","status":%s,"latency_ms":%s,"msg":"%s"}',
    to_char(timestamp '2024-05-01' + (seed * 100000 + i) * interval '37 ms',
            'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    (ARRAY['info','info','info','warn','error','debug'])[1 + abs(hashint4(seed * 7919 + i)) % 6],
    (ARRAY['checkout','orders','inventory','billing','auth'])[1 + abs(hashint4(seed * 31 + i)) % 5],
    substr(md5((seed * 1000003 + i)::text), 1, 16),
    abs(hashint4(i * 13 + seed)) % 100000,
    abs(hashint4(i * 17 + seed)) % 1000000,
    (ARRAY[200,200,200,201,204,400,404,500])[1 + abs(hashint4(i * 19 + seed)) % 8],
    abs(hashint4(i * 23 + seed)) % 2000,
    (ARRAY['order created','payment authorized','item reserved','cache miss',
           'retrying upstream call','request completed'])[1 + abs(hashint4(i * 29 + seed)) % 6]),
    E'\n'), target - 1) || E'\n'
  FROM generate_series(1, target / 150) AS i
$$;

-- The payload sources: one 4 MB value per kind, stored uncompressed
-- (EXTERNAL), so substring() fetches only the TOAST chunks of its slice.
-- Chunk k of a staged payload is the 1 MB window at offset k * 4099 (mod
-- the room left): every chunk differs, every chunk is a realistic piece of
-- its kind, and lake and the baseline run the very same expression (a
-- scalar subquery in bench/staged_lake_chunk.sql and staged_plain_chunk.sql;
-- not an SQL function, whose result would be copied through a tuplestore).
--   kind 1: JSON lines (compressible)   kind 2: random bytes (md5 stream)
CREATE TABLE staged.seed (kind int PRIMARY KEY, data bytea NOT NULL);
ALTER TABLE staged.seed ALTER COLUMN data SET STORAGE EXTERNAL;
INSERT INTO staged.seed
  SELECT 1, convert_to(string_agg(staged.jsonl(s, 1048576), '' ORDER BY s), 'UTF8')
    FROM generate_series(1, 4) AS s;
INSERT INTO staged.seed
  SELECT 2, decode(string_agg(md5(g || 'r'), '' ORDER BY g), 'hex')
    FROM generate_series(1, 262144) AS g;

-- The baseline: what an application does without lake — each chunk one
-- bytea row (default storage: TOAST with pglz), keyed by upload and number.
CREATE TABLE staged.plain_chunk (
    upload    text  NOT NULL,
    chunk_no  int   NOT NULL,
    data      bytea NOT NULL,
    PRIMARY KEY (upload, chunk_no)
);

SELECT lake.create_dataset('staged');
SELECT lake.create_dataset('staged_mem');
SELECT lake.create_dataset('staged_ratio');
