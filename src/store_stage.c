/*
 * store_stage.c — open staged appends.
 *
 *   lake_data.stage  (id, dataset_id, tenant, operation_id, created_at,
 *                     touched_at, opened_by)
 *
 * A stage's id is the blob its chunks (store_version.h) are uploaded to;
 * committing it adds a version row that names the blob and retires the
 * stage row.
 */
#include "lake.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "codec.h"
#include "durable.h"
#include "encode.h"
#include "guc.h"
#include "miscadmin.h"
#include "store_blob.h"
#include "store_rel.h"
#include "store_row.h"
#include "store_stage.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

/*
 * lake_data.stage's columns: id, dataset_id, tenant, operation_id,
 * created_at, touched_at, opened_by, chunks, bytes.
 */
#define STAGE_NATTS 9
#define STAGE_ID 1
#define STAGE_DATASET 2
#define STAGE_TENANT 3
#define STAGE_OPERATION 4

static bool lock_stage_object(int64 stage, long wait_ms);
static void stage_busy(int64 stage) pg_attribute_noreturn();
static void chunk_damaged(int32 chunk_no, int64 blob, LakeCodecStatus cst) pg_attribute_noreturn();

void
store_stage_damaged(int64 stage)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("stage " INT64_FORMAT " is damaged", stage),
			 errdetail("Its row's dataset, tenant or operation id is not the key it is found by."),
			 errhint("Nothing was written; lake.abort_append() removes the stage.")));
}

/*
 * The open stage of (dataset, tenant, operation) in values[0..2], or 0.
 * Resuming it is activity (lake.stage_ttl): it is marked active as a chunk
 * would mark it, unless another call holds it, which has just done so
 * (and which expiry skips). That call may be a commit or an abort about to
 * retire the stage: with 'wait' it is waited for up to wait_ms (then
 * 53000), and 0 returned if it retired the stage; without, the id is
 * returned at once (the caller's ON CONFLICT has already waited for a
 * retiring transaction).
 */
static int64
find_stage(Datum *values, Oid *types, bool wait, long wait_ms)
{
	static SPIPlanPtr plan;
	int64		id;
	StageRow	row;

	store_run(store_plan(&plan,
				 "SELECT s.id FROM lake_data.stage s "
				 "WHERE s.dataset_id OPERATOR(pg_catalog.=) $1 "
				 "  AND s.tenant OPERATOR(pg_catalog.=) $2 "
				 "  AND s.operation_id OPERATOR(pg_catalog.=) $3",
				 3, types),
		values, SPI_OK_SELECT);
	if (SPI_processed != 1)
		return 0;
	id = DatumGetInt64(store_colv(0, 1));
	/* Resuming rewrites the row: not one that does not hold this key. */
	if (store_stage_row(id, &row) &&
		(row.dataset_id != DatumGetInt32(values[0]) ||
		 strcmp(row.tenant, TextDatumGetCString(values[1])) != 0 ||
		 strcmp(row.operation_id, TextDatumGetCString(values[2])) != 0))
		store_stage_damaged(id);
	if (!lock_stage_object(id, wait ? wait_ms : 0))
	{
		if (!wait)
			return id;
		stage_busy(id);
	}
	return store_touch_stage(id) ? id : 0;	/* 0: gone meanwhile */
}

static long
ms_left(TimestampTz deadline)
{
	return Max(0, TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline));
}

typedef struct OperationKey
{
	const char *tenant;
	const char *operation_id;
} OperationKey;

static void
operation_busy(const void *arg)
{
	const OperationKey *key = arg;

	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
			 errmsg("operation \"%s\" of tenant \"%s\" is busy", key->operation_id, key->tenant),
			 errdetail("Another transaction began, committed or aborted its stage and stayed open past this call's lake.admission_queue_wait (%d ms, shared with the call's other waits).",
					   lake_admission_queue_wait_ms),
			 errhint("Retry later; nothing was written.")));
}

