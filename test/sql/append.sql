-- Idempotent single-shot appends (SPEC §3).
SELECT lake.create_dataset('orders');
SELECT lake.create_dataset('events');

-- create_dataset refusals: duplicate, NULL, empty, too long.
SELECT t.err($$SELECT lake.create_dataset('orders')$$);
SELECT t.err($$SELECT lake.create_dataset(NULL)$$);
SELECT t.err($$SELECT lake.create_dataset('')$$);
SELECT t.err(format('SELECT lake.create_dataset(%L)', repeat('n', 10240)));
SELECT t.err(format('SELECT lake.create_dataset(%L)', repeat('n', 257)));
SELECT lake.create_dataset(repeat('n', 256));
SELECT count(*) AS longest_name_ok FROM lake_data.dataset WHERE length(name) = 256;

-- A first append makes version 1; versions are per dataset and gap-free.
SELECT lake.append('orders', 'acme', 'op-1', '\x01'::bytea) AS v;
SELECT lake.append('orders', 'acme', 'op-2', '\x02'::bytea) AS v;
SELECT lake.append('events', 'acme', 'op-1', '\x01'::bytea) AS v;

-- A replay returns the original version and writes nothing.
SELECT lake.append('orders', 'acme', 'op-1', '\x01'::bytea) AS replay;
SELECT lake.append('orders', 'acme', 'op-1', '\x01'::bytea,
                   sha256('\x01'::bytea)) AS replay_with_digest;
SELECT count(*) AS versions FROM lake.versions('orders');

-- The same operation id under another tenant is another operation.
SELECT lake.append('orders', 'globex', 'op-1', '\x01'::bytea) AS other_tenant;

-- Different content under the same operation id: LK001, nothing written.
SELECT t.err($$SELECT lake.append('orders', 'acme', 'op-1', '\x02'::bytea)$$);
SELECT t.err($$SELECT lake.append('orders', 'acme', 'op-1', '\x02'::bytea, sha256('\x02'::bytea))$$);
SELECT count(*) AS versions FROM lake.versions('orders');

