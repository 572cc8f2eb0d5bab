/*
 * access.c — administrative and tenant checks, and lake.grant_tenant /
 * lake.revoke_tenant.
 *
 * Grants name roles by OID and are honoured for the role and every role
 * that has its privileges (pg_has_role USAGE), like a GRANT would be.
 *
 * Which tenants a role may act on is cached per backend (positive answers
 * only), so a cast costs no query for it. An answer is read with the latest
 * snapshot, and the cache is dropped by every invalidation that could change
 * it: a change of lake_data.tenant_grant (its trigger sends a relcache
 * invalidation: to this backend at once, to others when they next accept
 * invalidations — at the start of every transaction, and before every cast),
 * a change of roles or memberships (pg_authid, pg_auth_members), or of the
 * extension itself (its schema's namespace entry). A transaction that aborts
 * replays its own invalidations locally, so a rolled-back grant is not kept.
 */
#include "lake.h"

#include "access.h"
#include "args.h"
#include "catalog/namespace.h"
#include "miscadmin.h"
#include "store_grant.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(lake_grant_tenant);
PG_FUNCTION_INFO_V1(lake_revoke_tenant);

/* A cap on the cache; past it, it starts over. */
#define HELD_MAX_ENTRIES 1024

typedef struct HeldKey
{
	Oid			role;
	char		tenant[LAKE_NAME_MAX_BYTES + 1];	/* zero-padded */
} HeldKey;

static HTAB *held = NULL;		/* HeldKey: the role may act on the tenant */
static bool held_stale = true;
static bool held_callbacks = false;	/* the invalidations that make it stale */
static Oid	grant_relid = InvalidOid;	/* lake_data.tenant_grant when filled */

/*
 * This database's pg_database row, as its syscache hash: computed when the
 * callbacks are registered, since a callback may run where no catalog may
 * be read (at the start of a transaction, before it is in progress).
 */
static uint32 database_hash = 0;

static void
forget_held(Datum arg, int cacheid, uint32 hashvalue)
{
	held_stale = true;
}

/* The database's row only: its owner is pg_database_owner's member. */
static void
forget_held_database(Datum arg, int cacheid, uint32 hashvalue)
{
	if (hashvalue == 0 ||
		hashvalue == database_hash)
		held_stale = true;
}

static void
forget_held_rel(Datum arg, Oid relid)
{
	/* Not known (no such table when filled): any relation's change may be its making. */
	if (!OidIsValid(relid) || relid == grant_relid || !OidIsValid(grant_relid))
		held_stale = true;
}

static bool
held_key(HeldKey *key, Oid role, const char *tenant)
{
	size_t		len = strlen(tenant);

	if (len > LAKE_NAME_MAX_BYTES)
		return false;
	memset(key, 0, sizeof(HeldKey));
	key->role = role;
	memcpy(key->tenant, tenant, len);
	return true;
}

bool
access_tenant_cached(const char *tenant)
{
	HeldKey		key;

	if (held == NULL || held_stale || !held_key(&key, store_caller(), tenant))
		return false;
	return hash_search(held, &key, HASH_FIND, NULL) != NULL;
}

/*
 * Before a query whose answer may be cached: drop what an invalidation made
 * stale. One arriving later sets held_stale again, and what is cached until
 * then is dropped at the next refresh.
 */
