/*
 * cast.c — the SQL entry points of casting: lake.cast, lake.cast_durable,
 * lake.await_durable, lake.owner_state and lake.seal.
 *
 * They parse and check their arguments, then use the layers below: the
 * ring (cycle.h) accepts a cast, the waiters (waiter.h) wait for its seal,
 * the sealed log (logread.h) answers receipts no longer in the ring, and
 * seal.h seals on demand.
 */
#include "lake.h"

#include "access.h"
#include "args.h"
#include "checkpoint.h"
#include "cycle.h"
#include "digest.h"
#include "funcapi.h"
#include "guc.h"
#include "landing.h"
#include "lifecycle.h"
#include "logread.h"
#include "miscadmin.h"
#include "schema.h"
#include "seal.h"
#include "store_owner.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"
#include "waiter.h"

static char *
optional_phase(FunctionCallInfo fcinfo, int argno, const char *what)
{
	return PG_ARGISNULL(argno) ? NULL : lake_arg_short_name(fcinfo, argno, what);
}

static void
cast_arguments(FunctionCallInfo fcinfo, CastRequest *req)
{
	uint32		limit = cycle_max_payload();
	int64		size;

	req->owner = lake_arg_short_name(fcinfo, 0, "owner");
	req->from = optional_phase(fcinfo, 1, "from_phase");
	req->to = optional_phase(fcinfo, 2, "to_phase");
	if ((req->from == NULL) != (req->to == NULL))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("from_phase and to_phase must be given together"),
				 errhint("Give both for a move, or neither for a no-step cast.")));
	/* Measured before it is detoasted: a huge value is refused unread. */
	size = PG_ARGISNULL(3) ? 0 : lake_arg_bytea_size(fcinfo, 3, "payload");
	if (size > (int64) limit)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("cast payload of " INT64_FORMAT " bytes exceeds the limit of %u bytes",
						size, limit),
				 errdetail("A cast's payload may take at most a quarter of lake.cycle_buffer_size."),
				 errhint("Store large payloads with lake.append and cast a reference to them.")));
	req->payload = PG_ARGISNULL(3) ? NULL : PG_GETARG_BYTEA_PP(3);
	req->has_lap = !PG_ARGISNULL(4);
	req->expected_lap = req->has_lap ? PG_GETARG_INT64(4) : 0;
	if (req->has_lap && req->expected_lap < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("expected_lap must not be negative, not " INT64_FORMAT,
						req->expected_lap)));
	req->operation_id = PG_ARGISNULL(5) ? NULL : lake_arg_name(fcinfo, 5, "operation_id");
	/* lake_arg_name bounds it; the cast record keeps its length in 16 bits. */
	StaticAssertStmt(LAKE_NAME_MAX_BYTES <= UINT16_MAX, "an operation id's length must fit a cast record");

	/* The content an operation id stands for: the move and the payload. */
	if (req->operation_id != NULL)
	{
		LakeLanding l = {
			.flags = (req->from ? LANDING_MOVE : 0) | (req->payload ? LANDING_PAYLOAD : 0),
			.from_phase = req->from,
			.from_len = req->from ? strlen(req->from) : 0,
			.to_phase = req->to,
			.to_len = req->to ? strlen(req->to) : 0,
			.payload = req->payload ? (const uint8 *) VARDATA_ANY(req->payload) : NULL,
			.payload_len = req->payload ? VARSIZE_ANY_EXHDR(req->payload) : 0,
		};

		lake_landing_digest(&l, req->digest);
	}
}

/*
 * The function's composite result type, checked against the type lake made
 * (schema.h): looked up again only when the type changed since (its
 * typcache identifier), and before anything is done, so that nothing may
 * fail once a cast is accepted (the datum builders below take it).
 */
typedef struct ResultShape
{
	Oid			typid;
	uint64		identifier;
	TupleDesc	desc;
} ResultShape;

static TupleDesc
result_desc(FunctionCallInfo fcinfo, SchemaRow row)
{
	ResultShape *rs = (ResultShape *) fcinfo->flinfo->fn_extra;
	TupleDesc	tupdesc;
	MemoryContext old;

	if (rs != NULL &&
		lookup_type_cache(rs->typid, TYPECACHE_TUPDESC)->tupDesc_identifier == rs->identifier)
		return rs->desc;
	tupdesc = schema_call_row_type(fcinfo);
	schema_require_row(tupdesc, row);
	old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
	if (rs == NULL)
		rs = palloc(sizeof(ResultShape));
	rs->typid = tupdesc->tdtypeid;
	rs->identifier = lookup_type_cache(rs->typid, TYPECACHE_TUPDESC)->tupDesc_identifier;
	rs->desc = BlessTupleDesc(CreateTupleDescCopy(tupdesc));
	MemoryContextSwitchTo(old);
	fcinfo->flinfo->fn_extra = rs;
	return rs->desc;
}

