-- A schema "lake" made beforehand by a role that is not the installer is
-- refused: its creator would own lake's namespace. Nothing is installed.
CREATE ROLE lake_squatter;
GRANT CREATE ON DATABASE contrib_regression TO lake_squatter;
SET ROLE lake_squatter;
CREATE SCHEMA lake;
RESET ROLE;
\set VERBOSITY sqlstate
CREATE EXTENSION lake;
\set VERBOSITY default
CREATE EXTENSION lake;
SELECT count(*) AS installed FROM pg_extension WHERE extname = 'lake';
SELECT count(*) AS lake_data_schemas FROM pg_namespace WHERE nspname = 'lake_data';
DROP SCHEMA lake;
REVOKE CREATE ON DATABASE contrib_regression FROM lake_squatter;
DROP ROLE lake_squatter;

-- The installer's own schema "lake" is refused while it lets another role
-- create in it (a function planted later would shadow one of lake's).
CREATE ROLE lake_squatter;
CREATE SCHEMA lake;
GRANT CREATE ON SCHEMA lake TO lake_squatter;
\set VERBOSITY sqlstate
CREATE EXTENSION lake;
\set VERBOSITY default
CREATE EXTENSION lake;
GRANT CREATE ON SCHEMA lake TO PUBLIC;
CREATE EXTENSION lake;
-- USAGE alone is no threat: once CREATE is revoked it installs.
REVOKE CREATE ON SCHEMA lake FROM lake_squatter, PUBLIC;
GRANT USAGE ON SCHEMA lake TO lake_squatter;
CREATE EXTENSION lake;
SELECT count(*) AS installed FROM pg_extension WHERE extname = 'lake';
DROP EXTENSION lake;
DROP SCHEMA lake;
DROP ROLE lake_squatter;

-- A schema "lake_data" made beforehand is refused too (CREATE SCHEMA fails).
CREATE SCHEMA lake_data;
\set VERBOSITY sqlstate
CREATE EXTENSION lake;
\set VERBOSITY default
DROP SCHEMA lake_data;

-- The extension installs in the database the worker serves, and only there.
-- Its tables are heaps whatever the installer's default table access
-- method: lake writes and reads heap tuples itself.
CREATE ACCESS METHOD lake_other_am TYPE TABLE HANDLER heap_tableam_handler;
SET default_table_access_method = lake_other_am;
CREATE EXTENSION lake;
RESET default_table_access_method;
DROP ACCESS METHOD lake_other_am;
SELECT count(*) AS tables, count(*) FILTER (WHERE c.relam = (SELECT oid FROM pg_am WHERE amname = 'heap')) AS heaps
  FROM pg_class c WHERE c.relnamespace = 'lake_data'::regnamespace AND c.relkind = 'r';
SELECT extversion FROM pg_extension WHERE extname = 'lake';
-- The shape of lake_data's tables at this version: columns and indexes as
-- a library checks them. A change to it is a new extension version with its
-- update script (README, "Replacing the library"), never a new digest here.
SELECT md5(string_agg(x, ';' ORDER BY x COLLATE "C")) AS shape_of_0_1_0 FROM (
  SELECT c.relname || '.' || a.attnum || ':' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) AS x
    FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
   WHERE c.relnamespace = 'lake_data'::regnamespace AND c.relkind = 'r'
     AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT pg_get_indexdef(i.indexrelid)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
   WHERE c.relnamespace = 'lake_data'::regnamespace) s;

