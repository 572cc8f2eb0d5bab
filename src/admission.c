/*
 * admission.c — lock-free append admission.
 *
 * Design: the slots in use and the bytes reserved live in ONE 64-bit atomic
 * word (slots in the high half, bytes in the low half; both limits fit in
 * 32 bits by the GUC rules). A permit is taken or grown by one
 * compare-and-swap of that word, so "one slot and a byte reservation, both
 * or neither" holds without any lock. Waiters sleep on a condition
 * variable with a deadline; a releaser signals only when the waiter count
 * says someone sleeps, so the uncontended path touches nothing but the
 * atomics.
 *
 * A permit is released once: at the end of its transaction, at the abort
 * of the subtransaction that took it, or at backend exit.
 *
 * Per-role permit caps (lake.role_max_appends) are counted without a lock
 * too: each backend names, in its own atomic entry, the role whose permit
 * it holds, and a capped take counts the entries naming its role (one
 * pass over MaxBackends entries, only for sessions whose cap is set). The
 * role is the session user, whose ALTER ROLE ... SET put the cap in force;
 * SET ROLE, lake's switch to its owner identity and SECURITY DEFINER
 * wrappers do not change it.
 *
 * The limits in force are published in shared memory too, by the worker at
 * each reload: every backend admits against the same ones at once, also a
 * session that has not read the new configuration yet (one inside a long
 * CALL). The worker keeps the previous (stream, buffered) pair when the new
 * one breaks max_buffered_bytes >= max_stream_bytes.
 */
#include "lake.h"

#include "access/xact.h"
#include "admission.h"
#include "args.h"
#include "funcapi.h"
#include "guc.h"
#include "hold.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "store.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#define SLOT_ONE	(UINT64CONST(1) << 32)
#define LOW32(x)	((uint32) ((x) & UINT64CONST(0xFFFFFFFF)))
#define HIGH32(x)	((uint32) ((x) >> 32))

typedef struct AdmissionShared
{
	pg_atomic_uint64 usage;		/* slots << 32 | bytes reserved */
	pg_atomic_uint64 limits;	/* max_stream_bytes << 32 | max_buffered_bytes */
	pg_atomic_uint32 max_concurrent;	/* lake.max_concurrent_appends */
	pg_atomic_uint32 sleepers;	/* backends sleeping on cv */
	pg_atomic_uint64 releases;	/* permits given back, ever */
	pg_atomic_uint64 admitted;
	pg_atomic_uint64 waited;
	pg_atomic_uint64 rejected;
	ConditionVariable cv;
	/* By BackendId: the capped role whose permit the backend holds, or 0. */
	pg_atomic_uint32 role_of[FLEXIBLE_ARRAY_MEMBER];
} AdmissionShared;

static AdmissionShared *adm = NULL;

/* This backend's permit. */
static bool held = false;
static uint32 held_bytes = 0;
static Oid	held_role = InvalidOid;	/* published in role_of[] */
static SubTransactionId held_subxact = InvalidSubTransactionId;	/* took it */
static bool exit_hook_set = false;
/* The call (store_call_serial) last counted in 'waited': a call counts once, however often it waits. */
static uint64 wait_counted_call = PG_UINT64_MAX;

/*
 * Bytes a subtransaction below the permit's own added to it: given back
 * when that subtransaction aborts, as the permit is with the one that took
 * it. Innermost last; in TopTransactionContext.
 */
typedef struct Growth
{
	SubTransactionId subid;
	uint32		before;			/* held_bytes before it grew */
} Growth;
static List *growths = NIL;

/*
 * The pair in force before the server started serving: what a crash
 * restart falls back on if the configuration has since been reloaded with
 * a bad pair.
 */
static uint64 start_limits = 0;

static uint64
pack_limits(void)
{
	return ((uint64) lake_max_stream_bytes << 32) | (uint32) lake_max_buffered_bytes;
}

static Size
admission_shmem_size(void)
{
	return add_size(offsetof(AdmissionShared, role_of),
					mul_size(MaxBackends + 1, sizeof(pg_atomic_uint32)));
}

void
admission_shmem_request(void)
{
	RequestAddinShmemSpace(MAXALIGN(admission_shmem_size()));
}

