#!/usr/bin/env bash
# bench/report.sh — writes RESULTS.md from the raw tables bench/run.sh left
# in bench/out/. Called by run.sh (which exports the variables used here);
# it does not touch the cluster.
set -euo pipefail
HERE=${HERE:-$(cd "$(dirname "$0")" && pwd)}
ROOT=${ROOT:-$(dirname "$HERE")}
OUT=${OUT:-$HERE/out}
[ -f "$OUT/report.env" ] || { echo "report.sh: no $OUT/report.env: run bench/run.sh first" >&2; exit 1; }
# shellcheck disable=SC1091
. "$OUT/report.env"

RUNS=$OUT/runs.tsv
WAL=$OUT/wal.tsv
PROF=$OUT/profile.tsv
want() { case " $ONLY " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# mean <key> <system> -> "mean min max rounds aborted failed admitted waited rejected"
mean() {
    awk -F'\t' -v k="$1" -v s="$2" 'NR > 1 && $2 == k && $3 == s {
            n++; t += $5; if (n == 1 || $5 < mn) mn = $5; if (n == 1 || $5 > mx) mx = $5
            ab += $8; fl += $7; ad += $9; wt += $10; rj += $11 }
        END { if (n) printf "%.0f %.0f %.0f %d %d %d %d %d %d\n", t / n, mn, mx, n, ab, fl, ad, wt, rj
              else print "0 0 0 0 0 0 0 0 0" }' "$RUNS"
}
# ratio range over rounds: lake/plain of the same round
ratio_range() { # <lake key> <plain key>
    awk -F'\t' -v lk="$1" -v pk="$2" 'NR > 1 && $2 == lk && $3 == "lake" { l[$1] = $5 }
        NR > 1 && $2 == pk && $3 == "plain" { p[$1] = $5 }
        END { for (r in l) if ((r in p) && p[r] > 0) { x = l[r] / p[r]
                  if (!n++ || x < mn) mn = x; if (n == 1 || x > mx) mx = x }
              if (n) printf "%.2f–%.2f", mn, mx; else printf "–" }' "$RUNS"
}
fmt() { awk -v x="$1" 'BEGIN { s = sprintf("%.0f", x); o = ""; while (length(s) > 3) { o = "," substr(s, length(s) - 2) o; s = substr(s, 1, length(s) - 3) } print s o }'; }
div() { awk -v a="$1" -v b="$2" -v f="${3:-%.2f}" 'BEGIN { if (b > 0) printf f, a / b; else printf "–" }'; }
meets() { # <ratio> <op> <target>
    awk -v r="$1" -v op="$2" -v t="$3" 'BEGIN { if (r == "–") { print "–"; exit }
        ok = (op == ">=") ? (r + 0 >= t) : (r + 0 <= t); print ok ? "**yes**" : "**no**" }'
}

SUMMARY=()
DETAIL_NOTES=()
tp_row() { # <num> <label> <lake key> <plain key> <op> <target> <lake script> <plain script> <clients>
    local num=$1 label=$2 lk=$3 pk=$4 op=$5 tgt=$6 ls=$7 ps=$8 c=$9
    local L P ratio met note=""
    read -r -a L <<<"$(mean "$lk" lake)"
    read -r -a P <<<"$(mean "$pk" plain)"
    ratio=$(div "${L[0]}" "${P[0]}")
    met=$(meets "$ratio" "$op" "$tgt")
    if [ "${L[4]}" -gt 0 ] || [ "${P[4]}" -gt 0 ] || [ "${L[5]}" -gt 0 ] || [ "${P[5]}" -gt 0 ]; then
        note=""
        met="⚠ **not valid**: clients aborted (lake ${L[4]}, baseline ${P[4]}; see the 53000 column below), failed transactions ${L[5]} / ${P[5]}; by the ratio alone: $met"
    fi
    SUMMARY+=("| $num | $label | $(fmt "${L[0]}") tps | $(fmt "${P[0]}") tps | **$ratio** (rounds: $(ratio_range "$lk" "$pk")) | $op $tgt | $met$note |")
    CMDS+=("| $num | \`pgbench -n -M prepared -c $c -j $(( c < 2 ? c : 2 )) -T $T -D run=<k> -D n=0 -f bench/$ls\` vs the same with \`-f bench/$ps\` |")
}

