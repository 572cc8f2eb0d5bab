-- lake 0.1.0: idempotent versioned appends and lock-free admission.
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
            MESSAGE = pg_catalog.format('lake can only be installed in database %I', served),
            DETAIL = pg_catalog.format('The lake worker serves lake.database = %L; this is database %L.',
                                       served, pg_catalog.current_database()),
            HINT = 'Create the extension in that database, or set lake.database in postgresql.conf and restart.';
    END IF;
END
$$;

-- Datasets: named, append-only, versioned collections.
CREATE TABLE lake.dataset (
    id          int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- One row per version; the first stored chunk is inline (data).
CREATE TABLE lake.version (
    dataset_id    int NOT NULL,
    nchunks       int NOT NULL,
    version       bigint NOT NULL,
    bytes         bigint NOT NULL,
    stored_bytes  bigint NOT NULL,
    committed_at  timestamptz NOT NULL,
    tenant        text NOT NULL,
    operation_id  text NOT NULL,
    digest        bytea NOT NULL,
    data          bytea NOT NULL,
    PRIMARY KEY (dataset_id, version),
    UNIQUE (dataset_id, tenant, operation_id)
);
-- Chunks 1..n-1 of payloads larger than one chunk.
CREATE TABLE lake.chunk (
    dataset_id  int NOT NULL,
    version     bigint NOT NULL,
    chunk_no    int NOT NULL,
    data        bytea NOT NULL,
    PRIMARY KEY (dataset_id, version, chunk_no)
);
-- Chunks are already zstd-compressed (or stored raw because they do not
-- compress): TOAST must not try again.
ALTER TABLE lake.version ALTER COLUMN data SET STORAGE EXTERNAL;
ALTER TABLE lake.chunk ALTER COLUMN data SET STORAGE EXTERNAL;

SELECT pg_catalog.pg_extension_config_dump('lake.dataset', '');
SELECT pg_catalog.pg_extension_config_dump('lake.version', '');
SELECT pg_catalog.pg_extension_config_dump('lake.chunk', '');

-- Data is reached only through the functions.
REVOKE ALL ON lake.dataset, lake.version, lake.chunk FROM PUBLIC;

CREATE FUNCTION lake.create_dataset(name text) RETURNS void
    AS 'MODULE_PATHNAME', 'lake_create_dataset'
    LANGUAGE C SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION lake.append(dataset text, tenant text, operation_id text,
                            payload bytea, digest bytea DEFAULT NULL) RETURNS bigint
    AS 'MODULE_PATHNAME', 'lake_append'
    LANGUAGE C SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION lake.read(dataset text, version bigint) RETURNS bytea
    AS 'MODULE_PATHNAME', 'lake_read'
    LANGUAGE C STABLE SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION lake.read_operation(dataset text, tenant text, operation_id text) RETURNS bytea
    AS 'MODULE_PATHNAME', 'lake_read_operation'
    LANGUAGE C STABLE SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION lake.versions(dataset text, after_version bigint DEFAULT 0)
    RETURNS TABLE(version bigint, tenant text, operation_id text, digest bytea,
                  bytes bigint, stored_bytes bigint, committed_at timestamptz)
    AS 'MODULE_PATHNAME', 'lake_versions'
    LANGUAGE C STABLE SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION lake.admission(
    OUT slots_in_use int, OUT bytes_reserved bigint, OUT max_concurrent int,
    OUT max_stream_bytes bigint, OUT max_buffered_bytes bigint,
    OUT admitted bigint, OUT waited bigint, OUT rejected bigint)
    AS 'MODULE_PATHNAME', 'lake_admission'
    LANGUAGE C VOLATILE SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION lake.stats(
    OUT database text, OUT worker_pid int, OUT worker_state text,
    OUT worker_started_at timestamptz, OUT worker_starts bigint,
    OUT config_reloads bigint)
    AS 'MODULE_PATHNAME', 'lake_stats'
    LANGUAGE C VOLATILE SET search_path = pg_catalog, pg_temp;
