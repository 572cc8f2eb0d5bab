-- A hostile search_path (SECURITY.md): lake's C functions carry no
-- SET search_path clause; the store sets pg_catalog, pg_temp itself around
-- every SQL statement it runs (store.c), and every other name it resolves
-- is looked up in its schema by OID. A role plants shadowing operators,
-- functions and relations, puts them first on its path and calls every
-- public function: no planted object is ever used, and every statement
-- lake runs sees search_path = pg_catalog, pg_temp.

-- The C functions have no SET clause (it cost a GUC nest level, a
-- set_config_option and a search-path recomputation on every call).
SELECT l.lanname, p.proconfig IS NULL AS no_set_clause, count(*) AS functions
FROM pg_proc p
JOIN pg_language l ON l.oid = p.prolang
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'lake'
GROUP BY 1, 2 ORDER BY 1, 2;

-- t.spied: the search_path in force for each statement that writes a
-- lake_data table through SQL (a statement trigger on every table).
CREATE TABLE t.spied (tbl text, op text, path text);
CREATE FUNCTION t.spy() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO t.spied VALUES (TG_TABLE_NAME, TG_OP, pg_catalog.current_setting('search_path'));
    RETURN NULL;
END $$;
-- t.each_table(sql): run sql formatted with each lake_data table's name.
CREATE FUNCTION t.each_table(q text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'lake_data' AND c.relkind = 'r' LOOP
        EXECUTE format(q, r.relname);
    END LOOP;
END $$;
SELECT t.each_table('CREATE TRIGGER zz_spy AFTER INSERT OR UPDATE OR DELETE ON lake_data.%I '
                    'FOR EACH STATEMENT EXECUTE FUNCTION t.spy()');
-- t.try(sql): like t.err, with no name of its own resolved on the path.
CREATE FUNCTION t.try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE OPERATOR(pg_catalog.||) ': ' OPERATOR(pg_catalog.||) SQLERRM;
END $$;

CREATE ROLE lake_eve LOGIN;
GRANT lake_admin TO lake_eve;
GRANT USAGE ON SCHEMA lake TO lake_eve;
GRANT CREATE ON DATABASE contrib_regression TO lake_eve;

SET ROLE lake_eve;
-- The planted objects: every comparison operator on the types lake
-- compares, the functions and aggregates its statements call, and
-- relations named like lake's tables (in its schema and in pg_temp, which
-- a path searches first for relations unless it names pg_temp). Each
-- raises when used.
CREATE SCHEMA planted;
CREATE FUNCTION planted.boom() RETURNS boolean LANGUAGE plpgsql
    AS $$BEGIN RAISE EXCEPTION 'planted object used'; END$$;
DO $$
DECLARE
    ty text;
    op text;
    n int := 0;
BEGIN
    FOREACH ty IN ARRAY '{int4,int8,text,bytea,oid,name,timestamptz}'::text[] LOOP
        FOREACH op IN ARRAY '{=,<>,<,>,<=,>=}'::text[] LOOP
            n := n + 1;
            EXECUTE format('CREATE FUNCTION planted.op%s(%s, %s) RETURNS boolean LANGUAGE plpgsql '
                           'AS $b$BEGIN RAISE EXCEPTION ''planted operator %s used''; END$b$',
                           n, ty, ty, op);
            EXECUTE format('CREATE OPERATOR planted.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = planted.op%s)',
                           op, ty, ty, n);
        END LOOP;
    END LOOP;
END $$;
DO $$
DECLARE
    sig text;
BEGIN
    FOREACH sig IN ARRAY ARRAY['lower(text)', 'upper(text)', 'now()', 'clock_timestamp()', 'count()',
                               'max(int8)', 'max(int4)', 'min(int8)', 'sum(int4)', 'sum(int8)',
                               'octet_length(bytea)', 'length(bytea)', 'nextval(regclass)',
                               'current_setting(text)', 'pg_has_role(oid, oid, text)',
                               'pg_has_role(name, text)', 'sha256(bytea)', 'int8(int4)', 'text(name)'] LOOP
        EXECUTE format('CREATE FUNCTION planted.%s RETURNS int8 LANGUAGE plpgsql '
                       'AS $b$BEGIN RAISE EXCEPTION ''planted function %s used''; END$b$', sig, sig);
    END LOOP;
    FOREACH sig IN ARRAY '{dataset,version,chunk,stage,tenant_grant,dictionary,lifecycle,owner,'
                         'writer,cycle,cycle_owner,cast_operation,snapshot,blob_seq,pg_roles}'::text[] LOOP
        EXECUTE format('CREATE VIEW planted.%I AS SELECT planted.boom() AS boom', sig);
        EXECUTE format('CREATE TEMP VIEW %I AS SELECT planted.boom() AS boom', sig);
    END LOOP;
