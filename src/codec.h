/*
 * codec.h — the stored chunk format.
 *
 * A stored chunk is one tag byte, a checksum as a little-endian uint32,
 * then its body:
 *   'R' raw:  the body is the raw bytes as they are;
 *   'Z' zstd: the body is one zstd frame without its magic number
 *             (ZSTD_f_zstd1_magicless: four bytes fewer per chunk, the
 *             tag already says what follows) that records its content
 *             size and carries no frame checksum;
 *             a frame compressed with a dataset's trained dictionary
 *             carries that dictionary's id in its header (store_dict.h),
 *             and decodes only with it.
 * The checksum is the CRC-32C (port/pg_crc32c.h) of the chunk's place,
 * then the body followed, for 'Z', by the raw bytes it decodes to: it
 * covers the raw bytes whatever the encoding, and every stored bit (a
 * flipped bit that zstd would ignore is still damage). The place is where
 * a row of lake_data.chunk is stored, its blob id and chunk number
 * (lake_chunk_place): a chunk row whose key was altered, its bytes intact,
 * fails its checksum instead of being read as another stage's chunk or in
 * another order. Records with a place of no such kind (cycle records,
 * owner lists, snapshots) take LAKE_PLACE_NONE, which folds nothing in.
 * The encoder stores raw whenever compression would not make the chunk
 * smaller, or when samples of a large chunk do not compress (codec.c), so
 * incompressible data grows by exactly five bytes per chunk.
 * Every decode verifies the checksum over the bytes it hands out: damage
 * anywhere in a stored record is refused, never read as other bytes. The
 * checksum-less tags of earlier builds ('r', 'z') are refused as unknown,
 * and frames with a magic number as corrupt: nothing was released with
 * them.
 *
 * A bare chunk ('r', 'z': the tag's lower case) is the same without the
 * checksum: one tag byte, then the body. Earlier builds stored a version's
 * chunk 0 in its row so, to save four bytes of WAL per append, since every
 * read verifies that chunk against the version's SHA-256 digest anyway.
 * It is stored checked now (at LAKE_PLACE_NONE), because a replay, which
 * holds the payload the chunk must hold, then verifies it by its checksum
 * (lake_chunk_holds) instead of decoding a zstd frame. A row's chunk 0 is
 * read in the form its tag names, either (the digest verifies both);
 * every other reader names the form it expects and refuses the other, so
 * a flipped tag bit never turns a checked chunk into one read unverified.
 *
 * Payload chunks are stored so, and so is every cycle record and owner
 * snapshot (landing.h) as one chunk.
 *
 * These functions are pure (no PostgreSQL memory or error machinery, only
 * its CRC-32C from libpgport) so the decoder can be fuzzed on its own;
 * callers turn the status into LK005 / XX001.
 */
#ifndef LAKE_CODEC_H
#define LAKE_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Payloads are split into chunks of this many bytes before encoding. */
#define LAKE_CHUNK_BYTES (1024 * 1024)

#define LAKE_CODEC_RAW	'R'
#define LAKE_CODEC_ZSTD 'Z'
/* Added to a tag for the bare form ('r', 'z'). */
#define LAKE_CODEC_BARE ('a' - 'A')
/* Tag and checksum; a bare chunk's tag alone. */
#define LAKE_CHUNK_HEADER 5
#define LAKE_BARE_HEADER 1

typedef enum LakeCodecStatus
{
	LAKE_CODEC_OK = 0,
	LAKE_CODEC_SHORT,			/* shorter than the tag and checksum */
	LAKE_CODEC_BAD_TAG,			/* unknown tag */
	LAKE_CODEC_BAD_FRAME,		/* zstd frame unreadable or size unknown */
	LAKE_CODEC_TOO_BIG,			/* decoded size exceeds what the caller allows */
	LAKE_CODEC_SIZE_MISMATCH,	/* frame decoded to another size than declared */
	LAKE_CODEC_BAD_CHECKSUM		/* the raw bytes do not match the checksum */
} LakeCodecStatus;

/* The place of chunk 'chunk_no' of blob 'blob'; no place at all. */
extern uint32_t lake_chunk_place(int64_t blob, int32_t chunk_no);
#define LAKE_PLACE_NONE 0xFFFFFFFFu

/*
 * Called, when set, between the steps in which a large chunk is
 * compressed (codec.c): the place for the caller's interrupt check, which
 * may leave by an error (the next encode starts its context afresh).
 */
extern void (*lake_codec_step) (void);

/* Worst-case encoded size of 'len' input bytes. */
extern size_t lake_chunk_bound(size_t len);

