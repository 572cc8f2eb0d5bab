-- Hostile SQL input: every public function of lake, called with NULLs,
-- empty strings, 1 MB strings, bytes that are not UTF-8, negative, zero and
-- huge numbers, malformed arrays and receipts, unknown names, and names
-- built to break any SQL they might be spliced into. Each refusal has its
-- own SQLSTATE and leaves no trace; each hostile name that is valid
-- round-trips unchanged. Objects of this file are named h_*; earlier files
-- ran in this database, so only before/after figures are compared.

-- t.trace(): everything a refusal could leave behind — rows of every lake
-- table, the chunks' sizes, stage activity, quarantines, held admission
-- permits and pending casts.
CREATE FUNCTION t.trace() RETURNS text LANGUAGE sql AS $$
SELECT concat_ws(' ',
    'datasets', (SELECT count(*) FROM lake_data.dataset),
    'versions', (SELECT count(*) FROM lake_data.version),
    'chunks', (SELECT count(*) || '/' || coalesce(sum(bytes), 0) || '/' || coalesce(sum(length(data)), 0)
               FROM lake_data.chunk),
    'stages', (SELECT count(*) || '/' || coalesce(md5(string_agg(id || '@' || touched_at, ',' ORDER BY id)), '-')
               FROM lake_data.stage),
    'grants', (SELECT count(*) FROM lake_data.tenant_grant),
    'lifecycles', (SELECT count(*) FROM lake_data.lifecycle),
    'owners', (SELECT count(*) || '/' || count(quarantine_reason) FROM lake_data.owner),
    'epoch', (SELECT epoch FROM lake_data.writer),
    'cycles', (SELECT count(*) FROM lake_data.cycle),
    'owner_blocks', (SELECT count(*) FROM lake_data.owner_block),
    'cast_operations', (SELECT count(*) FROM lake_data.cast_operation),
    'snapshots', (SELECT count(*) FROM lake_data.snapshot),
    'permits', (SELECT slots_in_use || '/' || bytes_reserved FROM lake.admission()),
    'pending', (SELECT casts_pending FROM lake.stats()))
$$;
-- t.same(before): 'no trace', or both figures when something changed.
CREATE FUNCTION t.same(before text) RETURNS text LANGUAGE sql AS $$
SELECT CASE WHEN t.trace() = before THEN 'no trace'
            ELSE 'TRACE: ' || before || ' -> ' || t.trace() END
$$;
-- t.state(sql): the SQLSTATE alone, where the message is not the point.
CREATE FUNCTION t.state(q text) RETURNS text LANGUAGE sql AS $$
SELECT split_part(t.err(q), ':', 1)
$$;
-- t.errs(sql): t.err with stage ids and receipt epochs masked; they
-- depend on what ran before this file.
CREATE FUNCTION t.errs(q text) RETURNS text LANGUAGE sql AS $$
SELECT regexp_replace(regexp_replace(t.err(q), 'stage [0-9]+', 'stage <id>', 'g'),
                      'receipt \([0-9]+,', 'receipt (<epoch>,', 'g')
$$;

-- The hostile values: 1 MB of text, 1 MB of bytes, bytes that are not
-- UTF-8, and digests of every wrong length.
CREATE TEMP TABLE h AS SELECT
    repeat('x', 1048576) AS mb,
    decode(repeat('fe', 1048576), 'hex') AS mb_bytes,
    '\xfffe80c0'::bytea AS not_utf8,
    ''::bytea AS d0,
    substr(sha256('h'), 1, 31) AS d31,
    sha256('h') || '\x00'::bytea AS d33;
SELECT octet_length(mb) AS mb, length(mb_bytes) AS mb_bytes, length(d0) AS d0, length(d31) AS d31,
       length(d33) AS d33 FROM h;
SELECT t.err($$SELECT convert_from(not_utf8, 'UTF8') FROM h$$) AS not_utf8_is_not_text;

