/*
 * codec.h — the stored chunk format.
 *
 * A stored chunk is one tag byte followed by its body:
 *   'r' raw:  the body is the chunk's bytes as they are;
 *   'z' zstd: the body is one zstd frame that records its content size.
 * The encoder stores raw whenever compression would not make the chunk
 * smaller, so incompressible data grows by exactly one byte per chunk.
 *
 * These functions are pure (no PostgreSQL memory or error machinery) so the
 * decoder can be fuzzed on its own; callers turn the status into LK005.
 */
#ifndef LAKE_CODEC_H
#define LAKE_CODEC_H

#include <stddef.h>
#include <stdint.h>

/* Payloads are split into chunks of this many bytes before encoding. */
#define LAKE_CHUNK_BYTES (1024 * 1024)

#define LAKE_CODEC_RAW	'r'
#define LAKE_CODEC_ZSTD 'z'

typedef enum LakeCodecStatus
{
	LAKE_CODEC_OK = 0,
	LAKE_CODEC_EMPTY,			/* no tag byte */
	LAKE_CODEC_BAD_TAG,			/* unknown tag */
	LAKE_CODEC_BAD_FRAME,		/* zstd frame unreadable or size unknown */
	LAKE_CODEC_TOO_BIG,			/* decoded size exceeds what the caller allows */
	LAKE_CODEC_SIZE_MISMATCH	/* frame decoded to another size than declared */
} LakeCodecStatus;

/* Worst-case encoded size of 'len' input bytes. */
extern size_t lake_chunk_bound(size_t len);

/*
 * Encode 'len' bytes at 'in' into 'out' (capacity lake_chunk_bound(len))
 * with a reusable zstd context; returns the encoded length.
 */
struct ZSTD_CCtx_s;
extern size_t lake_chunk_encode(struct ZSTD_CCtx_s *cctx, int level,
								const uint8_t *in, size_t len, uint8_t *out);

/* The decoded size of a stored chunk, without decoding it. */
extern LakeCodecStatus lake_chunk_decoded_size(const uint8_t *in, size_t len,
											   size_t *size);

/*
 * Decode a stored chunk into 'out', which has room for 'cap' bytes;
 * '*outlen' receives the decoded length.
 */
extern LakeCodecStatus lake_chunk_decode(const uint8_t *in, size_t len,
										 uint8_t *out, size_t cap, size_t *outlen);

extern const char *lake_codec_status_text(LakeCodecStatus status);

#endif							/* LAKE_CODEC_H */
