-- Lifecycles edited by hand (SPEC §4; issue 10 item 1). Every row must
-- build as lake.define_lifecycle builds it: a trigger refuses an edit that
-- would not, with define_lifecycle's SQLSTATE, and derives the phases. A
-- row that is malformed all the same (the trigger bypassed) is refused by
-- every reader, every time: nothing half-checked is ever cached.
SELECT lake.define_lifecycle('lc_hand', 'A', '{{A,B},{B,A}}');
SELECT lake.define_lifecycle('lc_used', 'A', '{{A,B},{B,A}}');
SELECT lake.create_owner('lc_o1', 'lc_used');

-- A lifecycle's definition as stored (the router compares definitions
-- with it); refusals as define_lifecycle's.
SELECT * FROM lake.lifecycle_definition('lc_hand');
SELECT * FROM lake.lifecycle_definition('kanban');
SELECT t.err($$SELECT lake.lifecycle_definition('lc_none')$$);
SELECT t.err($$SELECT lake.lifecycle_definition(NULL)$$);
SELECT t.err($$SELECT lake.lifecycle_definition('')$$);
SELECT t.err($$SELECT lake.lifecycle_definition(repeat('l', 64))$$);

-- Edits that do not build are refused, with or without owners.
SELECT t.err($$UPDATE lake_data.lifecycle SET initial_phase = 'zzz' WHERE name = 'lc_hand'$$);
SELECT t.err($$UPDATE lake_data.lifecycle SET edges = '{{A,B},{A,B}}' WHERE name = 'lc_hand'$$);
SELECT t.err($$UPDATE lake_data.lifecycle SET edges = '{A,B}' WHERE name = 'lc_hand'$$);
SELECT t.err($$UPDATE lake_data.lifecycle SET edges = '{}' WHERE name = 'lc_hand'$$);
SELECT t.err($$UPDATE lake_data.lifecycle SET edges = '{{A,NULL}}' WHERE name = 'lc_hand'$$);
SELECT t.err($$UPDATE lake_data.lifecycle SET edges = '{{A,""}}' WHERE name = 'lc_hand'$$);
SELECT t.err($$UPDATE lake_data.lifecycle SET initial_phase = '' WHERE name = 'lc_hand'$$);
SELECT t.err($$UPDATE lake_data.lifecycle SET initial_phase = NULL WHERE name = 'lc_hand'$$);
SELECT t.err($$UPDATE lake_data.lifecycle SET edges = NULL WHERE name = 'lc_hand'$$);
SELECT t.err($$UPDATE lake_data.lifecycle SET initial_phase = 'zzz' WHERE name = 'lc_used'$$);
SELECT t.err($$INSERT INTO lake_data.lifecycle (name, initial_phase, phases, edges)
               VALUES ('lc_bad', 'X', '{X}', '{{A,B}}')$$);
SELECT name, initial_phase, phases, edges FROM lake_data.lifecycle
WHERE name IN ('lc_hand', 'lc_used') ORDER BY name;

-- A well-formed edit is taken, and its phases are derived from the edges
-- whatever the edit said they were.
UPDATE lake_data.lifecycle SET edges = '{{A,C},{C,A}}', phases = '{nonsense}' WHERE name = 'lc_hand';
SELECT phases FROM lake_data.lifecycle WHERE name = 'lc_hand';
INSERT INTO lake_data.lifecycle (name, initial_phase, phases, edges)
VALUES ('lc_inserted', 'P', '{}', '{{P,Q},{Q,P}}');
SELECT phases FROM lake_data.lifecycle WHERE name = 'lc_inserted';

