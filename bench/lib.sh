# bench/lib.sh — what every benchmark script shares, sourced after the
# script has set NAME (message prefix and temp-dir name), OS_USER and OUT
# (an existing directory for logs).
#
# Checks that lake is installed and that the server can run as OS_USER,
# makes a temp dir, and stops every cluster it started when the script
# exits (keeping each server log in $OUT). Provides:
#   BINDIR PKGLIBDIR SHAREDIR, say die now calc as_server, PERF_OK,
#   TMP, BG_PIDS (pids to kill at exit), PSQL, sql <statement>
#   cluster_init KEY PORT    initdb in $TMP/KEY, with lake preloaded and a
#                            socket in $TMP; stdin adds postgresql.conf lines
#   cluster_start KEY SECS   start it (log: $TMP/server.log for KEY "data",
#                            $TMP/server-KEY.log otherwise)

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BINDIR=$("$PG_CONFIG" --bindir)
PKGLIBDIR=$("$PG_CONFIG" --pkglibdir)
SHAREDIR=$("$PG_CONFIG" --sharedir)

say() { printf '== %s\n' "$*" >&2; }
die() { printf '%s: %s\n' "$NAME" "$*" >&2; exit 1; }
now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"$1\", $2 }"; }

# ---------------------------------------------------------------- preflight
[ -x "$BINDIR/pgbench" ] || die "pgbench not found in $BINDIR"
[ -f "$PKGLIBDIR/lake.so" ] || die "lake is not installed in $PKGLIBDIR: run 'make && make install' as root first"
if [ "$(id -u)" = 0 ]; then
    id "$OS_USER" >/dev/null 2>&1 || die "OS user $OS_USER does not exist (the server refuses to run as root)"
    as_server() { runuser -u "$OS_USER" -- "$@"; }
else
    OS_USER=$(id -un)
    as_server() { "$@"; }
fi
PERF_OK=0
if [ "$(id -u)" = 0 ] && command -v perf >/dev/null 2>&1 && perf stat -e cpu-clock true >/dev/null 2>&1; then
    PERF_OK=1
fi

# ---------------------------------------------------------- the clusters
TMP=$(mktemp -d "/tmp/lake-$NAME.XXXXXX")
chmod 755 "$TMP"
[ "$(id -u)" = 0 ] && chown "$OS_USER" "$TMP"
CLUSTERS=()
BG_PIDS=()

server_log() { if [ "$1" = data ]; then echo server.log; else echo "server-$1.log"; fi; }

cleanup() {
    local rc=$? c log
    for p in "${BG_PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    for c in "${CLUSTERS[@]:-}"; do
        [ -n "$c" ] || continue
        if [ -f "$TMP/$c/postmaster.pid" ]; then
            as_server "$BINDIR/pg_ctl" -D "$TMP/$c" -m fast -w stop >/dev/null 2>&1 ||
                as_server "$BINDIR/pg_ctl" -D "$TMP/$c" -m immediate -w stop >/dev/null 2>&1 || true
        fi
        log=$(server_log "$c")
        [ -f "$TMP/$log" ] && cp "$TMP/$log" "$OUT/$log" 2>/dev/null || true
    done
    rm -rf "$TMP"
    [ $rc -ne 0 ] && printf '%s: failed (exit %d); logs in %s\n' "$NAME" "$rc" "$OUT" >&2
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

export PGHOST=$TMP PGUSER=postgres PGDATABASE=postgres
unset PGOPTIONS PGSERVICE PGPASSWORD PGPORT || true
PSQL=("$BINDIR/psql" -X -q -v ON_ERROR_STOP=1)
sql() { "${PSQL[@]}" -At -c "$1"; }

cluster_init() { # KEY PORT, extra postgresql.conf lines on stdin
    local key=$1 port=$2 log=initdb.log
    [ "$key" = data ] || log="initdb-$key.log"
    say "initdb of $TMP/$key (port $port)"
    as_server "$BINDIR/initdb" -D "$TMP/$key" -A trust -U postgres --no-sync >"$OUT/$log" 2>&1 ||
        die "initdb failed; see $OUT/$log"
    {
        printf '\n# --- bench/%s\n' "$(basename "$0")"
        printf "port = %s\nlisten_addresses = ''\nunix_socket_directories = '%s'\n" "$port" "$TMP"
        printf "shared_preload_libraries = 'lake'\nlake.database = 'postgres'\n"
        cat
    } >>"$TMP/$key/postgresql.conf"
    CLUSTERS+=("$key")
}

cluster_start() { # KEY SECONDS
    local log
    log=$(server_log "$1")
    as_server "$BINDIR/pg_ctl" -D "$TMP/$1" -l "$TMP/$log" -w -t "$2" start >/dev/null ||
        { cp "$TMP/$log" "$OUT/$log" 2>/dev/null; die "server $1 did not start; see $OUT/$log"; }
}
