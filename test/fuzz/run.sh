#!/usr/bin/env bash
# Builds the decoder harnesses with clang's libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer, runs each for SECONDS (default 20) from the
# seed corpus, then replays everything found through a coverage build and
# reports executions and the lines of codec.c and landing.c reached.
#   test/fuzz/run.sh [SECONDS]        (make check-fuzz: 20 s each; make fuzz: longer)
# Exits non-zero on any crash, sanitizer report or failed check.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-20}
out=tmp_check/fuzz
CC=${FUZZ_CC:-clang}
PROFDATA=${FUZZ_PROFDATA:-llvm-profdata}
COV=${FUZZ_COV:-llvm-cov}
harnesses=(chunk cycle snapshot)

rm -rf "$out" && mkdir -p "$out"
common=(-g -O1 -Isrc -Itest/fuzz -Wall -Werror)
for h in "${harnesses[@]}"; do
  "$CC" "${common[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    "test/fuzz/fuzz_$h.c" src/codec.c src/landing.c -lzstd -o "$out/fuzz_$h"
  "$CC" "${common[@]}" -fsanitize=fuzzer -fprofile-instr-generate -fcoverage-mapping \
    "test/fuzz/fuzz_$h.c" src/codec.c src/landing.c -lzstd -o "$out/cov_$h"
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
  src/codec.c src/landing.c > "$out/coverage.txt"

cat "$out/summary.md"
echo
cat "$out/coverage.txt"
[ $status -eq 0 ] && echo "== fuzzing passed" || echo "== fuzzing FAILED"
exit $status
