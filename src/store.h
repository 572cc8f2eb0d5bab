/*
 * store.h — table access for every lake_data table family
 * (store_version.h, store_stage.h, store_grant.h, and the cycle and owner
 * tables): the identity it runs as, kept SPI plans, relations opened
 * directly with cached OIDs, direct inserts and index point lookups.
 *
 * Every entry point brackets its table work with store_connect() /
 * store_finish(): SPI, run as the owner of the lake schema after the
 * caller's own rights were checked (access.h).
 */
#ifndef LAKE_STORE_H
#define LAKE_STORE_H

#include "lake.h"

#include "access/sdir.h"
#include "access/skey.h"
#include "storage/itemptr.h"
#include "funcapi.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"

#include "executor/spi.h"

extern void store_connect(void);
extern void store_finish(void);
/* Which lake call this is: a count of outermost store_connect() calls. */
extern uint64 store_call_serial(void);
extern Oid	store_caller(void);
extern Oid	store_owner(void);
/* Commit the transaction as the extension's owner (store.c says why). */
extern void store_commit_as_owner(void);
/* The worker's first lock in each transaction: the extension, against a DROP. */
extern bool store_hold_extension(void);

/*
 * A kept plan for a statement, to run at once, in this connected section:
 * from here to the outermost store_finish() search_path is pg_catalog,
 * pg_temp (store.c).
 */
extern SPIPlanPtr store_plan(SPIPlanPtr *cache, const char *sql, int nargs,
							 Oid *argtypes);
extern SPIPlanPtr store_plan_once(SPIPlanPtr *cache, const char *sql, int nargs,
								  Oid *argtypes);

/* Direct index point lookups (see store.c). */
extern void store_key_int4(ScanKeyData *key, AttrNumber att, int32 value);
extern void store_key_int8(ScanKeyData *key, AttrNumber att, int64 value);
extern void store_key_text(ScanKeyData *key, AttrNumber att, const char *value);
extern void store_key_id(ScanKeyData *key, AttrNumber att, const char *value);
extern uint64 store_generation(void);
extern Oid	store_relid(const char *name);
/*
 * 42501 unless a trigger of lake's fires on lake_data.<table>: one attached
 * to another table (by a role its EXECUTE was granted to) must not act on
 * lake's state.
 */
struct TriggerData;
extern void store_require_trigger_on(struct TriggerData *td, const char *table);
/* 39P01: trigger function 'function' was not fired as 'how' says it must be. */
extern void store_trigger_misfired(const char *function, const char *how) pg_attribute_noreturn();
/*
 * The sealing lock's object (lake_data.cycle's OID): seal.h takes it; lower
 * layers only ask whether this transaction holds it, before a wait that a
 * seal must end.
 */
extern Oid	store_sealing_lock_object(void);

/* lake_data.writer's columns: one, epoch, timeline, partitions, partition_no, encoding. */
#define WRITER_NATTS 6
#define WA_EPOCH 2
#define WA_TIMELINE 3
#define WA_PARTITIONS 4
#define WA_PARTITION_NO 5
/*
 * 55000 unless this server runs as the partition the database's epochs and
 * stage ids were issued as (partitions 0: none recorded yet).
 */
extern void store_require_partition(int32 partitions, int32 partition);
/* XX001: lake_data.writer's one row is gone (deleted by hand). */
extern void store_writer_row_missing(void) pg_attribute_noreturn();
extern bool store_sealing_lock_held(void);
/* This transaction holds the object lock (ExclusiveLock) on 'object'. */
extern bool store_object_lock_held(Oid object);
/*
 * A new blob (and stage) id, in this partition's residue class and this
 * timeline's range. 55000 while the writer row is on a higher timeline
 * than the server (pg_upgrade): until the worker's recovery has skipped
 * the ids a lost line of this timeline may have handed out.
 */
extern int64 store_next_blob(void);
/* Move the blob id sequence past anything a lost line of this timeline drew. */
extern void store_skip_blob_ids(void);
/*
 * A relation written through store_open is closed with NoLock: its lock
 * lasts to the end of the transaction, as the executor's does, so that
 * REINDEX or CREATE INDEX CONCURRENTLY wait for the rows it wrote (let go
 * early, a rebuilt index missed them).
 */
extern Relation store_open(const char *name, LOCKMODE mode);
/* The next value of lake_data's sequence 'name' (XX001 if it is unlogged). */
extern int64 store_nextval(const char *name);
/* Lock these tables (a NULL-terminated list) for writing, before reading them. */
extern void store_lock_for_write(const char *const *tables);
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

/* SPI helpers for the table families' statements. */
extern void store_run(SPIPlanPtr plan, Datum *values, int expected);
/*
 * SPI_execute_plan (SPI_execute_snapshot when 'snapshot' is given): a
 * statement PostgreSQL cannot analyze against an altered table of lake's
 * or a dropped extension is XX001 or 55000, not the parser's error.
 */
extern int	store_execute(SPIPlanPtr plan, Datum *values, const char *nulls,
						  Snapshot snapshot, bool read_only, long count);
/* XX001 unless the tables a kept plan just ran on are as lake made them. */
extern void store_require_shape_of_plan(SPIPlanPtr plan);
/* lake's own install script runs (not another extension's). */
extern bool store_installing_lake(void);
extern void store_run_snapshot(SPIPlanPtr plan, Datum *values, Snapshot snapshot,
							   int expected);
/*
 * store_run whose waits for other transactions' rows end after wait_ms in
 * busy(arg), which raises the caller's 53000 (see store.c).
 */
extern void store_run_bounded(SPIPlanPtr plan, Datum *values, int expected,
							  long wait_ms, void (*busy) (const void *arg),
							  const void *arg);
extern Datum store_col(uint64 row, int colno, bool *isnull);
extern Datum store_colv(uint64 row, int colno);
extern char *store_col_text(uint64 row, int colno);
extern void store_fill(SPIPlanPtr plan, Datum *values, ReturnSetInfo *rsinfo);

/* Digests as stored: bytea of LAKE_DIGEST_LEN bytes. */
/* A stored digest into 'out'; false (and zeros) if it is not 32 bytes. */
extern bool store_copy_digest(Datum d, uint8 *out);
extern Datum store_digest_datum(const uint8 *digest);

/*
 * Take a transaction-scoped ExclusiveLock on (classid, objid), waiting at
 * most wait_ms: false when it ran out.
 */
extern bool store_lock_object(Oid classid, Oid objid, uint16 objsubid, long wait_ms);

#endif							/* LAKE_STORE_H */
