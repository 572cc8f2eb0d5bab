#!/usr/bin/env bash
# bench/recovery.sh — owner recovery: its time with a long vs a short history
# under the same tail, and its replay rate against reading that tail.
#
# Starts TWO throwaway PostgreSQL 15 clusters side by side (initdb in a
# mktemp dir, lake preloaded, unix socket only, ports $RECOVERY_PORT and
# $RECOVERY_PORT + 1) as the `postgres` OS user: "short" gets a short
# history, "long" a long one, both the same owners and the same tail above
# their newest snapshot. Then they are restarted (immediate stop) in turn,
# short, long, short, long, ..., so both cases see the same machine load and
# each pair gives a ratio. Writes bench/results-recovery.md, then stops and
# removes both clusters. Raw output: bench/out/recovery/ (git-ignored).
#
# Assumes lake is built and installed (`make && make install` as root). Run
# as root. Knobs (environment):
#   RECOVERY_OWNERS     owners                                     (10000)
#   RECOVERY_SHORT      landings of the short history              (20000)
#   RECOVERY_LONG       landings of the long history               (1000000)
#   RECOVERY_TAIL       landings above the newest snapshot          (10000)
#   RECOVERY_RESTARTS   immediate restarts per cluster (median)     (9)
#   RECOVERY_PERF       1: profile the worker's recovery even if met (0)
#   RECOVERY_PORT       port of the first cluster (the next is +1)  (54333)
#   RECOVERY_OS_USER    OS user that runs the servers               (postgres)
set -euo pipefail

