/*
 * owner_index.c — encode and decode the owner index records (formats in
 * owner_index.h).
 */
#include <string.h>

#include "owner_index.h"

#define VARINT_MAX 10

static size_t
put_varint(uint8_t *out, uint64_t v)
{
	size_t		n = 0;

	while (v >= 0x80)
	{
		out[n++] = (uint8_t) (v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t) v;
	return n;
}

/*
 * Read a varint at *pos, no larger than 'max'; 0 if it does not fit, is
 * larger, or is not in its shortest form (a last byte of 0 after others).
 */
static int
get_varint(const uint8_t *in, size_t len, size_t *pos, uint64_t max,
		   uint64_t *v, LakeIndexStatus *st)
{
	uint64_t	r = 0;

	for (int shift = 0, i = 0; i < VARINT_MAX; i++, shift += 7)
	{
		uint8_t		b;

		if (*pos >= len)
		{
			*st = LAKE_INDEX_TRUNCATED;
			return 0;
		}
		b = in[(*pos)++];
		if (i == VARINT_MAX - 1 && b > 1)
			break;				/* past 64 bits */
		r |= (uint64_t) (b & 0x7f) << shift;
		if (!(b & 0x80))
		{
			if ((b == 0 && i > 0) || r > max)
				break;
			*v = r;
			return 1;
		}
	}
	*st = LAKE_INDEX_BAD_VALUE;
	return 0;
}

const char *
lake_index_status_text(LakeIndexStatus st)
{
	switch (st)
	{
		case LAKE_INDEX_OK:
			return "ok";
		case LAKE_INDEX_BAD_HEADER:
			return "not an owner index record";
		case LAKE_INDEX_TRUNCATED:
			return "owner index record is truncated";
		case LAKE_INDEX_BAD_VALUE:
			return "owner index record has a value out of range";
		case LAKE_INDEX_TRAILING:
			return "owner index record has trailing bytes";
		case LAKE_INDEX_STOPPED:
			return "stopped";
	}
	return "unknown owner index status";
}

int
lake_index_next(const LakeIndexState *before, int64_t cycle, uint32_t nowners,
				LakeIndexState *after)
{
	if (cycle - before->indexed_through >= LAKE_BLOCK_CYCLES ||
		(int64_t) before->tail_owners + nowners >= LAKE_TAIL_OWNERS)
	{
		after->indexed_through = cycle;
		after->tail_owners = 0;
		return 1;
	}
	after->indexed_through = before->indexed_through;
	after->tail_owners = before->tail_owners + (int32_t) nowners;
	return 0;
}

int
lake_index_state_valid(const LakeIndexState *st, int64_t cycle)
{
	return st->indexed_through >= 0 && st->indexed_through <= cycle &&
		cycle - st->indexed_through < LAKE_BLOCK_CYCLES &&
		st->tail_owners >= 0 && st->tail_owners < LAKE_TAIL_OWNERS;
}

size_t
lake_cycle_owners_bound(uint32_t count)
{
	return 2 + VARINT_MAX + 5 + (size_t) count * (5 + VARINT_MAX + 5);
}

size_t
lake_cycle_owners_put(uint8_t *out, int64_t cycle, const LakeCycleOwner *owners,
					  uint32_t count)
{
	size_t		n = 0;

	out[n++] = 'O';
	out[n++] = cycle > 0 ? 2 : 1;
	if (cycle > 0)
		n += put_varint(out + n, (uint64_t) cycle);
	n += put_varint(out + n, count);
	for (uint32_t i = 0; i < count; i++)
	{
		n += put_varint(out + n, (uint32_t) owners[i].owner_id);
		n += put_varint(out + n, (uint64_t) owners[i].first_position);
		n += put_varint(out + n, owners[i].landings);
	}
	return n;
}

LakeIndexStatus
lake_cycle_owners_decode(const uint8_t *in, size_t len, int64_t *cycle,
						 LakeCycleOwnerVisitor visit, void *arg)
{
	LakeIndexStatus st = LAKE_INDEX_OK;
	size_t		pos = 2;
	uint64_t	count;
	uint64_t	c = 0;

	if (len < 2 || in[0] != 'O' || (in[1] != 1 && in[1] != 2))
		return LAKE_INDEX_BAD_HEADER;
	if (in[1] == 2)
	{
		if (!get_varint(in, len, &pos, INT64_MAX, &c, &st))
			return st;
		if (c == 0)
			return LAKE_INDEX_BAD_VALUE;
	}
	*cycle = (int64_t) c;
	if (!get_varint(in, len, &pos, UINT32_MAX, &count, &st))
		return st;
	for (uint64_t i = 0; i < count; i++)
	{
		LakeCycleOwner o;
		uint64_t	id,
					first,
					n;

		if (!get_varint(in, len, &pos, INT32_MAX, &id, &st) ||
			!get_varint(in, len, &pos, INT64_MAX, &first, &st) ||
			!get_varint(in, len, &pos, UINT32_MAX, &n, &st))
			return st;
		if (id == 0 || first == 0 || n == 0 || n - 1 > INT64_MAX - first)
			return LAKE_INDEX_BAD_VALUE;
		o.owner_id = (int32_t) id;
		o.first_position = (int64_t) first;
		o.landings = (uint32_t) n;
		if (visit(&o, arg) != 0)
			return LAKE_INDEX_STOPPED;
	}
	return pos == len ? LAKE_INDEX_OK : LAKE_INDEX_TRAILING;
}

size_t
lake_owner_block_put(uint8_t *out, const LakeOwnerBlock *b)
{
	size_t		n = 0;

	out[n++] = 'B';
	out[n++] = 1;
	n += put_varint(out + n, (uint32_t) b->owner_id);
	n += put_varint(out + n, (uint64_t) b->first_cycle);
	n += put_varint(out + n, (uint64_t) b->first_position);
	n += put_varint(out + n, (uint64_t) (b->last_position - b->first_position));
	for (int i = 0; i < 8; i++)
		out[n++] = (uint8_t) (b->cycles >> (8 * i));
	return n;
}

static int
bits(uint64_t v)
{
	int			n = 0;

	for (; v != 0; v &= v - 1)
		n++;
	return n;
}

LakeIndexStatus
lake_owner_block_decode(const uint8_t *in, size_t len, LakeOwnerBlock *out)
{
	LakeIndexStatus st = LAKE_INDEX_OK;
	size_t		pos = 2;
	uint64_t	id,
				first_cycle,
				first,
				span;

	if (len < 2 || in[0] != 'B' || in[1] != 1)
		return LAKE_INDEX_BAD_HEADER;
	if (!get_varint(in, len, &pos, INT32_MAX, &id, &st) ||
		!get_varint(in, len, &pos, INT64_MAX, &first_cycle, &st) ||
		!get_varint(in, len, &pos, INT64_MAX, &first, &st) ||
		!get_varint(in, len, &pos, INT64_MAX, &span, &st))
		return st;
	if (len - pos < 8)
		return LAKE_INDEX_TRUNCATED;
	out->cycles = 0;
	for (int i = 7; i >= 0; i--)
		out->cycles = (out->cycles << 8) | in[pos + i];
	pos += 8;
	/* Each cycle of the bitmap holds at least one of the positions. */
	if (id == 0 || first_cycle == 0 || first == 0 || span > INT64_MAX - first || out->cycles == 0 ||
		(uint64_t) bits(out->cycles) > span + 1)
		return LAKE_INDEX_BAD_VALUE;
	out->owner_id = (int32_t) id;
	out->first_cycle = (int64_t) first_cycle;
	out->first_position = (int64_t) first;
	out->last_position = (int64_t) (first + span);
	return pos == len ? LAKE_INDEX_OK : LAKE_INDEX_TRAILING;
}
