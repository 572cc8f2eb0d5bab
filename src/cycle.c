/*
 * cycle.c — the open cycle in shared memory: the ring of accepted casts,
 * the owners' live states, and the hand-over with recovery.
 *
 * Design:
 *   - One LWLock ("lake cycle") covers the ring buffer of accepted casts
 *     and the owner table. A cast validates against its owner's projected
 *     state, appends its record and advances the projection in one short
 *     critical section: no heavyweight lock and no catalog access on the
 *     way (lifecycles come from the backend's cache).
 *   - Ring offsets only grow; a record never straddles the end of the ring
 *     (a zero-length marker sends readers back to the start).
 *   - Sealers (holding the sealing lock, seal.c) cut a prefix and write it;
 *     publish.c applies what the commit makes true (cycle_apply_seal) only
 *     at COMMIT and gives the cut back (cycle_uncut) at ABORT, so a failed
 *     seal loses nothing and a receipt is never reported durable early.
 *     Waiting sessions are waiter.c's; the SQL entry points are cast.c's.
 *   - Receipts are (epoch, seq): seq restarts with every writer epoch, and
 *     the epoch grows durably at every recovery.
 */
#include "lake.h"

#include <sys/mman.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "access.h"
#include "args.h"
#include "catalog/namespace.h"
#include "commands/trigger.h"
#include "cycle.h"
#include "guc.h"
#include "landing.h"
#include "lifecycle.h"
#include "logread.h"
#include "miscadmin.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "store_owner.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

/*
 * Pending cast bytes of a role, for lake.role_max_pending_cast_bytes:
 * counted for every role, since a session without the cap (one that logged
 * in before it was set) casts for the role all the same.
 */
typedef struct RoleBytes
{
	Oid			role;
	int64		bytes;
} RoleBytes;

/* The record of receipt 'seq' of this epoch lies at ring offset 'off'. */
typedef struct RingAnchor
{
	int64		seq;
	uint64		off;
} RingAnchor;

typedef struct CycleShared
{
	LWLock		lock;
	int			tranche;
	/* recovery */
	bool		ready;
	LakeGeneration generation;	/* the installation the state belongs to */
	uint64		owner_table;	/* bumped when recovery empties the owner table */
	char		recovery_failure[256];	/* why the last attempt failed, or "" */
	/* the worker's seals failing one after another (cycle_seal_failed) */
	TimestampTz seal_failing_since;	/* 0: the last seal did not fail */
	int			seal_failures;	/* failed seals since then */
	int			seal_failure_code;	/* the last one's SQLSTATE and message */
	char		seal_failure[256];
	/* a committed seal left unpublished (cycle_seal_unpublished), or 0 */
	int64		unpublished_cycle;
	int			unpublished_casts;
	int32		epoch;
	Latch	   *worker_latch;
	/* the ring */
	uint64		capacity;
	uint64		head;			/* oldest record not yet sealed */
	uint64		tail;			/* where the next record goes */
	int64		pending;		/* records in [head, tail) */
	int64		next_seq;		/* last seq issued in this epoch */
	int64		sealed_seq;		/* every seq <= this is durable */
	int64		sealed_cycle;
	pg_atomic_uint64 lifecycle_changes;	/* committed edits of lake_data.lifecycle */
	pg_atomic_uint64 space_misses;	/* casts that found the ring full, ever */
	pg_atomic_uint64 misses_answered;	/* space_misses when a seal last freed the ring */
	uint64		room_freed;		/* seals and recoveries that freed ring room or role bytes */
	ConditionVariable space_cv;
	ConditionVariable ready_cv;
	/* figures for lake.stats() */
	CycleStats	stats;
	RoleBytes  *role_bytes;		/* MaxBackends entries */
	int			nrole_bytes;	/* entries in use */
	RingAnchor *anchors;		/* nanchors entries */
	uint64		nanchors;
	char	   *ring;
} CycleShared;

static CycleShared *cs = NULL;

static bool prefaulted = false;
static bool recover_at_commit = false;	/* this transaction edited lifecycles or the writer */
static SubTransactionId recover_subxact;	/* the one whose abort undoes the edit */
static uint64 seen_lifecycle_changes = 0;

static bool wait_open(LakeGeneration generation, TimestampTz deadline);
static void prefault_ring(void);
static bool cut_active = false;	/* this backend holds a cut not yet sealed */
static LakeGeneration seen_generation = 0;

static Size
role_bytes_size(void)
{
	return MAXALIGN(sizeof(RoleBytes) * MaxBackends);
}

/*
 * Anchors: where every ANCHOR_EVERY-th receipt's record lies, so a pending
 * receipt is found by scanning fewer than that many records, not the ring
 * from its head, under the cycle lock. Enough
 * anchors for every record the ring can hold, plus the partial ones at
 * both ends, so no live anchor is ever overwritten.
 */
#define ANCHOR_EVERY 64

static uint64
anchor_count(void)
{
	return MAXALIGN_DOWN(lake_cycle_buffer_size) / MAXALIGN(offsetof(CastRecord, data)) /
		ANCHOR_EVERY + 2;
}

static Size
anchors_size(void)
{
	return MAXALIGN(mul_size(sizeof(RingAnchor), anchor_count()));
}

static Size
cycle_shmem_size(void)
{
	return MAXALIGN(sizeof(CycleShared)) + role_bytes_size() + anchors_size() +
		MAXALIGN(lake_cycle_buffer_size);
}

void
cycle_shmem_request(void)
{
	RequestAddinShmemSpace(cycle_shmem_size());
	owner_shmem_request();
}

void
cycle_shmem_startup(void)
{
	bool		found;

	cs = ShmemInitStruct("lake cycle", cycle_shmem_size(), &found);
	if (!found)
	{
		memset(cs, 0, sizeof(CycleShared));
		cs->tranche = LWLockNewTrancheId();
		LWLockInitialize(&cs->lock, cs->tranche);
		cs->capacity = MAXALIGN_DOWN(lake_cycle_buffer_size);
		pg_atomic_init_u64(&cs->lifecycle_changes, 0);
		pg_atomic_init_u64(&cs->space_misses, 0);
		pg_atomic_init_u64(&cs->misses_answered, 0);
		ConditionVariableInit(&cs->space_cv);
		ConditionVariableInit(&cs->ready_cv);
		cs->role_bytes = (RoleBytes *) ((char *) cs + MAXALIGN(sizeof(CycleShared)));
		memset(cs->role_bytes, 0, role_bytes_size());
		cs->anchors = (RingAnchor *) ((char *) cs->role_bytes + role_bytes_size());
		cs->nanchors = anchor_count();
		memset(cs->anchors, 0, sizeof(RingAnchor) * cs->nanchors);
		cs->ring = (char *) cs->anchors + anchors_size();
	}
	LWLockRegisterTranche(cs->tranche, "lake cycle");
	owner_shmem_startup();
}

