/*
 * store.c — the section in which a call works on lake_data's tables, and
 * the SQL it runs there (shared by every table family: store_version.c,
 * store_stage.c, store_grant.c, store_owner.c, and the cycle tables of the
 * durable path):
 *
 *   - the identity table work runs as (the extension's owner), entered and
 *     left with store_connect() / store_finish();
 *   - SPI plans kept per backend for the statements that stay SQL, and the
 *     settings they run with;
 *   - bounded waits: object locks, and statements that may wait for
 *     another transaction's row.
 *
 * Relations opened directly are store_rel.c's, rows through the table AM
 * store_row.c's.
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
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/table.h"
#include "access/xact.h"
#include "args.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "guc.h"
#include "jit/jit.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/paths.h"
#include "optimizer/planmain.h"
#include "miscadmin.h"
#include "replication/logicalworker.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "schema.h"
#include "store.h"
#include "store_rel.h"
#include "store_row.h"
#include "utils/builtins.h"
#include "utils/syscache.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/timeout.h"

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

static void
reset_depth_xact(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
	{
		depth = 0;
		path_nest = 0;
		store_rel_end_call();
	}

	/*
	 * It may have created what it cached. A prepared transaction's outcome
	 * is decided later, maybe by another session: this one forgets as
	 * after an abort.
	 */
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
		store_rel_forget();
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
		if (depth == 0)
			store_rel_end_call();
		store_rel_forget();
	}
	/* Its end pops the GUC levels opened in it, committed or not. */
	if ((event == SUBXACT_EVENT_ABORT_SUB || event == SUBXACT_EVENT_COMMIT_SUB) &&
		path_nest > 0 && path_subxact >= mySubid)
		path_nest = 0;
}

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
		store_rel_begin_call(now.schema);
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
		store_rel_end_call();
	}
	SetUserIdAndSecContext(f->userid, f->sec_context);
}

/*
 * Fix the settings lake's statements run with until the outermost
 * store_finish, as a SET clause would (fmgr_security_definer): a GUC nest
 * level of our own, the values saved in it. search_path is pg_catalog,
 * pg_temp: statements name everything with its schema, and this is the
 * guard for what PostgreSQL still resolves by name (the operator of an
 * IN (subquery), an implicit cast) and for any statement added later.
 *
 * Every setting that shapes a plan or its memory is PostgreSQL's default
 * (jit is off): a session, its role or its database could otherwise turn
 * lake's statements into full scans or quadratic joins (a nested loop over
 * every chunk of the table, per chunk of a stage: seconds for one commit)
 * while they hold what other tenants wait for, or have a plan show what a
 * parameter holds (custom plans in nested statements' logged plans). A
 * server's own tuning of them is not used either: lake's statements are
 * key lookups planned for the defaults. Left as they are: the settings of
 * parallel plans (lake's are never parallel: no CURSOR_OPT_PARALLEL_OK),
 * of the genetic optimizer past geqo (its threshold is fixed), of JIT past
 * jit, of prefetching, recursive queries and temporary tables. Only a
 * setting that differs is set (a default session sets two: the path and
 * jit), before a statement is planned, and kept while it runs: a cached
 * plan is replanned when the path differs from its own.
 */
typedef enum FixedType
{
	FIXED_BOOL,
	FIXED_REAL,
	FIXED_INT
} FixedType;

typedef struct Fixed
{
	const char *name;
	FixedType	type;
	void	   *var;			/* the setting's C variable */
	double		value;			/* what lake's statements are planned with */
	const char *text;			/* the same, as set */
} Fixed;

#define FIXED_BOOL_AT(name, var, value) {name, FIXED_BOOL, &var, value, (value) ? "on" : "off"}
#define FIXED_REAL_AT(name, var, value) {name, FIXED_REAL, &var, value, CppAsString2(value)}
#define FIXED_INT_AT(name, var, value) {name, FIXED_INT, &var, value, CppAsString2(value)}

