/*
 * dict.c — lake.train_dictionary(dataset): train a zstd dictionary from
 * the dataset's own payloads (store_dict.h says how it is then used).
 *
 * Training is an administrator's decision, taken when a dataset holds
 * enough typical payloads: the function samples the dataset's newest
 * payloads of up to LAKE_DICT_MAX_INPUT bytes (the ones a dictionary
 * compresses), at most TRAIN_SAMPLES of them and TRAIN_BYTES in all, each
 * read as lake.read reads it (decoded and verified against its digest: a
 * damaged one is LK005, never a sample), and trains with zstd's default
 * trainer. The new dictionary compresses the dataset's appends from the
 * next transaction that sees it; training again later adds a newer one.
 * The worker does not train on its own.
 */
#include "lake.h"

#include <zdict.h>
#include <zstd_errors.h>

#include "access.h"
#include "args.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "store_dict.h"
#include "store_version.h"
#include "tcop/utility.h"

PG_FUNCTION_INFO_V1(lake_train_dictionary);

/* Sampling bounds: zstd's trainer wants about 100 times the dictionary's size. */
#define TRAIN_SAMPLES 4096
#define TRAIN_BYTES (100 * LAKE_DICT_BYTES)
/* Fewer samples than this make no dictionary worth having. */
#define TRAIN_MIN_SAMPLES 100

typedef struct Samples
{
	StringInfoData buf;			/* the samples, back to back */
	size_t	   *sizes;
	int			n;
} Samples;

static void
add_sample_bytes(const char *data, size_t len, void *arg)
{
	Samples    *s = (Samples *) arg;

	appendBinaryStringInfo(&s->buf, data, (int) len);
	s->sizes[s->n] += len;
}

Datum
lake_train_dictionary(PG_FUNCTION_ARGS)
{
	char	   *dataset;
	int32		dataset_id;
	int64	   *versions = palloc(sizeof(int64) * TRAIN_SAMPLES);
	int			nversions;
	Samples		s;
	uint8	   *dict = palloc(LAKE_DICT_BYTES);
	size_t		dictlen;
	int32		id;

	lake_require_preload();
	dataset = lake_arg_name(fcinfo, 0, "dataset name");
	access_require_admin(fcinfo);
	/* Refused before sampling and training: the result could not be stored. */
	PreventCommandIfReadOnly("lake.train_dictionary()");
	PreventCommandDuringRecovery("lake.train_dictionary()");
	store_connect();
	dataset_id = store_dataset_id(dataset);
	nversions = store_recent_versions(dataset_id, LAKE_DICT_MAX_INPUT,
									  TRAIN_SAMPLES, versions);
	initStringInfo(&s.buf);
	s.sizes = palloc0(sizeof(size_t) * TRAIN_SAMPLES);
	s.n = 0;
	for (int i = 0; i < nversions && s.buf.len < TRAIN_BYTES; i++)
	{
		VersionHead head;
		const char *why;

		CHECK_FOR_INTERRUPTS();
		if (!store_version_head(dataset_id, versions[i], &head))
			continue;			/* not in this snapshot */
		why = store_visit_version(&head, add_sample_bytes, &s);
		if (why != NULL)
			store_lineage_broken(dataset, versions[i], why);
		s.n++;
	}
	if (s.n < TRAIN_MIN_SAMPLES)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dataset \"%s\" has too few payloads to train a dictionary", dataset),
				 errdetail_plural("It has %d payload of 1 to %d bytes; training needs %d.",
								  "It has %d payloads of 1 to %d bytes; training needs %d.",
								  s.n, s.n, LAKE_DICT_MAX_INPUT, TRAIN_MIN_SAMPLES)));
	dictlen = ZDICT_trainFromBuffer(dict, LAKE_DICT_BYTES, s.buf.data, s.sizes,
									(unsigned) s.n);
	if (ZDICT_isError(dictlen) && ZSTD_getErrorCode(dictlen) == ZSTD_error_memory_allocation)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Zstandard could not allocate what training a dictionary for dataset \"%s\" needs.",
						   dataset)));
	if (ZDICT_isError(dictlen))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("could not train a dictionary for dataset \"%s\"", dataset),
				 errdetail("Zstandard reports \"%s\" for %d payloads of %d bytes in all.",
						   ZDICT_getErrorName(dictlen), s.n, s.buf.len)));
	id = store_dict_insert(dataset_id, dict, dictlen, s.n);
	store_finish();
	PG_RETURN_INT32(id);
}
