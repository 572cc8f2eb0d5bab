-- Stored bytes damaged on disk (the decoders fuzzed in test/fuzz) fail
-- closed from SQL: a damaged cycle record is XX001 for every reader, never
-- partial or invented landings. (What recovery does with a damaged cycle or
-- snapshot is in test/t/008_quarantine.pl.)
SELECT lake.create_owner('d_owner');
SELECT (lake.cast_durable('d_owner', 'Planning', 'CognitiveWork', '\x01'::bytea)).cycle AS c \gset
CREATE TABLE t.d_good AS SELECT data, bytes FROM lake_data.cycle WHERE cycle = :c;

-- Replace the cycle's bytes, read it every way, put the bytes back. A raw
-- chunk ('R', a 4-byte checksum, the bytes) gets its size in the row too,
-- so that each case reaches the check it is about.
CREATE FUNCTION t.d_try(bad bytea, c bigint) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
BEGIN
    UPDATE lake_data.cycle
    SET data = bad,
        bytes = CASE WHEN length(bad) >= 5 AND get_byte(bad, 0) = ascii('R') THEN length(bad) - 5 ELSE bytes END
    WHERE cycle = c;
    r := regexp_replace(regexp_replace(t.err(format('SELECT count(*) FROM lake.trajectory(%L)', 'd_owner')),
                        'cycle \d+', 'cycle <c>'), 'owner id \d+', 'owner id <o>')
         || ' | log: ' || left(t.err(format('SELECT count(*) FROM lake.log(%s)', c - 1)), 5);
    UPDATE lake_data.cycle SET data = g.data, bytes = g.bytes FROM t.d_good g WHERE cycle = c;
    RETURN r;
END $$;

-- Well-formed raw chunks (t.raw_chunk: tag and checksum) around damaged
-- landing records: 'L', version 2, a uint32 count, the int64 cycle and
-- int32 epoch the record was sealed as, then per landing int32 owner, int64
-- position, seq, lap and a flags byte. t.d_head(count, cycle, epoch) is
-- such a header, little-endian.
CREATE FUNCTION t.le(v bigint, n int) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
    SELECT decode(string_agg(lpad(to_hex((v >> (8 * i)) & 255), 2, '0'), '' ORDER BY i), 'hex')
    FROM generate_series(0, n - 1) i
$$;
SELECT epoch AS e FROM lake_data.cycle WHERE cycle = :c \gset
CREATE FUNCTION t.d_head(n int, c bigint, e int) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
    SELECT '\x4c02'::bytea || t.le(n, 4) || t.le(c, 8) || t.le(e, 4)
$$;
SELECT name, t.d_try(bad, :c) AS refused
FROM (VALUES
    ('empty',               ''::bytea),
    ('unknown tag',         '\x7801'::bytea),
    ('corrupt zstd frame',  '\x5a0000000028b52ffd0000ffff'::bytea),
    ('frame cut short',     substring((SELECT data FROM t.d_good) FROM 1 FOR 12)),
    ('not a landing record',t.raw_chunk('\x68656c6c6f')),
    ('landing version 1',   t.raw_chunk(overlay(t.d_head(0, :c, :e) PLACING '\x01' FROM 2 FOR 1))),
    ('header cut short',    t.raw_chunk(substring(t.d_head(0, :c, :e) FROM 1 FOR 17))),
    ('another cycle',       t.raw_chunk(t.d_head(0, :c + 1, :e))),
    ('another epoch',       t.raw_chunk(t.d_head(0, :c, :e + 1))),
    ('count past the end',  t.raw_chunk(t.d_head(1, :c, :e))),
    ('landing cut short',   t.raw_chunk(t.d_head(1, :c, :e) || '\x01000000'::bytea)),
    ('unknown flags',       t.raw_chunk(t.d_head(1, :c, :e) || decode(repeat('00', 28) || '80', 'hex'))),
    ('phase past the end',  t.raw_chunk(t.d_head(1, :c, :e) || decode(repeat('00', 28) || '01' || 'ffff', 'hex'))),
    ('payload past the end',t.raw_chunk(t.d_head(1, :c, :e) || decode(repeat('00', 28) || '02' || 'ffffffff', 'hex'))),
    ('trailing bytes',      t.raw_chunk(t.d_head(0, :c, :e) || '\x00'::bytea))
) AS cases(name, bad);
-- An empty record under the cycle's own identity: the owner index, which
-- lists d_owner's landing in this cycle, notices that it is missing.
SELECT t.d_try(t.raw_chunk(t.d_head(0, :c, :e)), :c) AS empty_cycle;

