/*
 * logread.c — reading the sealed log: one owner's landings through the
 * owner index, the whole log in cycle order, and receipt lookups.
 *
 * A trajectory visits only the cycles the owner index (owner_index.h)
 * names for the owner: its rows in lake_data.owner_block for the closed
 * blocks, then the owner lists of the cycles after the last closed block
 * (fewer than LAKE_BLOCK_CYCLES, with fewer than LAKE_TAIL_OWNERS owner
 * entries but for the newest, read without their landings). Its
 * cost follows the owner's landings, not the length of the log. The index
 * is checked as it is used: the owner's positions must run from 1 without
 * a gap to the last one the index claims, and up to where the owner is
 * known to have got to (LogReach), so a damaged or missing index entry is
 * XX001, never a shorter trajectory.
 * Cycles are read through lake_data.cycle's primary key, one in memory at
 * a time.
 * Receipt and operation lookups read with the latest snapshot: a seal is
 * not part of the caller's transaction, and a replay or an await must see
 * every cycle sealed so far whatever the caller's isolation level.
 */
#include "lake.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xlog.h"
#include "access/xlogrecovery.h"
#include "catalog/pg_type.h"
#include "codec.h"
#include "digest.h"
#include "encode.h"
#include "executor/spi.h"
#include "logread.h"
#include "miscadmin.h"
#include "owner_index.h"
#include "port/pg_bitutils.h"
#include "storage/proc.h"
#include "store.h"
#include "store_rel.h"
#include "store_row.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/snapmgr.h"

static int
landing_ignore(const LakeLanding *l, void *arg)
{
	return 0;
}

const char *
log_unwrap(Datum data, const int64 *declared, bool contain, uint8_t **raw, size_t *len)
{
	bytea	   *stored;
	const uint8_t *in;
	size_t		inlen;
	size_t		size = 0;
	LakeCodecStatus cst;

	*raw = NULL;
	*len = 0;
	if (DatumGetPointer(data) == NULL)
		return "its record reads as NULL";
	if (contain)
	{
		char	   *why;

		stored = store_detoast_contained(data, &why);
		if (stored == NULL)
			return psprintf("its stored bytes are unreadable: %s", why);
	}
	else
	{
		store_require_value(NULL, NULL, 0, data, "data");
		stored = DatumGetByteaPP(data);
	}
	in = (const uint8_t *) VARDATA_ANY(stored);
	inlen = VARSIZE_ANY_EXHDR(stored);
	cst = lake_chunk_decoded_size(in, inlen, false, &size);
	if (cst == LAKE_CODEC_OK && size > MaxAllocSize)
		cst = LAKE_CODEC_TOO_BIG;
	/* Allocated by the frame's header only when the row agrees with it. */
	if (cst == LAKE_CODEC_OK && declared != NULL &&
		(*declared < 0 || size != (size_t) *declared))
		cst = LAKE_CODEC_SIZE_MISMATCH;
	if (cst == LAKE_CODEC_OK)
	{
		*raw = palloc(Max(size, 1));
		cst = lake_chunk_decode(encode_decompression_context(), in, inlen, LAKE_PLACE_NONE,
								*raw, size, len);
	}
	/* A detoasted copy: a walk over many cycles must not keep them all. */
	if ((Pointer) stored != DatumGetPointer(data))
		pfree(stored);
	return cst == LAKE_CODEC_OK ? NULL : lake_codec_status_text(cst);
}

/*
 * Decode one stored cycle record and visit its landings: NULL, or why the
 * record is damaged. With 'whole_first' it is checked whole before any
 * landing is visited: a recovery must not apply the prefix of a record it
 * then finds broken.
 */
static const char *
visit_record(Datum data, LakeCycleId id, int64 bytes, LakeLandingVisitor visit,
			 void *arg, bool whole_first)
{
	size_t		got;
	uint8_t    *raw;
	const char *why = log_unwrap(data, &bytes, whole_first, &raw, &got);
	LakeLandingStatus lst;

	if (why == NULL && whole_first &&
		(lst = lake_landings_decode(raw, got, &id, landing_ignore, NULL)) != LAKE_LANDING_OK)
		why = lake_landing_status_text(lst);
	if (why == NULL &&
		(lst = lake_landings_decode(raw, got, &id, visit, arg)) != LAKE_LANDING_OK &&
		lst != LAKE_LANDING_STOPPED)
		why = lake_landing_status_text(lst);
	if (raw != NULL)
		pfree(raw);
	return why;
}

static void cycle_damaged_error(int64 cycle, const char *why) pg_attribute_noreturn();

static void
cycle_damaged_error(int64 cycle, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("cycle " INT64_FORMAT " is damaged", cycle),
			 errdetail("The check of the record found: %s.", why)));
}

/* Decode one stored cycle and visit its landings (XX001 if damaged). */
static void
log_visit_cycle(LakeCycleId id, Datum data, int64 bytes, LakeLandingVisitor visit,
				void *arg)
{
	const char *why = visit_record(data, id, bytes, visit, arg, false);

	if (why != NULL)
		cycle_damaged_error(id.cycle, why);
}

typedef struct OwnerList
{
	LakeCycleOwner *owners;
	int			n;
	int			cap;
} OwnerList;

static int
owner_list_add(const LakeCycleOwner *o, void *arg)
{
	OwnerList  *ol = (OwnerList *) arg;

	if (ol->n == ol->cap)
	{
		ol->cap = Max(8, ol->cap * 2);
		ol->owners = ol->owners == NULL ? palloc(sizeof(LakeCycleOwner) * ol->cap) :
			repalloc(ol->owners, sizeof(LakeCycleOwner) * ol->cap);
	}
	ol->owners[ol->n++] = *o;
	return 0;
}

