/*
 * recovery.h — rebuilding every owner from the durable log (SPEC §5).
 */
#ifndef LAKE_RECOVERY_H
#define LAKE_RECOVERY_H

#include "lake.h"

#include "cycle.h"

typedef struct RecoveryResult
{
	int32		epoch;
	int64		sealed_cycle;
	int64		last_snapshot;
	RecoveryFigures figures;
} RecoveryResult;

/*
 * Run by the worker at every start (and when the extension was re-created),
 * inside a transaction, before any cast is accepted: a new durable epoch,
 * then every registered owner replayed from the log. The worker opens the
 * door (cycle_finish_recovery) only once this transaction has committed.
 */
extern void recovery_run(RecoveryResult *out);

#endif							/* LAKE_RECOVERY_H */
