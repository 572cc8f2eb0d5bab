#!/usr/bin/env bash
# Shared set-up for scripts/demo.sh and scripts/test.sh: install what a fresh
# Debian 12 machine lacks, build with -Werror and install. Run as root.
set -euo pipefail

PG_MAJOR=15
export PATH="/usr/lib/postgresql/$PG_MAJOR/bin:$PATH"
PKGS=(postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR libzstd-dev libssl-dev libipc-run-perl
      make gcc zstd clang llvm libclang-rt-14-dev postgresql-$PG_MAJOR-plproxy
      gdb)  # gdb: test/t/017_seal_flush.pl holds the worker in its flush
[ "${LAKE_WITH_BENCH:-0}" = 1 ] && PKGS+=(postgresql-$PG_MAJOR-pgq3)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "missing packages: ${missing[*]} (run as root to install)" >&2; exit 1; }
  echo "== installing: ${missing[*]}"
  # Retries: a fresh CI machine reaches the archive over a network that
  # sometimes drops a download.
  apt-get -o Acquire::Retries=5 update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=5 install -y -qq "${missing[@]}" >/dev/null
fi

# The server refuses to run as root; the suites run as this OS user.
LAKE_OS_USER=${LAKE_OS_USER:-postgres}
id "$LAKE_OS_USER" >/dev/null 2>&1 || useradd --system --create-home "$LAKE_OS_USER"

echo "== building (-Wall -Werror) and installing"
make -s PG_CONFIG=/usr/lib/postgresql/$PG_MAJOR/bin/pg_config WERROR=-Werror >/dev/null
make -s PG_CONFIG=/usr/lib/postgresql/$PG_MAJOR/bin/pg_config install >/dev/null
