/*
 * seal.c — write the open cycle as one record, in one transaction.
 *
 * A sealer holds the sealing lock (a transaction-scoped lock on
 * lake_data.cycle's OID) to its commit, so sealers never overlap. Each seal is
 * fenced against its base: the durable writer epoch must still be the one
 * this incarnation recovered under, and the head it knows (kept in shared
 * memory: set from lake_data.cycle by recovery, advanced by each published
 * seal, both under the sealing lock) must be the newest cycle row —
 * otherwise it refuses and writes nothing. Both are read from their rows,
 * so a zombie whose epoch was superseded, or a sealer that missed a
 * committed cycle, writes nothing. The
 * landings of the cycle are encoded together (landing.h) and
 * zstd-compressed into one row, beside the cycle's owner list
 * (owner_index.h: which owners, from which position, how many — read by
 * trajectories and by recovery without the landings); lake_data.cast_operation
 * gets one row per idempotent cast. The seal of a block's last cycle (a
 * block closes after 64 cycles, or sooner once its owner lists hold 1024
 * entries) also writes the block's rows of the owner index, one per owner
 * with landings in the block, from the owner lists of the block's cycles,
 * and each cycle's row records where the index stands: no per-owner row
 * per cycle, and nothing kept in memory between seals, so any sealer (the
 * worker, lake.seal(), a worker after a crash or a promotion) closes the
 * block the same way. The rows go in through
 * the table AM and the executor's index insertion, not SPI: no statement is
 * planned or run per seal, and the tables' OIDs come from the
 * store's relation cache. The commit is forced
 * to be synchronous: a coordinate is only ever handed out for a flushed
 * cycle.
 */
#include "lake.h"

#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "cycle.h"
#include "durable.h"
#include "encode.h"
#include "executor/executor.h"
#include "guc.h"
#include "landing.h"
#include "logread.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "owner_index.h"
#include "postmaster/bgworker.h"
#include "publish.h"
#include "seal.h"
#include "storage/lmgr.h"
#include "store.h"
#include "store_blob.h"
#include "store_rel.h"
#include "store_row.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/pg_lsn.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

/*
 * This transaction took the sealing lock. What it did under the lock (a
 * seal, a checkpoint, a release, a lifecycle edit) takes effect at its
 * commit, and prepared it would stop every seal until resolved. The calls
 * that take the lock commit at once (PreventInTransactionBlock), but a
 * row-limited Execute suspends their portal and leaves the transaction
 * open for a BEGIN and a PREPARE. Only a transaction that took the lock
 * looks for it: elsewhere lake may not even be installed.
 */
static bool sealing_locked = false;
static Oid	sealing_object = InvalidOid;	/* the lock's, as taken (a DROP
											 * EXTENSION may follow) */

static void
seal_xact_callback(XactEvent event, void *arg)
{
	if (!sealing_locked)
		return;
	if (event == XACT_EVENT_PRE_PREPARE && store_object_lock_held(sealing_object))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction that holds lake's sealing lock"),
				 errdetail("It ran lake.seal(), checkpoint(), recover() or release_owner(), or edited a lifecycle; what that did takes effect at its commit."),
				 errhint("Commit or roll back the transaction instead of preparing it.")));
	if (event != XACT_EVENT_PRE_COMMIT && event != XACT_EVENT_PARALLEL_PRE_COMMIT &&
		event != XACT_EVENT_PRE_PREPARE)
		sealing_locked = false;
}

/*
 * lake's worker waits under its own lock_timeout and retries at its next
 * pass; anyone else (a session's lake.seal, checkpoint, recover,
 * release_owner or lifecycle edit, another extension's worker running
 * them) waits for a seal in progress at most lake.admission_queue_wait, as
 * for every wait in lake (SPEC §3).
 */
void
seal_lock(void)
{
	static bool registered = false;

	if (!registered)
		RegisterXactCallback(seal_xact_callback, NULL);
	registered = true;
	sealing_object = store_sealing_lock_object();
	sealing_locked = true;		/* before the wait: an error after it is harmless */
	if (MyBgworkerEntry != NULL && strcmp(MyBgworkerEntry->bgw_type, LAKE_WORKER_TYPE) == 0)
		LockDatabaseObject(sealing_object, 0, 0, ExclusiveLock);
	else if (!store_lock_object(sealing_object, 0, 0,
								lake_admission_queue_wait_ms))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("lake's sealing lock is busy"),
				 errdetail("A seal, checkpoint, recovery or lifecycle edit held it longer than lake.admission_queue_wait (%d ms).",
						   lake_admission_queue_wait_ms),
				 errhint("Retry; keep transactions that edit lifecycles short.")));
}