-- The row's identity is checked against the record it holds: a cycle row
-- whose epoch, or whose key, was altered is damaged for every reader.
UPDATE lake_data.cycle SET epoch = epoch + 1 WHERE cycle = :c;
SELECT regexp_replace(t.err('SELECT count(*) FROM lake.trajectory(''d_owner'')'), 'cycle \d+', 'cycle <c>') AS epoch_altered;
SELECT left(t.err(format('SELECT count(*) FROM lake.log(%s)', :c - 1)), 5) AS epoch_altered_log;
UPDATE lake_data.cycle SET epoch = epoch - 1 WHERE cycle = :c;
UPDATE lake_data.cycle SET cycle = cycle + 1000 WHERE cycle = :c;
SELECT regexp_replace(t.err(format('SELECT count(*) FROM lake.log(%s)', :c + 999)), 'cycle \d+', 'cycle <c>') AS key_altered;
-- Read from before it, the log misses cycle c itself: cycles are numbered
-- without gaps, so a missing one is XX001 too, never a log that skips it.
SELECT regexp_replace(t.err(format('SELECT count(*) FROM lake.log(%s)', :c - 1)), '(cycle|is) \d+', '\1 <c>', 'g') AS cycle_missing;
UPDATE lake_data.cycle SET cycle = cycle - 1000 WHERE cycle = :c + 1000;
-- A row whose size is not its record's: refused before the record's size
-- is allocated (a damaged frame header can claim up to 1 GB).
UPDATE lake_data.cycle SET bytes = bytes + 1 WHERE cycle = :c;
SELECT regexp_replace(t.err('SELECT count(*) FROM lake.trajectory(''d_owner'')'), 'cycle \d+', 'cycle <c>') AS size_altered;
UPDATE lake_data.cycle SET bytes = bytes - 1 WHERE cycle = :c;
-- A negative size is no size to skip the check by: damaged too.
UPDATE lake_data.cycle SET bytes = -1 WHERE cycle = :c;
SELECT regexp_replace(t.err('SELECT count(*) FROM lake.trajectory(''d_owner'')'), 'cycle \d+', 'cycle <c>') AS size_negative;
UPDATE lake_data.cycle c SET bytes = g.bytes FROM t.d_good g WHERE c.cycle = :c;
-- A receipt is found by its cycle row's range, and an epoch's cycles cover
-- its receipts without a gap: a sealed receipt that no row's range or
-- record holds is XX001, never LK006 ("lost, cast it again", which would
-- invite a duplicate step).
SELECT first_seq AS s FROM lake_data.cycle WHERE cycle = :c \gset
SELECT (lake.cast_durable('d_owner', NULL, NULL, '\x02'::bytea)).cycle AS c2 \gset
SELECT first_seq AS s2 FROM lake_data.cycle WHERE cycle = :c2 \gset
CREATE FUNCTION t.d_await(e int, s bigint) RETURNS text LANGUAGE sql AS $$
    SELECT regexp_replace(t.err(format('SELECT (lake.await_durable(ROW(%s, %s)::lake.receipt)).position',
                                       e, s)), 'cycle \d+|\(\d+,\d+\)', '<n>', 'g')
$$;
SELECT t.d_await(:e, :s) AS receipt_sound;
UPDATE lake_data.cycle SET epoch = epoch + 100 WHERE cycle = :c;
SELECT t.d_await(:e, :s) AS receipt_in_gap;
UPDATE lake_data.cycle SET first_seq = :s WHERE cycle = :c2;
SELECT t.d_await(:e, :s) AS receipt_not_in_record;
UPDATE lake_data.cycle SET epoch = epoch + 100 WHERE cycle = :c2;
SELECT t.d_await(:e, :s) AS receipt_rows_gone;
UPDATE lake_data.cycle SET epoch = :e, first_seq = :s2 WHERE cycle = :c2;
UPDATE lake_data.cycle SET epoch = :e WHERE cycle = :c;
SELECT t.d_await(:e, :s) AS receipt_repaired;
-- The epoch's last row itself: its range cut short, or moved to another
-- epoch, leaves no row that reaches the receipt. In the live epoch the
-- seals' own count shows it sealed; for a past epoch the epoch's last row
-- and the row after it are read (064_damaged_headers.pl).
UPDATE lake_data.cycle SET last_seq = last_seq - 1 WHERE cycle = :c2;
SELECT t.d_await(:e, :s2) AS receipt_past_last_row;
UPDATE lake_data.cycle SET last_seq = last_seq + 1, epoch = epoch + 100 WHERE cycle = :c2;
SELECT t.d_await(:e, :s2) AS receipt_last_row_moved;
UPDATE lake_data.cycle SET epoch = :e WHERE cycle = :c2;
SELECT t.d_await(:e, :s2) AS receipt_last_row_repaired;
-- The newest cycle rows deleted: a trajectory ended short of the owner's
-- position, and the log short of the sealed head, without an error (each
-- was past the newest row the read saw, as a seal committed since would
-- be). A fresh look finds no such row: XX001.
BEGIN;
DELETE FROM lake_data.cycle WHERE cycle = :c2;
SELECT regexp_replace(t.err('SELECT count(*) FROM lake.trajectory(''d_owner'')'),
                      '(cycle|id|position) \d+', '\1 <n>', 'g') AS trajectory_newest_row_deleted;
