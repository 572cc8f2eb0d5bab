/*
 * recovery.c — owners rebuilt from the durable log.
 *
 * Each owner starts in its lifecycle's initial phase and replays its sealed
 * landings in position order: every landing must continue the position
 * count, start from the phase the owner is in, follow a legal edge and
 * carry the lap that move gives. An owner whose landing does not apply is
 * quarantined with the reason and the position of its applied prefix; the
 * others recover regardless. Casts wait (cycle_wait_ready) until the whole
 * replay is done: nobody sees a half-recovered owner.
 */
#include "lake.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "cycle.h"
#include "executor/spi.h"
#include "landing.h"
#include "lifecycle.h"
#include "logread.h"
#include "miscadmin.h"
#include "guc.h"
#include "recovery.h"
#include "seal.h"
#include "store.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

typedef struct ById
{
	int32		id;
	OwnerState *owner;
} ById;

typedef struct Replay
{
	HTAB	   *byid;
	int64		cycle;
	RecoveryFigures fig;
} Replay;

/* Why landing l cannot apply to o, or NULL. */
static char *
misfit(const OwnerState *o, const Lifecycle *lc, const LakeLanding *l, int *to)
{
	int			from;

	*to = o->phase;
	if (l->position != o->position + 1)
		return psprintf("landing at position " INT64_FORMAT " follows position " INT64_FORMAT,
						l->position, o->position);
	if (l->flags & LANDING_MOVE)
	{
		from = lifecycle_phase(lc, l->from_phase, l->from_len);
		*to = lifecycle_phase(lc, l->to_phase, l->to_len);
		if (from != o->phase)
			return psprintf("landing " INT64_FORMAT " moves from %.*s but the owner is in %s",
							l->position, (int) l->from_len, l->from_phase, lc->phases[o->phase]);
		if (!lifecycle_edge(lc, from, *to))
			return psprintf("landing " INT64_FORMAT " moves %.*s -> %.*s, which is not in the lifecycle",
							l->position, (int) l->from_len, l->from_phase,
							(int) l->to_len, l->to_phase);
	}
	if (l->lap != o->lap + ((l->flags & LANDING_MOVE) && *to == lc->initial ? 1 : 0))
		return psprintf("landing " INT64_FORMAT " carries lap " INT64_FORMAT " after lap " INT64_FORMAT,
						l->position, l->lap, o->lap);
	return NULL;
}

static int
apply_landing(const LakeLanding *l, void *arg)
{
	Replay	   *rp = (Replay *) arg;
	ById	   *b = hash_search(rp->byid, &l->owner_id, HASH_FIND, NULL);
	OwnerState *o;
	const Lifecycle *lc;
	char	   *why;
	int			to;

	if (b == NULL)
	{
		ereport(WARNING,
				(errmsg("lake recovery: cycle " INT64_FORMAT " has a landing of unregistered owner %d; skipped",
						rp->cycle, l->owner_id)));
		return 0;
	}
	o = b->owner;
	if (o->quarantined)
		return 0;
	lc = lifecycle_get(o->lifecycle);
	why = misfit(o, lc, l, &to);
	if (why != NULL)
	{
		owner_quarantine(o, o->position, why);
		rp->fig.quarantined++;
		ereport(WARNING,
				(errmsg("lake recovery: owner \"%s\" quarantined at position " INT64_FORMAT,
						o->name, o->position),
				 errdetail("%s", why)));
		return 0;
	}
	o->phase = o->projected_phase = (int16) to;
	o->lap = o->projected_lap = l->lap;
	o->position = l->position;
	rp->fig.applied++;
	return 0;
}

