/*
 * recovery.c — owners rebuilt from a snapshot plus the log above it.
 *
 * At every start the worker loads the newest snapshot (each owner's phase,
 * lap and watermark position as of a sealed cycle) and replays only the
 * cycles after it, in order: its cost follows the tail, not the history.
 * Every landing must continue its owner's positions, start from the phase
 * the owner is in, follow a legal edge and carry the lap that move gives;
 * no-step landings advance the position too. An owner whose landing does
 * not apply is quarantined — durably, in lake_data.owner, with the reason and
 * the position of its applied prefix — and every other owner recovers.
 * Casts wait (cycle_wait_ready) until the whole replay is done: nobody sees
 * a half-recovered owner.
 *
 * lake.recover() re-runs the same replay on demand from each owner's live
 * position (so a healthy owner applies nothing); lake.release_owner()
 * retries a quarantined owner's tail after a fix and clears the quarantine
 * if it now applies.
 */
#include "lake.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access.h"
#include "args.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "checkpoint.h"
#include "commands/trigger.h"
#include "durable.h"
#include "executor/spi.h"
#include "cycle.h"
#include "funcapi.h"
#include "guc.h"
#include "landing.h"
#include "lifecycle.h"
#include "logread.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "recovery.h"
#include "schema.h"
#include "seal.h"
#include "store_blob.h"
#include "store_owner.h"
#include "store_rel.h"
#include "store_row.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

/*
 * Worker lifetimes (epoch advances) a timeline's lost end is assumed never
 * to have reached: a worker that restarted this often without one of its
 * epochs reaching the standby that took over.
 */
#define LAKE_TIMELINE_EPOCH_SKIP 4096

/* lake.recover()'s columns: owner, applied, position, quarantined. */
#define RECOVER_COLUMNS 4

PG_FUNCTION_INFO_V1(lake_recover);
PG_FUNCTION_INFO_V1(lake_release_owner);
PG_FUNCTION_INFO_V1(lake_rebuild_owner_index);
PG_FUNCTION_INFO_V1(lake_writer_merge);
PG_FUNCTION_INFO_V1(lake_encoding_check);
PG_FUNCTION_INFO_V1(lake_lifecycle_changed);

/* Why landing l cannot apply to o, or NULL; *to gets the phase it moves to. */
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

/*
 * Apply l, from 'cycle', to o's durable state (and projected, when nothing
 * is pending).
 */
static void
advance(OwnerState *o, const LakeLanding *l, int to, int64 cycle)
{
	o->phase = (int16) to;
	o->lap = l->lap;
	o->position = l->position;
	o->position_cycle = cycle;
	if (o->pending == 0)
	{
		o->projected_phase = o->phase;
		o->projected_lap = o->lap;
	}
}

/* ----------------------------------------------------------------------
 * The worker's recovery
 * ---------------------------------------------------------------------- */

/* A durable quarantine, as the registry records it. */
typedef struct DurableQuarantine
{
	int64		position;		/* the applied prefix */
	const char *reason;
} DurableQuarantine;

/* Kept small: recovery walks one per registered owner. */
typedef struct ById
{
	int32		id;
	bool		newly;			/* quarantined by this recovery */
	OwnerState *owner;
	DurableQuarantine *limit;	/* durably quarantined (rare), or NULL */
} ById;

/*
 * The registered owners, sorted by id once read: found by id in one probe
 * while ids are dense, by binary search otherwise.
 */
typedef struct Replay
{
	ById	   *owners;
	int			n;
	int			unfit;			/* owners the shared table had no room for */
	int32		lc_id;			/* the last lifecycle looked up ... */
	const Lifecycle *lc;		/* ... when it was well formed */
	LogCycle	at;				/* the cycle being replayed, or the snapshot's */
	int32		unknown_image;	/* a snapshot image's unregistered owner id */
	RecoveryFigures fig;
} Replay;

static int
by_id_cmp(const void *a, const void *b)
{
	int32		x = ((const ById *) a)->id;
	int32		y = ((const ById *) b)->id;

	return (x > y) - (x < y);
}

