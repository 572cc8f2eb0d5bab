/*
 * lake_router.c — the one check the router makes itself: lake's functions
 * that must be their own transaction (seal, checkpoint, recover,
 * release_owner, rebuild_owner_index) refuse inside a transaction block
 * with 25001, as lake does (SPEC §7: the same SQLSTATEs). Through PL/Proxy
 * each partition runs them as a transaction of its own, so a ROLLBACK of
 * the router's transaction would not undo what they committed there. A
 * read-only transaction refuses them with 25006, as lake does: they write.
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(lake_router_require_own_transaction);

Datum
lake_router_require_own_transaction(PG_FUNCTION_ARGS)
{
	char	   *what = text_to_cstring(PG_GETARG_TEXT_PP(0));

	/* As lake's checkpoint_require_own_transaction, with its message. */
	if (IsTransactionBlock() || GetCurrentTransactionNestLevel() > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("%s cannot run inside a transaction block", what),
				 errdetail("Each partition commits it on its own: a rollback here would not undo it.")));
	/* Nor anywhere else in a pipeline than its first statement. */
	PreventInTransactionBlock(true, what);
	PreventCommandIfReadOnly(what);
	PG_RETURN_VOID();
}
