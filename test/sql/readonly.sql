-- Writes in a read-only transaction are refused with 25006, as PostgreSQL's
-- own INSERT and nextval() are: a transaction (or a whole server fenced by
-- an HA tool with default_transaction_read_only) that reads lake writes
-- nothing through it, and no cast is accepted into the cycle buffer.
-- Reads stay open. (A standby refuses casts with 55000: 007_failover.pl.)
SELECT lake.create_dataset('ro_ds');
SELECT lake.create_owner('ro_o');
SELECT lake.append('ro_ds', 'default', 'ro-1', '\x01'::bytea) AS ro_version \gset
SELECT lake.begin_append('ro_ds', 'default', 'ro-s') AS rs \gset
SELECT lake.cast('ro_o', 'Planning', 'CognitiveWork') AS ro_receipt \gset
SELECT lake.seal() > 0 AS sealed;

SET default_transaction_read_only = on;
SELECT left(t.err($$SELECT lake.append('ro_ds', 'default', 'ro-2', '\x02'::bytea)$$), 58) AS append_new;
SELECT left(t.err($$SELECT lake.append('ro_ds', 'default', 'ro-1', '\x01'::bytea)$$), 5) AS append_replay;
SELECT left(t.err($$SELECT lake.begin_append('ro_ds', 'default', 'ro-s2')$$), 5) AS begin_new;
SELECT t.err(format('SELECT lake.append_chunk(%s, 0, %L::bytea)', :rs, '\x01')) AS append_chunk;
SELECT t.err(format('SELECT lake.commit_append(%s)', :rs)) AS commit_append;
SELECT t.err(format('SELECT lake.abort_append(%s)', :rs)) AS abort_append;
SELECT left(t.err($$SELECT lake.cast('ro_o', 'CognitiveWork', 'Evaluation')$$), 5) AS cast;
SELECT left(t.err($$SELECT lake.cast_durable('ro_o', 'CognitiveWork', 'Evaluation')$$), 5) AS cast_durable;
SELECT left(t.err($$SELECT lake.cast('ro_o', NULL, NULL)$$), 5) AS cast_no_step;
-- (The administrative functions run in transactions of their own.)
SELECT lake.seal();
\echo :SQLSTATE
SELECT lake.checkpoint();
\echo :SQLSTATE
SELECT * FROM lake.recover();
\echo :SQLSTATE
SELECT lake.release_owner('ro_o');
\echo :SQLSTATE
SELECT lake.rebuild_owner_index();
\echo :SQLSTATE
-- Each refusal names the lake call, not the statement it would run.
SELECT t.err($$SELECT lake.create_owner('ro_o2')$$) AS create_owner;
SELECT t.err($$SELECT lake.create_dataset('ro_ds2')$$) AS create_dataset;
SELECT t.err($$SELECT lake.define_lifecycle('ro_lc', 'a', ARRAY[['a', 'b']])$$) AS define_lifecycle;
SELECT t.err($$SELECT lake.grant_tenant('postgres', 'ro_t')$$) AS grant_tenant;
SELECT t.err($$SELECT lake.revoke_tenant('postgres', 'ro_t')$$) AS revoke_tenant;
-- Reads are served.
SELECT lake.read('ro_ds', :ro_version) = '\x01'::bytea AS read;
SELECT (lake.await_durable(:'ro_receipt')).position AS awaited_position;
SELECT phase, position, pending FROM lake.owner_state('ro_o');
SELECT count(*) AS landings FROM lake.trajectory('ro_o');
RESET default_transaction_read_only;

-- Nothing was written or accepted.
SELECT count(*) AS versions FROM lake.versions('ro_ds');
SELECT phase, position, pending FROM lake.owner_state('ro_o');
SELECT lake.seal() IS NULL AS nothing_to_seal;
SELECT count(*) AS stages FROM lake_data.stage s JOIN lake_data.dataset d ON d.id = s.dataset_id
WHERE d.name = 'ro_ds';
SELECT lake.abort_append(:rs);