void
seal_unlock(void)
{
	UnlockDatabaseObject(store_sealing_lock_object(), 0, 0, ExclusiveLock);
}

void
seal_lock_live(void)
{
	for (;;)
	{
		bool		live;

		CHECK_FOR_INTERRUPTS();
		seal_lock();
		LWLockAcquire(cycle_lock(), LW_SHARED);
		live = cycle_owners_live();
		LWLockRelease(cycle_lock());
		if (live)
			return;
		/* A lifecycle edit committed: its recovery needs this lock. */
		seal_unlock();
		seal_wait_ready();
	}
}

void
seal_wait_ready(void)
{
	/* The lock as this transaction took it (seal_xact_callback asks so too). */
	if (!sealing_locked || !store_object_lock_held(sealing_object))
	{
		cycle_wait_ready();
		return;
	}
	/* Its checks (a standby, a failed recovery), without a wait. */
	if (!cycle_wait_ready_until(GetCurrentTimestamp()))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("lake owners are being recovered, and this transaction holds lake's sealing lock, which the recovery needs"),
				 errdetail("An earlier call of this transaction took the lock; the worker started a recovery since (a restart, a lifecycle edit)."),
				 errhint("Retry the call in a transaction of its own.")));
}

static uint64 fences = 0;		/* seal_fences() */

uint64
seal_fences(void)
{
	return fences;
}

/*
 * Refuse (writing nothing) unless this sealer's base is the durable head:
 * the state it cut from must belong to this incarnation of the extension,
 * its epoch must be the durable writer epoch, and its base the newest
 * cycle row (both read with the latest snapshot, after the sealing lock
 * was granted, so every committed seal is seen). Returns where the owner
 * index stands as of the head: the last cycle in lake_data.owner_block and
 * the owner entries of the cycles after it, as the head's row records them.
 */
static LogIndexState
check_fence(const CycleCut *cut, int64 base)
{
	Datum		writer_row[WRITER_NATTS];
	bool		writer_nulls[WRITER_NATTS];
	int32		epoch;
	LogIndexState st = {0};
	bool		found;

	if (!cycle_serves(cycle_current_generation()))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("seal refused: the extension was re-created since its casts were accepted")));
	if (!store_fetch("writer", "writer_pkey", GetLatestSnapshot(), NULL, 0,
					 ForwardScanDirection, writer_row, writer_nulls))
		store_writer_row_missing();
	epoch = DatumGetInt32(writer_row[WA_EPOCH - 1]);
	found = log_index_state(GetLatestSnapshot(), &st);

	if (epoch != cut->epoch || (found && st.cycle > base))
	{
		fences++;
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("seal refused: its base is not the sealed head"),
				 errdetail("This sealer has epoch %d and base cycle " INT64_FORMAT "; the durable epoch is %d and the head is cycle " INT64_FORMAT ".",
						   cut->epoch, base, epoch, found ? st.cycle : 0)));
	}
	if (base > 0 && !(found && st.cycle == base))
	{
		/* The head's row is gone (deleted by hand): start a new block after it. */
		ereport(WARNING,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("lake: the row of the sealed head, cycle " INT64_FORMAT ", is missing", base)));
		st.index.indexed_through = base;
		st.index.tail_owners = 0;
	}
	else if (base > 0 &&
			 !lake_index_state_valid(&st.index, base))
	{
		/*
		 * A damaged state in the head's row must not have this seal close a
		 * block over more than LAKE_BLOCK_CYCLES cycles, or over rows the
		 * index holds already: it is derived again from the row before.
		 */
		LogIndexState derived;
		bool		ok = log_index_state_derive(GetLatestSnapshot(), base, &derived);

		ereport(WARNING,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("lake: the owner index state in the row of the sealed head, cycle " INT64_FORMAT ", is damaged", base),
				 errdetail("It reads indexed_through " INT64_FORMAT " and tail_owners %d; this seal goes on from %s.",
						   st.index.indexed_through, st.index.tail_owners,
						   ok ? "the state derived from the cycle before it" :
						   "a new block after it, as the cycle before it cannot tell")));
		if (ok)
			st = derived;
		else
		{
			st.index.indexed_through = base;
			st.index.tail_owners = 0;
		}
	}
	return st;
}

