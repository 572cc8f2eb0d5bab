/*
 * guc.h — lake's configuration parameters (SPEC §2).
 *
 * The stream/buffer byte pair is read by backends through admission.h's
 * effective limits, never from these raw variables: a reload with an
 * inconsistent pair must leave the previous valid pair in force.
 */
#ifndef LAKE_GUC_H
#define LAKE_GUC_H

extern char *lake_database;
extern int	lake_max_concurrent_appends;
extern int	lake_admission_queue_wait_ms;
extern int	lake_max_stream_bytes;
extern int	lake_max_buffered_bytes;
extern int	lake_compression_level;
extern int	lake_stage_ttl_s;
extern int	lake_max_owners;
extern int	lake_cycle_interval_ms;
extern int	lake_cycle_max_casts;
extern int	lake_cycle_buffer_size;
extern int	lake_checkpoint_cycles;
extern int	lake_role_max_appends;
extern int	lake_role_max_open_stages;
extern int	lake_role_max_stage_chunks;
extern int	lake_role_max_pending_cast_bytes;
extern int	lake_role_max_hold_ms;
extern int	lake_partitions;
extern int	lake_partition;

extern void lake_guc_init(void);
extern bool lake_guc_byte_pair_valid(void);

/*
 * 55000 unless this session's database is lake.database: the worker
 * serves that one only, and a copy of it (CREATE DATABASE ... TEMPLATE)
 * holds the same OIDs, so nothing else would tell them apart.
 */
extern void lake_require_served_database(void);
/* The same question without the error (true when lake is not preloaded). */
extern bool lake_serves_this_database(void);

/* The n-th handle (stage id) of this partition: n * partitions + partition. */
extern int64 lake_partition_handle(int64 n);
/* 55000 unless this partition owns the name (hashtext) or the handle. */
extern void lake_require_partition_name(const char *what, const char *name);
extern void lake_require_partition_handle(const char *what, int64 handle);

#endif							/* LAKE_GUC_H */
