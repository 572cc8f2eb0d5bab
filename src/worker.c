/*
 * worker.c — the lake background worker.
 *
 * One worker per cluster, connected to lake.database. It starts only once
 * recovery has finished (so it is idle on a standby and starts at
 * promotion), is restarted a second after any exit, and leaves on SIGTERM
 * within a second, after sealing the casts pending (request_stop). Its
 * loop sleeps on its latch, never polls faster than once a
 * second while idle, and republishes the admission byte limits after each
 * reload so an inconsistent pair is refused in one place.
 *
 * Duties: recover the owners before any cast is accepted (at every start,
 * and when the extension is re-created); seal the open cycle when it is
 * due; expire staged appends idle for lake.stage_ttl. A staged commit is a
 * single transaction, so a crash in the middle leaves either the stage
 * untouched or the complete version: there is no half-commit to finish,
 * only abandoned stages to discard.
 */
#include "lake.h"

#include <signal.h>
#include <time.h>

#include "access/xact.h"
#include "admission.h"
#include "args.h"
#include "commands/extension.h"
#include "durable.h"
#include "funcapi.h"
#include "guc.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "postmaster/bgworker.h"
#include "checkpoint.h"
#include "cycle.h"
#include "postmaster/interrupt.h"
#include "recovery.h"
#include "seal.h"
#include "store_stage.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
#include "waiter.h"
#include "worker.h"

/* What lake.stats() shows of the worker. */
typedef enum WorkerState
{
	WORKER_STOPPED = 0,
	WORKER_WAITING,				/* extension not installed in lake.database */
	WORKER_SERVING
} WorkerState;

typedef struct WorkerShared
{
	pg_atomic_uint32 pid;
	pg_atomic_uint32 state;
	Latch	   *latch;			/* the worker's latch, NULL when none runs */
	TimestampTz started_at;		/* written by the worker only, before pid */
	pg_atomic_uint64 starts;	/* worker lifetimes since server start */
	pg_atomic_uint64 reloads;
	pg_atomic_uint64 stages_open;	/* as of the last expiry pass */
	pg_atomic_uint64 stages_expired;
	pg_atomic_uint64 chunks_expired;
	/* Lifetimes in a row that died connecting (lake.database is missing). */
	pg_atomic_uint32 failed_connects;
} WorkerShared;

static WorkerShared *ws = NULL;

/* Lifecycle edits this worker's recovery has seen (cycle.h). */
static uint64 lifecycles_seen = 0;

void
worker_shmem_request(void)
{
	RequestAddinShmemSpace(MAXALIGN(sizeof(WorkerShared)));
}

void
worker_shmem_startup(void)
{
	bool		found;

	ws = ShmemInitStruct("lake worker", sizeof(WorkerShared), &found);
	if (!found)
	{
		pg_atomic_init_u32(&ws->pid, 0);
		pg_atomic_init_u32(&ws->state, WORKER_STOPPED);
		ws->latch = NULL;
		ws->started_at = 0;
		pg_atomic_init_u64(&ws->starts, 0);
		pg_atomic_init_u64(&ws->reloads, 0);
		pg_atomic_init_u64(&ws->stages_open, 0);
		pg_atomic_init_u64(&ws->stages_expired, 0);
		pg_atomic_init_u64(&ws->chunks_expired, 0);
		pg_atomic_init_u32(&ws->failed_connects, 0);
	}
}

void
worker_register(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 1;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "lake");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "lake_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, LAKE_WORKER_TYPE);
	snprintf(worker.bgw_type, BGW_MAXLEN, LAKE_WORKER_TYPE);
	RegisterBackgroundWorker(&worker);
}

static void
worker_exit(int code, Datum arg)
{
	ws->latch = NULL;
	cycle_set_worker_latch(NULL);
	pg_atomic_write_u32(&ws->state, WORKER_STOPPED);
	pg_atomic_write_u32(&ws->pid, 0);
}

/* The SQLSTATE and message of the last error run_in_transaction caught. */
static int	last_error;
static char last_message[256];

/*
 * A pass given up on before it was done: its lock_timeout ran out (another
 * transaction holds what it needs), or it was cancelled (pg_cancel_backend,
 * as an operator's script of cancelling every backend does). Either is
 * tried again at the next pass: a recovery cut short so is still under
 * way, not failed.
 */
static bool
pass_cut_short(void)
{
	return last_error == ERRCODE_LOCK_NOT_AVAILABLE || last_error == ERRCODE_QUERY_CANCELED;
}

/*
 * Interrupts between passes. A cancel there has no pass to cut short and
 * is dropped, as an idle session drops one; raised outside run_in_transaction
 * it would end the worker (no handler catches it): a restart a second
 * later into a new epoch, with casts waiting meanwhile.
 */
static void
worker_check_interrupts(void)
{
	QueryCancelPending = false;
	CHECK_FOR_INTERRUPTS();
}

