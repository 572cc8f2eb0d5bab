/*
 * landing.c — encode and decode a cycle's landings and owner snapshots
 * (formats in landing.h).
 */
#include <string.h>

#include "landing.h"

#define LANDING_FIXED (4 + 8 + 8 + 8 + 1)

static void
put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t) v;
	p[1] = (uint8_t) (v >> 8);
}

static void
put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t) (v >> (8 * i));
}

static void
put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t) (v >> (8 * i));
}

static uint16_t
get_u16(const uint8_t *p)
{
	return (uint16_t) (p[0] | (p[1] << 8));
}

static uint32_t
get_u32(const uint8_t *p)
{
	uint32_t	v = 0;

	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t
get_u64(const uint8_t *p)
{
	uint64_t	v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

size_t
lake_landing_size(const LakeLanding *l)
{
	size_t		n = LANDING_FIXED;

	if (l->flags & LANDING_MOVE)
		n += 2 + l->from_len + 2 + l->to_len;
	if (l->flags & LANDING_PAYLOAD)
		n += 4 + l->payload_len;
	if (l->flags & LANDING_OPERATION)
		n += 2 + l->operation_len;
	return n;
}

size_t
lake_landings_put_header(uint8_t *out, uint32_t count, LakeCycleId id)
{
	out[0] = 'L';
	out[1] = 2;
	put_u32(out + 2, count);
	put_u64(out + 6, (uint64_t) id.cycle);
	put_u32(out + 14, (uint32_t) id.epoch);
	return LAKE_LANDINGS_HEADER;
}

static uint8_t *
put_bytes16(uint8_t *p, const char *s, uint16_t len)
{
	put_u16(p, len);
	if (len > 0)
		memcpy(p + 2, s, len);
	return p + 2 + len;
}

size_t
lake_landing_put(uint8_t *out, const LakeLanding *l)
{
	uint8_t    *p = out;

	put_u32(p, (uint32_t) l->owner_id);
	put_u64(p + 4, (uint64_t) l->position);
	put_u64(p + 12, (uint64_t) l->seq);
	put_u64(p + 20, (uint64_t) l->lap);
	p[28] = l->flags;
	p += LANDING_FIXED;
	if (l->flags & LANDING_MOVE)
	{
		p = put_bytes16(p, l->from_phase, l->from_len);
		p = put_bytes16(p, l->to_phase, l->to_len);
	}
	if (l->flags & LANDING_PAYLOAD)
	{
		put_u32(p, l->payload_len);
		if (l->payload_len > 0)
			memcpy(p + 4, l->payload, l->payload_len);
		p += 4 + l->payload_len;
	}
	if (l->flags & LANDING_OPERATION)
		p = put_bytes16(p, l->operation_id, l->operation_len);
	return (size_t) (p - out);
}

/* Read a uint16-length string at *pos; 0 if it does not fit. */
static int
get_bytes16(const uint8_t *in, size_t len, size_t *pos, const char **s,
			uint16_t *slen)
{
	if (len - *pos < 2)
		return 0;
	*slen = get_u16(in + *pos);
	*pos += 2;
	if (len - *pos < *slen)
		return 0;
	*s = (const char *) in + *pos;
	*pos += *slen;
	return 1;
}

bool
lake_landings_id(const uint8_t *in, size_t len, LakeCycleId *id)
{
	if (len < LAKE_LANDINGS_HEADER || in[0] != 'L' || in[1] != 2)
		return false;
	id->cycle = (int64_t) get_u64(in + 6);
	id->epoch = (int32_t) get_u32(in + 14);
	return true;
}

LakeLandingStatus
lake_landings_decode(const uint8_t *in, size_t len, const LakeCycleId *expect,
					 LakeLandingVisitor visit, void *arg)
{
	size_t		pos = LAKE_LANDINGS_HEADER;
	uint32_t	count;
	LakeCycleId id;

	if (!lake_landings_id(in, len, &id))
		return LAKE_LANDING_BAD_HEADER;
	if (expect != NULL && (id.cycle != expect->cycle || id.epoch != expect->epoch))
		return LAKE_LANDING_MISPLACED;
	count = get_u32(in + 2);
	for (uint32_t i = 0; i < count; i++)
	{
		LakeLanding l;

		memset(&l, 0, sizeof(l));
		if (len - pos < LANDING_FIXED)
			return LAKE_LANDING_TRUNCATED;
		l.owner_id = (int32_t) get_u32(in + pos);
		l.position = (int64_t) get_u64(in + pos + 4);
		l.seq = (int64_t) get_u64(in + pos + 12);
		l.lap = (int64_t) get_u64(in + pos + 20);
		l.flags = in[pos + 28];
		pos += LANDING_FIXED;
		if (l.flags & ~(LANDING_MOVE | LANDING_PAYLOAD | LANDING_OPERATION))
			return LAKE_LANDING_BAD_FLAGS;
		if ((l.flags & LANDING_MOVE) &&
			(!get_bytes16(in, len, &pos, &l.from_phase, &l.from_len) ||
			 !get_bytes16(in, len, &pos, &l.to_phase, &l.to_len)))
			return LAKE_LANDING_TRUNCATED;
		if (l.flags & LANDING_PAYLOAD)
		{
			if (len - pos < 4)
				return LAKE_LANDING_TRUNCATED;
			l.payload_len = get_u32(in + pos);
			pos += 4;
			if (len - pos < l.payload_len)
				return LAKE_LANDING_TRUNCATED;
			l.payload = in + pos;
			pos += l.payload_len;
		}
		if ((l.flags & LANDING_OPERATION) &&
			!get_bytes16(in, len, &pos, &l.operation_id, &l.operation_len))
			return LAKE_LANDING_TRUNCATED;
		if (visit(&l, arg) != 0)
			return LAKE_LANDING_STOPPED;
	}
	return pos == len ? LAKE_LANDING_OK : LAKE_LANDING_TRAILING;
}

const char *
lake_landing_status_text(LakeLandingStatus st)
{
	switch (st)
	{
		case LAKE_LANDING_OK:
			return "ok";
		case LAKE_LANDING_BAD_HEADER:
			return "not a landing record";
		case LAKE_LANDING_TRUNCATED:
			return "landing record is truncated";
		case LAKE_LANDING_BAD_FLAGS:
			return "landing has unknown flags";
		case LAKE_LANDING_TRAILING:
			return "landing record has trailing bytes";
		case LAKE_LANDING_MISPLACED:
			return "the record was written for another cycle or epoch than its row names";
		case LAKE_LANDING_STOPPED:
			return "stopped";
	}
	return "unknown landing status";
}

#define IMAGE_FIXED (4 + 8 + 8)

size_t
lake_image_size(const LakeOwnerImage *o)
{
	return IMAGE_FIXED + 2 + o->phase_len;
}

size_t
lake_images_put_header(uint8_t *out, uint32_t count, int64_t cycle)
{
	out[0] = 'S';
	out[1] = 2;
	put_u32(out + 2, count);
	put_u64(out + 6, (uint64_t) cycle);
	return LAKE_IMAGES_HEADER;
}

size_t
lake_image_put(uint8_t *out, const LakeOwnerImage *o)
{
	put_u32(out, (uint32_t) o->owner_id);
	put_u64(out + 4, (uint64_t) o->position);
	put_u64(out + 12, (uint64_t) o->lap);
	return (size_t) (put_bytes16(out + IMAGE_FIXED, o->phase, o->phase_len) - out);
}

bool
lake_images_cycle(const uint8_t *in, size_t len, int64_t *cycle)
{
	if (len < LAKE_IMAGES_HEADER || in[0] != 'S' || in[1] != 2)
		return false;
	*cycle = (int64_t) get_u64(in + 6);
	return true;
}

LakeLandingStatus
lake_images_decode(const uint8_t *in, size_t len, const int64_t *expect,
				   LakeImageVisitor visit, void *arg)
{
	size_t		pos = LAKE_IMAGES_HEADER;
	uint32_t	count;
	int64_t		cycle;

	if (!lake_images_cycle(in, len, &cycle))
		return LAKE_LANDING_BAD_HEADER;
	if (expect != NULL && cycle != *expect)
		return LAKE_LANDING_MISPLACED;
	count = get_u32(in + 2);
	for (uint32_t i = 0; i < count; i++)
	{
		LakeOwnerImage o;

		if (len - pos < IMAGE_FIXED)
			return LAKE_LANDING_TRUNCATED;
		o.owner_id = (int32_t) get_u32(in + pos);
		o.position = (int64_t) get_u64(in + pos + 4);
		o.lap = (int64_t) get_u64(in + pos + 12);
		pos += IMAGE_FIXED;
		if (!get_bytes16(in, len, &pos, &o.phase, &o.phase_len))
			return LAKE_LANDING_TRUNCATED;
		if (visit(&o, arg) != 0)
			return LAKE_LANDING_STOPPED;
	}
	return pos == len ? LAKE_LANDING_OK : LAKE_LANDING_TRAILING;
}
