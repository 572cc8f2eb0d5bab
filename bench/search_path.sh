#!/usr/bin/env bash
# bench/search_path.sh — what a SET search_path clause on lake's C functions
# costs the hot calls (issue 12; SECURITY.md "A hostile search_path").
#
# One throwaway cluster (as bench/run.sh), the installed lake. Every
# measurement runs twice per round, in alternating order: with the hot
# functions as installed (no SET clause; the store fixes search_path only
# around the SQL it runs, and these calls run none) and with
# `ALTER FUNCTION ... SET search_path = pg_catalog, pg_temp` — exactly the
# declaration lake had before, so the difference is the clause alone. The
# plain-SQL baselines of bench/run.sh and bench/cycles.sh run in the same
# rounds. Writes bench/results-search_path.md; raw logs in
# bench/out/search_path/. Run as root, under flock /tmp/lake-bench.lock.
# Knobs: SP_SECONDS (8), SP_ROUNDS (3), SP_PORT (54333), SP_OS_USER (postgres).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
T=${SP_SECONDS:-8}
ROUNDS=${SP_ROUNDS:-3}
PORT=${SP_PORT:-54333}
OS_USER=${SP_OS_USER:-postgres}
OUT=$HERE/out/search_path
RESULTS=$HERE/results-search_path.md
mkdir -p "$OUT"
rm -f "$OUT"/* 2>/dev/null || true

NAME=search_path
. "$HERE/lib.sh"
export PGPORT=$PORT
cluster_init data "$PORT" <<EOF
shared_buffers = 1GB
max_wal_size = 32GB
checkpoint_timeout = 1h
autovacuum = off
EOF
cluster_start data 60
INSTALLED_MD5=$(md5sum "$PKGLIBDIR/lake.so" | cut -d' ' -f1)
sql "CREATE EXTENSION lake" >/dev/null
"${PSQL[@]}" -f "$HERE/setup.sql" >"$OUT/setup.log" 2>&1 || die "bench/setup.sql failed; see $OUT/setup.log"
"${PSQL[@]}" -f "$HERE/cycles_setup.sql" >>"$OUT/setup.log" 2>&1 || die "bench/cycles_setup.sql failed; see $OUT/setup.log"
# Steady state, as bench/run.sh: seeded tables, the replay set, ANALYZE.
sql "SELECT lake.create_dataset('seed')" >/dev/null
sql "SELECT count(lake.append('seed', 't1', 's' || i, bench.payload256('s' || i))) FROM generate_series(1, 2000) AS i" >/dev/null
sql "INSERT INTO bench.ds_head (name) VALUES ('seed')"
sql "SELECT count(bench.plain_append('seed', 't1', 's' || i, bench.payload256('s' || i))) FROM generate_series(1, 2000) AS i" >/dev/null
sql "SELECT count(lake.append('replay', 't1', 'p' || i, bench.replay_payload())) FROM generate_series(1, 100000) AS i" >/dev/null
sql "INSERT INTO bench.plain_replay (tenant, operation_id, payload)
       SELECT 't1', 'p' || i, bench.replay_payload() FROM generate_series(1, 100000) AS i"
sql "ANALYZE" >/dev/null
"$BINDIR/pgbench" -n -M prepared -c 16 -j 2 -t 2000 -D run=0 -D n=0 -f "$HERE/cycles_cast.sql" >"$OUT/warmup.log" 2>&1 ||
    die "warm-up failed: $OUT/warmup.log"

clause() { # on|off
    if [ "$1" = on ]; then
        sql "ALTER FUNCTION lake.append(text, text, text, bytea, bytea) SET search_path = pg_catalog, pg_temp;
             ALTER FUNCTION lake.cast(text, text, text, bytea, bigint, text) SET search_path = pg_catalog, pg_temp" >/dev/null
    else
        sql "ALTER FUNCTION lake.append(text, text, text, bytea, bytea) RESET search_path;
             ALTER FUNCTION lake.cast(text, text, text, bytea, bigint, text) RESET search_path" >/dev/null
    fi
}

# The server's CPU time so far, in clock ticks: the postmaster's own and
# that of its children it reaped (exited backends), plus its live children.
# A difference of two readings is what the cluster spent in between, however
# busy the rest of the machine was (tps on this shared 2-core machine moves
# with the other agents' load; CPU per call much less).
PM_PID=$(head -1 "$TMP/data/postmaster.pid")
server_ticks() {
    { cat /proc/[0-9]*/stat 2>/dev/null || true; } |     # processes come and go
        awk -v pm="$PM_PID" '{ pid = $1; sub(/^.*\) /, ""); # from "state" on: ppid $2, utime $12
            if (pid == pm) t += $12 + $13 + $14 + $15; else if ($2 == pm) t += $12 + $13 }
            END { print t }'
}
RUNS=$OUT/runs.tsv
printf 'round\tkey\tvariant\ttps\ttxns\tcpu_us_per_txn\n' >"$RUNS"
RUN_NO=0
run() { # <round> <key> <variant> <clients> <script>
    local jobs=$(( $4 < 2 ? $4 : 2 )) log tps txns t0 t1 us
    RUN_NO=$((RUN_NO + 1))
    log=$OUT/run-$RUN_NO-$2-$3.log
    sql "CHECKPOINT"
    sleep 0.5
    t0=$(server_ticks)
    "$BINDIR/pgbench" -n -M prepared -c "$4" -j "$jobs" -T "$T" -D run="$RUN_NO" -D n=0 \
        -f "$HERE/$5" >"$log" 2>&1 || say "pgbench failed: $log"
    sleep 0.5                   # the backends exit and are reaped
    t1=$(server_ticks)
    tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' "$log" | head -1)
    txns=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$log" | head -1)
    us=$(awk -v a="$t0" -v b="$t1" -v n="${txns:-0}" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", (n > 0 ? (b - a) * 1e6 / hz / n : 0) }')
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${tps:-0}" "${txns:-0}" "$us" >>"$RUNS"
    say "round $1 $2 $3: ${tps:-0} tps, $us µs server CPU per call"
}
# <round> <key> <clients> <lake script> <baseline script>
measure() {
    if [ $(( $1 % 2 )) -eq 1 ]; then
        clause on;  run "$1" "$2" clause "$3" "$4"
        clause off; run "$1" "$2" none "$3" "$4"
    else
        clause off; run "$1" "$2" none "$3" "$4"
        clause on;  run "$1" "$2" clause "$3" "$4"
    fi
    run "$1" "$2" baseline "$3" "$5"
}
for round in $(seq "$ROUNDS"); do
    measure "$round" append_c1 1 m1_lake.sql m1_plain.sql
    measure "$round" append_c16 16 m1_lake.sql m1_plain.sql
    measure "$round" replay_c1 1 m3_lake.sql m3_plain.sql
    measure "$round" replay_c16 16 m3_lake.sql m3_plain.sql
    measure "$round" cast_c16 16 cycles_cast.sql cycles_trivial.sql
done
clause off

mean() { # key variant column
    awk -F'\t' -v k="$1" -v v="$2" -v c="$3" '$2 == k && $3 == v { s += $c; n++ } END { printf "%.1f", n ? s / n : 0 }' "$RUNS"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }'; }
range() { # key column: min..max over the rounds of none/clause
    awk -F'\t' -v k="$1" -v c="$2" '$2 == k { t[$1, $3] = $c; r[$1] = 1 }
        END { lo = 1e9; hi = 0; for (i in r) { x = t[i, "none"] / t[i, "clause"]; if (x < lo) lo = x; if (x > hi) hi = x }
              printf "%.3f–%.3f", lo, hi }' "$RUNS"
}
table() { # <unit> <column of runs.tsv>
    echo
    echo "| measurement | none ($1) | clause ($1) | none / clause (rounds) | baseline ($1) | none / baseline | clause / baseline |"
    echo "|---|---|---|---|---|---|---|"
    for k in append_c1 append_c16 replay_c1 replay_c16 cast_c16; do
        n=$(mean $k none "$2"); c=$(mean $k clause "$2"); b=$(mean $k baseline "$2")
        echo "| $k | $n | $c | **$(ratio "$n" "$c")** ($(range $k "$2")) | $b | $(ratio "$n" "$b") | $(ratio "$c" "$b") |"
    done
}
{
    echo "# The SET search_path clause on lake's hot calls"
    echo
    echo "\`flock /tmp/lake-bench.lock bench/search_path.sh\` ($(date -u '+%Y-%m-%d %H:%M UTC'), lake.so md5 \`$INSTALLED_MD5\`, \`pgbench -n -M prepared -T $T\`, $ROUNDS rounds, the two variants in alternating order each round, one cluster)."
    echo "\`none\`: lake as installed (no SET clause); \`clause\`: the same functions after \`ALTER FUNCTION ... SET search_path = pg_catalog, pg_temp\`, lake's former declaration. Baselines as in bench/run.sh (1, 3) and bench/cycles.sh (1)."
    echo
    echo "Server CPU per call (the cluster's processes, from /proc, divided by the calls pgbench made; robust to the other agents' load on this shared machine):"
    table "µs/call" 6
    echo
    echo "Throughput (moves with the machine's load and, for appends, with fdatasync speed):"
    table tps 4
    echo
    echo "append: bench/m1_lake.sql vs m1_plain.sql (INSERT ... ON CONFLICT DO NOTHING); replay: m3_lake.sql vs m3_plain.sql (unique-key SELECT); cast: cycles_cast.sql (fire-and-forget lake.cast) vs cycles_trivial.sql (a trivial SQL call of the same shape)."
} >"$RESULTS"
cat "$RESULTS"
