/*
 * operation.c — the idempotency protocol.
 *
 *   1. look the operation up without any lock: a replay is answered there,
 *      with the original version (once its lineage is verified, LK005 if
 *      its chunks are missing or damaged) or LK001, and never serializes;
 *   2. otherwise lock the dataset, look again with a fresh snapshot (the
 *      contender we waited for may have committed this very operation), and
 *      hand back version max+1 for the caller to write under the lock.
 *
 * Step 2 needs no second look when the dataset's head (head.h) is known
 * and the same as when step 1 looked: no version was committed since step
 * 1's snapshot, which saw every version up to that head, so its answer
 * stands and the head is the highest version.
 *
 * The lock is held to commit, which makes versions gap-free and visible in
 * commit order. Under REPEATABLE READ / SERIALIZABLE the transaction
 * snapshot cannot see what a contender committed meanwhile; step 2 then
 * compares it with the latest snapshot and refuses with 40001 rather than
 * write a version its own snapshot could not explain.
 */
#include "lake.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "admission.h"
#include "durable.h"
#include "guc.h"
#include "head.h"
#include "hold.h"
#include "operation.h"
#include "store_rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

int64
operation_replay(const OperationLookup *op, const uint8 *digest,
				 const char *dataset, const char *tenant, const char *operation_id,
				 long wait_ms)
{
	return operation_replay_of(op, digest, NULL, 0, dataset, tenant, operation_id, wait_ms);
}

/*
 * The version is read back a chunk at a time: the call's permit covers the
 * largest (a retired stage's commit holds none of its own, a contender
 * only its stage's chunks), looked up only when the permit does not cover
 * the whole version.
 */
static void
reserve_for_check(const OperationLookup *op, long wait_ms)
{
	int64		need = Min(Max(op->head.bytes, 0), (int64) admission_max_stream_bytes());

	if (need > (int64) admission_held_bytes())
		(void) admission_reserve_within((uint64) Min(store_version_largest_chunk(&op->head), need),
										wait_ms);
}

int64
operation_replay_of(const OperationLookup *op, const uint8 *digest,
					const char *payload, int64 len, const char *dataset,
					const char *tenant, const char *operation_id, long wait_ms)
{
	if (digest != NULL && memcmp(op->digest, digest, LAKE_DIGEST_LEN) != 0)
	{
		/*
		 * The stored digest is a conflict's only witness: it answers only
		 * once the chunks verify against it. An unreadable or false one
		 * (or damaged chunks: which of the two is wrong cannot be told)
		 * is LK005, never a conflict that sends the client to write the
		 * same content again under a new operation id.
		 */
		if (!op->head.digest_ok)
			store_lineage_broken(dataset, op->version, "its stored digest is not 32 bytes");
		reserve_for_check(op, wait_ms);
		store_check_lineage(dataset, op, NULL, 0);
		ereport(ERROR,
				(errcode(ERRCODE_LAKE_IDEMPOTENCY_CONFLICT),
				 errmsg("operation \"%s\" of tenant \"%s\" already committed version " INT64_FORMAT " of dataset \"%s\" with different content",
						operation_id, tenant, op->version, dataset),
				 errdetail("The stored digest differs from this payload's digest."),
				 errhint("Use a new operation id for new content.")));
	}
	/* The version answers for its bytes as a read does (SPEC §5). */
	reserve_for_check(op, wait_ms);
	store_check_lineage(dataset, op, payload, len);
	/*
	 * Acknowledged as durable as this caller's own commit would be: its
	 * writer may have committed without waiting for the flush or the
	 * synchronous standbys, and a crash or a failover before it would take
	 * the version back (and give its number to another operation). A
	 * standby wait may be long: the call's own permit, of no more use, is
	 * given back before it, or one tenant's replays would keep every
	 * other's appends out (53000).
	 */
	durable_wait(op->commit_lsn, op->own_permit ? admission_give_back : NULL);
	return op->version;
}

void
operation_lookup(int32 dataset_id, const char *tenant, const char *operation_id,
				 OperationLookup *op)
{
	/*
	 * The head first: the lookup's snapshot, fresh in READ COMMITTED, then
	 * sees every version up to it. A transaction snapshot may be older.
	 */
	op->seen_head = IsolationUsesXactSnapshot() ? -1 :
		head_get(store_relid("dataset"), dataset_id);
	op->locked = false;
	op->own_permit = false;
	store_lookup_operation(dataset_id, tenant, operation_id, op);
}

