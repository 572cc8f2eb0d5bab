/*
 * waiter.h — sessions waiting for their receipts to become durable.
 *
 * As PostgreSQL's synchronous replication does (SyncRepWakeQueue): each
 * waiting session has a slot in shared memory, queued in receipt order,
 * and sleeps on its own latch; a seal that made receipts durable fills in
 * exactly their coordinates and sets exactly their latches. No broadcast,
 * and no lock queue: a session whose cycle is being written just sleeps.
 */
#ifndef LAKE_WAITER_H
#define LAKE_WAITER_H

#include "lake.h"

#include "access/xlogdefs.h"
#include "logread.h"
#include "utils/timestamp.h"

extern void waiter_shmem_request(void);
extern void waiter_shmem_startup(void);

/* Is any session waiting (the worker then seals at once)? How many? */
extern bool waiter_any(void);
extern uint32 waiter_count(void);

typedef enum WaitResult
{
	WAIT_DURABLE,				/* the seal filled in the coordinate */
	WAIT_HISTORY,				/* settled without us: look it up in the log */
	WAIT_GONE,					/* the extension was dropped: never durable */
	WAIT_BLOCKING,				/* given up: another session waits for our locks */
	WAIT_TIMEOUT
} WaitResult;

/*
 * Wait for receipt (epoch, seq), queued until a seal covers it, until it
 * is settled otherwise (cycle_receipt_settled), or until 'deadline' (0:
 * none; then an error once the worker's seals keep failing);
 * WAIT_DURABLE fills out->cycle, position and lsn. However the
 * wait ends (error, cancel, FATAL), the queue entry is removed.
 */
extern WaitResult waiter_wait(int32 epoch, int64 seq, TimestampTz deadline,
							  LogReceipt *out);

/*
 * A seal made receipts first_seq..last_seq of 'epoch' durable in 'cycle':
 * positions[seq - first_seq] is each one's position. Fills in and wakes
 * exactly the waiters of those receipts.
 */
extern void waiter_release(int32 epoch, int64 first_seq, int64 last_seq,
						   int64 cycle, const int64 *positions, XLogRecPtr lsn);

/* Wake every waiter to look again (an epoch ended). */
extern void waiter_wake_all(void);

#endif							/* LAKE_WAITER_H */
