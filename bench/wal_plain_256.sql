-- Measurement 4 baseline: plain INSERT of the same row.
\set n :n + 1
INSERT INTO bench.wal (tenant, operation_id, payload) VALUES ('t1', 'w256-' || :n, bench.payload256('w256-' || :n));