int64
store_begin_stage(int32 dataset_id, const char *tenant, const char *operation_id,
				  Oid role, int max_open, int64 *open)
{
	static SPIPlanPtr plan_insert;
	static SPIPlanPtr plan_count;
	int64		id;
	OperationKey key = {tenant, operation_id};
	Oid			types[5] = {INT4OID, TEXTOID, TEXTOID, OIDOID, INT8OID};
	Datum		values[5] = {Int32GetDatum(dataset_id), CStringGetTextDatum(tenant),
	CStringGetTextDatum(operation_id), ObjectIdGetDatum(role), (Datum) 0};
	/* Every wait of the call shares one lake.admission_queue_wait. */
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   lake_admission_queue_wait_ms);

	/*
	 * A capped role's begins serialize on a lock on (lake_data.stage, role)
	 * held to commit, so the count below and the insert are one step; the
	 * count comes from the table, so it survives restarts. It reads with the
	 * latest snapshot: a REPEATABLE READ transaction's own snapshot would
	 * miss the stages committed while it waited. An operation already open
	 * is returned without counting.
	 */
	if (max_open > 0)
	{
		if (!store_lock_object(store_relid("stage"), role, 0, ms_left(deadline)))
			return -1;
		if ((id = find_stage(values, types, true, ms_left(deadline))) != 0)
			return id;
		store_run_snapshot(store_plan(&plan_count,
									  "SELECT pg_catalog.count(*) FROM lake_data.stage s "
									  "WHERE s.opened_by OPERATOR(pg_catalog.=) $1",
									  1, &types[3]),
						   &values[3], GetLatestSnapshot(), SPI_OK_SELECT);
		*open = DatumGetInt64(store_colv(0, 1));
		if (*open >= max_open)
			return 0;
	}

	/*
	 * ON CONFLICT waits for a concurrent begin, commit or abort of the same
	 * operation's stage: at most lake.admission_queue_wait, then 53000. If
	 * that stage is then committed or aborted before we can read it, try
	 * again.
	 */
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		values[4] = Int64GetDatum(store_next_blob());
		store_run_bounded(store_plan(&plan_insert,
						  "INSERT INTO lake_data.stage AS s (id, dataset_id, tenant, operation_id, opened_by) "
						  "VALUES ($5, $1, $2, $3, $4) "
						  "ON CONFLICT (dataset_id, tenant, operation_id) DO NOTHING RETURNING s.id",
						  5, types),
						  values, SPI_OK_INSERT_RETURNING, ms_left(deadline),
						  operation_busy, &key);
		if (SPI_processed == 1)
		{
			/*
			 * The id is the client's from now on: an asynchronous commit
			 * that a crash takes back would take the sequence's advance
			 * with it, and the id would name the next operation's stage.
			 */
			durable_commit_flushed();
			return DatumGetInt64(store_colv(0, 1));
		}
		if ((id = find_stage(values, types, false, 0)) != 0)
			return id;
	}
}

/* An open stage's row, read without a lock; false if it is not open. */
bool
store_stage_row(int64 stage, StageRow *row)
{
	static SPIPlanPtr plan;
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(stage)};

	store_run(store_plan(&plan,
				 "SELECT s.dataset_id, d.name, s.tenant, s.operation_id "
				 "FROM lake_data.stage s JOIN lake_data.dataset d ON d.id OPERATOR(pg_catalog.=) s.dataset_id "
				 "WHERE s.id OPERATOR(pg_catalog.=) $1",
				 1, types),
		values, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	row->id = stage;
	row->dataset_id = DatumGetInt32(store_colv(0, 1));
	row->dataset = store_col_text(0, 2);
	row->tenant = store_col_text(0, 3);
	row->operation_id = store_col_text(0, 4);
	return true;
}

bool
store_stage_key_holds(const StageRow *row)
{
	ScanKeyData key[3];
	Datum		values[STAGE_NATTS];
	bool		nulls[STAGE_NATTS];

	/*
	 * Through the unique index itself: a btree does not recheck its keys
	 * against the heap, so a row found by the ids it holds now was indexed
	 * under them (a plan free to scan the heap would find it anyway).
	 */
	store_key_int4(&key[0], STAGE_DATASET, row->dataset_id);
	store_key_id(&key[1], STAGE_TENANT, row->tenant);
	store_key_id(&key[2], STAGE_OPERATION, row->operation_id);
	return store_fetch("stage", "stage_dataset_id_tenant_operation_id_key", InvalidSnapshot,
					   key, 3, ForwardScanDirection, values, nulls) &&
		DatumGetInt64(values[STAGE_ID - 1]) == row->id;
}

/*
 * Lock an open stage for this call and mark it active; false if it is no
 * longer open. Calls on one stage take its object lock first (keyed by
 * lake_data.chunk's OID and the stage id), waiting at most
 * lake.admission_queue_wait (then 53000), so the row lock below never
 * waits on another call: a transaction left open after a chunk stalls
 * the stage's other calls for a bounded time only.
 */
