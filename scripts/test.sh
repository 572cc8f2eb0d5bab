#!/usr/bin/env bash
# Runs every suite (layers, regress, isolation, TAP, a short fuzzing run) against throwaway servers and
# exits non-zero on any failure. Works as root on a fresh Debian 12 machine.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh

# Run the suites from a copy the server's OS user owns, so a root-owned
# checkout stays as it is.
work=$(mktemp -d /tmp/lake-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp -a . "$work/src"
chown -R "$LAKE_OS_USER" "$work"
chmod 755 "$work"

status=0
for suite in check-layers check-regress check-isolation check-tap check-fuzz; do
  echo "== $suite"
  if ! runuser -u "$LAKE_OS_USER" -- make -C "$work/src" -s \
       PG_CONFIG=/usr/lib/postgresql/$PG_MAJOR/bin/pg_config $suite; then
    status=1
    for f in "$work"/src/regression.diffs "$work"/src/output_iso/*/regression.diffs; do
      [ -f "$f" ] && { echo "---- $f"; cat "$f"; }
    done
    # Only the TAP files that failed: a passing one ends with its plan
    # ("1..N") and has no "not ok" line.
    for f in "$work"/src/tmp_check/log/regress_log_*; do
      [ -f "$f" ] || continue
      if grep -q '^\[.*) not ok' "$f" || ! grep -q '^\[.*) 1\.\.[0-9]*$' "$f"; then
        echo "---- tail of $f"; tail -n 80 "$f"
        n=${f##*/regress_log_}
        for l in "$work"/src/tmp_check/log/${n}_*.log; do
          [ -f "$l" ] && { echo "---- tail of $l"; tail -n 30 "$l"; }
        done
      fi
    done
  fi
done
if [ $status -eq 0 ]; then echo "== all suites passed"; else echo "== FAILED"; fi
exit $status
