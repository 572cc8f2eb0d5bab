/*
 * fuzz_index.c — libFuzzer harness for the owner index records
 * (owner_index.c inside codec.c): a cycle's owner list
 * (lake_data.cycle.owners), which every trajectory through the unindexed
 * tail and recovery's damaged-cycle handling decode, and an owner's block
 * entry (lake_data.owner_block.entry), which every trajectory decodes.
 *
 * Any input must be decoded or refused with a status (XX001 from SQL),
 * never crash. Both encodings are canonical, so a record that decodes must
 * re-encode to the same bytes. Each input is tried as both records, stored
 * and as raw bytes (fuzz_record in fuzz.h).
 */
#include <string.h>

#include "fuzz.h"
#include "owner_index.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct Seen
{
	FuzzBuf		items;			/* the owners visited, in order */
	uint32_t	n;
	uint32_t	stop_after;		/* 0: never stop */
} Seen;

static int
keep(const LakeCycleOwner *o, void *arg)
{
	Seen	   *s = arg;

	FUZZ_CHECK(o->owner_id > 0 && o->first_position > 0 && o->landings > 0);
	FUZZ_CHECK(o->landings - 1 <= INT64_MAX - o->first_position);
	fuzz_append(&s->items, o, sizeof(*o));
	s->n++;
	return s->stop_after != 0 && s->n == s->stop_after;
}

static void
check_owners(const uint8_t *raw, size_t len)
{
	Seen		seen = {0};
	int64_t		cycle = -1;
	LakeIndexStatus st = lake_cycle_owners_decode(raw, len, &cycle, keep, &seen);

	FUZZ_CHECK(lake_index_status_text(st) != NULL);
	if (st == LAKE_INDEX_OK)
	{
		FuzzBuf		out = {0};

		FUZZ_CHECK(cycle >= 0);
		out.len = lake_cycle_owners_put(fuzz_reserve(&out, lake_cycle_owners_bound(seen.n)), cycle,
										(const LakeCycleOwner *) seen.items.data, seen.n);
		FUZZ_CHECK(out.len == len && memcmp(out.data, raw, len) == 0);
		free(out.data);
		if (seen.n > 0)
		{
			Seen		first = {.stop_after = 1};

			FUZZ_CHECK(lake_cycle_owners_decode(raw, len, &cycle, keep, &first) == LAKE_INDEX_STOPPED);
			FUZZ_CHECK(first.n == 1);
			free(first.items.data);
		}
	}
	free(seen.items.data);
}

static void
check_block(const uint8_t *raw, size_t len)
{
	LakeOwnerBlock b;
	LakeIndexStatus st = lake_owner_block_decode(raw, len, &b);

	FUZZ_CHECK(lake_index_status_text(st) != NULL);
	if (st == LAKE_INDEX_OK)
	{
		uint8_t		out[LAKE_OWNER_BLOCK_BOUND];

		FUZZ_CHECK(b.owner_id > 0 && b.first_position > 0 && b.cycles != 0);
		FUZZ_CHECK(b.last_position >= b.first_position);
		FUZZ_CHECK(b.first_cycle > 0);
		/* Each cycle of the bitmap holds at least one of the positions. */
		FUZZ_CHECK((uint64_t) __builtin_popcountll(b.cycles) - 1 <= (uint64_t) (b.last_position - b.first_position));
		FUZZ_CHECK(lake_owner_block_put(out, &b) == len && memcmp(out, raw, len) == 0);
	}
}

static void
check_record(const uint8_t *raw, size_t len)
{
	check_owners(raw, len);
	check_block(raw, len);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_record(data, size, check_record);
	return 0;
}
