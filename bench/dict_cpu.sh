#!/usr/bin/env bash
# bench/dict_cpu.sh — what a dataset's trained zstd dictionary costs (or
# saves) in backend CPU per call: 256-byte appends (bench.payload256, a new
# operation per call) and replays of an existing operation, into a dataset
# without a dictionary and one whose dictionary an administrator trained
# (lake.train_dictionary) from 2000 payloads of its own.
#
# One throwaway cluster (bench/lib.sh), 1 client, pgbench -M prepared,
# synchronous_commit = off (CPU, not flush waits); the client's backend's
# utime + stime from /proc/<pid>/stat, polled every 50 ms until it exits,
# divided by the calls pgbench completed. Rounds alternate the order. Run as root
# (reads another user's /proc/<pid>/stat) under flock /tmp/lake-bench.lock.
# Knobs: DICT_CPU_SECONDS (8), DICT_CPU_ROUNDS (3), BENCH_PORT (54329).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
T=${DICT_CPU_SECONDS:-8}
ROUNDS=${DICT_CPU_ROUNDS:-3}
PORT=${BENCH_PORT:-54329}
OS_USER=${BENCH_OS_USER:-postgres}
OUT=$HERE/out
mkdir -p "$OUT"
NAME=dict_cpu
. "$HERE/lib.sh"
export PGPORT=$PORT
cluster_init data "$PORT" <<EOF
shared_buffers = 1GB
max_wal_size = 32GB
checkpoint_timeout = 1h
autovacuum = off
synchronous_commit = off
EOF
cluster_start data 60
sql "CREATE EXTENSION lake" >/dev/null
"${PSQL[@]}" -f "$HERE/setup.sql" >"$OUT/dict_cpu-setup.log" 2>&1 || die "bench/setup.sql failed"
for ds in cpu_plain cpu_dict; do
    sql "SELECT lake.create_dataset('$ds')" >/dev/null
    sql "SELECT count(lake.append('$ds', 't1', 's' || i, bench.payload256('s' || i))) FROM generate_series(1, 2000) AS i" >/dev/null
done
sql "SELECT lake.train_dictionary('cpu_dict')" >/dev/null
sql "ANALYZE" >/dev/null
for ds in cpu_plain cpu_dict; do
    printf '%s\n' '\set n :n + 1' \
        "SELECT lake.append('$ds', 't1', 'r' || :run || '-' || :n, bench.payload256('r' || :run || '-' || :n));" \
        >"$TMP/append-$ds.sql"
    printf '%s\n' '\set i random(1, 2000)' \
        "SELECT lake.append('$ds', 't1', 's' || :i, bench.payload256('s' || :i));" >"$TMP/replay-$ds.sql"
done
CLK=$(getconf CLK_TCK)
printf 'round\tkind\tdataset\tcalls\tcpu_us_per_call\n' >"$OUT/dict_cpu.tsv"
RUN=0
for round in $(seq "$ROUNDS"); do
    for kind in append replay; do
        order="cpu_plain cpu_dict"
        [ $((round % 2)) -eq 0 ] && order="cpu_dict cpu_plain"
        for ds in $order; do
            RUN=$((RUN + 1))
            log=$OUT/dict_cpu-$RUN-$kind-$ds.log
            "$BINDIR/pgbench" -n -M prepared -c 1 -j 1 -T "$T" -D run="$RUN" -D n=0 \
                -f "$TMP/$kind-$ds.sql" >"$log" 2>&1 &
            pb=$!
            pid=""
            for i in $(seq 50); do
                sleep 0.1
                pid=$(sql "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' LIMIT 1")
                [ -n "$pid" ] && break
            done
            [ -n "$pid" ] || die "no pgbench backend; see $log"
            # The backend's CPU (utime + stime) since it started, read until it exits.
            ticks=0
            while t=$(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null); do
                ticks=$t
                sleep 0.05
            done
            wait "$pb"
            n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$log")
            us=$(calc %.1f "$ticks * 1000000 / $CLK / $n")
            printf '%s\t%s\t%s\t%s\t%s\n' "$round" "$kind" "$ds" "$n" "$us" >>"$OUT/dict_cpu.tsv"
            say "round $round $kind $ds: $n calls, $us µs CPU per call"
        done
    done
done
awk -F'\t' 'NR > 1 { s[$2 "\t" $3] += $5; c[$2 "\t" $3]++ }
    END { for (k in s) printf "%s\t%.1f\n", k, s[k] / c[k] }' "$OUT/dict_cpu.tsv" | sort
