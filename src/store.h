/*
 * store.h — the section in which a call works on lake_data's tables, for
 * every table family (store_version.h, store_stage.h, store_grant.h, and
 * the cycle and owner tables): the identity it runs as, kept SPI plans,
 * bounded waits. Relations are store_rel.h's, rows store_row.h's.
 *
 * Every entry point brackets its table work with store_connect() /
 * store_finish(): SPI, run as the owner of the lake schema after the
 * caller's own rights were checked (access.h).
 */
#ifndef LAKE_STORE_H
#define LAKE_STORE_H

#include "lake.h"

#include "funcapi.h"
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

/* SPI helpers for the table families' statements. */
extern void store_run(SPIPlanPtr plan, Datum *values, int expected);
/*
 * SPI_execute_plan (SPI_execute_snapshot when 'snapshot' is given): a
 * statement PostgreSQL cannot analyze against an altered table of lake's
 * or a dropped extension is XX001 or 55000, not the parser's error.
 */
extern int	store_execute(SPIPlanPtr plan, Datum *values, const char *nulls,
						  Snapshot snapshot, bool read_only, long count);
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
/*
 * The sealing lock's object (lake_data.cycle's OID): seal.h takes it; lower
 * layers only ask whether this transaction holds it, before a wait that a
 * seal must end.
 */
extern Oid	store_sealing_lock_object(void);
extern bool store_sealing_lock_held(void);
/* This transaction holds the object lock (ExclusiveLock) on 'object'. */
extern bool store_object_lock_held(Oid object);

#endif							/* LAKE_STORE_H */
