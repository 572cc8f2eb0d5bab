/*
 * lifecycle.c — lake.define_lifecycle and the backend's lifecycle cache.
 *
 * Phases are numbered: the initial phase is 0, the others follow in the
 * order they first appear in the edges; owners in shared memory hold
 * these numbers, casts and landings carry the names.
 */
#include "lake.h"

#include "access.h"
#include "args.h"
#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "guc.h"
#include "lifecycle.h"
#include "miscadmin.h"
#include "store.h"
#include "store_rel.h"
#include "store_row.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

PG_FUNCTION_INFO_V1(lake_define_lifecycle);
PG_FUNCTION_INFO_V1(lake_lifecycle_definition);
PG_FUNCTION_INFO_V1(lake_lifecycle_check);

typedef struct LifecycleEntry
{
	int32		id;				/* hash key */
	Lifecycle	lc;
} LifecycleEntry;

static HTAB *cache = NULL;
static MemoryContext cache_cxt = NULL;

void
lifecycle_cache_reset(void)
{
	if (cache_cxt != NULL)
		MemoryContextDelete(cache_cxt);
	cache_cxt = NULL;
	cache = NULL;
}

static void
cache_init(void)
{
	HASHCTL		ctl;

	if (cache != NULL)
		return;
	cache_cxt = AllocSetContextCreate(CacheMemoryContext, "lake lifecycles",
									  ALLOCSET_SMALL_SIZES);
	ctl.keysize = sizeof(int32);
	ctl.entrysize = sizeof(LifecycleEntry);
	ctl.hcxt = cache_cxt;
	cache = hash_create("lake lifecycles", 16, &ctl,
						HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

const Lifecycle *
lifecycle_cached(int32 id)
{
	LifecycleEntry *e;

	if (cache == NULL)
		return NULL;
	e = hash_search(cache, &id, HASH_FIND, NULL);
	return e ? &e->lc : NULL;
}

int
lifecycle_phase(const Lifecycle *lc, const char *name, size_t len)
{
	for (int i = 0; i < lc->nphases; i++)
		if (strlen(lc->phases[i]) == len && memcmp(lc->phases[i], name, len) == 0)
			return i;
	return -1;
}

bool
lifecycle_edge(const Lifecycle *lc, int from, int to)
{
	return from >= 0 && to >= 0 && lc->edge[from * lc->nphases + to];
}

/*
 * Why a lifecycle is not well formed: the SQLSTATE and message that
 * define_lifecycle refuses it with, and the reason recovery gives when a
 * stored one is not (the table's trigger keeps hand edits well formed, but
 * a reader never trusts stored bytes).
 */
typedef struct Flaw
{
	int			sqlstate;
	char	   *msg;
	char	   *detail;			/* or NULL */
} Flaw;

static bool
flaw(Flaw *f, int sqlstate, char *msg, char *detail)
{
	f->sqlstate = sqlstate;
	f->msg = msg;
	f->detail = detail;
	return false;
}

/* define_lifecycle's refusal, and the lifecycle trigger's. */
static void
refuse(const Flaw *f, const char *context)
{
	ereport(ERROR,
			(errcode(f->sqlstate),
			 errmsg("%s", f->msg),
			 f->detail ? errdetail("%s", f->detail) : 0,
			 context ? errhint("%s", context) : 0));
}

/*
 * Deconstruct a 2-D text[][] of {from, to} pairs, checking its shape.
 * *nedges gets the number of edges; *elems holds from/to alternately.
 */
static bool
edge_pairs(ArrayType *edges, Datum **elems, int *nedges, Flaw *f)
{
	bool	   *nulls;
	int			n;

	if (ARR_NDIM(edges) == 0)
		return flaw(f, ERRCODE_INVALID_PARAMETER_VALUE,
					pstrdup("a lifecycle needs at least one edge"), NULL);
	if (ARR_NDIM(edges) != 2 || ARR_DIMS(edges)[1] != 2)
		return flaw(f, ERRCODE_INVALID_PARAMETER_VALUE,
					pstrdup("edges must be a two-dimensional array of {from, to} pairs"),
					ARR_NDIM(edges) == 2 ? pstrdup("Its pairs are not of two phases.") :
					ARR_NDIM(edges) == 1 ? pstrdup("The array given has one dimension.") :
					psprintf("The array given has %d dimensions.", ARR_NDIM(edges)));
	deconstruct_array(edges, TEXTOID, -1, false, TYPALIGN_INT, elems, &nulls, &n);
	for (int i = 0; i < n; i++)
		if (nulls[i])
			return flaw(f, ERRCODE_NULL_VALUE_NOT_ALLOWED,
						pstrdup("edges must not contain NULL phases"), NULL);
	*nedges = n / 2;
	return true;
}

static bool
check_phase_name(const char *name, Flaw *f)
{
	size_t		len = strlen(name);

	if (len == 0)
		return flaw(f, ERRCODE_INVALID_PARAMETER_VALUE,
					pstrdup("phase names must not be empty"), NULL);
	if (len >= NAMEDATALEN)
		return flaw(f, ERRCODE_INVALID_PARAMETER_VALUE,
					/* Quoted up to a character boundary, as sent. */
					psprintf("phase name \"%.*s...\" is too long",
							 pg_mbcliplen(name, (int) len, 20), name),
					psprintf("Phase names are at most %d bytes.", NAMEDATALEN - 1));
	return true;
}

/*
 * Fill lc's phases and edges from an initial phase and a text[][] of
 * edges, in CurrentMemoryContext. False, with *f set, on any flaw: lc is
 * then only scratch, never to be used.
 */
static bool
build(Lifecycle *lc, const char *initial, ArrayType *edges, Flaw *f)
{
	Datum	   *elems;
	int			nedges;
	char	  **names;
	int			n = 0;
	int		   *from;
	int		   *to;
	bool		seen_initial = false;

	if (!check_phase_name(initial, f) || !edge_pairs(edges, &elems, &nedges, f))
		return false;
	names = palloc(sizeof(char *) * (2 * nedges + 1));
	from = palloc(sizeof(int) * nedges);
	to = palloc(sizeof(int) * nedges);
	names[n++] = pstrdup(initial);
	for (int i = 0; i < 2 * nedges; i++)
	{
		char	   *p = TextDatumGetCString(elems[i]);
		int			k;

		if (!check_phase_name(p, f))
			return false;
		for (k = 0; k < n; k++)
			if (strcmp(names[k], p) == 0)
				break;
		if (k == 0)
			seen_initial = true;
		if (k == n)
		{
			if (n >= LAKE_MAX_PHASES)
				return flaw(f, ERRCODE_PROGRAM_LIMIT_EXCEEDED,
							psprintf("a lifecycle has at most %d phases", LAKE_MAX_PHASES), NULL);
			names[n++] = p;
		}
		if (i % 2 == 0)
			from[i / 2] = k;
		else
			to[i / 2] = k;
	}
	if (!seen_initial)
		return flaw(f, ERRCODE_INVALID_PARAMETER_VALUE,
					psprintf("initial phase \"%s\" is not among the lifecycle's edges", initial), NULL);

	lc->nphases = n;
	lc->initial = 0;
	lc->phases = names;
	lc->edge = palloc0(sizeof(bool) * n * n);
	for (int e = 0; e < nedges; e++)
	{
		bool	   *slot = &lc->edge[from[e] * n + to[e]];

		if (*slot)
			return flaw(f, ERRCODE_INVALID_PARAMETER_VALUE,
						psprintf("duplicate edge \"%s\" -> \"%s\"", names[from[e]], names[to[e]]), NULL);
		*slot = true;
	}
	return true;
}

/* The phases of a built lifecycle, as the text[] stored with it. */
static ArrayType *
phase_array(const Lifecycle *lc)
{
	Datum	   *phase_datums = palloc(sizeof(Datum) * lc->nphases);

	for (int i = 0; i < lc->nphases; i++)
		phase_datums[i] = CStringGetTextDatum(lc->phases[i]);
	return construct_array(phase_datums, lc->nphases, TEXTOID, -1, false, TYPALIGN_INT);
}

/*
 * Load lifecycle 'id' into the cache; the store must be connected. Only a
 * lifecycle that built without a flaw is cached: it is built in a context
 * of its own, which joins the cache only once the build succeeded.
 * Returns NULL with *f set when the stored lifecycle is not well formed.
 * Read with the latest snapshot, not the statement's: the live phases are
 * numbered by what the worker's recovery read, after every edit it knows
 * of, and a statement that waited for that recovery began before the edit.
 */
static const Lifecycle *
load(int32 id, Flaw *f)
{
	static SPIPlanPtr plan;
	const Lifecycle *hit = lifecycle_cached(id);
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(id)};
	LifecycleEntry *e;
	MemoryContext scratch;
	MemoryContext old;
	Lifecycle	lc;
	bool		ok;

	if (hit != NULL)
		return hit;
	if (store_execute(store_plan(&plan,
								 "SELECT l.initial_phase, l.edges, l.name FROM lake_data.lifecycle l "
								 "WHERE l.id OPERATOR(pg_catalog.=) $1", 1, types),
					  values, NULL, GetLatestSnapshot(), true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "lake: lifecycle %d is missing", id);
	store_require_shape_of_plan(plan);
	/* store_colv: a column read as NULL (damage) is XX001. */
	cache_init();
	/* The call's until built: an error in build leaves nothing in the cache. */
	scratch = AllocSetContextCreate(CurrentMemoryContext, "lake lifecycle", ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(scratch);
	ok = build(&lc, TextDatumGetCString(store_colv(0, 1)),
			   DatumGetArrayTypePCopy(store_colv(0, 2)), f);
	MemoryContextSwitchTo(old);
	if (!ok)
	{
		/* Both out of the scratch context before it goes. */
		f->msg = psprintf("lifecycle \"%s\" is not well formed: %s",
						  TextDatumGetCString(store_colv(0, 3)), f->msg);
		if (f->detail != NULL)
			f->detail = pstrdup(f->detail);
		MemoryContextDelete(scratch);
		return NULL;
	}
	MemoryContextSetParent(scratch, cache_cxt);
	e = hash_search(cache, &id, HASH_ENTER, NULL);
	e->lc = lc;
	e->lc.id = id;
	return &e->lc;
}

const Lifecycle *
lifecycle_get(int32 id)
{
	Flaw		f;
	const Lifecycle *lc = load(id, &f);

	if (lc == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("%s", f.msg),
				 f.detail ? errdetail("%s", f.detail) : 0,
				 errhint("Fix the row in lake_data.lifecycle; its owners are quarantined until then.")));
	return lc;
}

const Lifecycle *
lifecycle_try_get(int32 id, char **why)
{
	Flaw		f;
	const Lifecycle *lc = load(id, &f);

	if (lc == NULL)
		*why = store_reason(f.msg, f.detail);
	return lc;
}

static void
lifecycle_exists(const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_DUPLICATE_OBJECT),
			 errmsg("lifecycle \"%s\" already exists", name)));
}

