/*
 * guc.c — definitions and validation of lake's configuration parameters.
 *
 * Per-parameter bounds (zero, negative, out of range) are enforced by the
 * GUC machinery itself, so a bad value is refused with PostgreSQL's own
 * message before the server serves. The one cross-parameter rule,
 * max_buffered_bytes >= max_stream_bytes, is checked here at start and by
 * the worker at each reload (see admission_publish_limits); partition <
 * partitions (both fixed at start) is checked here too.
 */
#include "lake.h"

#include <limits.h>
#include <math.h>

#include "catalog/pg_collation.h"
#include "commands/dbcommands.h"
#include "guc.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"

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
int			lake_role_max_pending_cast_bytes = 0;
int			lake_role_max_hold_ms = 0;
int			lake_partitions = 1;
int			lake_partition = 0;

/*
 * Lake's integer parameters are PostgreSQL "real" parameters underneath.
 * PostgreSQL's integer parser rounds a fraction ("1.5" becomes 2) before
 * any hook can see it, while SPEC §2 says a non-integer is refused; the
 * real parser keeps the fraction (and the same units), so a check hook can
 * refuse any value that is not a whole number of the base unit, wherever
 * it comes from: the configuration file at start and at reload, SET,
 * ALTER SYSTEM, ALTER ROLE/DATABASE ... SET, set_config(). An assign hook
 * keeps the int the rest of lake reads, and a show hook prints that int,
 * so SHOW and pg_settings.setting give the integer in the base unit.
 */
#define INT_PARAM(var) \
	static double var##_value; \
	static void \
	var##_assign(double newval, void *extra) \
	{ \
		var = (int) newval; \
	} \
	static const char * \
	var##_show(void) \
	{ \
		static char buf[16]; \
		snprintf(buf, sizeof(buf), "%d", var); \
		return buf; \
	}

INT_PARAM(lake_max_concurrent_appends)
INT_PARAM(lake_admission_queue_wait_ms)
INT_PARAM(lake_max_stream_bytes)
INT_PARAM(lake_max_buffered_bytes)
INT_PARAM(lake_compression_level)
INT_PARAM(lake_stage_ttl_s)
INT_PARAM(lake_max_owners)
INT_PARAM(lake_cycle_interval_ms)
INT_PARAM(lake_cycle_max_casts)
INT_PARAM(lake_cycle_buffer_size)
INT_PARAM(lake_checkpoint_cycles)
INT_PARAM(lake_role_max_appends)
INT_PARAM(lake_role_max_open_stages)
INT_PARAM(lake_role_max_stage_chunks)
INT_PARAM(lake_role_max_pending_cast_bytes)
INT_PARAM(lake_role_max_hold_ms)
INT_PARAM(lake_partitions)
INT_PARAM(lake_partition)

static bool
check_whole(double *newval, void **extra, GucSource source)
{
	if (*newval == rint(*newval))
		return true;
	GUC_check_errdetail("The value must be a whole number of the parameter's base unit; fractions are refused, not rounded.");
	return false;
}

/*
 * A database name PostgreSQL would cut to NAMEDATALEN - 1 bytes, or none,
 * names no database the worker could ever connect to: refused at start,
 * as every other bad lake value is, rather than a worker failing forever.
 */
static bool
check_database_name(char **newval, void **extra, GucSource source)
{
	if (*newval == NULL || (*newval)[0] == '\0')
	{
		GUC_check_errdetail("It must name the database the lake worker serves.");
		return false;
	}
	if (strlen(*newval) >= NAMEDATALEN)
	{
		GUC_check_errdetail("A database name has at most %d bytes.", NAMEDATALEN - 1);
		return false;
	}
	return true;
}

