/*
 * cycle.h — the open cycle in shared memory (SPEC §4 Cycles).
 *
 * Accepted casts wait in a ring buffer of lake.cycle_buffer_size bytes, in
 * acceptance order, each with its receipt (epoch, seq). A sealer (the
 * worker, or a session in lake.seal()) cuts a prefix of the buffer, writes
 * it as one cycle in one transaction, and — only once that transaction has
 * committed (publish.h) — frees the prefix, advances the owners' live
 * state and wakes the sessions awaiting those receipts (waiter.h). If the
 * transaction aborts the prefix stays pending for the next seal.
 */
#ifndef LAKE_CYCLE_H
#define LAKE_CYCLE_H

#include "lake.h"

#include "access/xlogdefs.h"
#include "owner.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"

/* What the last recovery did. */
typedef struct RecoveryFigures
{
	int64		owners;
	int64		applied;		/* landings replayed */
	int64		quarantined;
	int64		tail;			/* landings read above the snapshot */
	int64		snapshot;		/* the cycle the snapshot used covers, 0: none */
	double		ms;
} RecoveryFigures;

/* Live figures for lake.stats(). */
typedef struct CycleStats
{
	int32		epoch;
	int64		pending;
	int64		sealed_cycle;
	int64		cycles_sealed;	/* since the server started */
	int64		casts_sealed;
	double		last_seal_ms;
	int64		last_snapshot;	/* the cycle the newest snapshot covers */
	RecoveryFigures recovery;
} CycleStats;

/* One accepted cast in the buffer. */
typedef struct CastRecord
{
	uint32		len;			/* whole record, MAXALIGNed; 0 = wrap marker */
	volatile bool ready;		/* its payload is in place */
	uint8		flags;			/* LANDING_* */
	uint16		from_len;
	uint16		to_len;
	uint16		operation_len;
	uint32		payload_len;
	int32		owner_id;
	Oid			role;			/* counted against this role's pending-bytes cap, or invalid */
	OwnerState *owner;
	int64		seq;
	int64		lap;			/* the owner's lap after this cast */
	uint32		owner_back;		/* bytes back to the owner's previous pending cast; 0: none */
	int16		phase;			/* the owner's phase after it (as validated) */
	uint8		digest[LAKE_DIGEST_LEN];	/* content, for idempotent casts */
	char		data[FLEXIBLE_ARRAY_MEMBER];	/* from, to, operation, payload */
} CastRecord;

#define CAST_FROM(r)		((r)->data)
#define CAST_TO(r)			((r)->data + (r)->from_len)
#define CAST_OPERATION(r)	((r)->data + (r)->from_len + (r)->to_len)
#define CAST_PAYLOAD(r)		((r)->data + (r)->from_len + (r)->to_len + (r)->operation_len)

/* What a sealer took from the buffer. */
typedef struct CycleCut
{
	uint64		start;			/* ring offsets [start, end) */
	uint64		end;
	int			ncasts;
	int64		first_seq;
	int64		last_seq;
	int32		epoch;
} CycleCut;

/* A cast as the caller gave it (cast.c parses it). */
typedef struct CastRequest
{
	char	   *owner;
	char	   *from;
	char	   *to;
	bytea	   *payload;
	bool		has_lap;
	int64		expected_lap;
	char	   *operation_id;
	uint8		digest[LAKE_DIGEST_LEN];
} CastRequest;

/* Owner states a seal will make live once it has committed. */
typedef struct SealedOwner
{
	OwnerState *owner;
	int16		phase;
	int64		lap;
	int64		position;
	int32		count;
} SealedOwner;

extern void cycle_shmem_request(void);
extern void cycle_shmem_startup(void);
extern void cycle_init(void);

extern LWLock *cycle_lock(void);

/*
 * Sessions: wait until the worker has recovered the owners (55000 on a
 * standby), up to lake.admission_queue_wait (then 53000) or a deadline of
 * the caller's own (then false).
 */
extern void cycle_wait_ready(void);
extern bool cycle_wait_ready_until(TimestampTz deadline);
extern bool cycle_is_ready(void);
/* Has the worker's last recovery failed (it retries)? */
extern bool cycle_recovery_failing(void);
/* With cycle_lock held: are the live states those of the current lifecycles? */
extern bool cycle_owners_live(void);
/*
 * The same, the door aside: the live phases are numbered by the lifecycles
 * this session's cache holds. For a caller that has held the sealing lock
 * since it found the owners live: a worker about to recover may close the
 * door meanwhile, but cannot change a state before the lock is free.
 */
extern bool cycle_owners_numbered(void);
/* Forget the cached lifecycles: the caller reads them after every edit so far. */
extern void cycle_lifecycles_reset(void);

/*
 * The owner's live entry, entered from the registry at its first use after
 * recovery (42704 if unknown, 53000 if the table is full); *lifecycle gets
 * its lifecycle, loaded into this backend's cache. With 'as_tenant' (not
 * with the store connected) the caller must hold the owner's tenant: 42501
 * otherwise, naming only the owner. A stored lifecycle that is not well
 * formed is XX001, or, when 'why' is given, a NULL *lifecycle and the
 * reason in *why.
 */
