/*
 * stage.c — staged (multi-part, resumable) appends (SPEC §3).
 *
 *   begin_append   opens a stage for an operation, or returns the open one;
 *   append_chunk   uploads chunk n (idempotent for identical bytes, LK001
 *                  for others: a re-send is compared byte for byte with
 *                  the stored chunk, so an upload hashes nothing),
 *                  compressed on arrival;
 *   commit_append  checks 0..n-1 are all there, streams them once through
 *                  the decoder into an incremental SHA-256 (memory: one
 *                  chunk), then follows the idempotency protocol and makes
 *                  the stage's chunks the new version's — no copy;
 *   abort_append   drops the stage and its chunks.
 *
 * Each call locks the stage row first, so a chunk, a commit and an abort
 * of one stage never interleave. A commit is one transaction: a crash
 * leaves either the stage as it was or the complete version. The version
 * remembers its stage id (lake_data.version.blob), so a contender that finds
 * the stage already committed and retired reconciles from the history.
 */
#include "lake.h"

#include "access.h"
#include "admission.h"
#include "args.h"
#include "digest.h"
#include "durable.h"
#include "guc.h"
#include "miscadmin.h"
#include "operation.h"
#include "store_rel.h"
#include "store_stage.h"

/*
 * What each stage call writes, locked for writing before it reads
 * (store_rel.h): only those, so that an administrator's maintenance of
 * another table does not hold up uploads.
 */
static const char *const begin_writes[] = {"stage", NULL};
static const char *const chunk_writes[] = {"stage", "chunk", NULL};
static const char *const commit_writes[] = {
	"stage", "chunk", "version", "version_blob", "stage_replay", NULL
};
static const char *const abort_writes[] = {"stage", "chunk", NULL};

PG_FUNCTION_INFO_V1(lake_begin_append);
PG_FUNCTION_INFO_V1(lake_append_chunk);
PG_FUNCTION_INFO_V1(lake_commit_append);
PG_FUNCTION_INFO_V1(lake_abort_append);

Datum
lake_begin_append(PG_FUNCTION_ARGS)
{
	char	   *dataset;
	char	   *tenant;
	char	   *operation_id;
	int64		stage;
	int64		open = 0;

	lake_require_preload();
	dataset = lake_arg_name(fcinfo, 0, "dataset");
	tenant = lake_arg_name(fcinfo, 1, "tenant");
	operation_id = lake_arg_name(fcinfo, 2, "operation_id");
	/* A standby's read-only 25006, not the refusal of a timeline not served yet. */
	PreventCommandIfReadOnly("lake.begin_append()");
	store_connect();
	store_lock_for_write(begin_writes);
	access_require_tenant(tenant);
	stage = store_begin_stage(store_dataset_id(dataset), tenant, operation_id,
							  GetSessionUserId(), lake_role_max_open_stages, &open);
	if (stage == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("role \"%s\" has reached lake.role_max_open_stages (%d)",
						lake_role_name(GetSessionUserId()),
						lake_role_max_open_stages),
				 errdetail_plural("The role has " INT64_FORMAT " open stage.",
								  "The role has " INT64_FORMAT " open stages.", open, open),
				 errhint("Commit or abort one of the role's stages, or ask a superuser to raise the role's lake.role_max_open_stages.")));
	if (stage < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("role \"%s\" is busy opening another stage",
						lake_role_name(GetSessionUserId())),
				 errdetail("Another session of the role was opening a stage for longer than lake.admission_queue_wait (%d ms); lake.role_max_open_stages counts them one at a time.",
						   lake_admission_queue_wait_ms),
				 errhint("Retry; keep transactions that begin stages short.")));
	store_finish();
	PG_RETURN_INT64(stage);
}

static int64
arg_stage(FunctionCallInfo fcinfo)
{
	int64		stage = lake_arg_int64(fcinfo, 0, "stage");

	if (stage < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("stage must be a positive id, not " INT64_FORMAT, stage)));
	lake_require_partition_handle("stage", stage);
	return stage;
}