/*
 * A lock held on purpose (a lake.recover(), a lifecycle edit, DDL) makes
 * the worker's tries give up at its lock_timeout (below) each second for
 * as long as it is held: a wait, logged as one (LOG, saying what waits and
 * for what), not as an error.
 */
static void
report_caught(const char *activity)
{
	ErrorData  *edata = CopyErrorData();

	last_error = edata->sqlerrcode;
	lake_copy_clipped(last_message, edata->message, sizeof(last_message));
	if (last_error != ERRCODE_LOCK_NOT_AVAILABLE)
		EmitErrorReport();
	else
		ereport(LOG,
				(errmsg("lake worker waits for a lock another transaction holds"),
				 errdetail("%s: %s. It is tried again at the worker's next pass.", activity, edata->message),
				 errhint("pg_locks shows the transaction holding it: a seal, checkpoint, recovery or lifecycle edit, DDL on lake's tables, or a DROP EXTENSION.")));
	FreeErrorData(edata);
}

/* The worker's errors say what it was doing (a seal that fails, a full disk). */
static void
activity_context(void *arg)
{
	errcontext("%s", (const char *) arg);
}

/*
 * Run fn in a transaction of its own. An error is logged and the
 * transaction aborted; the worker carries on (and retries at its next
 * pass) instead of exiting into a restart loop.
 */
static bool
run_in_transaction(const char *activity, void (*fn) (void *), void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ErrorContextCallback context = {.previous = error_context_stack,
		.callback = activity_context,.arg = (void *) activity};
	bool		ok = true;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, activity);
	PG_TRY();
	{
		error_context_stack = &context;
		/*
		 * Before any of lake's tables: see store_hold_extension. A DROP
		 * EXTENSION that committed while we waited leaves nothing to do:
		 * the next pass finds the extension gone. Until then the pass
		 * counts as one cut short by a lock, not as a failure to report.
		 */
		if (store_hold_extension())
			fn(arg);
		else
		{
			last_error = ERRCODE_LOCK_NOT_AVAILABLE;
			ok = false;
		}
		PopActiveSnapshot();
		store_commit_as_owner();
		error_context_stack = context.previous;
	}
	PG_CATCH();
	{
		/* (PG_TRY has put error_context_stack back.) */
		MemoryContextSwitchTo(cxt);
		report_caught(activity);
		FlushErrorState();
		AbortCurrentTransaction();

		/*
		 * As PostgreSQL's own error recovery: a timeout that fired with
		 * the error (a lock_timeout during a deadlock check) leaves a
		 * cancel pending, which an interrupt check outside this catch
		 * would raise, and end the worker.
		 */
		disable_all_timeouts(false);
		QueryCancelPending = false;
		ok = false;
	}
	PG_END_TRY();
	pgstat_report_activity(STATE_IDLE, NULL);
	return ok;
}

typedef struct Expiry
{
	bool		held;			/* expire nothing this pass: just started */
	int64		steps_us;		/* idle this much longer (the clock's steps) */
	int64		stages;
	int64		chunks;
	int64		open;
	bool		more;
} Expiry;

/* Chunk bytes one expiry transaction removes at most (TOAST included). */
#define EXPIRY_BATCH_BYTES (32 * 1024 * 1024)

static void
expire_stages(void *arg)
{
	Expiry	   *e = (Expiry *) arg;

	store_connect();
	e->more = store_expire_stages(e->held ? DT_NOBEGIN :
								  GetCurrentTimestamp() - (int64) lake_stage_ttl_s * USECS_PER_SEC - e->steps_us,
								  EXPIRY_BATCH_BYTES, &e->stages, &e->chunks, &e->open);
	/*
	 * Whatever the database or the worker's role set: a client told its
	 * stage expired (42704) must not find it back after a crash, with its
	 * old chunks, under its operation's next begin_append.
	 */
	durable_commit_flushed();
	store_finish();
}

/*
 * A stage's idleness is measured on the wall clock (touched_at, which the
 * sessions write): a clock stepped forward makes every stage touched
 * before the step look idle longer by the step, and expired uploads still
 * going on. The worker keeps the forward steps it sees against the
 * monotonic clock over the last lake.stage_ttl, and expires only stages
 * idle for the TTL plus those steps: one touched before a step goes after
 * a TTL of real time, one touched after it at most the steps late. At its
 * start it cannot tell a step from downtime, so it expires nothing for one
 * TTL (clients resuming after a restart touch their stages meanwhile).
 */
#define CLOCK_STEPS_KEPT 32

typedef struct ClockStep
{
	instr_time	at;				/* monotonic */
	int64		us;				/* how far the wall clock jumped ahead */
} ClockStep;

static ClockStep clock_steps[CLOCK_STEPS_KEPT];
static int	nclock_steps = 0;
static instr_time clock_mono;	/* the last look at both clocks */
static TimestampTz clock_wall = 0;
static instr_time watching_since;