static Datum
coordinate_datum(TupleDesc desc, const LogReceipt *c)
{
	Datum		values[3] = {Int64GetDatum(c->cycle), Int64GetDatum(c->position),
	LSNGetDatum(c->lsn)};
	bool		nulls[3] = {false, false, false};

	return HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
}

/*
 * The result row of a cast, formed before the cast is accepted and filled
 * in after without allocating: past acceptance nothing may fail, or an
 * out-of-memory error would leave a cast queued that its caller was told
 * failed (SPEC §1). lake's receipt and coordinate types hold fixed-width
 * by-value attributes only (schema_require_row checks their types).
 */
static HeapTuple
result_placeholder(TupleDesc desc)
{
	Datum		values[3] = {0};
	bool		nulls[3] = {false, false, false};

	Assert(desc->natts <= lengthof(values));
	for (int i = 0; i < desc->natts; i++)
		if (!TupleDescAttr(desc, i)->attbyval || TupleDescAttr(desc, i)->attlen <= 0)
			elog(ERROR, "lake: a cast's result type must have fixed-width by-value attributes");
	return heap_form_tuple(desc, values, nulls);
}

static Datum
result_filled(HeapTuple tuple, TupleDesc desc, const Datum *values)
{
	char	   *data = (char *) tuple->t_data + tuple->t_data->t_hoff;
	Size		off = 0;

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		off = att_align_nominal(off, att->attalign);
		store_att_byval(data + off, values[i], att->attlen);
		off += att->attlen;
	}
	return HeapTupleGetDatum(tuple);
}

PG_FUNCTION_INFO_V1(lake_cast);
PG_FUNCTION_INFO_V1(lake_await_durable);
PG_FUNCTION_INFO_V1(lake_cast_durable);

Datum
lake_cast(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	HeapTuple	result;
	Datum		values[2];
	CastRequest req;
	int32		epoch;
	int64		seq;

	lake_require_preload();
	cast_arguments(fcinfo, &req);
	cycle_wait_ready();
	PreventCommandIfReadOnly("lake.cast()");	/* as nextval() is */
	desc = result_desc(fcinfo, SCHEMA_RECEIPT);
	result = result_placeholder(desc);
	seq = cycle_accept(&req, &epoch);
	values[0] = Int32GetDatum(epoch);
	values[1] = Int64GetDatum(seq);
	PG_RETURN_DATUM(result_filled(result, desc, values));
}

/*
 * The tenant of a registered owner, or "" (no tenant anyone holds) for one
 * no longer registered. The store must be connected.
 */
static const char *
registered_tenant(int32 owner_id)
{
	char	   *name;
	char	   *tenant;

	return store_owner_by_id(owner_id, &name, &tenant) ? tenant : "";
}

/*
 * 42501 unless the caller holds the tenant of the receipt's owner, naming
 * only the receipt: a receipt of another tenant is not told apart from one
 * of a tenant the caller may not see for any other reason.
 */
static void
require_receipt_tenant(const char *tenant, int32 epoch, int64 seq)
{
	store_connect();
	access_require_tenant_for(tenant, psprintf("receipt (%d," INT64_FORMAT ")", epoch, seq));
	store_finish();
}

/*
 * 55000 before a wait for a seal in a transaction that holds the sealing
 * lock (lake.seal, lake.checkpoint, lake.recover or lake.release_owner
 * earlier in the same statement): the seal waited for needs that lock, so
 * the wait could never end.
 */
static void
require_sealable(void)
{
	if (store_sealing_lock_held())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot wait for a seal while this transaction holds lake's sealing lock"),
				 errdetail("A seal, checkpoint, recover or release earlier in this transaction holds it until the commit, and the seal waited for needs it."),
				 errhint("Wait in a transaction of its own.")));
}

/*
 * Wait until receipt (epoch, seq) is durable and fill *out; false on
 * timeout. LK006 if it can never be (lost with its epoch). Epoch and seq
 * are at least 1: lake_await_durable refuses anything lower. 'accepted':
 * the caller's own cast_durable was just given this receipt, so the cycle
 * is ready and the owner's tenant checked; it is pending or already
 * settled, which the wait itself tells apart.
 */
