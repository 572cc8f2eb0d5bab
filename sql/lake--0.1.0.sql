-- lake 0.1.0: idempotent versioned appends (single-shot and staged), tenants,
-- lock-free admission, and cycle-coalesced persistence of owner casts.
\echo Use "CREATE EXTENSION lake" to load this file. \quit

-- The worker serves one database (lake.database); the extension lives only
-- there, so a cast or a seal never lands where no worker will see it.
DO $$
DECLARE
    served text := pg_catalog.current_setting('lake.database', true);
BEGIN
    IF served IS NOT NULL AND served OPERATOR(pg_catalog.<>) pg_catalog.current_database() THEN
        RAISE EXCEPTION USING
            ERRCODE = '55000',
            MESSAGE = pg_catalog.format('lake can only be installed in database "%s"', served),
            DETAIL = pg_catalog.format('The lake worker serves lake.database = "%s"; this is database "%s".',
                                       served, pg_catalog.current_database()),
            HINT = 'Create the extension in that database, or set lake.database in postgresql.conf and restart.';
    END IF;
END
$$;

-- The extension's owner (pg_extension.extowner) is the role installing it,
-- and lake runs its table access as that role. A schema "lake" made
-- beforehand by someone else would hand its creator objects inside lake's
-- namespace: refuse to install into it.
DO $$
BEGIN
    IF (SELECT n.nspowner FROM pg_catalog.pg_namespace n
         WHERE n.nspname OPERATOR(pg_catalog.=) 'lake')
       OPERATOR(pg_catalog.<>) (SELECT r.oid FROM pg_catalog.pg_roles r
                                 WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER) THEN
        RAISE EXCEPTION USING
            ERRCODE = '42501',
            MESSAGE = 'lake cannot be installed into schema "lake": the installing role does not own it',
            DETAIL = pg_catalog.format('Schema "lake" is owned by %s.',
                (SELECT n.nspowner::pg_catalog.regrole FROM pg_catalog.pg_namespace n
                  WHERE n.nspname OPERATOR(pg_catalog.=) 'lake')),
            HINT = 'Drop the schema, or have its owner transfer it to the installing role, then create the extension again.';
    END IF;
    -- Nor may anyone else create in it: a function planted there later would
    -- shadow one of lake's for a call with untyped arguments.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
                WHERE n.nspname OPERATOR(pg_catalog.=) 'lake'
                  AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'
                  AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner) THEN
        RAISE EXCEPTION USING
            ERRCODE = '42501',
            MESSAGE = 'lake cannot be installed into schema "lake": other roles may create objects in it',
            DETAIL = pg_catalog.format('Schema "lake" grants CREATE to %s.',
                (SELECT pg_catalog.string_agg(CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                                                   ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END, ', ')
                   FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
                  WHERE n.nspname OPERATOR(pg_catalog.=) 'lake'
                    AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'
                    AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner)),
            HINT = 'Revoke CREATE on the schema from them (or, if CREATE EXTENSION made the schema, the installing role''s default privileges that grant it), then create the extension again.';
    END IF;
    -- Nor may it hold another role's objects already: one made while that
    -- role could create there (DROP EXTENSION leaves the schema) would
    -- shadow a function of lake's for a call whose argument types match it.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_namespace n, pg_catalog.pg_proc p
                WHERE n.nspname OPERATOR(pg_catalog.=) 'lake' AND p.pronamespace OPERATOR(pg_catalog.=) n.oid
                  AND p.proowner OPERATOR(pg_catalog.<>) n.nspowner)
       OR EXISTS (SELECT 1 FROM pg_catalog.pg_namespace n, pg_catalog.pg_class c
                   WHERE n.nspname OPERATOR(pg_catalog.=) 'lake' AND c.relnamespace OPERATOR(pg_catalog.=) n.oid
                     AND c.relowner OPERATOR(pg_catalog.<>) n.nspowner)
       OR EXISTS (SELECT 1 FROM pg_catalog.pg_namespace n, pg_catalog.pg_type t
                   WHERE n.nspname OPERATOR(pg_catalog.=) 'lake' AND t.typnamespace OPERATOR(pg_catalog.=) n.oid
                     AND t.typowner OPERATOR(pg_catalog.<>) n.nspowner)
       OR EXISTS (SELECT 1 FROM pg_catalog.pg_namespace n, pg_catalog.pg_operator o
                   WHERE n.nspname OPERATOR(pg_catalog.=) 'lake' AND o.oprnamespace OPERATOR(pg_catalog.=) n.oid
                     AND o.oprowner OPERATOR(pg_catalog.<>) n.nspowner) THEN
        RAISE EXCEPTION USING
            ERRCODE = '42501',
            MESSAGE = 'lake cannot be installed into schema "lake": it holds objects of other roles',
            HINT = 'Drop them (or the schema), then create the extension again.';
    END IF;
