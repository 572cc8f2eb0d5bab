/*
 * owner.c — the shared table of live owner states.
 *
 * A fixed-size shared hash (lake.max_owners entries) keyed by owner name.
 * The table is a cache of what the durable log says plus what was accepted
 * since: the worker fills it at recovery; an owner created afterwards is
 * entered at its first use (cycle.c). All access is under the cycle lock.
 *
 * lake.create_owner writes only the durable registry (lake_data.owner), and
 * refuses (53000) once lake.max_owners owners are registered: every
 * registered owner must fit in the shared table at recovery. It needs the
 * owner's tenant, not lake_admin: an application role creates its own
 * owners but cannot grant itself tenants. A tenant's name is kept in the
 * shared entry, so owners' tenants are at most NAMEDATALEN - 1 bytes.
 */
#include "lake.h"

#include "access.h"
#include "args.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "guc.h"
#include "lifecycle.h"
#include "miscadmin.h"
#include "owner.h"
#include "storage/lmgr.h"
#include "storage/shmem.h"
#include "store_owner.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"

PG_FUNCTION_INFO_V1(lake_create_owner);

static HTAB *owners = NULL;

/*
 * Owner names are chosen by tenants, and PostgreSQL's string hash has a
 * fixed seed and can be inverted: names forged into one bucket made every
 * cast to them, with the cycle lock held, and every recovery walk one long
 * chain (quadratic). The table hashes with a seed drawn when shared memory
 * is made, which no client can learn.
 */
static uint64 *owner_seed = NULL;

static uint32
owner_name_hash(const void *key, Size keysize)
{
	const char *name = key;

	return (uint32) hash_bytes_extended((const unsigned char *) name,
										(int) strnlen(name, keysize - 1), *owner_seed);
}

static int
owner_name_compare(const void *key1, const void *key2, Size keysize)
{
	return strncmp(key1, key2, keysize - 1);
}

static void *
owner_name_copy(void *dest, const void *src, Size keysize)
{
	strlcpy(dest, src, keysize);
	return dest;
}

void
owner_shmem_request(void)
{
	RequestAddinShmemSpace(add_size(sizeof(uint64),
									hash_estimate_size(lake_max_owners, sizeof(OwnerState))));
}

void
owner_shmem_startup(void)
{
	HASHCTL		info;
	bool		found;

	owner_seed = ShmemInitStruct("lake owner hash seed", sizeof(uint64), &found);
	if (!found && !pg_strong_random(owner_seed, sizeof(uint64)))
		ereport(FATAL,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg_internal("could not generate a random seed for lake's owner table")));
	info.keysize = NAMEDATALEN;
	info.entrysize = sizeof(OwnerState);
	info.hash = owner_name_hash;
	info.match = owner_name_compare;
	info.keycopy = owner_name_copy;
	owners = ShmemInitHash("lake owners", lake_max_owners, lake_max_owners, &info,
						   HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_KEYCOPY |
						   HASH_FIXED_SIZE);
}

/* The hash of an owner name, computed before taking the cycle lock. */
uint32
owner_hash(const char *name)
{
	return get_hash_value(owners, name);
}

OwnerState *
owner_find(const char *name, uint32 hash)
{
	return hash_search_with_hash_value(owners, name, hash, HASH_FIND, NULL);
}

/* Enter a new owner in its initial state; *full when the table is full. */
OwnerState *
owner_enter(const char *name, int32 id, int32 lifecycle, const char *tenant,
			bool *full)
{
	bool		found;
	OwnerState *o = hash_search(owners, name, HASH_ENTER_NULL, &found);

	*full = (o == NULL);
	if (o == NULL || found)
		return o;
	o->id = id;
	o->lifecycle = lifecycle;
	strlcpy(o->tenant, tenant, NAMEDATALEN);
	o->phase = 0;
	o->lap = 0;
	o->position = 0;
	o->position_cycle = 0;
	o->projected_phase = 0;
	o->projected_lap = 0;
	o->pending = 0;
	o->last_off = 0;
	o->quarantined = false;
	o->quarantine_position = 0;
	o->reason[0] = '\0';
	return o;
}

