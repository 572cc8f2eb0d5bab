-- A session caches lake's relation OIDs, the schema owner and dataset ids
-- (store_rel.c, store.c). None may outlive what it names: not a dropped
-- and recreated extension, not a dataset renamed by hand, not a dataset
-- created in a transaction that rolled back.
SELECT lake.create_dataset('again');
SELECT lake.append('again', 'tenant_a', 'op-1', '\x01'::bytea);
SELECT lake.read('again', 1);

-- Dropped and recreated in this very session: new tables, new OIDs.
SELECT epoch AS old_epoch FROM lake.stats() \gset
DROP EXTENSION lake CASCADE;
CREATE EXTENSION lake;
-- The new extension's writer row starts at 0, yet its worker's epoch goes
-- past the one this server sealed in before: a receipt a client still holds
-- from the dropped extension never names a new cast (while the server stays
-- up: README, a restart in between starts receipts afresh).
SELECT lake.create_owner('recreated');
SELECT (r).epoch > :old_epoch AS epoch_not_reused
FROM (SELECT lake.cast('recreated', 'Planning', 'CognitiveWork') AS r) x;
-- 'again' gets another id than before.
SELECT lake.create_dataset('second');
SELECT lake.create_dataset('again');
SELECT lake.append('second', 'tenant_a', 'op-1', '\x02'::bytea);
SELECT lake.append('again', 'tenant_a', 'op-1', '\x03'::bytea);
SELECT lake.append('again', 'tenant_a', 'op-1', '\x03'::bytea) AS replay;
SELECT lake.read('again', 1), lake.read('second', 1);
SELECT lake.read_operation('again', 'tenant_a', 'op-1');
SELECT version, tenant, operation_id, bytes FROM lake.versions('again', 0);

-- Staged appends and their chunks too.
SELECT lake.begin_append('again', 'tenant_a', 'staged') AS stage \gset
SELECT lake.append_chunk(:stage, 0, '\x0405'::bytea);
SELECT lake.commit_append(:stage);
SELECT lake.read('again', 2);

-- A dataset renamed by hand is no longer found under its old name.
UPDATE lake_data.dataset SET name = 'renamed' WHERE name = 'second';
SELECT t.err($$SELECT lake.append('second', 'tenant_a', 'op-2', '\x06'::bytea)$$);
SELECT lake.append('renamed', 'tenant_a', 'op-2', '\x06'::bytea);

-- A dataset created (and appended to) in a transaction that rolled back
-- does not exist afterwards; created again, it starts at version 1.
BEGIN;
SELECT lake.create_dataset('fleeting');
SELECT lake.append('fleeting', 'tenant_a', 'op-1', '\x07'::bytea);
ROLLBACK;
SELECT t.err($$SELECT lake.append('fleeting', 'tenant_a', 'op-1', '\x07'::bytea)$$);
SELECT lake.create_dataset('fleeting');
SELECT lake.append('fleeting', 'tenant_a', 'op-1', '\x08'::bytea);
SELECT lake.read('fleeting', 1);

-- The same within a subtransaction that rolls back.
BEGIN;
SAVEPOINT s;
SELECT lake.create_dataset('brief');
SELECT lake.append('brief', 'tenant_a', 'op-1', '\x09'::bytea);
ROLLBACK TO SAVEPOINT s;
SELECT t.err($$SELECT lake.append('brief', 'tenant_a', 'op-1', '\x09'::bytea)$$);
COMMIT;

-- Many appends in one statement: each sees the versions the earlier ones
-- wrote (no reuse of a version number within a command).
SELECT count(lake.append('again', 'tenant_a', 'many-' || i, '\x0a'::bytea))
  FROM generate_series(1, 50) AS i;
SELECT max(version) FROM lake.versions('again', 0);

-- Until the worker has recovered a recreated extension, the live state is
-- the dropped one's: its sealed head and its owners' reach (owner ids
-- restart with the extension) are not the new log's, whose missing rows a
-- read would take them for.
SELECT (lake.cast_durable('recreated', 'CognitiveWork', 'Evaluation')).cycle > 0 AS sealed;
BEGIN;
DROP EXTENSION lake CASCADE;
CREATE EXTENSION lake;
SELECT count(*) AS log_of_a_new_extension FROM lake.log();
ROLLBACK;
BEGIN;
DROP EXTENSION lake CASCADE;
CREATE EXTENSION lake;
SELECT lake.create_owner('recreated');
SELECT count(*) AS trajectory_of_a_new_owner FROM lake.trajectory('recreated');
ROLLBACK;