/*
 * The owner list of the row of 'cycle' (lake_data.cycle.owners) into a
 * palloc'd array: NULL, or why it cannot be read. A list written for
 * another cycle is damaged: its owners are not this cycle's.
 */
static const char *
cycle_owner_list(Datum stored, int64 cycle, bool contain, OwnerList *ol)
{
	size_t		got;
	uint8_t    *raw;
	const char *why = log_unwrap(stored, NULL, contain, &raw, &got);
	LakeIndexStatus st;
	int64_t		listed = 0;

	memset(ol, 0, sizeof(*ol));
	if (why == NULL && (st = lake_cycle_owners_decode(raw, got, &listed, owner_list_add, ol)) != LAKE_INDEX_OK)
		why = lake_index_status_text(st);
	else if (why == NULL && listed != 0 && listed != cycle)
		why = psprintf("its owner list was written for cycle " INT64_FORMAT, (int64) listed);
	if (raw != NULL)
		pfree(raw);
	return why;
}

/* Owners entered in landing order, each with its first position and count. */
static int
owner_list_landing(const LakeLanding *l, void *arg)
{
	OwnerList  *ol = (OwnerList *) arg;

	for (int i = ol->n - 1; i >= 0; i--)
		if (ol->owners[i].owner_id == l->owner_id)
		{
			ol->owners[i].landings++;
			return 0;
		}
	{
		LakeCycleOwner o = {l->owner_id, l->position, 1};

		return owner_list_add(&o, ol);
	}
}

typedef struct FindSeq
{
	int64		seq;
	int32		owner_id;
	int64		position;
	const char *operation_id;	/* NULL: any */
	const uint8 *digest;		/* with operation_id: its content's */
	int32		live_epoch;		/* this server's writer epoch */
	bool		found;
	bool		operation_matches;	/* the landing is of this operation and content */
} FindSeq;

static int
find_seq(const LakeLanding *l, void *arg)
{
	FindSeq    *f = (FindSeq *) arg;

	if (l->seq != f->seq)
		return 0;
	f->position = l->position;
	f->owner_id = l->owner_id;
	f->found = true;
	f->operation_matches = f->operation_id != NULL &&
		(l->flags & LANDING_OPERATION) &&
		l->operation_len == strlen(f->operation_id) &&
		memcmp(l->operation_id, f->operation_id, l->operation_len) == 0;
	if (f->operation_matches)
	{
		uint8		digest[LAKE_DIGEST_LEN];

		lake_landing_digest(l, digest);
		f->operation_matches = memcmp(digest, f->digest, LAKE_DIGEST_LEN) == 0;
	}
	return 1;
}

static int
highest_seq(const LakeLanding *l, void *arg)
{
	int64	   *high = (int64 *) arg;

	*high = Max(*high, l->seq);
	return 0;
}

void
log_require_epoch_end(int32 epoch)
{
	static SPIPlanPtr plan;
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(epoch)};
	bool		isnull;

	/*
	 * The epoch's last row ('e'); without one, the last row of an earlier
	 * epoch ('p', which an epoch moved down would have become); and the row
	 * after whichever it is, which an epoch moved up would have become.
	 * Epochs only grow along the cycles, so these are the epoch's edges.
	 */
	if (store_execute(store_plan(&plan,
								 "WITH e AS (SELECT c.cycle, c.epoch, c.data, c.bytes, c.last_seq FROM lake_data.cycle c "
								 "           WHERE c.epoch OPERATOR(pg_catalog.=) $1 "
								 "           ORDER BY c.last_seq DESC, c.cycle DESC LIMIT 1), "
								 "     p AS (SELECT c.cycle, c.epoch, c.data, c.bytes, c.last_seq FROM lake_data.cycle c "
								 "           WHERE c.epoch OPERATOR(pg_catalog.<) $1 AND NOT EXISTS (SELECT FROM e) "
								 "           ORDER BY c.epoch DESC, c.last_seq DESC, c.cycle DESC LIMIT 1) "
								 "SELECT * FROM e UNION ALL SELECT * FROM p UNION ALL "
								 "SELECT n.cycle, n.epoch, n.data, n.bytes, n.last_seq FROM lake_data.cycle n "
								 "WHERE n.cycle OPERATOR(pg_catalog.=) (COALESCE((SELECT e.cycle FROM e), "
								 "      (SELECT p.cycle FROM p), 0) OPERATOR(pg_catalog.+) 1)",
								 1, types),
					  values, NULL, GetLatestSnapshot(), true, 3) != SPI_OK_SELECT)
		elog(ERROR, "lake: epoch end lookup failed");
	store_require_shape_of_plan(plan);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		int64		cycle = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		int32		row_epoch = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
		int64		last_seq = DatumGetInt64(SPI_getbinval(tup, desc, 5, &isnull));
		int64		high = -1;

		log_visit_cycle((LakeCycleId) {cycle, row_epoch}, SPI_getbinval(tup, desc, 3, &isnull),
						DatumGetInt64(SPI_getbinval(tup, desc, 4, &isnull)), highest_seq, &high);
		if (row_epoch == epoch && high > last_seq)
			cycle_damaged_error(cycle, psprintf("its record holds receipt (%d," INT64_FORMAT ") past its row's last_seq " INT64_FORMAT,
												epoch, high, last_seq));
	}
}

