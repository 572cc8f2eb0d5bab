/*
 * head.h — each dataset's head version (its highest committed version),
 * kept in shared memory (head.c), so that an append under the dataset's
 * lock need not probe the version index for it.
 *
 * A dataset is named by the OID of lake_data.dataset and its id: a dropped
 * and recreated extension never meets its predecessor's heads.
 */
#ifndef LAKE_HEAD_H
#define LAKE_HEAD_H

extern void head_shmem_request(void);
extern void head_shmem_startup(void);
extern void head_init(void);

/*
 * The dataset's head as this transaction sees it (its own uncommitted
 * version, if it wrote one), or -1 when not known. Read before a fresh
 * snapshot is taken, the snapshot sees every version up to it.
 */
extern int64 head_get(Oid datasets, int32 dataset_id);

/*
 * Under the dataset's append lock: 'version' is the highest version a
 * snapshot taken after the lock was granted sees.
 */
extern void head_learn(Oid datasets, int32 dataset_id, int64 version);

/*
 * Under the dataset's append lock: this transaction writes 'version'. It
 * becomes the head when the transaction commits, not before, and never if
 * it aborts.
 */
extern void head_wrote(Oid datasets, int32 dataset_id, int64 version);

#endif							/* LAKE_HEAD_H */
