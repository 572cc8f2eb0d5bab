-- lake_router 0.1.0: lake's SQL interface (SPEC §3-§5) in a router database,
-- every function a PL/Proxy function that runs on the partition owning its
-- key (SPEC §7). The partitions are ordinary lake servers, each started with
-- lake.partitions = N and its own lake.partition = 0 .. N-1; the cluster is
-- the SQL/MED server "lake":
--
--   CREATE SERVER lake FOREIGN DATA WRAPPER plproxy
--       OPTIONS (p0 'host=... dbname=...', p1 '...', ...);   -- N = power of two
--   CREATE USER MAPPING FOR PUBLIC SERVER lake;
--   GRANT USAGE ON FOREIGN SERVER lake TO ...;
--
-- Routing (PL/Proxy takes partition = hash & (N - 1)):
--   - dataset functions by hashtext(dataset), owner functions by
--     hashtext(owner);
--   - a stage id is n * N + partition (lake.partitions, lake.partition), and
--     a receipt's epoch is congruent to its partition: both route by
--     themselves, the caller passes no key again;
--   - grant_tenant, revoke_tenant, define_lifecycle, seal and checkpoint run
--     on every partition and may be retried after one partition failed;
--   - log, cycles, stats and admission run on every partition and add a last
--     column, partition, saying where each row came from; a reader that
--     follows the log keeps one cursor per partition (lake_router.log and
--     lake_router.cycles take them as an array).
-- Every call is its own transaction on its partition (so what lake runs
-- only as a transaction of its own is refused here inside a transaction
-- block, as there: lake_router.require_own_transaction). Errors raised there
-- reach the caller with their SQLSTATE (LKxxx included); PL/Proxy prefixes
-- the message with the function and the partition's database.
\echo Use "CREATE EXTENSION lake_router" to load this file. \quit

-- As lake does: a schema "lake" made beforehand by another role, or one in
-- which other roles may create, would let them plant functions that shadow
-- the routed ones.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_namespace n
                 LEFT JOIN pg_catalog.aclexplode(n.nspacl) a
                   ON a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'
                  AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner
                WHERE n.nspname OPERATOR(pg_catalog.=) 'lake'
                  AND (n.nspowner OPERATOR(pg_catalog.<>) (SELECT r.oid FROM pg_catalog.pg_roles r
                                                            WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
                       OR a.grantee IS NOT NULL)) THEN
        RAISE EXCEPTION USING
            ERRCODE = '42501',
            MESSAGE = 'lake_router cannot be installed into schema "lake": another role owns it or may create in it',
            HINT = 'Drop the schema, or make the installing role its owner with CREATE for nobody else, then create the extension again.';
    END IF;
    -- Nor another role's object left in it (DROP EXTENSION leaves the schema).
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_namespace n, pg_catalog.pg_proc p
                WHERE n.nspname OPERATOR(pg_catalog.=) 'lake' AND p.pronamespace OPERATOR(pg_catalog.=) n.oid
                  AND p.proowner OPERATOR(pg_catalog.<>) n.nspowner)
       OR EXISTS (SELECT 1 FROM pg_catalog.pg_namespace n, pg_catalog.pg_class c
                   WHERE n.nspname OPERATOR(pg_catalog.=) 'lake' AND c.relnamespace OPERATOR(pg_catalog.=) n.oid
                     AND c.relowner OPERATOR(pg_catalog.<>) n.nspowner)
       OR EXISTS (SELECT 1 FROM pg_catalog.pg_namespace n, pg_catalog.pg_type t
                   WHERE n.nspname OPERATOR(pg_catalog.=) 'lake' AND t.typnamespace OPERATOR(pg_catalog.=) n.oid
                     AND t.typowner OPERATOR(pg_catalog.<>) n.nspowner)
       OR EXISTS (SELECT 1 FROM pg_catalog.pg_namespace n, pg_catalog.pg_operator o
                   WHERE n.nspname OPERATOR(pg_catalog.=) 'lake' AND o.oprnamespace OPERATOR(pg_catalog.=) n.oid
                     AND o.oprowner OPERATOR(pg_catalog.<>) n.nspowner) THEN
        RAISE EXCEPTION USING
            ERRCODE = '42501',
            MESSAGE = 'lake_router cannot be installed into schema "lake": it holds objects of other roles',
            HINT = 'Drop them (or the schema), then create the extension again.';
    END IF;
END
$$;

-- The routing helpers live in a schema of their own; PL/Proxy evaluates them
-- as the caller, so every role may use them (they only compute numbers).
CREATE SCHEMA lake_router;
GRANT USAGE ON SCHEMA lake_router TO PUBLIC;

-- PostgreSQL lets a role with USAGE on server "lake" create and alter its own
-- user mapping, and PL/Proxy logs in to the partitions as the mapping's
-- "user" option when it has one: a tenant role could call the partitions as
-- any role they trust from the router. Only the server's owner (or a
-- superuser) may make or change a mapping of server "lake", or of any
-- PL/Proxy server: one renamed "lake" brings its mappings along.
CREATE FUNCTION lake_router.guarded_server(server oid) RETURNS boolean
    LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
    RETURN EXISTS (SELECT 1 FROM pg_catalog.pg_foreign_server s
                     JOIN pg_catalog.pg_foreign_data_wrapper w ON w.oid OPERATOR(pg_catalog.=) s.srvfdw
                    WHERE s.oid OPERATOR(pg_catalog.=) server
                      AND (s.srvname OPERATOR(pg_catalog.=) 'lake' OR w.fdwname OPERATOR(pg_catalog.=) 'plproxy'));