static bool
lock_stage_object(int64 stage, long wait_ms)
{
	/* The id's 64 bits in the tag's 48: its low half and its folded high half. */
	uint32		high = (uint32) ((uint64) stage >> 32);

	return store_lock_object(store_relid("chunk"), (Oid) stage,
							 (uint16) (high ^ (high >> 16)), wait_ms);
}

/* Mark a stage whose object lock is held active; false if it is gone. */
bool
store_touch_stage(int64 stage)
{
	static SPIPlanPtr plan;
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(stage)};

	store_run(store_plan(&plan,
				 "UPDATE lake_data.stage s SET touched_at = pg_catalog.clock_timestamp() "
				 "WHERE s.id OPERATOR(pg_catalog.=) $1",
				 1, types),
		values, SPI_OK_UPDATE);
	return SPI_processed == 1;
}

static void
stage_busy(int64 stage)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
			 errmsg("stage " INT64_FORMAT " is busy", stage),
			 errdetail("Another call on it held it longer than lake.admission_queue_wait (%d ms), or waits for a lock this transaction holds.",
					   lake_admission_queue_wait_ms),
			 errhint("Retry later; nothing was written.")));
}

/*
 * The stage's object lock for this call, and its row locked (so that the
 * expiry pass skips it) but not rewritten: the call's end marks it active
 * once (store_put_chunk, store_touch_stage). Every row version a
 * transaction leaves behind is one more for its later calls to pass over.
 * With 'chunks' and 'bytes', what the row counts of its chunks
 * (store_put_chunk), which the lock keeps so for the call.
 */
bool
store_lock_stage(int64 stage, long *wait_ms, int64 *chunks, int64 *bytes)
{
	static SPIPlanPtr plan;
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(stage)};
	TimestampTz start = GetCurrentTimestamp();

	if (!lock_stage_object(stage, *wait_ms))
		stage_busy(stage);
	*wait_ms = Max(0, *wait_ms - TimestampDifferenceMilliseconds(start, GetCurrentTimestamp()));
	store_run(store_plan(&plan,
				 "SELECT s.chunks::pg_catalog.int8, s.bytes FROM lake_data.stage s "
				 "WHERE s.id OPERATOR(pg_catalog.=) $1 FOR UPDATE",
				 1, types),
		values, SPI_OK_SELECT);
	if (SPI_processed != 1)
		return false;
	if (chunks != NULL)
	{
		*chunks = DatumGetInt64(store_colv(0, 1));
		*bytes = DatumGetInt64(store_colv(0, 2));
	}
	return true;
}

/* The version a retired stage was committed as, if any. */
bool
store_stage_version(int64 stage, StageRow *row, OperationLookup *op)
{
	if (!store_version_of_blob(stage, InvalidSnapshot, op, &row->tenant, &row->operation_id,
							   &row->replay_damaged))
		return false;
	row->id = stage;
	row->dataset_id = op->dataset_id;
	row->dataset = store_dataset_name(row->dataset_id);
	return true;
}

/*
 * Was the stage begun or committed by a transaction this one's snapshot
 * does not see? Only a REPEATABLE READ caller can miss one: it is told to
 * retry (40001), not that the stage does not exist. The stage's tenant
 * (the version's, once committed), or NULL.
 */
char *
store_stage_since(int64 stage, bool *committed)
{
	Snapshot	latest;
	OperationLookup op;
	char	   *tenant;
	char	   *operation_id;
	bool		replay_damaged;
	ScanKeyData key[1];
	Datum		values[STAGE_NATTS];
	bool		nulls[STAGE_NATTS];

	if (!IsolationUsesXactSnapshot())
		return NULL;
	latest = GetLatestSnapshot();
	*committed = store_version_of_blob(stage, latest, &op, &tenant, &operation_id,
									   &replay_damaged);
	if (*committed)
		return tenant;
	store_key_int8(&key[0], STAGE_ID, stage);
	if (!store_fetch("stage", "stage_pkey", latest, key, 1, ForwardScanDirection,
					 values, nulls))
		return NULL;
	return TextDatumGetCString(values[STAGE_TENANT - 1]);
}

static void
chunk_damaged(int32 chunk_no, int64 blob, LakeCodecStatus cst)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("chunk %d of stage " INT64_FORMAT " is damaged", chunk_no, blob),
			 errdetail("%s", cst != LAKE_CODEC_OK ? lake_codec_status_text(cst) :
					   "it does not hold the bytes its row declares"),
			 errhint("Abort the stage and begin again.")));
}