LWLock *
cycle_lock(void)
{
	return &cs->lock;
}

int64
cycle_pending(void)
{
	return cs->pending;
}

bool
cycle_space_wanted(void)
{
	return pg_atomic_read_u64(&cs->space_misses) != pg_atomic_read_u64(&cs->misses_answered);
}

void
cycle_set_worker_latch(Latch *latch)
{
	if (latch != NULL && !prefaulted)
		prefault_ring();
	cs->worker_latch = latch;
}

void
cycle_wake_worker(void)
{
	Latch	   *latch = cs->worker_latch;

	if (latch != NULL)
		SetLatch(latch);
}

void
cycle_stats(CycleStats *out)
{
	LWLockAcquire(&cs->lock, LW_SHARED);
	*out = cs->stats;
	out->epoch = cs->epoch;
	out->pending = cs->pending;
	out->sealed_cycle = cs->sealed_cycle;
	LWLockRelease(&cs->lock);
}

/* ----------------------------------------------------------------------
 * Recovery hand-over
 * ---------------------------------------------------------------------- */

static LakeGeneration
current_generation(void)
{
	Oid			nsp = get_namespace_oid(LAKE_DATA_SCHEMA, true);
	Oid			owners = OidIsValid(nsp) ? get_relname_relid("owner", nsp) : InvalidOid;

	return OidIsValid(owners) ? ((uint64) MyDatabaseId << 32) | owners : 0;
}

/* Are the live states recovered, and of the installation of 'generation'? */
static inline bool
serving(LakeGeneration generation)
{
	return cs->ready && cs->generation == generation;
}

bool
cycle_needs_recovery(LakeGeneration generation)
{
	return !serving(generation);
}

/* Do the live states (and pending casts) belong to this incarnation? */
bool
cycle_serves(LakeGeneration generation)
{
	return cs->generation == generation;
}

/* Close the door: casts wait from now until cycle_finish_recovery. */
void
cycle_close(void)
{
	LWLockAcquire(&cs->lock, LW_EXCLUSIVE);
	cs->ready = false;
	LWLockRelease(&cs->lock);
}

/* Whether a cast accepted into the ring still copies its payload (lock held). */
static bool
copy_in_flight(void)
{
	for (uint64 off = cs->head; off < cs->tail;)
	{
		CastRecord *r = cycle_record(off);

		if (r->len != 0 && !r->ready)
			return true;
		off = cycle_next(r, off);
	}
	return false;
}

/*
 * Forget every live state and pending cast: recovery rebuilds them. The
 * ring is emptied only once no cast accepted before the door closed is
 * still copying its payload (outside the lock): its copy would land in
 * space handed to a new cast. No error comes between a cast's reservation
 * and its 'ready', so the wait ends.
 */
void
cycle_begin_recovery(void)
{
	for (;;)
	{
		LWLockAcquire(&cs->lock, LW_EXCLUSIVE);
		cs->ready = false;
		if (!copy_in_flight())
			break;
		LWLockRelease(&cs->lock);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	cs->recovery_failure[0] = '\0';
	cs->seal_failing_since = 0;
	cs->unpublished_cycle = 0;
	owner_clear_all();
	cs->owner_table++;			/* every OwnerState pointer held is void now */
	cs->head = cs->tail = 0;
	memset(cs->anchors, 0, sizeof(RingAnchor) * cs->nanchors);	/* into the emptied ring */
	cs->pending = 0;
	cs->nrole_bytes = 0;
	cs->room_freed++;
	LWLockRelease(&cs->lock);
	ConditionVariableBroadcast(&cs->space_cv);
}

void
cycle_finish_recovery(int32 epoch, LakeGeneration generation, int64 sealed_cycle,
					  const RecoveryFigures *figures, uint64 lifecycle_changes)
{
	LWLockAcquire(&cs->lock, LW_EXCLUSIVE);
	/*
	 * The receipt counters change with the epoch, not before: until then a
	 * receipt the drain before the recovery sealed is still judged sealed.
	 */
	cs->epoch = epoch;
	cs->next_seq = 0;
	cs->sealed_seq = 0;
	cs->generation = generation;
	cs->sealed_cycle = sealed_cycle;
	cs->stats.recovery = *figures;
	/* Open only if no lifecycle edit committed since the recovery began. */
	cs->ready = pg_atomic_read_u64(&cs->lifecycle_changes) == lifecycle_changes;
	LWLockRelease(&cs->lock);
	ConditionVariableBroadcast(&cs->ready_cv);
}

/*
 * The worker's recovery failed (it retries): sessions waiting for it are
 * told why instead of waiting on ("": nothing to tell, they wait on).
 */
void
cycle_recovery_failed(const char *why)
{
	LWLockAcquire(&cs->lock, LW_EXCLUSIVE);
	lake_copy_clipped(cs->recovery_failure, why, sizeof(cs->recovery_failure));
	LWLockRelease(&cs->lock);
	ConditionVariableBroadcast(&cs->ready_cv);
}

/*
 * The worker's seal failed, other than by giving up a lock wait (a full
 * disk, a damaged table), or did not fail (it sealed, or gave up a lock
 * wait, which is no failure that lasts): a waiter with no deadline of
 * its own is told why once seals have gone on failing (waiter_wait),
 * instead of waiting for as long as the cause lasts.
 */
void
cycle_seal_failed(int sqlerrcode, const char *why)
{
	LWLockAcquire(&cs->lock, LW_EXCLUSIVE);
	if (cs->seal_failing_since == 0)
	{
		cs->seal_failing_since = GetCurrentTimestamp();
		cs->seal_failures = 0;
	}
	cs->seal_failures++;
	cs->seal_failure_code = sqlerrcode;
	lake_copy_clipped(cs->seal_failure, why, sizeof(cs->seal_failure));
	LWLockRelease(&cs->lock);
}

void
cycle_seal_not_failing(void)
{
	/* Read unlocked: only the worker sets it (a recovery clears it too). */
	if (cs->seal_failing_since == 0)
		return;
	LWLockAcquire(&cs->lock, LW_EXCLUSIVE);
	cs->seal_failing_since = 0;
	LWLockRelease(&cs->lock);
}

TimestampTz
cycle_seal_failing(int *failures, int *sqlerrcode, char *why, size_t len)
{
	TimestampTz since;

	LWLockAcquire(&cs->lock, LW_SHARED);
	since = cs->seal_failing_since;
	*failures = cs->seal_failures;
	*sqlerrcode = cs->seal_failure_code;
	strlcpy(why, cs->seal_failure, len);
	LWLockRelease(&cs->lock);
	return since;
}

/*
 * A seal committed but was not published (a termination cut its commit's
 * wait for the synchronous standbys): its casts stay pending here while
 * the durable log holds them, so the next seal would be fenced out. The
 * live states are behind the log: the door closes (a cast accepted against
 * them now would be lost at the fence, as are those accepted while the seal
 * waited) and the worker recovers at once, answering the seal's casts from
 * the log.
 */
void
cycle_seal_unpublished(int64 cycle, int ncasts)
{
	LWLockAcquire(&cs->lock, LW_EXCLUSIVE);
	cs->unpublished_cycle = cycle;
	cs->unpublished_casts = ncasts;
	cs->ready = false;
	LWLockRelease(&cs->lock);
	cycle_wake_worker();
}

int64
cycle_unpublished(int *ncasts)
{
	int64		cycle;

	LWLockAcquire(&cs->lock, LW_SHARED);
	cycle = cs->unpublished_cycle;
	*ncasts = cycle > 0 ? cs->unpublished_casts : 0;
	LWLockRelease(&cs->lock);
	return cycle;
}

/*
 * Map the whole ring into this process's page tables once, so no page
 * fault ever happens while the cycle lock is held (a first touch inside
 * the critical section stalls every other caster). Best effort: kernels
 * before 5.14 lack MADV_POPULATE_WRITE and simply fault later.
 */
static void
prefault_ring(void)
{
#ifdef MADV_POPULATE_WRITE
	uintptr_t	page = (uintptr_t) sysconf(_SC_PAGESIZE);
	uintptr_t	start = (uintptr_t) cs->ring & ~(page - 1);
	uintptr_t	end = (uintptr_t) cs->ring + cs->capacity;

	(void) madvise((void *) start, end - start, MADV_POPULATE_WRITE);
#endif
	prefaulted = true;
}

/*
 * Sessions wait here until the worker has recovered the owners of this
 * incarnation of the extension: they never see a half-recovered owner.
 * The wait is bounded like every other wait in lake, by
 * lake.admission_queue_wait: a recovery that takes longer (a long tail, a
 * worker that is not running) is a 53000 the caller can retry, not a
 * session stuck for as long as it lasts.
 */
void
cycle_wait_ready(void)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   lake_admission_queue_wait_ms);

	if (!cycle_wait_ready_until(deadline))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("lake owners are not available yet: the worker has not recovered them"),
				 errdetail("They were not recovered within lake.admission_queue_wait (%d ms).",
						   lake_admission_queue_wait_ms),
				 errhint("Try again; lake.stats() shows worker_state \"recovering\" until it is done, and \"stopped\" while no worker runs (the server log says why: no slot left by max_worker_processes, a crash).")));
}