/* ----------------------------------------------------------------------
 * The seal's tables, reached through the table AM
 * ---------------------------------------------------------------------- */

typedef enum SealTable
{
	SEAL_CYCLE,
	SEAL_CAST_OPERATION,
	SEAL_OWNER_BLOCK,
	SEAL_NTABLES
} SealTable;

static const char *const seal_table_names[SEAL_NTABLES] = {"cycle", "cast_operation", "owner_block"};
/* Their columns, as the rows below are laid out (the install script's). */
static const int seal_table_widths[SEAL_NTABLES] = {14, 5, 3};

/*
 * Insert 'nrows' rows of the table's width (values and nulls row after
 * row) and their index entries, as an INSERT would but without a plan:
 * the tables have no triggers, no constraints but their keys, and plain
 * btree indexes. The rows go in with multi-inserts, which write one WAL
 * record per heap page instead of one per row, in batches through one
 * set of slots, as COPY does: a slot per row pinned the tuple descriptor
 * once per row in the resource owner, whose cost grows with the pins, so
 * a cycle of a million casts took minutes to seal.
 */
#define SEAL_BATCH_ROWS 1000

static void
insert_rows(SealTable t, int nrows, Datum *values, bool *nulls)
{
	Relation	rel = store_open(seal_table_names[t], RowExclusiveLock);
	int			width = seal_table_widths[t];
	int			natts = store_require_width(rel, width);
	EState	   *estate = CreateExecutorState();
	ResultRelInfo *rri = makeNode(ResultRelInfo);
	int			nslots = Min(nrows, SEAL_BATCH_ROWS);
	TupleTableSlot **slots = palloc(sizeof(TupleTableSlot *) * nslots);

	InitResultRelInfo(rri, rel, 1, NULL, 0);
	ExecOpenIndices(rri, false);
	for (int i = 0; i < nslots; i++)
		slots[i] = table_slot_create(rel, NULL);
	for (int done = 0; done < nrows; done += nslots)
	{
		int			n = Min(nslots, nrows - done);

		CHECK_FOR_INTERRUPTS();
		for (int i = 0; i < n; i++)
		{
			size_t		at = (size_t) (done + i) * width;

			ExecClearTuple(slots[i]);
			memcpy(slots[i]->tts_values, values + at, sizeof(Datum) * width);
			memcpy(slots[i]->tts_isnull, nulls + at, sizeof(bool) * width);
			/* Columns added and dropped again by an administrator. */
			memset(slots[i]->tts_isnull + width, true, natts - width);
			ExecStoreVirtualTuple(slots[i]);
		}
		table_multi_insert(rel, slots, n, GetCurrentCommandId(true), 0, NULL);
		for (int i = 0; i < n; i++)
		{
			(void) ExecInsertIndexTuples(rri, slots[i], estate, false, false, NULL, NIL);
			ResetPerTupleExprContext(estate);
		}
	}
	for (int i = 0; i < nslots; i++)
		ExecDropSingleTupleTableSlot(slots[i]);
	ExecCloseIndices(rri);
	FreeExecutorState(estate);
	table_close(rel, NoLock);
}

/* The landing an accepted cast becomes at 'position'. */
static void
landing_of(const CastRecord *r, int64 position, LakeLanding *l)
{
	memset(l, 0, sizeof(*l));
	l->owner_id = r->owner_id;
	l->position = position;
	l->seq = r->seq;
	l->lap = r->lap;
	l->flags = r->flags;
	l->from_phase = CAST_FROM(r);
	l->from_len = r->from_len;
	l->to_phase = CAST_TO(r);
	l->to_len = r->to_len;
	l->operation_id = CAST_OPERATION(r);
	l->operation_len = r->operation_len;
	l->payload = (const uint8_t *) CAST_PAYLOAD(r);
	l->payload_len = r->payload_len;
}

typedef struct OwnerSlot
{
	OwnerState *key;
	int			index;
} OwnerSlot;

/* ----------------------------------------------------------------------
 * Closing a block of the owner index
 * ---------------------------------------------------------------------- */

