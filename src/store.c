/*
 * store.c — the tables behind datasets, versions, stages and tenants.
 *
 *   lake_data.dataset      (id, name, created_at)
 *   lake_data.version      (dataset_id, version, tenant, operation_id, digest,
 *                      bytes, stored_bytes, nchunks, blob, committed_at, data)
 *   lake_data.chunk        (blob, chunk_no, bytes, digest, data)
 *   lake_data.stage        (id, dataset_id, tenant, operation_id, created_at,
 *                      touched_at)
 *   lake_data.tenant_grant (tenant, role)
 *
 * A payload of one chunk lives in its version row (data), so the common
 * small append writes one heap row. Larger payloads keep their chunks in
 * lake_data.chunk under a blob id; a stage's id is the blob its chunks are
 * uploaded to, so committing a stage hands them to the version as they are.
 *
 * Every query is prepared once per backend, names its tables with their
 * schema and uses pg_catalog operators, so no search_path can change what
 * it means; caller input only ever travels as parameters.
 */
#include "lake.h"

#include <zstd.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "codec.h"
#include "digest.h"
#include "executor/spi.h"
#include "guc.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "store.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

/*
 * The caller's identity, saved while the store runs as the schema owner.
 * Connections nest (a lookup may connect inside a connected section); only
 * the outermost one switches identity and back. An error unwinds every
 * lake frame up to the (sub)transaction that catches it, and the abort
 * restores the identity itself, so the depth starts again from zero.
 */
static Oid	saved_userid;
static int	saved_sec_context;
static Oid	lake_owner;
static int	depth = 0;
static bool callbacks_set = false;

/* zstd context reused for the life of the backend (zstd's own allocator). */
static ZSTD_CCtx *cctx = NULL;

/*
 * The extension's owner (pg_extension.extowner), cached per backend. The
 * install script creates lake's data schema, so dropping or recreating the
 * extension, or reassigning its objects, invalidates a namespace syscache
 * entry: that resets the cache and no stale owner is ever served.
 */
static Oid	cached_owner = InvalidOid;

static void
forget_owner(Datum arg, int cacheid, uint32 hashvalue)
{
	cached_owner = InvalidOid;
}

static Oid
lookup_owner(void)
{
	static bool registered = false;
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;

	if (OidIsValid(cached_owner))
		return cached_owner;
	if (!registered)
	{
		CacheRegisterSyscacheCallback(NAMESPACEOID, forget_owner, (Datum) 0);
		registered = true;
	}
	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber,
				F_NAMEEQ, CStringGetDatum("lake"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"lake\" is not installed in this database")));
	cached_owner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return cached_owner;
}

static void
reset_depth_xact(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		depth = 0;
}

static void
reset_depth_subxact(SubXactEvent event, SubTransactionId mySubid,
					SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		depth = 0;
}

void
store_connect(void)
{
	if (!callbacks_set)
	{
		RegisterXactCallback(reset_depth_xact, NULL);
		RegisterSubXactCallback(reset_depth_subxact, NULL);
		callbacks_set = true;
	}
	if (depth++ == 0)
	{
		lake_owner = lookup_owner();
		GetUserIdAndSecContext(&saved_userid, &saved_sec_context);
	}
	SPI_connect();
	SetUserIdAndSecContext(lake_owner,
						   saved_sec_context | SECURITY_LOCAL_USERID_CHANGE);
}

void
store_finish(void)
{
	SPI_finish();
	if (--depth == 0)
		SetUserIdAndSecContext(saved_userid, saved_sec_context);
}

Oid
store_caller(void)
{
	return saved_userid;
}

Oid
store_owner(void)
{
	return lookup_owner();
}

static SPIPlanPtr
keep_plan(SPIPlanPtr *cache, const char *sql, int nargs, Oid *argtypes,
		  int cursor_options)
{
	if (*cache == NULL)
	{
		SPIPlanPtr	plan = SPI_prepare_cursor(sql, nargs, argtypes, cursor_options);

		if (plan == NULL)
			elog(ERROR, "lake: could not prepare \"%s\": %s",
				 sql, SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		*cache = plan;
	}
	return *cache;
}

/*
 * A query kept once per backend and planned at every execution with its
 * parameters: a plan cached while a table was small must not keep a
 * sequential scan once it is large (planning is cheap next to a scan).
 */
SPIPlanPtr
store_plan(SPIPlanPtr *cache, const char *sql, int nargs, Oid *argtypes)
{
	return keep_plan(cache, sql, nargs, argtypes, CURSOR_OPT_CUSTOM_PLAN);
}

/* A statement with no access path to choose (an INSERT ... VALUES), planned once. */
SPIPlanPtr
store_plan_once(SPIPlanPtr *cache, const char *sql, int nargs, Oid *argtypes)
{
	return keep_plan(cache, sql, nargs, argtypes, 0);
}

static void
run_snapshot(SPIPlanPtr plan, Datum *values, Snapshot snapshot, int expected)
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

static void
run(SPIPlanPtr plan, Datum *values, int expected)
{
	run_snapshot(plan, values, InvalidSnapshot, expected);
}

/* Column colno of result row 'row'; NULL only where the caller allows it. */
static Datum
col(uint64 row, int colno, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc,
						 colno, isnull);
}

