/*
 * logread.c — lake.trajectory, lake.log, lake.cycles and receipt lookups.
 *
 * A trajectory visits only the cycles lake_data.cycle_owner lists for the owner,
 * so its cost follows the owner's landings, not the length of the log.
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
#include "access.h"
#include "args.h"
#include "catalog/pg_type.h"
#include "codec.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lifecycle.h"
#include "logread.h"
#include "miscadmin.h"
#include "store_owner.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/snapmgr.h"

static int
landing_ignore(const LakeLanding *l, void *arg)
{
	return 0;
}

/*
 * Decode one stored cycle record and visit its landings. A damaged record
 * is XX001, or, when 'damaged' is given, is checked whole before any
 * landing is visited and handed to 'damaged' instead: a recovery must not
 * apply the prefix of a record it then finds broken.
 */
const char *
log_unwrap(Datum data, uint8_t **raw, size_t *len)
{
	bytea	   *stored = DatumGetByteaPP(data);
	const uint8_t *in = (const uint8_t *) VARDATA_ANY(stored);
	size_t		inlen = VARSIZE_ANY_EXHDR(stored);
	size_t		size = 0;
	LakeCodecStatus cst = lake_chunk_decoded_size(in, inlen, &size);

	*raw = NULL;
	*len = 0;
	if (cst == LAKE_CODEC_OK && size > MaxAllocSize)
		cst = LAKE_CODEC_TOO_BIG;
	if (cst == LAKE_CODEC_OK)
	{
		*raw = palloc(Max(size, 1));
		cst = lake_chunk_decode(store_decompression_context(), in, inlen, *raw, size, len);
	}
	return cst == LAKE_CODEC_OK ? NULL : lake_codec_status_text(cst);
}

static void
visit_record(int64 cycle, Datum data, LakeLandingVisitor visit, void *arg,
			 LogDamageHandler damaged)
{
	size_t		got;
	uint8_t    *raw;
	const char *why = log_unwrap(data, &raw, &got);
	LakeLandingStatus lst;

	if (why == NULL && damaged != NULL &&
		(lst = lake_landings_decode(raw, got, landing_ignore, NULL)) != LAKE_LANDING_OK)
		why = lake_landing_status_text(lst);
	if (why == NULL &&
		(lst = lake_landings_decode(raw, got, visit, arg)) != LAKE_LANDING_OK &&
		lst != LAKE_LANDING_STOPPED)
		why = lake_landing_status_text(lst);

	if (why != NULL && damaged != NULL)
		damaged(cycle, why, arg);
	else if (why != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("cycle " INT64_FORMAT " is damaged", cycle),
				 errdetail("%s", why)));
	if (raw != NULL)
		pfree(raw);
}

/* Decode one stored cycle and visit its landings (XX001 if damaged). */
static void
log_visit_cycle(int64 cycle, Datum data, LakeLandingVisitor visit, void *arg)
{
	visit_record(cycle, data, visit, arg, NULL);
}

bool
log_find_operation(int32 owner_id, const char *operation_id, LogReceipt *out)
{
	ScanKeyData key[2];
	Datum		values[5];
	bool		nulls[5];
	bytea	   *d;

	store_key_int4(&key[0], 1, owner_id);
	store_key_text(&key[1], 2, operation_id);
	if (!store_fetch("cast_operation", "cast_operation_pkey", GetLatestSnapshot(),
					 key, 2, ForwardScanDirection, values, nulls))
		return false;
	d = DatumGetByteaPP(values[2]);
	if (VARSIZE_ANY_EXHDR(d) != LAKE_DIGEST_LEN)
		elog(ERROR, "lake: stored cast digest has the wrong length");
	memcpy(out->digest, VARDATA_ANY(d), LAKE_DIGEST_LEN);
	out->epoch = DatumGetInt32(values[3]);
	out->seq = DatumGetInt64(values[4]);
	return true;
}

typedef struct FindSeq
{
	int64		seq;
	int32		owner_id;
	int64		position;
	bool		found;
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
	return 1;
}

