/*
 * store_dict.c — per-dataset zstd compression dictionaries: stored,
 * verified when loaded, kept per session (design in store_dict.h).
 */
#include "lake.h"

/* ZSTD_customMem and the *_advanced constructors. */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include "catalog/pg_type.h"
#include "codec.h"
#include "encode.h"
#include "guc.h"
#include "port/pg_crc32c.h"
#include "store_dict.h"
#include "store_rel.h"
#include "store_row.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

/* Columns of lake_data.dictionary, as created by the install script. */
#define DICT_NATTS 6
#define DA_ID 1
#define DA_DATASET 2
#define DA_CHECKSUM 5
#define DA_DATA 6

/* zstd's dictionary header: a magic number, then the id (little-endian). */
#define DICT_MAGIC 0xEC30A437
#define DICT_HEADER 8

/*
 * Sessions keep at most this many dictionaries (each up to ~0.5 MB once
 * prepared for compression) and datasets' choices; more empties them.
 */
#define KEPT_DICTS_MAX 16
#define KEPT_DATASETS_MAX 1024

typedef struct KeptDict
{
	int32		id;				/* key */
	uint8	   *bytes;			/* verified, in TopMemoryContext */
	size_t		len;
	ZSTD_DDict *ddict;
	ZSTD_CDict *cdict;			/* NULL until the session compresses with it */
	int			level;			/* cdict's */
} KeptDict;

typedef struct DatasetDict
{
	int32		dataset_id;		/* key */
	int32		dict_id;		/* 0: the dataset has none */
} DatasetDict;

/*
 * zstd allocates a dictionary's objects through lake: in TopMemoryContext,
 * and an allocation that fails raises PostgreSQL's out-of-memory error
 * (53200) before zstd sees it. Given a NULL, libzstd 1.5.4 (Debian 12's)
 * dereferences it in ZSTD_createCDict_advanced2, which crashes the server,
 * and ZSTD_createDDict's NULL could not be told from a damaged dictionary.
 * Each object is made by one allocation, so nothing is left half made.
 */
static void *
dict_alloc(void *opaque, size_t size)
{
	return MemoryContextAlloc(TopMemoryContext, size);
}

static void
dict_free(void *opaque, void *address)
{
	if (address != NULL)
		pfree(address);
}

static const ZSTD_customMem dict_mem = {dict_alloc, dict_free, NULL};

static HTAB *dicts = NULL;
static HTAB *dataset_dicts = NULL;
static uint64 kept_generation = 0;

static void
forget_dicts(void)
{
	HASH_SEQ_STATUS seq;
	KeptDict   *d;

	if (dicts != NULL)
	{
		hash_seq_init(&seq, dicts);
		while ((d = hash_seq_search(&seq)) != NULL)
		{
			ZSTD_freeDDict(d->ddict);
			ZSTD_freeCDict(d->cdict);
			pfree(d->bytes);
		}
		hash_destroy(dicts);
	}
	if (dataset_dicts != NULL)
		hash_destroy(dataset_dicts);
	dicts = dataset_dicts = NULL;
}

/*
 * The session's caches, emptied after any invalidation, or when full and
 * the caller is 'entering' a new entry.
 */
static void
caches_current(bool entering)
{
	HASHCTL		ctl;

	if (dicts != NULL && kept_generation == store_generation() &&
		(!entering || (hash_get_num_entries(dicts) < KEPT_DICTS_MAX &&
					   hash_get_num_entries(dataset_dicts) < KEPT_DATASETS_MAX)))
		return;
	forget_dicts();
	/* dicts is made last: once it exists, so does the other (either may fail). */
	ctl.keysize = sizeof(int32);
	ctl.entrysize = sizeof(DatasetDict);
	ctl.hcxt = TopMemoryContext;
	dataset_dicts = hash_create("lake dataset dictionaries", 64, &ctl,
								HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	ctl.entrysize = sizeof(KeptDict);
	dicts = hash_create("lake dictionaries", KEPT_DICTS_MAX, &ctl,
						HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	kept_generation = store_generation();
}

static uint32
dict_checksum(const uint8 *data, size_t len)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, data, len);
	FIN_CRC32C(crc);
	return crc;
}

