#!/usr/bin/env bash
# The main job: build and install lake, start a throwaway cluster with lake
# preloaded, create the extension and run a short visible demo. Run as root
# on a fresh Debian 12 machine (or as a user who can run PostgreSQL).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh

DEMO_DIR=${LAKE_DEMO_DIR:-/tmp/lake-demo}
PORT=${LAKE_DEMO_PORT:-5433}
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u "$LAKE_OS_USER" -- "$@"; else "$@"; fi; }

if [ -f "$DEMO_DIR/data/postmaster.pid" ]; then
  as_pg pg_ctl -D "$DEMO_DIR/data" -m immediate stop >/dev/null 2>&1 || true
fi
rm -rf "$DEMO_DIR"
mkdir -p "$DEMO_DIR"
[ "$(id -u)" = 0 ] && chown "$LAKE_OS_USER" "$DEMO_DIR"

echo "== starting a throwaway cluster in $DEMO_DIR (port $PORT)"
as_pg initdb -D "$DEMO_DIR/data" -A trust -U postgres >/dev/null
cat >> "$DEMO_DIR/data/postgresql.conf" <<CONF
port = $PORT
listen_addresses = ''
unix_socket_directories = '$DEMO_DIR'
shared_preload_libraries = 'lake'
lake.database = 'postgres'
lake.max_concurrent_appends = 4
CONF
as_pg pg_ctl -D "$DEMO_DIR/data" -l "$DEMO_DIR/server.log" -w start >/dev/null

PSQL=(psql -X -q -h "$DEMO_DIR" -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1)
sql() { as_pg "${PSQL[@]}" "$@"; }

sql -c "CREATE EXTENSION lake"
echo
echo "== idempotent appends"
sql <<'SQL'
\pset footer off
\echo '-- a dataset, and three appends under their own operation ids'
SELECT lake.create_dataset('invoices');
SELECT lake.append('invoices', 'acme', 'inv-1001', convert_to('{"total": 120.00}', 'UTF8')) AS version;
SELECT lake.append('invoices', 'acme', 'inv-1002', convert_to('{"total": 75.50}', 'UTF8')) AS version;
SELECT lake.append('invoices', 'globex', 'inv-1001', convert_to('{"total": 9.99}', 'UTF8')) AS version;
\echo '-- the client retries inv-1001 (same content): the original version comes back, nothing new is written'
SELECT lake.append('invoices', 'acme', 'inv-1001', convert_to('{"total": 120.00}', 'UTF8')) AS version;
\echo '-- a retry of inv-1001 with different content is refused (SQLSTATE LK001)'
\set ON_ERROR_STOP 0
SELECT lake.append('invoices', 'acme', 'inv-1001', convert_to('{"total": 999.00}', 'UTF8')) AS version;
\echo 'SQLSTATE' :SQLSTATE
\set ON_ERROR_STOP 1
\echo '-- a large, compressible payload is stored zstd-compressed in 1 MB chunks'
SELECT lake.append('invoices', 'acme', 'export-2026-12',
         convert_to(string_agg(format('{"invoice": %s, "customer": "acme", "total": %s}', i, i % 500), E'\n'), 'UTF8')) AS version
FROM generate_series(1, 50000) i;
\echo '-- the version history'
SELECT version, tenant, operation_id, bytes, stored_bytes FROM lake.versions('invoices');
\echo '-- reads decompress and verify the SHA-256 digest'
SELECT convert_from(lake.read('invoices', 1), 'UTF8') AS v1,
       convert_from(lake.read_operation('invoices', 'globex', 'inv-1001'), 'UTF8') AS globex_inv_1001;
\echo '-- admission: live slots and bytes, limits in force, totals since start'
SELECT * FROM lake.admission();
\echo '-- the worker'
SELECT * FROM lake.stats();
SELECT pid, backend_type, datname FROM pg_stat_activity WHERE backend_type = 'lake worker';
SQL

