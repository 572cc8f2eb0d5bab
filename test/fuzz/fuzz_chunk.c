/*
 * fuzz_chunk.c — libFuzzer harness for the stored chunk decoder (codec.c),
 * the format of every payload chunk in lake_data.version.data and lake_data.chunk.
 *
 * Any input must be decoded or refused with a status — the server turns a
 * refusal into LK005 / XX001 — never crash, write past the room it was
 * given or read past the input. A lower-case first byte reads the input as
 * a bare chunk (a version's chunk 0), any other as a checked one. What
 * decodes must re-encode in its form and decode back to the same bytes,
 * growing by at most the header; a checked chunk with any one of its bits
 * flipped must be refused (the checksum covers every stored bit), so must
 * a checked chunk read at another place than it was written for, and
 * neither form is accepted by a reader of the other. A checked chunk holds
 * (lake_chunk_holds) exactly the bytes it decodes to. The corpus is read at
 * LAKE_PLACE_NONE (the place of cycle records and snapshots); re-encoded
 * chunks at a row's place of lake_data.chunk. The size read from a chunk's
 * first LAKE_CHUNK_HEAD_BYTES is the size read from all of it; re-encoded
 * with a trained dictionary, the bytes decode back with it, and a frame
 * that names it is refused without it. One input in 512 also round-trips
 * a chunk of 320 kB built from it (tiled, so it compresses in steps when
 * the tile is short; or random, so the probe stores it raw).
 */
#include <string.h>
#include <zdict.h>
#include <zstd.h>

#include "codec.h"
#include "fuzz.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int	steps;

static void
count_step(void)
{
	steps++;
}

/* A chunk past the encoder's step (256 kB), from 'seed': encoded and read back. */
static void
large_round_trip(ZSTD_CCtx *cctx, ZSTD_DCtx *dctx, const uint8_t *seed, size_t seedlen,
				 bool random, bool bare, uint32_t place)
{
	size_t		len = 320 * 1024;
	uint8_t    *big = malloc(len);
	uint8_t    *enc = malloc(lake_chunk_bound(len));
	uint8_t    *back = malloc(len);
	uint32_t	x = 2463534242u ^ seed[0];
	size_t		enclen;
	size_t		size = 0;
	size_t		got = 0;

	for (size_t i = 0; i < len; i++)
	{
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		big[i] = random ? (uint8_t) x : seed[i % seedlen];
	}
	steps = 0;
	lake_codec_step = count_step;
	enclen = lake_chunk_encode(cctx, 1, big, len, bare, place, enc);
	lake_codec_step = NULL;
	FUZZ_CHECK(enclen <= len + (bare ? LAKE_BARE_HEADER : LAKE_CHUNK_HEADER));
	/*
	 * Random bytes are stored raw, by the probe's word. Tiled ones are
	 * compressed in steps where a tile repeats inside each of the probe's
	 * 4 kB samples (codec.c): a tile of 4 kB or more of incompressible
	 * bytes is judged by samples that do not shrink, and may be stored raw.
	 */
	if (random)
		FUZZ_CHECK(enclen == len + (bare ? LAKE_BARE_HEADER : LAKE_CHUNK_HEADER));
	else if (seedlen <= 2048)
		FUZZ_CHECK(enclen < len && steps >= 1);
	FUZZ_CHECK(lake_chunk_decoded_size(enc, enclen, bare, &size) == LAKE_CODEC_OK && size == len);
	FUZZ_CHECK(lake_chunk_head_decoded_size(enc, LAKE_CHUNK_HEAD_BYTES, enclen, bare,
											&size) == LAKE_CODEC_OK && size == len);
	FUZZ_CHECK(lake_chunk_decode_dict(dctx, NULL, enc, enclen, bare, place, back, len,
									  &got) == LAKE_CODEC_OK);
	FUZZ_CHECK(got == len && memcmp(back, big, len) == 0);
	free(back);
	free(enc);
	free(big);
}

/* A dictionary trained once from small JSON documents, as a dataset's is. */
static ZSTD_CDict *cdict;
static ZSTD_DDict *ddict;
static unsigned dict_id;

