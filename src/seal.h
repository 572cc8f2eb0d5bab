/*
 * seal.h — sealing a cycle: one transaction, one durable write (SPEC §4).
 */
#ifndef LAKE_SEAL_H
#define LAKE_SEAL_H

#include "lake.h"

/*
 * Seal the open cycle inside the current transaction; its number, or 0 if
 * nothing was pending. What it makes live takes effect at COMMIT.
 */
extern int64 seal_run(void);

/*
 * How many of this process's seals were refused by their fence: the durable
 * head or epoch moved under the live states (a restore, another writer).
 * Only a recovery can seal again then. A count, not a flag: a seal that
 * failed before its fence check (a cancel, a lock timeout) must not be
 * taken for the fenced one before it.
 */
extern uint64 seal_fences(void);

/*
 * Rewrite lake_data.owner_block from the owner lists of the closed blocks'
 * cycles, as their seals wrote it, keeping the rows of a block it cannot
 * read whole; the rows written. The store is connected; seals go on.
 */
extern int64 seal_rebuild_owner_index(void);

/*
 * Take the lock every sealer (and recovery) holds to its commit; a session
 * waits at most lake.admission_queue_wait, then 53000.
 */
extern void seal_lock(void);
/* Let it go early, having written nothing under it. */
extern void seal_unlock(void);
/*
 * The sealing lock, with the live states current: a lifecycle edit that
 * committed after the caller's wait for the owners is recovered first.
 * Not for the worker, which is the one that recovers.
 */
extern void seal_lock_live(void);
/*
 * Wait for the worker's recovery of the owners (cycle_wait_ready) before
 * taking the sealing lock; 55000 at once if this transaction holds the
 * lock already (an earlier call of the same statement), which the
 * recovery needs.
 */
extern void seal_wait_ready(void);

#endif							/* LAKE_SEAL_H */
