/*
 * store_version.c — datasets, versions and their chunks.
 *
 *   lake_data.dataset  (id, name, created_at)
 *   lake_data.version       (version, committed_at, dataset_id, data,
 *                            tenant, operation_id, digest)
 *   lake_data.version_blob  (blob, dataset_id, nchunks, version, bytes)
 *   lake_data.chunk         (blob, chunk_no, bytes, data)
 *
 * A payload of one chunk lives in its version row (data), so the common
 * small append writes one heap row and two index entries. Larger payloads
 * keep their chunks in lake_data.chunk under a blob id, which a
 * version_blob row names; a stage's id is the blob its chunks are uploaded
 * to, so committing a stage hands them to the version as they are.
 * Chunk 0 in the row is checked at LAKE_PLACE_NONE, or bare in rows of
 * earlier builds (codec.h); the version's SHA-256 digest, checked at every
 * read, verifies either, and its decoded size, which its header records,
 * is the payload's unless a version_blob row says more.
 *
 * An operation's version is found through version_operation, an index on
 * (dataset_id, operation_hash(tenant, operation_id)): equal hashes are
 * told apart by the rows' own ids. Its uniqueness is operation.c's: one
 * version per operation because versions are written under the dataset's
 * append lock after a look with a fresh snapshot.
 *
 * The hot paths (an append, a replay, a read) go through the table and
 * index AMs (store_row.h); SPI serves the rare and administrative
 * statements.
 */
#include "lake.h"

#include "access/detoast.h"
#include "access/genam.h"
#include "access/relscan.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/transam.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_type.h"
#include "codec.h"
#include "common/hashfn.h"
#include "digest.h"
#include "encode.h"
#include "executor/tuptable.h"
#include "guc.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "storage/bufmgr.h"
#include "store_blob.h"
#include "store_dict.h"
#include "store_grant.h"
#include "store_rel.h"
#include "store_row.h"
#include "store_version.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(lake_operation_hash);
PG_FUNCTION_INFO_V1(lake_chunk_bytes);

/* ----------------------------------------------------------------------
 * Datasets
 * ---------------------------------------------------------------------- */

static void
dataset_creation_busy(const void *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
			 errmsg("creation of dataset \"%s\" is busy", (const char *) name),
			 errdetail("Another transaction creating it, or holding its table locked, stayed open longer than lake.admission_queue_wait (%d ms).",
					   lake_admission_queue_wait_ms),
			 errhint("Retry later; nothing was written.")));
}

static void
dataset_exists(const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_DUPLICATE_OBJECT),
			 errmsg("dataset \"%s\" already exists", name)));
}

void
store_create_dataset(const char *name)
{
	static SPIPlanPtr plan_find;
	static SPIPlanPtr plan;
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(name)};

	/*
	 * An existing name is refused before the insert, whose identity takes
	 * an id even when the name conflicts: callers that create a dataset
	 * before each append would use the ids up, and then be told 2200H for
	 * a name that exists. A plain read (a lock would take an xid and write
	 * WAL per call): a row being removed by hand is the name's until that
	 * commits (42710 meanwhile), and a name it does not see is left to the
	 * insert, which waits for a creator in progress within the bound. Only
	 * a creator racing for the same name takes an id.
	 */
	store_run(store_plan(&plan_find,
						 "SELECT 1 FROM lake_data.dataset d WHERE d.name OPERATOR(pg_catalog.=) $1",
						 1, types),
			  values, SPI_OK_SELECT);
	if (SPI_processed > 0)
		dataset_exists(name);
	store_run_bounded(store_plan(&plan,
						  "INSERT INTO lake_data.dataset AS d (name) VALUES ($1) "
						  "ON CONFLICT (name) DO NOTHING RETURNING d.id",
						  1, types),
					  values, SPI_OK_INSERT_RETURNING, lake_admission_queue_wait_ms,
					  dataset_creation_busy, name);
	if (SPI_processed == 0)
		dataset_exists(name);
}

static void
dataset_missing(const char *name)
{
	/* Not here because a router sent it to another partition: say so. */
	lake_require_partition_name("dataset", name);
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("dataset \"%s\" does not exist", name),
			 errhint("Create it with lake.create_dataset().")));
}

/*
 * Dataset ids by name, cached per backend (a name's id never changes while
 * its row stands). Dropped at every store_generation() change: a hand edit
 * of lake_data.dataset (its trigger invalidates the table), the extension
 * dropped, an abort (it may have created a dataset it looked up).
 */
#define DATASETS_MAX 1024

typedef struct DatasetEntry
{
	char		name[LAKE_NAME_MAX_BYTES + 1];	/* zero-padded */
	int32		id;
} DatasetEntry;

static HTAB *datasets = NULL;
static uint64 datasets_generation = 0;

