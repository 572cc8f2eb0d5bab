-- Staged (multi-part, resumable) appends (SPEC §3).
SELECT lake.create_dataset('uploads');

SELECT lake.begin_append('uploads', 'acme', 'big-1') AS stage \gset
-- Resumable: beginning the same operation again returns the open stage.
SELECT lake.begin_append('uploads', 'acme', 'big-1') = :stage AS same_stage;

-- Chunks may arrive in any order; an identical re-send is a no-op.
SELECT lake.append_chunk(:stage, 1, '\x0202'::bytea);
SELECT lake.append_chunk(:stage, 0, '\x0101'::bytea);
SELECT lake.append_chunk(:stage, 1, '\x0202'::bytea);
-- The same chunk with other bytes: LK001, the first bytes stay.
SELECT t.err(format('SELECT lake.append_chunk(%s, 1, %L::bytea)', :stage, '\x0303'));
SELECT t.err(format('SELECT lake.append_chunk(%s, 1, %L::bytea)', :stage, '\x020202'));

-- Holes are refused, naming the first missing chunk (22023).
SELECT lake.append_chunk(:stage, 3, '\x04'::bytea);
SELECT t.err(format('SELECT lake.commit_append(%s)', :stage));
SELECT lake.append_chunk(:stage, 2, '\x03'::bytea);