/* PL/Proxy maps a hash to a partition by masking: a power of two. */
static bool
check_power_of_two(double *newval, void **extra, GucSource source)
{
	int64		n = (int64) *newval;

	if (!check_whole(newval, extra, source))
		return false;
	if ((n & (n - 1)) == 0)
		return true;
	GUC_check_errdetail("The number of partitions must be a power of two (1, 2, 4, 8, ...), as PL/Proxy requires.");
	return false;
}

/*
 * The text configured for 'name' before it is defined, and, once it is, at
 * server start, the refusal of such a text PostgreSQL rejected: for a
 * parameter defined by a preloaded library it only warns and keeps the
 * default, which would silently run lake with a setting nobody chose.
 * Re-applying the configured text raises the GUC's own error, and in the
 * postmaster that stops the start.
 */
static char *
configured_text(const char *name)
{
	const char *raw = GetConfigOption(name, true, false);

	return raw ? pstrdup(raw) : NULL;
}

static void
refuse_rejected(const char *name, char *configured)
{
	if (configured != NULL && process_shared_preload_libraries_in_progress)
		(void) set_config_option(name, configured, PGC_POSTMASTER, PGC_S_FILE,
								 GUC_ACTION_SET, true, ERROR, false);
}

static void
define_int(const char *name, const char *desc, const char *detail,
		   double *value, GucRealCheckHook check, GucRealAssignHook assign,
		   GucShowHook show, int boot, int min, int max, GucContext context,
		   int flags)
{
	char	   *configured = configured_text(name);

	DefineCustomRealVariable(name, desc, detail, value, boot, min, max, context,
							 flags, check, assign, show);
	refuse_rejected(name, configured);
}

#define DEFINE_INT(name, desc, detail, var, boot, min, max, context, flags) \
	define_int(name, desc, detail, &var##_value, check_whole, var##_assign, \
			   var##_show, boot, min, max, context, flags)

bool
lake_guc_byte_pair_valid(void)
{
	return lake_max_buffered_bytes >= lake_max_stream_bytes;
}

/*
 * A name under lake's prefix that no parameter has is a misspelling.
 * PostgreSQL would drop it with a WARNING and lake would run with a default
 * nobody chose: at server start it stops the start, as a bad value does.
 */
static void
refuse_unknown_names(void)
{
	struct config_generic **vars = get_guc_variables();
	int			n = GetNumConfigOptions();

	for (int i = 0; i < n; i++)
		if ((vars[i]->flags & GUC_CUSTOM_PLACEHOLDER) != 0 &&
			strncmp(vars[i]->name, "lake.", 5) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("unrecognized configuration parameter \"%s\"", vars[i]->name),
					 errhint("lake's parameters are listed in pg_settings and in its README; fix or remove the setting.")));
}