static uint32
get_le32(const uint8 *p)
{
	return (uint32) p[0] | ((uint32) p[1] << 8) | ((uint32) p[2] << 16) |
		((uint32) p[3] << 24);
}

/*
 * Dictionary 'id', loaded and verified if the session does not keep it
 * yet: NULL and *why when it is missing or damaged (never kept then).
 */
static KeptDict *
kept_dict(int32 id, const char **why)
{
	KeptDict   *d;
	ScanKeyData key[1];
	Datum		values[DICT_NATTS];
	bool		nulls[DICT_NATTS];
	bytea	   *data;
	const uint8 *bytes;
	size_t		len;
	ZSTD_DDict *volatile ddict = NULL;
	KeptDict   *volatile entry = NULL;
	uint8	   *copy;
	char	   *damage;

	caches_current(false);
	d = hash_search(dicts, &id, HASH_FIND, NULL);
	if (d != NULL)
		return d;
	store_key_int4(&key[0], DA_ID, id);
	if (!store_fetch("dictionary", "dictionary_pkey", InvalidSnapshot, key, 1,
					 ForwardScanDirection, values, nulls))
	{
		*why = psprintf("compression dictionary %d is missing", id);
		return NULL;
	}
	data = store_detoast_contained(values[DA_DATA - 1], &damage);
	if (data == NULL)
	{
		*why = psprintf("compression dictionary %d is unreadable: %s", id, damage);
		return NULL;
	}
	bytes = (const uint8 *) VARDATA_ANY(data);
	len = VARSIZE_ANY_EXHDR(data);
	if ((int64) dict_checksum(bytes, len) != DatumGetInt64(values[DA_CHECKSUM - 1]))
	{
		*why = psprintf("compression dictionary %d does not match its checksum", id);
		return NULL;
	}
	if (len < DICT_HEADER || get_le32(bytes) != DICT_MAGIC ||
		get_le32(bytes + 4) != (uint32) id)
	{
		*why = psprintf("compression dictionary %d is not a dictionary with its id", id);
		return NULL;
	}

	/*
	 * The entry is made last, and filled at once: one left half filled by
	 * an out-of-memory error would be freed as garbage at the next
	 * invalidation. What is allocated for it before is freed if making it
	 * fails. The decompression dictionary refers to the kept copy (one
	 * allocation of its own, which the copy outlives).
	 */
	copy = MemoryContextAlloc(TopMemoryContext, len);
	memcpy(copy, bytes, len);
	PG_TRY();
	{
		ddict = ZSTD_createDDict_advanced(copy, len, ZSTD_dlm_byRef, ZSTD_dct_auto, dict_mem);
		/* The fetch may have accepted an invalidation: enter under the new generation. */
		if (ddict != NULL)
		{
			caches_current(true);
			entry = hash_search(dicts, &id, HASH_ENTER, NULL);
		}
	}
	PG_CATCH();
	{
		if (ddict != NULL)
			ZSTD_freeDDict(ddict);
		pfree(copy);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (ddict == NULL)
	{
		pfree(copy);
		*why = psprintf("compression dictionary %d is not a dictionary with its id", id);
		return NULL;
	}
	d = entry;
	d->bytes = copy;
	d->len = len;
	d->ddict = ddict;
	d->cdict = NULL;
	return d;
}

/* The id of the dataset's newest dictionary, 0 if it has none. */
static int32
dataset_dict_id(int32 dataset_id)
{
	DatasetDict *e;
	ScanKeyData key[1];
	Datum		values[DICT_NATTS];
	bool		nulls[DICT_NATTS];
	int32		id = 0;

	caches_current(false);
	e = hash_search(dataset_dicts, &dataset_id, HASH_FIND, NULL);
	if (e != NULL)
		return e->dict_id;
	store_key_int4(&key[0], DA_DATASET, dataset_id);
	if (store_fetch("dictionary", "dictionary_dataset", InvalidSnapshot, key, 1,
					BackwardScanDirection, values, nulls))
		id = DatumGetInt32(values[DA_ID - 1]);
	/* Kept only from a fresh snapshot, as a dataset's id is (store_version.c). */
	if (IsolationUsesXactSnapshot())
		return id;
	caches_current(true);
	e = hash_search(dataset_dicts, &dataset_id, HASH_ENTER, NULL);
	e->dict_id = id;
	return id;
}

bytea *
store_dict_encode_chunk(int32 dataset_id, const char *data, size_t len)
{
	int32		id;
	KeptDict   *d;
	const char *why = NULL;

	if (len > LAKE_DICT_MAX_INPUT || (id = dataset_dict_id(dataset_id)) == 0)
		return encode_chunk_dict(data, len, NULL, LAKE_PLACE_NONE);
	if ((d = kept_dict(id, &why)) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("the compression dictionary of this dataset is damaged"),
				 errdetail("The check of the dictionary found: %s.", why),
				 errhint("Train a new one with lake.train_dictionary().")));
	if (d->cdict != NULL && d->level != lake_compression_level)
	{
		ZSTD_freeCDict(d->cdict);
		d->cdict = NULL;
	}
	if (d->cdict == NULL)
	{
		/* As ZSTD_createCDict makes it (the same frames), by our allocator. */
		ZSTD_CCtx_params *params = ZSTD_createCCtxParams();

		if (params == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory"),
					 errdetail("Could not prepare zstd dictionary %d.", id)));
		PG_TRY();
		{
			if (ZSTD_isError(ZSTD_CCtxParams_setParameter(params, ZSTD_c_compressionLevel,
														  lake_compression_level)))
				elog(ERROR, "lake: zstd refused compression level %d", lake_compression_level);
			d->cdict = ZSTD_createCDict_advanced2(d->bytes, d->len, ZSTD_dlm_byCopy,
												  ZSTD_dct_auto, params, dict_mem);
		}
		PG_FINALLY();
		{
			ZSTD_freeCCtxParams(params);
		}
		PG_END_TRY();
		if (d->cdict == NULL)
			elog(ERROR, "lake: zstd could not prepare compression dictionary %d", id);
		d->level = lake_compression_level;
	}
	return encode_chunk_dict(data, len, d->cdict, LAKE_PLACE_NONE);
}

