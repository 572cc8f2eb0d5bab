/*
 * store_owner.c — the durable owner registry.
 *
 *   lake_data.owner  (id, name, lifecycle, tenant, created_at,
 *                     quarantine_position, quarantine_reason)
 *
 * Live owner state is in shared memory (owner.h); this table is what
 * recovery rebuilds it from. Reading the whole registry (recovery, the
 * log's names) goes through its indexes directly; the rest (a creation, a
 * quarantine, the granted owners) is rare and stays SPI.
 */
#include "lake.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/tableam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "guc.h"
#include "hold.h"
#include "miscadmin.h"
#include "store_grant.h"
#include "store_owner.h"
#include "store_rel.h"
#include "store_row.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/* This backend's last full count of the registry (store_owner_lock_and_count). */
static struct
{
	Oid			registry;		/* lake_data.owner's OID: the installation */
	int64		through;		/* the highest id then; -1: none */
	int64		owners;
}			counted = {InvalidOid, -1, 0};

int64
store_owner_lock_and_count(int64 limit, int32 *next_id)
{
	static SPIPlanPtr bounds_plan;
	static SPIPlanPtr count_plan;
	static SPIPlanPtr newer_plan;
	bool		isnull;
	int64		lowest;
	int64		highest;
	int64		above;

	/*
	 * Creations serialize on an object lock, not on the table: a creator
	 * left in an open transaction holds up the next creator for at most
	 * lake.admission_queue_wait, and never the quarantine updates of the
	 * worker, lake.recover() or lake.release_owner().
	 */
	if (!store_lock_object(store_relid("owner"), 0, 0, lake_admission_queue_wait_ms))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("owner creation is busy"),
				 errdetail("Another transaction creating an owner held its lock longer than lake.admission_queue_wait (%d ms).",
						   lake_admission_queue_wait_ms),
				 errhint("Retry; keep transactions that create owners short.")));
	hold_begin(true);

	/*
	 * Ids are distinct: with none below 1, there are at most as many owners
	 * as the highest id. Read from the primary key's ends, that bound
	 * spares a count of every owner (a creation cost O(owners), under the
	 * lock every creator takes) until the ids near the limit. The next id
	 * is given under the lock, not drawn from the sequence ahead of the
	 * checks: a refused creation takes none (a tenant's failing creations
	 * used up the ids and pushed them past the limit); only one rolled back
	 * after its insert does.
	 */
	store_run_snapshot(store_plan(&bounds_plan,
								  "SELECT pg_catalog.min(o.id)::pg_catalog.int8, pg_catalog.max(o.id)::pg_catalog.int8, "
								  "       (SELECT s.last_value OPERATOR(pg_catalog.-) CASE WHEN s.is_called THEN 0 ELSE 1 END FROM lake_data.owner_id_seq s) "
								  "FROM lake_data.owner o", 0, NULL),
					   NULL, GetLatestSnapshot(), SPI_OK_SELECT);
	lowest = DatumGetInt64(store_col(0, 1, &isnull));
	highest = isnull ? 0 : DatumGetInt64(store_colv(0, 2));
	/*
	 * Nor at or below the identity's sequence, which every creation moves
	 * to its id (store_owner_insert) and which keeps it, unlike the
	 * registry, when an owner's row is removed by hand: a new owner would
	 * take over that owner's log.
	 */
	above = Min(DatumGetInt64(store_colv(0, 3)), (int64) PG_INT32_MAX);
	*next_id = Max(highest, above) >= PG_INT32_MAX ? 0 :
		(int32) Max(Max(highest, above) + 1, 1);
	if (isnull)
		return 0;
	if (lowest >= 1 && highest < limit)
		return highest;

	/*
	 * Ids run ahead of the owners (creations rolled back after their
	 * insert, rows removed by hand): count, but once per backend in full.
	 * Every id given after a count is above the highest it saw (ids are
	 * given under this lock, which the count held), and rows at or below
	 * it can since only have been removed: the owners counted then plus
	 * the rows above that id bound the registry from above. Each look
	 * moves the count on to the highest id it saw; counted again in full
	 * only when the bound reaches the limit. (A row put in by hand with an
	 * id below one counted through is outside the bound: SECURITY.md.)
	 */
	if (counted.through >= 0 && counted.registry == store_relid("owner") &&
		counted.through <= highest)
	{
		Oid			types[1] = {INT8OID};
		Datum		values[1] = {Int64GetDatum(counted.through)};
		int64		bound;

		store_run_snapshot(store_plan(&newer_plan,
									  "SELECT pg_catalog.count(*) FROM lake_data.owner o "
									  "WHERE o.id OPERATOR(pg_catalog.>) $1", 1, types),
						   values, GetLatestSnapshot(), SPI_OK_SELECT);
		bound = counted.owners + DatumGetInt64(store_colv(0, 1));
		if (bound < limit)
		{
			/* Counted through 'highest' now: the next look starts there. */
			counted.owners = bound;
			counted.through = highest;
			return bound;
		}
	}
	store_run_snapshot(store_plan(&count_plan, "SELECT pg_catalog.count(*) FROM lake_data.owner", 0, NULL),
					   NULL, GetLatestSnapshot(), SPI_OK_SELECT);
	counted.owners = DatumGetInt64(store_colv(0, 1));
	counted.through = highest;
	counted.registry = store_relid("owner");
	return counted.owners;
}