-- (Executable by every role, as the helpers below are: the guards call it as
-- the role that runs the command, and it reads only the catalogs.)

CREATE FUNCTION lake_router.guard_user_mapping() RETURNS event_trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    server name;
BEGIN
    SELECT s.srvname INTO server
      FROM pg_catalog.pg_event_trigger_ddl_commands() c
      JOIN pg_catalog.pg_user_mappings m ON m.umid OPERATOR(pg_catalog.=) c.objid
      JOIN pg_catalog.pg_foreign_server s ON s.oid OPERATOR(pg_catalog.=) m.srvid
     WHERE c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_user_mapping'::pg_catalog.regclass
       AND lake_router.guarded_server(s.oid)
       AND NOT pg_catalog.pg_has_role(s.srvowner, 'USAGE')
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION USING
            ERRCODE = '42501',
            MESSAGE = pg_catalog.format('only the owner of server %I may create or alter its user mappings', server),
            DETAIL = 'A mapping decides which role the router logs in to the partitions as.';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION lake_router.guard_user_mapping() FROM PUBLIC;
CREATE EVENT TRIGGER lake_router_user_mappings ON ddl_command_end
    WHEN TAG IN ('CREATE USER MAPPING', 'ALTER USER MAPPING')
    EXECUTE FUNCTION lake_router.guard_user_mapping();

-- Nor drop one (DROP USER MAPPING, DROP OWNED BY the mapped role): PL/Proxy
-- would then log the role in with the PUBLIC mapping, whose "user" may be
-- another role. The server's own drop (by its owner) takes its mappings.
CREATE FUNCTION lake_router.guard_user_mapping_drop() RETURNS event_trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    server name;
BEGIN
    SELECT s.srvname INTO server
      FROM pg_catalog.pg_event_trigger_dropped_objects() d
      JOIN pg_catalog.pg_foreign_server s
        ON s.srvname OPERATOR(pg_catalog.=) d.address_args[1]
     WHERE d.object_type OPERATOR(pg_catalog.=) 'user mapping'
       AND lake_router.guarded_server(s.oid)
       AND NOT pg_catalog.pg_has_role(s.srvowner, 'USAGE')
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION USING
            ERRCODE = '42501',
            MESSAGE = pg_catalog.format('only the owner of server %I may drop its user mappings', server),
            DETAIL = 'Without its own mapping a role logs in to the partitions with the PUBLIC one.';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION lake_router.guard_user_mapping_drop() FROM PUBLIC;
CREATE EVENT TRIGGER lake_router_user_mapping_drops ON sql_drop
    WHEN TAG IN ('DROP USER MAPPING', 'DROP OWNED')
    EXECUTE FUNCTION lake_router.guard_user_mapping_drop();

-- The triggers see only what is done while they exist: a mapping a role
-- made for itself before (or between a DROP and a CREATE EXTENSION of
-- lake_router) that logs it in as another role is refused here.
DO $$
DECLARE
    mapping record;
BEGIN
    SELECT s.srvname, r.rolname, o.option_value AS login INTO mapping
      FROM pg_catalog.pg_user_mapping m
      JOIN pg_catalog.pg_foreign_server s ON s.oid OPERATOR(pg_catalog.=) m.umserver
      JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) m.umuser,
           pg_catalog.pg_options_to_table(m.umoptions) o
     WHERE lake_router.guarded_server(s.oid)
       AND o.option_name OPERATOR(pg_catalog.=) 'user'
       AND o.option_value OPERATOR(pg_catalog.<>) r.rolname::text
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION USING
            ERRCODE = '42501',
            MESSAGE = pg_catalog.format('server %I has a user mapping for role %I that logs it in as %I',
                                        mapping.srvname, mapping.rolname, mapping.login),
            DETAIL = 'A role with USAGE on the server may have made it for itself before lake_router guarded the mappings.',
            HINT = 'Drop the mapping, create the extension, then make the mapping again as the server''s owner.';
    END IF;
END
$$;

-- As in lake: the administrative functions are open to members of lake_admin
-- (the partitions decide; the role must exist there too).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'lake_admin') THEN
        CREATE ROLE lake_admin NOLOGIN;
    END IF;
END
$$;
GRANT USAGE ON SCHEMA lake TO lake_admin;

CREATE TYPE lake.receipt AS (epoch int, seq bigint);
CREATE TYPE lake.coordinate AS (cycle bigint, position bigint, lsn pg_lsn);

-- ----------------------------------------------------------------------
-- Routing
-- ----------------------------------------------------------------------