/* Did the worker's last recovery fail (it retries; lake.stats())? */
bool
cycle_recovery_failing(void)
{
	bool		failing;

	LWLockAcquire(&cs->lock, LW_SHARED);
	failing = cs->recovery_failure[0] != '\0';
	LWLockRelease(&cs->lock);
	return failing;
}

/* Are the owners of the installed extension recovered (lake.stats())? */
bool
cycle_is_ready(void)
{
	return serving(current_generation());
}

/*
 * With cs->lock held: are the live states open, and numbered by the
 * lifecycles this session's cache holds? The cache is emptied whenever an
 * edit is seen (cycle_wait_ready_until), and an edit moves the count as it
 * closes the door, under the lock.
 */
bool
cycle_owners_live(void)
{
	return cs->ready && pg_atomic_read_u64(&cs->lifecycle_changes) == seen_lifecycle_changes;
}

bool
cycle_owners_numbered(void)
{
	return pg_atomic_read_u64(&cs->lifecycle_changes) == seen_lifecycle_changes;
}

/* Forget the cached lifecycles: the caller reads them after every edit so far. */
void
cycle_lifecycles_reset(void)
{
	lifecycle_cache_reset();
	seen_lifecycle_changes = pg_atomic_read_u64(&cs->lifecycle_changes);
}

/*
 * The same, giving up at 'deadline': false if it passed first, for a
 * caller with a timeout of its own (await_durable).
 */
bool
cycle_wait_ready_until(TimestampTz deadline)
{
	LakeGeneration generation;

	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("lake owners are not available during recovery"),
				 errdetail("This server is a standby (or still replaying WAL); casts, seals and owner states need the primary."),
				 errhint("Sealed data can be read here with lake.trajectory, lake.log and lake.cycles.")));
	lake_require_served_database();
	if (!prefaulted)
		prefault_ring();
	if (recover_at_commit)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this transaction changed lake's lifecycles or writer epoch"),
				 errdetail("Owners are recovered under the change once it commits."),
				 errhint("Commit it first.")));
	generation = current_generation();
	for (;;)
	{
		uint64		changes;
		bool		open;

		/*
		 * The count, then the door: an edit closes the door before it moves
		 * the count, so a new count is never seen with the door still open
		 * from before it (no lock on this path, which every cast takes).
		 */
		changes = pg_atomic_read_u64(&cs->lifecycle_changes);
		pg_read_barrier();
		open = serving(generation);
		if (generation != seen_generation || changes != seen_lifecycle_changes)
		{
			lifecycle_cache_reset();

			/*
			 * Counted as seen only through an open door: before that, an
			 * edit counted may not be visible yet (its commit waits for a
			 * synchronous standby), and what this session caches meanwhile
			 * (create_owner, owner_state read lifecycles without waiting
			 * here) is the lifecycle before it. Reset again once open.
			 */
			if (open)
			{
				seen_generation = generation;
				seen_lifecycle_changes = changes;
			}
		}
		if (open)
			return true;
		if (!wait_open(generation, deadline))
			return false;
	}
}

/* Sleep until the door is open for 'generation'; false at the deadline. */
static bool
wait_open(LakeGeneration generation, TimestampTz deadline)
{
	ConditionVariablePrepareToSleep(&cs->ready_cv);
	while (!serving(generation))
	{
		char		why[sizeof(cs->recovery_failure)];
		long		sleep_ms = 1000;

		LWLockAcquire(&cs->lock, LW_SHARED);
		strlcpy(why, cs->recovery_failure, sizeof(why));
		LWLockRelease(&cs->lock);
		if (why[0] != '\0')
		{
			ConditionVariableCancelSleep();
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("lake owners are not available: the worker could not recover them"),
					 errdetail("The last recovery failed: %s.", why),
					 errhint("The worker retries every second; the server log has the whole error.")));
		}
		sleep_ms = Min(sleep_ms, TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline));
		if (sleep_ms <= 0)
		{
			ConditionVariableCancelSleep();
			return false;
		}
		cycle_wake_worker();
		ConditionVariableTimedSleep(&cs->ready_cv, sleep_ms, PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();
	return true;
}

