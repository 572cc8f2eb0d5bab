/*
 * worker.h — the lake background worker (SPEC §6).
 */
#ifndef LAKE_WORKER_H
#define LAKE_WORKER_H

#include "postgres.h"

extern void worker_shmem_request(void);
extern void worker_shmem_startup(void);
extern void worker_register(void);
extern void worker_wake_if_waiting(void);
extern PGDLLEXPORT void lake_worker_main(Datum arg);

#endif							/* LAKE_WORKER_H */
