/* Thread creation with a failure hook (common/thread.h). */
#include <errno.h>
#include <stdatomic.h>

#include "common/thread.h"

static atomic_llong fail_countdown; /* 0 = off; 1 = fail the next creation */

int64_t ferry_debug_fail_thread_after(int64_t k) { return atomic_exchange(&fail_countdown, (long long)k); }

int ferry_thread_create(pthread_t *th, void *(*fn)(void *), void *arg)
{
    long long c = atomic_load(&fail_countdown);
    while (c > 0)
        if (atomic_compare_exchange_weak(&fail_countdown, &c, c - 1)) {
            if (c == 1)
                return EAGAIN;
            break;
        }
    return pthread_create(th, NULL, fn, arg);
}
