/*
 * seal.c — write the open cycle as one record, in one transaction.
 *
 * A sealer holds the sealing lock (a transaction-scoped lock on
 * lake_data.cycle's OID) to its commit, so sealers never overlap. Each seal is
 * fenced against its base: the durable writer epoch must still be the one
 * this incarnation recovered under, and the sealed head must be the one it
 * knows — otherwise it refuses and writes nothing. The landings of the
 * cycle are encoded together (landing.h) and zstd-compressed into one
 * row; lake_data.cycle_owner gets one row per owner in the cycle (what makes a
 * trajectory read proportional to that owner), lake_data.cast_operation one per
 * idempotent cast. The commit is forced to be synchronous: a coordinate is
 * only ever handed out for a flushed cycle.
 */
#include "lake.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "access.h"
#include "args.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "cycle.h"
#include "executor/spi.h"
#include "guc.h"
#include "landing.h"
#include "publish.h"
#include "seal.h"
#include "storage/lmgr.h"
#include "store.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/pg_lsn.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

static Oid
sealing_lock_object(void)
{
	Oid			relid = get_relname_relid("cycle", get_namespace_oid(LAKE_DATA_SCHEMA, false));

	if (!OidIsValid(relid))
		elog(ERROR, "lake: table lake_data.cycle is missing");
	return relid;
}

void
seal_lock(void)
{
	LockDatabaseObject(sealing_lock_object(), 0, 0, ExclusiveLock);
}

/*
 * Refuse (writing nothing) unless this sealer's base is the durable head.
 * Both are read from their indexes with the latest snapshot, after the
 * sealing lock was granted: a seal another process committed while we
 * waited for the lock must be seen (the statement's snapshot would not).
 */
static void
check_fence(const CycleCut *cut, int64 base)
{
	Snapshot	latest = GetLatestSnapshot();
	Datum		cycle_row[10];
	bool		cycle_nulls[10];
	Datum		writer_row[2];
	bool		writer_nulls[2];
	int64		head;
	int32		epoch;

	head = store_fetch("cycle", "cycle_pkey", latest, NULL, 0,
					   BackwardScanDirection, cycle_row, cycle_nulls) ?
		DatumGetInt64(cycle_row[0]) : 0;
	if (!store_fetch("writer", "writer_pkey", latest, NULL, 0,
					 ForwardScanDirection, writer_row, writer_nulls))
		elog(ERROR, "lake: the writer epoch row is missing");
	epoch = DatumGetInt32(writer_row[1]);

	if (epoch != cut->epoch || head != base)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("seal refused: its base is not the sealed head"),
				 errdetail("This sealer has epoch %d and base cycle " INT64_FORMAT "; the durable epoch is %d and the head is cycle " INT64_FORMAT ".",
						   cut->epoch, base, epoch, head)));
}

/* The landing an accepted cast becomes at 'position'. */
static void
landing_of(const CastRecord *r, int64 position, LakeLanding *l)
{
	memset(l, 0, sizeof(*l));
	l->owner_id = r->owner_id;
	l->position = position;
	l->seq = r->seq;
	l->lap = r->lap;
	l->flags = r->flags;
	l->from_phase = CAST_FROM(r);
	l->from_len = r->from_len;
	l->to_phase = CAST_TO(r);
	l->to_len = r->to_len;
	l->operation_id = CAST_OPERATION(r);
	l->operation_len = r->operation_len;
	l->payload = (const uint8_t *) CAST_PAYLOAD(r);
	l->payload_len = r->payload_len;
}

typedef struct OwnerSlot
{
	OwnerState *key;
	int			index;
} OwnerSlot;

static ArrayType *
int4_array(int32 *v, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = Int32GetDatum(v[i]);
	return construct_array(d, n, INT4OID, sizeof(int32), true, TYPALIGN_INT);
}

static ArrayType *
int8_array(int64 *v, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = Int64GetDatum(v[i]);
	return construct_array(d, n, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE);
}

