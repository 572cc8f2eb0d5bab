/*
 * codec.c — encode and decode stored chunks (format in codec.h).
 *
 * Pure C on top of zstd and PostgreSQL's CRC-32C: no palloc, no ereport,
 * no global state but the caller's step hook (zstd contexts are the
 * caller's to keep), so the decoder can run under a fuzzer exactly as the
 * server runs it.
 */
#include "c.h"

/* ZSTD_f_zstd1_magicless: set through the stable setParameter calls. */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>

#include "codec.h"
#include "port/pg_crc32c.h"

/*
 * The checksum of a chunk: over its body and, for a zstd chunk, the raw
 * bytes the body decodes to as well, so that neither a decoder slip nor a
 * flipped bit the frame format would ignore goes unnoticed.
 */
static uint32_t
checksum(uint32_t place, const uint8_t *body, size_t bodylen,
		 const uint8_t *decoded, size_t decodedlen)
{
	pg_crc32c	crc = place;

	COMP_CRC32C(crc, body, bodylen);
	if (decoded != NULL)
		COMP_CRC32C(crc, decoded, decodedlen);
	FIN_CRC32C(crc);
	return crc;
}

uint32_t
lake_chunk_place(int64_t blob, int32_t chunk_no)
{
	uint8_t		key[12];
	pg_crc32c	crc;

	/* Little-endian, as the stored checksum: the same on every machine. */
	for (int i = 0; i < 8; i++)
		key[i] = (uint8_t) ((uint64_t) blob >> (8 * i));
	for (int i = 0; i < 4; i++)
		key[8 + i] = (uint8_t) ((uint32_t) chunk_no >> (8 * i));
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, key, sizeof(key));
	return crc;
}

/* Tag, then the checksum unless the chunk is bare; returns the header's length. */
static size_t
put_header(uint8_t *out, uint8_t tag, bool bare, uint32_t crc)
{
	out[0] = bare ? tag + LAKE_CODEC_BARE : tag;
	if (bare)
		return LAKE_BARE_HEADER;
	for (int i = 0; i < 4; i++)
		out[1 + i] = (uint8_t) (crc >> (8 * i));
	return LAKE_CHUNK_HEADER;
}

/*
 * The encoding of a stored chunk of the form the reader expects (checked or
 * bare), and its header's length; 0 for a tag of the other form or none: a
 * flipped tag bit never turns a checked chunk into one read unverified.
 */
static uint8_t
tag_of(const uint8_t *in, size_t len, bool bare, size_t *header)
{
	uint8_t		form = bare ? LAKE_CODEC_BARE : 0;

	if (len == 0 || (in[0] != LAKE_CODEC_RAW + form && in[0] != LAKE_CODEC_ZSTD + form))
		return 0;
	*header = bare ? LAKE_BARE_HEADER : LAKE_CHUNK_HEADER;
	return in[0] - form;
}

static uint32_t
get_checksum(const uint8_t *in)
{
	return (uint32_t) in[1] | ((uint32_t) in[2] << 8) |
		((uint32_t) in[3] << 16) | ((uint32_t) in[4] << 24);
}

size_t
lake_chunk_bound(size_t len)
{
	return LAKE_CHUNK_HEADER + ZSTD_compressBound(len);
}

/*
 * Whether a chunk is worth compressing, judged on samples: LAKE_PROBE_SLICES
 * slices of LAKE_PROBE_SLICE bytes spread over it, each compressed on its
 * own at the fastest level. Incompressible data (already compressed, or
 * encrypted) then costs one small compression instead of a whole one that
 * is thrown away. A chunk whose samples do not shrink by a sixteenth is
 * stored raw; that is a valid encoding whatever the rest of the chunk holds.
 */
#define LAKE_PROBE_SLICE 4096
#define LAKE_PROBE_SLICES 4