static double
ms_since(instr_time then)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, then);
	return INSTR_TIME_GET_MILLISEC(now);
}

static void
watch_clock(void)
{
	instr_time	now_mono;
	TimestampTz now_wall = GetCurrentTimestamp();

	INSTR_TIME_SET_CURRENT(now_mono);
	if (clock_wall == 0)
		watching_since = now_mono;
	else
	{
		instr_time	passed = now_mono;
		int64		ahead;

		INSTR_TIME_SUBTRACT(passed, clock_mono);
		ahead = (now_wall - clock_wall) - (int64) INSTR_TIME_GET_MICROSEC(passed);
		if (ahead > USECS_PER_SEC)
		{
			/* Full: the oldest goes into the next, kept as long as that one. */
			if (nclock_steps == CLOCK_STEPS_KEPT)
			{
				clock_steps[1].us += clock_steps[0].us;
				memmove(&clock_steps[0], &clock_steps[1], sizeof(ClockStep) * (CLOCK_STEPS_KEPT - 1));
				nclock_steps--;
			}
			clock_steps[nclock_steps].at = now_mono;
			clock_steps[nclock_steps].us = ahead;
			nclock_steps++;
			ereport(LOG,
					(errmsg("lake worker: the wall clock stepped forward by " INT64_FORMAT " s; stages are expired that much later until lake.stage_ttl (%d s) has passed",
							ahead / USECS_PER_SEC, lake_stage_ttl_s)));
		}
	}
	clock_mono = now_mono;
	clock_wall = now_wall;
}

/* The forward steps of the last lake.stage_ttl, in microseconds. */
static int64
recent_clock_steps(void)
{
	int64		sum = 0;

	while (nclock_steps > 0 && ms_since(clock_steps[0].at) >= (double) lake_stage_ttl_s * 1000.0)
	{
		memmove(&clock_steps[0], &clock_steps[1], sizeof(ClockStep) * (nclock_steps - 1));
		nclock_steps--;
	}
	for (int i = 0; i < nclock_steps; i++)
		sum += clock_steps[i].us;
	return sum;
}

/*
 * Remove stages idle for longer than lake.stage_ttl, one batch; true if
 * more are left (the caller seals before the next batch).
 */
static bool
expire_idle_stages(void)
{
	Expiry		e = {0};

	/* Held, a pass still clears what earlier passes expired, and counts. */
	watch_clock();
	e.held = ms_since(watching_since) < (double) lake_stage_ttl_s * 1000.0;
	e.steps_us = recent_clock_steps();
	if (!run_in_transaction("lake: expiring idle stages", expire_stages, &e))
		return false;
	if (e.open >= 0)
		pg_atomic_write_u64(&ws->stages_open, (uint64) e.open);
	pg_atomic_fetch_add_u64(&ws->stages_expired, (uint64) e.stages);
	pg_atomic_fetch_add_u64(&ws->chunks_expired, (uint64) e.chunks);
	if (e.chunks > 0 || e.stages > 0)
		ereport(LOG,
				(errmsg("lake worker expired " INT64_FORMAT " idle stages (" INT64_FORMAT " chunks)%s",
						e.stages, e.chunks, e.more ? ", more to come" : "")));
	return e.more;
}

/* How often to look for idle stages: a quarter of the TTL, 1 s to 60 s. */
static long
expiry_interval_ms(void)
{
	return Max(1000L, Min(60000L, (long) lake_stage_ttl_s * 250L));
}

/* The last seal was fenced out: only a recovery lets the worker seal again. */
static bool fenced_out = false;

static void
recover(void *arg)
{
	recovery_run((RecoveryResult *) arg);
}

static void
seal(void *arg)
{
	*(int64 *) arg = seal_run();
}

/*
 * A seal in a transaction of its own: its cycle in *cycle (0: nothing
 * cut). When it fails, *fenced says whether its fence refused it.
 */
static bool
seal_pass(const char *activity, int64 *cycle, bool *fenced)
{
	uint64		fences = seal_fences();
	bool		ok = run_in_transaction(activity, seal, cycle);

	*fenced = !ok && seal_fences() != fences;
	return ok;
}

static void
snapshot(void *arg)
{
	*(int64 *) arg = checkpoint_take(false);
}

/* After a failed pass, none of its kind again for this long. */
#define RETRY_PAUSE_MS 1000L

/* The longest pause after failed snapshots (snapshot_if_due). */
#define SNAPSHOT_PAUSE_MAX_MS 60000L

/*
 * Milliseconds left at 'now' of a pause of 'pause_ms' after a failure,
 * ending at 'until' (0: none, or past), whoever wakes the worker
 * meanwhile. Never more than the pause itself: the clock may have been
 * set back.
 */
static long
pause_left_of(TimestampTz now, TimestampTz until, long pause_ms)
{
	if (now >= until || until - now > (TimestampTz) pause_ms * 1000)
		return 0;
	return Max(1L, TimestampDifferenceMilliseconds(now, until));
}