-- Names that are valid (1-256 bytes) but hostile to any SQL splicing.
CREATE TEMP TABLE h_name (k int PRIMARY KEY, v text NOT NULL);
INSERT INTO h_name VALUES
    (1, $n$h_x'); DROP TABLE lake_data.dataset; --$n$),
    (2, $n$h_it's "quoted"$n$),
    (3, $n$h_back\slash\\ \x00 \'$n$),
    (4, $n$h_;;; SELECT 1;$n$),
    (5, $n$h_$$ $q$ %s %n %d %%$n$),
    (6, E'h_line\nbreak\ttab\r'),
    (7, 'h_ünïcødé 🐘'),
    (8, 'h_{a,b} NULL ()'),
    (9, 'h_ spaced '),
    (10, 'h_' || repeat('é', 127));       -- 256 bytes, 129 characters
SELECT k, octet_length(v) AS bytes FROM h_name ORDER BY k;

------------------------------------------------------------------------
-- Datasets and single-shot appends.
------------------------------------------------------------------------

-- Hostile names round-trip: a dataset, a tenant and an operation id each,
-- with a payload that is not UTF-8.
SELECT count(*) AS created FROM (SELECT lake.create_dataset(v) FROM h_name) c;
SELECT k, lake.append(v, v, v, convert_to(v, 'UTF8') || '\xfffe80c0'::bytea) AS version
FROM h_name ORDER BY k;
SELECT k,
       (SELECT count(*) FROM lake_data.dataset d WHERE d.name = v) AS dataset_rows,
       (SELECT tenant = v AND operation_id = v AND digest = sha256(convert_to(v, 'UTF8') || '\xfffe80c0'::bytea)
        FROM lake.versions(v)) AS listed_as_given,
       lake.read(v, 1) = convert_to(v, 'UTF8') || '\xfffe80c0'::bytea AS read_exact,
       lake.read_operation(v, v, v) = convert_to(v, 'UTF8') || '\xfffe80c0'::bytea AS read_operation_exact
FROM h_name ORDER BY k;
-- A replay with the hostile names finds the same version.
SELECT k, lake.append(v, v, v, convert_to(v, 'UTF8') || '\xfffe80c0'::bytea) AS replay
FROM h_name ORDER BY k;
-- Nothing was spliced: the tables the names try to drop are there.
SELECT count(*) AS lake_tables FROM pg_tables WHERE schemaname = 'lake_data';

-- Bytes that are not UTF-8, an empty payload and 1 MB + 1 byte (two
-- chunks) are stored and read back byte-exact; a supplied digest NULL is
-- the computed one.
SELECT lake.create_dataset('h_d');
SELECT lake.append('h_d', 'h_t', 'bytes', (SELECT not_utf8 FROM h)) AS version;
SELECT lake.append('h_d', 'h_t', 'empty', ''::bytea, NULL) AS version;
SELECT lake.append('h_d', 'h_t', 'mb', (SELECT mb_bytes || '\x80'::bytea FROM h),
                   (SELECT sha256(mb_bytes || '\x80'::bytea) FROM h)) AS version;
SELECT version, operation_id, bytes FROM lake.versions('h_d');
SELECT lake.read('h_d', 1) = (SELECT not_utf8 FROM h) AS bytes_exact,
       lake.read('h_d', 2) = ''::bytea AS empty_exact,
       md5(lake.read('h_d', 3)) = (SELECT md5(mb_bytes || '\x80'::bytea) FROM h) AS mb_exact,
       lake.read_operation('h_d', 'h_t', 'bytes') = '\xfffe80c0'::bytea AS by_operation;

SELECT t.trace() AS before \gset
-- create_dataset: NULL 22004; empty, 257 bytes (or 258 bytes in 130
-- characters) and 1 MB 22023; an existing name 42710.
SELECT t.err($$SELECT lake.create_dataset(NULL)$$);
SELECT t.err($$SELECT lake.create_dataset('')$$);
SELECT t.err($$SELECT lake.create_dataset(repeat('x', 257))$$);
SELECT t.err($$SELECT lake.create_dataset('h_' || repeat('é', 128))$$);
SELECT t.err($$SELECT lake.create_dataset(mb) FROM h$$);
SELECT t.err($$SELECT lake.create_dataset('h_d')$$);
SELECT t.err($q$SELECT lake.create_dataset(v) FROM h_name WHERE k = 1$q$);
-- append: each name NULL / empty / 1 MB / unknown; payload NULL; digests
-- of 0, 31, 33 bytes and 1 MB 22023; a digest of other bytes 22000; the
-- same operation with other bytes LK001.
SELECT t.err($$SELECT lake.append(NULL, 'h_t', 'x', '\x00')$$);
SELECT t.err($$SELECT lake.append('h_d', NULL, 'x', '\x00')$$);
SELECT t.err($$SELECT lake.append('h_d', 'h_t', NULL, '\x00')$$);
SELECT t.err($$SELECT lake.append('h_d', 'h_t', 'x', NULL)$$);
SELECT t.err($$SELECT lake.append(NULL, NULL, NULL, NULL, NULL)$$);
SELECT t.err($$SELECT lake.append('', 'h_t', 'x', '\x00')$$);
SELECT t.err($$SELECT lake.append('h_d', '', 'x', '\x00')$$);
SELECT t.err($$SELECT lake.append('h_d', 'h_t', '', '\x00')$$);
SELECT t.err($$SELECT lake.append(mb, 'h_t', 'x', '\x00') FROM h$$);
SELECT t.err($$SELECT lake.append('h_d', mb, 'x', '\x00') FROM h$$);
SELECT t.err($$SELECT lake.append('h_d', 'h_t', mb, '\x00') FROM h$$);
SELECT t.err($$SELECT lake.append('h_d', 'h_t', 'x', '\x00', d0) FROM h$$);
SELECT t.err($$SELECT lake.append('h_d', 'h_t', 'x', '\x00', d31) FROM h$$);
SELECT t.err($$SELECT lake.append('h_d', 'h_t', 'x', '\x00', d33) FROM h$$);
SELECT t.err($$SELECT lake.append('h_d', 'h_t', 'x', '\x00', mb_bytes) FROM h$$);
SELECT t.err($$SELECT lake.append('h_d', 'h_t', 'x', not_utf8, sha256(mb_bytes)) FROM h$$);
SELECT t.err($$SELECT lake.append('h_d', 'h_t', 'bytes', '\xfffe80c1')$$);
SELECT t.err($$SELECT lake.append('h_nope', 'h_t', 'x', '\x00')$$);
SELECT t.err($$SELECT lake.append('H_D', 'h_t', 'x', '\x00')$$);
SELECT t.err($$SELECT lake.append('h_d ', 'h_t', 'x', '\x00')$$);
-- A payload over lake.max_stream_bytes (3MB here): 54000.
SELECT t.err($$SELECT lake.append('h_d', 'h_t', 'x', mb_bytes || mb_bytes || mb_bytes || '\x00') FROM h$$);
-- read: dataset NULL / empty / 1 MB / unknown; version NULL 22004, 0 and
-- negative 22023, beyond the head (up to the largest bigint) 42704.
SELECT t.err($$SELECT lake.read(NULL, 1)$$);
SELECT t.err($$SELECT lake.read('h_d', NULL)$$);
SELECT t.err($$SELECT lake.read('', 1)$$);
SELECT t.err($$SELECT lake.read(mb, 1) FROM h$$);
SELECT t.err($$SELECT lake.read('h_nope', 1)$$);
SELECT t.err($$SELECT lake.read('h_d', 0)$$);
SELECT t.err($$SELECT lake.read('h_d', -1)$$);
SELECT t.err($$SELECT lake.read('h_d', -9223372036854775808)$$);
SELECT t.err($$SELECT lake.read('h_d', 4)$$);
SELECT t.err($$SELECT lake.read('h_d', 2147483648)$$);
SELECT t.err($$SELECT lake.read('h_d', 9223372036854775807)$$);
-- read_operation: each name NULL / empty / 1 MB; an unknown dataset or
-- operation 42704.
SELECT t.err($$SELECT lake.read_operation(NULL, 'h_t', 'bytes')$$);
SELECT t.err($$SELECT lake.read_operation('h_d', NULL, 'bytes')$$);
SELECT t.err($$SELECT lake.read_operation('h_d', 'h_t', NULL)$$);
SELECT t.err($$SELECT lake.read_operation('', 'h_t', 'bytes')$$);
SELECT t.err($$SELECT lake.read_operation('h_d', '', 'bytes')$$);
SELECT t.err($$SELECT lake.read_operation('h_d', 'h_t', '')$$);
SELECT t.err($$SELECT lake.read_operation(mb, 'h_t', 'bytes') FROM h$$);
SELECT t.err($$SELECT lake.read_operation('h_d', mb, 'bytes') FROM h$$);
SELECT t.err($$SELECT lake.read_operation('h_d', 'h_t', mb) FROM h$$);
SELECT t.err($$SELECT lake.read_operation('h_nope', 'h_t', 'bytes')$$);
SELECT t.err($$SELECT lake.read_operation('h_d', 'h_t', 'h_nope')$$);
SELECT t.err($$SELECT lake.read_operation('h_d', 'h_nope', 'bytes')$$);
SELECT t.err($q$SELECT lake.read_operation('h_d', 'h_t', v) FROM h_name WHERE k = 1$q$);
-- versions: dataset NULL / empty / 1 MB / unknown; after_version NULL
-- 22004, negative 22023; beyond the head an empty list.
SELECT t.err($$SELECT * FROM lake.versions(NULL)$$);
SELECT t.err($$SELECT * FROM lake.versions('')$$);
SELECT t.err($$SELECT lake.versions(mb) FROM h$$);
SELECT t.err($$SELECT * FROM lake.versions('h_nope')$$);
SELECT t.err($$SELECT * FROM lake.versions('h_d', NULL)$$);
SELECT t.err($$SELECT * FROM lake.versions('h_d', -1)$$);
SELECT t.err($$SELECT * FROM lake.versions('h_d', -9223372036854775808)$$);
SELECT count(*) AS above_head FROM lake.versions('h_d', 3);
SELECT count(*) AS above_huge FROM lake.versions('h_d', 9223372036854775807);
SELECT count(*) AS from_zero FROM lake.versions('h_d', 0);
-- None of the above left anything behind.
SELECT t.same(:'before');
SELECT count(*) AS h_d_versions FROM lake.versions('h_d');

------------------------------------------------------------------------
-- Staged appends.
------------------------------------------------------------------------

-- A stage with hostile names, chunks that are not UTF-8, sent out of
-- order, the last one at chunk_no 2: committed and read back exact.
SELECT lake.begin_append(v, v, v || '/staged') AS hs FROM h_name WHERE k = 1 \gset
SELECT lake.begin_append(v, v, v || '/staged') = :hs AS resumed FROM h_name WHERE k = 1;
SELECT lake.append_chunk(:hs, 2, (SELECT not_utf8 FROM h));
SELECT lake.append_chunk(:hs, 0, '\x80'::bytea);
SELECT lake.append_chunk(:hs, 1, ''::bytea);
SELECT lake.append_chunk(:hs, 2, (SELECT not_utf8 FROM h));   -- identical re-send
SELECT lake.commit_append(:hs, sha256('\x80fffe80c0'::bytea)) AS version;
SELECT version, tenant = v AS tenant_ok, operation_id = v || '/staged' AS operation_ok
FROM h_name, lake.versions(v) WHERE k = 1 ORDER BY version;
SELECT lake.read(v, 2) = '\x80fffe80c0'::bytea AS staged_exact FROM h_name WHERE k = 1;

-- An open stage to refuse things on: chunk 0 holds 1 MB.
SELECT lake.begin_append('h_d', 'h_t', 'staged') AS s \gset
SELECT lake.append_chunk(:s, 0, mb_bytes) FROM h;

SELECT t.trace() AS before \gset
-- begin_append: each name NULL / empty / 1 MB; an unknown dataset 42704.
SELECT t.err($$SELECT lake.begin_append(NULL, 'h_t', 'y')$$);
SELECT t.err($$SELECT lake.begin_append('h_d', NULL, 'y')$$);
SELECT t.err($$SELECT lake.begin_append('h_d', 'h_t', NULL)$$);
SELECT t.err($$SELECT lake.begin_append('', 'h_t', 'y')$$);
SELECT t.err($$SELECT lake.begin_append('h_d', '', 'y')$$);
SELECT t.err($$SELECT lake.begin_append('h_d', 'h_t', '')$$);
SELECT t.err($$SELECT lake.begin_append(mb, 'h_t', 'y') FROM h$$);
SELECT t.err($$SELECT lake.begin_append('h_d', mb, 'y') FROM h$$);
SELECT t.err($$SELECT lake.begin_append('h_d', 'h_t', mb) FROM h$$);
SELECT t.err($$SELECT lake.begin_append('h_nope', 'h_t', 'y')$$);
-- append_chunk: stage NULL 22004, 0 / negative 22023, unknown (up to the
-- largest bigint) 42704; chunk_no NULL 22004, negative 22023; data NULL
-- 22004; chunk 0 again with other bytes LK001; a stage over
-- lake.max_stream_bytes 54000.
SELECT t.err($$SELECT lake.append_chunk(NULL, 0, '\x00')$$);
SELECT t.err($$SELECT lake.append_chunk(0, 0, '\x00')$$);
SELECT t.err($$SELECT lake.append_chunk(-1, 0, '\x00')$$);
SELECT t.err($$SELECT lake.append_chunk(-9223372036854775808, 0, '\x00')$$);
SELECT t.err($$SELECT lake.append_chunk(9223372036854775807, 0, '\x00')$$);
SELECT t.errs(format('SELECT lake.append_chunk(%s, NULL, %L)', :s, '\x00'));
SELECT t.errs(format('SELECT lake.append_chunk(%s, -1, %L)', :s, '\x00'));
SELECT t.errs(format('SELECT lake.append_chunk(%s, -2147483648, %L)', :s, '\x00'));
SELECT t.errs(format('SELECT lake.append_chunk(%s, 1, NULL)', :s));
SELECT t.errs(format('SELECT lake.append_chunk(%s, 0, %L)', :s, '\xfffe80c0'));
SELECT t.errs(format('SELECT lake.append_chunk(%s, 1, mb_bytes || mb_bytes || %L) FROM h', :s, '\x00'));
SELECT t.errs(format('SELECT lake.append_chunk(%s, 2147483647, mb_bytes || mb_bytes || %L) FROM h', :s, '\x00'));
-- commit_append: stage NULL / 0 / negative / unknown; digests of 0, 31,
-- 33 bytes and 1 MB 22023; a digest of other bytes 22000.
SELECT t.err($$SELECT lake.commit_append(NULL)$$);
SELECT t.err($$SELECT lake.commit_append(0)$$);
SELECT t.err($$SELECT lake.commit_append(-1)$$);
SELECT t.err($$SELECT lake.commit_append(9223372036854775807)$$);
SELECT t.err($$SELECT lake.commit_append(9223372036854775807, sha256(''))$$);
SELECT t.errs(format('SELECT lake.commit_append(%s, d0) FROM h', :s));
SELECT t.errs(format('SELECT lake.commit_append(%s, d31) FROM h', :s));
SELECT t.errs(format('SELECT lake.commit_append(%s, d33) FROM h', :s));
SELECT t.errs(format('SELECT lake.commit_append(%s, mb_bytes) FROM h', :s));
SELECT t.errs(format('SELECT lake.commit_append(%s, sha256(not_utf8)) FROM h', :s));
-- abort_append: stage NULL / 0 / negative / unknown.
SELECT t.err($$SELECT lake.abort_append(NULL)$$);
SELECT t.err($$SELECT lake.abort_append(0)$$);
SELECT t.err($$SELECT lake.abort_append(-1)$$);
SELECT t.err($$SELECT lake.abort_append(9223372036854775807)$$);
-- The stage is as it was: one chunk of 1 MB, no new version.
SELECT t.same(:'before');
SELECT count(*) AS open, sum(c.bytes) AS staged_bytes
FROM lake_data.stage s JOIN lake_data.chunk c ON c.blob = s.id WHERE s.id = :s;

-- A chunk at the largest chunk_no is accepted; the commit then names the
-- first missing chunk (22023) and changes nothing.
SELECT lake.append_chunk(:s, 2147483647, '\x01'::bytea);
SELECT t.trace() AS before \gset
SELECT t.errs(format('SELECT lake.commit_append(%s)', :s));
SELECT t.same(:'before');
-- Aborting drops the stage and its chunks; the aborted stage is then
-- unknown to every stage function.
SELECT lake.abort_append(:s);
SELECT count(*) AS chunks_left FROM lake_data.chunk WHERE blob = :s;
SELECT t.trace() AS before \gset
SELECT t.errs(format('SELECT lake.append_chunk(%s, 0, %L)', :s, '\x00'));
SELECT t.errs(format('SELECT lake.commit_append(%s)', :s));
SELECT t.errs(format('SELECT lake.abort_append(%s)', :s));
SELECT t.same(:'before');

------------------------------------------------------------------------
-- Tenants.
------------------------------------------------------------------------

-- A role whose name is hostile, granted a hostile tenant: it appends and
-- reads exactly that tenant.
CREATE ROLE "h_r'ole; DROP ROLE postgres; --" LOGIN;
GRANT USAGE ON SCHEMA lake, t TO "h_r'ole; DROP ROLE postgres; --";
GRANT SELECT ON h, h_name TO "h_r'ole; DROP ROLE postgres; --";
SELECT lake.grant_tenant($r$"h_r'ole; DROP ROLE postgres; --"$r$, v) FROM h_name WHERE k = 1;
SELECT tenant = (SELECT v FROM h_name WHERE k = 1) AS tenant_as_given,
       role::regrole::text AS role
FROM lake_data.tenant_grant WHERE role = $r$"h_r'ole; DROP ROLE postgres; --"$r$::regrole;
SET ROLE "h_r'ole; DROP ROLE postgres; --";
SELECT lake.append(v, v, v || '/by role', '\xff'::bytea) AS version FROM h_name WHERE k = 1;
SELECT lake.read_operation(v, v, v || '/by role') AS payload FROM h_name WHERE k = 1;
SELECT t.err($q$SELECT lake.append(v, 'h_t', 'x', '\xff') FROM h_name WHERE k = 1$q$);
SELECT t.err($q$SELECT lake.read(v, 1) FROM h_name WHERE k = 2$q$);
RESET ROLE;

SELECT t.trace() AS before \gset
-- grant_tenant / revoke_tenant: role NULL 22004; tenant NULL 22004, empty
-- and 1 MB 22023; an unknown role 42704, by name or by OID.
SELECT t.err($$SELECT lake.grant_tenant(NULL, 'h_t')$$);
SELECT t.err($$SELECT lake.grant_tenant(current_user::regrole, NULL)$$);
SELECT t.err($$SELECT lake.grant_tenant(current_user::regrole, '')$$);
SELECT t.err($$SELECT lake.grant_tenant(current_user::regrole, mb) FROM h$$);
SELECT t.err($$SELECT lake.grant_tenant('h_no_such_role', 'h_t')$$);
SELECT t.err($$SELECT lake.grant_tenant('"h_r''ole"', 'h_t')$$);
SELECT t.state($$SELECT lake.grant_tenant(4294967295::oid::regrole, 'h_t')$$) AS unknown_role_oid;
SELECT t.state($$SELECT lake.grant_tenant(0::oid::regrole, 'h_t')$$) AS invalid_role_oid;
SELECT t.err($$SELECT lake.revoke_tenant(NULL, 'h_t')$$);
SELECT t.err($$SELECT lake.revoke_tenant(current_user::regrole, NULL)$$);
SELECT t.err($$SELECT lake.revoke_tenant(current_user::regrole, '')$$);
SELECT t.err($$SELECT lake.revoke_tenant(current_user::regrole, mb) FROM h$$);
SELECT t.err($$SELECT lake.revoke_tenant('h_no_such_role', 'h_t')$$);
-- Revoking a grant that does not exist changes nothing.
SELECT t.err($$SELECT lake.revoke_tenant(current_user::regrole, 'h_never_granted')$$);
SELECT t.same(:'before');

-- The revoke takes exactly the hostile tenant away.
SELECT lake.revoke_tenant($r$"h_r'ole; DROP ROLE postgres; --"$r$, v) FROM h_name WHERE k = 1;
SELECT count(*) AS grants_left FROM lake_data.tenant_grant
WHERE role = $r$"h_r'ole; DROP ROLE postgres; --"$r$::regrole;
SET ROLE "h_r'ole; DROP ROLE postgres; --";
SELECT t.err($q$SELECT lake.read_operation(v, v, v || '/by role') FROM h_name WHERE k = 1$q$);
RESET ROLE;
DROP OWNED BY "h_r'ole; DROP ROLE postgres; --";
DROP ROLE "h_r'ole; DROP ROLE postgres; --";

------------------------------------------------------------------------
-- Lifecycles and owners.
------------------------------------------------------------------------

-- A lifecycle whose name and phases are hostile: quotes, a comma, braces,
-- a backslash, and a phase called NULL (the word, not the value).
SELECT lake.define_lifecycle($n$h_l'); DROP TABLE lake_data.owner; --$n$, 'NULL',
         ARRAY[['NULL', 'a"b'], ['a"b', 'c,d'], ['c,d', '{e}'], ['{e}', $p$f\g$p$], [$p$f\g$p$, 'NULL']]);
SELECT initial_phase, phases = ARRAY['NULL', 'a"b', 'c,d', '{e}', $p$f\g$p$] AS phases_as_given,
       array_ndims(edges) AS ndims, edges[5][2] AS last_edge_to
FROM lake_data.lifecycle WHERE name = $n$h_l'); DROP TABLE lake_data.owner; --$n$;
-- A self-loop and shifted array bounds are accepted as given.
SELECT lake.define_lifecycle('h_loop', 'a', '[0:0][5:6]={{a,a}}');

-- Owners with hostile names (1-63 bytes) in that lifecycle.
CREATE TEMP TABLE h_owner AS SELECT k, v FROM h_name WHERE octet_length(v) < 64;
INSERT INTO h_owner VALUES (10, 'h_' || repeat('é', 30) || 'x');   -- 63 bytes
SELECT k, octet_length(v) AS bytes FROM h_owner ORDER BY k;
SELECT count(*) AS created
FROM (SELECT lake.create_owner(v, $n$h_l'); DROP TABLE lake_data.owner; --$n$) FROM h_owner) c;
SELECT lake.create_owner('h_o');
SELECT lake.create_owner('h_loop_owner', 'h_loop');
SELECT k, phase, lap, position, pending, quarantined, reason FROM h_owner, lake.owner_state(v) ORDER BY k;

SELECT t.trace() AS before \gset
-- define_lifecycle: name and initial_phase NULL 22004, empty, 64 bytes and
-- 1 MB 22023; edges NULL 22004; empty, 1-D, 3-D, 2-D of 1 or 3 columns
-- 22023; NULL phases 22004; empty or over-long phases 22023; the initial
-- phase not among the edges 22023; a duplicate edge 22023; more than 256
-- phases 54000; an existing name 42710.
SELECT t.err($$SELECT lake.define_lifecycle(NULL, 'a', '{{a,b}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', NULL, '{{a,b}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', 'a', NULL)$$);
SELECT t.err($$SELECT lake.define_lifecycle('', 'a', '{{a,b}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', '', '{{a,b}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle(repeat('l', 64), 'a', '{{a,b}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', repeat('a', 64), ARRAY[[repeat('a', 64), 'b']])$$);
SELECT t.err($$SELECT lake.define_lifecycle(mb, 'a', '{{a,b}}') FROM h$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', mb, '{{a,b}}') FROM h$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', 'a', '{}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', 'a', ARRAY[]::text[])$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', 'a', '{a,b}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', 'a', '{{a}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', 'a', '{{a,b,c}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', 'a', '{{a,b,c},{b,c,a}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', 'a', '{{{a,b}}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', 'a', '{{{a,b},{b,a}},{{a,b},{b,a}}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', 'a', '{{a,NULL}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', 'a', '{{NULL,NULL}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', 'a', '{{a,b},{b,""}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', 'a', ARRAY[['a', repeat('b', 64)]])$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', 'a', ARRAY[['a', mb]]) FROM h$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', 'a', '{{b,c},{c,b}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', 'A', '{{a,b},{b,a}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', 'a', '{{a,b},{b,a},{a,b}}')$$);
SELECT t.err($$SELECT lake.define_lifecycle('h_x', 'p0',
                 (SELECT array_agg(ARRAY['p' || i, 'p' || (i + 1)]) FROM generate_series(0, 256) i))$$);
SELECT t.err($$SELECT lake.define_lifecycle('kanban', 'a', '{{a,b}}')$$);
SELECT t.err($q$SELECT lake.define_lifecycle($n$h_l'); DROP TABLE lake_data.owner; --$n$, 'a', '{{a,b}}')$q$);
-- create_owner: owner NULL 22004, empty, 64 bytes (also in 33
-- characters) and 1 MB 22023; lifecycle NULL 22004 (omitted it is
-- kanban), empty / 64 bytes / 1 MB 22023, unknown 42704; an existing
-- owner 42710.
SELECT t.err($$SELECT lake.create_owner(NULL)$$);
SELECT t.err($$SELECT lake.create_owner('')$$);
SELECT t.err($$SELECT lake.create_owner(repeat('o', 64))$$);
SELECT t.err($$SELECT lake.create_owner('h_' || repeat('é', 31))$$);
SELECT t.err($$SELECT lake.create_owner(mb) FROM h$$);
SELECT t.err($$SELECT lake.create_owner('h_y', NULL)$$);
SELECT t.err($$SELECT lake.create_owner('h_y', '')$$);
SELECT t.err($$SELECT lake.create_owner('h_y', repeat('l', 64))$$);
SELECT t.err($$SELECT lake.create_owner('h_y', mb) FROM h$$);
SELECT t.err($$SELECT lake.create_owner('h_y', 'h_nope')$$);
SELECT t.err($$SELECT lake.create_owner('h_y', 'Kanban')$$);
SELECT t.err($$SELECT lake.create_owner('h_o')$$);
SELECT t.err($q$SELECT lake.create_owner(v) FROM h_owner WHERE k = 1$q$);
SELECT t.same(:'before');

------------------------------------------------------------------------
-- Casts.
------------------------------------------------------------------------

-- Hostile owners walk their hostile lifecycle, with hostile operation ids
-- and payloads that are not UTF-8, and come back to the phase called
-- NULL on lap 1.
SELECT k, (lake.cast(v, 'NULL', 'a"b', (SELECT not_utf8 FROM h), 0, v)).seq > 0 AS accepted
FROM h_owner ORDER BY k;
SELECT k, (lake.cast(v, 'a"b', 'c,d', NULL, NULL, v || '/2')).seq > 0 AS accepted
FROM h_owner ORDER BY k;
SELECT k, (lake.cast(v, NULL, NULL, ''::bytea)).seq > 0 AS accepted FROM h_owner ORDER BY k;
SELECT k, (lake.cast(v, 'c,d', '{e}')).seq > 0 AS accepted FROM h_owner ORDER BY k;
SELECT k, (lake.cast(v, '{e}', $p$f\g$p$)).seq > 0 AS accepted FROM h_owner ORDER BY k;
SELECT k, (c).position AS durable_at
FROM h_owner, lake.cast_durable(v, $p$f\g$p$, 'NULL', '\x00c0'::bytea, 0, v || E'/\\;''') c ORDER BY k;
SELECT k, phase, phase IS NOT NULL AS the_word, lap, position, pending, quarantined FROM h_owner, lake.owner_state(v) ORDER BY k;
-- A replay with a hostile operation id returns the original receipt.
SELECT k, lake.cast(v, 'NULL', 'a"b', (SELECT not_utf8 FROM h), 0, v) = (tr.epoch, tr.seq) AS same_receipt
FROM h_owner, lake.trajectory(v) tr WHERE tr.position = 1 ORDER BY k;
-- The trajectory and the log give back every name, phase, payload and
-- operation id exactly as given.
SELECT k, count(*) AS steps,
       bool_and(CASE tr.position
                WHEN 1 THEN from_phase = 'NULL' AND to_phase = 'a"b' AND payload = '\xfffe80c0' AND operation_id = v
                WHEN 2 THEN from_phase = 'a"b' AND to_phase = 'c,d' AND payload IS NULL AND operation_id = v || '/2'
                WHEN 3 THEN from_phase IS NULL AND to_phase IS NULL AND payload = '' AND operation_id IS NULL
                WHEN 4 THEN from_phase = 'c,d' AND to_phase = '{e}'
                WHEN 5 THEN from_phase = '{e}' AND to_phase = $p$f\g$p$
                WHEN 6 THEN from_phase = $p$f\g$p$ AND to_phase = 'NULL' AND payload = '\x00c0'
                            AND operation_id = v || E'/\\;''' AND lap = 1
                END) AS exact
FROM h_owner, lake.trajectory(v) tr GROUP BY k ORDER BY k;
SELECT o.k, count(*) AS logged
FROM h_owner o JOIN lake.log() l ON l.owner = o.v GROUP BY o.k ORDER BY o.k;
-- The self-loop lifecycle: a -> a returns to the initial phase, a lap.
SELECT (lake.cast_durable('h_loop_owner', 'a', 'a')).position;
SELECT phase, lap FROM lake.owner_state('h_loop_owner');

-- A pending cast to refuse things against: h_o is projected in
-- CognitiveWork, lap 0, its cast 'h_op' pending.
CREATE TEMP TABLE h_rc AS SELECT lake.cast('h_o', 'Planning', 'CognitiveWork', NULL, NULL, 'h_op') AS r;
SELECT phase, lap, position, pending FROM lake.owner_state('h_o');

SELECT t.trace() AS before \gset
-- cast and cast_durable: owner NULL 22004, empty, 64 bytes and 1 MB
-- 22023, unknown 42704; a phase empty, 64 bytes or 1 MB 22023, alone
-- 22023, unknown LK003, stale LK002; expected_lap negative 22023, not the
-- lap LK004; operation_id empty or 1 MB 22023, replayed with other
-- content LK001; a payload over a quarter of the cycle buffer 54000.
SELECT t.err($$SELECT lake.cast(NULL, NULL, NULL)$$);
SELECT t.err($$SELECT lake.cast('', NULL, NULL)$$);
SELECT t.err($$SELECT lake.cast(repeat('o', 64), NULL, NULL)$$);
SELECT t.err($$SELECT lake.cast(mb, NULL, NULL) FROM h$$);
SELECT t.err($$SELECT lake.cast('h_nope', NULL, NULL)$$);
SELECT t.err($$SELECT lake.cast('H_O', NULL, NULL)$$);
SELECT t.err($$SELECT lake.cast('h_o', '', 'Evaluation')$$);
SELECT t.err($$SELECT lake.cast('h_o', 'CognitiveWork', '')$$);
SELECT t.err($$SELECT lake.cast('h_o', repeat('p', 64), 'Evaluation')$$);
SELECT t.err($$SELECT lake.cast('h_o', 'CognitiveWork', mb) FROM h$$);
SELECT t.err($$SELECT lake.cast('h_o', 'CognitiveWork', NULL)$$);
SELECT t.err($$SELECT lake.cast('h_o', NULL, 'Evaluation')$$);
SELECT t.err($$SELECT lake.cast('h_o', 'CognitiveWork', 'evaluation')$$);
SELECT t.err($$SELECT lake.cast('h_o', 'CognitiveWork', 'Evaluation; DROP TABLE lake_data.cycle')$$);
SELECT t.err($$SELECT lake.cast('h_o', 'Planning', 'CognitiveWork')$$);
SELECT t.err($$SELECT lake.cast('h_o', 'CognitiveWork', 'Evaluation', NULL, -1)$$);
SELECT t.err($$SELECT lake.cast('h_o', 'CognitiveWork', 'Evaluation', NULL, -9223372036854775808)$$);
SELECT t.err($$SELECT lake.cast('h_o', 'CognitiveWork', 'Evaluation', NULL, 1)$$);
SELECT t.err($$SELECT lake.cast('h_o', 'CognitiveWork', 'Evaluation', NULL, 9223372036854775807)$$);
SELECT t.err($$SELECT lake.cast('h_o', NULL, NULL, NULL, NULL, '')$$);
SELECT t.err($$SELECT lake.cast('h_o', NULL, NULL, NULL, NULL, repeat('i', 257))$$);
SELECT t.err($$SELECT lake.cast('h_o', NULL, NULL, NULL, NULL, mb) FROM h$$);
SELECT t.err($$SELECT lake.cast('h_o', 'Planning', 'CognitiveWork', '\x00', NULL, 'h_op')$$);
SELECT t.err($$SELECT lake.cast('h_o', NULL, NULL, NULL, NULL, 'h_op')$$);
SELECT t.err($$SELECT lake.cast('h_o', NULL, NULL, decode(repeat('00', 4 * 1024 * 1024 + 1), 'hex'))$$);
SELECT t.err($$SELECT lake.cast_durable(NULL, NULL, NULL)$$);
SELECT t.err($$SELECT lake.cast_durable('', NULL, NULL)$$);
SELECT t.err($$SELECT lake.cast_durable(mb, NULL, NULL) FROM h$$);
SELECT t.err($$SELECT lake.cast_durable('h_nope', NULL, NULL)$$);
SELECT t.err($$SELECT lake.cast_durable('h_o', '', 'Evaluation')$$);
SELECT t.err($$SELECT lake.cast_durable('h_o', 'CognitiveWork', mb) FROM h$$);
SELECT t.err($$SELECT lake.cast_durable('h_o', NULL, 'Evaluation')$$);
SELECT t.err($$SELECT lake.cast_durable('h_o', 'CognitiveWork', 'Nowhere')$$);
SELECT t.err($$SELECT lake.cast_durable('h_o', 'Planning', 'CognitiveWork')$$);
SELECT t.err($$SELECT lake.cast_durable('h_o', 'CognitiveWork', 'Evaluation', NULL, -1)$$);
SELECT t.err($$SELECT lake.cast_durable('h_o', 'CognitiveWork', 'Evaluation', NULL, 9223372036854775807)$$);
SELECT t.err($$SELECT lake.cast_durable('h_o', NULL, NULL, NULL, NULL, '')$$);
SELECT t.err($$SELECT lake.cast_durable('h_o', NULL, NULL, NULL, NULL, mb) FROM h$$);
SELECT t.err($$SELECT lake.cast_durable('h_o', NULL, NULL, '\x01', NULL, 'h_op')$$);
SELECT t.err($$SELECT lake.cast_durable('h_o', NULL, NULL, decode(repeat('00', 4 * 1024 * 1024 + 1), 'hex'))$$);
-- await_durable: the receipt NULL, or with a NULL field, 22004; a receipt
-- never issued — seq 0, negative or beyond the last, epoch not begun,
-- zero or negative — 22023; timeout_ms negative 22023.
SELECT t.err($$SELECT lake.await_durable(NULL)$$);
SELECT t.err($$SELECT lake.await_durable(NULL, 0)$$);
SELECT t.err($$SELECT lake.await_durable(ROW(NULL, NULL)::lake.receipt)$$);
SELECT t.err($$SELECT lake.await_durable(ROW(NULL, (r).seq)::lake.receipt) FROM h_rc$$);
SELECT t.err($$SELECT lake.await_durable(ROW((r).epoch, NULL)::lake.receipt) FROM h_rc$$);
SELECT t.err($$SELECT lake.await_durable(r, -1) FROM h_rc$$);
SELECT t.err($$SELECT lake.await_durable(r, -2147483648) FROM h_rc$$);
SELECT t.errs($$SELECT lake.await_durable(ROW((r).epoch, 0)::lake.receipt, 0) FROM h_rc$$);
SELECT t.errs($$SELECT lake.await_durable(ROW((r).epoch, -1)::lake.receipt, 0) FROM h_rc$$);
SELECT t.errs($$SELECT lake.await_durable(ROW((r).epoch, 9223372036854775807)::lake.receipt, 0) FROM h_rc$$);
SELECT t.errs($$SELECT lake.await_durable(ROW((r).epoch + 1, 1)::lake.receipt, 0) FROM h_rc$$);
SELECT t.err($$SELECT lake.await_durable(ROW(2147483647, 1)::lake.receipt, 0)$$);
SELECT t.state($$SELECT lake.await_durable(ROW(0, 1)::lake.receipt, 0)$$) AS epoch_zero;
SELECT t.state($$SELECT lake.await_durable(ROW(-1, 1)::lake.receipt, 0)$$) AS epoch_negative;
SELECT t.state($$SELECT lake.await_durable(ROW(-2147483648, -9223372036854775808)::lake.receipt, 0)$$) AS both_smallest;
-- owner_state: owner NULL 22004, empty / 64 bytes / 1 MB 22023, unknown 42704.
SELECT t.err($$SELECT * FROM lake.owner_state(NULL)$$);
SELECT t.err($$SELECT * FROM lake.owner_state('')$$);
SELECT t.err($$SELECT * FROM lake.owner_state(repeat('o', 64))$$);
SELECT t.err($$SELECT lake.owner_state(mb) FROM h$$);
SELECT t.err($$SELECT * FROM lake.owner_state('h_nope')$$);
SELECT t.err($q$SELECT * FROM lake.owner_state($n$h_x'); DROP TABLE lake_data.dataset; -$n$)$q$);
-- Nothing queued, nothing moved.
SELECT t.same(:'before');
SELECT phase, lap, position, pending FROM lake.owner_state('h_o');

-- The pending receipt becomes durable; a huge timeout, or none, answers
-- at once for a durable receipt.
SELECT (lake.await_durable(r, 2147483647)).position AS position FROM h_rc;
SELECT (lake.await_durable(r, NULL)).position AS position FROM h_rc;
SELECT (lake.await_durable(r)).position AS position FROM h_rc;

------------------------------------------------------------------------
-- Sealed history: trajectory, log, cycles; seal, checkpoint, recover.
------------------------------------------------------------------------

SELECT t.trace() AS before \gset
-- trajectory: owner NULL 22004, empty / 64 bytes / 1 MB 22023, unknown
-- 42704; after_position NULL 22004, negative 22023; beyond the end empty.
SELECT t.err($$SELECT * FROM lake.trajectory(NULL)$$);
SELECT t.err($$SELECT * FROM lake.trajectory('')$$);
SELECT t.err($$SELECT * FROM lake.trajectory(repeat('o', 64))$$);
SELECT t.err($$SELECT lake.trajectory(mb) FROM h$$);
SELECT t.err($$SELECT * FROM lake.trajectory('h_nope')$$);
SELECT t.err($$SELECT * FROM lake.trajectory('h_o', NULL)$$);
SELECT t.err($$SELECT * FROM lake.trajectory('h_o', -1)$$);
SELECT t.err($$SELECT * FROM lake.trajectory('h_o', -9223372036854775808)$$);
SELECT count(*) AS from_zero, count(*) FILTER (WHERE position > 1) AS above_one FROM lake.trajectory('h_o', 0);
SELECT count(*) AS above_huge FROM lake.trajectory('h_o', 9223372036854775807);
-- log and cycles: after_cycle NULL 22004, negative 22023; beyond the head
-- empty.
SELECT t.err($$SELECT * FROM lake.log(NULL)$$);
SELECT t.err($$SELECT * FROM lake.log(-1)$$);
SELECT t.err($$SELECT * FROM lake.log(-9223372036854775808)$$);
SELECT t.err($$SELECT * FROM lake.cycles(NULL)$$);
SELECT t.err($$SELECT * FROM lake.cycles(-1)$$);
SELECT t.err($$SELECT * FROM lake.cycles(-9223372036854775808)$$);
SELECT count(*) AS log_above_huge FROM lake.log(9223372036854775807);
SELECT count(*) AS cycles_above_huge FROM lake.cycles(9223372036854775807);
SELECT (SELECT count(*) FROM lake.log(0)) = (SELECT sum(casts) FROM lake.cycles(0)) AS log_matches_cycles;
-- recover and release_owner: owner empty / 64 bytes / 1 MB 22023 (NULL is
-- every owner for recover, 22004 for release_owner); an unknown owner
-- 42704. seal, checkpoint, recover, release_owner and rebuild_owner_index
-- refuse a transaction block (25001) before doing anything.
SELECT t.err($$SELECT * FROM lake.recover('')$$);
SELECT t.err($$SELECT * FROM lake.recover(repeat('o', 64))$$);
SELECT t.err($$SELECT lake.recover(mb) FROM h$$);
SELECT t.err($$SELECT lake.release_owner(NULL)$$);
SELECT t.err($$SELECT lake.release_owner('')$$);
SELECT t.err($$SELECT lake.release_owner(repeat('o', 64))$$);
SELECT t.err($$SELECT lake.release_owner(mb) FROM h$$);
SELECT t.err($$SELECT lake.seal()$$);
SELECT t.err($$SELECT lake.checkpoint()$$);
SELECT t.err($$SELECT lake.rebuild_owner_index()$$);
SELECT t.err($$SELECT * FROM lake.recover('h_o')$$);
SELECT t.err($$SELECT lake.release_owner('h_o')$$);
\set VERBOSITY sqlstate
SELECT * FROM lake.recover('h_nope');
SELECT * FROM lake.recover('H_O');
SELECT lake.release_owner('h_nope');
\set VERBOSITY default
SELECT t.same(:'before');

-- recover and release_owner take the hostile names as given: nothing to
-- apply, nothing quarantined.
SELECT o.k, r.owner = o.v AS same_name, r.applied, r.position, r.quarantined
FROM h_owner o, lake.recover(o.v) r ORDER BY o.k;
SELECT count(*) AS hostile_owners_recovered, sum(r.applied) AS applied, bool_or(r.quarantined) AS quarantined
FROM lake.recover(NULL) r WHERE r.owner IN (SELECT v FROM h_owner);
SELECT lake.release_owner(v) FROM h_owner WHERE k = 1;
-- seal: NULL when nothing is pending; a checkpoint covers the head.
SELECT lake.seal() IS NULL AS nothing_pending;
SELECT lake.checkpoint() = (SELECT max(cycle) FROM lake.cycles()) AS covers_the_head;
SELECT last_snapshot = (SELECT max(cycle) FROM lake.cycles()) AS counted FROM lake.stats();
-- A checkpoint whose statement then fails writes no snapshot, and the
-- worker's count of cycles since the last one is not reset by it.
SELECT lake.create_owner('h_checkpoint');
SELECT (lake.cast_durable('h_checkpoint', NULL, NULL)).cycle > last_snapshot AS newer_cycle FROM lake.stats();
SELECT lake.checkpoint(), 1 / (random() < 0)::int AS failed_after;
SELECT last_snapshot < (SELECT max(cycle) FROM lake.cycles()) AS not_counted,
       (SELECT max(cycle) FROM lake_data.snapshot) < (SELECT max(cycle) FROM lake.cycles()) AS not_written
FROM lake.stats();

------------------------------------------------------------------------
-- admission() and stats(): no arguments; one row; nothing held.
------------------------------------------------------------------------
SELECT count(*) AS rows, bool_and(slots_in_use = 0 AND bytes_reserved = 0) AS nothing_held,
       bool_and(max_stream_bytes = 3 * 1024 * 1024) AS stream_limit
FROM lake.admission();
SELECT count(*) AS rows, bool_and(casts_pending = 0) AS nothing_pending,
       bool_and(worker_state = 'serving') AS serving
FROM lake.stats();
SELECT t.err($$SELECT lake.admission(NULL)$$);
SELECT t.err($$SELECT lake.stats(NULL)$$);

-- Every public function was called above.
SELECT p.proname
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = 'lake' AND p.proname NOT IN ('lifecycle_changed', 'lifecycle_check', 'writer_merge')
ORDER BY p.proname;

-- A session started with ignore_system_indexes (any role may set it at
-- its start): lake's tables are not catalogs, and its scans of them do
-- not warn (a warning per scan, per cycle of a log read, before).
CREATE ROLE h_isi_role;
GRANT USAGE ON SCHEMA lake TO h_isi_role;
SELECT lake.grant_tenant('h_isi_role', 'acme');
\c "dbname=contrib_regression options='-c ignore_system_indexes=on'"
SHOW ignore_system_indexes;
SELECT lake.create_dataset('h_isi');
SELECT lake.append('h_isi', 'acme', 'isi-1', '\x01'::bytea) AS v1,
       lake.append('h_isi', 'acme', 'isi-1', '\x01'::bytea) AS replay;
SELECT lake.read('h_isi', 1) AS read, count(*) AS versions FROM lake.versions('h_isi');
-- A staged append of two chunks and its read (the chunks' index), an
-- append as a role granted the tenant (the grants' index), a recovery
-- (the registry's index).
SELECT lake.begin_append('h_isi', 'acme', 'isi-staged') AS isi_stage \gset
SELECT lake.append_chunk(:isi_stage, 0, '\x0a'::bytea), lake.append_chunk(:isi_stage, 1, '\x0b'::bytea);
SELECT lake.commit_append(:isi_stage) AS staged;
SELECT lake.read('h_isi', 2) AS staged_read;
SET ROLE h_isi_role;
SELECT lake.append('h_isi', 'acme', 'isi-granted', '\x0c'::bytea) AS granted;
RESET ROLE;
SELECT count(*) > 0 AS recovered FROM lake.recover();
SELECT lake.create_owner('h_isi_owner');
SELECT (lake.cast_durable('h_isi_owner', 'Planning', 'CognitiveWork', operation_id => 'isi-op')).position AS durable;
SELECT lake.cast('h_isi_owner', 'Planning', 'CognitiveWork', operation_id => 'isi-op') IS NOT NULL AS retried;
-- From the owner's cycle on: a record stored out of line is read through
-- its TOAST index, which PostgreSQL's own detoasting scans as a catalog's
-- (and warns of, for any table's values).
SELECT cycle - 1 AS isi_after FROM lake.trajectory('h_isi_owner') \gset
SELECT count(*) AS landings FROM lake.log(:isi_after);
SELECT count(*) AS steps FROM lake.trajectory('h_isi_owner');
SELECT count(*) > 0 AS cycles FROM lake.cycles(0);
\c "dbname=contrib_regression options=''"
SHOW ignore_system_indexes;
SELECT lake.revoke_tenant('h_isi_role', 'acme');
DROP OWNED BY h_isi_role;
DROP ROLE h_isi_role;
