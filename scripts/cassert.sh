#!/usr/bin/env bash
# Builds PostgreSQL with assertions (--enable-cassert) from Debian's source
# package of the installed major version, then lake against it, and runs
# test/cassert/run.sh (the regress, isolation and TAP suites, then a search
# of every server log for a failed assertion). As root, on Debian 12; the
# build is kept in $LAKE_CASSERT_DIR for the next run. About 25 minutes the
# first time. PL/Proxy is built too when PLPROXY_SRC names its source tree
# (Debian's archive has no source for the packaged version); without it the
# router's TAP test is left out.
set -euo pipefail
cd "$(dirname "$0")/.."
PG_MAJOR=15
LAKE_OS_USER=${LAKE_OS_USER:-postgres}
base=${LAKE_CASSERT_DIR:-/var/tmp/lake-cassert}
mkdir -p "$base"

pkgs=(gcc make bzip2 pkg-config libssl-dev libicu-dev zlib1g-dev libzstd-dev libipc-run-perl flex bison)
DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=5 install -y -qq "${pkgs[@]}" >/dev/null

# Debian's source package, fetched through apt lists of our own so that the
# machine's sources and lists stay as they are. The newest version the
# archive still serves (a security update's source may be gone already).
apt_dir="$base/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
cat > "$apt_dir/sources.list" <<LIST
deb-src http://deb.debian.org/debian bookworm main
deb-src http://deb.debian.org/debian-security bookworm-security main
LIST
apt_opts=(-o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache"
          -o Acquire::Retries=5 -o APT::Sandbox::User=root)
pg=""
for d in $(ls -d "$base"/postgresql-$PG_MAJOR.*/ 2>/dev/null | sort -rV); do
  [ -x "$d/inst/bin/postgres" ] && { pg=${d%/}; break; }
done
if [ -z "$pg" ]; then
  apt-get "${apt_opts[@]}" update -qq
  for v in $(apt-cache "${apt_opts[@]}" showsrc postgresql-$PG_MAJOR | sed -n 's/^Version: //p' | sort -rV); do
    (cd "$base" && apt-get "${apt_opts[@]}" source -qq --download-only "postgresql-$PG_MAJOR=$v") >/dev/null 2>&1 || continue
    upstream=${v%%-*}
    tar xjf "$base/postgresql-${PG_MAJOR}_$upstream.orig.tar.bz2" -C "$base"
    pg="$base/postgresql-$upstream"
    break
  done
  [ -n "$pg" ] || { echo "no source of postgresql-$PG_MAJOR could be fetched" >&2; exit 1; }
  echo "== building $(basename "$pg") with assertions (a few minutes)"
  (cd "$pg" && ./configure -q --prefix="$pg/inst" --enable-cassert --enable-debug \
      --enable-tap-tests --with-icu --without-readline --with-openssl CFLAGS='-O1 -g' &&
   make -s -j"$(nproc)" world-bin && make -s install-world-bin) >"$base/build.log" 2>&1 ||
    { tail -n 40 "$base/build.log"; exit 1; }
fi
pg_config="$pg/inst/bin/pg_config"
if [ -n "${PLPROXY_SRC:-}" ]; then
  make -s -C "$PLPROXY_SRC" PG_CONFIG="$pg_config" clean >/dev/null
  make -s -C "$PLPROXY_SRC" PG_CONFIG="$pg_config" install >/dev/null
fi

id "$LAKE_OS_USER" >/dev/null 2>&1 || useradd --system --create-home "$LAKE_OS_USER"
# The work tree is kept when a suite fails: its diffs and server logs.
work=$(mktemp -d /tmp/lake-cassert.XXXXXX)
trap 'rc=$?; if [ $rc -eq 0 ]; then rm -rf "$work"; else echo "== kept $work/src for its logs"; fi' EXIT
cp -a . "$work/src"
make -s -C "$work/src" PG_CONFIG="$pg_config" clean >/dev/null
make -s -C "$work/src" PG_CONFIG="$pg_config" WERROR=-Werror >/dev/null
make -s -C "$work/src" PG_CONFIG="$pg_config" install >/dev/null
chown -R "$LAKE_OS_USER" "$work"
chmod 755 "$work"
runuser -u "$LAKE_OS_USER" -- "$work/src/test/cassert/run.sh" "$pg/inst/bin"