static Datum
colv(uint64 row, int colno)
{
	bool		isnull;

	return col(row, colno, &isnull);
}

/* Text column copied out of SPI memory into the caller's context. */
static char *
col_text(uint64 row, int colno)
{
	char	   *s = TextDatumGetCString(colv(row, colno));
	char	   *copy = SPI_palloc(strlen(s) + 1);

	strcpy(copy, s);
	return copy;
}

static void
copy_digest(Datum d, uint8 *out)
{
	bytea	   *b = DatumGetByteaPP(d);

	if (VARSIZE_ANY_EXHDR(b) != LAKE_DIGEST_LEN)
		elog(ERROR, "lake: stored digest has %d bytes", (int) VARSIZE_ANY_EXHDR(b));
	memcpy(out, VARDATA_ANY(b), LAKE_DIGEST_LEN);
}

static Datum
digest_datum(const uint8 *digest)
{
	bytea	   *d = palloc(VARHDRSZ + LAKE_DIGEST_LEN);

	SET_VARSIZE(d, VARHDRSZ + LAKE_DIGEST_LEN);
	memcpy(VARDATA(d), digest, LAKE_DIGEST_LEN);
	return PointerGetDatum(d);
}

/* ----------------------------------------------------------------------
 * Direct index lookups
 *
 * The hot point lookups (an append, a replay, a read's header, a cast's
 * operation id) go straight to the index: no planner, no executor, and no
 * cached generic plan that chose a sequential scan while a table was empty.
 * The snapshot is the caller's choice; InvalidSnapshot means what SPI
 * would use: a fresh one in READ COMMITTED, the transaction's otherwise.
 * ---------------------------------------------------------------------- */

static Oid
lake_relid(const char *name)
{
	Oid			relid = get_relname_relid(name, get_namespace_oid(LAKE_DATA_SCHEMA, false));

	if (!OidIsValid(relid))
		elog(ERROR, "lake: relation lake_data.%s is missing", name);
	return relid;
}

void
store_key_int4(ScanKeyData *key, AttrNumber att, int32 value)
{
	ScanKeyInit(key, att, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(value));
}

void
store_key_int8(ScanKeyData *key, AttrNumber att, int64 value)
{
	ScanKeyInit(key, att, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(value));
}

void
store_key_text(ScanKeyData *key, AttrNumber att, const char *value)
{
	ScanKeyEntryInitialize(key, 0, att, BTEqualStrategyNumber, InvalidOid,
						   DEFAULT_COLLATION_OID, F_TEXTEQ, CStringGetTextDatum(value));
}

/*
 * The first row of 'table' through 'index' matching the keys, scanning
 * forward or (for "the highest") backward; its columns are copied into
 * values/nulls (sized for the table). False if there is none.
 */
bool
store_fetch(const char *table, const char *index, Snapshot snapshot,
			ScanKeyData *keys, int nkeys, ScanDirection dir,
			Datum *values, bool *nulls)
{
	Relation	rel = table_open(lake_relid(table), AccessShareLock);
	Relation	idx = index_open(lake_relid(index), AccessShareLock);
	SysScanDesc scan;
	HeapTuple	tup;
	bool		found;

	if (snapshot == InvalidSnapshot)
		snapshot = GetTransactionSnapshot();
	scan = systable_beginscan_ordered(rel, idx, snapshot, nkeys, keys);
	tup = systable_getnext_ordered(scan, dir);
	found = HeapTupleIsValid(tup);
	if (found)
		heap_deform_tuple(heap_copytuple(tup), RelationGetDescr(rel), values, nulls);
	systable_endscan_ordered(scan);
	index_close(idx, AccessShareLock);
	table_close(rel, AccessShareLock);
	return found;
}

/* ----------------------------------------------------------------------
 * Datasets
 * ---------------------------------------------------------------------- */

void
store_create_dataset(const char *name)
{
	static SPIPlanPtr plan;
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(name)};

	run(store_plan(&plan,
				 "INSERT INTO lake_data.dataset AS d (name) VALUES ($1) "
				 "ON CONFLICT (name) DO NOTHING RETURNING d.id",
				 1, types),
		values, SPI_OK_INSERT_RETURNING);
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
	ScanKeyData key[1];
	Datum		values[3];
	bool		nulls[3];

	store_key_text(&key[0], 2, name);
	if (!store_fetch("dataset", "dataset_name", InvalidSnapshot, key, 1,
					 ForwardScanDirection, values, nulls))
		dataset_missing(name);
	return DatumGetInt32(values[0]);
}

/*
 * Take a transaction-scoped object lock (keyed by a lake_data table's OID
 * and an id: no WAL, shows in pg_locks), waiting at most 'wait_ms'. The
 * wait queues in the lock manager (first come, first served, deadlock
 * detection) under a lock_timeout lowered to the time left; returns false
 * when that runs out. A session's own lower lock_timeout still applies
 * and still raises its own 55P03.
 */
