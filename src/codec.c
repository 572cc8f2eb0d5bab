/*
 * codec.c — encode and decode stored chunks (format in codec.h).
 *
 * Pure C on top of zstd: no palloc, no ereport, no global state, so the
 * decoder can run under a fuzzer exactly as the server runs it.
 */
#include <string.h>
#include <zstd.h>

#include "codec.h"

size_t
lake_chunk_bound(size_t len)
{
	return 1 + ZSTD_compressBound(len);
}

size_t
lake_chunk_encode(ZSTD_CCtx *cctx, int level, const uint8_t *in, size_t len,
				  uint8_t *out)
{
	size_t		zlen = 0;

	if (len > 0)
		zlen = ZSTD_compressCCtx(cctx, out + 1, ZSTD_compressBound(len),
								 in, len, level);
	if (len > 0 && !ZSTD_isError(zlen) && zlen < len)
	{
		out[0] = LAKE_CODEC_ZSTD;
		return 1 + zlen;
	}
	out[0] = LAKE_CODEC_RAW;
	if (len > 0)
		memcpy(out + 1, in, len);
	return 1 + len;
}

LakeCodecStatus
lake_chunk_decoded_size(const uint8_t *in, size_t len, size_t *size)
{
	unsigned long long n;

	if (len < 1)
		return LAKE_CODEC_EMPTY;
	switch (in[0])
	{
		case LAKE_CODEC_RAW:
			*size = len - 1;
			return LAKE_CODEC_OK;
		case LAKE_CODEC_ZSTD:
			n = ZSTD_getFrameContentSize(in + 1, len - 1);
			if (n == ZSTD_CONTENTSIZE_UNKNOWN || n == ZSTD_CONTENTSIZE_ERROR)
				return LAKE_CODEC_BAD_FRAME;
			if (n > (unsigned long long) SIZE_MAX)
				return LAKE_CODEC_TOO_BIG;
			*size = (size_t) n;
			return LAKE_CODEC_OK;
		default:
			return LAKE_CODEC_BAD_TAG;
	}
}

LakeCodecStatus
lake_chunk_decode(const uint8_t *in, size_t len, uint8_t *out, size_t cap,
				  size_t *outlen)
{
	size_t		size;
	size_t		got;
	LakeCodecStatus st = lake_chunk_decoded_size(in, len, &size);

	if (st != LAKE_CODEC_OK)
		return st;
	if (size > cap)
		return LAKE_CODEC_TOO_BIG;
	if (in[0] == LAKE_CODEC_RAW)
	{
		if (size > 0)
			memcpy(out, in + 1, size);
		*outlen = size;
		return LAKE_CODEC_OK;
	}
	got = ZSTD_decompress(out, size, in + 1, len - 1);
	if (ZSTD_isError(got))
		return LAKE_CODEC_BAD_FRAME;
	if (got != size)
		return LAKE_CODEC_SIZE_MISMATCH;
	*outlen = got;
	return LAKE_CODEC_OK;
}

const char *
lake_codec_status_text(LakeCodecStatus status)
{
	switch (status)
	{
		case LAKE_CODEC_OK:
			return "ok";
		case LAKE_CODEC_EMPTY:
			return "empty chunk";
		case LAKE_CODEC_BAD_TAG:
			return "unknown chunk encoding";
		case LAKE_CODEC_BAD_FRAME:
			return "corrupt compressed frame";
		case LAKE_CODEC_TOO_BIG:
			return "chunk decodes larger than its version allows";
		case LAKE_CODEC_SIZE_MISMATCH:
			return "chunk decodes to another size than it declares";
	}
	return "unknown codec status";
}