static bool
await_receipt(int32 epoch, int64 seq, int timeout_ms, bool accepted, LogReceipt *out)
{
	TimestampTz deadline = 0;
	char		tenant[NAMEDATALEN];
	bool		checked = false;
	WaitResult	result = WAIT_HISTORY;
	bool		ok;

	if (timeout_ms >= 0)
	{
		/* 0 stands for "no deadline" below: a deadline is never 0 itself. */
		deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
		if (deadline == 0)
			deadline = 1;
	}
	if (accepted)
	{
		checked = true;
		if (!cycle_receipt_settled(epoch, seq))	/* a replay's may be */
			result = waiter_wait(epoch, seq, deadline, out);
	}
	else
	{
		ReceiptState state;

		/* A recovery that begins after the wait is waited for in turn. */
		do
		{
			CHECK_FOR_INTERRUPTS();
			if (deadline == 0)
				cycle_wait_ready();
			else if (!cycle_wait_ready_until(deadline))
				return false;	/* still recovering at the caller's deadline */
			AcceptInvalidationMessages();
			state = cycle_receipt_state(epoch, seq, tenant);
		} while (state == RECEIPT_RECOVERING);
		if (state == RECEIPT_PENDING)
		{
			if (!access_tenant_cached(tenant))
			{
				require_receipt_tenant(tenant, epoch, seq);
				checked = true;
			}
			require_sealable();
			result = waiter_wait(epoch, seq, deadline, out);
		}
	}
	if (result == WAIT_TIMEOUT)
		return false;
	if (result == WAIT_DURABLE)
		return true;
	if (result == WAIT_BLOCKING)
		ereport(ERROR,
				(errcode(ERRCODE_QUERY_CANCELED),
				 errmsg("stopped waiting for receipt (%d," INT64_FORMAT "): another session waits for a lock this transaction holds on lake's tables",
						epoch, seq),
				 errdetail("The seal waited for may be held up by that session, which cannot go on while this transaction is open."),
				 accepted ?
				 errhint("The cast stays accepted, as after a cancel: await its receipt in a transaction of its own, or retry with its operation id.") :
				 errhint("Await the receipt again in a transaction of its own.")));
	if (result == WAIT_GONE)
		ereport(ERROR,
				(errcode(ERRCODE_LAKE_NOT_DURABLE),
				 errmsg("receipt (%d," INT64_FORMAT ") can never become durable", epoch, seq),
				 errdetail("The cast was accepted, but the extension was dropped before its cycle was sealed.")));

	store_connect();
	ok = log_find_receipt(epoch, seq, cycle_live_epoch(), out);
	if (ok && !checked)
		require_receipt_tenant(registered_tenant(out->owner_id), epoch, seq);
	if (!ok && !cycle_receipt_sealed(epoch, seq))
		log_require_epoch_end(epoch);
	store_finish();
	if (!ok && cycle_receipt_sealed(epoch, seq))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("the sealed cycle of receipt (%d," INT64_FORMAT ") is missing", epoch, seq),
				 errdetail("This epoch's seals reached it, but no lake_data.cycle row of the epoch does: the table was altered.")));
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_LAKE_NOT_DURABLE),
				 errmsg("receipt (%d," INT64_FORMAT ") can never become durable", epoch, seq),
				 errdetail("No cycle of its epoch holds it: its cast was lost with a crash or restart before its cycle was sealed, or the receipt was never issued."),
				 errhint("Cast it again.")));
	return true;
}