static bool
lock_bounded(Oid classid, Oid objid, long wait_ms)
{
	bool		bounded;
	int			nest;
	MemoryContext mcxt = CurrentMemoryContext;

	if (ConditionalLockDatabaseObject(classid, objid, 0, ExclusiveLock))
		return true;
	if (wait_ms <= 0)
		return false;
	bounded = LockTimeout == 0 || LockTimeout > wait_ms;
	nest = NewGUCNestLevel();
	if (bounded)
		(void) set_config_option("lock_timeout", psprintf("%ld", wait_ms),
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
								 true, 0, false);
	PG_TRY();
	{
		LockDatabaseObject(classid, objid, 0, ExclusiveLock);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(mcxt);
		edata = CopyErrorData();
		if (!bounded || edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
			PG_RE_THROW();
		FlushErrorState();
		AtEOXact_GUC(true, nest);
		return false;
	}
	PG_END_TRY();
	AtEOXact_GUC(true, nest);
	return true;
}

static Oid
data_table(const char *name)
{
	Oid			relid = get_relname_relid(name, get_namespace_oid(LAKE_DATA_SCHEMA, false));

	if (!OidIsValid(relid))
		elog(ERROR, "lake: table %s.%s is missing", LAKE_DATA_SCHEMA, name);
	return relid;
}

/*
 * Appends to one dataset serialize on a lock on the dataset. Held to
 * commit, it makes version numbers gap-free and commit-ordered: the next
 * holder sees the previous holder's version with a fresh snapshot. The
 * wait is bounded by what is left of the caller's admission budget: a
 * waiter holds an admission slot, so an open transaction of one tenant
 * must not pin other tenants' slots for as long as it stays open.
 */
bool
store_lock_dataset(int32 dataset_id, long wait_ms)
{
	return lock_bounded(data_table("dataset"), (Oid) dataset_id, wait_ms);
}

/* ----------------------------------------------------------------------
 * Operations
 * ---------------------------------------------------------------------- */

/* Columns of lake_data.version, as created by the install script. */
#define VERSION_NATTS 11
#define VA_DATASET 1
#define VA_NCHUNKS 2
#define VA_VERSION 3
#define VA_BYTES 4
#define VA_BLOB 6
#define VA_TENANT 8
#define VA_OPERATION 9
#define VA_DIGEST 10
#define VA_DATA 11

/* The operation's version under 'snapshot', if it has one. */
static void
find_operation(int32 dataset_id, const char *tenant, const char *operation_id,
			   Snapshot snapshot, OperationLookup *out)
{
	ScanKeyData key[3];
	Datum		values[VERSION_NATTS];
	bool		nulls[VERSION_NATTS];

	store_key_int4(&key[0], VA_DATASET, dataset_id);
	store_key_text(&key[1], VA_TENANT, tenant);
	store_key_text(&key[2], VA_OPERATION, operation_id);
	out->dataset_id = dataset_id;
	out->found = store_fetch("version", "version_operation", snapshot, key, 3,
							 ForwardScanDirection, values, nulls);
	if (out->found)
	{
		out->version = DatumGetInt64(values[VA_VERSION - 1]);
		copy_digest(values[VA_DIGEST - 1], out->digest);
	}
}

void
store_lookup_operation(const char *dataset, const char *tenant,
					   const char *operation_id, OperationLookup *out)
{
	find_operation(store_dataset_id(dataset), tenant, operation_id,
				   InvalidSnapshot, out);
}

void
store_recheck_operation(const char *tenant, const char *operation_id,
						Snapshot snapshot, OperationLookup *out)
{
	ScanKeyData key[1];
	Datum		values[VERSION_NATTS];
	bool		nulls[VERSION_NATTS];

	if (snapshot == InvalidSnapshot)
		snapshot = GetTransactionSnapshot();
	find_operation(out->dataset_id, tenant, operation_id, snapshot, out);
	store_key_int4(&key[0], VA_DATASET, out->dataset_id);
	out->max_version = store_fetch("version", "version_pkey", snapshot, key, 1,
								   BackwardScanDirection, values, nulls) ?
		DatumGetInt64(values[VA_VERSION - 1]) : 0;
}

/* ----------------------------------------------------------------------
 * Versions
 * ---------------------------------------------------------------------- */

/* Encode (compress or not, codec.h) into a freshly palloc'd bytea. */
bytea *
store_encode(const char *data, size_t len)
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

static int64
insert_chunk(int64 blob, int32 chunk_no, const uint8 *digest, const char *data,
			 size_t len)
{
	static SPIPlanPtr plan;
	Oid			types[5] = {INT8OID, INT4OID, INT4OID, BYTEAOID, BYTEAOID};
	bytea	   *enc = store_encode(data, len);
	int64		stored = VARSIZE(enc) - VARHDRSZ;
	Datum		values[5] = {Int64GetDatum(blob), Int32GetDatum(chunk_no),
		Int32GetDatum((int32) len), (Datum) 0, PointerGetDatum(enc)};
	char		nulls[5] = {' ', ' ', ' ', 'n', ' '};
	int			rc;

	if (digest != NULL)
	{
		values[3] = digest_datum(digest);
		nulls[3] = ' ';
	}
	rc = SPI_execute_plan(store_plan_once(&plan,
										"INSERT INTO lake_data.chunk (blob, chunk_no, bytes, digest, data) "
								   "VALUES ($1, $2, $3, $4, $5)",
								   5, types),
						  values, nulls, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "lake: SPI returned %s inserting a chunk", SPI_result_code_string(rc));
	pfree(enc);
	return stored;
}

static int64
next_blob(void)
{
	static SPIPlanPtr plan;

	run(store_plan_once(&plan, "SELECT pg_catalog.nextval('lake_data.blob_seq'::pg_catalog.regclass)",
				 0, NULL),
		NULL, SPI_OK_SELECT);
	/* In this partition's residue class: a stage id routes by itself. */
	return lake_partition_handle(DatumGetInt64(colv(0, 1)));
}

static void
insert_version(int32 dataset_id, int64 version, const char *tenant,
			   const char *operation_id, const uint8 *digest, int64 bytes,
			   int64 stored, int32 nchunks, int64 blob, bytea *inline_chunk)
{
	static SPIPlanPtr plan;
	Oid			types[10] = {INT4OID, INT8OID, TEXTOID, TEXTOID, BYTEAOID,
	INT8OID, INT8OID, INT4OID, INT8OID, BYTEAOID};
	Datum		values[10];
	char		nulls[10];
	int			rc;

	memset(nulls, ' ', sizeof(nulls));
	values[0] = Int32GetDatum(dataset_id);
	values[1] = Int64GetDatum(version);
	values[2] = CStringGetTextDatum(tenant);
	values[3] = CStringGetTextDatum(operation_id);
	values[4] = digest_datum(digest);
	values[5] = Int64GetDatum(bytes);
	values[6] = Int64GetDatum(stored);
	values[7] = Int32GetDatum(nchunks);
	values[8] = Int64GetDatum(blob);
	nulls[8] = blob == 0 ? 'n' : ' ';
	values[9] = PointerGetDatum(inline_chunk);
	nulls[9] = inline_chunk == NULL ? 'n' : ' ';

	/*
	 * committed_at is the clock at insert, taken under the dataset lock, so
	 * it never goes backwards within a dataset (now() would: it is the
	 * start of a transaction that may have waited for the lock).
	 */
	rc = SPI_execute_plan(store_plan_once(&plan,
										"INSERT INTO lake_data.version (dataset_id, version, tenant, operation_id, "
								   " digest, bytes, stored_bytes, nchunks, blob, committed_at, data) "
								   "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, "
								   "        pg_catalog.clock_timestamp(), $10)",
								   10, types),
						  values, nulls, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "lake: SPI returned %s inserting a version", SPI_result_code_string(rc));
}

void
store_write_version(int32 dataset_id, int64 version, const char *tenant,
					const char *operation_id, const uint8 *digest,
					const char *payload, int64 len)
{
	int32		nchunks = len == 0 ? 1 : (int32) ((len + LAKE_CHUNK_BYTES - 1) / LAKE_CHUNK_BYTES);
	bytea	   *first = store_encode(payload, Min(len, LAKE_CHUNK_BYTES));
	int64		stored = VARSIZE(first) - VARHDRSZ;
	int64		blob = nchunks > 1 ? next_blob() : 0;

	for (int32 i = 1; i < nchunks; i++)
	{
		int64		off = (int64) i * LAKE_CHUNK_BYTES;

		stored += insert_chunk(blob, i, NULL, payload + off,
							   Min(len - off, LAKE_CHUNK_BYTES));
	}
	insert_version(dataset_id, version, tenant, operation_id, digest, len,
				   stored, nchunks, blob, first);
	pfree(first);
}

/* The stage's chunks become the version's: insert its row, retire the stage. */
void
store_adopt_stage(const StageRow *stage, int64 version, const uint8 *digest,
				  const StageSummary *sum)
{
	insert_version(stage->dataset_id, version, stage->tenant, stage->operation_id,
				   digest, sum->bytes, sum->stored_bytes, (int32) sum->nchunks,
				   stage->id, NULL);
	store_drop_stage(stage->id, false);
}

bool
store_version_head(int32 dataset_id, int64 version, VersionHead *head)
{
	ScanKeyData key[2];
	Datum		values[VERSION_NATTS];
	bool		nulls[VERSION_NATTS];

	store_key_int4(&key[0], VA_DATASET, dataset_id);
	store_key_int8(&key[1], VA_VERSION, version);
	if (!store_fetch("version", "version_pkey", InvalidSnapshot, key, 2,
					 ForwardScanDirection, values, nulls))
		return false;
	head->tenant = TextDatumGetCString(values[VA_TENANT - 1]);
	head->bytes = DatumGetInt64(values[VA_BYTES - 1]);
	copy_digest(values[VA_DIGEST - 1], head->digest);
	head->nchunks = DatumGetInt32(values[VA_NCHUNKS - 1]);
	head->blob = nulls[VA_BLOB - 1] ? 0 : DatumGetInt64(values[VA_BLOB - 1]);
	head->inline_chunk = nulls[VA_DATA - 1] ? NULL :
		DatumGetByteaPCopy(values[VA_DATA - 1]);
	return true;
}

/*
 * Decode and verify one stored chunk and hand it to 'visit'. Returns NULL,
 * or why the chunk is unreadable. Even a raw chunk is copied out: its
 * checksum must hold before anyone sees its bytes.
 */
static const char *
visit_stored(bytea *stored, size_t room, ChunkVisitor visit, void *arg,
			 size_t *decoded)
{
	const uint8_t *in = (const uint8_t *) VARDATA_ANY(stored);
	size_t		inlen = VARSIZE_ANY_EXHDR(stored);
	size_t		size;
	LakeCodecStatus st = lake_chunk_decoded_size(in, inlen, &size);
	char	   *out;

	if (st == LAKE_CODEC_OK && size > room)
		st = LAKE_CODEC_TOO_BIG;
	if (st != LAKE_CODEC_OK)
		return lake_codec_status_text(st);
	out = palloc(Max(size, 1));
	st = lake_chunk_decode(in, inlen, (uint8_t *) out, size, decoded);
	if (st != LAKE_CODEC_OK)
		return lake_codec_status_text(st);
	visit(out, *decoded, arg);
	pfree(out);
	return NULL;
}

/*
 * Stream the chunks [first, first+count) of a blob, in order, one at a time
 * through a cursor: memory stays at one chunk whatever the payload's size.
 * 'total' bounds the decoded bytes. Returns NULL, or why the chunks do not
 * make up the payload (a chunk missing, extra, undecodable or oversized).
 */
const char *
store_visit_chunks(int64 blob, int32 first, int64 count, int64 total,
				   ChunkVisitor visit, void *arg)
{
	static SPIPlanPtr plan;
	Oid			types[2] = {INT8OID, INT4OID};
	Datum		values[2] = {Int64GetDatum(blob), Int32GetDatum(first)};
	MemoryContext chunkcxt = AllocSetContextCreate(CurrentMemoryContext,
												   "lake chunk",
												   ALLOCSET_DEFAULT_SIZES);
	Portal		portal;
	int64		seen = 0;
	int64		filled = 0;
	const char *why = NULL;

	portal = SPI_cursor_open(NULL,
							 store_plan(&plan,
									  "SELECT c.chunk_no, c.data FROM lake_data.chunk c "
									  "WHERE c.blob OPERATOR(pg_catalog.=) $1 "
									  "  AND c.chunk_no OPERATOR(pg_catalog.>=) $2 "
									  "ORDER BY c.chunk_no",
									  2, types),
							 values, NULL, true);
	for (;;)
	{
		int32		chunk_no;
		MemoryContext old;
		size_t		decoded = 0;

		CHECK_FOR_INTERRUPTS();
		SPI_cursor_fetch(portal, true, 1);
		if (SPI_processed == 0)
			break;
		chunk_no = DatumGetInt32(colv(0, 1));
		if (chunk_no != first + seen)
		{
			why = psprintf("chunk " INT64_FORMAT " is missing", first + seen);
			break;
		}
		if (seen == count)
		{
			why = psprintf("chunk %d is beyond the " INT64_FORMAT " the version declares",
						   chunk_no, count);
			break;
		}
		old = MemoryContextSwitchTo(chunkcxt);
		why = visit_stored(DatumGetByteaPP(colv(0, 2)), (size_t) (total - filled),
						   visit, arg, &decoded);
		MemoryContextSwitchTo(old);
		MemoryContextReset(chunkcxt);
		SPI_freetuptable(SPI_tuptable);
		if (why != NULL)
			break;
		filled += decoded;
		seen++;
	}
	SPI_cursor_close(portal);
	MemoryContextDelete(chunkcxt);
	if (why == NULL && seen != count)
		why = psprintf("chunk " INT64_FORMAT " is missing", first + seen);
	if (why == NULL && filled != total)
		why = psprintf("chunks hold " INT64_FORMAT " of " INT64_FORMAT " bytes",
					   filled, total);
	return why;
}

/* A version's chunks on their way to a visitor, through its digest. */
typedef struct VerifyVisit
{
	LakeDigest *digest;
	ChunkVisitor visit;			/* NULL: only verify */
	void	   *arg;
} VerifyVisit;

static void
verify_visit(const char *data, size_t len, void *arg)
{
	VerifyVisit *v = (VerifyVisit *) arg;

	lake_digest_update(v->digest, data, len);
	if (v->visit != NULL)
		v->visit(data, len, v->arg);
}

static const char *
visit_version_chunks(const VersionHead *head, ChunkVisitor visit, void *arg)
{
	size_t		first_len = 0;
	const char *why;

	if (head->inline_chunk == NULL)
		return store_visit_chunks(head->blob, 0, head->nchunks, head->bytes, visit, arg);

	why = visit_stored(head->inline_chunk, (size_t) head->bytes, visit, arg, &first_len);
	if (why != NULL)
		return why;
	if (head->nchunks == 1)
		return first_len == (size_t) head->bytes ? NULL :
			psprintf("chunks hold %zu of " INT64_FORMAT " bytes", first_len, head->bytes);
	return store_visit_chunks(head->blob, 1, head->nchunks - 1,
							  head->bytes - (int64) first_len, visit, arg);
}

const char *
store_visit_version(const VersionHead *head, ChunkVisitor visit, void *arg)
{
	VerifyVisit v = {lake_digest_begin(), visit, arg};
	uint8		got[LAKE_DIGEST_LEN];
	const char *why = visit_version_chunks(head, verify_visit, &v);

	lake_digest_end(v.digest, got);
	if (why == NULL && memcmp(head->digest, got, LAKE_DIGEST_LEN) != 0)
		why = "the payload does not match its digest";
	return why;
}

void
store_lineage_broken(const char *dataset, int64 version, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_LAKE_INCOMPLETE_LINEAGE),
			 errmsg("version " INT64_FORMAT " of dataset \"%s\" is incomplete", version, dataset),
			 errdetail("%s", why),
			 errhint("The stored chunks are missing or damaged; restore them from a backup.")));
}

