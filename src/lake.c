/*
 * lake.c — library entry point: each module defines its parameters,
 * shared memory and workers; _PG_init only wires them together.
 */
#include "lake.h"

#include "admission.h"
#include "args.h"
#include "cycle.h"
#include "digest.h"
#include "fmgr.h"
#include "guc.h"
#include "head.h"
#include "miscadmin.h"
#include "publish.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "waiter.h"
#include "worker.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
lake_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	admission_shmem_request();
	head_shmem_request();
	cycle_shmem_request();
	waiter_shmem_request();
	worker_shmem_request();
}

static void
lake_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	admission_shmem_startup();
	head_shmem_startup();
	cycle_shmem_startup();
	waiter_shmem_startup();
	worker_shmem_startup();
	LWLockRelease(AddinShmemInitLock);
}

/* Every SQL entry point: shared state attached; a waiting worker woken. */
static bool
lake_entry_check(void)
{
	if (!admission_shmem_ready())
		return false;
	worker_wake_if_waiting();
	return true;
}

void
_PG_init(void)
{
	/*
	 * Without preloading there is no shared memory: every function then
	 * refuses with 55000 (lake_require_preload) instead of misbehaving.
	 */
	if (!process_shared_preload_libraries_in_progress || IsBinaryUpgrade)
		return;

	lake_guc_init();
	lake_digest_init();
	admission_init();
	head_init();
	cycle_init();
	publish_init();

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = lake_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = lake_shmem_startup;

	worker_register();
	lake_set_entry_check(lake_entry_check);
}
