-- Each dataset's head version is kept in shared memory (src/head.c) so that
-- an append need not probe for it; it must follow commits only. After an
-- abort, a rolled-back savepoint, a prepared transaction, or a transaction
-- writing to more datasets than a backend tracks, every next append still
-- gets the next version: no gap, no duplicate, no unique_violation.
SELECT lake.create_dataset('head');
SELECT lake.append('head', 'acme', 'a', '\x01'::bytea) AS v1;

-- An aborted append leaves the head where it was.
BEGIN;
SELECT lake.append('head', 'acme', 'b', '\x02'::bytea) AS v2_rolled_back;
ROLLBACK;
SELECT lake.append('head', 'acme', 'c', '\x03'::bytea) AS v2;

-- Two appends in one transaction, then a replay of the first.
BEGIN;
SELECT lake.append('head', 'acme', 'd', '\x04'::bytea) AS v3;
SELECT lake.append('head', 'acme', 'e', '\x05'::bytea) AS v4;
SELECT lake.append('head', 'acme', 'd', '\x04'::bytea) AS v3_replayed;
COMMIT;

-- A savepoint rolled back after a write: its version is gone, the
-- transaction's earlier one stays, the next one fills the gap.
BEGIN;
SELECT lake.append('head', 'acme', 'f', '\x06'::bytea) AS v5;
SAVEPOINT s;
SELECT lake.append('head', 'acme', 'g', '\x07'::bytea) AS v6_rolled_back;
ROLLBACK TO SAVEPOINT s;
SELECT lake.append('head', 'acme', 'h', '\x08'::bytea) AS v6;
COMMIT;
SELECT lake.append('head', 'acme', 'i', '\x09'::bytea) AS v7;

-- The same through a caught error after a write in a subtransaction.
DO $$
BEGIN
    PERFORM lake.append('head', 'acme', 'j', '\x0a'::bytea);
    RAISE EXCEPTION 'undo';
EXCEPTION WHEN raise_exception THEN
    NULL;
END
$$;
SELECT lake.append('head', 'acme', 'k', '\x0b'::bytea) AS v8;

-- A prepared transaction commits elsewhere: the head must not stay behind.
BEGIN;
SELECT lake.append('head', 'acme', 'l', '\x0c'::bytea) AS v9;
PREPARE TRANSACTION 'head_prepared';
COMMIT PREPARED 'head_prepared';
SELECT lake.append('head', 'acme', 'm', '\x0d'::bytea) AS v10;
BEGIN;
SELECT lake.append('head', 'acme', 'n', '\x0e'::bytea) AS v11_rolled_back;
PREPARE TRANSACTION 'head_prepared';
ROLLBACK PREPARED 'head_prepared';
SELECT lake.append('head', 'acme', 'o', '\x0f'::bytea) AS v11;
-- A dataset created in a transaction that is prepared, then rolled back,
-- is gone for the session that prepared it too: its cached id must not
-- take appends (a version under an id no dataset row has, and a second
-- version of the operation once the name is created again).
BEGIN;
SELECT lake.create_dataset('head_prep');
SELECT lake.append('head_prep', 'acme', 'p1', '\x01'::bytea) AS prep_v1_rolled_back;
PREPARE TRANSACTION 'head_prep_ds';
ROLLBACK PREPARED 'head_prep_ds';
\set VERBOSITY sqlstate
SELECT lake.append('head_prep', 'acme', 'p1', '\x01'::bytea) AS no_dataset;
\set VERBOSITY default
SELECT lake.create_dataset('head_prep');
SELECT lake.append('head_prep', 'acme', 'p1', '\x01'::bytea) AS prep_v1;
SELECT count(*) AS orphan_versions FROM lake_data.version v
WHERE NOT EXISTS (SELECT FROM lake_data.dataset d WHERE d.id = v.dataset_id);
-- Under lake.role_max_hold a transaction holding a dataset's append lock
-- is not prepared (0A000): the prepared transaction would keep the lock
-- past the bound. It rolls back, and the next append takes its number.
SET lake.role_max_hold = '1min';
BEGIN;
SELECT lake.append('head', 'acme', 'q', '\x11'::bytea) AS v12_not_prepared;
PREPARE TRANSACTION 'head_held';
\echo :SQLSTATE
SELECT count(*) AS prepared FROM pg_prepared_xacts WHERE gid = 'head_held';
SELECT slots_in_use FROM lake.admission();
RESET lake.role_max_hold;
SELECT lake.append('head', 'acme', 'q', '\x11'::bytea) AS v12;
-- A replay takes no lock (its permit is given back at PREPARE): it is
-- prepared under the bound.
SET lake.role_max_hold = '1min';
BEGIN;
SELECT lake.append('head', 'acme', 'q', '\x11'::bytea) AS v12_replayed;
PREPARE TRANSACTION 'head_replay';
COMMIT PREPARED 'head_replay';
RESET lake.role_max_hold;

-- A version written by hand (a repair, a data-only restore) is unknown to
-- the kept head: the next append takes its number and is refused by the
-- primary key (23505, nothing written), and the one after it has learned
-- the head again. (Every append once failed so until a restart.)
INSERT INTO lake_data.version (version, committed_at, dataset_id, data, tenant, operation_id, digest)
SELECT version + 1, committed_at, dataset_id, data, tenant, 'by-hand', digest FROM lake_data.version
WHERE dataset_id = (SELECT id FROM lake_data.dataset WHERE name = 'head') ORDER BY version DESC LIMIT 1;
\set VERBOSITY sqlstate
SELECT lake.append('head', 'acme', 'p', '\x10'::bytea) AS stale_head;
\set VERBOSITY default
SELECT lake.append('head', 'acme', 'p', '\x10'::bytea) AS v14;

SELECT version, operation_id FROM lake.versions('head') ORDER BY version;

-- More datasets in one transaction than a backend tracks (8), each
-- appended to twice, then once more after the commit.
SELECT count(lake.create_dataset('head' || i)) FROM generate_series(1, 10) AS i;
BEGIN;
SELECT array_agg(lake.append('head' || i, 'acme', 'x', '\x01'::bytea) ORDER BY i) AS first
  FROM generate_series(1, 10) AS i;
SELECT array_agg(lake.append('head' || i, 'acme', 'y', '\x02'::bytea) ORDER BY i) AS second
  FROM generate_series(1, 10) AS i;
COMMIT;
SELECT array_agg(lake.append('head' || i, 'acme', 'z', '\x03'::bytea) ORDER BY i) AS third
  FROM generate_series(1, 10) AS i;

-- A dataset whose versions reached the last number (a row put in by hand
-- stands for 2^63 appends) refuses the next append with 22003 and writes
-- nothing: the number wrapped to -2^63 before, and the append after that
-- leaked a unique violation.
SELECT lake.create_dataset('head_last');
INSERT INTO lake_data.version (version, committed_at, dataset_id, data, tenant, operation_id, digest)
SELECT 9223372036854775807, now(), id, NULL, 'acme', 'a', sha256('\x01'::bytea)
  FROM lake_data.dataset WHERE name = 'head_last';
\set VERBOSITY sqlstate
SELECT lake.append('head_last', 'acme', 'b', '\x02'::bytea);
\set VERBOSITY default
SELECT count(*) AS versions FROM lake_data.version
WHERE dataset_id = (SELECT id FROM lake_data.dataset WHERE name = 'head_last');
