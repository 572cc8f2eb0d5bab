#!/usr/bin/env bash
# Runs the regress and isolation suites against servers whose every process
# (postmaster, backends, the lake worker) runs under valgrind memcheck, then
# fails on any error valgrind reported. Slow (tens of minutes): `make
# check-valgrind`, run before a release, not in every CI run.
#
# PostgreSQL finds its helpers next to itself, so a wrapper bindir holds a
# `postgres` that execs valgrind on the real server, a copy of pg_ctl (a
# symlink would resolve back to the real directory) and links to the rest.
# JIT is off: LLVM's loader is not what is being checked, and trips
# memcheck inside ld.so.
set -euo pipefail
cd "$(dirname "$0")/../.."
PG_CONFIG=${PG_CONFIG:-pg_config}
real=$("$PG_CONFIG" --bindir)
out=$PWD/tmp_check/valgrind
rm -rf "$out" && mkdir -p "$out/bin" "$out/logs"

for f in "$real"/*; do ln -s "$f" "$out/bin/$(basename "$f")"; done
rm "$out/bin/postgres" "$out/bin/pg_ctl"
cp "$real/pg_ctl" "$out/bin/pg_ctl"
cat > "$out/bin/postgres" <<WRAP
#!/bin/sh
# -V is how pg_ctl and initdb check the server's version: answer directly.
case "\$1" in -V|--version) exec "$real/postgres" "\$@";; esac
exec valgrind --quiet --tool=memcheck --trace-children=no --track-origins=yes \\
  --num-callers=30 --read-var-info=no --leak-check=no --gen-suppressions=all \\
  --suppressions="$PWD/test/valgrind/postgres.supp" \\
  --log-file="$out/logs/%p.log" "$real/postgres" "\$@" -c jit=off
WRAP
chmod +x "$out/bin/postgres"

status=0
make -s -k check-regress check-isolation BINDIR="$out/bin" || status=1

# Every process logged to its own file; a clean run leaves them all empty.
errors=$(grep -l -E '^==[0-9]+== (Invalid|Conditional|Use of uninit|Syscall param|Mismatched|Source and destination|Argument)' \
         "$out"/logs/*.log 2>/dev/null || true)
nprocs=$(ls "$out"/logs | wc -l)
if [ -n "$errors" ]; then
  status=1
  echo "== valgrind reported errors in $(wc -l <<<"$errors") of $nprocs processes:"
  for f in $errors; do echo "---- $f"; head -n 60 "$f"; done
else
  echo "== valgrind: no errors in $nprocs server processes"
fi
exit $status