static void
load_owners(Replay *rp)
{
	static SPIPlanPtr plan;
	HASHCTL		ctl;
	SPITupleTable *tt;
	uint64		n;

	ctl.keysize = sizeof(int32);
	ctl.entrysize = sizeof(ById);
	ctl.hcxt = CurrentMemoryContext;
	rp->byid = hash_create("lake recovery owners", 1024, &ctl,
						   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	if (SPI_execute_plan(store_plan(&plan,
								  "SELECT o.id, o.name, o.lifecycle FROM lake.owner o ORDER BY o.id",
								  0, NULL),
						 NULL, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "lake: could not read the owner registry");
	/* lifecycle_get may query too: keep this result aside. */
	tt = SPI_tuptable;
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;
		int32		id = DatumGetInt32(SPI_getbinval(tt->vals[i], tt->tupdesc, 1, &isnull));
		char	   *name = TextDatumGetCString(SPI_getbinval(tt->vals[i], tt->tupdesc, 2, &isnull));
		int32		lc = DatumGetInt32(SPI_getbinval(tt->vals[i], tt->tupdesc, 3, &isnull));
		ById	   *b = hash_search(rp->byid, &id, HASH_ENTER, NULL);
		bool		full;

		(void) lifecycle_get(lc);
		LWLockAcquire(cycle_lock(), LW_EXCLUSIVE);
		b->owner = owner_enter(name, id, lc, &full);
		LWLockRelease(cycle_lock());
		if (full)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
					 errmsg("lake.max_owners (%d) is too small for the %d registered owners",
							lake_max_owners, (int) n),
					 errhint("Raise lake.max_owners and restart the server.")));
		rp->fig.owners++;
	}
	SPI_freetuptable(tt);
}

static void
replay_log(Replay *rp)
{
	static SPIPlanPtr plan;
	Portal		portal = SPI_cursor_open(NULL,
										 store_plan(&plan,
												  "SELECT c.cycle, c.data FROM lake.cycle c ORDER BY c.cycle",
												  0, NULL),
										 NULL, NULL, true);
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "lake replay",
											  ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		bool		isnull;
		MemoryContext old;

		CHECK_FOR_INTERRUPTS();
		SPI_cursor_fetch(portal, true, 1);
		if (SPI_processed == 0)
			break;
		rp->cycle = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		old = MemoryContextSwitchTo(cxt);
		/* The replay applies under the cycle lock: no session is reading. */
		LWLockAcquire(cycle_lock(), LW_EXCLUSIVE);
		log_visit_cycle(rp->cycle,
						SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull),
						apply_landing, rp);
		LWLockRelease(cycle_lock());
		MemoryContextSwitchTo(old);
		MemoryContextReset(cxt);
		SPI_freetuptable(SPI_tuptable);
		rp->fig.tail++;
	}
	SPI_cursor_close(portal);
	MemoryContextDelete(cxt);
}

void
recovery_run(RecoveryResult *out)
{
	static SPIPlanPtr plan_epoch;
	TimestampTz start = GetCurrentTimestamp();
	Replay		rp;
	bool		isnull;
	int32		epoch;

	memset(&rp, 0, sizeof(rp));
	cycle_begin_recovery();
	lifecycle_cache_reset();
	store_connect();
	seal_lock();
	if (SPI_execute_plan(store_plan(&plan_epoch,
								  "UPDATE lake.writer SET epoch = epoch OPERATOR(pg_catalog.+) 1 "
								  "RETURNING epoch",
								  0, NULL),
						 NULL, NULL, false, 0) != SPI_OK_UPDATE_RETURNING || SPI_processed != 1)
		elog(ERROR, "lake: could not advance the writer epoch");
	epoch = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));

	load_owners(&rp);
	replay_log(&rp);
	store_finish();

	/* The new epoch must be durable before any receipt carries it. */
	ForceSyncCommit();
	rp.fig.tail = rp.fig.applied;
	rp.fig.ms = (double) (GetCurrentTimestamp() - start) / 1000.0;
	ereport(LOG,
			(errmsg("lake recovery: epoch %d, %lld owners, %lld landings applied, %lld quarantined, %.1f ms",
					epoch, (long long) rp.fig.owners, (long long) rp.fig.applied,
					(long long) rp.fig.quarantined, rp.fig.ms)));
	out->epoch = epoch;
	out->sealed_cycle = rp.cycle;
	out->figures = rp.fig;
}