void
store_owner_missing(const char *name)
{
	/* Not here because a router sent it to another partition: say so. */
	lake_require_partition_name("owner", name);
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("owner \"%s\" does not exist", name),
			 errhint("Create it with lake.create_owner().")));
}

void
store_owner_no_id_left(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
			 errmsg("no owner id is left"),
			 errdetail("An owner has had id %d, the highest an owner can have.", PG_INT32_MAX)));
}

bool
store_owner_insert(int32 id, const char *name, int32 lifecycle, const char *tenant)
{
	static SPIPlanPtr plan;
	Oid			types[4] = {TEXTOID, INT4OID, TEXTOID, INT4OID};
	Datum		values[4] = {CStringGetTextDatum(name), Int32GetDatum(lifecycle),
	CStringGetTextDatum(tenant), Int32GetDatum(id)};

	store_run(store_plan(&plan,
						 "INSERT INTO lake_data.owner (id, name, lifecycle, tenant) OVERRIDING SYSTEM VALUE "
						 "VALUES ($4, $1, $2, $3) ON CONFLICT (name) DO NOTHING",
						 4, types),
			  values, SPI_OK_INSERT);
	if (SPI_processed == 0)
		return false;
	/* The identity's sequence stays past every id, for a row added by hand. */
	(void) DirectFunctionCall2(setval_oid, ObjectIdGetDatum(store_relid("owner_id_seq")),
							   Int64GetDatum(id));
	return true;
}

/*
 * A name or tenant read back from lake_data.owner: lake writes at most
 * NAMEDATALEN - 1 bytes, and every reader keeps them in buffers of that
 * size. A longer one (written by hand) is damage, not a name to cut short:
 * cut, two owners would share one name, or an owner another tenant.
 */
static void
owner_text_check(const char *column, const char *value, size_t len)
{
	if (len >= NAMEDATALEN || memchr(value, '\0', len) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("a row of lake_data.owner is damaged"),
				 errdetail("Its %s is not a name lake writes: %zu bytes, at most %d without a zero byte.",
						   column, len, NAMEDATALEN - 1)));
}

static char *
owner_col_text(uint64 row, int colno, const char *column)
{
	char	   *s = store_col_text(row, colno);

	owner_text_check(column, s, strlen(s));
	return s;
}

bool
store_owner_lookup(const char *name, int32 *id, int32 *lifecycle, char **tenant,
				   bool *written_here)
{
	static SPIPlanPtr plan;
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(name)};

	/*
	 * The latest snapshot, not the transaction's: casts are not part of
	 * their caller's transaction, and one under REPEATABLE READ must find
	 * an owner created after its snapshot as every other session does.
	 */
	store_run_snapshot(store_plan(&plan,
								  "SELECT o.id, o.lifecycle, o.tenant, o.xmin FROM lake_data.owner o "
								  "WHERE o.name OPERATOR(pg_catalog.=) $1",
								  1, types),
					   values, GetLatestSnapshot(), SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	*id = DatumGetInt32(store_colv(0, 1));
	*lifecycle = DatumGetInt32(store_colv(0, 2));
	*tenant = owner_col_text(0, 3, "tenant");
	if (written_here != NULL)
		*written_here = TransactionIdIsCurrentTransactionId(DatumGetTransactionId(store_colv(0, 4)));
	return true;
}

