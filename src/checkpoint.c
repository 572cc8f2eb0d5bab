/*
 * checkpoint.c — owner snapshots and lake.checkpoint().
 *
 * A snapshot holds, for every owner, the position its durable state
 * reflects (its watermark), its phase and its lap, as of the sealed head.
 * It is taken under the sealing lock, so no seal can commit in between and
 * the owners' durable states in shared memory are exactly those of the
 * head. The worker takes one every lake.checkpoint_cycles cycles; the
 * newest two are kept, so a damaged newest one still leaves an older one.
 */
#include "lake.h"

#include "access/xact.h"
#include "access.h"
#include "args.h"
#include "catalog/pg_type.h"
#include "checkpoint.h"
#include "encode.h"
#include "guc.h"
#include "cycle.h"
#include "executor/spi.h"
#include "landing.h"
#include "lifecycle.h"
#include "miscadmin.h"
#include "seal.h"
#include "store.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(lake_checkpoint);

typedef struct Image
{
	int32		id;
	int32		lifecycle;
	int16		phase;
	int64		lap;
	int64		position;
	bool		quarantined;
} Image;

typedef struct Collect
{
	Image	   *images;
	int			n;
} Collect;

static void
collect(OwnerState *o, void *arg)
{
	Collect    *c = (Collect *) arg;
	Image	   *im = &c->images[c->n++];

	im->id = o->id;
	im->lifecycle = o->lifecycle;
	im->phase = o->phase;
	im->lap = o->lap;
	im->position = o->position;
	im->quarantined = o->quarantined;
}

static int
image_cmp(const void *a, const void *b)
{
	int32		x = ((const Image *) a)->id;
	int32		y = ((const Image *) b)->id;

	return (x > y) - (x < y);
}

/*
 * A lifecycle edit awaits its recovery: the live phase numbers are not
 * those of the lifecycles a session now loads. Nothing is written, and the
 * sealing lock, which that recovery needs, is let go for a caller that
 * waits for it.
 */
static int64
take_later(void)
{
	seal_unlock();
	store_finish();
	return -1;
}