/* ----------------------------------------------------------------------
 * The ring
 * ---------------------------------------------------------------------- */

CastRecord *
cycle_record(uint64 offset)
{
	return (CastRecord *) (cs->ring + offset % cs->capacity);
}

uint64
cycle_next(const CastRecord *r, uint64 offset)
{
	if (r->len == 0)			/* wrap marker: go back to the ring's start */
		return offset + (cs->capacity - offset % cs->capacity);
	return offset + r->len;
}

/* Room for a record of 'len' bytes at the tail (lock held): *at, or false. */
static bool
reserve(uint32 len, uint64 *at)
{
	uint64		phys = cs->tail % cs->capacity;
	uint64		skip = (phys + len > cs->capacity) ? cs->capacity - phys : 0;
	uint64		used = cs->tail - cs->head;

	if (used + skip + len > cs->capacity)
		return false;
	if (skip > 0)
	{
		((CastRecord *) (cs->ring + phys))->len = 0;
		cs->tail += skip;
	}
	*at = cs->tail;
	cs->tail += len;
	return true;
}

int64
cycle_sealed_cycle(void)
{
	return cs->sealed_cycle;
}

int64
cycle_sealed_head(void)
{
	LakeGeneration generation = current_generation();
	int64		head;

	LWLockAcquire(&cs->lock, LW_SHARED);
	head = serving(generation) ? cs->sealed_cycle : 0;
	LWLockRelease(&cs->lock);
	return head;
}

void
cycle_set_last_snapshot(int64 cycle)
{
	LWLockAcquire(&cs->lock, LW_EXCLUSIVE);
	cs->stats.last_snapshot = cycle;
	LWLockRelease(&cs->lock);
}

int64
cycle_last_snapshot(void)
{
	return cs->stats.last_snapshot;
}

LakeGeneration
cycle_current_generation(void)
{
	return current_generation();
}

/*
 * Is the incarnation whose casts are pending gone (the extension dropped,
 * or dropped and created again)? Its pending casts can never be sealed.
 */
bool
cycle_incarnation_gone(void)
{
	AcceptInvalidationMessages();
	return !cycle_serves(current_generation());
}

/* The largest payload a cast may carry: a quarter of the ring. */
uint32
cycle_max_payload(void)
{
	return cs->capacity / 4;
}

/* ----------------------------------------------------------------------
 * Casts
 * ---------------------------------------------------------------------- */

/*
 * The owner's entry, entered from the registry at its first use after
 * recovery; *lifecycle gets its lifecycle, loaded into this backend's cache.
 * The fast path (a live owner, its lifecycle and tenant cached) takes no
 * query.
 */
OwnerState *
cycle_owner_entry(const char *name, const Lifecycle **lifecycle, bool as_tenant,
				  char **why)
{
	OwnerState *o;
	int32		id = 0;
	int32		lc = 0;
	char		tenant[NAMEDATALEN];
	bool		full = false;
	MemoryContext caller_cxt;

	if (as_tenant)
		AcceptInvalidationMessages();	/* grant changes committed elsewhere */
	LWLockAcquire(&cs->lock, LW_SHARED);
	o = owner_find(name, owner_hash(name));
	if (o != NULL)
	{
		lc = o->lifecycle;
		strlcpy(tenant, o->tenant, NAMEDATALEN);
	}
	LWLockRelease(&cs->lock);
	if (o != NULL && (!as_tenant || access_tenant_cached(tenant)) &&
		(*lifecycle = lifecycle_cached(lc)) != NULL)
		return o;

	caller_cxt = CurrentMemoryContext;
	store_connect();
	if (o == NULL)
	{
		char	   *stored;
		bool		written_here;

		if (!store_owner_lookup(name, &id, &lc, &stored, &written_here))
			store_owner_missing(name);
		strlcpy(tenant, stored, NAMEDATALEN);
		if (as_tenant)
			access_require_owner(tenant, name);

		/*
		 * The live table outlives transactions: an owner entered from a row
		 * this transaction wrote would stay there after a rollback, and its
		 * name, free again, would lead another tenant's new owner to it.
		 */
		if (written_here)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("owner \"%s\" was created or changed in this transaction", name),
					 errdetail("Casts and owner states are not transactional: they would outlive a rollback of the owner."),
					 errhint("Commit the transaction first.")));
	}
	else if (as_tenant)
		access_require_owner(tenant, name);
	*lifecycle = why ? lifecycle_try_get(lc, why) : lifecycle_get(lc);
	/* The reason is made in the store's memory, which store_finish frees. */
	if (why != NULL && *lifecycle == NULL)
		*why = MemoryContextStrdup(caller_cxt, *why);
	store_finish();

	if (o == NULL)
	{
		LWLockAcquire(&cs->lock, LW_EXCLUSIVE);
		o = owner_enter(name, id, lc, tenant, &full);
		LWLockRelease(&cs->lock);
		if (full)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
					 errmsg("no room for owner \"%s\" in shared memory", name),
					 errdetail("All %d owner slots (lake.max_owners) are in use.", lake_max_owners),
					 errhint("Raise lake.max_owners and restart the server.")));
	}
	return o;
}

/*
 * Which filling of the owner table an OwnerState pointer belongs to:
 * recovery empties the table and enters the owners again, so a pointer
 * taken before that may name a freed entry or another owner. Read it
 * before cycle_owner_entry, and check it whenever the pointer is used
 * again after the lock was let go.
 */
uint64
cycle_owner_table(void)
{
	uint64		filling;

	LWLockAcquire(&cs->lock, LW_SHARED);
	filling = cs->owner_table;
	LWLockRelease(&cs->lock);
	return filling;
}

/*
 * A copy of *o, if the table is still the filling it came from and no
 * recovery is under way (it refills the table in place).
 */
bool
cycle_owner_copy(const OwnerState *o, uint64 filling, OwnerState *copy)
{
	bool		current;

	LWLockAcquire(&cs->lock, LW_SHARED);
	current = cycle_owners_live() && cs->owner_table == filling;
	if (current)
		*copy = *o;
	LWLockRelease(&cs->lock);
	return current;
}

/*
 * What the live table knows of owner 'id' (named 'name'): the durable
 * position it reached and a cycle at or after the one holding it. False
 * when the table has no entry for it, as on a standby.
 */
bool
cycle_owner_reached(const char *name, int32 id, int64 *position, int64 *cycle)
{
	uint32		hash = owner_hash(name);
	LakeGeneration generation = current_generation();
	OwnerState *o;
	bool		known;

	/* Only live states of this installation (ids restart with the extension). */
	LWLockAcquire(&cs->lock, LW_SHARED);
	o = owner_find(name, hash);
	known = serving(generation) && o != NULL && o->id == id;
	if (known)
	{
		*position = o->position;
		*cycle = o->position_cycle;
	}
	LWLockRelease(&cs->lock);
	return known;
}

