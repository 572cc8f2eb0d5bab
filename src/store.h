/*
 * store.h — lake's append-side tables (see store.c), reached only through
 * kept SPI plans with schema-qualified names and pg_catalog operators.
 *
 * Every entry point brackets its table work with store_connect() /
 * store_finish(): SPI, run as the owner of the lake schema after the
 * caller's own rights were checked (access.h).
 */
#ifndef LAKE_STORE_H
#define LAKE_STORE_H

#include "lake.h"

#include "access/sdir.h"
#include "access/skey.h"
#include "funcapi.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"

#include "executor/spi.h"

extern void store_connect(void);
extern void store_finish(void);
extern Oid	store_caller(void);
extern Oid	store_owner(void);

/* A version's header row, as store_version_head finds it. */
typedef struct VersionHead
{
	char	   *tenant;
	int64		bytes;
	int32		nchunks;
	int64		blob;			/* 0: no chunks outside the row */
	uint8		digest[LAKE_DIGEST_LEN];
	bytea	   *inline_chunk;	/* chunk 0 when stored in the row, else NULL */
} VersionHead;

/* What the version history says about one operation. */
typedef struct OperationLookup
{
	int32		dataset_id;
	bool		found;			/* the operation has a version */
	int64		version;
	uint8		digest[LAKE_DIGEST_LEN];
	VersionHead head;			/* when found: the version's header */
	int64		max_version;	/* store_recheck_operation only */
} OperationLookup;

/* An open stage, locked by store_lock_stage. */
typedef struct StageRow
{
	int64		id;
	int32		dataset_id;
	char	   *dataset;
	char	   *tenant;
	char	   *operation_id;
} StageRow;

/* Sizes of a stage's uploaded chunks. */
typedef struct StageSummary
{
	int64		nchunks;
	int64		last_chunk_no;	/* -1 when there are none */
	int64		largest_chunk;
	int64		bytes;
	int64		stored_bytes;
} StageSummary;

/* Receives each decoded chunk of a payload, in order. */
typedef void (*ChunkVisitor) (const char *data, size_t len, void *arg);

extern SPIPlanPtr store_plan(SPIPlanPtr *cache, const char *sql, int nargs,
							 Oid *argtypes);
extern SPIPlanPtr store_plan_once(SPIPlanPtr *cache, const char *sql, int nargs,
								  Oid *argtypes);

/* Direct index point lookups (see store.c). */
extern void store_key_int4(ScanKeyData *key, AttrNumber att, int32 value);
extern void store_key_int8(ScanKeyData *key, AttrNumber att, int64 value);
extern void store_key_text(ScanKeyData *key, AttrNumber att, const char *value);
extern uint64 store_generation(void);
extern Oid	store_relid(const char *name);
extern Relation store_open(const char *name, LOCKMODE mode);
extern void store_insert(Relation rel, Datum *values, bool *nulls);
extern bool store_fetch_in(Relation rel, Relation idx, Snapshot snapshot,
						   ScanKeyData *keys, int nkeys, ScanDirection dir,
						   Datum *values, bool *nulls);
extern bool store_fetch(const char *table, const char *index, Snapshot snapshot,
						ScanKeyData *keys, int nkeys, ScanDirection dir,
						Datum *values, bool *nulls);

/* Encode bytes as a stored chunk (codec.h) at lake.compression_level. */
extern bytea *store_encode(const char *data, size_t len);

/* datasets */
extern void store_create_dataset(const char *name);
extern int32 store_dataset_id(const char *name);
extern char *store_dataset_name(int32 dataset_id);
extern bool store_lock_dataset(int32 dataset_id, long wait_ms);

/* operations */
extern void store_lookup_operation(const char *dataset, const char *tenant,
								   const char *operation_id, OperationLookup *out);
extern void store_recheck_operation(const char *tenant, const char *operation_id,
									Snapshot snapshot, OperationLookup *out);

/* versions */
extern void store_write_version(int32 dataset_id, int64 version,
								const char *tenant, const char *operation_id,
								const uint8 *digest, const char *payload, int64 len);
extern void store_adopt_stage(const StageRow *stage, int64 version,
							  const uint8 *digest, const StageSummary *sum);
extern bool store_version_head(int32 dataset_id, int64 version, VersionHead *head);
/*
 * Hand a version's decoded payload to 'visit' (NULL: none) and verify it
 * against the version's digest: NULL, or why its lineage is broken.
 */
extern const char *store_visit_version(const VersionHead *head, ChunkVisitor visit,
									   void *arg);
/* LK005: the version's chunks are missing or damaged. */
extern void store_lineage_broken(const char *dataset, int64 version,
								 const char *why) pg_attribute_noreturn();
/* Verify a found operation's lineage as a read does; LK005 if it is broken. */
extern void store_check_lineage(const char *dataset, const OperationLookup *op);
extern void store_fill(SPIPlanPtr plan, Datum *values, ReturnSetInfo *rsinfo);
extern void store_list_versions(int32 dataset_id, int64 after_version,
								Oid only_role, ReturnSetInfo *rsinfo);

/* stages */
/*
 * Open a stage for the operation, recorded as begun by 'role', or return
 * the one open. With max_open > 0 a new stage is counted against the
 * role's open stages: returns 0 (with *open, the count) when it holds
 * max_open, or -1 when another begin of the role held the count's lock
 * for lake.admission_queue_wait.
 */
extern int64 store_begin_stage(int32 dataset_id, const char *tenant,
							   const char *operation_id, Oid role,
							   int max_open, int64 *open);
extern bool store_lock_stage(int64 stage, StageRow *row);
extern bool store_stage_version(int64 stage, StageRow *row, OperationLookup *op);
extern bool store_chunk_digest(int64 blob, int32 chunk_no, uint8 *digest);
extern int64 store_stage_bytes(int64 blob, int32 except_chunk_no);
extern void store_put_chunk(int64 blob, int32 chunk_no, const uint8 *digest,
							const char *data, size_t len);
extern void store_stage_summary(int64 blob, StageSummary *sum);
extern int64 store_first_missing_chunk(int64 blob);
extern const char *store_visit_chunks(int64 blob, int32 first, int64 count,
									  int64 total, ChunkVisitor visit, void *arg);
extern void store_drop_stage(int64 stage, bool with_chunks);
extern void store_expire_stages(TimestampTz idle_before, int64 *stages,
								int64 *chunks, int64 *open);

/* tenants: read with the latest snapshot, so an answer can be cached (access.c) */
extern bool store_tenant_granted(const char *tenant, Oid role);
extern void store_set_tenant_grant(const char *tenant, Oid role, bool grant);

#endif							/* LAKE_STORE_H */
