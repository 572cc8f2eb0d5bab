/*
 * schema.h — the shape of lake_data's tables (schema.c).
 */
#ifndef LAKE_SCHEMA_H
#define LAKE_SCHEMA_H

#include "utils/relcache.h"

/* How many of lake_data's tables there are, and the name of table i. */
extern int	schema_ntables(void);
extern const char *schema_table(int i);

/* XX001 unless 'rel', table i, has lake's columns, named and typed as made. */
extern void schema_require(int i, Relation rel);

#endif							/* LAKE_SCHEMA_H */