void
store_check_lineage(const char *dataset, int32 dataset_id, int64 version)
{
	VersionHead head;
	const char *why;

	if (!store_version_head(dataset_id, version, &head))
		elog(ERROR, "lake: version " INT64_FORMAT " of dataset \"%s\" vanished",
			 version, dataset);
	why = store_visit_version(&head, NULL, NULL);
	if (why != NULL)
		store_lineage_broken(dataset, version, why);
}

void
store_list_versions(int32 dataset_id, int64 after_version, Oid only_role,
					ReturnSetInfo *rsinfo)
{
	static SPIPlanPtr plan_all;
	static SPIPlanPtr plan_granted;
	Oid			types[3] = {INT4OID, INT8OID, OIDOID};
	Datum		values[3] = {Int32GetDatum(dataset_id), Int64GetDatum(after_version),
	ObjectIdGetDatum(only_role)};
	SPIPlanPtr	plan;

#define VERSION_COLUMNS \
	"SELECT v.version, v.tenant, v.operation_id, v.digest, v.bytes, " \
	"       v.stored_bytes, v.committed_at FROM lake_data.version v " \
	"WHERE v.dataset_id OPERATOR(pg_catalog.=) $1 " \
	"  AND v.version OPERATOR(pg_catalog.>) $2 "

	if (OidIsValid(only_role))
		plan = store_plan(&plan_granted,
						VERSION_COLUMNS
						"  AND EXISTS (SELECT 1 FROM lake_data.tenant_grant g "
						"    JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) g.role "
						"    WHERE g.tenant OPERATOR(pg_catalog.=) v.tenant "
						"      AND pg_catalog.pg_has_role($3, g.role, 'USAGE')) "
						"ORDER BY v.version",
						3, types);
	else
		plan = store_plan(&plan_all, VERSION_COLUMNS "ORDER BY v.version", 2, types);
#undef VERSION_COLUMNS

	store_fill(plan, values, rsinfo);
}

