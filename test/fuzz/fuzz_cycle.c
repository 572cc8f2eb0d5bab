/*
 * fuzz_cycle.c — libFuzzer harness for a sealed cycle record (landing.c
 * inside codec.c), the bytes of lake_data.cycle.data that every trajectory, log
 * read and recovery decodes.
 *
 * Any input must be decoded or refused with a status (XX001 from SQL),
 * never crash or hand out a span past the record. The encoding is
 * canonical, so a record that decodes must re-encode to the same bytes.
 * Each input is tried as a stored record and as a record's raw bytes
 * (fuzz_record in fuzz.h).
 */
#include <string.h>

#include "fuzz.h"
#include "landing.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct Seen
{
	FuzzBuf		items;			/* the landings visited, in order */
	size_t		n;
	size_t		stop_after;		/* 0: never stop */
} Seen;

static int
keep(const LakeLanding *l, void *arg)
{
	Seen	   *s = arg;

	/* Fields a flag does not announce stay empty. */
	if (!(l->flags & LANDING_MOVE))
		FUZZ_CHECK(l->from_len == 0 && l->to_len == 0);
	if (!(l->flags & LANDING_PAYLOAD))
		FUZZ_CHECK(l->payload_len == 0);
	if (!(l->flags & LANDING_OPERATION))
		FUZZ_CHECK(l->operation_len == 0);
	fuzz_touch(l->from_phase, l->from_len);
	fuzz_touch(l->to_phase, l->to_len);
	fuzz_touch(l->payload, l->payload_len);
	fuzz_touch(l->operation_id, l->operation_len);

	fuzz_append(&s->items, l, sizeof(*l));
	s->n++;
	return s->stop_after != 0 && s->n == s->stop_after;
}

/* The properties of one record's raw bytes. */
static void
check_record(const uint8_t *raw, size_t len)
{
	Seen		seen = {0};
	LakeLandingStatus st;
	FuzzBuf		out = {0};
	const LakeLanding *items;

	st = lake_landings_decode(raw, len, NULL, keep, &seen);
	FUZZ_CHECK(lake_landing_status_text(st) != NULL);
	items = (const LakeLanding *) seen.items.data;
	if (st == LAKE_LANDING_OK)
	{
		size_t		want = LAKE_LANDINGS_HEADER;
		LakeCycleId id;
		LakeCycleId other;
		Seen		none = {0};

		for (size_t i = 0; i < seen.n; i++)
			want += lake_landing_size(&items[i]);
		FUZZ_CHECK(want == len);
		FUZZ_CHECK(lake_landings_id(raw, len, &id));
		/* A record read as another cycle's is refused before any visit. */
		other = id;
		other.epoch = (int32_t) ((uint32_t) id.epoch ^ 1u);	/* no overflow at INT32_MAX */
		FUZZ_CHECK(lake_landings_decode(raw, len, &other, keep, &none) == LAKE_LANDING_MISPLACED);
		FUZZ_CHECK(none.n == 0);

		out.len = lake_landings_put_header(fuzz_reserve(&out, LAKE_LANDINGS_HEADER),
										   (uint32_t) seen.n, id);
		for (size_t i = 0; i < seen.n; i++)
			out.len += lake_landing_put(fuzz_reserve(&out, lake_landing_size(&items[i])),
										&items[i]);
		FUZZ_CHECK(out.len == len && memcmp(out.data, raw, len) == 0);

		/* A visitor that stops is obeyed at once. */
		if (seen.n > 0)
		{
			Seen		first = {.stop_after = 1};

			FUZZ_CHECK(lake_landings_decode(raw, len, NULL, keep, &first) == LAKE_LANDING_STOPPED);
			FUZZ_CHECK(first.n == 1);
			free(first.items.data);
		}
	}
	free(out.data);
	free(seen.items.data);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_record(data, size, check_record);
	return 0;
}
