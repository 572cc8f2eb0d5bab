/*
 * store.c — the tables behind datasets and versions.
 *
 *   lake.dataset (id, name, created_at)
 *   lake.version (dataset_id, version, tenant, operation_id, digest, bytes,
 *                 stored_bytes, nchunks, committed_at, data)
 *   lake.chunk   (dataset_id, version, chunk_no, data)      chunk_no >= 1
 *
 * A version's first stored chunk lives in its own row (lake.version.data),
 * so the common small append writes one heap row; chunks 1..n-1 of larger
 * payloads go to lake.chunk. Every query is prepared once per backend,
 * names its tables with their schema and uses pg_catalog operators, so no
 * search_path can change what it means; caller input only ever travels as
 * parameters.
 */
#include "lake.h"

#include <zstd.h>

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "codec.h"
#include "digest.h"
#include "executor/spi.h"
#include "guc.h"
#include "storage/lmgr.h"
#include "store.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

static SPIPlanPtr plan_insert_dataset;
static SPIPlanPtr plan_dataset_id;
static SPIPlanPtr plan_lookup_operation;
static SPIPlanPtr plan_recheck_operation;
static SPIPlanPtr plan_insert_version;
static SPIPlanPtr plan_insert_chunk;
static SPIPlanPtr plan_version_head;
static SPIPlanPtr plan_version_chunks;
static SPIPlanPtr plan_list_versions;

/* zstd context reused for the life of the backend (zstd's own allocator). */
static ZSTD_CCtx *cctx = NULL;

static SPIPlanPtr
prepared(SPIPlanPtr *cache, const char *sql, int nargs, Oid *argtypes)
{
	if (*cache == NULL)
	{
		SPIPlanPtr	plan = SPI_prepare(sql, nargs, argtypes);

		if (plan == NULL)
			elog(ERROR, "lake: could not prepare \"%s\": %s",
				 sql, SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		*cache = plan;
	}
	return *cache;
}

static void
run(SPIPlanPtr plan, Datum *values, Snapshot snapshot, int expected)
{
	int			rc;

	if (snapshot != InvalidSnapshot)
		rc = SPI_execute_snapshot(plan, values, NULL, snapshot,
								  InvalidSnapshot, false, false, 0);
	else
		rc = SPI_execute_plan(plan, values, NULL, false, 0);
	if (rc != expected)
		elog(ERROR, "lake: SPI returned %s, expected %s",
			 SPI_result_code_string(rc), SPI_result_code_string(expected));
}

static Datum
col(int row, int colno, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc,
						 colno, isnull);
}

static void
copy_digest(Datum d, uint8 *out)
{
	bytea	   *b = DatumGetByteaPP(d);

	if (VARSIZE_ANY_EXHDR(b) != LAKE_DIGEST_LEN)
		elog(ERROR, "lake: stored digest has %d bytes", (int) VARSIZE_ANY_EXHDR(b));
	memcpy(out, VARDATA_ANY(b), LAKE_DIGEST_LEN);
}

void
store_create_dataset(const char *name)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(name)};

	run(prepared(&plan_insert_dataset,
				 "INSERT INTO lake.dataset AS d (name) VALUES ($1) "
				 "ON CONFLICT (name) DO NOTHING RETURNING d.id",
				 1, types),
		values, InvalidSnapshot, SPI_OK_INSERT_RETURNING);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("dataset \"%s\" already exists", name)));
}

static void
dataset_missing(const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("dataset \"%s\" does not exist", name),
			 errhint("Create it with lake.create_dataset().")));
}

int32
store_dataset_id(const char *name)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(name)};
	bool		isnull;

	run(prepared(&plan_dataset_id,
				 "SELECT d.id FROM lake.dataset d WHERE d.name OPERATOR(pg_catalog.=) $1",
				 1, types),
		values, InvalidSnapshot, SPI_OK_SELECT);
	if (SPI_processed == 0)
		dataset_missing(name);
	return DatumGetInt32(col(0, 1, &isnull));
}