/*
 * The landing of receipt (epoch, seq) into 'out' and 'f'; false if no
 * cycle of that epoch reaches seq (never sealed: lost with its epoch).
 * An epoch's cycles cover its receipts without a gap, so a cycle past seq
 * whose range or record does not hold it is damage, XX001: never "lost".
 */
static bool
find_landing(int32 epoch, int64 seq, FindSeq *f, LogReceipt *out)
{
	static SPIPlanPtr plan;
	Oid			types[2] = {INT4OID, INT8OID};
	Datum		values[2] = {Int32GetDatum(epoch), Int64GetDatum(seq)};
	bool		isnull;
	int64		cycle;

	if (store_execute(store_plan(&plan,
								 "SELECT c.cycle, c.lsn, c.data, c.bytes, c.first_seq FROM lake_data.cycle c "
								 "WHERE c.epoch OPERATOR(pg_catalog.=) $1 "
								 "  AND c.last_seq OPERATOR(pg_catalog.>=) $2 "
								 "ORDER BY c.last_seq LIMIT 1",
								 2, types),
					  values, NULL, GetLatestSnapshot(), true, 1) != SPI_OK_SELECT)
		elog(ERROR, "lake: receipt lookup failed");
	store_require_shape_of_plan(plan);
	if (SPI_processed == 0)
		return false;
	cycle = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	if (DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5, &isnull)) > seq)
		cycle_damaged_error(cycle, psprintf("receipt (%d," INT64_FORMAT ") falls in a gap before it: its row's range or another cycle's row was altered",
											epoch, seq));
	out->lsn = DatumGetLSN(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));

	/*
	 * The lsn is handed out as a position the cycle is flushed at. A seal
	 * commits synchronously, so a visible cycle of this WAL stream (the
	 * live epoch) has its lsn at or below the WAL flushed here (replayed,
	 * on a standby); one past it is damage.
	 */
	if (epoch == f->live_epoch &&
		out->lsn > (RecoveryInProgress() ? GetXLogReplayRecPtr(NULL) : GetFlushRecPtr(NULL)))
		cycle_damaged_error(cycle, psprintf("its row's lsn %X/%X is past the WAL flushed here",
											LSN_FORMAT_ARGS(out->lsn)));
	f->seq = seq;
	f->found = false;
	log_visit_cycle((LakeCycleId) {cycle, epoch},
					SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull),
					DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull)),
					find_seq, f);
	if (!f->found)
		cycle_damaged_error(cycle, psprintf("its row's range covers receipt (%d," INT64_FORMAT ") but its record holds no landing of it",
											epoch, seq));
	out->epoch = epoch;
	out->seq = seq;
	out->cycle = cycle;
	out->position = f->position;
	out->owner_id = f->owner_id;
	return true;
}

bool
log_find_operation(int32 owner_id, const char *operation_id, int32 live_epoch,
				   LogReceipt *out)
{
	ScanKeyData key[2];
	Datum		values[5];
	bool		nulls[5];
	FindSeq		f = {.operation_id = operation_id, .digest = out->digest,
	.live_epoch = live_epoch};

	store_key_int4(&key[0], 1, owner_id);
	store_key_text(&key[1], 2, operation_id);
	if (!store_fetch("cast_operation", "cast_operation_pkey", GetLatestSnapshot(),
					 key, 2, ForwardScanDirection, values, nulls))
		return false;
	/*
	 * The row is outside any checksummed record: answer with its receipt
	 * only once the log shows that receipt is this owner's landing of this
	 * operation, with the content the row's digest stands for; never
	 * another owner's step, nor a retry judged by a false digest.
	 */
	if (!store_copy_digest(values[2], out->digest) ||
		!find_landing(DatumGetInt32(values[3]), DatumGetInt64(values[4]), &f, out) ||
		f.owner_id != owner_id || !f.operation_matches)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("the sealed record of cast operation \"%s\" is damaged", operation_id),
				 errdetail("Its lake_data.cast_operation row, with receipt (%d," INT64_FORMAT "), does not match this owner's landing of this operation.",
						   DatumGetInt32(values[3]), DatumGetInt64(values[4]))));
	return true;
}

bool
log_find_receipt(int32 epoch, int64 seq, int32 live_epoch, LogReceipt *out)
{
	FindSeq		f = {.live_epoch = live_epoch};

	return find_landing(epoch, seq, &f, out);
}

/*
 * lake_data.cycle opened for reading records through its primary key, under
 * the given snapshot, one cycle in memory at a time.
 */
typedef struct CycleReader
{
	Relation	rel;
	Relation	idx;
	Snapshot	snapshot;
	AttrNumber	att_cycle;
	AttrNumber	att_epoch;
	AttrNumber	att_indexed;
	AttrNumber	att_tail;
	AttrNumber	att_owners;
	AttrNumber	att_bytes;
	AttrNumber	att_data;
	MemoryContext cxt;
} CycleReader;

