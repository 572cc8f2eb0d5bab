-- Reads decompress and verify; damage is LK005, never partial data.
SELECT lake.read('orders', 1), lake.read_operation('orders', 'acme', 'op-2');

-- Refusals.
SELECT t.err($$SELECT lake.read('orders', 0)$$);
SELECT t.err($$SELECT lake.read('orders', -1)$$);
SELECT t.err($$SELECT lake.read('orders', NULL)$$);
SELECT t.err($$SELECT lake.read(NULL, 1)$$);
SELECT t.err($$SELECT lake.read('orders', 999)$$);
SELECT t.err($$SELECT lake.read('nope', 1)$$);
SELECT t.err($$SELECT lake.read_operation('orders', 'acme', 'never')$$);
SELECT t.err($$SELECT lake.read_operation('orders', NULL, 'op-1')$$);
SELECT t.err($$SELECT lake.read_operation('nope', 'acme', 'op-1')$$);

-- versions(): filtering and refusals.
SELECT version, operation_id FROM lake.versions('orders', 4);
SELECT count(*) FROM lake.versions('orders', 1000);
SELECT t.err($$SELECT * FROM lake.versions('orders', NULL)$$);
SELECT t.err($$SELECT * FROM lake.versions('orders', -1)$$);
SELECT t.err($$SELECT * FROM lake.versions(NULL)$$);
SELECT t.err($$SELECT * FROM lake.versions('nope')$$);
SELECT version, digest = sha256(lake.read('orders', version)) AS digest_ok
FROM lake.versions('orders') ORDER BY version;

-- Damage, repaired after each case. Version 6 of orders has three chunks:
-- the first inline, two in lake_data.chunk under the version's blob.
SELECT b.nchunks, b.blob AS blob6 FROM lake_data.version_blob b JOIN lake_data.dataset d ON d.id = b.dataset_id
WHERE d.name = 'orders' AND b.version = 6 \gset
\echo :nchunks
CREATE TEMP TABLE saved AS SELECT * FROM lake_data.chunk WHERE blob = :blob6;

-- A missing chunk.
DELETE FROM lake_data.chunk WHERE blob = :blob6 AND chunk_no = 1;
SELECT t.err($$SELECT lake.read('orders', 6)$$);
INSERT INTO lake_data.chunk SELECT * FROM saved WHERE chunk_no = 1;
-- The last chunk missing.
DELETE FROM lake_data.chunk WHERE blob = :blob6 AND chunk_no = 2;
SELECT t.err($$SELECT lake.read_operation('orders', 'acme', 'at-limit')$$);
INSERT INTO lake_data.chunk SELECT * FROM saved WHERE chunk_no = 2;
-- A corrupt compressed frame.
UPDATE lake_data.chunk SET data = overlay(data placing '\xffffffff'::bytea from 6)
WHERE blob = :blob6 AND chunk_no = 2;
SELECT t.err($$SELECT lake.read('orders', 6)$$);
-- An unknown encoding tag.
UPDATE lake_data.chunk c SET data = '\x00'::bytea || substr(s.data, 2)
FROM saved s WHERE c.blob = :blob6 AND c.chunk_no = 2 AND s.chunk_no = 2;
SELECT t.err($$SELECT lake.read('orders', 6)$$);
-- An empty stored chunk.
UPDATE lake_data.chunk SET data = ''::bytea WHERE blob = :blob6 AND chunk_no = 2;
SELECT t.err($$SELECT lake.read('orders', 6)$$);
-- A valid chunk from another place: right format, wrong bytes.
UPDATE lake_data.chunk SET data = t.raw_chunk('\x01') WHERE blob = :blob6 AND chunk_no = 2;
SELECT t.err($$SELECT lake.read('orders', 6)$$);
-- A chunk in lake_data.chunk is checked: the bare form of the same chunk
-- (tag in lower case, no checksum) is refused by its tag there.
UPDATE lake_data.chunk c SET data = set_byte(substr(s.data, 5), 0, get_byte(s.data, 0) + 32)
FROM saved s WHERE c.blob = :blob6 AND c.chunk_no = 2 AND s.chunk_no = 2;
SELECT t.err($$SELECT lake.read('orders', 6)$$);
UPDATE lake_data.chunk c SET data = s.data FROM saved s
WHERE c.blob = :blob6 AND c.chunk_no = 2 AND s.chunk_no = 2;
-- A well-formed raw inline chunk of other bytes: only the digest can tell.
UPDATE lake_data.version v SET data = t.bare_chunk('\xff') FROM lake_data.dataset d
WHERE d.id = v.dataset_id AND d.name = 'orders' AND v.version = 1;
SELECT t.err($$SELECT lake.read('orders', 1)$$);
UPDATE lake_data.version v SET data = t.bare_chunk('\x01') FROM lake_data.dataset d
WHERE d.id = v.dataset_id AND d.name = 'orders' AND v.version = 1;
-- An inline chunk of another length: the version's size is read from
-- chunk 0's header, so only the digest can tell.
UPDATE lake_data.version v SET data = t.bare_chunk('') FROM lake_data.dataset d
WHERE d.id = v.dataset_id AND d.name = 'orders' AND v.version = 1;
SELECT t.err($$SELECT lake.read('orders', 1)$$);
UPDATE lake_data.version v SET data = t.bare_chunk('\x01') FROM lake_data.dataset d
WHERE d.id = v.dataset_id AND d.name = 'orders' AND v.version = 1;
-- A chunk 0 whose header is unreadable: its size is unknown, so the
-- listing is XX001 and the read LK005, not a guess.
UPDATE lake_data.version v SET data = '\x7a'::bytea FROM lake_data.dataset d
WHERE d.id = v.dataset_id AND d.name = 'orders' AND v.version = 1;
SELECT t.err($$SELECT count(*) FROM lake.versions('orders')$$);
SELECT t.err($$SELECT lake.read('orders', 1)$$);
-- A version row's chunk 0 is read in either form, the one its tag names:
-- checked, as lake writes it, or bare, as earlier builds did.
UPDATE lake_data.version v SET data = t.raw_chunk('\x01') FROM lake_data.dataset d
WHERE d.id = v.dataset_id AND d.name = 'orders' AND v.version = 1;
SELECT t.err($$SELECT lake.read('orders', 1)$$);
UPDATE lake_data.version v SET data = t.bare_chunk('\x01') FROM lake_data.dataset d
WHERE d.id = v.dataset_id AND d.name = 'orders' AND v.version = 1;
-- A version_blob row with a negative size: damage, refused before any
-- buffer is sized from it.
UPDATE lake_data.version_blob SET bytes = -1 WHERE blob = :blob6;
SELECT t.err($$SELECT lake.read('orders', 6)$$);
UPDATE lake_data.version_blob SET bytes = 3145728 WHERE blob = :blob6;
-- An extra chunk beyond those the version declares.
INSERT INTO lake_data.chunk SELECT blob, 3, bytes, data FROM saved WHERE chunk_no = 2;
SELECT t.err($$SELECT lake.read('orders', 6)$$);
DELETE FROM lake_data.chunk WHERE blob = :blob6 AND chunk_no = 3;

-- Repaired: every version reads and verifies again.
SELECT version, length(lake.read('orders', version)) AS bytes
FROM lake.versions('orders') ORDER BY version;