CMDS=()
if want 1; then
    tp_row 1a "append, 16 clients, each on its own dataset — vs \`INSERT … ON CONFLICT DO NOTHING\`" \
        m1_c16 m1_c16 ">=" 0.7 m1_lake.sql m1_plain.sql 16
    tp_row 1b "append, 1 client — vs \`INSERT … ON CONFLICT DO NOTHING\`" \
        m1_c1 m1_c1 ">=" 0.7 m1_lake.sql m1_plain.sql 1
fi
if want 2; then
    tp_row 2 "append, 16 clients on ONE dataset — vs plpgsql \`bench.plain_append\` (same guarantees)" \
        m2_c16 m2_c16 ">=" 1.0 m2_lake.sql m2_plain.sql 16
fi
if want 3; then
    tp_row 3a "replay of an existing operation, 16 clients — vs unique-key \`SELECT\`" \
        m3_c16 m3_c16 ">=" 0.8 m3_lake.sql m3_plain.sql 16
    tp_row 3b "replay of an existing operation, 1 client — vs unique-key \`SELECT\`" \
        m3_c1 m3_c1 ">=" 0.8 m3_lake.sql m3_plain.sql 1
fi

wal_get() { # <key> <system> -> "n bytes fpi recs rows"
    awk -F'\t' -v k="$1" -v s="$2" 'NR > 1 && $1 == k && $2 == s { print $3, $4, $5, $6, $7 }' "$WAL"
}
# wal_row <num> <key> <lake system> <baseline system> <target> <label...>
wal_row() {
    local num=$1 key=$2 tgt=$5 L P lpa ppa ratio lx px
    read -r -a L <<<"$(wal_get "$key" "$3")"
    read -r -a P <<<"$(wal_get "$key" "$4")"
    shift 5
    [ -n "${L[0]:-}" ] && [ -n "${P[0]:-}" ] || return 0
    lpa=$(div "${L[1]}" "${L[0]}" %.0f)
    ppa=$(div "${P[1]}" "${P[0]}" %.0f)
    ratio=$(div "$lpa" "$ppa")
    lx=$(div "$(( ${L[1]} - ${L[2]/NA/0} ))" "${L[0]}" %.0f)
    px=$(div "$(( ${P[1]} - ${P[2]/NA/0} ))" "${P[0]}" %.0f)
    SUMMARY+=("| $num | $* | $(fmt "$lpa") B | $(fmt "$ppa") B | **$ratio** (without FPIs: $(div "$lx" "$px")) | <= $tgt | $(meets "$ratio" "<=" "$tgt") |")
}
if want 4; then
    wal_row 4a 256 lake plain 1.0 "WAL bytes per append, 256-byte JSON line (CHECKPOINT before; FPIs included) — vs plain \`INSERT\` (bytea)"
    wal_row 4b 64k lake plain 0.5 "WAL bytes per append, 64 kB of JSON lines (CHECKPOINT before; FPIs included) — vs plain \`INSERT\` (bytea)"
    wal_row 4a-dict 256 lake_dict plain_on_conflict 1.0 "the same 256-byte appends into a dataset with a trained dictionary (\`lake.train_dictionary\` after 2000 payloads of its own) — vs \`INSERT … ON CONFLICT DO NOTHING\`"
    CMDS+=("| 4 | \`CHECKPOINT\`; \`pg_current_wal_insert_lsn()\`; \`PGOPTIONS='-c synchronous_commit=off' pgbench -n -M prepared -c 1 -t N -D n=0 -f bench/wal_lake_256.sql\` (and \`wal_plain_256.sql\`, \`wal_plain_256_oc.sql\`, \`wal_lake_64k.sql\`, \`wal_plain_64k.sql\`; then 2000 appends to \`wal_256_dict\`, \`lake.train_dictionary('wal_256_dict')\`, \`wal_lake_256_dict.sql\`); \`pg_current_wal_insert_lsn()\`; \`pg_waldump --stats\` over the range |")
fi