void
admission_shmem_startup(void)
{
	bool		found;

	adm = ShmemInitStruct("lake admission", admission_shmem_size(), &found);
	if (!found)
	{
		/*
		 * At a crash restart the configuration may hold a pair a reload
		 * refused; the pair validated at server start is then used.
		 */
		if (!lake_guc_byte_pair_valid())
			ereport(WARNING,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("lake.max_buffered_bytes (%d) is less than lake.max_stream_bytes (%d); using the pair in force at server start (lake.max_stream_bytes = %u, lake.max_buffered_bytes = %u)",
							lake_max_buffered_bytes, lake_max_stream_bytes,
							HIGH32(start_limits), LOW32(start_limits))));
		pg_atomic_init_u64(&adm->usage, 0);
		pg_atomic_init_u64(&adm->limits,
						   lake_guc_byte_pair_valid() ? pack_limits() : start_limits);
		pg_atomic_init_u32(&adm->max_concurrent, (uint32) lake_max_concurrent_appends);
		pg_atomic_init_u32(&adm->sleepers, 0);
		pg_atomic_init_u64(&adm->releases, 0);
		pg_atomic_init_u64(&adm->admitted, 0);
		pg_atomic_init_u64(&adm->waited, 0);
		pg_atomic_init_u64(&adm->rejected, 0);
		ConditionVariableInit(&adm->cv);
		for (int i = 0; i <= MaxBackends; i++)
			pg_atomic_init_u32(&adm->role_of[i], InvalidOid);
	}
}

bool
admission_shmem_ready(void)
{
	return adm != NULL;
}

uint32
admission_max_stream_bytes(void)
{
	return HIGH32(pg_atomic_read_u64(&adm->limits));
}

/*
 * Sleepers re-check against limits that may have been raised: a waiter
 * that now fits is not left to its deadline.
 */
void
admission_publish_limits(void)
{
	uint64		old = pg_atomic_read_u64(&adm->limits);
	bool		valid = lake_guc_byte_pair_valid();

	pg_atomic_write_u32(&adm->max_concurrent, (uint32) lake_max_concurrent_appends);
	if (valid)
		pg_atomic_write_u64(&adm->limits, pack_limits());

	/*
	 * A full barrier between the stores and the load (neither is one): a
	 * waiter counts itself in 'sleepers' and then reads the limits, so
	 * either it reads the new ones or we see it and wake it.
	 */
	pg_memory_barrier();
	if (pg_atomic_read_u32(&adm->sleepers) > 0)
		ConditionVariableBroadcast(&adm->cv);
	if (valid)
		return;
	ereport(WARNING,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("lake.max_buffered_bytes (%d) is less than lake.max_stream_bytes (%d); keeping lake.max_stream_bytes = %u and lake.max_buffered_bytes = %u",
					lake_max_buffered_bytes, lake_max_stream_bytes,
					HIGH32(old), LOW32(old)),
			 errhint("Set lake.max_buffered_bytes to at least lake.max_stream_bytes and reload.")));
}

/*
 * One CAS attempt loop: add a slot (if need_slot) and 'bytes' to usage
 * when both fit under the limits. Returns false, changing nothing, when
 * either does not fit.
 */
static bool
try_take(bool need_slot, uint32 bytes)
{
	uint64		cur = pg_atomic_read_u64(&adm->usage);
	uint32		max_buffered = LOW32(pg_atomic_read_u64(&adm->limits));
	uint32		max_concurrent = pg_atomic_read_u32(&adm->max_concurrent);

	for (;;)
	{
		uint64		next;

		if (need_slot && HIGH32(cur) >= max_concurrent)
			return false;
		if ((uint64) LOW32(cur) + bytes > max_buffered)
			return false;
		next = cur + (need_slot ? SLOT_ONE : 0) + bytes;
		if (pg_atomic_compare_exchange_u64(&adm->usage, &cur, next))
			return true;
	}
}

/*
 * Count a permit against 'role' unless it already holds 'cap', without a
 * lock (SPEC §3): this backend publishes its role in its own entry, then,
 * after a full barrier, counts the entries naming the role. Of backends
 * taking the role's places at once, the last through its barrier sees
 * every other's entry, so the cap is never passed; when they outnumber
 * the places left, more may be refused than had to be.
 */
