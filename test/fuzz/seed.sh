#!/usr/bin/env bash
# Regenerates the seed corpus (test/fuzz/corpus/) from real records: starts
# a throwaway cluster with lake installed, appends and casts a small mixed
# workload, then exports the stored bytes of chunks (lake_data.version.data, bare,
# and lake_data.chunk.data, checked), sealed cycles (lake_data.cycle.data), owner index
# records (lake_data.cycle.owners, lake_data.owner_block.entry) and snapshots
# (lake_data.snapshot.data). Each cycle and snapshot is also exported as its
# raw record bytes (framing stripped, decompressed: NAME.raw), so the fuzzer
# can mutate the record structure itself past the checksum.
# Run as root or as a user who can run PostgreSQL, after `make install`
# into the installation PG_CONFIG names (default: pg_config on the PATH).
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$("${PG_CONFIG:-pg_config}" --bindir):$PATH"
dir=$(mktemp -d /tmp/lake-seed.XXXXXX)
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$dir"
trap 'as_pg pg_ctl -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT

as_pg initdb -D "$dir/data" -A trust -U postgres >/dev/null
cat >> "$dir/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$dir'
shared_preload_libraries = 'lake'
lake.database = 'postgres'
lake.cycle_interval = '1h'
CONF
as_pg pg_ctl -D "$dir/data" -l "$dir/log" -w start >/dev/null
sql() { as_pg psql -X -q -At -h "$dir" -d postgres -v ON_ERROR_STOP=1 "$@"; }

sql >/dev/null <<'SQL'
CREATE EXTENSION lake;
SELECT lake.create_dataset('seed');
SELECT lake.append('seed', 't', 'empty-ish', '\x00'::bytea);
SELECT lake.append('seed', 't', 'json', convert_to(string_agg(format('{"n": %s, "v": "%s"}', i, md5(i::text)), E'\n'), 'UTF8'))
  FROM generate_series(1, 200) i;
SELECT lake.append('seed', 't', 'random', decode(string_agg(md5(i::text), ''), 'hex'))
  FROM generate_series(1, 16) i;
SELECT lake.append('seed', 't', 'repeat', convert_to(repeat('lake ', 2000), 'UTF8'));
-- Staged: checked chunks in lake_data.chunk (a version row's chunk 0 is bare).
SELECT lake.begin_append('seed', 't', 'staged') AS stage \gset
SELECT lake.append_chunk(:stage, 0, convert_to(repeat('staged ', 300), 'UTF8'));
SELECT lake.append_chunk(:stage, 1, decode(md5('x'), 'hex'));
SELECT lake.commit_append(:stage);
SELECT lake.define_lifecycle('door', 'Closed', ARRAY[['Closed','Open'],['Open','Closed']]);
SELECT lake.create_owner('o' || i, CASE WHEN i % 2 = 0 THEN 'kanban' ELSE 'door' END) FROM generate_series(1, 6) i;
SQL
sql -c "SELECT lake.cast('o2', 'Planning', 'CognitiveWork', convert_to('think', 'UTF8'), 0, 'op-1')" \
    -c "SELECT lake.cast('o1', 'Closed', 'Open')" \
    -c "SELECT lake.cast('o3', NULL, NULL, '\\x00ff00'::bytea)" \
    -c "SELECT lake.seal()" \
    -c "SELECT lake.cast('o4', 'Planning', 'CognitiveWork', NULL, NULL, 'op-2')" \
    -c "SELECT lake.cast('o2', 'CognitiveWork', 'Evaluation', convert_to(repeat('note ', 100), 'UTF8'))" \
    -c "SELECT lake.cast('o1', 'Open', 'Closed', NULL, 0)" \
    -c "SELECT lake.seal()" \
    -c "SELECT lake.checkpoint()" \
    -c "SELECT lake.cast('o6', 'Planning', 'CognitiveWork')" \
    -c "SELECT lake.seal()" \
    -c "SELECT lake.checkpoint()" >/dev/null
# A block of the owner index closes at every 64th cycle.
for i in $(seq 1 64); do
  sql -c "SELECT lake.cast('o' || ($i % 3 + 2), NULL, NULL)" -c "SELECT lake.seal()" >/dev/null
done

export_rows() {   # export_rows KIND NAME-PREFIX SQL: one file per row of hex
  local kind=$1 prefix=$2 query=$3 i=0
  mkdir -p "corpus/$kind"
  rm -f "corpus/$kind/$prefix"-*
  while read -r hex; do
    i=$((i + 1))
    local f="corpus/$kind/$prefix-$i"
    perl -ne 'chomp; print pack("H*", $_)' <<<"$hex" > "$f"
    # codec.h: tag, 4-byte checksum, body (a zstd frame without its magic
    # number, which the zstd tool needs in front).
    case "$kind:$(head -c 1 "$f")" in
      chunk:*) ;;
      *:Z) { printf '\x28\xb5\x2f\xfd'; tail -c +6 "$f"; } | zstd -d -q -c > "$f.raw" ;;
      *:R) tail -c +6 "$f" > "$f.raw" ;;
    esac
  done < <(sql -c "$query")
}
export_rows chunk version "SELECT encode(data, 'hex') FROM lake_data.version WHERE data IS NOT NULL ORDER BY version"
export_rows chunk blob "SELECT encode(data, 'hex') FROM lake_data.chunk ORDER BY blob, chunk_no"
export_rows cycle cycle "SELECT encode(data, 'hex') FROM lake_data.cycle ORDER BY cycle"
export_rows index owners "SELECT encode(owners, 'hex') FROM lake_data.cycle ORDER BY cycle LIMIT 4"
export_rows index block "SELECT encode(entry, 'hex') FROM lake_data.owner_block ORDER BY owner_id, first_cycle"
export_rows snapshot snapshot "SELECT encode(data, 'hex') FROM lake_data.snapshot ORDER BY cycle"
ls -l corpus/*
