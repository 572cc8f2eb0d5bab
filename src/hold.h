/*
 * hold.h — lake.role_max_hold: how long one transaction may keep what
 * other sessions' calls wait for (SECURITY.md, "Denial of service").
 */
#ifndef LAKE_HOLD_H
#define LAKE_HOLD_H

/*
 * The caller now holds, to the end of its transaction, something other
 * sessions wait for (an admission permit, a dataset's append lock, the
 * owner-creation lock). The first call in a transaction starts the clock:
 * past lake.role_max_hold the session is ended, which lets go of all of it.
 * 'lock': it is one of the two locks, which a prepared transaction would
 * keep past the bound (a permit is given back at PREPARE).
 */
extern void hold_begin(bool lock);

#endif							/* LAKE_HOLD_H */
