/*
 * digest.h — SHA-256 content identity, on PostgreSQL's cryptohash.
 */
#ifndef LAKE_DIGEST_H
#define LAKE_DIGEST_H

#include "lake.h"

extern void lake_sha256(const void *data, size_t len, uint8 *out);

#endif							/* LAKE_DIGEST_H */