static void
cycle_reader_open(CycleReader *cr, Snapshot snapshot)
{
	cr->rel = store_open("cycle", AccessShareLock);
	cr->idx = store_open("cycle_pkey", AccessShareLock);
	cr->snapshot = RegisterSnapshot(snapshot);
	cr->att_cycle = get_attnum(RelationGetRelid(cr->rel), "cycle");
	cr->att_epoch = get_attnum(RelationGetRelid(cr->rel), "epoch");
	cr->att_indexed = get_attnum(RelationGetRelid(cr->rel), "indexed_through");
	cr->att_tail = get_attnum(RelationGetRelid(cr->rel), "tail_owners");
	cr->att_owners = get_attnum(RelationGetRelid(cr->rel), "owners");
	cr->att_bytes = get_attnum(RelationGetRelid(cr->rel), "bytes");
	cr->att_data = get_attnum(RelationGetRelid(cr->rel), "data");
	cr->cxt = AllocSetContextCreate(CurrentMemoryContext, "lake cycle",
									ALLOCSET_DEFAULT_SIZES);
}

static void
cycle_reader_close(CycleReader *cr)
{
	UnregisterSnapshot(cr->snapshot);
	MemoryContextDelete(cr->cxt);
	index_close(cr->idx, AccessShareLock);
	table_close(cr->rel, AccessShareLock);
}

/* Whether a fresh snapshot sees the row of 'cycle'. */
static bool
cycle_row_exists(CycleReader *cr, int64 cycle)
{
	ScanKeyData key[1];
	Snapshot	latest = RegisterSnapshot(GetLatestSnapshot());
	StoreScan  *scan;
	bool		found;

	store_key_int8(&key[0], 1, cycle);
	scan = store_scan_begin(cr->rel, cr->idx, latest, 1, key);
	found = HeapTupleIsValid(store_scan_next(scan, ForwardScanDirection));
	store_scan_end(scan);
	UnregisterSnapshot(latest);
	return found;
}

static Datum
cycle_column(CycleReader *cr, HeapTuple tup, AttrNumber att)
{
	bool		isnull;

	return heap_getattr(tup, att, RelationGetDescr(cr->rel), &isnull);
}

/*
 * Visit the landings of one lake_data.cycle row. A damaged record goes to
 * 'damaged' (checked whole first) with the cycle's owner list (nowners -1
 * when that is unreadable too), or is XX001.
 */
static void
cycle_reader_visit(CycleReader *cr, HeapTuple tup, LogCycle *where,
				   LakeLandingVisitor visit, LogDamageHandler damaged, void *arg)
{
	const char *why;
	MemoryContext old;

	CHECK_FOR_INTERRUPTS();
	where->cycle = DatumGetInt64(cycle_column(cr, tup, cr->att_cycle));
	where->epoch = DatumGetInt32(cycle_column(cr, tup, cr->att_epoch));
	old = MemoryContextSwitchTo(cr->cxt);
	why = visit_record(cycle_column(cr, tup, cr->att_data),
					   (LakeCycleId) {where->cycle, where->epoch},
					   DatumGetInt64(cycle_column(cr, tup, cr->att_bytes)),
					   visit, arg, damaged != NULL);
	if (why != NULL && damaged != NULL)
	{
		OwnerList	ol;

		if (cycle_owner_list(cycle_column(cr, tup, cr->att_owners), where->cycle, true, &ol) != NULL)
			ol.n = -1;
		damaged(where->cycle, why, ol.owners, ol.n, arg);
	}
	else if (why != NULL)
		cycle_damaged_error(where->cycle, why);
	MemoryContextSwitchTo(old);
	MemoryContextReset(cr->cxt);
}

/* An ordered scan of lake_data.cycle above 'after_cycle'. */
static StoreScan *
cycle_reader_scan(CycleReader *cr, int64 after_cycle, ScanKeyData *key)
{
	ScanKeyInit(key, cr->att_cycle, BTGreaterStrategyNumber, F_INT8GT,
				Int64GetDatum(after_cycle));
	return store_scan_begin(cr->rel, cr->idx, cr->snapshot, 1, key);
}

static void scan_cycles(int64 after_cycle, LogCycle *where, LakeLandingVisitor visit,
						LogDamageHandler damaged, void *arg, const bool *stop);

/*
 * Visit the landings of every cycle above 'after_cycle', in cycle order,
 * straight from lake_data.cycle's primary key under the active snapshot:
 * no executor, no cursor, one cycle in memory at a time. The log read and
 * recovery's replay both go through here.
 */
void
log_scan_cycles(int64 after_cycle, LogCycle *where, LakeLandingVisitor visit,
				LogDamageHandler damaged, void *arg)
{
	scan_cycles(after_cycle, where, visit, damaged, arg, NULL);
}

/* The same, ending early once '*stop' is set (NULL: never). */
static void
scan_cycles(int64 after_cycle, LogCycle *where, LakeLandingVisitor visit,
			LogDamageHandler damaged, void *arg, const bool *stop)
{
	CycleReader cr;
	ScanKeyData key;
	StoreScan  *scan;
	HeapTuple	tup;
	int64		next;

	if (after_cycle == PG_INT64_MAX)
		return;					/* no cycle is above it (and next would overflow) */
	next = Max(after_cycle, 0) + 1;
	cycle_reader_open(&cr, GetActiveSnapshot());
	scan = cycle_reader_scan(&cr, after_cycle, &key);
	while (!(stop != NULL && *stop) &&
		   HeapTupleIsValid(tup = store_scan_next(scan, ForwardScanDirection)))
	{
		int64		cycle = DatumGetInt64(cycle_column(&cr, tup, cr.att_cycle));

		/*
		 * Seals number cycles one after another and none is ever deleted:
		 * a gap is a lost cycle, whose owners are unknown.
		 */
		if (cycle != next)
		{
			char	   *why = psprintf("it is missing (the next cycle stored is " INT64_FORMAT ")",
									   cycle);

			if (damaged == NULL)
				cycle_damaged_error(next, why);
			damaged(next, why, NULL, -1, arg);
		}
		next = cycle + 1;
		cycle_reader_visit(&cr, tup, where, visit, damaged, arg);
	}
	store_scan_end(scan);
	cycle_reader_close(&cr);
}