/*
 * Whether chunk 'chunk_no' of 'blob' is stored, and with exactly these
 * bytes: its size is checked against its row's (XX001 if they differ);
 * one of the re-send's size is decoded (its checksum verified; XX001 if it
 * is damaged) and compared byte for byte, one of another size is simply
 * different. Only a re-send pays for this, so an upload hashes nothing.
 */
StoredChunk
store_chunk_compare(int64 blob, int32 chunk_no, const char *data, size_t len)
{
	static SPIPlanPtr plan;
	Oid			types[2] = {INT8OID, INT4OID};
	Datum		values[2] = {Int64GetDatum(blob), Int32GetDatum(chunk_no)};
	bytea	   *stored;
	const uint8 *in;
	size_t		inlen;
	uint8	   *decoded = NULL;
	int32		declared;
	size_t		size = 0;
	size_t		got = 0;
	LakeCodecStatus cst;
	bool		same;

	store_run(store_plan(&plan,
				 "SELECT c.bytes, pg_catalog.octet_length(c.data), "
				 "       pg_catalog.substr(c.data, 1, " CppAsString2(LAKE_CHUNK_HEAD_BYTES) "), c.data "
				 "FROM lake_data.chunk c "
				 "WHERE c.blob OPERATOR(pg_catalog.=) $1 AND c.chunk_no OPERATOR(pg_catalog.=) $2",
				 2, types),
		values, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return CHUNK_ABSENT;
	declared = DatumGetInt32(store_colv(0, 1));

	/*
	 * Another size is other bytes, told from the stored chunk's head alone
	 * (checked against its row: XX001 if they differ), so nothing beyond
	 * the admitted 'len' is read or allocated.
	 */
	if (declared < 0 || (size_t) declared != len)
	{
		bytea	   *head = DatumGetByteaPP(store_colv(0, 3));

		cst = lake_chunk_head_decoded_size((const uint8 *) VARDATA_ANY(head),
										   VARSIZE_ANY_EXHDR(head),
										   (size_t) DatumGetInt32(store_colv(0, 2)),
										   false, &size);
		if (cst == LAKE_CODEC_OK && declared >= 0 && size == (size_t) declared)
			return CHUNK_DIFFERENT;
		chunk_damaged(chunk_no, blob, cst == LAKE_CODEC_OK ? LAKE_CODEC_SIZE_MISMATCH : cst);
	}
	stored = DatumGetByteaPP(store_colv(0, 4));
	in = (const uint8 *) VARDATA_ANY(stored);
	inlen = VARSIZE_ANY_EXHDR(stored);
	cst = lake_chunk_decoded_size(in, inlen, false, &size);
	/* Allocated by the frame's header only when the row agrees with it. */
	if (cst == LAKE_CODEC_OK && size != (size_t) declared)
		cst = LAKE_CODEC_SIZE_MISMATCH;
	if (cst == LAKE_CODEC_OK)
	{
		decoded = palloc(Max(size, 1));
		cst = lake_chunk_decode(encode_decompression_context(), in, inlen,
								lake_chunk_place(blob, chunk_no), decoded, size, &got);
	}
	if (cst != LAKE_CODEC_OK || got != size)
		chunk_damaged(chunk_no, blob, cst);
	same = memcmp(decoded, data, len) == 0;
	pfree(decoded);
	return same ? CHUNK_SAME : CHUNK_DIFFERENT;
}

/*
 * A new chunk of an open stage, counted in the stage's row, which is
 * marked active again: the chunk may have taken long to compress, and the
 * stage's idle time (lake.stage_ttl) runs from the end of its last call.
 */
void
store_put_chunk(int64 blob, int32 chunk_no, const char *data, size_t len)
{
	static SPIPlanPtr plan;
	Oid			types[2] = {INT8OID, INT8OID};
	Datum		values[2] = {Int64GetDatum(blob), Int64GetDatum((int64) len)};
	Relation	rel = store_open("chunk", RowExclusiveLock);

	store_insert_chunk(rel, blob, chunk_no, data, len);
	table_close(rel, NoLock);
	store_run(store_plan(&plan,
				 "UPDATE lake_data.stage s SET chunks = s.chunks OPERATOR(pg_catalog.+) 1, "
				 "bytes = s.bytes OPERATOR(pg_catalog.+) $2, "
				 "touched_at = pg_catalog.clock_timestamp() "
				 "WHERE s.id OPERATOR(pg_catalog.=) $1",
				 2, types),
		values, SPI_OK_UPDATE);
}

void
store_stage_summary(int64 blob, StageSummary *sum)
{
	static SPIPlanPtr plan;
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(blob)};

	store_run(store_plan(&plan,
				 "SELECT pg_catalog.count(*), "
				 "       COALESCE(pg_catalog.max(c.chunk_no), -1)::pg_catalog.int8, "
				 "       COALESCE(pg_catalog.max(c.bytes), 0)::pg_catalog.int8, "
				 "       COALESCE(pg_catalog.sum(c.bytes), 0)::pg_catalog.int8, "
				 "       COALESCE(pg_catalog.min(c.bytes), 0)::pg_catalog.int8 "
				 "FROM lake_data.chunk c WHERE c.blob OPERATOR(pg_catalog.=) $1",
				 1, types),
		values, SPI_OK_SELECT);
	sum->nchunks = DatumGetInt64(store_colv(0, 1));
	sum->last_chunk_no = DatumGetInt64(store_colv(0, 2));
	sum->largest_chunk = DatumGetInt64(store_colv(0, 3));
	sum->bytes = DatumGetInt64(store_colv(0, 4));
	sum->smallest_chunk = DatumGetInt64(store_colv(0, 5));
}

