/*
 * store_blob.c — blob ids, and the writer row they are drawn under.
 *
 * A new blob id (a stage's id, kept by the version it becomes) is in this
 * partition's residue class: a router sends a stage id to its partition by
 * the id alone. And in this timeline's range (its 2^40 ids are offset by
 * the timeline; the sequence goes on across timelines): a standby promoted
 * without the primary's last WAL (or a point-in-time recovery) hands out
 * the sequence's values again, and a stage id a client holds from the old
 * timeline's lost end must not name another operation's stage.
 */
#include "lake.h"

#include "access/xlog.h"
#include "guc.h"
#include "store.h"
#include "store_blob.h"
#include "store_rel.h"
#include "store_row.h"
#include "utils/builtins.h"

void
store_writer_row_missing(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("lake_data.writer has no row"),
			 errdetail("Its one row holds the writer epoch, without which lake cannot seal or recover."),
			 errhint("Put the row back as a backup of this database has it.")));
}

void
store_require_partition(int32 partitions, int32 partition)
{
	if (partitions != 0 && (partitions != lake_partitions || partition != lake_partition))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this database's lake is partition %d of %d, not %d of %d",
						partition, partitions, lake_partition, lake_partitions),
				 errdetail("Its receipts and stage ids were issued in partition %d's residue class.",
						   partition),
				 errhint("Set lake.partitions and lake.partition back to %d and %d.",
						 partitions, partition)));
}

int64
store_next_blob(void)
{
	Datum		writer[WRITER_NATTS];
	bool		nulls[WRITER_NATTS];
	int64		n;
	TimeLineID	tli = GetWALInsertionTimeLine();

	/* Never an id in another partition's class than the data's (SPEC §7). */
	if (store_fetch("writer", "writer_pkey", InvalidSnapshot, NULL, 0,
					ForwardScanDirection, writer, nulls))
	{
		store_require_partition(nulls[WA_PARTITIONS - 1] ? 0 : DatumGetInt32(writer[WA_PARTITIONS - 1]),
								nulls[WA_PARTITION_NO - 1] ? 0 : DatumGetInt32(writer[WA_PARTITION_NO - 1]));
		if (nulls[WA_TIMELINE - 1] || DatumGetInt64(writer[WA_TIMELINE - 1]) > (int64) tli)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("no stage or payload id is given on timeline %u before lake's worker has recovered on it", tli),
					 nulls[WA_TIMELINE - 1] ?
					 errdetail("lake's data was restored from a dump.") :
					 errdetail("lake's data was last served on timeline " INT64_FORMAT ": the server's timeline went back (pg_upgrade).",
							   DatumGetInt64(writer[WA_TIMELINE - 1])),
					 errhint("Retry once lake.stats() shows the worker serving.")));
	}
	n = store_nextval("blob_seq");

	/* 2^12 timelines of 2^40 ids, times at most 1024 partitions: < 2^63. */
	if (tli > (1 << 12) || n >= ((int64) 1 << 40))
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("no stage or payload id is left for timeline %u", tli),
				 errdetail("Stages and payloads stored in more than one chunk draw 2^40 ids in all, over at most 4096 timelines.")));
	return lake_partition_handle(((int64) (tli - 1) << 40) + n);
}

/*
 * A timeline that went back (pg_upgrade starts the new cluster on timeline
 * 1), or a restore, reaches ids that another line of history (a primary
 * lost in an earlier failover, the dumped database going on) may have
 * handed out past the sequence's value: move it 2^32 ahead, far more than
 * such a line draws (as LAKE_TIMELINE_EPOCH_SKIP for epochs). setval
 * outlives a recovery that fails after it, and the worker's next try comes
 * here again: the sequence still where this process put it is a skip
 * already made (no id is given in between, see store_next_blob).
 */
void
store_skip_blob_ids(void)
{
	static SPIPlanPtr plan;
	static int64 skipped_to = -1;
	int64		n;

	store_run(store_plan(&plan, "SELECT s.last_value FROM lake_data.blob_seq s", 0, NULL),
			  NULL, SPI_OK_SELECT);
	n = DatumGetInt64(store_colv(0, 1));
	if (n == skipped_to)
		return;
	skipped_to = Min(n + ((int64) 1 << 32), ((int64) 1 << 40) - 1);
	(void) DirectFunctionCall2(setval_oid, ObjectIdGetDatum(store_relid("blob_seq")),
							   Int64GetDatum(skipped_to));
}
