/* The workers' side of the loader: claim one sample of the oldest batch in
 * flight, decode it straight into its place in the slot, and when a slot's last
 * sample lands, queue the slot's one H2D copy on that slot's own copy stream
 * (one copy stream per slot). The caller's thread runs the same code when
 * num_workers is FERRY_LOADER_NO_WORKERS. */
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "common/thread.h"
#include "ferry/rng.h"
#include "loader/internal.h"

/* One sample claimed by a worker: claimed under the lock, decoded without it,
 * recorded under it again. */
typedef struct task {
    ferry_slot *slot;
    uint64_t gen;             /* l->generation when claimed */
    size_t pos;               /* place in the slot */
    size_t order_pos;         /* place in the epoch's order */
    size_t index;             /* the dataset sample that landed there (after skips) */
    uint64_t epoch;           /* l->epoch when claimed: names the replacement draws */
    int64_t label;
    ferry_status st;
    char msg[FERRY_ERROR_MAX]; /* when st != OK: the error, naming the sample */
    size_t skipped[8];        /* the first samples skipped for this place, named in the stats */
    size_t nskipped, total_skipped;
    int64_t allocs;           /* host allocations made while decoding */
    bool warm;                /* the loader was warm when the task was claimed */
} task;

void ferry_slots_assign(ferry_loader *l)
{
    FERRY_ASSERT_HELD(&l->lock);
    for (size_t k = 0; k < l->nslots && l->next_assign < l->num_batches; k++) {
        ferry_slot *s = &l->slots[k];
        if (s->state != SLOT_FREE)
            continue;
        size_t b = l->next_assign++;
        size_t first = b * l->batch;
        FERRY_ASSERT(first < l->epoch_len);
        s->batch = b;
        s->count = l->epoch_len - first < l->batch ? l->epoch_len - first : l->batch;
        s->next_pos = 0;
        s->done = 0;
        s->err = FERRY_OK;
        s->errmsg[0] = '\0';
        s->skipped = 0;
        s->nskipped_idx = 0;
        s->state = SLOT_FILLING;
    }
}

void ferry_slot_collect_timing(ferry_loader *l, ferry_slot *s, bool wait)
{
    FERRY_ASSERT_HELD(&l->lock);
    if (!s->timing_pending)
        return;
    if (!wait && !ferry_event_query(s->copy_done))
        return;
    if (wait && ferry_event_synchronize(s->copy_done) != FERRY_OK)
        return;
    float ms = 0.0f;
    if (ferry_event_elapsed_ms(s->copy_start, s->copy_done, &ms) == FERRY_OK) {
        l->stats.h2d_s += ms * 1e-3;
        ferry_trace_event(l, "h2d copy", 1000, s->copy_issued, s->copy_issued + ms * 1e-3,
                          "batch", s->batch);
    }
    s->timing_pending = false;
}

/* The FILLING slot with the oldest batch that still has samples to hand out. Lock held. */
static ferry_slot *pick_slot(ferry_loader *l, ferry_slot *only, bool *must_sync)
{
    FERRY_ASSERT_HELD(&l->lock);
    ferry_slot *best = NULL;
    *must_sync = false;
    for (size_t k = 0; k < l->nslots; k++) {
        ferry_slot *s = &l->slots[k];
        if (only && s != only)
            continue;
        if (s->state != SLOT_FILLING || s->next_pos == s->count || s->host_syncing)
            continue;
        if (!best || s->batch < best->batch)
            best = s;
    }
    if (best && best->host_in_copy)
        *must_sync = true;
    return best;
}

/* Queues the slot's single H2D copy (images and labels together) on the slot's
 * own copy stream, after the caller's stream has released the slot's device
 * memory. Lock not held, and no other lock: the stream and the three events are
 * the slot's alone, and only the worker that landed the slot's last sample
 * calls this, while the slot is still FILLING and counted in inflight (so no
 * other worker picks it, deliver cannot hand it out and reset waits for it).
 * Copies of two slots may be queued at once from two threads: each sequence
 * is ordered on its own stream, and nothing orders one slot's copy after
 * another's. */