void
log_require_sealed_cycle(int64 cycle)
{
	CycleReader cr;
	bool		found;

	if (cycle <= 0)
		return;
	cycle_reader_open(&cr, GetActiveSnapshot());
	found = cycle_row_exists(&cr, cycle);
	cycle_reader_close(&cr);
	if (!found)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("cycle " INT64_FORMAT " is missing", cycle),
				 errdetail("Its seal committed, but lake_data.cycle has no row of it: the table was altered.")));
}

/*
 * The owner list of every cycle above 'after_cycle', in cycle order, under
 * 'snapshot'. A damaged list is rebuilt from the cycle's landings; when
 * those are damaged too, the visitor gets nowners -1.
 */
void
log_scan_owner_lists(int64 after_cycle, Snapshot snapshot,
					 LogOwnerListVisitor visit, void *arg)
{
	CycleReader cr;
	ScanKeyData key;
	StoreScan  *scan;
	HeapTuple	tup;

	cycle_reader_open(&cr, snapshot);
	scan = cycle_reader_scan(&cr, after_cycle, &key);
	while (HeapTupleIsValid(tup = store_scan_next(scan, ForwardScanDirection)))
	{
		int64		cycle = DatumGetInt64(cycle_column(&cr, tup, cr.att_cycle));
		MemoryContext old = MemoryContextSwitchTo(cr.cxt);
		OwnerList	ol;

		if (cycle_owner_list(cycle_column(&cr, tup, cr.att_owners), cycle, true, &ol) != NULL)
		{
			LakeCycleId id = {cycle, DatumGetInt32(cycle_column(&cr, tup, cr.att_epoch))};

			memset(&ol, 0, sizeof(ol));
			if (visit_record(cycle_column(&cr, tup, cr.att_data), id,
							 DatumGetInt64(cycle_column(&cr, tup, cr.att_bytes)),
							 owner_list_landing, &ol, true) != NULL)
				ol.n = -1;
		}
		MemoryContextSwitchTo(old);
		visit(cycle, ol.owners, ol.n, arg);
		MemoryContextReset(cr.cxt);
	}
	store_scan_end(scan);
	cycle_reader_close(&cr);
}

/* The index state of the row found (see log_index_state). */
static bool
index_state_of(CycleReader *cr, StoreScan *scan, LogIndexState *st)
{
	HeapTuple	tup = store_scan_next(scan, BackwardScanDirection);

	if (!HeapTupleIsValid(tup))
		return false;
	st->cycle = DatumGetInt64(cycle_column(cr, tup, cr->att_cycle));
	st->index.indexed_through = DatumGetInt64(cycle_column(cr, tup, cr->att_indexed));
	st->index.tail_owners = DatumGetInt32(cycle_column(cr, tup, cr->att_tail));
	return true;
}

/*
 * The owner index as of the newest cycle, under 'snapshot': false when
 * there is no cycle.
 */
bool
log_index_state(Snapshot snapshot, LogIndexState *st)
{
	CycleReader cr;
	StoreScan  *scan;
	bool		found;

	cycle_reader_open(&cr, snapshot);
	scan = store_scan_begin(cr.rel, cr.idx, cr.snapshot, 0, NULL);
	found = index_state_of(&cr, scan, st);
	store_scan_end(scan);
	cycle_reader_close(&cr);
	return found;
}

/* The row of 'cycle' under the reader's snapshot, copied into its context. */
static HeapTuple
cycle_row(CycleReader *cr, int64 cycle)
{
	ScanKeyData key;
	StoreScan  *scan;
	HeapTuple	tup;
	MemoryContext old;

	ScanKeyInit(&key, cr->att_cycle, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(cycle));
	scan = store_scan_begin(cr->rel, cr->idx, cr->snapshot, 1, &key);
	tup = store_scan_next(scan, ForwardScanDirection);
	old = MemoryContextSwitchTo(cr->cxt);
	tup = HeapTupleIsValid(tup) ? heap_copytuple(tup) : NULL;
	MemoryContextSwitchTo(old);
	store_scan_end(scan);
	return tup;
}

bool
log_index_state_derive(Snapshot snapshot, int64 cycle, LogIndexState *st)
{
	CycleReader cr;
	LakeIndexState before = {0, 0};
	HeapTuple	tup;
	OwnerList	ol;
	bool		ok = true;

	cycle_reader_open(&cr, snapshot);
	if (cycle > 1)
	{
		tup = cycle_row(&cr, cycle - 1);
		ok = tup != NULL;
		if (ok)
		{
			before.indexed_through = DatumGetInt64(cycle_column(&cr, tup, cr.att_indexed));
			before.tail_owners = DatumGetInt32(cycle_column(&cr, tup, cr.att_tail));
			ok = lake_index_state_valid(&before, cycle - 1);
		}
	}
	if (ok)
	{
		MemoryContext old = MemoryContextSwitchTo(cr.cxt);

		tup = cycle_row(&cr, cycle);
		ok = tup != NULL &&
			cycle_owner_list(cycle_column(&cr, tup, cr.att_owners), cycle, true, &ol) == NULL;
		MemoryContextSwitchTo(old);
	}
	if (ok)
	{
		(void) lake_index_next(&before, cycle, (uint32) ol.n, &st->index);
		st->cycle = cycle;
	}
	cycle_reader_close(&cr);
	return ok;
}