static long
pause_left(TimestampTz now, TimestampTz until)
{
	return pause_left_of(now, until, RETRY_PAUSE_MS);
}

/*
 * Snapshot the owners once lake.checkpoint_cycles cycles have been sealed.
 * After a failure, a pause: a cause that stays gets a line per pause in
 * the log, not one per seal. A lock wait given up is tried again after a
 * second; any other failure doubles the pause, up to a minute, because a
 * snapshot holds the sealing lock while it encodes every owner before its
 * write fails, and a cause that lasts (a full disk, where a snapshot needs
 * new pages while a cycle row still fits in one) must not hold the seals
 * back a good part of the time.
 */
static void
snapshot_if_due(void)
{
	static TimestampTz retry_at = 0;
	static long pause_ms = 0;	/* the pause after the last failure (0: none) */
	int64		covered;

	if (cycle_sealed_cycle() - cycle_last_snapshot() < lake_checkpoint_cycles)
		return;
	if (pause_left_of(GetCurrentTimestamp(), retry_at, pause_ms) > 0)
		return;
	retry_at = 0;
	if (!run_in_transaction("lake: snapshotting owners", snapshot, &covered))
	{
		pause_ms = pass_cut_short() || pause_ms == 0 ? RETRY_PAUSE_MS :
			Min(pause_ms * 2, SNAPSHOT_PAUSE_MAX_MS);
		retry_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), pause_ms);
		return;
	}
	pause_ms = 0;
	if (covered >= 0)
		cycle_set_last_snapshot(covered);
}

/*
 * Seal until nothing is pending (before a recovery, before the worker
 * stops). False when a seal failed, *fenced saying whether its fence
 * refused it.
 */
static bool
seal_all_pending(const char *activity, bool *fenced)
{
	*fenced = false;
	while (cycle_pending() > 0)
	{
		int64		cycle;

		worker_check_interrupts();
		if (!seal_pass(activity, &cycle, fenced))
			return false;
		/* Nothing cut: the first cast still copies its payload. */
		if (cycle == 0)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 1, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
	}
	return true;
}

/*
 * Recover the owners: at the start of every worker lifetime (each gets a
 * new epoch), when the extension was re-created, and after an edit of
 * lake_data.lifecycle. When the live states belong to this incarnation, casts
 * are stopped and what is pending is sealed first, under the old epoch,
 * so a worker restart or a lifecycle edit loses no accepted cast. A seal
 * that fails there puts the recovery off, as a failed recovery does:
 * recovering would empty the ring of casts already acknowledged. The caller
 * tries again after a pause. Waiting sessions are told of a failure (55000)
 * unless it was the sealing lock held past lock_timeout by another
 * transaction: that is a recovery still under way, which they wait for up
 * to their own bound (53000); an earlier attempt's failure is cleared.
 */
static bool
recover_owners(LakeGeneration generation)
{
	RecoveryResult r;
	uint64		changes = cycle_lifecycle_changes();
	char		from[64];

	if (cycle_serves(generation))
	{
		bool		fenced;

		cycle_close();
		if (!seal_all_pending("lake: sealing before recovery", &fenced))
		{
			int			committed;
			int64		unpublished;
			int64		lost;

			if (!fenced)
			{
				cycle_recovery_failed(pass_cut_short() ? "" :
									  "the casts pending before it could not be sealed; they are kept");
				return false;
			}

			/*
			 * The durable log moved under the live states (a restore whose
			 * writer row committed before its cycles, or a seal that
			 * committed and was not published): what is pending was
			 * validated against states it contradicts and can never be
			 * sealed. Recovery settles it: the unpublished seal's casts are
			 * on the log, the others lost (LK006).
			 */
			unpublished = cycle_unpublished(&committed);
			lost = cycle_pending() - committed;
			if (unpublished > 0)
				ereport(LOG,
						(errmsg_plural("lake worker: the %d cast of cycle " INT64_FORMAT " is durable but was not published; it is answered from the durable log after this recovery",
									   "lake worker: the %d casts of cycle " INT64_FORMAT " are durable but were not published; they are answered from the durable log after this recovery",
									   committed, committed, unpublished)));
			if (lost > 0)
				ereport(WARNING,
						(errcode(ERRCODE_LAKE_NOT_DURABLE),
						 errmsg("lake worker: " INT64_FORMAT " pending casts cannot be sealed on the durable log and are lost",
								lost),
						 errdetail("The log's head or epoch is not the one the live states were recovered from."),
						 errhint("Their receipts answer LK006; the owners are recovered from the durable log.")));
		}
	}
	/* Failed: why, whatever failed (the replay, or the commit after it). */
	if (!run_in_transaction("lake: recovering owners", recover, &r))
	{
		cycle_recovery_failed(pass_cut_short() ? "" : last_message);
		return false;
	}
	/* A termination cut its commit's wait for the standbys: leave unpublished. */
	if (!durable_committed_replicated())
		CHECK_FOR_INTERRUPTS();
	/* Said once it committed: a recovery that failed at its commit is not one. */
	if (r.figures.snapshot > 0)
		snprintf(from, sizeof(from), "the snapshot of cycle %lld", (long long) r.figures.snapshot);
	else
		strlcpy(from, "no snapshot", sizeof(from));
	ereport(LOG,
			(errmsg("lake recovery: epoch %d, %lld owners registered, %s, %lld landings read in the tail, %lld applied, %lld quarantined, %.1f ms",
					r.epoch, (long long) r.figures.owners, from,
					(long long) r.figures.tail, (long long) r.figures.applied,
					(long long) r.figures.quarantined, r.figures.ms)));
	cycle_finish_recovery(r.epoch, generation, r.sealed_cycle, &r.figures, changes);
	/* Receipts of the epoch that ended are settled: their waiters look. */
	waiter_wake_all();
	cycle_set_last_snapshot(r.last_snapshot);
	lifecycles_seen = changes;
	return true;
}

