#!/usr/bin/env bash
# bench/router.sh — lake behind a PL/Proxy router (lake_router, SPEC §7):
# the cost of the router's hop per call, and what four partitions on this
# machine give against one.
#
# Starts six throwaway PostgreSQL 15 clusters (initdb in a mktemp dir, unix
# socket only, ports $ROUTER_PORT … +5) as the `postgres` OS user: "single"
# (a lake of one partition), "p0".."p3" (lake.partitions = 4) and "router"
# (plproxy + lake_router, in two databases: r1 routes to single, r4 to
# p0..p3). pgbench runs the same script against single directly and through
# r1, round after round alternately, then through r4 and r1. Writes
# bench/results-router.md. Raw output: bench/out/router/ (git-ignored).
#
# Assumes lake and lake_router are built and installed (`make && make
# install` as root) and PL/Proxy is installed (postgresql-15-plproxy). Run
# as root. Knobs (environment):
#   ROUTER_ROUNDS   rounds of every pair                        (3)
#   ROUTER_SECONDS  seconds per pgbench run                     (8)
#   ROUTER_CLIENTS  pgbench clients                             (16)
#   ROUTER_PERF     1: profile a routed run even if targets met (0)
#   ROUTER_PORT     port of the first cluster                   (54341)
#   ROUTER_OS_USER  OS user that runs the servers               (postgres)
set -euo pipefail

