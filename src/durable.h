/*
 * durable.h — how durable a commit, or what an answer names, is made:
 * flushed here, and on the synchronous standbys where the session asks.
 */
#ifndef LAKE_DURABLE_H
#define LAKE_DURABLE_H

#include "lake.h"

#include "access/xlogdefs.h"

/*
 * Make this transaction's commit durable whatever the session or database
 * asks for: flushed here (even with synchronous_commit = off) and, where
 * synchronous standbys are named, there too (synchronous_commit raised to
 * on for the rest of the transaction: local or off would skip the wait).
 */
extern void durable_commit(void);

/*
 * Make this transaction's commit flushed here whatever the session or
 * database asks for (as synchronous_commit = local would at least); it
 * waits for synchronous standbys only as the session's setting says.
 */
extern void durable_commit_flushed(void);

/*
 * Make what another transaction committed, named in an answer, as durable
 * as this session's own commit would make it: flushed unless
 * synchronous_commit is off ('lsn': a flush there makes that commit
 * flushed), and, when the session asks for synchronous standbys, on
 * them up to everything flushed here (57014 if that wait is cancelled).
 * 'before_waiting' (or NULL) runs only when the standbys must be waited for.
 */
extern void durable_wait(XLogRecPtr lsn, void (*before_waiting) (void));

/*
 * After a durable_commit's commit (in a COMMIT callback, or once it has
 * returned: the answer is kept): whether the synchronous standbys have it,
 * or none are waited for. A cancel that cut PostgreSQL's wait in the
 * commit is waited through (with a warning); false when a termination cut
 * it: nothing may be acknowledged from the commit, and the termination is
 * served at the next CHECK_FOR_INTERRUPTS.
 */
extern bool durable_committed_replicated(void);

/*
 * Whether a commit waiting for the synchronous standbys would find them:
 * none are waited for, or as many as are waited for are connected and all
 * they must have up to 'lsn' is there (at the mode a commit waits in).
 */
extern bool durable_standbys_there(XLogRecPtr lsn);

#endif							/* LAKE_DURABLE_H */
