/*
 * encode.h — stored chunks (codec.h) encoded with the backend's kept zstd
 * contexts at lake.compression_level, and its decompression context.
 */
#ifndef LAKE_ENCODE_H
#define LAKE_ENCODE_H

#include "lake.h"

/* Encode bytes as a stored chunk into a freshly palloc'd bytea. */
extern bytea *encode_record(const char *data, size_t len);
/* The same, stored raw (small records that would not compress). */
extern bytea *encode_record_raw(const char *data, size_t len);
/*
 * A payload chunk, into the backend's reused buffer, valid until the next
 * call, as the row of lake_data.chunk at 'place' (lake_chunk_place).
 */
extern bytea *encode_chunk(const char *data, size_t len, uint32 place);
/* The same, compressed with a prepared dictionary (NULL: none). */
struct ZSTD_CDict_s;
extern bytea *encode_chunk_dict(const char *data, size_t len,
								const struct ZSTD_CDict_s *cdict, uint32 place);
/* The backend's zstd decompression context (codec.h), kept. */
struct ZSTD_DCtx_s;
extern struct ZSTD_DCtx_s *encode_decompression_context(void);

#endif							/* LAKE_ENCODE_H */
