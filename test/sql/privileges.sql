-- Privileges (SPEC §3 "Tenants", §1 Errors; README "Tenants"; SECURITY.md).
-- The whole public API run as roles holding only the documented grants,
-- as a table-driven matrix: every function × every kind of role, each cell
-- 'ok' or the SQLSTATE of the refusal. Runs after the other files in the
-- same database: every name here starts with p_ / lake_p_, and nothing
-- printed depends on what the other files did.

-- The roles of the matrix.
--   none    LOGIN only: not even USAGE on schema lake
--   usage   GRANT USAGE ON SCHEMA lake, nothing else
--   tenant  USAGE + lake.grant_tenant(.., 'p_acme')
--   member  LOGIN only, but a member of lake_p_group, which holds
--           USAGE + lake.grant_tenant(.., 'p_acme')
--   admin   member of lake_admin, + USAGE
--   owner   the extension's owner, a superuser (this session's user)
CREATE ROLE lake_p_none LOGIN;
CREATE ROLE lake_p_usage LOGIN;
CREATE ROLE lake_p_tenant LOGIN;
CREATE ROLE lake_p_group NOLOGIN;
CREATE ROLE lake_p_member LOGIN IN ROLE lake_p_group;
CREATE ROLE lake_p_admin LOGIN IN ROLE lake_admin;
CREATE ROLE lake_p_scratch NOLOGIN;        -- the target of grant/revoke in the matrix
GRANT USAGE ON SCHEMA lake TO lake_p_usage, lake_p_tenant, lake_p_group, lake_p_admin;
GRANT USAGE ON SCHEMA t TO PUBLIC;         -- the helper t.err and the fixtures below
SELECT lake.grant_tenant('lake_p_tenant', 'p_acme');
SELECT lake.grant_tenant('lake_p_group', 'p_acme');
-- The session user created the extension: it is the extension's owner.
SELECT e.extowner = r.oid AS session_user_owns_lake, r.rolsuper AS owner_is_superuser
FROM pg_extension e, pg_roles r WHERE e.extname = 'lake' AND r.rolname = session_user;

-- Fixtures, made by the owner: a dataset with one version per tenant, an
-- owner with a cast, and for every role two stages of tenant p_acme (one to
-- upload to and commit, one to abort).
CREATE FUNCTION t.p_me() RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN current_user LIKE 'lake\_p\_%' THEN substr(current_user, 8) ELSE 'owner' END
$$;
SELECT lake.create_dataset('p_ds');
SELECT lake.append('p_ds', 'p_acme', 'p-fix-acme', '\x0a'::bytea) AS version;
SELECT lake.append('p_ds', 'p_globex', 'p-fix-globex', '\x0b'::bytea) AS version;
SELECT lake.create_owner('p_owner', 'kanban', 'p_acme');
CREATE TABLE t.p_receipt AS SELECT (r).epoch, (r).seq FROM lake.cast('p_owner', NULL, NULL, '\x00'::bytea) r;
CREATE TABLE t.p_role (ord int, label text, role text);
INSERT INTO t.p_role VALUES (1, 'none', 'lake_p_none'), (2, 'usage', 'lake_p_usage'),
    (3, 'tenant', 'lake_p_tenant'), (4, 'member', 'lake_p_member'),
    (5, 'admin', 'lake_p_admin'), (6, 'owner', NULL);
CREATE TABLE t.p_stage (label text, kind text, stage bigint);
INSERT INTO t.p_stage
SELECT r.label, k.kind, lake.begin_append('p_ds', 'p_acme', 'p-' || k.kind || '-' || r.label)
FROM t.p_role r, (VALUES ('chunk'), ('abort')) k(kind) ORDER BY r.ord, k.kind;
SELECT count(DISTINCT stage) AS stages FROM t.p_stage;

