#!/usr/bin/env bash
# Runs the regress, isolation and TAP suites on a PostgreSQL built with
# assertions (--enable-cassert): its checks catch what a production build
# lets through — a catalog read where no transaction is in progress, a
# buffer pin or lock left at commit, a write past a palloc'd chunk
# (MEMORY_CONTEXT_CHECKING), freed memory read again (CLOBBER_FREED_MEMORY)
# — and lake's own Assert()s run. The regress tests that resolve lake's
# relations run once more with debug_discard_caches = 1 (every cache
# dropped at every catalog read): a cached OID or a loop waiting for the
# caches to settle shows there. Slow (about 25 minutes, most of it the
# TAP suite): `scripts/cassert.sh` before a release, not in every CI run.
#
# Usage (as the server's OS user, from the source tree):
#   test/cassert/run.sh <bindir of the assert-enabled PostgreSQL>
# scripts/cassert.sh builds that PostgreSQL and calls this.
set -euo pipefail
cd "$(dirname "$0")/../.."
bindir=$1
pg_config="$bindir/pg_config"
"$pg_config" --configure | grep -q -- --enable-cassert ||
  { echo "$pg_config: not built with --enable-cassert" >&2; exit 1; }

# The router's test needs PL/Proxy built for this server (Debian's package
# is built for Debian's): left out, and said so, when it is missing.
tests=$(ls test/t/*.pl)
if [ ! -f "$("$pg_config" --sharedir)/extension/plproxy.control" ]; then
  echo "== PL/Proxy is not installed in $("$pg_config" --sharedir): test/t/014_router.pl left out"
  tests=$(grep -v '/014_router\.pl$' <<<"$tests")
fi
# 043 makes allocations fail anywhere in a server process, PostgreSQL's
# own code included, and PostgreSQL 15's statistics code asserts at exit
# after one of them (pgstat_shmem.c: a cached entry without its reference,
# left by a failed MemoryContextAlloc): not lake's, and left out here.
tests=$(grep -v '/043_alloc_fail\.pl$' <<<"$tests")

# A failed assertion aborts its process (the server restarts, and a test
# may still pass): every server log is searched for it after each step.
status=0
traps=""
step()
{
  local what=$1 logs=$2; shift 2
  echo "== $what"
  "$@" || status=1
  for f in $(grep -l 'TRAP: ' $logs 2>/dev/null || true); do
    traps+="$what: $f"$'\n'
    echo "---- $f"; grep -A 12 'TRAP: ' "$f" | head -n 40
  done
}
mkdir -p tmp_check
(cat test/conf/regress.conf; echo 'debug_discard_caches = 1') > tmp_check/discard.conf

step regress 'log/*.log' make -s PG_CONFIG="$pg_config" check-regress
# The first tests of the suite, in its order (later ones build on what the
# ones before them left): a few minutes, where the whole suite takes hours.
step "regress, debug_discard_caches" 'tmp_check/discard/log/*.log' make -s PG_CONFIG="$pg_config" \
  check-regress REGRESS_CONF=tmp_check/discard.conf REGRESS_OUT=tmp_check/discard \
  REGRESS_T="extension append read recreate"
step isolation 'output_iso/*/log/*.log' make -s PG_CONFIG="$pg_config" check-isolation
step tap 'tmp_check/log/*.log' make -s PG_CONFIG="$pg_config" check-tap PROVE_TESTS="$(echo $tests)"

if grep -q . <<<"$traps"; then
  status=1
  echo "== failed assertions:"; grep . <<<"$traps"
else
  echo "== no failed assertion in any server log"
fi
exit $status