/* ----------------------------------------------------------------------
 * One owner's landings, through the owner index
 * ---------------------------------------------------------------------- */

typedef struct OwnerWalk
{
	CycleReader cr;
	int32		owner_id;
	int64		after;			/* visit only positions above this */
	int64		expect;			/* the position the owner's next landing must have */
	int64		gap;			/* a landing found at another position, or 0 */
	bool		done;			/* the visitor stopped, or damage was reported */
	bool		rescan;			/* the index is damaged: read the log itself */
	int64		revisit_through;	/* cycles up to here may repeat landings given */
	int64		scan_after;		/* position 'expect' is in a cycle above this one */
	LogCycle   *where;
	LakeLandingVisitor visit;
	LogDamageHandler damaged;
	void	   *arg;
} OwnerWalk;

/*
 * A recovery's walk read past damage to the owner index (the blocks or a
 * cycle's owner list) in the log itself: said once per transaction (every
 * owner's walk may meet the same damage), so that the damage is known
 * before a reader is refused.
 */
static void
warn_index_damage(const OwnerWalk *w, int64 cycle, const char *why)
{
	static LocalTransactionId warned_in = InvalidLocalTransactionId;

	if (warned_in == MyProc->lxid)
		return;
	warned_in = MyProc->lxid;
	ereport(WARNING,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("the owner index of owner id %d is damaged at cycle " INT64_FORMAT,
					w->owner_id, cycle),
			 errdetail("The check of the entry found: %s. The owner's landings were read from the log itself; readers of its trajectory get XX001.", why),
			 errhint("lake.rebuild_owner_index() writes the index again from the log.")));
}

/*
 * The index does not match the log: XX001 for a reader. A recovery does
 * not judge the owner by a damaged index (it is derived from the log, and
 * one damaged owner list in the tail is in every owner's walk): it reads
 * the log itself from where the walk last found the owner.
 */
static void
walk_damaged(OwnerWalk *w, int64 cycle, const char *why)
{
	if (w->damaged == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("the owner index of owner id %d is damaged at cycle " INT64_FORMAT,
						w->owner_id, cycle),
				 errdetail("The check of the entry found: %s.", why)));
	warn_index_damage(w, cycle, why);
	w->rescan = true;
	w->done = true;
}

static int
walk_landing(const LakeLanding *l, void *arg)
{
	OwnerWalk  *w = (OwnerWalk *) arg;

	if (l->owner_id != w->owner_id)
		return 0;
	if (l->position < w->expect && w->where->cycle <= w->revisit_through)
		return 0;				/* given by its block already */
	if (l->position != w->expect)
	{
		w->gap = l->position;
		return 1;
	}
	w->expect++;
	w->scan_after = w->where->cycle - 1;	/* it may hold the next one too */
	if (l->position > w->after && w->visit(l, w->arg) != 0)
	{
		w->done = true;
		return 1;
	}
	return 0;
}

/*
 * A damaged cycle record the index names for the owner, by the rule of the
 * worker's recovery: it stops the owner (the caller's handler, with the
 * caller's argument) only when its owner list gives the owner landings not
 * applied yet, or is unreadable; landings already applied are passed. An
 * owner list without the owner, or not where the index says, is the
 * index's damage: the log is read instead.
 */
static void
walk_cycle_damaged(int64 cycle, const char *why, const LakeCycleOwner *owners,
				   int nowners, void *arg)
{
	OwnerWalk  *w = (OwnerWalk *) arg;
	const LakeCycleOwner *mine = NULL;

	for (int i = 0; i < nowners && mine == NULL; i++)
		if (owners[i].owner_id == w->owner_id)
			mine = &owners[i];
	if (nowners >= 0 && (mine == NULL || mine->first_position != w->expect))
	{
		warn_index_damage(w, cycle, mine == NULL ?
						  "the cycle's owner list does not hold the owner" :
						  psprintf("the cycle's owner list starts the owner at position " INT64_FORMAT " where " INT64_FORMAT " was expected",
								   mine->first_position, w->expect));
		w->rescan = true;
		w->done = true;
		return;
	}
	if (mine != NULL && mine->first_position + mine->landings - 1 <= w->after)
	{
		w->expect += mine->landings;
		w->scan_after = cycle;
		return;
	}
	w->damaged(cycle, why, owners, nowners, w->arg);
	w->done = true;
}

/* Visit the owner's landings in one cycle row, checking their positions. */
static void
walk_cycle(OwnerWalk *w, HeapTuple tup)
{
	int64		cycle = DatumGetInt64(cycle_column(&w->cr, tup, w->cr.att_cycle));

	w->gap = 0;
	cycle_reader_visit(&w->cr, tup, w->where, walk_landing,
					   w->damaged != NULL ? walk_cycle_damaged : NULL, w);
	if (w->gap != 0 && !w->done)
		walk_damaged(w, cycle, psprintf("the cycle holds position " INT64_FORMAT " where " INT64_FORMAT " was expected",
										w->gap, w->expect));
}

/* The positions the index claims up to here, against those found. */
static void
walk_check_end(OwnerWalk *w, int64 cycle, int64 last)
{
	if (!w->done && w->expect != last + 1)
		walk_damaged(w, cycle, psprintf("the index claims positions up to " INT64_FORMAT " but the cycles hold them up to " INT64_FORMAT,
										last, w->expect - 1));
}

