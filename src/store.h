/*
 * store.h — lake's append-side tables, reached only through SPI plans with
 * schema-qualified names and pg_catalog operators. Callers connect SPI.
 */
#ifndef LAKE_STORE_H
#define LAKE_STORE_H

#include "lake.h"

#include "funcapi.h"
#include "utils/snapshot.h"

/* What the version history says about one operation. */
typedef struct OperationLookup
{
	int32		dataset_id;
	bool		found;			/* the operation has a version */
	int64		version;
	uint8		digest[LAKE_DIGEST_LEN];
	int64		max_version;	/* store_recheck_operation only */
} OperationLookup;

extern void store_create_dataset(const char *name);
extern int32 store_dataset_id(const char *name);
extern void store_lock_dataset(int32 dataset_id);

/* Dataset and operation in one query, before any lock (42704 if no dataset). */
extern void store_lookup_operation(const char *dataset, const char *tenant,
								   const char *operation_id, OperationLookup *out);

/* Operation and the dataset's highest version, under a given snapshot. */
extern void store_recheck_operation(const char *tenant, const char *operation_id,
									Snapshot snapshot, OperationLookup *out);

/* Encode and insert a new version; returns the stored (encoded) bytes. */
extern int64 store_write_version(int32 dataset_id, int64 version,
								 const char *tenant, const char *operation_id,
								 const uint8 *digest, const char *payload,
								 int64 len);

/* Read, decode and verify a version (42704 if absent, LK005 if damaged). */
extern bytea *store_read_version(const char *dataset, int32 dataset_id, int64 version);

extern void store_list_versions(int32 dataset_id, int64 after_version,
								ReturnSetInfo *rsinfo);

#endif							/* LAKE_STORE_H */
