/* Internal: thread creation through one place, so that a test can make the
 * k-th creation fail as a process out of threads or memory does (EAGAIN) and
 * check that every path that starts a thread survives it. */
#ifndef FERRY_COMMON_THREAD_H
#define FERRY_COMMON_THREAD_H

#include <pthread.h>
#include <stdint.h>

/* pthread_create with default attributes: 0, or its error number. */
int ferry_thread_create(pthread_t *th, void *(*fn)(void *), void *arg);
/* Marks the calling thread as background throughput work (Linux:
 * SCHED_BATCH, no privilege needed): the scheduler then does not let it
 * preempt a thread on waking, so a loader's workers, woken when a slot
 * frees, do not push the training thread off its core inside next(). They
 * keep their fair share of the CPU. Best effort: a no-op elsewhere. */
void ferry_thread_background(void);
/* Test hook: the k-th ferry_thread_create from now fails with EAGAIN (1 = the
 * next one; 0 = never). Process-wide, atomic. Returns the countdown it
 * replaces: > 0 means the planned failure never came. */
int64_t ferry_debug_fail_thread_after(int64_t k);

#endif