/*
 * Appends to one dataset serialize on a transaction-scoped lock on the
 * dataset (an object lock keyed by lake.dataset's OID and the dataset id:
 * it writes no WAL and shows in pg_locks). Held to commit, it makes version
 * numbers gap-free and commit-ordered: the next holder sees the previous
 * holder's version with a fresh snapshot.
 */
void
store_lock_dataset(int32 dataset_id)
{
	Oid			relid = get_relname_relid("dataset", get_namespace_oid("lake", false));

	if (!OidIsValid(relid))
		elog(ERROR, "lake: table lake.dataset is missing");
	LockDatabaseObject(relid, (Oid) dataset_id, 0, ExclusiveLock);
}

static void
fill_operation(OperationLookup *out, int versioncol)
{
	bool		isnull;
	Datum		v = col(0, versioncol, &isnull);

	out->found = !isnull;
	if (out->found)
	{
		out->version = DatumGetInt64(v);
		copy_digest(col(0, versioncol + 1, &isnull), out->digest);
	}
}

void
store_lookup_operation(const char *dataset, const char *tenant,
					   const char *operation_id, OperationLookup *out)
{
	Oid			types[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		values[3] = {CStringGetTextDatum(dataset),
		CStringGetTextDatum(tenant), CStringGetTextDatum(operation_id)};
	bool		isnull;

	run(prepared(&plan_lookup_operation,
				 "SELECT d.id, v.version, v.digest FROM lake.dataset d "
				 "LEFT JOIN lake.version v ON v.dataset_id OPERATOR(pg_catalog.=) d.id "
				 " AND v.tenant OPERATOR(pg_catalog.=) $2 "
				 " AND v.operation_id OPERATOR(pg_catalog.=) $3 "
				 "WHERE d.name OPERATOR(pg_catalog.=) $1",
				 3, types),
		values, InvalidSnapshot, SPI_OK_SELECT);
	if (SPI_processed == 0)
		dataset_missing(dataset);
	out->dataset_id = DatumGetInt32(col(0, 1, &isnull));
	fill_operation(out, 2);
}

void
store_recheck_operation(const char *tenant, const char *operation_id,
						Snapshot snapshot, OperationLookup *out)
{
	Oid			types[3] = {INT4OID, TEXTOID, TEXTOID};
	Datum		values[3] = {Int32GetDatum(out->dataset_id),
		CStringGetTextDatum(tenant), CStringGetTextDatum(operation_id)};
	bool		isnull;
	Datum		max;

	run(prepared(&plan_recheck_operation,
				 "SELECT (SELECT pg_catalog.max(m.version) FROM lake.version m "
				 "        WHERE m.dataset_id OPERATOR(pg_catalog.=) $1), "
				 "       v.version, v.digest "
				 "FROM (VALUES (1)) AS one(x) "
				 "LEFT JOIN lake.version v ON v.dataset_id OPERATOR(pg_catalog.=) $1 "
				 " AND v.tenant OPERATOR(pg_catalog.=) $2 "
				 " AND v.operation_id OPERATOR(pg_catalog.=) $3",
				 3, types),
		values, snapshot, SPI_OK_SELECT);
	max = col(0, 1, &isnull);
	out->max_version = isnull ? 0 : DatumGetInt64(max);
	fill_operation(out, 2);
}

/* Encode one chunk of the payload into a freshly palloc'd bytea. */
static bytea *
encode_chunk(const char *data, size_t len)
{
	bytea	   *out = palloc(VARHDRSZ + lake_chunk_bound(len));
	size_t		n;

	if (cctx == NULL)
	{
		cctx = ZSTD_createCCtx();
		if (cctx == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory"),
					 errdetail("Could not create a zstd compression context.")));
	}
	n = lake_chunk_encode(cctx, lake_compression_level,
						  (const uint8_t *) data, len, (uint8_t *) VARDATA(out));
	SET_VARSIZE(out, VARHDRSZ + n);
	return out;
}