-- A supplied digest must match the payload (22000) and be 32 bytes (22023).
SELECT t.err($$SELECT lake.append('orders', 'acme', 'op-3', '\x03'::bytea, sha256('\x04'::bytea))$$);
-- All 32 bytes are compared: a digest wrong in its last bit only is 22000.
SELECT t.err($$SELECT lake.append('orders', 'acme', 'op-3', '\x03'::bytea,
                 set_byte(sha256('\x03'::bytea), 31, get_byte(sha256('\x03'::bytea), 31) # 1))$$);
SELECT t.err($$SELECT lake.append('orders', 'acme', 'op-3', '\x03'::bytea, ''::bytea)$$);
SELECT t.err($$SELECT lake.append('orders', 'acme', 'op-3', '\x03'::bytea, substr(sha256('\x03'::bytea), 1, 31))$$);
SELECT t.err($$SELECT lake.append('orders', 'acme', 'op-3', '\x03'::bytea, sha256('\x03'::bytea) || '\x00'::bytea)$$);
SELECT lake.append('orders', 'acme', 'op-3', '\x03'::bytea, sha256('\x03'::bytea)) AS v;

-- NULL in every argument that must not be NULL: 22004.
SELECT t.err($$SELECT lake.append(NULL, 'acme', 'op-x', '\x00'::bytea)$$);
SELECT t.err($$SELECT lake.append('orders', NULL, 'op-x', '\x00'::bytea)$$);
SELECT t.err($$SELECT lake.append('orders', 'acme', NULL, '\x00'::bytea)$$);
SELECT t.err($$SELECT lake.append('orders', 'acme', 'op-x', NULL)$$);

-- Empty and oversized names: 22023.
SELECT t.err($$SELECT lake.append('', 'acme', 'op-x', '\x00'::bytea)$$);
SELECT t.err($$SELECT lake.append('orders', '', 'op-x', '\x00'::bytea)$$);
SELECT t.err($$SELECT lake.append('orders', 'acme', '', '\x00'::bytea)$$);
SELECT t.err(format('SELECT lake.append(%L, %L, %L, %L::bytea)', repeat('d', 10240), 'acme', 'op-x', '\x00'));
SELECT t.err(format('SELECT lake.append(%L, %L, %L, %L::bytea)', 'orders', repeat('t', 10240), 'op-x', '\x00'));
SELECT t.err(format('SELECT lake.append(%L, %L, %L, %L::bytea)', 'orders', 'acme', repeat('o', 10240), '\x00'));

-- Unknown dataset: 42704.
SELECT t.err($$SELECT lake.append('nope', 'acme', 'op-x', '\x00'::bytea)$$);

-- Nothing above left a version behind.
SELECT version, tenant, operation_id, bytes FROM lake.versions('orders');

-- An empty payload is a valid payload.
SELECT lake.append('orders', 'acme', 'empty', ''::bytea) AS v;
SELECT lake.read('orders', 5) = ''::bytea AS empty_reads_back;

-- lake.max_stream_bytes is 3MB here: exactly at the limit is fine (three
-- chunks), one byte over is 54000 and leaves the dataset as it was.
SELECT lake.append('orders', 'acme', 'at-limit', decode(repeat('ab', 3 * 1024 * 1024), 'hex')) AS v;
SELECT t.err($$SELECT lake.append('orders', 'acme', 'over-limit', decode(repeat('ab', 3 * 1024 * 1024 + 1), 'hex'))$$);
SELECT max(version) AS head FROM lake.versions('orders');
SELECT length(lake.read('orders', 6)) AS at_limit_bytes,
       lake.read('orders', 6) = decode(repeat('ab', 3 * 1024 * 1024), 'hex') AS at_limit_intact;

-- Payloads are compressed when that helps and stored raw (behind the
-- five-byte header) when it does not.
SELECT lake.append('events', 'acme', 'json',
         convert_to(string_agg(format('{"id": %s, "kind": "click", "page": "/home"}', i), E'\n'), 'UTF8')) AS v
FROM generate_series(1, 2000) i;
SELECT lake.append('events', 'acme', 'random',
         (SELECT string_agg(decode(md5(i::text), 'hex'), ''::bytea) FROM generate_series(1, 1000) i)) AS v;
SELECT operation_id, bytes, stored_bytes < bytes / 5 AS compressed_5x, stored_bytes - bytes AS growth
FROM lake.versions('events') WHERE operation_id IN ('json', 'random') ORDER BY version;

-- Under REPEATABLE READ a lone append behaves the same.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT lake.append('events', 'acme', 'rr', '\x0a'::bytea) AS v;
SELECT lake.append('events', 'acme', 'rr', '\x0a'::bytea) AS replay;
COMMIT;

-- Several appends in one transaction get consecutive versions; an abort
-- leaves no gap behind.
BEGIN;
SELECT lake.append('events', 'acme', 'tx-a', '\x0b'::bytea) AS v;
SELECT lake.append('events', 'acme', 'tx-b', '\x0c'::bytea) AS v;
ROLLBACK;
SELECT lake.append('events', 'acme', 'tx-c', '\x0d'::bytea) AS v;
SELECT count(*) AS versions, bool_and(version = n) AS gap_free
FROM (SELECT version, row_number() OVER (ORDER BY version) AS n FROM lake.versions('events')) s;

-- Operations are found by a 32-bit hash of their tenant and operation id
-- (store_version.c), told apart by the row's own ids: two operations whose
-- hashes are equal are two operations, each with its own version, replay,
-- content check and read. (These ids collide under PostgreSQL's hash_bytes
-- on a little-endian machine; same_hash says whether they still do.)
SELECT lake.create_dataset('collide');
SELECT lake.create_dataset('collide_one');
SELECT lake_data.operation_hash('acme', 'op-11777') = lake_data.operation_hash('acme', 'op-78570') AS same_hash,
       lake_data.operation_hash('acme', 'op-178797') = lake_data.operation_hash('acme', 'op-28742') AS same_hash_2;
SELECT lake.append('collide', 'acme', 'op-11777', '\x01'::bytea) AS first;
SELECT lake.append('collide', 'acme', 'op-78570', '\x02'::bytea) AS second_not_a_replay;
SELECT lake.append('collide', 'acme', 'op-78570', '\x02'::bytea) AS replay_second;
SELECT lake.append('collide', 'acme', 'op-11777', '\x01'::bytea) AS replay_first;
SELECT t.err($$SELECT lake.append('collide', 'acme', 'op-78570', '\x01'::bytea)$$);
SELECT t.err($$SELECT lake.append('collide', 'acme', 'op-11777', '\x02'::bytea)$$);
SELECT lake.read_operation('collide', 'acme', 'op-11777') AS read_first,
       lake.read_operation('collide', 'acme', 'op-78570') AS read_second;
-- Only one of the two has a version: the other has none.
SELECT lake.append('collide_one', 'acme', 'op-11777', '\x01'::bytea) AS v;
SELECT t.err($$SELECT lake.read_operation('collide_one', 'acme', 'op-78570')$$);
SELECT version, operation_id, bytes, digest = sha256(lake.read('collide', version)) AS digest_ok
FROM lake.versions('collide') ORDER BY version;

-- Version rows go in with their two index entries directly
-- (store_version.c): amcheck finds every row in both indexes. An
-- administrator's own index on the table makes appends maintain every
-- index, that one too.
CREATE EXTENSION amcheck;
SELECT bt_index_check('lake_data.version_pkey', true)::text = '' AS pkey_complete,
       bt_index_check('lake_data.version_operation', true)::text = '' AS operation_complete;
CREATE INDEX version_own ON lake_data.version (operation_id);
SELECT lake.append('collide', 'acme', 'own-index', '\x05'::bytea) IS NOT NULL AS appended;
SELECT bt_index_check('lake_data.version_own', true)::text = '' AS own_complete,
       bt_index_check('lake_data.version_pkey', true)::text = '' AS pkey_complete,
       bt_index_check('lake_data.version_operation', true)::text = '' AS operation_complete;
DROP INDEX lake_data.version_own;
DROP EXTENSION amcheck;

-- A payload over lake.max_stream_bytes is refused (54000) by its size
-- before it is detoasted: a 64 MB value stored compressed in a table
-- costs the refused call no 64 MB of memory (peak resident memory of a
-- fresh backend, VmHWM, grows by far less).
CREATE TABLE t.huge (v bytea);
INSERT INTO t.huge SELECT decode(repeat('00', 64 * 1024 * 1024), 'hex');
SELECT pg_column_size(v) < 8 * 1024 * 1024 AS stored_compressed FROM t.huge;
\c
CREATE FUNCTION t.vm_hwm_kb() RETURNS bigint LANGUAGE sql AS $$
SELECT substring(pg_read_file('/proc/self/status') FROM 'VmHWM:\s+(\d+) kB')::bigint
$$;
SELECT t.vm_hwm_kb() AS hwm_before \gset
SELECT t.err($$SELECT lake.append('orders', 'acme', 'huge', (SELECT v FROM t.huge))$$) AS refused;
SELECT t.vm_hwm_kb() - :hwm_before < 32 * 1024 AS not_detoasted;
DROP FUNCTION t.vm_hwm_kb();
DROP TABLE t.huge;