int64
checkpoint_take(bool lock_held)
{
	static SPIPlanPtr plan_insert;
	static SPIPlanPtr plan_retire;
	Collect		c;
	int64		cycle;
	size_t		rawlen = LAKE_IMAGES_HEADER;
	uint8	   *raw;
	size_t		pos;
	int			kept = 0;
	bytea	   *stored;
	bool		live;
	bool		stale = false;

	store_connect();
	seal_lock();
	cycle = cycle_sealed_cycle();

	c.images = palloc(sizeof(Image) * Max(lake_max_owners, 1));
	c.n = 0;
	LWLockAcquire(cycle_lock(), LW_SHARED);
	if (!(lock_held ? cycle_owners_numbered() : cycle_owners_live()))
	{
		LWLockRelease(cycle_lock());
		return take_later();
	}
	owner_foreach(collect, &c);
	LWLockRelease(cycle_lock());
	/* In id order, the registry's: recovery then walks its owners in step. */
	qsort(c.images, c.n, sizeof(Image), image_cmp);

	{
		LakeOwnerImage longest = {.phase_len = NAMEDATALEN - 1};

		rawlen += (size_t) c.n * lake_image_size(&longest);
	}
	raw = palloc(rawlen);
	pos = LAKE_IMAGES_HEADER;
	for (int i = 0; i < c.n; i++)
	{
		char	   *why;
		const Lifecycle *lc = lifecycle_try_get(c.images[i].lifecycle, &why);
		LakeOwnerImage o;

		/*
		 * A quarantined owner whose lifecycle is not usable is left out: its
		 * durable quarantine holds it, and its release replays its whole
		 * log. A live one cannot be: recovery would start it at position 0
		 * from this snapshot's cycle (its lifecycle was edited behind the
		 * trigger's back, which quarantined nobody).
		 */
		if (lc == NULL && c.images[i].quarantined)
			continue;
		if (lc == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("owner id %d cannot be snapshotted: its lifecycle is not usable", c.images[i].id),
					 errdetail("Its %s.", why),
					 errhint("Repair lake_data.lifecycle, or quarantine its owners with lake.recover().")));

		if (c.images[i].phase >= lc->nphases)
		{
			stale = true;		/* loaded after an edit: checked below */
			break;
		}
		o.owner_id = c.images[i].id;
		o.position = c.images[i].position;
		o.lap = c.images[i].lap;
		o.phase = lc->phases[c.images[i].phase];
		o.phase_len = strlen(o.phase);
		pos += lake_image_put(raw + pos, &o);
		kept++;
	}
	/* An edit that committed meanwhile may have renumbered what was read. */
	LWLockAcquire(cycle_lock(), LW_SHARED);
	live = !stale && (lock_held ? cycle_owners_numbered() : cycle_owners_live());
	LWLockRelease(cycle_lock());
	if (!live)
		return take_later();
	(void) lake_images_put_header(raw, (uint32) kept, cycle);
	stored = encode_record((const char *) raw, pos);

	{
		Oid			types[5] = {INT8OID, INT4OID, INT8OID, INT8OID, BYTEAOID};
		Datum		values[5] = {Int64GetDatum(cycle), Int32GetDatum(kept),
			Int64GetDatum((int64) pos), Int64GetDatum((int64) (VARSIZE(stored) - VARHDRSZ)),
		PointerGetDatum(stored)};

		if (store_execute(store_plan_once(&plan_insert,
										  "INSERT INTO lake_data.snapshot (cycle, taken_at, owners, bytes, stored_bytes, data) "
										  "VALUES ($1, pg_catalog.now(), $2, $3, $4, $5) "
										  "ON CONFLICT (cycle) DO UPDATE SET taken_at = excluded.taken_at, "
										  " owners = excluded.owners, bytes = excluded.bytes, "
										  " stored_bytes = excluded.stored_bytes, data = excluded.data",
										  5, types),
						  values, NULL, InvalidSnapshot, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "lake: could not write the snapshot of cycle " INT64_FORMAT, cycle);
	}
	{
		Oid			types[1] = {INT8OID};
		Datum		values[1] = {Int64GetDatum(cycle)};

		if (store_execute(store_plan(&plan_retire,
									 "DELETE FROM lake_data.snapshot s WHERE s.cycle OPERATOR(pg_catalog.<) "
									 " (SELECT pg_catalog.max(p.cycle) FROM lake_data.snapshot p "
									 "  WHERE p.cycle OPERATOR(pg_catalog.<) $1)",
									 1, types),
						  values, NULL, InvalidSnapshot, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "lake: could not retire old snapshots");
	}
	store_finish();
	return cycle;
}

void
checkpoint_require_own_transaction(const char *what)
{
	if (IsTransactionBlock() || GetCurrentTransactionNestLevel() > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("%s cannot run inside a transaction block", what),
				 errdetail("What it writes is made durable by its own commit.")));

	/*
	 * The first statement of a pipeline is outside any block, but a BEGIN
	 * later in the pipeline would make its transaction one, to be left
	 * open or prepared with the sealing lock and what the call keeps for
	 * its commit (a seal's publication, a release's undo). PostgreSQL's
	 * rule for VACUUM and the like: refuse it anywhere else in a pipeline,
	 * and commit right after it. (A row-limited Execute still suspends the
	 * portal before that commit: seal.c refuses to PREPARE then.)
	 */
	PreventInTransactionBlock(true, what);
	/* Its writes bypass the executor's check (a standby is told 55000 later). */
	if (!RecoveryInProgress())
		PreventCommandIfReadOnly(what);
}

/*
 * The snapshot lake.checkpoint() wrote counts for the worker's cadence
 * (lake.checkpoint_cycles after the last one) only once it commits: a
 * statement that fails after the call writes none.
 */
static int64 committing = -1;

static void
checkpoint_xact_callback(XactEvent event, void *arg)
{
	/* Never prepared: it holds the sealing lock, and seal.c refuses. */
	Assert(committing < 0 || event != XACT_EVENT_PREPARE);
	if (committing >= 0 && event == XACT_EVENT_COMMIT)
		cycle_set_last_snapshot(committing);
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT)
		committing = -1;
}

Datum
lake_checkpoint(PG_FUNCTION_ARGS)
{
	static bool registered = false;
	int64		cycle;

	lake_require_preload();
	access_require_admin(fcinfo);
	checkpoint_require_own_transaction("lake.checkpoint()");
	do
	{
		CHECK_FOR_INTERRUPTS();
		seal_wait_ready();
	} while ((cycle = checkpoint_take(false)) < 0);
	if (!registered)
		RegisterXactCallback(checkpoint_xact_callback, NULL);
	registered = true;
	committing = cycle;
	PG_RETURN_INT64(cycle);
}
