#!/usr/bin/env bash
# Builds the decoder harnesses with clang's libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer, runs each for SECONDS (default 20) from the
# seed corpus, then replays everything found through a coverage build and
# reports executions and the lines of codec.c, landing.c and owner_index.c reached.
#   test/fuzz/run.sh [SECONDS [REPORT]]
# (make check-fuzz: 20 s each; make fuzz: longer, and writes REPORT =
# bench/results-fuzz.md, which make bench adds to bench/RESULTS.md).
# Exits non-zero on any crash, sanitizer report or failed check.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-20}
report=${2:-}
out=tmp_check/fuzz
CC=${FUZZ_CC:-clang}
PROFDATA=${FUZZ_PROFDATA:-llvm-profdata}
COV=${FUZZ_COV:-llvm-cov}
harnesses=(chunk cycle snapshot index)

# codec.c takes its CRC-32C from PostgreSQL: its headers and libpgport.
PG_CONFIG=${PG_CONFIG:-pg_config}
pgport="$("$PG_CONFIG" --pkglibdir)/libpgport.a"
[ -f "$pgport" ] || pgport="$("$PG_CONFIG" --libdir)/libpgport.a"

rm -rf "$out" && mkdir -p "$out"
# (-Wno-ignored-attributes: clang does not know the gnu_printf of its headers.)
common=(-g -O1 -Isrc -Itest/fuzz -I"$("$PG_CONFIG" --includedir-server)" -Wall -Werror
        -Wno-ignored-attributes)
libs=(-lzstd "$pgport")
for h in "${harnesses[@]}"; do
  "$CC" "${common[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    "test/fuzz/fuzz_$h.c" src/codec.c src/landing.c src/owner_index.c "${libs[@]}" -o "$out/fuzz_$h"
  "$CC" "${common[@]}" -fsanitize=fuzzer -fprofile-instr-generate -fcoverage-mapping \
    "test/fuzz/fuzz_$h.c" src/codec.c src/landing.c src/owner_index.c "${libs[@]}" -o "$out/cov_$h"
done

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
printf '| harness | seconds | executions | exec/s | edges (cov) | features | corpus |\n|---|---|---|---|---|---|---|\n' > "$out/summary.md"
for h in "${harnesses[@]}"; do
  mkdir -p "$out/corpus_$h"
  # New inputs land in the first directory; the committed seeds stay as they are.
  if ! "$out/fuzz_$h" -max_total_time="$secs" -print_final_stats=1 -timeout=10 \
       -rss_limit_mb=2048 -artifact_prefix="$out/crash_$h-" \
       "$out/corpus_$h" "test/fuzz/corpus/$h" > "$out/$h.log" 2>&1; then
    status=1
    echo "== fuzz_$h FAILED"; tail -n 40 "$out/$h.log"
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$h.log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$out/$h.log")
  last=$(grep -E '^#[0-9]+' "$out/$h.log" | tail -n 1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$last")
  printf '| fuzz_%s | %s | %s | %s | %s | %s | %s |\n' "$h" "$secs" "${execs:-?}" "${rate:-?}" \
    "${cov:-?}" "${ft:-?}" "${corp:-?}" >> "$out/summary.md"
done

# Line and branch coverage of the decoders over seeds plus everything found.
for h in "${harnesses[@]}"; do
  LLVM_PROFILE_FILE="$out/$h.profraw" "$out/cov_$h" -runs=0 \
    "$out/corpus_$h" "test/fuzz/corpus/$h" > /dev/null 2>&1 || status=1
done
"$PROFDATA" merge -sparse "$out"/*.profraw -o "$out/fuzz.profdata"
objs=()
for h in "${harnesses[@]}"; do objs+=(-object "$out/cov_$h"); done
"$COV" report "${objs[@]:1}" -instr-profile="$out/fuzz.profdata" \
  src/codec.c src/landing.c src/owner_index.c > "$out/coverage.txt"

cat "$out/summary.md"
echo
cat "$out/coverage.txt"
if [ -n "$report" ] && [ $status -eq 0 ]; then
  {
    echo "## Decoder fuzzing (\`test/fuzz\`)"
    echo
    echo "\`make fuzz FUZZ_SECONDS=$secs\` on $(date -u '+%Y-%m-%d %H:%M UTC'), commit \`$(git rev-parse --short HEAD 2>/dev/null || echo '?')\`:"
    echo "libFuzzer with ASan and UBSan, $secs s per harness from the seed corpus of real records; no crash,"
    echo "sanitizer report or failed property. Not a throughput benchmark: there is no baseline."
    echo
    cat "$out/summary.md"
    echo
    echo "Line, branch and function coverage of the decoders over the seeds and everything found (llvm-cov):"
    echo
    echo '```'
    cat "$out/coverage.txt"
    echo '```'
  } > "$report"
  echo "== report written to $report"
fi
[ $status -eq 0 ] && echo "== fuzzing passed" || echo "== fuzzing FAILED"
exit $status