/*
 * The extension's generation (cycle.h) in the database we serve, or 0 if
 * the extension is not installed there.
 */
static void
installed_generation(void *arg)
{
	*(LakeGeneration *) arg = OidIsValid(get_extension_oid("lake", true)) ?
		cycle_current_generation() : 0;
}

/*
 * SIGTERM: a clean stop of the server (any mode) or pg_terminate_backend.
 * The casts accepted and not yet sealed live only in shared memory, which
 * a stop of the server takes with it, and their receipts would be LK006
 * after it. So while the worker is sealing or sleeping between seals, a
 * SIGTERM lets the seal under way end, then seals what is pending
 * (seal_before_exit) and ends the worker as die() does. A timer armed by
 * the SIGTERM itself ends it with die() STOP_SEAL_MS later whatever it is
 * doing (a lock wait, a seal's commit waiting for a synchronous standby
 * that does not answer), so it leaves within a second. The postmaster
 * stops its WAL senders only after the worker has left, so at a clean
 * stop the synchronous standbys still answer; without them, seal_before_exit
 * closes the door before it seals. Anywhere else (a recovery, a snapshot,
 * an expiry pass, a look-up of the extension) it is die() at once.
 */
#define STOP_SEAL_MS 500L
/* How long of it the exit seal waits for the synchronous standbys to answer. */
#define STANDBYS_WAIT_MS 100L

static volatile sig_atomic_t stop_requested = false;
static volatile sig_atomic_t stop_deferrable = false;
static timer_t stop_timer;
static bool stop_timer_made = false;

static void
request_stop(SIGNAL_ARGS)
{
	int			save_errno = errno;
	struct itimerspec when = {.it_value = {.tv_nsec = STOP_SEAL_MS * 1000000L}};

	/*
	 * timer_settime is async-signal-safe; the timer's SIGUSR2 is die().
	 * Without a timer armed there is no bound: die() at once.
	 */
	if (stop_deferrable && stop_timer_made &&
		(stop_requested || timer_settime(stop_timer, 0, &when, NULL) == 0))
	{
		stop_requested = true;
		SetLatch(MyLatch);
	}
	else
		die(postgres_signal_arg);
	errno = save_errno;
}

/* The handlers and the timer of request_stop; before signals are unblocked. */
static void
prepare_stop(void)
{
	struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL,.sigev_signo = SIGUSR2};

	/* A background worker's SIGUSR2 is otherwise unused (ignored). */
	pqsignal(SIGUSR2, die);
	pqsignal(SIGTERM, request_stop);
	/* Without a timer, no bound: die() at once, as before. */
	stop_timer_made = timer_create(CLOCK_MONOTONIC, &ev, &stop_timer) == 0;
}

static void seal_before_exit(void) pg_attribute_noreturn();

/* Let a SIGTERM wait for the end of what follows (see request_stop). */
static void
defer_stop(void)
{
	stop_deferrable = true;
}

/* The end of what a SIGTERM could wait for: if one came, stop now. */
static void
end_deferral(void)
{
	stop_deferrable = false;
	if (stop_requested)
		seal_before_exit();
}

/*
 * A SIGTERM came while it could wait: seal the casts pending (those of a
 * fast stop's sessions still casting too, for as long as they come and
 * the timer allows), then end. What is accepted after the last of these
 * seals is lost with the stop (LK006), as with a crash.
 */