static DatasetEntry *
dataset_entry(const char *name, HASHACTION action)
{
	char		key[LAKE_NAME_MAX_BYTES + 1];
	size_t		len = strlen(name);

	if (len > LAKE_NAME_MAX_BYTES)
		return NULL;
	if (datasets == NULL || datasets_generation != store_generation() ||
		(action == HASH_ENTER && hash_get_num_entries(datasets) >= DATASETS_MAX))
	{
		HASHCTL		ctl;

		if (datasets != NULL)
			hash_destroy(datasets);
		datasets = NULL;		/* until made again: creating it may fail */
		ctl.keysize = sizeof(key);
		ctl.entrysize = sizeof(DatasetEntry);
		ctl.hcxt = TopMemoryContext;
		datasets = hash_create("lake dataset ids", 64, &ctl,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		datasets_generation = store_generation();
	}
	memset(key, 0, sizeof(key));
	memcpy(key, name, len);
	return (DatasetEntry *) hash_search(datasets, key, action, NULL);
}

int32
store_dataset_id(const char *name)
{
	DatasetEntry *e;
	ScanKeyData key[1];
	Datum		values[3];
	bool		nulls[3];

	/*
	 * A name renamed or recreated since this transaction last took in
	 * invalidations (a call later in one statement or transaction block,
	 * before any lock of this call) must not answer with the id it had:
	 * ids restart with the extension, so it may be another dataset's.
	 */
	AcceptInvalidationMessages();
	e = dataset_entry(name, HASH_FIND);
	if (e != NULL)
		return e->id;
	store_key_text(&key[0], 2, name);
	if (!store_fetch("dataset", "dataset_name", InvalidSnapshot, key, 1,
					 ForwardScanDirection, values, nulls))
		dataset_missing(name);
	/*
	 * The fetch may have accepted an invalidation: enter under the new
	 * generation, but only what a fresh snapshot read. A REPEATABLE READ
	 * transaction's answers its own snapshot, and kept, would outlive it.
	 */
	if (!IsolationUsesXactSnapshot() && (e = dataset_entry(name, HASH_ENTER)) != NULL)
		e->id = DatumGetInt32(values[0]);
	return DatumGetInt32(values[0]);
}

/* The name of a dataset that a version row names. */
char *
store_dataset_name(int32 dataset_id)
{
	ScanKeyData key[1];
	Datum		values[3];
	bool		nulls[3];

	store_key_int4(&key[0], 1, dataset_id);
	if (!store_fetch("dataset", "dataset_pkey", InvalidSnapshot, key, 1,
					 ForwardScanDirection, values, nulls))
		elog(ERROR, "lake: dataset %d of a version is missing", dataset_id);
	return TextDatumGetCString(values[1]);
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
	return store_lock_object(store_relid("dataset"), (Oid) dataset_id, 0, wait_ms);
}

/* ----------------------------------------------------------------------
 * Operations
 * ---------------------------------------------------------------------- */

/* Columns of lake_data.version, as created by the install script. */
#define VERSION_NATTS 7
#define VA_VERSION 1
#define VA_COMMITTED 2
#define VA_DATASET 3
#define VA_DATA 4
#define VA_TENANT 5
#define VA_OPERATION 6
#define VA_DIGEST 7

/* Columns of lake_data.version_blob. */
#define VERSION_BLOB_NATTS 5
#define VB_BLOB 1
#define VB_DATASET 2
#define VB_NCHUNKS 3
#define VB_VERSION 4
#define VB_BYTES 5

/* Columns of lake_data.stage_replay. */
#define STAGE_REPLAY_NATTS 5
#define SR_STAGE 1
#define SR_DATASET 2
#define SR_VERSION 3
#define SR_TENANT 4
#define SR_OPERATION 5

/* Columns of lake_data.chunk, as created by the install script. */
#define CHUNK_NATTS 4
#define CA_BLOB 1
#define CA_CHUNK_NO 2
#define CA_BYTES 3
#define CA_DATA 4

/* The key version_operation finds an operation by (its second column). */
static int32
operation_hash(const char *tenant, size_t tenant_len, const char *operation_id,
			   size_t operation_len)
{
	return (int32) hash_combine(hash_bytes((const unsigned char *) tenant, (int) tenant_len),
								hash_bytes((const unsigned char *) operation_id,
										   (int) operation_len));
}

/* lake_data.operation_hash(tenant, operation_id), the index's expression. */
Datum
lake_operation_hash(PG_FUNCTION_ARGS)
{
	text	   *tenant = PG_GETARG_TEXT_PP(0);
	text	   *operation_id = PG_GETARG_TEXT_PP(1);

	PG_RETURN_INT32(operation_hash(VARDATA_ANY(tenant), VARSIZE_ANY_EXHDR(tenant),
								   VARDATA_ANY(operation_id),
								   VARSIZE_ANY_EXHDR(operation_id)));
}

/* lake_data.chunk_bytes(data): a chunk 0's decoded size (lake.versions). */
Datum
lake_chunk_bytes(PG_FUNCTION_ARGS)
{
	/*
	 * The header alone is fetched (a tag and at most 14 bytes of magicless
	 * frame header), with the stored length: a raw chunk's size is its length, a
	 * frame's is in its header, and neither read goes past the header.
	 */
	bytea	   *head = PG_GETARG_BYTEA_P_SLICE(0, 0, 32);
	size_t		len = toast_raw_datum_size(PG_GETARG_DATUM(0)) - VARHDRSZ;
	size_t		size;
	LakeCodecStatus st;

	Assert(VARSIZE_ANY_EXHDR(head) == Min(len, 32));
	st = lake_chunk_decoded_size((const uint8 *) VARDATA_ANY(head), len,
								 lake_chunk_is_bare((const uint8 *) VARDATA_ANY(head), len),
								 &size);
	if (st == LAKE_CODEC_OK && size > LAKE_CHUNK_BYTES)
		st = LAKE_CODEC_TOO_BIG;

	if (st != LAKE_CODEC_OK)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("a version's stored chunk 0 is damaged"),
				 errdetail("%s", lake_codec_status_text(st))));
	PG_RETURN_INT64((int64) size);
}

/* The version_blob row of a version, if it has one. */
static bool
find_version_blob(VersionHead *head)
{
	ScanKeyData key[2];
	Datum		values[VERSION_BLOB_NATTS];
	bool		nulls[VERSION_BLOB_NATTS];

	store_key_int4(&key[0], VB_DATASET, head->dataset_id);
	store_key_int8(&key[1], VB_VERSION, head->version);
	if (!store_fetch("version_blob", "version_blob_version", InvalidSnapshot, key, 2,
					 ForwardScanDirection, values, nulls))
		return false;
	head->blob = DatumGetInt64(values[VB_BLOB - 1]);
	head->nchunks = DatumGetInt32(values[VB_NCHUNKS - 1]);
	head->bytes = DatumGetInt64(values[VB_BYTES - 1]);
	/* Sizes are allocated from before the digest is checked: never trust a negative one. */
	if (head->bytes < 0 || head->nchunks < 1)
		head->damage = psprintf("its version_blob row declares " INT64_FORMAT " bytes in %d chunks",
								head->bytes, head->nchunks);
	return true;
}

