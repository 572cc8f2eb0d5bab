/*
 * checkpoint.h — owner snapshots (SPEC §5): every owner's durable state and
 * watermark, written as one record so recovery replays only what follows.
 */
#ifndef LAKE_CHECKPOINT_H
#define LAKE_CHECKPOINT_H

#include "lake.h"

/*
 * Snapshot every owner as of the sealed head, in the current transaction
 * (store connected or not); returns the cycle it covers, or -1 (nothing
 * written) while a lifecycle edit awaits the recovery that renumbers the
 * live phases, or (unless 'lock_held': the caller has held the sealing lock
 * since it found the owners live) a recovery is about to start.
 * Snapshots older than the one before it are retired.
 */
extern int64 checkpoint_take(bool lock_held);

/* Refuse (25001) inside a transaction block or a subtransaction. */
extern void checkpoint_require_own_transaction(const char *what);

#endif							/* LAKE_CHECKPOINT_H */
