-- The extension's owner need not stay a superuser (SPEC §3): a role that
-- created lake and later lost SUPERUSER still administers it and reads
-- every tenant's landings, while a role that is neither is refused (42501)
-- and sees none. (The privilege matrix's owner is a superuser, so nothing
-- else tells the owner's own checks apart.) Runs last: it re-creates lake.
CREATE ROLE lake_extowner SUPERUSER;
CREATE ROLE lake_nobody;
SET SESSION AUTHORIZATION lake_extowner;
DROP EXTENSION lake CASCADE;
DROP SCHEMA lake;	-- made before the extension: it stays, owned by another role
RESET SESSION AUTHORIZATION;

-- A schema "lake" of the installing role that holds another role's object
-- is refused (42501): one made while that role could create there would
-- shadow a function of lake's for a call whose types it matches.
CREATE SCHEMA lake AUTHORIZATION lake_extowner;
CREATE FUNCTION lake.read(text, int) RETURNS bytea LANGUAGE sql AS $$ SELECT 'planted'::bytea $$;
SET SESSION AUTHORIZATION lake_extowner;
CREATE EXTENSION lake;
\echo :SQLSTATE
RESET SESSION AUTHORIZATION;
DROP FUNCTION lake.read(text, int);

-- The installing role's default privileges reach what the install script
-- creates: lake's data and its trigger functions stay their owner's alone
-- (also from a role whose name needs quoting), and the interface stays
-- open to a tenant role (SPEC §3). A function of the owner's own in schema
-- lake, not the extension's, keeps the privileges it had.
CREATE ROLE "Lake Reader";
ALTER DEFAULT PRIVILEGES FOR ROLE lake_extowner GRANT USAGE ON SCHEMAS TO lake_nobody, "Lake Reader";
ALTER DEFAULT PRIVILEGES FOR ROLE lake_extowner GRANT SELECT ON TABLES TO lake_nobody, "Lake Reader";
ALTER DEFAULT PRIVILEGES FOR ROLE lake_extowner GRANT SELECT ON SEQUENCES TO lake_nobody;
ALTER DEFAULT PRIVILEGES FOR ROLE lake_extowner GRANT EXECUTE ON FUNCTIONS TO "Lake Reader";
ALTER DEFAULT PRIVILEGES FOR ROLE lake_extowner REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
ALTER DEFAULT PRIVILEGES FOR ROLE lake_extowner REVOKE USAGE ON TYPES FROM PUBLIC;
-- Another extension's trigger function keeps its grants.
CREATE EXTENSION moddatetime;
GRANT EXECUTE ON FUNCTION moddatetime() TO lake_nobody;
SET SESSION AUTHORIZATION lake_extowner;
CREATE FUNCTION lake.private_helper() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;
CREATE EXTENSION lake;
RESET SESSION AUTHORIZATION;
SELECT has_function_privilege('lake_nobody', 'moddatetime()', 'EXECUTE') AS other_extension_kept;
DROP EXTENSION moddatetime;
SELECT r AS role, has_schema_privilege(r, 'lake_data', 'USAGE') AS data_schema_usage,
       bool_or(has_table_privilege(r, c.oid, 'SELECT')) AS any_data_select,
       bool_or(has_function_privilege(r, p.oid, 'EXECUTE')) AS any_trigger_function
FROM unnest('{lake_nobody,Lake Reader}'::text[]) r, pg_class c, pg_proc p
WHERE c.relnamespace = 'lake_data'::regnamespace AND c.relkind IN ('r', 'S')
  AND p.pronamespace = 'lake'::regnamespace AND p.prorettype = 'trigger'::regtype
GROUP BY r ORDER BY r;
SELECT bool_and(has_function_privilege('lake_nobody', p.oid, 'EXECUTE')) AS interface_executable,
       has_type_privilege('lake_nobody', 'lake.receipt', 'USAGE') AS receipt_usable
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
                                AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
WHERE p.pronamespace = 'lake'::regnamespace AND p.prorettype <> 'trigger'::regtype;
SELECT has_function_privilege('lake_nobody', 'lake.private_helper()', 'EXECUTE') AS helper_public;
DROP FUNCTION lake.private_helper();
-- Attached to another table, lake's trigger functions refuse to act.
CREATE TABLE public.fake_writer (epoch int, partitions int, partition_no int);
CREATE TRIGGER fake BEFORE INSERT ON public.fake_writer FOR EACH ROW EXECUTE FUNCTION lake.writer_merge();
INSERT INTO public.fake_writer VALUES (2147480000, 7, 3);
\echo :SQLSTATE
DROP TABLE public.fake_writer;
ALTER ROLE lake_extowner NOSUPERUSER;
GRANT USAGE ON SCHEMA lake TO lake_nobody;
SELECT extowner::regrole AS owner, rolsuper
FROM pg_extension JOIN pg_roles ON pg_roles.oid = extowner WHERE extname = 'lake';

SET SESSION AUTHORIZATION lake_extowner;
SELECT lake.create_dataset('owned');
SELECT lake.define_lifecycle('owned_lc', 'A', '{{A,B},{B,A}}');
SELECT lake.grant_tenant('lake_nobody', 'granted');
SELECT lake.append('owned', 'any_tenant', 'op', '\x01'::bytea) AS version;
SELECT lake.create_owner('eo', 'owned_lc', 'any_tenant');
SELECT (lake.cast_durable('eo', 'A', 'B')).position;
SELECT lake.seal() IS NULL AS nothing_pending;
SELECT lake.checkpoint() > 0 AS checkpointed;
SELECT owner, "position" FROM lake.log();
RESET SESSION AUTHORIZATION;

SET SESSION AUTHORIZATION lake_nobody;
SELECT left(t.err($$SELECT lake.seal()$$), 5) AS seal,
       left(t.err($$SELECT lake.checkpoint()$$), 5) AS checkpoint,
       left(t.err($$SELECT lake.create_dataset('mine')$$), 5) AS create_dataset,
       left(t.err($$SELECT lake.read('owned', 1)$$), 5) AS read;
SELECT count(*) AS landings_seen FROM lake.log();
RESET SESSION AUTHORIZATION;

-- The owner owns lake's tables, so it may put a deferred trigger on one.
-- The worker commits as the owner, with security restrictions: what its
-- writes queue for the commit runs with the owner's privileges, never as
-- the worker's superuser (which would give the demoted owner SUPERUSER
-- back). Here the worker's stage expiry deletes an idle stage.
SET SESSION AUTHORIZATION lake_extowner;
CREATE TABLE lake_data.t_who (who name, super boolean);
CREATE FUNCTION lake_data.t_note_who() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lake_data.t_who
    SELECT current_user, r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER t_who AFTER DELETE ON lake_data.stage
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION lake_data.t_note_who();
SELECT lake.begin_append('owned', 'any_tenant', 'idle') > 0 AS begun;
RESET SESSION AUTHORIZATION;
ALTER SYSTEM SET lake.stage_ttl = '1s';
SELECT pg_reload_conf();
DO $$
DECLARE stop timestamptz := clock_timestamp() + interval '5 min';
BEGIN
    WHILE NOT EXISTS (SELECT FROM lake_data.t_who) AND clock_timestamp() < stop LOOP
        PERFORM pg_sleep(0.05);
    END LOOP;
