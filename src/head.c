/*
 * head.c — datasets' head versions in shared memory.
 *
 * A direct-mapped table of slots, each under a spinlock, each holding one
 * dataset's head or nothing; a dataset whose slot another one took is
 * simply not known. What keeps a known head true:
 *
 *   - a known head is written only by a holder of the dataset's append
 *     lock: when it learned the head from a snapshot taken after the lock
 *     was granted (head_learn), and when its transaction commits a version
 *     (the commit callback: the version is visible by then, and the lock,
 *     held to commit, is not yet released);
 *   - anything may make a slot unknown: another dataset's head, a PREPARE
 *     (the commit happens elsewhere), a subtransaction abort (the
 *     transaction's own writes are then no longer known here), an abort
 *     after a write (it may have failed on a version written by hand);
 *   - shared memory starts empty, at server start and after a crash.
 *
 * Lock holders follow one another, so a known head only grows, and it is
 * the highest committed version or, between a commit and its callback,
 * one less. Versions are written only under the lock, by transactions
 * that say so here (head_wrote) before they write.
 */
#include "lake.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "head.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "storage/spin.h"

#define HEAD_SLOTS 4096			/* a power of two */

typedef struct HeadSlot
{
	slock_t		mutex;
	Oid			database;
	Oid			datasets;
	int32		dataset_id;
	int64		head;			/* -1: not known */
} HeadSlot;

static HeadSlot *slots = NULL;

/*
 * This transaction's versions, published when it commits. A transaction
 * writing to more datasets than this, or one whose subtransaction aborted
 * after a write, gives up on heads until it ends ('lost').
 */
#define PENDING_MAX 8

typedef struct Pending
{
	Oid			datasets;
	int32		dataset_id;
	int64		version;
} Pending;

static Pending pending[PENDING_MAX];
static int	npending = 0;
static bool lost = false;

void
head_shmem_request(void)
{
	RequestAddinShmemSpace(MAXALIGN(mul_size(HEAD_SLOTS, sizeof(HeadSlot))));
}

void
head_shmem_startup(void)
{
	bool		found;

	slots = ShmemInitStruct("lake dataset heads",
							mul_size(HEAD_SLOTS, sizeof(HeadSlot)), &found);
	if (!found)
	{
		for (int i = 0; i < HEAD_SLOTS; i++)
		{
			SpinLockInit(&slots[i].mutex);
			slots[i].database = InvalidOid;
			slots[i].datasets = InvalidOid;
			slots[i].dataset_id = 0;
			slots[i].head = -1;
		}
	}
}

static HeadSlot *
slot_of(Oid datasets, int32 dataset_id)
{
	uint32		h = hash_combine(murmurhash32((uint32) dataset_id),
								 hash_combine(murmurhash32(datasets), MyDatabaseId));

	return &slots[h & (HEAD_SLOTS - 1)];
}

/* Set the dataset's slot to 'head' (-1: not known). */
static void
slot_set(Oid datasets, int32 dataset_id, int64 head)
{
	HeadSlot   *s = slot_of(datasets, dataset_id);

	SpinLockAcquire(&s->mutex);
	s->database = MyDatabaseId;
	s->datasets = datasets;
	s->dataset_id = dataset_id;
	s->head = head;
	SpinLockRelease(&s->mutex);
}

static Pending *
pending_of(Oid datasets, int32 dataset_id)
{
	for (int i = 0; i < npending; i++)
		if (pending[i].dataset_id == dataset_id && pending[i].datasets == datasets)
			return &pending[i];
	return NULL;
}

/* Forget this transaction's versions; their heads become unknown. */
static void
give_up(void)
{
	for (int i = 0; i < npending; i++)
		slot_set(pending[i].datasets, pending[i].dataset_id, -1);
	npending = 0;
	lost = true;
}

int64
head_get(Oid datasets, int32 dataset_id)
{
	HeadSlot   *s;
	Pending    *p;
	int64		head = -1;

	if (lost)
		return -1;
	if ((p = pending_of(datasets, dataset_id)) != NULL)
		return p->version;
	s = slot_of(datasets, dataset_id);
	SpinLockAcquire(&s->mutex);
	if (s->dataset_id == dataset_id && s->datasets == datasets &&
		s->database == MyDatabaseId)
		head = s->head;
	SpinLockRelease(&s->mutex);
	return head;
}

void
head_learn(Oid datasets, int32 dataset_id, int64 version)
{
	/* A snapshot of a transaction that wrote here sees its own versions too. */
	if (!lost && pending_of(datasets, dataset_id) == NULL)
		slot_set(datasets, dataset_id, version);
}

void
head_wrote(Oid datasets, int32 dataset_id, int64 version)
{
	Pending    *p;

	if (!lost && (p = pending_of(datasets, dataset_id)) != NULL)
	{
		p->version = version;
		return;
	}
	if (!lost && npending == PENDING_MAX)
		give_up();
	if (lost)
	{
		/* Not published at commit: no one may trust the old head meanwhile. */
		slot_set(datasets, dataset_id, -1);
		return;
	}
	pending[npending].datasets = datasets;
	pending[npending].dataset_id = dataset_id;
	pending[npending].version = version;
	npending++;
}

static void
head_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			for (int i = 0; i < npending; i++)
				slot_set(pending[i].datasets, pending[i].dataset_id, pending[i].version);
			break;
		case XACT_EVENT_PRE_PREPARE:
			give_up();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			/*
			 * The write may have failed on a version someone wrote behind
			 * lake's back (by hand, a data-only restore): learn again.
			 */
			give_up();
			break;
		case XACT_EVENT_PREPARE:
			break;
		default:
			return;
	}
	npending = 0;
	lost = false;
}

static void
head_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB && npending > 0)
		give_up();
}

void
head_init(void)
{
	RegisterXactCallback(head_xact_callback, NULL);
	RegisterSubXactCallback(head_subxact_callback, NULL);
}