-- A dataset or owner name. NULL goes to partition 0, which refuses it as
-- lake does (22004), instead of PL/Proxy's "hash function returned NULL".
-- The sign bit is cleared: the low bits, by which lake itself places a name
-- (hashtext & (N - 1)), stay as they are, and PL/Proxy's modular_mapping
-- option (hash % N, which it takes as -(-hash % N) for a negative hash)
-- then routes as its default mapping does instead of to the wrong place.
CREATE FUNCTION lake_router.key_partition(key text) RETURNS int4
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN COALESCE(pg_catalog.hashtext(key) OPERATOR(pg_catalog.&) 2147483647, 0);

-- A stage id: its low bits are its partition.
CREATE FUNCTION lake_router.stage_partition(stage bigint) RETURNS int8
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN COALESCE(stage, 0);

-- A receipt: its epoch is congruent to its partition.
CREATE FUNCTION lake_router.receipt_partition(receipt lake.receipt) RETURNS int4
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN COALESCE((receipt).epoch, 0);

-- The partitions of the cluster, from the SQL/MED server's p<N> (or, as
-- PL/Proxy also takes them, partition_<N>) options.
CREATE FUNCTION lake_router.partitions() RETURNS int4
    LANGUAGE sql STABLE
    RETURN (SELECT pg_catalog.count(*)::int4
              FROM pg_catalog.pg_foreign_server s,
                   pg_catalog.unnest(s.srvoptions) o
             WHERE s.srvname OPERATOR(pg_catalog.=) 'lake'
               AND o OPERATOR(pg_catalog.~) '^(p|partition_)[0-9]+=');

-- The partition count is the cluster's for the life of its data: names and
-- handles are placed by hash & (N - 1), and PL/Proxy moves nothing between
-- partitions. Server "lake" naming another count (partitions added, or
-- taken away) would route half of the names to partitions that do not
-- have them, where they would be created again, and call receipts of the
-- old ones never issued; each partition alone cannot tell (an old one
-- accepts every name the new count still sends it). The count is kept
-- here from the first time server "lake" names partitions, and a
-- CREATE or ALTER SERVER that names another is refused.
CREATE TABLE lake_router.cluster (
    one         boolean PRIMARY KEY DEFAULT true CHECK (one),
    partitions  int4 NOT NULL CHECK (partitions OPERATOR(pg_catalog.>) 0)
);
-- Dumped only while no server "lake" names partitions: otherwise a
-- restore's CREATE SERVER (the event trigger is there by then) puts the
-- same count back, and a dumped row would then collide with it.
SELECT pg_catalog.pg_extension_config_dump('lake_router.cluster',
    'WHERE lake_router.partitions() OPERATOR(pg_catalog.=) 0');

-- Definer's rights: the server's owner need not own the table. Not for
-- PUBLIC (the grants at the end leave it out): only the event trigger and
-- the install call it.
CREATE FUNCTION lake_router.keep_partitions() RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    named int4 := lake_router.partitions();
    kept int4;
BEGIN
    IF named OPERATOR(pg_catalog.=) 0 THEN
        RETURN;                 -- no server "lake" (renamed away, dropped)
    END IF;
    SELECT c.partitions INTO kept FROM lake_router.cluster c;
    IF NOT FOUND THEN
        INSERT INTO lake_router.cluster (partitions) VALUES (named);
    ELSIF kept OPERATOR(pg_catalog.<>) named THEN
        RAISE EXCEPTION USING
            ERRCODE = '55000',
            MESSAGE = pg_catalog.format('server "lake" would name %s partitions, but the cluster has %s', named, kept),
            DETAIL = 'Names and handles are placed by their hash modulo the partition count, and nothing moves them: with another count, existing datasets and owners would be routed to partitions that do not have them, and created there again.',
            HINT = 'Keep the partition count. To route to a new cluster of another count, a superuser first deletes the row of lake_router.cluster.';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION lake_router.keep_partitions() FROM PUBLIC;

CREATE FUNCTION lake_router.guard_partitions() RETURNS event_trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM lake_router.keep_partitions();
END
$$;
REVOKE ALL ON FUNCTION lake_router.guard_partitions() FROM PUBLIC;
CREATE EVENT TRIGGER lake_router_partitions ON ddl_command_end
    WHEN TAG IN ('CREATE SERVER', 'ALTER SERVER')
    EXECUTE FUNCTION lake_router.guard_partitions();
-- A server "lake" made before the extension: its count is the cluster's.
SELECT lake_router.keep_partitions();

-- recover(owner): the owner's partition, or every partition for NULL.
CREATE FUNCTION lake_router.owner_partitions(owner text) RETURNS SETOF int4
    LANGUAGE sql STABLE
    BEGIN ATOMIC
        SELECT CASE WHEN owner IS NULL THEN p ELSE lake_router.key_partition(owner) END
          FROM pg_catalog.generate_series(0,
                   CASE WHEN owner IS NULL THEN lake_router.partitions() OPERATOR(pg_catalog.-) 1 ELSE 0 END) p;
    END;

-- ----------------------------------------------------------------------
-- Datasets, by hashtext(dataset)
-- ----------------------------------------------------------------------

CREATE FUNCTION lake.create_dataset(name text) RETURNS void
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON lake_router.key_partition(name);
    $$;

CREATE FUNCTION lake.append(dataset text, tenant text, operation_id text,
                            payload bytea, digest bytea DEFAULT NULL) RETURNS bigint
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON lake_router.key_partition(dataset);
    $$;

