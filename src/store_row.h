/*
 * store_row.h — rows of lake_data's tables through the table AM: inserts
 * and updates with their index entries, index point lookups, rows formed
 * and deformed at each table's width, stored damage contained.
 */
#ifndef LAKE_STORE_ROW_H
#define LAKE_STORE_ROW_H

#include "lake.h"

#include "access/htup.h"
#include "access/sdir.h"
#include "access/skey.h"
#include "storage/itemptr.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"

/* Direct index point lookups (see store_row.c). */
extern void store_key_int4(ScanKeyData *key, AttrNumber att, int32 value);
extern void store_key_int8(ScanKeyData *key, AttrNumber att, int64 value);
extern void store_key_text(ScanKeyData *key, AttrNumber att, const char *value);
extern void store_key_id(ScanKeyData *key, AttrNumber att, const char *value);

/*
 * Rows of lake's tables are formed from and deformed into arrays of the
 * install script's width: a table altered to another refuses (XX001), a
 * column added and dropped again is NULL. store_insert and store_fetch
 * take the width from their arrays.
 */
extern HeapTuple store_form(Relation rel, Datum *values, bool *nulls, int width);
extern void store_deform(Relation rel, HeapTuple tup, Datum *values, bool *nulls, int room);
/* The table's width as stored (natts), once it is found to be 'width'. */
extern int	store_require_width(Relation rel, int width);
#define store_insert(rel, values, nulls) \
	store_insert_sized(rel, values, nulls, Min(lengthof(values), lengthof(nulls)))
extern void store_insert_sized(Relation rel, Datum *values, bool *nulls, int width);
extern void store_update(Relation rel, ItemPointer otid, Datum *values, bool *nulls);
/*
 * The first row of lake_data.<table> through <index> matching the keys,
 * deformed into values/nulls: arrays, whose length bounds the columns a
 * row may have (a table with more is refused, never written past them).
 */
#define store_fetch(table, index, snapshot, keys, nkeys, dir, values, nulls) \
	store_fetch_sized(table, index, snapshot, keys, nkeys, dir, values, nulls, \
					  Min(lengthof(values), lengthof(nulls)))
extern bool store_fetch_sized(const char *table, const char *index, Snapshot snapshot,
							  ScanKeyData *keys, int nkeys, ScanDirection dir,
							  Datum *values, bool *nulls, int room);
/*
 * XX001 if a column lake_data.<table> declares NOT NULL reads as NULL in
 * a deformed row: stored damage (a tuple header that lost a bit reads its
 * trailing columns so) that readers would otherwise dereference.
 * store_fetch checks every row it returns.
 */
extern void store_require_columns(TupleDesc desc, const bool *nulls, const char *table);
/*
 * Run fn(arg) in a subtransaction: NULL if it returned, or the message of
 * the XX001 (damaged data, PostgreSQL's own or lake's) it raised, which is
 * then contained: the caller goes on, as a recovery must past a damaged
 * record. Any other error is raised.
 */
extern char *store_contain_damage(void (*fn) (void *arg), void *arg);
/*
 * An error's message and detail as one reason, which callers quote in a
 * sentence of their own: "message (detail without its final period)".
 */
extern char *store_reason(const char *message, const char *detail);
/*
 * A stored bytea, detoasted: NULL and *why when its TOAST rows are
 * damaged (contained as above; only an out-of-line or compressed value
 * pays for the subtransaction).
 */
extern bytea *store_detoast_contained(Datum value, char **why);
/*
 * heap_deform_tuple for a row read from one of lake's tables: a varlena
 * column that reaches past the row, or whose header no table stores (a
 * pointer into memory, a compressed size past MaxAllocSize, a TOAST
 * relation that is not one), is XX001 here instead of a detoast that
 * follows it.
 */
extern void store_deform_tuple(TupleDesc desc, HeapTuple tup, Datum *values, bool *nulls);
/*
 * The same check of one varlena column: column 'attno' of a row (SPI's),
 * or only its header when 'tup' is NULL (a slot's column). XX001 naming
 * 'column', or when NULL attribute 'attno' of 'desc'.
 */
extern void store_require_value(HeapTuple tup, TupleDesc desc, int attno, Datum value,
								const char *column);

/*
 * An ordered scan of one of lake's tables through one of its indexes, as
 * systable_beginscan_ordered would (the keys name the table's columns),
 * but as a table's, not a catalog's: ignore_system_indexes, which any
 * session may set at its start, does not apply (a catalog scan warns of
 * it at every scan, a flood in lake's log reads). A tuple returned is the
 * scan's until its next call.
 */
typedef struct StoreScan StoreScan;
extern StoreScan *store_scan_begin(Relation rel, Relation idx, Snapshot snapshot,
								   int nkeys, ScanKey keys);
extern HeapTuple store_scan_next(StoreScan *scan, ScanDirection dir);
extern void store_scan_end(StoreScan *scan);

#endif							/* LAKE_STORE_ROW_H */
