/*
 * digest.c — SHA-256 through PostgreSQL's own cryptohash (OpenSSL when the
 * server was built with it), and, for the one-shot digest of every append,
 * through OpenSSL directly with the algorithm fetched once and one context
 * kept per backend: a cryptohash context costs an allocation and an
 * algorithm fetch each time, a measurable part of a replay.
 */
#include "lake.h"

#include <openssl/err.h>
#include <openssl/evp.h>

#include "common/cryptohash.h"
#include "digest.h"
#include "landing.h"
#include "miscadmin.h"

/*
 * PostgreSQL's cryptohash says why only in words: no context is no memory
 * for one, and OpenSSL's "initialization error" of a context, with the
 * algorithm fetched at start, is no memory for its state (digest_error).
 */
static void
digest_failed(pg_cryptohash_ctx *ctx)
{
	const char *why = pg_cryptohash_error(ctx);

	if (ctx == NULL || strstr(why, "initialization error") != NULL ||
		strstr(why, "malloc failure") != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Could not set up a SHA-256: %s.", why)));
	ereport(ERROR,
			(errcode(ERRCODE_INTERNAL_ERROR),
			 errmsg_internal("could not compute SHA-256: %s", why)));
}

LakeDigest *
lake_digest_begin(void)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);

	if (ctx == NULL || pg_cryptohash_init(ctx) < 0)
		digest_failed(ctx);
	return ctx;
}

#define DIGEST_PIECE ((size_t) 8 * 1024 * 1024)

/* In pieces, as lake_sha256: a staged chunk may be a gigabyte. */
void
lake_digest_update(LakeDigest *ctx, const void *data, size_t len)
{
	while (len > 0)
	{
		size_t		piece = Min(len, DIGEST_PIECE);

		CHECK_FOR_INTERRUPTS();
		if (pg_cryptohash_update(ctx, data, piece) < 0)
			digest_failed(ctx);
		data = (const char *) data + piece;
		len -= piece;
	}
}

void
lake_digest_end(LakeDigest *ctx, uint8 *out)
{
	if (pg_cryptohash_final(ctx, out, LAKE_DIGEST_LEN) < 0)
		digest_failed(ctx);
	pg_cryptohash_free(ctx);
}

/*
 * OpenSSL's failures, which name no cause but their routine's: with the
 * algorithm fetched (at start) and a context that has worked, a context
 * that cannot be set up (the provider's state is allocated there) has run
 * out of memory, as has anything OpenSSL says so of.
 */
static void
digest_error(void)
{
	unsigned long e = ERR_get_error();

	ERR_clear_error();
	if (ERR_GET_REASON(e) == ERR_R_MALLOC_FAILURE ||
		(ERR_GET_LIB(e) == ERR_LIB_EVP && ERR_GET_REASON(e) == EVP_R_INITIALIZATION_ERROR))
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("OpenSSL could not set up what a SHA-256 needs: %s.",
						   ERR_error_string(e, NULL))));
	ereport(ERROR,
			(errcode(ERRCODE_INTERNAL_ERROR),
			 errmsg_internal("could not compute SHA-256"),
			 e != 0 ? errdetail("OpenSSL: %s.", ERR_error_string(e, NULL)) : 0));
}

static EVP_MD *sha256 = NULL;

void
lake_digest_init(void)
{
	unsigned char out[EVP_MAX_MD_SIZE];
	unsigned int outlen;

	/*
	 * In the postmaster: OpenSSL's one-time set-up (its library context,
	 * providers, the algorithm) is done once and inherited by every
	 * backend. Done lazily in a backend, an allocation failing inside it
	 * is remembered by OpenSSL, and every digest of that backend fails
	 * until it exits. A failure here is left to the backends to meet.
	 */
	if ((sha256 = EVP_MD_fetch(NULL, "SHA256", NULL)) != NULL)
		(void) EVP_Digest("", 0, out, &outlen, sha256, NULL);
}

void
lake_sha256(const void *data, size_t len, uint8 *out)
{
	static EVP_MD_CTX *ctx = NULL;
	unsigned int outlen = 0;

	if (sha256 == NULL && (sha256 = EVP_MD_fetch(NULL, "SHA256", NULL)) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg_internal("could not compute SHA-256: the algorithm is not available")));
	if (ctx == NULL && (ctx = EVP_MD_CTX_new()) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	/*
	 * In pieces, so a cancel is served within a piece of a payload that may
	 * be a gigabyte; a cancel leaves only the kept context, which the next
	 * init resets.
	 */
	if (EVP_DigestInit_ex(ctx, sha256, NULL) != 1)
		digest_error();
	while (len > 0)
	{
		size_t		piece = Min(len, DIGEST_PIECE);

		CHECK_FOR_INTERRUPTS();
		if (EVP_DigestUpdate(ctx, data, piece) != 1)
			digest_error();
		data = (const char *) data + piece;
		len -= piece;
	}
	if (EVP_DigestFinal_ex(ctx, out, &outlen) != 1 || outlen != LAKE_DIGEST_LEN)
		digest_error();
}

void
lake_landing_digest(const LakeLanding *l, uint8 *out)
{
	LakeDigest *d = lake_digest_begin();
	uint8		flags = l->flags & (LANDING_MOVE | LANDING_PAYLOAD);
	static const char nul = '\0';

	lake_digest_update(d, &flags, 1);
	if (flags & LANDING_MOVE)
	{
		lake_digest_update(d, l->from_phase, l->from_len);
		lake_digest_update(d, &nul, 1);
		lake_digest_update(d, l->to_phase, l->to_len);
		lake_digest_update(d, &nul, 1);
	}
	if (flags & LANDING_PAYLOAD)
		lake_digest_update(d, l->payload, l->payload_len);
	lake_digest_end(d, out);
}