END $$;
SET search_path = planted, pg_catalog;
-- They are live: resolved by name, they win.
SELECT t.try('SELECT 1::int8 = 1::int8') AS operator,
       t.try('SELECT count(*) FROM lake.cycles()') AS aggregate,
       t.try('SELECT now()') AS function,
       t.try('SELECT * FROM version') AS relation;

-- Every public function, with this path.
SELECT lake.create_dataset('sp_ds');
SELECT lake.grant_tenant('lake_eve', 'sp_t');
SELECT lake.append('sp_ds', 'sp_t', 'sp-1', '\x01'::bytea) AS v1 \gset
SELECT lake.append('sp_ds', 'sp_t', 'sp-1', '\x01'::bytea) IS NOT DISTINCT FROM :v1 AS replayed;
SELECT t.try($$SELECT lake.append('sp_ds', 'sp_t', 'sp-1', '\x02'::bytea)$$) AS conflict;
SELECT lake.read('sp_ds', :v1), lake.read_operation('sp_ds', 'sp_t', 'sp-1');
SELECT lake.begin_append('sp_ds', 'sp_t', 'sp-2') AS s \gset
SELECT lake.append_chunk(:s, 0, '\x0203'::bytea);
SELECT lake.commit_append(:s) IS NOT NULL AS committed;
SELECT lake.begin_append('sp_ds', 'sp_t', 'sp-3') AS s \gset
SELECT lake.abort_append(:s);
SELECT operation_id, bytes FROM lake.versions('sp_ds');
SELECT t.try($$SELECT lake.train_dictionary('sp_ds')$$) AS train;
SELECT lake.define_lifecycle('sp_lc', 'Open', '{{Open,Done},{Done,Open}}');
SELECT lake.create_owner('sp_owner', 'sp_lc', 'sp_t');
SELECT lake.cast('sp_owner', 'Open', 'Done', '\x01'::bytea, NULL, 'c-1') AS r \gset
SELECT lake.cast('sp_owner', 'Open', 'Done', '\x01'::bytea, NULL, 'c-1') IS NOT DISTINCT FROM :'r'::lake.receipt AS cast_replayed;
SELECT (lake.cast_durable('sp_owner', 'Done', 'Open')).position AS durable_position;
SELECT (lake.await_durable(:'r'::lake.receipt)).position AS awaited_position;
SELECT phase, lap, position, quarantined FROM lake.owner_state('sp_owner');
SELECT position, from_phase, to_phase, operation_id FROM lake.trajectory('sp_owner');
SELECT owner, position FROM lake.log() WHERE owner OPERATOR(pg_catalog.=) 'sp_owner';
SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>) 0 AS cycles FROM lake.cycles();
SELECT max_concurrent IS NOT NULL AS admission FROM lake.admission();
SELECT worker_state FROM lake.stats();
SELECT lake.seal() IS NULL AS nothing_to_seal;
SELECT lake.checkpoint() IS NOT NULL AS checkpointed;
SELECT owner, quarantined FROM lake.recover('sp_owner');
SELECT lake.release_owner('sp_owner');
SELECT lake.revoke_tenant('lake_eve', 'sp_t');
SELECT t.try($$SELECT lake.read('sp_ds', 1)$$) AS revoked;
RESET search_path;
RESET ROLE;

-- Every SQL statement lake ran (here and in its worker) saw the safe path.
SELECT path, count(DISTINCT tbl) >= 5 AS several_tables FROM t.spied GROUP BY path;

SELECT t.each_table('DROP TRIGGER zz_spy ON lake_data.%I');
DROP TABLE t.spied;
DROP FUNCTION t.spy(), t.try(text), t.each_table(text);
SET client_min_messages = warning;
DROP SCHEMA planted CASCADE;
RESET client_min_messages;
REVOKE CREATE ON DATABASE contrib_regression FROM lake_eve;
DROP OWNED BY lake_eve;
DROP ROLE lake_eve;