/*
 * A stored chunk's bytes, detoasted. Damage below lake's own record (its
 * TOAST rows missing or out of order: PostgreSQL's XX001) is, for a chunk
 * of 'version', what any damage to a version's lineage is: LK005 (SPEC §3).
 * For a stage's chunk (version 0) it stays XX001.
 */
static bytea *
detoast_chunk(Datum d, int64 version)
{
	MemoryContext cxt = CurrentMemoryContext;
	bytea	   *b = NULL;

	if (!(VARATT_IS_EXTERNAL(DatumGetPointer(d)) || VARATT_IS_COMPRESSED(DatumGetPointer(d))))
		return DatumGetByteaPP(d);
	if (version <= 0)
	{
		store_require_value(NULL, NULL, 0, d, "data");
		return DatumGetByteaPP(d);
	}
	PG_TRY();
	{
		store_require_value(NULL, NULL, 0, d, "data");
		b = DatumGetByteaPP(d);
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(cxt);
		e = CopyErrorData();
		if (e->sqlerrcode != ERRCODE_DATA_CORRUPTED)
			PG_RE_THROW();
		/* Rethrown at once: nothing runs on the failed detoast's state. */
		FlushErrorState();
		e->sqlerrcode = ERRCODE_LAKE_INCOMPLETE_LINEAGE;
		e->detail = e->message;
		e->message = psprintf("a stored chunk of version " INT64_FORMAT " is unreadable", version);
		e->hint = pstrdup("The stored chunks are missing or damaged; restore them from a backup.");
		ReThrowError(e);
	}
	PG_END_TRY();
	return b;
}

/*
 * A version's header from its row, as store_fetch deformed it. The size
 * comes from chunk 0's header; only a chunk 0 of a whole chunk's size (or
 * none) can have more in a blob, and only then is version_blob read: the
 * common small version costs no second lookup.
 */
static void
head_from_row(Datum *values, bool *nulls, VersionHead *head)
{
	/* Checked here too: a NOT NULL dropped by hand would let them through. */
	if (nulls[VA_TENANT - 1] || nulls[VA_OPERATION - 1] || nulls[VA_DIGEST - 1])
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("a row of lake_data.version is damaged"),
				 errdetail("Its tenant, operation id or digest reads as NULL.")));
	head->dataset_id = DatumGetInt32(values[VA_DATASET - 1]);
	head->version = DatumGetInt64(values[VA_VERSION - 1]);
	head->tenant = TextDatumGetCString(values[VA_TENANT - 1]);
	head->inline_chunk = nulls[VA_DATA - 1] ? NULL :
		detoast_chunk(values[VA_DATA - 1], head->version);
	head->inline_bare = false;
	head->blob = 0;
	head->nchunks = 1;
	head->bytes = 0;
	head->damage = NULL;
	if (head->inline_chunk != NULL)
	{
		const uint8 *in = (const uint8 *) VARDATA_ANY(head->inline_chunk);
		size_t		inlen = VARSIZE_ANY_EXHDR(head->inline_chunk);
		size_t		size = 0;
		LakeCodecStatus st;

		head->inline_bare = lake_chunk_is_bare(in, inlen);
		st = lake_chunk_decoded_size(in, inlen, head->inline_bare, &size);

		if (st == LAKE_CODEC_OK && size > LAKE_CHUNK_BYTES)
			st = LAKE_CODEC_TOO_BIG;
		if (st != LAKE_CODEC_OK)
			head->damage = lake_codec_status_text(st);
		head->bytes = (int64) size;
		if (st == LAKE_CODEC_OK && size == LAKE_CHUNK_BYTES)
			find_version_blob(head);
	}
	else if (!find_version_blob(head))
		head->damage = "chunk 0 is missing";
	head->digest_ok = store_copy_digest(values[VA_DIGEST - 1], head->digest);
	if (!head->digest_ok && head->damage == NULL)
		head->damage = "its stored digest is not 32 bytes";
}

static bool
text_is(Datum d, const char *s, size_t len)
{
	text	   *t = DatumGetTextPP(d);

	return VARSIZE_ANY_EXHDR(t) == len && memcmp(VARDATA_ANY(t), s, len) == 0;
}

/*
 * Where WAL must be flushed for the tuple's inserting commit to be flushed
 * here: an asynchronous commit is visible before its flush, and its
 * position is kept. A committed hint bit (or a freeze) does not say it was
 * flushed: PostgreSQL sets the hint once the commit is flushed, or once the
 * page's LSN is past the commit's, flushed or not (SetHintBits), so a flush
 * to the page's LSN is enough. Neither position need be the commit record's
 * own: durable_wait waits for the standbys up to what is flushed.
 */
static XLogRecPtr
commit_lsn_of(HeapTupleHeader t, XLogRecPtr page_lsn)
{
	TransactionId xmin = HeapTupleHeaderGetRawXmin(t);

	if (!TransactionIdIsNormal(xmin) || TransactionIdIsCurrentTransactionId(xmin))
		return InvalidXLogRecPtr;
	if (HeapTupleHeaderXminCommitted(t))
		return page_lsn;
	return TransactionIdGetCommitLSN(xmin);
}

/*
 * The operation's version row under 'snapshot', into values/nulls (and
 * its commit_lsn_of): the first of the dataset's rows whose hash is the
 * operation's and whose tenant and operation id are its own.
 */
