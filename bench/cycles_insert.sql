-- bench/cycles.sh baseline of cycles_durable.sql: one row per transaction, unique index.
\set n :n + 1
INSERT INTO cycles.plain (owner, operation_id, payload) VALUES ('c' || :client_id, 'r' || :run || '-' || :client_id || '-' || :n, cycles.payload('r' || :run || '-' || :client_id || '-' || :n));