const char *
store_dict_decode(const uint8 *in, size_t len, bool bare, uint32 place,
				  uint8 *out, size_t cap, size_t *outlen)
{
	uint32		id = lake_chunk_dict_id(in, len, bare);
	const ZSTD_DDict *ddict = NULL;
	const char *why = NULL;
	LakeCodecStatus st;

	if (id != 0)
	{
		KeptDict   *d = id <= PG_INT32_MAX ? kept_dict((int32) id, &why) : NULL;

		if (d == NULL)
			return why != NULL ? why :
				psprintf("compression dictionary %u is missing", id);
		ddict = d->ddict;
	}
	st = lake_chunk_decode_dict(encode_decompression_context(), ddict, in, len,
								bare, place, out, cap, outlen);
	return st == LAKE_CODEC_OK ? NULL : lake_codec_status_text(st);
}

int32
store_dict_insert(int32 dataset_id, uint8 *dict, size_t len, int32 samples)
{
	static SPIPlanPtr plan;
	Oid			types[5] = {INT4OID, INT4OID, INT4OID, INT8OID, BYTEAOID};
	int32		id = (int32) store_nextval("dictionary_seq");
	bytea	   *data = palloc(VARHDRSZ + len);
	Datum		values[5];

	Assert(len >= DICT_HEADER && get_le32(dict) == DICT_MAGIC);
	for (int i = 0; i < 4; i++)
		dict[4 + i] = (uint8) ((uint32) id >> (8 * i));
	SET_VARSIZE(data, VARHDRSZ + len);
	memcpy(VARDATA(data), dict, len);
	values[0] = Int32GetDatum(id);
	values[1] = Int32GetDatum(dataset_id);
	values[2] = Int32GetDatum(samples);
	values[3] = Int64GetDatum((int64) dict_checksum(dict, len));
	values[4] = PointerGetDatum(data);
	store_run(store_plan_once(&plan,
				 "INSERT INTO lake_data.dictionary (id, dataset_id, samples, checksum, data) "
				 "VALUES ($1, $2, $3, $4, $5)",
				 5, types),
		values, SPI_OK_INSERT);
	return id;
}