static void
seal_before_exit(void)
{
	bool		fenced;
	XLogRecPtr	flushed = GetFlushRecPtr(NULL);
	TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												   STANDBYS_WAIT_MS);

	stop_deferrable = false;

	/*
	 * A seal's commit waits for the synchronous standbys, and one the timer
	 * cuts is left unpublished, committed here: its casts are answered from
	 * the durable log after the next recovery, but the casts accepted
	 * during its wait were validated against states that log moved past,
	 * and would be lost (cycle_seal_unpublished). So unless the standbys
	 * are there and have what is flushed here (their replies wake only a
	 * commit's wait: looked at every 10 ms, for a short while), the door
	 * is closed first, as before a recovery: casts arriving now wait for
	 * the next worker's recovery, within their bound.
	 */
	while (!durable_standbys_there(flushed))
	{
		if (GetCurrentTimestamp() >= until)
		{
			cycle_close();
			break;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	/* The timer's die() ends it at an interrupt check if time runs out. */
	(void) seal_all_pending("lake: sealing before the worker stops", &fenced);
	/* The message and exit code of a SIGTERM: the postmaster restarts us. */
	die(SIGTERM);
	CHECK_FOR_INTERRUPTS();
	pg_unreachable();
}

/* After a failed seal, no other seal before this (0: none failed). */
static TimestampTz seal_retry_at = 0;

/*
 * How long the open cycle may wait before its seal: lake.cycle_interval
 * after its first cast, nothing at lake.cycle_max_casts, for a waiting
 * session or for a cast that found the ring full since the last seal.
 * Sets *due when a first cast opened the cycle; 0 means seal now. It only
 * reads shared memory, so the main loop asks again just before it sleeps.
 */
static long
seal_wait(TimestampTz *due)
{
	TimestampTz now = GetCurrentTimestamp();
	int64		pending = cycle_pending();
	long		paused;

	if (pending == 0)
	{
		*due = 0;
		return 1000L;
	}
	/* Due within an interval from now, even if the clock was set back. */
	if (*due == 0 || *due - now > (TimestampTz) lake_cycle_interval_ms * 1000)
		*due = TimestampTzPlusMilliseconds(now, lake_cycle_interval_ms);
	/* After a failure, a pause whoever waits: each cast may wake us. */
	if ((paused = pause_left(now, seal_retry_at)) > 0)
		return paused;
	if (now < *due && pending < lake_cycle_max_casts && !waiter_any() &&
		!cycle_space_wanted())
		return Max(1L, TimestampDifferenceMilliseconds(now, *due));
	return 0;
}

/*
 * Seal the open cycle if it is due (seal_wait). Returns how long to sleep
 * before looking again (0: look again at once).
 */
static long
seal_if_due(TimestampTz *due)
{
	TimestampTz now = GetCurrentTimestamp();
	long		wait = seal_wait(due);
	int64		cycle;
	bool		fenced;

	if (wait > 0)
		return wait;
	if (!seal_pass("lake: sealing a cycle", &cycle, &fenced))
	{
		/* Fenced out: recover at once (see recover_owners). */
		if (fenced)
			fenced_out = true;
		/* Waiters are told of a failure that goes on; a lock wait given up is none. */
		else if (pass_cut_short())
			cycle_seal_not_failing();
		else
			cycle_seal_failed(last_error, last_message);
		/* Try again after a pause rather than fail in a tight loop. */
		seal_retry_at = TimestampTzPlusMilliseconds(now, RETRY_PAUSE_MS);
		return fenced_out ? 0 : RETRY_PAUSE_MS;
	}
	seal_retry_at = 0;
	cycle_seal_not_failing();
	*due = cycle_pending() > 0 ?
		TimestampTzPlusMilliseconds(now, lake_cycle_interval_ms) : 0;
	/* Nothing cut: the first cast still copies its payload; look again soon. */
	return cycle == 0 ? 1L : 0L;
}

/*
 * Connecting to a database that does not exist is FATAL, and the
 * postmaster starts the worker again a second later. After each lifetime
 * that died here, wait twice as long first (up to a minute): the log gets
 * a line a minute, not one a second, and a database created meanwhile is
 * served within the minute.
 */
static void
connect_served_database(void)
{
	uint32		failed = pg_atomic_fetch_add_u32(&ws->failed_connects, 1);

	if (failed > 0)
	{
		TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														failed <= 6 ? 1000L << (failed - 1) : 60000L);
		long		left;

		/* The latch may be set already, or again by a session: sleep it out. */
		while ((left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), until)) > 0)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 left, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			worker_check_interrupts();
		}
	}
	BackgroundWorkerInitializeConnection(lake_database, NULL, 0);
	pg_atomic_write_u32(&ws->failed_connects, 0);
}