static long
operation_lock(OperationLookup *op, const char *dataset, long wait_ms)
{
	TimestampTz start = GetCurrentTimestamp();
	bool		locked = store_lock_dataset(op->dataset_id, 0);

	if (!locked)
	{
		admission_count_wait();
		locked = store_lock_dataset(op->dataset_id, wait_ms);
	}
	if (!locked)
	{
		admission_count_refusal();
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("dataset \"%s\" is busy", dataset),
				 errdetail("Another transaction appending to it held its lock longer than lake.admission_queue_wait (%d ms), or waits for a lock this transaction holds.",
						   lake_admission_queue_wait_ms),
				 errhint("Retry later; nothing was written.")));
	}
	op->locked = true;
	hold_begin(true);
	return Max(0, wait_ms - TimestampDifferenceMilliseconds(start, GetCurrentTimestamp()));
}

long
operation_lock_queued(OperationLookup *op, const char *dataset, bool held,
					  uint64 bytes, long wait_ms)
{
	if (op->found)
		return wait_ms;			/* a replay needs no lock */
	op->locked = store_lock_dataset(op->dataset_id, 0);
	if (op->locked)
	{
		hold_begin(true);
		return wait_ms;
	}
	if (!held)
		admission_give_back();
	wait_ms = operation_lock(op, dataset, wait_ms);
	return admission_retake_within(bytes, wait_ms);
}

/*
 * Under the lock: is the operation there now, and which is the highest
 * version? Answered by the head when it shows nothing was committed since
 * the lookup, else by a second look with a fresh snapshot, which teaches
 * the head.
 */
static void
recheck(OperationLookup *op, const char *dataset, const char *tenant,
		const char *operation_id)
{
	Oid			datasets = store_relid("dataset");
	int64		head = head_get(datasets, op->dataset_id);

	if (IsolationUsesXactSnapshot())
	{
		OperationLookup mine = *op;

		store_recheck_operation(tenant, operation_id, InvalidSnapshot, &mine);
		store_recheck_operation(tenant, operation_id, GetLatestSnapshot(), op);
		if (mine.found != op->found || mine.max_version != op->max_version)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access due to a concurrent append to dataset \"%s\"",
							dataset),
					 errhint("Retry the transaction.")));
	}
	else if (head >= 0 && head == op->seen_head)
	{
		op->max_version = head;
		return;
	}
	else
		store_recheck_operation(tenant, operation_id, InvalidSnapshot, op);
	head_learn(datasets, op->dataset_id, op->max_version);
}

/*
 * Operations are found by a 32-bit hash of their ids, and a tenant that
 * inverts it could pile thousands of its operations under one key: every
 * look-up for that key, by any tenant, would read them all, under the
 * dataset's lock when it looks again. A tenant's new operation is refused
 * once the key holds this many of the tenant's others, which ids that do
 * not aim for it practically never reach (at 2^32 versions of one tenant
 * in one dataset, one key in about 10^14 would). Replays still answer.
 */
#define KEY_PEERS_MAX 16

static void
refuse_crowded_key(const OperationLookup *op, const char *dataset,
				   const char *tenant, const char *operation_id)
{
	if (op->key_peers >= KEY_PEERS_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("operation \"%s\" of tenant \"%s\" shares its key in dataset \"%s\" with too many of the tenant's operations",
						operation_id, tenant, dataset),
				 errdetail("%d of the tenant's operations in the dataset already hash to the same 32-bit key; at most %d may.",
						   op->key_peers, KEY_PEERS_MAX),
				 errhint("Use another operation id; nothing was written.")));
}

bool
operation_resolve(OperationLookup *op, const uint8 *digest, const char *dataset,
				  const char *tenant, const char *operation_id, long wait_ms,
				  int64 *version)
{
	if (!op->found)
	{
		refuse_crowded_key(op, dataset, tenant, operation_id);
		if (!op->locked)
			wait_ms = operation_lock(op, dataset, wait_ms);
		recheck(op, dataset, tenant, operation_id);
		if (!op->found)
			refuse_crowded_key(op, dataset, tenant, operation_id);
	}
	if (op->found)
	{
		*version = operation_replay(op, digest, dataset, tenant, operation_id, wait_ms);
		return false;
	}
	if (op->max_version == PG_INT64_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("dataset \"%s\" has no version number left", dataset),
				 errhint("Nothing was written.")));
	*version = op->max_version + 1;
	head_wrote(store_relid("dataset"), op->dataset_id, *version);
	return true;
}
