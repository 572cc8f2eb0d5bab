/*
 * operation.h — the idempotency protocol shared by lake.append and
 * lake.commit_append: an operation (dataset, tenant, operation_id) makes
 * at most one version, replays get it back, other content is LK001.
 */
#ifndef LAKE_OPERATION_H
#define LAKE_OPERATION_H

#include "store_version.h"

/*
 * The unlocked lookup of an operation in a dataset (the protocol's step 1),
 * noting what operation_resolve needs to know later.
 */
extern void operation_lookup(int32 dataset_id, const char *tenant,
							 const char *operation_id, OperationLookup *op);

/*
 * Take the dataset's append lock for a new operation (nothing to do for a
 * replay), waiting at most 'wait_ms' (then 53000). A call that finds it
 * busy queues without the admission permit it took, unless its
 * transaction held one before ('held'): appends to one dataset pass one at
 * a time anyway, and permits held in that queue would keep slots from
 * every other dataset. It takes a permit of 'bytes' again once it holds
 * the lock. Returns the ms left of the budget.
 */
extern long operation_lock_queued(OperationLookup *op, const char *dataset,
								  bool held, uint64 bytes, long wait_ms);

/*
 * Given operation_lookup's answer, decide:
 * returns false with *version = the existing version for a replay (as
 * operation_replay answers it), or true with *version = the next version number
 * and the dataset's append lock held, when the caller must write it.
 * The lock, unless operation_lock took it, is waited for at most 'wait_ms',
 * then refused with 53000.
 */
extern bool operation_resolve(OperationLookup *op, const uint8 *digest,
							  const char *dataset, const char *tenant,
							  const char *operation_id, long wait_ms,
							  int64 *version);

/*
 * The answer to a replay: op->version, or LK001 if the digests differ
 * ('digest' NULL: none to compare), or LK005 if the version's lineage is
 * broken — it is verified as a read verifies it, a chunk at a time, the
 * call's permit grown to the largest within 'wait_ms'.
 */
extern int64 operation_replay(const OperationLookup *op, const uint8 *digest,
							  const char *dataset, const char *tenant,
							  const char *operation_id, long wait_ms);

/*
 * The same when the caller holds the payload ('len' bytes) whose digest
 * 'digest' is: the lineage is then verified by comparing it with the
 * decoded chunks, not by digesting them again.
 */
extern int64 operation_replay_of(const OperationLookup *op, const uint8 *digest,
								 const char *payload, int64 len,
								 const char *dataset, const char *tenant,
								 const char *operation_id, long wait_ms);

#endif							/* LAKE_OPERATION_H */