void
lake_worker_main(Datum arg)
{
	bool		said_waiting = false;
	bool		recovered = false;	/* by this worker lifetime */
	TimestampTz next_expiry = 0;
	TimestampTz seal_due = 0;
	LakeGeneration generation = 0;
	bool		sealed_again = false;
	TimestampTz recover_retry_at = 0;	/* after a failed recovery, none before */

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	prepare_stop();
	BackgroundWorkerUnblockSignals();

	ws->started_at = GetCurrentTimestamp();
	ws->latch = MyLatch;
	cycle_set_worker_latch(MyLatch);
	pg_atomic_fetch_add_u64(&ws->starts, 1);
	pg_write_barrier();			/* lake.stats() reads started_at after pid */
	pg_atomic_write_u32(&ws->pid, (uint32) MyProcPid);
	before_shmem_exit(worker_exit, (Datum) 0);

	connect_served_database();
	pgstat_report_appname("lake worker");

	/*
	 * Never wait long for a lock: a session that locks lake's tables in
	 * another order (an administrator's DDL; a DROP EXTENSION waits for
	 * the pass instead, see store_hold_extension) would otherwise deadlock
	 * with the worker. It gives up instead, well before deadlock_timeout,
	 * and retries at its next pass.
	 */
	SetConfigOption("lock_timeout", "500", PGC_SUSET, PGC_S_OVERRIDE);

	/*
	 * Recovery reads the registry, snapshot and log with a snapshot taken
	 * after the sealing lock was granted; a transaction snapshot kept from
	 * before it (default_transaction_isolation set higher for the
	 * database) would miss an edit that committed while it waited.
	 */
	SetConfigOption("default_transaction_isolation", "read committed",
					PGC_SUSET, PGC_S_OVERRIDE);
	/* Nor may the database's owner make every write of the worker fail, */
	SetConfigOption("default_transaction_read_only", "off",
					PGC_SUSET, PGC_S_OVERRIDE);
	/* or every error it retries (a lock timeout) end it in a restart loop. */
	SetConfigOption("exit_on_error", "off", PGC_SUSET, PGC_S_OVERRIDE);
	admission_publish_limits();

	for (;;)
	{
		long		timeout = 1000L;
		bool		looked_up;

		worker_check_interrupts();

		/*
		 * Report the table statistics of the transactions run so far (at
		 * most once a second), as a backend does when it goes idle:
		 * otherwise autovacuum never sees the rows the seals insert and
		 * the snapshots delete until the worker exits.
		 */
		pgstat_report_stat(false);
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			admission_publish_limits();
			pg_atomic_fetch_add_u64(&ws->reloads, 1);
			/* The next expiry pass follows the TTL now in force. */
			next_expiry = 0;
			/* The open cycle is sealed no later than the interval now in force allows. */
			if (seal_due != 0)
				seal_due = Min(seal_due,
							   TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														   lake_cycle_interval_ms));
		}

		/*
		 * A seal that just committed found this generation serving (its
		 * fence checks it): sealing on back to back, the worker need not
		 * look it up again in a transaction of its own before every cycle.
		 */
		looked_up = sealed_again ||
			run_in_transaction("lake: looking up the extension", installed_generation, &generation);
		sealed_again = false;
		if (!looked_up)
			;					/* a lock timeout on the catalog: look again after a pause */
		else if (generation != 0)
		{
			if (pg_atomic_read_u32(&ws->state) != WORKER_SERVING)
				ereport(LOG,
						(errmsg("lake worker serving database \"%s\"", lake_database)));
			pg_atomic_write_u32(&ws->state, WORKER_SERVING);
			said_waiting = false;

			if (!recovered || fenced_out || cycle_needs_recovery(generation) ||
				cycle_lifecycle_changes() != lifecycles_seen)
			{
				long		paused = pause_left(GetCurrentTimestamp(), recover_retry_at);

				/*
				 * After a failure, a pause, though each waiting session wakes
				 * us when told of it: a retry a second, not a loop. Not after
				 * a lock wait that gave up: the lock_timeout has paced it,
				 * and the edit or DDL that held the lock wakes us as it
				 * commits.
				 */
				if (paused > 0)
					timeout = paused;
				else
				{
					recovered = recover_owners(generation);
					fenced_out = fenced_out && !recovered;
					recover_retry_at = recovered || pass_cut_short() ? 0 :
						TimestampTzPlusMilliseconds(GetCurrentTimestamp(), RETRY_PAUSE_MS);
					if (!recovered)
						timeout = RETRY_PAUSE_MS;
					else
						defer_stop();	/* it sleeps between seals now */
				}
			}
			else
			{
				bool		more_to_expire = false;
				long		again;

				defer_stop();
				timeout = seal_if_due(&seal_due);
				end_deferral();
				snapshot_if_due();
				if (GetCurrentTimestamp() >= next_expiry ||
					next_expiry - GetCurrentTimestamp() > (TimestampTz) expiry_interval_ms() * 1000)
				{
					/* More left: the next batch after the seals now due, without a pause. */
					more_to_expire = expire_idle_stages();
					next_expiry = more_to_expire ? 0 :
						TimestampTzPlusMilliseconds(GetCurrentTimestamp(), expiry_interval_ms());
				}
				if (timeout == 0)
				{
					sealed_again = true;
					continue;
				}
				if (more_to_expire)
					continue;
				/* A long lake.cycle_interval must not hold the expiry back. */
				timeout = Min(timeout, Max(1L, TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
																				next_expiry)));

				/*
				 * The snapshot and the expiry may have waited on a lock, a
				 * condition variable or a synchronous standby: every such
				 * wait resets our latch, and with it the wake-up of a cast
				 * or a waiter that came meanwhile, of a reload or of a
				 * lifecycle edit. So ask again: nothing after this resets
				 * the latch before we sleep.
				 */
				again = seal_wait(&seal_due);
				if ((again == 0 && timeout > 1) || ConfigReloadPending ||
					cycle_lifecycle_changes() != lifecycles_seen)
					continue;
				/* 1 ms: the last seal found a cast still copying its payload. */
				timeout = Min(timeout, Max(1L, again));
				defer_stop();
			}
		}
		else
		{
			pg_atomic_write_u32(&ws->state, WORKER_WAITING);
			if (!said_waiting)
				ereport(LOG,
						(errmsg("lake worker waiting: extension \"lake\" is not installed in database \"%s\"",
								lake_database),
						 errhint("Run CREATE EXTENSION lake in database \"%s\".", lake_database)));
			said_waiting = true;
		}

		/* A SIGTERM already deferred has set the latch: no sleep. */
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		end_deferral();
	}
}

