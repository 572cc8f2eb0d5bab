/*
 * worker.c — the lake background worker.
 *
 * One worker per cluster, connected to lake.database. It starts only once
 * recovery has finished (so it is idle on a standby and starts at
 * promotion), is restarted a second after any exit, and leaves on SIGTERM
 * through PostgreSQL's own die(): no custom handler that could hang a
 * shutdown. Its loop sleeps on its latch, never polls faster than once a
 * second while idle, and republishes the admission byte limits after each
 * reload so an inconsistent pair is refused in one place.
 *
 * Duties so far: expire staged appends idle for lake.stage_ttl. A staged
 * commit is a single transaction, so a crash in the middle leaves either
 * the stage untouched or the complete version: there is no half-commit for
 * the worker to finish, only abandoned stages to discard.
 */
#include "lake.h"

#include "access/xact.h"
#include "admission.h"
#include "args.h"
#include "commands/extension.h"
#include "funcapi.h"
#include "guc.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "store.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
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
} WorkerShared;

static WorkerShared *ws = NULL;

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
	snprintf(worker.bgw_name, BGW_MAXLEN, "lake worker");
	snprintf(worker.bgw_type, BGW_MAXLEN, "lake worker");
	RegisterBackgroundWorker(&worker);
}

static void
worker_exit(int code, Datum arg)
{
	ws->latch = NULL;
	pg_atomic_write_u32(&ws->state, WORKER_STOPPED);
	pg_atomic_write_u32(&ws->pid, 0);
}

/* Is the extension installed in the database we serve? */
static bool
extension_installed(void)
{
	bool		installed;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	installed = OidIsValid(get_extension_oid("lake", true));
	CommitTransactionCommand();
	return installed;
}

/*
 * Remove stages idle for longer than lake.stage_ttl. A failure is logged
 * and retried at the next pass rather than ending the worker.
 */
static void
expire_stages(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	int64		stages = 0;
	int64		chunks = 0;
	int64		open = 0;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "lake: expiring idle stages");
	PG_TRY();
	{
		store_connect();
		store_expire_stages(TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														-(int64) lake_stage_ttl_s * 1000),
							&stages, &chunks, &open);
		store_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
	}
	PG_END_TRY();
	pgstat_report_activity(STATE_IDLE, NULL);

	pg_atomic_write_u64(&ws->stages_open, (uint64) open);
	pg_atomic_fetch_add_u64(&ws->stages_expired, (uint64) stages);
	pg_atomic_fetch_add_u64(&ws->chunks_expired, (uint64) chunks);
	if (stages > 0)
		ereport(LOG,
				(errmsg("lake worker expired " INT64_FORMAT " idle stages (" INT64_FORMAT " chunks)",
						stages, chunks)));
}

/* How often to look for idle stages: a quarter of the TTL, 1 s to 60 s. */
static long
expiry_interval_ms(void)
{
	return Max(1000L, Min(60000L, (long) lake_stage_ttl_s * 250L));
}

void
lake_worker_main(Datum arg)
{
	bool		said_waiting = false;
	TimestampTz next_expiry = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	ws->started_at = GetCurrentTimestamp();
	ws->latch = MyLatch;
	pg_atomic_fetch_add_u64(&ws->starts, 1);
	pg_atomic_write_u32(&ws->pid, (uint32) MyProcPid);
	before_shmem_exit(worker_exit, (Datum) 0);

	BackgroundWorkerInitializeConnection(lake_database, NULL, 0);
	pgstat_report_appname("lake worker");
	admission_publish_limits();

	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			admission_publish_limits();
			pg_atomic_fetch_add_u64(&ws->reloads, 1);
		}

		if (extension_installed())
		{
			if (pg_atomic_read_u32(&ws->state) != WORKER_SERVING)
				ereport(LOG,
						(errmsg("lake worker serving database \"%s\"", lake_database)));
			pg_atomic_write_u32(&ws->state, WORKER_SERVING);
			said_waiting = false;
			if (GetCurrentTimestamp() >= next_expiry)
			{
				expire_stages();
				next_expiry = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														  expiry_interval_ms());
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

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
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
	Datum		values[9];
	bool		nulls[9] = {0};
	uint32		pid;
	uint32		state;

	lake_require_preload();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	pid = pg_atomic_read_u32(&ws->pid);
	state = pg_atomic_read_u32(&ws->state);
	values[0] = CStringGetTextDatum(lake_database);
	values[1] = Int32GetDatum((int32) pid);
	nulls[1] = (pid == 0);
	values[2] = CStringGetTextDatum(state_names[state]);
	values[3] = TimestampTzGetDatum(ws->started_at);
	nulls[3] = (pid == 0);
	values[4] = Int64GetDatum((int64) pg_atomic_read_u64(&ws->starts));
	values[5] = Int64GetDatum((int64) pg_atomic_read_u64(&ws->reloads));
	values[6] = Int64GetDatum((int64) pg_atomic_read_u64(&ws->stages_open));
	values[7] = Int64GetDatum((int64) pg_atomic_read_u64(&ws->stages_expired));
	values[8] = Int64GetDatum((int64) pg_atomic_read_u64(&ws->chunks_expired));

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
