/*
 * store_rel.h — lake_data's relations: OIDs kept per backend (dropped on
 * invalidation), opened and locked directly, checked against the shape
 * lake made them with (schema.h).
 */
#ifndef LAKE_STORE_REL_H
#define LAKE_STORE_REL_H

#include "lake.h"

#include "executor/spi.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"

/*
 * Advances at every invalidation that could make a kept OID wrong, and at
 * every abort: the callers' own caches (dataset ids) compare against it.
 */
extern uint64 store_generation(void);
/* lake_data.<name>'s OID, kept per backend. */
extern Oid	store_relid(const char *name);

/*
 * A call begins (store_connect): lake_data is namespace 'schema', and every
 * table of it is checked to be there as lake made it; until the call ends,
 * a name resolved in another namespace is 55000 (the extension was dropped
 * and created again meanwhile).
 */
extern void store_rel_begin_call(Oid schema);
extern void store_rel_end_call(void);
/* Forget every kept OID (an abort: it may have created what was kept). */
extern void store_rel_forget(void);
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
/* XX001 unless the tables a kept plan just ran on are as lake made them. */
extern void store_require_shape_of_plan(SPIPlanPtr plan);
/* lake's own install script runs (not another extension's). */
extern bool store_installing_lake(void);
/* The tables of lake's this transaction has locked, as they are now (XX001). */
extern void store_require_shape_of_locked(void);
/*
 * 42501 unless a trigger of lake's fires on lake_data.<table>: one attached
 * to another table (by a role its EXECUTE was granted to) must not act on
 * lake's state.
 */
struct TriggerData;
extern void store_require_trigger_on(struct TriggerData *td, const char *table);
/* 39P01: trigger function 'function' was not fired as 'how' says it must be. */
extern void store_trigger_misfired(const char *function, const char *how) pg_attribute_noreturn();

#endif							/* LAKE_STORE_REL_H */