bool
store_owner_by_id(int32 owner_id, char **name, char **tenant)
{
	static SPIPlanPtr plan;
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(owner_id)};

	store_run(store_plan(&plan,
						 "SELECT o.name, o.tenant FROM lake_data.owner o WHERE o.id OPERATOR(pg_catalog.=) $1",
						 1, types),
			  values, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	*name = owner_col_text(0, 1, "name");
	*tenant = owner_col_text(0, 2, "tenant");
	return true;
}

/* A name or tenant column copied into its NAMEDATALEN buffer, checked. */
static void
owner_text_buffer(const char *column, Datum value, char *buf)
{
	text	   *t = DatumGetTextPP(value);

	owner_text_check(column, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
	text_to_cstring_buffer(t, buf, NAMEDATALEN);
}

/*
 * An owner's durable quarantine is its position; the reason goes with it.
 * One without a reason (put in by hand) is a quarantine all the same, with
 * this reason: never a live owner held at a limit.
 */
static const char *const no_reason = "quarantined in lake_data.owner with no reason recorded";

/*
 * Every owner, read straight from lake_data.owner (in heap order, or
 * through its index by id or by name) and handed to 'visit' one row at a
 * time: a recovery reads the whole registry, so no executor, no SPI row
 * handling and no allocation per owner. The row's name and tenant live in
 * buffers reused for the next row; a quarantine reason (rare) is palloc'd.
 */
void
store_owner_scan(OwnerOrder order, OwnerRowVisitor visit, void *arg)
{
	Relation	rel = store_open("owner", AccessShareLock);
	Relation	idx = order == OWNERS_BY_ID ? store_open("owner_pkey", AccessShareLock) :
		order == OWNERS_BY_NAME ? store_open("owner_name_key", AccessShareLock) : NULL;
	TupleDesc	desc = RelationGetDescr(rel);
	Oid			relid = RelationGetRelid(rel);
	AttrNumber	att[6] = {get_attnum(relid, "id"), get_attnum(relid, "name"),
		get_attnum(relid, "lifecycle"), get_attnum(relid, "tenant"),
	get_attnum(relid, "quarantine_position"), get_attnum(relid, "quarantine_reason")};
	Datum	   *values = palloc(sizeof(Datum) * desc->natts);
	bool	   *nulls = palloc(sizeof(bool) * desc->natts);
	char		name[NAMEDATALEN];
	char		tenant[NAMEDATALEN];
	OwnerRow	r = {.name = name,.tenant = tenant};

	/* The caller's active snapshot: recovery reads the log with it too. */
	Snapshot	snapshot = RegisterSnapshot(GetActiveSnapshot());
	StoreScan  *scan = idx ? store_scan_begin(rel, idx, snapshot, 0, NULL) : NULL;
	TableScanDesc heap = idx ? NULL : table_beginscan(rel, snapshot, 0, NULL);
	HeapTuple	tup;

	while (HeapTupleIsValid(tup = idx ? store_scan_next(scan, ForwardScanDirection) :
							heap_getnext(heap, ForwardScanDirection)))
	{
		CHECK_FOR_INTERRUPTS();
		/* One pass over the row: its text columns defeat cached offsets. */
		store_deform_tuple(desc, tup, values, nulls);
		store_require_columns(desc, nulls, "owner");
		/* Checked here too: a NOT NULL dropped by hand would let them through. */
		if (nulls[att[1] - 1] || nulls[att[3] - 1])
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("a row of lake_data.owner is damaged"),
					 errdetail("Its name or tenant reads as NULL.")));
		r.id = DatumGetInt32(values[att[0] - 1]);
		owner_text_buffer("name", values[att[1] - 1], name);
		r.lifecycle = DatumGetInt32(values[att[2] - 1]);
		owner_text_buffer("tenant", values[att[3] - 1], tenant);
		r.quarantined = !nulls[att[4] - 1];
		r.quarantine_position = r.quarantined ? DatumGetInt64(values[att[4] - 1]) : 0;
		r.quarantine_reason = !r.quarantined ? NULL : nulls[att[5] - 1] ? no_reason :
			TextDatumGetCString(values[att[5] - 1]);
		visit(&r, arg);
	}
	if (idx)
	{
		store_scan_end(scan);
		index_close(idx, AccessShareLock);
	}
	else
		table_endscan(heap);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
	pfree(values);
	pfree(nulls);
}