END
$$;

-- The tables live in a schema of their own on which only the extension's
-- owner has USAGE: a tenant role cannot name them, so it cannot lock them
-- (CREATE RULE, LOCK, ALTER fail before any lock is taken). CREATE SCHEMA
-- fails if the name is taken, so nobody else can own it either.
CREATE SCHEMA lake_data;
REVOKE ALL ON SCHEMA lake_data FROM PUBLIC;

-- Administrative functions are open to superusers, the extension's owner
-- and members of lake_admin.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'lake_admin') THEN
        CREATE ROLE lake_admin NOLOGIN;
    END IF;
END
$$;
-- Its members reach the administrative functions without a grant of their own.
GRANT USAGE ON SCHEMA lake TO lake_admin;

-- Datasets: named, append-only, versioned collections.
CREATE TABLE lake_data.dataset (
    id          int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL CONSTRAINT dataset_name UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT pg_catalog.now()
) USING heap;

-- Ids of stored payloads ("blobs") whose chunks live in lake_data.chunk. A
-- stage's id is the blob its chunks are uploaded to, so committing a stage
-- hands its chunks to the version without copying them.
CREATE SEQUENCE lake_data.blob_seq;

-- One row per version, kept narrow for the WAL of every small append: a
-- payload of one chunk is stored inline (data), and that is the whole
-- version. Larger payloads and staged ones keep their chunks in
-- lake_data.chunk under a blob named by lake_data.version_blob (chunk 0
-- inline when data is set, else from lake_data.chunk too). No column that
-- can be derived: the payload's size is chunk 0's decoded size, which its
-- header records, or version_blob's bytes when there is more than chunk 0;
-- the stored size is the sum of the stored chunks' lengths (lake.versions
-- computes both). Chunk 0 here is bare (codec.h): the version's digest,
-- verified at every read, is its checksum. None that only a few versions
-- need, no NULL in the common row (no null bitmap), the 8-byte columns
-- first and data on a 4-byte boundary (no padding). Tenants and operation
-- ids are opaque keys compared byte for byte (COLLATE "C").
CREATE TABLE lake_data.version (
    version       bigint NOT NULL,
    committed_at  timestamptz NOT NULL,
    dataset_id    int NOT NULL,
    data          bytea,
    tenant        text COLLATE "C" NOT NULL,
    operation_id  text COLLATE "C" NOT NULL,
    digest        bytea NOT NULL,
    CONSTRAINT version_pkey PRIMARY KEY (dataset_id, version)
) USING heap;
-- An operation's version is found by a 32-bit hash of its tenant and
-- operation id (store_version.c): 16-byte index entries whatever the ids'
-- length. Not unique: equal hashes are told apart by the row's own tenant
-- and operation id, and an operation has at most one version because
-- versions are written only under the dataset's append lock after a look
-- with a fresh snapshot (operation.c).
CREATE FUNCTION lake_data.operation_hash(tenant text, operation_id text) RETURNS int
    AS 'MODULE_PATHNAME', 'lake_operation_hash'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE INDEX version_operation ON lake_data.version
    (dataset_id, lake_data.operation_hash(tenant, operation_id));
-- The decoded size of a version's chunk 0 as its header records it
-- (codec.h), without decoding it; XX001 if the header is damaged.
CREATE FUNCTION lake_data.chunk_bytes(data bytea) RETURNS bigint
    AS 'MODULE_PATHNAME', 'lake_chunk_bytes'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
-- The versions whose chunks are (also) in lake_data.chunk, by blob, and
-- their payload's whole size: a commit of a stage that was already
-- committed and retired finds its version here.
CREATE TABLE lake_data.version_blob (
    blob          bigint PRIMARY KEY,
    dataset_id    int NOT NULL,
    nchunks       int NOT NULL,
    version       bigint NOT NULL,
    bytes         bigint NOT NULL,
    CONSTRAINT version_blob_version UNIQUE (dataset_id, version)
) USING heap;

-- Stages whose commit found their operation already committed (a replay):
-- the stage and its chunks are gone, the version it answered stays, so a
-- retried commit of the stage gets the same answer, never "stage not found".
-- Its operation is kept too: a retried commit answers only with a version
-- of that operation.
CREATE TABLE lake_data.stage_replay (
    stage         bigint PRIMARY KEY,
    dataset_id    int NOT NULL,
    version       bigint NOT NULL,
    tenant        text COLLATE "C" NOT NULL,
    operation_id  text COLLATE "C" NOT NULL
) USING heap;