static ById *
by_id(Replay *rp, int32 id)
{
	int			lo = 0;
	int			hi = rp->n - 1;
	int64		guess;

	if (rp->n == 0)
		return NULL;
	guess = (int64) id - rp->owners[0].id;
	if (guess >= 0 && guess < rp->n && rp->owners[guess].id == id)
		return &rp->owners[guess];
	while (lo <= hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (rp->owners[mid].id == id)
			return &rp->owners[mid];
		if (rp->owners[mid].id < id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

/* Quarantine an owner at the prefix applied so far, for this recovery. */
static void
quarantine(Replay *rp, ById *b, const char *why)
{
	OwnerState *o = b->owner;

	LWLockAcquire(cycle_lock(), LW_EXCLUSIVE);
	owner_quarantine(o, o->position, why);
	LWLockRelease(cycle_lock());
	b->newly = true;
	rp->fig.quarantined++;
	ereport(WARNING,
			(errcode(ERRCODE_LAKE_OWNER_QUARANTINED),
			 errmsg("lake recovery: owner \"%s\" quarantined at position " INT64_FORMAT,
					o->name, o->position),
			 errdetail("Its recovery stopped there: %s.", why)));
}

/*
 * No owner is ever deleted and ids are never reused: an id that landings
 * or a snapshot name but the registry does not hold, or one it holds twice,
 * means a registry row was altered, or the registry is not all restored yet
 * (pg_restore -j may commit the log and the writer row before it). Whose
 * state is missing is unknown, and an owner registered after this recovery
 * would start at position 0 over landings it has: the recovery fails, and
 * the worker tries it again every second until the registry matches.
 */
static void registry_mismatch(const char *why) pg_attribute_noreturn();

static void
registry_mismatch(const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("lake_data.owner does not match the log: %s", why),
			 errdetail("Owners are never deleted and their ids never reused: the registry is damaged or not all restored."),
			 errhint("Restore or repair lake_data.owner; the worker tries the recovery again every second.")));
}

/*
 * The owner's lifecycle; NULL, with the owner quarantined, when the stored
 * lifecycle is not well formed: one lifecycle never fails the recovery of
 * every owner.
 */
static const Lifecycle *
owner_lifecycle(Replay *rp, ById *b)
{
	char	   *why;
	const Lifecycle *lc;

	/* Owners mostly share a few lifecycles: skip the cache's hash. */
	if (rp->lc != NULL && rp->lc_id == b->owner->lifecycle)
		return rp->lc;
	lc = lifecycle_try_get(b->owner->lifecycle, &why);
	if (lc == NULL && !b->owner->quarantined)
		quarantine(rp, b, why);
	if (lc != NULL)
	{
		rp->lc_id = b->owner->lifecycle;
		rp->lc = lc;
	}
	return lc;
}

static int
apply_landing(const LakeLanding *l, void *arg)
{
	Replay	   *rp = (Replay *) arg;
	ById	   *b = by_id(rp, l->owner_id);
	OwnerState *o;
	const Lifecycle *lc;
	char	   *why;
	int			to;

	rp->fig.tail++;
	if (b == NULL)
		registry_mismatch(psprintf("cycle " INT64_FORMAT " has a landing of owner id %d, which it does not hold",
								   rp->at.cycle, l->owner_id));
	o = b->owner;
	if (o->quarantined || l->position <= o->position ||
		(b->limit != NULL && l->position > b->limit->position))
		return 0;
	if ((lc = owner_lifecycle(rp, b)) == NULL)
		return 0;
	why = misfit(o, lc, l, &to);
	if (why != NULL)
	{
		quarantine(rp, b, why);
		return 0;
	}
	/*
	 * Trajectories read a position and its cycle even while recovery runs
	 * (cycle_owner_reached): both change together, under the lock.
	 */
	LWLockAcquire(cycle_lock(), LW_EXCLUSIVE);
	advance(o, l, to, rp->at.cycle);
	LWLockRelease(cycle_lock());
	rp->fig.applied++;
	return 0;
}

/*
 * A damaged cycle: none of its landings is applied, and every owner with a
 * landing in it above what is applied is quarantined at its prefix — the
 * owners its owner list (kept beside the landings, with its own checksum)
 * names. The other owners recover; the cycle's owners wait for a fix and
 * lake.release_owner(). When the owner list is damaged too, which owners
 * the cycle holds is unknown: every owner not yet quarantined is, rather
 * than one be recovered past landings it may have lost (fail closed).
 */
static void
skip_damaged_cycle(int64 cycle, const char *why, const LakeCycleOwner *owners,
				   int nowners, void *arg)
{
	Replay	   *rp = (Replay *) arg;
	char	   *reason;

	/* Said even when the snapshot covers its owners' landings there. */
	ereport(WARNING,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("lake recovery: cycle " INT64_FORMAT " is damaged", cycle),
			 errdetail("%s%s", why, nowners < 0 ? "; so is its owner list" : "")));
	if (nowners < 0)
	{
		reason = psprintf("cycle " INT64_FORMAT " is damaged, and so is its owner list: %s", cycle, why);
		for (int i = 0; i < rp->n; i++)
			if (!rp->owners[i].owner->quarantined)
				quarantine(rp, &rp->owners[i], reason);
		return;
	}
	reason = psprintf("cycle " INT64_FORMAT " is damaged: %s", cycle, why);
	for (int i = 0; i < nowners; i++)
	{
		ById	   *b = by_id(rp, owners[i].owner_id);
		int64		last = owners[i].first_position + owners[i].landings - 1;

		if (b != NULL && !b->owner->quarantined && last > b->owner->position)
			quarantine(rp, b, reason);
	}
}

/* Enter one registered owner in shared memory, in its initial state. */
static void
load_owner(const OwnerRow *row, void *arg)
{
	Replay	   *rp = (Replay *) arg;
	OwnerState *o = NULL;
	ById	   *b;
	bool		full;

	if (rp->unfit == 0 && rp->n < lake_max_owners)
	{
		LWLockAcquire(cycle_lock(), LW_EXCLUSIVE);
		o = owner_enter(row->name, row->id, row->lifecycle, row->tenant, &full);
		LWLockRelease(cycle_lock());
	}
	if (o == NULL)
	{
		rp->unfit++;			/* no room: counted for the error below */
		return;
	}
	b = &rp->owners[rp->n++];
	b->id = row->id;
	b->newly = false;
	b->owner = o;
	b->limit = NULL;
	if (row->quarantined)
	{
		b->limit = palloc(sizeof(DurableQuarantine));
		b->limit->position = row->quarantine_position;
		b->limit->reason = row->quarantine_reason;
	}
	(void) owner_lifecycle(rp, b);
	rp->fig.owners++;
}

