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

/* The last durable commit checked by durable_committed_replicated, and its answer. */
static XLogRecPtr checked_commit = InvalidXLogRecPtr;
static bool checked_replicated = false;

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
	/* Checked while the raised setting holds: a caller may ask after it. */
	if (event == XACT_EVENT_COMMIT && commit_durably)
		(void) durable_committed_replicated();
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

/* Whether synchronous standbys are waited for, read as PostgreSQL's wait reads it. */
static bool
standbys_defined(volatile WalSndCtlData *ctl)
{
#ifdef SYNC_STANDBY_DEFINED
	return (ctl->sync_standbys_status & SYNC_STANDBY_DEFINED) != 0 ||
		((ctl->sync_standbys_status & SYNC_STANDBY_INIT) == 0 &&
		 SyncRepStandbyNames != NULL && SyncRepStandbyNames[0] != '\0');
#else
	return ctl->sync_standbys_defined;
#endif
}

/*
 * Whether the synchronous standbys have 'lsn' at 'mode', or none are
 * defined any more: the flag is read again under the lock, since a reload
 * that names none releases the waiters before it clears the flag.
 */
static bool
standbys_reached(XLogRecPtr lsn, int mode)
{
	volatile WalSndCtlData *ctl = WalSndCtl;
	bool		reached;

	LWLockAcquire(SyncRepLock, LW_SHARED);
	reached = !standbys_defined(ctl) || ctl->lsn[mode] >= lsn;
	LWLockRelease(SyncRepLock);
	return reached;
}

/* The same, or this session's commits do not wait for standbys. */
static bool
standbys_have(XLogRecPtr lsn, int mode)
{
	return !SyncRepRequested() || !standbys_defined(WalSndCtl) ||
		standbys_reached(lsn, mode);
}

/* The mode PostgreSQL waits in (syncrep.c keeps it private). */
static int
wait_mode(bool commit)
{
	if (synchronous_commit == SYNCHRONOUS_COMMIT_REMOTE_WRITE)
		return SYNC_REP_WAIT_WRITE;
	if (commit && synchronous_commit == SYNCHRONOUS_COMMIT_REMOTE_APPLY)
		return SYNC_REP_WAIT_APPLY;
	return SYNC_REP_WAIT_FLUSH;
}

void
durable_wait(XLogRecPtr lsn, void (*before_waiting) (void))
{
	/*
	 * A wait that is not a commit's goes no further than the standbys'
	 * flush, so remote_apply is remote_flush here (durable there, maybe not
	 * applied).
	 */
	int			mode = wait_mode(false);

	if (XLogRecPtrIsInvalid(lsn) || synchronous_commit == SYNCHRONOUS_COMMIT_OFF ||
		RecoveryInProgress())
		return;
	XLogFlush(lsn);
	if (!SyncRepRequested() || !standbys_defined(WalSndCtl))
		return;

	/*
	 * 'lsn' makes the commit flushed here, but may lie below its record (a
	 * hint bit is set once the commit is flushed, whatever the page's LSN,
	 * and a synchronous commit's position is not kept): the record is
	 * flushed, so the standbys must have what is flushed so far.
	 */
	lsn = Max(lsn, GetFlushRecPtr(NULL));
	if (standbys_reached(lsn, mode))
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
	if (!standbys_reached(lsn, mode))
		ereport(ERROR,
				(errcode(ERRCODE_QUERY_CANCELED),
				 errmsg("canceling the wait for synchronous replication of what this answer names"),
				 errdetail("The answer names what another transaction committed; the synchronous standbys do not have it yet."),
				 errhint("Retry the call.")));
}

bool
durable_standbys_there(XLogRecPtr lsn)
{
	SyncRepStandbyData *standbys;
	int			connected;

	/* A durable commit waits whatever the session's setting (raise_at_commit). */
	if (max_wal_senders == 0 || !standbys_defined(WalSndCtl))
		return true;
	connected = SyncRepGetCandidateStandbys(&standbys);
	pfree(standbys);
	return SyncRepConfig != NULL && connected >= SyncRepConfig->num_sync &&
		standbys_reached(lsn, synchronous_commit == SYNCHRONOUS_COMMIT_REMOTE_APPLY ?
						 SYNC_REP_WAIT_APPLY : SYNC_REP_WAIT_FLUSH);
}

bool
durable_committed_replicated(void)
{
	XLogRecPtr	lsn = XactLastCommitEnd;
	int			mode = wait_mode(true);

	if (XLogRecPtrIsInvalid(lsn))
		return true;			/* nothing committed that needs the standbys */
	if (lsn == checked_commit)
		return checked_replicated;

	/*
	 * PostgreSQL's wait in the commit gave way to a cancel with a warning,
	 * the transaction committed here: acknowledgments wait on. It gave way
	 * to a termination too, which is served once the commit is over: false.
	 */
	HOLD_INTERRUPTS();
	while (!(checked_replicated = standbys_have(lsn, mode)) && !ProcDiePending)
	{
		ereport(WARNING,
				(errmsg("lake keeps waiting for the synchronous standbys"),
				 errdetail("Lake acknowledges what this transaction committed only once the synchronous standbys have it."),
				 errhint("Only a termination ends the wait; what was not acknowledged is then answered from the durable log once the standbys have it.")));
		SyncRepWaitForLSN(lsn, true);
	}
	RESUME_INTERRUPTS();
	checked_commit = lsn;
	return checked_replicated;
}
