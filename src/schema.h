/*
 * schema.h — the shape of lake_data's tables (schema.c).
 */
#ifndef LAKE_SCHEMA_H
#define LAKE_SCHEMA_H

#include "access/tupdesc.h"
#include "fmgr.h"
#include "utils/relcache.h"

/* lake_data's tables, and the name of table i (0 .. SCHEMA_NTABLES - 1). */
#define SCHEMA_NTABLES 16
extern const char *schema_table(int i);
/* lake_data's sequences, and the name of sequence i. */
#define SCHEMA_NSEQUENCES 5
extern const char *schema_sequence(int i);

/*
 * The hint of every refusal of lake_data's shape: tables an earlier build
 * of lake made look altered to a later one, and the one remedy that comes
 * to mind, re-creating the extension, drops every dataset and owner.
 */
#define SCHEMA_MOVE_HINT "If lake's library was replaced by another build, move the data with pg_dump and pg_restore as README's \"Replacing the library\" says; DROP EXTENSION lake would drop all of it."

/*
 * Unless 'rel', table i, has lake's columns, named and typed as made, and
 * lake's indexes on it as made: 55000 for a column at the end or an index
 * it lacks (as an earlier build's table does), XX001 for one altered.
 */
extern void schema_require(int i, Relation rel);
/*
 * Only the 55000 of that for its columns: a column at the end table i
 * lacks. Checked of every table at a call's start, so that no call writes
 * into an earlier build's tables.
 */
extern void schema_require_present(int i, Relation rel);
/* XX001 unless 'rel', sequence i, is logged as made (so are the tables). */
extern void schema_require_sequence(int i, Relation rel);

/* lake's composite types. */
typedef enum SchemaRow
{
	SCHEMA_RECEIPT,
	SCHEMA_COORDINATE
} SchemaRow;

/* XX001 unless 'desc' is the row type lake made, attribute for attribute. */
extern void schema_require_row(TupleDesc desc, SchemaRow row);

/*
 * 55000 if the extension is gone: a DROP EXTENSION that committed while a
 * call waited for one of its locks. For the call that finds one of lake's
 * objects missing, before it says what is missing.
 */
extern void schema_require_not_dropped(void);
/*
 * The composite result type of the function being called. The type cache
 * opens the type's relation without checking that it survived the lock
 * wait, so a call that waited for a DROP EXTENSION would fail with an
 * internal error there: the relation is locked and checked first, and let
 * go once the type is loaded.
 */
extern TupleDesc schema_call_row_type(FunctionCallInfo fcinfo);

#endif							/* LAKE_SCHEMA_H */
