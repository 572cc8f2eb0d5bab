/*
 * logread.h — reading the sealed log (SPEC §4): one owner's landings, the
 * global log, and the durable answers to receipts and operation ids.
 * Readers only ever see sealed (committed) cycles.
 */
#ifndef LAKE_LOGREAD_H
#define LAKE_LOGREAD_H

#include "lake.h"

#include "access/xlogdefs.h"
#include "executor/spi.h"
#include "landing.h"
#include "owner_index.h"

/* Where a cast landed. */
typedef struct LogReceipt
{
	int32		epoch;
	int64		seq;
	int32		owner_id;		/* log_find_receipt */
	uint8		digest[LAKE_DIGEST_LEN];
	int64		cycle;
	int64		position;
	XLogRecPtr	lsn;
} LogReceipt;

/*
 * The store must be connected for these. log_find_operation answers only
 * from a landing of that owner with that operation id (XX001 if the
 * operation's row points anywhere else). 'live_epoch' is this server's
 * writer epoch: a cycle of it was sealed on this WAL stream, so its lsn
 * must be flushed here (XX001 if not); an earlier epoch's rows may come
 * from a restored dump, their lsn another cluster's.
 */
extern bool log_find_operation(int32 owner_id, const char *operation_id,
							   int32 live_epoch, LogReceipt *out);
extern bool log_find_receipt(int32 epoch, int64 seq, int32 live_epoch, LogReceipt *out);
/*
 * Before a receipt of 'epoch' that no cycle row reaches is called lost
 * (LK006 invites a second cast of the step): the rows at the epoch's edges
 * read whole (its last row, or without one the last row of an earlier
 * epoch, and the row after). A last row whose record holds a receipt past
 * its last_seq, or an edge row whose record is not of its row's epoch, is
 * damage (XX001), and the receipt may be in it.
 */
extern void log_require_epoch_end(int32 epoch);
/*
 * XX001 unless a fresh snapshot sees the row of 'cycle', one whose seal
 * committed (the sealed head): a reader's snapshot may be older than it,
 * but a log without it had its newest rows deleted.
 */
extern void log_require_sealed_cycle(int64 cycle);

/* The cycle a visitor's landing comes from. */
typedef LakeCycleId LogCycle;

/*
 * Told of a damaged cycle instead of an XX001, with the owners the cycle's
 * owner list names ('nowners' -1 when it is unreadable too, or when the
 * log lacks a cycle or an owner's position); 'arg' is the visitor's.
 */
typedef void (*LogDamageHandler) (int64 cycle, const char *why,
								  const LakeCycleOwner *owners, int nowners,
								  void *arg);

extern void log_scan_cycles(int64 after_cycle, LogCycle *where,
							LakeLandingVisitor visit, LogDamageHandler damaged,
							void *arg);
/* The owner index as of a cycle (lake_data.cycle's columns of that name). */
typedef struct LogIndexState
{
	int64		cycle;
	LakeIndexState index;		/* owner_index.h */
} LogIndexState;

extern bool log_index_state(Snapshot snapshot, LogIndexState *st);
/*
 * The state as of 'cycle' by the seals' rule (lake_index_next), from the
 * row of the cycle before it and this cycle's owner list: for a row whose
 * own state is one no seal writes. False when those cannot be read either.
 */
extern bool log_index_state_derive(Snapshot snapshot, int64 cycle, LogIndexState *st);

/* A cycle's owners (nowners -1: its owner list and landings are damaged). */
typedef void (*LogOwnerListVisitor) (int64 cycle, const LakeCycleOwner *owners,
									 int nowners, void *arg);

extern void log_scan_owner_lists(int64 after_cycle, Snapshot snapshot,
								 LogOwnerListVisitor visit, void *arg);

/*
 * Where an owner is known to have got to, from outside the owner index (the
 * primary's live owner table): durable position 'position', held by a cycle
 * at or before 'cycle'.
 */
typedef struct LogReach
{
	int64		position;
	int64		cycle;
} LogReach;

/*
 * Visit one owner's landings above 'after_position' through the owner index.
 * With 'reach', a walk that sees 'reach->cycle' must find the owner's
 * positions up to 'reach->position': a missing last index entry is damage
 * too, not a shorter trajectory. A damaged index is XX001; with 'damaged'
 * (a recovery), the walk reads the log itself from there instead (not
 * below 'after_cycle', when the caller knows the landings above
 * 'after_position' are all in later cycles), and only damage to the log
 * reaches the handler, by the rule of the worker's recovery. 'after_cycle'
 * -1: the owner's head is not known (it is quarantined), and the log is
 * also checked for a lost cycle after the last one holding its landings.
 */
extern void log_visit_owner(int32 owner_id, int64 after_position,
							int64 after_cycle, const LogReach *reach, LogCycle *where,
							LakeLandingVisitor visit, LogDamageHandler damaged,
							void *arg);

/*
 * Unwrap a stored record (one chunk, codec.h: a cycle or a snapshot) into
 * palloc'd bytes: NULL and *raw, or why it cannot be read. 'declared' is
 * the size its row gives (NULL: the row gives none); a record of another
 * size, or a negative one, is damaged before anything is allocated for it.
 * A NULL record (a column read as NULL: 'data' is 0) is damaged too. With
 * 'contain', damaged TOAST rows are as well (store_contain_damage), not
 * PostgreSQL's error: a recovery goes on past them.
 */
extern const char *log_unwrap(Datum data, const int64 *declared, bool contain,
							  uint8_t **raw, size_t *len);

#endif							/* LAKE_LOGREAD_H */
