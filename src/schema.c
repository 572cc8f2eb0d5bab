/*
 * schema.c — the shape of lake_data's tables: every column lake reads or
 * writes, by name and type, in the order the install script makes them.
 *
 * lake reads its rows by position (the table AM paths) and by name (SPI),
 * and takes each column's datum for its type. A column an administrator
 * retyped, or dropped and added again (it moves to the end), would be read
 * as another type: a crash, or another column's bytes taken for this
 * one's. Its indexes are scanned and filled directly, with keys of the
 * types lake made them on: an index re-created under the same name on
 * other columns crashed the server, and one partial, descending or no
 * longer unique would miss rows or let duplicates in. store_rel.c checks
 * every table and its indexes against this before the first use in a
 * backend and after every invalidation that could have changed one, so the
 * regression suites check this list against the install script too.
 */
#include "lake.h"

#include "access/htup_details.h"
#include "access/tupdesc.h"
#include "catalog/pg_am.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "funcapi.h"
#include "nodes/primnodes.h"
#include "schema.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#define SHAPE_MAX_COLUMNS 14

typedef struct ColumnShape
{
	const char *name;
	Oid			type;
	bool		notnull;		/* made NOT NULL: lake reads it without a test */
	bool		bytewise;		/* made COLLATE "C" (else its type's collation) */
} ColumnShape;

typedef struct TableShape
{
	const char *table;
	int			ncolumns;
	ColumnShape columns[SHAPE_MAX_COLUMNS];
} TableShape;

static const TableShape shapes[] = {
	{"dataset", 3, {
		{"id", INT4OID, true},
		{"name", TEXTOID, true},
		{"created_at", TIMESTAMPTZOID, true}
	}},
	{"version", 7, {
		{"version", INT8OID, true},
		{"committed_at", TIMESTAMPTZOID, true},
		{"dataset_id", INT4OID, true},
		{"data", BYTEAOID, false},
		{"tenant", TEXTOID, true, true},
		{"operation_id", TEXTOID, true, true},
		{"digest", BYTEAOID, true}
	}},
	{"version_blob", 5, {
		{"blob", INT8OID, true},
		{"dataset_id", INT4OID, true},
		{"nchunks", INT4OID, true},
		{"version", INT8OID, true},
		{"bytes", INT8OID, true}
	}},
	{"stage_replay", 5, {
		{"stage", INT8OID, true},
		{"dataset_id", INT4OID, true},
		{"version", INT8OID, true},
		{"tenant", TEXTOID, true, true},
		{"operation_id", TEXTOID, true, true}
	}},
	{"chunk", 4, {
		{"blob", INT8OID, true},
		{"chunk_no", INT4OID, true},
		{"bytes", INT4OID, true},
		{"data", BYTEAOID, true}
	}},
	{"stage", 9, {
		{"id", INT8OID, true},
		{"dataset_id", INT4OID, true},
		{"tenant", TEXTOID, true, true},
		{"operation_id", TEXTOID, true, true},
		{"created_at", TIMESTAMPTZOID, true},
		{"touched_at", TIMESTAMPTZOID, true},
		{"opened_by", OIDOID, true},
		{"chunks", INT4OID, true},
		{"bytes", INT8OID, true}
	}},
	{"blob_gone", 1, {
		{"blob", INT8OID, true}
	}},
	{"tenant_grant", 2, {
		{"tenant", TEXTOID, true},
		{"role", OIDOID, true}
	}},
	{"dictionary", 6, {
		{"id", INT4OID, true},
		{"dataset_id", INT4OID, true},
		{"created_at", TIMESTAMPTZOID, true},
		{"samples", INT4OID, true},
		{"checksum", INT8OID, true},
		{"data", BYTEAOID, true}
	}},
	{"lifecycle", 6, {
		{"id", INT4OID, true},
		{"name", TEXTOID, true},
		{"initial_phase", TEXTOID, true},
		{"phases", TEXTARRAYOID, true},
		{"edges", TEXTARRAYOID, true},
		{"created_at", TIMESTAMPTZOID, true}
	}},
	{"owner", 7, {
		{"id", INT4OID, true},
		{"name", TEXTOID, true},
		{"lifecycle", INT4OID, true},
		{"tenant", TEXTOID, true},
		{"created_at", TIMESTAMPTZOID, true},
		{"quarantine_position", INT8OID, false},
		{"quarantine_reason", TEXTOID, false}
	}},
	{"writer", 6, {
		{"one", BOOLOID, true},
		{"epoch", INT4OID, true},
		{"timeline", INT8OID, false},
		{"partitions", INT4OID, false},
		{"partition_no", INT4OID, false},
		{"encoding", INT2OID, true}
	}},
	{"cycle", 14, {
		{"cycle", INT8OID, true},
		{"epoch", INT4OID, true},
		{"first_seq", INT8OID, true},
		{"last_seq", INT8OID, true},
		{"casts", INT4OID, true},
		{"bytes", INT8OID, true},
		{"stored_bytes", INT8OID, true},
		{"sealed_at", TIMESTAMPTZOID, true},
		{"lsn", PG_LSNOID, true},
		{"indexed_through", INT8OID, true},
		{"tail_owners", INT4OID, true},
		{"owners", BYTEAOID, true},
		{"data", BYTEAOID, true},
		{"encoding", INT2OID, true}
	}},
	{"owner_block", 3, {
		{"owner_id", INT4OID, true},
		{"first_cycle", INT8OID, true},
		{"entry", BYTEAOID, true}
	}},
	{"cast_operation", 5, {
		{"owner_id", INT4OID, true},
		{"operation_id", TEXTOID, true},
		{"digest", BYTEAOID, true},
		{"epoch", INT4OID, true},
		{"seq", INT8OID, true}
	}},
	{"snapshot", 7, {
		{"cycle", INT8OID, true},
		{"taken_at", TIMESTAMPTZOID, true},
		{"owners", INT4OID, true},
		{"bytes", INT8OID, true},
		{"stored_bytes", INT8OID, true},
		{"data", BYTEAOID, true},
		{"encoding", INT2OID, true}
	}},
};

