/*
 * digest.c — SHA-256 through PostgreSQL's own cryptohash (OpenSSL when the
 * server was built with it).
 */
#include "lake.h"

#include "common/cryptohash.h"
#include "digest.h"

void
lake_sha256(const void *data, size_t len, uint8 *out)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);

	if (ctx == NULL ||
		pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, data, len) < 0 ||
		pg_cryptohash_final(ctx, out, LAKE_DIGEST_LEN) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not compute SHA-256: %s", pg_cryptohash_error(ctx))));
	pg_cryptohash_free(ctx);
}