static void
refresh_held(void)
{
	HASHCTL		ctl;

	if (held != NULL && !held_stale && hash_get_num_entries(held) < HELD_MAX_ENTRIES)
		return;
	if (!held_callbacks)
	{
		database_hash = GetSysCacheHashValue1(DATABASEOID,
											  ObjectIdGetDatum(MyDatabaseId));
		held_callbacks = true;
		CacheRegisterSyscacheCallback(AUTHOID, forget_held, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, forget_held, (Datum) 0);
		CacheRegisterSyscacheCallback(DATABASEOID, forget_held_database, (Datum) 0);
		CacheRegisterSyscacheCallback(NAMESPACEOID, forget_held, (Datum) 0);
		/* The extension's owner holds every tenant. */
		CacheRegisterSyscacheCallback(EXTENSIONOID, forget_held, (Datum) 0);
		CacheRegisterRelcacheCallback(forget_held_rel, (Datum) 0);
	}
	if (held != NULL)
	{
		/* Gone before its successor is made: that may fail (no memory). */
		hash_destroy(held);
		held = NULL;
	}
	ctl.keysize = sizeof(HeldKey);
	ctl.entrysize = sizeof(HeldKey);
	ctl.hcxt = TopMemoryContext;
	held = hash_create("lake tenants held", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	held_stale = false;
	grant_relid = get_relname_relid("tenant_grant", get_namespace_oid(LAKE_DATA_SCHEMA, false));
}

static bool
all_tenants(Oid caller)
{
	return superuser_arg(caller) || caller == store_owner();
}

/*
 * Role changes (rolsuper, memberships, the extension's owner) committed
 * elsewhere count from the caller's next call, inside an open transaction
 * too, as grants do: the caches they are read through take in what is
 * pending first, which a transaction holding every lock it needs would
 * otherwise not do.
 */
bool
access_all_tenants(void)
{
	AcceptInvalidationMessages();
	return all_tenants(store_caller());
}

void
access_require_admin(FunctionCallInfo fcinfo)
{
	Oid			caller = store_caller();	/* inside a call, its caller */
	Oid			admin;

	AcceptInvalidationMessages();	/* as in access_all_tenants */
	admin = get_role_oid("lake_admin", true);

	if (superuser_arg(caller) || caller == store_owner() ||
		(OidIsValid(admin) && has_privs_of_role(caller, admin)))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for function %s", get_func_name(fcinfo->flinfo->fn_oid)),
			 errdetail("It is one of lake's administrative functions."),
			 errhint("Run it as a superuser, the extension's owner, or a member of lake_admin.")));
}

void
access_require_tenant_for(const char *tenant, const char *object)
{
	Oid			caller = store_caller();
	HeldKey		key;

	/*
	 * A revocation committed elsewhere counts from the caller's next call,
	 * inside an open transaction too: one whose relations are all locked
	 * already would not otherwise take in the invalidation that drops the
	 * cached grant.
	 */
	AcceptInvalidationMessages();
	if (access_tenant_cached(tenant))
		return;
	refresh_held();
	if (all_tenants(caller) || store_tenant_granted(tenant, caller))
	{
		if (held_key(&key, caller, tenant))
			hash_search(held, &key, HASH_ENTER, NULL);
		return;
	}
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for %s", object),
			 errhint("An administrator grants tenants with lake.grant_tenant().")));
}

void
access_require_tenant(const char *tenant)
{
	access_require_tenant_for(tenant, psprintf("tenant \"%s\"", tenant));
}

void
access_require_owner(const char *tenant, const char *owner)
{
	access_require_tenant_for(tenant, psprintf("owner \"%s\"", owner));
}

static void
change_grant(FunctionCallInfo fcinfo, bool grant)
{
	Oid			role;
	char	   *tenant;

	lake_require_preload();
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("role must not be NULL")));
	role = PG_GETARG_OID(0);
	tenant = lake_arg_name(fcinfo, 1, "tenant");
	access_require_admin(fcinfo);
	/* regrole input checks names, not a cast OID; a revoke may clean up. */
	if (grant && !SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(role)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role with OID %u does not exist", role)));
	/* 25006 naming this call, on a standby too, before any lock or look-up. */
	PreventCommandIfReadOnly(grant ? "lake.grant_tenant()" : "lake.revoke_tenant()");
	store_connect();
	store_set_tenant_grant(tenant, role, grant);
	store_finish();
}

Datum
lake_grant_tenant(PG_FUNCTION_ARGS)
{
	change_grant(fcinfo, true);
	PG_RETURN_VOID();
}

Datum
lake_revoke_tenant(PG_FUNCTION_ARGS)
{
	change_grant(fcinfo, false);
	PG_RETURN_VOID();
}
