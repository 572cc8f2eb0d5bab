-- Per-role caps (SPEC §3 Tenants): set by a superuser with ALTER ROLE ... SET,
-- counted for the calling role, refused with 53000 naming the cap; another
-- role is not affected. Concurrent permits: isolation spec rolecap_appends.
CREATE ROLE lake_cap_a LOGIN;
CREATE ROLE lake_cap_b LOGIN;
-- A group role of lake_cap_a's that holds its tenant too.
CREATE ROLE lake_cap_grp NOLOGIN;
GRANT lake_cap_grp TO lake_cap_a;
GRANT USAGE ON SCHEMA lake TO lake_cap_a, lake_cap_b, lake_cap_grp;
SELECT lake.create_dataset('capped');
SELECT lake.grant_tenant('lake_cap_a', 'acme');
SELECT lake.grant_tenant('lake_cap_b', 'globex');
SELECT lake.grant_tenant('lake_cap_grp', 'acme');

-- No cap by default.
SHOW lake.role_max_appends;
SHOW lake.role_max_open_stages;
SHOW lake.role_max_stage_chunks;
-- A superuser sets them per role; a role cannot set or lift its own.
ALTER ROLE lake_cap_a SET lake.role_max_open_stages = 2;
ALTER ROLE lake_cap_a SET lake.role_max_stage_chunks = 3;
ALTER ROLE lake_cap_a SET lake.role_max_appends = 1;
SELECT t.err($$ALTER ROLE lake_cap_a SET lake.role_max_appends = -1$$);
SET ROLE lake_cap_b;
SELECT t.err($$ALTER ROLE lake_cap_b SET lake.role_max_open_stages = 1$$);
SELECT t.err($$SET lake.role_max_open_stages = 0$$);
RESET ROLE;

\c - lake_cap_a
SHOW lake.role_max_open_stages;
SELECT t.err($$SET lake.role_max_stage_chunks = 0$$);
-- Open stages: two, then 53000; the open one is still returned; an abort
-- makes room.
SELECT lake.begin_append('capped', 'acme', 'o-1') AS s1 \gset
SELECT lake.begin_append('capped', 'acme', 'o-2') AS s2 \gset
SELECT regexp_replace(t.err($$SELECT lake.begin_append('capped', 'acme', 'o-3')$$), 'stage [0-9]+', 'stage <id>', 'g');
SELECT lake.begin_append('capped', 'acme', 'o-1') = :s1 AS same_stage;
SELECT lake.abort_append(:s2);
SELECT lake.begin_append('capped', 'acme', 'o-3') > 0 AS begun;
-- The caps in force are the login role's (ALTER ROLE ... SET applies at
-- login), and so is the count: SET ROLE to another role of its tenant
-- opens no second budget.
SET ROLE lake_cap_grp;
SELECT regexp_replace(t.err($$SELECT lake.begin_append('capped', 'acme', 'o-4')$$), 'stage [0-9]+', 'stage <id>', 'g') AS set_role_stage;
RESET ROLE;
-- Chunks per stage: zero-byte chunks count like any other; an identical
-- re-send adds nothing and is accepted at the cap.
SELECT lake.append_chunk(:s1, n, ''::bytea) FROM generate_series(0, 2) n;
SELECT rejected AS rejected_before FROM lake.admission() \gset
SELECT regexp_replace(t.err(format('SELECT lake.append_chunk(%s, 3, %L::bytea)', :s1, '')), 'stage [0-9]+', 'stage <id>', 'g');
-- The cap's refusal counts in lake.admission().rejected.
SELECT rejected - :rejected_before AS rejected FROM lake.admission();
SELECT lake.append_chunk(:s1, 2, ''::bytea);
SELECT regexp_replace(t.err(format('SELECT lake.append_chunk(%s, 4, %L::bytea)', :s1, '\x01')), 'stage [0-9]+', 'stage <id>', 'g');
SELECT lake.commit_append(:s1) AS version;

-- Another role is not capped.
\c - lake_cap_b
SHOW lake.role_max_open_stages;
SELECT lake.begin_append('capped', 'globex', 'b-' || n) > 0 AS begun FROM generate_series(1, 3) n;
SELECT lake.append_chunk(lake.begin_append('capped', 'globex', 'b-1'), n, ''::bytea) FROM generate_series(0, 4) n;

\c - postgres
SELECT operation_id FROM lake_data.stage s JOIN lake_data.dataset d ON d.id = s.dataset_id
  WHERE d.name = 'capped' ORDER BY 1;