/* The whole registry, straight into the shared owner table. */
static void
load_owners(Replay *rp)
{
	/* No more than the shared table holds; only the pages used are touched. */
	rp->owners = palloc_extended(sizeof(ById) * lake_max_owners, MCXT_ALLOC_HUGE);
	store_owner_scan(OWNERS_AS_STORED, load_owner, rp);
	/* Usually in id order already (owners are appended): then one pass. */
	qsort(rp->owners, rp->n, sizeof(ById), by_id_cmp);
	if (rp->unfit > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("lake.max_owners (%d) is too small for the %d registered owners",
						lake_max_owners, rp->n + rp->unfit),
				 errhint("Raise lake.max_owners and restart the server.")));
}

static int
load_image(const LakeOwnerImage *im, void *arg)
{
	Replay	   *rp = (Replay *) arg;
	ById	   *b = by_id(rp, im->owner_id);
	OwnerState *o;
	const Lifecycle *lc;
	int			phase;

	if (b == NULL)
	{
		if (rp->unknown_image == 0)
			rp->unknown_image = im->owner_id;	/* judged once the snapshot reads whole */
		return 0;
	}
	o = b->owner;
	if (o->quarantined)
		return 0;				/* its lifecycle is not usable */
	/* Its lifecycle is usable (else it would be quarantined), and cached. */
	if (rp->lc == NULL || rp->lc_id != o->lifecycle)
	{
		rp->lc_id = o->lifecycle;
		rp->lc = lifecycle_get(o->lifecycle);
	}
	lc = rp->lc;
	phase = lifecycle_phase(lc, im->phase, im->phase_len);
	if (phase < 0)
	{
		owner_quarantine(o, 0, psprintf("the snapshot puts it in phase %.*s, which is not in its lifecycle",
										(int) im->phase_len, im->phase));
		b->newly = true;
		rp->fig.quarantined++;
		return 0;
	}
	o->phase = o->projected_phase = (int16) phase;
	o->lap = o->projected_lap = im->lap;
	o->position = im->position;
	o->position_cycle = rp->at.cycle;
	return 0;
}

/*
 * Start every owner from the newest snapshot; returns the cycle it covers,
 * or 0 (replay everything) when there is none or it cannot be read.
 */
typedef struct SnapshotRow
{
	bool		found;
	int64		cycle;
	int64		bytes;
	bytea	   *data;			/* detoasted */
} SnapshotRow;

/* The newest snapshot's row: the last entry of its primary key. */
static void
fetch_snapshot(void *arg)
{
	SnapshotRow *sr = (SnapshotRow *) arg;

	/* lake_data.snapshot (cycle, taken_at, owners, bytes, stored_bytes, data, encoding) */
	Datum		row[7];
	bool		nulls[7];

	sr->found = store_fetch("snapshot", "snapshot_pkey", GetActiveSnapshot(), NULL, 0,
							BackwardScanDirection, row, nulls);
	if (!sr->found)
		return;
	sr->cycle = DatumGetInt64(row[0]);
	sr->bytes = DatumGetInt64(row[3]);
	sr->data = DatumGetByteaPP(row[5]);
}

static int64
load_snapshot(Replay *rp)
{
	SnapshotRow sr = {false, 0, 0, NULL};
	int64		cycle;
	size_t		got;
	uint8	   *raw;
	const char *why;
	LakeLandingStatus lst;

	/* Its row's damage (a NULL column, its TOAST rows) is the record's. */
	why = store_contain_damage(fetch_snapshot, &sr);
	if (why == NULL && !sr.found)
		return 0;
	cycle = sr.cycle;
	rp->at.cycle = cycle;
	if (why == NULL)
		why = log_unwrap(PointerGetDatum(sr.data), &sr.bytes, false, &raw, &got);
	if (why == NULL)
	{
		LWLockAcquire(cycle_lock(), LW_EXCLUSIVE);
		lst = lake_images_decode(raw, got, &cycle, load_image, rp);
		LWLockRelease(cycle_lock());
		if (lst == LAKE_LANDING_OK)
			return cycle;
		why = lake_landing_status_text(lst);
	}

	/* A damaged snapshot: forget what it set and replay the whole log. */
	rp->unknown_image = 0;
	ereport(WARNING,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 sr.found ?
			 errmsg("lake recovery: the snapshot of cycle " INT64_FORMAT " is damaged; replaying the whole log", cycle) :
			 errmsg("lake recovery: the newest snapshot is damaged; replaying the whole log"),
			 errdetail("The check of the snapshot found: %s.", why)));
	{
		LWLockAcquire(cycle_lock(), LW_EXCLUSIVE);
		for (int i = 0; i < rp->n; i++)
		{
			ById	   *b = &rp->owners[i];
			OwnerState *o = b->owner;

			o->phase = o->projected_phase = 0;
			o->lap = o->projected_lap = 0;
			o->position = o->position_cycle = 0;
			o->quarantined = false;
			b->newly = false;
		}
		LWLockRelease(cycle_lock());
		rp->fig.quarantined = 0;
		for (int i = 0; i < rp->n; i++)
			(void) owner_lifecycle(rp, &rp->owners[i]);
	}
	return 0;
}

