/*
 * access.c — administrative and tenant checks, and lake.grant_tenant /
 * lake.revoke_tenant.
 *
 * Grants name roles by OID and are honoured for the role and every role
 * that has its privileges (pg_has_role USAGE), like a GRANT would be.
 */
#include "lake.h"

#include "access.h"
#include "args.h"
#include "catalog/namespace.h"
#include "miscadmin.h"
#include "store.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(lake_grant_tenant);
PG_FUNCTION_INFO_V1(lake_revoke_tenant);

bool
access_all_tenants(void)
{
	Oid			caller = store_caller();

	return superuser_arg(caller) || caller == store_owner();
}

void
access_require_admin(void)
{
	Oid			caller = GetUserId();
	Oid			admin = get_role_oid("lake_admin", true);

	if (superuser_arg(caller) || caller == store_owner() ||
		(OidIsValid(admin) && has_privs_of_role(caller, admin)))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied: this lake function is administrative"),
			 errhint("Run it as a superuser, the extension's owner, or a member of lake_admin.")));
}

void
access_require_tenant(const char *tenant)
{
	if (access_all_tenants() || store_tenant_granted(tenant, store_caller()))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for tenant \"%s\"", tenant),
			 errhint("An administrator can grant it with lake.grant_tenant().")));
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
	access_require_admin();
	/* regrole input checks names, not a cast OID; a revoke may clean up. */
	if (grant && !SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(role)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role with OID %u does not exist", role)));
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