# ---- measurement 5 figures
ADM_US="–"; ADM_LINE=""
prof_get() { # <key> <system> -> "tps window calls samples"
    awk -F'\t' -v k="$1" -v s="$2" 'NR > 1 && $1 == k && $2 == s { print $3, $4, $5, $6 }' "$PROF" 2>/dev/null
}
bd() { # <key-system> <kind> <name> -> samples
    awk -F'\t' -v k="$2" -v n="$3" '$1 == k && $2 == n { print $3; f = 1 } END { if (!f) print 0 }' \
        "$OUT/perf-$1.breakdown.tsv" 2>/dev/null || echo 0
}
us() { awk -v s="$1" -v f="$PERF_FREQ" -v n="$2" 'BEGIN { if (n > 0) printf "%.1f", s / f / n * 1e6; else printf "–" }'; }
if want 5 && [ "$PERF_OK" = 1 ] && [ -s "$OUT/perf-m1_c16-lake.breakdown.tsv" ]; then
    read -r LTPS LWIN LAPP LSAMP <<<"$(prof_get m1_c16 lake)"
    read -r PTPS PWIN PAPP PSAMP <<<"$(prof_get m1_c16 plain)"
    ADM=$(bd m1_c16-lake cat "admission (acquire, wait, release)")
    ADM_ACQ=$(bd m1_c16-lake admission "acquire: CAS fast path (try_take)")
    ADM_WAIT=$(bd m1_c16-lake admission "waiting: sleep/wake-up on the condition variable")
    ADM_REL=$(bd m1_c16-lake admission "release: subtract + broadcast to sleepers")
    ADM_US=$(us "$ADM" "$LAPP")
    LAKE_US=$(us "$LSAMP" "$LAPP")
    PLAIN_US=$(us "$PSAMP" "$PAPP")
    SHARE=$(awk -v a="$ADM" -v t="$LSAMP" 'BEGIN { if (t > 0) printf "%.1f", 100 * a / t; else printf "–" }')
    # 0 samples: report the 95 % upper bound (3 samples).
    acq_us() { if [ "$ADM_ACQ" -gt 0 ]; then us "$ADM_ACQ" "$LAPP"; else printf '< %s' "$(us 3 "$LAPP")"; fi; }
    UNCONT=""
    if [ -s "$OUT/perf-m3_c16-lake.breakdown.tsv" ]; then
        read -r _ _ RAPP RSAMP <<<"$(prof_get m3_c16 lake)"
        RADM=$(bd m3_c16-lake cat "admission (acquire, wait, release)")
        UNCONT="; almost uncontended (16 clients replaying: short read-only transactions, slots rarely full): $(us "$RADM" "$RAPP") µs = $(awk -v a="$RADM" -v t="$RSAMP" 'BEGIN { if (t > 0) printf "%.1f", 100 * a / t }') % of lake's CPU per call"
    fi
    SUMMARY+=("| 5a | admission CPU per append, 16 clients, default 8 slots (perf: acquire + wait + release) | **$ADM_US µs** = $SHARE % of lake's $LAKE_US µs CPU per append | baseline CPU per append: $PLAIN_US µs | – | report | acquire fast path (CAS) $(acq_us) µs, waiting for a slot (sleep/wake-ups) $(us "$ADM_WAIT" "$LAPP") µs, release (subtract + broadcast) $(us "$ADM_REL" "$LAPP") µs$UNCONT |")
elif want 5; then
    SUMMARY+=("| 5a | admission cost per append | perf unusable on this machine: not measured | – | – | report | – |")
fi
if want 5 && [ -s "$OUT/waits.tsv" ]; then
    LW_LAKE=$(awk -F'\t' '$1 == "lake" && $3 == "LWLock" { s += $5 } END { print s + 0 }' "$OUT/waits.tsv")
    EXT_LAKE=$(awk -F'\t' '$1 == "lake" && $3 == "Extension" { s += $5 } END { print s + 0 }' "$OUT/waits.tsv")
    ACT_LAKE=$(awk -F'\t' '$1 == "lake" && $2 == "active" { s += $5 } END { print s + 0 }' "$OUT/waits.tsv")
    LW_PLAIN=$(awk -F'\t' '$1 == "plain" && $3 == "LWLock" { s += $5 } END { print s + 0 }' "$OUT/waits.tsv")
    ACT_PLAIN=$(awk -F'\t' '$1 == "plain" && $2 == "active" { s += $5 } END { print s + 0 }' "$OUT/waits.tsv")
    LWCALLS=$(awk -F'\t' '$1 == "external" && $2 ~ /LWLock|LockAcquire|LockRelease/' "$OUT/admission-callees.tsv" 2>/dev/null | wc -l)
    read -r _ W32TPS W32AB W32ADM W32WT W32RJ <<<"$(awk -F'\t' '$1 == "lake"' "$OUT/waits-runs.tsv" 2>/dev/null)"
    SUMMARY+=("| 5b | LWLock waits attributable to admission, 32 clients (pg_stat_activity samples) | 0 (admission waits: $EXT_LAKE \`Extension\` samples; LWLock samples $LW_LAKE of $ACT_LAKE active, all core locks — see §5) | baseline LWLock samples $LW_PLAIN of $ACT_PLAIN active | – | = 0 | $([ "$LWCALLS" = 0 ] && echo '**yes**' || echo '**no**') (admission path calls no LWLock/lock-manager function: static check of lake.so); 53000 rejections in this run: ${W32RJ:-?} |")
