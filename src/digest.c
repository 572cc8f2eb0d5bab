/*
 * digest.c — SHA-256 through PostgreSQL's own cryptohash (OpenSSL when the
 * server was built with it).
 */
#include "lake.h"

#include "common/cryptohash.h"
#include "digest.h"

static void
digest_failed(pg_cryptohash_ctx *ctx)
{
	ereport(ERROR,
			(errcode(ERRCODE_INTERNAL_ERROR),
			 errmsg("could not compute SHA-256: %s", pg_cryptohash_error(ctx))));
}

LakeDigest *
lake_digest_begin(void)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);

	if (ctx == NULL || pg_cryptohash_init(ctx) < 0)
		digest_failed(ctx);
	return ctx;
}

void
lake_digest_update(LakeDigest *ctx, const void *data, size_t len)
{
	if (pg_cryptohash_update(ctx, data, len) < 0)
		digest_failed(ctx);
}

void
lake_digest_end(LakeDigest *ctx, uint8 *out)
{
	if (pg_cryptohash_final(ctx, out, LAKE_DIGEST_LEN) < 0)
		digest_failed(ctx);
	pg_cryptohash_free(ctx);
}

void
lake_sha256(const void *data, size_t len, uint8 *out)
{
	LakeDigest *ctx = lake_digest_begin();

	lake_digest_update(ctx, data, len);
	lake_digest_end(ctx, out);
}
