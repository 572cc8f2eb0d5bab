/*
 * store_row.c — rows of lake_data's tables, through the table AM: inserted
 * and updated with their index entries as the executor would, fetched by
 * an index point lookup, formed and deformed at the width lake made each
 * table with; and stored values whose damage a reader contains.
 */
#include "lake.h"

#include "access/detoast.h"
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/toast_compression.h"
#include "access/skey.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_collation.h"
#include "executor/executor.h"
#include "schema.h"
#include "store_rel.h"
#include "store_row.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

/*
 * Insert one row into an open table and its indexes as an INSERT would:
 * unique indexes checked (waiting for an in-progress inserter of the same
 * key, as INSERT waits), partial indexes' predicates evaluated, large
 * values TOASTed. The caller's later reads see it (the command counter is
 * advanced).
 */
void
store_insert_sized(Relation rel, Datum *values, bool *nulls, int width)
{
	EState	   *estate = CreateExecutorState();
	ResultRelInfo *rri = makeNode(ResultRelInfo);
	TupleTableSlot *slot;
	List	   *recheck;

	InitResultRelInfo(rri, rel, 1, NULL, 0);
	ExecOpenIndices(rri, false);
	slot = ExecInitExtraTupleSlot(estate, RelationGetDescr(rel), &TTSOpsHeapTuple);
	ExecStoreHeapTuple(store_form(rel, values, nulls, width), slot, true);
	table_tuple_insert(rel, slot, GetCurrentCommandId(true), 0, NULL);
	recheck = ExecInsertIndexTuples(rri, slot, estate, false, false, NULL, NIL);
	list_free(recheck);
	ExecCloseIndices(rri);
	ExecResetTupleTable(estate->es_tupleTable, false);
	FreeExecutorState(estate);
	CommandCounterIncrement();
}

/*
 * Replace the row at 'otid' of an open table, as an UPDATE without a
 * concurrent writer would (one is an error): new index entries only when
 * the update is not HOT. The caller's later reads see it.
 */
void
store_update(Relation rel, ItemPointer otid, Datum *values, bool *nulls)
{
	EState	   *estate = CreateExecutorState();
	ResultRelInfo *rri = makeNode(ResultRelInfo);
	TupleTableSlot *slot;
	bool		update_indexes;

	InitResultRelInfo(rri, rel, 1, NULL, 0);
	ExecOpenIndices(rri, false);
	slot = ExecInitExtraTupleSlot(estate, RelationGetDescr(rel), &TTSOpsHeapTuple);
	ExecStoreHeapTuple(heap_form_tuple(RelationGetDescr(rel), values, nulls), slot, true);
	simple_table_tuple_update(rel, otid, slot, GetActiveSnapshot(), &update_indexes);

	/*
	 * Not HOT (the page is full): new index entries, inserted as an INSERT's
	 * are. As an UPDATE's, the executor would read the columns the update
	 * changed from a range table this bare EState does not have (a SIGSEGV
	 * in ExecGetUpdatedCols); that only gives the index a hint for its
	 * bottom-up deletion, of no use to the one row we update.
	 */
	if (update_indexes)
		list_free(ExecInsertIndexTuples(rri, slot, estate, false, false, NULL, NIL));
	ExecCloseIndices(rri);
	ExecResetTupleTable(estate->es_tupleTable, false);
	FreeExecutorState(estate);
	CommandCounterIncrement();
}

void
store_key_int4(ScanKeyData *key, AttrNumber att, int32 value)
{
	ScanKeyInit(key, att, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(value));
}

void
store_key_int8(ScanKeyData *key, AttrNumber att, int64 value)
{
	ScanKeyInit(key, att, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(value));
}

void
store_key_text(ScanKeyData *key, AttrNumber att, const char *value)
{
	ScanKeyEntryInitialize(key, 0, att, BTEqualStrategyNumber, InvalidOid,
						   DEFAULT_COLLATION_OID, F_TEXTEQ, CStringGetTextDatum(value));
}

/* An opaque key (a tenant, an operation id): a COLLATE "C" column's. */
void
store_key_id(ScanKeyData *key, AttrNumber att, const char *value)
{
	ScanKeyEntryInitialize(key, 0, att, BTEqualStrategyNumber, InvalidOid,
						   C_COLLATION_OID, F_TEXTEQ, CStringGetTextDatum(value));
}

