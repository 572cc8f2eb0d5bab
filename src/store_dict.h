/*
 * store_dict.h — per-dataset zstd compression dictionaries (store_dict.c).
 *
 *   lake_data.dictionary  (id, dataset_id, created_at, samples, checksum, data)
 *
 * A dictionary is trained from a dataset's own small payloads
 * (lake.train_dictionary, dict.c). From then on the dataset's newest
 * dictionary compresses every payload chunk of up to LAKE_DICT_MAX_INPUT
 * bytes that an append stores in its version row; larger chunks and staged
 * chunks are compressed without one (a dictionary only helps while a frame
 * has little history of its own: on 64 kB of JSON lines it saved under 2 %
 * for twice the CPU). The zstd frame names the dictionary by id, so a read
 * finds it whatever dataset it came from; versions written before the
 * dictionary existed carry no id and decode as before.
 *
 * A dictionary's bytes carry a CRC-32C (the checksum column), verified
 * every time a session loads them; a dictionary's header also holds its
 * id, which must match its row. Loaded dictionaries are kept per session,
 * prepared for compression and decompression, until an invalidation
 * (store_generation(): a new dictionary, any change to the table, the
 * extension dropped) or an abort.
 */
#ifndef LAKE_STORE_DICT_H
#define LAKE_STORE_DICT_H

#include "store.h"

/* The largest chunk compressed with a dictionary. */
#define LAKE_DICT_MAX_INPUT (16 * 1024)

/* The size of a trained dictionary. */
#define LAKE_DICT_BYTES (16 * 1024)

/*
 * Encode a version's chunk 0 (checked at LAKE_PLACE_NONE: codec.h) into
 * encode_chunk's buffer, with the dataset's dictionary when
 * it has one and the chunk is small enough. XX001 if that dictionary is
 * damaged.
 */
extern bytea *store_dict_encode_chunk(int32 dataset_id, const char *data,
									  size_t len);

/*
 * Decode a stored chunk (codec.h) of the form the caller expects, checked
 * at 'place', into 'out' (room for 'cap' bytes) with the dictionary it
 * names, if any: NULL, or why it cannot be read (the chunk damaged or out
 * of its place, its dictionary missing or damaged).
 */
extern const char *store_dict_decode(const uint8 *in, size_t len, bool bare,
									 uint32 place, uint8 *out, size_t cap,
									 size_t *outlen);

/*
 * Store a trained dictionary (ZDICT format, modified in place: its header
 * gets the new id) for a dataset; returns its id. The store is connected.
 */
extern int32 store_dict_insert(int32 dataset_id, uint8 *dict, size_t len,
							   int32 samples);

#endif							/* LAKE_STORE_DICT_H */