bool
log_find_receipt(int32 epoch, int64 seq, LogReceipt *out)
{
	static SPIPlanPtr plan;
	Oid			types[2] = {INT4OID, INT8OID};
	Datum		values[2] = {Int32GetDatum(epoch), Int64GetDatum(seq)};
	bool		isnull;
	FindSeq		f = {seq, 0, 0, false};
	int64		cycle;

	if (SPI_execute_snapshot(store_plan(&plan,
										"SELECT c.cycle, c.lsn, c.data FROM lake_data.cycle c "
										"WHERE c.epoch OPERATOR(pg_catalog.=) $1 "
										"  AND c.last_seq OPERATOR(pg_catalog.>=) $2 "
										"  AND c.first_seq OPERATOR(pg_catalog.<=) $2",
										2, types),
							 values, NULL, GetLatestSnapshot(), InvalidSnapshot,
							 true, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "lake: receipt lookup failed");
	if (SPI_processed == 0)
		return false;
	cycle = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	out->lsn = DatumGetLSN(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	log_visit_cycle(cycle, SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull),
					find_seq, &f);
	if (!f.found)
		return false;
	out->epoch = epoch;
	out->seq = seq;
	out->cycle = cycle;
	out->position = f.position;
	out->owner_id = f.owner_id;
	return true;
}

/* ----------------------------------------------------------------------
 * Set-returning readers
 * ---------------------------------------------------------------------- */

/* Emits landings into a tuplestore, optionally of one owner only. */
typedef struct Emit
{
	ReturnSetInfo *rsinfo;
	LogCycle	at;
	int32		owner_id;		/* trajectory: only this owner; else 0 */
	int64		after_position;
	HTAB	   *names;			/* log: owner id -> name, of owners shown */
	bool		all;			/* log: also landings of unregistered owners */
} Emit;

typedef struct OwnerName
{
	int32		id;
	char		name[NAMEDATALEN];
} OwnerName;

static Datum
text_or_null(const char *s, size_t len, bool present, bool *isnull)
{
	*isnull = !present;
	return present ? PointerGetDatum(cstring_to_text_with_len(s, len)) : (Datum) 0;
}

static int
emit_landing(const LakeLanding *l, void *arg)
{
	Emit	   *e = (Emit *) arg;
	Datum		v[10];
	bool		n[10] = {0};
	int			i = 0;

	if (e->owner_id != 0 && (l->owner_id != e->owner_id || l->position <= e->after_position))
		return 0;
	if (e->owner_id == 0)
	{
		OwnerName  *on = hash_search(e->names, &l->owner_id, HASH_FIND, NULL);

		if (on == NULL && !e->all)
			return 0;
		v[i++] = Int64GetDatum(e->at.cycle);
		v[i] = on ? CStringGetTextDatum(on->name) : (Datum) 0;
		n[i++] = (on == NULL);
		v[i++] = Int64GetDatum(l->position);
	}
	else
	{
		v[i++] = Int64GetDatum(l->position);
		v[i++] = Int64GetDatum(e->at.cycle);
	}
	v[i++] = Int32GetDatum(e->at.epoch);
	v[i++] = Int64GetDatum(l->seq);
	v[i] = text_or_null(l->from_phase, l->from_len, l->flags & LANDING_MOVE, &n[i]);
	i++;
	v[i] = text_or_null(l->to_phase, l->to_len, l->flags & LANDING_MOVE, &n[i]);
	i++;
	v[i++] = Int64GetDatum(l->lap);
	n[i] = !(l->flags & LANDING_PAYLOAD);
	if (!n[i])
	{
		bytea	   *b = palloc(VARHDRSZ + l->payload_len);

		SET_VARSIZE(b, VARHDRSZ + l->payload_len);
		memcpy(VARDATA(b), l->payload, l->payload_len);
		v[i] = PointerGetDatum(b);
	}
	i++;
	v[i] = text_or_null(l->operation_id, l->operation_len, l->flags & LANDING_OPERATION, &n[i]);
	tuplestore_putvalues(e->rsinfo->setResult, e->rsinfo->setDesc, v, n);
	return 0;
}

static int64
arg_after(FunctionCallInfo fcinfo, int argno, const char *what)
{
	int64		after = lake_arg_int64(fcinfo, argno, what);

	if (after < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be negative, not " INT64_FORMAT, what, after)));
	return after;
}

/*
 * lake_data.cycle opened for reading records through its primary key, under
 * the active snapshot, one cycle in memory at a time.
 */
typedef struct CycleReader
{
	Relation	rel;
	Relation	idx;
	Snapshot	snapshot;
	AttrNumber	att_cycle;
	AttrNumber	att_epoch;
	AttrNumber	att_data;
	MemoryContext cxt;
} CycleReader;

static void
cycle_reader_open(CycleReader *cr)
{
	cr->rel = store_open("cycle", AccessShareLock);
	cr->idx = store_open("cycle_pkey", AccessShareLock);
	cr->snapshot = RegisterSnapshot(GetActiveSnapshot());
	cr->att_cycle = get_attnum(RelationGetRelid(cr->rel), "cycle");
	cr->att_epoch = get_attnum(RelationGetRelid(cr->rel), "epoch");
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

/* Visit the landings of one lake_data.cycle row. */
static void
cycle_reader_visit(CycleReader *cr, HeapTuple tup, LogCycle *where,
				   LakeLandingVisitor visit, LogDamageHandler damaged, void *arg)
{
	TupleDesc	desc = RelationGetDescr(cr->rel);
	bool		isnull;
	MemoryContext old;

	CHECK_FOR_INTERRUPTS();
	where->cycle = DatumGetInt64(heap_getattr(tup, cr->att_cycle, desc, &isnull));
	where->epoch = DatumGetInt32(heap_getattr(tup, cr->att_epoch, desc, &isnull));
	old = MemoryContextSwitchTo(cr->cxt);
	visit_record(where->cycle, heap_getattr(tup, cr->att_data, desc, &isnull),
				 visit, arg, damaged);
	MemoryContextSwitchTo(old);
	MemoryContextReset(cr->cxt);
}

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
	CycleReader cr;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;

	cycle_reader_open(&cr);
	ScanKeyInit(&key, cr.att_cycle, BTGreaterStrategyNumber, F_INT8GT,
				Int64GetDatum(after_cycle));
	scan = systable_beginscan_ordered(cr.rel, cr.idx, cr.snapshot, 1, &key);
	while (HeapTupleIsValid(tup = systable_getnext_ordered(scan, ForwardScanDirection)))
		cycle_reader_visit(&cr, tup, where, visit, damaged, arg);
	systable_endscan_ordered(scan);
	cycle_reader_close(&cr);
}

/*
 * Visit the landings of one owner above 'after_position', in position
 * order, reading only the cycles lake_data.cycle_owner lists for it: its
 * primary key (owner_id, cycle) gives them in cycle order, and each is
 * fetched by a probe of lake_data.cycle's. No plan is chosen, so the cost
 * follows the owner's cycles whatever the statistics say of the log.
 */
void
log_visit_owner(int32 owner_id, int64 after_position, LogCycle *where,
				LakeLandingVisitor visit, LogDamageHandler damaged, void *arg)
{
	CycleReader cr;
	Relation	orel;
	Relation	oidx;
	AttrNumber	att_cycle;
	AttrNumber	att_last;
	ScanKeyData okey;
	SysScanDesc oscan;
	HeapTuple	otup;

	cycle_reader_open(&cr);
	orel = store_open("cycle_owner", AccessShareLock);
	oidx = store_open("cycle_owner_pkey", AccessShareLock);
	att_cycle = get_attnum(RelationGetRelid(orel), "cycle");
	att_last = get_attnum(RelationGetRelid(orel), "last_position");
	store_key_int4(&okey, 1, owner_id);
	oscan = systable_beginscan_ordered(orel, oidx, cr.snapshot, 1, &okey);
	while (HeapTupleIsValid(otup = systable_getnext_ordered(oscan, ForwardScanDirection)))
	{
		bool		isnull;
		int64		cycle = DatumGetInt64(heap_getattr(otup, att_cycle, RelationGetDescr(orel), &isnull));
		ScanKeyData key;
		SysScanDesc scan;
		HeapTuple	tup;

		if (DatumGetInt64(heap_getattr(otup, att_last, RelationGetDescr(orel), &isnull)) <= after_position)
			continue;
		store_key_int8(&key, 1, cycle);
		scan = systable_beginscan_ordered(cr.rel, cr.idx, cr.snapshot, 1, &key);
		tup = systable_getnext_ordered(scan, ForwardScanDirection);
		if (HeapTupleIsValid(tup))
			cycle_reader_visit(&cr, tup, where, visit, damaged, arg);
		systable_endscan_ordered(scan);
	}
	systable_endscan_ordered(oscan);
	index_close(oidx, AccessShareLock);
	table_close(orel, AccessShareLock);
	cycle_reader_close(&cr);
}

PG_FUNCTION_INFO_V1(lake_trajectory);
PG_FUNCTION_INFO_V1(lake_log);
PG_FUNCTION_INFO_V1(lake_cycles);

Datum
lake_trajectory(PG_FUNCTION_ARGS)
{
	char	   *owner;
	Emit		e = {0};
	char	   *tenant;
	int32		lifecycle;

	lake_require_preload();
	owner = lake_arg_short_name(fcinfo, 0, "owner");
	e.after_position = arg_after(fcinfo, 1, "after_position");
	InitMaterializedSRF(fcinfo, 0);
	e.rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	store_connect();
	if (!store_owner_lookup(owner, &e.owner_id, &lifecycle, &tenant))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("owner \"%s\" does not exist", owner)));
	access_require_owner(tenant, owner);
	log_visit_owner(e.owner_id, e.after_position, &e.at, emit_landing, NULL, &e);
	store_finish();
	return (Datum) 0;
}

