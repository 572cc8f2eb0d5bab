#!/usr/bin/env bash
# bench/run.sh — the foundation benchmarks of lake (`make bench`).
#
# Starts its own throwaway PostgreSQL 15 cluster (initdb in a mktemp dir,
# lake preloaded, unix socket only, port $BENCH_PORT) as the `postgres` OS
# user, runs every measurement against a plain-SQL baseline doing the same
# job IN THE SAME RUN, writes bench/RESULTS.md, then stops the cluster and
# removes it. Raw pgbench/perf output is kept in bench/out/ (git-ignored).
#
# Assumes lake is built and installed: `make && make install` as root.
# Run as root (the server itself runs as $BENCH_OS_USER via runuser; perf
# needs root). Knobs (environment):
#   BENCH_SECONDS  pgbench -T per throughput measurement      (10)
#   BENCH_ROUNDS   rounds of every lake/baseline pair           (2)
#   BENCH_WAL_N    appends per WAL batch, 256-byte payload     (10000)
#   BENCH_WAL_N64K appends per WAL batch, 64 kB payload         (2000)
#   BENCH_ONLY     subset of measurements, e.g. "1 3" (1..5); a subset
#                  writes bench/out/RESULTS.md instead of bench/RESULTS.md
#   BENCH_PORT     port of the throwaway cluster               (54329)
#   BENCH_OS_USER  OS user that runs the server                (postgres)
set -euo pipefail

