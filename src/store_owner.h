/*
 * store_owner.h — the durable owner registry, lake_data.owner
 * (store_owner.c): every SQL query of it in one place.
 */
#ifndef LAKE_STORE_OWNER_H
#define LAKE_STORE_OWNER_H

#include "store.h"

/* One registered owner, as recovery reads the registry. */
typedef struct OwnerRow
{
	int32		id;
	char	   *name;
	int32		lifecycle;
	char	   *tenant;
	bool		quarantined;	/* durably: position and reason below */
	int64		quarantine_position;
	const char *quarantine_reason;
} OwnerRow;

/*
 * Lock the registry against other creators (to commit) and count its
 * owners with the latest snapshot: every creation committed while this one
 * waited is counted. Below 'limit' the figure may be an upper bound only.
 * 'next_id' is the id the next owner takes: one above the highest
 * registered and above the identity sequence's value; 0 when no id is
 * left (store_owner_no_id_left, once an existing name has been answered).
 */
extern int64 store_owner_lock_and_count(int64 limit, int32 *next_id);
extern void store_owner_no_id_left(void) pg_attribute_noreturn();
/* 42704 for an owner not registered (55000 if the name is another partition's). */
extern void store_owner_missing(const char *name) pg_attribute_noreturn();
/* Register an owner under 'id'; false if the name is taken. */
extern bool store_owner_insert(int32 id, const char *name, int32 lifecycle, const char *tenant);
/*
 * An owner's id, lifecycle and tenant by name; false if there is none.
 * written_here (if not NULL): whether this transaction wrote its row.
 */
extern bool store_owner_lookup(const char *name, int32 *id, int32 *lifecycle,
							   char **tenant, bool *written_here);
/* The name and tenant of the owner with this id; false if there is none. */
extern bool store_owner_by_id(int32 owner_id, char **name, char **tenant);
/*
 * Visit every owner, in the given order, with the caller's active
 * snapshot; the row's strings are valid during the call.
 */
typedef enum OwnerOrder
{
	OWNERS_BY_ID,
	OWNERS_BY_NAME,
	OWNERS_AS_STORED			/* heap order: the cheapest whole read */
} OwnerOrder;
typedef void (*OwnerRowVisitor) (const OwnerRow *row, void *arg);
extern void store_owner_scan(OwnerOrder order, OwnerRowVisitor visit, void *arg);
/*
 * Every owner (only_role valid: those whose tenant the role holds), in id
 * order ('by_name': in name order), copied out of SPI: *n rows.
 */
extern OwnerRow *store_owner_rows(Oid only_role, bool by_name, uint64 *n);
/* Record a quarantine (why NULL: clear it). */
extern void store_owner_set_quarantine(int32 owner_id, int64 position, const char *why);

#endif							/* LAKE_STORE_OWNER_H */