Datum
lake_define_lifecycle(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan_find;
	static SPIPlanPtr plan;
	char	   *name;
	char	   *initial;
	ArrayType  *edges;
	Lifecycle	lc;
	Flaw		f;
	Oid			types[4] = {TEXTOID, TEXTOID, TEXTARRAYOID, TEXTARRAYOID};
	Datum		values[4];

	lake_require_preload();
	name = lake_arg_short_name(fcinfo, 0, "lifecycle name");
	initial = lake_arg_short_name(fcinfo, 1, "initial_phase");
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("edges must not be NULL")));
	edges = PG_GETARG_ARRAYTYPE_P(2);
	access_require_admin(fcinfo);
	/* 25006 naming this call, on a standby too, before any lock or look-up. */
	PreventCommandIfReadOnly("lake.define_lifecycle()");

	if (!build(&lc, initial, edges, &f))
		refuse(&f, NULL);

	values[0] = CStringGetTextDatum(name);
	values[1] = CStringGetTextDatum(initial);
	values[2] = PointerGetDatum(phase_array(&lc));
	values[3] = PointerGetDatum(edges);

	store_connect();

	/*
	 * Definitions take turns, each to its commit: the insert below never
	 * waits on another's uncommitted row of the same name, and this wait is
	 * bounded as every wait in lake (SPEC §3).
	 */
	if (!store_lock_object(store_relid("lifecycle"), 0, 0, lake_admission_queue_wait_ms))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("lifecycle definition is busy"),
				 errdetail("Another transaction defining a lifecycle held its lock longer than lake.admission_queue_wait (%d ms).",
						   lake_admission_queue_wait_ms),
				 errhint("Retry; keep transactions that define lifecycles short.")));
	/*
	 * An existing name is refused before the insert, whose identity takes
	 * an id even when the name conflicts (and at the ids' end would answer
	 * 2200H for a name that exists). The row is locked, so a removal of
	 * it by hand in progress is waited for, within the bound, as the
	 * insert waited: once it commits, the name is free. (Definitions are
	 * rare: unlike a dataset's creation, the lock's xid costs nothing.)
	 */
	store_run_bounded(store_plan(&plan_find,
								 "SELECT 1 FROM lake_data.lifecycle l "
								 "WHERE l.name OPERATOR(pg_catalog.=) $1 FOR KEY SHARE",
								 1, types),
					  values, SPI_OK_SELECT, lake_admission_queue_wait_ms, lifecycle_busy, name);
	if (SPI_processed > 0)
		lifecycle_exists(name);
	store_run_bounded(store_plan(&plan,
								 "INSERT INTO lake_data.lifecycle (name, initial_phase, phases, edges) "
								 "VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING",
								 4, types),
					  values, SPI_OK_INSERT, lake_admission_queue_wait_ms, lifecycle_busy, name);
	if (SPI_processed == 0)
		lifecycle_exists(name);
	store_finish();
	PG_RETURN_VOID();
}