/* After the snapshot (whose failure resets every state): a registry altered? */
static void
check_registry(Replay *rp)
{
	for (int i = 1; i < rp->n; i++)
		if (rp->owners[i].id == rp->owners[i - 1].id)
			registry_mismatch(psprintf("it holds owner id %d twice", rp->owners[i].id));
	if (rp->unknown_image != 0)
		registry_mismatch(psprintf("the snapshot of cycle " INT64_FORMAT " has a state of owner id %d, which it does not hold",
								   rp->at.cycle, rp->unknown_image));
}

static void
replay_log(Replay *rp, int64 after_cycle)
{
	rp->at.cycle = after_cycle;
	log_scan_cycles(after_cycle, &rp->at, apply_landing, skip_damaged_cycle, rp);
}

/* Mark durable quarantines in shared memory, record the new ones. */
static void
settle_quarantines(Replay *rp)
{
	for (int i = 0; i < rp->n; i++)
	{
		ById	   *b = &rp->owners[i];
		OwnerState *o = b->owner;

		if (b->newly)
			store_owner_set_quarantine(o->id, o->quarantine_position, o->reason);
		else if (b->limit != NULL && b->limit->reason != NULL)
		{
			LWLockAcquire(cycle_lock(), LW_EXCLUSIVE);
			owner_quarantine(o, o->position, b->limit->reason);
			LWLockRelease(cycle_lock());
			rp->fig.quarantined++;
		}
	}
}

/*
 * The newest epoch any sealed cycle carries, 0 if none: a restore that did
 * not go through lake.writer_merge (triggers disabled) brings cycles whose
 * epochs the writer row does not know.
 */
static int32
newest_cycle_epoch(void)
{
	static SPIPlanPtr plan;
	bool		isnull;
	Datum		d;

	store_run(store_plan(&plan, "SELECT pg_catalog.max(c.epoch) FROM lake_data.cycle c", 0, NULL),
			  NULL, SPI_OK_SELECT);
	d = store_col(0, 1, &isnull);
	return isnull ? 0 : DatumGetInt32(d);
}

/*
 * Names inside lake's records are bytes in the encoding of the database
 * that wrote them; a restore converts the tables' text, not the records.
 */
static void
require_encoding(int enc)
{
	const char *name;

	if (enc == GetDatabaseEncoding())
		return;
	name = PG_VALID_ENCODING(enc) ? pg_encoding_to_char(enc) : psprintf("%d", enc);
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("lake's records were written in a database of encoding \"%s\", and this one's is \"%s\"",
					name, GetDatabaseEncodingName()),
			 errdetail("Phase names and cast operation ids inside the records keep the encoding they were written in."),
			 errhint("Restore into a database created with ENCODING '%s'.", name)));
}

/*
 * The check constraint of the tables whose rows carry the encoding they
 * were written in (lake_data.writer, cycle, snapshot). The seal writes its
 * rows past constraints, with this database's.
 */
Datum
lake_encoding_check(PG_FUNCTION_ARGS)
{
	require_encoding(PG_GETARG_INT16(0));
	PG_RETURN_BOOL(true);
}

/*
 * Advance the durable writer epoch to the next one in this partition's
 * residue class (SPEC §7), straight on its one row: recovery is its only
 * writer but for a restore's merge (lake.writer_merge), which a failed
 * recovery outlasts and retries after. The next epoch is past the row's,
 * past every sealed cycle's and past this server's live one (which a
 * dropped and re-created extension's row starts below), so no receipt is
 * issued twice.
 *
 * A fork may also have left another line of history go on from the row:
 * a standby promoted or a point-in-time recovery (a timeline above the
 * row's), a restore (the merge leaves the row's timeline NULL, and a
 * restore without it brings cycles past the row's epoch). That line may
 * have advanced epochs this server never saw, so the next epoch skips
 * LAKE_TIMELINE_EPOCH_SKIP advances per timeline between the row's and
 * this one (this whole one for a restore): a receipt of the lost line is
 * never issued again for another cast, and two standbys promoted in turn
 * from the same row (timelines 2 and 3) never take the same epoch.
 */