/*
 * A session using lake while the worker still believes the extension is
 * absent (it was just created) wakes it, so it starts serving at once
 * instead of at its next idle tick.
 */
void
worker_wake_if_waiting(void)
{
	Latch	   *latch;

	if (pg_atomic_read_u32(&ws->state) != WORKER_WAITING)
		return;
	latch = ws->latch;
	if (latch != NULL)
		SetLatch(latch);
}

PG_FUNCTION_INFO_V1(lake_stats);

/* lake.stats(): live figures of the worker (later capabilities add theirs). */
Datum
lake_stats(PG_FUNCTION_ARGS)
{
	static const char *const state_names[] = {"stopped", "waiting for extension", "serving"};
	TupleDesc	tupdesc;
	Datum		values[24];
	bool		nulls[24] = {0};
	CycleStats	cst;
	uint32		pid;
	TimestampTz started_at;
	uint32		state;

	lake_require_preload();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	lake_require_result_width("lake.stats()", tupdesc, lengthof(values));

	/* The pid and the start of one lifetime: again if the worker restarted meanwhile. */
	do
	{
		pid = pg_atomic_read_u32(&ws->pid);
		pg_read_barrier();		/* started_at is written before pid */
		started_at = ws->started_at;
		pg_read_barrier();
	} while (pg_atomic_read_u32(&ws->pid) != pid);
	state = pg_atomic_read_u32(&ws->state);
	values[0] = CStringGetTextDatum(lake_database);
	values[1] = Int32GetDatum((int32) pid);
	nulls[1] = (pid == 0);
	/*
	 * Serving, but casts still wait for the owners, or are refused (55000)
	 * while the worker's recovery fails and is retried: say which. Only
	 * the served database's owners are recovered; elsewhere it serves.
	 */
	if (state == WORKER_SERVING && !RecoveryInProgress() && lake_serves_this_database() &&
		!cycle_is_ready())
		values[2] = CStringGetTextDatum(cycle_recovery_failing() ? "recovery failing" : "recovering");
	else
		values[2] = CStringGetTextDatum(state_names[state]);
	values[3] = TimestampTzGetDatum(started_at);
	nulls[3] = (pid == 0);
	values[4] = Int64GetDatum((int64) pg_atomic_read_u64(&ws->starts));
	values[5] = Int64GetDatum((int64) pg_atomic_read_u64(&ws->reloads));
	values[6] = Int64GetDatum((int64) pg_atomic_read_u64(&ws->stages_open));
	values[7] = Int64GetDatum((int64) pg_atomic_read_u64(&ws->stages_expired));
	values[8] = Int64GetDatum((int64) pg_atomic_read_u64(&ws->chunks_expired));
	cycle_stats(&cst);
	values[9] = Int32GetDatum(cst.epoch);
	values[10] = Int64GetDatum(cst.cycles_sealed);
	values[11] = Int64GetDatum(cst.casts_sealed);
	values[12] = Int64GetDatum(cst.pending);
	values[13] = Float8GetDatum(cst.cycles_sealed > 0 ?
								(double) cst.casts_sealed / cst.cycles_sealed : 0.0);
	values[14] = Float8GetDatum(cst.last_seal_ms);
	values[15] = Int64GetDatum(cst.sealed_cycle);
	values[16] = Int64GetDatum(cst.recovery.owners);
	values[17] = Int64GetDatum(cst.recovery.applied);
	values[18] = Int64GetDatum(cst.recovery.quarantined);
	values[19] = Float8GetDatum(cst.recovery.ms);
	values[20] = Int64GetDatum(cst.recovery.tail);
	values[21] = Int64GetDatum(cst.recovery.snapshot);
	values[22] = Int64GetDatum(cst.last_snapshot);
	values[23] = Int64GetDatum((int64) waiter_count());

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