/*
 * lake.lifecycle_definition(name): the initial phase and edges a lifecycle
 * was defined with, as stored. The router compares them with a definition
 * it is given where a partition already has the name (lake_router).
 */
Datum
lake_lifecycle_definition(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan;
	char	   *name;
	Oid			types[1] = {TEXTOID};
	Datum		values[2];
	bool		nulls[2] = {false, false};
	TupleDesc	desc;

	lake_require_preload();
	name = lake_arg_short_name(fcinfo, 0, "lifecycle name");
	access_require_admin(fcinfo);
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "lake: lifecycle_definition must return a composite");
	lake_require_result_width("lake.lifecycle_definition()", desc, lengthof(values));
	values[0] = CStringGetTextDatum(name);
	store_connect();
	store_run(store_plan(&plan,
				 "SELECT l.initial_phase, l.edges FROM lake_data.lifecycle l "
				 "WHERE l.name OPERATOR(pg_catalog.=) $1",
				 1, types),
		values, SPI_OK_SELECT);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("lifecycle \"%s\" does not exist", name)));
	values[0] = SPI_datumTransfer(store_colv(0, 1), false, -1);
	values[1] = SPI_datumTransfer(store_colv(0, 2), false, -1);
	store_finish();
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

void
lifecycle_busy(const void *arg)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
			 errmsg("lifecycle \"%s\" is busy", (const char *) arg),
			 errdetail("Another transaction changing or removing it held its row longer than lake.admission_queue_wait (%d ms).",
					   lake_admission_queue_wait_ms),
			 errhint("Retry later; nothing was written.")));
}

