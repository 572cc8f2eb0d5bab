/*
 * access.h — who may do what (SPEC §3 Tenants).
 *
 * lake's functions run as their caller; the tables are closed to PUBLIC.
 * After its own checks, a function reaches the tables as the owner of the
 * lake schema (store_connect), so a role needs only USAGE on the schema,
 * EXECUTE (granted to PUBLIC) and, for tenant data, lake.grant_tenant.
 *
 * A refusal names only what the caller passed (a dataset and version, a
 * stage, an owner, a receipt), never the tenant the data belongs to.
 */
#ifndef LAKE_ACCESS_H
#define LAKE_ACCESS_H

#include "lake.h"
#include "fmgr.h"

/* Superuser, owner of the extension's objects, or member of lake_admin. */
extern void access_require_admin(FunctionCallInfo fcinfo);

/* Does the caller see every tenant (superuser or extension owner)? */
extern bool access_all_tenants(void);

/*
 * 42501 "permission denied for <object>" unless the caller may act on
 * 'tenant'; 'object' describes what the caller passed. Call with the store
 * connected.
 */
extern void access_require_tenant_for(const char *tenant, const char *object);

/* The same, for a tenant the caller passed itself. */
extern void access_require_tenant(const char *tenant);

/*
 * The same for an owner of 'tenant', by the name the caller passed. Owner
 * names are unique across tenants (create_owner tells a taken name anyway),
 * so that an owner exists is no secret and 42501 says no more than 42704
 * would; its tenant, state and history are not told.
 */
extern void access_require_owner(const char *tenant, const char *owner);

/*
 * Is the caller (store_caller: inside a call from inside a call, the role
 * whose rights the checks use, not the current user) known (cached) to be
 * allowed 'tenant'? No catalog access and no allocation: safe under an
 * LWLock. false means "ask access_require_tenant_for", not "refused".
 */
extern bool access_tenant_cached(const char *tenant);

#endif							/* LAKE_ACCESS_H */