StaticAssertDecl(lengthof(shapes) == SCHEMA_NTABLES, "SCHEMA_NTABLES counts the shapes");

/*
 * lake's btree indexes: the key columns in order, each in its type's
 * default operator class and the column's collation, ascending; none
 * partial, none with INCLUDE columns. HASH_KEY is version_operation's
 * expression, lake_data.operation_hash(tenant, operation_id).
 */
#define HASH_KEY "operation_hash(tenant, operation_id)"
#define SHAPE_MAX_KEYS 3

typedef struct IndexShape
{
	const char *index;
	const char *table;
	bool		unique;
	int			nkeys;
	const char *keys[SHAPE_MAX_KEYS];
} IndexShape;

static const IndexShape index_shapes[] = {
	{"dataset_pkey", "dataset", true, 1, {"id"}},
	{"dataset_name", "dataset", true, 1, {"name"}},
	{"version_pkey", "version", true, 2, {"dataset_id", "version"}},
	{"version_operation", "version", false, 2, {"dataset_id", HASH_KEY}},
	{"version_blob_pkey", "version_blob", true, 1, {"blob"}},
	{"version_blob_version", "version_blob", true, 2, {"dataset_id", "version"}},
	{"stage_replay_pkey", "stage_replay", true, 1, {"stage"}},
	{"chunk_pkey", "chunk", true, 2, {"blob", "chunk_no"}},
	{"stage_pkey", "stage", true, 1, {"id"}},
	{"stage_dataset_id_tenant_operation_id_key", "stage", true, 3, {"dataset_id", "tenant", "operation_id"}},
	{"stage_opened_by", "stage", false, 1, {"opened_by"}},
	{"stage_touched_at", "stage", false, 1, {"touched_at"}},
	{"blob_gone_pkey", "blob_gone", true, 1, {"blob"}},
	{"tenant_grant_pkey", "tenant_grant", true, 2, {"tenant", "role"}},
	{"dictionary_pkey", "dictionary", true, 1, {"id"}},
	{"dictionary_dataset", "dictionary", false, 2, {"dataset_id", "id"}},
	{"lifecycle_pkey", "lifecycle", true, 1, {"id"}},
	{"lifecycle_name_key", "lifecycle", true, 1, {"name"}},
	{"owner_pkey", "owner", true, 1, {"id"}},
	{"owner_name_key", "owner", true, 1, {"name"}},
	{"writer_pkey", "writer", true, 1, {"one"}},
	{"cycle_pkey", "cycle", true, 1, {"cycle"}},
	{"cycle_receipt", "cycle", false, 2, {"epoch", "last_seq"}},
	{"owner_block_pkey", "owner_block", true, 2, {"owner_id", "first_cycle"}},
	{"cast_operation_pkey", "cast_operation", true, 2, {"owner_id", "operation_id"}},
	{"snapshot_pkey", "snapshot", true, 1, {"cycle"}},
};

