/*
 * guc.c — definitions and validation of lake's configuration parameters.
 *
 * Per-parameter bounds (zero, negative, out of range) are enforced by the
 * GUC machinery itself, so a bad value is refused with PostgreSQL's own
 * message before the server serves. The one cross-parameter rule,
 * max_buffered_bytes >= max_stream_bytes, is checked here at start and by
 * the worker at each reload (see admission_publish_limits).
 */
#include "lake.h"

#include <limits.h>

#include "guc.h"
#include "miscadmin.h"
#include "utils/guc.h"

char	   *lake_database = NULL;
int			lake_max_concurrent_appends = 8;
int			lake_admission_queue_wait_ms = 100;
int			lake_max_stream_bytes = 64 * 1024 * 1024;
int			lake_max_buffered_bytes = 256 * 1024 * 1024;
int			lake_compression_level = 3;
int			lake_stage_ttl_s = 3600;
int			lake_max_owners = 100000;
int			lake_cycle_interval_ms = 10;
int			lake_cycle_max_casts = 10000;
int			lake_cycle_buffer_size = 16 * 1024 * 1024;
int			lake_checkpoint_cycles = 1000;
int			lake_role_max_appends = 0;
int			lake_role_max_open_stages = 0;
int			lake_role_max_stage_chunks = 0;

/*
 * Define an integer parameter and, at server start, refuse a configured
 * value that PostgreSQL rejected: for a parameter defined by a preloaded
 * library it only warns and keeps the default, which would silently run
 * lake with a setting nobody chose. Re-applying the configured text raises
 * the GUC's own error, and in the postmaster that stops the start.
 */
static void
define_int(const char *name, const char *desc, const char *detail, int *var,
		   int boot, int min, int max, GucContext context, int flags)
{
	const char *raw = GetConfigOption(name, true, false);
	char	   *configured = raw ? pstrdup(raw) : NULL;

	DefineCustomIntVariable(name, desc, detail, var, boot, min, max, context,
							flags, NULL, NULL, NULL);
	if (configured != NULL && process_shared_preload_libraries_in_progress)
		(void) set_config_option(name, configured, PGC_POSTMASTER, PGC_S_FILE,
								 GUC_ACTION_SET, true, ERROR, false);
}

bool
lake_guc_byte_pair_valid(void)
{
	return lake_max_buffered_bytes >= lake_max_stream_bytes;
}

void
lake_guc_init(void)
{
	DefineCustomStringVariable("lake.database",
							   "Database the lake background worker serves.",
							   NULL,
							   &lake_database,
							   "postgres",
							   PGC_POSTMASTER,
							   0,
							   NULL, NULL, NULL);

	define_int("lake.max_concurrent_appends",
			   "Most appends admitted at once.",
			   NULL,
			   &lake_max_concurrent_appends,
			   8, 1, 65535,
			   PGC_SIGHUP,
			   0);

	define_int("lake.admission_queue_wait",
			   "How long an append waits for admission before it is refused.",
			   NULL,
			   &lake_admission_queue_wait_ms,
			   100, 1, INT_MAX,
			   PGC_SIGHUP,
			   GUC_UNIT_MS);

	define_int("lake.max_stream_bytes",
			   "Largest payload one append stream may carry.",
			   NULL,
			   &lake_max_stream_bytes,
			   64 * 1024 * 1024, 1, INT_MAX,
			   PGC_SIGHUP,
			   GUC_UNIT_BYTE);

	define_int("lake.max_buffered_bytes",
			   "Most payload bytes all admitted appends may reserve together.",
			   "Must be at least lake.max_stream_bytes.",
			   &lake_max_buffered_bytes,
			   256 * 1024 * 1024, 1, INT_MAX,
			   PGC_SIGHUP,
			   GUC_UNIT_BYTE);

	define_int("lake.compression_level",
			   "zstd level used to compress stored payloads.",
			   NULL,
			   &lake_compression_level,
			   3, 1, 19,
			   PGC_USERSET,
			   0);

	define_int("lake.stage_ttl",
			   "Staged appends idle this long are removed by the worker.",
			   NULL,
			   &lake_stage_ttl_s,
			   3600, 1, INT_MAX,
			   PGC_SIGHUP,
			   GUC_UNIT_S);

	define_int("lake.max_owners",
			   "Live owner states kept in shared memory.",
			   NULL,
			   &lake_max_owners,
			   100000, 1, 10000000,
			   PGC_POSTMASTER,
			   0);

	define_int("lake.cycle_interval",
			   "How often the worker seals the open cycle.",
			   NULL,
			   &lake_cycle_interval_ms,
			   10, 1, 3600 * 1000,
			   PGC_SIGHUP,
			   GUC_UNIT_MS);

	define_int("lake.cycle_max_casts",
			   "Seal early when this many casts are pending.",
			   NULL,
			   &lake_cycle_max_casts,
			   10000, 1, 1000000,
			   PGC_SIGHUP,
			   0);

	define_int("lake.cycle_buffer_size",
			   "Shared memory for casts waiting to be sealed.",
			   NULL,
			   &lake_cycle_buffer_size,
			   16 * 1024 * 1024, 64 * 1024, 1024 * 1024 * 1024,
			   PGC_POSTMASTER,
			   GUC_UNIT_BYTE);

	define_int("lake.checkpoint_cycles",
			   "Cycles sealed between two owner snapshots.",
			   NULL,
			   &lake_checkpoint_cycles,
			   1000, 1, INT_MAX,
			   PGC_SIGHUP,
			   0);

	/*
	 * Per-role caps: PGC_SUSET, so only a superuser sets them, typically
	 * with ALTER ROLE ... SET; 0 means no cap beyond the global limits.
	 */
	define_int("lake.role_max_appends",
			   "Most admission permits one role holds at once (0: no cap).",
			   NULL,
			   &lake_role_max_appends,
			   0, 0, 65535,
			   PGC_SUSET,
			   0);

	define_int("lake.role_max_open_stages",
			   "Most open stages one role may have (0: no cap).",
			   NULL,
			   &lake_role_max_open_stages,
			   0, 0, INT_MAX,
			   PGC_SUSET,
			   0);

	define_int("lake.role_max_stage_chunks",
			   "Most chunks a role may upload to one stage (0: no cap).",
			   NULL,
			   &lake_role_max_stage_chunks,
			   0, 0, INT_MAX,
			   PGC_SUSET,
			   0);

	MarkGUCPrefixReserved("lake");

	if (!lake_guc_byte_pair_valid())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lake.max_buffered_bytes (%d) must be at least lake.max_stream_bytes (%d)",
						lake_max_buffered_bytes, lake_max_stream_bytes),
				 errhint("Raise lake.max_buffered_bytes or lower lake.max_stream_bytes.")));
}
