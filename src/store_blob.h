/*
 * store_blob.h — blob (and stage) ids, and lake_data.writer's row, which
 * records the partition and timeline they are drawn in.
 */
#ifndef LAKE_STORE_BLOB_H
#define LAKE_STORE_BLOB_H

#include "lake.h"

/* lake_data.writer's columns: one, epoch, timeline, partitions, partition_no, encoding. */
#define WRITER_NATTS 6
#define WA_EPOCH 2
#define WA_TIMELINE 3
#define WA_PARTITIONS 4
#define WA_PARTITION_NO 5
/*
 * 55000 unless this server runs as the partition the database's epochs and
 * stage ids were issued as (partitions 0: none recorded yet).
 */
extern void store_require_partition(int32 partitions, int32 partition);
/* XX001: lake_data.writer's one row is gone (deleted by hand). */
extern void store_writer_row_missing(void) pg_attribute_noreturn();
/*
 * A new blob (and stage) id, in this partition's residue class and this
 * timeline's range. 55000 while the writer row is on a higher timeline
 * than the server (pg_upgrade): until the worker's recovery has skipped
 * the ids a lost line of this timeline may have handed out.
 */
extern int64 store_next_blob(void);
/* Move the blob id sequence past anything a lost line of this timeline drew. */
extern void store_skip_blob_ids(void);

#endif							/* LAKE_STORE_BLOB_H */