static bool
fetch_operation(int32 dataset_id, const char *tenant, const char *operation_id,
				Snapshot snapshot, Datum *values, bool *nulls, XLogRecPtr *commit_lsn,
				int32 *key_peers)
{
	Relation	rel = store_open("version", AccessShareLock);
	Relation	idx = store_open("version_operation", AccessShareLock);
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	size_t		tenant_len = strlen(tenant);
	size_t		operation_len = strlen(operation_id);
	ScanKeyData key[2];
	IndexScanDesc scan;
	bool		found = false;
	int32		hash = operation_hash(tenant, tenant_len, operation_id, operation_len);

	if (snapshot == InvalidSnapshot)
		snapshot = GetTransactionSnapshot();
	/* Index column numbers: the second column is an expression. */
	ScanKeyInit(&key[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(dataset_id));
	ScanKeyInit(&key[1], 2, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(hash));
	scan = index_beginscan(rel, idx, snapshot, 2, 0);
	index_rescan(scan, key, 2, NULL, 0);
	while (!found && index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		Datum	   *row = slot->tts_values;
		bool		mine;

		CHECK_FOR_INTERRUPTS();
		slot_getallattrs(slot);
		store_require_columns(RelationGetDescr(rel), slot->tts_isnull, "version");
		store_require_value(NULL, NULL, 0, row[VA_TENANT - 1], "tenant");
		store_require_value(NULL, NULL, 0, row[VA_OPERATION - 1], "operation_id");
		mine = text_is(row[VA_TENANT - 1], tenant, tenant_len);
		found = mine && text_is(row[VA_OPERATION - 1], operation_id, operation_len);
		if (!found)
		{
			text	   *t = DatumGetTextPP(row[VA_TENANT - 1]);
			text	   *o = DatumGetTextPP(row[VA_OPERATION - 1]);

			/*
			 * Another operation under this key must hash to it: a btree
			 * does not recheck its keys against the heap, and a row whose
			 * ids were damaged would be taken for another operation (and
			 * the operation written again).
			 */
			if (DatumGetInt32(row[VA_DATASET - 1]) != dataset_id ||
				operation_hash(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t),
							   VARDATA_ANY(o), VARSIZE_ANY_EXHDR(o)) != hash)
				ereport(ERROR,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("version " INT64_FORMAT " of dataset %d is damaged",
								DatumGetInt64(row[VA_VERSION - 1]), dataset_id),
						 errdetail("Its row is indexed under the key of operation \"%s\" of tenant \"%s\", but its dataset, tenant or operation id does not match that key.",
								   operation_id, tenant)));
			if (mine)
				(*key_peers)++;
		}
		else
		{
			HeapTuple	tup = ExecCopySlotHeapTuple(slot);

			/* The slot keeps the index scan's page pinned. */
			*commit_lsn = commit_lsn_of(tup->t_data,
										BufferGetLSNAtomic(((BufferHeapTupleTableSlot *) slot)->buffer));
			store_deform(rel, tup, values, nulls, VERSION_NATTS);
		}
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	index_close(idx, AccessShareLock);
	table_close(rel, AccessShareLock);
	return found;
}

/* The operation's version under 'snapshot', if it has one. */
static void
find_operation(int32 dataset_id, const char *tenant, const char *operation_id,
			   Snapshot snapshot, OperationLookup *out)
{
	Datum		values[VERSION_NATTS];
	bool		nulls[VERSION_NATTS];

	out->dataset_id = dataset_id;
	out->commit_lsn = InvalidXLogRecPtr;
	out->key_peers = 0;
	out->found = fetch_operation(dataset_id, tenant, operation_id, snapshot,
								 values, nulls, &out->commit_lsn, &out->key_peers);
	if (out->found)
	{
		out->version = DatumGetInt64(values[VA_VERSION - 1]);
		head_from_row(values, nulls, &out->head);
		memcpy(out->digest, out->head.digest, LAKE_DIGEST_LEN);
	}
}