typedef struct BlockOwner
{
	int32		owner_id;		/* the hash key */
	LakeOwnerBlock b;
} BlockOwner;

typedef struct BlockBuild
{
	HTAB	   *owners;
	int64		first_cycle;
	int			cycles;			/* cycles whose owners are known */
} BlockBuild;

static void
block_add(int64 cycle, const LakeCycleOwner *owners, int nowners, void *arg)
{
	BlockBuild *bb = (BlockBuild *) arg;

	if (cycle < bb->first_cycle || cycle - bb->first_cycle >= LAKE_BLOCK_CYCLES)
		return;					/* not of the block: none while we hold the sealing lock */
	if (nowners < 0)
	{
		ereport(WARNING,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("lake: cycle " INT64_FORMAT " and its owner list are damaged; its owners are missing from the owner index",
						cycle),
				 errdetail("Trajectories reading past the gap this leaves fail with XX001.")));
		return;
	}
	bb->cycles++;
	for (int i = 0; i < nowners; i++)
	{
		bool		found;
		BlockOwner *bo = hash_search(bb->owners, &owners[i].owner_id, HASH_ENTER, &found);

		if (!found)
		{
			bo->b.owner_id = owners[i].owner_id;
			bo->b.first_cycle = bb->first_cycle;
			bo->b.first_position = owners[i].first_position;
			bo->b.cycles = 0;
		}
		bo->b.last_position = owners[i].first_position + owners[i].landings - 1;
		bo->b.cycles |= (uint64) 1 << (cycle - bb->first_cycle);
	}
}

static void
block_begin(BlockBuild *bb, int64 first_cycle)
{
	HASHCTL		ctl;

	ctl.keysize = sizeof(int32);
	ctl.entrysize = sizeof(BlockOwner);
	ctl.hcxt = CurrentMemoryContext;
	bb->owners = hash_create("lake block owners", 256, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	bb->first_cycle = first_cycle;
	bb->cycles = 0;
}

/* Write the block's rows of the owner index; how many. */
static int
block_write(BlockBuild *bb)
{
	long		nentries = hash_get_num_entries(bb->owners);
	Datum	   *rows = palloc(sizeof(Datum) * 3 * Max(nentries, 1));
	bool	   *nulls = palloc0(sizeof(bool) * 3 * Max(nentries, 1));
	HASH_SEQ_STATUS seq;
	BlockOwner *bo;
	int			n = 0;

	hash_seq_init(&seq, bb->owners);
	while ((bo = hash_seq_search(&seq)) != NULL)
	{
		uint8		entry[LAKE_OWNER_BLOCK_BOUND];
		size_t		len = lake_owner_block_put(entry, &bo->b);

		rows[n * 3] = Int32GetDatum(bo->b.owner_id);
		rows[n * 3 + 1] = Int64GetDatum(bo->b.first_cycle);
		rows[n * 3 + 2] = PointerGetDatum(encode_record_raw((const char *) entry, len));
		n++;
	}
	if (n > 0)
		insert_rows(SEAL_OWNER_BLOCK, n, rows, nulls);
	hash_destroy(bb->owners);
	pfree(rows);
	pfree(nulls);
	return n;
}

/*
 * Write the owner index rows of the block of cycles first_cycle .. 'cycle'
 * that 'cycle' closes, from the owner lists of its other cycles, as stored,
 * and of this one.
 */
static void
close_block(int64 first_cycle, int64 cycle, const LakeCycleOwner *these, int nthese)
{
	BlockBuild	bb;

	block_begin(&bb, first_cycle);
	/* Every earlier cycle of the block is committed: we hold the sealing lock. */
	log_scan_owner_lists(first_cycle - 1, GetLatestSnapshot(), block_add, &bb);
	if (bb.cycles != cycle - first_cycle)
		ereport(WARNING,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("lake: the owners of only %d of the cycles " INT64_FORMAT " to " INT64_FORMAT " could be read for the owner index",
						bb.cycles, first_cycle, cycle - 1)));
	block_add(cycle, these, nthese, &bb);
	(void) block_write(&bb);
}

/* ----------------------------------------------------------------------
 * Rebuilding the owner index
 * ---------------------------------------------------------------------- */

typedef struct Rebuild
{
	int64	   *ends;			/* the cycles that closed a block, ascending */
	int			nends;
	int			next;			/* ends[next] closes the block being read */
	int		   *readable;		/* per block: its cycles whose owners were read */
	BlockBuild	bb;
	MemoryContext cxt;			/* the block being built; reset after each */
	int64		rows;
} Rebuild;

