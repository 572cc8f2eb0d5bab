/*
 * encode.c — the backend's zstd contexts and its encode buffer: stored
 * chunks (codec.h) encoded at lake.compression_level without a context or
 * a megabyte allocated per chunk.
 */
#include "lake.h"

#include <zstd.h>

#include "codec.h"
#include "encode.h"
#include "guc.h"
#include "miscadmin.h"
#include "utils/memutils.h"

/* zstd context reused for the life of the backend (zstd's own allocator). */
static ZSTD_CCtx *cctx = NULL;

/* Between the steps of a large chunk's compression (codec.h). */
static void
compression_step(void)
{
	CHECK_FOR_INTERRUPTS();
}

/*
 * A chunk larger than lake's own is being compressed: its context goes
 * once it is done, or at the next use if it was interrupted. At a high
 * level zstd's workspace for it is a hundred megabytes.
 */
static bool large_in_progress = false;

static void
drop_large_context(void)
{
	if (large_in_progress && cctx != NULL)
	{
		ZSTD_freeCCtx(cctx);
		cctx = NULL;
	}
	large_in_progress = false;
}

static ZSTD_CCtx *
compression_context(void)
{
	drop_large_context();
	if (cctx == NULL)
	{
		lake_codec_step = compression_step;
		cctx = ZSTD_createCCtx();
		if (cctx == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory"),
					 errdetail("Could not create a zstd compression context.")));
	}
	return cctx;
}

/* The backend's zstd decompression context, for every decode. */
ZSTD_DCtx *
encode_decompression_context(void)
{
	static ZSTD_DCtx *dctx = NULL;

	if (dctx == NULL && (dctx = ZSTD_createDCtx()) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Could not create a zstd decompression context.")));
	return dctx;
}

/* Encode (compress or not, codec.h) into a freshly palloc'd bytea. */
bytea *
encode_record(const char *data, size_t len)
{
	bytea	   *out = palloc(VARHDRSZ + lake_chunk_bound(len));
	size_t		n = lake_chunk_encode(compression_context(), lake_compression_level,
									  (const uint8_t *) data, len, false,
									  LAKE_PLACE_NONE, (uint8_t *) VARDATA(out));

	SET_VARSIZE(out, VARHDRSZ + n);
	return out;
}

bytea *
encode_record_raw(const char *data, size_t len)
{
	bytea	   *out = palloc(VARHDRSZ + LAKE_CHUNK_HEADER + len);

	SET_VARSIZE(out, VARHDRSZ + lake_chunk_encode_raw((const uint8_t *) data, len, false,
													  LAKE_PLACE_NONE, (uint8_t *) VARDATA(out)));
	return out;
}

/*
 * Encode a payload chunk. Chunks up to LAKE_CHUNK_BYTES (every chunk lake
 * cuts itself) go into the backend's one encode buffer, kept for the life
 * of the backend at the size of the largest such chunk so far: no megabyte
 * allocated per chunk; the result is valid until the next call. A larger
 * staged chunk (its size is the client's, up to lake.max_stream_bytes) is
 * encoded into memory of the current context instead, so no backend keeps
 * its size for good. With a prepared
 * dictionary (store_dict.h) the chunk is compressed with it, at its level.
 */
bytea *
encode_chunk_dict(const char *data, size_t len,
				  const struct ZSTD_CDict_s *cdict, uint32 place)
{
	static bytea *buffer = NULL;
	static size_t capacity = 0;
	size_t		need = VARHDRSZ + lake_chunk_bound(len);
	bytea	   *out;
	size_t		n;
	ZSTD_CCtx  *ctx;

	if (need > MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a chunk of %zu bytes is too large to store", len),
				 errhint("Send the payload in smaller chunks.")));
	if (need > VARHDRSZ + lake_chunk_bound(LAKE_CHUNK_BYTES))
		out = palloc(need);
	else
	{
		if (need > capacity)
		{
			if (buffer != NULL)
				pfree(buffer);
			buffer = NULL;		/* kept sound if the allocation fails */
			capacity = 0;
			buffer = MemoryContextAlloc(TopMemoryContext, need);
			capacity = need;
		}
		out = buffer;
	}
	ctx = compression_context();
	large_in_progress = out != buffer;
	n = cdict != NULL ?
		lake_chunk_encode_dict(ctx, cdict,
							   (const uint8_t *) data, len, false, place, (uint8_t *) VARDATA(out)) :
		lake_chunk_encode(ctx, lake_compression_level,
						  (const uint8_t *) data, len, false, place, (uint8_t *) VARDATA(out));
	SET_VARSIZE(out, VARHDRSZ + n);
	drop_large_context();
	return out;
}

bytea *
encode_chunk(const char *data, size_t len, uint32 place)
{
	return encode_chunk_dict(data, len, NULL, place);
}