/*
 * The first chunk number missing below the last one uploaded: the first
 * chunk, in order, whose number is not its rank (with none, the number
 * after the last). One ordered pass over the stage's chunks, whatever the
 * plan.
 */
int64
store_first_missing_chunk(int64 blob)
{
	static SPIPlanPtr plan;
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(blob)};

	store_run(store_plan(&plan,
				 "SELECT COALESCE(pg_catalog.min(r.rank) FILTER (WHERE r.chunk_no OPERATOR(pg_catalog.<>) r.rank), "
				 "                pg_catalog.count(*)) FROM "
				 " (SELECT c.chunk_no::pg_catalog.int8 AS chunk_no, "
				 "         (pg_catalog.row_number() OVER (ORDER BY c.chunk_no)) OPERATOR(pg_catalog.-) 1 AS rank "
				 "  FROM lake_data.chunk c WHERE c.blob OPERATOR(pg_catalog.=) $1) r",
				 1, types),
		values, SPI_OK_SELECT);
	return DatumGetInt64(store_colv(0, 1));
}

void
store_drop_stage(int64 stage, bool with_chunks)
{
	static SPIPlanPtr plan_stage;
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(stage)};

	store_run(store_plan(&plan_stage,
				 "DELETE FROM lake_data.stage s WHERE s.id OPERATOR(pg_catalog.=) $1",
				 1, types),
		values, SPI_OK_DELETE);
	if (with_chunks)
		store_drop_chunks(stage);	/* a stage's id is its blob */
}

/*
 * Remove stages idle since before 'idle_before': their rows at once (up to
 * 64 a call; a stage being committed or written to right now is locked
 * and skipped), so a client coming back finds the stage gone (42704), not
 * one with holes; their chunks a batch at a time, at most 'batch_bytes'
 * (and 1,024 chunks) a call, through lake_data.blob_gone: one call never
 * holds the worker from sealing for long, however much was abandoned.
 * Returns whether more are left.
 */
