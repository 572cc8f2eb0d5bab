-- Tenants (SPEC §3): a role that is neither superuser nor the extension's
-- owner reaches only the tenants granted to it, through the functions.
CREATE ROLE lake_alice LOGIN;
CREATE ROLE lake_bob LOGIN;
CREATE ROLE lake_globex_team NOLOGIN;
CREATE ROLE lake_dave LOGIN;
GRANT lake_globex_team TO lake_bob;
GRANT lake_admin TO lake_dave;
GRANT USAGE ON SCHEMA lake TO lake_alice, lake_bob, lake_dave;
GRANT CREATE ON DATABASE contrib_regression TO lake_alice;
GRANT USAGE ON SCHEMA t TO PUBLIC;      -- the test helper t.err

SELECT lake.create_dataset('shared');
SELECT lake.grant_tenant('lake_alice', 'acme');
SELECT lake.grant_tenant('lake_alice', 'acme');   -- granting twice is harmless
SELECT lake.grant_tenant('lake_globex_team', 'globex');
SELECT lake.append('shared', 'globex', 'g-1', '\x0a'::bytea) AS version;

-- Grant refusals.
SELECT t.err($$SELECT lake.grant_tenant(NULL, 'acme')$$);
SELECT t.err($$SELECT lake.grant_tenant('lake_alice', NULL)$$);
SELECT t.err($$SELECT lake.grant_tenant('lake_alice', '')$$);
SELECT t.err($$SELECT lake.grant_tenant('no_such_role', 'acme')$$);

SET ROLE lake_alice;
-- Granted tenant: append, replay, read, stage.
SELECT lake.append('shared', 'acme', 'a-1', '\x01'::bytea) AS version;
SELECT lake.append('shared', 'acme', 'a-1', '\x01'::bytea) AS replay;
SELECT lake.read('shared', 2), lake.read_operation('shared', 'acme', 'a-1');
SELECT lake.begin_append('shared', 'acme', 'a-2') AS s \gset
SELECT lake.append_chunk(:s, 0, '\x02'::bytea);
SELECT lake.commit_append(:s) AS version;
-- versions() lists only the tenants the role may see.
SELECT version, tenant, operation_id FROM lake.versions('shared');
-- Other tenants: 42501 everywhere, nothing written; a refusal names only
-- what the caller passed (SPEC §3), never the tenant that holds the data.
SELECT t.err($$SELECT lake.append('shared', 'globex', 'a-x', '\x01'::bytea)$$);
SELECT t.err($$SELECT lake.read('shared', 1)$$);
SELECT t.err($$SELECT lake.read_operation('shared', 'globex', 'g-1')$$);
SELECT t.err($$SELECT lake.begin_append('shared', 'globex', 'a-x')$$);
-- The tables themselves stay closed.
SELECT t.err($$SELECT * FROM lake_data.version$$);
SELECT t.err($$INSERT INTO lake_data.tenant_grant VALUES ('globex', 0)$$);
-- Administrative functions are refused.
SELECT t.err($$SELECT lake.create_dataset('mine')$$);
SELECT t.err($$SELECT lake.grant_tenant('lake_alice', 'globex')$$);
SELECT t.err($$SELECT lake.revoke_tenant('lake_alice', 'acme')$$);

-- A hostile search_path changes nothing: shadowing functions and
-- operators in a schema searched first are never used.
CREATE SCHEMA evil;
CREATE FUNCTION evil.always(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT true';
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.always);
CREATE FUNCTION evil.pg_has_role(oid, oid, text) RETURNS boolean LANGUAGE sql AS 'SELECT true';
CREATE FUNCTION evil.max(bigint) RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint';
CREATE FUNCTION evil.sha256(bytea) RETURNS bytea LANGUAGE sql AS 'SELECT ''\x00''::bytea';
CREATE FUNCTION evil.nextval(regclass) RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint';
CREATE FUNCTION evil.clock_timestamp() RETURNS timestamptz LANGUAGE sql AS 'SELECT ''epoch''::timestamptz';
SET search_path = evil, pg_catalog, public;
SELECT t.err($$SELECT lake.append('shared', 'globex', 'a-x', '\x01'::bytea)$$);
SELECT lake.append('shared', 'acme', 'a-3', '\x03'::bytea) AS version;
SELECT lake.append('shared', 'acme', 'a-1', '\x01'::bytea) AS replay;
SELECT t.err($$SELECT lake.append('shared', 'acme', 'a-1', '\x09'::bytea)$$);
SELECT version, tenant, operation_id, committed_at > '2000-01-01' AS real_clock FROM lake.versions('shared');
RESET search_path;
RESET ROLE;
DROP SCHEMA evil CASCADE;

-- Membership counts: lake_bob reaches globex through lake_globex_team.
SET ROLE lake_bob;
SELECT lake.read('shared', 1);
SELECT version, tenant FROM lake.versions('shared');
SELECT t.err($$SELECT lake.read('shared', 2)$$);
-- A stage of another tenant is out of reach too.
SELECT regexp_replace(t.err(format('SELECT lake.append_chunk(%s, 1, %L::bytea)', :s, '\x00')),
                      'stage [0-9]+', 'stage <id>') AS err;
RESET ROLE;

-- lake_admin members administer, but see only tenants granted to them.
SET ROLE lake_dave;
SELECT lake.create_dataset('admin-made');
SELECT lake.grant_tenant('lake_bob', 'acme');
SELECT lake.revoke_tenant('lake_bob', 'acme');
SELECT t.err($$SELECT lake.read('shared', 1)$$);
RESET ROLE;

-- Revoking takes effect at once.
SELECT lake.revoke_tenant('lake_alice', 'acme');
SET ROLE lake_alice;
SELECT t.err($$SELECT lake.read('shared', 2)$$);
SELECT count(*) AS visible FROM lake.versions('shared');
RESET ROLE;

-- Nothing the refusals touched was written.
SELECT version, tenant, operation_id FROM lake.versions('shared');

DROP OWNED BY lake_alice, lake_bob, lake_dave;
DROP ROLE lake_alice, lake_bob, lake_globex_team, lake_dave;