Datum
lake_log(PG_FUNCTION_ARGS)
{
	Emit		e = {0};
	int64		after_cycle;
	HASHCTL		ctl;
	OwnerRow   *rows;
	uint64		n;

	lake_require_preload();
	after_cycle = arg_after(fcinfo, 0, "after_cycle");
	InitMaterializedSRF(fcinfo, 0);
	e.rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	ctl.keysize = sizeof(int32);
	ctl.entrysize = sizeof(OwnerName);
	ctl.hcxt = CurrentMemoryContext;
	e.names = hash_create("lake owner names", 256, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	/*
	 * Only the landings of owners whose tenant the caller holds: the names
	 * looked up are those owners'; every landing of another is skipped.
	 */
	store_connect();
	e.all = access_all_tenants();
	rows = store_owner_rows(e.all ? InvalidOid : store_caller(), false, &n);
	for (uint64 i = 0; i < n; i++)
	{
		OwnerName  *on = hash_search(e.names, &rows[i].id, HASH_ENTER, NULL);

		strlcpy(on->name, rows[i].name, NAMEDATALEN);
	}
	log_scan_cycles(after_cycle, &e.at, emit_landing, NULL, &e);
	store_finish();
	return (Datum) 0;
}

Datum
lake_cycles(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan;
	ReturnSetInfo *rsinfo;
	Oid			types[1] = {INT8OID};
	Datum		values[1];

	lake_require_preload();
	values[0] = Int64GetDatum(arg_after(fcinfo, 0, "after_cycle"));
	InitMaterializedSRF(fcinfo, 0);
	rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	store_connect();
	store_fill(store_plan(&plan,
						  "SELECT c.cycle, c.epoch, c.sealed_at, c.casts, c.bytes, "
						  "       c.stored_bytes, c.lsn FROM lake_data.cycle c "
						  "WHERE c.cycle OPERATOR(pg_catalog.>) $1 ORDER BY c.cycle",
						  1, types),
			   values, rsinfo);
	store_finish();
	return (Datum) 0;
}