START_EPOCH=$(date +%s)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
ROUNDS=${ROUTER_ROUNDS:-3}
T=${ROUTER_SECONDS:-8}
C=${ROUTER_CLIENTS:-16}
FORCE_PERF=${ROUTER_PERF:-0}
PORT=${ROUTER_PORT:-54341}
OS_USER=${ROUTER_OS_USER:-postgres}
OUT=$HERE/out/router
RESULTS=$HERE/results-router.md
mkdir -p "$OUT"
rm -rf "$OUT"/* 2>/dev/null || true

NAME=router
. "$HERE/lib.sh"
[ -f "$PKGLIBDIR/plproxy.so" ] || die "PL/Proxy is not installed in $PKGLIBDIR (apt-get install postgresql-15-plproxy)"
[ -f "$SHAREDIR/extension/lake_router.control" ] || die "lake_router is not installed: run 'make install' as root first"

declare -A CPORT=([single]=$PORT [p0]=$((PORT + 1)) [p1]=$((PORT + 2)) [p2]=$((PORT + 3)) [p3]=$((PORT + 4)) [router]=$((PORT + 5)))
COMMON="shared_buffers = 256MB
max_wal_size = 8GB
checkpoint_timeout = 1h
autovacuum = off
max_connections = 100"
cluster_init single "${CPORT[single]}" <<<"$COMMON"
for i in 0 1 2 3; do
    cluster_init "p$i" "${CPORT[p$i]}" <<EOF
$COMMON
lake.partitions = 4
lake.partition = $i
EOF
done
cluster_init router "${CPORT[router]}" <<<"$COMMON"
for c in single p0 p1 p2 p3 router; do cluster_start "$c" 120; done
INSTALLED_MD5=$(md5sum "$PKGLIBDIR/lake.so" | cut -d' ' -f1)

q() { "${PSQL[@]}" -p "${CPORT[$1]}" -d "${3:-postgres}" -At -c "$2"; }   # q <cluster> <sql> [db]
for c in single p0 p1 p2 p3; do q "$c" "CREATE EXTENSION lake" >/dev/null; done
connstr() { echo "host=$TMP port=${CPORT[$1]} dbname=postgres options=-cdatestyle=ISO"; }
for db in r1 r4; do
    q router "CREATE DATABASE $db" >/dev/null
    q router "CREATE EXTENSION plproxy" "$db" >/dev/null
    q router "CREATE EXTENSION lake_router" "$db" >/dev/null
done
q router "CREATE SERVER lake FOREIGN DATA WRAPPER plproxy OPTIONS (p0 '$(connstr single)')" r1 >/dev/null
q router "CREATE SERVER lake FOREIGN DATA WRAPPER plproxy OPTIONS (p0 '$(connstr p0)', p1 '$(connstr p1)', p2 '$(connstr p2)', p3 '$(connstr p3)')" r4 >/dev/null
# One dataset and one owner per client, the names chosen so that each of
# p0..p3 holds as many (client k uses the k-th of each list).
pick() { # prefix -> a {...} array literal of C names, spread evenly over 4 partitions
    q router "SELECT '{' || string_agg(n, ',' ORDER BY rk, p) || '}' FROM (
                SELECT n, p, row_number() OVER (PARTITION BY p ORDER BY i) rk
                  FROM (SELECT i, '$1' || i n, hashtext('$1' || i) & 3 p FROM generate_series(1, 400) i) s) t
              WHERE rk <= ($C + 3) / 4" r4
}
DSS=$(pick ds); OWNERS=$(pick c)
for db in r1 r4; do
    q router "CREATE USER MAPPING FOR PUBLIC SERVER lake" "$db" >/dev/null
    [ "$(q router "SELECT bool_and(ok) FROM lake_router.check()" "$db")" = t ] || die "lake_router.check() failed in $db"
    # Datasets, owners and the replayed operations, through the router.
    q router "SELECT count(lake.create_dataset(d)), count(lake.append(d, 't', 'replay', decode(repeat(md5('replay'), 16), 'hex')))
              FROM unnest('$DSS'::text[]) d" "$db" >/dev/null
    q router "SELECT count(lake.create_owner(o)) FROM unnest('$OWNERS'::text[]) o" "$db" >/dev/null
done
SPREAD=$(q router "SELECT string_agg(n::text, '/' ORDER BY p) FROM (SELECT hashtext(d) & 3 p, count(*) n FROM unnest('$DSS'::text[]) d GROUP BY 1) s" r4)

# The workloads: 256-byte payloads, each client its own dataset / owner.
{
    printf '\\set n :n + 1\n\\set k :client_id %% %s + 1\n' "$C"
    printf "SELECT lake.append(('%s'::text[])[:k], 't', 'r' || :run || '-' || :client_id || '-' || :n, decode(repeat(md5(:n || '-' || :client_id), 8), 'hex'));\n" "$DSS"
} >"$OUT/append.sql"
{
    printf '\\set n :n + 1\n\\set k :client_id %% %s + 1\n' "$C"
    printf "SELECT lake.cast_durable(('%s'::text[])[:k], NULL, NULL, decode(repeat(md5(:n || '-' || :client_id), 8), 'hex'));\n" "$OWNERS"
} >"$OUT/cast.sql"
{
    printf '\\set k :client_id %% %s + 1\n' "$C"
    printf "SELECT lake.append(('%s'::text[])[:k], 't', 'replay', decode(repeat(md5('replay'), 16), 'hex'));\n" "$DSS"
} >"$OUT/replay.sql"

RUNS=$OUT/runs.tsv
printf 'round\tworkload\ttarget\ttps\n' >"$RUNS"
RUN_NO=0
# run <round> <workload> <target: direct|r1|r4>
run() {
    local port db log tps
    RUN_NO=$((RUN_NO + 1))
    case $3 in
        direct) port=${CPORT[single]} db=postgres ;;
        *) port=${CPORT[router]} db=$3 ;;
    esac
    log=$OUT/run-$RUN_NO-$2-$3.log
    "$BINDIR/pgbench" -n -M prepared -c "$C" -j 2 -T "$T" -p "$port" -D run="$RUN_NO" -D n=0 \
        -f "$OUT/$2.sql" "$db" >"$log" 2>&1 || say "pgbench exited non-zero: $log"
    tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' "$log" | head -1)
    [ -n "$tps" ] || { tps=0; say "no tps: $log"; }
    grep -q "number of failed transactions: 0" "$log" || ! grep -q "failed transactions" "$log" || say "failures in $log"
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$tps" >>"$RUNS"
    say "round $1 $2 via $3: $tps/s"
}
for r in $(seq 1 "$ROUNDS"); do
    for w in append cast replay; do
        if [ $((r % 2)) = 1 ]; then run "$r" "$w" direct; run "$r" "$w" r1; else run "$r" "$w" r1; run "$r" "$w" direct; fi
    done
    if [ $((r % 2)) = 1 ]; then run "$r" append r4; run "$r" append r1; else run "$r" append r1; run "$r" append r4; fi
done

median() { # workload target -> median tps of its rounds
    awk -F'\t' -v w="$1" -v t="$2" 'NR > 1 && $2 == w && $3 == t { print $4 }' "$RUNS" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ratio() { calc "%.2f" "$1 / $2"; }
rounds_of() { # workload a b -> per-round ratios a/b
    awk -F'\t' -v w="$1" -v a="$2" -v b="$3" 'NR > 1 && $2 == w { if ($3 == a) x[$1] = $4; if ($3 == b) y[$1] = $4 }
        END { s = ""; for (r in x) if (y[r] > 0) s = s (s ? ", " : "") sprintf("%.2f", x[r] / y[r]); print s }' "$RUNS"
}
fmt() { printf "%'.0f" "$1"; }
met() { awk -v v="$1" -v t="$2" 'BEGIN { print (v >= t) ? "**yes**" : "**no**" }'; }

A_D=$(median append direct); A_R=$(median append r1)
C_D=$(median cast direct);   C_R=$(median cast r1)
P_D=$(median replay direct); P_R=$(median replay r1)
A_4=$(median append r4);     A_1=$A_R
R_A=$(ratio "$A_R" "$A_D"); R_C=$(ratio "$C_R" "$C_D"); R_P=$(ratio "$P_R" "$P_D"); R_4=$(ratio "$A_4" "$A_1")

# ---------------------------------------------------------- where the time goes
PERF_TXT=""
if [ "$PERF_OK" = 1 ] && { [ "$FORCE_PERF" = 1 ] || awk -v a="$R_A" -v c="$R_C" -v p="$R_P" 'BEGIN { exit !(a < 0.6 || c < 0.6 || p < 0.6) }'; }; then
    # A routed replay run (the cheapest call: the hop's share is largest),
    # the whole machine sampled; CPU split by whose process it was.
    say "profiling a routed replay run (perf, whole machine)"
    RUN_NO=$((RUN_NO + 1))
    "$BINDIR/pgbench" -n -M prepared -c "$C" -j 2 -T $((T + 3)) -p "${CPORT[router]}" -D run="$RUN_NO" -D n=0 \
        -f "$OUT/replay.sql" r1 >"$OUT/perf-pgbench.log" 2>&1 &
    BENCH_PID=$!
    sleep 2
    RPIDS=$(q router "SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE datname = 'r1' AND backend_type = 'client backend'")
    PPIDS=$(q single "SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
    perf record -a -g -F 499 -o "$OUT/perf.data" -- sleep "$T" >/dev/null 2>&1 || true
    wait "$BENCH_PID" || true
    perf report -i "$OUT/perf.data" --no-children -g none --sort pid --stdio 2>/dev/null >"$OUT/perf-pid.txt" || true
    share() { # comma-separated pids -> % of all samples
        awk -v list=",$1," '/^ +[0-9.]+%/ { split($2, a, ":"); if (index(list, "," a[1] ",")) s += $1 } END { printf "%.1f", s }' "$OUT/perf-pid.txt"
    }
    PGB=$(awk '/^ +[0-9.]+%/ && $2 ~ /:pgbench$/ { s += $1 } END { printf "%.1f", s }' "$OUT/perf-pid.txt")
    SH_R=$(share "$RPIDS"); SH_P=$(share "$PPIDS")
    for who in router:"$RPIDS" partition:"$PPIDS"; do
        perf report -i "$OUT/perf.data" --no-children -g none --pid "${who#*:}" --sort dso,sym --stdio 2>/dev/null |
            grep -E '^ +[0-9.]+%' >"$OUT/perf-${who%%:*}-all.txt" || true
        head -15 "$OUT/perf-${who%%:*}-all.txt" >"$OUT/perf-${who%%:*}.txt"
        # By object: the symbols' shares summed.
        awk '{ s[$2] += $1 } END { for (d in s) printf "%8.2f%%  %s\n", s[d], d }' "$OUT/perf-${who%%:*}-all.txt" |
            sort -rn | head -6 >"$OUT/perf-${who%%:*}-dso.txt"
    done
    PERF_TXT=$OUT/perf-router.txt
fi

ELAPSED=$(( $(date +%s) - START_EPOCH ))
{
cat <<EOF
## lake behind a PL/Proxy router (\`bench/router.sh\`)

Generated by \`bench/router.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'); the whole run took **${ELAPSED} s**.
Code: commit \`$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "${LAKE_COMMIT:-unknown}")\`; measured \`lake.so\` md5 \`$INSTALLED_MD5\`; PL/Proxy $(q router "SELECT extversion FROM pg_extension WHERE extname = 'plproxy'" r1).
$(q single "SELECT version()"); $(nproc) CPUs; the machine is shared and noisy (load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)): **only the ratios within this run mean anything.**

Six throwaway clusters on this machine, the same settings (\`shared_buffers = 256MB\`, \`autovacuum = off\`, \`fsync\` and \`synchronous_commit\` on, lake at its defaults): **single** (a lake of one partition), **p0…p3** (\`lake.partitions = 4\`), and a **router** (\`plproxy\`, \`lake_router\`) with database \`r1\` routing to single and \`r4\` routing to p0…p3 (SQL/MED server \`lake\`, unix sockets, one PL/Proxy connection per router backend and partition). pgbench, $C clients, \`-j 2 -M prepared -T $T\`, $ROUNDS rounds, direct and routed runs alternating (median of the rounds; per-round ratios in brackets). Each client appends to its own dataset and casts to its own owner, the names chosen so that p0…p3 hold $SPREAD of the $C datasets (and as many owners); 256-byte payloads.

| # | measurement | through the router | baseline | ratio | target | met? |
|---|---|---|---|---|---|---|
| 1 | \`lake.append\` (new operation each call), $C clients: router → 1 partition vs direct | $(fmt "$A_R") appends/s | $(fmt "$A_D") appends/s | **$R_A** ($(rounds_of append r1 direct)) | >= 0.6 | $(met "$R_A" 0.6) |
| 2 | \`lake.cast_durable\` (no-step), $C clients: router vs direct | $(fmt "$C_R") casts/s | $(fmt "$C_D") casts/s | **$R_C** ($(rounds_of cast r1 direct)) | >= 0.6 | $(met "$R_C" 0.6) |
| 3 | idempotent replay (\`lake.append\` of an operation already committed), $C clients: router vs direct | $(fmt "$P_R") replays/s | $(fmt "$P_D") replays/s | **$R_P** ($(rounds_of replay r1 direct)) | >= 0.6 | $(met "$R_P" 0.6) |
| 4 | aggregate appends/s, $C clients: router → 4 partitions vs router → 1 partition, all on this machine | $(fmt "$A_4") appends/s | $(fmt "$A_1") appends/s | **$R_4** ($(rounds_of append r4 r1)) | report | – |

Reproduce: \`flock /tmp/lake-bench.lock bench/router.sh\` as root (part of \`make bench\`); scripts in \`bench/out/router/{append,cast,replay}.sql\`, e.g. \`pgbench -n -M prepared -c $C -j 2 -T $T -D run=1 -D n=0 -f append.sql r1\` against the router.

EOF
if [ -n "$PERF_TXT" ] && [ -s "$PERF_TXT" ]; then
    echo "Where the time goes: a routed replay run profiled (\`perf record -a -g -F 499\`, $T s, the whole machine). Share of all CPU samples: the router's backends **${SH_R}%**, the partition's backends (PL/Proxy's connections) **${SH_P}%**, pgbench **${PGB}%**; the rest is other processes on this shared machine. By object and top symbols (share of all samples):"
    for who in router partition; do
        echo
        echo "$who backends:"
        echo
        echo '```'
        cat "$OUT/perf-$who-dso.txt"
        echo '...'
        cat "$OUT/perf-$who.txt"
        echo '```'
    done
    echo
fi
[ -f "$HERE/ANALYSIS-router.md" ] && cat "$HERE/ANALYSIS-router.md"
} >"$RESULTS"
say "wrote $RESULTS"
cat "$RESULTS"