-- Stored chunks (codec.h): of versions, and of open stages.
CREATE TABLE lake_data.chunk (
    blob        bigint NOT NULL,
    chunk_no    int NOT NULL,
    bytes       int NOT NULL,           -- decoded size
    data        bytea NOT NULL,
    PRIMARY KEY (blob, chunk_no)
) USING heap;
-- Chunks are already zstd-compressed (or stored raw because they do not
-- compress): TOAST must not try again.
ALTER TABLE lake_data.version ALTER COLUMN data SET STORAGE EXTERNAL;
ALTER TABLE lake_data.chunk ALTER COLUMN data SET STORAGE EXTERNAL;

-- Open staged appends: at most one per operation.
CREATE TABLE lake_data.stage (
    id            bigint PRIMARY KEY,
    dataset_id    int NOT NULL,
    tenant        text COLLATE "C" NOT NULL,
    operation_id  text COLLATE "C" NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
    touched_at    timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    opened_by     oid NOT NULL,         -- role that began it (lake.role_max_open_stages)
    -- The chunks uploaded so far and their bytes, kept as they come: the
    -- bounds of each append_chunk, without counting the chunk rows.
    chunks        int NOT NULL DEFAULT 0,
    bytes         bigint NOT NULL DEFAULT 0,
    UNIQUE (dataset_id, tenant, operation_id)
) USING heap;
CREATE INDEX stage_touched_at ON lake_data.stage (touched_at);
-- Expired stages' ids: their rows are gone, their chunks are removed by the
-- worker a batch at a time.
CREATE TABLE lake_data.blob_gone (
    blob  bigint PRIMARY KEY
) USING heap;
CREATE INDEX stage_opened_by ON lake_data.stage (opened_by);

-- Which roles may append to and read which tenants.
CREATE TABLE lake_data.tenant_grant (
    tenant  text NOT NULL,
    role    oid NOT NULL,
    PRIMARY KEY (tenant, role)
) USING heap;

-- Sessions cache which tenants their roles hold (access.c): any change
-- here, through lake.grant_tenant or by hand, tells every session to forget.
CREATE FUNCTION lake.data_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'lake_data_changed'
    LANGUAGE C;
CREATE TRIGGER tenant_grant_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON lake_data.tenant_grant
    FOR EACH STATEMENT EXECUTE FUNCTION lake.data_changed();
-- Also under session_replication_role = replica: a revoke made so must
-- reach the sessions that hold the tenant. (A row applied by logical
-- replication is refused before, by refuse_logical_apply below.)
ALTER TABLE lake_data.tenant_grant ENABLE ALWAYS TRIGGER tenant_grant_changed;
REVOKE ALL ON FUNCTION lake.data_changed() FROM PUBLIC;

-- Sessions cache dataset ids by name (store_version.c): a dataset renamed or
-- removed by hand tells every session to forget them.
CREATE TRIGGER dataset_changed AFTER UPDATE OR DELETE OR TRUNCATE
    ON lake_data.dataset
    FOR EACH STATEMENT EXECUTE FUNCTION lake.data_changed();
ALTER TABLE lake_data.dataset ENABLE ALWAYS TRIGGER dataset_changed;