/* 42501 unless the caller holds the stage's tenant, naming only the stage. */
static void
require_stage_tenant(int64 stage, const StageRow *row)
{
	access_require_tenant_for(row->tenant, psprintf("stage " INT64_FORMAT, stage));
}

/*
 * A retired stage's version, to a caller who holds its tenant (the
 * version's, not the stage_replay row's: that row has no checksum). XX001
 * if the row names a version of another operation, naming neither.
 */
static void
require_retired_stage(int64 stage, const StageRow *row)
{
	require_stage_tenant(stage, row);
	if (row->replay_damaged)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("the record of stage " INT64_FORMAT "'s commit is damaged", stage),
				 errdetail("Its lake_data.stage_replay or lake_data.version_blob row names a version of another operation.")));
}

/*
 * The stage is not open: committed (55000, naming the version), or never
 * existed, aborted or expired (42704). Under REPEATABLE READ a stage
 * begun or committed after the transaction's snapshot is 40001: retry.
 */
static void
stage_not_open(int64 stage)
{
	StageRow	row;
	OperationLookup op;
	char	   *tenant;
	bool		committed;

	if (store_stage_version(stage, &row, &op))
	{
		require_retired_stage(stage, &row);
		/* The version it names is as durable as a replay's answer. */
		durable_wait(op.commit_lsn, NULL);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("stage " INT64_FORMAT " is already committed as version " INT64_FORMAT " of dataset \"%s\"",
						stage, op.version, row.dataset)));
	}
	if ((tenant = store_stage_since(stage, &committed)) != NULL)
	{
		/* Told only to a role that may know the stage exists. */
		access_require_tenant_for(tenant, psprintf("stage " INT64_FORMAT, stage));
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to a concurrent %s of stage " INT64_FORMAT,
						committed ? "commit" : "begin", stage),
				 errhint("Retry the transaction.")));
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("stage " INT64_FORMAT " does not exist", stage),
			 errhint("It was never begun, or it was aborted or expired (lake.stage_ttl).")));
}

/*
 * The open stage, locked for this call: its tenant is checked before the
 * lock is taken, so a role without it neither waits on nor holds another
 * tenant's stage. Returns what is left of the call's waiting budget; with
 * 'chunks' and 'bytes', what the stage holds (store_lock_stage).
 */
static long
lock_open_stage(int64 stage, StageRow *row, int64 *chunks, int64 *bytes)
{
	long		wait_ms = lake_admission_queue_wait_ms;

	if (!store_stage_row(stage, row))
		stage_not_open(stage);
	require_stage_tenant(stage, row);
	if (!store_lock_stage(stage, &wait_ms, chunks, bytes))
		stage_not_open(stage);	/* committed or aborted meanwhile */
	return wait_ms;
}

/*
 * A new chunk under lake.role_max_stage_chunks: chunks are counted, not
 * bytes, so a flood of zero-byte chunks (which lake.max_stream_bytes does
 * not see) stops too. The stage's row lock makes the count exact.
 */
static void
require_chunk_room(int64 stage, int64 nchunks)
{
	if (nchunks >= lake_role_max_stage_chunks)
	{
		admission_count_refusal();
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("stage " INT64_FORMAT " has reached lake.role_max_stage_chunks (%d) of role \"%s\"",
						stage, lake_role_max_stage_chunks,
						lake_role_name(GetSessionUserId())),
				 errdetail_plural("The stage holds " INT64_FORMAT " chunk.",
								  "The stage holds " INT64_FORMAT " chunks.", nchunks, nchunks),
				 errhint("Commit the stage, send larger chunks, or ask a superuser to raise the role's lake.role_max_stage_chunks.")));
	}
}