static bool
role_take(Oid role, int cap, int *in_use)
{
	int			n = 0;

	Assert(MyBackendId >= 1 && MyBackendId <= MaxBackends);
	pg_atomic_write_u32(&adm->role_of[MyBackendId], role);
	pg_memory_barrier();
	for (int i = 1; i <= MaxBackends; i++)
		if (pg_atomic_read_u32(&adm->role_of[i]) == role)
			n++;
	*in_use = n - 1;			/* the others */
	if (n <= cap)
		return true;
	pg_atomic_write_u32(&adm->role_of[MyBackendId], InvalidOid);
	return false;
}

static void
role_release(void)
{
	pg_atomic_write_u32(&adm->role_of[MyBackendId], InvalidOid);
}

/*
 * Capacity back to the pool: counted as a release, so that a sleeper woken
 * for it that cannot use it passes the wake-up on (wait_and_take).
 */
static void
give_back(uint64 amount)
{
	pg_atomic_sub_fetch_u64(&adm->usage, amount);
	pg_atomic_fetch_add_u64(&adm->releases, 1);
	if (pg_atomic_read_u32(&adm->sleepers) > 0)
		ConditionVariableSignal(&adm->cv);
}

static void
release_permit(void)
{
	uint32		bytes = held_bytes;

	if (OidIsValid(held_role))
	{
		held_role = InvalidOid;
		role_release();
	}
	if (!held)
		return;
	/* Clear our fields first: an error below must not release twice. */
	held = false;
	growths = NIL;				/* its memory goes with the transaction */
	held_bytes = 0;
	give_back(SLOT_ONE + bytes);
}

static void
admission_xact_callback(XactEvent event, void *arg)
{
	/*
	 * A committing transaction releases at PRE_COMMIT: its lake calls are
	 * over and their payloads freed, so the slot need not wait out the
	 * commit flush (with 16 clients on 8 slots that wait halved append
	 * throughput). COMMIT and PREPARE are there for completeness; release
	 * happens once whichever comes first.
	 */
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			release_permit();
			break;
		default:
			break;
	}
}

/*
 * The subtransaction that took the permit owns it, like a resource owner:
 * its abort (a caught error, ROLLBACK TO SAVEPOINT) releases the permit at
 * once, and its commit hands it to its parent.
 */
static void
admission_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						   SubTransactionId parentSubid, void *arg)
{
	if (!held && !OidIsValid(held_role))
		return;
	if (mySubid == held_subxact)
	{
		if (event == SUBXACT_EVENT_ABORT_SUB)
			release_permit();
		else if (event == SUBXACT_EVENT_COMMIT_SUB)
			held_subxact = parentSubid;
		return;
	}
	if (growths != NIL && ((Growth *) llast(growths))->subid == mySubid)
	{
		Growth	   *g = (Growth *) llast(growths);

		if (event == SUBXACT_EVENT_ABORT_SUB)
		{
			uint32		grown = held_bytes - g->before;

			held_bytes = g->before;
			growths = list_delete_last(growths);
			give_back(grown);
		}
		else if (event == SUBXACT_EVENT_COMMIT_SUB)
		{
			/* The parent's now: merged into the parent's own growth, if any. */
			growths = list_delete_last(growths);
			if (parentSubid != held_subxact &&
				(growths == NIL || ((Growth *) llast(growths))->subid != parentSubid))
			{
				MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);

				g->subid = parentSubid;
				growths = lappend(growths, g);
				MemoryContextSwitchTo(old);
			}
		}
	}
}

/* The permit grows in the current subtransaction: remember what it held. */
static void
note_growth(void)
{
	SubTransactionId subid = GetCurrentSubTransactionId();
	MemoryContext old;
	Growth	   *g;

	if (subid == held_subxact ||
		(growths != NIL && ((Growth *) llast(growths))->subid == subid))
		return;
	old = MemoryContextSwitchTo(TopTransactionContext);
	g = palloc(sizeof(Growth));
	g->subid = subid;
	g->before = held_bytes;
	growths = lappend(growths, g);
	MemoryContextSwitchTo(old);
}

/*
 * Whether this backend is counted in adm->sleepers: a FATAL error (a
 * terminated waiter) leaves without unwinding wait_and_take, and the exit
 * callback takes the count back instead.
 */
static bool counted_sleeping = false;

