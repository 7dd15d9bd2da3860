/* Internal: the test hooks' countdown (allocations, file I/O, threads, folder
 * reads): 0 is off; k > 0 makes the k-th operation from now fail. */
#ifndef FERRY_COMMON_COUNTDOWN_H
#define FERRY_COMMON_COUNTDOWN_H

#include <stdatomic.h>
#include <stdbool.h>

/* Counts one operation down; true for the one that must fail. Atomic: of
 * threads racing at 1, exactly one sees it fire. */
static inline bool ferry_countdown_fires(atomic_llong *c)
{
    long long v = atomic_load(c);
    while (v > 0)
        if (atomic_compare_exchange_weak(c, &v, v - 1))
            return v == 1;
    return false;
}

#endif