static int64
block_first(const Rebuild *rb, int i)
{
	return i == 0 ? 1 : rb->ends[i - 1] + 1;
}

/*
 * Whether block i can be rebuilt: the owners of every one of its cycles
 * were read, and it is no longer than a seal makes one. Otherwise its old
 * rows are kept, so that trajectories across what could not be read stay
 * refused (XX001), never shorter.
 */
static bool
block_whole(const Rebuild *rb, int i)
{
	int64		ncycles = rb->ends[i] - block_first(rb, i) + 1;

	return ncycles <= LAKE_BLOCK_CYCLES && rb->readable[i] == ncycles;
}

/* Move on to the block that holds 'cycle'; false past the last closed one. */
static bool
rebuild_seek(Rebuild *rb, int64 cycle, void (*finish) (Rebuild *rb))
{
	CHECK_FOR_INTERRUPTS();
	while (rb->next < rb->nends && cycle > rb->ends[rb->next])
		finish(rb);
	return rb->next < rb->nends;
}

static void
count_next_block(Rebuild *rb)
{
	rb->next++;
}

/* First pass: count each block's cycles whose owners can be read. */
static void
rebuild_count(int64 cycle, const LakeCycleOwner *owners, int nowners, void *arg)
{
	Rebuild    *rb = (Rebuild *) arg;

	if (rebuild_seek(rb, cycle, count_next_block) && nowners >= 0)
		rb->readable[rb->next]++;
}

/* Write the block being built, if whole, and begin the next one. */
static void
write_next_block(Rebuild *rb)
{
	MemoryContext old = MemoryContextSwitchTo(rb->cxt);

	if (block_whole(rb, rb->next))
		rb->rows += block_write(&rb->bb);
	MemoryContextReset(rb->cxt);
	rb->next++;
	if (rb->next < rb->nends)
		block_begin(&rb->bb, block_first(rb, rb->next));
	MemoryContextSwitchTo(old);
}

/* Second pass: the owners of the whole blocks. */
static void
rebuild_add(int64 cycle, const LakeCycleOwner *owners, int nowners, void *arg)
{
	Rebuild    *rb = (Rebuild *) arg;

	if (rebuild_seek(rb, cycle, write_next_block) && block_whole(rb, rb->next))
		block_add(cycle, owners, nowners, &rb->bb);
}

/*
 * Delete the index rows of the closed blocks, except those of the blocks
 * kept (not whole); rows past the last closed block are a concurrent
 * seal's, and stay.
 */