void
store_lookup_operation(int32 dataset_id, const char *tenant,
					   const char *operation_id, OperationLookup *out)
{
	find_operation(dataset_id, tenant, operation_id, InvalidSnapshot, out);
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

void
store_insert_chunk(Relation rel, int64 blob, int32 chunk_no, const char *data, size_t len)
{
	bytea	   *enc = encode_chunk(data, len, lake_chunk_place(blob, chunk_no));
	Datum		values[CHUNK_NATTS] = {Int64GetDatum(blob), Int32GetDatum(chunk_no),
		Int32GetDatum((int32) len), PointerGetDatum(enc)};
	bool		nulls[CHUNK_NATTS] = {false, false, false, false};

	store_insert(rel, values, nulls);
}

/*
 * Insert a version row and its two index entries directly, as
 * simple_heap_insert and index_insert do for a catalog: no executor state,
 * no index expression evaluated (the operation's hash is at hand). The
 * version_pkey entry is checked for uniqueness as an INSERT would. Should
 * the table have other indexes than the install script's (an
 * administrator's own), store_insert maintains them all instead.
 */
static void
insert_version_row(Relation rel, Datum *values, bool *nulls, int32 hash)
{
	List	   *indexes = RelationGetIndexList(rel);
	Relation	pkey = store_open("version_pkey", RowExclusiveLock);
	Relation	opkey = store_open("version_operation", RowExclusiveLock);
	HeapTuple	tup;
	IndexInfo  *info;
	Datum		key[2];
	bool		key_nulls[2] = {false, false};

	if (list_length(indexes) != 2 ||
		!list_member_oid(indexes, RelationGetRelid(pkey)) ||
		!list_member_oid(indexes, RelationGetRelid(opkey)))
	{
		index_close(opkey, NoLock);
		index_close(pkey, NoLock);
		store_insert_sized(rel, values, nulls, VERSION_NATTS);
		return;
	}
	tup = store_form(rel, values, nulls, VERSION_NATTS);
	simple_heap_insert(rel, tup);
	/* Both are plain btrees over two int columns: btree reads no IndexInfo. */
	info = makeIndexInfo(2, 2, BTREE_AM_OID, NIL, NIL, false, false, true, false);
	key[0] = values[VA_DATASET - 1];
	key[1] = values[VA_VERSION - 1];
	index_insert(pkey, key, key_nulls, &tup->t_self, rel, UNIQUE_CHECK_YES, false, info);
	key[1] = Int32GetDatum(hash);
	index_insert(opkey, key, key_nulls, &tup->t_self, rel, UNIQUE_CHECK_NO, false, info);
	index_close(opkey, NoLock);
	index_close(pkey, NoLock);
	list_free(indexes);
	CommandCounterIncrement();
}

static void
insert_version(Relation rel, int32 dataset_id, int64 version, const char *tenant,
			   const char *operation_id, const uint8 *digest, bytea *inline_chunk)
{
	Datum		values[VERSION_NATTS];
	bool		nulls[VERSION_NATTS];

	memset(nulls, false, sizeof(nulls));
	values[VA_VERSION - 1] = Int64GetDatum(version);

	/*
	 * committed_at is the clock at insert, taken under the dataset lock, so
	 * it never goes backwards within a dataset (now() would: it is the
	 * start of a transaction that may have waited for the lock).
	 */
	values[VA_COMMITTED - 1] = TimestampTzGetDatum(GetCurrentTimestamp());
	values[VA_DATASET - 1] = Int32GetDatum(dataset_id);
	values[VA_DATA - 1] = PointerGetDatum(inline_chunk);
	nulls[VA_DATA - 1] = inline_chunk == NULL;
	values[VA_TENANT - 1] = CStringGetTextDatum(tenant);
	values[VA_OPERATION - 1] = CStringGetTextDatum(operation_id);
	values[VA_DIGEST - 1] = store_digest_datum(digest);
	insert_version_row(rel, values, nulls,
					   operation_hash(tenant, strlen(tenant), operation_id, strlen(operation_id)));
}

/*
 * Name the blob that holds a version's chunks (all, or all but chunk 0),
 * with the payload's size.
 */
static void
insert_version_blob(int64 blob, int32 dataset_id, int32 nchunks, int64 version,
					int64 bytes)
{
	Relation	rel = store_open("version_blob", RowExclusiveLock);
	Datum		values[VERSION_BLOB_NATTS] = {Int64GetDatum(blob), Int32GetDatum(dataset_id),
		Int32GetDatum(nchunks), Int64GetDatum(version), Int64GetDatum(bytes)};
	bool		nulls[VERSION_BLOB_NATTS] = {false, false, false, false, false};

	store_insert(rel, values, nulls);
	table_close(rel, NoLock);
}

void
store_prepare_version(int32 dataset_id, const char *payload, int64 len, PreparedVersion *pv)
{
	bytea	   *chunk0;

	pv->bytes = len;
	pv->nchunks = len == 0 ? 1 : (int32) ((len + LAKE_CHUNK_BYTES - 1) / LAKE_CHUNK_BYTES);
	pv->blob = 0;
	if (pv->nchunks > 1)
	{
		Relation	chunks = store_open("chunk", RowExclusiveLock);

		pv->blob = store_next_blob();
		for (int32 i = 1; i < pv->nchunks; i++)
		{
			int64		off = (int64) i * LAKE_CHUNK_BYTES;

			CHECK_FOR_INTERRUPTS();
			store_insert_chunk(chunks, pv->blob, i, payload + off,
							   Min(len - off, LAKE_CHUNK_BYTES));
		}
		table_close(chunks, NoLock);
	}
	/* Out of the encode buffer, which the next chunk encoded reuses. */
	chunk0 = store_dict_encode_chunk(dataset_id, payload, Min(len, LAKE_CHUNK_BYTES));
	pv->chunk0 = palloc(VARSIZE(chunk0));
	memcpy(pv->chunk0, chunk0, VARSIZE(chunk0));
}

void
store_write_prepared(int32 dataset_id, int64 version, const char *tenant,
					 const char *operation_id, const uint8 *digest,
					 const PreparedVersion *pv)
{
	Relation	rel;

	if (pv->blob != 0)
		insert_version_blob(pv->blob, dataset_id, pv->nchunks, version, pv->bytes);
	rel = store_open("version", RowExclusiveLock);
	insert_version(rel, dataset_id, version, tenant, operation_id, digest, pv->chunk0);
	table_close(rel, NoLock);
}

void
store_drop_chunks(int64 blob)
{
	static SPIPlanPtr plan;
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(blob)};

	store_run(store_plan(&plan,
				 "DELETE FROM lake_data.chunk c WHERE c.blob OPERATOR(pg_catalog.=) $1",
				 1, types),
		values, SPI_OK_DELETE);
}

void
store_discard_prepared(const PreparedVersion *pv)
{
	if (pv->blob != 0)
		store_drop_chunks(pv->blob);
}

/* A version row with its chunks elsewhere (a committed stage's). */
void
store_add_version(int32 dataset_id, int64 version, const char *tenant,
				  const char *operation_id, const uint8 *digest, int64 bytes,
				  int32 nchunks, int64 blob)
{
	Relation	rel = store_open("version", RowExclusiveLock);

	insert_version(rel, dataset_id, version, tenant, operation_id, digest, NULL);
	table_close(rel, NoLock);
	insert_version_blob(blob, dataset_id, nchunks, version, bytes);
}

/*
 * Everything inserted so far, as a position XLogFlush can reach: at the
 * start of a page the insert position points past the page's header, which
 * no flush reaches until a record is written on that page (XX000 "flush
 * request ... is not satisfied").
 */
static XLogRecPtr
inserted_so_far(void)
{
	XLogRecPtr	ptr = GetXLogInsertRecPtr();

	if (XLogSegmentOffset(ptr, wal_segment_size) == SizeOfXLogLongPHD)
		return ptr - SizeOfXLogLongPHD;
	if (ptr % XLOG_BLCKSZ == SizeOfXLogShortPHD)
		return ptr - SizeOfXLogShortPHD;
	return ptr;
}

/*
 * The version a blob (a committed stage) answered, with its tenant and
 * operation id: the one its chunks make up, or the one its commit found
 * already there (lake_data.stage_replay).
 */