const char *
schema_table(int i)
{
	return shapes[i].table;
}

/* lake_data's sequences: stage and blob ids, dictionary ids, identities. */
static const char *const sequences[] = {
	"blob_seq", "dictionary_seq", "dataset_id_seq", "lifecycle_id_seq", "owner_id_seq"
};

StaticAssertDecl(lengthof(sequences) == SCHEMA_NSEQUENCES, "SCHEMA_NSEQUENCES counts the sequences");

const char *
schema_sequence(int i)
{
	return sequences[i];
}

/* The attribute number of 'name' in 'desc', or 0. */
static AttrNumber
column_number(TupleDesc desc, const char *name)
{
	for (int a = 0; a < desc->natts; a++)
		if (!TupleDescAttr(desc, a)->attisdropped &&
			strcmp(NameStr(TupleDescAttr(desc, a)->attname), name) == 0)
			return a + 1;
	return 0;
}

/* Is 'expr' lake_data.operation_hash(tenant, operation_id) of 'desc'? */
static bool
is_hash_key(Node *expr, TupleDesc desc)
{
	FuncExpr   *f = (FuncExpr *) expr;
	char	   *name;
	char	   *schema;

	if (expr == NULL || !IsA(expr, FuncExpr) || list_length(f->args) != 2 ||
		f->funcresulttype != INT4OID)
		return false;
	name = get_func_name(f->funcid);
	if (name == NULL || strcmp(name, "operation_hash") != 0)
		return false;
	schema = get_namespace_name(get_func_namespace(f->funcid));
	if (schema == NULL || strcmp(schema, LAKE_DATA_SCHEMA) != 0)
		return false;
	for (int a = 0; a < 2; a++)
	{
		Var		   *v = (Var *) list_nth(f->args, a);

		if (!IsA(v, Var) ||
			v->varattno != column_number(desc, a == 0 ? "tenant" : "operation_id"))
			return false;
	}
	return true;
}

/*
 * What is not as lake made it in index 'irel' of table 'desc', or NULL.
 * Only what lake relies on is compared: the keys, their order and
 * equality, uniqueness, completeness; not its tablespace or storage.
 */