/*
 * The first row of 'rel' through 'idx' matching the keys, scanning forward
 * or (for "the highest") backward; its columns are copied into
 * values/nulls, which have room for 'room' columns. False if there is
 * none. The snapshot is the caller's choice; InvalidSnapshot means what
 * SPI would use: a fresh one in READ COMMITTED, the transaction's
 * otherwise.
 */
static int	table_width(Relation rel, int width);

static bool
store_fetch_in(Relation rel, Relation idx, Snapshot snapshot,
			   ScanKeyData *keys, int nkeys, ScanDirection dir,
			   Datum *values, bool *nulls, int room)
{
	StoreScan  *scan;
	HeapTuple	tup;
	bool		found;

	(void) table_width(rel, room);
	if (snapshot == InvalidSnapshot)
		snapshot = GetTransactionSnapshot();
	scan = store_scan_begin(rel, idx, snapshot, nkeys, keys);
	tup = store_scan_next(scan, dir);
	found = HeapTupleIsValid(tup);
	if (found)
		store_deform(rel, heap_copytuple(tup), values, nulls, room);
	store_scan_end(scan);
	if (found)
		store_require_columns(RelationGetDescr(rel), nulls, RelationGetRelationName(rel));
	return found;
}

struct StoreScan
{
	IndexScanDesc scan;
	TupleTableSlot *slot;
};

StoreScan *
store_scan_begin(Relation rel, Relation idx, Snapshot snapshot, int nkeys, ScanKey keys)
{
	StoreScan  *s = palloc(sizeof(StoreScan));
	ScanKey		ikeys = palloc(sizeof(ScanKeyData) * Max(nkeys, 1));
	int			natts = IndexRelationGetNumberOfAttributes(idx);

	Assert(snapshot != InvalidSnapshot);
	/* The keys name the table's columns: the index's own numbers. */
	for (int i = 0; i < nkeys; i++)
	{
		int			j;

		ikeys[i] = keys[i];
		for (j = 0; j < natts; j++)
			if (idx->rd_index->indkey.values[j] == keys[i].sk_attno)
				break;
		if (j == natts)
			elog(ERROR, "lake: column %d of \"%s\" is not in index \"%s\"",
				 keys[i].sk_attno, RelationGetRelationName(rel), RelationGetRelationName(idx));
		ikeys[i].sk_attno = j + 1;
	}
	s->slot = table_slot_create(rel, NULL);
	s->scan = index_beginscan(rel, idx, snapshot, nkeys, 0);
	index_rescan(s->scan, ikeys, nkeys, NULL, 0);
	pfree(ikeys);
	return s;
}

HeapTuple
store_scan_next(StoreScan *s, ScanDirection dir)
{
	if (!index_getnext_slot(s->scan, dir, s->slot))
		return NULL;
	return ExecFetchSlotHeapTuple(s->slot, false, NULL);
}

void
store_scan_end(StoreScan *s)
{
	index_endscan(s->scan);
	ExecDropSingleTupleTableSlot(s->slot);
	pfree(s);
}

void
store_require_columns(TupleDesc desc, const bool *nulls, const char *table)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		/* Dropped ones first: past lake's columns, 'nulls' may hold no entry. */
		if (!att->attisdropped && att->attnotnull && nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("a row of %s.%s is damaged", LAKE_DATA_SCHEMA, table),
					 errdetail("Its column \"%s\" reads as NULL, which the table does not allow.",
							   NameStr(att->attname))));
	}
}

static bool
compression_known(uint32 method)
{
	return method == TOAST_PGLZ_COMPRESSION_ID || method == TOAST_LZ4_COMPRESSION_ID;
}

/*
 * Why a stored value's varlena header cannot be followed, or NULL.
 * PostgreSQL's detoasting trusts the header it reads from a page: an
 * in-memory pointer (indirect, expanded) would be followed into this
 * process's memory (SIGSEGV), a size that lies allocated, a relation that
 * is not there opened (XX000). Only what a table can store passes.
 */
