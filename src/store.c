/*
 * store.c — table access shared by every lake_data table family
 * (store_version.c, store_stage.c, store_grant.c, store_owner.c, and the
 * cycle tables of the durable path):
 *
 *   - the identity table work runs as (the extension's owner), entered and
 *     left with store_connect() / store_finish();
 *   - relations opened directly, their OIDs cached per backend and dropped
 *     on invalidation; rows inserted through the table AM with their index
 *     entries (store_insert) and point lookups through an index
 *     (store_fetch);
 *   - SPI plans kept per backend for the statements that stay SQL;
 *   - bounded object locks.
 *
 * Every SQL statement is prepared once per backend, names its tables with
 * their schema and uses pg_catalog operators; caller input only ever
 * travels as parameters. And every statement runs with search_path =
 * pg_catalog, pg_temp, set here for the rest of the connected section the
 * first time one is prepared or run (store_plan): lake's functions carry no
 * SET clause, whose cost (a GUC nest level, a set_config_option and a
 * search-path recomputation on every call) the calls that run no SQL — an
 * append, a replay, a read, a cast — would pay for nothing. Outside SQL,
 * lake resolves no name through the path: relations, schemas and functions
 * are looked up by namespace OID or used by OID.
 */
#include "lake.h"

#include "access/genam.h"
#include "access/relation.h"
#include "access/tableam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "args.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "codec.h"
#include "commands/extension.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "digest.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "guc.h"
#include "miscadmin.h"
#include "replication/logicalworker.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "schema.h"
#include "store.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/syscache.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(lake_data_changed);
PG_FUNCTION_INFO_V1(lake_refuse_logical_apply);

/*
 * The store runs as the extension's owner. Connections nest: a lookup may
 * connect inside a connected section, and code called from inside a call
 * (an owner's trigger on lake's tables, a function it calls) may call lake
 * again. Each frame keeps the identity it was entered with and gives it
 * back when it finishes, and knows its caller: the role whose rights its
 * checks use. A frame entered inside a call as the extension's owner, the
 * identity lake set (lake's own nesting, or the owner's code that a call
 * ran: a trigger, a refresh of the owner's materialized view), has its
 * parent's caller, whatever the cache of grants holds; one entered as
 * another role (a SECURITY DEFINER function in a trigger) is that role's.
 *
 * An error unwinds every frame opened inside the (sub)transaction that
 * catches it, and the abort restores the identity that subtransaction
 * began with, so the depth goes back to the frames opened before it (each
 * remembers the subtransaction it was opened in): to none when it began
 * before the call, to the call's own when it began inside it (a trigger's
 * EXCEPTION block). Likewise the fixed search_path (path_nest, the GUC
 * nest level it was set at, 0 while unset): the outermost store_finish
 * pops that level, and the end of the subtransaction it was opened in pops
 * it too.
 */
#define MAX_DEPTH 64
typedef struct Frame
{
	SubTransactionId subxact;	/* the subtransaction it was opened in */
	Oid			userid;			/* the identity it was entered with */
	int			sec_context;
	Oid			caller;			/* whose call it serves */
} Frame;
static Frame frames[MAX_DEPTH + 1];	/* 1..depth */
static Oid	lake_owner;
static int	depth = 0;
static uint64 call_serial = 0;
static int	path_nest = 0;
static SubTransactionId path_subxact;	/* where path_nest was opened */
static bool callbacks_set = false;

/*
 * lake_data's namespace as the outermost store_connect found it: every
 * name lake resolves afresh during the call must still be in it. A DROP
 * EXTENSION and CREATE EXTENSION committed while a call runs (its reads
 * keep no lock, and the dataset's lock is an object lock DROP does not
 * wait for) would otherwise have the call write what it read of the old
 * installation (a dataset id, a cycle cut from the old ring) into the new
 * one's tables of the same names.
 */
static Oid	call_schema = InvalidOid;

/*
 * The extension's owner (pg_extension.extowner), its OID and lake_data's
 * namespace, cached per backend. Any change of the extension's row (a
 * REASSIGN OWNED of its owner, also when an administrator has given lake's
 * schemas to another role) or of a schema (dropping or recreating the
 * extension) resets the cache: no stale owner or namespace is ever served.
 */