static const char *
index_change(Relation irel, TupleDesc desc, const IndexShape *s)
{
	Form_pg_index ind = irel->rd_index;
	List	   *exprs;
	int			next_expr = 0;

	if (irel->rd_rel->relam != BTREE_AM_OID)
		return "it is not a btree";
	if (!ind->indisvalid || !ind->indisready || !ind->indislive)
		return "it is not valid";
	if (ind->indisunique != s->unique || (s->unique && !ind->indimmediate))
		return s->unique ? "it is not unique, or its uniqueness is deferred" : "it is unique";
	if (ind->indnatts != s->nkeys || ind->indnkeyatts != s->nkeys)
		return "it has other columns";
	if (!heap_attisnull(irel->rd_indextuple, Anum_pg_index_indpred, NULL))
		return "it is partial";
	exprs = RelationGetIndexExpressions(irel);
	for (int k = 0; k < s->nkeys; k++)
	{
		AttrNumber	at = ind->indkey.values[k];
		Oid			type;
		Oid			collation;
		Oid			opclass;

		if (strcmp(s->keys[k], HASH_KEY) == 0)
		{
			if (at != 0 || !is_hash_key(list_nth(exprs, next_expr++), desc))
				return "it has other columns";
			type = INT4OID;
			collation = InvalidOid;
		}
		else
		{
			if (at <= 0 || at != column_number(desc, s->keys[k]))
				return "it has other columns";
			type = TupleDescAttr(desc, at - 1)->atttypid;
			collation = TupleDescAttr(desc, at - 1)->attcollation;
		}
		opclass = GetDefaultOpClass(type, BTREE_AM_OID);
		if (irel->rd_opcintype[k] != type || !OidIsValid(opclass) ||
			irel->rd_opfamily[k] != get_opclass_family(opclass))
			return "it compares a column with another operator class";
		if (irel->rd_indcollation[k] != collation ||
			(OidIsValid(collation) && !get_collation_isdeterministic(collation)))
			return "it compares a column in another collation";
		if (irel->rd_indoption[k] != 0)
			return "it orders a column otherwise";
	}
	return NULL;
}

/* Refuse table i unless each index lake made on it is there as made. */
static void
require_indexes(int i, Relation rel)
{
	List	   *indexes = RelationGetIndexList(rel);

	for (int x = 0; x < lengthof(index_shapes); x++)
	{
		const IndexShape *s = &index_shapes[x];
		const char *change = "it is missing";
		ListCell   *lc;

		if (strcmp(s->table, shapes[i].table) != 0)
			continue;
		foreach(lc, indexes)
		{
			char	   *name = get_rel_name(lfirst_oid(lc));
			Relation	irel;

			if (name == NULL || strcmp(name, s->index) != 0)
				continue;
			irel = RelationIdGetRelation(lfirst_oid(lc));
			if (!RelationIsValid(irel))
				break;
			change = index_change(irel, RelationGetDescr(rel), s);
			RelationClose(irel);
			break;
		}
		if (change == NULL)
			continue;
		if (strcmp(change, "it is missing") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("%s.%s lacks index \"%s\", which this build of lake needs",
							LAKE_DATA_SCHEMA, shapes[i].table, s->index),
					 errdetail("The table is an earlier build's, or the index was dropped."),
					 errhint(SCHEMA_MOVE_HINT)));
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("%s.%s is not the table lake made", LAKE_DATA_SCHEMA, shapes[i].table),
				 errdetail("Its index \"%s\" was altered: %s.", s->index, change),
				 errhint("Undo the change. " SCHEMA_MOVE_HINT)));
	}
	list_free(indexes);
}

/*
 * The first of table t's columns that desc has no live column of that name
 * for. Called when desc has fewer live columns than t, so there is one.
 */
static int
missing_column(const TableShape *t, TupleDesc desc)
{
	for (int c = 0; c < t->ncolumns; c++)
	{
		bool		found = false;

		for (int a = 0; a < desc->natts && !found; a++)
			found = !TupleDescAttr(desc, a)->attisdropped &&
				strcmp(NameStr(TupleDescAttr(desc, a)->attname), t->columns[c].name) == 0;
		if (!found)
			return c;
	}
	pg_unreachable();
}

/* The collation lake made a column with: "C" for opaque ids, else its type's. */
static Oid
column_collation(const ColumnShape *c)
{
	return c->bytewise ? C_COLLATION_OID : get_typcollation(c->type);
}

static const char *
collation_name(Oid collation)
{
	char	   *name = OidIsValid(collation) ? get_collation_name(collation) : NULL;

	return name ? name : "none";
}

/*
 * Refuse table i's relation unless its leading live columns are lake's,
 * named and typed as made (only there, when 'missing_only'); store_row.c's
 * table_width then requires any others dropped.
 */