SELECT regexp_replace(t.err('SELECT count(*) FROM lake.log()'), 'cycle \d+', 'cycle <n>') AS log_newest_row_deleted;
-- Every row deleted: no row at all to start from.
DELETE FROM lake_data.cycle;
SELECT regexp_replace(t.err('SELECT count(*) FROM lake.trajectory(''d_owner'')'),
                      '(cycle|id|position) \d+', '\1 <n>', 'g') AS trajectory_every_row_deleted;
SELECT regexp_replace(t.err('SELECT count(*) FROM lake.log()'), 'cycle \d+', 'cycle <n>') AS log_every_row_deleted;
ROLLBACK;
DROP FUNCTION t.d_await(int, bigint);
-- Recovery checks every landing against the owner it rebuilds: a sound
-- record (here raw, with a valid checksum) whose landing carries a lap the
-- owner's moves do not lead to quarantines the owner, never hands it that
-- lap. d_owner's first landing rewritten with lap 7; a committed lifecycle
-- edit has the worker recover every owner from the log (no snapshot holds
-- d_owner), and owner_state waits for it.
SELECT id AS o FROM lake_data.owner WHERE name = 'd_owner' \gset
UPDATE lake_data.cycle SET data = f.x, bytes = length(f.x) - 5
FROM (SELECT t.raw_chunk(t.d_head(1, :c, :e) || t.le(:o, 4) || t.le(1, 8) || t.le(:s, 8) || t.le(7, 8)
             || '\x03'::bytea || t.le(8, 2) || convert_to('Planning', 'UTF8')
             || t.le(13, 2) || convert_to('CognitiveWork', 'UTF8') || t.le(1, 4) || '\x01'::bytea) AS x) f
WHERE cycle = :c;
SELECT position, from_phase, to_phase, lap, payload FROM lake.trajectory('d_owner') WHERE position = 1;
UPDATE lake_data.lifecycle SET edges = edges WHERE name = 'kanban';
SELECT phase, lap, "position", quarantined, reason FROM lake.owner_state('d_owner');
UPDATE lake_data.cycle c SET data = g.data, bytes = g.bytes FROM t.d_good g WHERE c.cycle = :c;
SELECT lake.release_owner('d_owner');
DROP FUNCTION t.d_head(int, bigint, int);
DROP FUNCTION t.le(bigint, int);
-- Put back, the cycle reads as before.
SELECT position, from_phase, to_phase, payload FROM lake.trajectory('d_owner');

DROP FUNCTION t.d_try(bytea, bigint);
DROP TABLE t.d_good;

-- A column an administrator adds to one of lake's tables: its rows are
-- formed from arrays of the install script's width, so the seal wrote past
-- them (the worker crashed the server, in a loop). Every write and read of
-- an altered table is XX001 now, and the casts wait; with the column
-- dropped again (its attribute stays, dropped) they are sealed.
SELECT lake.create_owner('d_cols');
ALTER TABLE lake_data.cycle ADD COLUMN note text;
SELECT lake.cast('d_cols', 'Planning', 'CognitiveWork') IS NOT NULL AS accepted;
SELECT lake.seal();
\set VERBOSITY sqlstate
SELECT lake.seal();
\set VERBOSITY default
ALTER TABLE lake_data.cycle DROP COLUMN note;
SELECT lake.seal() > 0 AS sealed_with_it_dropped;
SELECT position, to_phase FROM lake.trajectory('d_cols');
ALTER TABLE lake_data.chunk ADD COLUMN note text;
SELECT lake.create_dataset('d_cols_ds');
SELECT lake.begin_append('d_cols_ds', 'acme', 'cols') AS cols_stage \gset
SELECT regexp_replace(t.err(format('SELECT lake.append_chunk(%s, 0, ''\x01''::bytea)', :cols_stage)),
                      'stage \d+', 'stage <n>') AS chunk_with_a_column_added;
ALTER TABLE lake_data.chunk DROP COLUMN note;
SELECT lake.append_chunk(:cols_stage, 0, '\x0102'::bytea);
SELECT lake.read('d_cols_ds', lake.commit_append(:cols_stage)) AS read_with_it_dropped;

-- A column of lake's retyped: the readers took its datums for the type
-- lake made it with, and append_chunk crashed the server reading a stage's
-- tenant as text. Every call that reaches the table is XX001 now, before
-- any row of it is read (an append, which does not, goes on); put back,
-- the upload goes on.
SELECT lake.begin_append('d_cols_ds', 'acme', 'typed') AS typed_stage \gset
ALTER TABLE lake_data.stage ALTER COLUMN tenant TYPE int USING 0;
SELECT regexp_replace(t.err(format('SELECT lake.append_chunk(%s, 0, ''\x01''::bytea)', :typed_stage)),
                      'stage \d+', 'stage <n>') AS chunk_with_a_column_retyped;