END $$;
ALTER SYSTEM RESET lake.stage_ttl;
SELECT pg_reload_conf();
SELECT who, super FROM lake_data.t_who;
SELECT count(*) AS stages_left FROM lake_data.stage;
DROP TRIGGER t_who ON lake_data.stage;
DROP FUNCTION lake_data.t_note_who();
DROP TABLE lake_data.t_who;

-- An owner's trigger on lake's tables may catch an error of its own: a
-- subtransaction begun and rolled back inside lake's call, even around a
-- lake call of its own that is refused. The call goes on as it was, and
-- its caller is itself again when it returns (it was left running as the
-- extension's owner).
SET SESSION AUTHORIZATION lake_extowner;
CREATE TABLE lake_data.t_audit (x int CHECK (x > 0));
CREATE TABLE lake_data.t_caught (op text, state text);
CREATE FUNCTION lake_data.t_audit_catching() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        INSERT INTO lake_data.t_audit VALUES (0);	-- fails its check
    EXCEPTION WHEN check_violation THEN
        INSERT INTO lake_data.t_caught VALUES (TG_OP, SQLSTATE);
    END;
    BEGIN
        PERFORM lake.read('no such dataset', 1);
    EXCEPTION WHEN OTHERS THEN
        INSERT INTO lake_data.t_caught VALUES (TG_OP, SQLSTATE);
    END;
    RETURN NULL;
END $$;
CREATE TRIGGER t_audit AFTER INSERT OR UPDATE ON lake_data.stage
    FOR EACH ROW EXECUTE FUNCTION lake_data.t_audit_catching();
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION lake_nobody;
SELECT lake.begin_append('owned', 'granted', 'audited') AS stage \gset
SELECT current_user AS after_begin_append;
BEGIN;
SELECT lake.append_chunk(:stage, 0, '\x0101'::bytea) AS chunk;
SELECT current_user AS after_append_chunk;
SELECT lake.commit_append(:stage) > 0 AS committed;
SELECT current_user AS after_commit_append;
COMMIT;
SELECT current_user AS after_the_transaction;
SELECT lake.read('owned', v.version) AS read_back
FROM lake.versions('owned') v WHERE v.operation_id = 'audited';
RESET SESSION AUTHORIZATION;
SELECT op, state, count(*) FROM lake_data.t_caught GROUP BY op, state ORDER BY op, state;
DROP TRIGGER t_audit ON lake_data.stage;
DROP FUNCTION lake_data.t_audit_catching();
DROP TABLE lake_data.t_audit, lake_data.t_caught;
-- A call made from inside a call, as another role (the owner's trigger
-- runs a SECURITY DEFINER function of a role it trusts less): that role's
-- call, with that role's tenants, and the role is itself again after it
-- (it went on as the extension's owner, and with the outer caller's
-- tenants).
CREATE ROLE lake_low;
GRANT USAGE ON SCHEMA lake TO lake_low;
SELECT lake.grant_tenant('lake_low', 'low_t');
SELECT lake.append('owned', 'low_t', 'low-op', '\x02'::bytea) > 0 AS appended;
CREATE SCHEMA low_s AUTHORIZATION lake_low;
SET SESSION AUTHORIZATION lake_low;
CREATE TABLE low_s.seen (before name, tenants text, after name);
CREATE FUNCTION low_s.look() RETURNS void LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog AS $$
DECLARE
    was name := current_user;
    t text;
BEGIN
    SELECT string_agg(DISTINCT v.tenant, ',') INTO t FROM lake.versions('owned') v;
    INSERT INTO low_s.seen VALUES (was, t, current_user);
END $$;
GRANT USAGE ON SCHEMA low_s TO lake_extowner;
GRANT EXECUTE ON FUNCTION low_s.look() TO lake_extowner;
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION lake_extowner;
CREATE FUNCTION lake_data.t_call_low() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM low_s.look();
    RETURN NULL;
END $$;
CREATE TRIGGER t_call_low AFTER INSERT ON lake_data.stage
    FOR EACH ROW EXECUTE FUNCTION lake_data.t_call_low();
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION lake_nobody;
SELECT lake.begin_append('owned', 'granted', 'looked at') > 0 AS begun;
SELECT current_user AS after_the_nested_call;
RESET SESSION AUTHORIZATION;
SELECT * FROM low_s.seen;
DROP TRIGGER t_call_low ON lake_data.stage;
DROP FUNCTION lake_data.t_call_low();
DROP SCHEMA low_s CASCADE;
SELECT lake.revoke_tenant('lake_low', 'low_t');
REVOKE USAGE ON SCHEMA lake FROM lake_low;
DROP ROLE lake_low;
-- The owner's own code run by a call (a trigger) calls lake with the
-- caller's rights, whatever this backend has cached of the owner's: the
-- owner's earlier call here let it through.
SET SESSION AUTHORIZATION lake_extowner;
SELECT phase FROM lake.owner_state('eo');
CREATE TABLE lake_data.t_seen (state text);
CREATE FUNCTION lake_data.t_peek() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        PERFORM lake.owner_state('eo');
        INSERT INTO lake_data.t_seen VALUES ('read');
    EXCEPTION WHEN OTHERS THEN
        INSERT INTO lake_data.t_seen VALUES (SQLSTATE);
    END;
    RETURN NULL;
END $$;
CREATE TRIGGER t_peek AFTER INSERT ON lake_data.stage
    FOR EACH ROW EXECUTE FUNCTION lake_data.t_peek();
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION lake_nobody;
SELECT lake.begin_append('owned', 'granted', 'peeking') > 0 AS begun;
RESET SESSION AUTHORIZATION;
SELECT state AS nested_owner_state_of_another_tenant FROM lake_data.t_seen;
DROP TRIGGER t_peek ON lake_data.stage;
DROP FUNCTION lake_data.t_peek();
DROP TABLE lake_data.t_seen;
-- A trigger that calls lake from lake's own writes nests a call in the one
-- that fired it: past 64 deep the call is refused (54001).
SET SESSION AUTHORIZATION lake_extowner;
CREATE FUNCTION lake_data.t_recurse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM lake.begin_append('owned', 'any_tenant', 'nested-' || NEW.id);
    RETURN NULL;
END $$;
CREATE TRIGGER t_recurse AFTER INSERT ON lake_data.stage
    FOR EACH ROW EXECUTE FUNCTION lake_data.t_recurse();
SELECT t.err($$SELECT lake.begin_append('owned', 'any_tenant', 'nesting')$$) AS nested_too_deep;
SELECT current_user AS after_nesting;
DROP TRIGGER t_recurse ON lake_data.stage;
DROP FUNCTION lake_data.t_recurse();
RESET SESSION AUTHORIZATION;

-- Every tenant is the extension's owner's from each backend's next call,
-- and no longer once it is not: also when an administrator has given
-- lake's schemas to another role, so that a REASSIGN OWNED changes the
-- extension's row and no schema. (A backend kept the owner it had looked
-- up: the former owner read and appended any tenant's data.)
ALTER SCHEMA lake OWNER TO CURRENT_USER;
ALTER SCHEMA lake_data OWNER TO CURRENT_USER;
GRANT USAGE ON SCHEMA lake, lake_data TO lake_extowner, lake_nobody;
REASSIGN OWNED BY lake_extowner TO lake_nobody;
SET SESSION AUTHORIZATION lake_nobody;
SELECT lake.read('owned', 1) AS read_as_the_owner;
RESET SESSION AUTHORIZATION;
REASSIGN OWNED BY lake_nobody TO lake_extowner;
SET SESSION AUTHORIZATION lake_nobody;
SELECT left(t.err($$SELECT lake.read('owned', 1)$$), 5) AS read_as_the_former_owner,
       left(t.err($$SELECT lake.append('owned', 'any_tenant', 'op2', '\x02'::bytea)$$), 5)
         AS append_as_the_former_owner;
RESET SESSION AUTHORIZATION;
SELECT extowner::regrole AS owner FROM pg_extension WHERE extname = 'lake';

DROP EXTENSION lake CASCADE;
DROP SCHEMA lake;
DROP OWNED BY lake_nobody;
DROP OWNED BY lake_extowner;	-- its default privileges
DROP ROLE lake_extowner;
DROP ROLE "Lake Reader";
DROP ROLE lake_nobody;
