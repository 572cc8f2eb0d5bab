/*
 * durable.c — how durable a commit, or what an answer names, is made.
 *
 * A seal and a recovery commit what acknowledgments will be given from
 * (durable_commit); stage calls commit what a client is told it may
 * resume from (durable_commit_flushed); a replay names what another
 * transaction committed, maybe asynchronously and not yet flushed, and
 * makes it as durable as the caller's own commit would be (durable_wait).
 */
#include "lake.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "durable.h"
#include "miscadmin.h"
#include "replication/syncrep.h"
#include "replication/walsender.h"
#include "replication/walsender_private.h"
#include "storage/lwlock.h"
#include "utils/guc.h"

/* durable_commit was called in this transaction. */
static bool commit_durably = false;

static void
raise_at_commit(XactEvent event, void *arg)
{
	/*
	 * Raised at pre-commit, outside every GUC nest level (a function's SET
	 * clause would take a value set inside it back before the commit), and
	 * only for this transaction.
	 */
	if (event == XACT_EVENT_PRE_COMMIT && commit_durably &&
		synchronous_commit < SYNCHRONOUS_COMMIT_REMOTE_FLUSH)
		(void) set_config_option("synchronous_commit", "on",
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
								 true, 0, false);
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
		commit_durably = false;
}

void
durable_commit(void)
{
	static bool registered = false;

	if (!registered)
	{
		RegisterXactCallback(raise_at_commit, NULL);
		registered = true;
	}
	ForceSyncCommit();
	commit_durably = true;
}

void
durable_commit_flushed(void)
{
	ForceSyncCommit();
}

bool
durable_commit_waits_for_standbys(void)
{
	return max_wal_senders > 0 && SyncRepStandbyNames != NULL && SyncRepStandbyNames[0] != '\0';
}

void
durable_wait(XLogRecPtr lsn, void (*before_waiting) (void))
{
	volatile WalSndCtlData *ctl = WalSndCtl;
	bool		reached;
	int			mode;

	if (XLogRecPtrIsInvalid(lsn) || synchronous_commit == SYNCHRONOUS_COMMIT_OFF ||
		RecoveryInProgress())
		return;
	XLogFlush(lsn);
	if (!SyncRepRequested())
		return;
	/* Whether there are standbys to wait for, read as PostgreSQL's wait reads it. */
#ifdef SYNC_STANDBY_DEFINED
	if ((ctl->sync_standbys_status & SYNC_STANDBY_DEFINED) == 0 &&
		((ctl->sync_standbys_status & SYNC_STANDBY_INIT) != 0 ||
		 SyncRepStandbyNames == NULL || SyncRepStandbyNames[0] == '\0'))
		return;
#else
	if (!ctl->sync_standbys_defined)
		return;
#endif
	/*
	 * The mode PostgreSQL waits in (syncrep.c keeps it private): a wait
	 * that is not a commit's goes no further than the standbys' flush, so
	 * remote_apply is remote_flush here (durable there, maybe not applied).
	 */
	mode = synchronous_commit == SYNCHRONOUS_COMMIT_REMOTE_WRITE ? SYNC_REP_WAIT_WRITE :
		SYNC_REP_WAIT_FLUSH;
	LWLockAcquire(SyncRepLock, LW_SHARED);
	reached = ctl->lsn[mode] >= lsn;
	LWLockRelease(SyncRepLock);
	if (reached)
		return;
	if (before_waiting != NULL)
		before_waiting();
	/*
	 * PostgreSQL's own wait takes a cancel as a warning (its commit is
	 * local already) and returns: the answer is refused instead. It is
	 * made for a commit's interrupts-held section: it leaves its queue on a
	 * cancel or a termination itself, and an interrupt served inside it (by
	 * a blocked write of its warning to the client) would leave this
	 * process queued. A termination it gave way to is served after it.
	 */
	HOLD_INTERRUPTS();
	SyncRepWaitForLSN(lsn, false);
	RESUME_INTERRUPTS();
	CHECK_FOR_INTERRUPTS();
	LWLockAcquire(SyncRepLock, LW_SHARED);
	reached = ctl->lsn[mode] >= lsn;
	LWLockRelease(SyncRepLock);
	if (!reached)
		ereport(ERROR,
				(errcode(ERRCODE_QUERY_CANCELED),
				 errmsg("canceling the wait for synchronous replication of what this answer names"),
				 errdetail("The answer names what another transaction committed; the synchronous standbys do not have it yet."),
				 errhint("Retry the call.")));
}
