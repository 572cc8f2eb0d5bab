/*
 * owner_index.h — the encodings of the owner index: which cycles hold an
 * owner's landings (SPEC §4: a trajectory costs in proportion to the
 * owner's landings).
 *
 * Two records, each stored as one raw chunk (codec.h: tag, CRC-32C, body),
 * so every read verifies its checksum before decoding it here:
 *
 * - A cycle's owner list (lake_data.cycle.owners), written by the seal
 *   beside the compressed landings and readable without them: which owners
 *   have landings in the cycle, from which position, how many.
 *     'O', version 2, varint cycle, varint count, then count entries of
 *     varint owner_id, varint first_position, varint landings
 *   The cycle binds the list to its row, as the landings record is bound:
 *   another cycle's list copied over it is damage, not its owners. Version
 *   1 (no cycle: lists sealed before it was added) is still read, as cycle 0.
 *
 * - An owner's block entry (lake_data.owner_block.entry): cycles are
 *   grouped in blocks of consecutive cycles, at most LAKE_BLOCK_CYCLES of
 *   them, closed sooner once they name LAKE_TAIL_OWNERS owners (counted
 *   once per cycle); the seal of a block's last cycle writes one entry per
 *   owner with landings in the block: its positions there and a bitmap of
 *   the cycles holding them (bit i: the block's first cycle + i).
 *     'B', version 1, varint owner_id, varint first_cycle,
 *     varint first_position, varint (last_position - first_position),
 *     uint64 cycles (little-endian)
 *
 * Varints are LEB128, shortest form only: the encodings are canonical.
 * Pure C (no PostgreSQL memory or error machinery), fuzzed like landing.c.
 */
#ifndef LAKE_OWNER_INDEX_H
#define LAKE_OWNER_INDEX_H

#include <stddef.h>
#include <stdint.h>

/*
 * The cycles after the last closed block are read by every trajectory
 * through their owner lists: a block closes after LAKE_BLOCK_CYCLES cycles
 * (the cycle bitmap of an entry), or sooner once its cycles' owner lists
 * hold LAKE_TAIL_OWNERS entries, so that tail stays small whatever the
 * size of the cycles. Under durable load (a few owners per cycle) a block
 * is 64 cycles: one index row per owner per 64 cycles.
 */
#define LAKE_BLOCK_CYCLES 64
#define LAKE_TAIL_OWNERS 1024

typedef enum LakeIndexStatus
{
	LAKE_INDEX_OK = 0,
	LAKE_INDEX_BAD_HEADER,
	LAKE_INDEX_TRUNCATED,
	LAKE_INDEX_BAD_VALUE,		/* a field out of range, or not canonical */
	LAKE_INDEX_TRAILING,
	LAKE_INDEX_STOPPED			/* the visitor asked to stop */
} LakeIndexStatus;

extern const char *lake_index_status_text(LakeIndexStatus st);

typedef struct LakeCycleOwner
{
	int32_t		owner_id;
	int64_t		first_position;
	uint32_t	landings;
} LakeCycleOwner;

/* Most bytes an owner list of 'count' owners takes. */
extern size_t lake_cycle_owners_bound(uint32_t count);
/* The list of 'cycle' (version 2; 0 writes version 1, for re-encoding only). */
extern size_t lake_cycle_owners_put(uint8_t *out, int64_t cycle,
									const LakeCycleOwner *owners, uint32_t count);

typedef int (*LakeCycleOwnerVisitor) (const LakeCycleOwner *o, void *arg);

/*
 * Where the index stands as of a cycle (lake_data.cycle.indexed_through,
 * .tail_owners): the last cycle of the last closed block, and the owner
 * entries of the cycles after it.
 */
typedef struct LakeIndexState
{
	int64_t		indexed_through;
	int32_t		tail_owners;
} LakeIndexState;

/*
 * The seals' rule: the state as of 'cycle', whose owner list holds
 * 'nowners' entries, given the state as of the cycle before it ('after'
 * may be 'before'). True when the cycle closes a block (then
 * indexed_through is the cycle).
 */
extern int	lake_index_next(const LakeIndexState *before, int64_t cycle, uint32_t nowners,
							LakeIndexState *after);
/* Could a seal have written this state as of 'cycle'? */
extern int	lake_index_state_valid(const LakeIndexState *st, int64_t cycle);

/* Decodes a list into *cycle (0: version 1) and its owners, in order. */
extern LakeIndexStatus lake_cycle_owners_decode(const uint8_t *in, size_t len,
												int64_t *cycle,
												LakeCycleOwnerVisitor visit,
												void *arg);

typedef struct LakeOwnerBlock
{
	int32_t		owner_id;
	int64_t		first_cycle;	/* the block's first cycle */
	int64_t		first_position;
	int64_t		last_position;
	uint64_t	cycles;			/* bit i: first_cycle + i holds landings */
} LakeOwnerBlock;

#define LAKE_OWNER_BLOCK_BOUND (2 + 5 + 10 + 10 + 10 + 8)

extern size_t lake_owner_block_put(uint8_t *out, const LakeOwnerBlock *b);
extern LakeIndexStatus lake_owner_block_decode(const uint8_t *in, size_t len,
											   LakeOwnerBlock *out);

#endif							/* LAKE_OWNER_INDEX_H */