-- The trigger bypassed (replication role): the malformed row is stored.
-- Creating an owner of it, and reading or casting to one, fails each time
-- with XX001: the first failure caches nothing the second would trust.
SET session_replication_role = replica;
UPDATE lake_data.lifecycle SET initial_phase = 'zzz' WHERE name = 'lc_hand';
UPDATE lake_data.lifecycle SET initial_phase = 'A', edges = '{{A,B},{A,B}}' WHERE name = 'lc_inserted';
RESET session_replication_role;
SELECT t.err($$SELECT lake.create_owner('lc_p', 'lc_hand')$$);
SELECT t.err($$SELECT lake.create_owner('lc_p', 'lc_inserted')$$);
-- A stored shape error keeps its detail apart from the message.
SET session_replication_role = replica;
UPDATE lake_data.lifecycle SET edges = '{A,B}' WHERE name = 'lc_inserted';
RESET session_replication_role;
SELECT t.err($$SELECT lake.create_owner('lc_p', 'lc_inserted')$$);
SET session_replication_role = replica;
UPDATE lake_data.lifecycle SET edges = '{{A,B},{A,B}}' WHERE name = 'lc_inserted';
RESET session_replication_role;
SELECT count(*) AS created FROM lake_data.owner WHERE name = 'lc_p';
-- Owners made of them all the same (the registry edited by hand too).
INSERT INTO lake_data.owner (name, lifecycle, tenant)
SELECT 'lc_p1', id, 'default' FROM lake_data.lifecycle WHERE name = 'lc_hand';
INSERT INTO lake_data.owner (name, lifecycle, tenant)
SELECT 'lc_p2', id, 'default' FROM lake_data.lifecycle WHERE name = 'lc_inserted';
SELECT t.err($$SELECT * FROM lake.owner_state('lc_p1')$$);
SELECT t.err($$SELECT * FROM lake.owner_state('lc_p1')$$);
SELECT t.err($$SELECT * FROM lake.owner_state('lc_p2')$$);
SELECT t.err($$SELECT * FROM lake.owner_state('lc_p2')$$);
SELECT t.err($$SELECT lake.cast('lc_p2', 'A', 'B')$$);
SELECT t.err($$SELECT lake.cast('lc_p2', 'A', 'B')$$);
-- The session is still here, and other owners are served.
SELECT phase, "position", quarantined FROM lake.owner_state('lc_o1');
DELETE FROM lake_data.owner WHERE name IN ('lc_p1', 'lc_p2');
UPDATE lake_data.lifecycle SET initial_phase = 'A', edges = '{{A,B},{B,A}}' WHERE name IN ('lc_hand', 'lc_inserted');
SELECT lake.create_owner('lc_p', 'lc_hand');
SELECT phase, "position", quarantined FROM lake.owner_state('lc_p');

-- Recovery never fails as a whole because of one lifecycle: an owner of a
-- malformed lifecycle is quarantined, with the reason, by lake.recover()
-- and by the worker's recovery (which a committed lifecycle edit starts);
-- every other owner recovers and casts go on.
SET session_replication_role = replica;
UPDATE lake_data.lifecycle SET initial_phase = 'zzz' WHERE name = 'lc_inserted';
RESET session_replication_role;
INSERT INTO lake_data.owner (name, lifecycle, tenant)
SELECT 'lc_q', id, 'default' FROM lake_data.lifecycle WHERE name = 'lc_inserted';
-- A statement that fails after lake.recover() quarantined the owner takes
-- the quarantine back in shared memory as its abort takes the durable one:
-- the owner used to stay quarantined in memory only, so the next recovery
-- passed it over and lake_data.owner never recorded the quarantine.
SELECT count(*) / 0 FROM lake.recover() WHERE quarantined;
SELECT quarantine_position FROM lake_data.owner WHERE name = 'lc_q';
SELECT quarantined FROM lake.recover('lc_q');
SELECT quarantine_position IS NOT NULL AS durably_quarantined FROM lake_data.owner WHERE name = 'lc_q';
SELECT owner, applied, "position", quarantined FROM lake.recover() WHERE owner LIKE 'lc\_%' ORDER BY owner;
SELECT quarantine_position, quarantine_reason FROM lake_data.owner WHERE name = 'lc_q';
\set VERBOSITY sqlstate
SELECT lake.release_owner('lc_q');
\set VERBOSITY default
SELECT lake.release_owner('lc_q');
UPDATE lake_data.lifecycle SET edges = '{{A,B},{B,A}}' WHERE name = 'lc_used';
SELECT (lake.cast_durable('lc_o1', 'A', 'B')).position;
SELECT phase, "position", quarantined FROM lake.owner_state('lc_o1');
SELECT epoch > 1 AS recovered_again, recovery_quarantined >= 1 AS quarantined_by_worker FROM lake.stats();
-- Fixed by hand, the owner is released.
UPDATE lake_data.lifecycle SET initial_phase = 'A' WHERE name = 'lc_inserted';
SELECT lake.release_owner('lc_q');
SELECT phase, "position", quarantined FROM lake.owner_state('lc_q');

