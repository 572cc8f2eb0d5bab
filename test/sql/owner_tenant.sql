-- Owners belong to tenants (SPEC §4, §3 Tenants). A role holding only
-- tenant ot_acme creates, casts to, awaits and reads only ot_acme's owners;
-- ot_globex's owners are 42501 everywhere, and no refusal names ot_globex
-- (or any tenant the caller did not pass).
CREATE ROLE lake_ot_app LOGIN;           -- holds ot_acme only; not lake_admin
CREATE ROLE lake_ot_admin LOGIN IN ROLE lake_admin;   -- administers, holds no tenant
GRANT USAGE ON SCHEMA lake TO lake_ot_app, lake_ot_admin;
GRANT USAGE ON SCHEMA t TO PUBLIC;
-- t.err with receipt and stage numbers masked (they depend on earlier files).
CREATE FUNCTION t.ot_err(q text) RETURNS text LANGUAGE sql AS $$
SELECT regexp_replace(regexp_replace(t.err(q), 'stage [0-9]+', 'stage <id>', 'g'),
                      '\([0-9]+,[0-9]+\)', '(<receipt>)', 'g')
$$;
SELECT lake.grant_tenant('lake_ot_app', 'ot_acme');

-- Fixtures, by the extension's owner: an owner of each tenant, a cast of
-- each sealed into the log, and a pending receipt of globex's owner.
SELECT lake.create_owner('ot_globex_owner', 'kanban', 'ot_globex');
SELECT lake.create_owner('ot_acme_owner', tenant => 'ot_acme');
SELECT name, tenant FROM lake_data.owner WHERE name LIKE 'ot\_%' ORDER BY name;
SELECT t.err($$SELECT lake.create_owner('ot_x', 'kanban', NULL)$$);
SELECT t.err($$SELECT lake.create_owner('ot_x', 'kanban', '')$$);
SELECT t.err(format('SELECT lake.create_owner(%L, %L, %L)', 'ot_x', 'kanban', repeat('t', 64)));
SELECT (lake.cast_durable('ot_globex_owner', 'Planning', 'CognitiveWork', '\x6701'::bytea, NULL, 'ot-g-1')).position;
SELECT (lake.cast_durable('ot_acme_owner', 'Planning', 'CognitiveWork', '\x6101'::bytea)).position;
CREATE TABLE t.ot_receipt AS SELECT (r).epoch, (r).seq FROM lake.cast('ot_globex_owner', NULL, NULL, '\x6702'::bytea) r;
CREATE TABLE t.ot_sealed AS
    SELECT epoch, seq FROM lake.trajectory('ot_globex_owner') WHERE operation_id = 'ot-g-1';
GRANT SELECT ON t.ot_receipt, t.ot_sealed TO PUBLIC;