Datum
lake_append_chunk(PG_FUNCTION_ARGS)
{
	int64		stage;
	int32		chunk_no;
	bytea	   *data;
	int64		len;
	StoredChunk stored;
	StageRow	row;
	int64		chunks;
	int64		bytes;
	uint32		max_stream;

	lake_require_preload();
	stage = arg_stage(fcinfo);
	chunk_no = lake_arg_int32(fcinfo, 1, "chunk_no");
	if (chunk_no < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("chunk_no must not be negative, not %d", chunk_no)));
	len = lake_arg_bytea_size(fcinfo, 2, "data");
	/* 25006 naming this call, on a standby too, before any lock or look-up. */
	PreventCommandIfReadOnly("lake.append_chunk()");

	/* The stage's tenant is checked before the call holds any capacity. */
	store_connect();
	store_lock_for_write(chunk_writes);
	/* The stage's lock and admission share one lake.admission_queue_wait. */
	(void) admission_reserve_within((uint64) len, lock_open_stage(stage, &row, &chunks, &bytes));
	/* Before a rewrite of the row would index it under its damage. */
	if (!store_stage_key_holds(&row))
		store_stage_damaged(stage);
	data = lake_arg_bytea(fcinfo, 2, "data");	/* its size admitted */
	stored = store_chunk_compare(stage, chunk_no, VARDATA_ANY(data), len);
	if (stored != CHUNK_ABSENT)
	{
		if (stored == CHUNK_DIFFERENT)
			ereport(ERROR,
					(errcode(ERRCODE_LAKE_IDEMPOTENCY_CONFLICT),
					 errmsg("chunk %d of stage " INT64_FORMAT " was already sent with different content",
							chunk_no, stage),
					 errhint("Re-send the same bytes, or abort the stage and begin again.")));
		(void) store_touch_stage(stage);	/* but is activity */
		/* Its ack says the chunk is durable: it may be an earlier asynchronous commit's. */
		durable_commit_flushed();
		store_finish();
		PG_RETURN_VOID();		/* an identical re-send changes nothing */
	}
	/* The chunk is not there yet (the stage's lock keeps it so). */
	if (lake_role_max_stage_chunks > 0)
		require_chunk_room(stage, chunks);
	max_stream = admission_max_stream_bytes();
	if (bytes + len > max_stream)
	{
		admission_count_refusal();
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("stage " INT64_FORMAT " would exceed lake.max_stream_bytes (%u)",
						stage, max_stream),
				 errdetail("With chunk %d the stage would hold " INT64_FORMAT " bytes.",
						   chunk_no, bytes + len),
				 errhint("Raise lake.max_stream_bytes, or abort the stage with lake.abort_append.")));
	}
	store_put_chunk(stage, chunk_no, VARDATA_ANY(data), len);

	/*
	 * Durable once the caller commits (SPEC §3): flushed, synchronous_commit
	 * or not (synchronous standbys are waited for as the session says). An
	 * asynchronous chunk lost in a crash would leave the stage short of its
	 * last chunks, and a commit without a digest would make a version of
	 * what is left.
	 */
	durable_commit_flushed();
	store_finish();
	PG_RETURN_VOID();
}

static void
digest_visit(const char *data, size_t len, void *arg)
{
	lake_digest_update((LakeDigest *) arg, data, len);
}

/*
 * A retired stage: its version, if the caller's digest (if any) agrees and
 * its chunks still make it up. Checking that reads the whole version, so
 * the call is admitted first (a slot), as every commit_append is.
 */
static int64
reconcile_retired(int64 stage, const uint8 *supplied, long wait_ms)
{
	StageRow	row;
	OperationLookup op;

	if (!store_stage_version(stage, &row, &op))
		stage_not_open(stage);
	require_retired_stage(stage, &row);
	op.own_permit = !admission_held();
	wait_ms = admission_reserve_within(0, wait_ms);
	return operation_replay(&op, supplied, row.dataset, row.tenant, row.operation_id, wait_ms);
}

