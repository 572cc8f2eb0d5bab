/*
 * store_grant.h — tenant grants (store_grant.c): read with the latest
 * snapshot, so an answer can be cached (access.c).
 */
#ifndef LAKE_STORE_GRANT_H
#define LAKE_STORE_GRANT_H

#include "store.h"

extern bool store_tenant_granted(const char *tenant, Oid role);
/*
 * The tenants 'role' holds now, as a text[] for the store's connection:
 * listings filter by it, so a REPEATABLE READ transaction reads its own
 * snapshot's rows under the grants of the moment, as its calls do.
 */
extern Datum store_granted_tenants(Oid role);
extern void store_set_tenant_grant(const char *tenant, Oid role, bool grant);

#endif							/* LAKE_STORE_GRANT_H */
