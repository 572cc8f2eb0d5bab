-- bench/cycles.sh: a fire-and-forget no-step cast, 256-byte JSON payload.
\set n :n + 1
SELECT lake.cast('c' || :client_id, NULL, NULL, cycles.payload('r' || :run || '-' || :client_id || '-' || :n));
