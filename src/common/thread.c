/* Thread creation with a failure hook (common/thread.h). */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>

#include "common/countdown.h"
#include "common/thread.h"

static atomic_llong fail_countdown; /* 0 = off; 1 = fail the next creation */

int64_t ferry_debug_fail_thread_after(int64_t k) { return atomic_exchange(&fail_countdown, (long long)k); }

int ferry_thread_create(pthread_t *th, void *(*fn)(void *), void *arg)
{
    if (ferry_countdown_fires(&fail_countdown))
        return EAGAIN;
    return pthread_create(th, NULL, fn, arg);
}

void ferry_thread_background(void)
{
#ifdef SCHED_BATCH
    struct sched_param sp = {.sched_priority = 0};
    (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
#endif
}