-- Compression dictionaries (store_dict.c), trained from a dataset's own
-- payloads by lake.train_dictionary(): a dataset's newest one compresses
-- its small payloads from then on. Every zstd frame compressed with a
-- dictionary names it by id (the id is in the dictionary's own header too,
-- in zstd's private range from 32768), so a dictionary is never changed or
-- removed while a version may need it. checksum is the CRC-32C of data,
-- verified whenever a session loads it.
CREATE SEQUENCE lake_data.dictionary_seq MINVALUE 32768 MAXVALUE 2147483647;
CREATE TABLE lake_data.dictionary (
    id          int PRIMARY KEY,
    dataset_id  int NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
    samples     int NOT NULL,           -- payloads it was trained on
    checksum    bigint NOT NULL,
    data        bytea NOT NULL
) USING heap;
CREATE INDEX dictionary_dataset ON lake_data.dictionary (dataset_id, id);
-- Sessions cache dictionaries and which one each dataset uses: a new one,
-- or any change by hand, tells every session to forget them.
CREATE TRIGGER dictionary_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON lake_data.dictionary
    FOR EACH STATEMENT EXECUTE FUNCTION lake.data_changed();
ALTER TABLE lake_data.dictionary ENABLE ALWAYS TRIGGER dictionary_changed;

-- Lifecycles: named sets of phases with legal edges.
CREATE TABLE lake_data.lifecycle (
    id             int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name           text NOT NULL UNIQUE,
    initial_phase  text NOT NULL,
    phases         text[] NOT NULL,        -- initial first, then in edge order
    edges          text[] NOT NULL,        -- 2-D: {{from, to}, ...}
    created_at     timestamptz NOT NULL DEFAULT pg_catalog.now()
) USING heap;

-- Lifecycles are meant to stay as defined. A hand edit is made coherent:
-- at its commit, sessions reload lifecycles and the worker recovers every
-- owner against them.
CREATE FUNCTION lake.lifecycle_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'lake_lifecycle_changed'
    LANGUAGE C;
CREATE TRIGGER lifecycle_changed AFTER UPDATE OR DELETE ON lake_data.lifecycle
    FOR EACH STATEMENT EXECUTE FUNCTION lake.lifecycle_changed();
REVOKE ALL ON FUNCTION lake.lifecycle_changed() FROM PUBLIC;
-- Every row, inserted or edited by hand, must build as define_lifecycle
-- would build it; its phases are derived from the edges.
CREATE FUNCTION lake.lifecycle_check() RETURNS trigger
    AS 'MODULE_PATHNAME', 'lake_lifecycle_check'
    LANGUAGE C;
CREATE TRIGGER lifecycle_check BEFORE INSERT OR UPDATE ON lake_data.lifecycle
    FOR EACH ROW EXECUTE FUNCTION lake.lifecycle_check();
REVOKE ALL ON FUNCTION lake.lifecycle_check() FROM PUBLIC;

-- The durable owner registry; live state is in shared memory. A quarantine
-- is durable too: the position of the applied prefix and why the next
-- landing did not apply; only lake.release_owner clears it. Every owner
-- belongs to one tenant, fixed at creation; names are unique across
-- tenants. Snapshots name owners by id, so recovery takes the tenant (like
-- the name and lifecycle) from here.
CREATE TABLE lake_data.owner (
    id                   int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                 text NOT NULL UNIQUE,
    lifecycle            int NOT NULL REFERENCES lake_data.lifecycle (id),
    tenant               text NOT NULL,
    created_at           timestamptz NOT NULL DEFAULT pg_catalog.now(),
    quarantine_position  bigint,
    quarantine_reason    text
) USING heap;

-- The check of the tables that hold names inside records (the writer row
-- for them, cycles, snapshots): the encoding they were written in, which a
-- restore converts in the tables' text and not in the records, so rows
-- from a database of another encoding are refused (55000), not misread.
CREATE FUNCTION lake_data.encoding_check(smallint) RETURNS boolean
    AS 'MODULE_PATHNAME', 'lake_encoding_check'
    LANGUAGE C STRICT STABLE;
REVOKE ALL ON FUNCTION lake_data.encoding_check(smallint) FROM PUBLIC;

-- The writer epoch: grows durably each time a worker starts sealing, so a
-- receipt (epoch, seq) never repeats and a stale sealer can be fenced. The
-- timeline it was taken on (1 when CREATE EXTENSION makes the row, whatever
-- the timeline: a later one may have forked from a line that created the
-- extension after the fork point; NULL after a restore merged a dumped
-- row): an epoch taken on a later timeline, or after a restore, skips past
-- those the line it forked from may have gone on to.
-- The partition the epochs were issued as (lake.partitions, lake.partition;
-- NULL before the first): a server started as another one refuses to
-- recover rather than issue receipts in another partition's class.
-- The database encoding lake's records hold their names in (phases, cast
-- operation ids): a restore into another encoding is refused.
CREATE TABLE lake_data.writer (
    one           boolean PRIMARY KEY DEFAULT true CHECK (one),
    epoch         int NOT NULL,
    timeline      bigint,
    partitions    int,
    partition_no  int,
    encoding      smallint NOT NULL DEFAULT pg_catalog.pg_char_to_encoding(pg_catalog.getdatabaseencoding())
        CONSTRAINT writer_in_database_encoding CHECK (lake_data.encoding_check(encoding))
) USING heap;
-- A restore (pg_dump dumps this table) meets the row this script made: the
-- dumped epoch is merged into it, the higher one kept, so the restored
-- history's receipts are never issued again.
CREATE FUNCTION lake.writer_merge() RETURNS trigger
    AS 'MODULE_PATHNAME', 'lake_writer_merge'
    LANGUAGE C;
CREATE TRIGGER writer_merge BEFORE INSERT ON lake_data.writer
    FOR EACH ROW EXECUTE FUNCTION lake.writer_merge();
REVOKE ALL ON FUNCTION lake.writer_merge() FROM PUBLIC;
INSERT INTO lake_data.writer (epoch) VALUES (0);