void
lake_guc_init(void)
{
	char	   *database = configured_text("lake.database");

	DefineCustomStringVariable("lake.database",
							   "Database the lake background worker serves.",
							   NULL,
							   &lake_database,
							   "postgres",
							   PGC_POSTMASTER,
							   0,
							   check_database_name, NULL, NULL);
	refuse_rejected("lake.database", database);

	DEFINE_INT("lake.max_concurrent_appends",
			   "Most appends admitted at once.",
			   NULL,
			   lake_max_concurrent_appends,
			   8, 1, 65535,
			   PGC_SIGHUP,
			   0);

	DEFINE_INT("lake.admission_queue_wait",
			   "How long a call waits inside lake before it is refused.",
			   "Bounds every wait: admission, a dataset's append lock, the cycle buffer, a seal in progress.",
			   lake_admission_queue_wait_ms,
			   100, 1, INT_MAX,
			   PGC_SIGHUP,
			   GUC_UNIT_MS);

	DEFINE_INT("lake.max_stream_bytes",
			   "Largest payload one append stream may carry.",
			   NULL,
			   lake_max_stream_bytes,
			   64 * 1024 * 1024, 1, INT_MAX,
			   PGC_SIGHUP,
			   GUC_UNIT_BYTE);

	DEFINE_INT("lake.max_buffered_bytes",
			   "Most payload bytes all admitted appends may reserve together.",
			   "Must be at least lake.max_stream_bytes.",
			   lake_max_buffered_bytes,
			   256 * 1024 * 1024, 1, INT_MAX,
			   PGC_SIGHUP,
			   GUC_UNIT_BYTE);

	DEFINE_INT("lake.compression_level",
			   "zstd level used to compress stored payloads.",
			   NULL,
			   lake_compression_level,
			   3, 1, 19,
			   PGC_USERSET,
			   0);

	DEFINE_INT("lake.stage_ttl",
			   "Staged appends idle this long are removed by the worker.",
			   NULL,
			   lake_stage_ttl_s,
			   3600, 1, INT_MAX,
			   PGC_SIGHUP,
			   GUC_UNIT_S);

	DEFINE_INT("lake.max_owners",
			   "Live owner states kept in shared memory.",
			   NULL,
			   lake_max_owners,
			   100000, 1, 10000000,
			   PGC_POSTMASTER,
			   0);

	DEFINE_INT("lake.cycle_interval",
			   "How long a cycle stays open after its first cast before the worker seals it.",
			   NULL,
			   lake_cycle_interval_ms,
			   10, 1, 3600 * 1000,
			   PGC_SIGHUP,
			   GUC_UNIT_MS);

	DEFINE_INT("lake.cycle_max_casts",
			   "Seal early when this many casts are pending.",
			   NULL,
			   lake_cycle_max_casts,
			   10000, 1, 1000000,
			   PGC_SIGHUP,
			   0);

	DEFINE_INT("lake.cycle_buffer_size",
			   "Shared memory for casts waiting to be sealed.",
			   NULL,
			   lake_cycle_buffer_size,
	/* A full ring is sealed as one record: it must stay well under 1 GB. */
			   16 * 1024 * 1024, 64 * 1024, 256 * 1024 * 1024,
			   PGC_POSTMASTER,
			   GUC_UNIT_BYTE);

	DEFINE_INT("lake.checkpoint_cycles",
			   "Cycles sealed between two owner snapshots.",
			   NULL,
			   lake_checkpoint_cycles,
			   1000, 1, INT_MAX,
			   PGC_SIGHUP,
			   0);

	/*
	 * Per-role caps: PGC_SUSET, so only a superuser sets them, typically
	 * with ALTER ROLE ... SET; 0 means no cap beyond the global limits.
	 */
	DEFINE_INT("lake.role_max_appends",
			   "Most admission permits one role holds at once (0: no cap).",
			   NULL,
			   lake_role_max_appends,
			   0, 0, 65535,
			   PGC_SUSET,
			   0);

	DEFINE_INT("lake.role_max_open_stages",
			   "Most open stages one role may have (0: no cap).",
			   NULL,
			   lake_role_max_open_stages,
			   0, 0, INT_MAX,
			   PGC_SUSET,
			   0);

	DEFINE_INT("lake.role_max_stage_chunks",
			   "Most chunks a role may upload to one stage (0: no cap).",
			   NULL,
			   lake_role_max_stage_chunks,
			   0, 0, INT_MAX,
			   PGC_SUSET,
			   0);

	DEFINE_INT("lake.role_max_pending_cast_bytes",
			   "Most cycle buffer bytes one role's accepted, not yet sealed casts may take (0: no cap).",
			   NULL,
			   lake_role_max_pending_cast_bytes,
			   0, 0, INT_MAX,
			   PGC_SUSET,
			   GUC_UNIT_BYTE);

	DEFINE_INT("lake.role_max_hold",
			   "Longest one transaction of the role may hold what other sessions' calls wait for (0: no bound).",
			   "An admission permit, a dataset's append lock, the owner-creation lock: past this, counted from the first, the session is ended.",
			   lake_role_max_hold_ms,
			   0, 0, INT_MAX,
			   PGC_SUSET,
			   GUC_UNIT_MS);

	/*
	 * A partition of a PL/Proxy cluster (SPEC §7): the server hands out
	 * stage ids and writer epochs in its own residue class modulo the
	 * number of partitions, so a router finds the partition of a stage id
	 * or a receipt from the handle alone. Fixed for the life of the data.
	 */
	define_int("lake.partitions",
			   "Number of partitions of the PL/Proxy cluster this server belongs to.",
			   "A power of two; 1 when the server stands alone.",
			   &lake_partitions_value, check_power_of_two, lake_partitions_assign,
			   lake_partitions_show, 1, 1, 1024, PGC_POSTMASTER, 0);

	DEFINE_INT("lake.partition",
			   "This server's partition number in its PL/Proxy cluster.",
			   "From 0 to lake.partitions - 1.",
			   lake_partition,
			   0, 0, 1023,
			   PGC_POSTMASTER,
			   0);

	if (process_shared_preload_libraries_in_progress)
		refuse_unknown_names();
	MarkGUCPrefixReserved("lake");

	if (!lake_guc_byte_pair_valid())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lake.max_buffered_bytes (%d) must be at least lake.max_stream_bytes (%d)",
						lake_max_buffered_bytes, lake_max_stream_bytes),
				 errhint("Raise lake.max_buffered_bytes or lower lake.max_stream_bytes.")));
	if (lake_partition >= lake_partitions)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lake.partition (%d) must be below lake.partitions (%d)",
						lake_partition, lake_partitions),
				 errhint("Number the partitions of a cluster from 0.")));
}