-- A transaction that changed a lifecycle casts nothing and reads no owner
-- state before it commits (owners are recovered under the edit only then),
-- and cannot be prepared (it would hold the sealing lock until resolved).
BEGIN;
UPDATE lake_data.lifecycle SET edges = edges WHERE name = 'lc_used';
SELECT t.err($$SELECT phase FROM lake.owner_state('lc_o1')$$);
SELECT t.err($$SELECT lake.cast('lc_o1', 'B', 'A')$$);
ROLLBACK;
-- An edit rolled back to a savepoint is undone with it: the transaction
-- reads owner states on, and its commit starts no recovery.
SELECT epoch AS epoch_before FROM lake.stats() \gset
BEGIN;
SAVEPOINT before_edit;
UPDATE lake_data.lifecycle SET edges = edges WHERE name = 'lc_used';
ROLLBACK TO SAVEPOINT before_edit;
COMMIT;
SELECT phase FROM lake.owner_state('lc_o1');
SELECT epoch = :epoch_before AS not_recovered FROM lake.stats();
-- Released into an outer savepoint, the edit goes with that one.
BEGIN;
SAVEPOINT outer_sp;
SAVEPOINT before_edit;
UPDATE lake_data.lifecycle SET edges = edges WHERE name = 'lc_used';
RELEASE SAVEPOINT before_edit;
SELECT left(t.err($$SELECT phase FROM lake.owner_state('lc_o1')$$), 5) AS released_edit_kept;
ROLLBACK TO SAVEPOINT outer_sp;
SELECT phase FROM lake.owner_state('lc_o1');
COMMIT;
BEGIN;
UPDATE lake_data.lifecycle SET edges = edges WHERE name = 'lc_used';
\set VERBOSITY sqlstate
PREPARE TRANSACTION 'lake_lifecycle_edit';
\set VERBOSITY default
SELECT count(*) AS prepared FROM pg_prepared_xacts WHERE gid = 'lake_lifecycle_edit';
SELECT phase, "position", quarantined FROM lake.owner_state('lc_o1');
-- A restore's merge of the writer row (it can move the epoch) is refused
-- a PREPARE too: what it changes takes effect at its commit.
BEGIN;
INSERT INTO lake_data.writer SELECT * FROM lake_data.writer;
PREPARE TRANSACTION 'lake_writer_merge';
SELECT count(*) AS prepared FROM pg_prepared_xacts WHERE gid = 'lake_writer_merge';

-- An over-long phase name is quoted in its refusal up to a character
-- boundary: the cut used to fall inside a multibyte character, so the
-- message was not valid in the database's encoding (a client in another
-- encoding got 22021 instead of 22023).
SELECT t.err($$SELECT lake.define_lifecycle('lc_long', 'a', ARRAY[['a', 'a' || repeat('é', 40)]])$$);

-- A quarantine reason longer than its 160-byte slot is cut at a character
-- boundary: with multibyte phase names the cut used to fall inside a
-- character, and the stored reason was not valid UTF-8 (a dump of
-- lake_data.owner then failed to restore).
SELECT repeat('é', 31) AS p1, repeat('è', 31) AS p2 \gset
SELECT lake.define_lifecycle('lc_mb', :'p1', ARRAY[[:'p1', :'p2'], [:'p2', :'p1']]);
SELECT lake.create_owner('lc_mb_o', 'lc_mb');
SELECT (lake.cast_durable('lc_mb_o', :'p1', :'p2')).position;
-- The initial phase edited: the owner's first landing no longer fits.
UPDATE lake_data.lifecycle SET initial_phase = :'p2' WHERE name = 'lc_mb';
SELECT quarantined, octet_length(reason) <= 159 AS fits,
       convert_from(convert_to(reason, 'UTF8'), 'UTF8') = reason AS valid
FROM lake.owner_state('lc_mb_o');
SELECT octet_length(quarantine_reason) <= 159 AS stored_fits,
       convert_from(convert_to(quarantine_reason, 'UTF8'), 'UTF8') = quarantine_reason AS stored_valid,
       left(quarantine_reason, 21) AS reason_starts
FROM lake_data.owner WHERE name = 'lc_mb_o';
-- Fixed, it is released.
UPDATE lake_data.lifecycle SET initial_phase = :'p1' WHERE name = 'lc_mb';
SELECT lake.release_owner('lc_mb_o');
SELECT phase = :'p2' AS at_p2, "position", quarantined FROM lake.owner_state('lc_mb_o');

-- A lifecycle malformed behind the trigger's back (session_replication_role)
-- while its owners are live: a snapshot cannot name their phases, and it
-- must not leave them out (recovery would start them from the snapshot's
-- cycle at position 0, and a repaired lifecycle would bring them back
-- without their earlier landings). The checkpoint is refused instead.
SELECT lake.define_lifecycle('lc_snap', 'A', '{{A,B},{B,A}}');
SELECT lake.create_owner('lc_snap_o', 'lc_snap');
SELECT (lake.cast_durable('lc_snap_o', 'A', 'B')).position;
SET session_replication_role = replica;
UPDATE lake_data.lifecycle SET initial_phase = 'zzz' WHERE name = 'lc_snap';
RESET session_replication_role;
-- (A new session: this one keeps the lifecycle as it loaded it.)
\c -
SELECT lake.checkpoint();
\echo :SQLSTATE
SET session_replication_role = replica;
UPDATE lake_data.lifecycle SET initial_phase = 'A' WHERE name = 'lc_snap';
RESET session_replication_role;
SELECT lake.checkpoint() > 0 AS checkpoint_taken;
SELECT phase, "position", quarantined FROM lake.owner_state('lc_snap_o');

