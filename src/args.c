/*
 * args.c — argument checks shared by every SQL entry point.
 *
 * SQL functions of lake are not STRICT: a NULL argument is a caller bug
 * that deserves a 22004 naming the argument, not a silent NULL result.
 */
#include "lake.h"

#include "access/detoast.h"
#include "args.h"
#include "miscadmin.h"
#include "utils/builtins.h"

/*
 * What every entry point runs first, set by _PG_init (lake.c) only when
 * the library is preloaded: args.c sits below the engines it reports on.
 */
static LakeEntryCheck entry_check = NULL;

void
lake_set_entry_check(LakeEntryCheck check)
{
	entry_check = check;
}

/*
 * Refuse (55000) when the library was not preloaded: no shared state.
 * Every entry point passes here first.
 */
void
lake_require_preload(void)
{
	if (entry_check == NULL || !entry_check())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("lake must be loaded via shared_preload_libraries"),
				 errhint("Add lake to shared_preload_libraries in postgresql.conf and restart the server.")));
}

/*
 * A result row as wide as this library fills it. The library and the
 * extension's SQL objects come from one build; one installed without the
 * other (a package upgraded under a running extension) would read or
 * write past the arrays a row is built from.
 */
void
lake_require_result_width(const char *function, TupleDesc desc, int natts)
{
	if (desc == NULL || desc->natts != natts)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("lake's library does not match its SQL objects"),
				 errdetail("The SQL declaration of %s has %d result columns; this library fills %d.",
						   function, desc == NULL ? 0 : desc->natts, natts),
				 errhint("Install the lake library built with the installed extension's script, then restart the server.")));
}

static void
require_not_null(FunctionCallInfo fcinfo, int argno, const char *what)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", what)));
}

/* A non-empty text name of at most 'limit' bytes. */
static char *
arg_name(FunctionCallInfo fcinfo, int argno, const char *what, int limit)
{
	text	   *t;
	int			len;

	require_not_null(fcinfo, argno, what);
	t = PG_GETARG_TEXT_PP(argno);
	len = VARSIZE_ANY_EXHDR(t);
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what)));
	if (len > limit)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is too long", what),
				 errdetail("It is %d bytes; the limit is %d bytes.", len, limit)));
	return text_to_cstring(t);
}

/* Dataset, tenant and operation names: up to LAKE_NAME_MAX_BYTES bytes. */
char *
lake_arg_name(FunctionCallInfo fcinfo, int argno, const char *what)
{
	return arg_name(fcinfo, argno, what, LAKE_NAME_MAX_BYTES);
}

/*
 * Owner, lifecycle and phase names: they live in fixed shared-memory slots
 * of NAMEDATALEN bytes, so at most NAMEDATALEN - 1 bytes.
 */
char *
lake_arg_short_name(FunctionCallInfo fcinfo, int argno, const char *what)
{
	return arg_name(fcinfo, argno, what, NAMEDATALEN - 1);
}

bytea *
lake_arg_bytea(FunctionCallInfo fcinfo, int argno, const char *what)
{
	require_not_null(fcinfo, argno, what);
	return PG_GETARG_BYTEA_PP(argno);
}

/*
 * The byte length of a bytea argument without detoasting it: a size limit
 * is checked before a payload stored compressed or out of line is
 * brought into memory.
 */
int64
lake_arg_bytea_size(FunctionCallInfo fcinfo, int argno, const char *what)
{
	require_not_null(fcinfo, argno, what);
	return (int64) toast_raw_datum_size(PG_GETARG_DATUM(argno)) - VARHDRSZ;
}

int32
lake_arg_int32(FunctionCallInfo fcinfo, int argno, const char *what)
{
	require_not_null(fcinfo, argno, what);
	return PG_GETARG_INT32(argno);
}

int64
lake_arg_int64(FunctionCallInfo fcinfo, int argno, const char *what)
{
	require_not_null(fcinfo, argno, what);
	return PG_GETARG_INT64(argno);
}

/* An optional digest: NULL, or exactly LAKE_DIGEST_LEN bytes. */
const uint8 *
lake_arg_digest(FunctionCallInfo fcinfo, int argno)
{
	bytea	   *d;

	if (PG_ARGISNULL(argno))
		return NULL;
	d = PG_GETARG_BYTEA_PP(argno);
	if (VARSIZE_ANY_EXHDR(d) != LAKE_DIGEST_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("digest must be %d bytes (SHA-256), not %d",
						LAKE_DIGEST_LEN, (int) VARSIZE_ANY_EXHDR(d))));
	return (const uint8 *) VARDATA_ANY(d);
}

/* A supplied digest (may be NULL: none) must equal the computed one: 22000. */
void
lake_check_digest(const uint8 *supplied, const uint8 *computed)
{
	if (supplied != NULL && memcmp(supplied, computed, LAKE_DIGEST_LEN) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("supplied digest does not match the payload"),
				 errdetail("The SHA-256 of the payload differs from the digest given.")));
}

/*
 * A role's name for a message: its OID once the role is gone (a session
 * outlives the DROP ROLE of its login role), not an error that would hide
 * the message's own SQLSTATE.
 */
char *
lake_role_name(Oid role)
{
	char	   *name = GetUserNameFromId(role, true);

	return name != NULL ? name : psprintf("%u", role);
}
