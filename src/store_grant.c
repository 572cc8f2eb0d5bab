/*
 * store_grant.c — which roles may act on which tenants.
 *
 *   lake_data.tenant_grant  (tenant, role)
 *
 * Read with the latest snapshot, so an answer can be cached (access.c).
 */
#include "lake.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "guc.h"
#include "miscadmin.h"
#include "store_rel.h"
#include "store_row.h"
#include "utils/acl.h"
#include "utils/syscache.h"
#include "store_grant.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"

/*
 * Through the primary key, without SPI: the tenant looked up is often one
 * read from another tenant's row (the owner of a version, a stage, an
 * owner), and a custom plan would show it as a constant to whoever sees
 * lake's nested statements (auto_explain.log_nested_statements, whose LOG
 * lines a session may ask for with client_min_messages).
 */
bool
store_tenant_granted(const char *tenant, Oid role)
{
	Relation	rel = store_open("tenant_grant", AccessShareLock);
	Relation	idx = store_open("tenant_grant_pkey", AccessShareLock);
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	ScanKeyData key;
	StoreScan  *scan;
	HeapTuple	tup;
	bool		granted = false;

	store_key_text(&key, 1, tenant);
	scan = store_scan_begin(rel, idx, snapshot, 1, &key);
	while (!granted &&
		   HeapTupleIsValid(tup = store_scan_next(scan, ForwardScanDirection)))
	{
		Datum		values[2];
		bool		nulls[2];
		Oid			grantee;

		CHECK_FOR_INTERRUPTS();
		store_deform(rel, tup, values, nulls, 2);
		store_require_columns(RelationGetDescr(rel), nulls, "tenant_grant");
		grantee = DatumGetObjectId(values[1]);
		/* A grant to a role since dropped grants nothing (pg_roles has no row). */
		granted = SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(grantee)) &&
			has_privs_of_role(role, grantee);
	}
	store_scan_end(scan);
	UnregisterSnapshot(snapshot);
	index_close(idx, AccessShareLock);
	table_close(rel, AccessShareLock);
	return granted;
}

Datum
store_granted_tenants(Oid role)
{
	static SPIPlanPtr plan;
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(role)};
	bool		isnull;
	Datum		tenants;

	store_run_snapshot(store_plan(&plan,
				 "SELECT pg_catalog.array_agg(DISTINCT g.tenant) FROM lake_data.tenant_grant g "
				 "JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) g.role "
				 "WHERE pg_catalog.pg_has_role($1, g.role, 'USAGE')",
				 1, types),
		values, GetLatestSnapshot(), SPI_OK_SELECT);
	tenants = store_col(0, 1, &isnull);
	if (isnull)
		return PointerGetDatum(construct_empty_array(TEXTOID));
	return SPI_datumTransfer(tenants, false, -1);
}

/*
 * A busy grant's refusal. It is raised where an error was just caught, so
 * it reads no catalog: the role's name is looked up beforehand (NULL for a
 * revoke naming a role dropped since its grant).
 */
typedef struct GrantKey
{
	const char *tenant;
	Oid			role;
	const char *rolename;
} GrantKey;

static void
grant_busy(const void *arg)
{
	const GrantKey *key = arg;

	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
			 key->rolename != NULL ?
			 errmsg("grant of tenant \"%s\" to role \"%s\" is busy", key->tenant, key->rolename) :
			 errmsg("grant of tenant \"%s\" to role %u is busy", key->tenant, key->role),
			 errdetail("Another transaction granting or revoking it, or holding its table locked, stayed open longer than lake.admission_queue_wait (%d ms).",
					   lake_admission_queue_wait_ms),
			 errhint("Retry later; nothing was written.")));
}

void
store_set_tenant_grant(const char *tenant, Oid role, bool grant)
{
	static SPIPlanPtr plan_grant;
	static SPIPlanPtr plan_revoke;
	Oid			types[2] = {TEXTOID, OIDOID};
	Datum		values[2] = {CStringGetTextDatum(tenant), ObjectIdGetDatum(role)};
	GrantKey	key = {tenant, role, GetUserNameFromId(role, true)};

	if (grant)
		store_run_bounded(store_plan(&plan_grant,
							  "INSERT INTO lake_data.tenant_grant (tenant, role) VALUES ($1, $2) "
							  "ON CONFLICT DO NOTHING",
							  2, types),
						  values, SPI_OK_INSERT, lake_admission_queue_wait_ms, grant_busy, &key);
	else
	{
		store_run_bounded(store_plan(&plan_revoke,
							  "DELETE FROM lake_data.tenant_grant g "
							  "WHERE g.tenant OPERATOR(pg_catalog.=) $1 AND g.role OPERATOR(pg_catalog.=) $2",
							  2, types),
						  values, SPI_OK_DELETE, lake_admission_queue_wait_ms, grant_busy, &key);
		/*
		 * Nothing to delete under a REPEATABLE READ snapshot may be a grant
		 * committed after it: retry (as a grant in the mirror case is told),
		 * never a revocation reported done while the grant stands.
		 */
		if (SPI_processed == 0 && IsolationUsesXactSnapshot())
		{
			static SPIPlanPtr plan_latest;

			store_run_snapshot(store_plan(&plan_latest,
										  "SELECT 1 FROM lake_data.tenant_grant g "
										  "WHERE g.tenant OPERATOR(pg_catalog.=) $1 AND g.role OPERATOR(pg_catalog.=) $2",
										  2, types),
							   values, GetLatestSnapshot(), SPI_OK_SELECT);
			if (SPI_processed > 0)
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("could not serialize access due to concurrent update"),
						 errdetail("Tenant \"%s\" was granted to the role after this transaction's snapshot.",
								   tenant),
						 errhint("Retry the revocation in a new transaction.")));
		}
	}
}