static bool
worth_compressing(ZSTD_CCtx *cctx, const uint8_t *in, size_t len)
{
	uint8_t		scratch[ZSTD_COMPRESSBOUND(LAKE_PROBE_SLICE)];
	size_t		sampled = 0;
	size_t		packed = 0;

	if (len < LAKE_PROBE_SLICE * LAKE_PROBE_SLICES * 4)
		return true;			/* small: just compress it */
	for (int i = 0; i < LAKE_PROBE_SLICES; i++)
	{
		size_t		at = (len - LAKE_PROBE_SLICE) / (LAKE_PROBE_SLICES - 1) * i;
		size_t		z = ZSTD_compressCCtx(cctx, scratch, sizeof(scratch),
										  in + at, LAKE_PROBE_SLICE, 1);

		if (ZSTD_isError(z))
			return true;
		sampled += LAKE_PROBE_SLICE;
		packed += z;
	}
	return packed < sampled - sampled / 16;
}

void		(*lake_codec_step) (void) = NULL;

/*
 * Input beyond this is compressed in steps of it, lake_codec_step called
 * between them: a client's staged chunk may be up to lake.max_stream_bytes,
 * which takes zstd's slowest level a minute.
 */
#define LAKE_CODEC_STEP (256 * 1024)

/* Compress what is left of 'in' into 'out' step by step; as ZSTD_compress2. */
static size_t
compress_in_steps(ZSTD_CCtx *cctx, ZSTD_outBuffer *out, ZSTD_inBuffer *in, size_t len)
{
	while (in->size < len)
	{
		ZSTD_EndDirective mode;
		size_t		r;

		in->size = len - in->size > LAKE_CODEC_STEP ? in->size + LAKE_CODEC_STEP : len;
		mode = in->size == len ? ZSTD_e_end : ZSTD_e_continue;
		do
		{
			r = ZSTD_compressStream2(cctx, out, in, mode);
			if (ZSTD_isError(r))
				return r;
			/* Full, yet more to write: the frame would not be smaller. */
			if (out->pos == out->size && (r != 0 || in->pos < in->size))
				return (size_t) -ZSTD_error_dstSize_tooSmall;
		} while (mode == ZSTD_e_end ? r != 0 : in->pos < in->size);
		if (mode != ZSTD_e_end && lake_codec_step != NULL)
			lake_codec_step();
	}
	return out->pos;
}

/*
 * One zstd frame without its magic number (the tag says what follows):
 * four bytes fewer in every stored chunk. The rest of the header is what
 * the decoder needs: the content size, and a dictionary's id when one was
 * used; no frame checksum (the chunk's own covers the raw bytes).
 */
static size_t
compress_frame(ZSTD_CCtx *cctx, int level, const ZSTD_CDict *cdict,
			   uint8_t *out, size_t cap, const uint8_t *in, size_t len)
{
	size_t		r = ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);

	if (!ZSTD_isError(r))
		r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_format, ZSTD_f_zstd1_magicless);
	if (!ZSTD_isError(r))
		r = cdict != NULL ? ZSTD_CCtx_refCDict(cctx, cdict) :
			ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
	if (ZSTD_isError(r) || len <= LAKE_CODEC_STEP)
		return ZSTD_isError(r) ? r : ZSTD_compress2(cctx, out, cap, in, len);
	/* The content size goes in the frame header, as ZSTD_compress2 puts it. */
	r = ZSTD_CCtx_setPledgedSrcSize(cctx, len);
	if (!ZSTD_isError(r))
	{
		ZSTD_outBuffer ob = {out, cap, 0};
		ZSTD_inBuffer ib = {in, 0, 0};

		r = compress_in_steps(cctx, &ob, &ib, len);
	}
	return r;
}

/* A stored frame's header, or false if it is not one. */
static bool
frame_header(const uint8_t *frame, size_t len, ZSTD_frameHeader *zfh)
{
	return ZSTD_getFrameHeader_advanced(zfh, frame, len, ZSTD_f_zstd1_magicless) == 0 &&
		zfh->frameType == ZSTD_frame;
}

/*
 * Encode with a context and either a level or a prepared dictionary: the
 * probe for incompressible data, then zstd, or raw when it does not help.
 */
static size_t
encode(ZSTD_CCtx *cctx, int level, const ZSTD_CDict *cdict, const uint8_t *in,
	   size_t len, bool bare, uint32_t place, uint8_t *out)
{
	size_t		header = bare ? LAKE_BARE_HEADER : LAKE_CHUNK_HEADER;
	uint8_t    *body = out + header;
	size_t		zlen = 0;

	if (len > 0 && worth_compressing(cctx, in, len))
		zlen = compress_frame(cctx, level, cdict, body, ZSTD_compressBound(len), in, len);
	else
		zlen = len;				/* stored raw below */
	if (len > 0 && !ZSTD_isError(zlen) && zlen < len)
		return put_header(out, LAKE_CODEC_ZSTD, bare,
						  bare ? 0 : checksum(place, body, zlen, in, len)) + zlen;
	return lake_chunk_encode_raw(in, len, bare, place, out);
}