typedef struct Installed
{
	Oid			owner;			/* InvalidOid: not installed, or not cached */
	Oid			extension;
	Oid			schema;
} Installed;

static Installed cached_installed;
static uint64 installed_forgotten = 0;	/* invalidations seen so far */

static void
forget_owner(Datum arg, int cacheid, uint32 hashvalue)
{
	memset(&cached_installed, 0, sizeof(cached_installed));
	installed_forgotten++;
}

static Installed
lookup_installed(bool missing_ok)
{
	static bool registered = false;
	Installed	found = {InvalidOid, InvalidOid, InvalidOid};
	uint64		seen;
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;

	if (OidIsValid(cached_installed.owner))
		return cached_installed;
	if (!registered)
	{
		CacheRegisterSyscacheCallback(NAMESPACEOID, forget_owner, (Datum) 0);
		CacheRegisterSyscacheCallback(EXTENSIONOID, forget_owner, (Datum) 0);
		registered = true;
	}
	seen = installed_forgotten;
	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber,
				F_NAMEEQ, CStringGetDatum("lake"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (!HeapTupleIsValid(tup) && !missing_ok)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"lake\" is not installed in this database")));
	if (HeapTupleIsValid(tup))
	{
		found.owner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
		found.extension = ((Form_pg_extension) GETSTRUCT(tup))->oid;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	if (OidIsValid(found.owner))
		found.schema = get_namespace_oid(LAKE_DATA_SCHEMA, true);

	/*
	 * The look-up reads catalogs, and an invalidation may arrive on the way
	 * (a lock taken, a cache miss): what was read then may be older than
	 * what it announced. It serves this call, as it would one that began
	 * just before; it is kept only when nothing came in meanwhile.
	 */
	if (installed_forgotten == seen)
		cached_installed = found;
	return found;
}

static Oid
lookup_owner(bool missing_ok)
{
	return lookup_installed(missing_ok).owner;
}

/*
 * Hold the extension until the transaction ends, against a DROP EXTENSION:
 * for the worker, whose passes lock one of lake's tables after another. A
 * DROP locks the extension first and then each of its objects, so without
 * this it could hold a table the pass asks for next while it waits for one
 * the pass holds, and the deadlock detector might end the DROP. This way
 * the DROP waits at its first lock, holding nothing of lake's, and the
 * worker, which takes this lock first, waits for a DROP holding nothing
 * it holds (up to its lock_timeout). False if the extension was dropped
 * while we waited (nothing to do then); true, holding nothing, when it was
 * absent from the start.
 */
bool
store_hold_extension(void)
{
	Oid			held = InvalidOid;

	/* Again if a DROP and CREATE committed while we waited: hold the new one. */
	for (;;)
	{
		Installed	now = lookup_installed(true);

		if (!OidIsValid(now.owner) || now.extension == held)
			break;
		CHECK_FOR_INTERRUPTS();
		held = now.extension;
		LockDatabaseObject(ExtensionRelationId, held, 0, AccessShareLock);
		/* A DROP committed while we waited is seen from here on. */
		AcceptInvalidationMessages();
	}
	return !OidIsValid(held) || OidIsValid(lookup_owner(true));
}

static void forget_all(void);

static void
reset_depth_xact(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
	{
		depth = 0;
		path_nest = 0;
	}

	/*
	 * It may have created what it cached. A prepared transaction's outcome
	 * is decided later, maybe by another session: this one forgets as
	 * after an abort.
	 */
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
		forget_all();
}

static void
reset_depth_subxact(SubXactEvent event, SubTransactionId mySubid,
					SubTransactionId parentSubid, void *arg)
{
	/* Subtransaction ids grow: what was opened in it or after has one as high. */
	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		while (depth > 0 && frames[depth].subxact >= mySubid)
			depth--;
		forget_all();
	}
	/* Its end pops the GUC levels opened in it, committed or not. */
	if ((event == SUBXACT_EVENT_ABORT_SUB || event == SUBXACT_EVENT_COMMIT_SUB) &&
		path_nest > 0 && path_subxact >= mySubid)
		path_nest = 0;
}