/*
 * BEFORE INSERT OR UPDATE of a lake_data.lifecycle row: a row that would
 * not build is refused as define_lifecycle refuses it, and its phases
 * column is derived from the edges, so no edit by hand can store a
 * lifecycle that a session or recovery cannot use.
 */
Datum
lake_lifecycle_check(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	HeapTuple	row;
	TupleDesc	desc;
	int			att_initial;
	int			att_phases;
	int			att_edges;
	bool		isnull;
	Datum		initial;
	Datum		edges;
	Lifecycle	lc;
	Flaw		f;
	Datum		phases;
	bool		phases_null = false;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BEFORE(td->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(td->tg_event) || TRIGGER_FIRED_BY_DELETE(td->tg_event))
		store_trigger_misfired("lake.lifecycle_check()", "BEFORE INSERT OR UPDATE FOR EACH ROW");
	store_require_trigger_on(td, "lifecycle");
	row = TRIGGER_FIRED_BY_UPDATE(td->tg_event) ? td->tg_newtuple : td->tg_trigtuple;
	desc = RelationGetDescr(td->tg_relation);
	att_initial = SPI_fnumber(desc, "initial_phase");
	att_phases = SPI_fnumber(desc, "phases");
	att_edges = SPI_fnumber(desc, "edges");
	if (att_initial <= 0 || att_phases <= 0 || att_edges <= 0)
		elog(ERROR, "lake: lake_data.lifecycle lacks its columns");

	initial = heap_getattr(row, att_initial, desc, &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("initial_phase must not be NULL")));
	edges = heap_getattr(row, att_edges, desc, &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("edges must not be NULL")));
	if (!build(&lc, TextDatumGetCString(initial), DatumGetArrayTypeP(edges), &f))
		refuse(&f, "Lifecycle rows must stay well formed; lake.define_lifecycle() shows the rules.");
	phases = PointerGetDatum(phase_array(&lc));
	return PointerGetDatum(heap_modify_tuple_by_cols(row, desc, 1, &att_phases,
													 &phases, &phases_null));
}