static void
require_columns(int i, Relation rel, bool missing_only)
{
	const TableShape *t = &shapes[i];
	TupleDesc	desc = RelationGetDescr(rel);
	int			at = 0;

	for (int c = 0; c < t->ncolumns; c++)
	{
		Form_pg_attribute att;

		while (at < desc->natts && TupleDescAttr(desc, at)->attisdropped)
			at++;
		if (at >= desc->natts)
		{
			int			m = missing_column(t, desc);

			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("%s.%s lacks column \"%s\" (%s), which this build of lake needs",
							LAKE_DATA_SCHEMA, t->table, t->columns[m].name,
							format_type_be(t->columns[m].type)),
					 errdetail("The table is an earlier build's, or the column was dropped."),
					 errhint(SCHEMA_MOVE_HINT)));
		}
		att = TupleDescAttr(desc, at);
		if (!missing_only && (att->atttypid != t->columns[c].type ||
							  strcmp(NameStr(att->attname), t->columns[c].name) != 0))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("%s.%s is not the table lake made", LAKE_DATA_SCHEMA, t->table),
					 errdetail("Its column %d is \"%s\" (%s) where lake made \"%s\" (%s): the table was altered.",
							   c + 1, NameStr(att->attname), format_type_be(att->atttypid),
							   t->columns[c].name, format_type_be(t->columns[c].type)),
					 errhint("Undo the change. " SCHEMA_MOVE_HINT)));
		if (!missing_only && att->attcollation != column_collation(&t->columns[c]))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("%s.%s is not the table lake made", LAKE_DATA_SCHEMA, t->table),
					 errdetail("Its column \"%s\" compares in collation \"%s\" where lake made it \"%s\": the table was altered.",
							   t->columns[c].name, collation_name(att->attcollation),
							   collation_name(column_collation(&t->columns[c]))),
					 errhint("Undo the change (ALTER TABLE ... ALTER COLUMN ... TYPE ... COLLATE). " SCHEMA_MOVE_HINT)));
		if (!missing_only && t->columns[c].notnull && !att->attnotnull)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("%s.%s is not the table lake made", LAKE_DATA_SCHEMA, t->table),
					 errdetail("Its column \"%s\" lost the NOT NULL constraint lake made it with.",
							   t->columns[c].name),
					 errhint("Undo the change (ALTER TABLE ... ALTER COLUMN ... SET NOT NULL). " SCHEMA_MOVE_HINT)));
		at++;
	}
}

/*
 * Refuse table i unless it is stored as made: logged, and a heap. An
 * unlogged table (ALTER TABLE ... SET UNLOGGED) is emptied by a crash and
 * has no rows on a standby, so every acknowledged version, cast or
 * coordinate in it would be lost without a trace, and numbers given out
 * again. lake inserts and reads heap tuples itself (simple_heap_insert,
 * heap_getnext): under another table access method (ALTER TABLE ... SET
 * ACCESS METHOD) they would be written into storage that is not a heap.
 * A rule rewrites the statements lake runs on the table (DO INSTEAD
 * NOTHING: a snapshot "written" that is not there); row security forced on
 * the owner hides rows from them, unless the owner bypasses it (a
 * superuser, as the extension's owner usually is): refused whatever the
 * owner's attributes today, as they can change.
 */
/* XX001 for table i, stored otherwise than made: what and how to undo it. */
static void
refuse_storage(int i, const char *what, const char *undo)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("%s.%s is not the table lake made", LAKE_DATA_SCHEMA, shapes[i].table),
			 errdetail("%s", what),
			 errhint("Undo the change (%s). " SCHEMA_MOVE_HINT, undo)));
}

static void
require_storage(int i, Relation rel)
{
	if (rel->rd_rel->relpersistence != RELPERSISTENCE_PERMANENT)
		refuse_storage(i, "It was made unlogged: a crash empties it, and a standby has none of its rows.",
					   "ALTER TABLE ... SET LOGGED");
	if (rel->rd_rel->relam != HEAP_TABLE_AM_OID)
		refuse_storage(i, "It was given another table access method: lake reads and writes its tables as heaps.",
					   "ALTER TABLE ... SET ACCESS METHOD heap");
	if (rel->rd_rules != NULL && rel->rd_rules->numLocks > 0)
		refuse_storage(i, "It was given a rule, which rewrites the statements lake runs on it.",
					   "DROP RULE");
	if (rel->rd_rel->relforcerowsecurity && rel->rd_rel->relrowsecurity)
		refuse_storage(i, "Its row security was forced on its owner, the role lake's statements run as: unless that role is a superuser or has BYPASSRLS, they would miss rows.",
					   "ALTER TABLE ... NO FORCE ROW LEVEL SECURITY");
}