CREATE FUNCTION lake.read(dataset text, version bigint) RETURNS bytea
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON lake_router.key_partition(dataset);
    $$;

CREATE FUNCTION lake.read_operation(dataset text, tenant text, operation_id text) RETURNS bytea
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON lake_router.key_partition(dataset);
    $$;

CREATE FUNCTION lake.train_dictionary(dataset text) RETURNS integer
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON lake_router.key_partition(dataset);
    $$;

-- PL/Proxy keeps one result per cluster and backend, which a set-returning
-- function hands out a row per call: another routed call between two of
-- its rows (in the same SELECT list, or a SECURITY DEFINER function's)
-- would take that result over, rows lost or another caller's given out.
-- So each set-returning function of the interface reads its routed call
-- in FROM, which takes every row at once before any is returned.
CREATE FUNCTION lake_router.versions(dataset text, after_version bigint)
    RETURNS TABLE(version bigint, tenant text, operation_id text, digest bytea,
                  bytes bigint, stored_bytes bigint, committed_at timestamptz)
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON lake_router.key_partition(dataset);
        SELECT * FROM lake.versions(dataset, after_version);
    $$;

CREATE FUNCTION lake.versions(dataset text, after_version bigint DEFAULT 0)
    RETURNS TABLE(version bigint, tenant text, operation_id text, digest bytea,
                  bytes bigint, stored_bytes bigint, committed_at timestamptz)
    LANGUAGE sql
    BEGIN ATOMIC
        SELECT * FROM lake_router.versions(dataset, after_version);
    END;

CREATE FUNCTION lake.begin_append(dataset text, tenant text, operation_id text) RETURNS bigint
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON lake_router.key_partition(dataset);
    $$;

-- ----------------------------------------------------------------------
-- Stages, by the stage id's partition
-- ----------------------------------------------------------------------

CREATE FUNCTION lake.append_chunk(stage bigint, chunk_no int, data bytea) RETURNS void
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON lake_router.stage_partition(stage);
    $$;

CREATE FUNCTION lake.commit_append(stage bigint, digest bytea DEFAULT NULL) RETURNS bigint
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON lake_router.stage_partition(stage);
    $$;

CREATE FUNCTION lake.abort_append(stage bigint) RETURNS void
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON lake_router.stage_partition(stage);
    $$;

-- ----------------------------------------------------------------------
-- Owners, by hashtext(owner); receipts by their epoch
-- ----------------------------------------------------------------------

CREATE FUNCTION lake.create_owner(owner text, lifecycle text DEFAULT 'kanban',
                                  tenant text DEFAULT 'default') RETURNS void
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON lake_router.key_partition(owner);
    $$;

CREATE FUNCTION lake.cast(owner text, from_phase text, to_phase text,
                          payload bytea DEFAULT NULL, expected_lap bigint DEFAULT NULL,
                          operation_id text DEFAULT NULL) RETURNS lake.receipt
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON lake_router.key_partition(owner);
    $$;

CREATE FUNCTION lake_router.await_durable(receipt lake.receipt, timeout_ms int)
    RETURNS lake.coordinate
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON lake_router.receipt_partition(receipt);
        TARGET lake.await_durable;
    $$;

-- A wait that timed out is NULL, as on the partition: PL/Proxy hands back
-- a NULL composite as a row of NULLs, (,,), which IS DISTINCT FROM NULL
-- and which a client driver decodes as a coordinate. A sealed coordinate
-- always has its cycle.
CREATE FUNCTION lake.await_durable(receipt lake.receipt, timeout_ms int DEFAULT NULL)
    RETURNS lake.coordinate
    LANGUAGE sql
    BEGIN ATOMIC
        SELECT CASE WHEN (c).cycle IS NULL THEN NULL ELSE c END
          FROM lake_router.await_durable(receipt, timeout_ms) c;
    END;

CREATE FUNCTION lake.cast_durable(owner text, from_phase text, to_phase text,
                                  payload bytea DEFAULT NULL, expected_lap bigint DEFAULT NULL,
                                  operation_id text DEFAULT NULL) RETURNS lake.coordinate
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON lake_router.key_partition(owner);
    $$;

CREATE FUNCTION lake_router.owner_state(owner text)
    RETURNS TABLE(phase text, lap bigint, "position" bigint, pending int,
                  quarantined boolean, reason text)
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON lake_router.key_partition(owner);
        SELECT * FROM lake.owner_state(owner);
    $$;

CREATE FUNCTION lake.owner_state(owner text)
    RETURNS TABLE(phase text, lap bigint, "position" bigint, pending int,
                  quarantined boolean, reason text)
    LANGUAGE sql
    BEGIN ATOMIC
        SELECT * FROM lake_router.owner_state(owner);
    END;

CREATE FUNCTION lake_router.trajectory(owner text, after_position bigint)
    RETURNS TABLE("position" bigint, cycle bigint, epoch int, seq bigint,
                  from_phase text, to_phase text, lap bigint, payload bytea,
                  operation_id text)
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON lake_router.key_partition(owner);
        SELECT * FROM lake.trajectory(owner, after_position);
    $$;

CREATE FUNCTION lake.trajectory(owner text, after_position bigint DEFAULT 0)
    RETURNS TABLE("position" bigint, cycle bigint, epoch int, seq bigint,
                  from_phase text, to_phase text, lap bigint, payload bytea,
                  operation_id text)
    LANGUAGE sql
    BEGIN ATOMIC
        SELECT * FROM lake_router.trajectory(owner, after_position);
    END;

-- 25001 inside a transaction block, as lake refuses these functions: each
-- partition would commit them on its own, whatever the router's
-- transaction then does (lake_router.c).
CREATE FUNCTION lake_router.require_own_transaction(what text) RETURNS void
    AS 'MODULE_PATHNAME', 'lake_router_require_own_transaction'
    LANGUAGE C STRICT;

CREATE FUNCTION lake_router.release_owner(owner text) RETURNS void
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON lake_router.key_partition(owner);
        TARGET lake.release_owner;
    $$;

CREATE FUNCTION lake.release_owner(owner text) RETURNS void
    LANGUAGE sql
    BEGIN ATOMIC
        SELECT lake_router.require_own_transaction('lake.release_owner()');
        SELECT lake_router.release_owner(owner);
    END;

-- recover(owner) on the owner's partition; recover() on every partition.
CREATE FUNCTION lake_router.recover(owner text)
    RETURNS TABLE(owner text, applied int, "position" bigint, quarantined boolean)
    LANGUAGE plproxy CALLED ON NULL INPUT AS $$
        CLUSTER 'lake';
        RUN ON lake_router.owner_partitions(owner);
        SELECT * FROM lake.recover(owner);
    $$;

CREATE FUNCTION lake.recover(owner text DEFAULT NULL)
    RETURNS TABLE(owner text, applied int, "position" bigint, quarantined boolean)
    LANGUAGE sql
    BEGIN ATOMIC
        SELECT lake_router.require_own_transaction('lake.recover()');
        SELECT * FROM lake_router.recover(owner);
    END;

-- ----------------------------------------------------------------------
-- Cluster-wide: on every partition, safe to retry
-- ----------------------------------------------------------------------
-- PL/Proxy runs on all partitions only set-returning functions: the
-- interface's function calls one of these and keeps lake's result type.
-- Partitions that succeeded keep what they did when another fails (each
-- call commits there), so a retry completes the others.

CREATE FUNCTION lake_router.grant_tenant(role regrole, tenant text) RETURNS SETOF void
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON ALL;
        TARGET lake.grant_tenant;
    $$;

CREATE FUNCTION lake_router.revoke_tenant(role regrole, tenant text) RETURNS SETOF void
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON ALL;
        TARGET lake.revoke_tenant;
    $$;

-- Granting a grant held, or revoking one not held, changes nothing: both
-- are idempotent on each partition.
CREATE FUNCTION lake.grant_tenant(role regrole, tenant text) RETURNS void
    LANGUAGE sql
    BEGIN ATOMIC
        SELECT pg_catalog.count(*) FROM lake_router.grant_tenant(role, tenant);
    END;

CREATE FUNCTION lake.revoke_tenant(role regrole, tenant text) RETURNS void
    LANGUAGE sql
    BEGIN ATOMIC
        SELECT pg_catalog.count(*) FROM lake_router.revoke_tenant(role, tenant);
    END;

CREATE FUNCTION lake_router.define_lifecycle(nr int4, name text, initial_phase text, edges text[])
    RETURNS void
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON nr;
        SELECT lake.define_lifecycle(name, initial_phase, edges);
    $$;

CREATE FUNCTION lake_router.lifecycle_definition(nr int4, name text,
                                                 OUT initial_phase text, OUT edges text[])
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON nr;
        SELECT * FROM lake.lifecycle_definition(name);
    $$;

-- Whether partition nr has the lifecycle under another definition than
-- the one given (false where it has none, or the same one). Edges are
-- compared as lake builds them: their pairs in order, whatever the array's
-- lower bounds (which array_to_json leaves out).
CREATE FUNCTION lake_router.lifecycle_differs(nr int4, name text, initial_phase text, edges text[])
    RETURNS boolean
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d record;
BEGIN
    SELECT * INTO d FROM lake_router.lifecycle_definition(nr, name);
    -- Byte for byte, as lake compares phases: the parameter has the
    -- caller's collation, in which 'a' may equal 'A'.
    RETURN d.initial_phase COLLATE "C" IS DISTINCT FROM initial_phase COLLATE "C"
        OR array_to_json(d.edges)::text IS DISTINCT FROM array_to_json(edges)::text;
EXCEPTION WHEN undefined_object THEN
    RETURN false;
END
$$;

-- Refuse, as lake would, a definition that partition nr holds otherwise:
-- lake's own call there answers first (its argument and privilege checks,
-- in its order), and refuses with 42710, which is raised again naming the
-- partition; 'meanwhile' says when it was found while defining.
CREATE FUNCTION lake_router.refuse_other_definition(nr int4, name text, initial_phase text,
                                                    edges text[], meanwhile boolean)
    RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM lake_router.define_lifecycle(nr, name, initial_phase, edges);
