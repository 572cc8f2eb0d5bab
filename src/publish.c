/*
 * publish.c — the seal's transaction callbacks.
 *
 * A sealer hands over what its cycle makes true (publish_at_commit); this
 * module's transaction callback applies it only at COMMIT — owner states
 * and ring space (cycle_apply_seal), then the waiters the cycle covers
 * (waiter_release) — and gives the cut back at ABORT (cycle_uncut), so a
 * failed seal loses nothing and a receipt is never reported durable early,
 * nor before the synchronous standbys have its cycle.
 */
#include "lake.h"

#include "access/xact.h"
#include "cycle.h"
#include "durable.h"
#include "publish.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "waiter.h"

/* What this backend's seal will make true if its transaction commits. */
typedef struct SealCommit
{
	CycleCut	cut;
	int64		cycle;
	XLogRecPtr	lsn;
	SealedOwner *owners;
	int			nowners;
	int64	   *positions;		/* by seq - cut.first_seq */
	double		started_ms;
} SealCommit;

static SealCommit *seal_commit = NULL;
static MemoryContext seal_cxt = NULL;

void
publish_at_commit(const CycleCut *cut, int64 cycle, XLogRecPtr lsn,
				  const SealedOwner *owners, int nowners,
				  const int64 *positions, double started_ms)
{
	MemoryContext old;

	if (seal_cxt == NULL)
		seal_cxt = AllocSetContextCreate(TopMemoryContext, "lake seal",
										 ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(seal_cxt);
	seal_commit = palloc(sizeof(SealCommit));
	seal_commit->cut = *cut;
	seal_commit->cycle = cycle;
	seal_commit->lsn = lsn;
	seal_commit->nowners = nowners;
	seal_commit->owners = palloc(sizeof(SealedOwner) * Max(nowners, 1));
	memcpy(seal_commit->owners, owners, sizeof(SealedOwner) * nowners);
	seal_commit->positions = palloc(sizeof(int64) * Max(cut->ncasts, 1));
	memcpy(seal_commit->positions, positions, sizeof(int64) * cut->ncasts);
	seal_commit->started_ms = started_ms;
	MemoryContextSwitchTo(old);
}

/* The seal committed: make it live. No error may escape from here. */
static void
publish(const SealCommit *sc)
{
	double		took = (double) GetCurrentTimestamp() / 1000.0 - sc->started_ms;

	cycle_apply_seal(&sc->cut, sc->cycle, sc->owners, sc->nowners, took);
	waiter_release(sc->cut.epoch, sc->cut.first_seq, sc->cut.last_seq,
				   sc->cycle, sc->positions, sc->lsn);
}

static void
publish_xact_callback(XactEvent event, void *arg)
{
	/* A seal's transaction is never prepared: seal.c refuses it. */
	Assert(seal_commit == NULL || event != XACT_EVENT_PREPARE);
	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT)
		return;
	if (event == XACT_EVENT_COMMIT && seal_commit != NULL)
	{
		if (durable_committed_replicated())
			publish(seal_commit);
		else
		{
			cycle_seal_unpublished(seal_commit->cycle, seal_commit->cut.ncasts);
			ereport(WARNING,
					(errmsg_plural("lake: the %d cast of cycle " INT64_FORMAT " was not published: its seal's commit is durable here but not yet on the synchronous standbys",
								   "lake: the %d casts of cycle " INT64_FORMAT " were not published: its seal's commit is durable here but not yet on the synchronous standbys",
								   seal_commit->cut.ncasts, seal_commit->cut.ncasts, seal_commit->cycle),
					 errdetail("A termination cut the commit's wait for the standbys."),
					 errhint("The worker recovers the owners from the durable log; its recovery waits for the standbys, and the receipts are answered from the log after it.")));
		}
	}
	/* A cut not published stays pending: the next seal takes it again. */
	cycle_uncut();
	if (seal_commit != NULL)
	{
		MemoryContextReset(seal_cxt);
		seal_commit = NULL;
	}
}

void
publish_init(void)
{
	RegisterXactCallback(publish_xact_callback, NULL);
}