/*
 * Copy a query's rows into a set-returning function's tuplestore through
 * a cursor: memory stays flat however long the result. The query's
 * columns are the function's.
 */
void
store_fill(SPIPlanPtr plan, Datum *values, ReturnSetInfo *rsinfo)
{
	Portal		portal = SPI_cursor_open(NULL, plan, values, NULL, true);
	int			natts = rsinfo->setDesc->natts;
	Datum	   *row = palloc(sizeof(Datum) * natts);
	bool	   *nulls = palloc(sizeof(bool) * natts);

	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		SPI_cursor_fetch(portal, true, 1000);
		if (SPI_processed == 0)
			break;
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			heap_deform_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, row, nulls);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, nulls);
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
}

/* ----------------------------------------------------------------------
 * Stages
 * ---------------------------------------------------------------------- */

/* Open a stage for the operation, or return the one already open. */
/* The open stage of (dataset, tenant, operation) in values[0..2], or 0. */
static int64
find_stage(Datum *values, Oid *types)
{
	static SPIPlanPtr plan;

	run(store_plan(&plan,
				 "SELECT s.id FROM lake_data.stage s "
				 "WHERE s.dataset_id OPERATOR(pg_catalog.=) $1 "
				 "  AND s.tenant OPERATOR(pg_catalog.=) $2 "
				 "  AND s.operation_id OPERATOR(pg_catalog.=) $3",
				 3, types),
		values, SPI_OK_SELECT);
	return SPI_processed == 1 ? DatumGetInt64(colv(0, 1)) : 0;
}