START_EPOCH=$(date +%s)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
OWNERS=${RECOVERY_OWNERS:-10000}
SHORT=${RECOVERY_SHORT:-20000}
LONG=${RECOVERY_LONG:-1000000}
TAIL=${RECOVERY_TAIL:-10000}
RESTARTS=${RECOVERY_RESTARTS:-9}
FORCE_PERF=${RECOVERY_PERF:-0}
PORT=${RECOVERY_PORT:-54333}
OS_USER=${RECOVERY_OS_USER:-postgres}
BATCH=50000                  # casts per bulk statement
OUT=$HERE/out/recovery
RESULTS=$HERE/results-recovery.md
mkdir -p "$OUT"
rm -rf "$OUT"/* 2>/dev/null || true

NAME=recovery
. "$HERE/lib.sh"
CASES="short long"
declare -A CPORT=([short]=$PORT [long]=$((PORT + 1)))
data() { echo "$TMP/$1"; }
sql() { "${PSQL[@]}" -p "${CPORT[$1]}" -At -c "$2"; }       # sql <case> <statement>
start_server() { cluster_start "$1" 300; }                  # start_server <case>
for c in $CASES; do
    cluster_init "$c" "${CPORT[$c]}" <<EOF
shared_buffers = 1GB
max_wal_size = 32GB
checkpoint_timeout = 1h
autovacuum = off
# Bulk casts from SQL outrun the sealer: let a cast wait for ring space
# instead of failing (53000) while the history is built.
lake.admission_queue_wait = 60s
# fsync, synchronous_commit = on, full_page_writes = on; the rest of lake at
# its defaults (lake.checkpoint_cycles = 1000, lake.cycle_max_casts = 10000).
EOF
    start_server "$c"
    sql "$c" "CREATE EXTENSION lake" >/dev/null
done
INSTALLED_MD5=$(md5sum "$PKGLIBDIR/lake.so" | cut -d' ' -f1)

wait_serving() { # <case> <owners>: until the worker serves with that many owners recovered; prints seconds waited
    local t0 i st
    t0=$(now)
    for i in $(seq 1200); do
        st=$(sql "$1" "SELECT worker_state || ' ' || recovery_owners FROM lake.stats()" 2>/dev/null || true)
        [ "$st" = "serving $2" ] && { calc %.3f "$(now) - $t0"; return 0; }
        sleep 0.05
    done
    die "the worker of '$1' did not recover within 60 s (last state: $st)"
}
drain() { # <case>
    local i
    for i in $(seq 1200); do
        [ "$(sql "$1" "SELECT casts_pending FROM lake.stats()")" = 0 ] && return 0
        sleep 0.05
    done
    die "casts still pending in '$1' after 60 s"
}
sealed() { sql "$1" "SELECT coalesce(sum(casts), 0) FROM lake.cycles()"; }   # the whole sealed log
# cast_bulk <case> <from g> <count>: no-step casts without payload,
# round-robin over the owners, in statements of $BATCH; the worker seals as
# they come; then wait until every cast is sealed.
cast_bulk() {
    local c=$1 g=$2 left=$3 n
    while [ "$left" -gt 0 ]; do
        n=$(( left < BATCH ? left : BATCH ))
        sql "$c" "SELECT count(lake.cast('o' || (g % $OWNERS + 1), NULL, NULL, NULL)) FROM generate_series($g, $((g + n - 1))) AS g" >/dev/null
        g=$((g + n)); left=$((left - n))
    done
    drain "$c"
}
STATS_COLS="recovery_ms, recovery_tail, recovery_snapshot, recovery_applied, recovery_owners, recovery_quarantined, epoch, worker_pid"

RUNS=$OUT/restarts.tsv
printf 'case\trestart\trecovery_ms\trecovery_tail\trecovery_snapshot\trecovery_applied\trecovery_owners\trecovery_quarantined\tepoch\tworker_pid\tstart_s\tserving_s\n' >"$RUNS"
LOGREAD=$OUT/logread.tsv
printf 'case\tround\tsnapshot\trows\tms\n' >"$LOGREAD"
BUILD=$OUT/build.tsv
printf 'case\tstep\tlandings\tseconds\n' >"$BUILD"
declare -A SNAP

# ---------------------------------------------------------- build both
for c in $CASES; do
    hist=$SHORT; [ "$c" = long ] && hist=$LONG
    say "$c: $OWNERS owners, a history of $hist landings, lake.checkpoint(), a tail of $TAIL"
    sql "$c" "SELECT count(*) FROM (SELECT lake.create_owner('o' || g) FROM generate_series(1, $OWNERS) AS g) x" >/dev/null
    t0=$(now)
    cast_bulk "$c" 1 "$hist"
    printf '%s\thistory\t%s\t%s\n' "$c" "$(sealed "$c")" "$(calc %.1f "$(now) - $t0")" >>"$BUILD"
    SNAP[$c]=$(sql "$c" "SELECT lake.checkpoint()")
    t0=$(now)
    cast_bulk "$c" $((hist + 1)) "$TAIL"
    printf '%s\ttail\t%s\t%s\n' "$c" "$TAIL" "$(calc %.1f "$(now) - $t0")" >>"$BUILD"
    sql "$c" "CHECKPOINT"
done

# ---------------------------------------------------------- restarts
# restart_once <case> <n> [profile]: CHECKPOINT (keeps PostgreSQL's own
# crash recovery short; it is not part of recovery_ms), stop -m immediate,
# start, wait until the worker serves every owner; one line in $RUNS.
restart_once() {
    local c=$1 i=$2 prof=${3:-0} t0 t1 serving perf_pid=""
    sql "$c" "CHECKPOINT"
    as_server "$BINDIR/pg_ctl" -D "$(data "$c")" -m immediate -w stop >/dev/null
    if [ "$prof" = 1 ]; then
        perf record -q -a -F 999 -e cpu-clock -g -o "$OUT/perf-$c.data" -- sleep 6 >"$OUT/perf-$c.log" 2>&1 &
        perf_pid=$!; BG_PIDS+=("$perf_pid")
        sleep 0.3
    fi
    t0=$(now)
    start_server "$c"
    t1=$(now)
    serving=$(wait_serving "$c" "$OWNERS")
    printf '%s\t%s\t%s\t%s\t%s\n' "$c" "$i" "$(sql "$c" "SELECT $STATS_COLS FROM lake.stats()" | tr '|' '\t')" \
        "$(calc %.3f "$t1 - $t0")" "$(calc %.3f "$t1 - $t0 + $serving")" >>"$RUNS"
    say "$c restart $i: $(tail -1 "$RUNS" | cut -f3-5) (recovery_ms, tail, snapshot)"
    if [ -n "$perf_pid" ]; then
        wait "$perf_pid" || true
        local w
        w=$(tail -1 "$RUNS" | cut -f10)
        # Only the worker that recovered (by pid).
        perf report -i "$OUT/perf-$c.data" --no-children -n --stdio -g none --sort pid,dso,sym 2>/dev/null |
            { grep -E '^ +[0-9.]+%' || true; } |
            awk -v w="$w" '{ split($3, p, ":"); if (p[1] != w) next; sym = ""; for (i = 5; i <= NF; i++) sym = sym (i > 5 ? " " : "") $i
                             s[$4 " " sym] += $2; t += $2 }
                END { for (k in s) printf "%6.2f%%  %6d  %s\n", 100 * s[k] / t, s[k], k }' |
            sort -k2,2nr | head -30 >"$OUT/perf-$c-top.txt" || true
        rm -f "$OUT/perf-$c.data"
    fi
}
# log_read <case> <round>: SELECT count(*) FROM lake.log(<snapshot cycle>), timed in the server.
log_read() {
    local c=$1 out
    out=$("${PSQL[@]}" -p "${CPORT[$c]}" -At 2>&1 <<EOF | sed -n 's/.*LOGREAD \([0-9]*\) \([0-9.e+-]*\).*/\1 \2/p'