static void require_tables_present(void);

void
store_connect(void)
{
	Frame	   *f;

	if (!callbacks_set)
	{
		RegisterXactCallback(reset_depth_xact, NULL);
		RegisterSubXactCallback(reset_depth_subxact, NULL);
		callbacks_set = true;
	}
	if (depth == MAX_DEPTH)
		ereport(ERROR,
				(errcode(ERRCODE_STATEMENT_TOO_COMPLEX),
				 errmsg("lake calls nested more than %d deep", MAX_DEPTH),
				 errdetail("A trigger on lake's tables that calls lake nests a call inside the one that fired it.")));
	if (depth == 0)
	{
		Installed	now;

		lake_require_served_database();
		call_serial++;
		now = lookup_installed(false);
		lake_owner = now.owner;
		call_schema = now.schema;
		require_tables_present();
	}
	f = &frames[depth + 1];
	GetUserIdAndSecContext(&f->userid, &f->sec_context);
	if (depth > 0 && f->userid == lake_owner)
		f->caller = frames[depth].caller;
	else
		f->caller = f->userid;
	f->subxact = GetCurrentSubTransactionId();
	depth++;
	SPI_connect();
	SetUserIdAndSecContext(lake_owner, f->sec_context | SECURITY_LOCAL_USERID_CHANGE);
}

uint64
store_call_serial(void)
{
	return call_serial;
}

void
store_finish(void)
{
	Frame	   *f = &frames[depth];

	SPI_finish();
	if (--depth == 0)
	{
		if (path_nest > 0)
			AtEOXact_GUC(true, path_nest);
		path_nest = 0;
	}
	SetUserIdAndSecContext(f->userid, f->sec_context);
}

/*
 * Fix the settings lake's statements run with until the outermost
 * store_finish, as a SET clause would (fmgr_security_definer): a GUC nest
 * level of our own, the values saved in it. search_path is pg_catalog,
 * pg_temp: statements name everything with its schema, and this is the
 * guard for what PostgreSQL still resolves by name (the operator of an
 * IN (subquery), an implicit cast) and for any statement added later. The
 * planner settings a session may change, and with them slow lake's
 * statements while they hold what other tenants wait for (a JIT
 * compilation per statement, scans without their index), or have a plan
 * show what a parameter holds (custom plans in nested statements' logged
 * plans), are the defaults. Set before a statement is planned and kept
 * while it runs: a cached plan is also replanned when the path differs
 * from its own.
 */
static void
fix_statement_settings(void)
{
	static const char *const fixed[][2] = {
		{"search_path", "pg_catalog, pg_temp"},
		{"plan_cache_mode", "auto"},
		{"jit", "off"},
		{"enable_seqscan", "on"},
		{"enable_indexscan", "on"},
		{"enable_indexonlyscan", "on"},
		{"enable_bitmapscan", "on"},
	};

	if (depth == 0)
		elog(ERROR, "lake: SQL run outside store_connect()");
	if (path_nest > 0)
		return;
	path_nest = NewGUCNestLevel();
	path_subxact = GetCurrentSubTransactionId();
	for (int i = 0; i < lengthof(fixed); i++)
		(void) set_config_option(fixed[i][0], fixed[i][1],
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
								 true, 0, false);
}

Oid
store_caller(void)
{
	return depth > 0 ? frames[depth].caller : GetUserId();
}

Oid
store_owner(void)
{
	return lookup_owner(false);
}

/*
 * Commit the current transaction as the extension's owner, with security
 * restrictions, when lake is installed: what the commit runs on behalf of
 * the transaction's writes (deferred constraint triggers, which the owner
 * of lake's tables may create on them) then has the owner's privileges,
 * never those of the committing role. Used by the worker, whose own role
 * is the bootstrap superuser, so that an owner who is not a superuser (one
 * that lost SUPERUSER after installing lake) gains nothing through it. An
 * error in the commit is left to the caller's abort, which restores the
 * role the transaction began with.
 */