Datum
lake_await_durable(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	HeapTupleHeader receipt;
	bool		isnull_epoch;
	bool		isnull_seq;
	int32		epoch;
	int64		seq;
	int			timeout = -1;
	LogReceipt	c;

	lake_require_preload();
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("receipt must not be NULL")));
	receipt = PG_GETARG_HEAPTUPLEHEADER(0);
	desc = lookup_rowtype_tupdesc(HeapTupleHeaderGetTypeId(receipt),
								  HeapTupleHeaderGetTypMod(receipt));
	schema_require_row(desc, SCHEMA_RECEIPT);
	ReleaseTupleDesc(desc);
	epoch = DatumGetInt32(GetAttributeByNum(receipt, 1, &isnull_epoch));
	seq = DatumGetInt64(GetAttributeByNum(receipt, 2, &isnull_seq));
	if (isnull_epoch || isnull_seq)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("receipt epoch and seq must not be NULL")));
	/* Epochs and seqs count from 1: anything lower was never a receipt. */
	if (epoch < 1 || seq < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("receipt (%d," INT64_FORMAT ") was never issued", epoch, seq),
				 errdetail("Receipt epochs and seqs start at 1.")));
	lake_require_partition_handle("receipt epoch", epoch);
	if (!PG_ARGISNULL(1))
	{
		timeout = PG_GETARG_INT32(1);
		if (timeout < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("timeout_ms must not be negative, not %d", timeout)));
	}
	desc = result_desc(fcinfo, SCHEMA_COORDINATE);
	if (!await_receipt(epoch, seq, timeout, false, &c))
		PG_RETURN_NULL();
	PG_RETURN_DATUM(coordinate_datum(desc, &c));
}

/* A receipt accepted before an error (a wait cut short): the error says which. */
typedef struct AcceptedReceipt
{
	int32		epoch;
	int64		seq;
} AcceptedReceipt;

static void
accepted_receipt_context(void *arg)
{
	AcceptedReceipt *r = (AcceptedReceipt *) arg;

	errcontext("the cast was accepted as receipt (%d," INT64_FORMAT "); "
			   "lake.await_durable tells when it is durable", r->epoch, r->seq);
}

Datum
lake_cast_durable(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	HeapTuple	result;
	Datum		values[3];
	CastRequest req;
	AcceptedReceipt accepted;
	ErrorContextCallback context;
	LogReceipt	c;

	lake_require_preload();
	cast_arguments(fcinfo, &req);
	require_sealable();			/* before the cast is accepted */
	cycle_wait_ready();
	PreventCommandIfReadOnly("lake.cast_durable()");
	desc = result_desc(fcinfo, SCHEMA_COORDINATE);
	result = result_placeholder(desc);
	accepted.seq = cycle_accept(&req, &accepted.epoch);
	context.callback = accepted_receipt_context;
	context.arg = &accepted;
	context.previous = error_context_stack;
	error_context_stack = &context;
	(void) await_receipt(accepted.epoch, accepted.seq, -1, true, &c);
	error_context_stack = context.previous;
	values[0] = Int64GetDatum(c.cycle);
	values[1] = Int64GetDatum(c.position);
	values[2] = LSNGetDatum(c.lsn);
	PG_RETURN_DATUM(result_filled(result, desc, values));
}

/* ----------------------------------------------------------------------
 * lake.owner_state
 * ---------------------------------------------------------------------- */

PG_FUNCTION_INFO_V1(lake_owner_state);

Datum
lake_owner_state(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *name;
	const Lifecycle *lc;
	OwnerState *o;
	OwnerState	copy;
	Datum		values[6];
	bool		nulls[6] = {0};

	lake_require_preload();
	name = lake_arg_short_name(fcinfo, 0, "owner");
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	lake_require_result_width("lake.owner_state()",
							  ((ReturnSetInfo *) fcinfo->resultinfo)->setDesc, lengthof(values));
	for (;;)
	{
		uint64		filling;

		CHECK_FOR_INTERRUPTS();
		cycle_wait_ready();
		filling = cycle_owner_table();
		o = cycle_owner_entry(name, &lc, true, NULL);
		if (cycle_owner_copy(o, filling, &copy))
			break;
		/* A recovery is under way or refilled the owner table: look again. */
	}
	if (copy.phase < 0 || copy.phase >= lc->nphases)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("owner \"%s\" is being recovered under an edited lifecycle", name),
				 errhint("Retry in a moment.")));

	values[0] = CStringGetTextDatum(lc->phases[copy.phase]);
	values[1] = Int64GetDatum(copy.lap);
	values[2] = Int64GetDatum(copy.position);
	values[3] = Int32GetDatum(copy.pending);
	values[4] = BoolGetDatum(copy.quarantined);
	values[5] = CStringGetTextDatum(copy.reason);
	nulls[5] = !copy.quarantined;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(lake_seal);

Datum
lake_seal(PG_FUNCTION_ARGS)
{
	int64		cycle;

	lake_require_preload();
	access_require_admin(fcinfo);
	checkpoint_require_own_transaction("lake.seal()");
	cycle_wait_ready();
	cycle = seal_run();
	if (cycle == 0)
		PG_RETURN_NULL();
	PG_RETURN_INT64(cycle);
}
