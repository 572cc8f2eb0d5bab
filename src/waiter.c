/*
 * waiter.c — per-waiter wake-ups for durable receipts.
 *
 * Design (after SyncRepWaitForLSN / SyncRepWakeQueue):
 *   - Every backend has one slot, by BackendId. A waiting session links
 *     its slot into a queue kept in receipt order (epoch, seq) under the
 *     "lake waiters" LWLock — a lock of its own, so waiters never contend
 *     with casts on the cycle lock — and sleeps on its own latch.
 *   - A seal, after cycle_apply_seal made its receipts settled, walks the
 *     queue from its front while the receipts are covered: fills in each
 *     coordinate, unlinks the slot, marks it done and sets that latch.
 *     Receipts above the cycle stay queued and are not woken.
 *   - No wake-up is lost: a session queues itself first and only then asks
 *     whether its receipt is already settled; a seal settles first and only
 *     then walks the queue. Either the seal finds the slot, or the session
 *     sees the receipt settled and reads its coordinate from the log.
 *   - The session that leaves the wait (done, timeout, error, cancel, or
 *     FATAL through before_shmem_exit) unlinks its slot if it is still
 *     queued: no entry outlives its wait.
 */
#include "lake.h"

#include "catalog/namespace.h"
#include "cycle.h"
#include "guc.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/lsyscache.h"
#include "utils/wait_event.h"
#include "waiter.h"

typedef struct WaiterSlot
{
	dlist_node	node;			/* in the queue while 'queued' */
	Latch	   *latch;
	int32		epoch;
	int64		seq;
	bool		queued;
	bool		done;			/* the fields below are filled in */
	int64		cycle;
	int64		position;
	XLogRecPtr	lsn;
} WaiterSlot;

typedef struct WaiterShared
{
	LWLock		lock;
	int			tranche;
	dlist_head	queue;			/* receipt order */
	pg_atomic_uint32 count;		/* slots queued */
	WaiterSlot	slots[FLEXIBLE_ARRAY_MEMBER];	/* MaxBackends + 1, by BackendId */
} WaiterShared;

static WaiterShared *wq = NULL;
static bool exit_hook_set = false;

static Size
waiter_size(void)
{
	return add_size(offsetof(WaiterShared, slots),
					mul_size(sizeof(WaiterSlot), MaxBackends + 1));
}

void
waiter_shmem_request(void)
{
	RequestAddinShmemSpace(MAXALIGN(waiter_size()));
}

void
waiter_shmem_startup(void)
{
	bool		found;

	wq = ShmemInitStruct("lake waiters", waiter_size(), &found);
	if (!found)
	{
		memset(wq, 0, waiter_size());
		wq->tranche = LWLockNewTrancheId();
		LWLockInitialize(&wq->lock, wq->tranche);
		dlist_init(&wq->queue);
		pg_atomic_init_u32(&wq->count, 0);
	}
	LWLockRegisterTranche(wq->tranche, "lake waiters");
}

bool
waiter_any(void)
{
	return pg_atomic_read_u32(&wq->count) > 0;
}

uint32
waiter_count(void)
{
	return pg_atomic_read_u32(&wq->count);
}

static bool
receipt_after(const WaiterSlot *w, int32 epoch, int64 seq)
{
	return w->epoch > epoch || (w->epoch == epoch && w->seq > seq);
}

/* Link this backend's slot into the queue at its receipt's place. */
static void
enqueue(WaiterSlot *slot, int32 epoch, int64 seq)
{
	dlist_iter	iter;
	dlist_node *after = NULL;

	LWLockAcquire(&wq->lock, LW_EXCLUSIVE);
	slot->latch = MyLatch;
	slot->epoch = epoch;
	slot->seq = seq;
	slot->done = false;
	/* From the back: sessions mostly wait for the newest receipts. */
	dlist_reverse_foreach(iter, &wq->queue)
	{
		WaiterSlot *w = dlist_container(WaiterSlot, node, iter.cur);

		if (!receipt_after(w, epoch, seq))
		{
			after = iter.cur;
			break;
		}
	}
	if (after != NULL)
		dlist_insert_after(after, &slot->node);
	else
		dlist_push_head(&wq->queue, &slot->node);
	slot->queued = true;
	pg_atomic_fetch_add_u32(&wq->count, 1);
	LWLockRelease(&wq->lock);
}

/* Unlink this backend's slot if a seal has not already done so. */
static void
dequeue(int code, Datum arg)
{
	WaiterSlot *slot = &wq->slots[MyBackendId];

	LWLockAcquire(&wq->lock, LW_EXCLUSIVE);
	if (slot->queued)
	{
		dlist_delete(&slot->node);
		slot->queued = false;
		pg_atomic_fetch_sub_u32(&wq->count, 1);
	}
	LWLockRelease(&wq->lock);
}

