-- bench/cycles.sh baseline of cycles_cast.sql: a trivial SQL call of the same shape.
\set n :n + 1
SELECT cycles.trivial('c' || :client_id, NULL, NULL, cycles.payload('r' || :run || '-' || :client_id || '-' || :n));