int64
store_begin_stage(int32 dataset_id, const char *tenant, const char *operation_id,
				  Oid role, int max_open, int64 *open)
{
	static SPIPlanPtr plan_insert;
	static SPIPlanPtr plan_count;
	int64		id;
	Oid			types[5] = {INT4OID, TEXTOID, TEXTOID, OIDOID, INT8OID};
	Datum		values[5] = {Int32GetDatum(dataset_id), CStringGetTextDatum(tenant),
	CStringGetTextDatum(operation_id), ObjectIdGetDatum(role)};

	/*
	 * A capped role's begins serialize on a lock on (lake_data.stage, role)
	 * held to commit, so the count below and the insert are one step; the
	 * count comes from the table, so it survives restarts. An operation
	 * already open is returned without counting.
	 */
	if (max_open > 0)
	{
		if (!lock_bounded(data_table("stage"), role, lake_admission_queue_wait_ms))
			return -1;
		if ((id = find_stage(values, types)) != 0)
			return id;
		run(store_plan(&plan_count,
					 "SELECT pg_catalog.count(*) FROM lake_data.stage s "
					 "WHERE s.opened_by OPERATOR(pg_catalog.=) $1",
					 1, &types[3]),
			&values[3], SPI_OK_SELECT);
		*open = DatumGetInt64(colv(0, 1));
		if (*open >= max_open)
			return 0;
	}

	/*
	 * ON CONFLICT waits for a concurrent begin of the same operation; if
	 * that stage is then committed or aborted before we can read it, try
	 * again.
	 */
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		values[4] = Int64GetDatum(next_blob());
		run(store_plan(&plan_insert,
					 "INSERT INTO lake_data.stage AS s (id, dataset_id, tenant, operation_id, opened_by) "
					 "VALUES ($5, $1, $2, $3, $4) "
					 "ON CONFLICT (dataset_id, tenant, operation_id) DO NOTHING RETURNING s.id",
					 5, types),
			values, SPI_OK_INSERT_RETURNING);
		if (SPI_processed == 1)
			return DatumGetInt64(colv(0, 1));
		if ((id = find_stage(values, types)) != 0)
			return id;
	}
}