static void
leave_sleepers(void)
{
	counted_sleeping = false;
	if (pg_atomic_sub_fetch_u32(&adm->sleepers, 1) > 0)
		ConditionVariableSignal(&adm->cv);
}

static void
admission_exit_callback(int code, Datum arg)
{
	if (counted_sleeping)
		leave_sleepers();
	release_permit();
}

void
admission_init(void)
{
	start_limits = pack_limits();
	RegisterXactCallback(admission_xact_callback, NULL);
	RegisterSubXactCallback(admission_subxact_callback, NULL);
}

/*
 * Sleep on the condition variable until try_take succeeds or time runs
 * out. Releases wake one sleeper, the longest waiting (waking all of them
 * to race for one slot cost a quarter of the CPU of a contended append,
 * and let unlucky waiters time out while others got in). A waiter that
 * leaves — with a permit or without — passes the wake-up on, so capacity
 * it did not use reaches the next one; so does one that stays because
 * what was freed is too little for it (a large reservation ahead of a
 * small one), once per release it sees, so the wake-up goes round the
 * sleepers at most once.
 */
static bool
wait_and_take(bool need_slot, uint32 bytes, TimestampTz start, long budget_ms)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(start, budget_ms);
	bool		ok = false;
	uint64		seen = pg_atomic_read_u64(&adm->releases);

	admission_count_wait();
	pg_atomic_fetch_add_u32(&adm->sleepers, 1);
	counted_sleeping = true;
	PG_TRY();
	{
		ConditionVariablePrepareToSleep(&adm->cv);
		for (;;)
		{
			long		left;
			uint64		releases = pg_atomic_read_u64(&adm->releases);

			if (try_take(need_slot, bytes))
			{
				ok = true;
				break;
			}
			if (releases != seen)
			{
				seen = releases;
				ConditionVariableSignal(&adm->cv);
			}
			left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
			if (left <= 0)
				break;
			ConditionVariableTimedSleep(&adm->cv, left, PG_WAIT_EXTENSION);
		}
		ConditionVariableCancelSleep();
	}
	PG_FINALLY();
	{
		leave_sleepers();
	}
	PG_END_TRY();
	return ok;
}

/*
 * A new permit, published under its role for the role's capped sessions to
 * count: a session without the cap (one that logged in before ALTER ROLE
 * ... SET put it in force) holds permits of the role all the same. Under a
 * cap it is counted now, before any wait, and refused at once when the role
 * holds its cap (waiting would only let one tenant queue ahead of others).
 * Released with the permit. The role is the session's login role, whose
 * ALTER ROLE ... SET put the cap in force: SET ROLE opens no second budget.
 * So for every per-role cap.
 */
static void
take_role_permit(void)
{
	Oid			role = GetSessionUserId();
	int			in_use;

	if (lake_role_max_appends == 0)
		pg_atomic_write_u32(&adm->role_of[MyBackendId], role);
	else if (!role_take(role, lake_role_max_appends, &in_use))
	{
		admission_count_refusal();
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("role \"%s\" has reached lake.role_max_appends (%d)",
						lake_role_name(role), lake_role_max_appends),
				 errdetail("%d appends of this role hold admission permits.", in_use),
				 errhint("Retry when one of them ends, or ask a superuser to raise the role's lake.role_max_appends.")));
	}
	held_role = role;
	held_subxact = GetCurrentSubTransactionId();
}

bool
admission_held(void)
{
	return held;
}

uint32
admission_held_bytes(void)
{
	return held ? held_bytes : 0;
}

void
admission_count_wait(void)
{
	uint64		call = store_call_serial();

	if (call != wait_counted_call)
		pg_atomic_fetch_add_u64(&adm->waited, 1);
	wait_counted_call = call;
}

void
admission_count_refusal(void)
{
	pg_atomic_fetch_add_u64(&adm->rejected, 1);
}

/*
 * A permit the current call took is given back while the call waits for
 * something else (a dataset's lock): a slot held in that queue would keep
 * it from every other dataset. The call takes a permit again before it
 * goes on (admission_retake_within).
 */
void
admission_give_back(void)
{
	release_permit();
}

long
admission_reserve(uint64 bytes)
{
	return admission_reserve_within(bytes, lake_admission_queue_wait_ms);
}