size_t
lake_chunk_encode_raw(const uint8_t *in, size_t len, bool bare, uint32_t place,
					  uint8_t *out)
{
	size_t		header = put_header(out, LAKE_CODEC_RAW, bare,
									bare ? 0 : checksum(place, in, len, NULL, 0));

	if (len > 0)
		memcpy(out + header, in, len);
	return header + len;
}

size_t
lake_chunk_encode(ZSTD_CCtx *cctx, int level, const uint8_t *in, size_t len,
				  bool bare, uint32_t place, uint8_t *out)
{
	return encode(cctx, level, NULL, in, len, bare, place, out);
}

size_t
lake_chunk_encode_dict(ZSTD_CCtx *cctx, const ZSTD_CDict *cdict,
					   const uint8_t *in, size_t len, bool bare, uint32_t place,
					   uint8_t *out)
{
	return encode(cctx, 0, cdict, in, len, bare, place, out);
}

uint32_t
lake_chunk_dict_id(const uint8_t *in, size_t len, bool bare)
{
	ZSTD_frameHeader zfh;
	size_t		header = 0;

	if (tag_of(in, len, bare, &header) != LAKE_CODEC_ZSTD || len <= header ||
		!frame_header(in + header, len - header, &zfh))
		return 0;
	return zfh.dictID;
}

/* The decoded size from the first 'avail' of a stored chunk's 'len' bytes. */
static LakeCodecStatus
decoded_size(const uint8_t *in, size_t avail, size_t len, bool bare, size_t *size)
{
	ZSTD_frameHeader zfh;
	size_t		header = 0;
	uint8_t		tag = tag_of(in, avail, bare, &header);

	if (len > 0 && tag == 0)
		return LAKE_CODEC_BAD_TAG;
	if (avail < (bare ? LAKE_BARE_HEADER : LAKE_CHUNK_HEADER))
		return LAKE_CODEC_SHORT;
	if (tag == LAKE_CODEC_RAW)
	{
		*size = len - header;
		return LAKE_CODEC_OK;
	}
	if (!frame_header(in + header, avail - header, &zfh) ||
		zfh.frameContentSize == ZSTD_CONTENTSIZE_UNKNOWN)
		return LAKE_CODEC_BAD_FRAME;
	if (zfh.frameContentSize > (unsigned long long) SIZE_MAX)
		return LAKE_CODEC_TOO_BIG;
	*size = (size_t) zfh.frameContentSize;
	return LAKE_CODEC_OK;
}

LakeCodecStatus
lake_chunk_decoded_size(const uint8_t *in, size_t len, bool bare, size_t *size)
{
	return decoded_size(in, len, len, bare, size);
}

LakeCodecStatus
lake_chunk_head_decoded_size(const uint8_t *head, size_t headlen, size_t len,
							 bool bare, size_t *size)
{
	return decoded_size(head, Min(headlen, len), len, bare, size);
}

LakeCodecStatus
lake_chunk_decode(ZSTD_DCtx *dctx, const uint8_t *in, size_t len, uint32_t place,
				  uint8_t *out, size_t cap, size_t *outlen)
{
	return lake_chunk_decode_dict(dctx, NULL, in, len, false, place, out, cap, outlen);
}