static const char *
varlena_damage(Pointer p)
{
	if (VARATT_IS_EXTERNAL(p))
	{
		struct varatt_external ptr;

		if (!VARATT_IS_EXTERNAL_ONDISK(p))
			return "its TOAST pointer is of a kind no table stores";
		VARATT_EXTERNAL_GET_POINTER(ptr, p);
		if (ptr.va_rawsize < VARHDRSZ || (Size) ptr.va_rawsize > MaxAllocSize ||
			VARATT_EXTERNAL_GET_EXTSIZE(ptr) > (uint32) ptr.va_rawsize - VARHDRSZ)
			return "its TOAST pointer gives impossible sizes";
		if (VARATT_EXTERNAL_IS_COMPRESSED(ptr) &&
			!compression_known(VARATT_EXTERNAL_GET_COMPRESS_METHOD(ptr)))
			return "its TOAST pointer names an unknown compression method";
		if (get_rel_relkind(ptr.va_toastrelid) != RELKIND_TOASTVALUE)
			return "its TOAST pointer names a relation that is not a TOAST table";
	}
	else if (VARATT_IS_COMPRESSED(p) &&
			 (VARSIZE_4B(p) < VARHDRSZ + sizeof(uint32) ||
			  VARDATA_COMPRESSED_GET_EXTSIZE(p) > MaxAllocSize - VARHDRSZ ||
			  !compression_known(VARDATA_COMPRESSED_GET_COMPRESS_METHOD(p))))
		return "its compressed header is impossible";
	return NULL;
}

/* Why the varlena column 'attno' (1-based) of a row cannot be read, or NULL. */
static const char *
value_damage(HeapTuple tup, int attno, Pointer p)
{
	const char *start = tup ? (const char *) tup->t_data : NULL;
	const char *end = tup ? start + tup->t_len : NULL;

	/*
	 * A column past the row's own count is the catalog's missing value.
	 * The header itself is read only where the row holds all of it.
	 */
	if (tup != NULL && attno <= HeapTupleHeaderGetNatts(tup->t_data) &&
		(p < start || p >= end ||
		 (VARATT_IS_1B_E(p) ? end - p < VARHDRSZ_EXTERNAL :
		  !VARATT_IS_1B(p) && end - p < VARHDRSZ) ||
		 VARSIZE_ANY(p) > (Size) (end - p)))
		return "it reaches past its row";
	return varlena_damage(p);
}

static void
value_damaged(const char *table, const char *column, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 table ? errmsg("a row of %s.%s is damaged", LAKE_DATA_SCHEMA, table) :
			 errmsg("a row of lake's tables is damaged"),
			 errdetail("Its column \"%s\" is unreadable: %s.", column, why)));
}

/*
 * heap_deform_tuple with every varlena column checked: inside the row, and
 * with a header a table can store. Every row lake reads whole from a page
 * comes through here, so a damaged header is XX001 at the read, never a
 * detoast that follows it.
 */
void
store_deform_tuple(TupleDesc desc, HeapTuple tup, Datum *values, bool *nulls)
{
	heap_deform_tuple(tup, desc, values, nulls);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		const char *why;

		if (!nulls[i] && att->attlen == -1 &&
			(why = value_damage(tup, i + 1, DatumGetPointer(values[i]))) != NULL)
			value_damaged(get_rel_name(tup->t_tableOid), NameStr(att->attname), why);
	}
}

void
store_require_value(HeapTuple tup, TupleDesc desc, int attno, Datum value, const char *column)
{
	const char *why = value_damage(tup, attno, DatumGetPointer(value));

	if (why != NULL)
		value_damaged(NULL, column ? column : NameStr(TupleDescAttr(desc, attno - 1)->attname), why);
}

typedef struct Detoast
{
	Datum		value;
	bytea	   *out;
} Detoast;

static void
detoast_in(void *arg)
{
	Detoast    *d = (Detoast *) arg;

	d->out = DatumGetByteaPP(d->value);
}

bytea *
store_detoast_contained(Datum value, char **why)
{
	Detoast		d = {value, NULL};
	const char *damage;

	*why = NULL;
	if (!VARATT_IS_EXTERNAL(DatumGetPointer(value)) &&
		!VARATT_IS_COMPRESSED(DatumGetPointer(value)))
		return DatumGetByteaPP(value);
	if ((damage = varlena_damage(DatumGetPointer(value))) != NULL)
	{
		*why = pstrdup(damage);
		return NULL;
	}
	*why = store_contain_damage(detoast_in, &d);
	return *why == NULL ? d.out : NULL;
}