int64
lake_partition_handle(int64 n)
{
	return n * lake_partitions + lake_partition;
}

/*
 * A router reaches a name's partition by hashtext(name) & (N - 1), and a
 * handle's (a stage id, a receipt's epoch) by handle & (N - 1). A call that
 * arrives at another partition (a router whose server "lake" lists them
 * out of order) is refused: a name created there would exist twice, and a
 * handle would be answered as unknown or lost.
 */
static void
wrong_partition(const char *what, const char *which, int belongs)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("%s %s belongs to partition %d, not to this one (lake.partition %d of %d)",
					what, which, belongs, lake_partition, lake_partitions),
			 errhint("A router's server \"lake\" must name the partitions in order: lake_router.check() shows which one is out of place.")));
}

void
lake_require_partition_name(const char *what, const char *name)
{
	int			belongs;

	if (lake_partitions == 1)
		return;
	/* The router's own function, so the two sides can never disagree. */
	belongs = DatumGetInt32(DirectFunctionCall1Coll(hashtext, DEFAULT_COLLATION_OID,
													CStringGetTextDatum(name))) &
		(lake_partitions - 1);
	if (belongs != lake_partition)
		wrong_partition(what, psprintf("\"%s\"", name), belongs);
}

void
lake_require_partition_handle(const char *what, int64 handle)
{
	int			belongs = (int) (handle & (lake_partitions - 1));

	if (belongs != lake_partition)
		wrong_partition(what, psprintf(INT64_FORMAT, handle), belongs);
}

bool
lake_serves_this_database(void)
{
	/* A backend's database and lake.database (postmaster) never change. */
	static int	served = -1;

	/* Not preloaded: no worker serves anything (lake_require_preload refuses). */
	if (lake_database == NULL)
		return true;
	if (served < 0)
	{
		char	   *name = get_database_name(MyDatabaseId);

		served = name != NULL && strcmp(name, lake_database) == 0;
	}
	return served;
}

void
lake_require_served_database(void)
{
	if (!lake_serves_this_database())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("lake serves database \"%s\", not this one", lake_database),
				 errdetail("lake's tables are here, but its worker serves only the database lake.database names: this one may be a copy of it (CREATE DATABASE ... TEMPLATE), or have been renamed, or lake was created here before lake.database named another database."),
				 errhint("Use lake in database \"%s\".", lake_database)));
}
