/*
 * schema.h — the shape of lake_data's tables (schema.c).
 */
#ifndef LAKE_SCHEMA_H
#define LAKE_SCHEMA_H

#include "access/tupdesc.h"
#include "utils/relcache.h"

/* lake_data's tables, and the name of table i (0 .. SCHEMA_NTABLES - 1). */
#define SCHEMA_NTABLES 16
extern const char *schema_table(int i);

/*
 * XX001 unless 'rel', table i, has lake's columns, named and typed as made,
 * and lake's indexes on it as made.
 */
extern void schema_require(int i, Relation rel);

/* lake's composite types. */
typedef enum SchemaRow
{
	SCHEMA_RECEIPT,
	SCHEMA_COORDINATE
} SchemaRow;

/* XX001 unless 'desc' is the row type lake made, attribute for attribute. */
extern void schema_require_row(TupleDesc desc, SchemaRow row);

#endif							/* LAKE_SCHEMA_H */
