/*
 * landing.h — the encodings of the owner log: a sealed cycle's landings
 * and an owner snapshot.
 *
 * Both are stored as one chunk (codec.h: tag, CRC-32C, raw or zstd body),
 * so every read verifies the record's checksum before decoding it here.
 *
 * A cycle record is the concatenation of
 *   'L', version 2, uint32 count, int64 cycle, int32 epoch, then count
 *   landings:
 *   int32 owner_id, int64 position, int64 seq, int64 lap, uint8 flags,
 *   [uint16 len + from_phase, uint16 len + to_phase]   if LANDING_MOVE
 *   [uint32 len + payload]                              if LANDING_PAYLOAD
 *   [uint16 len + operation_id]                         if LANDING_OPERATION
 * all integers little-endian. One record per cycle, not a row per cast.
 *
 * Pure C (no PostgreSQL memory or error machinery): the decoder checks
 * every length against the buffer and can run under a fuzzer as it runs
 * in the server.
 */
#ifndef LAKE_LANDING_H
#define LAKE_LANDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LANDING_MOVE		0x01
#define LANDING_PAYLOAD		0x02
#define LANDING_OPERATION	0x04

typedef struct LakeLanding
{
	int32_t		owner_id;
	int64_t		position;
	int64_t		seq;
	int64_t		lap;			/* the owner's lap after this landing */
	uint8_t		flags;
	const char *from_phase;
	uint16_t	from_len;
	const char *to_phase;
	uint16_t	to_len;
	const uint8_t *payload;
	uint32_t	payload_len;
	const char *operation_id;
	uint16_t	operation_len;
} LakeLanding;

typedef enum LakeLandingStatus
{
	LAKE_LANDING_OK = 0,
	LAKE_LANDING_BAD_HEADER,
	LAKE_LANDING_TRUNCATED,
	LAKE_LANDING_BAD_FLAGS,
	LAKE_LANDING_TRAILING,
	LAKE_LANDING_MISPLACED,		/* the header names another cycle */
	LAKE_LANDING_STOPPED		/* the visitor asked to stop */
} LakeLandingStatus;

/*
 * The cycle a record was sealed as. It is inside the checksummed record so
 * that a reader can tell a row whose key or epoch was altered from the
 * record it holds.
 */
typedef struct LakeCycleId
{
	int64_t		cycle;
	int32_t		epoch;
} LakeCycleId;

#define LAKE_LANDINGS_HEADER 18

/* Bytes one landing takes in a record. */
extern size_t lake_landing_size(const LakeLanding *l);

/* Write the record header for 'count' landings of cycle 'id'; returns its size. */
extern size_t lake_landings_put_header(uint8_t *out, uint32_t count, LakeCycleId id);

/* Write one landing at 'out'; returns the bytes written. */
extern size_t lake_landing_put(uint8_t *out, const LakeLanding *l);

/*
 * Visit each landing of a record in order; a non-zero return stops. A
 * record whose header is not 'expect' (unless NULL) is refused before any
 * landing is visited.
 */
typedef int (*LakeLandingVisitor) (const LakeLanding *l, void *arg);

extern LakeLandingStatus lake_landings_decode(const uint8_t *in, size_t len,
											  const LakeCycleId *expect,
											  LakeLandingVisitor visit, void *arg);

/* The cycle a record's header names; false if it has no valid header. */
extern bool lake_landings_id(const uint8_t *in, size_t len, LakeCycleId *id);

extern const char *lake_landing_status_text(LakeLandingStatus st);

/*
 * An owner snapshot record: 'S', version 2, uint32 count, int64 cycle (the
 * cycle it covers, which recovery replays after), then per owner
 * int32 owner_id, int64 position (its watermark), int64 lap, uint16 len +
 * phase name. Same integer encoding and status codes as landings.
 */
typedef struct LakeOwnerImage
{
	int32_t		owner_id;
	int64_t		position;
	int64_t		lap;
	const char *phase;
	uint16_t	phase_len;
} LakeOwnerImage;

#define LAKE_IMAGES_HEADER 14

extern size_t lake_image_size(const LakeOwnerImage *o);
extern size_t lake_images_put_header(uint8_t *out, uint32_t count, int64_t cycle);
extern size_t lake_image_put(uint8_t *out, const LakeOwnerImage *o);

typedef int (*LakeImageVisitor) (const LakeOwnerImage *o, void *arg);

/* As lake_landings_decode; 'expect' is the cycle the snapshot covers. */
extern LakeLandingStatus lake_images_decode(const uint8_t *in, size_t len,
											const int64_t *expect,
											LakeImageVisitor visit, void *arg);
extern bool lake_images_cycle(const uint8_t *in, size_t len, int64_t *cycle);

#endif							/* LAKE_LANDING_H */
