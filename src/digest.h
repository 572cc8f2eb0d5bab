/*
 * digest.h — SHA-256 content identity, on PostgreSQL's cryptohash.
 */
#ifndef LAKE_DIGEST_H
#define LAKE_DIGEST_H

#include "lake.h"

/* At server start, in the postmaster: OpenSSL set up once for all backends. */
extern void lake_digest_init(void);
extern void lake_sha256(const void *data, size_t len, uint8 *out);

/* Incremental SHA-256 over a stream of pieces. */
typedef struct pg_cryptohash_ctx LakeDigest;
extern LakeDigest *lake_digest_begin(void);
extern void lake_digest_update(LakeDigest *ctx, const void *data, size_t len);
extern void lake_digest_end(LakeDigest *ctx, uint8 *out);

/*
 * The content a cast's operation id stands for: its move and its payload
 * (the landing's MOVE and PAYLOAD parts; nothing else of it).
 */
struct LakeLanding;
extern void lake_landing_digest(const struct LakeLanding *l, uint8 *out);

#endif							/* LAKE_DIGEST_H */