-- Pending cast bytes: casts accepted and not yet sealed (lake.cycle_interval
-- is 1h here), counted per role as the cycle buffer space they take, freed
-- by the seal.
SELECT lake.create_owner('capped_owner', 'kanban', 'globex');
SET lake.role_max_pending_cast_bytes = '2kB';
SET SESSION AUTHORIZATION lake_cap_b;
SELECT (lake.cast('capped_owner', NULL, NULL, convert_to(repeat('p', 600), 'UTF8'))).seq > 0 AS cast
FROM generate_series(1, 2);
SELECT t.err($$SELECT lake.cast('capped_owner', NULL, NULL, convert_to(repeat('p', 600), 'UTF8'))$$);
RESET SESSION AUTHORIZATION;
RESET lake.role_max_pending_cast_bytes;
-- Another role, uncapped, still casts; a seal frees the capped role's bytes.
SELECT (lake.cast('capped_owner', NULL, NULL, convert_to(repeat('q', 600), 'UTF8'))).seq > 0 AS cast;
SELECT lake.seal() > 0 AS sealed;
SET lake.role_max_pending_cast_bytes = '2kB';
SET SESSION AUTHORIZATION lake_cap_b;
SELECT (lake.cast('capped_owner', NULL, NULL, convert_to(repeat('p', 600), 'UTF8'))).seq > 0 AS cast;
RESET SESSION AUTHORIZATION;
RESET lake.role_max_pending_cast_bytes;
-- A session of the role without the cap (one that logged in before the
-- cap was set) is counted too: a capped session of the role sees its casts.
SELECT lake.seal() > 0 AS sealed;
SET SESSION AUTHORIZATION lake_cap_b;
SELECT (lake.cast('capped_owner', NULL, NULL, convert_to(repeat('p', 600), 'UTF8'))).seq > 0 AS uncapped_cast
FROM generate_series(1, 2);
RESET SESSION AUTHORIZATION;
SET lake.role_max_pending_cast_bytes = '2kB';
SET SESSION AUTHORIZATION lake_cap_b;
SELECT t.err($$SELECT lake.cast('capped_owner', NULL, NULL, convert_to(repeat('p', 600), 'UTF8'))$$);
RESET SESSION AUTHORIZATION;
RESET lake.role_max_pending_cast_bytes;
-- The bytes are counted per role in a table of one entry per server process
-- slot, and one session can cast as many roles. Once that many roles have
-- casts waiting for the next seal, the next role's cast is not told it has
-- reached its cap: it has the worker seal early, as a cast that finds the
-- ring full does, and goes in (within lake.admission_queue_wait, else 53000:
-- isolation spec rolecap_table).
SELECT lake.seal() > 0 AS sealed;
CREATE FUNCTION pg_temp.cast_as_roles(n int) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. n LOOP
        EXECUTE format('SET SESSION AUTHORIZATION lake_cap_many_%s', i);
        BEGIN
            PERFORM lake.cast('capped_owner', NULL, NULL, '\x01'::bytea);
        EXCEPTION WHEN insufficient_resources THEN
            RESET SESSION AUTHORIZATION;
            RETURN format('refused after %s roles: %s', CASE WHEN i > n - 8 THEN 'nearly all' ELSE i::text END, SQLERRM);
        END;
        RESET SESSION AUTHORIZATION;
    END LOOP;
    RETURN 'every role cast';
END $$;
SELECT current_setting('max_connections')::int + current_setting('autovacuum_max_workers')::int + 1
     + current_setting('max_worker_processes')::int + current_setting('max_wal_senders')::int AS slots \gset
SET t.slots = :slots;
DO $$
BEGIN
    FOR i IN 1 .. current_setting('t.slots')::int + 1 LOOP
        EXECUTE format('CREATE ROLE lake_cap_many_%s', i);
        EXECUTE format('GRANT USAGE ON SCHEMA lake TO lake_cap_many_%s', i);
        PERFORM lake.grant_tenant(format('lake_cap_many_%s', i)::regrole, 'globex');
    END LOOP;
END $$;
SET lake.role_max_pending_cast_bytes = '2kB';
SELECT cycles_sealed AS sealed_before FROM lake.stats() \gset
SELECT pg_temp.cast_as_roles(:slots + 1);
SELECT cycles_sealed > :sealed_before AS sealed_early FROM lake.stats();
RESET lake.role_max_pending_cast_bytes;
SELECT lake.seal() > 0 AS sealed;
DO $$
BEGIN
    FOR i IN 1 .. current_setting('t.slots')::int + 1 LOOP
        PERFORM lake.revoke_tenant(format('lake_cap_many_%s', i)::regrole, 'globex');
        EXECUTE format('DROP OWNED BY lake_cap_many_%s', i);
        EXECUTE format('DROP ROLE lake_cap_many_%s', i);
    END LOOP;
END $$;

-- The cap is "at most": a cast that brings the role's pending bytes to
-- exactly lake.role_max_pending_cast_bytes is accepted, one byte less refuses.
CREATE ROLE lake_cap_x LOGIN;
GRANT USAGE ON SCHEMA lake, t TO lake_cap_x;
SELECT lake.grant_tenant('lake_cap_x', 'xcap');
SELECT lake.create_owner('xcap_owner', 'kanban', 'xcap');
SELECT lake.seal() IS NOT DISTINCT FROM lake.seal() AS settled;
SET lake.role_max_pending_cast_bytes = 1;
SET SESSION AUTHORIZATION lake_cap_x;
SELECT substring(t.err($$SELECT lake.cast('xcap_owner', NULL, NULL, convert_to(repeat('p', 600), 'UTF8'))$$)
                 from 'this one needs (\d+)') AS need \gset
RESET SESSION AUTHORIZATION;
SELECT :need > 600 AS need_known;
SELECT set_config('lake.role_max_pending_cast_bytes', (:need - 1)::text, false) IS NOT NULL AS cap_below;
SET SESSION AUTHORIZATION lake_cap_x;
SELECT left(t.err($$SELECT lake.cast('xcap_owner', NULL, NULL, convert_to(repeat('p', 600), 'UTF8'))$$), 5) AS one_byte_over;
RESET SESSION AUTHORIZATION;
SELECT set_config('lake.role_max_pending_cast_bytes', :need::text, false) IS NOT NULL AS cap_exact;
SET SESSION AUTHORIZATION lake_cap_x;
SELECT t.err($$SELECT lake.cast('xcap_owner', NULL, NULL, convert_to(repeat('p', 600), 'UTF8'))$$) AS exactly_at_cap;
SELECT left(t.err($$SELECT lake.cast('xcap_owner', NULL, NULL, convert_to(repeat('p', 600), 'UTF8'))$$), 5) AS then_over;
RESET SESSION AUTHORIZATION;
RESET lake.role_max_pending_cast_bytes;
SELECT lake.seal() > 0 AS sealed;
SELECT lake.revoke_tenant('lake_cap_x', 'xcap');
DROP OWNED BY lake_cap_x;
DROP ROLE lake_cap_x;