static const Fixed fixed[] = {
	FIXED_BOOL_AT("jit", jit_enabled, false),
	FIXED_BOOL_AT("enable_seqscan", enable_seqscan, true),
	FIXED_BOOL_AT("enable_indexscan", enable_indexscan, true),
	FIXED_BOOL_AT("enable_indexonlyscan", enable_indexonlyscan, true),
	FIXED_BOOL_AT("enable_bitmapscan", enable_bitmapscan, true),
	FIXED_BOOL_AT("enable_tidscan", enable_tidscan, true),
	FIXED_BOOL_AT("enable_sort", enable_sort, true),
	FIXED_BOOL_AT("enable_incremental_sort", enable_incremental_sort, true),
	FIXED_BOOL_AT("enable_hashagg", enable_hashagg, true),
	FIXED_BOOL_AT("enable_nestloop", enable_nestloop, true),
	FIXED_BOOL_AT("enable_material", enable_material, true),
	FIXED_BOOL_AT("enable_memoize", enable_memoize, true),
	FIXED_BOOL_AT("enable_mergejoin", enable_mergejoin, true),
	FIXED_BOOL_AT("enable_hashjoin", enable_hashjoin, true),
	FIXED_BOOL_AT("enable_gathermerge", enable_gathermerge, true),
	FIXED_BOOL_AT("enable_partitionwise_join", enable_partitionwise_join, false),
	FIXED_BOOL_AT("enable_partitionwise_aggregate", enable_partitionwise_aggregate, false),
	FIXED_BOOL_AT("enable_parallel_append", enable_parallel_append, true),
	FIXED_BOOL_AT("enable_parallel_hash", enable_parallel_hash, true),
	FIXED_BOOL_AT("enable_partition_pruning", enable_partition_pruning, true),
	FIXED_BOOL_AT("enable_async_append", enable_async_append, true),
	FIXED_BOOL_AT("geqo", enable_geqo, true),
	FIXED_REAL_AT("seq_page_cost", seq_page_cost, DEFAULT_SEQ_PAGE_COST),
	FIXED_REAL_AT("random_page_cost", random_page_cost, DEFAULT_RANDOM_PAGE_COST),
	FIXED_REAL_AT("cpu_tuple_cost", cpu_tuple_cost, DEFAULT_CPU_TUPLE_COST),
	FIXED_REAL_AT("cpu_index_tuple_cost", cpu_index_tuple_cost, DEFAULT_CPU_INDEX_TUPLE_COST),
	FIXED_REAL_AT("cpu_operator_cost", cpu_operator_cost, DEFAULT_CPU_OPERATOR_COST),
	FIXED_REAL_AT("parallel_tuple_cost", parallel_tuple_cost, DEFAULT_PARALLEL_TUPLE_COST),
	FIXED_REAL_AT("parallel_setup_cost", parallel_setup_cost, DEFAULT_PARALLEL_SETUP_COST),
	FIXED_REAL_AT("cursor_tuple_fraction", cursor_tuple_fraction, DEFAULT_CURSOR_TUPLE_FRACTION),
	FIXED_REAL_AT("hash_mem_multiplier", hash_mem_multiplier, 2.0),
	FIXED_INT_AT("work_mem", work_mem, 4096),
	{"plan_cache_mode", FIXED_INT, &plan_cache_mode, PLAN_CACHE_MODE_AUTO, "auto"},
	{"constraint_exclusion", FIXED_INT, &constraint_exclusion, CONSTRAINT_EXCLUSION_PARTITION, "partition"},
	FIXED_INT_AT("effective_cache_size", effective_cache_size, DEFAULT_EFFECTIVE_CACHE_SIZE),
	FIXED_INT_AT("from_collapse_limit", from_collapse_limit, 8),
	FIXED_INT_AT("join_collapse_limit", join_collapse_limit, 8),
	FIXED_INT_AT("geqo_threshold", geqo_threshold, 12),
};

/* Whether the setting is not what lake's statements are planned with. */
static bool
fixed_differs(const Fixed *f)
{
	switch (f->type)
	{
		case FIXED_BOOL:
			return *(bool *) f->var != (f->value != 0);
		case FIXED_REAL:
			return *(double *) f->var != f->value;
		case FIXED_INT:
			return *(int *) f->var != (int) f->value;
	}
	return true;
}

static void
fix_setting(const char *name, const char *value)
{
	(void) set_config_option(name, value, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
}

static void
fix_statement_settings(void)
{
	if (depth == 0)
		elog(ERROR, "lake: SQL run outside store_connect()");
	if (path_nest > 0)
		return;
	path_nest = NewGUCNestLevel();
	path_subxact = GetCurrentSubTransactionId();
	fix_setting("search_path", "pg_catalog, pg_temp");
	for (int i = 0; i < lengthof(fixed); i++)
		if (fixed_differs(&fixed[i]))
			fix_setting(fixed[i].name, fixed[i].text);
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
	store_require_shape_of_locked();
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
	HeapTuple	tup = SPI_tuptable->vals[row];
	TupleDesc	desc = SPI_tuptable->tupdesc;
	Datum		d = SPI_getbinval(tup, desc, colno, isnull);

	if (!*isnull && TupleDescAttr(desc, colno - 1)->attlen == -1)
		store_require_value(tup, desc, colno, d, NULL);
	return d;
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

	if (!CALLED_AS_TRIGGER(fcinfo) ||
		(TRIGGER_FIRED_BY_TRUNCATE(trigdata->tg_event) ?
		 !TRIGGER_FIRED_BEFORE(trigdata->tg_event) :
		 !TRIGGER_FIRED_AFTER(trigdata->tg_event) || !TRIGGER_FIRED_FOR_ROW(trigdata->tg_event)))
		store_trigger_misfired("lake.refuse_logical_apply()",
							   "AFTER INSERT OR UPDATE OR DELETE FOR EACH ROW, or BEFORE TRUNCATE");
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

	if (ConditionalLockDatabaseObject(classid, objid, objsubid, ExclusiveLock))
		return true;
	if (wait_ms <= 0)
		return false;
	nest = store_bound_lock_waits(wait_ms, &bounded);
	PG_TRY();
	{
		LockDatabaseObject(classid, objid, objsubid, ExclusiveLock);

		/*
		 * Granted as the bound ran out: the lock timeout's cancel is still
		 * pending, and would surface as a 55P03 at the caller's next
		 * interrupt check. Taken here, it is the bound's refusal.
		 */
		CHECK_FOR_INTERRUPTS();
	}
	PG_CATCH();
	{
		LOCKTAG		tag;

		store_catch_bound_timeout(mcxt, bounded);
		/* Out of the lock's wait queue now, not at the abort that follows. */
		LockErrorCleanup();
		/*
		 * Granted (before the interrupt check above raised, or as the
		 * timeout struck, which the cleanup keeps): let it go.
		 */
		SET_LOCKTAG_OBJECT(tag, MyDatabaseId, classid, objid, objsubid);
		if (LockHeldByMe(&tag, ExclusiveLock))
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