SET ROLE lake_ot_app;
-- Its own tenant: create without lake_admin, cast, await, read.
SELECT lake.create_owner('ot_app_owner', 'kanban', 'ot_acme');
SELECT (lake.cast_durable('ot_app_owner', 'Planning', 'CognitiveWork')).position;
SELECT (lake.await_durable(lake.cast('ot_acme_owner', 'CognitiveWork', 'Evaluation'))).position;
SELECT phase, lap, position FROM lake.owner_state('ot_acme_owner');
SELECT position, from_phase, to_phase, payload FROM lake.trajectory('ot_acme_owner');
-- Another tenant's owner: 42501, naming only the owner or receipt passed.
SELECT t.err($$SELECT lake.create_owner('ot_mine', 'kanban', 'ot_globex')$$);
SELECT t.err($$SELECT lake.create_owner('ot_mine')$$);
SELECT t.err($$SELECT lake.cast('ot_globex_owner', 'CognitiveWork', 'Evaluation')$$);
SELECT t.err($$SELECT lake.cast('ot_globex_owner', NULL, NULL, NULL, NULL, 'ot-g-1')$$);
SELECT t.err($$SELECT lake.cast('ot_globex_owner', NULL, NULL, NULL, NULL, 'ot-g-future')$$);
SELECT t.err($$SELECT lake.cast_durable('ot_globex_owner', 'CognitiveWork', 'Evaluation')$$);
SELECT t.err($$SELECT * FROM lake.owner_state('ot_globex_owner')$$);
SELECT t.err($$SELECT * FROM lake.trajectory('ot_globex_owner')$$);
SELECT t.ot_err($$SELECT lake.await_durable((SELECT ROW(epoch, seq)::lake.receipt FROM t.ot_receipt), 0)$$);
SELECT t.ot_err($$SELECT lake.await_durable((SELECT ROW(epoch, seq)::lake.receipt FROM t.ot_sealed))$$);
-- An unknown owner is 42704: existence of an owner name is not secret
-- (names are unique across tenants), nothing else about it is told.
SELECT t.err($$SELECT lake.cast('ot_nobody', NULL, NULL)$$);
SELECT t.err($$SELECT * FROM lake.trajectory('ot_nobody')$$);
-- The log holds only ot_acme's landings; cycles() has no payloads and stays open.
SELECT owner, from_phase, to_phase, payload FROM lake.log() WHERE owner IS NULL OR owner NOT LIKE 'ot\_acme%' AND owner NOT LIKE 'ot\_app%';
SELECT owner, count(*) FROM lake.log() GROUP BY owner ORDER BY owner;
SELECT count(*) > 0 AS cycles_visible FROM lake.cycles();
RESET ROLE;

-- More owners in the log than lake.log() looks up one by one (1,024): it
-- reads the rest of the registry at once, and shows the same.
SELECT count(lake.create_owner('ot_many_' || g, 'kanban',
                               CASE WHEN g % 2 = 1 THEN 'ot_acme' ELSE 'ot_globex' END))
FROM generate_series(1, 1100) AS g;
SELECT count(lake.cast('ot_many_' || g, 'Planning', 'CognitiveWork')) FROM generate_series(1, 1100) AS g;
SELECT lake.seal() > 0 AS sealed;
SELECT count(*) AS landings, count(DISTINCT owner) AS owners FROM lake.log() WHERE owner LIKE 'ot\_many\_%';
SET ROLE lake_ot_app;
SELECT count(*) AS landings, bool_and(substr(owner, 9)::int % 2 = 1) AS all_acme
FROM lake.log() WHERE owner LIKE 'ot\_many\_%';
SELECT count(*) AS others FROM lake.log() WHERE owner IS NULL OR owner NOT LIKE 'ot\_acme%' AND owner NOT LIKE 'ot\_app%' AND owner NOT LIKE 'ot\_many\_%';
RESET ROLE;

-- lake_admin alone no longer creates owners: it needs the tenant.
SET ROLE lake_ot_admin;
SELECT t.err($$SELECT lake.create_owner('ot_admin_owner', 'kanban', 'ot_acme')$$);
SELECT lake.grant_tenant('lake_ot_admin', 'ot_acme');
SELECT lake.create_owner('ot_admin_owner', 'kanban', 'ot_acme');
SELECT lake.revoke_tenant('lake_ot_admin', 'ot_acme');
SELECT t.err($$SELECT * FROM lake.owner_state('ot_admin_owner')$$);
RESET ROLE;

-- Nothing the refusals touched moved: globex's owner is where its own casts
-- left it, and its operation id is still free for it.
SELECT phase, lap, position, pending FROM lake.owner_state('ot_globex_owner');
SELECT (lake.cast('ot_globex_owner', 'CognitiveWork', 'Evaluation', NULL, NULL, 'ot-g-future')).seq > 0 AS globex_casts;

