#!/usr/bin/env bash
# lake over four partitions behind a PL/Proxy router (SPEC §7), on this
# machine: builds and installs lake and lake_router (scripts/setup.sh), starts
# four partition servers and a router server, configures the cluster the
# PL/Proxy way and runs the demo through the router. Run as root on a fresh
# Debian 12 machine (or as a user who can run PostgreSQL, with LAKE_PG_BIN
# naming the bin directory of a PostgreSQL that has lake, lake_router and
# plproxy installed: then nothing is built).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${LAKE_PG_BIN:-}" ]; then
  export PATH="$LAKE_PG_BIN:$PATH"
  LAKE_OS_USER=${LAKE_OS_USER:-postgres}
else
  . scripts/setup.sh
fi

DEMO_DIR=${LAKE_DEMO_DIR:-/tmp/lake-router-demo}
BASE_PORT=${LAKE_DEMO_PORT:-5440}    # router on BASE_PORT, partition i on BASE_PORT+1+i
N=4
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u "$LAKE_OS_USER" -- "$@"; else "$@"; fi; }

for d in "$DEMO_DIR"/*/; do
  [ -f "$d/postmaster.pid" ] && as_pg pg_ctl -D "$d" -m immediate stop >/dev/null 2>&1 || true
done
rm -rf "$DEMO_DIR"
mkdir -p "$DEMO_DIR"
[ "$(id -u)" = 0 ] && chown "$LAKE_OS_USER" "$DEMO_DIR"

start_server() {    # name port extra-conf
  as_pg initdb -D "$DEMO_DIR/$1" -A trust -U postgres >/dev/null
  cat >> "$DEMO_DIR/$1/postgresql.conf" <<CONF
port = $2
listen_addresses = ''
unix_socket_directories = '$DEMO_DIR'
$3
CONF
  as_pg pg_ctl -D "$DEMO_DIR/$1" -l "$DEMO_DIR/$1.log" -w start >/dev/null
}
sql_at() { local port=$1; shift; as_pg psql -X -q -h "$DEMO_DIR" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 "$@"; }
sql() { sql_at "$BASE_PORT" "$@"; }

echo "== four partitions: each an ordinary lake server with its own worker, epochs and cycles"
for i in $(seq 0 $((N - 1))); do
  port=$((BASE_PORT + 1 + i))
  start_server "p$i" "$port" "shared_preload_libraries = 'lake'
lake.database = 'postgres'
lake.partitions = $N
lake.partition = $i"
  sql_at "$port" -c "CREATE EXTENSION lake"
  # Casts wait for the worker's recovery only up to lake.admission_queue_wait.
  until [ "$(sql_at "$port" -At -c "SELECT worker_state FROM lake.stats()")" = "serving" ]; do sleep 0.1; done
  echo "   partition $i: port $port, lake.partition = $i of $N"
done

echo "== the router: PL/Proxy, lake_router, and the cluster as an SQL/MED server"
start_server router "$BASE_PORT" ""
opts=""
for i in $(seq 0 $((N - 1))); do
  opts+="${opts:+, }p$i 'host=$DEMO_DIR port=$((BASE_PORT + 1 + i)) dbname=postgres options=-cdatestyle=ISO'"
done
sql <<SQL
CREATE EXTENSION plproxy;
CREATE EXTENSION lake_router;
CREATE SERVER lake FOREIGN DATA WRAPPER plproxy OPTIONS ($opts);
CREATE USER MAPPING FOR PUBLIC SERVER lake;
SQL
sql <<'SQL'
\pset footer off
\echo '-- every partition is what its place in server "lake" says'
SELECT * FROM lake_router.check();
SQL

echo
echo "== idempotent appends through the router, datasets spread by hashtext(dataset)"
sql <<'SQL'
\pset footer off
SELECT count(lake.create_dataset(d)) AS datasets FROM unnest('{invoices,orders,refunds,audit}'::text[]) d;
SELECT d AS dataset, lake.append(d, 'acme', d || '-1', convert_to('{"n": 1}', 'UTF8')) AS version,
       pg_catalog.hashtext(d) & 3 AS partition
  FROM unnest('{invoices,orders,refunds,audit}'::text[]) d;
\echo '-- a retry with the same content returns the original version; different content is LK001'
SELECT lake.append('invoices', 'acme', 'invoices-1', convert_to('{"n": 1}', 'UTF8')) AS version;
\set ON_ERROR_STOP 0
\set VERBOSITY verbose
SELECT lake.append('invoices', 'acme', 'invoices-1', convert_to('{"n": 2}', 'UTF8')) AS version;
\echo 'SQLSTATE' :SQLSTATE
\set VERBOSITY default
\set ON_ERROR_STOP 1
SQL

echo
echo "== a staged upload: the stage id carries its partition"
STAGE=$(sql -At -c "SELECT lake.begin_append('orders', 'acme', 'bulk-1')")
echo "-- stage $STAGE is on partition $((STAGE % N)) (stage ids are n * $N + partition)"
sql -c "SELECT lake.append_chunk($STAGE, 0, convert_to(repeat('line 0 ', 1000), 'UTF8'))" >/dev/null
echo "-- a new router session resumes it: begin_append returns the same stage, the upload commits"
sql -At -c "SELECT 'begin_append returned ' || lake.begin_append('orders', 'acme', 'bulk-1')"
sql -At -c "SELECT lake.append_chunk($STAGE, 1, convert_to(repeat('line 1 ', 1000), 'UTF8'))" >/dev/null
sql -At -c "SELECT 'committed as version ' || lake.commit_append($STAGE)"

echo
echo "== owners spread by hashtext(owner), casting through kanban"
sql <<'SQL'
\pset footer off
SELECT count(lake.create_owner('agent-' || i)) AS owners FROM generate_series(1, 8) i;
SELECT 'agent-' || i AS owner, pg_catalog.hashtext('agent-' || i) & 3 AS partition, c.*
  FROM generate_series(1, 8) i,
       LATERAL lake.cast_durable('agent-' || i, 'Planning', 'CognitiveWork', convert_to('plan ' || i, 'UTF8')) c;
\echo '-- lake.cast returns a receipt at once; await_durable finds the partition from its epoch'
SELECT lake.cast('agent-1', 'CognitiveWork', 'Evaluation') AS r \gset
SELECT :'r' AS receipt, (:'r'::lake.receipt).epoch % 4 AS partition, * FROM lake.await_durable(:'r');
SELECT * FROM lake.owner_state('agent-1');
SELECT position, cycle, epoch, seq, from_phase, to_phase, lap FROM lake.trajectory('agent-1');
\echo '-- a stale move is refused by the owner''s partition with its own SQLSTATE (LK002)'
\set ON_ERROR_STOP 0
SELECT lake.cast_durable('agent-2', 'Planning', 'CognitiveWork');
\echo 'SQLSTATE' :SQLSTATE
\set ON_ERROR_STOP 1
\echo '-- readers across partitions say where each row came from; there is no order across partitions'
SELECT partition, cycle, owner, position, from_phase, to_phase FROM lake.log() ORDER BY partition, cycle, seq;
SELECT partition, epoch, cycles_sealed, casts_sealed, worker_state FROM lake.stats() ORDER BY partition;
SELECT partition, admitted, rejected FROM lake.admission() ORDER BY partition;
SQL

echo
echo "== a partition goes down: the others keep serving"
as_pg pg_ctl -D "$DEMO_DIR/p2" -m immediate stop >/dev/null
sql <<'SQL'
\pset footer off
\set ON_ERROR_STOP 0
SELECT o AS owner, pg_catalog.hashtext(o) & 3 AS partition FROM unnest('{agent-3,agent-4,agent-5,agent-6}'::text[]) o;
SELECT (lake.cast_durable('agent-3', 'CognitiveWork', 'Evaluation')).position AS agent_3;
SELECT (lake.cast_durable('agent-4', 'CognitiveWork', 'Evaluation')).position AS agent_4;
SELECT (lake.cast_durable('agent-5', 'CognitiveWork', 'Evaluation')).position AS agent_5;
SELECT (lake.cast_durable('agent-6', 'CognitiveWork', 'Evaluation')).position AS agent_6;
SQL
echo "-- partition 2 restarts; its lake worker recovers its owners under a new epoch"
as_pg pg_ctl -D "$DEMO_DIR/p2" -l "$DEMO_DIR/p2.log" -w start >/dev/null
sql <<'SQL'
\pset footer off
SELECT partition, epoch, worker_state, recovery_owners FROM lake.stats() ORDER BY partition;
SQL

echo
echo "== done. Connect to the router with:"
echo "   psql -h $DEMO_DIR -p $BASE_PORT -U postgres postgres"
echo "   partitions: ports $((BASE_PORT + 1))..$((BASE_PORT + N)); stop all with:"
echo "   for d in $DEMO_DIR/*/; do pg_ctl -D \$d stop; done"