void
owner_clear_all(void)
{
	HASH_SEQ_STATUS status;
	OwnerState *o;

	/* At a server start it is empty: no walk over every bucket. */
	if (hash_get_num_entries(owners) == 0)
		return;
	hash_seq_init(&status, owners);
	while ((o = hash_seq_search(&status)) != NULL)
		hash_search(owners, o->name, HASH_REMOVE, NULL);
}

void
owner_quarantine(OwnerState *o, int64 position, const char *why)
{
	o->quarantined = true;
	o->quarantine_position = position;
	lake_copy_clipped(o->reason, why, OWNER_REASON_LEN);
}

void
owner_foreach(OwnerVisitor visit, void *arg)
{
	HASH_SEQ_STATUS status;
	OwnerState *o;

	hash_seq_init(&status, owners);
	while ((o = hash_seq_search(&status)) != NULL)
		visit(o, arg);
}

Datum
lake_create_owner(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan_lifecycle;
	char	   *name;
	char	   *lifecycle;
	char	   *tenant;
	Oid			types[3] = {TEXTOID, INT4OID, TEXTOID};
	Datum		values[3];
	bool		isnull;
	int64		registered;
	int32		id;
	int32		existing;
	int32		existing_lc;
	char	   *existing_tenant;

	lake_require_preload();
	name = lake_arg_short_name(fcinfo, 0, "owner");
	lifecycle = lake_arg_short_name(fcinfo, 1, "lifecycle");
	tenant = lake_arg_short_name(fcinfo, 2, "tenant");
	/* 25006 naming this call, on a standby too, before any lock or look-up. */
	PreventCommandIfReadOnly("lake.create_owner()");

	store_connect();
	access_require_tenant(tenant);
	lake_require_partition_name("owner", name);
	values[0] = CStringGetTextDatum(lifecycle);

	/*
	 * The lifecycle's row is held first (the owner's foreign key needs it),
	 * within the bound: a transaction removing it by hand would otherwise
	 * keep this creation waiting, with the creation lock, as long as it
	 * stays open. Removed meanwhile, the row is not returned: 42704.
	 */
	store_run_bounded(store_plan(&plan_lifecycle,
								 "SELECT l.id FROM lake_data.lifecycle l "
								 "WHERE l.name OPERATOR(pg_catalog.=) $1 FOR KEY SHARE",
								 1, types),
					  values, SPI_OK_SELECT, lake_admission_queue_wait_ms, lifecycle_busy, lifecycle);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("lifecycle \"%s\" does not exist", lifecycle),
				 errhint("Define it with lake.define_lifecycle().")));
	values[1] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	/* No owner of a lifecycle that cannot be used. */
	(void) lifecycle_get(DatumGetInt32(values[1]));

	/*
	 * Creations serialize here. The count must see every creation committed
	 * while this one waited for the lock, so it reads with the latest
	 * snapshot, not the statement's (or, in REPEATABLE READ, the
	 * transaction's): otherwise queued creators all pass the limit.
	 */
	registered = store_owner_lock_and_count(lake_max_owners, &id);
	/*
	 * An existing owner is 42710 even when the registry is full or no id
	 * is left; no refusal inserts, so none takes an id.
	 */
	if (store_owner_lookup(name, &existing, &existing_lc, &existing_tenant, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("owner \"%s\" already exists", name)));
	if (id == 0)
		store_owner_no_id_left();
	if (registered >= lake_max_owners)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("cannot create owner \"%s\": lake.max_owners (%d) owners exist",
						name, lake_max_owners),
				 errhint("Raise lake.max_owners and restart the server.")));
	if (!store_owner_insert(id, name, DatumGetInt32(values[1]), tenant))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("owner \"%s\" already exists", name)));
	store_finish();
	PG_RETURN_VOID();
}