bool
store_version_of_blob(int64 blob, Snapshot snapshot, OperationLookup *op,
					  char **tenant, char **operation_id, bool *replay_damaged)
{
	ScanKeyData key[2];
	Datum		values[VERSION_NATTS];
	bool		nulls[VERSION_NATTS];
	char	   *replay_tenant = NULL;
	char	   *replay_operation = NULL;
	bool		of_blob;

	store_key_int8(&key[0], VB_BLOB, blob);
	{
		Datum		vb[VERSION_BLOB_NATTS];
		bool		vb_nulls[VERSION_BLOB_NATTS];

		of_blob = store_fetch("version_blob", "version_blob_pkey", snapshot, key, 1,
							  ForwardScanDirection, vb, vb_nulls);
		if (of_blob)
		{
			op->dataset_id = DatumGetInt32(vb[VB_DATASET - 1]);
			op->version = DatumGetInt64(vb[VB_VERSION - 1]);
		}
	}
	if (!of_blob)
	{
		Datum		sr[STAGE_REPLAY_NATTS];
		bool		sr_nulls[STAGE_REPLAY_NATTS];

		store_key_int8(&key[0], SR_STAGE, blob);
		if (!store_fetch("stage_replay", "stage_replay_pkey", snapshot, key, 1,
						 ForwardScanDirection, sr, sr_nulls))
			return false;
		op->dataset_id = DatumGetInt32(sr[SR_DATASET - 1]);
		op->version = DatumGetInt64(sr[SR_VERSION - 1]);
		replay_tenant = TextDatumGetCString(sr[SR_TENANT - 1]);
		replay_operation = TextDatumGetCString(sr[SR_OPERATION - 1]);
	}
	store_key_int4(&key[0], VA_DATASET, op->dataset_id);
	store_key_int8(&key[1], VA_VERSION, op->version);
	if (!store_fetch("version", "version_pkey", snapshot, key, 2,
					 ForwardScanDirection, values, nulls))
		return false;
	/*
	 * A single-shot append's blob (chunk 0 kept in the row) was never a
	 * stage: unknown to the stage functions, like an id never issued.
	 */
	if (of_blob && !nulls[VA_DATA - 1])
		return false;
	op->found = true;
	/* A rare path (a retried commit_append): all WAL written so far. */
	op->commit_lsn = inserted_so_far();
	head_from_row(values, nulls, &op->head);
	memcpy(op->digest, op->head.digest, LAKE_DIGEST_LEN);
	*tenant = op->head.tenant;
	*operation_id = TextDatumGetCString(values[VA_OPERATION - 1]);
	/*
	 * The rows are outside any checksum: a replay's version must be of its
	 * operation, and a commit's must read its chunks from this blob.
	 */
	*replay_damaged = replay_tenant != NULL ?
		(strcmp(replay_tenant, *tenant) != 0 || strcmp(replay_operation, *operation_id) != 0) :
		op->head.blob != blob;
	return true;
}

/*
 * Stage 'stage' was committed as a replay of 'version', which already
 * existed: remember which, and of which operation, for a retried commit
 * (store_version_of_blob).
 */
void
store_note_stage_replay(int64 stage, int32 dataset_id, int64 version,
						const char *tenant, const char *operation_id)
{
	Relation	rel = store_open("stage_replay", RowExclusiveLock);
	Datum		values[STAGE_REPLAY_NATTS] = {Int64GetDatum(stage), Int32GetDatum(dataset_id),
		Int64GetDatum(version), CStringGetTextDatum(tenant), CStringGetTextDatum(operation_id)};
	bool		nulls[STAGE_REPLAY_NATTS] = {false};

	store_insert(rel, values, nulls);
	table_close(rel, NoLock);
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
	head_from_row(values, nulls, head);
	/* A btree does not recheck its keys against the heap: a damaged row can. */
	if (head->dataset_id != dataset_id || head->version != version)
		head->damage = psprintf("its row names version " INT64_FORMAT " of dataset %d",
								head->version, head->dataset_id);
	return true;
}

/*
 * Decode one stored chunk and hand it to 'visit'. Returns NULL, or why the
 * chunk is unreadable. A checked chunk is verified before anyone sees its
 * bytes (a raw one is then visited in place); a bare one (chunk 0 in a
 * version row) is verified by the caller, through the version's digest.
 * A checked one is a row of lake_data.chunk, verified at its 'place'.
 * '*declared' is the size its lake_data.chunk row gives (NULL: none): the
 * frame header's, unverified until decoded, must agree before anything is
 * allocated from it.
 */
static const char *
visit_stored(bytea *stored, bool bare, uint32 place, size_t room,
			 const int32 *declared, ChunkVisitor visit, void *arg, size_t *decoded)
{
	const uint8_t *in = (const uint8_t *) VARDATA_ANY(stored);
	size_t		inlen = VARSIZE_ANY_EXHDR(stored);
	size_t		size;
	const uint8_t *view;
	LakeCodecStatus st = lake_chunk_decoded_size(in, inlen, bare, &size);
	char	   *out;
	const char *why;

	if (st == LAKE_CODEC_OK && (size > room || size > MaxAllocSize))
		st = LAKE_CODEC_TOO_BIG;
	if (st == LAKE_CODEC_OK && declared != NULL &&
		(*declared < 0 || size != (size_t) *declared))
		return "the chunk decodes to another size than its row declares";
	if (st == LAKE_CODEC_OK)
		st = lake_chunk_view(in, inlen, bare, place, &view, decoded);
	if (st != LAKE_CODEC_OK)
		return lake_codec_status_text(st);
	if (view != NULL)
	{
		/* Raw and verified: visited where it lies, no copy. */
		visit((const char *) view, *decoded, arg);
		return NULL;
	}
	out = palloc(Max(size, 1));
	why = store_dict_decode(in, inlen, bare, place, (uint8 *) out, size, decoded);
	if (why != NULL)
		return why;
	visit(out, *decoded, arg);
	pfree(out);
	return NULL;
}