START_EPOCH=$(date +%s)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
T=${BENCH_SECONDS:-10}
ROUNDS=${BENCH_ROUNDS:-2}
WAL_N=${BENCH_WAL_N:-10000}
WAL_N64K=${BENCH_WAL_N64K:-2000}
ONLY=${BENCH_ONLY:-1 2 3 4 5}
PORT=${BENCH_PORT:-54329}
OS_USER=${BENCH_OS_USER:-postgres}
REPLAY_N=100000          # operations pre-loaded for measurement 3
PERF_FREQ=499            # perf samples per CPU-second (call graphs: keep it low)
OUT=$HERE/out
mkdir -p "$OUT"
rm -f "$OUT"/*.log "$OUT"/*.tsv "$OUT"/*.txt "$OUT"/perf-*.data* 2>/dev/null || true
if [ "$ONLY" = "1 2 3 4 5" ]; then RESULTS=$HERE/RESULTS.md; else RESULTS=$OUT/RESULTS.md; fi

NAME=bench
. "$HERE/lib.sh"
want() { case " $ONLY " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

BUILT_NOTE=""
if [ -f "$ROOT/lake.so" ] && ! cmp -s "$ROOT/lake.so" "$PKGLIBDIR/lake.so"; then
    BUILT_NOTE="WARNING: ./lake.so differs from the installed one; the INSTALLED library was measured."
    say "$BUILT_NOTE"
fi
DATA=$TMP/data
export PGPORT=$PORT
cluster_init data "$PORT" <<EOF
shared_buffers = 1GB
# Checkpoints only where the benchmark asks for them (CHECKPOINT before each
# measurement), and no autovacuum: nothing in the background writes WAL or
# burns CPU inside a measured window. Everything else is default
# (fsync, synchronous_commit = on, full_page_writes = on, wal_level = replica).
max_wal_size = 32GB
checkpoint_timeout = 1h
autovacuum = off
max_connections = 100
EOF
cluster_start data 60
PM_PID=$(head -1 "$DATA/postmaster.pid")
# What the tree was when the server loaded the library (others may commit
# or reinstall during the run; the library itself is identified by its md5).
RUN_COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
[ -n "$(git -C "$ROOT" status --porcelain -- src sql 2>/dev/null)" ] &&
    RUN_COMMIT="$RUN_COMMIT plus uncommitted changes in src/ or sql/"
RUN_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
# The library this server loaded: keep a copy (for the static check and to
# name perf's samples) even if someone reinstalls lake.so during the run —
# as root, straight from the postmaster's mapping.
cp "$PKGLIBDIR/lake.so" "$TMP/lake.so"
if [ "$(id -u)" = 0 ]; then
    range=$(awk '$6 ~ /\/lake\.so$/ && $3 == "00000000" { print $1; exit }' "/proc/$PM_PID/maps" 2>/dev/null || true)
    [ -n "$range" ] && cp "/proc/$PM_PID/map_files/$range" "$TMP/lake.so" 2>/dev/null || true
fi
INSTALLED_MD5=$(md5sum "$TMP/lake.so" | cut -d' ' -f1)
nm -n --defined-only "$TMP/lake.so" 2>/dev/null | awk '$2 ~ /^[tTwW]$/ { print $1, $3 }' >"$OUT/lake.so.symbols" || true

sql "CREATE EXTENSION lake" >/dev/null
"${PSQL[@]}" -f "$HERE/setup.sql" >"$OUT/setup.log" 2>&1 || die "bench/setup.sql failed; see $OUT/setup.log"
# Steady state, not first use: 2000 appends to a 'seed' dataset on both
# sides, then ANALYZE, before anything is measured. Without it a session
# whose first appends find lake_data.version empty and never analyzed caches a
# generic plan that scans lake_data.version sequentially (see the report), and
# every later append of that session costs O(rows).
sql "SELECT lake.create_dataset('seed')" >/dev/null
sql "SELECT count(lake.append('seed', 't1', 's' || i, bench.payload256('s' || i))) FROM generate_series(1, 2000) AS i" >/dev/null
sql "INSERT INTO bench.ds_head (name) VALUES ('seed')"
sql "SELECT count(bench.plain_append('seed', 't1', 's' || i, bench.payload256('s' || i))) FROM generate_series(1, 2000) AS i" >/dev/null
sql "INSERT INTO bench.wal (tenant, operation_id, payload)
       SELECT 't1', 's' || i, bench.payload256('s' || i) FROM generate_series(1, 2000) AS i"
sql "ANALYZE" >/dev/null

# ---------------------------------------------------------- pgbench runs
RUNS=$OUT/runs.tsv      # one line per throughput run
RUN_NO=0
printf 'round\tkey\tsystem\tclients\ttps\ttxns\tfailed\taborted\tadmitted\twaited\trejected\tlog\n' >"$RUNS"

adm_counters() { sql "SELECT admitted, waited, rejected FROM lake.admission()" | tr '|' ' '; }

# pgbench_run <round> <key> <system> <clients> <script> [extra pgbench args...]
# Runs one -T measurement after a CHECKPOINT; appends a line to $RUNS.
pgbench_run() {
    local round=$1 key=$2 system=$3 clients=$4 script=$5
    shift 5
    local jobs=$(( clients < 2 ? clients : 2 ))
    RUN_NO=$((RUN_NO + 1))
    local log=$OUT/run-$RUN_NO-$key-$system-c$clients.log
    sql "CHECKPOINT"
    local a0 a1 rc=0
    a0=$(adm_counters)
    "$BINDIR/pgbench" -n -M prepared -c "$clients" -j "$jobs" -T "$T" \
        -D run="$RUN_NO" -D n=0 -f "$HERE/$script" "$@" >"$log" 2>&1 || rc=$?
    a1=$(adm_counters)
    local tps txns failed aborted
    tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' "$log" | head -1)
    txns=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$log" | head -1)
    failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$log" | head -1)
    aborted=$(grep -c 'aborted in command' "$log" || true)
    [ -n "$tps" ] || { tps=0; say "pgbench produced no tps (exit $rc): $log"; }
    set -- $a0 $a1
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$key" "$system" \
        "$clients" "$tps" "${txns:-0}" "${failed:-0}" "$aborted" \
        $(( $4 - $1 )) $(( $5 - $2 )) $(( $6 - $3 )) "$(basename "$log")" >>"$RUNS"
    say "round $round $key $system c=$clients: $tps tps${aborted:+, aborted clients $aborted}"
}

# ---------------------------------------------------------- 4. WAL
WAL=$OUT/wal.tsv
printf 'key\tsystem\tn\tbytes\tfpi_bytes\trecords\trows\tlog\n' >"$WAL"
wal_batch() { # <key> <system> <n> <script> <rows query>
    local key=$1 system=$2 n=$3 script=$4 rowsq=$5
    local log=$OUT/wal-$key-$system.log
    sql "CHECKPOINT"
    local l0 l1 rc=0
    l0=$(sql "SELECT pg_current_wal_insert_lsn()")
    PGOPTIONS="-c synchronous_commit=off" "$BINDIR/pgbench" -n -M prepared -c 1 -j 1 \
        -t "$n" -D n=0 -f "$HERE/$script" >"$log" 2>&1 || rc=$?
    l1=$(sql "SELECT pg_current_wal_insert_lsn()")
    [ $rc -eq 0 ] || say "pgbench exit $rc in WAL batch $key/$system: $log"
    local bytes rows stats fpi recs i
    bytes=$(sql "SELECT pg_wal_lsn_diff('$l1', '$l0')::bigint")
    rows=$(sql "$rowsq")
    # pg_waldump needs the range on disk (asynchronous commit: wait for the walwriter).
    for i in $(seq 50); do
        [ "$(sql "SELECT pg_current_wal_flush_lsn() >= '$l1'")" = t ] && break
        sleep 0.1
    done
    stats=$("$BINDIR/pg_waldump" --stats -p "$DATA/pg_wal" -s "$l0" -e "$l1" 2>>"$log" || true)
    printf '%s\n' "$stats" >>"$log"
    # Total  <N>  <record bytes> [..%]  <FPI bytes> [..%]  <combined> [..%]
    recs=$(printf '%s\n' "$stats" | awk '$1 == "Total" { gsub(/\[[^]]*\]/, ""); print $2 }')
    fpi=$(printf '%s\n' "$stats" | awk '$1 == "Total" { gsub(/\[[^]]*\]/, ""); print $4 }')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$key" "$system" "$n" "$bytes" "${fpi:-NA}" \
        "${recs:-NA}" "$rows" "$(basename "$log")" >>"$WAL"
    # Which relations the full-page images were of.
    "$BINDIR/pg_waldump" -p "$DATA/pg_wal" -s "$l0" -e "$l1" 2>/dev/null |
        grep -o 'rel [0-9]*/[0-9]*/[0-9]* \(fork [a-z]* \)\{0,1\}blk [0-9]* FPW' |
        awk '{ split($2, r, "/"); n[r[3]]++ } END { for (k in n) print k, n[k] }' |
        while read -r node cnt; do
            printf '%s\t%s\t%s\t%s\n' "$key" "$system" \
                "$(sql "SELECT coalesce((SELECT c.oid::regclass::text FROM pg_class c WHERE c.relfilenode = $node), '$node')")" "$cnt"
        done >>"$OUT/wal-fpi.tsv" || true
    # Per resource manager: <rmgr> <N> (..) <record bytes> (..) <FPI bytes> (..) ...
    printf '%s\n' "$stats" | awk -v k="$key" -v s="$system" \
        '{ gsub(/\([^)]*\)/, ""); gsub(/\[[^]]*\]/, "") }
         $2 ~ /^[0-9]+$/ && $2 > 0 && $1 != "Total" { print k "\t" s "\t" $1 "\t" $2 "\t" $3 "\t" $4 }' >>"$OUT/wal-rmgr.tsv"
    say "WAL $key $system: $bytes bytes for $n appends ($rows rows), FPI ${fpi:-?}"
}