static ArrayType *
varlena_array(Datum *d, int n, Oid type)
{
	return construct_array(d, n, type, -1, false, TYPALIGN_INT);
}

int64
seal_run(void)
{
	static SPIPlanPtr plan_cycle;
	static SPIPlanPtr plan_owners;
	static SPIPlanPtr plan_ops;
	double		started = (double) GetCurrentTimestamp() / 1000.0;
	CycleCut	cut;
	int64		base;
	int64		cycle;
	XLogRecPtr	lsn;
	HTAB	   *slots;
	HASHCTL		ctl;
	SealedOwner *owners;
	int32	   *owner_ids;
	int64	   *first_pos;
	int			nowners = 0;
	int64	   *positions;
	size_t		rawlen = LAKE_LANDINGS_HEADER;
	uint8	   *raw;
	size_t		pos;
	bytea	   *stored;
	int			nops = 0;
	Datum	   *op_owner;
	Datum	   *op_ids;
	Datum	   *op_digests;
	int64	   *op_seqs;

	store_connect();
	seal_lock();
	base = cycle_sealed_cycle();
	if (!cycle_cut(&cut, lake_cycle_max_casts))
	{
		store_finish();
		return 0;
	}
	check_fence(&cut, base);
	cycle = base + 1;
	lsn = GetXLogInsertRecPtr();

	/*
	 * Positions continue from each owner's durable position, which only
	 * sealers change and we hold the sealing lock: it is stable here.
	 */
	ctl.keysize = sizeof(OwnerState *);
	ctl.entrysize = sizeof(OwnerSlot);
	ctl.hcxt = CurrentMemoryContext;
	slots = hash_create("lake seal owners", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	owners = palloc(sizeof(SealedOwner) * cut.ncasts);
	owner_ids = palloc(sizeof(int32) * cut.ncasts);
	first_pos = palloc(sizeof(int64) * cut.ncasts);
	positions = palloc(sizeof(int64) * cut.ncasts);
	op_owner = palloc(sizeof(Datum) * cut.ncasts);
	op_ids = palloc(sizeof(Datum) * cut.ncasts);
	op_digests = palloc(sizeof(Datum) * cut.ncasts);
	op_seqs = palloc(sizeof(int64) * cut.ncasts);

	for (uint64 off = cut.start; off < cut.end;)
	{
		CastRecord *r = cycle_record(off);

		off = cycle_next(r, off);
		if (r->len != 0)
		{
			LakeLanding l;

			landing_of(r, 0, &l);
			rawlen += lake_landing_size(&l);
		}
	}
	raw = palloc(rawlen);
	pos = lake_landings_put_header(raw, (uint32) cut.ncasts);

	for (uint64 off = cut.start; off < cut.end;)
	{
		CastRecord *r = cycle_record(off);
		OwnerSlot  *os;
		SealedOwner *so;
		bool		found;
		LakeLanding l;

		off = cycle_next(r, off);
		if (r->len == 0)
			continue;
		os = hash_search(slots, &r->owner, HASH_ENTER, &found);
		if (!found)
		{
			os->index = nowners++;
			so = &owners[os->index];
			so->owner = r->owner;
			so->phase = r->owner->phase;
			so->lap = r->owner->lap;
			so->position = r->owner->position;
			so->count = 0;
			owner_ids[os->index] = r->owner_id;
			first_pos[os->index] = so->position + 1;
		}
		so = &owners[os->index];
		so->position++;
		so->count++;
		so->lap = r->lap;
		so->phase = r->phase;	/* as the cast was validated: no lookup here */
		positions[r->seq - cut.first_seq] = so->position;

		landing_of(r, so->position, &l);
		pos += lake_landing_put(raw + pos, &l);

		if (r->flags & LANDING_OPERATION)
		{
			bytea	   *d = palloc(VARHDRSZ + LAKE_DIGEST_LEN);

			SET_VARSIZE(d, VARHDRSZ + LAKE_DIGEST_LEN);
			memcpy(VARDATA(d), r->digest, LAKE_DIGEST_LEN);
			op_owner[nops] = Int32GetDatum(r->owner_id);
			op_ids[nops] = PointerGetDatum(cstring_to_text_with_len(CAST_OPERATION(r), r->operation_len));
			op_digests[nops] = PointerGetDatum(d);
			op_seqs[nops] = r->seq;
			nops++;
		}
	}
	stored = store_encode((const char *) raw, pos);

	{
		Oid			types[9] = {INT8OID, INT4OID, INT8OID, INT8OID, INT4OID,
		INT8OID, INT8OID, PG_LSNOID, BYTEAOID};
		Datum		values[9] = {Int64GetDatum(cycle), Int32GetDatum(cut.epoch),
			Int64GetDatum(cut.first_seq), Int64GetDatum(cut.last_seq),
			Int32GetDatum(cut.ncasts), Int64GetDatum((int64) pos),
			Int64GetDatum((int64) (VARSIZE(stored) - VARHDRSZ)), LSNGetDatum(lsn),
		PointerGetDatum(stored)};

		if (SPI_execute_plan(store_plan_once(&plan_cycle,
									  "INSERT INTO lake_data.cycle (cycle, epoch, first_seq, last_seq, casts, "
									  " bytes, stored_bytes, sealed_at, lsn, data) "
									  "VALUES ($1, $2, $3, $4, $5, $6, $7, pg_catalog.clock_timestamp(), $8, $9)",
									  9, types),
							 values, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "lake: could not insert cycle " INT64_FORMAT, cycle);
	}
	{
		Oid			types[4] = {INT4ARRAYOID, INT8OID, INT8ARRAYOID, INT8ARRAYOID};
		int64	   *last_pos = palloc(sizeof(int64) * nowners);
		Datum		values[4];

		for (int i = 0; i < nowners; i++)
			last_pos[i] = owners[i].position;
		values[0] = PointerGetDatum(int4_array(owner_ids, nowners));
		values[1] = Int64GetDatum(cycle);
		values[2] = PointerGetDatum(int8_array(first_pos, nowners));
		values[3] = PointerGetDatum(int8_array(last_pos, nowners));
		if (SPI_execute_plan(store_plan_once(&plan_owners,
									  "INSERT INTO lake_data.cycle_owner (owner_id, cycle, first_position, last_position) "
									  "SELECT u.o, $2, u.f, u.l FROM ROWS FROM (pg_catalog.unnest($1), "
									  " pg_catalog.unnest($3), pg_catalog.unnest($4)) AS u(o, f, l)",
									  4, types),
							 values, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "lake: could not index cycle " INT64_FORMAT, cycle);
	}
	if (nops > 0)
	{
		Oid			types[5] = {INT4ARRAYOID, TEXTARRAYOID, BYTEAARRAYOID, INT4OID, INT8ARRAYOID};
		Datum		values[5];

		values[0] = PointerGetDatum(construct_array(op_owner, nops, INT4OID, sizeof(int32), true, TYPALIGN_INT));
		values[1] = PointerGetDatum(varlena_array(op_ids, nops, TEXTOID));
		values[2] = PointerGetDatum(varlena_array(op_digests, nops, BYTEAOID));
		values[3] = Int32GetDatum(cut.epoch);
		values[4] = PointerGetDatum(int8_array(op_seqs, nops));
		if (SPI_execute_plan(store_plan_once(&plan_ops,
									  "INSERT INTO lake_data.cast_operation (owner_id, operation_id, digest, epoch, seq) "
									  "SELECT u.o, u.i, u.d, $4, u.s FROM ROWS FROM (pg_catalog.unnest($1), "
									  " pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($5)) AS u(o, i, d, s)",
									  5, types),
							 values, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "lake: could not record the idempotent casts of cycle " INT64_FORMAT, cycle);
	}

	ForceSyncCommit();
	publish_at_commit(&cut, cycle, lsn, owners, nowners, positions, started);
	store_finish();
	return cycle;
}
