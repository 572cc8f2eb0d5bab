-- Measurement 1: lake.append, each client its own dataset, a new operation per call.
\set n :n + 1
SELECT lake.append('ds' || :client_id, 't1', 'r' || :run || '-c' || :client_id || '-' || :n, bench.payload256('r' || :run || '-c' || :client_id || '-' || :n));
