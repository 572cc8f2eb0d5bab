-- Operations are found by a 32-bit hash of (tenant, operation_id), which
-- can be inverted: a tenant could pile thousands of its operations under
-- one key, and every look-up for that key, by any tenant, would read them
-- all, under the dataset's lock when it looks again. A tenant's new
-- operation is refused (54000) once the key holds 16 of the tenant's
-- others; replays still answer, and other tenants' operations under the
-- key neither count nor are refused.
--
-- The ids below were made by inverting the hash (PostgreSQL's hash_bytes
-- and hash_combine) for the key 1281452901; the first query checks that
-- they do share it, so the test does not rest on this comment.
CREATE TEMP TABLE crowd(n int, tenant text, operation_id text);
INSERT INTO crowd VALUES
    (1, 't', '<d^IWL3k1:nl'),
    (2, 't', '7^f@5jc#V1.$'),
    (3, 't', '5oYBD;j=w$N*'),
    (4, 't', 'J;4qcK[rj+V5'),
    (5, 't', ',%62hE3<n0K('),
    (6, 't', 'N9wYfL1n9rjz'),
    (7, 't', 'X}Y):CY#TG.4'),
    (8, 't', 'z:G8vWHOTX<.'),
    (9, 't', ']t&o0]@7gj!c'),
    (10, 't', 'SP(#wh2m~aes'),
    (11, 't', 'F4I8MU?v=Ab5'),
    (12, 't', 'kECz<0;e+m4/'),
    (13, 't', '+}y~>:I${4w;'),
    (14, 't', 'plFA^I-3?H.*'),
    (15, 't', '{XtFNZTm]6n*'),
    (16, 't', 'QWsN/2vJX-?$'),
    (17, 't', '*WW>)eXd-{Tw'),
    (1, 'u', 'OIt)jb56LlbC'),
    (2, 'u', 'VY/0D&u?e0k;');
SELECT count(DISTINCT lake_data.operation_hash(tenant, operation_id)) AS keys,
       min(lake_data.operation_hash(tenant, operation_id)) AS key,
       count(*) AS ids
  FROM crowd;

SELECT lake.create_dataset('crowd');
-- Another tenant's operation under the key first: it does not count.
SELECT lake.append('crowd', 'u', operation_id, '\x75'::bytea) AS u1
  FROM crowd WHERE tenant = 'u' AND n = 1;
-- Sixteen of the tenant's operations under one key are taken.
SELECT count(lake.append('crowd', 't', operation_id, int4send(n))) AS taken,
       max(lake.append('crowd', 't', operation_id, int4send(n))) AS last_version
  FROM crowd WHERE tenant = 't' AND n <= 16;
-- The seventeenth is refused, in a single-shot append and at a staged
-- commit alike, and nothing is written.
SELECT lake.append('crowd', 't', operation_id, '\x11'::bytea)
  FROM crowd WHERE tenant = 't' AND n = 17;
\set VERBOSITY sqlstate
SELECT lake.append('crowd', 't', operation_id, '\x11'::bytea)
  FROM crowd WHERE tenant = 't' AND n = 17;
SELECT lake.begin_append('crowd', 't', operation_id) AS crowded_stage
  FROM crowd WHERE tenant = 't' AND n = 17 \gset
SELECT lake.append_chunk(:crowded_stage, 0, '\x11'::bytea);
SELECT lake.commit_append(:crowded_stage);
\set VERBOSITY default
SELECT lake.abort_append(:crowded_stage);
SELECT count(*) AS versions FROM lake.versions('crowd');
-- Replays of the sixteen still answer with their versions; a different
-- content is still LK001, not the key's refusal.
SELECT count(*) AS replayed FROM crowd
 WHERE tenant = 't' AND n <= 16
   AND lake.append('crowd', 't', operation_id, int4send(n)) = n + 1;
\set VERBOSITY sqlstate
SELECT lake.append('crowd', 't', operation_id, '\xff'::bytea)
  FROM crowd WHERE tenant = 't' AND n = 3;
\set VERBOSITY default
-- The other tenant is not refused under the key the first one filled.
SELECT lake.append('crowd', 'u', operation_id, '\x75'::bytea) AS u2
  FROM crowd WHERE tenant = 'u' AND n = 2;
-- The same ids elsewhere are another key: a new dataset takes them.
SELECT lake.create_dataset('crowd2');
SELECT lake.append('crowd2', 't', operation_id, '\x11'::bytea) AS elsewhere
  FROM crowd WHERE tenant = 't' AND n = 17;

-- A replay writes nothing (no transaction id is taken), for a one-chunk
-- payload and for one of several chunks (over 1 MB), whose replay must not
-- encode and write its chunks again. (Not the WAL position: other
-- processes write WAL meanwhile.)
SELECT lake.create_dataset('replays');
SELECT lake.append('replays', 'acme', 'small', '\x0102'::bytea) AS small;
SELECT lake.append('replays', 'acme', 'big', decode(repeat('ab', 1500000), 'hex')) AS big;
BEGIN;
SELECT lake.append('replays', 'acme', 'small', '\x0102'::bytea) AS small_replay;
SELECT lake.append('replays', 'acme', 'big', decode(repeat('ab', 1500000), 'hex')) AS big_replay;
SELECT pg_current_xact_id_if_assigned() IS NULL AS wrote_nothing;
COMMIT;