fi

# ================================================================ write
{
echo "# lake benchmarks — results"
echo
echo "Generated by \`bench/run.sh\` (\`make bench\`) on $RUN_DATE; the whole run took **${ELAPSED} s** ($((ELAPSED / 60)) min $((ELAPSED % 60)) s)."
echo
echo "- Code: HEAD \`${RUN_COMMIT%% *}\`$( [ "${RUN_COMMIT#* }" != "$RUN_COMMIT" ] && echo " **${RUN_COMMIT#* }**") when the server started; measured (loaded) \`lake.so\` md5 \`$INSTALLED_MD5\`. ${BUILT_NOTE}"
echo "- $PGVERSION; $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)); the machine is shared and noisy: **only the ratios within this run mean anything.**"
echo "- Throwaway cluster (initdb by run.sh): defaults except \`shared_buffers = 1GB\`, \`max_wal_size = 32GB\`, \`checkpoint_timeout = 1h\`, \`autovacuum = off\` (no background WAL/CPU inside a measured window); \`fsync\`, \`synchronous_commit = on\`, \`full_page_writes = on\`; lake at its defaults (\`lake.max_concurrent_appends = 8\`, \`lake.admission_queue_wait = 100ms\`)."
echo "- Throughput: pgbench \`-M prepared -T $T\`, a \`CHECKPOINT\` before every run; lake and its baseline run back to back, in alternating order, for $ROUNDS round(s); figures are means over the rounds, the ratio is lake / baseline (rounds: the per-round range). Payload: a 256-byte JSON line built in the statement by \`bench.payload256(op)\` (inlined, identical on both sides); a new operation id per call."
echo
echo "## Summary"
echo
echo "| # | measurement | lake | baseline | ratio lake/baseline | target | met? |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${SUMMARY[@]}"
echo
echo "## How each figure is measured (reproduce: \`make bench\` from the repository root, as root)"
echo
echo "| # | command inside the benchmark cluster |"
echo "|---|---|"
[ ${#CMDS[@]} -gt 0 ] && printf '%s\n' "${CMDS[@]}"
echo "| 5 | \`perf record -F $PERF_FREQ -e cpu-clock --call-graph dwarf -p <every process of the cluster>\` during 16-client runs of \`bench/m1_lake.sql\`, \`bench/m1_plain.sql\`, \`bench/m3_lake.sql\`, \`bench/m3_plain.sql\`, stacks classified by \`bench/perf_breakdown.awk\`; \`pg_stat_activity\` sampled every 10 ms during 32-client runs of \`bench/m1_lake.sql\` and \`bench/m1_plain.sql\`; \`objdump\` of the loaded lake.so for what the admission path calls |"
echo
echo "Baselines are defined in \`bench/setup.sql\`. Knobs: \`BENCH_SECONDS\`, \`BENCH_ROUNDS\`, \`BENCH_WAL_N\`, \`BENCH_WAL_N64K\`, \`BENCH_ONLY=\"1 3\"\` (a subset writes \`bench/out/RESULTS.md\`). Raw pgbench, perf and pg_waldump output of this run: \`bench/out/\` (not committed)."

if [ -s "$RUNS" ] && [ "$(wc -l <"$RUNS")" -gt 1 ]; then
    echo
    echo "## 1–3. Every throughput run"
    echo
    echo "| round | measurement | system | clients | tps | transactions | failed | aborted clients | admitted | waited for a slot | rejected (53000) |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    awk -F'\t' 'NR > 1 { printf "| %s | %s | %s | %s | %.0f | %s | %s | %s | %s | %s | %s |\n",
        $1, $2, $3, $4, $5, $6, $7, $8, ($3 == "lake" ? $9 : "–"), ($3 == "lake" ? $10 : "–"), ($3 == "lake" ? $11 : "–") }' "$RUNS"
    if want 1; then
        read -r -a S16 <<<"$(mean m1_c16_slots16 lake)"
        read -r -a P16 <<<"$(mean m1_c16 plain)"
        read -r -a AL <<<"$(mean m1_c16_async lake)"
        read -r -a AP <<<"$(mean m1_c16_async plain)"
        echo
        echo "Diagnostics for 1a (not targets):"
        echo
        echo "- \`m1_c16_slots16\`: lake with \`lake.max_concurrent_appends = 16\` (a slot for every client, so admission never queues): $(fmt "${S16[0]}") tps = **$(div "${S16[0]}" "${P16[0]}")** of the baseline (default 8 slots: $(div "$(mean m1_c16 lake | cut -d' ' -f1)" "${P16[0]}"))."
        echo "- \`m1_c16_async\`: both sides with \`synchronous_commit = off\` — no commit flush to wait for, so this is the CPU ceiling: lake $(fmt "${AL[0]}") vs $(fmt "${AP[0]}") tps = **$(div "${AL[0]}" "${AP[0]}")**."
    fi
    if want 2; then
        read -r -a S16 <<<"$(mean m2_c16_slots16 lake)"
        read -r -a P16 <<<"$(mean m2_c16 plain)"
        echo
        echo "Diagnostic for 2 (not a target): \`m2_c16_slots16\`, lake with \`lake.max_concurrent_appends = 16\`: $(fmt "${S16[0]}") tps = **$(div "${S16[0]}" "${P16[0]}")** of the baseline, aborted clients ${S16[4]}."
    fi
fi

if want 4 && [ -s "$WAL" ]; then
    echo
    echo "## 4. WAL per append"
    echo
    echo "One append per transaction, 1 client, \`synchronous_commit = off\` (it changes no WAL byte, only the wait), one table per side that already holds the same 2000 seed rows (\`lake_data.version\`, new datasets \`wal_256\`/\`wal_64k\`; baseline \`bench.wal\`), the 256-byte batch first, then the 64 kB one, then (\`lake_dict\`) the 256-byte batch into \`wal_256_dict\`, whose dictionary an administrator trained from 2000 earlier payloads of its own. Bytes = \`pg_wal_lsn_diff\` of \`pg_current_wal_insert_lsn()\` around the batch. **Full-page images:** a \`CHECKPOINT\` right before each batch, so both sides start from the same state and pay the FPIs of the pages they touch first; FPI bytes come from \`pg_waldump --stats\` over the same range and are shown apart, with the ratio also computed without them."
    echo
    echo "| payload | system | appends | rows after | WAL bytes | per append | FPI bytes | per append without FPIs | records |"
    echo "|---|---|---|---|---|---|---|---|---|"
    awk -F'\t' 'NR > 1 { fpi = ($5 == "NA") ? 0 : $5
        printf "| %s | %s | %d | %s | %d | %.0f | %s | %.0f | %s |\n", ($1 == "256" ? "256 B" : "64 kB"), $2, $3, $7, $4, $4 / $3, $5, ($4 - fpi) / $3, $6 }' "$WAL"
    if [ -s "$OUT/wal-rmgr.tsv" ]; then
        echo
        echo "Per resource manager (\`pg_waldump --stats\`), bytes per append — records / FPIs:"
        echo
        echo "| payload | system | Heap | Heap2 | Btree | Transaction | other |"
        echo "|---|---|---|---|---|---|---|"
        awk -F'\t' 'NR == FNR { if (FNR > 1) n[$1 "\t" $2] = $3; next }
            { k = $1 "\t" $2; if (!(k in seen)) { seen[k] = 1; order[++m] = k }
              r = ($3 ~ /^(Heap|Heap2|Btree|Transaction)$/) ? $3 : "other"
              R[k, r] += $5; F[k, r] += $6 }
            END { for (i = 1; i <= m; i++) { k = order[i]; split(k, p, "\t"); line = "| " (p[1] == "256" ? "256 B" : "64 kB") " | " p[2]
                      nn = n[k]; if (nn <= 0) nn = 1
                      for (j = 1; j <= 5; j++) { r = (j == 1 ? "Heap" : j == 2 ? "Heap2" : j == 3 ? "Btree" : j == 4 ? "Transaction" : "other")
                          line = line sprintf(" | %.0f / %.0f", R[k, r] / nn, F[k, r] / nn) }
                      print line " |" } }' "$WAL" "$OUT/wal-rmgr.tsv"
    fi
    if [ -s "$OUT/wal-fpi.tsv" ]; then
        echo
        echo "Full-page images by relation (count of 8 kB page images):"
        echo
        echo "| payload | system | relation | FPIs |"
        echo "|---|---|---|---|"
        sort -t$'\t' -k1,1 -k2,2 -k4,4nr "$OUT/wal-fpi.tsv" |
            awk -F'\t' '{ printf "| %s | %s | %s | %s |\n", ($1 == "256" ? "256 B" : "64 kB"), $2, $3, $4 }'
    fi
    echo
    echo "\`plain_on_conflict\` (for information) is the idempotent \`INSERT … ON CONFLICT DO NOTHING\` of measurement 1: speculative insertion adds a confirm record per row."
fi

# profile_section <key> <title>: where the CPU went, lake vs baseline.
profile_section() {
    local key=$1 title=$2 lt lw la ls pt pw pa ps
    [ -s "$OUT/perf-$key-lake.breakdown.tsv" ] || return 0
    read -r lt lw la ls <<<"$(prof_get "$key" lake)"
    read -r pt pw pa ps <<<"$(prof_get "$key" plain)"
    echo
    echo "### $title"
    echo
    echo "Under perf: lake ${lt%.*} tps, baseline ${pt%.*} tps; $ls / $ps samples over about $la / $pa calls in the ${lw} s window."
    echo
    echo "| where the CPU of the cluster went | lake: share | lake: µs CPU / call | baseline: share | baseline: µs CPU / call |"
    echo "|---|---|---|---|---|"
    awk -F'\t' -v ls="$ls" -v la="$la" -v ps="$ps" -v pa="$pa" -v f="$PERF_FREQ" '
        FNR == NR && $1 == "cat" { L[$2] = $3; keys[$2] = 1; next }
        $1 == "cat" { P[$2] = $3; keys[$2] = 1 }
        END {
            for (k in keys)
                printf "%d\t| %s | %.1f %% | %.1f | %s | %s |\n", L[k] + P[k] / 1000, k,
                    (ls > 0 ? 100 * L[k] / ls : 0), (la > 0 ? L[k] / f / la * 1e6 : 0),
                    (ps > 0 ? sprintf("%.1f %%", 100 * P[k] / ps) : "–"), (pa > 0 ? sprintf("%.1f", P[k] / f / pa * 1e6) : "–")
        }' "$OUT/perf-$key-lake.breakdown.tsv" "$OUT/perf-$key-plain.breakdown.tsv" | sort -t$'\t' -k1,1nr | cut -f2-
    awk -v ls="$ls" -v la="$la" -v ps="$ps" -v pa="$pa" -v f="$PERF_FREQ" 'BEGIN {
        printf "| **total** | 100 %% | **%.1f** | 100 %% | **%s** |\n", (la > 0 ? ls / f / la * 1e6 : 0), (pa > 0 ? sprintf("%.1f", ps / f / pa * 1e6) : "–") }'
    echo
    echo "Top-down inside \`lake.append\` (the first two call levels below it; ≥ 0.5 % of all lake samples):"
    echo
    echo "| called by lake_append | called by that | share | µs CPU / call |"
    echo "|---|---|---|---|"
    awk -F'\t' -v ls="$ls" -v la="$la" -v f="$PERF_FREQ" '$1 == "down" && ls > 0 && $4 / ls >= 0.005 {
        printf "%d\t| %s | %s | %.1f %% | %.1f |\n", $4, $2, $3, 100 * $4 / ls, (la > 0 ? $4 / f / la * 1e6 : 0) }' \
        "$OUT/perf-$key-lake.breakdown.tsv" | sort -t$'\t' -k1,1nr | cut -f2-
}