EXCEPTION WHEN duplicate_object THEN
    RAISE EXCEPTION 'lifecycle "%" already exists', name
        USING ERRCODE = 'duplicate_object',
              DETAIL = CASE WHEN meanwhile
                       THEN format('Partition %s was given another definition meanwhile; the partitions before it have this one.', nr)
                       ELSE format('Partition %s defines it with another initial phase or other edges; nothing was written.', nr) END;
END
$$;

-- Defined on every partition that lacks it; 42710 when every partition
-- already has it (as lake refuses a second definition), and before
-- anything is written when a partition has it under another definition.
-- A retry after a partition failed completes the others: retry with the
-- same definition. A partition that gains another definition meanwhile (a
-- second definer in between) is named in a 42710 afterwards.
CREATE FUNCTION lake.define_lifecycle(name text, initial_phase text, edges text[]) RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n int4 := lake_router.partitions();
    existing int4 := 0;
    differs boolean;
BEGIN
    IF n = 0 THEN
        RAISE EXCEPTION 'foreign server "lake" names no partitions'
            USING ERRCODE = 'undefined_object',
                  HINT = 'Create it with CREATE SERVER lake FOREIGN DATA WRAPPER plproxy OPTIONS (p0 ''...'', ...).';
    END IF;
    FOR nr IN 0 .. n - 1 LOOP
        BEGIN
            differs := lake_router.lifecycle_differs(nr, name, initial_phase, edges);
        EXCEPTION WHEN OTHERS THEN
            -- Refused before any definition was compared (a role that may
            -- not define, a malformed name): lake's own call answers, with
            -- its checks in its order.
            PERFORM lake_router.define_lifecycle(nr, name, initial_phase, edges);
            RAISE;
        END;
        IF differs THEN
            PERFORM lake_router.refuse_other_definition(nr, name, initial_phase, edges, false);
        END IF;
    END LOOP;
    FOR nr IN 0 .. n - 1 LOOP
        BEGIN
            PERFORM lake_router.define_lifecycle(nr, name, initial_phase, edges);
        EXCEPTION WHEN duplicate_object THEN
            IF lake_router.lifecycle_differs(nr, name, initial_phase, edges) THEN
                PERFORM lake_router.refuse_other_definition(nr, name, initial_phase, edges, true);
            END IF;
            existing := existing + 1;
        END;
    END LOOP;
    IF existing = n THEN
        RAISE EXCEPTION 'lifecycle "%" already exists', name
            USING ERRCODE = 'duplicate_object';
    END IF;
