-- Every stored record carries a checksum of its raw bytes, verified at every
-- read (SPEC §4): a damaged record is refused, never read as other data.
-- Each case flips every bit of a whole stored record, one at a time, and
-- counts what the readers made of it: 'same' (read as the original bytes),
-- 'altered' (read as other bytes, the failure this guards against) or the
-- SQLSTATE and detail of the refusal.

-- t.i_outcome(q, good): run q (one text value) and classify its answer.
CREATE FUNCTION t.i_outcome(q text, good text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    got text;
    detail text;
BEGIN
    EXECUTE q INTO got;
    RETURN CASE WHEN got IS NOT DISTINCT FROM good THEN 'same' ELSE 'altered' END;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
    RETURN SQLSTATE || ' ' || regexp_replace(coalesce(detail, ''), '\d+', 'N', 'g');
END $$;

-- t.i_flip(b, n): b with bit n flipped.
CREATE FUNCTION t.i_flip(b bytea, n int) RETURNS bytea LANGUAGE sql AS $$
    SELECT set_bit(b, n, 1 - get_bit(b, n))
$$;

-- A sealed cycle record: trajectory and log read it.
SELECT lake.create_owner('i_owner');
SELECT (lake.cast_durable('i_owner', 'Planning', 'CognitiveWork',
                          convert_to('100 EUR', 'UTF8'))).cycle AS c \gset
CREATE TABLE t.i_good AS SELECT data FROM lake_data.cycle WHERE cycle = :c;
CREATE FUNCTION t.i_cycle_flips(c bigint) RETURNS TABLE(reader text, outcome text)
LANGUAGE plpgsql AS $$
DECLARE
    good bytea := (SELECT data FROM t.i_good);
    qt text := $q$SELECT string_agg(t::text, ',') FROM lake.trajectory('i_owner') t$q$;
    ql text := format($q$SELECT string_agg(l::text, ',') FROM lake.log(%s) l WHERE l.cycle = %s$q$, c - 1, c);
    gt text;
    gl text;
BEGIN
    EXECUTE qt INTO gt;
    EXECUTE ql INTO gl;
    FOR n IN 0 .. 8 * length(good) - 1 LOOP
        UPDATE lake_data.cycle SET data = t.i_flip(good, n) WHERE cycle = c;
        reader := 'trajectory'; outcome := t.i_outcome(qt, gt); RETURN NEXT;
        reader := 'log';        outcome := t.i_outcome(ql, gl); RETURN NEXT;
    END LOOP;
    UPDATE lake_data.cycle SET data = good WHERE cycle = c;
END $$;
SELECT reader, left(outcome, 5) AS outcome, count(*) = 8 * (SELECT length(data) FROM t.i_good) AS every_flip,
       string_agg(DISTINCT substr(outcome, 7), '; ') AS details
FROM t.i_cycle_flips(:c) GROUP BY 1, 2 ORDER BY 1, 2;
-- Put back, it reads as before.
SELECT position, from_phase, to_phase, convert_from(payload, 'UTF8') FROM lake.trajectory('i_owner');

-- A version's stored chunk (in the version row): lake.read is LK005.
SELECT lake.create_dataset('i_ds');
SELECT lake.append('i_ds', 'acme', 'i-small', convert_to('100 EUR', 'UTF8')) AS v \gset
CREATE TABLE t.i_chunk AS
SELECT v.data FROM lake_data.version v JOIN lake_data.dataset d ON d.id = v.dataset_id
WHERE d.name = 'i_ds' AND v.version = :v;
-- The server's framing is the one codec.h describes: chunk 0 in a version
-- row is checked at no place (t.raw_chunk's CRC starts where LAKE_PLACE_NONE
-- does), so that a replay can verify it without decoding.
SELECT data = t.raw_chunk(convert_to('100 EUR', 'UTF8')) AS framed_as_documented FROM t.i_chunk;
-- t.i_row_flips(ds, v, good, q): q's outcome with each bit of version v's
-- row chunk flipped in turn, from 'good'; then 'good' put back.
CREATE FUNCTION t.i_row_flips(ds text, v bigint, good bytea, q text) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    g text;
BEGIN
    UPDATE lake_data.version SET data = good
    WHERE dataset_id = (SELECT id FROM lake_data.dataset WHERE name = ds) AND version = v;
    EXECUTE q INTO g;
    FOR n IN 0 .. 8 * length(good) - 1 LOOP
        UPDATE lake_data.version SET data = t.i_flip(good, n)
        WHERE dataset_id = (SELECT id FROM lake_data.dataset WHERE name = ds) AND version = v;
        RETURN NEXT t.i_outcome(q, g);
    END LOOP;
    UPDATE lake_data.version SET data = good
    WHERE dataset_id = (SELECT id FROM lake_data.dataset WHERE name = ds) AND version = v;
END $$;
SELECT left(outcome, 5) AS outcome, count(*) = 8 * (SELECT length(data) FROM t.i_chunk) AS every_flip,
       string_agg(DISTINCT substr(outcome, 7), '; ') AS details
FROM t.i_row_flips('i_ds', :v, (SELECT data FROM t.i_chunk),
                   format($q$SELECT encode(lake.read('i_ds', %s), 'hex')$q$, :v)) outcome
GROUP BY 1 ORDER BY 1;
-- A replay verifies a compressed chunk 0 by its checksum over the frame and
-- the payload it holds (codec.h), without decoding the frame: every flip of
-- it is still LK005, never the version.
SELECT lake.create_dataset('i_z');
SELECT lake.append('i_z', 'acme', 'i-zstd', convert_to(repeat('100 EUR paid; ', 20), 'UTF8')) AS zv \gset
CREATE TABLE t.i_zchunk AS
SELECT v.data FROM lake_data.version v JOIN lake_data.dataset d ON d.id = v.dataset_id
WHERE d.name = 'i_z' AND v.version = :zv;
SELECT get_byte(data, 0) = ascii('Z') AS compressed, length(data) < 280 AS smaller FROM t.i_zchunk;
CREATE FUNCTION t.i_zreplay() RETURNS text LANGUAGE sql AS $$
    SELECT 'version ' || lake.append('i_z', 'acme', 'i-zstd',
                                     convert_to(repeat('100 EUR paid; ', 20), 'UTF8'))
$$;
SELECT left(outcome, 5) AS outcome, count(*) = 8 * (SELECT length(data) FROM t.i_zchunk) AS every_flip,
       string_agg(DISTINCT substr(outcome, 7), '; ') AS details
FROM t.i_row_flips('i_z', :zv, (SELECT data FROM t.i_zchunk), 'SELECT t.i_zreplay()') outcome
GROUP BY 1 ORDER BY 1;
SELECT t.i_zreplay() = 'version ' || :zv AS replayed;
-- Rows of earlier builds hold chunk 0 bare (no checksum; the digest verifies
-- it): they read and replay as before. A compressed one is made bare by
-- dropping the checksum's four bytes. Flipped, such a chunk is LK005 to
-- both, or (a bit the frame format ignores) read as the same bytes: never
-- as other bytes.
UPDATE lake_data.version SET data = t.bare_chunk(convert_to('100 EUR', 'UTF8'))
WHERE dataset_id = (SELECT id FROM lake_data.dataset WHERE name = 'i_ds') AND version = :v;
SELECT convert_from(lake.read('i_ds', :v), 'UTF8') AS bare_read,
       lake.append('i_ds', 'acme', 'i-small', convert_to('100 EUR', 'UTF8')) = :v AS bare_replay;
SELECT reader, count(*) = 8 * (length(data) - 4) AS every_flip,
       count(*) FILTER (WHERE outcome LIKE 'LK005 %') > 0 AS refused,
       count(*) FILTER (WHERE outcome NOT LIKE 'LK005 %' AND outcome <> 'same') AS otherwise
FROM t.i_zchunk,
     LATERAL (VALUES ('replay', 'SELECT t.i_zreplay()'),
                     ('read', format($q$SELECT encode(lake.read('i_z', %s), 'hex')$q$, :zv))) r(reader, q),
     LATERAL t.i_row_flips('i_z', :zv, '\x7a'::bytea || substr(data, 6), r.q) outcome
GROUP BY reader, length(data) ORDER BY reader;
SELECT t.i_zreplay() = 'version ' || :zv AS bare_replayed,
       convert_from(lake.read('i_z', :zv), 'UTF8') = repeat('100 EUR paid; ', 20) AS bare_read;
UPDATE lake_data.version SET data = (SELECT data FROM t.i_zchunk)
WHERE dataset_id = (SELECT id FROM lake_data.dataset WHERE name = 'i_z') AND version = :zv;
UPDATE lake_data.version SET data = (SELECT data FROM t.i_chunk)
WHERE dataset_id = (SELECT id FROM lake_data.dataset WHERE name = 'i_ds') AND version = :v;
SELECT convert_from(lake.read('i_ds', :v), 'UTF8') AS repaired;

-- A stage chunk damaged before commit_append: XX001, no version written,
-- the stage and its chunks still there.
SELECT lake.begin_append('i_ds', 'acme', 'i-staged') AS stage \gset
SELECT lake.append_chunk(:stage, 0, convert_to('100 EUR', 'UTF8'));
SELECT lake.append_chunk(:stage, 1, convert_to(' paid', 'UTF8'));
CREATE TABLE t.i_stage AS SELECT data FROM lake_data.chunk WHERE blob = :stage AND chunk_no = 0;
CREATE FUNCTION t.i_stage_flips(stage bigint) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    good bytea := (SELECT data FROM t.i_stage);
BEGIN
    FOR n IN 0 .. 8 * length(good) - 1 LOOP
        UPDATE lake_data.chunk SET data = t.i_flip(good, n) WHERE blob = stage AND chunk_no = 0;
        RETURN NEXT t.i_outcome(format('SELECT lake.commit_append(%s)::text', stage), NULL);
    END LOOP;
    UPDATE lake_data.chunk SET data = good WHERE blob = stage AND chunk_no = 0;
END $$;
SELECT left(outcome, 5) AS outcome, count(*) = 8 * (SELECT length(data) FROM t.i_stage) AS every_flip,
       string_agg(DISTINCT substr(outcome, 7), '; ') AS details
FROM t.i_stage_flips(:stage) outcome GROUP BY 1 ORDER BY 1;
SELECT (SELECT count(*) FROM lake.versions('i_ds')) AS versions,
       (SELECT count(*) FROM lake_data.stage WHERE id = :stage) AS open_stages,
       (SELECT count(*) FROM lake_data.chunk WHERE blob = :stage) AS chunks;
-- Repaired, the stage commits the bytes that were uploaded.
SELECT lake.commit_append(:stage) AS staged \gset
SELECT convert_from(lake.read('i_ds', :staged), 'UTF8') AS committed;

-- A chunk row's key is outside its bytes, but not outside its checksum:
-- rows whose chunk numbers are swapped, or a row moved to another stage,
-- their bytes intact, are damage (XX001), never committed as a payload in
-- another order or of another upload.
SELECT lake.create_dataset('i_keys');
SELECT lake.begin_append('i_keys', 'acme', 'i-swapped') AS swapped \gset
SELECT lake.append_chunk(:swapped, 0, convert_to('pay ', 'UTF8'));
SELECT lake.append_chunk(:swapped, 1, convert_to('100 EUR', 'UTF8'));
UPDATE lake_data.chunk SET chunk_no = 11 - chunk_no WHERE blob = :swapped;
UPDATE lake_data.chunk SET chunk_no = chunk_no - 10 WHERE blob = :swapped;
SELECT replace(t.err(format('SELECT lake.commit_append(%s)', :swapped)), :'swapped', 'S') AS swapped_chunks;
SELECT replace(t.err(format('SELECT lake.append_chunk(%s, 0, %L::bytea)', :swapped,
                            convert_to('100 EUR', 'UTF8'))), :'swapped', 'S') AS resent_swapped;
SELECT lake.begin_append('i_keys', 'acme', 'i-moved') AS moved \gset
SELECT lake.append_chunk(:moved, 0, convert_to('pay ', 'UTF8'));
-- The swapped stage's '100 EUR' row, written as its chunk 1, becomes chunk
-- 1 of the other stage: only the blob differs from where it was written.
UPDATE lake_data.chunk SET blob = :moved, chunk_no = 1 WHERE blob = :swapped AND chunk_no = 0;
SELECT replace(t.err(format('SELECT lake.commit_append(%s)', :moved)), :'moved', 'M') AS moved_chunk;
SELECT count(*) AS versions FROM lake.versions('i_keys');
-- Put back where they were written, both commit what was uploaded.
UPDATE lake_data.chunk SET chunk_no = 0 WHERE blob = :swapped;
UPDATE lake_data.chunk SET blob = :swapped WHERE blob = :moved AND chunk_no = 1;
SELECT lake.commit_append(:swapped) AS v_swapped, lake.commit_append(:moved) AS v_moved \gset
SELECT convert_from(lake.read('i_keys', :v_swapped), 'UTF8') AS swapped_repaired,
       convert_from(lake.read('i_keys', :v_moved), 'UTF8') AS moved_repaired;

-- A replay resolving to an existing version checks its lineage as a read
-- does (SPEC §5): LK005 when a chunk is missing or damaged, never the
-- version number as if all were well.
-- A single-shot append of two chunks (chunk 1 in lake_data.chunk).
SELECT lake.append('i_ds', 'acme', 'i-big', convert_to(repeat('lake ', 209716), 'UTF8')) AS big \gset
SELECT blob AS big_blob, nchunks FROM lake_data.version_blob
WHERE dataset_id = (SELECT id FROM lake_data.dataset WHERE name = 'i_ds') AND version = :big \gset
SELECT :nchunks AS nchunks;
CREATE TABLE t.i_big AS SELECT * FROM lake_data.chunk WHERE blob = :big_blob;
CREATE FUNCTION t.i_replay() RETURNS text LANGUAGE sql AS $$
    SELECT t.err($q$SELECT lake.append('i_ds', 'acme', 'i-big', convert_to(repeat('lake ', 209716), 'UTF8'))$q$)
$$;
DELETE FROM lake_data.chunk WHERE blob = :big_blob AND chunk_no = 1;
SELECT t.i_replay() AS chunk_missing;
INSERT INTO lake_data.chunk SELECT * FROM t.i_big;
UPDATE lake_data.chunk SET data = t.i_flip(data, 8 * length(data) - 1) WHERE blob = :big_blob AND chunk_no = 1;
SELECT t.i_replay() AS chunk_damaged;
-- Another version's sound chunk 0 in its place: its checksum is of no
-- place (a row's chunk 0), so it is refused as damaged here.
SELECT lake.create_dataset('i_other');
SELECT lake.append('i_other', 'acme', 'i-other', convert_to('lakx', 'UTF8')) AS other_version;
UPDATE lake_data.chunk SET data = (SELECT v.data FROM lake_data.version v
    JOIN lake_data.dataset d ON d.id = v.dataset_id WHERE d.name = 'i_other')
WHERE blob = :big_blob AND chunk_no = 1;
SELECT t.i_replay() AS chunk_replaced;
-- A compressed chunk in lake_data.chunk whose frame header is made to name
-- a dictionary (the descriptor's Dictionary_ID_flag, codec.h): the reason
-- names the missing dictionary (it was once read from memory freed with the
-- chunk's).
SELECT lake.append('i_ds', 'acme', 'i-named', convert_to(repeat('lake ', 419431), 'UTF8')) AS named \gset
SELECT blob AS named_blob FROM lake_data.version_blob
WHERE dataset_id = (SELECT id FROM lake_data.dataset WHERE name = 'i_ds') AND version = :named \gset
SELECT chr(get_byte(data, 0)) AS chunk1_tag FROM lake_data.chunk WHERE blob = :named_blob AND chunk_no = 1;
-- Flag 3: a 4-byte id (0x70000001) follows the descriptor, then the frame's
-- 4-byte content size (256, within what the version allows, and made the
-- row's too).
UPDATE lake_data.chunk SET bytes = 256, data = overlay(set_byte(data, 5, get_byte(data, 5) | 3)
                                          PLACING '\x0100007000010000'::bytea FROM 7 FOR 8)
WHERE blob = :named_blob AND chunk_no = 1;
SELECT regexp_replace(t.err($q$SELECT lake.append('i_ds', 'acme', 'i-named', convert_to(repeat('lake ', 419431), 'UTF8'))$q$),
                      'dictionary \d+', 'dictionary N') AS replay_names_a_dictionary;
SELECT regexp_replace(t.err(format('SELECT length(lake.read(%L, %s))', 'i_ds', :named)),
                      'dictionary \d+', 'dictionary N') AS read_names_a_dictionary;
UPDATE lake_data.chunk c SET data = g.data FROM t.i_big g WHERE c.blob = g.blob AND c.chunk_no = g.chunk_no;
SELECT t.i_replay() = 'ok' AS repaired_replay;
SELECT lake.append('i_ds', 'acme', 'i-big', convert_to(repeat('lake ', 209716), 'UTF8')) = :big AS same_version;
-- A version_blob row's size is outside every checksum: a damaged one is
-- LK005 on read, neither an allocation of that size nor "too large" (54000).
UPDATE lake_data.version_blob SET bytes = bytes + (1::bigint << 40) WHERE blob = :big_blob;
SELECT t.err(format('SELECT length(lake.read(%L, %s))', 'i_ds', :big)) AS size_damaged;
UPDATE lake_data.version_blob SET bytes = bytes + 900000000 - (1::bigint << 40) WHERE blob = :big_blob;
SELECT t.err(format('SELECT length(lake.read(%L, %s))', 'i_ds', :big)) AS size_damaged;
UPDATE lake_data.version_blob SET bytes = bytes - 900000000 WHERE blob = :big_blob;
SELECT length(lake.read('i_ds', :big)) AS size_repaired;
-- A chunk row's size is outside its checksum too, and the frame header's
-- is unverified until the chunk is decoded: the two must agree before
-- anything is allocated for the chunk (LK005 naming the disagreement).
SELECT lake.append('i_ds', 'acme', 'i-sizes', convert_to(repeat('lake ', 419431), 'UTF8')) AS sizes \gset
SELECT blob AS sizes_blob FROM lake_data.version_blob
WHERE dataset_id = (SELECT id FROM lake_data.dataset WHERE name = 'i_ds') AND version = :sizes \gset
CREATE TABLE t.i_sizes AS SELECT * FROM lake_data.chunk WHERE blob = :sizes_blob AND chunk_no = 1;
UPDATE lake_data.chunk SET bytes = bytes + 1 WHERE blob = :sizes_blob AND chunk_no = 1;
SELECT t.err(format('SELECT length(lake.read(%L, %s))', 'i_ds', :sizes)) AS row_size_damaged;
UPDATE lake_data.chunk SET bytes = -bytes WHERE blob = :sizes_blob AND chunk_no = 1;
SELECT t.err(format('SELECT length(lake.read(%L, %s))', 'i_ds', :sizes)) AS row_size_negative;
-- The frame's 4-byte content size (after the tag, checksum and descriptor)
-- made 64 kB: within what the version allows, but not the row's 1 MB.
UPDATE lake_data.chunk c SET bytes = g.bytes, data = overlay(g.data PLACING '\x00000100'::bytea FROM 7 FOR 4)
FROM t.i_sizes g WHERE c.blob = g.blob AND c.chunk_no = 1;
SELECT t.err(format('SELECT length(lake.read(%L, %s))', 'i_ds', :sizes)) AS frame_size_damaged;
UPDATE lake_data.chunk c SET data = g.data FROM t.i_sizes g WHERE c.blob = g.blob AND c.chunk_no = 1;
SELECT length(lake.read('i_ds', :sizes)) AS sizes_repaired;
-- A stage whose chunk row declares a negative size: XX001 at commit, not a
-- refusal for its size (54000) or an allocation from a wrapped sum.
SELECT lake.begin_append('i_ds', 'acme', 'i-negative') AS neg \gset
SELECT lake.append_chunk(:neg, 0, convert_to('minus', 'UTF8'));
SELECT lake.append_chunk(:neg, 1, convert_to(' one', 'UTF8'));
UPDATE lake_data.chunk SET bytes = -5 WHERE blob = :neg AND chunk_no = 0;
SELECT regexp_replace(t.err(format('SELECT lake.commit_append(%s)', :neg)), 'stage \d+', 'stage N') AS stage_size_negative;
SELECT lake.abort_append(:neg);

-- A late commit_append contender, over a stage already committed.
SELECT lake.begin_append('i_ds', 'acme', 'i-late') AS late \gset
SELECT lake.append_chunk(:late, 0, convert_to('first', 'UTF8'));
SELECT lake.append_chunk(:late, 1, convert_to('second', 'UTF8'));
SELECT lake.commit_append(:late) AS late_version \gset
CREATE TABLE t.i_late AS SELECT * FROM lake_data.chunk WHERE blob = :late;
DELETE FROM lake_data.chunk WHERE blob = :late AND chunk_no = 1;
SELECT t.err(format('SELECT lake.commit_append(%s)', :late)) AS chunk_missing;
SELECT t.err(format('SELECT lake.commit_append(%s, %L)', :late, sha256(convert_to('firstsecond', 'UTF8')))) AS chunk_missing_digest;
INSERT INTO lake_data.chunk SELECT * FROM t.i_late WHERE chunk_no = 1;
UPDATE lake_data.chunk SET data = t.i_flip(data, 8 * length(data) - 1) WHERE blob = :late AND chunk_no = 0;
SELECT t.err(format('SELECT lake.commit_append(%s)', :late)) AS chunk_damaged;
UPDATE lake_data.chunk c SET data = g.data FROM t.i_late g WHERE c.blob = g.blob AND c.chunk_no = g.chunk_no;
SELECT lake.commit_append(:late) = :late_version AS repaired_contender;

-- Columns beside the records are checked against them: an edited column is
-- damage, never another answer.
-- A version digest that is not 32 bytes: a read, a replay and a conflicting
-- retry are LK005 (this was an internal error, XX000).
SELECT lake.append('i_ds', 'acme', 'i-digest', convert_to('digest', 'UTF8')) AS dv \gset
SELECT encode(digest, 'hex') AS dg FROM lake_data.version
WHERE dataset_id = (SELECT id FROM lake_data.dataset WHERE name = 'i_ds') AND version = :dv \gset
UPDATE lake_data.version SET digest = '\x00'
WHERE dataset_id = (SELECT id FROM lake_data.dataset WHERE name = 'i_ds') AND version = :dv;
SELECT t.err(format('SELECT lake.read(%L, %s)', 'i_ds', :dv)) AS short_digest_read;
SELECT t.err($q$SELECT lake.append('i_ds', 'acme', 'i-digest', convert_to('digest', 'UTF8'))$q$) AS short_digest_replay;
SELECT t.err($q$SELECT lake.append('i_ds', 'acme', 'i-digest', convert_to('other', 'UTF8'))$q$) AS short_digest_other;
UPDATE lake_data.version SET digest = decode(:'dg', 'hex')
WHERE dataset_id = (SELECT id FROM lake_data.dataset WHERE name = 'i_ds') AND version = :dv;
SELECT lake.append('i_ds', 'acme', 'i-digest', convert_to('digest', 'UTF8')) = :dv AS repaired_digest;
-- A digest of the right length but not the chunks': neither a replay nor a
-- retry with other content is judged by it (the replay was LK001, "different
-- content", sending the client to write it again under a new id).
UPDATE lake_data.version SET digest = sha256('false')
WHERE dataset_id = (SELECT id FROM lake_data.dataset WHERE name = 'i_ds') AND version = :dv;
SELECT left(t.err($q$SELECT lake.append('i_ds', 'acme', 'i-digest', convert_to('digest', 'UTF8'))$q$), 5) AS false_digest_replay;
SELECT left(t.err($q$SELECT lake.append('i_ds', 'acme', 'i-digest', convert_to('false', 'UTF8'))$q$), 5) AS false_digest_same_as_it;
SELECT left(t.err($q$SELECT lake.append('i_ds', 'acme', 'i-digest', convert_to('other', 'UTF8'))$q$), 5) AS false_digest_other;
UPDATE lake_data.version SET digest = decode(:'dg', 'hex')
WHERE dataset_id = (SELECT id FROM lake_data.dataset WHERE name = 'i_ds') AND version = :dv;
SELECT left(t.err($q$SELECT lake.append('i_ds', 'acme', 'i-digest', convert_to('other', 'UTF8'))$q$), 5) AS sound_digest_other;
-- Chunk 0 unreadable under a sound digest: a replay is LK005, and so is a
-- retry with other content: which of the digest and the chunk is damaged
-- cannot be told, so the digest cannot judge a conflict.
SELECT encode(data, 'hex') AS dd FROM lake_data.version
WHERE dataset_id = (SELECT id FROM lake_data.dataset WHERE name = 'i_ds') AND version = :dv \gset
UPDATE lake_data.version SET data = set_byte(data, 0, 255)
WHERE dataset_id = (SELECT id FROM lake_data.dataset WHERE name = 'i_ds') AND version = :dv;
SELECT left(t.err($q$SELECT lake.append('i_ds', 'acme', 'i-digest', convert_to('digest', 'UTF8'))$q$), 5) AS damaged_chunk_replay;
SELECT left(t.err($q$SELECT lake.append('i_ds', 'acme', 'i-digest', convert_to('other', 'UTF8'))$q$), 5) AS damaged_chunk_other;
UPDATE lake_data.version SET data = decode(:'dd', 'hex')
WHERE dataset_id = (SELECT id FROM lake_data.dataset WHERE name = 'i_ds') AND version = :dv;
SELECT lake.append('i_ds', 'acme', 'i-digest', convert_to('digest', 'UTF8')) = :dv AS repaired_chunk;

-- A stage chunk whose row declares another size than its record holds: a
-- re-send is XX001 (it was LK001, "different content"), as is a commit.
SELECT lake.begin_append('i_ds', 'acme', 'i-bytes') AS bs \gset
SELECT lake.append_chunk(:bs, 0, convert_to('chunk', 'UTF8'));
UPDATE lake_data.chunk SET bytes = bytes + 1 WHERE blob = :bs AND chunk_no = 0;
SELECT regexp_replace(t.err(format('SELECT lake.append_chunk(%s, 0, %L)', :bs, convert_to('chunk', 'UTF8'))),
                      'stage \d+', 'stage <s>') AS resend_size_edited;
SELECT regexp_replace(t.err(format('SELECT lake.commit_append(%s)', :bs)), 'stage \d+', 'stage <s>') AS commit_size_edited;
UPDATE lake_data.chunk SET bytes = 5 WHERE blob = :bs AND chunk_no = 0;
SELECT lake.append_chunk(:bs, 0, convert_to('chunk', 'UTF8')) AS resend_repaired;
SELECT convert_from(lake.read('i_ds', lake.commit_append(:bs)), 'UTF8') AS committed_repaired;

-- A retried commit_append of a stage that was committed as a replay is
-- answered from lake_data.stage_replay only with a version of the stage's
-- own operation: a row pointed at another version is XX001 (it returned
-- that version).
SELECT lake.begin_append('i_ds', 'acme', 'i-rp') AS rp \gset
SELECT lake.append_chunk(:rp, 0, convert_to('replayed', 'UTF8'));
SELECT lake.append('i_ds', 'acme', 'i-rp', convert_to('replayed', 'UTF8')) AS rpv \gset
SELECT lake.commit_append(:rp) = :rpv AS committed_as_replay;
UPDATE lake_data.stage_replay SET version = :dv WHERE stage = :rp;
SELECT regexp_replace(t.err(format('SELECT lake.commit_append(%s)', :rp)), 'stage \d+|version \d+', '<n>', 'g') AS replay_row_moved;
-- The tenant checked is the version's, before the row is judged: a role
-- of another tenant learns nothing from the damage, even when the row was
-- edited to name that role's tenant.
CREATE ROLE lake_i_carol;
GRANT USAGE ON SCHEMA lake, t TO lake_i_carol;
SELECT lake.grant_tenant('lake_i_carol', 'globex');
UPDATE lake_data.stage_replay SET version = :rpv, tenant = 'globex', operation_id = 'x' WHERE stage = :rp;
SET ROLE lake_i_carol;
SELECT regexp_replace(t.err(format('SELECT lake.commit_append(%s)', :rp)), 'stage \d+', 'stage <n>', 'g') AS replay_row_other_tenant;
RESET ROLE;
UPDATE lake_data.stage_replay SET tenant = 'acme', operation_id = 'i-rp' WHERE stage = :rp;
UPDATE lake_data.stage_replay SET version = :rpv WHERE stage = :rp;
SELECT lake.commit_append(:rp) = :rpv AS replay_repaired;
-- Likewise a committed stage's lake_data.version_blob row: the version it
-- names must read its chunks from that stage (it returned the version of
-- another upload).
SELECT lake.begin_append('i_ds', 'acme', 'i-vb1') AS vb1 \gset
SELECT lake.append_chunk(:vb1, 0, convert_to('first upload', 'UTF8'));
SELECT lake.commit_append(:vb1) AS vb1v \gset
SELECT lake.begin_append('i_ds', 'acme', 'i-vb2') AS vb2 \gset
SELECT lake.append_chunk(:vb2, 0, convert_to('second upload', 'UTF8'));
SELECT lake.commit_append(:vb2) AS vb2v \gset
-- (Damaged in the heap only: its unique index on the version is not told.)
UPDATE pg_index SET indisready = false WHERE indexrelid = 'lake_data.version_blob_version'::regclass;
UPDATE lake_data.version_blob SET version = :vb1v WHERE blob = :vb2;
UPDATE pg_index SET indisready = true WHERE indexrelid = 'lake_data.version_blob_version'::regclass;
SELECT regexp_replace(t.err(format('SELECT lake.commit_append(%s)', :vb2)), 'stage \d+', 'stage <n>', 'g') AS blob_row_moved;
UPDATE lake_data.version_blob SET version = :vb2v WHERE blob = :vb2;
REINDEX INDEX lake_data.version_blob_version;
SELECT lake.commit_append(:vb2) = :vb2v AS blob_row_repaired;

-- A sealed idempotent cast is answered from lake_data.cast_operation only
-- when the log shows that receipt is this owner's landing of this
-- operation: a row pointed at another owner's step is XX001 (it returned
-- that step's coordinate), and so is a digest that is not 32 bytes.
SELECT lake.create_owner('i_op1'), lake.create_owner('i_op2');
SELECT (lake.cast_durable('i_op1', 'Planning', 'CognitiveWork', NULL, NULL, 'op-a')).position AS op_a;
SELECT (lake.cast_durable('i_op2', 'Planning', 'CognitiveWork', NULL, NULL, 'op-b')).position AS op_b;
CREATE TABLE t.i_ops AS SELECT * FROM lake_data.cast_operation;
UPDATE lake_data.cast_operation a SET epoch = b.epoch, seq = b.seq
FROM lake_data.cast_operation b
WHERE a.operation_id = 'op-a' AND b.operation_id = 'op-b'
  AND a.owner_id = (SELECT id FROM lake_data.owner WHERE name = 'i_op1')
  AND b.owner_id = (SELECT id FROM lake_data.owner WHERE name = 'i_op2');
SELECT regexp_replace(t.err($q$SELECT lake.cast_durable('i_op1', 'Planning', 'CognitiveWork', NULL, NULL, 'op-a')$q$),
                      '\(\d+,\d+\)', '(e,s)') AS op_row_moved;
SELECT left(t.err($q$SELECT lake.cast('i_op1', 'Planning', 'CognitiveWork', NULL, NULL, 'op-a')$q$), 5) AS op_row_moved_cast;
UPDATE lake_data.cast_operation c SET epoch = g.epoch, seq = g.seq, digest = '\x00'
FROM t.i_ops g WHERE c.owner_id = g.owner_id AND c.operation_id = g.operation_id;
SELECT left(t.err($q$SELECT lake.cast('i_op1', 'Planning', 'CognitiveWork', NULL, NULL, 'op-a')$q$), 5) AS op_short_digest;
-- A digest of the right length but for other content: the landing's own
-- content is hashed and compared, so the retry is XX001, not judged a
-- conflict by the false digest.
UPDATE lake_data.cast_operation c SET digest = sha256('other')
FROM t.i_ops g WHERE c.owner_id = g.owner_id AND c.operation_id = g.operation_id;
SELECT left(t.err($q$SELECT lake.cast('i_op1', 'Planning', 'CognitiveWork', NULL, NULL, 'op-a')$q$), 5) AS op_false_digest;
UPDATE lake_data.cast_operation c SET digest = g.digest
FROM t.i_ops g WHERE c.owner_id = g.owner_id AND c.operation_id = g.operation_id;
SELECT (lake.cast_durable('i_op1', 'Planning', 'CognitiveWork', NULL, NULL, 'op-a')).position AS op_a_repaired;
-- A cast_operation row pointed at ANOTHER owner's landing of the SAME
-- operation id with the SAME content: the operation and its digest match,
-- only the owner differs. It is XX001, never that owner's coordinate.
SELECT lake.create_owner('i_same1'), lake.create_owner('i_same2');
SELECT (lake.cast_durable('i_same1', 'Planning', 'CognitiveWork', NULL, NULL, 'op-same')).position AS same1;
SELECT (lake.cast_durable('i_same2', 'Planning', 'CognitiveWork', NULL, NULL, 'op-same')).position AS same2;
CREATE TABLE t.i_same AS SELECT * FROM lake_data.cast_operation WHERE operation_id = 'op-same';
UPDATE lake_data.cast_operation a SET epoch = b.epoch, seq = b.seq
FROM t.i_same b
WHERE a.operation_id = 'op-same' AND b.operation_id = 'op-same'
  AND a.owner_id = (SELECT id FROM lake_data.owner WHERE name = 'i_same1')
  AND b.owner_id = (SELECT id FROM lake_data.owner WHERE name = 'i_same2');
SELECT regexp_replace(t.err($q$SELECT lake.cast_durable('i_same1', 'Planning', 'CognitiveWork', NULL, NULL, 'op-same')$q$),
                      '\(\d+,\d+\)', '(e,s)') AS same_op_row_moved;
UPDATE lake_data.cast_operation c SET epoch = g.epoch, seq = g.seq
FROM t.i_same g WHERE c.owner_id = g.owner_id AND c.operation_id = g.operation_id;
SELECT (lake.cast_durable('i_same1', 'Planning', 'CognitiveWork', NULL, NULL, 'op-same')).position AS same1_repaired;
DROP TABLE t.i_same;
-- The lsn a sealed receipt is answered with must be flushed WAL: a row's
-- lsn edited past the flush is XX001, never a coordinate the server has
-- not made durable.
SELECT cycle AS op_cycle, lsn AS op_lsn FROM lake_data.cycle c
WHERE (SELECT epoch FROM t.i_ops WHERE operation_id = 'op-a') = c.epoch
  AND (SELECT seq FROM t.i_ops WHERE operation_id = 'op-a') BETWEEN c.first_seq AND c.last_seq \gset
UPDATE lake_data.cycle SET lsn = 'FFFFFFFF/0' WHERE cycle = :op_cycle;
SELECT regexp_replace(t.err($q$SELECT lake.cast_durable('i_op1', 'Planning', 'CognitiveWork', NULL, NULL, 'op-a')$q$),
                      'cycle \d+', 'cycle <c>') AS op_lsn_past_flush;
UPDATE lake_data.cycle SET lsn = :'op_lsn' WHERE cycle = :op_cycle;
SELECT lake.cast_durable('i_op1', 'Planning', 'CognitiveWork', NULL, NULL, 'op-a') IS NOT NULL AS op_lsn_repaired,
       (lake.cast_durable('i_op1', 'Planning', 'CognitiveWork', NULL, NULL, 'op-a')).lsn <= pg_current_wal_flush_lsn() AS op_lsn_flushed;

-- A version row whose number is damaged in the heap only (a btree does not
-- recheck its keys, so version_pkey still finds the other row under it):
-- read_operation reads the row its operation names, never the row that the
-- damaged number is an index key of.
SELECT lake.create_dataset('i_key');
SELECT lake.append('i_key', 'acme', 'k-a', convert_to('A payload', 'UTF8')) AS k_a;
SELECT lake.append('i_key', 'acme', 'k-b', convert_to('B payload', 'UTF8')) AS k_b;
UPDATE pg_index SET indisready = false WHERE indexrelid = 'lake_data.version_pkey'::regclass;
UPDATE lake_data.version v SET version = 1 FROM lake_data.dataset d
WHERE d.id = v.dataset_id AND d.name = 'i_key' AND v.operation_id = 'k-b';
UPDATE pg_index SET indisready = true WHERE indexrelid = 'lake_data.version_pkey'::regclass;
SELECT convert_from(lake.read_operation('i_key', 'acme', 'k-a'), 'UTF8') AS a_by_operation,
       convert_from(lake.read_operation('i_key', 'acme', 'k-b'), 'UTF8') AS b_by_operation,
       convert_from(lake.read('i_key', 1), 'UTF8') AS version_1;
UPDATE lake_data.version v SET version = 2 FROM lake_data.dataset d
WHERE d.id = v.dataset_id AND d.name = 'i_key' AND v.operation_id = 'k-b';
REINDEX INDEX lake_data.version_pkey;
SELECT convert_from(lake.read('i_key', 2), 'UTF8') AS version_2_repaired;

-- A replay verifies the version's chunk 0 against its payload, as a read
-- does: version a's raw chunk 0 replaced by another version's intact one,
-- of the same size (a raw chunk's checksum covers only its own bytes, and
-- every chunk 0 is checked at the same place: lake_chunk_holds's byte
-- comparison) or holding only a prefix of the payload (store_check_lineage's
-- length check), is damage, LK005, never the version answered.
SELECT lake.create_dataset('swap_ds');
SELECT lake.append('swap_ds', 'acme', 'swap-a', convert_to('100 EUR', 'UTF8')) AS swap_a \gset
SELECT lake.append('swap_ds', 'acme', 'swap-b', convert_to('200 EUR', 'UTF8')) AS swap_b \gset
SELECT lake.append('swap_ds', 'acme', 'swap-c', convert_to('100', 'UTF8')) AS swap_c \gset
CREATE FUNCTION t.chunk0_swapped(a bigint, source bigint) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
    kept bytea;
    replay text;
    read text;
BEGIN
    SELECT v.data INTO kept FROM lake_data.version v JOIN lake_data.dataset d ON d.id = v.dataset_id
    WHERE d.name = 'swap_ds' AND v.version = a;
    UPDATE lake_data.version v SET data = o.data
    FROM lake_data.version o, lake_data.dataset d
    WHERE d.name = 'swap_ds' AND v.dataset_id = d.id AND o.dataset_id = d.id
      AND v.version = a AND o.version = source;
    replay := left(t.err($q$SELECT lake.append('swap_ds', 'acme', 'swap-a', convert_to('100 EUR', 'UTF8'))$q$), 5);
    read := left(t.err(format('SELECT lake.read(%L, %s)', 'swap_ds', a)), 5);
    UPDATE lake_data.version v SET data = kept FROM lake_data.dataset d
    WHERE d.name = 'swap_ds' AND v.dataset_id = d.id AND v.version = a;
    RETURN 'replay ' || replay || ', read ' || read;
END $f$;
SELECT what, t.chunk0_swapped(:swap_a, source) AS outcome
FROM (VALUES ('same size', :swap_b), ('a prefix', :swap_c)) s(what, source);
SELECT lake.append('swap_ds', 'acme', 'swap-a', convert_to('100 EUR', 'UTF8')) = :swap_a AS repaired_replay;
DROP FUNCTION t.chunk0_swapped(bigint, bigint);

DROP FUNCTION t.i_cycle_flips(bigint), t.i_row_flips(text, bigint, bytea, text), t.i_stage_flips(bigint),
    t.i_replay(), t.i_zreplay(), t.i_outcome(text, text), t.i_flip(bytea, int);
DROP TABLE t.i_good, t.i_chunk, t.i_zchunk, t.i_stage, t.i_big, t.i_late, t.i_ops;
SELECT lake.revoke_tenant('lake_i_carol', 'globex');
REVOKE USAGE ON SCHEMA lake, t FROM lake_i_carol;
DROP ROLE lake_i_carol;
