/*
 * hold.c — lake.role_max_hold.
 *
 * A transaction that appended (or created an owner) keeps its permit and
 * its locks until it ends, and the bounded waits of other sessions then
 * end in 53000 for as long as it stays open. idle_in_transaction_session_
 * timeout cannot bound that against a hostile role: any role may SET it to
 * 0, and a transaction running short statements is never idle. This bound
 * is a superuser-set parameter instead (ALTER ROLE ... SET), counted from
 * the first such hold to the end of the transaction; past it the session
 * is ended as pg_terminate_backend ends one, since a transaction idle in a
 * client read cannot be cancelled, only ended.
 */
#include "lake.h"

#include "access/xact.h"
#include "guc.h"
#include "hold.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/elog.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

static TimeoutId hold_timeout = MAX_TIMEOUTS;
static bool xact_callback_set = false;
static bool subxact_callback_set = false;
static bool armed = false;
static bool locked = false;		/* a dataset's or the owner-creation lock */
static TimestampTz deadline;
static SubTransactionId armed_in;	/* its abort gives back every hold */
static volatile sig_atomic_t expired = false;
static emit_log_hook_type prev_emit_log_hook = NULL;

/* SIGALRM: end the session at its next interrupt check, even while idle. */
static void
hold_expired(void)
{
	expired = true;
	ProcDiePending = true;
	InterruptPending = true;
	SetLatch(MyLatch);
}

/*
 * PostgreSQL's error recovery turns every timeout off before it reports
 * the error (this hook) and aborts. Only an abort of the whole transaction
 * gives back what was held; after one that leaves it held, the clock goes
 * on: an error in a subtransaction sets it again at the subtransaction's
 * abort too (hold_subxact_callback), one in a subtransaction already
 * aborted (a statement before its ROLLBACK TO) only here, where an error
 * is seen if it is written to the server log. The ending's FATAL names
 * this bound, not an administrator's command.
 */
static void
hold_emit_log(ErrorData *edata)
{
	if (armed && edata->elevel == ERROR)
		enable_timeout_at(hold_timeout, deadline);
	if (expired && edata->elevel == FATAL && edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN)
	{
		edata->sqlerrcode = ERRCODE_INSUFFICIENT_RESOURCES;
		edata->message = psprintf("terminating connection: its transaction held what other sessions wait for longer than lake.role_max_hold (%d ms)",
								  lake_role_max_hold_ms);
		edata->detail = pstrdup("An admission permit, a dataset's append lock or the owner-creation lock is held until the transaction ends.");
		edata->hint = pstrdup("Commit appends and owner creations promptly, or ask a superuser to raise the role's lake.role_max_hold.");
	}
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

/*
 * The holds belong to the subtransaction that took the first: its abort
 * gives them all back (the permit, and the locks taken in it), its commit
 * hands them to its parent.
 */
static void
hold_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	if (!armed)
		return;
	if (mySubid != armed_in)
	{
		/*
		 * An inner subtransaction's abort leaves every hold held. After an
		 * error it follows the error recovery that turned our timeout off:
		 * set it again here, whether or not the error is logged.
		 */
		if (event == SUBXACT_EVENT_ABORT_SUB)
			enable_timeout_at(hold_timeout, deadline);
		return;
	}
	if (event == SUBXACT_EVENT_COMMIT_SUB)
		armed_in = parentSubid;
	else if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		disable_timeout(hold_timeout, false);
		armed = locked = false;
	}
}

static void
hold_xact_callback(XactEvent event, void *arg)
{
	if (!armed)
		return;
	/*
	 * A prepared transaction keeps its locks past its session, where this
	 * bound no longer reaches: one that holds them under the bound is not
	 * prepared. (The permit itself is given back at PRE_PREPARE.)
	 */
	if (event == XACT_EVENT_PRE_PREPARE && locked)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction that holds a lake dataset's append lock or the owner-creation lock under lake.role_max_hold"),
				 errdetail("A prepared transaction would keep them past lake.role_max_hold (%d ms), until an administrator resolves it.",
						   lake_role_max_hold_ms),
				 errhint("Commit or roll back the transaction instead of preparing it.")));
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
	{
		disable_timeout(hold_timeout, false);
		armed = locked = false;
	}
	else if (event == XACT_EVENT_PRE_COMMIT || event == XACT_EVENT_PARALLEL_PRE_COMMIT)
	{
		/*
		 * The commit is under way: the bound stops here, or it could end
		 * the session after a commit it did not undo (its flush, a
		 * synchronous standby's reply, hold interrupts). Run out already,
		 * it ends the session now, before anything is committed.
		 */
		disable_timeout(hold_timeout, false);
		if (expired)
			CHECK_FOR_INTERRUPTS();
	}
}

void
hold_begin(bool lock)
{
	if (lake_role_max_hold_ms <= 0)
		return;
	/* (Kept if the subtransaction that took the lock aborts: refusing more.) */
	locked |= lock;
	if (armed)
		return;
	/*
	 * The callbacks first, each once: registering one allocates, and a
	 * timeout armed with no callback to disarm it at the transaction's end
	 * would end the session later for a hold long over.
	 */
	if (!xact_callback_set)
	{
		RegisterXactCallback(hold_xact_callback, NULL);
		xact_callback_set = true;
	}
	if (!subxact_callback_set)
	{
		RegisterSubXactCallback(hold_subxact_callback, NULL);
		subxact_callback_set = true;
	}
	if (hold_timeout == MAX_TIMEOUTS)
	{
		prev_emit_log_hook = emit_log_hook;
		emit_log_hook = hold_emit_log;
		hold_timeout = RegisterTimeout(USER_TIMEOUT, hold_expired);
	}
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), lake_role_max_hold_ms);
	enable_timeout_at(hold_timeout, deadline);
	armed = true;
	armed_in = GetCurrentSubTransactionId();
}