static void
train_dictionary(void)
{
	enum
	{
		NSAMPLES = 400
	};
	static char samples[NSAMPLES * 160];
	size_t		sizes[NSAMPLES];
	size_t		at = 0;
	uint8_t		dict[4096];
	size_t		len;

	for (int i = 0; i < NSAMPLES; i++)
	{
		int			n = snprintf(samples + at, 160,
								 "{\"op\":\"op-%d\",\"event\":\"order.updated\",\"order\":%d,"
								 "\"status\":\"shipped\",\"sku\":\"SKU-%d\",\"qty\":%d}",
								 i, i * 7919 % 1000000, i * 31 % 10000, i % 9 + 1);

		sizes[i] = (size_t) n;
		at += (size_t) n;
	}
	len = ZDICT_trainFromBuffer(dict, sizeof(dict), samples, sizes, NSAMPLES);
	FUZZ_CHECK(!ZDICT_isError(len));
	cdict = ZSTD_createCDict(dict, len, 3);
	ddict = ZSTD_createDDict(dict, len);
	dict_id = ZSTD_getDictID_fromDict(dict, len);
	FUZZ_CHECK(cdict != NULL && ddict != NULL && dict_id != 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static ZSTD_CCtx *cctx;
	static ZSTD_DCtx *dctx;		/* kept across inputs, as a backend keeps it */
	size_t		declared = 0;
	size_t		got = 0;
	size_t		again = 0;
	LakeCodecStatus st;
	LakeCodecStatus dst;
	uint8_t    *out;
	uint8_t    *enc;
	uint8_t    *back;
	size_t		enclen;
	bool		bare;
	size_t		header;
	uint32_t	row = lake_chunk_place(7, 1);

	if (cctx == NULL)
		cctx = ZSTD_createCCtx();
	if (dctx == NULL)
		dctx = ZSTD_createDCtx();
	if (cdict == NULL)
		train_dictionary();
	bare = size > 0 && data[0] >= 'a' && data[0] <= 'z';
	header = bare ? LAKE_BARE_HEADER : LAKE_CHUNK_HEADER;

	st = lake_chunk_decoded_size(data, size, bare, &declared);
	/* Its first bytes tell the same size as all of it. */
	if (st == LAKE_CODEC_OK)
	{
		size_t		head_size = 0;

		FUZZ_CHECK(lake_chunk_head_decoded_size(data, size < LAKE_CHUNK_HEAD_BYTES ? size :
												LAKE_CHUNK_HEAD_BYTES, size, bare,
												&head_size) == LAKE_CODEC_OK);
		FUZZ_CHECK(head_size == declared);
	}
	/* The other form's reader refuses it by its tag. */
	if (st == LAKE_CODEC_OK)
		FUZZ_CHECK(lake_chunk_decoded_size(data, size, !bare, &again) == LAKE_CODEC_BAD_TAG);
	if (st == LAKE_CODEC_OK && declared > LAKE_CHUNK_BYTES)
	{
		/* The room a reader gives is what its version declares. */
		uint8_t		small[16];

		FUZZ_CHECK(lake_chunk_decode_dict(NULL, NULL, data, size, bare, LAKE_PLACE_NONE,
										  small, sizeof(small), &got) == LAKE_CODEC_TOO_BIG);
		return 0;
	}

	/* Exactly the declared room: a write past it is a heap overflow. */
	out = malloc(declared > 0 ? declared : 1);
	dst = lake_chunk_decode_dict(dctx, NULL, data, size, bare, LAKE_PLACE_NONE, out,
								 declared, &got);

	/* The in-place view of a raw chunk agrees with its decode. */
	{
		const uint8_t *view;
		size_t		viewlen = 0;
		LakeCodecStatus vst = lake_chunk_view(data, size, bare, LAKE_PLACE_NONE,
											  &view, &viewlen);

		if (st == LAKE_CODEC_OK && (data[0] == LAKE_CODEC_RAW ||
									data[0] == LAKE_CODEC_RAW + LAKE_CODEC_BARE))
		{
			FUZZ_CHECK(vst == dst);
			if (vst == LAKE_CODEC_OK)
				FUZZ_CHECK(view != NULL && viewlen == got &&
						   memcmp(view, out, got) == 0);
		}
		else
			FUZZ_CHECK(view == NULL);
	}
	if (st != LAKE_CODEC_OK)
		FUZZ_CHECK(dst == st);
	if (dst != LAKE_CODEC_OK)
	{
		FUZZ_CHECK(lake_codec_status_text(dst) != NULL);
		free(out);
		return 0;
	}
	FUZZ_CHECK(got == declared);
	FUZZ_CHECK(lake_chunk_is_bare(data, size) == bare);
	if (data[0] == LAKE_CODEC_RAW || data[0] == LAKE_CODEC_RAW + LAKE_CODEC_BARE)
		FUZZ_CHECK(memcmp(out, data + header, got) == 0);

	/*
	 * What a checked chunk decodes to, it holds (a replay's check without
	 * decoding); one flipped byte of those bytes, or one byte more, it
	 * does not. A bare chunk holds nothing: it has no checksum to tell.
	 */
	if (bare)
		FUZZ_CHECK(lake_chunk_holds(data, size, LAKE_PLACE_NONE, out, got) == LAKE_CODEC_BAD_TAG);
	else
	{
		uint8_t    *other = malloc(got + 1);

		FUZZ_CHECK(lake_chunk_holds(data, size, LAKE_PLACE_NONE, out, got) == LAKE_CODEC_OK);
		FUZZ_CHECK(lake_chunk_holds(data, size, row, out, got) == LAKE_CODEC_BAD_CHECKSUM);
		memcpy(other, out, got);
		other[got] = 0;
		FUZZ_CHECK(lake_chunk_holds(data, size, LAKE_PLACE_NONE, other, got + 1) ==
				   LAKE_CODEC_SIZE_MISMATCH);
		if (got > 0)
		{
			other[(size_t) data[size - 1] % got] ^= 0x20;
			FUZZ_CHECK(lake_chunk_holds(data, size, LAKE_PLACE_NONE, other, got) ==
					   LAKE_CODEC_BAD_CHECKSUM);
		}
		free(other);
	}

	/*
	 * One flipped bit, at a place that depends on the input, is damage to a
	 * checked chunk (a bare one's reader verifies the digest instead).
	 */
	if (!bare)
	{
		uint8_t    *bad = malloc(size);
		uint8_t    *scratch = malloc(declared > 0 ? declared : 1);
		size_t		bit = (got * 31 + data[size - 1]) % (size * 8);

		memcpy(bad, data, size);
		bad[bit / 8] ^= (uint8_t) (1 << (bit % 8));
		FUZZ_CHECK(lake_chunk_decode(NULL, bad, size, LAKE_PLACE_NONE, scratch, declared,
									 &again) != LAKE_CODEC_OK);
		/* Its bytes intact, read at another place: refused too. */
		FUZZ_CHECK(lake_chunk_decode(NULL, data, size, row, scratch, declared,
									 &again) == LAKE_CODEC_BAD_CHECKSUM);
		free(scratch);
		free(bad);
	}

	/* One byte less room than declared is refused, never truncated. */
	if (declared > 0)
		FUZZ_CHECK(lake_chunk_decode_dict(NULL, NULL, data, size, bare, LAKE_PLACE_NONE, out,
										  declared - 1, &again) == LAKE_CODEC_TOO_BIG);

	enc = malloc(lake_chunk_bound(got));
	enclen = lake_chunk_encode(cctx, 1, out, got, bare, row, enc);
	FUZZ_CHECK(enclen <= got + header);
	back = malloc(got > 0 ? got : 1);
	FUZZ_CHECK(lake_chunk_decode_dict(NULL, NULL, enc, enclen, bare, row, back, got,
									  &again) == LAKE_CODEC_OK);
	FUZZ_CHECK(again == got && memcmp(back, out, got) == 0);
	if (!bare)
		FUZZ_CHECK(lake_chunk_holds(enc, enclen, row, out, got) == LAKE_CODEC_OK);
	/* A bare chunk has no place; a checked one is bound to its own. */
	FUZZ_CHECK((lake_chunk_decode_dict(NULL, NULL, enc, enclen, bare, LAKE_PLACE_NONE, back,
									   got, &again) == LAKE_CODEC_OK) == bare);

	/*
	 * With the dictionary: decoded back with it; a frame that names it
	 * (not one stored raw) is refused without it.
	 */
	{
		uint8_t    *denc = malloc(lake_chunk_bound(got));
		size_t		denclen = lake_chunk_encode_dict(cctx, cdict, out, got, bare, row, denc);
		uint32_t	named = lake_chunk_dict_id(denc, denclen, bare);

		FUZZ_CHECK(denclen <= got + header);
		FUZZ_CHECK(named == 0 || named == dict_id);
		FUZZ_CHECK(lake_chunk_decode_dict(dctx, ddict, denc, denclen, bare, row, back, got,
										  &again) == LAKE_CODEC_OK);
		FUZZ_CHECK(again == got && memcmp(back, out, got) == 0);
		if (named != 0)
			FUZZ_CHECK(lake_chunk_decode_dict(dctx, NULL, denc, denclen, bare, row, back, got,
											  &again) == LAKE_CODEC_BAD_FRAME);
		free(denc);
	}
	/* Chosen by a hash of the input, which the fuzzer's comparisons cannot steer to. */
	if (got > 0)
	{
		uint32_t	h = 2166136261u;

		for (size_t i = 0; i < size; i++)
			h = (h ^ data[i]) * 16777619u;
		if (h % 512 == 0)
			large_round_trip(cctx, dctx, out, got, (h >> 9) & 1, bare, row);
	}

	free(back);
	free(enc);
	free(out);
	return 0;
}