DO \$\$
DECLARE t0 timestamptz; n bigint;
BEGIN
  t0 := clock_timestamp();
  SELECT count(*) INTO n FROM lake.log(${SNAP[$c]});
  RAISE NOTICE 'LOGREAD % %', n, extract(epoch FROM clock_timestamp() - t0) * 1000;
END
\$\$;
EOF
)
    printf '%s\t%s\t%s\t%s\n' "$c" "$2" "${SNAP[$c]}" "$(echo "$out" | tr ' ' '\t')" >>"$LOGREAD"
}

say "restarts, in turn: $RESTARTS per cluster"
for i in $(seq "$RESTARTS"); do
    for c in $CASES; do
        restart_once "$c" "$i"
        log_read "$c" "$i"
    done
done

# ---------------------------------------------------------- diagnostics
# Where the worker's recovery time goes (when a target is missed, or asked).
med() { # <case> <column>
    awk -F'\t' -v k="$1" -v c="$2" 'NR > 1 && $1 == k && $2 ~ /^[0-9]+$/ { print $c }' "$RUNS" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR % 2) printf "%s", v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
lmed() { # <case>: median ms of the log reads
    awk -F'\t' -v k="$1" 'NR > 1 && $1 == k { print $5 }' "$LOGREAD" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR % 2) printf "%s", v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
R_TIME=$(calc %.2f "$(med long 3) / $(med short 3)")
RATE_L=$(calc %.0f "$(med long 4) / $(med long 3) * 1000")
LRATE_L=$(calc %.0f "$TAIL / $(lmed long) * 1000")
R_RATE=$(calc %.2f "$RATE_L / $LRATE_L")
PROFILED=0
if [ $PERF_OK = 1 ] && { [ "$FORCE_PERF" = 1 ] || awk -v a="$R_TIME" -v b="$R_RATE" 'BEGIN { exit !(a > 1.2 || b < 0.5) }'; }; then
    say "profiling the long cluster's recovery (perf, cpu-clock)"
    restart_once long profile 1
    PROFILED=1
fi
# The part that does not depend on the tail: a snapshot right before the restarts.
say "empty tail: lake.checkpoint() and 3 restarts of the long cluster"
sql long "SELECT lake.checkpoint()" >/dev/null
for i in 1 2 3; do
    restart_once long "$i"
    sed -i '$ s/^long\t/empty_tail\t/' "$RUNS"
done

