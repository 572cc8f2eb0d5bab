-- Parameters (SPEC §2): values in force and refusals by the GUC machinery.
SELECT name, setting, unit, context FROM pg_settings WHERE name LIKE 'lake.%' ORDER BY name;

-- compression_level is a user setting, 1..19.
SET lake.compression_level = 19;
SHOW lake.compression_level;
SELECT lake.append('events', 'acme', 'level-19', convert_to(repeat('level nineteen ', 100), 'UTF8')) > 0 AS ok;
RESET lake.compression_level;
-- The level is the one compressing: the same document takes fewer bytes
-- at 19 than at 1.
CREATE TEMP TABLE doc AS SELECT convert_to(string_agg(format('{"id": %s, "name": "user%s", "tag": "%s"}',
    i, i % 97, md5((i % 13)::text)), E'\n'), 'UTF8') AS d FROM generate_series(1, 3000) i;
SET lake.compression_level = 1;
SELECT lake.append('events', 'acme', 'level-1', d) AS v1 FROM doc \gset
SET lake.compression_level = 19;
SELECT lake.append('events', 'acme', 'level-19b', d) AS v19 FROM doc \gset
RESET lake.compression_level;
SELECT (SELECT stored_bytes FROM lake.versions('events') WHERE version = :v19) <
       (SELECT stored_bytes FROM lake.versions('events') WHERE version = :v1) AS level_19_smaller,
       lake.read('events', :v19) = (SELECT d FROM doc) AS reads_back;
SELECT t.err($$SET lake.compression_level = 0$$);
SELECT t.err($$SET lake.compression_level = 20$$);
SELECT t.err($$SET lake.compression_level = -1$$);
SELECT t.err($$SET lake.compression_level = 'fast'$$);
-- A fraction is refused, not rounded (SPEC §2), by SET as by every other
-- way of setting an integer parameter; an integer in another notation is not.
SELECT t.err($$SET lake.compression_level = 2.5$$);
SELECT t.err($$SET lake.compression_level = '1.5'$$);
SELECT t.err($$SET lake.compression_level = 0.9$$);
SET lake.compression_level = '4e0';
SHOW lake.compression_level;
RESET lake.compression_level;
SELECT t.err($$ALTER ROLE CURRENT_USER SET lake.role_max_appends = 2.5$$);
-- lake.role_max_hold is a time (ms by default), 0 for none, never negative.
SELECT t.err($$SET lake.role_max_hold = -1$$);
SELECT t.err($$SET lake.role_max_hold = '1.5ms'$$);
SET lake.role_max_hold = '2min';
SHOW lake.role_max_hold;
RESET lake.role_max_hold;

-- Server-wide settings cannot be changed in a session.
SELECT t.err($$SET lake.max_concurrent_appends = 2$$);
SELECT t.err($$SET lake.database = 'other'$$);

-- ALTER SYSTEM validates before anything is written: zero, negative,
-- non-numeric, fractional and out-of-range values are refused.
ALTER SYSTEM SET lake.max_concurrent_appends = 0;
\echo :SQLSTATE
ALTER SYSTEM SET lake.max_concurrent_appends = -3;
\echo :SQLSTATE
ALTER SYSTEM SET lake.max_concurrent_appends = 'eight';
\echo :SQLSTATE
ALTER SYSTEM SET lake.admission_queue_wait = 0;
\echo :SQLSTATE
ALTER SYSTEM SET lake.admission_queue_wait = '-5ms';
\echo :SQLSTATE
ALTER SYSTEM SET lake.max_stream_bytes = 0;
\echo :SQLSTATE
ALTER SYSTEM SET lake.max_stream_bytes = '4GB';
\echo :SQLSTATE
ALTER SYSTEM SET lake.max_buffered_bytes = -1;
\echo :SQLSTATE
ALTER SYSTEM SET lake.max_buffered_bytes = 'lots';
\echo :SQLSTATE
ALTER SYSTEM SET lake.no_such_setting = 1;
\echo :SQLSTATE
ALTER SYSTEM SET lake.max_concurrent_appends = 1.5;
\echo :SQLSTATE
ALTER SYSTEM SET lake.admission_queue_wait = '0.5ms';
\echo :SQLSTATE
ALTER SYSTEM SET lake.stage_ttl = '1500ms';
\echo :SQLSTATE
ALTER SYSTEM SET lake.max_stream_bytes = '1.5B';
\echo :SQLSTATE
-- A partition of a PL/Proxy cluster (SPEC §7): lake.partitions is a power
-- of two from 1 to 1024, lake.partition from 0 to 1023; both fixed at start.
ALTER SYSTEM SET lake.partitions = 3;
\echo :SQLSTATE
ALTER SYSTEM SET lake.partitions = 0;
\echo :SQLSTATE
ALTER SYSTEM SET lake.partitions = 2048;
\echo :SQLSTATE
ALTER SYSTEM SET lake.partitions = 2.5;
\echo :SQLSTATE
ALTER SYSTEM SET lake.partition = -1;
\echo :SQLSTATE
ALTER SYSTEM SET lake.partition = 1024;
\echo :SQLSTATE
ALTER SYSTEM SET lake.partition = 'first';
\echo :SQLSTATE
SELECT t.err($$SET lake.partitions = 4$$);
SELECT t.err($$SET lake.partition = 1$$);
-- Nothing was written to postgresql.auto.conf.
SELECT count(*) AS lake_auto_settings FROM pg_file_settings
WHERE name LIKE 'lake.%' AND sourcefile LIKE '%postgresql.auto.conf';
ALTER SYSTEM SET lake.stage_ttl = 0;
\echo :SQLSTATE
ALTER SYSTEM SET lake.stage_ttl = '-1h';
\echo :SQLSTATE

-- A fractional amount of a larger unit is accepted when it is a whole
-- number of the parameter's base unit: 1.5MB is 1572864 bytes.
ALTER SYSTEM SET lake.max_stream_bytes = '1.5MB';
\echo :SQLSTATE
ALTER SYSTEM RESET lake.max_stream_bytes;
