-- bench/staged_setup.sql — schema for bench/staged.sh: the payload sources
-- and the plain-table baseline. Loaded once into the throwaway cluster,
-- after CREATE EXTENSION lake.
\set ON_ERROR_STOP on
SET client_min_messages = warning;

CREATE SCHEMA staged;

SET search_path = staged;
\ir jsonl.sql
RESET search_path;

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