# ---------------------------------------------------------- sanity
CHECKS=$OUT/checks.txt
: >"$CHECKS"
check() { local r; r=$(sql "$1" "$3" 2>&1 | tr '\n' ' ' | sed 's/ *$//' || true); printf '%s\t%s\n' "$([ "$r" = t ] && echo ok || echo "FAILED ($r)")" "$2" >>"$CHECKS"; }
for c in $CASES; do
    TOTAL=$(sealed "$c")
    check "$c" "$c: every owner's recovered position adds up to the sealed log ($TOTAL landings)" \
        "SELECT sum(s.position) = $TOTAL FROM generate_series(1, $OWNERS) AS g, LATERAL lake.owner_state('o' || g) AS s"
    check "$c" "$c: no owner quarantined" "SELECT recovery_quarantined = 0 FROM lake.stats()"
    check "$c" "$c: running recovery again applies nothing (lake.recover())" "SELECT sum(applied) = 0 FROM lake.recover()"
done
check short "every measured restart replayed exactly the tail ($TAIL landings, all applied)" \
    "SELECT $(awk -F'\t' 'NR > 1 && ($1 == "short" || $1 == "long") && !($4 == '"$TAIL"' && $6 == '"$TAIL"') { bad = 1 } END { print bad ? "false" : "true" }' "$RUNS")"

PGVERSION=$(sql short "SELECT version()")
ELAPSED=$(( $(date +%s) - START_EPOCH ))

# ---------------------------------------------------------- report
range() { awk -F'\t' -v k="$1" -v c="$2" 'NR > 1 && $1 == k && $2 ~ /^[0-9]+$/ { if (!n++ || $c < mn) mn = $c; if (n == 1 || $c > mx) mx = $c } END { printf "%.1f–%.1f", mn, mx }' "$RUNS"; }
# per-round ratio long/short, median and range
pair_ratios() {
    awk -F'\t' 'NR > 1 && ($1 == "short" || $1 == "long") && $2 ~ /^[0-9]+$/ { v[$1, $2] = $3; r[$2] = 1 }
        END { for (i in r) if (v["short", i] > 0 && (("long", i) in v)) print v["long", i] / v["short", i] }' "$RUNS" | sort -g |
        awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f %.2f %.2f", m, v[1], v[NR] }'
}
met() { awk -v r="$1" -v op="$2" -v t="$3" 'BEGIN { ok = (op == ">=") ? (r + 0 >= t) : (r + 0 <= t); print ok ? "**yes**" : "**no**" }'; }
fmt() { awk -v x="$1" 'BEGIN { s = sprintf("%.0f", x); o = ""; while (length(s) > 3) { o = "," substr(s, length(s) - 2) o; s = substr(s, 1, length(s) - 3) } print s o }'; }
bd() { awk -F'\t' -v k="$1" -v s="$2" -v c="$3" '$1 == k && $2 == s { print $c }' "$BUILD"; }

MS_S=$(med short 3); MS_L=$(med long 3); MS_E=$(med empty_tail 3)
read -r PR_MED PR_MIN PR_MAX <<<"$(pair_ratios)"
mins() { awk -F'\t' -v k="$1" -v c="$2" 'NR > 1 && $1 == k && $2 ~ /^[0-9]+$/ { if (!n++ || $c < m) m = $c } END { print m }' "$RUNS"; }
R_MIN=$(calc %.2f "$(mins long 3) / $(mins short 3)")
RATE_S=$(calc %.0f "$(med short 4) / $MS_S * 1000")
LR_L=$(lmed long); LR_S=$(lmed short)
LRATE_S=$(calc %.0f "$TAIL / $LR_S * 1000")
R_RATE_S=$(calc %.2f "$RATE_S / $LRATE_S")
NET_L=$(calc %.1f "$MS_L - $MS_E"); NET_RATE=$(calc %.0f "$TAIL / ($MS_L - $MS_E + 1e-9) * 1000")
HIST_S=$(bd short history 3); HIST_L=$(bd long history 3)
HIST_S=$((HIST_S)); HIST_L=$((HIST_L))