echo
echo "== a staged upload that survives the client going away"
STAGE=$(sql -At -c "SELECT lake.begin_append('invoices', 'acme', 'archive-2026')")
echo "-- client A opens stage $STAGE and uploads chunks 0 and 1, then disconnects"
sql -c "SELECT lake.append_chunk($STAGE, i, convert_to(repeat('archive line ' || i || E'\\n', 20000), 'UTF8')) FROM generate_series(0, 1) i" >/dev/null
echo "-- client B (a new connection) begins the same operation: it gets the same stage back"
sql -At -c "SELECT 'begin_append returned ' || lake.begin_append('invoices', 'acme', 'archive-2026')"
sql <<SQL
\pset footer off
\echo '-- it re-sends chunk 1 (a no-op: same bytes), sends chunk 2 and commits'
SELECT count(lake.append_chunk($STAGE, i, convert_to(repeat('archive line ' || i || E'\\n', 20000), 'UTF8'))) AS chunks_sent FROM generate_series(1, 2) i;
SELECT lake.commit_append($STAGE) AS version;
\echo '-- a late commit of the same stage (say, a retry after a lost reply) returns the same version'
SELECT lake.commit_append($STAGE) AS version;
SELECT version, operation_id, bytes, stored_bytes FROM lake.versions('invoices') WHERE operation_id = 'archive-2026';
SQL

echo
echo "== owners casting through their lifecycles from several sessions"
sql -c "SELECT lake.create_owner('agent-' || i) FROM generate_series(1, 3) i" >/dev/null
sql -c "SELECT lake.define_lifecycle('ticket', 'Open', '{{Open,Doing},{Doing,Done},{Doing,Open},{Done,Open}}')" >/dev/null
sql -c "SELECT lake.create_owner('T-42', 'ticket')" >/dev/null
# A lifecycle defined: the worker recovers the owners against it, and casts
# wait for that only up to lake.admission_queue_wait.
until [ "$(sql -At -c "SELECT worker_state FROM lake.stats()")" = "serving" ]; do sleep 0.1; done
for i in 1 2 3; do
  sql -At -F ' ' -c "
    SELECT 'session $i: agent-$i ' || m.f || ' -> ' || m.t || '  coordinate ' || lake.cast_durable('agent-$i', m.f, m.t,
             convert_to('{\"agent\": $i, \"step\": ' || g || '}', 'UTF8'))::text
    FROM generate_series(0, 4) g,
         LATERAL (SELECT (ARRAY['Planning','CognitiveWork','Evaluation','Commit','Planning'])[g + 1] AS f,
                         (ARRAY['CognitiveWork','Evaluation','Commit','Planning','CognitiveWork'])[g + 1] AS t) m" &
done
wait
sql <<'SQL'
\pset footer off
\echo '-- fire-and-forget casts get a receipt (epoch, seq) at once; the owner moves when its cycle is sealed'
SELECT lake.cast('T-42', 'Open', 'Doing', '{"who": "ana"}') AS receipt;
SELECT phase, position, pending FROM lake.owner_state('T-42');
SELECT lake.seal() AS sealed_cycle;
SELECT phase, position, pending FROM lake.owner_state('T-42');
\echo '-- a stale cast (the owner is no longer in Open) is refused with LK002; an illegal edge with LK003'
\set ON_ERROR_STOP 0
SELECT lake.cast('T-42', 'Open', 'Doing');
\echo 'SQLSTATE' :SQLSTATE
SELECT lake.cast('T-42', 'Doing', 'Nowhere');
\echo 'SQLSTATE' :SQLSTATE
\set ON_ERROR_STOP 1
\echo '-- an idempotent cast: the retry returns the same coordinate'
SELECT lake.cast_durable('T-42', 'Doing', 'Done', NULL, NULL, 'close-T-42') AS first,
       lake.cast_durable('T-42', 'Doing', 'Done', NULL, NULL, 'close-T-42') AS retry;
\echo '-- agent-2 read back: its trajectory'
SELECT position, cycle, epoch, seq, from_phase, to_phase, lap, convert_from(payload, 'UTF8') AS payload
FROM lake.trajectory('agent-2');
\echo '-- twelve fire-and-forget no-step casts to the three agents in one statement, then a seal'
SELECT count(lake.cast('agent-' || (g % 3 + 1), NULL, NULL, convert_to('{"note": ' || g || '}', 'UTF8'))) AS casts
FROM generate_series(1, 12) g;
SELECT lake.seal() AS sealed_cycle;
\echo '-- live states'
SELECT o.name AS owner, s.* FROM lake_data.owner o, LATERAL lake.owner_state(o.name) s ORDER BY o.name;
\echo '-- the cycles: each is one durable write of every cast pending when it was sealed'
\echo '-- (the twelve casts above share one or two; the durable casts, each waited for, mostly one each)'
SELECT cycle, epoch, casts, bytes, stored_bytes, lsn FROM lake.cycles() ORDER BY cycle DESC LIMIT 5;
SELECT epoch, cycles_sealed, casts_sealed, round(mean_casts_per_cycle::numeric, 2) AS mean_casts_per_cycle FROM lake.stats();
SQL

