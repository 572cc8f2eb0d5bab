/*
 * lake.h — what every module of the extension shares: error codes and
 * the limits on names.
 */
#ifndef LAKE_H
#define LAKE_H

#include "postgres.h"

#include "mb/pg_wchar.h"

/* Custom SQLSTATEs, class LK (SPEC §1). */
#define ERRCODE_LAKE_IDEMPOTENCY_CONFLICT	MAKE_SQLSTATE('L','K','0','0','1')
#define ERRCODE_LAKE_STALE_PHASE			MAKE_SQLSTATE('L','K','0','0','2')
#define ERRCODE_LAKE_ILLEGAL_MOVE			MAKE_SQLSTATE('L','K','0','0','3')
#define ERRCODE_LAKE_LAP_MISMATCH			MAKE_SQLSTATE('L','K','0','0','4')
#define ERRCODE_LAKE_INCOMPLETE_LINEAGE		MAKE_SQLSTATE('L','K','0','0','5')
#define ERRCODE_LAKE_NOT_DURABLE			MAKE_SQLSTATE('L','K','0','0','6')
#define ERRCODE_LAKE_OWNER_QUARANTINED		MAKE_SQLSTATE('L','K','0','0','7')

/*
 * Names (datasets, tenants, operation ids) are index keys; a bound well
 * under the btree tuple limit keeps every refusal a clear 22023 instead
 * of an index error deep in an insert.
 */
#define LAKE_NAME_MAX_BYTES 256

/*
 * The schema of lake's tables. Only the extension's owner has USAGE on it,
 * so no tenant role can name (or lock) a table; the functions live in lake.
 */
#define LAKE_DATA_SCHEMA "lake_data"

/* The background worker's bgw_type (and name), as pg_stat_activity shows it. */
#define LAKE_WORKER_TYPE "lake worker"

/* SHA-256 digest length; the content identity of every payload. */
#define LAKE_DIGEST_LEN 32

/*
 * Copy a message into a fixed buffer of 'size' bytes, cut at a character
 * boundary: a reason kept in shared memory and stored in a text column
 * must stay valid in the database encoding.
 */
static inline void
lake_copy_clipped(char *dst, const char *src, int size)
{
	int			len = pg_mbcliplen(src, strlen(src), size - 1);

	memcpy(dst, src, len);
	dst[len] = '\0';
}

#endif							/* LAKE_H */