-- The digest is checked over the concatenation: 22000 / 22023, stage kept.
SELECT t.err(format('SELECT lake.commit_append(%s, %L::bytea)', :stage, sha256('\x00')));
SELECT t.err(format('SELECT lake.commit_append(%s, %L::bytea)', :stage,
       set_byte(sha256('\x010102020304'::bytea), 31, get_byte(sha256('\x010102020304'::bytea), 31) # 1)));
SELECT t.err(format('SELECT lake.commit_append(%s, %L::bytea)', :stage, '\x0011'));
SELECT count(*) AS open_stages FROM lake_data.stage WHERE id = :stage;

SELECT lake.commit_append(:stage, sha256('\x010102020304'::bytea)) AS version;
SELECT lake.read('uploads', 1);
SELECT version, operation_id, bytes, digest = sha256('\x010102020304'::bytea) AS digest_ok
FROM lake.versions('uploads');
-- The stage is retired; its chunks now belong to the version.
SELECT count(*) AS open_stages FROM lake_data.stage WHERE id = :stage;

-- A second commit of the committed stage returns the same version ...
SELECT lake.commit_append(:stage) AS version;
SELECT lake.commit_append(:stage, sha256('\x010102020304'::bytea)) AS version;
-- ... unless its digest says other content: LK001.
SELECT t.err(format('SELECT lake.commit_append(%s, %L::bytea)', :stage, sha256('\x00')));
-- Chunks and aborts for a committed stage: 55000 naming the version.
SELECT t.err(format('SELECT lake.append_chunk(%s, 4, %L::bytea)', :stage, '\x05'));
SELECT t.err(format('SELECT lake.abort_append(%s)', :stage));

-- Beginning a committed operation again opens a new stage; committing the
-- same content there reconciles with the history ...
SELECT lake.begin_append('uploads', 'acme', 'big-1') AS again \gset
SELECT :again <> :stage AS new_stage;
SELECT lake.append_chunk(:again, 0, '\x010102020304'::bytea);
SELECT lake.commit_append(:again) AS version;
SELECT count(*) AS versions FROM lake.versions('uploads');
-- ... and so does a retried commit of that stage, which is gone (never
-- "stage not found" for a committed operation): the same version, LK001
-- for another digest, 55000 naming the version for a chunk or an abort.
SELECT lake.commit_append(:again) AS retried;
SELECT lake.commit_append(:again, sha256('\x010102020304'::bytea)) AS retried_with_digest;
SELECT t.err(format('SELECT lake.commit_append(%s, %L::bytea)', :again, sha256('\x00')));
SELECT t.err(format('SELECT lake.append_chunk(%s, 1, %L::bytea)', :again, '\x05'));
SELECT t.err(format('SELECT lake.abort_append(%s)', :again));
-- ... and other content is LK001, leaving the stage open to be aborted.
SELECT lake.begin_append('uploads', 'acme', 'big-1') AS again \gset
SELECT lake.append_chunk(:again, 0, '\xff'::bytea);
SELECT t.err(format('SELECT lake.commit_append(%s)', :again));
SELECT lake.abort_append(:again);
SELECT count(*) AS versions FROM lake.versions('uploads');

-- A single-shot append and a staged one of the same operation converge.
SELECT lake.append('uploads', 'acme', 'mixed', '\xabcd'::bytea) AS version;
SELECT lake.begin_append('uploads', 'acme', 'mixed') AS mixed \gset
SELECT lake.append_chunk(:mixed, 0, '\xab'::bytea), lake.append_chunk(:mixed, 1, '\xcd'::bytea);
SELECT lake.commit_append(:mixed) AS version;

-- Abort drops the stage and its chunks; the stage is then unknown (42704).
SELECT lake.begin_append('uploads', 'acme', 'dropped') AS dropped \gset
SELECT lake.append_chunk(:dropped, 0, '\x01'::bytea);
SELECT lake.abort_append(:dropped);
SELECT count(*) AS leftover_chunks FROM lake_data.chunk WHERE blob = :dropped;
SELECT t.err(format('SELECT lake.append_chunk(%s, 1, %L::bytea)', :dropped, '\x02'));
SELECT t.err(format('SELECT lake.commit_append(%s)', :dropped));
SELECT t.err(format('SELECT lake.abort_append(%s)', :dropped));
SELECT count(*) AS dropped_versions FROM lake.versions('uploads') WHERE operation_id = 'dropped';

-- A stage of zero chunks cannot be committed: chunk 0 is missing.
SELECT lake.begin_append('uploads', 'acme', 'empty-stage') AS empty \gset
SELECT t.err(format('SELECT lake.commit_append(%s)', :empty));
-- An empty chunk is a valid chunk: an empty payload.
SELECT lake.append_chunk(:empty, 0, ''::bytea);
SELECT lake.commit_append(:empty) AS version;
SELECT lake.read_operation('uploads', 'acme', 'empty-stage') = ''::bytea AS empty_payload;

-- Bad input: NULLs (22004), bad ids and chunk numbers (22023), unknown
-- stages and datasets (42704).
SELECT t.err($$SELECT lake.begin_append(NULL, 'acme', 'x')$$);
SELECT t.err($$SELECT lake.begin_append('uploads', NULL, 'x')$$);
SELECT t.err($$SELECT lake.begin_append('uploads', 'acme', NULL)$$);
SELECT t.err($$SELECT lake.begin_append('uploads', 'acme', '')$$);
SELECT t.err($$SELECT lake.begin_append('nope', 'acme', 'x')$$);
SELECT t.err(format('SELECT lake.begin_append(%L, %L, %L)', 'uploads', 'acme', repeat('x', 10240)));
SELECT lake.begin_append('uploads', 'acme', 'bad-input') AS bad \gset
SELECT t.err($$SELECT lake.append_chunk(NULL, 0, '\x00'::bytea)$$);
SELECT t.err(format('SELECT lake.append_chunk(%s, NULL, %L::bytea)', :bad, '\x00'));
SELECT t.err(format('SELECT lake.append_chunk(%s, 0, NULL)', :bad));
SELECT t.err(format('SELECT lake.append_chunk(%s, -1, %L::bytea)', :bad, '\x00'));
SELECT t.err(format('SELECT lake.append_chunk(%s, -2147483648, %L::bytea)', :bad, '\x00'));
SELECT t.err($$SELECT lake.append_chunk(0, 0, '\x00'::bytea)$$);
SELECT t.err($$SELECT lake.append_chunk(-5, 0, '\x00'::bytea)$$);
SELECT t.err($$SELECT lake.append_chunk(999999999, 0, '\x00'::bytea)$$);
SELECT t.err($$SELECT lake.commit_append(NULL)$$);
SELECT t.err($$SELECT lake.commit_append(999999999)$$);
SELECT t.err($$SELECT lake.abort_append(NULL)$$);
SELECT t.err($$SELECT lake.abort_append(999999999)$$);
-- A huge chunk number is accepted; the commit then names the hole.
SELECT lake.append_chunk(:bad, 0, '\x00'::bytea);
SELECT lake.append_chunk(:bad, 2147483647, '\x00'::bytea);
SELECT t.err(format('SELECT lake.commit_append(%s)', :bad));
SELECT lake.abort_append(:bad);

-- The stage's total may not exceed lake.max_stream_bytes (3MB here): 54000,
-- and the refused chunk is not stored.
SELECT lake.begin_append('uploads', 'acme', 'too-big') AS big \gset
SELECT lake.append_chunk(:big, 0, decode(repeat('00', 2 * 1024 * 1024), 'hex'));
SELECT t.err(format('SELECT lake.append_chunk(%s, 1, decode(repeat(%L, 1024 * 1024 + 1), %L))', :big, '00', 'hex'));
SELECT count(*) AS chunks FROM lake_data.chunk WHERE blob = :big;
-- A re-sent chunk 0 is not counted twice toward the limit.
SELECT lake.append_chunk(:big, 0, decode(repeat('00', 2 * 1024 * 1024), 'hex'));
SELECT lake.append_chunk(:big, 1, decode(repeat('00', 1024 * 1024), 'hex'));
SELECT lake.commit_append(:big) AS version;
SELECT bytes, stored_bytes < 1000 AS compressed FROM lake.versions('uploads') WHERE operation_id = 'too-big';
SELECT length(lake.read_operation('uploads', 'acme', 'too-big')) AS bytes;
-- Committed again (retired), the stage's version is checked a chunk at a
-- time: the call's permit covers its largest chunk (2 MB) while it does.
BEGIN;
SELECT lake.commit_append(:big) = (SELECT version FROM lake.versions('uploads') WHERE operation_id = 'too-big') AS same_version;
SELECT slots_in_use, bytes_reserved FROM lake.admission();
COMMIT;
SELECT slots_in_use, bytes_reserved FROM lake.admission();

-- A single-shot append over 1 MB keeps its chunks under a blob id from the
-- stage ids' sequence, but it was never a stage: every stage function
-- answers 42704 for it, as for an id never issued, and commit_append never
-- hands out the other operation's version.
SELECT lake.append('uploads', 'acme', 'single-big', decode(repeat('ab', 1536 * 1024), 'hex')) AS single_big \gset
SELECT b.blob AS single_blob FROM lake_data.version_blob b JOIN lake_data.dataset d ON d.id = b.dataset_id
WHERE d.name = 'uploads' AND b.version = :single_big \gset
SELECT t.err(format('SELECT lake.commit_append(%s)', :single_blob));
SELECT t.err(format('SELECT lake.append_chunk(%s, 0, %L::bytea)', :single_blob, '\x00'));
SELECT t.err(format('SELECT lake.abort_append(%s)', :single_blob));
-- Under REPEATABLE READ too: it is no stage committed after the snapshot
-- (40001 would have a client retry for ever).
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT t.err(format('SELECT lake.commit_append(%s)', :single_blob));
COMMIT;
SELECT length(lake.read_operation('uploads', 'acme', 'single-big')) AS still_reads;

-- Resuming a stage with begin_append is activity: its idle clock restarts
-- (lake.stage_ttl counts from the last call on it).
SELECT lake.begin_append('uploads', 'acme', 'resumed') AS resumed \gset
UPDATE lake_data.stage SET touched_at = now() - interval '1 day' WHERE id = :resumed;
SELECT lake.begin_append('uploads', 'acme', 'resumed') = :resumed AS same_stage;
SELECT touched_at > now() - interval '1 hour' AS active_again FROM lake_data.stage WHERE id = :resumed;
SELECT lake.abort_append(:resumed);

-- A multi-chunk staged payload reads back exactly.
SELECT lake.begin_append('uploads', 'acme', 'json') AS js \gset
SELECT lake.append_chunk(:js, i - 1,
         convert_to(string_agg(format('{"part": %s, "row": %s}', i, j), E'\n'), 'UTF8'))
FROM generate_series(1, 3) i, generate_series(1, 5000) j GROUP BY i ORDER BY i;
SELECT lake.commit_append(:js) AS version;
SELECT lake.read_operation('uploads', 'acme', 'json') =
       (SELECT string_agg(part, ''::bytea ORDER BY i) FROM (
          SELECT i, convert_to(string_agg(format('{"part": %s, "row": %s}', i, j), E'\n'), 'UTF8') AS part
          FROM generate_series(1, 3) i, generate_series(1, 5000) j GROUP BY i) parts) AS reads_back;
SELECT v.version AS jsv, b.blob AS jsblob, b.nchunks, v.data IS NULL AS all_chunks_outside
FROM lake_data.version v JOIN lake_data.dataset d ON d.id = v.dataset_id
  JOIN lake_data.version_blob b ON b.dataset_id = v.dataset_id AND b.version = v.version
WHERE d.name = 'uploads' AND v.operation_id = 'json' \gset
\echo :nchunks :all_chunks_outside

-- Admission: chunks reserve their size; a commit reserves its largest chunk.
BEGIN;
SELECT lake.begin_append('uploads', 'acme', 'permit') AS p \gset
SELECT lake.append_chunk(:p, 0, decode(repeat('00', 4000), 'hex'));
SELECT lake.append_chunk(:p, 1, decode(repeat('00', 6000), 'hex'));
SELECT slots_in_use, bytes_reserved FROM lake.admission();
SELECT lake.commit_append(:p) AS version;
SELECT slots_in_use, bytes_reserved FROM lake.admission();
COMMIT;
SELECT slots_in_use, bytes_reserved FROM lake.admission();

-- A stage whose stored chunk was damaged cannot be committed (XX001).
SELECT lake.begin_append('uploads', 'acme', 'damaged') AS dmg \gset
SELECT lake.append_chunk(:dmg, 0, convert_to(repeat('compressible ', 100), 'UTF8'));
UPDATE lake_data.chunk SET data = overlay(data placing '\xffffffff'::bytea from 2) WHERE blob = :dmg;
SELECT t.err(format('SELECT lake.commit_append(%s)', :dmg));
SELECT lake.abort_append(:dmg);

-- A staged version with a chunk gone fails closed (LK005).
CREATE TEMP TABLE saved0 AS SELECT * FROM lake_data.chunk WHERE blob = :jsblob AND chunk_no = 0;
DELETE FROM lake_data.chunk WHERE blob = :jsblob AND chunk_no = 0;
SELECT t.err(format('SELECT lake.read(%L, %s)', 'uploads', :jsv));
INSERT INTO lake_data.chunk SELECT * FROM saved0;
SELECT length(lake.read('uploads', :jsv)) > 0 AS repaired;

SELECT version, operation_id, bytes FROM lake.versions('uploads');
SELECT count(*) AS open_stages FROM lake_data.stage;

-- A re-send is compared byte for byte with the stored chunk, decoded and
-- its checksum verified: a compressed chunk sent again is a no-op, other
-- bytes of the same length are LK001, and a damaged stored chunk is XX001.
SELECT lake.begin_append('uploads', 'acme', 'big-z') AS zstage \gset
SELECT lake.append_chunk(:zstage, 0, convert_to(repeat('lake ', 4000), 'UTF8'));
SELECT bytes, octet_length(data) < bytes AS compressed FROM lake_data.chunk WHERE blob = :zstage;
SELECT lake.append_chunk(:zstage, 0, convert_to(repeat('lake ', 4000), 'UTF8'));
SELECT t.err(format('SELECT lake.append_chunk(%s, 0, %L::bytea)', :zstage,
                    convert_to(repeat('lake ', 3999) || 'lakf ', 'UTF8')));
UPDATE lake_data.chunk SET data = set_byte(data, 12, get_byte(data, 12) # 1)
WHERE blob = :zstage AND chunk_no = 0;
SELECT t.err(format('SELECT lake.append_chunk(%s, 0, %L::bytea)', :zstage,
                    convert_to(repeat('lake ', 4000), 'UTF8')));
SELECT lake.abort_append(:zstage);

-- A staged commit of an operation whose hash (append.sql) another
-- operation's version has is a new version; a late commit of the retired
-- stage reconciles to its own version, not the other's.
SELECT lake.create_dataset('collide_staged');
SELECT lake.append('collide_staged', 'acme', 'op-28742', '\x03'::bytea) AS v;
SELECT lake.begin_append('collide_staged', 'acme', 'op-178797') AS cs \gset
SELECT lake.append_chunk(:cs, 0, '\x04'::bytea);
SELECT lake.commit_append(:cs) AS staged;
SELECT lake.commit_append(:cs) AS late_commit;
SELECT lake.append('collide_staged', 'acme', 'op-28742', '\x03'::bytea) AS replay_single;
SELECT version, operation_id, digest = sha256(lake.read('collide_staged', version)) AS digest_ok
FROM lake.versions('collide_staged') ORDER BY version;

-- A staged chunk larger than the chunks lake cuts itself (1 MB) is encoded
-- into memory its call frees: the backend does not keep that size.
\c
SELECT lake.begin_append('uploads', 'acme', 'big-chunk') AS bc \gset
SELECT total_bytes AS top_before FROM pg_backend_memory_contexts WHERE name = 'TopMemoryContext' \gset
SELECT lake.append_chunk(:bc, 0, decode(repeat('0123456789abcdef', 163840), 'hex'));
SELECT (SELECT total_bytes FROM pg_backend_memory_contexts WHERE name = 'TopMemoryContext') - :top_before < 1048576
       AS not_kept;
SELECT lake.abort_append(:bc);

-- A stage's activity is the time of its last call, not its transaction's
-- start: an upload that runs longer than lake.stage_ttl in one transaction
-- is not idle when it commits (the worker expires by touched_at).
BEGIN;
SELECT lake.begin_append('uploads', 'acme', 'long-upload') AS lu \gset
SELECT pg_sleep(0.01);
SELECT lake.append_chunk(:lu, 0, '\x01'::bytea);
SELECT touched_at > now() AS touched_by_the_call FROM lake_data.stage WHERE id = :lu;
COMMIT;
-- Nor its statement's start: calls inside one long statement (a procedure
-- that commits between chunks, a SELECT over many chunks) each touch it.
DO $$
DECLARE
    s bigint := lake.begin_append('uploads', 'acme', 'long-statement');
BEGIN
    PERFORM pg_sleep(0.01);
    PERFORM lake.append_chunk(s, 0, '\x01'::bytea);
    RAISE NOTICE 'touched by the call, not at the statement''s start: %',
        (SELECT touched_at > statement_timestamp() FROM lake_data.stage WHERE id = s);
    PERFORM lake.abort_append(s);
END $$;
SELECT lake.abort_append(:lu);

-- A stage keeps the count and bytes of its chunks as they come, so a call
-- no longer counts every chunk row it already holds (an upload of n chunks
-- cost O(n^2)). A re-sent chunk counts once; a refused one not at all:
-- 2 MB + 1 MB reach lake.max_stream_bytes (3 MB here) exactly.
SELECT lake.begin_append('uploads', 'acme', 'counted') AS cnt \gset
SELECT lake.append_chunk(:cnt, 0, decode(repeat('ab', 2097152), 'hex'));
SELECT lake.append_chunk(:cnt, 0, decode(repeat('ab', 2097152), 'hex'));
SELECT t.err(format('SELECT lake.append_chunk(%s, 1, decode(repeat(%L, 2097152), %L))', :cnt, 'cd', 'hex'));
SELECT lake.append_chunk(:cnt, 1, decode(repeat('ab', 1048576), 'hex'));
SELECT t.err(format('SELECT lake.append_chunk(%s, 2, %L::bytea)', :cnt, '\x01'));
SELECT chunks, bytes FROM lake_data.stage WHERE id = :cnt;
SELECT lake.commit_append(:cnt) > 0 AS committed;

-- A stage is marked active when its new chunk is stored, not only when the
-- call begins: lake.stage_ttl counts idle time from the end of the last
-- call, however long the chunk took to compress (zstd's slowest level on
-- 256 kB: about half a second here).
SELECT lake.begin_append('uploads', 'acme', 'stamped') AS stamped \gset
CREATE TEMP TABLE slow_chunk AS
SELECT convert_to(string_agg(md5(i::text), ''), 'UTF8') AS b FROM generate_series(1, 8192) i;
SET lake.compression_level = 19;
-- The call's ends are read in its own statement: no commit flush or round
-- trip between them and the stamp.
CREATE TEMP TABLE stamp_call AS
SELECT clock_timestamp() AS began, lake.append_chunk(:stamped, 0, b) IS NOT NULL AS called,
       clock_timestamp() AS ended
FROM slow_chunk;
RESET lake.compression_level;
SELECT called, touched_at - began > (ended - touched_at) * 4 AS stamped_at_its_end
FROM lake_data.stage, stamp_call WHERE id = :stamped;
SELECT lake.abort_append(:stamped);

-- A retried commit_append of a committed stage flushes the WAL inserted so
-- far before it answers. Right after a WAL switch, the insert position
-- points past the new segment's header, which no flush can reach until a
-- record is written there: the retry was XX000 ("xlog flush request ... is
-- not satisfied").
SELECT lake.begin_append('uploads', 'acme', 'switched') AS switched \gset
SELECT lake.append_chunk(:switched, 0, '\x0a0b'::bytea);
SELECT lake.commit_append(:switched) AS switched_version \gset
SELECT pg_switch_wal() IS NOT NULL AS wal_switched;
SELECT lake.commit_append(:switched) = :switched_version AS retried_after_switch;

-- A stage's begin, chunk and abort are flushed at commit whatever
-- synchronous_commit says; a prepared one is flushed at PREPARE and at
-- COMMIT PREPARED anyway, so it may be prepared.
BEGIN;
SELECT lake.begin_append('uploads', 'acme', 'prepared') AS prepared_stage \gset
PREPARE TRANSACTION 'lake_stage_prepared';
COMMIT PREPARED 'lake_stage_prepared';
SELECT count(*) AS stage_kept FROM lake_data.stage WHERE id = :prepared_stage;
SELECT lake.abort_append(:prepared_stage);
