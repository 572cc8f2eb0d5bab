/*
 * schema.c — the shape of lake_data's tables: every column lake reads or
 * writes, by name and type, in the order the install script makes them.
 *
 * lake reads its rows by position (the table AM paths) and by name (SPI),
 * and takes each column's datum for its type. A column an administrator
 * retyped, or dropped and added again (it moves to the end), would be read
 * as another type: a crash, or another column's bytes taken for this
 * one's. store.c checks every table against this before the first use in
 * a backend and after every invalidation that could have changed one, so
 * the regression suites check this list against the install script too.
 */
#include "lake.h"

#include "access/tupdesc.h"
#include "catalog/pg_type.h"
#include "schema.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#define SHAPE_MAX_COLUMNS 14

typedef struct ColumnShape
{
	const char *name;
	Oid			type;
} ColumnShape;

typedef struct TableShape
{
	const char *table;
	int			ncolumns;
	ColumnShape columns[SHAPE_MAX_COLUMNS];
} TableShape;

static const TableShape shapes[] = {
	{"dataset", 3, {
		{"id", INT4OID},
		{"name", TEXTOID},
		{"created_at", TIMESTAMPTZOID}
	}},
	{"version", 7, {
		{"version", INT8OID},
		{"committed_at", TIMESTAMPTZOID},
		{"dataset_id", INT4OID},
		{"data", BYTEAOID},
		{"tenant", TEXTOID},
		{"operation_id", TEXTOID},
		{"digest", BYTEAOID}
	}},
	{"version_blob", 5, {
		{"blob", INT8OID},
		{"dataset_id", INT4OID},
		{"nchunks", INT4OID},
		{"version", INT8OID},
		{"bytes", INT8OID}
	}},
	{"stage_replay", 5, {
		{"stage", INT8OID},
		{"dataset_id", INT4OID},
		{"version", INT8OID},
		{"tenant", TEXTOID},
		{"operation_id", TEXTOID}
	}},
	{"chunk", 4, {
		{"blob", INT8OID},
		{"chunk_no", INT4OID},
		{"bytes", INT4OID},
		{"data", BYTEAOID}
	}},
	{"stage", 9, {
		{"id", INT8OID},
		{"dataset_id", INT4OID},
		{"tenant", TEXTOID},
		{"operation_id", TEXTOID},
		{"created_at", TIMESTAMPTZOID},
		{"touched_at", TIMESTAMPTZOID},
		{"opened_by", OIDOID},
		{"chunks", INT4OID},
		{"bytes", INT8OID}
	}},
	{"blob_gone", 1, {
		{"blob", INT8OID}
	}},
	{"tenant_grant", 2, {
		{"tenant", TEXTOID},
		{"role", OIDOID}
	}},
	{"dictionary", 6, {
		{"id", INT4OID},
		{"dataset_id", INT4OID},
		{"created_at", TIMESTAMPTZOID},
		{"samples", INT4OID},
		{"checksum", INT8OID},
		{"data", BYTEAOID}
	}},
	{"lifecycle", 6, {
		{"id", INT4OID},
		{"name", TEXTOID},
		{"initial_phase", TEXTOID},
		{"phases", TEXTARRAYOID},
		{"edges", TEXTARRAYOID},
		{"created_at", TIMESTAMPTZOID}
	}},
	{"owner", 7, {
		{"id", INT4OID},
		{"name", TEXTOID},
		{"lifecycle", INT4OID},
		{"tenant", TEXTOID},
		{"created_at", TIMESTAMPTZOID},
		{"quarantine_position", INT8OID},
		{"quarantine_reason", TEXTOID}
	}},
	{"writer", 6, {
		{"one", BOOLOID},
		{"epoch", INT4OID},
		{"timeline", INT8OID},
		{"partitions", INT4OID},
		{"partition_no", INT4OID},
		{"encoding", INT2OID}
	}},
	{"cycle", 14, {
		{"cycle", INT8OID},
		{"epoch", INT4OID},
		{"first_seq", INT8OID},
		{"last_seq", INT8OID},
		{"casts", INT4OID},
		{"bytes", INT8OID},
		{"stored_bytes", INT8OID},
		{"sealed_at", TIMESTAMPTZOID},
		{"lsn", PG_LSNOID},
		{"indexed_through", INT8OID},
		{"tail_owners", INT4OID},
		{"owners", BYTEAOID},
		{"data", BYTEAOID},
		{"encoding", INT2OID}
	}},
	{"owner_block", 3, {
		{"owner_id", INT4OID},
		{"first_cycle", INT8OID},
		{"entry", BYTEAOID}
	}},
	{"cast_operation", 5, {
		{"owner_id", INT4OID},
		{"operation_id", TEXTOID},
		{"digest", BYTEAOID},
		{"epoch", INT4OID},
		{"seq", INT8OID}
	}},
	{"snapshot", 7, {
		{"cycle", INT8OID},
		{"taken_at", TIMESTAMPTZOID},
		{"owners", INT4OID},
		{"bytes", INT8OID},
		{"stored_bytes", INT8OID},
		{"data", BYTEAOID},
		{"encoding", INT2OID}
	}},
};

StaticAssertDecl(lengthof(shapes) == SCHEMA_NTABLES, "SCHEMA_NTABLES counts the shapes");

const char *
schema_table(int i)
{
	return shapes[i].table;
}

/*
 * Refuse table i's relation unless its leading live columns are lake's,
 * named and typed as made (store.c's table_width then requires any others
 * dropped).
 */
void
schema_require(int i, Relation rel)
{
	const TableShape *t = &shapes[i];
	TupleDesc	desc = RelationGetDescr(rel);
	int			at = 0;

	for (int c = 0; c < t->ncolumns; c++)
	{
		Form_pg_attribute att;

		while (at < desc->natts && TupleDescAttr(desc, at)->attisdropped)
			at++;
		att = at < desc->natts ? TupleDescAttr(desc, at) : NULL;
		if (att == NULL || att->atttypid != t->columns[c].type ||
			strcmp(NameStr(att->attname), t->columns[c].name) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("%s.%s is not the table lake made", LAKE_DATA_SCHEMA, t->table),
					 att == NULL ?
					 errdetail("Its column \"%s\" (%s) is missing: the table was altered.",
							   t->columns[c].name, format_type_be(t->columns[c].type)) :
					 errdetail("Its column %d is \"%s\" (%s) where lake made \"%s\" (%s): the table was altered.",
							   c + 1, NameStr(att->attname), format_type_be(att->atttypid),
							   t->columns[c].name, format_type_be(t->columns[c].type)),
					 errhint("Undo the change, or re-create the extension.")));
		at++;
	}
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
				 errhint("Undo the change, or re-create the extension.")));
}
