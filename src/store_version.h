/*
 * store_version.h — datasets, versions and their chunks (store_version.c).
 */
#ifndef LAKE_STORE_VERSION_H
#define LAKE_STORE_VERSION_H

#include "access/xlogdefs.h"
#include "store.h"

/* A version's header row, as store_version_head finds it. */
typedef struct VersionHead
{
	int32		dataset_id;
	int64		version;
	char	   *tenant;
	int64		bytes;			/* the payload's size */
	uint8		digest[LAKE_DIGEST_LEN];
	bool		digest_ok;		/* false: the stored digest is unreadable */
	bytea	   *inline_chunk;	/* chunk 0 when stored in the row, else NULL */
	bool		inline_bare;	/* and of the bare form (earlier builds) */
	int64		blob;			/* the blob of the other chunks, 0: none */
	int32		nchunks;		/* chunks in all */
	const char *damage;			/* why the size is unknown (chunk 0 damaged) */
} VersionHead;

/* What the version history says about one operation. */
typedef struct OperationLookup
{
	int32		dataset_id;
	bool		found;			/* the operation has a version */
	int64		version;
	uint8		digest[LAKE_DIGEST_LEN];
	VersionHead head;			/* when found: the version's header */
	/*
	 * When found: where WAL must be flushed before the version is
	 * acknowledged as durable (its writer may have committed with
	 * synchronous_commit = off), or InvalidXLogRecPtr.
	 */
	XLogRecPtr	commit_lsn;
	/*
	 * When not found: how many of the tenant's other operations in the
	 * dataset share its 32-bit key (version_operation), all of which the
	 * look-up had to read.
	 */
	int32		key_peers;
	int64		max_version;	/* store_recheck_operation only */
	/* operation.c's: the dataset's head when looked up (-1: not known), */
	int64		seen_head;
	bool		locked;			/* and whether its append lock is held, */
	bool		own_permit;		/* and whether the call took the permit it holds */
} OperationLookup;

/* Receives each decoded chunk of a payload, in order. */
typedef void (*ChunkVisitor) (const char *data, size_t len, void *arg);

/* datasets */
extern void store_create_dataset(const char *name);
extern int32 store_dataset_id(const char *name);
extern char *store_dataset_name(int32 dataset_id);
extern bool store_lock_dataset(int32 dataset_id, long wait_ms);

/* operations */
extern void store_lookup_operation(int32 dataset_id, const char *tenant,
								   const char *operation_id, OperationLookup *out);
extern void store_recheck_operation(const char *tenant, const char *operation_id,
									Snapshot snapshot, OperationLookup *out);

/* versions */
/*
 * A single-shot payload stored ahead of its version row, before the
 * dataset's append lock is taken (operation.c): its chunks beyond the first
 * written under a fresh blob, chunk 0 encoded for the row. A large
 * payload's compression, at a level the session chooses, then never holds
 * the lock other appends to the dataset wait for. Written as a version
 * once the version number is known, or discarded (its chunks deleted) when
 * the operation turns out to have been committed meanwhile.
 */
typedef struct PreparedVersion
{
	bytea	   *chunk0;			/* encoded, for the row */
	int64		blob;			/* of chunks 1..nchunks-1; 0: none */
	int32		nchunks;
	int64		bytes;
} PreparedVersion;

extern void store_prepare_version(int32 dataset_id, const char *payload, int64 len,
								  PreparedVersion *pv);
extern void store_write_prepared(int32 dataset_id, int64 version, const char *tenant,
								 const char *operation_id, const uint8 *digest,
								 const PreparedVersion *pv);
extern void store_discard_prepared(const PreparedVersion *pv);
/* Delete a blob's chunks (a stage's, or a prepared version's). */
extern void store_drop_chunks(int64 blob);
extern void store_add_version(int32 dataset_id, int64 version, const char *tenant,
							  const char *operation_id, const uint8 *digest,
							  int64 bytes, int32 nchunks, int64 blob);
/*
 * The version a blob (or a replayed stage) was committed as: its tenant and
 * operation are the version's; 'replay_damaged' is set when a stage_replay
 * row names a version of another operation, or a version_blob row one that
 * does not read its chunks from this blob.
 */
extern bool store_version_of_blob(int64 blob, Snapshot snapshot, OperationLookup *op,
								  char **tenant, char **operation_id, bool *replay_damaged);
extern void store_note_stage_replay(int64 stage, int32 dataset_id, int64 version,
									const char *tenant, const char *operation_id);
extern bool store_version_head(int32 dataset_id, int64 version, VersionHead *head);
/* The largest decoded chunk of a version: what checking it buffers at once. */
extern int64 store_version_largest_chunk(const VersionHead *head);
/*
 * Hand a version's decoded payload to 'visit' (NULL: none) and verify it
 * against the version's digest: NULL, or why its lineage is broken.
 */
extern const char *store_visit_version(const VersionHead *head, ChunkVisitor visit,
									   void *arg);
/* LK005: the version's chunks are missing or damaged. */
extern void store_lineage_broken(const char *dataset, int64 version,
								 const char *why) pg_attribute_noreturn();
/*
 * Verify a found operation's lineage as a read does; LK005 if it is broken.
 * 'payload' (NULL: none) holds 'len' bytes whose digest is the version's:
 * the chunks are compared with them instead of digested.
 */
extern void store_check_lineage(const char *dataset, const OperationLookup *op,
								const char *payload, int64 len);
extern void store_list_versions(int32 dataset_id, int64 after_version,
								Oid only_role, ReturnSetInfo *rsinfo);
/* The newest versions of 1 to max_bytes bytes (dictionary training samples). */
extern int	store_recent_versions(int32 dataset_id, int64 max_bytes, int limit,
								  int64 *versions);

/*
 * chunks (of versions and of open stages); 'version' is the version whose
 * chunks are visited (their TOAST damage is LK005), 0 for a stage's (XX001)
 */
extern void store_insert_chunk(Relation rel, int64 blob, int32 chunk_no,
								const char *data, size_t len);
extern const char *store_visit_chunks(int64 blob, int32 first, int64 count,
									  int64 total, int64 version,
									  ChunkVisitor visit, void *arg);

#endif							/* LAKE_STORE_VERSION_H */
