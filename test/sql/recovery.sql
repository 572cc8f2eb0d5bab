-- Snapshots and on-demand recovery (SPEC §5). Restarts, crashes and
-- quarantines found at recovery are in test/t (TAP).

-- lake.checkpoint() snapshots every owner as of the sealed head.
SELECT lake.create_owner('rho');
SELECT (lake.cast_durable('rho', 'Planning', 'CognitiveWork')).position;
SELECT lake.checkpoint() = (SELECT max(cycle) FROM lake.cycles()) AS covers_the_head;
-- (Owners live in shared memory from their first use; one never used has
-- nothing to snapshot and recovers in its initial phase.)
SELECT owners >= (SELECT count(DISTINCT owner) FROM lake.log()) AS every_owner_with_landings,
       stored_bytes > 0 AS stored
FROM lake_data.snapshot ORDER BY cycle DESC LIMIT 1;
SELECT last_snapshot = (SELECT max(cycle) FROM lake_data.snapshot) AS stats_know_it FROM lake.stats();

-- The newest two are kept; older ones are retired.
SELECT (lake.cast_durable('rho', 'CognitiveWork', 'Evaluation')).position;
SELECT lake.checkpoint() > 0 AS second;
SELECT (lake.cast_durable('rho', 'Evaluation', 'Commit')).position;
SELECT lake.checkpoint() > 0 AS third;
SELECT count(*) AS kept FROM lake_data.snapshot;
-- A checkpoint with nothing new sealed covers the same cycle again.
SELECT lake.checkpoint() = (SELECT max(cycle) FROM lake_data.snapshot) AS same_cycle;

-- lake.recover() replays what is durable above each live position: on a
-- healthy server, nothing.
SELECT owner, applied, quarantined FROM lake.recover() WHERE owner IN ('rho', 'alpha', 'beta') ORDER BY owner;
SELECT sum(applied) AS applied_anywhere, bool_or(quarantined) AS any_quarantined FROM lake.recover();
SELECT * FROM lake.recover('rho');
\set VERBOSITY terse
SELECT * FROM lake.recover('nobody');
\echo :SQLSTATE
\set VERBOSITY default
SELECT t.err($$SELECT * FROM lake.recover('')$$);

-- lake.release_owner() on an owner that is not quarantined changes nothing.
SELECT lake.release_owner('rho');
SELECT phase, position, quarantined FROM lake.owner_state('rho');
SELECT lake.release_owner('nobody');
\echo :SQLSTATE
SELECT t.err($$SELECT lake.release_owner(NULL)$$);

-- These write durably and need a transaction of their own (not even a
-- subtransaction, as t.err's exception block makes), and an admin.
BEGIN;
SELECT lake.checkpoint();
\echo :SQLSTATE
ROLLBACK;
SELECT t.err($$SELECT lake.checkpoint()$$);
SELECT t.err($$SELECT * FROM lake.recover()$$);
SELECT t.err($$SELECT lake.release_owner('rho')$$);
CREATE ROLE lake_plain LOGIN;
GRANT USAGE ON SCHEMA lake, t TO lake_plain;
SET ROLE lake_plain;
SELECT lake.checkpoint();
\echo :SQLSTATE
SELECT * FROM lake.recover();
\echo :SQLSTATE
SELECT lake.release_owner('rho');
\echo :SQLSTATE
RESET ROLE;
DROP OWNED BY lake_plain;
DROP ROLE lake_plain;