if want 5; then
    echo
    echo "## 5. Admission, and where lake's time goes"
    if [ "$PERF_OK" = 1 ] && [ -s "$OUT/perf-m1_c16-lake.breakdown.tsv" ]; then
        echo
        echo "**Method.** \`perf record -F $PERF_FREQ -e cpu-clock --call-graph dwarf\` on every process of the benchmark cluster (backends, WAL writer, checkpointer, lake worker) for ${LWIN} s in the middle of a 16-client run (default 8 admission slots) of \`m1_lake.sql\`, then \`m1_plain.sql\`$(want 3 && echo ', then the same for the replays (`m3_lake.sql`, `m3_plain.sql`)'). A sample is charged to a category when its stack holds a frame of it, first match wins: admission = \`admission_reserve\`, \`try_take\`, \`wait_and_take\`, \`release_permit\`, \`admission_xact_callback\`/\`admission_exit_callback\` or \`ConditionVariableBroadcast\` (the release path reaches it by a tail call, so its caller's frame is gone; nothing else in these backends broadcasts a condition variable). CPU per call = samples / $PERF_FREQ Hz / calls completed in the window (from pgbench's per-second progress reports). DWARF unwinding slows the run, so the shares are the figure and the µs are approximate."
        echo
        echo "**Admission cost per append (5a):** acquire fast path (CAS) $(acq_us) µs, waiting for a slot (condition-variable sleep and wake-ups) $(us "$ADM_WAIT" "$LAPP") µs, release (atomic subtract + broadcast) $(us "$ADM_REL" "$LAPP") µs — $ADM_ACQ / $ADM_WAIT / $ADM_REL of $LSAMP samples. Without contention (1 client, or a slot for every client) only the CAS pair remains."
        profile_section m1_c16 "New appends, 16 clients on their own datasets (measurement 1)"
        profile_section m3_c16 "Replays, 16 clients (measurement 3)"
    fi
    if [ -s "$OUT/waits.tsv" ]; then
        echo
        echo "**32 clients** (\`m1_lake.sql\` with datasets ds0..ds31, then \`m1_plain.sql\`, \`-T $T\`): \`pg_stat_activity\` of the pgbench sessions sampled every 10 ms (one row per session per sample)."
        echo
        echo "| system | tps | aborted clients | admitted | waited for a slot | rejected (53000) |"
        echo "|---|---|---|---|---|---|"
        awk -F'\t' '{ printf "| %s | %.0f | %s | %s | %s | %s |\n", $1, $2, $3, ($1 == "lake" ? $4 : "–"), ($1 == "lake" ? $5 : "–"), ($1 == "lake" ? $6 : "–") }' "$OUT/waits-runs.tsv"
        echo
        echo "| system | state | wait_event_type | wait_event | samples |"
        echo "|---|---|---|---|---|"
        awk -F'\t' 'NR > 1 { printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }' "$OUT/waits.tsv"
        echo
        echo "Attribution: lake defines no LWLock; admission waits on a condition variable with \`PG_WAIT_EXTENSION\`, so they show as \`Extension\`/\`Extension\` and as nothing else. The LWLock waits above are core locks (\`WALWrite\`/\`WALInsert\`: commit flush; \`LockManager\`: lock-table partitions; \`BufferContent\`/\`BufferMapping\`: pages) that the baseline shows as well. Statically, everything the installed library's acquire/release path can call (transitively inside lake.so; \`bench/out/admission-callees.tsv\`):"
        echo
        echo '```'
        awk -F'\t' '$1 != "root-or-lake" { printf "%-9s %s\n", $1, $2 }' "$OUT/admission-callees.tsv" 2>/dev/null
        echo '```'
        echo
        echo "— $( [ "${LWCALLS:-1}" = 0 ] && echo 'no LWLock or lock-manager function among them (the condition variable uses its own spinlock).' || echo '**an LWLock or lock-manager function is reachable: see the list.**')"
    fi
fi

if [ -s "$OUT/checks.txt" ]; then
    echo
    echo "## Invariants checked after the runs"
    echo
    awk -F'\t' '{ printf "- %s: %s\n", $1, $2 }' "$OUT/checks.txt"
fi

if [ -f "$HERE/ANALYSIS.md" ]; then
    echo
    cat "$HERE/ANALYSIS.md"
fi
} >"$RESULTS"