static int32
advance_epoch(void)
{
	Relation	rel = store_open("writer", RowExclusiveLock);
	Relation	idx = store_open("writer_pkey", AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	AttrNumber	epoch_att = get_attnum(RelationGetRelid(rel), "epoch");
	AttrNumber	tli_att = get_attnum(RelationGetRelid(rel), "timeline");
	AttrNumber	parts_att = get_attnum(RelationGetRelid(rel), "partitions");
	AttrNumber	part_att = get_attnum(RelationGetRelid(rel), "partition_no");
	Datum	   *values = palloc(sizeof(Datum) * desc->natts);
	bool	   *nulls = palloc(sizeof(bool) * desc->natts);
	StoreScan  *scan;
	HeapTuple	tup;
	TimeLineID	tli = GetWALInsertionTimeLine();
	int32		row_epoch;
	int32		newest = newest_cycle_epoch();
	int32		live = cycle_live_epoch();
	int64		forked_from;
	int64		next;

	if (epoch_att == InvalidAttrNumber || tli_att == InvalidAttrNumber ||
		parts_att == InvalidAttrNumber || part_att == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("lake_data.writer lacks one of its columns"),
				 errdetail("The table is an earlier build's."),
				 errhint(SCHEMA_MOVE_HINT)));
	scan = store_scan_begin(rel, idx, GetActiveSnapshot(), 0, NULL);
	tup = store_scan_next(scan, ForwardScanDirection);
	if (!HeapTupleIsValid(tup))
		store_writer_row_missing();
	tup = heap_copytuple(tup);
	store_scan_end(scan);
	store_deform_tuple(desc, tup, values, nulls);
	store_require_columns(desc, nulls, "writer");
	store_require_partition(nulls[parts_att - 1] ? 0 : DatumGetInt32(values[parts_att - 1]),
							nulls[part_att - 1] ? 0 : DatumGetInt32(values[part_att - 1]));
	row_epoch = DatumGetInt32(values[epoch_att - 1]);
	next = (int64) Max(row_epoch, Max(newest, live)) + 1;
	forked_from = nulls[tli_att - 1] || newest > row_epoch ? 0 :
		DatumGetInt64(values[tli_att - 1]);
	/*
	 * An epoch this server took since it started was taken on this
	 * timeline, past any fork: a row CREATE EXTENSION made after a DROP
	 * (timeline 1) starts past it without skipping again.
	 */
	if (forked_from > 0 && live > 0)
		forked_from = tli;
	if ((int64) tli > forked_from)
		next += ((int64) tli - forked_from) * LAKE_TIMELINE_EPOCH_SKIP * lake_partitions;
	next += (lake_partition + lake_partitions - next % lake_partitions) % lake_partitions;
	if (next > PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("the writer epoch cannot advance past %d", PG_INT32_MAX)));
	if (nulls[tli_att - 1] || DatumGetInt64(values[tli_att - 1]) > (int64) tli)
	{
		if (nulls[tli_att - 1])
			ereport(LOG,
					(errmsg("lake: a restored history: stage and payload ids skip 2^32")));
		else
			ereport(LOG,
					(errmsg("lake: the timeline went back from " INT64_FORMAT " to %u (pg_upgrade): stage and payload ids skip 2^32",
							DatumGetInt64(values[tli_att - 1]), tli)));
		store_skip_blob_ids();
	}
	values[epoch_att - 1] = Int32GetDatum((int32) next);
	values[tli_att - 1] = Int64GetDatum((int64) tli);
	values[parts_att - 1] = Int32GetDatum(lake_partitions);
	values[part_att - 1] = Int32GetDatum(lake_partition);
	nulls[tli_att - 1] = nulls[parts_att - 1] = nulls[part_att - 1] = false;
	store_update(rel, &tup->t_self, values, nulls);
	index_close(idx, AccessShareLock);
	table_close(rel, NoLock);
	return (int32) next;
}

/*
 * Trigger on UPDATE or DELETE of lake_data.lifecycle: once the transaction
 * commits, sessions reload their lifecycles and the worker seals what is
 * pending and recovers every owner against the lifecycles as they are now
 * (quarantining any whose durable steps no longer apply). Lifecycles are
 * meant to stay as defined; this keeps a hand edit coherent. The sealing
 * lock, held to the commit, keeps every recovery, checkpoint and seal
 * either wholly before the edit or after it is visible (the edit waits for
 * one in progress, and they wait for the edit).
 */
Datum
lake_lifecycle_changed(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_AFTER(td->tg_event) ||
		!TRIGGER_FIRED_FOR_STATEMENT(td->tg_event) || TRIGGER_FIRED_BY_INSERT(td->tg_event))
		store_trigger_misfired("lake.lifecycle_changed()", "AFTER UPDATE OR DELETE FOR EACH STATEMENT");
	store_require_trigger_on(td, "lifecycle");
	seal_lock();
	cycle_recover_at_commit();
	return PointerGetDatum(NULL);
}

/*
 * BEFORE INSERT on lake_data.writer: the table holds one row, and a restore
 * (pg_dump dumps it) inserts the dumped one over the row CREATE EXTENSION
 * made. Merge it, keeping the higher epoch, so that recovery on the
 * restored database starts past every epoch its history holds: the
 * restored receipts are never issued again. The merged row's timeline
 * becomes NULL: the dumped database may go on after the dump, so the next
 * epoch skips as after a fork (advance_epoch). An insert into the empty
 * table goes ahead, as a fork's (NULL) unless CREATE EXTENSION makes it.
 * That row says timeline 1, whatever this one is: a timeline above 1 may
 * have forked (a promotion, a point-in-time recovery) from a line that
 * created the extension after the fork point and handed out receipts, so
 * its first epoch skips as after a fork from timeline 1.
 */
/* The table's one row, inserted into the empty table: see lake_writer_merge. */
static Datum
writer_first_row(TriggerData *td)
{
	TupleDesc	desc = td->tg_relation->rd_att;
	int			att = SPI_fnumber(desc, "timeline");
	Datum		value = Int64GetDatum((int64) 1);
	bool		isnull = !store_installing_lake();

	if (att <= 0)
		return PointerGetDatum(td->tg_trigtuple);	/* advance_epoch refuses it */
	return PointerGetDatum(heap_modify_tuple_by_cols(td->tg_trigtuple, desc, 1,
													 &att, &value, &isnull));
}

