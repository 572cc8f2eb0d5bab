-- Admission: one permit per backend, grown as needed, released at
-- transaction end however it ends (or with the subtransaction that took it).
SELECT slots_in_use, bytes_reserved, max_concurrent, max_stream_bytes, max_buffered_bytes
FROM lake.admission();
CREATE TEMP TABLE before AS SELECT * FROM lake.admission();

BEGIN;
SELECT lake.append('events', 'acme', 'adm-1', decode(repeat('00', 1000), 'hex')) AS v;
SELECT slots_in_use, bytes_reserved FROM lake.admission();
-- A larger payload grows the reservation; the slot is reused.
SELECT lake.append('events', 'acme', 'adm-2', decode(repeat('00', 5000), 'hex')) AS v;
SELECT slots_in_use, bytes_reserved FROM lake.admission();
-- A smaller one fits in what is held.
SELECT lake.append('events', 'acme', 'adm-3', decode(repeat('00', 10), 'hex')) AS v;
SELECT slots_in_use, bytes_reserved FROM lake.admission();
COMMIT;
SELECT slots_in_use, bytes_reserved FROM lake.admission();
SELECT a.admitted - b.admitted AS admitted_since FROM lake.admission() a, before b;

-- Rollback releases.
BEGIN;
SELECT lake.append('events', 'acme', 'adm-4', '\x01'::bytea) AS v;
ROLLBACK;
SELECT slots_in_use, bytes_reserved FROM lake.admission();

-- An error releases at the end of the failed transaction.
BEGIN;
SELECT lake.append('events', 'acme', 'adm-5', '\x01'::bytea) AS v;
SELECT lake.append('events', 'acme', 'adm-5', '\x02'::bytea) AS conflict;
\echo :SQLSTATE
ROLLBACK;
SELECT slots_in_use, bytes_reserved FROM lake.admission();

-- A subtransaction's error does not release the top transaction's permit:
-- it is released exactly once, at the top-level end.
BEGIN;
SELECT lake.append('events', 'acme', 'adm-6', '\x01'::bytea) AS v;
SAVEPOINT s;
SELECT lake.append('events', 'acme', 'adm-6', '\x02'::bytea) AS conflict;
\echo :SQLSTATE
ROLLBACK TO SAVEPOINT s;
SELECT slots_in_use, bytes_reserved FROM lake.admission();
COMMIT;
SELECT slots_in_use, bytes_reserved FROM lake.admission();

-- A permit taken inside a subtransaction belongs to it: the error that
-- aborts it (caught, or rolled back to a savepoint) releases the permit
-- at once, and the transaction goes on holding nothing.
BEGIN;
SAVEPOINT s;
SELECT lake.append('events', 'acme', 'adm-6b', '\x02'::bytea, sha256('\x03')) AS mismatch;
\echo :SQLSTATE
ROLLBACK TO SAVEPOINT s;
SELECT slots_in_use, bytes_reserved FROM lake.admission();
SELECT t.err($$SELECT lake.append('events', 'acme', 'adm-6c', '\x02'::bytea, sha256('\x03'))$$);
SELECT slots_in_use, bytes_reserved FROM lake.admission();
-- A released savepoint hands its permit to the transaction.
SAVEPOINT s2;
SELECT lake.append('events', 'acme', 'adm-6d', '\x04'::bytea) AS v;
RELEASE SAVEPOINT s2;
SAVEPOINT s3;
ROLLBACK TO SAVEPOINT s3;
SELECT slots_in_use, bytes_reserved FROM lake.admission();
COMMIT;
SELECT slots_in_use, bytes_reserved FROM lake.admission();

-- Bytes a subtransaction added to the transaction's permit go back with
-- it when it aborts (nested: to what each level held), and stay with the
-- permit when it is released.
BEGIN;
SELECT lake.append('events', 'acme', 'adm-6e', '\x01'::bytea) AS v;
SAVEPOINT g1;
SELECT lake.append('events', 'acme', 'adm-6f', decode(repeat('00', 2000), 'hex')) AS v;
SAVEPOINT g2;
SELECT t.err($$SELECT lake.append('events', 'acme', 'adm-6g', decode(repeat('00', 6000), 'hex'), sha256('\x03'))$$);
SELECT slots_in_use, bytes_reserved FROM lake.admission();
ROLLBACK TO SAVEPOINT g2;
SELECT slots_in_use, bytes_reserved FROM lake.admission();
ROLLBACK TO SAVEPOINT g1;
SELECT slots_in_use, bytes_reserved FROM lake.admission();
SAVEPOINT g3;
SELECT lake.append('events', 'acme', 'adm-6h', decode(repeat('00', 3000), 'hex')) AS v;
RELEASE SAVEPOINT g3;
SAVEPOINT g4;
ROLLBACK TO SAVEPOINT g4;
SELECT slots_in_use, bytes_reserved FROM lake.admission();
COMMIT;
SELECT slots_in_use, bytes_reserved FROM lake.admission();

-- statement_timeout and a refused stream also leave nothing held.
SELECT t.err($$SELECT lake.append('events', 'acme', 'adm-7', decode(repeat('00', 3 * 1024 * 1024 + 1), 'hex'))$$);
SELECT slots_in_use, bytes_reserved FROM lake.admission();
SET statement_timeout = '100ms';
SELECT lake.append('events', 'acme', 'adm-8', '\x01'::bytea), pg_sleep(5);
\echo :SQLSTATE
RESET statement_timeout;
SELECT slots_in_use, bytes_reserved FROM lake.admission();
SELECT count(*) AS adm_8_versions FROM lake.versions('events') WHERE operation_id = 'adm-8';

-- Nothing was waited for in a single session; the stream over
-- lake.max_stream_bytes (54000) was refused, and counts so.
SELECT a.waited - b.waited AS waited, a.rejected - b.rejected AS rejected
FROM lake.admission() a, before b;

-- A stage's own refusals count as admission's too: a chunk that would take
-- the stage past lake.max_stream_bytes (54000).
CREATE TEMP TABLE before_stage AS SELECT * FROM lake.admission();
SELECT lake.begin_append('events', 'acme', 'adm-st') AS st \gset
SELECT lake.append_chunk(:st, 0, decode(repeat('00', 2 * 1024 * 1024), 'hex'));
SELECT left(t.err(format('SELECT lake.append_chunk(%s, 1, decode(repeat(''00'', 2 * 1024 * 1024), ''hex''))', :st)), 5) AS over_the_stream;
SELECT a.rejected - b.rejected AS rejected FROM lake.admission() a, before_stage b;
SELECT lake.abort_append(:st);
