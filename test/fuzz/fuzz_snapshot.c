/*
 * fuzz_snapshot.c — libFuzzer harness for an owner snapshot (landing.c
 * inside codec.c), the bytes of lake_data.snapshot.data that recovery decodes.
 *
 * Any input must be decoded or refused with a status (recovery then warns
 * and replays the whole log), never crash or read past the record. The
 * encoding is canonical: what decodes re-encodes to the same bytes. Each
 * input is tried as a stored record and as a snapshot's raw bytes (fuzz_record
 * in fuzz.h).
 */
#include <string.h>

#include "fuzz.h"
#include "landing.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Keep each image visited, in order, in a FuzzBuf. */
static int
keep(const LakeOwnerImage *o, void *arg)
{
	fuzz_touch(o->phase, o->phase_len);
	fuzz_append((FuzzBuf *) arg, o, sizeof(*o));
	return 0;
}

/* The properties of one snapshot's raw bytes. */
static void
check_record(const uint8_t *raw, size_t len)
{
	FuzzBuf		seen = {0};
	FuzzBuf		out = {0};

	if (lake_images_decode(raw, len, NULL, keep, &seen) == LAKE_LANDING_OK)
	{
		const LakeOwnerImage *items = (const LakeOwnerImage *) seen.data;
		size_t		n = seen.len / sizeof(LakeOwnerImage);
		int64_t		cycle;
		int64_t		other;
		FuzzBuf		none = {0};

		FUZZ_CHECK(lake_images_cycle(raw, len, &cycle));
		/* A snapshot read as another cycle's is refused before any visit. */
		other = (int64_t) ((uint64_t) cycle ^ 1u);	/* no overflow at INT64_MAX */
		FUZZ_CHECK(lake_images_decode(raw, len, &other, keep, &none) == LAKE_LANDING_MISPLACED);
		FUZZ_CHECK(none.len == 0);

		out.len = lake_images_put_header(fuzz_reserve(&out, LAKE_IMAGES_HEADER),
										 (uint32_t) n, cycle);
		for (size_t i = 0; i < n; i++)
			out.len += lake_image_put(fuzz_reserve(&out, lake_image_size(&items[i])),
									  &items[i]);
		FUZZ_CHECK(out.len == len && memcmp(out.data, raw, len) == 0);
	}
	free(out.data);
	free(seen.data);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_record(data, size, check_record);
	return 0;
}
