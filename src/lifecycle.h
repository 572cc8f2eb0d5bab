/*
 * lifecycle.h — named sets of phases with legal edges (SPEC §4).
 *
 * Each backend keeps the lifecycles it has used in a local cache: casts
 * validate against it without catalog access. Only a lifecycle that
 * builds without a flaw is cached. A committed edit of lake_data.lifecycle
 * (a trigger keeps each row well formed) drops every backend's cache.
 */
#ifndef LAKE_LIFECYCLE_H
#define LAKE_LIFECYCLE_H

#include "lake.h"

#define LAKE_MAX_PHASES 256

typedef struct Lifecycle
{
	int32		id;
	int			nphases;
	int			initial;		/* index of the initial phase (always 0) */
	char	  **phases;
	bool	   *edge;			/* nphases * nphases: edge[from * n + to] */
} Lifecycle;

/* The lifecycle 'id', from the cache or (store connected) the table. */
extern const Lifecycle *lifecycle_get(int32 id);
/* The same, but NULL and a reason if the stored lifecycle is not well formed. */
extern const Lifecycle *lifecycle_try_get(int32 id, char **why);
extern const Lifecycle *lifecycle_cached(int32 id);
extern void lifecycle_cache_reset(void);

/* Index of a phase, or -1 if the lifecycle has no such phase. */
/*
 * 53000 for a wait on lifecycle 'arg' (its name) that outlasted
 * lake.admission_queue_wait: another transaction changes or removes its row.
 */
extern void lifecycle_busy(const void *arg) pg_attribute_noreturn();

extern int	lifecycle_phase(const Lifecycle *lc, const char *name, size_t len);
extern bool lifecycle_edge(const Lifecycle *lc, int from, int to);

#endif							/* LAKE_LIFECYCLE_H */