Datum
lake_writer_merge(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan;
	TriggerData *td = (TriggerData *) fcinfo->context;
	Oid			types[3] = {INT4OID, INT4OID, INT4OID};
	Datum		values[3];
	bool		isnull;
	bool		parts_null;
	bool		part_null;
	Datum		enc;
	bool		enc_null;
	uint64		merged;
	TupleDesc	desc = td->tg_relation->rd_att;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BEFORE(td->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(td->tg_event) || !TRIGGER_FIRED_BY_INSERT(td->tg_event))
		store_trigger_misfired("lake.writer_merge()", "BEFORE INSERT FOR EACH ROW");
	store_require_trigger_on(td, "writer");
	values[0] = heap_getattr(td->tg_trigtuple, SPI_fnumber(desc, "epoch"), desc, &isnull);
	if (isnull)
		PG_RETURN_POINTER(td->tg_trigtuple);	/* NOT NULL refuses it */
	/* The dumped partition, if it had one (0: none), goes with its epochs. */
	values[1] = heap_getattr(td->tg_trigtuple, SPI_fnumber(desc, "partitions"), desc, &parts_null);
	values[2] = heap_getattr(td->tg_trigtuple, SPI_fnumber(desc, "partition_no"), desc, &part_null);
	if (parts_null || part_null)
		values[1] = values[2] = Int32GetDatum(0);
	enc = heap_getattr(td->tg_trigtuple, SPI_fnumber(desc, "encoding"), desc, &enc_null);
	/* The row goes no further than this trigger: its constraint is not checked. */
	if (!enc_null)
		require_encoding(DatumGetInt16(enc));
	/* A history restored over live casts would share their receipts. */
	if (cycle_has_history())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("lake_data.writer cannot take a restored epoch: this database's lake has accepted casts"),
				 errhint("Restore into a new database, where the dump creates the extension.")));
	store_connect();
	store_run(store_plan(&plan,
				 "UPDATE lake_data.writer w SET epoch = GREATEST(w.epoch, $1), timeline = NULL, "
				 "partitions = CASE WHEN $2 > 0 THEN $2 ELSE w.partitions END, "
				 "partition_no = CASE WHEN $2 > 0 THEN $3 ELSE w.partition_no END",
				 3, types),
		values, SPI_OK_UPDATE);
	merged = SPI_processed;
	store_finish();
	if (merged == 0)
		return writer_first_row(td);
	/* The restored owners are recovered once this commits, past its epoch. */
	cycle_recover_at_commit();
	PG_RETURN_POINTER(NULL);
}

void
recovery_run(RecoveryResult *out)
{
	TimestampTz start = GetCurrentTimestamp();
	Replay		rp;
	int32		epoch;
	int64		snapshot;

	memset(&rp, 0, sizeof(rp));

	/*
	 * The sealing lock first: a seal in flight (lake.seal() in a transaction
	 * still open) finishes its cut of the ring at its commit, before it lets
	 * go of the lock. Only then are the ring and the owners reset, and the
	 * registry, snapshot and log read with a snapshot taken after the lock
	 * was granted, so that seal's cycle is replayed, not lost.
	 */
	store_connect();
	seal_lock();
	cycle_begin_recovery();
	cycle_lifecycles_reset();	/* under the sealing lock: every edit is visible */
	PushActiveSnapshot(GetTransactionSnapshot());
	epoch = advance_epoch();

	load_owners(&rp);
	snapshot = load_snapshot(&rp);
	check_registry(&rp);
	replay_log(&rp, snapshot);
	settle_quarantines(&rp);
	PopActiveSnapshot();
	store_finish();

	/* The new epoch must be durable before any receipt carries it. */
	durable_commit();
	rp.fig.snapshot = snapshot;
	rp.fig.ms = (double) (GetCurrentTimestamp() - start) / 1000.0;
	out->epoch = epoch;
	out->sealed_cycle = rp.at.cycle;
	out->last_snapshot = snapshot;
	out->figures = rp.fig;
}

/* ----------------------------------------------------------------------
 * On demand: lake.recover() and lake.release_owner()
 * ---------------------------------------------------------------------- */

typedef struct OwnerReplay
{
	LogCycle	at;				/* the cycle being replayed */
	OwnerState *owner;
	const Lifecycle *lc;		/* NULL when not well formed: why says so */
	int			applied;
	char	   *why;			/* set when a landing did not apply */
	MemoryContext why_cxt;		/* where 'why' lives: the log reader resets its own */
} OwnerReplay;

static int
apply_owner_landing(const LakeLanding *l, void *arg)
{
	OwnerReplay *r = (OwnerReplay *) arg;
	int			to;
	const char *why;

	if (r->why != NULL)
		return 1;				/* nothing applies after the first refusal */
	if (l->owner_id != r->owner->id || l->position <= r->owner->position)
		return 0;
	LWLockAcquire(cycle_lock(), LW_EXCLUSIVE);
	why = misfit(r->owner, r->lc, l, &to);
	if (why == NULL)
	{
		advance(r->owner, l, to, r->at.cycle);
		r->applied++;
	}
	LWLockRelease(cycle_lock());
	if (why != NULL)
		r->why = MemoryContextStrdup(r->why_cxt, why);
	return why != NULL;			/* stop at the first landing that does not apply */
}

/* A damaged cycle in the owner's tail stops its replay like a misfit. */
static void
owner_cycle_damaged(int64 cycle, const char *why, const LakeCycleOwner *owners,
					int nowners, void *arg)
{
	OwnerReplay *r = (OwnerReplay *) arg;

	if (r->why == NULL)
		r->why = MemoryContextStrdup(r->why_cxt,
									 psprintf("cycle " INT64_FORMAT " is damaged: %s", cycle, why));
}