LakeCodecStatus
lake_chunk_decode_dict(ZSTD_DCtx *dctx, const ZSTD_DDict *ddict,
					   const uint8_t *in, size_t len, bool bare, uint32_t place,
					   uint8_t *out, size_t cap, size_t *outlen)
{
	size_t		size;
	size_t		got = 0;
	size_t		header = 0;
	LakeCodecStatus st = lake_chunk_decoded_size(in, len, bare, &size);

	if (st != LAKE_CODEC_OK)
		return st;
	if (size > cap)
		return LAKE_CODEC_TOO_BIG;
	if (tag_of(in, len, bare, &header) == LAKE_CODEC_RAW)
	{
		const uint8_t *view;

		st = lake_chunk_view(in, len, bare, place, &view, &got);
		if (st == LAKE_CODEC_OK && got > 0)
			memcpy(out, view, got);
		if (st == LAKE_CODEC_OK)
			*outlen = got;
		return st;
	}
	else
	{
		const uint8_t *frame = in + header;
		size_t		framelen = len - header;
		ZSTD_DCtx  *own = dctx == NULL ? ZSTD_createDCtx() : NULL;

		if (own != NULL)
			dctx = own;
		if (dctx == NULL)
			return LAKE_CODEC_BAD_FRAME;	/* no memory for a context */
		got = ZSTD_DCtx_setParameter(dctx, ZSTD_d_format, ZSTD_f_zstd1_magicless);
		if (!ZSTD_isError(got))
			got = ddict != NULL ?
				ZSTD_decompress_usingDDict(dctx, out, size, frame, framelen, ddict) :
				ZSTD_decompressDCtx(dctx, out, size, frame, framelen);
		ZSTD_freeDCtx(own);
		if (ZSTD_isError(got))
			return LAKE_CODEC_BAD_FRAME;
		if (got != size)
			return LAKE_CODEC_SIZE_MISMATCH;
	}
	if (!bare && checksum(place, in + header, len - header, out, got) != get_checksum(in))
		return LAKE_CODEC_BAD_CHECKSUM;
	*outlen = got;
	return LAKE_CODEC_OK;
}

LakeCodecStatus
lake_chunk_view(const uint8_t *in, size_t len, bool bare, uint32_t place,
				const uint8_t **view, size_t *viewlen)
{
	size_t		size;
	size_t		header = 0;
	LakeCodecStatus st = lake_chunk_decoded_size(in, len, bare, &size);

	*view = NULL;
	if (st != LAKE_CODEC_OK || tag_of(in, len, bare, &header) != LAKE_CODEC_RAW)
		return st;
	if (!bare && checksum(place, in + header, size, NULL, 0) != get_checksum(in))
		return LAKE_CODEC_BAD_CHECKSUM;
	*view = in + header;
	*viewlen = size;
	return LAKE_CODEC_OK;
}

bool
lake_chunk_is_bare(const uint8_t *in, size_t len)
{
	return len > 0 && (in[0] == LAKE_CODEC_RAW + LAKE_CODEC_BARE ||
					   in[0] == LAKE_CODEC_ZSTD + LAKE_CODEC_BARE);
}

LakeCodecStatus
lake_chunk_holds(const uint8_t *in, size_t len, uint32_t place,
				 const uint8_t *expect, size_t expectlen)
{
	size_t		size;
	size_t		header = 0;
	LakeCodecStatus st = lake_chunk_decoded_size(in, len, false, &size);
	bool		raw;

	if (st != LAKE_CODEC_OK)
		return st;
	if (size != expectlen)
		return LAKE_CODEC_SIZE_MISMATCH;
	raw = tag_of(in, len, false, &header) == LAKE_CODEC_RAW;
	if (raw && size > 0 && memcmp(in + header, expect, size) != 0)
		return LAKE_CODEC_BAD_CHECKSUM;
	if (checksum(place, in + header, len - header, raw ? NULL : expect, expectlen) !=
		get_checksum(in))
		return LAKE_CODEC_BAD_CHECKSUM;
	return LAKE_CODEC_OK;
}

const char *
lake_codec_status_text(LakeCodecStatus status)
{
	switch (status)
	{
		case LAKE_CODEC_OK:
			return "ok";
		case LAKE_CODEC_SHORT:
			return "chunk is shorter than its header";
		case LAKE_CODEC_BAD_TAG:
			return "unknown chunk encoding";
		case LAKE_CODEC_BAD_FRAME:
			return "corrupt compressed frame";
		case LAKE_CODEC_TOO_BIG:
			return "chunk decodes larger than its version allows";
		case LAKE_CODEC_SIZE_MISMATCH:
			return "chunk decodes to another size than it declares";
		case LAKE_CODEC_BAD_CHECKSUM:
			return "chunk does not match its checksum";
	}
	return "unknown codec status";
}