/*
 * A pending idempotent cast of this owner with this operation id (lock
 * held). Only the owner's own pending records are visited, newest first,
 * through their back links: an owner with none pays nothing for a full
 * ring of others'. (A seal takes a prefix of the ring and the owner's
 * oldest records with it: its 'pending' newest are all still there.)
 */
static CastRecord *
pending_operation(const OwnerState *o, const char *operation_id)
{
	size_t		len = strlen(operation_id);
	uint64		off = o->last_off;

	for (int32 left = o->pending; left > 0; left--)
	{
		CastRecord *r = cycle_record(off);

		Assert(r->owner == o && off >= cs->head && off < cs->tail);
		if ((r->flags & LANDING_OPERATION) &&
			r->operation_len == len && memcmp(CAST_OPERATION(r), operation_id, len) == 0)
			return r;
		off -= r->owner_back;
	}
	return NULL;
}

static void
operation_conflict(const CastRequest *req)
{
	ereport(ERROR,
			(errcode(ERRCODE_LAKE_IDEMPOTENCY_CONFLICT),
			 errmsg("operation \"%s\" of owner \"%s\" was already cast with different content",
					req->operation_id, req->owner),
			 errhint("Use a new operation id for a new cast.")));
}

/*
 * Check a cast against its owner's projected state, with the cycle lock
 * held. A refusal lets the lock go first, what it names copied out: an
 * error is reported to the client (which may not be reading) and to the
 * log before the abort would release the lock, and no other session may
 * wait on that.
 */
static void
validate(const CastRequest *req, const OwnerState *o, const Lifecycle *lc,
		 int *from, int *to)
{
	if (o->quarantined)
	{
		char		reason[OWNER_REASON_LEN];
		int64		prefix = o->quarantine_position;

		strlcpy(reason, o->reason, sizeof(reason));
		LWLockRelease(&cs->lock);
		ereport(ERROR,
				(errcode(ERRCODE_LAKE_OWNER_QUARANTINED),
				 errmsg("owner \"%s\" is quarantined", req->owner),
				 errdetail("Its recovery stopped at position " INT64_FORMAT ": %s.", prefix, reason),
				 errhint("Fix the cause, then run lake.release_owner().")));
	}
	*from = *to = -1;
	if (req->from != NULL)
	{
		int			projected = o->projected_phase;

		*from = lifecycle_phase(lc, req->from, strlen(req->from));
		*to = lifecycle_phase(lc, req->to, strlen(req->to));
		if (!lifecycle_edge(lc, *from, *to))
		{
			LWLockRelease(&cs->lock);
			ereport(ERROR,
					(errcode(ERRCODE_LAKE_ILLEGAL_MOVE),
					 errmsg("move \"%s\" -> \"%s\" is not in the lifecycle of owner \"%s\"",
							req->from, req->to, req->owner)));
		}
		if (*from != projected)
		{
			LWLockRelease(&cs->lock);
			ereport(ERROR,
					(errcode(ERRCODE_LAKE_STALE_PHASE),
					 errmsg("owner \"%s\" is in phase \"%s\", not \"%s\"",
							req->owner, lc->phases[projected], req->from),
					 errdetail("Casts are checked against the phase after every cast already accepted.")));
		}
	}
	if (req->has_lap && req->expected_lap != o->projected_lap)
	{
		int64		lap = o->projected_lap;

		LWLockRelease(&cs->lock);
		ereport(ERROR,
				(errcode(ERRCODE_LAKE_LAP_MISMATCH),
				 errmsg("owner \"%s\" is in lap " INT64_FORMAT ", not " INT64_FORMAT,
						req->owner, lap, req->expected_lap)));
	}
	/*
	 * Positions, laps and cycles never wrap (2^63 casts: only forged states
	 * get here); a cast no seal could take is not accepted.
	 */
	if (o->position >= PG_INT64_MAX - o->pending ||
		(*from >= 0 && *to == lc->initial && o->projected_lap == PG_INT64_MAX))
	{
		LWLockRelease(&cs->lock);
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("owner \"%s\" has no position or lap number left", req->owner)));
	}
	if (cs->sealed_cycle == PG_INT64_MAX)
	{
		LWLockRelease(&cs->lock);
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("no cycle number is left for a cast to owner \"%s\"", req->owner)));
	}
}

/*
 * Write the record of an accepted cast at 'at' (lock held), all but its
 * payload: what a replay check compares is in place before the lock goes.
 * It is linked to the owner's previous pending cast (fewer bytes back than
 * the ring holds, at most 1 GB), and anchored if its receipt is a multiple
 * of ANCHOR_EVERY.
 */
static CastRecord *
write_record(uint64 at, uint32 len, const CastRequest *req, OwnerState *o,
			 int64 seq, int64 lap, int16 phase)
{
	CastRecord *r = cycle_record(at);
	char	   *p = r->data;

	r->owner_back = o->pending > 0 ? (uint32) (at - o->last_off) : 0;
	o->last_off = at;
	if (seq % ANCHOR_EVERY == 0)
	{
		RingAnchor *a = &cs->anchors[(seq / ANCHOR_EVERY) % cs->nanchors];

		a->seq = seq;
		a->off = at;
	}

	r->len = len;
	r->flags = (req->from ? LANDING_MOVE : 0) | (req->payload ? LANDING_PAYLOAD : 0) |
		(req->operation_id ? LANDING_OPERATION : 0);
	r->from_len = req->from ? strlen(req->from) : 0;
	r->to_len = req->to ? strlen(req->to) : 0;
	r->operation_len = req->operation_id ? strlen(req->operation_id) : 0;
	r->payload_len = req->payload ? VARSIZE_ANY_EXHDR(req->payload) : 0;
	r->owner_id = o->id;
	r->owner = o;
	r->seq = seq;
	r->lap = lap;
	r->phase = phase;
	memcpy(r->digest, req->digest, LAKE_DIGEST_LEN);
	r->ready = false;
	/* Absent names are NULL, which memcpy must not be given even for 0 bytes. */
	if (req->from)
		memcpy(p, req->from, r->from_len);
	if (req->to)
		memcpy(p + r->from_len, req->to, r->to_len);
	if (req->operation_id)
		memcpy(p + r->from_len + r->to_len, req->operation_id, r->operation_len);
	return r;
}

/*
 * The entry of 'role' (lock held); NULL when the table is full. It holds
 * one entry per role with pending bytes and is as large as the backend
 * count, but one session can cast as many roles.
 */