END
$$;

CREATE FUNCTION lake_router.seal() RETURNS SETOF bigint
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON ALL;
        TARGET lake.seal;
    $$;

CREATE FUNCTION lake_router.checkpoint() RETURNS SETOF bigint
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON ALL;
        TARGET lake.checkpoint;
    $$;

CREATE FUNCTION lake_router.rebuild_owner_index() RETURNS SETOF bigint
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON ALL;
        TARGET lake.rebuild_owner_index;
    $$;

-- Seals every partition's open cycle; the highest cycle number sealed (each
-- partition numbers its own), NULL when nothing was pending anywhere.
CREATE FUNCTION lake.seal() RETURNS bigint
    LANGUAGE sql
    BEGIN ATOMIC
        SELECT lake_router.require_own_transaction('lake.seal()');
        SELECT pg_catalog.max(c) FROM lake_router.seal() c;
    END;

-- Snapshots every partition's owners; the highest cycle covered.
CREATE FUNCTION lake.checkpoint() RETURNS bigint
    LANGUAGE sql
    BEGIN ATOMIC
        SELECT lake_router.require_own_transaction('lake.checkpoint()');
        SELECT pg_catalog.max(c) FROM lake_router.checkpoint() c;
    END;

-- Rewrites every partition's owner index; the rows written, summed.
CREATE FUNCTION lake.rebuild_owner_index() RETURNS bigint
    LANGUAGE sql
    BEGIN ATOMIC
        SELECT lake_router.require_own_transaction('lake.rebuild_owner_index()');
        SELECT pg_catalog.sum(n)::pg_catalog.int8 FROM lake_router.rebuild_owner_index() n;
    END;