-- Sealed cycles: every landing of a cycle in one zstd-compressed record.
CREATE TABLE lake_data.cycle (
    cycle         bigint PRIMARY KEY,
    epoch         int NOT NULL,
    first_seq     bigint NOT NULL,
    last_seq      bigint NOT NULL,
    casts         int NOT NULL,
    bytes         bigint NOT NULL,
    stored_bytes  bigint NOT NULL,
    sealed_at     timestamptz NOT NULL,
    lsn           pg_lsn NOT NULL,
    -- The owner index (src/owner_index.h) as of this cycle: the last cycle
    -- whose owners are in lake_data.owner_block (this one, if its seal
    -- closed a block), and how many owner entries the cycles after it hold.
    indexed_through  bigint NOT NULL,
    tail_owners   int NOT NULL,
    owners        bytea NOT NULL,
    data          bytea NOT NULL,
    -- The database encoding its names (phases, operation ids) are in.
    encoding      smallint NOT NULL DEFAULT pg_catalog.pg_char_to_encoding(pg_catalog.getdatabaseencoding())
        CONSTRAINT cycle_in_database_encoding CHECK (lake_data.encoding_check(encoding))
) USING heap;
ALTER TABLE lake_data.cycle ALTER COLUMN data SET STORAGE EXTERNAL;
CREATE INDEX cycle_receipt ON lake_data.cycle (epoch, last_seq);

-- Which cycles hold an owner's landings, a row per owner per closed block
-- of at most 64 cycles (src/owner_index.h): a trajectory visits only those,
-- then the owner lists (lake_data.cycle.owners) of the cycles after the
-- last closed block.
CREATE TABLE lake_data.owner_block (
    owner_id     int NOT NULL,
    first_cycle  bigint NOT NULL,
    entry        bytea NOT NULL,
    PRIMARY KEY (owner_id, first_cycle)
) USING heap;

-- Sealed idempotent casts, by operation id.
CREATE TABLE lake_data.cast_operation (
    owner_id      int NOT NULL,
    operation_id  text NOT NULL,
    digest        bytea NOT NULL,
    epoch         int NOT NULL,
    seq           bigint NOT NULL,
    CONSTRAINT cast_operation_pkey PRIMARY KEY (owner_id, operation_id)
) USING heap;

-- Owner snapshots: every owner's state as of a sealed cycle, in one
-- zstd-compressed record; recovery starts from the newest and replays only
-- the cycles after it.
CREATE TABLE lake_data.snapshot (
    cycle         bigint PRIMARY KEY,
    taken_at      timestamptz NOT NULL,
    owners        int NOT NULL,
    bytes         bigint NOT NULL,
    stored_bytes  bigint NOT NULL,
    data          bytea NOT NULL,
    encoding      smallint NOT NULL DEFAULT pg_catalog.pg_char_to_encoding(pg_catalog.getdatabaseencoding())
        CONSTRAINT snapshot_in_database_encoding CHECK (lake_data.encoding_check(encoding))
) USING heap;
ALTER TABLE lake_data.snapshot ALTER COLUMN data SET STORAGE EXTERNAL;

CREATE TYPE lake.receipt AS (epoch int, seq bigint);
CREATE TYPE lake.coordinate AS (cycle bigint, position bigint, lsn pg_lsn);

-- The built-in lifecycle.
INSERT INTO lake_data.lifecycle (name, initial_phase, phases, edges) VALUES
  ('kanban', 'Planning',
   '{Planning,CognitiveWork,Evaluation,Commit,Prune}',
   '{{Planning,CognitiveWork},{CognitiveWork,Evaluation},{Evaluation,Commit},{Evaluation,Prune},{Commit,Planning},{Prune,Planning}}');
-- At wal_level = minimal the nextval above, in the transaction that created
-- the sequence, is not WAL-logged, yet the page flushed at commit claims 32
-- values logged ahead: after a crash the same ids would come back. setval
-- leaves nothing logged ahead, so the next nextval writes its WAL record.
SELECT pg_catalog.setval(pg_catalog.pg_get_serial_sequence('lake_data.lifecycle', 'id'),
                         (SELECT pg_catalog.max(l.id) FROM lake_data.lifecycle l));

SELECT pg_catalog.pg_extension_config_dump('lake_data.dataset', '');
-- The identity sequences too: a restored database must not hand out the
-- ids of restored datasets, lifecycles and owners again.
SELECT pg_catalog.pg_extension_config_dump(pg_catalog.pg_get_serial_sequence('lake_data.dataset', 'id'), '');
SELECT pg_catalog.pg_extension_config_dump(pg_catalog.pg_get_serial_sequence('lake_data.lifecycle', 'id'), '');
SELECT pg_catalog.pg_extension_config_dump(pg_catalog.pg_get_serial_sequence('lake_data.owner', 'id'), '');
SELECT pg_catalog.pg_extension_config_dump('lake_data.version', '');
SELECT pg_catalog.pg_extension_config_dump('lake_data.version_blob', '');
SELECT pg_catalog.pg_extension_config_dump('lake_data.stage_replay', '');
SELECT pg_catalog.pg_extension_config_dump('lake_data.chunk', '');
SELECT pg_catalog.pg_extension_config_dump('lake_data.stage', '');
SELECT pg_catalog.pg_extension_config_dump('lake_data.blob_gone', '');
SELECT pg_catalog.pg_extension_config_dump('lake_data.tenant_grant', '');
SELECT pg_catalog.pg_extension_config_dump('lake_data.blob_seq', '');
SELECT pg_catalog.pg_extension_config_dump('lake_data.dictionary', '');
SELECT pg_catalog.pg_extension_config_dump('lake_data.dictionary_seq', '');
SELECT pg_catalog.pg_extension_config_dump('lake_data.lifecycle', 'WHERE name OPERATOR(pg_catalog.<>) ''kanban''');
SELECT pg_catalog.pg_extension_config_dump('lake_data.owner', '');
SELECT pg_catalog.pg_extension_config_dump('lake_data.writer', '');
SELECT pg_catalog.pg_extension_config_dump('lake_data.cycle', '');
SELECT pg_catalog.pg_extension_config_dump('lake_data.owner_block', '');
SELECT pg_catalog.pg_extension_config_dump('lake_data.cast_operation', '');
SELECT pg_catalog.pg_extension_config_dump('lake_data.snapshot', '');