if want 4; then
    say "4. WAL per append"
    wal_batch 256 plain "$WAL_N" wal_plain_256.sql "SELECT count(*) FROM bench.wal WHERE operation_id LIKE 'w256-%'"
    wal_batch 256 lake "$WAL_N" wal_lake_256.sql "SELECT count(*) FROM lake.versions('wal_256')"
    wal_batch 256 plain_on_conflict "$WAL_N" wal_plain_256_oc.sql "SELECT count(*) FROM bench.wal_oc"
    wal_batch 64k plain "$WAL_N64K" wal_plain_64k.sql "SELECT count(*) FROM bench.wal WHERE operation_id LIKE 'w64k-%'"
    wal_batch 64k lake "$WAL_N64K" wal_lake_64k.sql "SELECT count(*) FROM lake.versions('wal_64k')"
    # The 256-byte batch again, into a dataset with a dictionary, as a user
    # gets one: the dataset first holds 2000 payloads of its own (other
    # operations, not measured), then an administrator trains its dictionary
    # (lake.train_dictionary); the measured appends are wal_lake_256.sql's.
    sql "SELECT count(lake.append('wal_256_dict', 't1', 'd' || i, bench.payload256('d' || i))) FROM generate_series(1, 2000) AS i" >/dev/null
    sql "SELECT lake.train_dictionary('wal_256_dict')" >/dev/null
    wal_batch 256 lake_dict "$WAL_N" wal_lake_256_dict.sql "SELECT count(*) FROM lake.versions('wal_256_dict') WHERE operation_id LIKE 'w256-%'"
fi