-- ----------------------------------------------------------------------
-- Readers across partitions: every partition's rows, each with its
-- partition (the partition's lake.partition).
-- ----------------------------------------------------------------------

-- Each partition numbers its own cycles: a reader that follows the log
-- keeps one cursor per partition. lake_router.log and lake_router.cycles
-- take them as an array, element p + 1 for partition p (NULL or missing:
-- refused as lake refuses a NULL after_cycle); one after_cycle for all of
-- them, as lake.log(after_cycle) takes, skips the newer cycles of a
-- partition whose numbers are lower.
CREATE FUNCTION lake_router.log_on_all(after_cycles bigint[])
    RETURNS TABLE(cycle bigint, owner text, "position" bigint, epoch int, seq bigint,
                  from_phase text, to_phase text, lap bigint, payload bytea,
                  operation_id text, partition int)
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON ALL;
        SELECT l.*, pg_catalog.current_setting('lake.partition')::pg_catalog.int4 AS partition
          FROM lake.log((after_cycles)[pg_catalog.current_setting('lake.partition')::pg_catalog.int4
                                       OPERATOR(pg_catalog.+) 1]) l;
    $$;

CREATE FUNCTION lake_router.cycles_on_all(after_cycles bigint[])
    RETURNS TABLE(cycle bigint, epoch int, sealed_at timestamptz, casts int,
                  bytes bigint, stored_bytes bigint, lsn pg_lsn, partition int)
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON ALL;
        SELECT c.*, pg_catalog.current_setting('lake.partition')::pg_catalog.int4 AS partition
          FROM lake.cycles((after_cycles)[pg_catalog.current_setting('lake.partition')::pg_catalog.int4
                                          OPERATOR(pg_catalog.+) 1]) c;
    $$;

CREATE FUNCTION lake_router.log(after_cycles bigint[])
    RETURNS TABLE(cycle bigint, owner text, "position" bigint, epoch int, seq bigint,
                  from_phase text, to_phase text, lap bigint, payload bytea,
                  operation_id text, partition int)
    LANGUAGE sql
    BEGIN ATOMIC
        SELECT * FROM lake_router.log_on_all(after_cycles);
    END;

CREATE FUNCTION lake_router.cycles(after_cycles bigint[])
    RETURNS TABLE(cycle bigint, epoch int, sealed_at timestamptz, casts int,
                  bytes bigint, stored_bytes bigint, lsn pg_lsn, partition int)
    LANGUAGE sql
    BEGIN ATOMIC
        SELECT * FROM lake_router.cycles_on_all(after_cycles);
    END;

-- One after_cycle for every partition.
CREATE FUNCTION lake.log(after_cycle bigint DEFAULT 0)
    RETURNS TABLE(cycle bigint, owner text, "position" bigint, epoch int, seq bigint,
                  from_phase text, to_phase text, lap bigint, payload bytea,
                  operation_id text, partition int)
    LANGUAGE sql
    BEGIN ATOMIC
        SELECT * FROM lake_router.log(pg_catalog.array_fill(after_cycle, ARRAY[lake_router.partitions()]));
    END;

CREATE FUNCTION lake.cycles(after_cycle bigint DEFAULT 0)
    RETURNS TABLE(cycle bigint, epoch int, sealed_at timestamptz, casts int,
                  bytes bigint, stored_bytes bigint, lsn pg_lsn, partition int)
    LANGUAGE sql
    BEGIN ATOMIC
        SELECT * FROM lake_router.cycles(pg_catalog.array_fill(after_cycle, ARRAY[lake_router.partitions()]));
    END;

CREATE FUNCTION lake_router.admission()
    RETURNS TABLE(slots_in_use int, bytes_reserved bigint, max_concurrent int,
                  max_stream_bytes bigint, max_buffered_bytes bigint,
                  admitted bigint, waited bigint, rejected bigint, partition int)
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON ALL;
        SELECT a.*, pg_catalog.current_setting('lake.partition')::pg_catalog.int4 AS partition
          FROM lake.admission() a;
    $$;

CREATE FUNCTION lake.admission()
    RETURNS TABLE(slots_in_use int, bytes_reserved bigint, max_concurrent int,
                  max_stream_bytes bigint, max_buffered_bytes bigint,
                  admitted bigint, waited bigint, rejected bigint, partition int)
    LANGUAGE sql
    BEGIN ATOMIC
        SELECT * FROM lake_router.admission();
    END;

CREATE FUNCTION lake_router.stats()
    RETURNS TABLE(database text, worker_pid int, worker_state text,
                  worker_started_at timestamptz, worker_starts bigint,
                  config_reloads bigint, stages_open bigint, stages_expired bigint,
                  stage_chunks_expired bigint, epoch int, cycles_sealed bigint,
                  casts_sealed bigint, casts_pending bigint, mean_casts_per_cycle float8,
                  last_seal_ms float8, sealed_cycle bigint, recovery_owners bigint,
                  recovery_applied bigint, recovery_quarantined bigint,
                  recovery_ms float8, recovery_tail bigint, recovery_snapshot bigint,
                  last_snapshot bigint, sessions_waiting bigint, partition int)
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON ALL;
        SELECT s.*, pg_catalog.current_setting('lake.partition')::pg_catalog.int4 AS partition
          FROM lake.stats() s;
    $$;

CREATE FUNCTION lake.stats()
    RETURNS TABLE(database text, worker_pid int, worker_state text,
                  worker_started_at timestamptz, worker_starts bigint,
                  config_reloads bigint, stages_open bigint, stages_expired bigint,
                  stage_chunks_expired bigint, epoch int, cycles_sealed bigint,
                  casts_sealed bigint, casts_pending bigint, mean_casts_per_cycle float8,
                  last_seal_ms float8, sealed_cycle bigint, recovery_owners bigint,
                  recovery_applied bigint, recovery_quarantined bigint,
                  recovery_ms float8, recovery_tail bigint, recovery_snapshot bigint,
                  last_snapshot bigint, sessions_waiting bigint, partition int)
    LANGUAGE sql
    BEGIN ATOMIC
        SELECT * FROM lake_router.stats();
    END;

-- ----------------------------------------------------------------------
-- Checking the cluster
-- ----------------------------------------------------------------------

-- (lake.stats() fails where lake is not installed: check() reports that.)
CREATE FUNCTION lake_router.partition_settings(nr int4,
    OUT lake_partition int4, OUT lake_partitions int4, OUT in_recovery boolean,
    OUT serves_lake boolean, OUT datestyle text, OUT server_encoding text)
    LANGUAGE plproxy AS $$
        CLUSTER 'lake';
        RUN ON nr;
        SELECT pg_catalog.current_setting('lake.partition')::pg_catalog.int4 AS lake_partition,
               pg_catalog.current_setting('lake.partitions')::pg_catalog.int4 AS lake_partitions,
               pg_catalog.pg_is_in_recovery() AS in_recovery,
               (SELECT s.database OPERATOR(pg_catalog.=) pg_catalog.current_database()
                  FROM lake.stats() s) AS serves_lake,
               pg_catalog.current_setting('DateStyle') AS datestyle,
               pg_catalog.current_setting('server_encoding') AS server_encoding;
    $$;

-- One row per partition of server "lake": what the server at p<N> says it
-- is. ok is false when its lake.partition / lake.partitions do not match
-- its place, so its stage ids and receipts would route elsewhere; when it
-- is a standby; when the database p<N> names is not the one its lake
-- serves (lake.database), or has no lake; when its connection's DateStyle
-- is not ISO (PL/Proxy passes values as text, and a timestamp written as
-- 'SQL, DMY' is read back on the router as another date); when its
-- encoding is not the router's (a name would hash differently); or when it
-- cannot be reached. error then says why; the other partitions are still
-- reported.
CREATE FUNCTION lake_router.check()
    RETURNS TABLE(partition int4, lake_partition int4, lake_partitions int4,
                  in_recovery boolean, serves_lake boolean, datestyle text,
                  server_encoding text, ok boolean, error text)
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n int4 := lake_router.partitions();
BEGIN
    FOR nr IN 0 .. n - 1 LOOP
        partition := nr;
        error := NULL;
        BEGIN
            SELECT s.lake_partition, s.lake_partitions, s.in_recovery, s.serves_lake,
                   s.datestyle, s.server_encoding
              INTO lake_partition, lake_partitions, in_recovery, serves_lake,
                   datestyle, server_encoding
              FROM lake_router.partition_settings(nr) s;
            error := CASE
                WHEN lake_partition IS DISTINCT FROM nr OR lake_partitions IS DISTINCT FROM n THEN
                    format('the server is partition %s of %s, not %s of %s',
                           lake_partition, lake_partitions, nr, n)
                WHEN in_recovery IS NOT false THEN 'the server is a standby'
                WHEN serves_lake IS NOT true THEN
                    'lake on that server serves another database (lake.database)'
                WHEN datestyle NOT LIKE 'ISO%' THEN
                    format('the connection answers in DateStyle %s; add options=-cdatestyle=ISO to partition %s''s connection string',
                           datestyle, nr)
                WHEN server_encoding IS DISTINCT FROM current_setting('server_encoding') THEN
                    format('the server encoding is %s, the router''s %s',
                           server_encoding, current_setting('server_encoding'))
            END;
            ok := error IS NULL;
        EXCEPTION WHEN OTHERS THEN
            lake_partition := NULL;
            lake_partitions := NULL;
            in_recovery := NULL;
            serves_lake := NULL;
            datestyle := NULL;
            server_encoding := NULL;
            ok := false;
            error := SQLERRM;
        END;
        RETURN NEXT;
    END LOOP;
END
$$;

-- The installing role's default privileges (ALTER DEFAULT PRIVILEGES) apply
-- to what this script creates: nobody but the owner may create in
-- lake_router (a planted overload would shadow a routing helper), and the
-- routed interface and its helpers, which PL/Proxy runs as the caller, stay
-- open to every role, as on a partition.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT a.grantee
               FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
              WHERE n.nspname OPERATOR(pg_catalog.=) 'lake_router'
                AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'
                AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner
    LOOP
        EXECUTE pg_catalog.format('REVOKE CREATE ON SCHEMA lake_router FROM %s',
            CASE WHEN r.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                 ELSE r.grantee::pg_catalog.regrole::pg_catalog.text END);
    END LOOP;
    FOR r IN
        SELECT p.oid::pg_catalog.regprocedure AS f
          FROM pg_catalog.pg_proc p, pg_catalog.pg_depend d
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
           AND d.objid OPERATOR(pg_catalog.=) p.oid
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
           AND d.refobjid OPERATOR(pg_catalog.=) (SELECT e.oid FROM pg_catalog.pg_extension e
                                                  WHERE e.extname OPERATOR(pg_catalog.=) 'lake_router')
           AND d.deptype OPERATOR(pg_catalog.=) 'e'
           AND p.prorettype OPERATOR(pg_catalog.<>) 'pg_catalog.event_trigger'::pg_catalog.regtype
           AND p.oid OPERATOR(pg_catalog.<>) 'lake_router.keep_partitions()'::pg_catalog.regprocedure
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO PUBLIC', r.f);
    END LOOP;
END
$$;
GRANT USAGE ON TYPE lake.receipt, lake.coordinate TO PUBLIC;
