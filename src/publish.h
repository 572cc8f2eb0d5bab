/*
 * publish.h — what a seal makes true, made true only when its transaction
 * commits: the owners' live states, the freed ring space, the sealed head,
 * and the coordinates of the sessions waiting for its receipts.
 */
#ifndef LAKE_PUBLISH_H
#define LAKE_PUBLISH_H

#include "lake.h"

#include "cycle.h"

extern void publish_init(void);

/*
 * Called by the sealer, inside the seal's transaction, once the cycle is
 * written: at COMMIT it is published, at ABORT the cut is given back.
 */
extern void publish_at_commit(const CycleCut *cut, int64 cycle, XLogRecPtr lsn,
							  const SealedOwner *owners, int nowners,
							  const int64 *positions, double started_ms);

#endif							/* LAKE_PUBLISH_H */