void
store_commit_as_owner(void)
{
	Oid			owner = lookup_owner(true);
	Oid			user;
	int			sec;

	GetUserIdAndSecContext(&user, &sec);
	if (OidIsValid(owner))
		SetUserIdAndSecContext(owner, sec | SECURITY_LOCAL_USERID_CHANGE |
							   SECURITY_RESTRICTED_OPERATION);
	CommitTransactionCommand();
	SetUserIdAndSecContext(user, sec);
}

static void require_shape_of_locked(void);

/*
 * In PG_CATCH of a statement of lake's being analyzed (prepared, or planned
 * again after an invalidation): the parser's error for a column renamed
 * (42703) or retyped (42804, 42883), or a table gone (42P01), when what
 * changed is a table of lake's that the statement locked or the extension
 * dropped, becomes the refusal any call gets for that (XX001, 55000). Any
 * other error goes on as it was.
 */
static void
explain_analysis_error(MemoryContext cxt)
{
	ErrorData  *edata;

	if (ERRCODE_TO_CATEGORY(geterrcode()) != ERRCODE_SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION)
		PG_RE_THROW();
	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	if (edata->sqlerrcode == ERRCODE_UNDEFINED_TABLE)
		schema_require_not_dropped();
	require_shape_of_locked();
	ReThrowError(edata);
}

/* SPI_execute_plan, or _snapshot when 'snapshot' is given, explained as above. */
int
store_execute(SPIPlanPtr plan, Datum *values, const char *nulls, Snapshot snapshot,
			  bool read_only, long count)
{
	MemoryContext cxt = CurrentMemoryContext;
	int			rc = 0;

	PG_TRY();
	{
		if (snapshot != InvalidSnapshot)
			rc = SPI_execute_snapshot(plan, values, nulls, snapshot, InvalidSnapshot,
									  read_only, false, count);
		else
			rc = SPI_execute_plan(plan, values, nulls, read_only, count);
	}
	PG_CATCH();
	{
		explain_analysis_error(cxt);
	}
	PG_END_TRY();
	return rc;
}

static SPIPlanPtr
keep_plan(SPIPlanPtr *cache, const char *sql, int nargs, Oid *argtypes,
		  int cursor_options)
{
	fix_statement_settings();
	if (*cache == NULL)
	{
		MemoryContext cxt = CurrentMemoryContext;
		SPIPlanPtr	plan = NULL;

		PG_TRY();
		{
			plan = SPI_prepare_cursor(sql, nargs, argtypes, cursor_options);
		}
		PG_CATCH();
		{
			explain_analysis_error(cxt);
		}
		PG_END_TRY();
		if (plan == NULL)
			elog(ERROR, "lake: could not prepare \"%s\": %s",
				 sql, SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		*cache = plan;
	}
	return *cache;
}

/*
 * A query kept once per backend and planned at every execution with its
 * parameters: a plan cached while a table was small must not keep a
 * sequential scan once it is large (planning is cheap next to a scan).
 */
SPIPlanPtr
store_plan(SPIPlanPtr *cache, const char *sql, int nargs, Oid *argtypes)
{
	return keep_plan(cache, sql, nargs, argtypes, CURSOR_OPT_CUSTOM_PLAN);
}

/* A statement with no access path to choose (an INSERT ... VALUES), planned once. */
SPIPlanPtr
store_plan_once(SPIPlanPtr *cache, const char *sql, int nargs, Oid *argtypes)
{
	return keep_plan(cache, sql, nargs, argtypes, 0);
}

void
store_run_snapshot(SPIPlanPtr plan, Datum *values, Snapshot snapshot, int expected)
{
	int			rc = store_execute(plan, values, NULL, snapshot, false, 0);

	store_require_shape_of_plan(plan);	/* it locked its tables: see them as they are */
	if (rc != expected)
		elog(ERROR, "lake: SPI returned %s, expected %s",
			 SPI_result_code_string(rc), SPI_result_code_string(expected));
}

void
store_run(SPIPlanPtr plan, Datum *values, int expected)
{
	store_run_snapshot(plan, values, InvalidSnapshot, expected);
}

/* Column colno of result row 'row'; NULL only where the caller allows it. */
Datum
store_col(uint64 row, int colno, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc,
						 colno, isnull);
}