static void
rebuild_clear(Rebuild *rb)
{
	static SPIPlanPtr plan;
	Oid			types[3] = {INT8OID, INT8ARRAYOID, INT8ARRAYOID};
	Datum	   *firsts = palloc(sizeof(Datum) * rb->nends);
	Datum	   *lasts = palloc(sizeof(Datum) * rb->nends);
	int			nkept = 0;
	Datum		values[3];

	for (int i = 0; i < rb->nends; i++)
	{
		if (block_whole(rb, i))
			continue;
		ereport(WARNING,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("lake: the owner index of cycles " INT64_FORMAT " to " INT64_FORMAT " is kept as it is",
						block_first(rb, i), rb->ends[i]),
				 errdetail("The owners of only %d of its cycles can be read.", rb->readable[i]),
				 errhint("Trajectories across the damaged cycles stay refused with XX001.")));
		firsts[nkept] = Int64GetDatum(block_first(rb, i));
		lasts[nkept] = Int64GetDatum(rb->ends[i]);
		nkept++;
	}
	values[0] = Int64GetDatum(rb->ends[rb->nends - 1]);
	values[1] = PointerGetDatum(construct_array(firsts, nkept, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[2] = PointerGetDatum(construct_array(lasts, nkept, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	store_run(store_plan(&plan,
						 "DELETE FROM lake_data.owner_block b "
						 "WHERE b.first_cycle OPERATOR(pg_catalog.<=) $1 AND NOT EXISTS ("
						 "SELECT FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3)) AS k(first_cycle, last_cycle) "
						 "WHERE b.first_cycle OPERATOR(pg_catalog.>=) k.first_cycle "
						 "AND b.first_cycle OPERATOR(pg_catalog.<=) k.last_cycle)",
						 3, types),
			  values, SPI_OK_DELETE);
}

/*
 * Rewrite the rows of every closed block from the cycles' owner lists, as
 * the seals closed them (each closing cycle records it). No sealing lock:
 * closed blocks never change, and a seal that closes a block meanwhile
 * writes rows past the last one read here. Two passes over the owner
 * lists: which blocks can be rebuilt whole, then their rows, one block in
 * memory at a time.
 */
int64
seal_rebuild_owner_index(void)
{
	static SPIPlanPtr ends_plan;
	Rebuild		rb = {0};
	MemoryContext old;

	/* Rebuilds one at a time; seals go on. */
	if (!ConditionalLockDatabaseObject(store_relid("owner_block"), 0, 0, ExclusiveLock))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("the owner index is being rebuilt by another session"),
				 errhint("Wait for that lake.rebuild_owner_index() to finish.")));
	store_run(store_plan(&ends_plan,
						 "SELECT c.cycle FROM lake_data.cycle c "
						 "WHERE c.indexed_through OPERATOR(pg_catalog.=) c.cycle ORDER BY c.cycle",
						 0, NULL),
			  NULL, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return 0;				/* no block closed yet */
	rb.nends = (int) SPI_processed;
	rb.ends = palloc(sizeof(int64) * rb.nends);
	for (int i = 0; i < rb.nends; i++)
		rb.ends[i] = DatumGetInt64(store_colv(i, 1));
	rb.readable = palloc0(sizeof(int) * rb.nends);
	log_scan_owner_lists(0, GetLatestSnapshot(), rebuild_count, &rb);

	rebuild_clear(&rb);

	rb.cxt = AllocSetContextCreate(CurrentMemoryContext, "lake owner index rebuild",
								   ALLOCSET_DEFAULT_SIZES);
	rb.next = 0;
	old = MemoryContextSwitchTo(rb.cxt);
	block_begin(&rb.bb, block_first(&rb, 0));
	MemoryContextSwitchTo(old);
	log_scan_owner_lists(0, GetLatestSnapshot(), rebuild_add, &rb);
	while (rb.next < rb.nends)
		write_next_block(&rb);
	MemoryContextDelete(rb.cxt);
	return rb.rows;
}

int64
seal_run(void)
{
	double		started = (double) GetCurrentTimestamp() / 1000.0;
	CycleCut	cut;
	int64		base;
	int64		cycle;
	XLogRecPtr	lsn;
	HTAB	   *slots;
	HASHCTL		ctl;
	SealedOwner *owners;
	LakeCycleOwner *listed;		/* the cycle's owner list */
	uint8	   *list;
	LogIndexState index;
	int			nowners = 0;
	int64	   *positions;
	size_t		rawlen = LAKE_LANDINGS_HEADER;
	uint8	   *raw;
	size_t		pos;
	bytea	   *stored;
	int			nops = 0;
	Datum	   *op_rows;		/* lake_data.cast_operation, 5 columns a row */
	bool	   *nulls;

	store_connect();
	seal_lock();
	/* A second seal would cut again what the first, uncommitted, holds. */
	if (cycle_cut_held())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this transaction has already sealed a cycle"),
				 errhint("Call lake.seal() once per transaction.")));
	base = cycle_sealed_cycle();
	if (!cycle_cut(&cut, lake_cycle_max_casts))
	{
		store_finish();
		return 0;
	}
	index = check_fence(&cut, base);
	if (base == PG_INT64_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("seal refused: cycle " INT64_FORMAT " is the last cycle number", base)));
	cycle = base + 1;
	lsn = GetXLogInsertRecPtr();

	/*
	 * Positions continue from each owner's durable position, which only
	 * sealers change and we hold the sealing lock: it is stable here.
	 */
	ctl.keysize = sizeof(OwnerState *);
	ctl.entrysize = sizeof(OwnerSlot);
	ctl.hcxt = CurrentMemoryContext;
	slots = hash_create("lake seal owners", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	owners = palloc(sizeof(SealedOwner) * cut.ncasts);
	listed = palloc(sizeof(LakeCycleOwner) * cut.ncasts);
	positions = palloc(sizeof(int64) * cut.ncasts);
	op_rows = palloc(sizeof(Datum) * 5 * cut.ncasts);
	nulls = palloc0(sizeof(bool) * Max(14, 5 * cut.ncasts));	/* no column is NULL */

	for (uint64 off = cut.start; off < cut.end;)
	{
		CastRecord *r = cycle_record(off);

		off = cycle_next(r, off);
		if (r->len != 0)
		{
			LakeLanding l;

			landing_of(r, 0, &l);
			rawlen += lake_landing_size(&l);
		}
	}
	raw = palloc(rawlen);
	pos = lake_landings_put_header(raw, (uint32) cut.ncasts,
								   (LakeCycleId) {cycle, cut.epoch});

	for (uint64 off = cut.start; off < cut.end;)
	{
		CastRecord *r = cycle_record(off);
		OwnerSlot  *os;
		SealedOwner *so;
		bool		found;
		LakeLanding l;

		off = cycle_next(r, off);
		if (r->len == 0)
			continue;
		os = hash_search(slots, &r->owner, HASH_ENTER, &found);
		if (!found)
		{
			os->index = nowners++;
			so = &owners[os->index];
			so->owner = r->owner;
			so->phase = r->owner->phase;
			so->lap = r->owner->lap;
			so->position = r->owner->position;
			so->count = 0;
			listed[os->index].owner_id = r->owner_id;
			listed[os->index].first_position = so->position + 1;
		}
		so = &owners[os->index];
		so->position++;
		so->count++;
		so->lap = r->lap;
		so->phase = r->phase;	/* as the cast was validated: no lookup here */
		positions[r->seq - cut.first_seq] = so->position;

		landing_of(r, so->position, &l);
		pos += lake_landing_put(raw + pos, &l);

		if (r->flags & LANDING_OPERATION)
		{
			bytea	   *d = palloc(VARHDRSZ + LAKE_DIGEST_LEN);

			SET_VARSIZE(d, VARHDRSZ + LAKE_DIGEST_LEN);
			memcpy(VARDATA(d), r->digest, LAKE_DIGEST_LEN);
			op_rows[nops * 5] = Int32GetDatum(r->owner_id);
			op_rows[nops * 5 + 1] = PointerGetDatum(cstring_to_text_with_len(CAST_OPERATION(r), r->operation_len));
			op_rows[nops * 5 + 2] = PointerGetDatum(d);
			op_rows[nops * 5 + 3] = Int32GetDatum(cut.epoch);
			op_rows[nops * 5 + 4] = Int64GetDatum(r->seq);
			nops++;
		}
	}
	stored = encode_record((const char *) raw, pos);
	for (int i = 0; i < nowners; i++)
		listed[i].landings = (uint32) owners[i].count;
	list = palloc(lake_cycle_owners_bound((uint32) nowners));

	/*
	 * Close the block once it spans LAKE_BLOCK_CYCLES cycles or its owner
	 * lists hold LAKE_TAIL_OWNERS entries; before this cycle's row goes in,
	 * so the block's other cycles are read as stored.
	 */
	{
		int64		closed_through = index.index.indexed_through;

		if (lake_index_next(&index.index, cycle, (uint32) nowners, &index.index))
			close_block(closed_through + 1, cycle, listed, nowners);
	}
	{
		size_t		listlen = lake_cycle_owners_put(list, cycle, listed, (uint32) nowners);
		Datum		row[14] = {Int64GetDatum(cycle), Int32GetDatum(cut.epoch),
			Int64GetDatum(cut.first_seq), Int64GetDatum(cut.last_seq),
			Int32GetDatum(cut.ncasts), Int64GetDatum((int64) pos),
			Int64GetDatum((int64) (VARSIZE(stored) - VARHDRSZ)),
			TimestampTzGetDatum(GetCurrentTimestamp()), LSNGetDatum(lsn),
			Int64GetDatum(index.index.indexed_through), Int32GetDatum(index.index.tail_owners),
			PointerGetDatum(encode_record_raw((const char *) list, listlen)),
		PointerGetDatum(stored), Int16GetDatum((int16) GetDatabaseEncoding())};

		insert_rows(SEAL_CYCLE, 1, row, nulls);
	}
	if (nops > 0)
		insert_rows(SEAL_CAST_OPERATION, nops, op_rows, nulls);

	durable_commit();
	publish_at_commit(&cut, cycle, lsn, owners, nowners, positions, started);
	store_finish();
	return cycle;
}