-- A release that fails partway puts the owner back where its durable
-- quarantine stands. Its replay applied landing 2 before landing 3 did not
-- fit, and left the owner there (C, position 2) under the old reason; the
-- next snapshot then took that state, so a recovery found it at a prefix
-- that depended on when a snapshot was taken.
SELECT lake.define_lifecycle('lc_rel', 'A', '{{A,B},{B,C},{C,A}}');
SELECT lake.create_owner('lc_rel_o', 'lc_rel');
SELECT (lake.cast_durable('lc_rel_o', 'A', 'B')).position;
SELECT (lake.cast_durable('lc_rel_o', 'B', 'C')).position;
SELECT (lake.cast_durable('lc_rel_o', 'C', 'A')).position;
UPDATE lake_data.lifecycle SET edges = '{{A,B},{C,A}}' WHERE name = 'lc_rel';
SELECT phase, "position", quarantined FROM lake.owner_state('lc_rel_o');
UPDATE lake_data.lifecycle SET edges = '{{A,B},{B,C}}' WHERE name = 'lc_rel';
SELECT lake.release_owner('lc_rel_o');
\echo :SQLSTATE
SELECT phase, lap, "position", quarantined, reason FROM lake.owner_state('lc_rel_o');
SELECT lake.checkpoint() > 0 AS checkpoint_taken;
SELECT quarantine_position FROM lake_data.owner WHERE name = 'lc_rel_o';
-- Fixed, it is released whole.
UPDATE lake_data.lifecycle SET edges = '{{A,B},{B,C},{C,A}}' WHERE name = 'lc_rel';
SELECT lake.release_owner('lc_rel_o');
SELECT phase, lap, "position", quarantined FROM lake.owner_state('lc_rel_o');
-- Released twice in a statement that then fails: put back as the first
-- release found it, not as the second did (after the first's replay).
SELECT lake.define_lifecycle('lc_rx', 'A', '{{A,B},{B,C},{C,A}}');
SELECT lake.define_lifecycle('lc_ry', 'A', '{{A,B},{B,C},{C,A}}');
SELECT lake.create_owner('lc_rx_o', 'lc_rx'), lake.create_owner('lc_ry_o', 'lc_ry');
SELECT count(lake.cast_durable(o, f, t)) AS casts
FROM unnest(ARRAY['lc_rx_o', 'lc_ry_o']) o, LATERAL (VALUES (1, 'A', 'B'), (2, 'B', 'C'), (3, 'C', 'A')) m(n, f, t);
UPDATE lake_data.lifecycle SET edges = '{{A,B},{C,A}}' WHERE name IN ('lc_rx', 'lc_ry');
-- Each edit is recovered under by the worker after its commit; the next
-- lake call waits for that, a further edit does not: read before editing.
SELECT owner, phase, "position", quarantined FROM unnest(ARRAY['lc_rx_o', 'lc_ry_o']) owner, lake.owner_state(owner);
UPDATE lake_data.lifecycle SET edges = '{{A,B},{B,C},{C,A}}' WHERE name = 'lc_rx';
UPDATE lake_data.lifecycle SET edges = '{{A,B},{B,C}}' WHERE name = 'lc_ry';
SELECT lake.release_owner(o) FROM unnest(ARRAY['lc_rx_o', 'lc_rx_o', 'lc_ry_o']) o;
\echo :SQLSTATE
SELECT phase, "position", quarantined FROM lake.owner_state('lc_rx_o');
UPDATE lake_data.lifecycle SET edges = '{{A,B},{B,C},{C,A}}' WHERE name = 'lc_ry';
SELECT lake.release_owner(o) FROM unnest(ARRAY['lc_rx_o', 'lc_ry_o']) o;

-- A stored lifecycle whose flaw has a detail (edges stored one-dimensional,
-- past the check trigger): the quarantine reason keeps the detail, without
-- its final period.
SELECT lake.define_lifecycle('lc_detail', 'A', '{{A,B},{B,A}}');
SELECT lake.create_owner('lc_d', 'lc_detail');
SET session_replication_role = replica;
UPDATE lake_data.lifecycle SET edges = '{A,B}' WHERE name = 'lc_detail';
RESET session_replication_role;
SELECT owner, quarantined FROM lake.recover('lc_d');
SELECT quarantine_reason FROM lake_data.owner WHERE name = 'lc_d';
-- Fixed by hand, it is released.
UPDATE lake_data.lifecycle SET edges = '{{A,B},{B,A}}' WHERE name = 'lc_detail';
SELECT lake.release_owner('lc_d');
SELECT phase, quarantined FROM lake.owner_state('lc_d');

-- lake's trigger functions fired other than as made are refused with
-- 39P01 (E_R_I_E_TRIGGER_PROTOCOL_VIOLATED), before anything is checked.
SELECT lake.define_lifecycle('lc_fired', 'A', '{{A,B},{B,A}}');
SELECT t.err_after($$CREATE TRIGGER lc_stmt AFTER UPDATE ON lake_data.lifecycle
                    FOR EACH STATEMENT EXECUTE FUNCTION lake.lifecycle_check()$$,
                  $$UPDATE lake_data.lifecycle SET edges = edges WHERE name = 'lc_fired'$$) AS statement_level;
SELECT t.err_after($$CREATE TRIGGER lc_after AFTER UPDATE ON lake_data.lifecycle
                    FOR EACH ROW EXECUTE FUNCTION lake.lifecycle_check()$$,
                  $$UPDATE lake_data.lifecycle SET edges = edges WHERE name = 'lc_fired'$$) AS after_row;
SELECT t.err_after($$CREATE TRIGGER wm_update BEFORE UPDATE ON lake_data.writer
                    FOR EACH ROW EXECUTE FUNCTION lake.writer_merge()$$,
                  $$UPDATE lake_data.writer SET epoch = epoch$$) AS writer_merge_on_update;
-- The triggers that return nothing (NULL) would, fired BEFORE a row,
-- silently drop it: each is refused unless fired as the install script
-- fires it.
CREATE TABLE t.misfired (a int);
SELECT t.err_after($$CREATE TRIGGER dc BEFORE INSERT ON lake_data.tenant_grant
                    FOR EACH ROW EXECUTE FUNCTION lake.data_changed()$$,
                  $$SELECT lake.grant_tenant(current_user::regrole, 'misfired')$$) AS data_changed_before_row;
SELECT t.err_after($$CREATE TRIGGER dc AFTER UPDATE ON lake_data.dataset
                    FOR EACH ROW EXECUTE FUNCTION lake.data_changed()$$,
                  $$UPDATE lake_data.dataset SET name = name$$) AS data_changed_after_row;
SELECT t.err_after($$CREATE TRIGGER rl BEFORE INSERT ON t.misfired
                    FOR EACH ROW EXECUTE FUNCTION lake.refuse_logical_apply()$$,
                  $$INSERT INTO t.misfired VALUES (1)$$) AS refuse_logical_apply_before_row;
SELECT t.err_after($$CREATE TRIGGER rl AFTER INSERT ON t.misfired
                    FOR EACH STATEMENT EXECUTE FUNCTION lake.refuse_logical_apply()$$,
                  $$INSERT INTO t.misfired VALUES (1)$$) AS refuse_logical_apply_statement;
SELECT t.err_after($$CREATE TRIGGER lcc BEFORE UPDATE ON lake_data.lifecycle
                    FOR EACH ROW EXECUTE FUNCTION lake.lifecycle_changed()$$,
                  $$UPDATE lake_data.lifecycle SET edges = edges WHERE name = 'lc_fired'$$) AS lifecycle_changed_before_row;
SELECT t.err_after($$CREATE TRIGGER lcc AFTER INSERT ON lake_data.lifecycle
                    FOR EACH STATEMENT EXECUTE FUNCTION lake.lifecycle_changed()$$,
                  $$SELECT lake.define_lifecycle('lc_fired_2', 'A', '{{A,B}}')$$) AS lifecycle_changed_on_insert;
-- Nothing of those calls was kept.
SELECT count(*) AS rows_left FROM t.misfired;
SELECT count(*) AS lifecycles_left FROM lake_data.lifecycle WHERE name = 'lc_fired_2';
-- As made, they fire: a grant, a revoke, a lifecycle edit.
SELECT t.err($$SELECT lake.grant_tenant(current_user::regrole, 'misfired')$$) AS grant_as_made;
SELECT t.err($$SELECT lake.revoke_tenant(current_user::regrole, 'misfired')$$) AS revoke_as_made;
SELECT t.err($$UPDATE lake_data.lifecycle SET edges = edges WHERE name = 'lc_fired'$$) AS lifecycle_edit_as_made;
