/*
 * fuzz.h — what the libFuzzer harnesses share.
 *
 * A failed FUZZ_CHECK aborts, which libFuzzer reports as a crash with the
 * input that caused it: the harnesses assert properties of the decoders
 * (round trips, status agreement), not only that they return.
 */
#ifndef LAKE_FUZZ_H
#define LAKE_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"

#define FUZZ_CHECK(cond) \
	do { \
		if (!(cond)) \
		{ \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			abort(); \
		} \
	} while (0)

/*
 * Read every byte of a span a decoder handed out, so AddressSanitizer sees
 * any pointer or length that reaches past the input.
 */
static inline void
fuzz_touch(const void *p, size_t len)
{
	const volatile uint8_t *b = (const volatile uint8_t *) p;
	uint8_t		sink = 0;

	for (size_t i = 0; i < len; i++)
		sink ^= b[i];
	(void) sink;
}

/* A growable byte buffer for re-encoding what was decoded. */
typedef struct FuzzBuf
{
	uint8_t    *data;
	size_t		len;
	size_t		cap;
} FuzzBuf;

static inline uint8_t *
fuzz_reserve(FuzzBuf *b, size_t n)
{
	if (b->len + n > b->cap)
	{
		b->cap = (b->len + n) * 2;
		b->data = realloc(b->data, b->cap);
		FUZZ_CHECK(b->data != NULL);
	}
	return b->data + b->len;
}

static inline void
fuzz_append(FuzzBuf *b, const void *p, size_t n)
{
	memcpy(fuzz_reserve(b, n), p, n);
	b->len += n;
}

/*
 * Cycle records and snapshots are stored as one chunk (codec.h) around the
 * record: unwrap it as the server does, into a buffer of exactly the
 * declared size. Returns NULL when the chunk is refused or declares more
 * than a fuzzing run should allocate (the server's bound is MaxAllocSize).
 */
#define FUZZ_MAX_RECORD (16 * 1024 * 1024)

static inline uint8_t *
fuzz_unwrap(const uint8_t *data, size_t size, size_t *len)
{
	size_t		declared;
	uint8_t    *raw;

	if (lake_chunk_decoded_size(data, size, false, &declared) != LAKE_CODEC_OK ||
		declared > FUZZ_MAX_RECORD)
		return NULL;
	raw = malloc(declared > 0 ? declared : 1);
	if (lake_chunk_decode(NULL, data, size, LAKE_PLACE_NONE, raw, declared, len) != LAKE_CODEC_OK)
	{
		free(raw);
		return NULL;
	}
	FUZZ_CHECK(*len == declared);
	return raw;
}

/*
 * Check a record both as stored (unwrapped and checksummed as the server
 * does) and as a record's raw bytes: a mutation almost never keeps the
 * checksum, so the second is how the fuzzer reaches the record format.
 */
static inline void
fuzz_record(const uint8_t *data, size_t size,
			void (*check) (const uint8_t *raw, size_t len))
{
	size_t		len;
	uint8_t    *raw = fuzz_unwrap(data, size, &len);

	if (raw != NULL)
		check(raw, len);
	free(raw);
	check(data, size);
}

#endif							/* LAKE_FUZZ_H */