bool
store_expire_stages(TimestampTz idle_before, int64 batch_bytes, int64 *stages,
					int64 *chunks, int64 *open)
{
	static SPIPlanPtr plan_stages;
	static SPIPlanPtr plan_chunks;
	static SPIPlanPtr plan_open;
	Oid			types[1] = {TIMESTAMPTZOID};
	Datum		values[1] = {TimestampTzGetDatum(idle_before)};
	Oid			chunk_types[1] = {INT8OID};
	Datum		chunk_values[1] = {Int64GetDatum(batch_bytes)};
	bool		more_blobs;

	store_run(store_plan(&plan_stages,
				 "WITH doomed AS ("
				 "  SELECT x.id FROM lake_data.stage x WHERE x.touched_at OPERATOR(pg_catalog.<) $1 "
				 "  ORDER BY x.id LIMIT 64 FOR UPDATE SKIP LOCKED), "
				 "gone AS ("
				 "  DELETE FROM lake_data.stage s USING doomed d WHERE s.id OPERATOR(pg_catalog.=) d.id "
				 "  RETURNING s.id), "
				 "kept AS (INSERT INTO lake_data.blob_gone (blob) SELECT g.id FROM gone g RETURNING blob) "
				 "SELECT pg_catalog.count(*) FROM kept",
				 1, types),
		values, SPI_OK_SELECT);
	*stages = DatumGetInt64(store_colv(0, 1));

	/*
	 * The gone blobs' first chunks in (blob, chunk_no) order, up to the
	 * budget, read through the primary key at most 1,025 a blob: a call's
	 * cost does not grow with how many chunks a stage had. A blob leaves
	 * the list once it has no chunk left but those the call deletes (the
	 * statement's snapshot still shows those).
	 */
	store_run(store_plan(&plan_chunks,
				 "WITH blobs AS (SELECT g.blob FROM lake_data.blob_gone g ORDER BY g.blob LIMIT 64), "
				 "listed AS ("
				 "  SELECT z.blob, z.chunk_no, z.bytes FROM blobs b CROSS JOIN LATERAL ("
				 "    SELECT c.blob, c.chunk_no, c.bytes FROM lake_data.chunk c "
				 "    WHERE c.blob OPERATOR(pg_catalog.=) b.blob ORDER BY c.chunk_no LIMIT 1025) z "
				 "  ORDER BY z.blob, z.chunk_no LIMIT 1025), "
				 "budget AS ("
				 "  SELECT l.blob, l.chunk_no, pg_catalog.sum(l.bytes::pg_catalog.int8) "
				 "    OVER (ORDER BY l.blob, l.chunk_no) OPERATOR(pg_catalog.-) l.bytes AS before "
				 "  FROM listed l), "
				 "chunks AS ("
				 "  DELETE FROM lake_data.chunk c USING ("
				 "    SELECT u.blob, u.chunk_no FROM budget u WHERE u.before OPERATOR(pg_catalog.<) $1 "
				 "    ORDER BY u.blob, u.chunk_no LIMIT 1024) d "
				 "  WHERE c.blob OPERATOR(pg_catalog.=) d.blob AND c.chunk_no OPERATOR(pg_catalog.=) d.chunk_no "
				 "  RETURNING c.blob, c.chunk_no), "
				 "done AS ("
				 "  DELETE FROM lake_data.blob_gone g USING blobs b WHERE g.blob OPERATOR(pg_catalog.=) b.blob "
				 "  AND NOT EXISTS (SELECT 1 FROM lake_data.chunk k WHERE k.blob OPERATOR(pg_catalog.=) b.blob "
				 "    AND NOT EXISTS (SELECT 1 FROM chunks x WHERE x.blob OPERATOR(pg_catalog.=) k.blob "
				 "      AND x.chunk_no OPERATOR(pg_catalog.=) k.chunk_no)) "
				 "  RETURNING g.blob) "
				 "SELECT (SELECT pg_catalog.count(*) FROM chunks), "
				 "       (SELECT pg_catalog.count(*) FROM "
				 "          (SELECT 1 FROM lake_data.blob_gone LIMIT 65) g) OPERATOR(pg_catalog.>) "
				 "       (SELECT pg_catalog.count(*) FROM done)",
				 1, chunk_types),
		chunk_values, SPI_OK_SELECT);
	*chunks = DatumGetInt64(store_colv(0, 1));

	/*
	 * Gone blobs left to clear (the count sees the table before this
	 * call's deletes, which 'done' counts, at most 64), or more stages. Only the last call of a pass counts the open stages: a count
	 * per batch made expiring N stages O(N^2), the seals held back as long.
	 */
	more_blobs = DatumGetBool(store_colv(0, 2));
	if (more_blobs || *stages == 64)
	{
		*open = -1;
		return true;
	}
	store_run(store_plan(&plan_open, "SELECT pg_catalog.count(*) FROM lake_data.stage", 0, NULL),
		NULL, SPI_OK_SELECT);
	*open = DatumGetInt64(store_colv(0, 1));
	return false;
}

/* The stage's chunks become the version's: insert its row, retire the stage. */
void
store_adopt_stage(const StageRow *stage, int64 version, const uint8 *digest,
				  const StageSummary *sum)
{
	store_add_version(stage->dataset_id, version, stage->tenant, stage->operation_id,
					  digest, sum->bytes, (int32) sum->nchunks,
					  stage->id);
	store_drop_stage(stage->id, false);
}
