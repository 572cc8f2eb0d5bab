-- Measurement 1 baseline: idempotent plain INSERT of the same rows.
\set n :n + 1
INSERT INTO bench.plain (tenant, operation_id, payload) VALUES ('t1', 'r' || :run || '-c' || :client_id || '-' || :n, bench.payload256('r' || :run || '-c' || :client_id || '-' || :n)) ON CONFLICT DO NOTHING;