/*
 * Apply the sealed landings above the owner's live position. The caller
 * holds the sealing lock; the log is read as of now, not as of the
 * statement's start, so a seal that committed in between (and moved the
 * live states) is in it, as in recovery_run.
 */
static void
replay_owner(OwnerReplay *r)
{
	PushActiveSnapshot(GetLatestSnapshot());

	/*
	 * A live owner's next landing is in its position's cycle or a later
	 * one. Not so for a quarantined one: a snapshot taken after its
	 * quarantine gives it that snapshot's cycle, and its landings past the
	 * prefix are older; nor is its head known (-1).
	 */
	log_visit_owner(r->owner->id, r->owner->position,
					r->owner->quarantined ? -1 : Max(r->owner->position_cycle - 1, 0),
					NULL, &r->at, apply_owner_landing, owner_cycle_damaged, r);
	PopActiveSnapshot();
}

/*
 * The owner's live entry and lifecycle, for the on-demand functions. The
 * lifecycle is read afresh: the fix a release follows may have been to it.
 */
static void
open_owner(const char *name, OwnerReplay *r)
{
	lifecycle_cache_reset();
	r->applied = 0;
	r->why = NULL;
	r->why_cxt = CurrentMemoryContext;
	r->owner = cycle_owner_entry(name, &r->lc, false, &r->why);
}

/*
 * The owners releases make live, once their transaction commits: until
 * then they stay quarantined, so no cast is accepted against a release that
 * an abort would take back (the durable quarantine would stand); their
 * replayed states are put back (release_undo).
 *
 * A snapshot taken while an owner was quarantined holds its prefix, and
 * recovery replays only the cycles after the newest snapshot: the landings
 * a release applied would be lost to the next recovery. So the releasing
 * transaction writes a snapshot before it commits, one for all the owners
 * it released (the sealing lock, held since the first, keeps seals and
 * lifecycle edits out meanwhile).
 */
static List *releasing = NIL;	/* of OwnerState *, in TopTransactionContext */
static List *release_lines = NIL;	/* the server log's line for each, at commit;
										 * in TopTransactionContext */

/*
 * A quarantined owner's state as its release found it (no casts pending:
 * they are refused). A release that does not commit puts it back: the
 * landings its replay applied stay past the durable quarantine's prefix,
 * and a state left advanced, with the old reason, would go into the next
 * snapshot, so recovery would find the owner at a prefix that depends on
 * when a snapshot was taken.
 */
typedef struct ReleaseUndo
{
	OwnerState *owner;
	int16		phase;
	int64		lap;
	int64		position;
	int64		position_cycle;
} ReleaseUndo;

static List *release_undo = NIL;	/* of ReleaseUndo *, in TopTransactionContext */

static void
put_back(List *undo)
{
	LWLockAcquire(cycle_lock(), LW_EXCLUSIVE);
	/* Newest first: an owner released twice ends as the first found it. */
	for (int i = list_length(undo) - 1; i >= 0; i--)
	{
		ReleaseUndo *u = (ReleaseUndo *) list_nth(undo, i);
		OwnerState *o = u->owner;

		o->phase = o->projected_phase = u->phase;
		o->lap = o->projected_lap = u->lap;
		o->position = u->position;
		o->position_cycle = u->position_cycle;
	}
	LWLockRelease(cycle_lock());
}

/*
 * The owners lake.recover() quarantined: in shared memory at once (no cast
 * is accepted against them meanwhile), durably at commit. An abort (a
 * cancel later in its loop) takes the durable quarantine back, and so
 * this one: the live states it replayed are made of durable landings.
 */
static List *quarantining = NIL;

/* Owners 'list' names, live again. */
static void
unquarantine(List *list)
{
	ListCell   *lc;

	LWLockAcquire(cycle_lock(), LW_EXCLUSIVE);
	foreach(lc, list)
	{
		OwnerState *o = (OwnerState *) lfirst(lc);

		o->quarantined = false;
		o->reason[0] = '\0';
	}
	LWLockRelease(cycle_lock());
}

static void
release_xact_callback(XactEvent event, void *arg)
{
	/* Never prepared: it holds the sealing lock, and seal.c refuses. */
	Assert(event != XACT_EVENT_PREPARE ||
		   (releasing == NIL && quarantining == NIL && release_undo == NIL));
	if (event == XACT_EVENT_PRE_COMMIT && releasing != NIL)
	{
		int64		covered;

		PushActiveSnapshot(GetTransactionSnapshot());
		covered = checkpoint_take(true);
		PopActiveSnapshot();
		if (covered < 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("no owner was released: a lifecycle edit awaits its recovery"),
					 errhint("Release them again once lake.stats() shows the worker serving.")));
	}
	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT)
		return;
	/* Before the locks go: the sealing lock keeps a recovery off the entries. */
	unquarantine(event == XACT_EVENT_COMMIT ? releasing : quarantining);
	if (event == XACT_EVENT_ABORT)
		put_back(release_undo);
	else
	{
		ListCell   *lc;

		/* The server log has the quarantine (a WARNING): the release too. */
		foreach(lc, release_lines)
			ereport(LOG_SERVER_ONLY, (errmsg_internal("%s", (char *) lfirst(lc)),
									  errhidestmt(true)));
	}
	/* Their memory goes with the transaction. */
	releasing = quarantining = release_undo = release_lines = NIL;
}