echo
echo "== a crash with casts in flight"
sql <<'SQL'
\pset footer off
CREATE TABLE demo_acks AS
  SELECT 'agent-1' AS owner, lake.cast_durable('agent-1', 'CognitiveWork', 'Evaluation', '{"before": "crash"}') AS coordinate;
ALTER SYSTEM SET lake.cycle_interval = '1h';
SELECT pg_reload_conf();
SQL
# The worker applies the reload before the next casts; then they stay pending.
until [ "$(sql -At -c "SHOW lake.cycle_interval")" = "3600000" ]; do sleep 0.1; done
sql <<'SQL'
\pset footer off
CREATE TABLE demo_receipts AS
  SELECT g, lake.cast('agent-2', NULL, NULL, convert_to('{"in flight": ' || g || '}', 'UTF8')) AS receipt
  FROM generate_series(1, 5) g;
\echo '-- acknowledged before the crash:'
SELECT * FROM demo_acks;
\echo '-- accepted, not yet sealed (receipts only):'
SELECT receipt FROM demo_receipts;
SELECT phase, position, pending FROM lake.owner_state('agent-2');
SQL
echo "-- pg_ctl stop -m immediate: the server dies with 5 casts in flight"
as_pg pg_ctl -D "$DEMO_DIR/data" -m immediate stop >/dev/null
as_pg pg_ctl -D "$DEMO_DIR/data" -l "$DEMO_DIR/server.log" -w start >/dev/null
sql -c "ALTER SYSTEM RESET lake.cycle_interval" -c "SELECT pg_reload_conf()" >/dev/null
until [ "$(sql -At -c "SELECT worker_state FROM lake.stats()")" = "serving" ] &&
      sql -At -c "SELECT * FROM lake.owner_state('agent-1')" >/dev/null 2>&1; do sleep 0.1; done
sql <<'SQL'
\pset footer off
\echo '-- recovered: a new epoch, every owner rebuilt from its durable log'
SELECT epoch, recovery_owners, recovery_applied, recovery_quarantined, recovery_tail, round(recovery_ms::numeric, 1) AS recovery_ms FROM lake.stats();
SELECT o.name AS owner, s.phase, s.lap, s.position, s.pending FROM lake_data.owner o, LATERAL lake.owner_state(o.name) s ORDER BY o.name;
\echo '-- the acknowledged coordinate is intact'
SELECT a.owner, a.coordinate, t.from_phase, t.to_phase, convert_from(t.payload, 'UTF8') AS payload
FROM demo_acks a JOIN LATERAL lake.trajectory(a.owner, (a.coordinate).position - 1) t ON t.position = (a.coordinate).position;
\echo '-- the receipts that were never sealed say so (LK006), at once'
DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT g, receipt FROM demo_receipts ORDER BY g LOOP
    BEGIN
      PERFORM lake.await_durable(r.receipt);
      RAISE NOTICE 'receipt % is durable', r.receipt;
    EXCEPTION WHEN SQLSTATE 'LK006' THEN
      RAISE NOTICE 'receipt %: % (SQLSTATE LK006)', r.receipt, SQLERRM;
    END;
  END LOOP;
END $$;
\echo '-- running recovery again applies nothing'
SELECT sum(applied) AS applied, bool_or(quarantined) AS any_quarantined FROM lake.recover();
SQL

cat <<EOT

== the demo cluster is still running
connect:  $( [ "$(id -u)" = 0 ] && echo "runuser -u $LAKE_OS_USER -- " )psql -h $DEMO_DIR -p $PORT -U postgres postgres
stop:     $( [ "$(id -u)" = 0 ] && echo "runuser -u $LAKE_OS_USER -- " )/usr/lib/postgresql/$PG_MAJOR/bin/pg_ctl -D $DEMO_DIR/data stop
log:      $DEMO_DIR/server.log
EOT
