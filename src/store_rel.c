/*
 * store_rel.c — lake_data's relations, opened directly, and their shapes.
 *
 * The hot paths (an append, a replay, a read's header, a chunk, a cast's
 * operation id) reach lake_data's tables and indexes through the table AM
 * and the index AM: no planner, no executor, and no cached generic plan
 * that chose a sequential scan while a table was empty. A relation's OID is
 * looked up by name once per backend and kept until an invalidation could
 * make it wrong: a relcache invalidation of any kept relation (dropped with
 * the extension, altered) or of all relations, or a change of any schema
 * (the data schema recreated). Every such invalidation, and every abort,
 * also advances store_generation(), which the callers' own caches (the
 * dataset ids) compare against.
 *
 * Every table is checked against the shape lake made it with (schema.c)
 * before a call uses it, and again after any invalidation of it.
 */
#include "lake.h"

#include "access/relation.h"
#include "access/table.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "commands/extension.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "schema.h"
#include "storage/lmgr.h"
#include "store_rel.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/plancache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(lake_data_changed);

#define KEPT_RELS_MAX 64

typedef struct KeptRel
{
	const char *name;			/* a literal, as the callers name it */
	Oid			relid;
} KeptRel;

static KeptRel kept[KEPT_RELS_MAX];
static int	nkept = 0;
static uint64 generation = 1;

/*
 * lake_data's tables and sequences, for the shape checks
 * (require_shape_of, require_tables_present), and a count of the
 * invalidations that could have changed one since. Unlike the kept OIDs
 * they outlive an abort: an ALTER rolled back invalidates its relation
 * again at the abort.
 */
/* lake_data's tables, then its sequences (schema.h) */
#define SHAPE_NRELS (SCHEMA_NTABLES + SCHEMA_NSEQUENCES)
static Oid	shape_relid[SHAPE_NRELS];
static uint64 shape_generation = 1;

/*
 * lake_data's namespace as the outermost store_connect found it, while a
 * call runs (InvalidOid otherwise): every name lake resolves afresh during
 * the call must still be in it. A DROP EXTENSION and CREATE EXTENSION
 * committed while a call runs (its reads keep no lock, and the dataset's
 * lock is an object lock DROP does not wait for) would otherwise have the
 * call write what it read of the old installation (a dataset id, a cycle
 * cut from the old ring) into the new one's tables of the same names.
 */
static Oid	call_schema = InvalidOid;

void
store_rel_forget(void)
{
	nkept = 0;
	generation++;
}

static void
forget_rel(Datum arg, Oid relid)
{
	if (!OidIsValid(relid))
	{
		store_rel_forget();
		shape_generation++;
		return;
	}
	for (int i = 0; i < SHAPE_NRELS; i++)
		if (shape_relid[i] == relid)
			shape_generation++;
	for (int i = 0; i < nkept; i++)
		if (kept[i].relid == relid)
		{
			store_rel_forget();		/* names resolved again check the shapes again */
			return;
		}
}

static void
forget_namespace(Datum arg, int cacheid, uint32 hashvalue)
{
	store_rel_forget();
	shape_generation++;
}

uint64
store_generation(void)
{
	return generation;
}

/*
 * 55000 when lake_data is now 'nsp', not the namespace the call began with:
 * the extension was dropped and created again while the call ran.
 */
static void
require_call_installation(Oid nsp)
{
	if (OidIsValid(call_schema) && nsp != call_schema)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"lake\" was dropped and created again while this call ran"),
				 errdetail("What the call had read belongs to the dropped installation."),
				 errhint("Retry the call; nothing it did is kept.")));
}

static Oid
lake_relid(const char *name)
{
	static bool registered = false;
	Oid			relid;
	Oid			nsp;

	for (int i = 0; i < nkept; i++)
		if (kept[i].name == name || strcmp(kept[i].name, name) == 0)
			return kept[i].relid;
	if (!registered)
	{
		CacheRegisterRelcacheCallback(forget_rel, (Datum) 0);
		CacheRegisterSyscacheCallback(NAMESPACEOID, forget_namespace, (Datum) 0);
		registered = true;
	}
	nsp = get_namespace_oid(LAKE_DATA_SCHEMA, true);
	if (!OidIsValid(nsp))
	{
		schema_require_not_dropped();
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("schema %s, which holds lake's tables, is missing", LAKE_DATA_SCHEMA),
				 errdetail("It was renamed or dropped."),
				 errhint("If it was renamed, rename it back (ALTER SCHEMA ... RENAME TO %s).",
						 LAKE_DATA_SCHEMA)));
	}
	require_call_installation(nsp);
	relid = get_relname_relid(name, nsp);
	if (!OidIsValid(relid))
	{
		schema_require_not_dropped();
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s.%s, which this build of lake needs, is missing", LAKE_DATA_SCHEMA, name),
				 errdetail("The extension's tables are an earlier build's, or it was dropped or renamed."),
				 errhint(SCHEMA_MOVE_HINT)));
	}
	/*
	 * A name resolved afresh may name another relation than when the shapes
	 * were checked: an index renamed into place invalidates only itself,
	 * and this backend may never have kept the one it replaced.
	 */
	shape_generation++;
	if (nkept == KEPT_RELS_MAX)
		store_rel_forget();
	kept[nkept].name = name;
	kept[nkept].relid = relid;
	nkept++;
	return relid;
}

