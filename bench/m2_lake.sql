-- Measurement 2: lake.append, every client on ONE dataset.
\set n :n + 1
SELECT lake.append('one', 't1', 'r' || :run || '-c' || :client_id || '-' || :n, bench.payload256('r' || :run || '-c' || :client_id || '-' || :n));