/* The error being handled, copied; NULL if the copy ran out of memory. */
static ErrorData *
copy_error_or_null(void)
{
	ErrorData  *volatile e = NULL;

	PG_TRY();
	{
		e = CopyErrorData();
	}
	PG_CATCH();
	{
		e = NULL;
	}
	PG_END_TRY();
	return e;
}

char *
store_reason(const char *message, const char *detail)
{
	size_t		n;

	if (detail == NULL)
		return pstrdup(message);
	n = strlen(detail);
	if (n > 0 && detail[n - 1] == '.')
		n--;
	return psprintf("%s (%.*s)", message, (int) n, detail);
}

char *
store_contain_damage(void (*fn) (void *arg), void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	char	   *why = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(cxt);
		/* The copy may itself run out of memory: the subtransaction goes all the same. */
		e = copy_error_or_null();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		if (e == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory"),
					 errdetail("Could not keep the error of a read of stored bytes.")));
		if (e->sqlerrcode != ERRCODE_DATA_CORRUPTED)
			ReThrowError(e);
		why = store_reason(e->message, e->detail);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return why;
}

/*
 * The columns of lake's rows of 'rel': its leading columns that are not
 * dropped, when every column after them is (an administrator's column,
 * added and dropped again, leaves one). Refused unless that is 'width':
 * any other change would have rows formed from, or deformed into, arrays
 * of another length, or read a NULL where lake's own column was.
 */
static int
table_width(Relation rel, int width)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			live = 0;

	while (live < desc->natts && !TupleDescAttr(desc, live)->attisdropped)
		live++;
	for (int i = live; i < desc->natts; i++)
		if (!TupleDescAttr(desc, i)->attisdropped)
			live = -1;
	if (live != width)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("%s.%s does not have the %d columns lake made it with", LAKE_DATA_SCHEMA,
						RelationGetRelationName(rel), width),
				 errdetail("The tables of " LAKE_DATA_SCHEMA " are lake's own: this one was altered."),
				 errhint("Drop the columns added to it. " SCHEMA_MOVE_HINT)));
	return live;
}

void
store_deform(Relation rel, HeapTuple tup, Datum *values, bool *nulls, int room)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			live = table_width(rel, room);
	Datum	   *v;
	bool	   *n;

	if (desc->natts <= room)
	{
		store_deform_tuple(desc, tup, values, nulls);
		return;
	}
	v = palloc(sizeof(Datum) * desc->natts);
	n = palloc(sizeof(bool) * desc->natts);
	store_deform_tuple(desc, tup, v, n);
	memcpy(values, v, sizeof(Datum) * live);
	memcpy(nulls, n, sizeof(bool) * live);
	pfree(v);
	pfree(n);
}

HeapTuple
store_form(Relation rel, Datum *values, bool *nulls, int width)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Datum	   *v;
	bool	   *n;

	(void) table_width(rel, width);
	if (desc->natts == width)
		return heap_form_tuple(desc, values, nulls);
	v = palloc0(sizeof(Datum) * desc->natts);
	n = palloc(sizeof(bool) * desc->natts);
	memcpy(v, values, sizeof(Datum) * width);
	memcpy(n, nulls, sizeof(bool) * width);
	memset(n + width, true, desc->natts - width);
	return heap_form_tuple(desc, v, n);
}

int
store_require_width(Relation rel, int width)
{
	(void) table_width(rel, width);
	return RelationGetDescr(rel)->natts;
}

/* store_fetch_in, opening lake_data.<table> and lake_data.<index> for it. */
bool
store_fetch_sized(const char *table, const char *index, Snapshot snapshot,
				  ScanKeyData *keys, int nkeys, ScanDirection dir,
				  Datum *values, bool *nulls, int room)
{
	Relation	rel = store_open(table, AccessShareLock);
	Relation	idx = store_open(index, AccessShareLock);
	bool		found = store_fetch_in(rel, idx, snapshot, keys, nkeys, dir,
									   values, nulls, room);

	index_close(idx, AccessShareLock);
	table_close(rel, AccessShareLock);
	return found;
}