/*
 * Encode 'len' bytes at 'in' into 'out' (capacity lake_chunk_bound(len))
 * with a reusable zstd context, checked (at 'place') or bare; returns the
 * encoded length. Every function below that takes a place ignores it for
 * a bare chunk.
 */
struct ZSTD_CCtx_s;
extern size_t lake_chunk_encode(struct ZSTD_CCtx_s *cctx, int level,
								const uint8_t *in, size_t len, bool bare,
								uint32_t place, uint8_t *out);

/*
 * The same with a prepared zstd dictionary (NULL: none, as above), at the
 * level it was prepared for; the frame names the dictionary by its id.
 */
struct ZSTD_CDict_s;
extern size_t lake_chunk_encode_dict(struct ZSTD_CCtx_s *cctx,
									 const struct ZSTD_CDict_s *cdict,
									 const uint8_t *in, size_t len, bool bare,
									 uint32_t place, uint8_t *out);

/*
 * Store 'len' bytes raw, with their checksum, into 'out' (room for
 * LAKE_CHUNK_HEADER + len): for small records that would not compress.
 */
extern size_t lake_chunk_encode_raw(const uint8_t *in, size_t len, bool bare,
									uint32_t place, uint8_t *out);

/*
 * The reading functions below take the form the caller expects ('bare')
 * and refuse a chunk of the other form as LAKE_CODEC_BAD_TAG.
 */

/* The id of the dictionary a stored chunk needs, 0 for none. */
extern uint32_t lake_chunk_dict_id(const uint8_t *in, size_t len, bool bare);

/* The decoded size of a stored chunk, without decoding or verifying it. */
extern LakeCodecStatus lake_chunk_decoded_size(const uint8_t *in, size_t len,
											   bool bare, size_t *size);

/*
 * The same from the chunk's first bytes alone ('head': at least
 * LAKE_CHUNK_HEAD_BYTES of them, or all) and its whole stored length: a
 * large stored chunk need not be read to learn its size.
 */
#define LAKE_CHUNK_HEAD_BYTES 32
extern LakeCodecStatus lake_chunk_head_decoded_size(const uint8_t *head, size_t headlen,
													size_t len, bool bare, size_t *size);

/*
 * Decode a checked chunk into 'out', which has room for 'cap' bytes, and
 * verify its checksum, with a reusable zstd context (NULL: a fresh one,
 * which costs an allocation of a few hundred kB per call); '*outlen' receives the decoded length. On any
 * status but LAKE_CODEC_OK the bytes in 'out' mean nothing.
 */
struct ZSTD_DCtx_s;
extern LakeCodecStatus lake_chunk_decode(struct ZSTD_DCtx_s *dctx,
										 const uint8_t *in, size_t len,
										 uint32_t place, uint8_t *out,
										 size_t cap, size_t *outlen);

/*
 * The same, of either form, with the dictionary the chunk names
 * (lake_chunk_dict_id; NULL: none, as above); dctx is then required. A
 * frame decoded without the dictionary it names, or with another, is
 * LAKE_CODEC_BAD_FRAME. A bare chunk is decoded, not verified.
 */
struct ZSTD_DDict_s;
extern LakeCodecStatus lake_chunk_decode_dict(struct ZSTD_DCtx_s *dctx,
											  const struct ZSTD_DDict_s *ddict,
											  const uint8_t *in, size_t len,
											  bool bare, uint32_t place,
											  uint8_t *out, size_t cap,
											  size_t *outlen);

/*
 * A raw chunk's bytes where they lie, once its checksum (if checked) is
 * verified: *view points into 'in'. For a zstd chunk, *view is NULL
 * (decode it); any other status means the chunk is damaged.
 */
extern LakeCodecStatus lake_chunk_view(const uint8_t *in, size_t len, bool bare,
									   uint32_t place, const uint8_t **view,
									   size_t *viewlen);

/* Whether a stored chunk is of the bare form, by its tag. */
extern bool lake_chunk_is_bare(const uint8_t *in, size_t len);

/*
 * Whether a checked chunk holds exactly the bytes 'expect', told without
 * decoding it: its declared size is theirs and its checksum, computed over
 * its body and them, is the stored one. A chunk intact and holding them
 * passes; any other is refused as damaged (LAKE_CODEC_BAD_CHECKSUM when
 * the bytes are other bytes or the chunk's are altered: the checksum
 * cannot tell which). A replay uses it: the caller's payload is what the
 * version's chunk 0 must hold, and a zstd frame costs microseconds to
 * decode where a checksum costs nanoseconds.
 */
extern LakeCodecStatus lake_chunk_holds(const uint8_t *in, size_t len, uint32_t place,
										const uint8_t *expect, size_t expectlen);

extern const char *lake_codec_status_text(LakeCodecStatus status);

#endif							/* LAKE_CODEC_H */