Datum
store_colv(uint64 row, int colno)
{
	bool		isnull;
	Datum		d = store_col(row, colno, &isnull);

	/* Only a damaged (or altered) row of lake's tables reads NULL here. */
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("a row of lake's tables is damaged"),
				 errdetail("Its column \"%s\" reads as NULL.",
						   SPI_fname(SPI_tuptable->tupdesc, colno))));
	return d;
}

/* Text column copied out of SPI memory into the caller's context. */
char *
store_col_text(uint64 row, int colno)
{
	char	   *s = TextDatumGetCString(store_colv(row, colno));
	char	   *copy = SPI_palloc(strlen(s) + 1);

	strcpy(copy, s);
	return copy;
}

bool
store_copy_digest(Datum d, uint8 *out)
{
	bytea	   *b = DatumGetByteaPP(d);

	if (VARSIZE_ANY_EXHDR(b) != LAKE_DIGEST_LEN)
	{
		memset(out, 0, LAKE_DIGEST_LEN);
		return false;
	}
	memcpy(out, VARDATA_ANY(b), LAKE_DIGEST_LEN);
	return true;
}

Datum
store_digest_datum(const uint8 *digest)
{
	bytea	   *d = palloc(VARHDRSZ + LAKE_DIGEST_LEN);

	SET_VARSIZE(d, VARHDRSZ + LAKE_DIGEST_LEN);
	memcpy(VARDATA(d), digest, LAKE_DIGEST_LEN);
	return PointerGetDatum(d);
}

/* ----------------------------------------------------------------------
 * Relations, opened directly
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
 * ---------------------------------------------------------------------- */

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

static void
forget_all(void)
{
	nkept = 0;
	generation++;
}

static void
forget_rel(Datum arg, Oid relid)
{
	if (!OidIsValid(relid))
	{
		forget_all();
		shape_generation++;
		return;
	}
	for (int i = 0; i < SHAPE_NRELS; i++)
		if (shape_relid[i] == relid)
			shape_generation++;
	for (int i = 0; i < nkept; i++)
		if (kept[i].relid == relid)
		{
			forget_all();		/* names resolved again check the shapes again */
			return;
		}
}

static void
forget_namespace(Datum arg, int cacheid, uint32 hashvalue)
{
	forget_all();
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
	if (depth > 0)
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
		forget_all();
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

static void require_shape_of(Oid relid);

/* The tables of lake's this transaction has locked, as they are now. */
static void
require_shape_of_locked(void)
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

Oid
store_sealing_lock_object(void)
{
	return store_relid("cycle");
}

bool
store_object_lock_held(Oid object)
{
	LOCKTAG		tag;

	SET_LOCKTAG_OBJECT(tag, MyDatabaseId, object, 0, 0);
	return LockHeldByMe(&tag, ExclusiveLock);
}

bool
store_sealing_lock_held(void)
{
	return store_object_lock_held(store_sealing_lock_object());
}

/*
 * A new blob id (a stage's id, kept by the version it becomes), in this
 * partition's residue class: a router sends a stage id to its partition by
 * the id alone. And in this timeline's range (its 2^40 ids are offset by
 * the timeline; the sequence goes on across timelines): a standby promoted
 * without the primary's last WAL (or a point-in-time recovery) hands out
 * the sequence's values again, and a stage id a client holds from the old
 * timeline's lost end must not name another operation's stage.
 */
void
store_writer_row_missing(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("lake_data.writer has no row"),
			 errdetail("Its one row holds the writer epoch, without which lake cannot seal or recover."),
			 errhint("Put the row back as a backup of this database has it.")));
}

void
store_require_partition(int32 partitions, int32 partition)
{
	if (partitions != 0 && (partitions != lake_partitions || partition != lake_partition))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this database's lake is partition %d of %d, not %d of %d",
						partition, partitions, lake_partition, lake_partitions),
				 errdetail("Its receipts and stage ids were issued in partition %d's residue class.",
						   partition),
				 errhint("Set lake.partitions and lake.partition back to %d and %d.",
						 partitions, partition)));
}

