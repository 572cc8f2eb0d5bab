-- Per-dataset zstd dictionaries (store_dict.h): trained by an
-- administrator from the dataset's own payloads, named by id in every
-- frame compressed with them, verified against their checksum whenever a
-- session loads them. Versions written before a dictionary keep reading.

-- A 256-byte JSON line, deterministic in n (like bench.payload256).
CREATE FUNCTION t.dj(n int) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
  SELECT convert_to(rpad(format(
    '{"op":"op-%s","tenant":"acme","event":"order.updated","order":%s,"status":"shipped","carrier":"dhl","items":[{"sku":"SKU-%s","qty":%s}],"trace":"%s","note":"',
    n, n * 7919 % 1000000, n * 31 % 10000, n % 9 + 1, md5(n::text)), 254, md5(n::text || 'n')) || '"}', 'UTF8')
$$;
-- The stored chunk of a version, and whether its zstd frame names a
-- dictionary (the frame header descriptor's Dictionary_ID_flag, codec.h:
-- tag, checksum, then the frame's descriptor: frames carry no magic number).
CREATE FUNCTION t.dchunk(ds text, v bigint) RETURNS bytea LANGUAGE sql AS $$
  SELECT x.data FROM lake_data.version x JOIN lake_data.dataset d ON d.id = x.dataset_id
  WHERE d.name = ds AND x.version = v
$$;
CREATE FUNCTION t.dnamed(c bytea) RETURNS bool LANGUAGE sql AS $$
  SELECT get_byte(c, 0) = ascii('Z') AND get_byte(c, 5) & 3 <> 0
$$;

SELECT lake.create_dataset('dict_ds');
SELECT lake.create_dataset('dict_few');

-- Refusals: NULL or malformed names, an unknown dataset, too few payloads.
SELECT t.err($$SELECT lake.train_dictionary(NULL)$$);
SELECT t.err($$SELECT lake.train_dictionary('')$$);
SELECT t.err($$SELECT lake.train_dictionary('no_such_dataset')$$);
SELECT count(lake.append('dict_few', 'acme', 'few-' || n, t.dj(n))) FROM generate_series(1, 99) n;
SELECT t.err($$SELECT lake.train_dictionary('dict_few')$$);
-- Only small payloads are samples: a large one does not count.
SELECT lake.append('dict_few', 'acme', 'few-big', convert_to(repeat('{"a":1}', 5000), 'UTF8'));
SELECT t.err($$SELECT lake.train_dictionary('dict_few')$$);

-- 300 payloads written before any dictionary.
SELECT count(lake.append('dict_ds', 'acme', 'op-' || n, t.dj(n))) FROM generate_series(1, 300) n;
SELECT t.dnamed(t.dchunk('dict_ds', 1)) AS before_names_a_dictionary;

-- A tenant role can neither train nor read nor alter dictionaries.
CREATE ROLE lake_d_tenant LOGIN;
GRANT USAGE ON SCHEMA lake, t TO lake_d_tenant;
SELECT lake.grant_tenant('lake_d_tenant', 'acme');
SET ROLE lake_d_tenant;
SELECT t.err($$SELECT lake.train_dictionary('dict_ds')$$);
SELECT t.err($$SELECT count(*) FROM lake_data.dictionary$$);
SELECT t.err($$DELETE FROM lake_data.dictionary$$);
-- Its own data it reads, as before.
SELECT lake.read('dict_ds', 1) = t.dj(1) AS tenant_reads;
RESET ROLE;

-- Not in a read-only transaction (nor on a standby: test/t/016_dictionary.pl).
BEGIN READ ONLY;
SELECT t.err($$SELECT lake.train_dictionary('dict_ds')$$);
ROLLBACK;

-- A damaged payload among the samples is LK005, not left out of the
-- training: nothing is trained from what remains.
CREATE TEMP TABLE dsaved AS SELECT v.version, v.data FROM lake_data.version v
  JOIN lake_data.dataset d ON d.id = v.dataset_id WHERE d.name = 'dict_ds' AND v.version = 300;
UPDATE lake_data.version v SET data = set_byte(v.data, length(v.data) - 1, get_byte(v.data, length(v.data) - 1) # 1)
  FROM lake_data.dataset d WHERE d.id = v.dataset_id AND d.name = 'dict_ds' AND v.version = 300;
SELECT t.err($$SELECT lake.train_dictionary('dict_ds')$$);
SELECT count(*) AS dictionaries FROM lake_data.dictionary x
  JOIN lake_data.dataset d ON d.id = x.dataset_id WHERE d.name = 'dict_ds';
UPDATE lake_data.version v SET data = x.data FROM dsaved x, lake_data.dataset d
  WHERE d.id = v.dataset_id AND d.name = 'dict_ds' AND v.version = x.version;

-- Trained by an administrator: an id in zstd's private range, made from
-- the dataset's own 300 payloads.
SELECT lake.train_dictionary('dict_ds') AS dict1 \gset
SELECT :dict1 >= 32768 AS private_id;
SELECT dataset_id = (SELECT id FROM lake_data.dataset WHERE name = 'dict_ds') AS of_dataset,
       samples, length(data) BETWEEN 1024 AND 16384 AS sized
FROM lake_data.dictionary WHERE id = :dict1;

-- Appends from now on (this session, at once) are compressed with it, and
-- much smaller than the same kind of payload before.
SELECT count(lake.append('dict_ds', 'acme', 'op-' || n, t.dj(n))) FROM generate_series(301, 400) n;
SELECT bool_and(t.dnamed(t.dchunk('dict_ds', v))) AS after_named,
       bool_and(NOT t.dnamed(t.dchunk('dict_ds', v - 100))) AS before_not
FROM generate_series(301, 400) v;
SELECT (SELECT avg(length(t.dchunk('dict_ds', v))) FROM generate_series(301, 400) v)
     < 0.6 * (SELECT avg(length(t.dchunk('dict_ds', v))) FROM generate_series(201, 300) v)
       AS much_smaller;

-- Every version reads back exactly, before and after the dictionary, by
-- version and by operation; replays find their versions.
SELECT count(*) FILTER (WHERE lake.read('dict_ds', n) = t.dj(n)) AS read_ok,
       count(*) FILTER (WHERE lake.read_operation('dict_ds', 'acme', 'op-' || n) = t.dj(n)) AS by_op_ok
FROM generate_series(1, 400) n;
SELECT lake.append('dict_ds', 'acme', 'op-7', t.dj(7)) AS replay_before,
       lake.append('dict_ds', 'acme', 'op-333', t.dj(333)) AS replay_after;
SELECT t.err($$SELECT lake.append('dict_ds', 'acme', 'op-333', t.dj(334))$$);
-- Large payloads are compressed without it, and still read back.
SELECT lake.append('dict_ds', 'acme', 'big', convert_to(repeat('{"a":1}', 5000), 'UTF8')) AS big \gset
SELECT t.dnamed(t.dchunk('dict_ds', :big)) AS big_named,
       lake.read('dict_ds', :big) = convert_to(repeat('{"a":1}', 5000), 'UTF8') AS big_ok;

-- At another lake.compression_level the session prepares the dictionary
-- again at that level: still named, still read back.
SET lake.compression_level = 19;
SELECT lake.append('dict_ds', 'acme', 'lvl-19', t.dj(1019)) AS v \gset
SELECT t.dnamed(t.dchunk('dict_ds', :v)) AS named, lake.read('dict_ds', :v) = t.dj(1019) AS ok;
RESET lake.compression_level;

-- A new session loads the dictionary afresh.
\c
SELECT count(*) FILTER (WHERE lake.read('dict_ds', n) = t.dj(n)) AS read_ok
FROM generate_series(295, 305) n;
-- A session that switches lake.compression_level prepares the dictionary
-- again at the new level: what it stores then is what a session that
-- started at that level stores (zstd is deterministic for the same
-- dictionary, level and input), not what the old level made.
SET lake.compression_level = 19;
SELECT lake.append('dict_ds', 'acme', 'lvl-19-fresh', t.dj(1019)) AS v19 \gset
\c
SELECT lake.append('dict_ds', 'acme', 'lvl-default', t.dj(1019)) AS vdef \gset
SET lake.compression_level = 19;
SELECT lake.append('dict_ds', 'acme', 'lvl-19-switched', t.dj(1019)) AS vsw \gset
RESET lake.compression_level;
SELECT t.dchunk('dict_ds', :vsw) = t.dchunk('dict_ds', :v19) AS as_at_level_19,
       t.dchunk('dict_ds', :vsw) <> t.dchunk('dict_ds', :vdef) AS not_as_at_the_default;
SELECT lake.append('dict_ds', 'acme', 'op-401', t.dj(401)) AS v401 \gset
SELECT t.dnamed(t.dchunk('dict_ds', :v401)) AS named, lake.read('dict_ds', :v401) = t.dj(401) AS ok;

-- Damaged dictionary bytes: every read of a version that needs it is LK005
-- naming the dictionary, never other bytes; versions that do not need it
-- still read; an append that would compress with it is XX001. Flips are
-- spread over the whole dictionary, its header (magic, id) included, and
-- over its checksum.
CREATE TABLE t.d_good AS SELECT data, checksum FROM lake_data.dictionary WHERE id = :dict1;
CREATE FUNCTION t.i_flip(b bytea, n int) RETURNS bytea LANGUAGE sql AS $$
    SELECT set_bit(b, n, 1 - get_bit(b, n))
$$;
CREATE FUNCTION t.d_outcome(q text, good bytea) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    got bytea;
    detail text;
BEGIN
    EXECUTE q INTO got;
    RETURN CASE WHEN got = good THEN 'same' ELSE 'altered' END;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
    RETURN SQLSTATE || ' ' || regexp_replace(coalesce(detail, ''), '\d+', 'N', 'g');
END $$;
CREATE FUNCTION t.d_flips(d int) RETURNS TABLE(what text, outcome text) LANGUAGE plpgsql AS $$
DECLARE
    good bytea := (SELECT g.data FROM t.d_good g);
    sum bigint := (SELECT g.checksum FROM t.d_good g);
BEGIN
    FOR n IN 0 .. 8 * length(good) - 1 BY 8 * length(good) / 97 LOOP
        UPDATE lake_data.dictionary SET data = t.i_flip(good, n) WHERE id = d;
        what := 'needs it';  outcome := t.d_outcome($q$SELECT lake.read('dict_ds', 350)$q$, t.dj(350)); RETURN NEXT;
        what := 'needs none'; outcome := t.d_outcome($q$SELECT lake.read('dict_ds', 50)$q$, t.dj(50)); RETURN NEXT;
    END LOOP;
    FOR n IN 0 .. 31 LOOP
        UPDATE lake_data.dictionary SET data = good, checksum = sum # (1::bigint << n) WHERE id = d;
        what := 'needs it';  outcome := t.d_outcome($q$SELECT lake.read('dict_ds', 350)$q$, t.dj(350)); RETURN NEXT;
    END LOOP;
    UPDATE lake_data.dictionary SET data = good, checksum = sum WHERE id = d;
END $$;
SELECT what, outcome, count(*) FROM t.d_flips(:dict1) GROUP BY 1, 2 ORDER BY 1, 2;
UPDATE lake_data.dictionary SET data = t.i_flip(data, 100) WHERE id = :dict1;
SELECT t.err($$SELECT lake.append('dict_ds', 'acme', 'op-402', t.dj(402))$$);
-- A replay only reads: LK005 too, the version's lineage is what is broken.
SELECT regexp_replace(t.err($$SELECT lake.append('dict_ds', 'acme', 'op-350', t.dj(350))$$), '\d{5,}', 'N');
UPDATE lake_data.dictionary SET data = (SELECT data FROM t.d_good) WHERE id = :dict1;
-- A dictionary that is gone: LK005 as well. Put back, all reads as before.
DELETE FROM lake_data.dictionary WHERE id = :dict1;
SELECT regexp_replace(t.err($$SELECT lake.read('dict_ds', 350)$$), '\d{5,}', 'N');
INSERT INTO lake_data.dictionary (id, dataset_id, samples, checksum, data)
SELECT :dict1, (SELECT id FROM lake_data.dataset WHERE name = 'dict_ds'), 300, checksum, data FROM t.d_good;
SELECT count(*) FILTER (WHERE lake.read('dict_ds', n) = t.dj(n)) AS read_ok
FROM generate_series(1, 400) n;

-- Trained again: the newer dictionary compresses from now on, versions
-- compressed with the older one still read.
SELECT lake.train_dictionary('dict_ds') AS dict2 \gset
SELECT :dict2 > :dict1 AS newer;
SELECT lake.append('dict_ds', 'acme', 'op-402', t.dj(402)) AS v402 \gset
-- v402 needs the newer one only: with the older one damaged it still reads,
-- v350 does not.
UPDATE lake_data.dictionary SET data = t.i_flip(data, 100) WHERE id = :dict1;
SELECT lake.read('dict_ds', :v402) = t.dj(402) AS newer_reads,
       left(t.err($$SELECT lake.read('dict_ds', 350)$$), 5) AS older_needed;
UPDATE lake_data.dictionary SET data = (SELECT data FROM t.d_good) WHERE id = :dict1;
SELECT count(*) FILTER (WHERE lake.read('dict_ds', n) = t.dj(n)) AS read_ok
FROM generate_series(1, 400) n;
-- The newer dictionary's bytes, with their valid checksum, under the older
-- one's id: refused by the id the bytes carry, before zstd sees them.
UPDATE lake_data.dictionary d SET data = n.data, checksum = n.checksum
FROM lake_data.dictionary n WHERE d.id = :dict1 AND n.id = :dict2;
SELECT regexp_replace(t.err($$SELECT lake.read('dict_ds', 350)$$), '\d{5,}', 'N', 'g') AS other_bytes;
UPDATE lake_data.dictionary d SET data = g.data, checksum = g.checksum FROM t.d_good g WHERE d.id = :dict1;
SELECT lake.read('dict_ds', 350) = t.dj(350) AS reads_again;

-- Dropped and recreated in this session: the sequence starts over, so the
-- first new dictionary has the first one's id but other bytes. Nothing the
-- session kept may be used for it.
SELECT length(lake.read('dict_ds', 350)) AS cached_before_drop;
DROP EXTENSION lake CASCADE;
CREATE EXTENSION lake;
SELECT lake.create_dataset('dict_ds');
CREATE FUNCTION t.dother(n int) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
  SELECT convert_to(format('{"kind":"other","k":%s,"pad":"%s","also":"%s","more":"%s"}',
                           n, md5(n::text), repeat('xy', n % 50), md5((n * 3)::text)), 'UTF8')
$$;
SELECT count(lake.append('dict_ds', 'other', 'x-' || n, t.dother(n))) FROM generate_series(1, 300) n;
SELECT lake.train_dictionary('dict_ds') = :dict1 AS same_id_again;
SELECT lake.append('dict_ds', 'other', 'x-301', t.dother(301)) AS v \gset
SELECT t.dnamed(t.dchunk('dict_ds', :v)) AS named, lake.read('dict_ds', :v) = t.dother(301) AS ok;

DROP FUNCTION t.dj(int), t.dchunk(text, bigint), t.dnamed(bytea), t.i_flip(bytea, int),
     t.d_outcome(text, bytea), t.d_flips(int), t.dother(int);
DROP TABLE t.d_good;
DROP OWNED BY lake_d_tenant;
DROP ROLE lake_d_tenant;