{
cat <<EOF
## Owner recovery (\`bench/recovery.sh\`)

Generated by \`bench/recovery.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'); the whole run took **${ELAPSED} s**.
Code: commit \`$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')\`$(git -C "$ROOT" diff --quiet HEAD -- src sql 2>/dev/null || echo ' plus uncommitted changes in src/ or sql/'); measured \`lake.so\` md5 \`$INSTALLED_MD5\`.
$PGVERSION; $(nproc) CPUs; the machine is shared and noisy (load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)): **only the ratios within this run mean anything.**

Two throwaway clusters side by side (initdb by the script), the same settings: \`shared_buffers = 1GB\`, \`max_wal_size = 32GB\`, \`checkpoint_timeout = 1h\`, \`autovacuum = off\`, \`lake.admission_queue_wait = 60s\` (so bulk casts wait for ring space while the history is built); \`fsync\`, \`synchronous_commit = on\`, \`full_page_writes = on\`; lake otherwise at its defaults (\`lake.checkpoint_cycles = 1000\`, \`lake.cycle_max_casts = 10000\`). Each has $(fmt "$OWNERS") owners (\`o1\`…); every landing is a no-step cast without payload, round-robin over the owners. The clusters are restarted in turn (short, long, short, …), so both cases share the machine's load and each pair gives a ratio.

| # | measurement | lake (long history) | baseline | ratio | target | met? |
|---|---|---|---|---|---|---|
| 1 | recovery time (\`lake.stats().recovery_ms\`, median of $RESTARTS immediate restarts): $(fmt "$HIST_L")-landing history vs $(fmt "$HIST_S")-landing history (short), the same $(fmt "$TAIL")-landing tail above the newest snapshot, $(fmt "$OWNERS") owners | $MS_L ms (range $(range long 3)) | $MS_S ms (range $(range short 3)) | **$PR_MED** (median of the $RESTARTS paired ratios; range $PR_MIN–$PR_MAX; ratio of the medians $R_TIME, of the minima $R_MIN) | <= 1.2 | $(met "$PR_MED" "<=" 1.2) |
| 2 | replay rate during recovery (\`recovery_tail / recovery_ms\`) — vs reading the same tail with \`SELECT count(*) FROM lake.log(<snapshot cycle>)\` (median of $RESTARTS, each right after a restart) | $(fmt "$RATE_L") landings/s | $(fmt "$LRATE_L") landings/s ($TAIL rows in $(calc %.1f "$LR_L") ms) | **$R_RATE** (short history: $R_RATE_S) | >= 0.5 | $(met "$R_RATE" ">=" 0.5) |

Diagnostic (not a target): with an **empty tail** (a snapshot right before the restart) the long cluster's recovery takes $MS_E ms (median of 3, range $(range empty_tail 3)): the part that follows the number of owners (reading the registry, entering $(fmt "$OWNERS") owners in shared memory, decoding the snapshot, advancing the epoch with a durable commit). Without it, the tail replays at about $(fmt "$NET_RATE") landings/s ($TAIL landings in $NET_L ms) — $(calc %.2f "$NET_RATE / $LRATE_L") of the log read's rate.

### How it is measured (reproduce: \`bench/recovery.sh\` from the repository root, as root)

1. In each cluster: \`SELECT lake.create_owner('o' || g) FROM generate_series(1, $OWNERS) g\`.
2. History: \`SELECT count(lake.cast('o' || (g % $OWNERS + 1), NULL, NULL, NULL)) FROM generate_series(a, b) g\` in statements of $(fmt "$BATCH") casts; the worker seals as they come; then wait until \`lake.stats().casts_pending = 0\` (rather than \`lake.seal()\`, which is refused when it races the worker — see the findings).
3. \`SELECT lake.checkpoint()\` (a snapshot of every owner), then the tail: $(fmt "$TAIL") more casts the same way, all sealed.
4. $RESTARTS rounds, in each: for the short then the long cluster, \`CHECKPOINT\` (keeps PostgreSQL's own crash recovery short; it is not part of \`recovery_ms\`), \`pg_ctl stop -m immediate\`, \`pg_ctl start\`, poll \`lake.stats()\` until \`worker_state = 'serving'\` and \`recovery_owners = $OWNERS\`, read \`recovery_ms, recovery_tail, recovery_snapshot\`; then time \`SELECT count(*) FROM lake.log(<the snapshot's cycle>)\` in that cluster (\`clock_timestamp()\` around it, in a \`DO\` block).

### Every restart

| case | round | recovery_ms | recovery_tail | recovery_snapshot | recovery_applied | recovery_owners | quarantined | epoch | pg_ctl start (s) | start → serving (s) |
|---|---|---|---|---|---|---|---|---|---|---|
EOF
awk -F'\t' 'NR > 1 { printf "| %s | %s | %.1f | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $11, $12 }' "$RUNS"
cat <<EOF

### Building the logs, and the log reads

| case | step | landings (the whole sealed log after the step, or the tail) | seconds |
|---|---|---|---|
EOF
awk -F'\t' 'NR > 1 { printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4 }' "$BUILD"
echo
echo "| case | round | snapshot cycle | rows of lake.log(snapshot) | ms | landings/s |"
echo "|---|---|---|---|---|---|"
awk -F'\t' 'NR > 1 { printf "| %s | %s | %s | %s | %.1f | %.0f |\n", $1, $2, $3, $4, $5, ($5 > 0 ? $4 / $5 * 1000 : 0) }' "$LOGREAD"
if [ "$PROFILED" = 1 ] && [ -s "$OUT/perf-long-top.txt" ]; then
    echo
    echo "### Profile of the worker during a recovery (long history)"
    echo
    echo "\`perf record -a -F 999 -e cpu-clock\` around one more restart of the long cluster, then only the samples of the worker that recovered (self time: share, samples, library, symbol). That recovery took $(awk -F'\t' '$2 == "profile" { print $3 }' "$RUNS") ms."
    echo
    echo '```'
    cat "$OUT/perf-long-top.txt"
    echo '```'
fi
echo
echo "### Notes"
echo
echo "- **Recovery time (1).** Every restart of both clusters read only the tail above the newest snapshot (recovery_snapshot = the snapshot's cycle, recovery_tail = $TAIL in each; see the table), so the history's length cannot show up except through index depth. The spread between restarts of the same cluster ($(range short 3) ms short, $(range long 3) ms long) is the machine's noise; the median of the paired ratios is the figure to trust."
echo "- **Replay rate (2).** \`recovery_ms\` includes the part of a start that does not depend on the tail: $MS_E ms with an empty tail, against $MS_L ms with the $TAIL-landing tail. Counted in, the rate is $(fmt "$RATE_L") landings/s; the tail itself replays at about $(fmt "$NET_RATE") landings/s, $(calc %.2f "$NET_RATE / $LRATE_L") of the log read. In a profile of one restart (10,000 owners, empty tail) \`load_owners\` was about three quarters of \`recovery_run\`: planning its first queries in a fresh process (cold catalog caches), reading the registry through SPI, and \`owner_enter\` for each owner. *What would close it:* a cheaper start per owner (read lake_data.owner once with a heap scan, resolve lifecycles once per lifecycle rather than per owner), or report the replay apart (e.g. \`recovery_replay_ms\`) so that the two costs can be told apart in \`lake.stats()\`."
echo "- **\`lake.seal()\` is refused while the worker seals (bug, \`check_fence\` in \`src/seal.c\`).** The fence reads the durable head (\`SELECT max(c.cycle) FROM lake_data.cycle c\`) through SPI with \`read_only = true\`, i.e. with the statement's snapshot, taken before \`seal_lock()\` waited for the worker's seal; every cycle the worker committed during that wait is invisible, so the head looks older than the base in shared memory and the seal fails with 55000 \`seal refused: its base is not the sealed head\`. Under an 8-client fire-and-forget load, 13 of 13 \`SELECT lake.seal()\` calls were refused (\`DETAIL: This sealer has epoch 3 and base cycle 17857; the durable epoch is 3 and the head is cycle 17851.\`). A fresh snapshot after the lock (\`SPI_execute_snapshot\` with \`GetLatestSnapshot()\`, as logread.c already does for receipts) would fix it; this script waits for \`casts_pending = 0\` instead of calling \`lake.seal()\`."
echo
echo "### Checks"
echo
awk -F'\t' '{ printf "- %s: %s\n", $1, $2 }' "$CHECKS"
} >"$RESULTS"

say "done in ${ELAPSED}s: $RESULTS"