# ---------------------------------------------------------- 3. pre-load
if want 3; then
    say "3. pre-loading $REPLAY_N operations (lake and baseline)"
    sql "SELECT count(lake.append('replay', 't1', 'p' || i, bench.replay_payload()))
           FROM generate_series(1, $REPLAY_N) AS i" >/dev/null
    sql "INSERT INTO bench.plain_replay (tenant, operation_id, payload)
           SELECT 't1', 'p' || i, bench.replay_payload() FROM generate_series(1, $REPLAY_N) AS i"
fi
sql "ANALYZE" >/dev/null

# ---------------------------------------------------------- 1-3. throughput
pair() { # <round> <key> <clients> <lake script> <plain script>
    local round=$1 key=$2 c=$3 ls=$4 ps=$5
    if [ $((round % 2)) -eq 1 ]; then
        pgbench_run "$round" "$key" lake "$c" "$ls"
        pgbench_run "$round" "$key" plain "$c" "$ps"
    else
        pgbench_run "$round" "$key" plain "$c" "$ps"
        pgbench_run "$round" "$key" lake "$c" "$ls"
    fi
}

set_slots() { # lake.max_concurrent_appends for new sessions (sighup)
    if [ "$1" = default ]; then
        sql "ALTER SYSTEM RESET lake.max_concurrent_appends" >/dev/null
    else
        sql "ALTER SYSTEM SET lake.max_concurrent_appends = $1" >/dev/null
    fi
    sql "SELECT pg_reload_conf()" >/dev/null
    sleep 1
}

for round in $(seq "$ROUNDS"); do
    if want 1; then
        pair "$round" m1_c16 16 m1_lake.sql m1_plain.sql
        # Diagnostic: the same with an admission slot for every client.
        set_slots 16
        pgbench_run "$round" m1_c16_slots16 lake 16 m1_lake.sql
        set_slots default
        # Diagnostic: CPU ceiling (no commit flush to wait for).
        PGOPTIONS="-c synchronous_commit=off" pair "$round" m1_c16_async 16 m1_lake.sql m1_plain.sql
        pair "$round" m1_c1 1 m1_lake.sql m1_plain.sql
    fi
    if want 2; then
        pair "$round" m2_c16 16 m2_lake.sql m2_plain.sql
        # Diagnostic: the same with an admission slot for every client.
        set_slots 16
        pgbench_run "$round" m2_c16_slots16 lake 16 m2_lake.sql
        set_slots default
    fi
    if want 3; then
        pair "$round" m3_c16 16 m3_lake.sql m3_plain.sql
        pair "$round" m3_c1 1 m3_lake.sql m3_plain.sql
    fi
done