int64
store_write_version(int32 dataset_id, int64 version, const char *tenant,
					const char *operation_id, const uint8 *digest,
					const char *payload, int64 len)
{
	Oid			vtypes[10] = {INT4OID, INT8OID, TEXTOID, TEXTOID, BYTEAOID,
	INT8OID, INT8OID, INT4OID, TIMESTAMPTZOID, BYTEAOID};
	Oid			ctypes[4] = {INT4OID, INT8OID, INT4OID, BYTEAOID};
	int32		nchunks = len == 0 ? 1 : (int32) ((len + LAKE_CHUNK_BYTES - 1) / LAKE_CHUNK_BYTES);
	bytea	   *first = encode_chunk(payload, Min(len, LAKE_CHUNK_BYTES));
	int64		stored = VARSIZE(first) - VARHDRSZ;
	bytea	   *dg = palloc(VARHDRSZ + LAKE_DIGEST_LEN);
	Datum		values[10];

	/* Later chunks first: their encoded sizes complete stored_bytes. */
	for (int32 i = 1; i < nchunks; i++)
	{
		int64		off = (int64) i * LAKE_CHUNK_BYTES;
		bytea	   *enc = encode_chunk(payload + off, Min(len - off, LAKE_CHUNK_BYTES));
		Datum		cvalues[4] = {Int32GetDatum(dataset_id), Int64GetDatum(version),
		Int32GetDatum(i), PointerGetDatum(enc)};

		run(prepared(&plan_insert_chunk,
					 "INSERT INTO lake.chunk (dataset_id, version, chunk_no, data) "
					 "VALUES ($1, $2, $3, $4)",
					 4, ctypes),
			cvalues, InvalidSnapshot, SPI_OK_INSERT);
		stored += VARSIZE(enc) - VARHDRSZ;
		pfree(enc);
	}

	SET_VARSIZE(dg, VARHDRSZ + LAKE_DIGEST_LEN);
	memcpy(VARDATA(dg), digest, LAKE_DIGEST_LEN);
	values[0] = Int32GetDatum(dataset_id);
	values[1] = Int64GetDatum(version);
	values[2] = CStringGetTextDatum(tenant);
	values[3] = CStringGetTextDatum(operation_id);
	values[4] = PointerGetDatum(dg);
	values[5] = Int64GetDatum(len);
	values[6] = Int64GetDatum(stored);
	values[7] = Int32GetDatum(nchunks);
	values[8] = TimestampTzGetDatum(GetCurrentTimestamp());
	values[9] = PointerGetDatum(first);
	run(prepared(&plan_insert_version,
				 "INSERT INTO lake.version (dataset_id, version, tenant, operation_id, "
				 " digest, bytes, stored_bytes, nchunks, committed_at, data) "
				 "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
				 10, vtypes),
		values, InvalidSnapshot, SPI_OK_INSERT);
	pfree(first);
	return stored;
}

static void
lineage_broken(const char *dataset, int64 version, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_LAKE_INCOMPLETE_LINEAGE),
			 errmsg("version " INT64_FORMAT " of dataset \"%s\" is incomplete", version, dataset),
			 errdetail("%s", why),
			 errhint("The stored chunks are missing or damaged; restore them from a backup.")));
}

/* Decode one stored chunk into out[*filled..total), advancing *filled. */
static void
decode_into(const char *dataset, int64 version, Datum stored, char *out,
			int64 total, int64 *filled)
{
	bytea	   *b = DatumGetByteaPP(stored);
	size_t		got;
	LakeCodecStatus st;

	st = lake_chunk_decode((const uint8_t *) VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b),
						   (uint8_t *) out + *filled, (size_t) (total - *filled), &got);
	if (st != LAKE_CODEC_OK)
		lineage_broken(dataset, version, lake_codec_status_text(st));
	*filled += got;
	if ((Pointer) b != DatumGetPointer(stored))
		pfree(b);
}

