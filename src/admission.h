/*
 * admission.h — the lock-free append admission permit (SPEC §3 Admission).
 *
 * A backend holds at most one permit: one concurrency slot plus a byte
 * reservation, taken together or not at all, and released exactly once at
 * transaction end however the transaction ends.
 */
#ifndef LAKE_ADMISSION_H
#define LAKE_ADMISSION_H

extern void admission_shmem_request(void);
extern void admission_shmem_startup(void);
extern void admission_init(void);
extern bool admission_shmem_ready(void);

/*
 * Take or grow this backend's permit to cover 'bytes'; 54000 / 53000.
 * Returns the ms left of the call's wait budget (lake.admission_queue_wait
 * less the time it waited here).
 */
extern long admission_reserve(uint64 bytes);
/* The same when 'budget_ms' is what is left of the call's wait budget. */
extern long admission_reserve_within(uint64 bytes, long budget_ms);

/* Does this backend hold a permit (taken earlier in its transaction)? */
extern bool admission_held(void);
/* The bytes this backend's permit holds (0: none). */
extern uint32 admission_held_bytes(void);
/* Release a permit the current call took and has not used yet. */
extern void admission_give_back(void);
/* Take it again (admission_reserve_within, not counted as admitted again). */
extern long admission_retake_within(uint64 bytes, long budget_ms);

/*
 * lake.admission()'s 'waited' and 'rejected' count an append's other waits
 * too (its dataset's lock): a call counts once in 'waited' however often
 * it waits, and once in 'rejected' when a wait runs out.
 */
extern void admission_count_wait(void);
extern void admission_count_refusal(void);

/* Effective stream limit (the last valid pair). */
extern uint32 admission_max_stream_bytes(void);

/* Worker: validate the reloaded byte pair and publish it, or keep the old. */
extern void admission_publish_limits(void);

#endif							/* LAKE_ADMISSION_H */