struct Lifecycle;
extern OwnerState *cycle_owner_entry(const char *name, const struct Lifecycle **lifecycle,
									 bool as_tenant, char **why);

extern bool cycle_owner_reached(const char *name, int32 id, int64 *position,
								int64 *cycle);
extern uint64 cycle_owner_table(void);
extern bool cycle_owner_copy(const OwnerState *o, uint64 filling, OwnerState *copy);

/*
 * Which installation live states belong to: the database's OID and its
 * lake_data.owner's, 0 for none. The table's OID alone is not enough: a
 * copy made with CREATE DATABASE … TEMPLATE keeps every relation OID, so
 * a copy renamed to lake.database, or a database reset from a template,
 * would be taken for the one whose states and pending casts the ring holds.
 */
typedef uint64 LakeGeneration;

/* Worker */
extern bool cycle_needs_recovery(LakeGeneration generation);
extern bool cycle_serves(LakeGeneration generation);

/*
 * Once this transaction commits, sessions reload their lifecycles and the
 * worker seals what is pending and recovers every owner (a lifecycle edit,
 * a restored writer epoch).
 */
extern void cycle_recover_at_commit(void);
/* Has the installed extension's live epoch accepted any cast? */
extern bool cycle_has_history(void);
extern void cycle_close(void);
extern void cycle_begin_recovery(void);
extern void cycle_recovery_failed(const char *why);
extern void cycle_seal_failed(int sqlerrcode, const char *why);
extern void cycle_seal_not_failing(void);

/*
 * A committed seal left unpublished: its cycle and cast count, kept until
 * the next recovery (cycle_unpublished: 0 if none), which it asks for
 * (casts wait for it meanwhile).
 */
extern void cycle_seal_unpublished(int64 cycle, int ncasts);
extern int64 cycle_unpublished(int *ncasts);

/*
 * Since when the worker's seals have failed one after another (0: the
 * last one did not), how many, and the last one's SQLSTATE and message.
 */
extern TimestampTz cycle_seal_failing(int *failures, int *sqlerrcode, char *why, size_t len);
extern uint64 cycle_lifecycle_changes(void);
extern void cycle_finish_recovery(int32 epoch, LakeGeneration generation, int64 sealed_cycle,
								  const RecoveryFigures *figures, uint64 lifecycle_changes);
extern int64 cycle_pending(void);
/*
 * Whether a cast found the ring full since the last seal (by any sealer)
 * freed it: the worker then seals early.
 */
extern bool cycle_space_wanted(void);
struct Latch;
extern void cycle_set_worker_latch(struct Latch *latch);
extern void cycle_wake_worker(void);
extern void cycle_stats(CycleStats *out);

/*
 * Casts: accept one (or answer its replay) and return its receipt's seq;
 * *epoch is the current epoch, or a sealed replay's. Payloads are at most
 * cycle_max_payload() bytes.
 */
extern int64 cycle_accept(const CastRequest *req, int32 *epoch);
extern uint32 cycle_max_payload(void);

/*
 * Receipts: still in the ring (*tenant, NAMEDATALEN, gets its owner's
 * tenant), history (sealed or lost), or not known while a recovery
 * rebuilds the ring (22023 if never issued)? Settled (sealed, or lost with
 * an epoch that ended)? Sealed in this server's current epoch?
 */
typedef enum ReceiptState
{
	RECEIPT_PENDING,
	RECEIPT_HISTORY,
	RECEIPT_RECOVERING
} ReceiptState;
extern ReceiptState cycle_receipt_state(int32 epoch, int64 seq, char *tenant);
extern bool cycle_receipt_settled(int32 epoch, int64 seq);
extern bool cycle_receipt_sealed(int32 epoch, int64 seq);
/* The writer epoch this server seals in (0 before the first recovery). */
extern int32 cycle_live_epoch(void);

/* Sealers (holding the sealing lock) */
extern bool cycle_cut(CycleCut *cut, int max_casts);
extern bool cycle_cut_held(void);
extern void cycle_require_no_cut(const char *what);
extern CastRecord *cycle_record(uint64 offset);
extern uint64 cycle_next(const CastRecord *r, uint64 offset);

/* publish.c, at the end of a seal's transaction */
extern void cycle_apply_seal(const CycleCut *cut, int64 cycle,
							 const SealedOwner *owners, int nowners, double took_ms);
extern void cycle_uncut(void);

/* The sealed head and the newest snapshot. */
extern int64 cycle_sealed_cycle(void);
/*
 * The same, for a reader: 0 unless the live state is this installation's
 * and recovered (a DROP and CREATE EXTENSION leaves the last one's head
 * until the worker has recovered the new one).
 */
extern int64 cycle_sealed_head(void);
extern void cycle_set_last_snapshot(int64 cycle);
extern int64 cycle_last_snapshot(void);

/* Which incarnation of the extension is installed in this database. */
extern LakeGeneration cycle_current_generation(void);
extern bool cycle_incarnation_gone(void);

#endif							/* LAKE_CYCLE_H */