static ferry_status issue_copy(ferry_loader *l, ferry_slot *s, bool wait_released)
{
    FERRY_ASSERT_NOT_HELD(&l->lock);
    ferry_status st = FERRY_OK;
    if (wait_released)
        st = ferry_stream_wait_event(s->copy_stream, s->released);
    if (st == FERRY_OK)
        st = ferry_event_record(s->copy_start, s->copy_stream);
    if (st == FERRY_OK)
        st = ferry_memcpy(s->dev, s->host, l->slot_bytes, FERRY_COPY_H2D, l->dev, s->copy_stream);
    if (st == FERRY_OK)
        st = ferry_event_record(s->copy_done, s->copy_stream);
    return st;
}

/* *a += v as one atomic step (stats_get reads and resets it under the lock the
 * worker does not hold). A CAS loop: `+=` on an _Atomic double needs libatomic. */
static void add_seconds(_Atomic double *a, double v)
{
    double old = atomic_load_explicit(a, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(a, &old, old + v, memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

/* Decodes dataset sample `index`, every field, into place pos of the slot
 * whose host buffer is host (the image in the wire format). Lock not held. */
static ferry_status decode_one(ferry_loader *l, ferry_worker *w, size_t index, ferry_slot *slot,
                               size_t pos, int64_t *label)
{
    uint8_t *host = slot->host;
    FERRY_ASSERT_NOT_HELD(&l->lock);
    ferry_sample_timing t = {0};
    ferry_sample_ctx ctx = {
        .seed = l->cfg.seed,
        .epoch = l->epoch,
        .train = !l->cfg.eval,
        .scratch = w->scratch,
        .timing = &t,
    };
    /* Every field straight into its place in the slot; the image through the
     * worker's buffer when it crosses as f32. */
    uint8_t *image = host + pos * l->wire_sample_bytes;
    void *dsts[FERRY_FIELD_MAX];
    size_t lengths[FERRY_FIELD_MAX];
    ferry_loader_field_dsts_(l, host, pos, w->sample_buf ? w->sample_buf : image, label, dsts);
    ferry_status st = ferry_dataset_get_fields(l->ds, index, dsts, lengths, &ctx);
    if (st == FERRY_OK)
        ferry_loader_store_lengths_(l, host, pos, lengths);
    if (st == FERRY_OK && l->field_out_bytes && !l->gpu)
        ferry_loader_convert_sample_fields_(l, slot, pos);
    if (st == FERRY_OK && w->sample_buf) {
        double t0 = ferry_thread_cpu_now();
        ferry_convert_sample_cpu(&l->wire_spec, w->sample_buf, image);
        t.transform_s += ferry_thread_cpu_now() - t0;
    }
    add_seconds(&w->read_s, t.read_s);
    add_seconds(&w->decode_s, t.decode_s);
    add_seconds(&w->transform_s, t.transform_s);
    return st;
}

/* Lock held. */
static void note_skipped(ferry_loader *l, size_t index)
{
    FERRY_ASSERT_HELD(&l->lock);
    l->stats.skipped++;
    size_t n = l->stats.num_skipped_names;
    if (n < FERRY_LOADER_MAX_SKIPPED_NAMES) {
        const char *name = ferry_dataset_sample_name(l->ds, index);
        if (name)
            snprintf(l->skipped_names[n], sizeof l->skipped_names[n], "%s", name);
        else
            snprintf(l->skipped_names[n], sizeof l->skipped_names[n], "sample %zu", index);
        l->stats.skipped_names[n] = l->skipped_names[n];
        l->stats.num_skipped_names = n + 1;
    }
}

/* Keeps index among the slot's first skipped samples, in index order (the order
 * workers finish in is not deterministic). Lock held. */
static void add_skipped_index(ferry_slot *s, size_t index)
{
    const size_t keep = sizeof s->skipped_idx / sizeof s->skipped_idx[0];
    if (s->nskipped_idx == keep)
        return;
    size_t i = s->nskipped_idx++;
    for (; i > 0 && s->skipped_idx[i - 1] > index; i--)
        s->skipped_idx[i] = s->skipped_idx[i - 1];
    s->skipped_idx[i] = index;
}

void ferry_slot_count_skips(ferry_loader *l, const ferry_slot *s)
{
    FERRY_ASSERT_HELD(&l->lock);
    for (size_t i = 0; i < s->nskipped_idx; i++)
        note_skipped(l, s->skipped_idx[i]);
    l->stats.skipped += s->skipped - s->nskipped_idx;
}

/* The slot's previous copy may still read its host memory: wait for it
 * (normally long done) before anyone writes there. Lock held; released while
 * waiting, and the slot is marked so that no other worker picks it meanwhile. */
static void wait_host_free(ferry_loader *l, ferry_slot *s)
{
    FERRY_ASSERT_HELD(&l->lock);
    FERRY_ASSERT(s->host_in_copy && !s->host_syncing);
    s->host_syncing = true;
    ferry_mutex_unlock(&l->lock);
    ferry_status st = l->gpu ? ferry_event_synchronize(s->copy_done) : FERRY_OK;
    ferry_mutex_lock(&l->lock);
    s->host_syncing = false;
    if (st == FERRY_OK) {
        s->host_in_copy = false;
        ferry_slot_collect_timing(l, s, false);
    } else if (l->failed == FERRY_OK) {
        l->failed = st;
        ferry_format_cut(l->failmsg, sizeof l->failmsg, "waiting for a copy: %s",
                         ferry_last_error());
        pthread_cond_broadcast(&l->ready_cv);
    }
    pthread_cond_broadcast(&l->work_cv);
}

/* Takes the slot's next place for worker w. Lock held. */
static void claim_sample(ferry_loader *l, ferry_worker *w, ferry_slot *s, task *t)
{
    FERRY_ASSERT_HELD(&l->lock);
    FERRY_ASSERT(s->state == SLOT_FILLING && s->next_pos < s->count);
    const size_t pos = s->next_pos++;
    *t = (task){.slot = s, .gen = l->generation, .pos = pos, .warm = l->warm};
    t->order_pos = s->batch * l->batch + pos;
    FERRY_ASSERT(t->order_pos < l->epoch_len);
    t->index = l->order[t->order_pos];
    t->epoch = l->epoch;
    w->busy = true;
    w->slot = (size_t)(s - l->slots);
    w->pos = t->pos;
    w->index = t->index;
    w->start = ferry_now();
    l->inflight++;
}

/* FERRY_OK, or FERRY_ERR_TIMEOUT when the worker's sample took longer than
 * sample_timeout_s. Lock not held. */
static ferry_status check_sample_time(ferry_loader *l, const ferry_worker *w, size_t index)
{
    if (l->cfg.sample_timeout_s <= 0 || ferry_now() - w->start <= l->cfg.sample_timeout_s)
        return FERRY_OK;
    const char *name = ferry_dataset_sample_name(l->ds, index);
    return ferry_fail(FERRY_ERR_TIMEOUT, "%s%stook %.3f s, longer than the %.3f s timeout",
                      name ? name : "", name ? ": " : "", ferry_now() - w->start,
                      l->cfg.sample_timeout_s);
}

/* Decodes candidate index into dst unless it is known to fail; a failure is
 * remembered (l->known_bad), so a run of bad samples is decoded once each. */
static ferry_status try_candidate(ferry_loader *l, ferry_worker *w, task *t, size_t index)
{
    if (atomic_load_explicit(&l->known_bad[index], memory_order_relaxed))
        return FERRY_ERR_FORMAT;
    ferry_status st = decode_one(l, w, index, t->slot, t->pos, &t->label);
    if (st != FERRY_OK)
        atomic_store_explicit(&l->known_bad[index], 1, memory_order_relaxed);
    else
        t->index = index;
    return st;
}

/* Policy skip: this place's own sample failed; it is counted and named once,
 * here, and a replacement drawn at random from the epoch's order, named by
 * (seed, epoch, place), takes the place. Random, not the next in order: a run
 * of N bad samples would otherwise deliver the good one after it N + 1 times
 * and decode the run N^2 / 2 times. The draw does not depend on thread timing
 * (known_bad only spares decoding a sample that fails again). After 64 bad
 * draws (a dataset mostly bad) the places after this one are tried in order.
 * Lock not held. */
static void skip_to_good_sample(ferry_loader *l, ferry_worker *w, task *t)
{
    atomic_store_explicit(&l->known_bad[t->index], 1, memory_order_relaxed);
    t->skipped[t->nskipped++] = t->index;
    t->total_skipped++;
    const ferry_status first = t->st;
    ferry_rng r;
    ferry_rng_init(&r, l->cfg.seed, FERRY_RNG_SKIP | t->epoch, t->order_pos);
    for (int k = 0; k < 64 && t->st != FERRY_OK; k++)
        t->st = try_candidate(l, w, t, l->order[ferry_rng_below(&r, l->epoch_len)]);
    for (size_t k = 1; k < l->epoch_len && t->st != FERRY_OK; k++)
        t->st = try_candidate(l, w, t, l->order[(t->order_pos + k) % l->epoch_len]);
    if (t->st != FERRY_OK)
        t->st = ferry_fail(first, "it failed, and so did every other sample of the epoch: "
                           "nothing to replace it with");
}

/* t->msg from the thread's last error: "sample N (name): reason". A failed
 * ferry_dataset_get names the sample in front (its subject, see
 * common/error.h); the loader writes the index and the name its own way, so it
 * takes the reason without that subject and the name appears once. */
static void describe_failure(ferry_loader *l, task *t)
{
    const char *name = ferry_dataset_sample_name(l->ds, t->index);
    char index[32];
    snprintf(index, sizeof index, "sample %zu", t->index);
    const char *err = ferry_error_reason(name ? name : index);
    if (name)
        ferry_format_cut(t->msg, sizeof t->msg, "%s (%s): %s", index, name, err);
    else
        ferry_format_cut(t->msg, sizeof t->msg, "%s: %s", index, err);
}

/* Decodes the claimed sample into its place in the slot. Lock not held. */
static void run_task(ferry_loader *l, ferry_worker *w, task *t)
{
    FERRY_ASSERT_NOT_HELD(&l->lock);
    int64_t allocs0 = ferry_debug_thread_alloc_count();
    /* Under SKIP a sample that failed before (met as another place's
     * replacement candidate) is not decoded again: it is skipped as failed. */
    if (l->known_bad && atomic_load_explicit(&l->known_bad[t->index], memory_order_relaxed))
        t->st = ferry_fail(FERRY_ERR_IO, "failed to decode earlier in this loader's life");
    else
        t->st = decode_one(l, w, t->index, t->slot, t->pos, &t->label);
    if (t->st == FERRY_OK)
        t->st = check_sample_time(l, w, t->index);
    if (t->st != FERRY_OK && t->st != FERRY_ERR_TIMEOUT && l->cfg.on_error == FERRY_ON_ERROR_SKIP)
        skip_to_good_sample(l, w, t);
    if (t->st != FERRY_OK)
        describe_failure(l, t);
    double end = ferry_now();
    t->allocs = ferry_debug_thread_alloc_count() - allocs0;
    ferry_trace_event(l, "decode", w->id + 1, w->start, end, "index", t->index);
}

/* Stores the task's outcome in its slot. True when it was the slot's last
 * sample: the task then still counts in l->inflight, and finish_slot drops it.
 * Lock held. */
static bool record_task(ferry_loader *l, ferry_worker *w, const task *t)
{
    FERRY_ASSERT_HELD(&l->lock);
    FERRY_ASSERT(l->inflight > 0);
    ferry_slot *s = t->slot;
    w->busy = false;
    if (t->warm)
        l->stats.allocs_after_warmup += (uint64_t)t->allocs;
    if (t->gen != l->generation) {
        /* A reset voided this task; the reset is waiting for inflight to drain.
         * Its skips are not counted: they belong to no batch that will be seen. */
        l->inflight--;
        pthread_cond_broadcast(&l->ready_cv);
        return false;
    }
    s->skipped += t->total_skipped;
    for (size_t i = 0; i < t->nskipped; i++)
        add_skipped_index(s, t->skipped[i]);
    FERRY_ASSERT(s->state == SLOT_FILLING && s->done < s->count);
    if (t->st != FERRY_OK) {
        if (s->err == FERRY_OK) {
            s->err = t->st;
            ferry_format_cut(s->errmsg, sizeof s->errmsg, "%s", t->msg);
        }
    } else {
        s->indices[t->pos] = t->index;
        s->host_labels[t->pos] = t->label;
    }
    if (++s->done < s->count) {
        l->inflight--;
        return false;
    }
    return true;
}

/* Queues the full slot's H2D copy. Lock held; released while queueing. */
static void queue_slot_copy(ferry_loader *l, ferry_slot *s)
{
    FERRY_ASSERT_HELD(&l->lock);
    bool wait_released = s->wait_released;
    s->wait_released = false;
    ferry_mutex_unlock(&l->lock);
    double t = ferry_now();
    ferry_status st = issue_copy(l, s, wait_released);
    ferry_mutex_lock(&l->lock);
    s->copy_issued = t;
    s->host_in_copy = true;
    s->timing_pending = st == FERRY_OK;
    if (st != FERRY_OK) {
        s->err = st;
        ferry_format_cut(s->errmsg, sizeof s->errmsg, "batch %zu: H2D copy: %s", s->batch,
                         ferry_last_error());
    } else {
        l->stats.h2d_bytes += l->slot_bytes;
    }
}

/* The slot's last sample is in: copy it to the device and hand it to next().
 * The task counts in inflight until its copy is queued, so a reset waits for
 * that too. Lock held. */
static void finish_slot(ferry_loader *l, const task *t)
{
    FERRY_ASSERT_HELD(&l->lock);
    ferry_slot *s = t->slot;
    FERRY_ASSERT(s->done == s->count);
    if (s->err == FERRY_OK && l->gpu)
        queue_slot_copy(l, s);
    l->inflight--;
    if (t->gen == l->generation)
        s->state = SLOT_READY;
    pthread_cond_broadcast(&l->ready_cv);
}

bool ferry_worker_run_one(ferry_loader *l, ferry_worker *w, ferry_slot *only)
{
    FERRY_ASSERT_HELD(&l->lock);
    if (l->stop || l->failed != FERRY_OK)
        return false;
    bool must_sync;
    ferry_slot *s = pick_slot(l, only, &must_sync);
    if (!s)
        return false;
    if (must_sync) {
        wait_host_free(l, s);
        return true;
    }
    task t;
    claim_sample(l, w, s, &t);
    /* More to hand out and a worker idle: wake it (next() wakes one only). */
    bool more = l->idle_workers > 0 && (s->next_pos < s->count || l->next_assign < l->num_batches);
    ferry_mutex_unlock(&l->lock);
    if (more)
        pthread_cond_signal(&l->work_cv);
    run_task(l, w, &t);
    ferry_mutex_lock(&l->lock);
    if (record_task(l, w, &t))
        finish_slot(l, &t);
    return true;
}

/* Work remains to hand out in this epoch. Lock held. */
static bool epoch_has_work(ferry_loader *l)
{
    FERRY_ASSERT_HELD(&l->lock);
    if (l->next_assign < l->num_batches)
        return true;
    for (size_t k = 0; k < l->nslots; k++)
        if (l->slots[k].state == SLOT_FILLING && l->slots[k].next_pos < l->slots[k].count)
            return true;
    return false;
}

static void *worker_main(void *arg)
{
    ferry_worker *w = arg;
    ferry_loader *l = w->loader;
    ferry_thread_background();
    if (l->gpu)
        ferry_cuda_set_device(l->dev.index); /* copies and events on the loader's device */
    ferry_mutex_lock(&l->lock);
    while (!l->stop) {
        if (ferry_worker_run_one(l, w, NULL))
            continue;
        if (l->cfg.restart_workers && !epoch_has_work(l))
            break; /* the next reset starts fresh workers */
        l->idle_workers++;
        ferry_cond_wait(&l->work_cv, &l->lock);
        l->idle_workers--;
    }
    ferry_mutex_unlock(&l->lock);
    return NULL;
}

ferry_status ferry_workers_start(ferry_loader *l)
{
    for (size_t i = 0; i < l->nworkers; i++) {
        ferry_worker *w = &l->workers[i];
        int rc = ferry_thread_create(&w->thread, worker_main, w);
        if (rc != 0) {
            ferry_workers_stop(l);
            return ferry_fail(FERRY_ERR_NO_MEMORY, "loader: cannot start worker thread %zu of %zu: %s",
                              i + 1, l->nworkers, strerror(rc));
        }
        w->started = true;
    }
    return FERRY_OK;
}

void ferry_workers_stop(ferry_loader *l)
{
    if (!l->workers)
        return;
    FERRY_ASSERT_NOT_HELD(&l->lock);
    ferry_mutex_lock(&l->lock);
    l->stop = true;
    pthread_cond_broadcast(&l->work_cv);
    ferry_mutex_unlock(&l->lock);
    for (size_t i = 0; i < l->nworkers; i++) {
        if (l->workers[i].started)
            pthread_join(l->workers[i].thread, NULL);
        l->workers[i].started = false;
    }
    ferry_mutex_lock(&l->lock);
    l->stop = false;
    ferry_mutex_unlock(&l->lock);
}