/*
 * Returns what is left of this call's waiting budget, in ms: 'budget_ms'
 * less the time spent waiting here. The dataset lock the call may wait
 * for next shares that budget. A retake is a call's second permit after
 * it gave its first back: counted once in 'admitted'.
 */
static long
reserve(uint64 bytes, long budget_ms, bool retake)
{
	TimestampTz start = 0;
	uint32		max_stream;
	bool		need_slot;
	uint32		grow;
	uint64		usage;

	lake_require_preload();
	max_stream = admission_max_stream_bytes();
	if (bytes > max_stream)
	{
		admission_count_refusal();
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("stream of " UINT64_FORMAT " bytes exceeds lake.max_stream_bytes (%u)",
						bytes, max_stream),
				 errhint("Raise lake.max_stream_bytes (and lake.max_buffered_bytes, which must stay at least as large); a staged append is held to the same limit.")));
	}

	if (held && held_bytes >= bytes)
		return budget_ms;		/* the permit already covers this call */

	need_slot = !held;
	grow = (uint32) bytes - (held ? held_bytes : 0);
	if (held)
		note_growth();			/* before the bytes are taken: nothing fails after */

	if (!exit_hook_set)
	{
		before_shmem_exit(admission_exit_callback, (Datum) 0);
		exit_hook_set = true;
	}

	if (need_slot)
		take_role_permit();

	if (!try_take(need_slot, grow) &&
		!wait_and_take(need_slot, grow, (start = GetCurrentTimestamp()), budget_ms))
	{
		if (need_slot)
			release_permit();	/* the role's count, taken above */
		admission_count_refusal();
		usage = pg_atomic_read_u64(&adm->usage);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("append admission limit reached"),
				 errdetail_plural("%u of %u slots in use and %u of %u bytes reserved; this call needs %s and " UINT64_FORMAT " byte after waiting %d ms.",
								  "%u of %u slots in use and %u of %u bytes reserved; this call needs %s and " UINT64_FORMAT " bytes after waiting %d ms.",
								  bytes,
								  HIGH32(usage), pg_atomic_read_u32(&adm->max_concurrent),
								  LOW32(usage), LOW32(pg_atomic_read_u64(&adm->limits)),
								  need_slot ? "a slot" : "no new slot",
								  bytes, (int) Max(budget_ms, 0)),
				 errhint("Retry later, or raise lake.max_concurrent_appends or lake.max_buffered_bytes.")));
	}

	/* Owned before anything else can fail: the exit callback gives it back. */
	held = true;
	held_bytes = (uint32) bytes;
	if (need_slot)
	{
		if (!retake)
			pg_atomic_fetch_add_u64(&adm->admitted, 1);
		held_subxact = GetCurrentSubTransactionId();
		hold_begin(false);
	}
	if (start == 0)
		return budget_ms;
	return Max(0, budget_ms -
			   TimestampDifferenceMilliseconds(start, GetCurrentTimestamp()));
}

long
admission_reserve_within(uint64 bytes, long budget_ms)
{
	return reserve(bytes, budget_ms, false);
}

long
admission_retake_within(uint64 bytes, long budget_ms)
{
	return reserve(bytes, budget_ms, true);
}

PG_FUNCTION_INFO_V1(lake_admission);

/* lake.admission(): live usage, limits in force and totals since start. */
Datum
lake_admission(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[8];
	bool		nulls[8] = {0};
	uint64		usage;
	uint64		limits;

	lake_require_preload();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	lake_require_result_width("lake.admission()", tupdesc, lengthof(values));

	usage = pg_atomic_read_u64(&adm->usage);
	limits = pg_atomic_read_u64(&adm->limits);
	values[0] = Int32GetDatum((int32) HIGH32(usage));
	values[1] = Int64GetDatum((int64) LOW32(usage));
	values[2] = Int32GetDatum((int32) pg_atomic_read_u32(&adm->max_concurrent));
	values[3] = Int64GetDatum((int64) HIGH32(limits));
	values[4] = Int64GetDatum((int64) LOW32(limits));
	values[5] = Int64GetDatum((int64) pg_atomic_read_u64(&adm->admitted));
	values[6] = Int64GetDatum((int64) pg_atomic_read_u64(&adm->waited));
	values[7] = Int64GetDatum((int64) pg_atomic_read_u64(&adm->rejected));

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
