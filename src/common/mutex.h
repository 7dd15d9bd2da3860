/* Internal: ferry_mutex, a pthread mutex that in debug and sanitizer builds
 * (FERRY_DEBUG, see common/assert.h) records which thread holds it, so a
 * function that must be called with a lock held, or without it, says so in a
 * check instead of a comment:
 *
 *     FERRY_ASSERT_HELD(&l->lock);       FERRY_ASSERT_NOT_HELD(&l->lock);
 *
 * (pthread_mutex_trylock cannot tell: it fails as well when another thread
 * holds the lock.) In release builds it is a pthread_mutex_t, the calls are the
 * pthread ones and the checks compile to nothing. Waiting on a condition
 * variable goes through ferry_cond_wait so the owner stays right. */
#ifndef FERRY_COMMON_MUTEX_H
#define FERRY_COMMON_MUTEX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "common/assert.h"

typedef struct ferry_mutex {
    pthread_mutex_t m;
#if FERRY_DEBUG
    _Atomic(const void *) owner; /* ferry_thread_tag() of the holder; NULL when free */
#endif
} ferry_mutex;

/* An address unique to the calling thread among the live ones (assert.c). */
const void *ferry_thread_tag(void);

#if FERRY_DEBUG
/* For assertions only: whether the calling thread holds mu. Another thread's
 * lock and unlock can race with the read, hence the atomic; the answer about
 * the calling thread itself is always exact. */
static inline bool ferry_mutex_held(ferry_mutex *mu)
{
    return atomic_load_explicit(&mu->owner, memory_order_relaxed) == ferry_thread_tag();
}
#define FERRY_ASSERT_HELD(mu) FERRY_ASSERT(ferry_mutex_held(mu))
#define FERRY_ASSERT_NOT_HELD(mu) FERRY_ASSERT(!ferry_mutex_held(mu))
#else
#define FERRY_ASSERT_HELD(mu) FERRY_ASSERT((mu) != NULL)
#define FERRY_ASSERT_NOT_HELD(mu) FERRY_ASSERT((mu) != NULL)
#endif

/* The owner bookkeeping after taking and before giving up the pthread mutex. */
static inline void ferry_mutex_taken_(ferry_mutex *mu)
{
#if FERRY_DEBUG
    FERRY_ASSERT(atomic_load_explicit(&mu->owner, memory_order_relaxed) == NULL);
    atomic_store_explicit(&mu->owner, ferry_thread_tag(), memory_order_relaxed);
#else
    (void)mu;
#endif
}

static inline void ferry_mutex_leaving_(ferry_mutex *mu)
{
#if FERRY_DEBUG
    FERRY_ASSERT(ferry_mutex_held(mu));
    atomic_store_explicit(&mu->owner, NULL, memory_order_relaxed);
#else
    (void)mu;
#endif
}

static inline int ferry_mutex_init(ferry_mutex *mu)
{
#if FERRY_DEBUG
    atomic_init(&mu->owner, NULL);
#endif
    return pthread_mutex_init(&mu->m, NULL);
}

static inline void ferry_mutex_destroy(ferry_mutex *mu) { pthread_mutex_destroy(&mu->m); }

static inline void ferry_mutex_lock(ferry_mutex *mu)
{
    pthread_mutex_lock(&mu->m);
    ferry_mutex_taken_(mu);
}

static inline void ferry_mutex_unlock(ferry_mutex *mu)
{
    ferry_mutex_leaving_(mu);
    pthread_mutex_unlock(&mu->m);
}

static inline void ferry_cond_wait(pthread_cond_t *cv, ferry_mutex *mu)
{
    ferry_mutex_leaving_(mu);
    pthread_cond_wait(cv, &mu->m);
    ferry_mutex_taken_(mu);
}

static inline int ferry_cond_timedwait(pthread_cond_t *cv, ferry_mutex *mu,
                                       const struct timespec *abstime)
{
    ferry_mutex_leaving_(mu);
    int rc = pthread_cond_timedwait(cv, &mu->m, abstime);
    ferry_mutex_taken_(mu);
    return rc;
}

#endif