static RoleBytes *
role_bytes_entry(Oid role)
{
	RoleBytes  *e = NULL;

	for (int i = 0; i < cs->nrole_bytes; i++)
	{
		if (cs->role_bytes[i].role == role)
			e = &cs->role_bytes[i];
		else if (e == NULL && cs->role_bytes[i].bytes == 0)
			e = &cs->role_bytes[i]; /* left by a cast that was not accepted */
	}
	if (e != NULL && e->role != role)
	{
		e->role = role;
		e->bytes = 0;
	}
	if (e == NULL && cs->nrole_bytes < MaxBackends)
	{
		e = &cs->role_bytes[cs->nrole_bytes++];
		e->role = role;
		e->bytes = 0;
	}
	return e;
}

/*
 * Room under the caller's lake.role_max_pending_cast_bytes for a record of
 * 'len' bytes (lock held): its entry; NULL when the table is full (lock
 * still held: the caller waits for a seal to free it, as for ring space);
 * 53000 with the lock released when the role is over its cap.
 */
static RoleBytes *
role_bytes_room(Oid role, uint32 len)
{
	RoleBytes  *e = role_bytes_entry(role);

	if (e == NULL || e->bytes + len <= lake_role_max_pending_cast_bytes)
		return e;
	LWLockRelease(&cs->lock);
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
			 errmsg("role \"%s\" has reached lake.role_max_pending_cast_bytes (%d)",
					lake_role_name(role), lake_role_max_pending_cast_bytes),
			 errdetail("Its casts not yet sealed take " INT64_FORMAT " bytes; this one needs %u.",
					   e->bytes, len),
			 errhint("Retry once the next cycle is sealed, or ask a superuser to raise the role's cap.")));
	return NULL;				/* keep the compiler quiet */
}

/* A seal made records [start, end) durable: free their roles' bytes (lock held). */
static void
role_bytes_sealed(uint64 start, uint64 end)
{
	for (uint64 off = start; off < end && cs->nrole_bytes > 0;)
	{
		CastRecord *r = cycle_record(off);

		if (r->len != 0 && OidIsValid(r->role))
		{
			for (int i = 0; i < cs->nrole_bytes; i++)
			{
				RoleBytes  *e = &cs->role_bytes[i];

				if (e->role != r->role)
					continue;
				e->bytes -= r->len;
				if (e->bytes <= 0)
					*e = cs->role_bytes[--cs->nrole_bytes];
				break;
			}
		}
		off = cycle_next(r, off);
	}
}

/*
 * A cast found no room (the ring, or the roles' table): sleep until a seal
 * or a recovery frees some after the miss that read 'freed', and refuse at
 * the deadline. Between getting on the queue and each sleep only the
 * counter is read, under an LWLock: a wait on this process's latch there
 * (a lock wait in a catalog look-up) would take the wake-up, and a
 * broadcast takes the sleeper off the queue. The caller looks again from
 * the start.
 */
static void
wait_for_room(uint64 freed, TimestampTz deadline, bool roles_full, uint32 len)
{
	ConditionVariablePrepareToSleep(&cs->space_cv);
	for (;;)
	{
		uint64		now_freed;
		long		left;

		LWLockAcquire(&cs->lock, LW_SHARED);
		now_freed = cs->room_freed;
		LWLockRelease(&cs->lock);
		if (now_freed != freed)
			break;
		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if (left <= 0)
		{
			ConditionVariableCancelSleep();
			if (roles_full)
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
						 errmsg("too many roles have casts not yet sealed"),
						 errdetail("Role \"%s\" is capped by lake.role_max_pending_cast_bytes, whose bytes are counted for at most %d roles at once (one per server process slot); no seal freed one within %d ms.",
								   lake_role_name(GetSessionUserId()), MaxBackends,
								   lake_admission_queue_wait_ms),
						 errhint("Retry later.")));
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
					 errmsg("cycle buffer full"),
					 errdetail("No room for a %u-byte cast in lake.cycle_buffer_size within %d ms.",
							   len, lake_admission_queue_wait_ms),
					 errhint("Retry later, or raise lake.cycle_buffer_size.")));
		}
		(void) ConditionVariableTimedSleep(&cs->space_cv, left, PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();
}

/*
 * Accept a cast or answer its replay: returns its receipt's seq (the
 * epoch is the current one, or *epoch for a sealed replay).
 */