# ---------------------------------------------------------- 5. profiles
PROF=$OUT/profile.tsv
printf 'key\tsystem\ttps\twindow\tcalls\tsamples\n' >"$PROF"
# perf_run <key> <system> <clients> <script>: pgbench -T $T in the
# background; meanwhile perf samples every process of this cluster (DWARF
# call graphs) for $T - 3 seconds. The calls done inside the perf window come
# from pgbench's per-second progress reports (epoch timestamps), the same
# way for lake and baseline.
perf_run() {
    local key=$1 system=$2 c=$3 script=$4
    local log=$OUT/perf-$key-$system.log data=$OUT/perf-$key-$system.data
    local window=$(( T > 4 ? T - 3 : 1 ))
    sql "CHECKPOINT"
    "$BINDIR/pgbench" -n -M prepared -c "$c" -j $(( c < 2 ? c : 2 )) -T "$T" -P 1 --progress-timestamp \
        -D run=$((RUN_NO += 1)) -D n=0 -f "$HERE/$script" >"$log" 2>&1 &
    local bg=$!
    BG_PIDS+=("$bg")
    sleep 1.5
    local pids t0
    pids=$(pgrep -d, -P "$PM_PID" || true)
    t0=$(date +%s.%N)
    perf record -q --no-buildid-cache -F "$PERF_FREQ" -e cpu-clock \
        --call-graph dwarf,8192 -p "$pids" -o "$data" -- sleep "$window" >>"$log" 2>&1 ||
        say "perf record failed: $log"
    # perf unwinds the DWARF stacks with the files the processes mapped. If
    # lake.so was reinstalled meanwhile, the mapping reads "lake.so
    # (deleted)" and perf cannot open it: give perf a symfs holding every
    # mapped file as it is, and the library the server really loaded.
    local symfs=$TMP/symfs-$key-$system p f
    for p in ${pids//,/ }; do
        awk '$6 ~ /^\// { print $6 }' "/proc/$p/maps" 2>/dev/null || true
    done | sort -u | while read -r f; do
        [ -f "$f" ] || continue
        mkdir -p "$symfs$(dirname "$f")" && ln -sfn "$f" "$symfs$f" || true
    done
    mkdir -p "$symfs$PKGLIBDIR"
    rm -f "$symfs$PKGLIBDIR/lake.so"
    cp "$TMP/lake.so" "$symfs$PKGLIBDIR/lake.so"
    cp "$TMP/lake.so" "$symfs$PKGLIBDIR/lake.so (deleted)"
    wait "$bg" || true
    perf script -f --symfs "$symfs" --kallsyms=/proc/kallsyms -i "$data" \
        -F comm,pid,ip,sym,dso --no-inline 2>>"$log" |
        awk -f "$HERE/perf_breakdown.awk" "$OUT/lake.so.symbols" - >"$OUT/perf-$key-$system.breakdown.tsv"
    local tps samples calls
    tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' "$log" | head -1)
    samples=$(awk -F'\t' '$1 == "total" {print $2}' "$OUT/perf-$key-$system.breakdown.tsv")
    # progress: <epoch> s, <tps> tps, ...  covers (epoch - 1, epoch]
    calls=$(awk -v t0="$t0" -v w="$window" '$1 == "progress:" {
                e = $2 + 0; r = $4 + 0; lo = e - 1; hi = e
                if (lo < t0) lo = t0; if (hi > t0 + w) hi = t0 + w
                if (hi > lo) n += r * (hi - lo) }
            END { printf "%.0f", n }' "$log")
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$key" "$system" "${tps:-0}" "$window" "$calls" "${samples:-0}" >>"$PROF"
    say "perf $key $system: ${tps:-?} tps, about $calls calls and ${samples:-?} samples in ${window}s"
}

WAITS=$OUT/waits.tsv
if want 5; then
    say "5. admission: cost per append (perf profiles) and waits at 32 clients"
    if [ $PERF_OK = 1 ]; then
        perf_run m1_c16 lake 16 m1_lake.sql
        perf_run m1_c16 plain 16 m1_plain.sql
        if want 3; then
            perf_run m3_c16 lake 16 m3_lake.sql
            perf_run m3_c16 plain 16 m3_plain.sql
        fi
    fi
    # 32 clients: sample pg_stat_activity of the pgbench sessions every 10 ms.
    printf 'system\tstate\twait_event_type\twait_event\tcount\n' >"$WAITS"
    for system in lake plain; do
        script=m1_$system.sql
        log=$OUT/waits-$system.log
        sql "CHECKPOINT"
        a0=$(adm_counters)
        "$BINDIR/pgbench" -n -M prepared -c 32 -j 2 -T "$T" -D run=$((RUN_NO += 1)) -D n=0 \
            -f "$HERE/$script" >"$log" 2>&1 &
        bg=$!
        BG_PIDS+=("$bg")
        sleep 1
        "${PSQL[@]}" -At -F $'\t' >"$OUT/waits-$system.tsv" <<EOF
CREATE TEMP TABLE s (state text, wet text, we text);
DO \$\$
DECLARE
    stop timestamptz := clock_timestamp() + interval '$(( T > 3 ? T - 2 : 1 )) seconds';
BEGIN
    WHILE clock_timestamp() < stop LOOP
        PERFORM pg_stat_clear_snapshot();
        INSERT INTO s SELECT a.state, a.wait_event_type, a.wait_event
          FROM pg_stat_activity a
         WHERE a.backend_type = 'client backend' AND a.application_name = 'pgbench';
        PERFORM pg_sleep(0.01);
    END LOOP;
END
\$\$;
SELECT '$system', state, coalesce(wet, '-'), coalesce(we, '-'), count(*)
  FROM s GROUP BY 2, 3, 4 ORDER BY 5 DESC;
EOF
        wait "$bg" || true
        a1=$(adm_counters)
        cat "$OUT/waits-$system.tsv" >>"$WAITS"
        set -- $a0 $a1
        tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' "$log" | head -1)
        aborted=$(grep -c 'aborted in command' "$log" || true)
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$system" "${tps:-0}" "$aborted" \
            $(( $4 - $1 )) $(( $5 - $2 )) $(( $6 - $3 )) >>"$OUT/waits-runs.tsv"
        say "32 clients $system: ${tps:-?} tps, aborted clients $aborted"
    done
    # Static check: every function the acquire/release path of the INSTALLED
    # library can reach inside lake.so, and what it calls outside lake.so.
    objdump -d --no-show-raw-insn "$TMP/lake.so" 2>/dev/null |
        awk '/^[0-9a-f]+ <[^>]*>:$/ { f = $2; gsub(/[<>:]/, "", f); sub(/\.cold$/, "", f); def[f] = 1; next }
             /(call|jmp) +[0-9a-f]+ </ { c = $NF; gsub(/[<>]/, "", c); sub(/@plt$/, "", c);
                                         if (c !~ /\+0x/) edge[f] = edge[f] " " c }
             END {
                 n = split("admission_reserve try_take wait_and_take release_permit admission_xact_callback admission_exit_callback", q, " ")
                 for (i = 1; i <= n; i++) if (q[i] in def) { seen[q[i]] = 1; todo[++t] = q[i] }
                 for (k = 1; k <= t; k++) {
                     m = split(edge[todo[k]], cs, " ")
                     for (j = 1; j <= m; j++) {
                         c = cs[j]
                         if (c in seen) continue
                         seen[c] = 1
                         if (c in def && c !~ /@plt$/) { todo[++t] = c; print "lake\t" c } else print "external\t" c
                     }
                 }
                 for (k = 1; k <= t; k++) if (todo[k] in def) print "root-or-lake\t" todo[k]
             }' | sort -u >"$OUT/admission-callees.tsv" || true
fi

# ---------------------------------------------------------- sanity
say "checking invariants"
CHECKS=$OUT/checks.txt
: >"$CHECKS"
check() { # <description> <sql returning t/f>
    local r
    r=$(sql "$2" 2>&1 || true)
    printf '%s\t%s\n' "$([ "$r" = t ] && echo ok || echo "FAILED ($r)")" "$1" >>"$CHECKS"
}
if want 1 || want 5; then
    check "every per-client dataset (measurement 1, 5) has gap-free versions 1..n" \
        "SELECT bool_and(n = mx) FROM (SELECT (SELECT count(*) FROM lake.versions('ds' || i)) AS n,
                                              (SELECT coalesce(max(version), 0) FROM lake.versions('ds' || i)) AS mx
                                         FROM generate_series(0, 31) AS i) x"
