/* Scratch device memory for the GPU kernels' split reductions (partials that a
 * second kernel combines), kept between calls: a training step makes the same
 * calls every time, so after the first step none of them allocates (issue 41:
 * zero allocator calls per step).
 *
 * A block is taken by one call and given back once the call's kernels are
 * queued, so two host threads never share one. An idle block remembers the
 * stream it last served and is handed only to calls on that stream, where
 * stream order makes the reuse safe (the caching allocator's own rule): the
 * smallest that fits, so that a step's small and large users each keep theirs
 * (handing the large one to a small user made the next large user allocate,
 * every step). A call on another stream, or one that needs more, gets a block
 * of its own. A device keeps at most SCRATCH_KEEP idle blocks: a block given
 * back to a full pool takes the place of one that served another stream (a
 * dead stream's blocks would otherwise fill the pool for good), else it is
 * freed. ferry_memory_empty_cache frees them all. */
#include <pthread.h>

#include "common/error.h"
#include "device/device_internal.h"
#include "model/kernels/kernels.h"

#define SCRATCH_DEVICES 16
#define SCRATCH_KEEP 8
#define SCRATCH_MIN ((size_t)4 << 10)

typedef struct idle_block {
    void *p;
    size_t bytes;
    uint64_t sid; /* ferry_stream_id of the stream it last served */
} idle_block;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static idle_block idle[SCRATCH_DEVICES][SCRATCH_KEEP]; /* guarded by lock */
static int nidle[SCRATCH_DEVICES];                     /* guarded by lock */
static pthread_once_t hook_once = PTHREAD_ONCE_INIT;

static void empty_hook(int dev)
{
    if (dev < 0 || dev >= SCRATCH_DEVICES)
        return;
    idle_block gone[SCRATCH_KEEP];
    pthread_mutex_lock(&lock);
    int n = nidle[dev];
    for (int i = 0; i < n; i++)
        gone[i] = idle[dev][i];
    nidle[dev] = 0;
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < n; i++)
        ferry_device_free(ferry_cuda(dev), gone[i].p); /* stream-ordered behind its last use */
}

static void register_hook(void) { (void)ferry_memory_add_empty_cache_hook_(empty_hook); }

ferry_status fk_scratch_take(const fk_ctx *c, size_t bytes, fk_scratch *out)
{
    *out = (fk_scratch){0};
    int dev = c->dev.index;
    if (c->dev.type != FERRY_DEVICE_CUDA || dev < 0 || dev >= SCRATCH_DEVICES)
        return ferry_device_alloc(c->dev, bytes, c->stream, &out->p); /* not pooled: given back by a free */
    uint64_t sid = ferry_stream_id(c->stream);
    pthread_mutex_lock(&lock);
    int best = -1;
    for (int i = 0; i < nidle[dev]; i++) {
        const idle_block *b = &idle[dev][i];
        if (b->sid == sid && b->bytes >= bytes && (best < 0 || b->bytes < idle[dev][best].bytes))
            best = i;
    }
    if (best >= 0) {
        out->p = idle[dev][best].p;
        out->bytes = idle[dev][best].bytes;
        idle[dev][best] = idle[dev][--nidle[dev]];
    }
    pthread_mutex_unlock(&lock);
    if (out->p)
        return FERRY_OK;
    size_t want = SCRATCH_MIN;
    while (want < bytes && want <= SIZE_MAX / 2)
        want *= 2;
    if (want < bytes)
        want = bytes;
    pthread_once(&hook_once, register_hook);
    ferry_status st = ferry_device_alloc(c->dev, want, c->stream, &out->p);
    if (st == FERRY_OK)
        out->bytes = want;
    return st;
}

void fk_scratch_give(const fk_ctx *c, fk_scratch *s)
{
    if (!s->p)
        return;
    int dev = c->dev.index;
    void *drop = s->p;
    if (c->dev.type == FERRY_DEVICE_CUDA && dev >= 0 && dev < SCRATCH_DEVICES && s->bytes) {
        uint64_t sid = ferry_stream_id(c->stream);
        idle_block mine = {s->p, s->bytes, sid};
        pthread_mutex_lock(&lock);
        if (nidle[dev] < SCRATCH_KEEP) {
            idle[dev][nidle[dev]++] = mine;
            drop = NULL;
        } else {
            for (int i = 0; i < nidle[dev]; i++)
                if (idle[dev][i].sid != sid) {
                    drop = idle[dev][i].p; /* freed in its own stream's order */
                    idle[dev][i] = mine;
                    break;
                }
        }
        pthread_mutex_unlock(&lock);
    }
    if (drop)
        ferry_device_free(c->dev, drop); /* stream-ordered: reused only behind the call */
    *s = (fk_scratch){0};
}
