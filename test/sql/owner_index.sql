-- The owner index (src/owner_index.h): a trajectory reads the owner's rows
-- of lake_data.owner_block for the closed blocks (64 cycles, fewer when
-- their owner lists hold 1024 entries), then the owner lists of the cycles
-- after the last closed block. Landings in both
-- come back complete and in order, whatever after_position cuts; a damaged
-- or missing index entry is XX001, never a shorter trajectory.
SELECT lake.create_owner(o) FROM unnest('{ix_a,ix_b,ix_c}'::text[]) o;
CREATE FUNCTION t.ix_id(o text) RETURNS int LANGUAGE sql AS
$$ SELECT id FROM lake_data.owner WHERE name = o $$;
-- Messages name cycles and owner ids, which depend on the tests before.
CREATE FUNCTION t.ix_err(q text) RETURNS text LANGUAGE sql AS $$
SELECT regexp_replace(regexp_replace(t.err(q), 'cycle \d+', 'cycle <c>', 'g'),
                      'owner id \d+', 'owner id <id>', 'g')
$$;
-- One cycle per statement: a cast, or two, then lake.seal().
CREATE FUNCTION t.ix_cast(o text, i int) RETURNS void LANGUAGE sql AS
$$ SELECT lake.cast(o, NULL, NULL, int4send(i)) $$;

-- 150 cycles with a landing of ix_a each, every third one of ix_b too;
-- then cycles of ix_c alone until the head is 10 cycles past a block's end.
CREATE FUNCTION t.ix_tail_cycles() RETURNS bigint LANGUAGE sql AS
$$ SELECT cycle - indexed_through FROM lake_data.cycle ORDER BY cycle DESC LIMIT 1 $$;
\o /dev/null
SELECT format('SELECT t.ix_cast(%L, %s)%s', 'ix_a', i,
              CASE WHEN i % 3 = 0 THEN format(', t.ix_cast(%L, %s)', 'ix_b', i) ELSE '' END),
       'SELECT lake.seal()'
FROM generate_series(1, 150) i \gexec
SELECT 'SELECT t.ix_cast(''ix_c'', 0)', 'SELECT lake.seal()'
FROM generate_series(1, (73 - t.ix_tail_cycles()) % 64 + 1) \gexec
\o
SELECT t.ix_tail_cycles() AS tail_cycles;
-- No owner row per cycle: one per owner per closed block of 64 cycles.
SELECT count(*) BETWEEN 2 AND 4 AS blocks_of_ix_a FROM lake_data.owner_block WHERE owner_id = t.ix_id('ix_a');

-- Complete, in order, with the payloads cast, at every cut.
SELECT a AS after_position, count(*), min(position), max(position),
       bool_and(payload = int4send(position::int)) AS payloads,
       count(*) = count(DISTINCT position) AS distinct_positions
FROM unnest('{0,1,63,64,100,149,150}'::bigint[]) a, lake.trajectory('ix_a', a)
GROUP BY a ORDER BY a;
SELECT a AS after_position, count(*), min(position), max(position)
FROM unnest('{0,7,49,50}'::bigint[]) a, lake.trajectory('ix_b', a)
GROUP BY a ORDER BY a;
-- The same landings as the global log shows for each owner.
SELECT o, (SELECT array_agg((cycle, position, seq) ORDER BY position) FROM lake.trajectory(o))
        = (SELECT array_agg((cycle, position, seq) ORDER BY position) FROM lake.log() l WHERE l.owner = o) AS same_as_log
FROM unnest('{ix_a,ix_b,ix_c}'::text[]) o ORDER BY o;

-- Damage. An index entry with a flipped bit fails its checksum.
CREATE TABLE t.ix_block AS
SELECT owner_id, first_cycle, entry FROM lake_data.owner_block
WHERE owner_id = t.ix_id('ix_a') ORDER BY first_cycle LIMIT 1 OFFSET 1;
UPDATE lake_data.owner_block b SET entry = set_bit(b.entry, 45, 1 - get_bit(b.entry, 45))
FROM t.ix_block k WHERE (b.owner_id, b.first_cycle) = (k.owner_id, k.first_cycle);
SELECT t.ix_err($$SELECT count(*) FROM lake.trajectory('ix_a')$$) AS flipped;
-- Another owner's entry in its place is refused too.
UPDATE lake_data.owner_block b SET entry = o.entry
FROM t.ix_block k, lake_data.owner_block o
WHERE (b.owner_id, b.first_cycle) = (k.owner_id, k.first_cycle)
  AND (o.owner_id, o.first_cycle) = (t.ix_id('ix_b'), k.first_cycle);