int64
cycle_accept(const CastRequest *req, int32 *epoch)
{
	const Lifecycle *lc = NULL;
	OwnerState *o = NULL;
	uint32		len = MAXALIGN(offsetof(CastRecord, data) +
							   (req->from ? strlen(req->from) + strlen(req->to) : 0) +
							   (req->operation_id ? strlen(req->operation_id) : 0) +
							   (req->payload ? VARSIZE_ANY_EXHDR(req->payload) : 0));
	TimestampTz deadline = 0;
	uint32		hash = owner_hash(req->owner);
	uint64		filling = 0;	/* of the owner table, when 'o' was found */
	/* Read before any lock: holding one holds interrupts off. */
	bool		interruptible = INTERRUPTS_CAN_BE_PROCESSED();

	/* Grant changes committed elsewhere reach the tenant cache first. */
	AcceptInvalidationMessages();
	for (;;)
	{
		int64		sealed_before = cs->sealed_cycle;
		uint64		at;
		int			from;
		int			to;
		int64		seq;
		int64		lap;
		int64		pending;
		CastRecord *r;
		RoleBytes  *counted;
		bool		roles_full = false;

		CHECK_FOR_INTERRUPTS();
		/* An idempotent cast already sealed answers from the history. */
		if (req->operation_id != NULL)
		{
			LogReceipt sealed;
			OwnerState	now;

			if (o == NULL)
			{
				filling = cycle_owner_table();
				o = cycle_owner_entry(req->owner, &lc, true, NULL);
			}
			if (!cycle_owner_copy(o, filling, &now))
			{
				o = NULL;		/* a recovery is under way or refilled the table */
				cycle_wait_ready();
				continue;
			}
			store_connect();
			if (log_find_operation(now.id, req->operation_id, cycle_live_epoch(), &sealed))
			{
				store_finish();
				if (memcmp(sealed.digest, req->digest, LAKE_DIGEST_LEN) != 0)
					operation_conflict(req);
				*epoch = sealed.epoch;
				return sealed.seq;
			}
			store_finish();
		}

		LWLockAcquire(&cs->lock, LW_EXCLUSIVE);
		if (!cycle_owners_live())
		{
			/* The worker is draining the ring before a recovery (or an
			 * edit renumbered what this session cached): wait. */
			LWLockRelease(&cs->lock);
			cycle_wait_ready();
			o = NULL;
			continue;
		}
		if (o != NULL && cs->owner_table != filling)
			o = NULL;			/* taken before a recovery refilled the table */
		if (o == NULL)
		{
			/*
			 * The common case: the owner is live, its lifecycle cached and
			 * its tenant known to be the caller's.
			 */
			o = owner_find(req->owner, hash);
			filling = cs->owner_table;
			lc = o ? lifecycle_cached(o->lifecycle) : NULL;
			if (lc == NULL || !access_tenant_cached(o->tenant))
			{
				LWLockRelease(&cs->lock);
				o = cycle_owner_entry(req->owner, &lc, true, NULL);
				continue;
			}
		}
		if (cs->sealed_cycle != sealed_before)
		{
			/* A seal landed meanwhile: the history may now hold it. */
			LWLockRelease(&cs->lock);
			continue;
		}
		if (req->operation_id != NULL)
		{
			CastRecord *queued = pending_operation(o, req->operation_id);

			if (queued != NULL)
			{
				bool		same = memcmp(queued->digest, req->digest, LAKE_DIGEST_LEN) == 0;

				seq = queued->seq;
				*epoch = cs->epoch;
				LWLockRelease(&cs->lock);
				if (!same)
					operation_conflict(req);
				return seq;
			}
		}
		/*
		 * A cancel or termination that came while this call waited for the
		 * lock (or looked up its operation) refuses it here, before it is
		 * accepted: raised after acceptance, the error would reach the
		 * client while its cast stays queued. (Called with interrupts held
		 * off, nothing would take them: the cast goes on.)
		 */
		if (interruptible && (QueryCancelPending || ProcDiePending))
		{
			LWLockRelease(&cs->lock);
			CHECK_FOR_INTERRUPTS();
			continue;
		}
		validate(req, o, lc, &from, &to);	/* a refusal lets the lock go */
		if (lake_role_max_pending_cast_bytes > 0)
			roles_full = (counted = role_bytes_room(GetSessionUserId(), len)) == NULL;
		else
			counted = role_bytes_entry(GetSessionUserId());	/* none when full */

		if (roles_full || !reserve(len, &at))
		{
			uint64		freed = cs->room_freed;

			LWLockRelease(&cs->lock);
			/*
			 * The worker seals early for it (a ring filled by large
			 * payloads, or the roles' table by many roles).
			 */
			pg_atomic_fetch_add_u64(&cs->space_misses, 1);
			cycle_wake_worker();
			if (deadline == 0)
				deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   lake_admission_queue_wait_ms);
			wait_for_room(freed, deadline, roles_full, len);
			continue;
		}

		seq = ++cs->next_seq;
		lap = o->projected_lap + ((req->from && to == lc->initial) ? 1 : 0);
		if (req->from)
			o->projected_phase = to;
		r = write_record(at, len, req, o, seq, lap, o->projected_phase);
		r->role = counted ? counted->role : InvalidOid;
		if (counted)
			counted->bytes += len;
		o->projected_lap = lap;
		o->pending++;
		pending = ++cs->pending;
		*epoch = cs->epoch;
		LWLockRelease(&cs->lock);

		/* The payload is copied outside the lock; sealers wait for 'ready'. */
		if (r->payload_len > 0)
			memcpy(CAST_PAYLOAD(r), VARDATA_ANY(req->payload), r->payload_len);
		pg_write_barrier();
		r->ready = true;

		/* The worker times the cycle from its first cast. */
		if (pending == 1 || pending >= lake_cycle_max_casts)
			cycle_wake_worker();
		return seq;
	}
}

uint64
cycle_lifecycle_changes(void)
{
	return pg_atomic_read_u64(&cs->lifecycle_changes);
}

void
cycle_recover_at_commit(void)
{
	if (cs == NULL || recover_at_commit)
		return;					/* set by this subtransaction or a parent */
	/* Nothing live belongs to another database (a copy, a stale install). */
	if (!lake_serves_this_database())
		return;
	recover_at_commit = true;
	recover_subxact = GetCurrentSubTransactionId();
}

bool
cycle_has_history(void)
{
	LakeGeneration generation;
	bool		history;

	if (cs == NULL)
		return false;			/* not preloaded: nothing live at all */
	generation = current_generation();	/* catalogs: before the lock */
	LWLockAcquire(&cs->lock, LW_SHARED);
	history = cs->generation == generation && cs->next_seq > 0;
	LWLockRelease(&cs->lock);
	return history;
}

/*
 * Every cache and every live owner must follow an edit. Live phases are
 * numbers into the lifecycles recovery loaded, and once the edit is
 * visible a session loads the edited ones: the door closes just before
 * the commit makes it visible, and only a recovery that began after the
 * edit reopens it (the editor holds the sealing lock, which recovery
 * takes, until its commit is complete). So no cast, owner state or
 * snapshot reads old numbers through new names.
 */
static void
cycle_xact_callback(XactEvent event, void *arg)
{
	if (!recover_at_commit)
		return;
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			/* Its sealing lock would stop every seal until it is resolved. */
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot PREPARE a transaction that changed lake's lifecycles or writer epoch"),
					 errhint("Commit or roll back the transaction instead of preparing it.")));
			break;
		case XACT_EVENT_PRE_COMMIT:
			/*
			 * The door first, then the count (the atomic add is a full
			 * barrier): cycle_wait_ready_until reads them the other way.
			 */
			LWLockAcquire(&cs->lock, LW_EXCLUSIVE);
			cs->ready = false;
			pg_atomic_fetch_add_u64(&cs->lifecycle_changes, 1);
			LWLockRelease(&cs->lock);
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
			if (event == XACT_EVENT_ABORT)
				lifecycle_cache_reset();	/* it may hold the rolled-back edit */
			cycle_wake_worker();	/* an abort after the close reopens too */
			recover_at_commit = false;
			break;
		default:
			break;
	}
}

/*
 * An edit rolled back to a savepoint is undone, and so is the sealing lock
 * its trigger took: nothing to recover for. A committed subtransaction's
 * edit belongs to its parent.
 */
static void
cycle_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	if (!recover_at_commit || mySubid != recover_subxact)
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		recover_at_commit = false;
		lifecycle_cache_reset();	/* it may hold the rolled-back edit */
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
		recover_subxact = parentSubid;
}

void
cycle_init(void)
{
	RegisterXactCallback(cycle_xact_callback, NULL);
	RegisterSubXactCallback(cycle_subxact_callback, NULL);
}

/* ----------------------------------------------------------------------
 * Receipts
 * ---------------------------------------------------------------------- */

/*
 * The pending record of receipt seq of this epoch, or NULL (lock held).
 * Receipts are numbered in ring order: the scan starts at the anchor below
 * seq if its record is still pending (else the head is less than
 * ANCHOR_EVERY records before seq), and stops at the first one past seq.
 */
