/*
 * args.h — argument checks shared by every SQL entry point: NULLs (22004),
 * malformed values (22023) and the preload requirement (55000).
 */
#ifndef LAKE_ARGS_H
#define LAKE_ARGS_H

#include "access/tupdesc.h"
#include "fmgr.h"

/*
 * The check every entry point makes first: false when lake's shared state
 * is not there. It may also do what every entry point must (wake the worker).
 */
typedef bool (*LakeEntryCheck) (void);
extern void lake_set_entry_check(LakeEntryCheck check);
extern void lake_require_preload(void);
extern void lake_require_result_width(const char *function, TupleDesc desc, int natts);
extern char *lake_arg_name(FunctionCallInfo fcinfo, int argno, const char *what);
extern char *lake_arg_short_name(FunctionCallInfo fcinfo, int argno, const char *what);
extern bytea *lake_arg_bytea(FunctionCallInfo fcinfo, int argno, const char *what);
extern int64 lake_arg_bytea_size(FunctionCallInfo fcinfo, int argno, const char *what);
extern int32 lake_arg_int32(FunctionCallInfo fcinfo, int argno, const char *what);
extern int64 lake_arg_int64(FunctionCallInfo fcinfo, int argno, const char *what);
extern const uint8 *lake_arg_digest(FunctionCallInfo fcinfo, int argno);
extern void lake_check_digest(const uint8 *supplied, const uint8 *computed);
extern char *lake_role_name(Oid role);

#endif							/* LAKE_ARGS_H */