/*
 * Each table of lake_data as lake made it (schema.c), checked when a call
 * first reaches it in a backend and again after any invalidation of one of
 * them (an ALTER): once a direct open or a statement holds the table's
 * lock, since an ALTER that commits while the call waits for the lock is
 * seen only then. Only the tables a call uses are looked at.
 */
static uint64 shape_checked[SCHEMA_NTABLES];
static uint64 shape_found = 0;	/* the shape_generation shape_relid is of */

static const char *
shape_name(int i)
{
	return i < SCHEMA_NTABLES ? schema_table(i) : schema_sequence(i - SCHEMA_NTABLES);
}

/* shape_relid as of generation 'at': named afresh after any invalidation. */
static void
name_shape_tables(uint64 at)
{
	if (shape_found == at)
		return;
	for (int i = 0; i < SHAPE_NRELS; i++)
		shape_relid[i] = lake_relid(shape_name(i));
	shape_found = at;
}

/*
 * Run 'check' (schema.h) on table i, open for it. The relcache builds an
 * entry from the catalogs only under a lock on the relation: with
 * 'lock_now', one the caller does not hold yet is taken for the check,
 * without waiting (false, nothing checked, if another session holds it).
 */
static bool
check_shape_table(int i, void (*check) (int i, Relation rel), bool lock_now)
{
	Relation	rel;

	if (lock_now && !ConditionalLockRelationOid(shape_relid[i], AccessShareLock))
		return false;
	rel = RelationIdGetRelation(shape_relid[i]);
	if (!RelationIsValid(rel))
	{
		/* Dropped after the call named it: a DROP EXTENSION is 55000. */
		schema_require_not_dropped();
		require_call_installation(get_namespace_oid(LAKE_DATA_SCHEMA, true));
		elog(ERROR, "lake: relation %s.%s vanished", LAKE_DATA_SCHEMA, shape_name(i));
	}
	PG_TRY();
	{
		check(i, rel);
	}
	PG_FINALLY();
	{
		RelationClose(rel);
	}
	PG_END_TRY();
	if (lock_now)
		UnlockRelationOid(shape_relid[i], AccessShareLock);
	return true;
}

/*
 * lake's own install script runs: some of its tables are not made yet.
 * Not any extension's: another one's script that calls lake (or an event
 * trigger that fires in it) is checked as any call is.
 */
bool
store_installing_lake(void)
{
	return creating_extension &&
		CurrentExtensionObject == get_extension_oid("lake", true);
}

static void
require_shape_of(Oid relid)
{
	uint64		at = shape_generation;

	if (store_installing_lake())
		return;
	name_shape_tables(at);
	for (int i = 0; i < SCHEMA_NTABLES; i++)
	{
		if (shape_relid[i] != relid)
			continue;
		if (shape_checked[i] == at)
			return;
		check_shape_table(i, schema_require, false);
		shape_checked[i] = at;
		return;
	}
}

/*
 * Every table of lake_data there, with every column this build needs,
 * and every table and sequence logged, before a call does anything: the
 * tables of an earlier build lack some, and a call that needs none of
 * them (a small append, a dataset's creation) would otherwise write into
 * tables the build they belong to then reads as damaged; a crash empties
 * an unlogged one. Once per invalidation of one of them, as the shape
 * check; what a table holds is checked further where it is used.
 */
static uint64 present_checked = 0;

static void
require_sequence(int i, Relation rel)
{
	schema_require_sequence(i - SCHEMA_NTABLES, rel);
}

/*
 * The next value of lake_data.<name>, one of its sequences: refused if the
 * sequence is unlogged, checked once nextval has locked it, which takes in
 * an ALTER committed since the call's start.
 */
int64
store_nextval(const char *name)
{
	int64		n = nextval_internal(lake_relid(name), false);

	name_shape_tables(shape_generation);
	for (int i = SCHEMA_NTABLES; i < SHAPE_NRELS; i++)
		if (strcmp(shape_name(i), name) == 0)
			check_shape_table(i, require_sequence, false);
	return n;
}