static const CastRecord *
pending_receipt(int64 seq)
{
	uint64		from = cs->head;
	const RingAnchor *a = &cs->anchors[(seq / ANCHOR_EVERY) % cs->nanchors];

	if (a->seq == seq - seq % ANCHOR_EVERY && a->seq > 0 &&
		a->off >= cs->head && a->off < cs->tail)
		from = a->off;
	for (uint64 off = from; off < cs->tail;)
	{
		CastRecord *r = cycle_record(off);

		off = cycle_next(r, off);
		if (r->len == 0)
			continue;
		if (r->seq >= seq)
			return r->seq == seq ? r : NULL;
	}
	return NULL;
}

/*
 * Is receipt (epoch, seq) still in the ring? If so, *tenant (NAMEDATALEN)
 * gets its owner's tenant; if not, it is history: sealed, or lost with its
 * epoch. 22023 for a receipt that was never issued. While a recovery
 * rebuilds the ring (next_seq reset, the epoch not yet advanced) none of
 * this can be told: the caller waits for it and asks again.
 */
ReceiptState
cycle_receipt_state(int32 epoch, int64 seq, char *tenant)
{
	const CastRecord *r = NULL;

	LWLockAcquire(&cs->lock, LW_SHARED);
	/* A recovery has reset the counters its epoch is judged by. */
	if (!cs->ready)
	{
		LWLockRelease(&cs->lock);
		return RECEIPT_RECOVERING;
	}
	if (epoch == cs->epoch && seq > cs->next_seq)
	{
		LWLockRelease(&cs->lock);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("receipt (%d," INT64_FORMAT ") was never issued", epoch, seq)));
	}
	if (epoch > cs->epoch)
	{
		LWLockRelease(&cs->lock);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("receipt (%d," INT64_FORMAT ") is from an epoch that has not begun", epoch, seq)));
	}
	if (epoch == cs->epoch && seq > cs->sealed_seq)
		r = pending_receipt(seq);
	if (r != NULL)
		strlcpy(tenant, r->owner->tenant, NAMEDATALEN);
	LWLockRelease(&cs->lock);
	return r != NULL ? RECEIPT_PENDING : RECEIPT_HISTORY;
}

/* The live epoch and how far it is sealed, read together. */
static void
sealed_through(int32 *epoch, int64 *sealed_seq)
{
	LWLockAcquire(&cs->lock, LW_SHARED);
	*epoch = cs->epoch;
	*sealed_seq = cs->sealed_seq;
	LWLockRelease(&cs->lock);
}

/* Is receipt (epoch, seq) sealed, or lost with an epoch that ended? */
bool
cycle_receipt_settled(int32 epoch, int64 seq)
{
	int32		live;
	int64		sealed;

	sealed_through(&live, &sealed);
	return live != epoch || sealed >= seq;
}

bool
cycle_receipt_sealed(int32 epoch, int64 seq)
{
	int32		live;
	int64		sealed;

	sealed_through(&live, &sealed);
	return live == epoch && sealed >= seq;
}

int32
cycle_live_epoch(void)
{
	int32		live;
	int64		sealed;

	sealed_through(&live, &sealed);
	return live;
}

/* ----------------------------------------------------------------------
 * Sealing hand-over (seal.c holds the sealing lock around these)
 * ---------------------------------------------------------------------- */

/* Take up to max_casts pending records as the next cycle; false if none. */
bool
cycle_cut(CycleCut *cut, int max_casts)
{
	uint64		off;
	uint64		tail;

	/*
	 * Only a sealer frees records, and we are the sealer: what lies between
	 * head and the tail we saw stays put, and is walked without the lock.
	 */
	LWLockAcquire(&cs->lock, LW_SHARED);
	cut->start = cs->head;
	tail = cs->tail;
	cut->epoch = cs->epoch;
	LWLockRelease(&cs->lock);
	cut->ncasts = 0;
	cut->first_seq = cut->last_seq = 0;
	for (off = cut->start; off < tail && cut->ncasts < max_casts;)
	{
		CastRecord *r = cycle_record(off);

		if (r->len != 0 && !r->ready)
			break;				/* its payload is still being copied */
		off = cycle_next(r, off);
		if (r->len == 0)
			continue;
		if (cut->ncasts++ == 0)
			cut->first_seq = r->seq;
		cut->last_seq = r->seq;
	}
	pg_read_barrier();			/* payloads are read after their 'ready' */
	cut->end = off;
	cut_active = cut->ncasts > 0;
	return cut->ncasts > 0;
}

/* Whether this backend holds a cut its transaction has not committed yet. */
bool
cycle_cut_held(void)
{
	return cut_active;
}

/*
 * 55000 in the transaction that sealed a cycle (a DO block calling
 * lake.seal() at the top level): its cycle is in the log tables but
 * neither committed nor flushed, and the live states do not have it yet.
 * What reads the log (readers, on-demand recovery) would show or apply a
 * cycle the transaction's own error can still take away.
 */
void
cycle_require_no_cut(const char *what)
{
	if (cut_active)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s cannot run in the transaction that sealed a cycle", what),
				 errdetail("The cycle it sealed is not durable before this transaction commits."),
				 errhint("Run it in a transaction of its own.")));
}

/*
 * A seal's transaction aborted: the ring's head moves only at a seal's
 * commit, so its cut stays pending for the next seal; this transaction
 * just no longer holds one.
 */
void
cycle_uncut(void)
{
	cut_active = false;
}

/*
 * A seal committed: make its owners' states live, free its records and
 * advance the sealed head. No error may escape from here.
 */
void
cycle_apply_seal(const CycleCut *cut, int64 cycle,
				 const SealedOwner *owners, int nowners, double took_ms)
{
	LWLockAcquire(&cs->lock, LW_EXCLUSIVE);
	for (int i = 0; i < nowners; i++)
	{
		const SealedOwner *so = &owners[i];

		so->owner->phase = so->phase;
		so->owner->lap = so->lap;
		so->owner->position = so->position;
		so->owner->position_cycle = cycle;
		so->owner->pending -= so->count;
	}
	role_bytes_sealed(cs->head, cut->end);
	cs->head = cut->end;
	cs->pending -= cut->ncasts;
	cs->sealed_seq = cut->last_seq;
	cs->sealed_cycle = cycle;
	cs->stats.cycles_sealed++;
	cs->stats.casts_sealed += cut->ncasts;
	cs->stats.last_seal_ms = took_ms;

	/*
	 * The casts that found it full are woken to room, or gone: their misses
	 * are answered. Counted under the lock, before the room: a cast that
	 * misses even so has read the new room_freed after the lock, and so
	 * counts its miss after this, for the worker to seal early again.
	 */
	pg_atomic_write_u64(&cs->misses_answered, pg_atomic_read_u64(&cs->space_misses));
	cs->room_freed++;
	LWLockRelease(&cs->lock);
	cut_active = false;
	ConditionVariableBroadcast(&cs->space_cv);
}