bytea *
store_read_version(const char *dataset, int32 dataset_id, int64 version)
{
	Oid			types[2] = {INT4OID, INT8OID};
	Datum		values[2] = {Int32GetDatum(dataset_id), Int64GetDatum(version)};
	bool		isnull;
	int64		total;
	int32		nchunks;
	int64		filled = 0;
	uint8		want[LAKE_DIGEST_LEN];
	uint8		got[LAKE_DIGEST_LEN];
	bytea	   *result;

	run(prepared(&plan_version_head,
				 "SELECT v.bytes, v.digest, v.nchunks, v.data FROM lake.version v "
				 "WHERE v.dataset_id OPERATOR(pg_catalog.=) $1 "
				 "  AND v.version OPERATOR(pg_catalog.=) $2",
				 2, types),
		values, InvalidSnapshot, SPI_OK_SELECT);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("version " INT64_FORMAT " of dataset \"%s\" does not exist",
						version, dataset)));
	total = DatumGetInt64(col(0, 1, &isnull));
	copy_digest(col(0, 2, &isnull), want);
	nchunks = DatumGetInt32(col(0, 3, &isnull));
	if (total < 0 || total > (int64) (MaxAllocSize - VARHDRSZ))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("version " INT64_FORMAT " of dataset \"%s\" is too large to read in one value",
						version, dataset)));

	result = SPI_palloc(VARHDRSZ + total);
	SET_VARSIZE(result, VARHDRSZ + total);
	decode_into(dataset, version, col(0, 4, &isnull), VARDATA(result), total, &filled);

	if (nchunks > 1)
	{
		run(prepared(&plan_version_chunks,
					 "SELECT c.chunk_no, c.data FROM lake.chunk c "
					 "WHERE c.dataset_id OPERATOR(pg_catalog.=) $1 "
					 "  AND c.version OPERATOR(pg_catalog.=) $2 ORDER BY c.chunk_no",
					 2, types),
			values, InvalidSnapshot, SPI_OK_SELECT);
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			if (DatumGetInt32(col(i, 1, &isnull)) != (int32) i + 1)
				lineage_broken(dataset, version,
							   psprintf("chunk %d is missing", (int) i + 1));
			decode_into(dataset, version, col(i, 2, &isnull), VARDATA(result), total, &filled);
		}
		if (SPI_processed != (uint64) nchunks - 1)
			lineage_broken(dataset, version,
						   psprintf("%d of %d chunks are present",
									(int) SPI_processed + 1, nchunks));
	}
	if (filled != total)
		lineage_broken(dataset, version,
					   psprintf("chunks hold " INT64_FORMAT " of " INT64_FORMAT " bytes",
								filled, total));
	lake_sha256(VARDATA(result), total, got);
	if (memcmp(want, got, LAKE_DIGEST_LEN) != 0)
		lineage_broken(dataset, version, "the payload does not match its digest");
	return result;
}

void
store_list_versions(int32 dataset_id, int64 after_version, ReturnSetInfo *rsinfo)
{
	Oid			types[2] = {INT4OID, INT8OID};
	Datum		values[2] = {Int32GetDatum(dataset_id), Int64GetDatum(after_version)};

	run(prepared(&plan_list_versions,
				 "SELECT v.version, v.tenant, v.operation_id, v.digest, v.bytes, "
				 "       v.stored_bytes, v.committed_at FROM lake.version v "
				 "WHERE v.dataset_id OPERATOR(pg_catalog.=) $1 "
				 "  AND v.version OPERATOR(pg_catalog.>) $2 ORDER BY v.version",
				 2, types),
		values, InvalidSnapshot, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum		row[7];
		bool		nulls[7];

		heap_deform_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, row, nulls);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, nulls);
	}
}
