/*
 * append.c — single-shot appends and the read functions (SPEC §3).
 *
 * lake.append checks its arguments, takes the admission permit for the
 * payload's size before touching the payload, digests it (and stores a new
 * operation's chunks before taking the dataset's lock), and then follows
 * the idempotency protocol of operation.c. Reads stream the version's
 * chunks one at a time through the decoder and verify the digest: damage
 * is LK005, never partial data.
 */
#include "lake.h"

#include "access.h"
#include "admission.h"
#include "args.h"
#include "codec.h"
#include "digest.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "guc.h"
#include "miscadmin.h"
#include "operation.h"
#include "store_version.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(lake_create_dataset);
PG_FUNCTION_INFO_V1(lake_append);
PG_FUNCTION_INFO_V1(lake_read);
PG_FUNCTION_INFO_V1(lake_read_operation);
PG_FUNCTION_INFO_V1(lake_versions);

Datum
lake_create_dataset(PG_FUNCTION_ARGS)
{
	char	   *name;

	lake_require_preload();
	name = lake_arg_name(fcinfo, 0, "dataset name");
	access_require_admin(fcinfo);
	lake_require_partition_name("dataset", name);
	/* 25006 naming this call, on a standby too, before any lock or look-up. */
	PreventCommandIfReadOnly("lake.create_dataset()");
	store_connect();
	store_create_dataset(name);
	store_finish();
	PG_RETURN_VOID();
}

/* The payload argument, its SHA-256 into 'digest', checked against a supplied one. */
static bytea *
digested_payload(FunctionCallInfo fcinfo, int64 len, const uint8 *supplied, uint8 *digest)
{
	bytea	   *payload = lake_arg_bytea(fcinfo, 3, "payload");

	lake_sha256(VARDATA_ANY(payload), len, digest);
	lake_check_digest(supplied, digest);
	return payload;
}

Datum
lake_append(PG_FUNCTION_ARGS)
{
	char	   *dataset;
	char	   *tenant;
	char	   *operation_id;
	bytea	   *payload;
	const uint8 *supplied;
	int64		len;
	uint8		digest[LAKE_DIGEST_LEN];
	OperationLookup op;
	PreparedVersion prepared;
	int64		version;
	long		wait_ms;
	bool		held;

	lake_require_preload();
	dataset = lake_arg_name(fcinfo, 0, "dataset");
	tenant = lake_arg_name(fcinfo, 1, "tenant");
	operation_id = lake_arg_name(fcinfo, 2, "operation_id");
	len = lake_arg_bytea_size(fcinfo, 3, "payload");
	supplied = lake_arg_digest(fcinfo, 4);
	/* Its table-AM writes bypass the executor's check, as a replay would. */
	PreventCommandIfReadOnly("lake.append()");

	/* Refuse a tenant not granted before it can hold admission capacity. */
	store_connect();
	access_require_tenant(tenant);
	held = admission_held();
	if ((uint64) len > admission_max_stream_bytes())
	{
		/*
		 * Over the stream limit only a replay of a version stored under a
		 * higher one can answer: a client that lost its answer must not be
		 * told to split it. Its permit covers what the limit allows; the
		 * check reads the stored version a chunk at a time. Anything else
		 * is refused (54000) by the reservation.
		 */
		operation_lookup(store_dataset_id(dataset), tenant, operation_id, &op);
		wait_ms = admission_reserve(op.found ? admission_max_stream_bytes() : (uint64) len);
	}
	else
	{
		wait_ms = admission_reserve((uint64) len);
		operation_lookup(store_dataset_id(dataset), tenant, operation_id, &op);
	}

	if (!op.found)
	{
		/*
		 * A new operation's payload is digested, encoded and its chunks
		 * beyond the first written before the dataset's lock is taken,
		 * under the call's reservation: the lock others wait for is held
		 * for the version row alone, not for a compression whose cost
		 * grows with the payload and the session's compression level.
		 * Queued, the call keeps chunk 0 encoded (at most a chunk) and no
		 * copy of the payload.
		 */
		payload = digested_payload(fcinfo, len, supplied, digest);
		store_prepare_version(op.dataset_id, VARDATA_ANY(payload), len, &prepared);
		if (payload != (bytea *) PG_GETARG_POINTER(3))
			pfree(payload);
	}

	/*
	 * All waits share the call's budget. A new operation queued for the
	 * lock takes back, after it, the bytes it still holds: chunk 0, the
	 * rest being written.
	 */
	wait_ms = operation_lock_queued(&op, dataset, held,
									(uint64) Min(len, (int64) LAKE_CHUNK_BYTES), wait_ms);

	if (op.found)
	{
		payload = digested_payload(fcinfo, len, supplied, digest);
		op.own_permit = !held;
		version = operation_replay_of(&op, digest, VARDATA_ANY(payload), len,
									  dataset, tenant, operation_id, wait_ms);
	}
	else if (operation_resolve(&op, digest, dataset, tenant, operation_id, wait_ms, &version))
		store_write_prepared(op.dataset_id, version, tenant, operation_id, digest, &prepared);
	else
		store_discard_prepared(&prepared);	/* committed meanwhile: a replay */
	store_finish();
	PG_RETURN_INT64(version);
}