/*
 * Does another session wait for a lock on lake's tables or objects that
 * this transaction holds? A waiter sleeps on its latch, where the deadlock
 * detector cannot see it: a DROP EXTENSION or other DDL queued behind its
 * locks may be what keeps its seal from being written. Locks on anything
 * else (an application's rows, advisory locks) never hold a seal back and
 * are not looked at. Asked at the 1 s ticks of a wait only, over this
 * backend's own locks: a weak relation lock taken by the fast path is in
 * that list once a conflicting request has moved it there to wait.
 */
static bool
blocking_another(void)
{
	Oid			lake_data = get_namespace_oid(LAKE_DATA_SCHEMA, true);
	int			cap = 16;
	int			nwanted = 0;
	LOCKTAG    *wanted;
	bool		blocking = false;

	if (!OidIsValid(lake_data))
		return false;
	/* Every contended lock: a bounded list would miss lake's among an application's. */
	wanted = palloc(cap * sizeof(LOCKTAG));
	for (int partition = 0; partition < NUM_LOCK_PARTITIONS; partition++)
	{
		SHM_QUEUE  *mine = &MyProc->myProcLocks[partition];
		PROCLOCK   *proclock;

		LWLockAcquire(LockHashPartitionLockByIndex(partition), LW_SHARED);
		for (proclock = (PROCLOCK *) SHMQueueNext(mine, mine, offsetof(PROCLOCK, procLink));
			 proclock != NULL;
			 proclock = (PROCLOCK *) SHMQueueNext(mine, &proclock->procLink,
												  offsetof(PROCLOCK, procLink)))
		{
			LOCK	   *lock = proclock->tag.myLock;
			LockMethod	method = GetLockTagsMethodTable(&lock->tag);

			if (lock->waitMask == 0 || lock->tag.locktag_field1 != MyDatabaseId ||
				(lock->tag.locktag_type != LOCKTAG_RELATION &&
				 lock->tag.locktag_type != LOCKTAG_OBJECT))
				continue;
			for (LOCKMODE mode = 1; mode <= method->numLockModes; mode++)
				if ((lock->waitMask & LOCKBIT_ON(mode)) &&
					(method->conflictTab[mode] & proclock->holdMask))
				{
					if (nwanted == cap)
					{
						cap *= 2;
						wanted = repalloc(wanted, cap * sizeof(LOCKTAG));
					}
					wanted[nwanted++] = lock->tag;
					break;
				}
		}
		LWLockRelease(LockHashPartitionLockByIndex(partition));
	}
	/*
	 * Catalog lookups only now, with no partition lock held: a relation's
	 * OID or an object lock's class (lake's dataset, stage, owner-creation
	 * and sealing locks are keyed by a lake_data table) is field2 either way.
	 */
	for (int i = 0; i < nwanted && !blocking; i++)
		blocking = get_rel_namespace((Oid) wanted[i].locktag_field2) == lake_data;
	pfree(wanted);
	return blocking;
}

/* The stretch of failing seals a waiter saw, and when it first saw it. */
typedef struct FailingSeen
{
	TimestampTz since;			/* cycle_seal_failing's, 0: none */
	TimestampTz seen_at;
} FailingSeen;

/*
 * A wait with no deadline of its own (cast_durable, await_durable without
 * timeout_ms) ends in the error of the worker's failing seals (a full
 * disk: 53100) once they have failed twice or more in a row (a retry
 * failed too) and for lake.admission_queue_wait since this waiter saw
 * them fail: such a cause is told, not waited out. The cast stays accepted.
 */
