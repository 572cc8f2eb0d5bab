-- Measurement 4 baseline: plain INSERT of the same row (bytea column, default TOAST/pglz).
\set n :n + 1
\set d :n % 20
INSERT INTO bench.wal (tenant, operation_id, payload) VALUES ('t1', 'w64k-' || :n, convert_to('{"op":"w64k-' || :n || '"}' || chr(10), 'UTF8') || (SELECT x.body FROM bench.doc x WHERE x.id = :d));
