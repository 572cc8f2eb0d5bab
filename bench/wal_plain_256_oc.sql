-- Measurement 4, for information: the idempotent INSERT ... ON CONFLICT DO NOTHING of measurement 1.
\set n :n + 1
INSERT INTO bench.wal_oc (tenant, operation_id, payload) VALUES ('t1', 'w256-' || :n, bench.payload256('w256-' || :n)) ON CONFLICT DO NOTHING;