Datum
lake_commit_append(PG_FUNCTION_ARGS)
{
	int64		stage;
	const uint8 *supplied;
	StageRow	row;
	StageSummary sum;
	OperationLookup op;
	LakeDigest *ctx;
	uint8		digest[LAKE_DIGEST_LEN];
	const char *why;
	int64		version;
	long		wait_ms = lake_admission_queue_wait_ms;
	bool		held;
	bool		open;

	lake_require_preload();
	stage = arg_stage(fcinfo);
	supplied = lake_arg_digest(fcinfo, 1);
	/* 25006 naming this call, on a standby too, before any lock or look-up. */
	PreventCommandIfReadOnly("lake.commit_append()");

	store_connect();
	store_lock_for_write(commit_writes);
	open = store_stage_row(stage, &row);
	if (open)
	{
		require_stage_tenant(stage, &row);
		open = store_lock_stage(stage, &wait_ms, NULL, NULL);
	}
	if (!open)
	{
		/* Committed by now, possibly by a contender this call waited for. */
		version = reconcile_retired(stage, supplied, wait_ms);
		store_finish();
		PG_RETURN_INT64(version);
	}
	if (!store_stage_key_holds(&row))
		store_stage_damaged(stage);
	/* A slot now; the streaming buffer's bytes once the chunks are known. */
	held = admission_held();
	wait_ms = admission_reserve_within(0, wait_ms);

	store_stage_summary(stage, &sum);
	/* Chunk rows' sizes are outside every checksum: negative ones are damage. */
	if (sum.smallest_chunk < 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("stage " INT64_FORMAT " cannot be committed: its chunks are damaged", stage),
				 errdetail("A chunk row declares a negative size.")));
	if (sum.nchunks == 0 || sum.nchunks != sum.last_chunk_no + 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("stage " INT64_FORMAT " is missing chunk " INT64_FORMAT,
						stage, sum.nchunks == 0 ? 0 : store_first_missing_chunk(stage)),
				 errdetail_plural("A commit needs chunks 0 to n-1 with no holes; " INT64_FORMAT " chunk was uploaded.",
								  "A commit needs chunks 0 to n-1 with no holes; " INT64_FORMAT " chunks were uploaded.",
								  (unsigned long) sum.nchunks, sum.nchunks)));
	if (sum.bytes > admission_max_stream_bytes())
	{
		admission_count_refusal();
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("stage " INT64_FORMAT " holds " INT64_FORMAT " bytes, more than lake.max_stream_bytes (%u)",
						stage, sum.bytes, admission_max_stream_bytes()),
				 errhint("Raise lake.max_stream_bytes, or abort the stage with lake.abort_append.")));
	}
	/* Every wait of the call counts against the one budget. */
	wait_ms = admission_reserve_within((uint64) sum.largest_chunk, wait_ms);

	ctx = lake_digest_begin();
	why = store_visit_chunks(stage, 0, sum.nchunks, sum.bytes, 0, digest_visit, ctx);
	if (why != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("stage " INT64_FORMAT " cannot be committed: its chunks are damaged", stage),
				 errdetail("The check of its chunks found: %s.", why)));
	lake_digest_end(ctx, digest);
	lake_check_digest(supplied, digest);

	operation_lookup(row.dataset_id, row.tenant, row.operation_id, &op);
	wait_ms = operation_lock_queued(&op, row.dataset, held, (uint64) sum.largest_chunk, wait_ms);
	if (operation_resolve(&op, digest, row.dataset, row.tenant, row.operation_id,
						  wait_ms, &version))
		store_adopt_stage(&row, version, digest, &sum);
	else
	{
		/* A replay: its chunks are redundant, the answer is kept. */
		store_note_stage_replay(stage, row.dataset_id, version, row.tenant, row.operation_id);
		store_drop_stage(stage, true);
	}
	store_finish();
	PG_RETURN_INT64(version);
}

Datum
lake_abort_append(PG_FUNCTION_ARGS)
{
	int64		stage;
	StageRow	row;

	lake_require_preload();
	stage = arg_stage(fcinfo);
	/* 25006 naming this call, on a standby too, before any lock or look-up. */
	PreventCommandIfReadOnly("lake.abort_append()");
	store_connect();
	store_lock_for_write(abort_writes);
	(void) lock_open_stage(stage, &row, NULL, NULL);
	store_drop_stage(stage, true);
	/*
	 * Flushed, as a chunk is: an abort a crash takes back would bring
	 * the stage back with the chunks its client was told were dropped, and
	 * the operation's next begin_append would resume it.
	 */
	durable_commit_flushed();
	store_finish();
	PG_RETURN_VOID();
}