-- A grant takes effect at once for casts, and so does its revocation,
-- within one transaction too.
SELECT lake.grant_tenant('lake_ot_app', 'ot_globex');
SET ROLE lake_ot_app;
SELECT phase FROM lake.owner_state('ot_globex_owner');
RESET ROLE;
BEGIN;
SELECT lake.revoke_tenant('lake_ot_app', 'ot_globex');
SET LOCAL ROLE lake_ot_app;
SELECT t.err($$SELECT lake.cast('ot_globex_owner', 'Evaluation', 'Commit')$$);
COMMIT;
-- A revocation rolled back leaves the grant in force.
BEGIN;
SELECT lake.revoke_tenant('lake_ot_app', 'ot_acme');
ROLLBACK;
SET ROLE lake_ot_app;
SELECT phase FROM lake.owner_state('ot_acme_owner');
RESET ROLE;
-- Membership counts, and so does its removal.
CREATE ROLE lake_ot_group NOLOGIN;
SELECT lake.grant_tenant('lake_ot_group', 'ot_globex');
GRANT lake_ot_group TO lake_ot_app;
SET ROLE lake_ot_app;
SELECT phase FROM lake.owner_state('ot_globex_owner');
RESET ROLE;
REVOKE lake_ot_group FROM lake_ot_app;
SET ROLE lake_ot_app;
SELECT t.err($$SELECT * FROM lake.owner_state('ot_globex_owner')$$);
RESET ROLE;

-- No refusal of this file names a tenant the caller did not pass: read()
-- and stage functions refuse by what was passed, not by the data's tenant.
SELECT lake.create_dataset('ot_ds');
SELECT lake.append('ot_ds', 'ot_globex', 'ot-v1', '\x01'::bytea) AS version;
SELECT lake.begin_append('ot_ds', 'ot_globex', 'ot-s1') AS s \gset
SELECT lake.begin_append('ot_ds', 'ot_globex', 'ot-s2') AS s2 \gset
SELECT lake.append_chunk(:s2, 0, '\x02'::bytea);
SELECT lake.commit_append(:s2) AS version;
SET ROLE lake_ot_app;
SELECT t.err($$SELECT lake.read('ot_ds', 1)$$);
SELECT t.err($$SELECT lake.read_operation('ot_ds', 'ot_globex', 'ot-v1')$$);
SELECT t.ot_err(format('SELECT lake.append_chunk(%s, 0, %L::bytea)', :s, '\x01'));
SELECT t.ot_err(format('SELECT lake.commit_append(%s)', :s));
SELECT t.ot_err(format('SELECT lake.abort_append(%s)', :s));
SELECT t.ot_err(format('SELECT lake.append_chunk(%s, 1, %L::bytea)', :s2, '\x01'));
SELECT t.ot_err(format('SELECT lake.commit_append(%s)', :s2));
SELECT t.ot_err(format('SELECT lake.abort_append(%s)', :s2));
RESET ROLE;

-- An owner created in a transaction that rolls back leaves nothing behind:
-- a cast or owner_state inside that transaction is refused (55000), since
-- the live owner table outlives the rollback; the name, free again, gives
-- another tenant an owner of its own, in its initial phase.
SET ROLE lake_ot_app;
BEGIN;
SELECT lake.create_owner('ot_ghost', 'kanban', 'ot_acme');
SELECT t.err($$SELECT lake.cast('ot_ghost', 'Planning', 'CognitiveWork')$$);
SELECT t.err($$SELECT * FROM lake.owner_state('ot_ghost')$$);
ROLLBACK;
RESET ROLE;
SELECT lake.create_owner('ot_ghost', 'kanban', 'ot_globex');
SELECT phase, lap, position, pending FROM lake.owner_state('ot_ghost');
SELECT (lake.cast_durable('ot_ghost', 'Planning', 'CognitiveWork')).position;
SELECT o.tenant, s.phase, s.position FROM lake_data.owner o, lake.owner_state(o.name) s WHERE o.name = 'ot_ghost';

DROP TABLE t.ot_receipt, t.ot_sealed;
DROP FUNCTION t.ot_err(text);
DROP OWNED BY lake_ot_app, lake_ot_admin, lake_ot_group;
DROP ROLE lake_ot_app, lake_ot_admin, lake_ot_group;