fi
if want 2; then
    check "dataset 'one' (measurement 2) has gap-free versions 1..n" \
        "SELECT count(*) = max(version) FROM lake.versions('one')"
    check "baseline counter of 'one' equals its row count and max version" \
        "SELECT h.head = (SELECT count(*) FROM bench.ds_version v WHERE v.dataset = 'one')
                AND h.head = (SELECT max(version) FROM bench.ds_version v WHERE v.dataset = 'one')
           FROM bench.ds_head h WHERE h.name = 'one'"
fi
if want 3; then
    check "replays wrote nothing: dataset 'replay' still has exactly $REPLAY_N versions" \
        "SELECT count(*) = $REPLAY_N FROM lake.versions('replay')"
fi
check "no permit held after the runs (slots_in_use = 0, bytes_reserved = 0)" \
    "SELECT slots_in_use = 0 AND bytes_reserved = 0 FROM lake.admission()"

PGVERSION=$(sql "SELECT version()")
END_EPOCH=$(date +%s)
ELAPSED=$((END_EPOCH - START_EPOCH))
export HERE OUT RESULTS T ROUNDS WAL_N WAL_N64K REPLAY_N PERF_OK PERF_FREQ ONLY ELAPSED \
    PGVERSION INSTALLED_MD5 BUILT_NOTE ROOT
# What report.sh needs, so that `bench/report.sh` alone can re-render
# RESULTS.md from bench/out/ (e.g. after editing bench/ANALYSIS.md).
for v in RESULTS T ROUNDS WAL_N WAL_N64K REPLAY_N PERF_OK PERF_FREQ ONLY ELAPSED \
         PGVERSION INSTALLED_MD5 BUILT_NOTE; do
    printf '%s=%q\n' "$v" "${!v}"
done >"$OUT/report.env"
printf 'RUN_DATE=%q\nRUN_COMMIT=%q\n' "$RUN_DATE" "$RUN_COMMIT" >>"$OUT/report.env"
"$HERE/report.sh"
say "done in ${ELAPSED}s: $RESULTS"