/* Remember 'item' in 'list' until the transaction ends. */
static void
until_xact_end(List **list, void *item)
{
	static bool registered = false;
	MemoryContext old;

	if (!registered)
		RegisterXactCallback(release_xact_callback, NULL);
	registered = true;
	old = MemoryContextSwitchTo(TopTransactionContext);
	*list = lappend(*list, item);
	MemoryContextSwitchTo(old);
}

/* Keep o's state to put back should this transaction not commit. */
static void
keep_for_abort(OwnerState *o)
{
	ReleaseUndo *u = MemoryContextAlloc(TopTransactionContext, sizeof(ReleaseUndo));

	LWLockAcquire(cycle_lock(), LW_SHARED);
	u->owner = o;
	u->phase = o->phase;
	u->lap = o->lap;
	u->position = o->position;
	u->position_cycle = o->position_cycle;
	LWLockRelease(cycle_lock());
	until_xact_end(&release_undo, u);
}

Datum
lake_recover(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo;
	char	   *only = NULL;
	OwnerRow   *rows = NULL;
	uint64		n = 1;

	lake_require_preload();
	if (!PG_ARGISNULL(0))
		only = lake_arg_short_name(fcinfo, 0, "owner");
	access_require_admin(fcinfo);
	checkpoint_require_own_transaction("lake.recover()");
	cycle_require_no_cut("lake.recover()");
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	lake_require_result_width("lake.recover()", rsinfo->setDesc, RECOVER_COLUMNS);
	seal_wait_ready();

	store_connect();
	seal_lock_live();
	if (only == NULL)
	{
		rows = store_owner_rows(InvalidOid, true, &n);
	}
	for (uint64 i = 0; i < n; i++)
	{
		OwnerReplay r;
		Datum		values[RECOVER_COLUMNS];
		bool		nulls[RECOVER_COLUMNS] = {0};
		char	   *name = only;

		CHECK_FOR_INTERRUPTS();
		if (rows != NULL)
			name = rows[i].name;
		open_owner(name, &r);
		if (!r.owner->quarantined)
		{
			if (r.lc != NULL)
				replay_owner(&r);
			if (r.why != NULL)
			{
				until_xact_end(&quarantining, r.owner);	/* before: it may fail */
				LWLockAcquire(cycle_lock(), LW_EXCLUSIVE);
				owner_quarantine(r.owner, r.owner->position, r.why);
				LWLockRelease(cycle_lock());
				store_owner_set_quarantine(r.owner->id, r.owner->position, r.why);
			}
		}
		values[0] = CStringGetTextDatum(name);
		values[1] = Int32GetDatum(r.applied);
		values[2] = Int64GetDatum(r.owner->position);
		values[3] = BoolGetDatum(r.owner->quarantined);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	store_finish();
	return (Datum) 0;
}

Datum
lake_release_owner(PG_FUNCTION_ARGS)
{
	char	   *name;
	OwnerReplay r;

	lake_require_preload();
	name = lake_arg_short_name(fcinfo, 0, "owner");
	access_require_admin(fcinfo);
	checkpoint_require_own_transaction("lake.release_owner()");
	cycle_require_no_cut("lake.release_owner()");
	seal_wait_ready();

	store_connect();
	seal_lock_live();
	open_owner(name, &r);
	if (!r.owner->quarantined)
	{
		store_finish();
		ereport(NOTICE,
				(errmsg("owner \"%s\" is not quarantined", name)));
		PG_RETURN_VOID();
	}
	keep_for_abort(r.owner);	/* before: the replay may fail */
	if (r.lc != NULL)
		replay_owner(&r);
	if (r.why != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_LAKE_OWNER_QUARANTINED),
				 errmsg("owner \"%s\" still cannot be recovered", name),
				 errdetail("Its recovery stopped at position " INT64_FORMAT ": %s.", r.owner->position, r.why),
				 errhint("Fix the cause (the lifecycle, or the damaged data) and release it again.")));
	store_owner_set_quarantine(r.owner->id, 0, NULL);
	until_xact_end(&releasing, r.owner);
	store_finish();
	ereport(NOTICE,
			(errmsg_plural("owner \"%s\" released at position " INT64_FORMAT " (%d landing applied)",
						   "owner \"%s\" released at position " INT64_FORMAT " (%d landings applied)",
						   r.applied, name, r.owner->position, r.applied)));
	until_xact_end(&release_lines,
				   MemoryContextStrdup(TopTransactionContext,
									   psprintf("lake: owner \"%s\" released from quarantine at position " INT64_FORMAT " by role \"%s\"",
												name, r.owner->position,
												GetUserNameFromId(GetUserId(), false))));
	PG_RETURN_VOID();
}

/*
 * lake.rebuild_owner_index(): the owner index is derived data, written by
 * the seals from the cycles' owner lists. After damage to it (a trajectory
 * refused with XX001 naming the owner index), an administrator rewrites it
 * from the same lists while the seals go on.
 */
Datum
lake_rebuild_owner_index(PG_FUNCTION_ARGS)
{
	int64		rows;

	lake_require_preload();
	access_require_admin(fcinfo);
	checkpoint_require_own_transaction("lake.rebuild_owner_index()");
	seal_wait_ready();

	store_connect();
	rows = seal_rebuild_owner_index();
	store_finish();
	PG_RETURN_INT64(rows);
}
