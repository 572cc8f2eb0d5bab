-- Long-lived memory: once a backend's caches are warm, calling every
-- function again leaves its long-lived memory contexts where they were. A
-- leak into TopMemoryContext, CacheMemoryContext or a context of lake's own
-- would survive the transaction and show here. (Cached plans are left out:
-- they are rebuilt whole when autovacuum's statistics invalidate them, so
-- their size moves without any leak.)
CREATE FUNCTION t.long_lived_bytes() RETURNS bigint LANGUAGE sql AS $$
    SELECT sum(total_bytes - free_bytes)::bigint
    FROM pg_backend_memory_contexts
    WHERE name IN ('TopMemoryContext', 'CacheMemoryContext') OR name LIKE 'lake%'
$$;

SELECT lake.create_dataset('m_data');
SELECT lake.create_owner('m_owner');
CREATE TABLE t.m_round (n int);
INSERT INTO t.m_round VALUES (0);

-- One round of the public API, with fresh operation ids each time.
CREATE PROCEDURE t.m_work(rounds int) LANGUAGE plpgsql AS $$
DECLARE
    n int;
    s bigint;
    r lake.receipt;
    phases text[] := ARRAY['Planning', 'CognitiveWork', 'Evaluation', 'Commit'];
    v bigint;
BEGIN
    FOR i IN 1 .. rounds LOOP
        UPDATE t.m_round SET n = m_round.n + 1 RETURNING m_round.n INTO n;
        v := lake.append('m_data', 'm', 'op-' || n, convert_to(repeat('m', 5000 + n), 'UTF8'));
        PERFORM lake.append('m_data', 'm', 'op-' || n, convert_to(repeat('m', 5000 + n), 'UTF8'));
        PERFORM lake.read('m_data', v), lake.read_operation('m_data', 'm', 'op-' || n);
        PERFORM count(*) FROM lake.versions('m_data', v - 1);
        s := lake.begin_append('m_data', 'm', 'stage-' || n);
        PERFORM lake.append_chunk(s, 0, '\x0102'::bytea);
        PERFORM lake.append_chunk(s, 1, '\x03'::bytea);
        PERFORM lake.commit_append(s);
        s := lake.begin_append('m_data', 'm', 'aborted-' || n);
        PERFORM lake.abort_append(s);
        r := lake.cast('m_owner', phases[(n - 1) % 4 + 1], phases[n % 4 + 1],
                       '\x00'::bytea, NULL, 'cast-' || n);
        PERFORM lake.await_durable(r);
        PERFORM lake.cast('m_owner', phases[(n - 1) % 4 + 1], phases[n % 4 + 1],
                          '\x00'::bytea, NULL, 'cast-' || n);
        PERFORM * FROM lake.owner_state('m_owner');
        PERFORM count(*) FROM lake.trajectory('m_owner', n - 1);
        PERFORM count(*) FROM lake.cycles((SELECT max(cycle) FROM lake.cycles()) - 1);
        PERFORM * FROM lake.admission();
        PERFORM * FROM lake.stats();
        COMMIT;
    END LOOP;
END $$;

-- Kanban loops Planning → CognitiveWork → Evaluation → Commit → Planning.
-- Warm the caches (and the measuring function's own plan) first; then three
-- batches of 200 rounds, about 3,600 calls each. A leak grows every batch;
-- a cache entry built once (a relcache entry rebuilt after autovacuum's
-- invalidation, say) grows only some (two of two did once, under valgrind
-- on a loaded machine). So the smallest of the three growths must stay
-- under allocator noise: a leak of 48 bytes a round fails.
CALL t.m_work(20);
-- Paths that first run only under load (an await that finds its cycle
-- being sealed) may warm later: a first batch is not measured.
CALL t.m_work(100);
SELECT t.long_lived_bytes() IS NOT NULL AS warm;
SELECT t.long_lived_bytes() AS before \gset
CALL t.m_work(200);
SELECT t.long_lived_bytes() AS middle \gset
CALL t.m_work(200);
SELECT t.long_lived_bytes() AS late \gset
CALL t.m_work(200);
SELECT least(:middle - :before, :late - :middle, t.long_lived_bytes() - :late) < 8192 AS no_growth;
SELECT count(*) AS versions FROM lake.versions('m_data');
SELECT phase, lap, position FROM lake.owner_state('m_owner');

-- Within one statement: every call of a set-returning function of lake's
-- leaves in the statement's memory no more than a few bytes (it built its
-- result descriptor afresh from the catalog, about 600 bytes a call, held
-- to the statement's end: 740 MB for a million owner_state() calls).
CREATE FUNCTION t.statement_bytes(calls int, f text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    b bigint;
BEGIN
    EXECUTE format($q$
        WITH c AS MATERIALIZED (SELECT count(*) AS n FROM (SELECT %s FROM generate_series(1, %s)) x)
        SELECT (SELECT n FROM c) * 0 + (SELECT sum(total_bytes) FROM pg_backend_memory_contexts)$q$, f, calls)
    INTO b;
    RETURN b;
END $$;
SELECT f, (t.statement_bytes(20000, f) - t.statement_bytes(1, f)) / 20000 < 200 AS few_bytes_a_call
FROM unnest(ARRAY[$$lake.owner_state('m_owner')$$, $$lake.versions('m_data', 1000000)$$,
                  $$lake.trajectory('m_owner', 1000000)$$, $$lake.log(1000000)$$,
                  $$lake.cycles(1000000)$$, $$lake.admission()$$, $$lake.stats()$$]) f;
