-- Owners, lifecycles, casts and cycles (SPEC §4). lake.cycle_interval is
-- 1h here: nothing is sealed unless a test seals it or awaits it.

-- The built-in lifecycle.
SELECT name, initial_phase, phases, edges FROM lake_data.lifecycle WHERE name = 'kanban';

-- define_lifecycle: validated.
SELECT lake.define_lifecycle('ticket', 'Open', '{{Open,Doing},{Doing,Done},{Doing,Open},{Done,Open}}');
SELECT phases FROM lake_data.lifecycle WHERE name = 'ticket';
SELECT t.err($$SELECT lake.define_lifecycle('ticket', 'Open', '{{Open,Doing}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle(NULL, 'Open', '{{Open,Doing}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('x', NULL, '{{Open,Doing}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('x', 'Open', NULL)$$);
SELECT t.err($$SELECT lake.define_lifecycle('', 'Open', '{{Open,Doing}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('x', '', '{{Open,Doing}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('x', 'Open', '{}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('x', 'Open', '{Open,Doing}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('x', 'Open', '{{Open,Doing,Done}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('x', 'Open', '{{{Open,Doing}}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('x', 'Open', '{{Open,NULL}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('x', 'Open', '{{Open,""}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('x', 'Start', '{{Open,Doing}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('x', 'Open', '{{Open,Doing},{Open,Doing}}')$$);
SELECT t.err(format('SELECT lake.define_lifecycle(%L, %L, %L)', 'x', 'Open', format('{{Open,%s}}', repeat('p', 64))));
SELECT t.err(format('SELECT lake.define_lifecycle(%L, %L, %L)', repeat('l', 64), 'Open', '{{Open,Doing}}'));
-- The bound of 256 phases at its edge: 256 are accepted, 257 refused (54000).
SELECT t.err(format('SELECT lake.define_lifecycle(%L, %L, %L)', 'lc_256', 'p0',
  (SELECT array_agg(ARRAY['p' || i, 'p' || ((i + 1) % 256)]) FROM generate_series(0, 255) i))) AS phases_256;
SELECT t.err(format('SELECT lake.define_lifecycle(%L, %L, %L)', 'lc_257', 'p0',
  (SELECT array_agg(ARRAY['p' || i, 'p' || ((i + 1) % 257)]) FROM generate_series(0, 256) i))) AS phases_257;
SELECT count(*) AS lifecycles FROM lake_data.lifecycle;

-- create_owner.
SELECT lake.create_owner('alpha');
SELECT lake.create_owner('beta', 'kanban');
SELECT lake.create_owner('gamma', 'ticket');
SELECT t.err($$SELECT lake.create_owner('alpha')$$);
SELECT t.err($$SELECT lake.create_owner('delta', 'nope')$$);
SELECT t.err($$SELECT lake.create_owner(NULL)$$);
SELECT t.err($$SELECT lake.create_owner('delta', NULL)$$);
SELECT t.err($$SELECT lake.create_owner('')$$);
SELECT t.err(format('SELECT lake.create_owner(%L)', repeat('o', 64)));
SELECT lake.create_owner(repeat('o', 63));
-- A refused creation takes no id (each took one from the sequence: a
-- tenant's failing creations used up the int ids in hours, and past
-- lake.max_owners every creation counted the registry); one rolled back
-- after its insert takes one.
SELECT max(id) AS top_id FROM lake_data.owner \gset
DO $$
BEGIN
    FOR i IN 1..50 LOOP
        BEGIN
            PERFORM lake.create_owner('alpha');
        EXCEPTION WHEN duplicate_object THEN NULL;
        END;
    END LOOP;
END $$;
BEGIN;
SELECT lake.create_owner('rolled_back');
ROLLBACK;
SELECT lake.create_owner('after_refusals');
SELECT id - :top_id AS ids_taken FROM lake_data.owner WHERE name = 'after_refusals';
SELECT * FROM lake.owner_state('alpha');
SELECT t.err($$SELECT * FROM lake.owner_state('nobody')$$);
SELECT t.err($$SELECT * FROM lake.owner_state(NULL)$$);

-- A cast returns a receipt at once; the live phase moves when sealed, the
-- projected phase (what the next cast is checked against) at acceptance.
SELECT (r).seq, (r).epoch = (SELECT epoch FROM lake.stats()) AS current_epoch
FROM lake.cast('alpha', 'Planning', 'CognitiveWork', '{"step": 1}'::bytea) r;
SELECT (lake.cast('alpha', 'CognitiveWork', 'Evaluation')).seq;
SELECT * FROM lake.owner_state('alpha');
SELECT lake.seal() > 0 AS sealed;
SELECT * FROM lake.owner_state('alpha');
-- Nothing pending: NULL.
SELECT lake.seal() IS NULL AS nothing_to_seal;

-- Validation against the projected phase: LK002, LK003, LK004, 22023,
-- 42704, 22004, 54000. A refused cast leaves no trace.
SELECT t.err($$SELECT lake.cast('alpha', 'Planning', 'CognitiveWork')$$);
SELECT t.err($$SELECT lake.cast('alpha', 'Evaluation', 'Planning')$$);
SELECT t.err($$SELECT lake.cast('alpha', 'Evaluation', 'Nowhere')$$);
SELECT t.err($$SELECT lake.cast('alpha', 'Nowhere', 'Commit')$$);
SELECT t.err($$SELECT lake.cast('alpha', 'Evaluation', 'Commit', NULL, 3)$$);
SELECT t.err($$SELECT lake.cast('alpha', 'Evaluation', 'Commit', NULL, -1)$$);
SELECT t.err($$SELECT lake.cast('alpha', 'Evaluation', NULL)$$);
SELECT t.err($$SELECT lake.cast('alpha', NULL, 'Commit')$$);
SELECT t.err($$SELECT lake.cast('nobody', 'Planning', 'CognitiveWork')$$);
SELECT t.err($$SELECT lake.cast(NULL, 'Planning', 'CognitiveWork')$$);
SELECT t.err($$SELECT lake.cast('', 'Planning', 'CognitiveWork')$$);
SELECT t.err($$SELECT lake.cast('alpha', '', 'Commit')$$);
SELECT t.err($$SELECT lake.cast('alpha', NULL, NULL, decode(repeat('00', 4 * 1024 * 1024 + 1), 'hex'))$$);
SELECT t.err($$SELECT lake.cast('gamma', 'Planning', 'CognitiveWork')$$);
SELECT pending FROM lake.owner_state('alpha');

-- A lap is a return to the initial phase; expected_lap guards it.
SELECT (lake.cast('alpha', 'Evaluation', 'Commit', NULL, 0)).seq > 0 AS accepted;
SELECT (lake.cast('alpha', 'Commit', 'Planning', NULL, 0)).seq > 0 AS accepted;
SELECT t.err($$SELECT lake.cast('alpha', 'Planning', 'CognitiveWork', NULL, 0)$$);
SELECT (lake.cast('alpha', 'Planning', 'CognitiveWork', NULL, 1)).seq > 0 AS accepted;
-- A no-step cast stores a payload without moving the owner.
SELECT (lake.cast('alpha', NULL, NULL, '{"note": "thinking"}'::bytea)).seq > 0 AS accepted;
SELECT (lake.cast('alpha', NULL, NULL)).seq > 0 AS accepted;
SELECT phase, lap, position, pending FROM lake.owner_state('alpha');

-- cast_durable waits for the seal (the worker seals at once for a waiter).
SELECT (c).cycle > 0 AS sealed, (c).position, (c).lsn > '0/0' AS has_lsn
FROM lake.cast_durable('alpha', 'CognitiveWork', 'Evaluation', '{"step": 5}'::bytea) c;
SELECT phase, lap, position, pending FROM lake.owner_state('alpha');

-- The trajectory: every durable step, in position order.
SELECT position, from_phase, to_phase, lap, convert_from(payload, 'UTF8') AS payload, operation_id
FROM lake.trajectory('alpha');
SELECT position FROM lake.trajectory('alpha', 5);
SELECT count(*) FROM lake.trajectory('beta');
SELECT t.err($$SELECT * FROM lake.trajectory('nobody')$$);
SELECT t.err($$SELECT * FROM lake.trajectory(NULL)$$);
SELECT t.err($$SELECT * FROM lake.trajectory('alpha', NULL)$$);
SELECT t.err($$SELECT * FROM lake.trajectory('alpha', -1)$$);

-- await_durable: the coordinate of a receipt, sealed now or before.
CREATE TEMP TABLE rc AS SELECT lake.cast('beta', 'Planning', 'CognitiveWork', 'b1'::bytea) AS r;
-- A timeout of 0 looks once and does not wait: NULL while the cast is
-- pending, and no seal is hurried for it.
SELECT lake.await_durable(r, 0) IS NULL AS not_yet FROM rc;
SELECT pending FROM lake.owner_state('beta');
CREATE TEMP TABLE coord AS SELECT lake.await_durable(r) AS c FROM rc;
SELECT (c).position, (c).cycle = (SELECT cycle FROM lake.trajectory('beta') WHERE position = 1) AS in_trajectory,
       (c).lsn = (SELECT lsn FROM lake.cycles() WHERE cycle = (c).cycle) AS cycle_lsn
FROM coord;
SELECT (lake.await_durable(r)).position AS again FROM rc;
SELECT (lake.await_durable(r, 0)).position AS with_zero_timeout FROM rc;
SELECT t.err($$SELECT lake.await_durable(NULL)$$);
SELECT t.err($$SELECT lake.await_durable(ROW(NULL, 1)::lake.receipt)$$);
SELECT t.err($$SELECT lake.await_durable(r, -1) FROM rc$$);
-- (The live epoch is not printed: a slow server's worker may have
-- recovered one more of the extension's earlier installations.)
SELECT regexp_replace(t.err($$SELECT lake.await_durable(ROW((r).epoch, 0)::lake.receipt) FROM rc$$),
                      'receipt \(\d+,', 'receipt (<epoch>,');
SELECT regexp_replace(t.err($$SELECT lake.await_durable(ROW((r).epoch, 999999)::lake.receipt) FROM rc$$),
                      'receipt \(\d+,', 'receipt (<epoch>,');
SELECT regexp_replace(t.err($$SELECT lake.await_durable(ROW((r).epoch + 1, 1)::lake.receipt) FROM rc$$),
                      'receipt \(\d+,', 'receipt (<epoch + 1>,');

-- Idempotent casts: a replay returns the original receipt, pending or
-- sealed; other content under the same operation id is LK001.
CREATE TEMP TABLE op1 AS SELECT lake.cast('beta', 'CognitiveWork', 'Evaluation', 'e'::bytea, NULL, 'step-2') AS r;
SELECT (lake.cast('beta', 'CognitiveWork', 'Evaluation', 'e'::bytea, NULL, 'step-2')) = r AS same_receipt FROM op1;
SELECT t.err($$SELECT lake.cast('beta', 'CognitiveWork', 'Evaluation', 'other'::bytea, NULL, 'step-2')$$);
SELECT t.err($$SELECT lake.cast('beta', NULL, NULL, 'e'::bytea, NULL, 'step-2')$$);
-- A new operation id is no replay: its move is checked against the
-- projected phase like any cast's (LK002).
SELECT t.err($$SELECT lake.cast('beta', 'CognitiveWork', 'Evaluation', 'e'::bytea, NULL, 'step-new')$$);
SELECT lake.seal() > 0 AS sealed;
-- After the seal the replay answers from the history, even though the
-- owner has moved on (no LK002 for a replay).
SELECT (lake.cast('beta', 'CognitiveWork', 'Evaluation', 'e'::bytea, NULL, 'step-2')) = r AS same_receipt FROM op1;
SELECT (lake.cast_durable('beta', 'CognitiveWork', 'Evaluation', 'e'::bytea, NULL, 'step-2')).position AS same_position;
SELECT t.err($$SELECT lake.cast('beta', 'CognitiveWork', 'Evaluation', 'x'::bytea, NULL, 'step-2')$$);
SELECT t.err(format('SELECT lake.cast(%L, NULL, NULL, NULL, NULL, %L)', 'beta', repeat('i', 300)));
SELECT position, operation_id FROM lake.trajectory('beta');

-- A no-step and idempotent cast on a lifecycle of its own.
SELECT (lake.cast_durable('gamma', 'Open', 'Doing', NULL, 0, 'g-1')).position;
SELECT * FROM lake.owner_state('gamma');

-- The global log interleaves owners in acceptance order; cycles describe
-- each seal.
SELECT cycle, owner, position, from_phase, to_phase FROM lake.log() ORDER BY cycle, seq;
SELECT count(*) = (SELECT sum(casts) FROM lake.cycles()) AS every_landing_in_a_cycle FROM lake.log();
SELECT count(*) AS cycles, min(cycle) AS first, bool_and(casts > 0) AS none_empty,
       bool_and(stored_bytes > 0) AS stored FROM lake.cycles();
SELECT count(*) FROM lake.log((SELECT max(cycle) FROM lake.cycles()));
-- after_cycle is exclusive: what follows cycle 1, not cycle 1 itself.
SELECT min(cycle) AS first, count(*) = (SELECT count(*) - 1 FROM lake.cycles()) AS all_but_cycle_1
FROM lake.cycles(1);
SELECT min(cycle) AS first, count(*) = (SELECT count(*) FROM lake.log() WHERE cycle > 1) AS all_after_cycle_1
FROM lake.log(1);
SELECT t.err($$SELECT * FROM lake.log(-1)$$);
SELECT t.err($$SELECT * FROM lake.log(NULL)$$);
SELECT t.err($$SELECT * FROM lake.cycles(-1)$$);

-- Sealing needs its own transaction.
BEGIN;
SELECT t.err($$SELECT lake.seal()$$);
ROLLBACK;

-- lake.stats() counts what was sealed.
SELECT casts_pending, cycles_sealed > 0 AS sealed_some, casts_sealed >= cycles_sealed AS casts_ge_cycles,
       sealed_cycle = (SELECT max(cycle) FROM lake.cycles()) AS head
FROM lake.stats();

-- Non-administrators may not define lifecycles or seal; creating an owner
-- needs its tenant (here the default one), not lake_admin.
CREATE ROLE lake_caster LOGIN;
GRANT USAGE ON SCHEMA lake, t TO lake_caster;
SET ROLE lake_caster;
SELECT t.err($$SELECT lake.define_lifecycle('mine', 'A', '{{A,B}}')$$);
SELECT t.err($$SELECT lake.create_owner('mine')$$);
SELECT t.err($$SELECT lake.seal()$$);
RESET ROLE;
DROP OWNED BY lake_caster;
DROP ROLE lake_caster;

-- Seals are fenced against their base: a sealer whose epoch is no longer
-- the durable one (a zombie after a failover, say) writes nothing.
SELECT (lake.cast('beta', 'Evaluation', 'Commit')).seq > 0 AS accepted;
UPDATE lake_data.writer SET epoch = epoch + 1;
\set VERBOSITY terse
SELECT lake.seal();
\set VERBOSITY default
\echo :SQLSTATE
SELECT (SELECT epoch FROM lake_data.writer) = (SELECT epoch FROM lake.stats()) + 1 AS durable_epoch_ahead_of_sealer;
SELECT count(*) AS cycles_after_refusal, (SELECT pending FROM lake.owner_state('beta')) AS still_pending
FROM lake.cycles();
UPDATE lake_data.writer SET epoch = epoch - 1;
SELECT lake.seal() > 0 AS sealed_once_unfenced;
SELECT phase, position, pending FROM lake.owner_state('beta');

-- ... and so is a sealer whose head is not the durable head: a cycle row
-- committed that this server's sealer never published (put in by hand
-- here) makes the seal refuse, 55000, and write nothing; it is not left
-- to the primary key's unique violation.
SELECT (lake.cast('beta', 'Commit', 'Planning')).seq > 0 AS accepted;
INSERT INTO lake_data.cycle
SELECT cycle + 1, epoch, first_seq, last_seq, casts, bytes, stored_bytes, sealed_at, lsn,
       indexed_through, tail_owners, owners, data
FROM lake_data.cycle ORDER BY cycle DESC LIMIT 1;
\set VERBOSITY terse
SELECT lake.seal();
\set VERBOSITY default
\echo :SQLSTATE
SELECT (SELECT pending FROM lake.owner_state('beta')) AS still_pending;
DELETE FROM lake_data.cycle WHERE cycle = (SELECT max(cycle) FROM lake_data.cycle);
SELECT lake.seal() > 0 AS sealed_on_its_head;
SELECT phase, position, pending FROM lake.owner_state('beta');

-- One seal per transaction: a second lake.seal() in the same statement
-- would cut the casts the first one holds (its cycle commits with the
-- transaction) and is refused, 55000; nothing is sealed twice.
SELECT (lake.cast('alpha', NULL, NULL, '\x01'::bytea)).seq IS NOT NULL AS cast;
\set VERBOSITY sqlstate
SELECT lake.seal() FROM generate_series(1, 2);
\set VERBOSITY default
SELECT lake.seal() > 0 AS sealed_once;

-- A durable wait in a statement that already holds the sealing lock (a
-- seal, checkpoint, recover or release earlier in it) could never end: the
-- seal it waits for needs that lock. Refused at once, 55000, and the
-- refused cast_durable accepts nothing.
\set VERBOSITY sqlstate
SELECT lake.seal() IS NULL AS nothing, lake.cast_durable('alpha', NULL, NULL, '\x02'::bytea);
SELECT lake.checkpoint() > 0, lake.await_durable(lake.cast('alpha', NULL, NULL, '\x03'::bytea));
\set VERBOSITY default
SELECT pending FROM lake.owner_state('alpha');
SELECT lake.seal() > 0 AS sealed_the_one;

-- Pending idempotent casts among other owners' casts: the scan for an
-- operation id passes the others and stops after the owner's own, and a
-- receipt lookup stops at the first receipt past it. Each of gamma's two
-- pending operations is found, and so is a pending receipt between them.
SELECT (lake.cast('alpha', NULL, NULL, 'a1'::bytea)).seq IS NOT NULL AS other;
CREATE TEMP TABLE gop1 AS SELECT lake.cast('gamma', NULL, NULL, 'g1'::bytea, NULL, 'g-p1') AS r;
CREATE TEMP TABLE mid AS SELECT lake.cast('alpha', NULL, NULL, 'a2'::bytea) AS r;
CREATE TEMP TABLE gop2 AS SELECT lake.cast('gamma', NULL, NULL, 'g2'::bytea, NULL, 'g-p2') AS r;
SELECT (lake.cast('alpha', NULL, NULL, 'a3'::bytea)).seq IS NOT NULL AS other;
SELECT pending FROM lake.owner_state('gamma');
SELECT lake.cast('gamma', NULL, NULL, 'g1'::bytea, NULL, 'g-p1') = r AS first_found FROM gop1;
SELECT lake.cast('gamma', NULL, NULL, 'g2'::bytea, NULL, 'g-p2') = r AS second_found FROM gop2;
SELECT left(t.err($$SELECT lake.cast('gamma', NULL, NULL, 'x'::bytea, NULL, 'g-p2')$$), 5) AS second_conflict;
SELECT pending FROM lake.owner_state('gamma');
-- Found pending (else it would be LK006), the await asks for the seal.
SELECT (lake.await_durable(r)).position IS NOT NULL AS mid_durable FROM mid;
SELECT pending FROM lake.owner_state('gamma');
SELECT lake.cast('gamma', NULL, NULL, 'g2'::bytea, NULL, 'g-p2') = r AS second_found_sealed FROM gop2;

-- Many pending casts, two owners' interleaved: a pending operation is found
-- through the owner's own records (each from the receipt anchor below it,
-- one every 64 receipts), wherever it lies in the ring.
CREATE TEMP TABLE many AS
SELECT i, lake.cast(CASE WHEN i % 3 = 0 THEN 'gamma' ELSE 'alpha' END, NULL, NULL,
                    convert_to('m' || i, 'UTF8'), NULL, 'm-' || i) AS r
FROM generate_series(1, 300) i;
SELECT pending FROM lake.owner_state('gamma');
SELECT bool_and(lake.cast(CASE WHEN i % 3 = 0 THEN 'gamma' ELSE 'alpha' END, NULL, NULL,
                          convert_to('m' || i, 'UTF8'), NULL, 'm-' || i) = r) AS every_one_found
FROM many;
SELECT left(t.err($$SELECT lake.cast('gamma', NULL, NULL, 'other'::bytea, NULL, 'm-150')$$), 5) AS conflict_deep,
       left(t.err($$SELECT lake.cast('alpha', NULL, NULL, 'other'::bytea, NULL, 'm-1')$$), 5) AS conflict_oldest;
SELECT pending FROM lake.owner_state('gamma');
SELECT lake.seal() > 0 AS sealed_many;
SELECT count(*) AS many_sealed FROM lake.trajectory('gamma') WHERE operation_id LIKE 'm-%';
-- The transaction that sealed a cycle reads no log: its cycle is not
-- durable (nor committed) before that transaction commits, and a DO block
-- that seals and reads on would show a cycle an error can still take away.
SELECT lake.cast('gamma', NULL, NULL) IS NOT NULL AS pending_again;
SELECT max(cycle) AS cycle_before FROM lake.cycles() \gset
DO $$
BEGIN
    PERFORM lake.seal();
    RAISE NOTICE 'log read after the seal: %',
        (SELECT left(t.err('SELECT max(cycle)::text FROM lake.cycles()'), 5));
    RAISE NOTICE 'trajectory read after the seal: %',
        (SELECT left(t.err($q$SELECT count(*)::text FROM lake.trajectory('gamma')$q$), 5));
    RAISE NOTICE 'global log read after the seal: %',
        (SELECT left(t.err('SELECT count(*)::text FROM lake.log()'), 5));
    RAISE EXCEPTION 'the block fails: its seal never happened';
END $$;
SELECT max(cycle) = :cycle_before AS no_new_cycle FROM lake.cycles();
-- Nor is it applied to the live states by an on-demand recovery in the
-- same transaction: that recovery advanced the owner, and the block's
-- error kept the advance while it gave the casts back to be sealed again,
-- numbered after it (a gap in the owner's positions).
\set VERBOSITY terse
DO $$ BEGIN PERFORM lake.seal(); PERFORM * FROM lake.recover('gamma'); RAISE EXCEPTION 'the block fails'; END $$;
\echo :SQLSTATE
DO $$ BEGIN PERFORM lake.seal(); PERFORM lake.release_owner('gamma'); RAISE EXCEPTION 'the block fails'; END $$;
\echo :SQLSTATE
\set VERBOSITY default
SELECT pending FROM lake.owner_state('gamma');
SELECT lake.seal() > :cycle_before AS sealed_on_its_own;
SELECT count(*) = max(position) AS gap_free FROM lake.trajectory('gamma');

-- A ring filled by large payloads is sealed for the cast that finds no room
-- (the worker seals early), not after lake.cycle_interval (1h here) or the
-- cast's queue wait: eight casts of 3 MB through a 16 MB ring.
SELECT lake.create_owner('ring_full');
SELECT cycles_sealed AS sealed_before FROM lake.stats() \gset
SELECT count(lake.cast('ring_full', NULL, NULL, decode(repeat('ab', 3000000), 'hex'))) AS accepted
FROM generate_series(1, 8);
SELECT cycles_sealed > :sealed_before AS sealed_early FROM lake.stats();

-- A move's two phases stay apart in its content identity: a -> bc and
-- ab -> c under one operation id are different content (LK001).
SELECT lake.define_lifecycle('splice', 'a', '{{a,bc},{bc,ab},{ab,c},{c,a}}');
SELECT lake.create_owner('splice_o', 'splice');
SELECT (lake.cast('splice_o', 'a', 'bc', NULL, NULL, 'joined')).seq > 0 AS cast;
SELECT t.err($$SELECT lake.cast('splice_o', 'ab', 'c', NULL, NULL, 'joined')$$);
SELECT lake.seal() > 0 AS sealed;

-- A cycle of more idempotent casts than a seal inserts in one batch (1,000
-- operation rows): every operation's row is written, across the batches,
-- so each replay answers with its original position and adds none.
SELECT lake.create_owner('many_ops');
SELECT count(lake.cast('many_ops', NULL, NULL, NULL, NULL, 'op' || i)) AS accepted
FROM generate_series(1, 2500) i;
SELECT lake.seal() > 0 AS sealed;
SELECT casts FROM lake.cycles() ORDER BY cycle DESC LIMIT 1;
SELECT i, (lake.cast_durable('many_ops', NULL, NULL, NULL, NULL, 'op' || i)).position
FROM unnest(ARRAY[1, 1000, 1001, 2000, 2001, 2500]) i;
SELECT "position", pending FROM lake.owner_state('many_ops');

-- A session that awaits a receipt wakes the worker, which seals at once:
-- the waiter never pays lake.cycle_interval. Each cast below opens a cycle
-- (its first cast wakes the worker, which then sleeps for the interval);
-- the await in the next statement must find it sealed well within 5 s.
SELECT lake.create_owner('wake_w');
SELECT lake.cast('wake_w', 'Planning', 'CognitiveWork') AS r \gset
SELECT lake.await_durable(:'r'::lake.receipt, 5000) IS NOT NULL AS woken_1;
SELECT lake.cast('wake_w', 'CognitiveWork', 'Evaluation') AS r \gset
SELECT lake.await_durable(:'r'::lake.receipt, 5000) IS NOT NULL AS woken_2;
SELECT lake.cast('wake_w', 'Evaluation', 'Commit') AS r \gset
SELECT lake.await_durable(:'r'::lake.receipt, 5000) IS NOT NULL AS woken_3;