static void
require_tables_present(void)
{
	uint64		at = shape_generation;

	if (present_checked == at || store_installing_lake())
		return;
	name_shape_tables(at);

	/*
	 * The call holds no lock on most of them, and waits for none (not for
	 * maintenance of a table it does not use). One another session holds
	 * is left as it is: what that session changes in it invalidates it at
	 * commit, and the next call checks it then.
	 */
	for (int i = 0; i < SHAPE_NRELS; i++)
		(void) check_shape_table(i, i < SCHEMA_NTABLES ? schema_require_present : require_sequence,
								 true);
	present_checked = at;
}

void
store_rel_begin_call(Oid schema)
{
	call_schema = schema;
	require_tables_present();
}

void
store_rel_end_call(void)
{
	call_schema = InvalidOid;
}

/*
 * The tables a statement just ran on (and holds locks on): called by
 * store_run* and store_fill, and by whoever runs a kept plan directly and
 * reads its rows.
 */
void
store_require_shape_of_plan(SPIPlanPtr plan)
{
	ListCell   *lc;

	foreach(lc, SPI_plan_get_plan_sources(plan))
	{
		CachedPlanSource *ps = (CachedPlanSource *) lfirst(lc);
		ListCell   *rc;

		foreach(rc, ps->relationOids)
			require_shape_of(lfirst_oid(rc));
	}
}

void
store_require_shape_of_locked(void)
{
	name_shape_tables(shape_generation);
	for (int i = 0; i < SCHEMA_NTABLES; i++)
		if (CheckRelationOidLockedByMe(shape_relid[i], AccessShareLock, true))
			require_shape_of(shape_relid[i]);
}

void
store_trigger_misfired(const char *function, const char *how)
{
	ereport(ERROR,
			(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
			 errmsg("function %s must be fired %s", function, how)));
}

void
store_require_trigger_on(TriggerData *td, const char *table)
{
	if (RelationGetRelid(td->tg_relation) != store_relid(table))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("this trigger function of lake's fires only on lake_data.%s", table)));
	/* Its rows are read by column: the table must be as lake made it. */
	require_shape_of(RelationGetRelid(td->tg_relation));
}

Oid
store_relid(const char *name)
{
	return lake_relid(name);
}

/*
 * Open (and lock) lake_data.<name>, a table or an index. Locking accepts
 * invalidations: if one arrived meanwhile, the OID may name a dropped
 * relation (or, recycled, another one), so look the name up again, with
 * the lock held now. Once the name resolves to the relation held, after
 * the lock's invalidations were taken in, it is the one, as PostgreSQL's
 * RangeVarGetRelidExtended settles (a table's rename or drop waits for the
 * lock; an index's or the schema's rename after that point is as if it
 * came after the open), also when invalidations keep coming (a busy
 * catalog; every catalog read under debug_discard_caches).
 */
Relation
store_open(const char *name, LOCKMODE mode)
{
	Relation	rel = NULL;

	for (int gone = 0;;)
	{
		uint64		gen = generation;
		Oid			relid = lake_relid(name);

		if (rel != NULL)
		{
			if (RelationGetRelid(rel) == relid)
				break;
			relation_close(rel, mode);
		}
		rel = try_relation_open(relid, mode);
		if (rel != NULL && gen == generation)
			break;
		if (rel == NULL)
		{
			if (++gone > 1)
				elog(ERROR, "lake: relation %s.%s (OID %u) vanished", LAKE_DATA_SCHEMA,
					 name, relid);
			store_rel_forget();		/* gone, and no invalidation told us yet */
		}
		CHECK_FOR_INTERRUPTS();
	}
	/* An ALTER it waited for is visible now; an index is its table's. */
	require_shape_of(rel->rd_rel->relkind == RELKIND_INDEX ?
					 rel->rd_index->indrelid : RelationGetRelid(rel));
	return rel;
}

/*
 * Lock, before the call reads them, the tables it may write, in the mode
 * its writes take (NULL-terminated names). A call that read a table and
 * then asked to write it could wait behind an administrator's REINDEX,
 * whose ShareLock lets readers on and which waits for them in turn: the
 * deadlock detector ended the call (40P01). Taken first, REINDEX waits.
 */
void
store_lock_for_write(const char *const *tables)
{
	if (RecoveryInProgress())
		return;					/* a standby writes nothing; its refusal comes later */
	for (; *tables != NULL; tables++)
		table_close(store_open(*tables, RowExclusiveLock), NoLock);
}

/*
 * Statement trigger on a lake_data table whose rows sessions cache
 * (tenant_grant, dataset): every backend drops its cached answers (at once
 * here, elsewhere once this transaction commits).
 */
Datum
lake_data_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	/* Fired BEFORE a row, its NULL would silently drop the row. */
	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_AFTER(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_STATEMENT(trigdata->tg_event))
		store_trigger_misfired("lake.data_changed()",
							   "AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE FOR EACH STATEMENT");
	CacheInvalidateRelcacheByRelid(RelationGetRelid(trigdata->tg_relation));
	return PointerGetDatum(NULL);
}