/* The owner's block rows, for the blocks up to 'closed' (the last closed cycle). */
static void
walk_blocks(OwnerWalk *w, int64 closed)
{
	Relation	brel = store_open("owner_block", AccessShareLock);
	Relation	bidx = store_open("owner_block_pkey", AccessShareLock);
	AttrNumber	att_first = get_attnum(RelationGetRelid(brel), "first_cycle");
	AttrNumber	att_entry = get_attnum(RelationGetRelid(brel), "entry");
	ScanKeyData bkey;
	StoreScan  *bscan;
	HeapTuple	btup;

	store_key_int4(&bkey, 1, w->owner_id);
	bscan = store_scan_begin(brel, bidx, w->cr.snapshot, 1, &bkey);
	while (!w->done && HeapTupleIsValid(btup = store_scan_next(bscan, ForwardScanDirection)))
	{
		bool		isnull;
		int64		first_cycle = DatumGetInt64(heap_getattr(btup, att_first, RelationGetDescr(brel), &isnull));
		uint8_t    *raw;
		size_t		got;
		const char *why = log_unwrap(heap_getattr(btup, att_entry, RelationGetDescr(brel), &isnull), NULL,
									 w->damaged != NULL, &raw, &got);
		LakeOwnerBlock b;
		LakeIndexStatus st;

		CHECK_FOR_INTERRUPTS();
		if (why == NULL && (st = lake_owner_block_decode(raw, got, &b)) != LAKE_INDEX_OK)
			why = lake_index_status_text(st);
		if (why == NULL && (b.owner_id != w->owner_id || b.first_cycle != first_cycle))
			why = "the entry belongs to another owner or block";
		if (why == NULL && first_cycle > closed)
			why = "the entry is for a block not closed yet";
		if (why == NULL && b.first_position != w->expect)
			why = psprintf("the entry starts at position " INT64_FORMAT " where " INT64_FORMAT " was expected",
						   b.first_position, w->expect);
		if (raw != NULL)
			pfree(raw);
		if (why != NULL)
		{
			walk_damaged(w, first_cycle, why);
			break;
		}
		if (b.last_position <= w->after)
		{
			w->expect = b.last_position + 1;	/* nothing to visit: no read */
			/* Its last landing in the block is in the bitmap's highest cycle. */
			w->scan_after = first_cycle - 1 +
				(b.cycles != 0 ? pg_leftmost_one_pos64(b.cycles) : 0);
			continue;
		}
		for (int i = 0; i < LAKE_BLOCK_CYCLES && !w->done; i++)
		{
			ScanKeyData key;
			StoreScan  *scan;
			HeapTuple	tup;

			if (!(b.cycles & ((uint64) 1 << i)))
				continue;
			store_key_int8(&key, 1, first_cycle + i);
			scan = store_scan_begin(w->cr.rel, w->cr.idx, w->cr.snapshot, 1, &key);
			tup = store_scan_next(scan, ForwardScanDirection);
			if (HeapTupleIsValid(tup))
				walk_cycle(w, tup);
			else
				walk_damaged(w, first_cycle + i, "the cycle the index names is missing");
			store_scan_end(scan);
		}
		walk_check_end(w, first_cycle, b.last_position);
	}
	store_scan_end(bscan);
	index_close(bidx, AccessShareLock);
	table_close(brel, AccessShareLock);
}

/*
 * The cycles after 'from', through their owner lists: the tail after the
 * last closed block ('closed'), and before it any closed cycles the caller
 * wants read again, whose landings the blocks may have given already.
 */
static void
walk_tail(OwnerWalk *w, int64 from, int64 closed)
{
	ScanKeyData key;
	StoreScan  *scan;
	HeapTuple	tup;
	int64		next = Max(from, 0) + 1;

	w->revisit_through = closed;
	scan = cycle_reader_scan(&w->cr, from, &key);
	while (!w->done && HeapTupleIsValid(tup = store_scan_next(scan, ForwardScanDirection)))
	{
		int64		cycle = DatumGetInt64(cycle_column(&w->cr, tup, w->cr.att_cycle));
		OwnerList	ol;
		const char *why;
		const LakeCycleOwner *mine = NULL;

		CHECK_FOR_INTERRUPTS();
		/* A lost cycle's owners are unknown: it may have held this one's. */
		if (cycle != next)
		{
			walk_damaged(w, next, psprintf("the cycle is missing (the next cycle stored is " INT64_FORMAT ")",
										   cycle));
			break;
		}
		next = cycle + 1;
		why = cycle_owner_list(cycle_column(&w->cr, tup, w->cr.att_owners), cycle, w->damaged != NULL, &ol);
		if (why != NULL && w->damaged != NULL)
		{
			/*
			 * A recovery reads the cycle's record instead, which names its
			 * owners too: one damaged list is in every owner's walk.
			 */
			warn_index_damage(w, cycle, psprintf("its owner list is damaged: %s", why));
			walk_cycle(w, tup);
			continue;
		}
		if (why != NULL)
		{
			walk_damaged(w, cycle, psprintf("its owner list is damaged: %s", why));
			break;
		}
		for (int i = 0; i < ol.n && mine == NULL; i++)
			if (ol.owners[i].owner_id == w->owner_id)
				mine = &ol.owners[i];
		if (mine != NULL && cycle <= w->revisit_through &&
			mine->first_position + mine->landings - 1 < w->expect)
			;					/* given by its block already */
		else if (mine != NULL && mine->first_position != w->expect)
			walk_damaged(w, cycle, psprintf("the owner list starts the owner at position " INT64_FORMAT " where " INT64_FORMAT " was expected",
											mine->first_position, w->expect));
		else if (mine != NULL && mine->first_position + mine->landings - 1 <= w->after)
		{
			w->expect += mine->landings;	/* nothing to visit: no decoding */
			w->scan_after = cycle - 1;
		}
		else if (mine != NULL)
		{
			int64		last = mine->first_position + mine->landings - 1;

			walk_cycle(w, tup);
			walk_check_end(w, cycle, last);
		}
		if (ol.owners != NULL)
			pfree(ol.owners);
	}
	store_scan_end(scan);
}