-- The cases: one call of every public function, with arguments that
-- succeed for a role allowed to make it (names made unique per role).
CREATE TABLE t.p_case (ord int, fn text, sql text);
INSERT INTO t.p_case VALUES
 ( 1, 'create_dataset',   $$SELECT lake.create_dataset('p_ds_' || t.p_me())$$),
 ( 2, 'append',           $$SELECT lake.append('p_ds', 'p_acme', 'p-a-' || t.p_me(), '\x01'::bytea)$$),
 ( 3, 'read',             $$SELECT lake.read('p_ds', 1)$$),
 ( 4, 'read_operation',   $$SELECT lake.read_operation('p_ds', 'p_acme', 'p-fix-acme')$$),
 ( 5, 'versions',         $$SELECT * FROM lake.versions('p_ds')$$),
 ( 6, 'begin_append',     $$SELECT lake.begin_append('p_ds', 'p_acme', 'p-b-' || t.p_me())$$),
 ( 7, 'append_chunk',     $$SELECT lake.append_chunk((SELECT stage FROM t.p_stage WHERE label = t.p_me() AND kind = 'chunk'), 0, '\x02'::bytea)$$),
 ( 8, 'commit_append',    $$SELECT lake.commit_append((SELECT stage FROM t.p_stage WHERE label = t.p_me() AND kind = 'chunk'))$$),
 ( 9, 'abort_append',     $$SELECT lake.abort_append((SELECT stage FROM t.p_stage WHERE label = t.p_me() AND kind = 'abort'))$$),
 (10, 'grant_tenant',     $$SELECT lake.grant_tenant('lake_p_scratch', 'p_scratch_' || t.p_me())$$),
 (11, 'revoke_tenant',    $$SELECT lake.revoke_tenant('lake_p_scratch', 'p_scratch_' || t.p_me())$$),
 (12, 'define_lifecycle', $$SELECT lake.define_lifecycle('p_lc_' || t.p_me(), 'Open', '{{Open,Done},{Done,Open}}')$$),
 (13, 'create_owner',     $$SELECT lake.create_owner('p_o_' || t.p_me(), 'kanban', 'p_acme')$$),
 (14, 'cast',             $$SELECT lake.cast('p_owner', NULL, NULL, '\x03'::bytea)$$),
 (15, 'await_durable',    $$SELECT lake.await_durable((SELECT ROW(epoch, seq)::lake.receipt FROM t.p_receipt))$$),
 (16, 'cast_durable',     $$SELECT lake.cast_durable('p_owner', NULL, NULL, '\x04'::bytea)$$),
 (17, 'owner_state',      $$SELECT * FROM lake.owner_state('p_owner')$$),
 (18, 'seal',             $$SELECT lake.seal()$$),
 (19, 'checkpoint',       $$SELECT lake.checkpoint()$$),
 (20, 'recover',          $$SELECT * FROM lake.recover('p_owner')$$),
 (21, 'release_owner',    $$SELECT lake.release_owner('p_owner')$$),
 (22, 'trajectory',       $$SELECT * FROM lake.trajectory('p_owner')$$),
 (23, 'log',              $$SELECT * FROM lake.log()$$),
 (24, 'cycles',           $$SELECT * FROM lake.cycles()$$),
 (25, 'admission',        $$SELECT * FROM lake.admission()$$),
 (26, 'stats',            $$SELECT * FROM lake.stats()$$),
 (27, 'train_dictionary', $$SELECT lake.train_dictionary('p_ds')$$),
 (28, 'rebuild_owner_index', $$SELECT lake.rebuild_owner_index()$$),
 (29, 'lifecycle_definition', $$SELECT * FROM lake.lifecycle_definition('kanban')$$);
-- Every public function of the install script has its case (the trigger
-- functions lifecycle_changed and lifecycle_check are not callable).
SELECT p.proname AS function_without_case FROM pg_proc p
WHERE p.pronamespace = 'lake'::regnamespace AND p.prorettype <> 'trigger'::regtype
  AND p.proname NOT IN (SELECT fn FROM t.p_case);

