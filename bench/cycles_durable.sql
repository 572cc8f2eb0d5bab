-- bench/cycles.sh: a durable no-step cast (cast + await), 256-byte JSON payload.
\set n :n + 1
SELECT lake.cast_durable('c' || :client_id, NULL, NULL, cycles.payload('r' || :run || '-' || :client_id || '-' || :n));
