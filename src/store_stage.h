/*
 * store_stage.h — open staged appends (store_stage.c).
 */
#ifndef LAKE_STORE_STAGE_H
#define LAKE_STORE_STAGE_H

#include "store_version.h"
#include "utils/timestamp.h"

/* An open stage's row (store_stage_row). */
typedef struct StageRow
{
	int64		id;
	int32		dataset_id;
	char	   *dataset;
	char	   *tenant;
	char	   *operation_id;
	bool		replay_damaged; /* retired: its stage_replay row disagrees */
} StageRow;

/* Sizes of a stage's uploaded chunks. */
typedef struct StageSummary
{
	int64		nchunks;
	int64		last_chunk_no;	/* -1 when there are none */
	int64		largest_chunk;
	int64		smallest_chunk;	/* negative only in a damaged row */
	int64		bytes;
} StageSummary;

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
extern bool store_stage_row(int64 stage, StageRow *row);
/*
 * Is the row still found by the key it was opened under (dataset, tenant,
 * operation)? Its ids are outside every checksum: altered in the heap, a
 * commit would record the version under another operation.
 */
extern bool store_stage_key_holds(const StageRow *row);
/* XX001 for a stage whose row does not hold its key. */
extern void store_stage_damaged(int64 stage) pg_attribute_noreturn();
extern bool store_lock_stage(int64 stage, long *wait_ms, int64 *chunks, int64 *bytes);
/* Mark a stage whose lock is held active (lake.stage_ttl); false if it is gone. */
extern bool store_touch_stage(int64 stage);
extern bool store_stage_version(int64 stage, StageRow *row, OperationLookup *op);
/*
 * The tenant of a stage begun or committed after this REPEATABLE READ
 * transaction's snapshot (NULL otherwise); *committed says which.
 */
extern char *store_stage_since(int64 stage, bool *committed);
/* A chunk as already stored, against bytes sent again (XX001 if damaged). */
typedef enum StoredChunk
{
	CHUNK_ABSENT,
	CHUNK_SAME,
	CHUNK_DIFFERENT
} StoredChunk;
extern StoredChunk store_chunk_compare(int64 blob, int32 chunk_no,
									   const char *data, size_t len);
extern void store_put_chunk(int64 blob, int32 chunk_no, const char *data, size_t len);
extern void store_stage_summary(int64 blob, StageSummary *sum);
extern int64 store_first_missing_chunk(int64 blob);
extern void store_drop_stage(int64 stage, bool with_chunks);
/*
 * One batch of the expiry of stages idle since 'idle_before'; true if more
 * are left. 'open' counts the stages left open, after a pass's last batch
 * only (-1 otherwise).
 */
extern bool store_expire_stages(TimestampTz idle_before, int64 batch_bytes,
								int64 *stages, int64 *chunks, int64 *open);
/* The stage's chunks become the version's: insert its row, retire the stage. */
extern void store_adopt_stage(const StageRow *stage, int64 version,
							  const uint8 *digest, const StageSummary *sum);

#endif							/* LAKE_STORE_STAGE_H */