/*
 * Stream the chunks [first, first+count) of a blob, in order, one at a time
 * through the chunk index: memory stays at one chunk whatever the
 * payload's size. 'total' bounds the decoded bytes. Returns NULL, or why
 * the chunks do not make up the payload (a chunk missing, extra,
 * undecodable or oversized). The snapshot is a fresh one, as the version's
 * header was read with.
 */
const char *
store_visit_chunks(int64 blob, int32 first, int64 count, int64 total,
				   int64 version, ChunkVisitor visit, void *arg)
{
	Relation	rel = store_open("chunk", AccessShareLock);
	Relation	idx = store_open("chunk_pkey", AccessShareLock);
	Snapshot	snapshot = RegisterSnapshot(GetTransactionSnapshot());
	MemoryContext chunkcxt = AllocSetContextCreate(CurrentMemoryContext,
												   "lake chunk",
												   ALLOCSET_DEFAULT_SIZES);
	ScanKeyData key[2];
	StoreScan  *scan;
	HeapTuple	tup;
	int64		seen = 0;
	int64		filled = 0;
	const char *why = NULL;

	store_key_int8(&key[0], CA_BLOB, blob);
	ScanKeyInit(&key[1], CA_CHUNK_NO, BTGreaterEqualStrategyNumber, F_INT4GE,
				Int32GetDatum(first));
	scan = store_scan_begin(rel, idx, snapshot, 2, key);
	while (HeapTupleIsValid(tup = store_scan_next(scan, ForwardScanDirection)))
	{
		Datum		values[CHUNK_NATTS];
		bool		nulls[CHUNK_NATTS];
		int32		chunk_no;
		int32		declared;
		MemoryContext old;
		size_t		decoded = 0;

		CHECK_FOR_INTERRUPTS();
		store_deform(rel, tup, values, nulls, CHUNK_NATTS);
		if (nulls[CA_CHUNK_NO - 1] || nulls[CA_BYTES - 1] || nulls[CA_DATA - 1])
		{
			why = psprintf("a row of chunk " INT64_FORMAT " reads as NULL", first + seen);
			break;
		}
		chunk_no = DatumGetInt32(values[CA_CHUNK_NO - 1]);
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
		declared = DatumGetInt32(values[CA_BYTES - 1]);
		old = MemoryContextSwitchTo(chunkcxt);
		why = visit_stored(detoast_chunk(values[CA_DATA - 1], version), false,
						   lake_chunk_place(blob, chunk_no), (size_t) (total - filled),
						   &declared, visit, arg, &decoded);
		MemoryContextSwitchTo(old);
		if (why != NULL)
			why = pstrdup(why); /* it may lie in chunkcxt, reset next */
		MemoryContextReset(chunkcxt);
		if (why != NULL)
			break;
		filled += decoded;
		seen++;
	}
	store_scan_end(scan);
	UnregisterSnapshot(snapshot);
	index_close(idx, AccessShareLock);
	table_close(rel, AccessShareLock);
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
	LakeDigest *digest;			/* NULL: one piece, digested at once */
	uint8		got[LAKE_DIGEST_LEN];
	ChunkVisitor visit;			/* NULL: only verify */
	void	   *arg;
} VerifyVisit;

static void
verify_visit(const char *data, size_t len, void *arg)
{
	VerifyVisit *v = (VerifyVisit *) arg;

	if (v->digest == NULL)
		lake_sha256(data, len, v->got);
	else
		lake_digest_update(v->digest, data, len);
	if (v->visit != NULL)
		v->visit(data, len, v->arg);
}

/*
 * A version's chunks: chunk 0 in its row, and the rest, if its row does
 * not hold all its bytes, in the blob its version_blob row names.
 */
static const char *
visit_version_chunks(const VersionHead *head, ChunkVisitor visit, void *arg)
{
	size_t		first_len = 0;
	const char *why;

	if (head->damage != NULL)
		return head->damage;
	if (head->inline_chunk == NULL)
		return store_visit_chunks(head->blob, 0, head->nchunks, head->bytes, head->version,
								  visit, arg);

	why = visit_stored(head->inline_chunk, head->inline_bare, LAKE_PLACE_NONE,
					   (size_t) head->bytes, NULL, visit, arg, &first_len);
	if (why != NULL || first_len == (size_t) head->bytes)
		return why;
	if (head->blob == 0)
		return psprintf("chunks hold %zu of " INT64_FORMAT " bytes", first_len, head->bytes);
	return store_visit_chunks(head->blob, 1, head->nchunks - 1, head->bytes - (int64) first_len,
							  head->version, visit, arg);
}

const char *
store_visit_version(const VersionHead *head, ChunkVisitor visit, void *arg)
{
	/* A payload in its row alone (every small append) is one piece. */
	bool		one = head->inline_chunk != NULL && head->blob == 0;
	VerifyVisit v = {one ? NULL : lake_digest_begin(), {0}, visit, arg};
	const char *why = visit_version_chunks(head, verify_visit, &v);

	if (!one)
		lake_digest_end(v.digest, v.got);
	if (why == NULL && memcmp(head->digest, v.got, LAKE_DIGEST_LEN) != 0)
		why = "the payload does not match its digest";
	return why;
}

void
store_lineage_broken(const char *dataset, int64 version, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_LAKE_INCOMPLETE_LINEAGE),
			 errmsg("version " INT64_FORMAT " of dataset \"%s\" is incomplete", version, dataset),
			 errdetail("The check of its stored bytes found: %s.", why),
			 errhint("The stored chunks are missing or damaged; restore them from a backup.")));
}

/* Decoded chunks compared, in order, with the bytes they should make up. */
typedef struct SameVisit
{
	const char *expect;
	int64		len;
	int64		at;
	bool		same;
} SameVisit;

static void
same_visit(const char *data, size_t len, void *arg)
{
	SameVisit  *v = (SameVisit *) arg;

	if (v->same && (int64) len <= v->len - v->at &&
		memcmp(v->expect + v->at, data, len) == 0)
		v->at += len;
	else
		v->same = false;
}

