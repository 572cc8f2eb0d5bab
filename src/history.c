/*
 * history.c — the SQL readers of the sealed log (SPEC §4): lake.trajectory,
 * lake.log and lake.cycles.
 *
 * The log is read by logread.c; this file picks what a caller may see and
 * emits it. A trajectory also hands the walk what the primary's live owner
 * table knows of the owner, so a missing last owner index entry is XX001
 * rather than a trajectory cut short.
 */
#include "lake.h"

#include "access.h"
#include "args.h"
#include "catalog/pg_type.h"
#include "cycle.h"
#include "funcapi.h"
#include "logread.h"
#include "store_grant.h"
#include "store_owner.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"

/* Emits landings into a tuplestore, optionally of one owner only. */
/* lake.log()'s columns; lake.trajectory() has them but the owner's name. */
#define LANDING_COLUMNS 10

typedef struct Emit
{
	ReturnSetInfo *rsinfo;
	LogCycle	at;
	int32		owner_id;		/* trajectory: only this owner; else 0 */
	int64		after_position;
	/* log: */
	HTAB	   *names;			/* owner id -> OwnerName, as landings name them */
	bool		all;			/* every tenant, and unregistered owners too */
	char	  **tenants;		/* else: the tenants the caller holds, sorted */
	int			ntenants;
	int			lookups;		/* owners looked up one by one so far */
	bool		loaded;			/* every owner the caller may see is in 'names' */
} Emit;

typedef struct OwnerName
{
	int32		id;
	bool		shown;			/* its landings are the caller's to see */
	bool		named;			/* registered: 'name' holds its name */
	char		name[NAMEDATALEN];
} OwnerName;

/*
 * Owners are looked up as the log names them, so that a read of its tail
 * costs what it returns, not the whole registry; past this many the rest
 * are read in one pass over the registry, cheaper per owner.
 */
#define LAZY_OWNER_LOOKUPS 1024

static void
load_owners(Emit *e)
{
	uint64		n;
	OwnerRow   *rows = store_owner_rows(e->all ? InvalidOid : store_caller(), false, &n);

	for (uint64 i = 0; i < n; i++)
	{
		OwnerName  *on = hash_search(e->names, &rows[i].id, HASH_ENTER, NULL);

		on->shown = on->named = true;
		strlcpy(on->name, rows[i].name, NAMEDATALEN);
	}
	e->loaded = true;
}

static int
compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The name and visibility of the owner with this id (lake.log). */
static OwnerName *
owner_named(Emit *e, int32 id)
{
	bool		found;
	OwnerName  *on = hash_search(e->names, &id, HASH_ENTER, &found);
	char	   *name;
	char	   *tenant;

	if (found)
		return on;
	/* Until shown otherwise: not registered, seen only by those who see all. */
	on->named = false;
	on->shown = e->all;
	if (e->loaded)
		return on;
	if (e->lookups++ == LAZY_OWNER_LOOKUPS)
	{
		load_owners(e);
		return on;
	}
	if (!store_owner_by_id(id, &name, &tenant))
		return on;
	on->named = true;
	strlcpy(on->name, name, NAMEDATALEN);
	/* A role may hold many tenants: a search, not a walk, per owner. */
	on->shown = on->shown || (e->ntenants > 0 &&
							  bsearch(&tenant, e->tenants, e->ntenants, sizeof(char *),
									  compare_names) != NULL);
	return on;
}

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
	Datum		v[LANDING_COLUMNS];
	bool		n[LANDING_COLUMNS] = {0};
	int			i = 0;

	if (e->owner_id != 0 && (l->owner_id != e->owner_id || l->position <= e->after_position))
		return 0;
	if (e->owner_id == 0)
	{
		OwnerName  *on = owner_named(e, l->owner_id);

		if (!on->shown)
			return 0;
		v[i++] = Int64GetDatum(e->at.cycle);
		v[i] = on->named ? CStringGetTextDatum(on->name) : (Datum) 0;
		n[i++] = !on->named;
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
	LogReach	reach;
	bool		known;

	lake_require_preload();
	cycle_require_no_cut("lake.trajectory()");
	owner = lake_arg_short_name(fcinfo, 0, "owner");
	e.after_position = arg_after(fcinfo, 1, "after_position");
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	e.rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	lake_require_result_width("lake.trajectory()", e.rsinfo->setDesc, LANDING_COLUMNS - 1);

	store_connect();
	if (!store_owner_lookup(owner, &e.owner_id, &lifecycle, &tenant, NULL))
		store_owner_missing(owner);
	access_require_owner(tenant, owner);
	known = cycle_owner_reached(owner, e.owner_id, &reach.position, &reach.cycle);
	log_visit_owner(e.owner_id, e.after_position, 0, known ? &reach : NULL, &e.at,
					emit_landing, NULL, &e);
	store_finish();
	return (Datum) 0;
}

Datum
lake_log(PG_FUNCTION_ARGS)
{
	Emit		e = {0};
	int64		after_cycle;
	HASHCTL		ctl;

	lake_require_preload();
	cycle_require_no_cut("lake.log()");
	after_cycle = arg_after(fcinfo, 0, "after_cycle");
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	e.rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	lake_require_result_width("lake.log()", e.rsinfo->setDesc, LANDING_COLUMNS);

	ctl.keysize = sizeof(int32);
	ctl.entrysize = sizeof(OwnerName);
	ctl.hcxt = CurrentMemoryContext;
	e.names = hash_create("lake owner names", 256, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	/*
	 * Only the landings of owners whose tenant the caller holds; every
	 * landing of another is skipped.
	 */
	store_connect();
	e.all = access_all_tenants();
	if (!e.all)
	{
		Datum	   *held;

		deconstruct_array(DatumGetArrayTypeP(store_granted_tenants(store_caller())),
						  TEXTOID, -1, false, TYPALIGN_INT, &held, NULL, &e.ntenants);
		e.tenants = palloc(sizeof(char *) * Max(e.ntenants, 1));
		for (int t = 0; t < e.ntenants; t++)
			e.tenants[t] = TextDatumGetCString(held[t]);
		qsort(e.tenants, e.ntenants, sizeof(char *), compare_names);
	}
	log_scan_cycles(after_cycle, &e.at, emit_landing, NULL, &e);
	/* The log read ends at its snapshot's newest row; the sealed head is not past the table's. */
	log_require_sealed_cycle(cycle_sealed_head());
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
	cycle_require_no_cut("lake.cycles()");
	values[0] = Int64GetDatum(arg_after(fcinfo, 0, "after_cycle"));
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
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