-- The hot lookups (store_row.c) read these indexes directly, by name: point
-- lookups that must never degrade to a scan, whatever the statistics said
-- when a plan was cached.

-- Data is reached only through the functions.
REVOKE ALL ON ALL TABLES IN SCHEMA lake_data FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA lake_data FROM PUBLIC;

CREATE FUNCTION lake.create_dataset(name text) RETURNS void
    AS 'MODULE_PATHNAME', 'lake_create_dataset'
    LANGUAGE C;

-- Train a compression dictionary from the dataset's recent small payloads
-- (store_dict.h); returns its id. Administrative.
CREATE FUNCTION lake.train_dictionary(dataset text) RETURNS integer
    AS 'MODULE_PATHNAME', 'lake_train_dictionary'
    LANGUAGE C;

CREATE FUNCTION lake.append(dataset text, tenant text, operation_id text,
                            payload bytea, digest bytea DEFAULT NULL) RETURNS bigint
    AS 'MODULE_PATHNAME', 'lake_append'
    LANGUAGE C;

CREATE FUNCTION lake.read(dataset text, version bigint) RETURNS bytea
    AS 'MODULE_PATHNAME', 'lake_read'
    LANGUAGE C STABLE;

CREATE FUNCTION lake.read_operation(dataset text, tenant text, operation_id text) RETURNS bytea
    AS 'MODULE_PATHNAME', 'lake_read_operation'
    LANGUAGE C STABLE;

CREATE FUNCTION lake.versions(dataset text, after_version bigint DEFAULT 0)
    RETURNS TABLE(version bigint, tenant text, operation_id text, digest bytea,
                  bytes bigint, stored_bytes bigint, committed_at timestamptz)
    AS 'MODULE_PATHNAME', 'lake_versions'
    LANGUAGE C STABLE;

CREATE FUNCTION lake.begin_append(dataset text, tenant text, operation_id text) RETURNS bigint
    AS 'MODULE_PATHNAME', 'lake_begin_append'
    LANGUAGE C;

CREATE FUNCTION lake.append_chunk(stage bigint, chunk_no int, data bytea) RETURNS void
    AS 'MODULE_PATHNAME', 'lake_append_chunk'
    LANGUAGE C;

CREATE FUNCTION lake.commit_append(stage bigint, digest bytea DEFAULT NULL) RETURNS bigint
    AS 'MODULE_PATHNAME', 'lake_commit_append'
    LANGUAGE C;

CREATE FUNCTION lake.abort_append(stage bigint) RETURNS void
    AS 'MODULE_PATHNAME', 'lake_abort_append'
    LANGUAGE C;

CREATE FUNCTION lake.grant_tenant(role regrole, tenant text) RETURNS void
    AS 'MODULE_PATHNAME', 'lake_grant_tenant'
    LANGUAGE C;

CREATE FUNCTION lake.revoke_tenant(role regrole, tenant text) RETURNS void
    AS 'MODULE_PATHNAME', 'lake_revoke_tenant'
    LANGUAGE C;

CREATE FUNCTION lake.define_lifecycle(name text, initial_phase text, edges text[]) RETURNS void
    AS 'MODULE_PATHNAME', 'lake_define_lifecycle'
    LANGUAGE C;

CREATE FUNCTION lake.lifecycle_definition(name text, OUT initial_phase text, OUT edges text[])
    AS 'MODULE_PATHNAME', 'lake_lifecycle_definition'
    LANGUAGE C STABLE;

CREATE FUNCTION lake.create_owner(owner text, lifecycle text DEFAULT 'kanban',
                                  tenant text DEFAULT 'default') RETURNS void
    AS 'MODULE_PATHNAME', 'lake_create_owner'
    LANGUAGE C;