/* Lock an open stage (and mark it active); false if it is not open. */
bool
store_lock_stage(int64 stage, StageRow *row)
{
	static SPIPlanPtr plan;
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(stage)};

	run(store_plan(&plan,
				 "UPDATE lake_data.stage s SET touched_at = pg_catalog.now() "
				 "FROM lake_data.dataset d "
				 "WHERE s.id OPERATOR(pg_catalog.=) $1 AND d.id OPERATOR(pg_catalog.=) s.dataset_id "
				 "RETURNING s.dataset_id, d.name, s.tenant, s.operation_id",
				 1, types),
		values, SPI_OK_UPDATE_RETURNING);
	if (SPI_processed == 0)
		return false;
	row->id = stage;
	row->dataset_id = DatumGetInt32(colv(0, 1));
	row->dataset = col_text(0, 2);
	row->tenant = col_text(0, 3);
	row->operation_id = col_text(0, 4);
	return true;
}

/* The version a retired stage was committed as, if any. */
bool
store_stage_version(int64 stage, StageRow *row, OperationLookup *op)
{
	static SPIPlanPtr plan;
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(stage)};

	run(store_plan(&plan,
				 "SELECT v.dataset_id, d.name, v.tenant, v.operation_id, v.version, v.digest "
				 "FROM lake_data.version v JOIN lake_data.dataset d ON d.id OPERATOR(pg_catalog.=) v.dataset_id "
				 "WHERE v.blob OPERATOR(pg_catalog.=) $1",
				 1, types),
		values, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	row->id = stage;
	row->dataset_id = DatumGetInt32(colv(0, 1));
	row->dataset = col_text(0, 2);
	row->tenant = col_text(0, 3);
	row->operation_id = col_text(0, 4);
	op->dataset_id = row->dataset_id;
	op->found = true;
	op->version = DatumGetInt64(colv(0, 5));
	copy_digest(colv(0, 6), op->digest);
	return true;
}

bool
store_chunk_digest(int64 blob, int32 chunk_no, uint8 *digest)
{
	static SPIPlanPtr plan;
	Oid			types[2] = {INT8OID, INT4OID};
	Datum		values[2] = {Int64GetDatum(blob), Int32GetDatum(chunk_no)};

	run(store_plan(&plan,
				 "SELECT c.digest FROM lake_data.chunk c "
				 "WHERE c.blob OPERATOR(pg_catalog.=) $1 AND c.chunk_no OPERATOR(pg_catalog.=) $2",
				 2, types),
		values, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	copy_digest(colv(0, 1), digest);
	return true;
}

int64
store_stage_bytes(int64 blob, int32 except_chunk_no)
{
	static SPIPlanPtr plan;
	Oid			types[2] = {INT8OID, INT4OID};
	Datum		values[2] = {Int64GetDatum(blob), Int32GetDatum(except_chunk_no)};

	run(store_plan(&plan,
				 "SELECT pg_catalog.sum(c.bytes)::pg_catalog.int8 FROM lake_data.chunk c "
				 "WHERE c.blob OPERATOR(pg_catalog.=) $1 AND c.chunk_no OPERATOR(pg_catalog.<>) $2",
				 2, types),
		values, SPI_OK_SELECT);
	{
		bool		isnull;
		Datum		d = col(0, 1, &isnull);

		return isnull ? 0 : DatumGetInt64(d);
	}
}

void
store_put_chunk(int64 blob, int32 chunk_no, const uint8 *digest,
				const char *data, size_t len)
{
	(void) insert_chunk(blob, chunk_no, digest, data, len);
}

void
store_stage_summary(int64 blob, StageSummary *sum)
{
	static SPIPlanPtr plan;
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(blob)};

	run(store_plan(&plan,
				 "SELECT pg_catalog.count(*), "
				 "       COALESCE(pg_catalog.max(c.chunk_no), -1)::pg_catalog.int8, "
				 "       COALESCE(pg_catalog.max(c.bytes), 0)::pg_catalog.int8, "
				 "       COALESCE(pg_catalog.sum(c.bytes), 0)::pg_catalog.int8, "
				 "       COALESCE(pg_catalog.sum(pg_catalog.octet_length(c.data)), 0)::pg_catalog.int8 "
				 "FROM lake_data.chunk c WHERE c.blob OPERATOR(pg_catalog.=) $1",
				 1, types),
		values, SPI_OK_SELECT);
	sum->nchunks = DatumGetInt64(colv(0, 1));
	sum->last_chunk_no = DatumGetInt64(colv(0, 2));
	sum->largest_chunk = DatumGetInt64(colv(0, 3));
	sum->bytes = DatumGetInt64(colv(0, 4));
	sum->stored_bytes = DatumGetInt64(colv(0, 5));
}