typedef struct Collect
{
	OwnerRow   *rows;
	uint64		n;
	uint64		cap;
} Collect;

static void
collect_row(const OwnerRow *row, void *arg)
{
	Collect    *c = (Collect *) arg;
	OwnerRow   *r;

	if (c->n == c->cap)
	{
		c->cap *= 2;
		c->rows = repalloc_huge(c->rows, sizeof(OwnerRow) * c->cap);
	}
	r = &c->rows[c->n++];
	*r = *row;
	r->name = pstrdup(row->name);
	r->tenant = pstrdup(row->tenant);
}

OwnerRow *
store_owner_rows(Oid only_role, bool by_name, uint64 *n)
{
	static SPIPlanPtr plan_granted;
	Oid			types[1] = {TEXTARRAYOID};
	Datum		values[1];
	OwnerRow   *rows;

	if (!OidIsValid(only_role))
	{
		Collect		c = {palloc(sizeof(OwnerRow) * 64), 0, 64};

		store_owner_scan(by_name ? OWNERS_BY_NAME : OWNERS_BY_ID, collect_row, &c);
		*n = c.n;
		return c.rows;
	}
	values[0] = store_granted_tenants(only_role);
	store_run(store_plan(&plan_granted,
						 "SELECT o.id, o.name, o.lifecycle, o.tenant, o.quarantine_position, "
						 "       o.quarantine_reason FROM lake_data.owner o "
						 "WHERE o.tenant OPERATOR(pg_catalog.=) ANY ($1) "
						 "ORDER BY o.id",
						 1, types),
			  values, SPI_OK_SELECT);

	*n = SPI_processed;
	rows = SPI_palloc(sizeof(OwnerRow) * Max(*n, 1));
	for (uint64 i = 0; i < *n; i++)
	{
		bool		isnull;
		Datum		position = store_col(i, 5, &isnull);
		bool		unexplained;

		(void) store_col(i, 6, &unexplained);

		rows[i].id = DatumGetInt32(store_colv(i, 1));
		rows[i].name = owner_col_text(i, 2, "name");
		rows[i].lifecycle = DatumGetInt32(store_colv(i, 3));
		rows[i].tenant = owner_col_text(i, 4, "tenant");
		rows[i].quarantined = !isnull;
		rows[i].quarantine_position = isnull ? 0 : DatumGetInt64(position);
		rows[i].quarantine_reason = isnull ? NULL : unexplained ? no_reason : store_col_text(i, 6);
	}
	SPI_freetuptable(SPI_tuptable);
	return rows;
}

void
store_owner_set_quarantine(int32 owner_id, int64 position, const char *why)
{
	static SPIPlanPtr plan;
	Oid			types[3] = {INT4OID, INT8OID, TEXTOID};
	Datum		values[3] = {Int32GetDatum(owner_id), Int64GetDatum(position),
	why ? CStringGetTextDatum(why) : (Datum) 0};
	char		nulls[3] = {' ', why ? ' ' : 'n', why ? ' ' : 'n'};

	if (store_execute(store_plan(&plan,
								 "UPDATE lake_data.owner SET quarantine_position = $2, quarantine_reason = $3 "
								 "WHERE id OPERATOR(pg_catalog.=) $1",
								 3, types),
					  values, nulls, InvalidSnapshot, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "lake: could not record the quarantine of owner %d", owner_id);
}
