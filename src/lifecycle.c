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
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lifecycle.h"
#include "store.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

PG_FUNCTION_INFO_V1(lake_define_lifecycle);

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
 * Deconstruct a 2-D text[][] of {from, to} pairs, checking its shape.
 * Returns the number of edges; *elems holds from/to alternately.
 */
static int
edge_pairs(ArrayType *edges, Datum **elems)
{
	bool	   *nulls;
	int			n;

	if (ARR_NDIM(edges) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a lifecycle needs at least one edge")));
	if (ARR_NDIM(edges) != 2 || ARR_DIMS(edges)[1] != 2)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("edges must be a two-dimensional array of {from, to} pairs"),
				 errdetail("The array given has %d dimension(s)%s.", ARR_NDIM(edges),
						   ARR_NDIM(edges) == 2 ? " but its pairs are not of two phases" : "")));
	deconstruct_array(edges, TEXTOID, -1, false, TYPALIGN_INT, elems, &nulls, &n);
	for (int i = 0; i < n; i++)
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("edges must not contain NULL phases")));
	return n / 2;
}

static void
check_phase_name(const char *name)
{
	size_t		len = strlen(name);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("phase names must not be empty")));
	if (len >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("phase name \"%.20s...\" is too long", name),
				 errdetail("Phase names are at most %d bytes.", NAMEDATALEN - 1)));
}

/* Fill lc's phases and edges from the text pairs; 22023 on any flaw. */
static void
build(Lifecycle *lc, const char *initial, Datum *elems, int nedges)
{
	char	  **names = palloc(sizeof(char *) * (2 * nedges + 1));
	int			n = 0;
	int		   *from = palloc(sizeof(int) * nedges);
	int		   *to = palloc(sizeof(int) * nedges);
	bool		seen_initial = false;

	names[n++] = pstrdup(initial);
	for (int i = 0; i < 2 * nedges; i++)
	{
		char	   *p = TextDatumGetCString(elems[i]);
		int			k;

		check_phase_name(p);
		for (k = 0; k < n; k++)
			if (strcmp(names[k], p) == 0)
				break;
		if (k == 0)
			seen_initial = true;
		if (k == n)
		{
			if (n >= LAKE_MAX_PHASES)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("a lifecycle has at most %d phases", LAKE_MAX_PHASES)));
			names[n++] = p;
		}
		if (i % 2 == 0)
			from[i / 2] = k;
		else
			to[i / 2] = k;
	}
	if (!seen_initial)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("initial phase \"%s\" is not among the lifecycle's edges", initial)));

	lc->nphases = n;
	lc->initial = 0;
	lc->phases = names;
	lc->edge = palloc0(sizeof(bool) * n * n);
	for (int e = 0; e < nedges; e++)
	{
		bool	   *slot = &lc->edge[from[e] * n + to[e]];

		if (*slot)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("duplicate edge %s -> %s", names[from[e]], names[to[e]])));
		*slot = true;
	}
}

/* Load lifecycle 'id' into the cache; the store must be connected. */
const Lifecycle *
lifecycle_get(int32 id)
{
	static SPIPlanPtr plan;
	const Lifecycle *hit = lifecycle_cached(id);
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(id)};
	bool		isnull;
	LifecycleEntry *e;
	MemoryContext old;
	Datum	   *elems;
	int			nedges;
	char	   *initial;
	ArrayType  *edges;

	if (hit != NULL)
		return hit;
	if (SPI_execute_plan(store_plan(&plan,
									"SELECT l.initial_phase, l.edges FROM lake_data.lifecycle l "
									"WHERE l.id OPERATOR(pg_catalog.=) $1", 1, types),
						 values, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "lake: lifecycle %d is missing", id);

	cache_init();
	old = MemoryContextSwitchTo(cache_cxt);
	initial = TextDatumGetCString(SPI_getbinval(SPI_tuptable->vals[0],
												SPI_tuptable->tupdesc, 1, &isnull));
	edges = DatumGetArrayTypePCopy(SPI_getbinval(SPI_tuptable->vals[0],
												 SPI_tuptable->tupdesc, 2, &isnull));
	nedges = edge_pairs(edges, &elems);
	e = hash_search(cache, &id, HASH_ENTER, NULL);
	e->lc.id = id;
	build(&e->lc, initial, elems, nedges);
	MemoryContextSwitchTo(old);
	return &e->lc;
}

Datum
lake_define_lifecycle(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan;
	char	   *name;
	char	   *initial;
	ArrayType  *edges;
	Datum	   *elems;
	int			nedges;
	Lifecycle	lc;
	Datum	   *phase_datums;
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
	access_require_admin();

	nedges = edge_pairs(edges, &elems);
	build(&lc, initial, elems, nedges);

	phase_datums = palloc(sizeof(Datum) * lc.nphases);
	for (int i = 0; i < lc.nphases; i++)
		phase_datums[i] = CStringGetTextDatum(lc.phases[i]);
	values[0] = CStringGetTextDatum(name);
	values[1] = CStringGetTextDatum(initial);
	values[2] = PointerGetDatum(construct_array(phase_datums, lc.nphases, TEXTOID,
												-1, false, TYPALIGN_INT));
	values[3] = PointerGetDatum(edges);

	store_connect();
	if (SPI_execute_plan(store_plan(&plan,
									"INSERT INTO lake_data.lifecycle (name, initial_phase, phases, edges) "
									"VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING",
									4, types),
						 values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "lake: could not insert the lifecycle");
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("lifecycle \"%s\" already exists", name)));
	store_finish();
	PG_RETURN_VOID();
}