CREATE TABLE t.p_result (label text, ord int, res text);
GRANT SELECT ON t.p_case, t.p_stage, t.p_receipt TO PUBLIC;
GRANT INSERT ON t.p_result TO PUBLIC;
-- Run every case of a case table, in order, as the current role, and
-- record the outcomes in a result table (both in schema t).
CREATE FUNCTION t.p_run(cases text, results text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    c record;
BEGIN
    FOR c IN EXECUTE format('SELECT ord, sql FROM t.%I ORDER BY ord', cases) LOOP
        EXECUTE format('INSERT INTO t.%I VALUES ($1, $2, $3)', results)
            USING t.p_me(), c.ord, t.err(c.sql);
    END LOOP;
END $$;
-- … once as each role of a list ('none': the session's own superuser).
CREATE FUNCTION t.p_run_as(roles text[], cases text, results text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY roles LOOP
        PERFORM pg_catalog.set_config('role', r, true);
        PERFORM t.p_run(cases, results);
    END LOOP;
    PERFORM pg_catalog.set_config('role', 'none', true);
END $$;

SELECT t.p_run_as('{lake_p_none,lake_p_usage,lake_p_tenant,lake_p_member,lake_p_admin,none}',
                  'p_case', 'p_result');

-- THE MATRIX. 25001 for seal/checkpoint/recover/release_owner/
-- rebuild_owner_index means the
-- privilege check passed: those run only in a transaction of their own, and
-- t.err runs them inside one (they are run at top level below); so does
-- 55000 for train_dictionary (p_ds has too few payloads to train on).
-- Documented: tenant functions (append … abort_append) and the owner
-- functions (create_owner, cast, await_durable, cast_durable, owner_state,
-- trajectory; p_owner is of tenant p_acme) need a grant of the tenant (42501
-- otherwise); administrative ones (create_dataset, grant/revoke_tenant,
-- define_lifecycle, lifecycle_definition, seal, checkpoint, recover,
-- release_owner, train_dictionary, rebuild_owner_index) need
-- lake_admin, the owner or a superuser; every call without USAGE on schema
-- lake is 42501. The log (only the caller's tenants' landings), cycles and
-- the statistics: any role with USAGE.
SELECT c.fn,
       max(x.code) FILTER (WHERE x.label = 'none')   AS none,
       max(x.code) FILTER (WHERE x.label = 'usage')  AS usage,
       max(x.code) FILTER (WHERE x.label = 'tenant') AS tenant,
       max(x.code) FILTER (WHERE x.label = 'member') AS member,
       max(x.code) FILTER (WHERE x.label = 'admin')  AS admin,
       max(x.code) FILTER (WHERE x.label = 'owner')  AS owner
FROM t.p_case c
JOIN (SELECT label, ord, CASE WHEN res = 'ok' THEN 'ok' ELSE split_part(res, ':', 1) END AS code
      FROM t.p_result) x ON x.ord = c.ord
GROUP BY c.ord, c.fn ORDER BY c.ord;
SELECT count(*) AS cells FROM t.p_result;
-- Which refusal each one was.
-- (Stage ids and receipts masked: they depend on the files run before.)
SELECT regexp_replace(regexp_replace(res, 'stage [0-9]+', 'stage <id>'),
                      'receipt \([0-9]+,[0-9]+\)', 'receipt <receipt>') AS refusal,
       count(*) AS cells, string_agg(DISTINCT label, ',') AS roles
FROM t.p_result WHERE res <> 'ok' GROUP BY 1 ORDER BY 1;

-- The transaction-of-its-own functions at top level: administrators may.
SET ROLE lake_p_admin;
SELECT count(*) AS seal_ran FROM (SELECT lake.seal()) s;
SELECT count(*) AS checkpoint_ran FROM (SELECT lake.checkpoint()) s;
SELECT owner, applied, quarantined FROM lake.recover('p_owner');
SELECT lake.release_owner('p_owner');
SELECT lake.rebuild_owner_index() >= 0 AS rebuilt;
RESET ROLE;
SELECT count(*) AS seal_ran FROM (SELECT lake.seal()) s;
SELECT count(*) AS checkpoint_ran FROM (SELECT lake.checkpoint()) s;
SELECT owner, applied, quarantined FROM lake.recover('p_owner');
SELECT lake.release_owner('p_owner');
SELECT lake.rebuild_owner_index() >= 0 AS rebuilt;
-- … and nobody else, at top level either.
\set VERBOSITY terse
SET ROLE lake_p_tenant;
SELECT lake.seal();
\echo :SQLSTATE
SELECT lake.checkpoint();
\echo :SQLSTATE
SELECT * FROM lake.recover();
\echo :SQLSTATE
SELECT lake.release_owner('p_owner');
\echo :SQLSTATE
SELECT lake.rebuild_owner_index();
\echo :SQLSTATE
RESET ROLE;
\set VERBOSITY default

-- What the matrix wrote: each allowed role's append and staged commit,
-- nothing for the others; the abort stages of the allowed roles are gone.
SELECT version, tenant, operation_id FROM lake.versions('p_ds') ORDER BY version;
SELECT s.label, s.kind, EXISTS (SELECT 1 FROM lake_data.stage g WHERE g.id = s.stage) AS still_open
FROM t.p_stage s JOIN t.p_role r ON r.label = s.label ORDER BY r.ord, s.kind;
SELECT name FROM lake_data.dataset WHERE name LIKE 'p\_ds\_%' ORDER BY name;
SELECT name FROM lake_data.lifecycle WHERE name LIKE 'p\_lc\_%' ORDER BY name;
SELECT name FROM lake_data.owner WHERE name LIKE 'p\_o\_%' ORDER BY name;
SELECT count(*) AS scratch_grants_left FROM lake_data.tenant_grant WHERE tenant LIKE 'p\_scratch\_%';

-- Tables and sequences are closed to every role but the owner: SELECT,
-- INSERT, UPDATE, DELETE and LOCK on every table, SELECT and nextval on
-- every sequence of schema lake, as each non-owner role.
CREATE TABLE t.p_direct (label text, rel text, res text);
GRANT INSERT ON t.p_direct TO PUBLIC;
CREATE FUNCTION t.p_direct() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r record;
    q text;
    codes text;
BEGIN
    FOR r IN
        SELECT c.relname, c.relkind,
               (SELECT a.attname FROM pg_attribute a
                WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                  AND a.attidentity = '' ORDER BY a.attnum LIMIT 1) AS col
        FROM pg_class c
        WHERE c.relnamespace = 'lake_data'::regnamespace AND c.relkind IN ('r', 'S')
        ORDER BY c.relname
    LOOP
        codes := NULL;
        FOREACH q IN ARRAY CASE r.relkind
            WHEN 'r' THEN ARRAY[
                format('SELECT * FROM lake_data.%I', r.relname),
                format('INSERT INTO lake_data.%I DEFAULT VALUES', r.relname),
                format('UPDATE lake_data.%I SET %I = %I WHERE false', r.relname, r.col, r.col),
                format('DELETE FROM lake_data.%I WHERE false', r.relname),
                format('LOCK TABLE lake_data.%I IN ACCESS SHARE MODE', r.relname)]
            ELSE ARRAY[
                format('SELECT * FROM lake_data.%I', r.relname),
                format('SELECT pg_catalog.nextval(%L)', 'lake_data.' || r.relname)] END
        LOOP
            codes := concat_ws('/', codes, split_part(t.err(q), ':', 1));
        END LOOP;
        INSERT INTO t.p_direct VALUES (t.p_me(), r.relname, codes);
    END LOOP;
END $$;
SET ROLE lake_p_none;
SELECT t.p_direct();
SET ROLE lake_p_usage;
SELECT t.p_direct();
SET ROLE lake_p_tenant;
SELECT t.p_direct();
SET ROLE lake_p_member;
SELECT t.p_direct();
SET ROLE lake_p_admin;
SELECT t.p_direct();
RESET ROLE;
-- tables: SELECT/INSERT/UPDATE/DELETE/LOCK; sequences: SELECT/nextval
SELECT d.rel,
       max(d.res) FILTER (WHERE d.label = 'none')   AS none,
       max(d.res) FILTER (WHERE d.label = 'usage')  AS usage,
       max(d.res) FILTER (WHERE d.label = 'tenant') AS tenant,
       max(d.res) FILTER (WHERE d.label = 'member') AS member,
       max(d.res) FILTER (WHERE d.label = 'admin')  AS admin
FROM t.p_direct d GROUP BY d.rel ORDER BY d.rel;
-- No relation of schema lake or lake_data grants anything to anyone but its
-- owner, and lake_admin holds no privilege on any of them.
SELECT c.relname, a.grantee::regrole, a.privilege_type
FROM pg_class c, aclexplode(c.relacl) a
WHERE c.relnamespace IN ('lake'::regnamespace, 'lake_data'::regnamespace) AND a.grantee <> c.relowner;
SELECT count(*) AS lake_admin_privileges FROM pg_class c
WHERE c.relnamespace IN ('lake'::regnamespace, 'lake_data'::regnamespace) AND c.relkind IN ('r', 'S', 'v', 'm')
  AND has_table_privilege('lake_admin', c.oid, 'SELECT,INSERT,UPDATE,DELETE,TRUNCATE,REFERENCES,TRIGGER');
-- The schema: no USAGE or CREATE for PUBLIC; lake_admin has USAGE (so its
-- members reach the administrative functions) but not CREATE.
SELECT has_schema_privilege('public', 'lake', 'USAGE') AS public_usage,
       has_schema_privilege('public', 'lake', 'CREATE') AS public_create,
       has_schema_privilege('lake_admin', 'lake', 'USAGE') AS lake_admin_usage,
       has_schema_privilege('lake_admin', 'lake', 'CREATE') AS lake_admin_create;
-- The tables' schema: USAGE for its owner, the extension's owner, alone.
SELECT n.nspowner = e.extowner AS owned_by_extension_owner,
       array_agg(a.grantee::regrole ORDER BY a.grantee) FILTER (WHERE a.grantee <> n.nspowner) AS others
FROM pg_namespace n LEFT JOIN LATERAL aclexplode(n.nspacl) a ON true, pg_extension e
WHERE n.nspname = 'lake_data' AND e.extname = 'lake' GROUP BY n.nspowner, e.extowner;

-- Tenant isolation: the data of tenant p_globex (a version, an open stage
-- with a chunk, a committed stage) against roles granted p_acme only.
INSERT INTO t.p_stage VALUES
    ('globex', 'open', lake.begin_append('p_ds', 'p_globex', 'p-g-open')),
    ('globex', 'committed', lake.begin_append('p_ds', 'p_globex', 'p-g-committed'));
SELECT lake.append_chunk(stage, 0, '\x0c'::bytea) FROM t.p_stage WHERE label = 'globex' ORDER BY kind;
SELECT lake.commit_append(stage) AS committed_version FROM t.p_stage WHERE label = 'globex' AND kind = 'committed';
CREATE TABLE t.p_iso_case (ord int, what text, sql text);
GRANT SELECT ON t.p_iso_case TO PUBLIC;
INSERT INTO t.p_iso_case VALUES
 ( 1, 'append',                 $$SELECT lake.append('p_ds', 'p_globex', 'p-x', '\x01'::bytea)$$),
 ( 2, 'append (replay)',        $$SELECT lake.append('p_ds', 'p_globex', 'p-fix-globex', '\x0b'::bytea)$$),
 ( 3, 'read',                   $$SELECT lake.read('p_ds', 2)$$),
 ( 4, 'read_operation',         $$SELECT lake.read_operation('p_ds', 'p_globex', 'p-fix-globex')$$),
 ( 5, 'begin_append (new)',     $$SELECT lake.begin_append('p_ds', 'p_globex', 'p-x')$$),
 ( 6, 'begin_append (resume)',  $$SELECT lake.begin_append('p_ds', 'p_globex', 'p-g-open')$$),
 ( 7, 'append_chunk',           $$SELECT lake.append_chunk((SELECT stage FROM t.p_stage WHERE label = 'globex' AND kind = 'open'), 1, '\x0d'::bytea)$$),
 ( 8, 'append_chunk (resend)',  $$SELECT lake.append_chunk((SELECT stage FROM t.p_stage WHERE label = 'globex' AND kind = 'open'), 0, '\x0c'::bytea)$$),
 ( 9, 'commit_append',          $$SELECT lake.commit_append((SELECT stage FROM t.p_stage WHERE label = 'globex' AND kind = 'open'))$$),
 (10, 'abort_append',           $$SELECT lake.abort_append((SELECT stage FROM t.p_stage WHERE label = 'globex' AND kind = 'open'))$$),
 (11, 'append_chunk (committed stage)',  $$SELECT lake.append_chunk((SELECT stage FROM t.p_stage WHERE label = 'globex' AND kind = 'committed'), 1, '\x0d'::bytea)$$),
 (12, 'commit_append (committed stage)', $$SELECT lake.commit_append((SELECT stage FROM t.p_stage WHERE label = 'globex' AND kind = 'committed'))$$),
 (13, 'abort_append (committed stage)',  $$SELECT lake.abort_append((SELECT stage FROM t.p_stage WHERE label = 'globex' AND kind = 'committed'))$$);
CREATE TABLE t.p_iso (label text, ord int, res text);
GRANT INSERT ON t.p_iso TO PUBLIC;
SELECT t.p_run_as('{lake_p_usage,lake_p_tenant,lake_p_member,lake_p_admin}', 'p_iso_case', 'p_iso');
SELECT c.what,
       max(x.code) FILTER (WHERE x.label = 'usage')  AS usage,
       max(x.code) FILTER (WHERE x.label = 'tenant') AS tenant,
       max(x.code) FILTER (WHERE x.label = 'member') AS member,
       max(x.code) FILTER (WHERE x.label = 'admin')  AS admin
FROM t.p_iso_case c
JOIN (SELECT label, ord, CASE WHEN res = 'ok' THEN 'ok' ELSE split_part(res, ':', 1) END AS code
      FROM t.p_iso) x ON x.ord = c.ord
GROUP BY c.ord, c.what ORDER BY c.ord;
-- Always the tenant's refusal, naming only what the caller passed (the
-- tenant, version or stage), never the data's tenant otherwise — and never a
-- message that tells whether the stage was committed or as which version.
SELECT DISTINCT regexp_replace(res, 'stage [0-9]+', 'stage <id>') AS res FROM t.p_iso ORDER BY 1;
-- Nothing was written or removed: the open stage still holds only its one
-- chunk, the version list is as it was.
SELECT count(*) AS open_stage_chunks FROM lake_data.chunk
WHERE blob = (SELECT stage FROM t.p_stage WHERE label = 'globex' AND kind = 'open');
SELECT version, tenant, operation_id FROM lake.versions('p_ds') WHERE tenant = 'p_globex' ORDER BY version;
-- versions() lists only the tenants granted to the caller.
CREATE TABLE t.p_seen (label text, seen text);
GRANT INSERT ON t.p_seen TO PUBLIC;
CREATE FUNCTION t.p_seen() RETURNS void LANGUAGE sql AS $$
    INSERT INTO t.p_seen
    SELECT t.p_me(), coalesce(string_agg(DISTINCT tenant, ','), '(none)') FROM lake.versions('p_ds')
$$;
SET ROLE lake_p_usage;
SELECT t.p_seen();
SET ROLE lake_p_tenant;
SELECT t.p_seen();
SET ROLE lake_p_member;
SELECT t.p_seen();
SET ROLE lake_p_admin;
SELECT t.p_seen();
RESET ROLE;
SELECT t.p_seen();
SELECT s.label, s.seen FROM t.p_seen s JOIN t.p_role r USING (label) ORDER BY r.ord;

-- What a role without the tenant can still learn (names are not secret):
-- whether a dataset exists, and whether a version number exists.
SET ROLE lake_p_tenant;
SELECT t.err($$SELECT lake.read('p_ds', 2)$$);
SELECT t.err($$SELECT lake.read('p_ds', 999999)$$);
SELECT t.err($$SELECT lake.read('p_no_such_ds', 1)$$);
SELECT t.err($$SELECT lake.versions('p_no_such_ds')$$);
-- … a digest mismatch is not: the tenant is checked first …
SELECT t.err($$SELECT lake.append('p_ds', 'p_globex', 'p-y', '\x01'::bytea, sha256('\x02'))$$);
-- … but an unknown stage is (ids come from one sequence).
SELECT t.err($$SELECT lake.append_chunk(999999999, 0, '\x01'::bytea)$$);
RESET ROLE;
-- The tenant is checked before the admission permit is taken: a refused
-- append holds no slot, even when the refusal is caught in a
-- subtransaction and the transaction goes on.
BEGIN;
SET LOCAL ROLE lake_p_usage;
SELECT t.err($$SELECT lake.append('p_ds', 'p_globex', 'p-z', '\x010203'::bytea)$$);
SELECT slots_in_use, bytes_reserved FROM lake.admission();
COMMIT;
SELECT slots_in_use, bytes_reserved FROM lake.admission();

-- lake_admin does not by itself see tenant data — but it administers the
-- grants, its own included: an administrator can give itself any tenant.
SET ROLE lake_p_admin;
SELECT t.err($$SELECT lake.read('p_ds', 2)$$);
SELECT lake.grant_tenant('lake_p_admin', 'p_globex');
SELECT lake.read('p_ds', 2);
SELECT lake.revoke_tenant('lake_p_admin', 'p_globex');
SELECT t.err($$SELECT lake.read('p_ds', 2)$$);
RESET ROLE;

-- revoke_tenant takes effect at once — within the same transaction, and
-- for a stage begun while the grant held.
BEGIN;
SET LOCAL ROLE lake_p_tenant;
SELECT lake.read('p_ds', 1);
SELECT lake.begin_append('p_ds', 'p_acme', 'p-revoked') AS s \gset
RESET ROLE;
SELECT lake.revoke_tenant('lake_p_tenant', 'p_acme');
SET LOCAL ROLE lake_p_tenant;
SELECT t.err($$SELECT lake.read('p_ds', 1)$$);
SELECT regexp_replace(t.err(format('SELECT lake.append_chunk(%s, 0, %L::bytea)', :s, '\x01')), 'stage [0-9]+', 'stage <id>') AS err;
SELECT regexp_replace(t.err(format('SELECT lake.abort_append(%s)', :s)), 'stage [0-9]+', 'stage <id>') AS err;
SELECT count(*) AS visible FROM lake.versions('p_ds');
RESET ROLE;
SELECT lake.grant_tenant('lake_p_tenant', 'p_acme');
SET LOCAL ROLE lake_p_tenant;
SELECT lake.read('p_ds', 1);
SELECT lake.abort_append(:s);
COMMIT;
-- And across sessions' transactions.
SELECT lake.revoke_tenant('lake_p_tenant', 'p_acme');
SET ROLE lake_p_tenant;
SELECT t.err($$SELECT lake.read_operation('p_ds', 'p_acme', 'p-fix-acme')$$);
RESET ROLE;

-- Membership: grants follow it, and so does its removal. lake_p_member
-- gets USAGE of its own first, so what is refused is the tenant.
GRANT USAGE ON SCHEMA lake TO lake_p_member;
SET ROLE lake_p_member;
SELECT lake.read('p_ds', 1);
RESET ROLE;
REVOKE lake_p_group FROM lake_p_member;
SET ROLE lake_p_member;
SELECT t.err($$SELECT lake.read('p_ds', 1)$$);
SELECT count(*) AS visible FROM lake.versions('p_ds');
RESET ROLE;
-- A grant made to the group after the fact serves its members at once.
GRANT lake_p_group TO lake_p_member;
SELECT lake.grant_tenant('lake_p_group', 'p_globex');
SET ROLE lake_p_member;
SELECT lake.read('p_ds', 2);
RESET ROLE;
SELECT lake.revoke_tenant('lake_p_group', 'p_globex');
-- NOINHERIT members: like a GRANT, a tenant grant serves them only after
-- SET ROLE to the group.
CREATE ROLE lake_p_noinherit LOGIN NOINHERIT IN ROLE lake_p_group;
GRANT USAGE ON SCHEMA lake TO lake_p_noinherit;
SET ROLE lake_p_noinherit;
SELECT t.err($$SELECT lake.read('p_ds', 1)$$);
SET ROLE lake_p_group;
SELECT lake.read('p_ds', 1);
RESET ROLE;
-- The lists follow the same rule: without SET ROLE the NOINHERIT member
-- lists none of the group's tenant's versions.
SET ROLE lake_p_noinherit;
SELECT count(*) AS noinherit_versions FROM lake.versions('p_ds');
SET ROLE lake_p_group;
SELECT count(*) > 0 AS group_versions FROM lake.versions('p_ds');
RESET ROLE;
-- lake_admin is checked like PostgreSQL's predefined roles
-- (has_privs_of_role): a NOINHERIT member must SET ROLE lake_admin first.
-- A member needs no USAGE on schema lake of its own: lake_admin has it.
CREATE ROLE lake_p_admin_noinherit LOGIN NOINHERIT IN ROLE lake_admin;
GRANT USAGE ON SCHEMA lake TO lake_p_admin_noinherit;
CREATE ROLE lake_p_admin_bare LOGIN IN ROLE lake_admin;
SET ROLE lake_p_admin_noinherit;
SELECT t.err($$SELECT lake.create_dataset('p_ds_noinherit')$$);
SET ROLE lake_admin;
SELECT t.err($$SELECT lake.create_dataset('p_ds_noinherit')$$);
SET ROLE lake_p_admin_bare;
SELECT t.err($$SELECT lake.create_dataset('p_ds_bare')$$);
RESET ROLE;

-- A grant names its role by OID and does not depend on it: dropping the
-- role leaves the row (revoke_tenant takes the OID to remove it).
CREATE ROLE lake_p_gone NOLOGIN;
SELECT lake.grant_tenant('lake_p_gone', 'p_gone');
SELECT 'lake_p_gone'::regrole::oid AS gone_oid \gset
DROP ROLE lake_p_gone;
SELECT count(*) AS orphan_grants FROM lake_data.tenant_grant
WHERE tenant = 'p_gone' AND role NOT IN (SELECT oid FROM pg_roles);
SELECT lake.revoke_tenant(:gone_oid::oid::regrole, 'p_gone');
SELECT count(*) AS orphan_grants FROM lake_data.tenant_grant WHERE tenant = 'p_gone';
-- A grant to an OID that names no role (here 0, which regrole spells '-')
-- is refused: regrole checks names, not OIDs.
SELECT t.err($$SELECT lake.grant_tenant('-', 'p_gone')$$);
SELECT count(*) AS grants_to_no_role FROM lake_data.tenant_grant WHERE tenant = 'p_gone';

-- Owners are tenant-scoped: a role with USAGE but not the owner's tenant
-- neither casts to it nor reads its payloads (trajectory, log) — nothing to
-- confine with EXECUTE grants; a role holding the tenant does both.
SELECT lake.create_owner('p_secret', 'kanban', 'p_globex');
SELECT (lake.cast_durable('p_secret', NULL, NULL, '\xfeed'::bytea)).position;
SET ROLE lake_p_tenant;
SELECT t.err($$SELECT * FROM lake.trajectory('p_secret')$$);
SELECT count(*) AS secret_landings FROM lake.log() WHERE owner = 'p_secret';
SELECT t.err($$SELECT lake.cast_durable('p_secret', 'Planning', 'CognitiveWork', '\xbad0'::bytea)$$);
SELECT t.err($$SELECT * FROM lake.owner_state('p_secret')$$);
RESET ROLE;
SELECT lake.grant_tenant('lake_p_usage', 'p_globex');
SET ROLE lake_p_usage;
SELECT position, payload FROM lake.trajectory('p_secret');
SELECT owner, position, payload FROM lake.log() WHERE owner = 'p_secret';
RESET ROLE;
SELECT lake.revoke_tenant('lake_p_usage', 'p_globex');
SELECT phase, lap, position, pending, quarantined FROM lake.owner_state('p_secret');

-- Only a superuser installs or removes the extension; lake_admin cannot
-- drop it, alter its tables or attach triggers to them.
SET ROLE lake_p_admin;
SELECT t.err($$DROP EXTENSION lake$$);
SELECT t.err($$ALTER TABLE lake_data.version ADD COLUMN x int$$);
SELECT t.err($$CREATE TRIGGER x BEFORE INSERT ON lake_data.version FOR EACH ROW EXECUTE FUNCTION lake.lifecycle_changed()$$);
SELECT t.err($$SELECT lake.lifecycle_changed()$$);
RESET ROLE;
-- Elsewhere too: even with CREATE on the database, a non-superuser is
-- refused before the install script runs (lake.control: superuser = true).
CREATE DATABASE p_elsewhere;
GRANT CREATE ON DATABASE p_elsewhere TO lake_p_admin;
\c p_elsewhere
SET ROLE lake_p_admin;
\set VERBOSITY sqlstate
CREATE EXTENSION lake;
\set VERBOSITY default
CREATE EXTENSION lake;
RESET ROLE;
\c contrib_regression
DROP DATABASE p_elsewhere;

-- Catalog: no SECURITY DEFINER function in schema lake; no function has a
-- SET clause (the store fixes search_path around the SQL it runs, see
-- search_path.sql); EXECUTE is PUBLIC's (the schema's USAGE and lake's own
-- checks gate them), except the trigger functions.
SELECT count(*) AS security_definer_without_fixed_search_path FROM pg_proc p
WHERE p.pronamespace = 'lake'::regnamespace AND p.prosecdef
  AND NOT coalesce(p.proconfig @> '{"search_path=pg_catalog, pg_temp"}', false);
SELECT p.proname, p.prosecdef AS security_definer,
       p.proconfig IS NULL AS no_set_clause,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_execute,
       p.proowner = (SELECT extowner FROM pg_extension WHERE extname = 'lake') AS owned_by_extension_owner
FROM pg_proc p WHERE p.pronamespace = 'lake'::regnamespace
ORDER BY p.proname, p.oid;
-- No function in schema lake has any explicit ACL entry for a specific role.
SELECT p.proname, a.grantee::regrole FROM pg_proc p, aclexplode(p.proacl) a
WHERE p.pronamespace = 'lake'::regnamespace AND a.grantee NOT IN (0, p.proowner);
-- lake_admin: an ordinary role, no login, no superuser, no attributes.
SELECT rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin, rolbypassrls
FROM pg_roles WHERE rolname = 'lake_admin';

-- Clean up: the roles own nothing but their grants.
SELECT lake.revoke_tenant(r, 'p_acme') FROM unnest(ARRAY['lake_p_tenant', 'lake_p_group']::regrole[]) r;
SELECT count(*) AS grants_left FROM lake_data.tenant_grant WHERE tenant LIKE 'p\_%';
DROP OWNED BY lake_p_none, lake_p_usage, lake_p_tenant, lake_p_group, lake_p_member,
    lake_p_admin, lake_p_scratch, lake_p_noinherit, lake_p_admin_noinherit, lake_p_admin_bare;
DROP ROLE lake_p_none, lake_p_usage, lake_p_tenant, lake_p_member, lake_p_group,
    lake_p_admin, lake_p_scratch, lake_p_noinherit, lake_p_admin_noinherit, lake_p_admin_bare;
DROP FUNCTION t.p_run_as(text[], text, text), t.p_run(text, text), t.p_direct(), t.p_seen(), t.p_me();
DROP TABLE t.p_receipt, t.p_role, t.p_stage, t.p_case, t.p_result, t.p_direct, t.p_iso_case, t.p_iso, t.p_seen;