CREATE FUNCTION lake.cast(owner text, from_phase text, to_phase text,
                          payload bytea DEFAULT NULL, expected_lap bigint DEFAULT NULL,
                          operation_id text DEFAULT NULL) RETURNS lake.receipt
    AS 'MODULE_PATHNAME', 'lake_cast'
    LANGUAGE C;

CREATE FUNCTION lake.await_durable(receipt lake.receipt, timeout_ms int DEFAULT NULL)
    RETURNS lake.coordinate
    AS 'MODULE_PATHNAME', 'lake_await_durable'
    LANGUAGE C;

CREATE FUNCTION lake.cast_durable(owner text, from_phase text, to_phase text,
                                  payload bytea DEFAULT NULL, expected_lap bigint DEFAULT NULL,
                                  operation_id text DEFAULT NULL) RETURNS lake.coordinate
    AS 'MODULE_PATHNAME', 'lake_cast_durable'
    LANGUAGE C;

CREATE FUNCTION lake.owner_state(owner text)
    RETURNS TABLE(phase text, lap bigint, "position" bigint, pending int,
                  quarantined boolean, reason text)
    AS 'MODULE_PATHNAME', 'lake_owner_state'
    LANGUAGE C;

CREATE FUNCTION lake.seal() RETURNS bigint
    AS 'MODULE_PATHNAME', 'lake_seal'
    LANGUAGE C;

CREATE FUNCTION lake.checkpoint() RETURNS bigint
    AS 'MODULE_PATHNAME', 'lake_checkpoint'
    LANGUAGE C;

CREATE FUNCTION lake.recover(owner text DEFAULT NULL)
    RETURNS TABLE(owner text, applied int, "position" bigint, quarantined boolean)
    AS 'MODULE_PATHNAME', 'lake_recover'
    LANGUAGE C CALLED ON NULL INPUT;

CREATE FUNCTION lake.release_owner(owner text) RETURNS void
    AS 'MODULE_PATHNAME', 'lake_release_owner'
    LANGUAGE C;

-- The owner index rewritten from the cycles' owner lists, after damage to
-- it; the rows written (administrators, in a transaction of its own).
CREATE FUNCTION lake.rebuild_owner_index() RETURNS bigint
    AS 'MODULE_PATHNAME', 'lake_rebuild_owner_index'
    LANGUAGE C;

CREATE FUNCTION lake.trajectory(owner text, after_position bigint DEFAULT 0)
    RETURNS TABLE("position" bigint, cycle bigint, epoch int, seq bigint,
                  from_phase text, to_phase text, lap bigint, payload bytea,
                  operation_id text)
    AS 'MODULE_PATHNAME', 'lake_trajectory'
    LANGUAGE C STABLE;

CREATE FUNCTION lake.log(after_cycle bigint DEFAULT 0)
    RETURNS TABLE(cycle bigint, owner text, "position" bigint, epoch int, seq bigint,
                  from_phase text, to_phase text, lap bigint, payload bytea,
                  operation_id text)
    AS 'MODULE_PATHNAME', 'lake_log'
    LANGUAGE C STABLE;

CREATE FUNCTION lake.cycles(after_cycle bigint DEFAULT 0)
    RETURNS TABLE(cycle bigint, epoch int, sealed_at timestamptz, casts int,
                  bytes bigint, stored_bytes bigint, lsn pg_lsn)
    AS 'MODULE_PATHNAME', 'lake_cycles'
    LANGUAGE C STABLE;

CREATE FUNCTION lake.admission(
    OUT slots_in_use int, OUT bytes_reserved bigint, OUT max_concurrent int,
    OUT max_stream_bytes bigint, OUT max_buffered_bytes bigint,
    OUT admitted bigint, OUT waited bigint, OUT rejected bigint)
    AS 'MODULE_PATHNAME', 'lake_admission'
    LANGUAGE C VOLATILE;

CREATE FUNCTION lake.stats(
    OUT database text, OUT worker_pid int, OUT worker_state text,
    OUT worker_started_at timestamptz, OUT worker_starts bigint,
    OUT config_reloads bigint, OUT stages_open bigint, OUT stages_expired bigint,
    OUT stage_chunks_expired bigint, OUT epoch int, OUT cycles_sealed bigint,
    OUT casts_sealed bigint, OUT casts_pending bigint, OUT mean_casts_per_cycle float8,
    OUT last_seal_ms float8, OUT sealed_cycle bigint, OUT recovery_owners bigint,
    OUT recovery_applied bigint, OUT recovery_quarantined bigint,
    OUT recovery_ms float8, OUT recovery_tail bigint, OUT recovery_snapshot bigint,
    OUT last_snapshot bigint, OUT sessions_waiting bigint)
    AS 'MODULE_PATHNAME', 'lake_stats'
    LANGUAGE C VOLATILE;

