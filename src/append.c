/*
 * append.c — idempotent single-shot appends and reads (SPEC §3).
 *
 * The protocol of lake.append, in order:
 *   1. check arguments (22004 / 22023), then take the admission permit for
 *      the payload's size (54000 / 53000) before touching the payload;
 *   2. digest the payload; a supplied digest must match (22000);
 *   3. look the operation up without any lock: a replay is answered here,
 *      with the original version or LK001, and never serializes;
 *   4. otherwise lock the dataset, look again with a fresh snapshot (the
 *      contender we waited for may have committed this operation), and
 *      write version max+1.
 * Under REPEATABLE READ / SERIALIZABLE the transaction snapshot cannot see
 * what a contender committed meanwhile; step 4 then compares it with the
 * latest snapshot and refuses with 40001 rather than write a version its
 * own snapshot could not explain.
 */
#include "lake.h"

#include "access/xact.h"
#include "admission.h"
#include "args.h"
#include "digest.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "store.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"

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
	SPI_connect();
	store_create_dataset(name);
	SPI_finish();
	PG_RETURN_VOID();
}

/* The answer to a replay: the original version, or LK001. */
static int64
replay_result(const OperationLookup *op, const uint8 *digest,
			  const char *dataset, const char *tenant, const char *operation_id)
{
	if (memcmp(op->digest, digest, LAKE_DIGEST_LEN) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_LAKE_IDEMPOTENCY_CONFLICT),
				 errmsg("operation \"%s\" of tenant \"%s\" already committed version " INT64_FORMAT " of dataset \"%s\" with different content",
						operation_id, tenant, op->version, dataset),
				 errdetail("The stored digest differs from this payload's digest."),
				 errhint("Use a new operation id for new content.")));
	return op->version;
}

static void
concurrent_append(const char *dataset)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access due to a concurrent append to dataset \"%s\"",
					dataset),
			 errhint("Retry the transaction.")));
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
	int64		version;

	lake_require_preload();
	dataset = lake_arg_name(fcinfo, 0, "dataset");
	tenant = lake_arg_name(fcinfo, 1, "tenant");
	operation_id = lake_arg_name(fcinfo, 2, "operation_id");
	payload = lake_arg_bytea(fcinfo, 3, "payload");
	supplied = lake_arg_digest(fcinfo, 4);
	len = VARSIZE_ANY_EXHDR(payload);

	admission_reserve((uint64) len);

	lake_sha256(VARDATA_ANY(payload), len, digest);
	if (supplied != NULL && memcmp(supplied, digest, LAKE_DIGEST_LEN) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("supplied digest does not match the payload"),
				 errdetail("The SHA-256 of the %lld-byte payload differs from the digest given.",
						   (long long) len)));

	SPI_connect();
	store_lookup_operation(dataset, tenant, operation_id, &op);
	if (op.found)
	{
		version = replay_result(&op, digest, dataset, tenant, operation_id);
		SPI_finish();
		PG_RETURN_INT64(version);
	}

	store_lock_dataset(op.dataset_id);
	if (IsolationUsesXactSnapshot())
	{
		OperationLookup mine = op;

		store_recheck_operation(tenant, operation_id, InvalidSnapshot, &mine);
		store_recheck_operation(tenant, operation_id, GetLatestSnapshot(), &op);
		if (mine.found != op.found || mine.max_version != op.max_version)
			concurrent_append(dataset);
	}
	else
		store_recheck_operation(tenant, operation_id, InvalidSnapshot, &op);

	if (op.found)
		version = replay_result(&op, digest, dataset, tenant, operation_id);
	else
	{
		version = op.max_version + 1;
		store_write_version(op.dataset_id, version, tenant, operation_id, digest,
							VARDATA_ANY(payload), len);
	}
	SPI_finish();
	PG_RETURN_INT64(version);
}

Datum
lake_read(PG_FUNCTION_ARGS)
{
	char	   *dataset;
	int64		version;
	bytea	   *result;

	lake_require_preload();
	dataset = lake_arg_name(fcinfo, 0, "dataset");
	version = lake_arg_int64(fcinfo, 1, "version");
	if (version < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("version must be at least 1, not " INT64_FORMAT, version)));
	SPI_connect();
	result = store_read_version(dataset, store_dataset_id(dataset), version);
	SPI_finish();
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
	SPI_connect();
	store_lookup_operation(dataset, tenant, operation_id, &op);
	if (!op.found)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("operation \"%s\" of tenant \"%s\" has no version in dataset \"%s\"",
						operation_id, tenant, dataset)));
	result = store_read_version(dataset, op.dataset_id, op.version);
	SPI_finish();
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
	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	store_list_versions(store_dataset_id(dataset), after, rsinfo);
	SPI_finish();
	return (Datum) 0;
}