/*
 * Likewise a sequence: a crash sets an unlogged one back to where it was
 * made unlogged, and ids are given out again (a stage id that is a
 * committed version's blob: the stage's abort deleted the version's chunks).
 */
void
schema_require_sequence(int i, Relation rel)
{
	if (rel->rd_rel->relpersistence != RELPERSISTENCE_PERMANENT)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("%s.%s is not the sequence lake made", LAKE_DATA_SCHEMA, sequences[i]),
				 errdetail("It was made unlogged: a crash sets it back, and the ids it gave out since are given out again."),
				 errhint("Undo the change (ALTER SEQUENCE ... SET LOGGED). " SCHEMA_MOVE_HINT)));
}

void
schema_require(int i, Relation rel)
{
	require_storage(i, rel);
	require_columns(i, rel, false);
	require_indexes(i, rel);
}

void
schema_require_present(int i, Relation rel)
{
	require_storage(i, rel);
	require_columns(i, rel, true);
}

/*
 * lake's composite types, formed and read by position: an attribute retyped
 * (ALTER TYPE ... ALTER ATTRIBUTE, open to the type's owner) would be
 * formed from, or read as, datums of another type.
 */
static const Oid receipt_types[] = {INT4OID, INT8OID};
static const Oid coordinate_types[] = {INT8OID, INT8OID, PG_LSNOID};

void
schema_require_row(TupleDesc desc, SchemaRow row)
{
	const char *name = row == SCHEMA_RECEIPT ? "lake.receipt" : "lake.coordinate";
	const Oid  *types = row == SCHEMA_RECEIPT ? receipt_types : coordinate_types;
	int			n = row == SCHEMA_RECEIPT ? lengthof(receipt_types) : lengthof(coordinate_types);
	bool		as_made = desc->natts == n;

	for (int i = 0; as_made && i < n; i++)
		as_made = !TupleDescAttr(desc, i)->attisdropped &&
			TupleDescAttr(desc, i)->atttypid == types[i];
	if (!as_made)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("type %s is not the type lake made", name),
				 errdetail("Its attributes were altered."),
				 errhint("Undo the change. " SCHEMA_MOVE_HINT)));
}

void
schema_require_not_dropped(void)
{
	AcceptInvalidationMessages();
	if (!OidIsValid(get_extension_oid("lake", true)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"lake\" was dropped while this call ran"),
				 errdetail("The call waited for a lock the DROP EXTENSION held."),
				 errhint("Nothing the call did is kept.")));
}

TupleDesc
schema_call_row_type(FunctionCallInfo fcinfo)
{
	/* The call's expression names the type; no catalog look-up on the cast path. */
	Oid			typid = get_fn_expr_rettype(fcinfo->flinfo);
	TypeCacheEntry *te = lookup_type_cache(OidIsValid(typid) ? typid :
										   get_func_rettype(fcinfo->flinfo->fn_oid), 0);
	/* Only a first look-up, or one after an invalidation, opens the relation. */
	Oid			relid = te->tupDesc == NULL ? te->typrelid : InvalidOid;
	TupleDesc	desc;

	if (OidIsValid(relid))
	{
		LockRelationOid(relid, AccessShareLock);
		if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
		{
			schema_require_not_dropped();
			elog(ERROR, "lake: the relation of the result type of function %u vanished",
				 fcinfo->flinfo->fn_oid);
		}
	}
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	/* As the type cache does: a waiting session holds no lock a DROP waits for. */
	if (OidIsValid(relid))
		UnlockRelationOid(relid, AccessShareLock);
	return desc;
}
