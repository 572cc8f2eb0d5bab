/*
 * access.h — who may do what (SPEC §3 Tenants).
 *
 * lake's functions run as their caller; the tables are closed to PUBLIC.
 * After its own checks, a function reaches the tables as the owner of the
 * lake schema (store_connect), so a role needs only USAGE on the schema,
 * EXECUTE (granted to PUBLIC) and, for tenant data, lake.grant_tenant.
 */
#ifndef LAKE_ACCESS_H
#define LAKE_ACCESS_H

#include "lake.h"

/* Superuser, owner of the extension's objects, or member of lake_admin. */
extern void access_require_admin(void);

/* Does the caller see every tenant (superuser or extension owner)? */
extern bool access_all_tenants(void);

/* 42501 unless the caller may act on 'tenant'. Call with the store connected. */
extern void access_require_tenant(const char *tenant);

#endif							/* LAKE_ACCESS_H */