int64
store_version_largest_chunk(const VersionHead *head)
{
	static SPIPlanPtr plan;
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(head->blob)};
	bool		isnull;
	Datum		largest;

	if (head->blob == 0)
		return Max(head->bytes, 0);
	store_run(store_plan(&plan,
				 "SELECT pg_catalog.max(c.bytes) FROM lake_data.chunk c "
				 "WHERE c.blob OPERATOR(pg_catalog.=) $1",
				 1, types),
		values, SPI_OK_SELECT);
	largest = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return Max(isnull ? 0 : DatumGetInt32(largest),
			   head->inline_chunk != NULL ? Min(head->bytes, LAKE_CHUNK_BYTES) : 0);
}

/*
 * Whether a version whose digest is the payload's lies whole in its row, a
 * checked chunk 0 holding the payload (codec.h: lake_chunk_holds), so that
 * a replay verifies it without decoding. Anything else (a bare chunk of an
 * earlier build, a frame that needs a dictionary, more chunks, damage)
 * is for the decoding check, which names what is wrong.
 */
static bool
holds_in_row(const VersionHead *head, const char *payload, int64 len)
{
	const uint8 *in;
	size_t		inlen;

	if (head->damage != NULL || head->inline_chunk == NULL || head->inline_bare ||
		head->blob != 0 || head->bytes != len)
		return false;
	in = (const uint8 *) VARDATA_ANY(head->inline_chunk);
	inlen = VARSIZE_ANY_EXHDR(head->inline_chunk);
	return lake_chunk_dict_id(in, inlen, false) == 0 &&
		lake_chunk_holds(in, inlen, LAKE_PLACE_NONE, (const uint8 *) payload,
						 (size_t) len) == LAKE_CODEC_OK;
}

void
store_check_lineage(const char *dataset, const OperationLookup *op,
					const char *payload, int64 len)
{
	const char *why;

	if (payload != NULL && holds_in_row(&op->head, payload, len))
		return;
	if (payload != NULL)
	{
		/*
		 * The payload's digest is the version's: the chunks decode to the
		 * payload, or their digest cannot be the version's either. A
		 * comparison does what a second SHA-256 would.
		 */
		SameVisit	v = {payload, len, 0, true};

		why = visit_version_chunks(&op->head, same_visit, &v);
		if (why == NULL && (!v.same || v.at != len))
			why = "the payload does not match its digest";
	}
	else
		why = store_visit_version(&op->head, NULL, NULL);
	if (why != NULL)
		store_lineage_broken(dataset, op->version, why);
}

void
store_list_versions(int32 dataset_id, int64 after_version, Oid only_role,
					ReturnSetInfo *rsinfo)
{
	static SPIPlanPtr plan_all;
	static SPIPlanPtr plan_granted;
	Oid			types[3] = {INT4OID, INT8OID, TEXTARRAYOID};
	Datum		values[3] = {Int32GetDatum(dataset_id), Int64GetDatum(after_version), (Datum) 0};
	SPIPlanPtr	plan;

#define VERSION_COLUMNS \
	"SELECT v.version, v.tenant, v.operation_id, v.digest, " \
	"       COALESCE(b.bytes, lake_data.chunk_bytes(v.data)), " \
	"       COALESCE(pg_catalog.octet_length(v.data), 0) OPERATOR(pg_catalog.+) COALESCE(( " \
	"         SELECT pg_catalog.sum(pg_catalog.octet_length(c.data)) FROM lake_data.chunk c " \
	"         WHERE c.blob OPERATOR(pg_catalog.=) b.blob), 0), " \
	"       v.committed_at FROM lake_data.version v " \
	"  LEFT JOIN lake_data.version_blob b ON b.dataset_id OPERATOR(pg_catalog.=) v.dataset_id " \
	"   AND b.version OPERATOR(pg_catalog.=) v.version " \
	"WHERE v.dataset_id OPERATOR(pg_catalog.=) $1 " \
	"  AND v.version OPERATOR(pg_catalog.>) $2 "

	if (OidIsValid(only_role))
	{
		values[2] = store_granted_tenants(only_role);
		plan = store_plan(&plan_granted,
						VERSION_COLUMNS
						"  AND v.tenant OPERATOR(pg_catalog.=) ANY ($3) "
						"ORDER BY v.version",
						3, types);
	}
	else
		plan = store_plan(&plan_all, VERSION_COLUMNS "ORDER BY v.version", 2, types);
#undef VERSION_COLUMNS

	store_fill(plan, values, rsinfo);
}

/*
 * The newest versions of a dataset of 1 to max_bytes bytes, newest first,
 * at most 'limit' of them, into 'versions'; returns how many.
 */
int
store_recent_versions(int32 dataset_id, int64 max_bytes, int limit,
					  int64 *versions)
{
	static SPIPlanPtr plan;
	Oid			types[3] = {INT4OID, INT8OID, INT4OID};
	Datum		values[3] = {Int32GetDatum(dataset_id), Int64GetDatum(max_bytes),
	Int32GetDatum(limit)};

	store_run(store_plan(&plan,
				"SELECT s.version FROM ( "
				"  SELECT v.version, COALESCE(b.bytes, lake_data.chunk_bytes(v.data)) AS bytes "
				"  FROM lake_data.version v "
				"  LEFT JOIN lake_data.version_blob b "
				"    ON b.dataset_id OPERATOR(pg_catalog.=) v.dataset_id "
				"   AND b.version OPERATOR(pg_catalog.=) v.version "
				"  WHERE v.dataset_id OPERATOR(pg_catalog.=) $1) s "
				"WHERE s.bytes OPERATOR(pg_catalog.>) 0 "
				"  AND s.bytes OPERATOR(pg_catalog.<=) $2 "
				"ORDER BY s.version DESC LIMIT $3",
				3, types),
		values, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
		versions[i] = DatumGetInt64(store_colv(i, 1));
	return (int) SPI_processed;
}