SELECT t.err($$SELECT lake.append('d_cols_ds', 'acme', 'typed2', '\x01'::bytea)$$) AS append_meanwhile;
ALTER TABLE lake_data.stage ALTER COLUMN tenant TYPE text COLLATE "C" USING 'acme';
SELECT lake.append_chunk(:typed_stage, 0, '\x03'::bytea);
SELECT lake.read('d_cols_ds', lake.commit_append(:typed_stage)) AS read_with_it_typed_back;
-- A column dropped and added again with its type moves to the end: read
-- by position, another column's bytes were taken for it.
BEGIN;
ALTER TABLE lake_data.version DROP COLUMN tenant CASCADE;
ALTER TABLE lake_data.version ADD COLUMN tenant text;
SELECT t.err($$SELECT lake.read('d_cols_ds', 1)$$) AS read_with_a_column_moved;
ROLLBACK;
-- And one renamed (lake's statements name it).
SELECT t.err_after($$ALTER TABLE lake_data.dataset RENAME COLUMN name TO label$$,
                  $$SELECT lake.read('d_cols_ds', 1)$$) AS read_with_a_column_renamed;
-- Renamed or retyped where a statement of lake's names the column:
-- PostgreSQL's parser stopped those calls before lake's check could run
-- (42703; 42804 for a type the statement combines with another), whether
-- the statement was prepared then or planned again. The check runs then
-- on the tables the statement locked: XX001 as everywhere.
SELECT lake.begin_append('d_cols_ds', 'acme', 'renamed') AS renamed_stage \gset
BEGIN;
ALTER TABLE lake_data.dataset RENAME COLUMN name TO label;
SELECT regexp_replace(t.err(format('SELECT lake.append_chunk(%s, 0, ''\x01''::bytea)', :renamed_stage)),
                      'stage \d+', 'stage <n>') AS chunk_with_dataset_name_renamed;
ROLLBACK;
SELECT t.err_after($$ALTER TABLE lake_data.version RENAME COLUMN digest TO checksum$$,
                  $$SELECT count(*) FROM lake.versions('d_cols_ds')$$) AS versions_with_digest_renamed;
SELECT t.err_after($$ALTER TABLE lake_data.version_blob ALTER COLUMN bytes TYPE text$$,
                  $$SELECT count(*) FROM lake.versions('d_cols_ds')$$) AS versions_with_blob_bytes_retyped;
SELECT t.err_after($$ALTER TABLE lake_data.cycle RENAME COLUMN sealed_at TO closed_at$$,
                  $$SELECT count(*) FROM lake.cycles()$$) AS cycles_with_sealed_at_renamed;
SELECT t.err_after($$ALTER TABLE lake_data.owner RENAME COLUMN tenant TO holder$$,
                  $$SELECT count(*) FROM lake.trajectory('d_cols')$$) AS trajectory_with_owner_tenant_renamed;
SELECT t.err_after($$ALTER TABLE lake_data.tenant_grant RENAME COLUMN role TO grantee$$,
                  $$SELECT lake.grant_tenant(current_user::regrole, 'renamed')$$) AS grant_with_role_renamed;
-- A column's collation changed (ALTER COLUMN ... TYPE text COLLATE, which
-- rebuilds its indexes in it): lake probes them with the collation it made
-- the column with, and a btree walked in another order misses rows (a
-- retried cast's operation id was not found, and was cast again).
SELECT t.err_after($$ALTER TABLE lake_data.version ALTER COLUMN operation_id TYPE text COLLATE "default"$$,
                  $$SELECT lake.read('d_cols_ds', 1)$$) AS read_with_operation_id_recollated;
SELECT t.err_after($$ALTER TABLE lake_data.dataset ALTER COLUMN name TYPE text COLLATE "C"$$,
                  $$SELECT lake.read('d_cols_ds', 1)$$) AS read_with_dataset_name_recollated;
SELECT t.err_after($$ALTER TABLE lake_data.cast_operation ALTER COLUMN operation_id TYPE text COLLATE "C"$$,
                  $$SELECT lake.cast('d_cols', 'CognitiveWork', 'Evaluation', NULL, NULL, 'op-r')$$) AS cast_with_cast_operation_recollated;
SELECT lake.append_chunk(:renamed_stage, 0, '\x01'::bytea);
SELECT count(*) > 0 AS versions_as_made FROM lake.versions('d_cols_ds');
-- Or the schema of the tables renamed.
SELECT t.err_after($$ALTER SCHEMA lake_data RENAME TO d_lake_data$$,
                  $$SELECT lake.read('d_cols_ds', 1)$$) AS read_with_the_schema_renamed;
SELECT lake.read('d_cols_ds', 1) AS read_as_made;
-- A table made unlogged (a bulk-load habit): a crash would empty it, a
-- standby has none of its rows, and the coordinates and versions it held
-- would be lost and given out again without a trace. Every call refuses
-- it; set logged again, they go on.
SELECT lake.create_owner('d_unlogged');
ALTER TABLE lake_data.cycle SET UNLOGGED;
SELECT t.err($$SELECT lake.cast_durable('d_unlogged', 'Planning', 'CognitiveWork')$$) AS durable_cast_into_unlogged;
SELECT t.err($$SELECT lake.read('d_cols_ds', 1)$$) AS read_with_cycle_unlogged;
ALTER TABLE lake_data.cycle SET LOGGED;
ALTER TABLE lake_data.version SET UNLOGGED;
SELECT t.err($$SELECT lake.append('d_cols_ds', 'acme', 'unlogged', '\x01'::bytea)$$) AS append_into_unlogged;
ALTER TABLE lake_data.version SET LOGGED;
-- A sequence too: a crash sets an unlogged one back, and ids are given out
-- again (a new stage's id was a committed version's blob, and the stage's
-- abort deleted the version's chunks).
ALTER SEQUENCE lake_data.blob_seq SET UNLOGGED;
SELECT t.err($$SELECT lake.begin_append('d_cols_ds', 'acme', 'unlogged')$$) AS stage_with_blob_seq_unlogged;
ALTER SEQUENCE lake_data.blob_seq SET LOGGED;
ALTER SEQUENCE lake_data.owner_id_seq SET UNLOGGED;
SELECT t.err($$SELECT lake.read('d_cols_ds', 1)$$) AS read_with_owner_id_seq_unlogged;
ALTER SEQUENCE lake_data.owner_id_seq SET LOGGED;
-- Ids used up (a sequence set forward by hand; stage and payload ids are a
-- tenant-reachable limit over time, SECURITY.md): 2200H, nothing made.
-- setval is not undone by a rollback: each is set back after.
SELECT last_value AS blob_last, is_called AS blob_called FROM lake_data.blob_seq \gset
SELECT setval('lake_data.blob_seq', 1099511627776) > 0 AS blob_ids_used_up;
SELECT t.err($$SELECT lake.begin_append('d_cols_ds', 'acme', 'no-ids-left')$$) AS stage_without_ids;
SELECT setval('lake_data.blob_seq', :blob_last, :'blob_called'::boolean) = :blob_last AS blob_ids_back;
SELECT last_value AS owner_last, is_called AS owner_called FROM lake_data.owner_id_seq \gset
SELECT setval('lake_data.owner_id_seq', 2147483647) > 0 AS owner_ids_used_up;
SELECT t.err($$SELECT lake.create_owner('d_no_ids_left')$$) AS owner_without_ids;
-- A name that exists is still told so (it was 2200H).
SELECT t.err($$SELECT lake.create_owner('d_cols')$$) AS existing_owner_without_ids;
SELECT setval('lake_data.owner_id_seq', :owner_last, :'owner_called'::boolean) = :owner_last AS owner_ids_back;
-- The same of datasets and lifecycles, whose ids a refused creation of an
-- existing name took (and a caller that creates before each append used
-- them up): 42710 without taking one, 2200H only for a new name.
SELECT last_value AS ds_last, is_called AS ds_called FROM lake_data.dataset_id_seq \gset
SELECT t.err($$SELECT lake.create_dataset('d_cols_ds')$$) AS existing_dataset;
SELECT last_value = :ds_last AND is_called = :'ds_called'::boolean AS no_dataset_id_taken FROM lake_data.dataset_id_seq;
-- Told by a plain read: no row lock, so no transaction id and no WAL.
BEGIN;
SELECT t.err($$SELECT lake.create_dataset('d_cols_ds')$$) AS existing_dataset_again;
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_xid_taken;
ROLLBACK;
SELECT setval('lake_data.dataset_id_seq', 2147483647) > 0 AS dataset_ids_used_up;
SELECT t.err($$SELECT lake.create_dataset('d_cols_ds')$$) AS existing_dataset_without_ids;
SELECT t.err($$SELECT lake.create_dataset('d_no_ids_left')$$) AS dataset_without_ids;
SELECT setval('lake_data.dataset_id_seq', :ds_last, :'ds_called'::boolean) = :ds_last AS dataset_ids_back;
SELECT last_value AS lc_last, is_called AS lc_called FROM lake_data.lifecycle_id_seq \gset
SELECT t.err($$SELECT lake.define_lifecycle('kanban', 'Todo', ARRAY[ARRAY['Todo', 'Done']])$$) AS existing_lifecycle;
SELECT last_value = :lc_last AND is_called = :'lc_called'::boolean AS no_lifecycle_id_taken FROM lake_data.lifecycle_id_seq;
SELECT setval('lake_data.lifecycle_id_seq', 2147483647) > 0 AS lifecycle_ids_used_up;
SELECT t.err($$SELECT lake.define_lifecycle('kanban', 'Todo', ARRAY[ARRAY['Todo', 'Done']])$$) AS existing_lifecycle_without_ids;
SELECT setval('lake_data.lifecycle_id_seq', :lc_last, :'lc_called'::boolean) = :lc_last AS lifecycle_ids_back;
SELECT count(*) AS owner_not_made FROM lake_data.owner WHERE name = 'd_no_ids_left';
-- A table given another table access method (ALTER TABLE ... SET ACCESS
-- METHOD): lake would write heap tuples into storage that is not a heap.
CREATE ACCESS METHOD d_other_am TYPE TABLE HANDLER heap_tableam_handler;
ALTER TABLE lake_data.version SET ACCESS METHOD d_other_am;
SELECT t.err($$SELECT lake.append('d_cols_ds', 'acme', 'other-am', '\x01'::bytea)$$) AS append_into_other_am;
ALTER TABLE lake_data.version SET ACCESS METHOD heap;
DROP ACCESS METHOD d_other_am;
-- A rule on a table lake writes through statements (a snapshot) turns
-- them into something else: DO INSTEAD NOTHING would let a checkpoint
-- "succeed" with no snapshot stored. Forced row security would hide rows
-- from lake's own statements, run as the tables' owner. Both refused.
CREATE RULE d_rule AS ON INSERT TO lake_data.snapshot DO INSTEAD NOTHING;
SELECT lake.checkpoint();
SELECT t.err($$SELECT lake.read('d_cols_ds', 1)$$) AS read_under_a_rule_elsewhere;
DROP RULE d_rule ON lake_data.snapshot;
ALTER TABLE lake_data.version ENABLE ROW LEVEL SECURITY;
SELECT lake.read('d_cols_ds', 1) AS read_with_row_security_not_forced;
ALTER TABLE lake_data.version FORCE ROW LEVEL SECURITY;
SELECT t.err($$SELECT lake.read('d_cols_ds', 1)$$) AS read_with_row_security_forced;
ALTER TABLE lake_data.version NO FORCE ROW LEVEL SECURITY, DISABLE ROW LEVEL SECURITY;
SELECT lake.checkpoint() > 0 AS checkpoint_without_the_rule;
SELECT (lake.cast_durable('d_unlogged', 'Planning', 'CognitiveWork')).position AS durable_when_logged;

-- Tables lake reads through statements it runs itself: a lifecycle read
-- by a cast (and by lake's own trigger on the table), a cycle read for a
-- receipt. A column retyped crashed the backend there too.
SELECT lake.create_owner('d_lc');
SELECT lake.cast('d_lc', 'Planning', 'CognitiveWork') IS NOT NULL AS accepted;
SELECT lake.seal() > 0 AS sealed;
-- A new session: no lifecycle is in its cache yet.
\c
BEGIN;
ALTER TABLE lake_data.lifecycle ALTER COLUMN initial_phase TYPE int USING 7;
SELECT t.err($$SELECT lake.cast('d_lc', 'CognitiveWork', 'Evaluation')$$) AS cast_with_lifecycle_retyped;
SELECT t.err($$UPDATE lake_data.lifecycle SET name = name WHERE name = 'kanban'$$) AS edit_with_lifecycle_retyped;
ROLLBACK;
SELECT t.err_after($$ALTER TABLE lake_data.cycle ALTER COLUMN data TYPE int8 USING 4096$$,
                  $$SELECT lake.await_durable('(1,1)', 0)$$) AS await_with_cycle_retyped;
SELECT phase, "position" FROM lake.owner_state('d_lc');

-- lake's indexes, which it scans and fills itself: one re-created under
-- its name on other columns crashed the server (the scan's int keys were
-- compared as text). Every index lake made must be there as made: the
-- same columns (or expression), order, operator class, uniqueness, no
-- predicate; anything else is XX001 at the first use of its table.
BEGIN;
DROP INDEX lake_data.version_operation;
CREATE INDEX version_operation ON lake_data.version (tenant, operation_id);
SELECT t.err($$SELECT lake.append('d_cols_ds', 'acme', 'idx', '\x01'::bytea)$$) AS append_with_index_on_other_columns;
ROLLBACK;
BEGIN;
DROP INDEX lake_data.version_operation;
CREATE INDEX version_operation ON lake_data.version (dataset_id, lake_data.operation_hash(operation_id, tenant));
SELECT t.err($$SELECT lake.append('d_cols_ds', 'acme', 'idx', '\x01'::bytea)$$) AS append_with_index_on_another_expression;
ROLLBACK;
BEGIN;
DROP INDEX lake_data.version_operation;
CREATE INDEX version_operation ON lake_data.version (dataset_id, lake_data.operation_hash(tenant, operation_id))
WHERE version > 1;
SELECT t.err($$SELECT lake.append('d_cols_ds', 'acme', 'idx', '\x01'::bytea)$$) AS append_with_index_partial;
ROLLBACK;
SELECT t.err_after($$DROP INDEX lake_data.stage_touched_at$$,
                  $$SELECT lake.begin_append('d_cols_ds', 'acme', 'idx')$$) AS begin_with_index_dropped;
-- What this build needs and does not find (a column at the end, an index,
-- a table), as the tables of an earlier build lack them, is 55000: the
-- hint says how to move the data, and that DROP EXTENSION drops it all.
SELECT t.err_after($$ALTER TABLE lake_data.stage_replay RENAME TO stage_replay_elsewhere$$,
                  $$SELECT lake.read_operation('d_cols_ds', 'acme', 'none')$$) AS read_with_table_missing;
BEGIN;
ALTER TABLE lake_data.stage DROP COLUMN bytes;
SELECT lake.begin_append('d_cols_ds', 'acme', 'idx');
ROLLBACK;
-- Every call is refused so, the ones that do not use that table too: none
-- writes into tables an earlier build would then read as damaged.
SELECT t.err_after($$ALTER TABLE lake_data.stage DROP COLUMN bytes$$,
                  $$SELECT lake.append('d_cols_ds', 'acme', 'not-staged', '\x01'::bytea)$$) AS small_append;
-- A column dropped from the middle is named, not the last one.
SELECT t.err_after($$ALTER TABLE lake_data.stage DROP COLUMN created_at$$,
                  $$SELECT lake.append('d_cols_ds', 'acme', 'not-staged', '\x01'::bytea)$$) AS middle_column_dropped;
BEGIN;
ALTER TABLE lake_data.version DROP CONSTRAINT version_pkey;
CREATE INDEX version_pkey ON lake_data.version (dataset_id, version);
SELECT t.err($$SELECT lake.append('d_cols_ds', 'acme', 'idx', '\x01'::bytea)$$) AS append_with_key_not_unique;
ROLLBACK;
BEGIN;
ALTER TABLE lake_data.cycle DROP CONSTRAINT cycle_pkey;
ALTER TABLE lake_data.cycle ADD CONSTRAINT cycle_pkey PRIMARY KEY (cycle) DEFERRABLE;
SELECT t.err($$SELECT count(*) FROM lake.trajectory('d_lc')$$) AS read_with_key_deferred;
ROLLBACK;
BEGIN;
ALTER TABLE lake_data.owner_block DROP CONSTRAINT owner_block_pkey;
CREATE UNIQUE INDEX owner_block_pkey ON lake_data.owner_block (owner_id, first_cycle DESC);
SELECT t.err($$SELECT count(*) FROM lake.trajectory('d_lc')$$) AS read_with_index_descending;
ROLLBACK;
BEGIN;
ALTER TABLE lake_data.tenant_grant DROP CONSTRAINT tenant_grant_pkey;
CREATE UNIQUE INDEX tenant_grant_pkey ON lake_data.tenant_grant (tenant text_pattern_ops, role);
SELECT t.err($$SELECT lake.grant_tenant(current_user::regrole, 'idx')$$) AS grant_with_another_operator_class;
ROLLBACK;
BEGIN;
ALTER TABLE lake_data.chunk DROP CONSTRAINT chunk_pkey;
CREATE UNIQUE INDEX chunk_pkey ON lake_data.chunk (blob, chunk_no) INCLUDE (bytes);
SELECT t.err($$SELECT lake.read('d_cols_ds', 1)$$) AS read_with_index_including_more;
ROLLBACK;
-- One put in its place by renames alone, after this session checked the
-- table with it added: renaming an index invalidates only the index.
BEGIN;
CREATE INDEX version_other ON lake_data.version (tenant, operation_id);
SELECT lake.append('d_cols_ds', 'acme', 'idx0', '\x01'::bytea) > 0 AS append_with_it_added;
ALTER INDEX lake_data.version_operation RENAME TO version_swap;
ALTER INDEX lake_data.version_other RENAME TO version_operation;
SELECT t.err($$SELECT lake.append('d_cols_ds', 'acme', 'idx', '\x01'::bytea)$$) AS append_with_it_renamed_in;
ROLLBACK;
-- The same in a session that has read the table but never opened that
-- index: its old name was never resolved here, so no invalidation it gets
-- names anything it kept (the server crashed).
CREATE INDEX version_other ON lake_data.version (tenant, operation_id);
\c
SELECT lake.read('d_cols_ds', 1) AS read_first;
BEGIN;
ALTER INDEX lake_data.version_operation RENAME TO version_swap;
ALTER INDEX lake_data.version_other RENAME TO version_operation;
SELECT t.err($$SELECT lake.append('d_cols_ds', 'acme', 'idx', '\x01'::bytea)$$) AS append_with_it_renamed_in_unseen;
ROLLBACK;
DROP INDEX lake_data.version_other;
-- An index of the administrator's own on lake's table is theirs: lake
-- goes on, and fills it (read here through it alone).
CREATE INDEX admin_extra ON lake_data.version (committed_at);
SELECT lake.append('d_cols_ds', 'acme', 'idx', '\x01'::bytea) AS idx_version \gset
SELECT :idx_version > 0 AS append_with_an_extra_index;
BEGIN;
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
SELECT count(*) AS found_through_it FROM lake_data.version
WHERE committed_at > now() - interval '1 day' AND operation_id = 'idx';
ROLLBACK;
DROP INDEX lake_data.admin_extra;
SELECT lake.append('d_cols_ds', 'acme', 'idx', '\x01'::bytea) = :idx_version AS replay_as_made,
       (SELECT count(*) FROM lake.versions('d_cols_ds') WHERE operation_id = 'idx') AS idx_versions;

-- lake's composite types retyped (ALTER TYPE, open to their owner): the
-- results were formed from datums of the types lake made them with, and
-- cast_durable crashed the server; a receipt's fields were read as such.
-- Refused before any cast is accepted.
SELECT lake.create_owner('d_typed');
SELECT t.err_after($$ALTER TYPE lake.coordinate ALTER ATTRIBUTE cycle TYPE text$$,
                  $$SELECT lake.cast_durable('d_typed', 'Planning', 'CognitiveWork')$$) AS durable_with_coordinate_retyped;
BEGIN;
ALTER TYPE lake.receipt ALTER ATTRIBUTE epoch TYPE text;
SELECT t.err($$SELECT lake.cast('d_typed', 'Planning', 'CognitiveWork')$$) AS cast_with_receipt_retyped;
SELECT t.err($$SELECT lake.await_durable(ROW('1', 1)::lake.receipt, 0)$$) AS await_with_receipt_retyped;
ROLLBACK;
SELECT pending FROM lake.owner_state('d_typed') AS nothing_accepted;

-- A NOT NULL constraint dropped by hand, then a NULL stored: a read of the
-- version is XX001 (it crashed the backend), as a stored NULL is.
SELECT lake.append('d_cols_ds', 'acme', 'nulled', '\x01'::bytea) AS nulled \gset
ALTER TABLE lake_data.version ALTER COLUMN digest DROP NOT NULL;
UPDATE lake_data.version SET digest = NULL
WHERE version = :nulled AND dataset_id = (SELECT id FROM lake_data.dataset WHERE name = 'd_cols_ds');
SELECT t.err(format('SELECT lake.read(%L, %s)', 'd_cols_ds', :nulled)) AS read_of_a_null_digest;
UPDATE lake_data.version SET digest = sha256('\x01'::bytea)
WHERE version = :nulled AND dataset_id = (SELECT id FROM lake_data.dataset WHERE name = 'd_cols_ds');
ALTER TABLE lake_data.version ALTER COLUMN digest SET NOT NULL;
SELECT lake.read('d_cols_ds', :nulled) AS read_repaired;
-- The same of another table's column: version_blob.nchunks without its
-- NOT NULL makes a commit that writes version_blob XX001, which goes on
-- once the constraint is back.
SELECT lake.begin_append('d_cols_ds', 'acme', 'nchunks-nn') AS nn_stage \gset
SELECT lake.append_chunk(:nn_stage, 0, '\x0102'::bytea);
ALTER TABLE lake_data.version_blob ALTER COLUMN nchunks DROP NOT NULL;
SELECT t.err(format('SELECT lake.commit_append(%s)', :nn_stage)) AS nchunks_not_null_lost;
ALTER TABLE lake_data.version_blob ALTER COLUMN nchunks SET NOT NULL;
SELECT lake.read('d_cols_ds', lake.commit_append(:nn_stage)) AS read_after_repair;

-- lake_data.writer's one row deleted by hand: a seal is refused with
-- XX001 (it was an internal error, XX000), and goes on once the row is
-- back (put back as a restore would, without the merge trigger).
SELECT lake.create_owner('d_writer');
CREATE TEMP TABLE writer_kept AS SELECT * FROM lake_data.writer;
DELETE FROM lake_data.writer;
SELECT lake.cast('d_writer', 'Planning', 'CognitiveWork') IS NOT NULL AS accepted;
\set VERBOSITY sqlstate
SELECT lake.seal();
\set VERBOSITY default
SELECT lake.seal();
SET session_replication_role = replica;
INSERT INTO lake_data.writer SELECT * FROM writer_kept;
RESET session_replication_role;
SELECT lake.seal() > 0 AS sealed_again;
SELECT phase, "position" FROM lake.owner_state('d_writer');