static void
give_up_if_seals_fail(int32 epoch, int64 seq, TimestampTz now, FailingSeen *seen)
{
	int			failures;
	int			code;
	char		why[256];
	bool		told;
	TimestampTz since = cycle_seal_failing(&failures, &code, why, sizeof(why));

	if (since == 0)
	{
		seen->since = 0;
		return;
	}
	/* A new stretch, or a clock set back: count from now. */
	if (since != seen->since || now < seen->seen_at)
	{
		seen->since = since;
		seen->seen_at = now;
		return;
	}
	if (failures < 2 || now - seen->seen_at < (TimestampTz) lake_admission_queue_wait_ms * 1000)
		return;
	/*
	 * The seal's own SQLSTATE where its class names the cause (53: a full
	 * disk, out of memory; 58: an I/O error; XX: damage); any other (a
	 * class 40 would have drivers retry, casting again) is 55000.
	 */
	told = ERRCODE_TO_CATEGORY(code) == ERRCODE_TO_CATEGORY(ERRCODE_DISK_FULL) ||
		ERRCODE_TO_CATEGORY(code) == ERRCODE_TO_CATEGORY(ERRCODE_SYSTEM_ERROR) ||
		ERRCODE_TO_CATEGORY(code) == ERRCODE_TO_CATEGORY(ERRCODE_INTERNAL_ERROR);
	ereport(ERROR,
			(errcode(told ? code : ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("receipt (%d," INT64_FORMAT ") is not durable yet: the lake worker's seals keep failing",
					epoch, seq),
			 errdetail("The last seal failed with SQLSTATE %s: %s", unpack_sql_state(code), why),
			 errhint("The cast stays accepted and is sealed once the cause is removed (the server log says more): await its receipt again.")));
}

WaitResult
waiter_wait(int32 epoch, int64 seq, TimestampTz deadline, LogReceipt *out)
{
	WaiterSlot *slot = &wq->slots[MyBackendId];
	WaitResult	result = WAIT_TIMEOUT;
	FailingSeen failing = {0};

	if (!exit_hook_set)
	{
		/* A FATAL exit does not unwind PG_FINALLY: unlink there too. */
		before_shmem_exit(dequeue, (Datum) 0);
		exit_hook_set = true;
	}
	enqueue(slot, epoch, seq);
	PG_TRY();
	{
		TimestampTz next_tick;

		/*
		 * Waiters must not pay the interval: the worker seals now. Not for
		 * a look with no time left (timeout 0): it does not wait for that
		 * seal, and a caller polling so must not cut a cycle per poll.
		 */
		if (deadline == 0 || GetCurrentTimestamp() < deadline)
			cycle_wake_worker();
		next_tick = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 1000);
		for (;;)
		{
			TimestampTz now;
			long		left;

			ResetLatch(MyLatch);
			if (slot->done)
			{
				pg_read_barrier();	/* the coordinate was written before 'done' */
				out->cycle = slot->cycle;
				out->position = slot->position;
				out->lsn = slot->lsn;
				result = WAIT_DURABLE;
				break;
			}
			if (cycle_receipt_settled(epoch, seq))
			{
				result = WAIT_HISTORY;
				break;
			}
			now = GetCurrentTimestamp();
			if (deadline != 0 && now >= deadline)
				break;

			/*
			 * Once a second, whatever woke us meanwhile (a NOTIFY, a
			 * barrier: a latch set more often must not put the tick off):
			 * a dropped extension is noticed, and so is a session waiting
			 * for a lock this transaction holds. The tick is also a safety
			 * net: an epoch that ended while we slept is announced by
			 * waiter_wake_all too. A clock set back restarts it.
			 */
			if (now >= next_tick || next_tick - now > 1000 * (TimestampTz) 1000)
			{
				if (now >= next_tick)
				{
					if (cycle_incarnation_gone())
					{
						result = WAIT_GONE;
						break;
					}
					if (blocking_another())
					{
						result = WAIT_BLOCKING;
						break;
					}
					if (deadline == 0)
						give_up_if_seals_fail(epoch, seq, now, &failing);
				}
				next_tick = TimestampTzPlusMilliseconds(now, 1000);
				/* The tick's catalog reads may have waited on a lock, taking a seal's wake-up: look again. */
				continue;
			}
			left = TimestampDifferenceMilliseconds(now, next_tick);
			if (deadline != 0)
				left = Min(left, TimestampDifferenceMilliseconds(now, deadline));
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 Max(left, 1), PG_WAIT_EXTENSION);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_FINALLY();
	{
		dequeue(0, (Datum) 0);
	}
	PG_END_TRY();
	return result;
}

void
waiter_release(int32 epoch, int64 first_seq, int64 last_seq,
			   int64 cycle, const int64 *positions, XLogRecPtr lsn)
{
	dlist_mutable_iter iter;

	if (pg_atomic_read_u32(&wq->count) == 0)
		return;
	LWLockAcquire(&wq->lock, LW_EXCLUSIVE);
	dlist_foreach_modify(iter, &wq->queue)
	{
		WaiterSlot *w = dlist_container(WaiterSlot, node, iter.cur);

		if (receipt_after(w, epoch, last_seq))
			break;				/* this and every later one wait on */
		if (w->epoch == epoch && w->seq >= first_seq)
		{
			w->cycle = cycle;
			w->position = positions[w->seq - first_seq];
			w->lsn = lsn;
			pg_write_barrier();
			w->done = true;
		}
		/* Older receipts (not ours) were settled earlier: wake them too. */
		dlist_delete(&w->node);
		w->queued = false;
		pg_atomic_fetch_sub_u32(&wq->count, 1);
		SetLatch(w->latch);
	}
	LWLockRelease(&wq->lock);
}

void
waiter_wake_all(void)
{
	dlist_iter	iter;

	LWLockAcquire(&wq->lock, LW_SHARED);
	dlist_foreach(iter, &wq->queue)
		SetLatch(dlist_container(WaiterSlot, node, iter.cur)->latch);
	LWLockRelease(&wq->lock);
}