/* The owner's landings met by a scan of the log, in position order. */
static int
scan_landing(const LakeLanding *l, void *arg)
{
	OwnerWalk  *w = (OwnerWalk *) arg;

	if (w->done || l->owner_id != w->owner_id || l->position < w->expect)
		return w->done;
	if (l->position != w->expect)
	{
		w->damaged(w->where->cycle,
				   psprintf("the log holds position " INT64_FORMAT " where " INT64_FORMAT " was expected",
							l->position, w->expect),
				   NULL, -1, w->arg);
		w->done = true;
		return 1;
	}
	w->expect++;
	if (l->position > w->after && w->visit(l, w->arg) != 0)
		w->done = true;
	return w->done;
}

/*
 * A damaged cycle met by the scan stops the owner only when its owner
 * list gives it landings not applied yet, or is unreadable: the rule of
 * the worker's recovery.
 */
static void
scan_damaged(int64 cycle, const char *why, const LakeCycleOwner *owners,
			 int nowners, void *arg)
{
	OwnerWalk  *w = (OwnerWalk *) arg;
	bool		mine = nowners < 0;

	for (int i = 0; i < nowners && !mine; i++)
		mine = owners[i].owner_id == w->owner_id &&
			owners[i].first_position + owners[i].landings - 1 >= w->expect;
	if (w->done || !mine)
		return;
	w->damaged(cycle, why, owners, nowners, w->arg);
	w->done = true;
}

/*
 * Visit the landings of one owner above 'after_position', in position
 * order, reading only the cycles the owner index names for it. No plan is
 * chosen, so the cost follows the owner's cycles whatever the statistics
 * say of the log. All reads share one snapshot: the closed blocks it sees
 * are exactly those up to the newest cycle it sees.
 */
void
log_visit_owner(int32 owner_id, int64 after_position, int64 after_cycle,
				const LogReach *reach, LogCycle *where, LakeLandingVisitor visit,
				LogDamageHandler damaged, void *arg)
{
	OwnerWalk	w = {0};
	StoreScan  *scan;
	LogIndexState st;
	bool		any;

	cycle_reader_open(&w.cr, GetActiveSnapshot());
	w.owner_id = owner_id;
	w.after = after_position;
	w.expect = 1;
	w.where = where;
	w.visit = visit;
	w.damaged = damaged;
	w.arg = arg;

	/* The newest cycle (the last entry of the primary key) says where the tail starts. */
	scan = store_scan_begin(w.cr.rel, w.cr.idx, w.cr.snapshot, 0, NULL);
	any = index_state_of(&w.cr, scan, &st);
	store_scan_end(scan);

	if (any && !lake_index_state_valid(&st.index, st.cycle))
		walk_damaged(&w, st.cycle, psprintf("the cycle says the index ends at cycle " INT64_FORMAT,
											st.index.indexed_through));
	else if (any)
	{
		walk_blocks(&w, st.index.indexed_through);

		/*
		 * Where the owner's head is not known (a quarantined owner), the
		 * blocks may lack its later landings: a block closed over a cycle
		 * it could not read (lost, or put back since) leaves that cycle's
		 * owners out. The owner lists after the last cycle the blocks
		 * found it in are read as the tail's are.
		 */
		walk_tail(&w, after_cycle < 0 ? Min(w.scan_after, st.index.indexed_through) : st.index.indexed_through,
				  st.index.indexed_through);
		/* Nothing after the last position found shows its entry is missing. */
		if (!w.done && reach != NULL && reach->cycle <= st.cycle &&
			w.expect - 1 < reach->position)
			walk_damaged(&w, st.cycle, psprintf("the index ends at position " INT64_FORMAT " but the owner reached position " INT64_FORMAT " by cycle " INT64_FORMAT,
												w.expect - 1, reach->position, reach->cycle));
	}
	/*
	 * A reach past the newest cycle this snapshot sees is a seal that
	 * committed since, whose row a fresh snapshot sees; without it, the
	 * newest rows were deleted, and the walk would end short of the owner.
	 */
	if (reach != NULL && reach->cycle > 0 && (!any || reach->cycle > st.cycle) &&
		!cycle_row_exists(&w.cr, reach->cycle))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("cycle " INT64_FORMAT " is missing", reach->cycle),
				 errdetail("Owner id %d reached position " INT64_FORMAT " by it, but lake_data.cycle has no row of it: the table was altered.",
						   owner_id, reach->position)));
	cycle_reader_close(&w.cr);
	if (w.rescan)
	{
		/*
		 * From where the walk last found the owner, or from the first cycle
		 * that can hold a landing not applied yet, whichever is later: only
		 * the landings above 'after' are looked for, gap-free from there.
		 */
		w.done = false;
		w.expect = Max(w.expect, w.after + 1);
		scan_cycles(Max(w.scan_after, after_cycle), where, scan_landing, scan_damaged, &w,
					&w.done);
	}
}
