/*
 * owner.h — live owner states in shared memory (SPEC §4).
 *
 * One entry per registered owner, keyed by name, in a shared hash table
 * sized by lake.max_owners. Every field is read and written under the
 * cycle lock (cycle.h): validating a cast against the projected state and
 * queueing it is one critical section.
 */
#ifndef LAKE_OWNER_H
#define LAKE_OWNER_H

#include "lake.h"

#define OWNER_REASON_LEN 160

typedef struct OwnerState
{
	char		name[NAMEDATALEN];	/* hash key */
	int32		id;
	int32		lifecycle;
	char		tenant[NAMEDATALEN];	/* fixed at creation */
	/* durable: what sealed cycles say */
	int16		phase;
	int64		lap;
	int64		position;
	int64		position_cycle; /* a cycle at or after the one holding 'position' */
	/* projected: after every accepted cast, sealed or not */
	int16		projected_phase;
	int64		projected_lap;
	int32		pending;
	uint64		last_off;		/* ring offset of its newest pending cast, if pending > 0 */
	bool		quarantined;
	int64		quarantine_position;
	char		reason[OWNER_REASON_LEN];
} OwnerState;

extern void owner_shmem_request(void);
extern void owner_shmem_startup(void);

extern uint32 owner_hash(const char *name);

/* The following need the cycle lock (exclusive to change anything). */
extern OwnerState *owner_find(const char *name, uint32 hash);
extern OwnerState *owner_enter(const char *name, int32 id, int32 lifecycle,
							   const char *tenant, bool *full);
extern void owner_clear_all(void);
extern void owner_quarantine(OwnerState *o, int64 position, const char *why);

/* Iterate over every owner (cycle lock held). */
typedef void (*OwnerVisitor) (OwnerState *o, void *arg);
extern void owner_foreach(OwnerVisitor visit, void *arg);

#endif							/* LAKE_OWNER_H */
