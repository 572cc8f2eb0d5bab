-- bench/cycles.sh peer: one PgQ event per transaction, the same 256-byte JSON payload.
\set n :n + 1
SELECT pgq.insert_event('cycles', 'cast', cycles.payload_text('r' || :run || '-' || :client_id || '-' || :n));