-- No logical replication worker writes a row of lake_data (store.c): the
-- rows would land under a worker and sessions that know nothing of them.
-- The triggers fire for the replica role only, the role those workers
-- run with; for any other session of that role they let the row pass.
-- AFTER, not BEFORE: a BEFORE ROW UPDATE or DELETE trigger, even one that
-- does not fire, makes every such row be locked first (and logged).
CREATE FUNCTION lake.refuse_logical_apply() RETURNS trigger
    AS 'MODULE_PATHNAME', 'lake_refuse_logical_apply'
    LANGUAGE C;
REVOKE ALL ON FUNCTION lake.refuse_logical_apply() FROM PUBLIC;
DO $$
DECLARE
    t pg_catalog.name;
BEGIN
    FOR t IN
        SELECT c.relname FROM pg_catalog.pg_class c
         WHERE c.relnamespace OPERATOR(pg_catalog.=) 'lake_data'::pg_catalog.regnamespace
           AND c.relkind OPERATOR(pg_catalog.=) 'r'
    LOOP
        EXECUTE pg_catalog.format('CREATE TRIGGER refuse_logical_apply AFTER INSERT OR UPDATE OR DELETE '
                                  'ON lake_data.%I FOR EACH ROW EXECUTE FUNCTION lake.refuse_logical_apply()', t);
        EXECUTE pg_catalog.format('CREATE TRIGGER refuse_logical_truncate BEFORE TRUNCATE '
                                  'ON lake_data.%I FOR EACH STATEMENT EXECUTE FUNCTION lake.refuse_logical_apply()', t);
        EXECUTE pg_catalog.format('ALTER TABLE lake_data.%I ENABLE REPLICA TRIGGER refuse_logical_apply', t);
        EXECUTE pg_catalog.format('ALTER TABLE lake_data.%I ENABLE REPLICA TRIGGER refuse_logical_truncate', t);
    END LOOP;
END
$$;

-- The installing role's default privileges (ALTER DEFAULT PRIVILEGES)
-- apply to what this script creates. Of the extension's own objects, lake's
-- data schema and everything in it, and the trigger functions (which a
-- role could otherwise attach to a table of its own), stay their owner's
-- alone; the interface stays open as SPEC §3 says: USAGE on schema lake
-- and a tenant grant are all a role needs (the functions check every call
-- themselves). Objects in schema lake that are not the extension's are
-- left as their owner made them.
DO $$
DECLARE
    r record;
    -- The extension's own functions.
    members oid[] := ARRAY(
        SELECT d.objid FROM pg_catalog.pg_depend d, pg_catalog.pg_extension e
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
           AND d.refobjid OPERATOR(pg_catalog.=) e.oid AND e.extname OPERATOR(pg_catalog.=) 'lake'
           AND d.deptype OPERATOR(pg_catalog.=) 'e');
BEGIN
    FOR r IN
        SELECT 'SCHEMA lake_data' AS obj, a.grantee
          FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
         WHERE n.nspname OPERATOR(pg_catalog.=) 'lake_data' AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner
        UNION ALL
        SELECT CASE WHEN c.relkind OPERATOR(pg_catalog.=) 'S' THEN 'SEQUENCE ' ELSE 'TABLE ' END
                   OPERATOR(pg_catalog.||) c.oid::pg_catalog.regclass::pg_catalog.text, a.grantee
          FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
         WHERE c.relnamespace OPERATOR(pg_catalog.=) 'lake_data'::pg_catalog.regnamespace
           AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
        UNION ALL
        SELECT 'FUNCTION ' OPERATOR(pg_catalog.||) p.oid::pg_catalog.regprocedure::pg_catalog.text, a.grantee
          FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
         WHERE p.oid OPERATOR(pg_catalog.=) ANY (members)
           AND (p.pronamespace OPERATOR(pg_catalog.=) 'lake_data'::pg_catalog.regnamespace
                OR p.prorettype OPERATOR(pg_catalog.=) 'pg_catalog.trigger'::pg_catalog.regtype)
           AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM %s', r.obj,
            CASE WHEN r.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                 ELSE r.grantee::pg_catalog.regrole::pg_catalog.text END);
    END LOOP;
    FOR r IN
        SELECT p.oid::pg_catalog.regprocedure AS f
          FROM pg_catalog.pg_proc p
         WHERE p.oid OPERATOR(pg_catalog.=) ANY (members)
           AND p.pronamespace OPERATOR(pg_catalog.=) 'lake'::pg_catalog.regnamespace
           AND p.prorettype OPERATOR(pg_catalog.<>) 'pg_catalog.trigger'::pg_catalog.regtype
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO PUBLIC', r.f);
    END LOOP;
END
$$;
GRANT USAGE ON TYPE lake.receipt, lake.coordinate TO PUBLIC;
-- (Functions in lake_data carry no explicit entry for PUBLIC until now.)
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA lake_data FROM PUBLIC;