/* The first chunk number missing below the last one uploaded. */
int64
store_first_missing_chunk(int64 blob)
{
	static SPIPlanPtr plan;
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(blob)};

	run(store_plan(&plan,
				 "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM lake_data.chunk z "
				 "   WHERE z.blob OPERATOR(pg_catalog.=) $1 AND z.chunk_no OPERATOR(pg_catalog.=) 0) "
				 "THEN 0::pg_catalog.int8 ELSE "
				 " (SELECT pg_catalog.min(c.chunk_no::pg_catalog.int8 OPERATOR(pg_catalog.+) 1) "
				 "  FROM lake_data.chunk c WHERE c.blob OPERATOR(pg_catalog.=) $1 AND NOT EXISTS "
				 "  (SELECT 1 FROM lake_data.chunk n WHERE n.blob OPERATOR(pg_catalog.=) $1 "
				 "     AND n.chunk_no OPERATOR(pg_catalog.=) (c.chunk_no::pg_catalog.int8 OPERATOR(pg_catalog.+) 1))) "
				 "END",
				 1, types),
		values, SPI_OK_SELECT);
	return DatumGetInt64(colv(0, 1));
}

void
store_drop_stage(int64 stage, bool with_chunks)
{
	static SPIPlanPtr plan_stage;
	static SPIPlanPtr plan_chunks;
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(stage)};

	run(store_plan(&plan_stage,
				 "DELETE FROM lake_data.stage s WHERE s.id OPERATOR(pg_catalog.=) $1",
				 1, types),
		values, SPI_OK_DELETE);
	if (with_chunks)
		run(store_plan(&plan_chunks,
					 "DELETE FROM lake_data.chunk c WHERE c.blob OPERATOR(pg_catalog.=) $1",
					 1, types),
			values, SPI_OK_DELETE);
}

/*
 * Remove stages idle since before 'idle_before', with their chunks. A stage
 * being committed or written to right now is locked and skipped.
 */
void
store_expire_stages(TimestampTz idle_before, int64 *stages, int64 *chunks,
					int64 *open)
{
	static SPIPlanPtr plan;
	static SPIPlanPtr plan_open;
	Oid			types[1] = {TIMESTAMPTZOID};
	Datum		values[1] = {TimestampTzGetDatum(idle_before)};

	run(store_plan(&plan,
				 "WITH gone AS ("
				 "  DELETE FROM lake_data.stage s WHERE s.id IN ("
				 "    SELECT x.id FROM lake_data.stage x WHERE x.touched_at OPERATOR(pg_catalog.<) $1 "
				 "    FOR UPDATE SKIP LOCKED) RETURNING s.id), "
				 "chunks AS ("
				 "  DELETE FROM lake_data.chunk c USING gone "
				 "  WHERE c.blob OPERATOR(pg_catalog.=) gone.id RETURNING 1) "
				 "SELECT (SELECT pg_catalog.count(*) FROM gone), "
				 "       (SELECT pg_catalog.count(*) FROM chunks)",
				 1, types),
		values, SPI_OK_SELECT);
	*stages = DatumGetInt64(colv(0, 1));
	*chunks = DatumGetInt64(colv(0, 2));
	run(store_plan(&plan_open, "SELECT pg_catalog.count(*) FROM lake_data.stage", 0, NULL),
		NULL, SPI_OK_SELECT);
	*open = DatumGetInt64(colv(0, 1));
}

/* ----------------------------------------------------------------------
 * Tenants
 * ---------------------------------------------------------------------- */

bool
store_tenant_granted(const char *tenant, Oid role)
{
	static SPIPlanPtr plan;
	Oid			types[2] = {TEXTOID, OIDOID};
	Datum		values[2] = {CStringGetTextDatum(tenant), ObjectIdGetDatum(role)};

	run_snapshot(store_plan(&plan,
				 "SELECT 1 FROM lake_data.tenant_grant g "
				 "JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) g.role "
				 "WHERE g.tenant OPERATOR(pg_catalog.=) $1 "
				 "  AND pg_catalog.pg_has_role($2, g.role, 'USAGE') LIMIT 1",
				 2, types),
		values, GetLatestSnapshot(), SPI_OK_SELECT);
	return SPI_processed > 0;
}

void
store_set_tenant_grant(const char *tenant, Oid role, bool grant)
{
	static SPIPlanPtr plan_grant;
	static SPIPlanPtr plan_revoke;
	Oid			types[2] = {TEXTOID, OIDOID};
	Datum		values[2] = {CStringGetTextDatum(tenant), ObjectIdGetDatum(role)};

	if (grant)
		run(store_plan(&plan_grant,
					 "INSERT INTO lake_data.tenant_grant (tenant, role) VALUES ($1, $2) "
					 "ON CONFLICT DO NOTHING",
					 2, types),
			values, SPI_OK_INSERT);
	else
		run(store_plan(&plan_revoke,
					 "DELETE FROM lake_data.tenant_grant g "
					 "WHERE g.tenant OPERATOR(pg_catalog.=) $1 AND g.role OPERATOR(pg_catalog.=) $2",
					 2, types),
			values, SPI_OK_DELETE);
}