int64
store_next_blob(void)
{
	Datum		writer[WRITER_NATTS];
	bool		nulls[WRITER_NATTS];
	int64		n;
	TimeLineID	tli = GetWALInsertionTimeLine();

	/* Never an id in another partition's class than the data's (SPEC §7). */
	if (store_fetch("writer", "writer_pkey", InvalidSnapshot, NULL, 0,
					ForwardScanDirection, writer, nulls))
	{
		store_require_partition(nulls[WA_PARTITIONS - 1] ? 0 : DatumGetInt32(writer[WA_PARTITIONS - 1]),
								nulls[WA_PARTITION_NO - 1] ? 0 : DatumGetInt32(writer[WA_PARTITION_NO - 1]));
		if (nulls[WA_TIMELINE - 1] || DatumGetInt64(writer[WA_TIMELINE - 1]) > (int64) tli)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("no stage or payload id is given on timeline %u before lake's worker has recovered on it", tli),
					 nulls[WA_TIMELINE - 1] ?
					 errdetail("lake's data was restored from a dump.") :
					 errdetail("lake's data was last served on timeline " INT64_FORMAT ": the server's timeline went back (pg_upgrade).",
							   DatumGetInt64(writer[WA_TIMELINE - 1])),
					 errhint("Retry once lake.stats() shows the worker serving.")));
	}
	n = store_nextval("blob_seq");

	/* 2^12 timelines of 2^40 ids, times at most 1024 partitions: < 2^63. */
	if (tli > (1 << 12) || n >= ((int64) 1 << 40))
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("no stage or payload id is left for timeline %u", tli),
				 errdetail("Stages and payloads stored in more than one chunk draw 2^40 ids in all, over at most 4096 timelines.")));
	return lake_partition_handle(((int64) (tli - 1) << 40) + n);
}

/*
 * A timeline that went back (pg_upgrade starts the new cluster on timeline
 * 1), or a restore, reaches ids that another line of history (a primary
 * lost in an earlier failover, the dumped database going on) may have
 * handed out past the sequence's value: move it 2^32 ahead, far more than
 * such a line draws (as LAKE_TIMELINE_EPOCH_SKIP for epochs). setval
 * outlives a recovery that fails after it, and the worker's next try comes
 * here again: the sequence still where this process put it is a skip
 * already made (no id is given in between, see store_next_blob).
 */
void
store_skip_blob_ids(void)
{
	static SPIPlanPtr plan;
	static int64 skipped_to = -1;
	int64		n;

	store_run(store_plan(&plan, "SELECT s.last_value FROM lake_data.blob_seq s", 0, NULL),
			  NULL, SPI_OK_SELECT);
	n = DatumGetInt64(store_colv(0, 1));
	if (n == skipped_to)
		return;
	skipped_to = Min(n + ((int64) 1 << 32), ((int64) 1 << 40) - 1);
	(void) DirectFunctionCall2(setval_oid, ObjectIdGetDatum(lake_relid("blob_seq")),
							   Int64GetDatum(skipped_to));
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
			forget_all();		/* gone, and no invalidation told us yet */
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

	if (!CALLED_AS_TRIGGER(fcinfo))
		store_trigger_misfired("lake.data_changed()", "by the trigger manager");
	CacheInvalidateRelcacheByRelid(RelationGetRelid(trigdata->tg_relation));
	return PointerGetDatum(NULL);
}

/*
 * Trigger (AFTER ROW, BEFORE TRUNCATE) on every lake_data table, enabled
 * for the replica role only: a logical replication worker (apply or table
 * sync) writes no row of lake's. The rows would land under a running
 * worker and sessions whose epoch, live owner states, stages and caches
 * know nothing of them (no other trigger of lake's fires for the replica
 * role): states that contradict the log, receipts of an epoch the
 * replicated history had used. Any other session with
 * session_replication_role = replica goes on.
 */