SELECT t.ix_err($$SELECT count(*) FROM lake.trajectory('ix_a')$$) AS swapped;
-- A missing entry leaves a gap in the positions: refused, not skipped.
DELETE FROM lake_data.owner_block b USING t.ix_block k
WHERE (b.owner_id, b.first_cycle) = (k.owner_id, k.first_cycle);
SELECT t.ix_err($$SELECT count(*) FROM lake.trajectory('ix_a')$$) AS missing;
SELECT t.ix_err($$SELECT count(*) FROM lake.trajectory('ix_a', 140)$$) AS missing_before_the_cut;
INSERT INTO lake_data.owner_block SELECT * FROM t.ix_block;
-- The owner's last entry missing, with none of its landings in the tail
-- after it: the positions read show no gap, but the primary's owner table
-- knows the position the owner reached and by which cycle, so the
-- trajectory is refused, not cut short.
SELECT max(cycle) <= (SELECT indexed_through FROM lake_data.cycle ORDER BY cycle DESC LIMIT 1)
       AS ix_b_wholly_indexed FROM lake.trajectory('ix_b');
CREATE TABLE t.ix_b_last AS
SELECT owner_id, first_cycle, entry FROM lake_data.owner_block
WHERE owner_id = t.ix_id('ix_b') ORDER BY first_cycle DESC LIMIT 1;
DELETE FROM lake_data.owner_block b USING t.ix_b_last k
WHERE (b.owner_id, b.first_cycle) = (k.owner_id, k.first_cycle);
SELECT t.ix_err($$SELECT count(*) FROM lake.trajectory('ix_b')$$) AS last_entry_missing;
SELECT t.ix_err($$SELECT count(*) FROM lake.trajectory('ix_b', 49)$$) AS last_entry_missing_past_the_cut;
INSERT INTO lake_data.owner_block SELECT * FROM t.ix_b_last;
-- An entry that names a cycle without the owner's landings (a cycle of
-- ix_b's entry, its bitmap moved by one) does not add up to its positions.
CREATE TABLE t.ix_b_block AS
SELECT owner_id, first_cycle, entry FROM lake_data.owner_block
WHERE owner_id = t.ix_id('ix_b') ORDER BY first_cycle LIMIT 1;
-- (The bitmap is the entry's last 8 bytes, little-endian.)
CREATE FUNCTION t.ix_shift(entry bytea) RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE
    body bytea := substring(entry FROM 6);
    n int := length(body);
    carry int := 0;
    b int;
BEGIN
    FOR i IN n - 8 .. n - 1 LOOP
        b := get_byte(body, i);
        body := set_byte(body, i, ((b << 1) & 255) | carry);
        carry := b >> 7;
    END LOOP;
    RETURN t.raw_chunk(body);
END $$;
UPDATE lake_data.owner_block b SET entry = t.ix_shift(b.entry)
WHERE (b.owner_id, b.first_cycle) = (SELECT owner_id, first_cycle FROM t.ix_b_block);
SELECT t.ix_err($$SELECT count(*) FROM lake.trajectory('ix_b')$$) AS wrong_cycles;
-- A recovery is not judged by a damaged index (derived from the log): it
-- reads the log itself, applies nothing (the live state is current) and
-- quarantines nobody. It used to quarantine the owner durably.
SELECT owner, applied, quarantined FROM lake.recover('ix_b');
UPDATE lake_data.owner_block b SET entry = k.entry FROM t.ix_b_block k
WHERE (b.owner_id, b.first_cycle) = (k.owner_id, k.first_cycle);
-- A damaged owner list in the unindexed tail: whose landings it holds is
-- unknown, so every trajectory reading it is refused.
CREATE TABLE t.ix_tail AS SELECT cycle, indexed_through, owners FROM lake_data.cycle ORDER BY cycle DESC LIMIT 1;
UPDATE lake_data.cycle c SET owners = set_bit(c.owners, 50, 1 - get_bit(c.owners, 50))
FROM t.ix_tail k WHERE c.cycle = k.cycle;
SELECT t.ix_err($$SELECT count(*) FROM lake.trajectory('ix_c')$$) AS tail_list_damaged;
SELECT t.ix_err($$SELECT count(*) FROM lake.trajectory('ix_a')$$) AS tail_list_damaged_other_owner;
-- It is in every owner's walk: a recovery reads the log past it instead.
SELECT owner, applied, quarantined FROM lake.recover() WHERE owner LIKE 'ix\_%' ORDER BY owner;
UPDATE lake_data.cycle c SET owners = k.owners FROM t.ix_tail k WHERE c.cycle = k.cycle;
-- Where the newest cycle says the index ends is checked too: more than a
-- block back is refused, not read as a longer tail.
UPDATE lake_data.cycle c SET indexed_through = k.cycle - 64 FROM t.ix_tail k WHERE c.cycle = k.cycle;
SELECT t.ix_err($$SELECT count(*) FROM lake.trajectory('ix_a')$$) AS index_end_too_far_back;
SELECT owner, applied, quarantined FROM lake.recover('ix_a');
-- Every owner's walk meets that damage: one WARNING for the whole call.
SELECT count(*) AS all_recovered FROM lake.recover() WHERE owner LIKE 'ix\_%';
UPDATE lake_data.cycle c SET indexed_through = k.indexed_through FROM t.ix_tail k WHERE c.cycle = k.cycle;
-- Repaired, every trajectory reads as before.
SELECT o, count(*) = max(position) AS complete, max(position) FILTER (WHERE o <> 'ix_c')
FROM unnest('{ix_a,ix_b,ix_c}'::text[]) o, lake.trajectory(o)
GROUP BY o ORDER BY o;

-- lake.rebuild_owner_index() rewrites the index from the cycles' owner
-- lists, byte for byte what the seals wrote: after a damaged entry, a
-- missing one and a stray one, every trajectory reads as before.
CREATE TABLE t.ix_all AS SELECT owner_id, first_cycle, entry FROM lake_data.owner_block;
UPDATE lake_data.owner_block b SET entry = set_bit(b.entry, 45, 1 - get_bit(b.entry, 45))
FROM t.ix_block k WHERE (b.owner_id, b.first_cycle) = (k.owner_id, k.first_cycle);
DELETE FROM lake_data.owner_block b USING t.ix_b_last k
WHERE (b.owner_id, b.first_cycle) = (k.owner_id, k.first_cycle);
INSERT INTO lake_data.owner_block VALUES (t.ix_id('ix_c'), 0, '\x00');
SELECT o, t.ix_err(format('SELECT count(*) FROM lake.trajectory(%L)', o)) LIKE 'XX001:%' AS refused
FROM unnest('{ix_a,ix_b,ix_c}'::text[]) o ORDER BY o;
SELECT lake.rebuild_owner_index() = (SELECT count(*) FROM t.ix_all) AS rows_written;
SELECT (SELECT count(*) FROM (TABLE t.ix_all EXCEPT TABLE lake_data.owner_block) d) AS lost,
       (SELECT count(*) FROM (TABLE lake_data.owner_block EXCEPT TABLE t.ix_all) d) AS stray;
SELECT o, count(*) = max(position) AS complete, max(position) FILTER (WHERE o <> 'ix_c')
FROM unnest('{ix_a,ix_b,ix_c}'::text[]) o, lake.trajectory(o)
GROUP BY o ORDER BY o;
-- From nothing at all, the same.
DELETE FROM lake_data.owner_block;
SELECT lake.rebuild_owner_index() = (SELECT count(*) FROM t.ix_all) AS rows_written;
SELECT (SELECT count(*) FROM (TABLE t.ix_all EXCEPT TABLE lake_data.owner_block) d) AS lost,
       (SELECT count(*) FROM (TABLE lake_data.owner_block EXCEPT TABLE t.ix_all) d) AS stray;

-- A closed block with a cycle whose landings and owner list are both
-- damaged cannot be rebuilt: its rows are kept as they are (with a
-- WARNING), so trajectories across that cycle stay refused, never
-- shorter; every other block is rebuilt. Here the cycle of ix_b's last
-- landing, which ix_a's entries name too.
CREATE TABLE t.ix_k AS
SELECT cycle, owners, data FROM lake_data.cycle WHERE cycle = (SELECT max(cycle) FROM lake.trajectory('ix_b'));
CREATE TABLE t.ix_k_block AS
SELECT b.* FROM lake_data.owner_block b, t.ix_k k
WHERE b.first_cycle = (SELECT max(first_cycle) FROM lake_data.owner_block WHERE first_cycle <= k.cycle);
UPDATE lake_data.cycle c SET owners = set_bit(c.owners, 50, 1 - get_bit(c.owners, 50)),
                             data = set_bit(c.data, 100, 1 - get_bit(c.data, 100))
FROM t.ix_k k WHERE c.cycle = k.cycle;
DELETE FROM lake_data.owner_block;
SELECT lake.rebuild_owner_index() = (SELECT count(*) FROM t.ix_all) - (SELECT count(*) FROM t.ix_k_block) AS rows_written;
-- (from nothing: the kept block had no rows left to keep)
SELECT count(*) AS rows_of_the_block FROM lake_data.owner_block b JOIN t.ix_k_block k USING (owner_id, first_cycle);
INSERT INTO lake_data.owner_block SELECT * FROM t.ix_k_block;
UPDATE lake_data.owner_block b SET entry = set_bit(b.entry, 45, 1 - get_bit(b.entry, 45))
FROM t.ix_block k WHERE (b.owner_id, b.first_cycle) = (k.owner_id, k.first_cycle);
SELECT lake.rebuild_owner_index() = (SELECT count(*) FROM t.ix_all) - (SELECT count(*) FROM t.ix_k_block) AS rows_written;
SELECT (SELECT count(*) FROM (TABLE t.ix_all EXCEPT TABLE lake_data.owner_block) d) AS lost,
       (SELECT count(*) FROM (TABLE lake_data.owner_block EXCEPT TABLE t.ix_all) d) AS stray;
SELECT o, t.ix_err(format('SELECT count(*) FROM lake.trajectory(%L)', o)) AS across_the_damaged_cycle
FROM unnest('{ix_a,ix_b}'::text[]) o ORDER BY o;
UPDATE lake_data.cycle c SET owners = k.owners, data = k.data FROM t.ix_k k WHERE c.cycle = k.cycle;
SELECT o, count(*) = max(position) AS complete
FROM unnest('{ix_a,ix_b,ix_c}'::text[]) o, lake.trajectory(o)
GROUP BY o ORDER BY o;

-- A cycle of 1100 owners closes its block at once: the tail stays small
-- however big the cycles (at most 1024 owner entries but the newest's).
SELECT count(lake.create_owner('ix_m' || i)) FROM generate_series(1, 1100) i;
SELECT count(lake.cast('ix_m' || i, NULL, NULL, int4send(i))) FROM generate_series(1, 1100) i;
SELECT lake.seal() IS NOT NULL AS sealed;
SELECT cycle = indexed_through AS closes_its_block, tail_owners FROM lake_data.cycle ORDER BY cycle DESC LIMIT 1;
SELECT count(*) FROM lake_data.owner_block
WHERE first_cycle <= (SELECT max(cycle) FROM lake_data.cycle) AND owner_id IN (SELECT id FROM lake_data.owner WHERE name LIKE 'ix_m%');
SELECT t.ix_cast('ix_m7', 7);
SELECT lake.seal() IS NOT NULL AS sealed;
SELECT t.ix_tail_cycles() AS tail_cycles, (SELECT tail_owners FROM lake_data.cycle ORDER BY cycle DESC LIMIT 1);
SELECT o, string_agg(position || ':' || ('x' || encode(payload, 'hex'))::bit(32)::int, ',' ORDER BY position)
FROM unnest('{ix_m1,ix_m7,ix_m1100}'::text[]) o, lake.trajectory(o) GROUP BY o ORDER BY o;

-- A trajectory costs what its owner's landings cost, not what the log
-- does (SPEC §4): 300 more cycles of another owner add to the blocks it
-- reads of lake_data.cycle, its TOAST and its indexes at most the
-- unindexed tail's (64 cycles), not one per cycle. Counted in a new
-- session, whose pending statistics are this transaction's alone.
CREATE FUNCTION t.ix_cycle_blocks() RETURNS bigint LANGUAGE sql AS $$
SELECT sum(pg_stat_get_xact_blocks_fetched(r))::bigint FROM (
  SELECT 'lake_data.cycle'::regclass::oid AS r
  UNION ALL SELECT reltoastrelid FROM pg_class WHERE oid = 'lake_data.cycle'::regclass
  UNION ALL SELECT indexrelid FROM pg_index WHERE indrelid = 'lake_data.cycle'::regclass) s $$;
\c -
BEGIN;
SELECT count(*) AS ix_b_landings FROM lake.trajectory('ix_b');
SELECT t.ix_cycle_blocks() AS blocks_before \gset
COMMIT;
SELECT count(*) AS cycles_before FROM lake_data.cycle \gset
DO $$
BEGIN
    FOR i IN 1 .. 300 LOOP
        PERFORM t.ix_cast('ix_c', 1);
        PERFORM lake.seal();
        COMMIT;
    END LOOP;
END $$;
SELECT count(*) - :cycles_before AS cycles_added FROM lake_data.cycle;
\c -
BEGIN;
SELECT count(*) AS ix_b_landings FROM lake.trajectory('ix_b');
SELECT t.ix_cycle_blocks() - :blocks_before < 64 AS not_one_block_per_cycle_more;
COMMIT;