/*
 * Where a read decodes to: the result, filled in order and grown as
 * verified chunks arrive, up to the size the version declares. That size
 * is outside every checksum: a damaged one must not be allocated up front.
 */
typedef struct ReadTarget
{
	bytea	   *result;
	int64		filled;
	int64		room;			/* bytes allocated after the header */
	int64		declared;
} ReadTarget;

static void
read_visit(const char *data, size_t len, void *arg)
{
	ReadTarget *t = (ReadTarget *) arg;

	if (t->filled + (int64) len > t->room)
	{
		/* store_visit_version never hands out more than declared. */
		t->room = Min(Max(t->room * 2, t->filled + (int64) len), t->declared);
		t->result = repalloc(t->result, VARHDRSZ + t->room);
	}
	memcpy(VARDATA(t->result) + t->filled, data, len);
	t->filled += len;
}

/*
 * Decode and verify the version whose row gave 'head' (the caller's tenant
 * rights checked); 'version' is the number the caller looked it up by.
 */
static bytea *
read_version(const char *dataset, int64 version, VersionHead *head)
{
	ReadTarget	t;
	const char *why;

	if (head->damage != NULL)
		store_lineage_broken(dataset, version, head->damage);
	if (head->bytes > (int64) (MaxAllocSize - VARHDRSZ))
	{
		/* Too large to return, unless the size itself is the damage. */
		why = store_visit_version(head, NULL, NULL);
		if (why != NULL)
			store_lineage_broken(dataset, version, why);
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("version " INT64_FORMAT " of dataset \"%s\" is too large to read as one value",
						version, dataset)));
	}

	t.declared = head->bytes;
	t.room = Min(head->bytes, (int64) LAKE_CHUNK_BYTES);
	t.result = SPI_palloc(VARHDRSZ + t.room);
	t.filled = 0;
	why = store_visit_version(head, read_visit, &t);
	if (why != NULL)
		store_lineage_broken(dataset, version, why);
	SET_VARSIZE(t.result, VARHDRSZ + t.filled);
	return t.result;
}

Datum
lake_read(PG_FUNCTION_ARGS)
{
	char	   *dataset;
	int64		version;
	VersionHead head;
	bytea	   *result;

	lake_require_preload();
	dataset = lake_arg_name(fcinfo, 0, "dataset");
	version = lake_arg_int64(fcinfo, 1, "version");
	if (version < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("version must be at least 1, not " INT64_FORMAT, version)));
	store_connect();
	if (!store_version_head(store_dataset_id(dataset), version, &head))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("version " INT64_FORMAT " of dataset \"%s\" does not exist",
						version, dataset)));
	/* Named by what the caller passed: the version's tenant is not told. */
	access_require_tenant_for(head.tenant,
							  psprintf("version " INT64_FORMAT " of dataset \"%s\"", version, dataset));
	result = read_version(dataset, version, &head);
	store_finish();
	PG_RETURN_BYTEA_P(result);
}

Datum
lake_read_operation(PG_FUNCTION_ARGS)
{
	char	   *dataset;
	char	   *tenant;
	char	   *operation_id;
	OperationLookup op;
	bytea	   *result;

	lake_require_preload();
	dataset = lake_arg_name(fcinfo, 0, "dataset");
	tenant = lake_arg_name(fcinfo, 1, "tenant");
	operation_id = lake_arg_name(fcinfo, 2, "operation_id");
	store_connect();
	access_require_tenant(tenant);
	store_lookup_operation(store_dataset_id(dataset), tenant, operation_id, &op);
	if (!op.found)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("operation \"%s\" of tenant \"%s\" has no version in dataset \"%s\"",
						operation_id, tenant, dataset)));
	/* The row the operation was found by, not one looked up again by its number. */
	result = read_version(dataset, op.version, &op.head);
	store_finish();
	PG_RETURN_BYTEA_P(result);
}

Datum
lake_versions(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *dataset;
	int64		after;

	lake_require_preload();
	dataset = lake_arg_name(fcinfo, 0, "dataset");
	after = lake_arg_int64(fcinfo, 1, "after_version");
	if (after < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("after_version must not be negative, not " INT64_FORMAT, after)));
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	store_connect();
	/* Callers limited to granted tenants see only those tenants' versions. */
	store_list_versions(store_dataset_id(dataset), after,
						access_all_tenants() ? InvalidOid : store_caller(),
						rsinfo);
	store_finish();
	return (Datum) 0;
}