-- t.err(sql): run a statement and show its SQLSTATE and message, so every
-- refusal in these tests is asserted by its exact code.
CREATE SCHEMA t;
CREATE FUNCTION t.err(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    detail text;
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
    RETURN SQLSTATE || ': ' || SQLERRM || coalesce(nullif(' [' || detail || ']', ' []'), '');
END $$;

-- t.err_after(ddl, sql): t.err(sql) run after ddl (a table altered, a
-- trigger attached), both rolled back.
CREATE FUNCTION t.err_after(ddl text, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    outcome text;
BEGIN
    EXECUTE ddl;
    outcome := t.err(q);
    RAISE EXCEPTION USING ERRCODE = 'T0001', MESSAGE = outcome;
EXCEPTION WHEN SQLSTATE 'T0001' THEN
    RETURN SQLERRM;
END $$;

-- t.raw_chunk(raw): raw bytes as lake stores them uncompressed (codec.h):
-- tag 'R', the CRC-32C of the bytes (little-endian), the bytes. Computed
-- here bit by bit, independently of the server's CRC, so tests can build
-- well-formed records with any content.
CREATE FUNCTION t.raw_chunk(raw bytea) RETURNS bytea LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    crc bigint := 4294967295;
BEGIN
    FOR i IN 0 .. length(raw) - 1 LOOP
        crc := crc # get_byte(raw, i);
        FOR k IN 1 .. 8 LOOP
            crc := CASE WHEN crc & 1 = 1 THEN (crc >> 1) # 2197175160 ELSE crc >> 1 END;
        END LOOP;
    END LOOP;
    crc := crc # 4294967295;
    RETURN '\x52'::bytea || decode(lpad(to_hex(crc & 255), 2, '0') || lpad(to_hex((crc >> 8) & 255), 2, '0')
                                  || lpad(to_hex((crc >> 16) & 255), 2, '0') || lpad(to_hex(crc >> 24), 2, '0'), 'hex')
           || raw;
END $$;

-- t.bare_chunk(raw): the same as earlier builds stored a version's chunk 0
-- in its row (codec.h), bare: tag 'r' and the bytes, no checksum (the
-- version's digest is its checksum); lake still reads such rows.
CREATE FUNCTION t.bare_chunk(raw bytea) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
    SELECT '\x72'::bytea || raw
$$;

-- No function carries a SET clause: the store fixes search_path around the
-- SQL it runs (store.c; search_path.sql plants a hostile one).
SELECT p.proname, p.proconfig
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = 'lake' ORDER BY p.proname;

-- The tables are closed to PUBLIC: data is reached through the functions.
SELECT c.relname, c.relacl IS NOT NULL AND NOT EXISTS (
         SELECT 1 FROM aclexplode(c.relacl) a WHERE a.grantee = 0) AS closed_to_public
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'lake_data' AND c.relkind = 'r' ORDER BY c.relname;

-- Another database is not served by the worker: CREATE EXTENSION is refused.
CREATE DATABASE lake_elsewhere;
\c lake_elsewhere
\set VERBOSITY sqlstate
CREATE EXTENSION lake;
\set VERBOSITY default
CREATE EXTENSION lake;
SELECT count(*) AS lake_schemas FROM pg_namespace WHERE nspname = 'lake';
-- The install script runs PL/pgSQL: without it, the requirement is named
-- (42704, CASCADE hinted) before any of the script runs.
DROP EXTENSION plpgsql;
\set VERBOSITY sqlstate
CREATE EXTENSION lake;
\set VERBOSITY default
CREATE EXTENSION lake;
SELECT e.requires FROM pg_available_extension_versions e WHERE e.name = 'lake';
\c contrib_regression
DROP DATABASE lake_elsewhere;

-- The library and the SQL declarations come from one build: a declaration
-- of another width than the library fills (a library installed without its
-- script, or the reverse) is refused (55000), never read or written past.
CREATE FUNCTION t.narrow_stats(OUT database text, OUT pid int) AS '$libdir/lake', 'lake_stats' LANGUAGE C;
CREATE FUNCTION t.wide_admission(OUT a int, OUT b bigint, OUT c int, OUT d bigint, OUT e bigint,
                                 OUT f bigint, OUT g bigint, OUT h bigint, OUT i bigint)
    AS '$libdir/lake', 'lake_admission' LANGUAGE C;
CREATE FUNCTION t.narrow_log(after_cycle bigint, OUT cycle bigint, OUT owner text) RETURNS SETOF record
    AS '$libdir/lake', 'lake_log' LANGUAGE C;
CREATE FUNCTION t.wide_versions(dataset text, after_version bigint,
                                OUT a bigint, OUT b text, OUT c text, OUT d bytea, OUT e bigint,
                                OUT f bigint, OUT g timestamptz, OUT h int)
    RETURNS SETOF record AS '$libdir/lake', 'lake_versions' LANGUAGE C;
SELECT lake.create_dataset('widths');
SELECT t.err($$SELECT * FROM t.narrow_stats()$$);
SELECT t.err($$SELECT * FROM t.wide_admission()$$);
SELECT t.err($$SELECT * FROM t.narrow_log(0)$$);
SELECT t.err($$SELECT * FROM t.wide_versions('widths', 0)$$);
DROP FUNCTION t.narrow_stats(), t.wide_admission(), t.narrow_log(bigint),
    t.wide_versions(text, bigint);