Datum
lake_refuse_logical_apply(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		store_trigger_misfired("lake.refuse_logical_apply()", "by the trigger manager");
	/* lake's own writes go on: a lake call in a trigger of the application's. */
	if (IsLogicalWorker() && depth == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s.%s cannot be a logical replication target", LAKE_DATA_SCHEMA,
						RelationGetRelationName(trigdata->tg_relation)),
				 errdetail("lake's tables are written by lake alone: its worker and sessions keep state that replicated rows would contradict."),
				 errhint("Publish the application's tables or schemas, not lake_data's; move lake itself with streaming replication, pg_dump or pg_upgrade.")));
	return PointerGetDatum(NULL);
}

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
	if (update_indexes)
		list_free(ExecInsertIndexTuples(rri, slot, estate, true, false, NULL, NIL));
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
	SysScanDesc scan;
	HeapTuple	tup;
	bool		found;

	(void) table_width(rel, room);
	if (snapshot == InvalidSnapshot)
		snapshot = GetTransactionSnapshot();
	scan = systable_beginscan_ordered(rel, idx, snapshot, nkeys, keys);
	tup = systable_getnext_ordered(scan, dir);
	found = HeapTupleIsValid(tup);
	if (found)
		store_deform(rel, heap_copytuple(tup), values, nulls, room);
	systable_endscan_ordered(scan);
	if (found)
		store_require_columns(RelationGetDescr(rel), nulls, RelationGetRelationName(rel));
	return found;
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

	*why = NULL;
	if (!VARATT_IS_EXTERNAL(DatumGetPointer(value)) &&
		!VARATT_IS_COMPRESSED(DatumGetPointer(value)))
		return DatumGetByteaPP(value);
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
		heap_deform_tuple(tup, desc, values, nulls);
		return;
	}
	v = palloc(sizeof(Datum) * desc->natts);
	n = palloc(sizeof(bool) * desc->natts);
	heap_deform_tuple(tup, desc, v, n);
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

/*
 * Lower lock_timeout to 'wait_ms' for the lock waits that follow, unless
 * the session's own is lower already; returns the GUC nest level to pass
 * to store_unbound_lock_waits, and whether a lock-timeout error is then
 * this bound's ('bounded') rather than the session's own 55P03.
 */
static int
store_bound_lock_waits(long wait_ms, bool *bounded)
{
	int			nest;

	/*
	 * The fixed search_path's nest level must lie below this one: set
	 * inside it, store_unbound_lock_waits would pop it mid-statement.
	 */
	if (depth > 0)
		fix_statement_settings();
	nest = NewGUCNestLevel();

	*bounded = LockTimeout == 0 || LockTimeout > wait_ms;
	if (*bounded)
		(void) set_config_option("lock_timeout", psprintf("%ld", Max(wait_ms, 1)),
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
								 true, 0, false);
	return nest;
}

static void
store_unbound_lock_waits(int nest)
{
	AtEOXact_GUC(true, nest);
}

/*
 * In the PG_CATCH of a bounded wait begun in 'mcxt': re-throws anything
 * but the bound's own lock timeout or a deadlock found during the wait,
 * which it clears (the caller then reports it its own way).
 */
static void
store_catch_bound_timeout(MemoryContext mcxt, bool bounded)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(mcxt);
	edata = CopyErrorData();
	/*
	 * A deadlock found while waiting (two lake calls taking a dataset's and
	 * a stage's locks in opposite orders) ends the wait like its bound: the
	 * caller's 53000, nothing written, not a 40P01 (SPEC §3).
	 */
	if (edata->sqlerrcode != ERRCODE_T_R_DEADLOCK_DETECTED &&
		!(bounded && edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE))
		PG_RE_THROW();
	FreeErrorData(edata);
	FlushErrorState();

	/*
	 * The bound's timer may have fired with a deadlock found: its cancel,
	 * still pending, would surface as a 55P03 later in a session that set
	 * no lock_timeout (after a caller caught the refusal). It is this
	 * refusal's; PostgreSQL too reports any cancel with that indicator as
	 * the lock timeout.
	 */
	if (bounded && get_timeout_indicator(LOCK_TIMEOUT, true))
		QueryCancelPending = false;
}

