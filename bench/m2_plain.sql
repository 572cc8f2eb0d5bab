-- Measurement 2 baseline: the plain-SQL implementation with the same guarantees (bench/setup.sql).
\set n :n + 1
SELECT bench.plain_append('one', 't1', 'r' || :run || '-c' || :client_id || '-' || :n, bench.payload256('r' || :run || '-c' || :client_id || '-' || :n));