/*
 * store_run for a statement that may wait for another transaction's row
 * (ON CONFLICT on its uncommitted insert, a DELETE of a row it deletes):
 * the wait is bounded by 'wait_ms' like every wait in lake (SPEC §3);
 * when that runs out, or at a deadlock found meanwhile, 'busy' raises the
 * caller's 53000 (its message is made only then), nothing written.
 */
void
store_run_bounded(SPIPlanPtr plan, Datum *values, int expected, long wait_ms,
				  void (*busy) (const void *arg), const void *arg)
{
	bool		bounded;
	int			nest = store_bound_lock_waits(wait_ms, &bounded);
	MemoryContext mcxt = CurrentMemoryContext;

	PG_TRY();
	{
		store_run(plan, values, expected);
		/* A bound that ran out as the wait ended left its cancel pending. */
		CHECK_FOR_INTERRUPTS();
	}
	PG_CATCH();
	{
		store_catch_bound_timeout(mcxt, bounded);
		busy(arg);
		elog(ERROR, "lake: a bounded wait's report returned");
	}
	PG_END_TRY();
	store_unbound_lock_waits(nest);
}

/*
 * Take a transaction-scoped object lock (keyed by a lake_data table's OID
 * and an id: no WAL, shows in pg_locks), waiting at most 'wait_ms'. The
 * wait queues in the lock manager (first come, first served, deadlock
 * detection) under a lock_timeout lowered to the time left; returns false
 * when that runs out. A session's own lower lock_timeout still applies
 * and still raises its own 55P03.
 */
bool
store_lock_object(Oid classid, Oid objid, uint16 objsubid, long wait_ms)
{
	bool		bounded;
	int			nest;
	MemoryContext mcxt = CurrentMemoryContext;
	volatile bool granted = false;

	if (ConditionalLockDatabaseObject(classid, objid, objsubid, ExclusiveLock))
		return true;
	if (wait_ms <= 0)
		return false;
	nest = store_bound_lock_waits(wait_ms, &bounded);
	PG_TRY();
	{
		LockDatabaseObject(classid, objid, objsubid, ExclusiveLock);
		granted = true;

		/*
		 * Granted as the bound ran out: the lock timeout's cancel is still
		 * pending, and would surface as a 55P03 at the caller's next
		 * interrupt check. Taken here, it is the bound's refusal.
		 */
		CHECK_FOR_INTERRUPTS();
	}
	PG_CATCH();
	{
		store_catch_bound_timeout(mcxt, bounded);
		/* Out of the lock's wait queue now, not at the abort that follows. */
		LockErrorCleanup();
		if (granted)
			UnlockDatabaseObject(classid, objid, objsubid, ExclusiveLock);
		store_unbound_lock_waits(nest);
		return false;
	}
	PG_END_TRY();
	store_unbound_lock_waits(nest);
	return true;
}

/*
 * Copy a query's rows into a set-returning function's tuplestore through
 * a cursor: memory stays flat however long the result. The query's
 * columns are the function's.
 */
void
store_fill(SPIPlanPtr plan, Datum *values, ReturnSetInfo *rsinfo)
{
	MemoryContext cxt = CurrentMemoryContext;
	Portal		portal = NULL;
	int			natts = rsinfo->setDesc->natts;
	Datum	   *row = palloc(sizeof(Datum) * natts);
	bool	   *nulls = palloc(sizeof(bool) * natts);

	PG_TRY();
	{
		portal = SPI_cursor_open(NULL, plan, values, NULL, true);
	}
	PG_CATCH();
	{
		explain_analysis_error(cxt);
	}
	PG_END_TRY();
	store_require_shape_of_plan(plan);	/* its tables are locked now */
	lake_require_result_width("a set-returning function of lake's", rsinfo->setDesc,
							  portal->tupDesc->natts);

	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		SPI_cursor_fetch(portal, true, 1000);
		if (SPI_processed == 0)
			break;
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			heap_deform_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, row, nulls);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, nulls);
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
}
