/* The workers' side of the loader: claim one sample of the oldest batch in
 * flight, decode it straight into its place in the slot, and when a slot's last
 * sample lands, queue the slot's one H2D copy on the copy stream. The caller's
 * thread runs the same code when num_workers is 0. */
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "loader/loader_impl.h"

void ferry_slots_assign(ferry_loader *l)
{
    for (size_t k = 0; k < l->nslots && l->next_assign < l->num_batches; k++) {
        ferry_slot *s = &l->slots[k];
        if (s->state != SLOT_FREE)
            continue;
        size_t b = l->next_assign++;
        size_t first = b * l->batch;
        s->batch = b;
        s->count = l->epoch_len - first < l->batch ? l->epoch_len - first : l->batch;
        s->next_pos = 0;
        s->done = 0;
        s->err = FERRY_OK;
        s->errmsg[0] = '\0';
        s->state = SLOT_FILLING;
    }
}

void ferry_slot_collect_timing(ferry_loader *l, ferry_slot *s, bool wait)
{
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

/* The FILLING slot with the oldest batch that still has samples to hand out. */
static ferry_slot *pick_slot(ferry_loader *l, ferry_slot *only, bool *must_sync)
{
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

/* Queues the slot's single H2D copy (images and labels together) after the
 * caller's stream has released the slot's device memory. Lock not held. */
static ferry_status issue_copy(ferry_loader *l, ferry_slot *s, bool wait_released)
{
    ferry_status st = FERRY_OK;
    pthread_mutex_lock(&l->copy_lock);
    if (wait_released)
        st = ferry_stream_wait_event(l->copy_stream, s->released);
    if (st == FERRY_OK)
        st = ferry_event_record(s->copy_start, l->copy_stream);
    if (st == FERRY_OK)
        st = ferry_memcpy(s->dev, s->host, l->slot_bytes, FERRY_COPY_H2D, l->dev, l->copy_stream);
    if (st == FERRY_OK)
        st = ferry_event_record(s->copy_done, l->copy_stream);
    pthread_mutex_unlock(&l->copy_lock);
    return st;
}

/* Decodes dataset sample `index` into dst in the wire format. Lock not held. */
/* *a += v as one atomic step (stats_get reads and resets it under the lock the
 * worker does not hold). A CAS loop: `+=` on an _Atomic double needs libatomic. */
static void add_seconds(_Atomic double *a, double v)
{
    double old = atomic_load_explicit(a, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(a, &old, old + v, memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

static ferry_status decode_one(ferry_loader *l, ferry_worker *w, size_t index, void *dst,
                               int64_t *label)
{
    ferry_sample_timing t = {0};
    ferry_sample_ctx ctx = {
        .seed = l->cfg.seed,
        .epoch = l->epoch,
        .train = l->cfg.train,
        .scratch = w->scratch,
        .timing = &t,
    };
    ferry_status st;
    if (w->sample_buf) {
        st = ferry_dataset_get(l->ds, index, w->sample_buf, l->sample_bytes, &ctx, label);
        if (st == FERRY_OK) {
            double t0 = ferry_now();
            ferry_convert_sample_cpu(&l->wire_spec, w->sample_buf, dst);
            t.transform_s += ferry_now() - t0;
        }
    } else {
        st = ferry_dataset_get(l->ds, index, dst, l->sample_bytes, &ctx, label);
    }
    add_seconds(&w->read_s, t.read_s);
    add_seconds(&w->decode_s, t.decode_s);
    add_seconds(&w->transform_s, t.transform_s);
    return st;
}

static void note_skipped(ferry_loader *l, size_t index)
{
    l->stats.skipped++;
    size_t n = l->stats.skipped_names_count;
    if (n < FERRY_LOADER_MAX_SKIPPED_NAMES) {
        const char *name = ferry_dataset_sample_name(l->ds, index);
        if (name)
            snprintf(l->skipped_names[n], sizeof l->skipped_names[n], "%s", name);
        else
            snprintf(l->skipped_names[n], sizeof l->skipped_names[n], "sample %zu", index);
        l->stats.skipped_names[n] = l->skipped_names[n];
        l->stats.skipped_names_count = n + 1;
    }
}

bool ferry_worker_run_one(ferry_loader *l, ferry_worker *w, ferry_slot *only)
{
    if (l->stop || l->failed != FERRY_OK)
        return false;
    bool must_sync;
    ferry_slot *s = pick_slot(l, only, &must_sync);
    if (!s)
        return false;

    if (must_sync) {
        /* The slot's previous copy may still read its host memory: wait for it
         * (normally long done) before anyone writes there. */
        s->host_syncing = true;
        pthread_mutex_unlock(&l->lock);
        ferry_status st = l->gpu ? ferry_event_synchronize(s->copy_done) : FERRY_OK;
        pthread_mutex_lock(&l->lock);
        s->host_syncing = false;
        if (st == FERRY_OK) {
            s->host_in_copy = false;
            ferry_slot_collect_timing(l, s, false);
        } else if (l->failed == FERRY_OK) {
            l->failed = st;
            snprintf(l->failmsg, sizeof l->failmsg, "waiting for a copy: %s", ferry_last_error());
            pthread_cond_broadcast(&l->ready_cv);
        }
        pthread_cond_broadcast(&l->work_cv);
        return true;
    }

    const uint64_t gen = l->generation;
    const size_t pos = s->next_pos++;
    const size_t p = s->batch * l->batch + pos; /* position in the epoch's order */
    size_t index = l->order[p];
    w->busy = true;
    w->slot = (size_t)(s - l->slots);
    w->pos = pos;
    w->index = index;
    w->start = ferry_now();
    l->inflight++;
    const bool warm = l->warm;
    pthread_mutex_unlock(&l->lock);

    int64_t allocs0 = ferry_debug_thread_alloc_count();
    uint8_t *dst = s->host + pos * l->wire_sample_bytes;
    int64_t label = 0;
    ferry_status st = decode_one(l, w, index, dst, &label);
    if (st == FERRY_OK && l->cfg.sample_timeout_s > 0 &&
        ferry_now() - w->start > l->cfg.sample_timeout_s) {
        const char *name = ferry_dataset_sample_name(l->ds, index);
        st = ferry_fail(FERRY_ERR_TIMEOUT, "%s%stook %.3f s, longer than the %.3f s timeout",
                        name ? name : "", name ? ": " : "", ferry_now() - w->start,
                        l->cfg.sample_timeout_s);
    }
    /* Policy skip: the next good sample in sampler order takes this place, so
     * batches stay full and the result does not depend on thread timing. */
    size_t skipped[8], nskipped = 0, total_skipped = 0;
    if (st != FERRY_OK && st != FERRY_ERR_TIMEOUT && l->cfg.on_error == FERRY_ON_ERROR_SKIP) {
        for (size_t k = 1; k < l->epoch_len && st != FERRY_OK; k++) {
            if (nskipped < 8)
                skipped[nskipped++] = index;
            total_skipped++;
            index = l->order[(p + k) % l->epoch_len];
            st = decode_one(l, w, index, dst, &label);
        }
        if (st != FERRY_OK)
            ferry_fail_prefix(st, "every sample failed to decode; the last: ");
    }
    char msg[512];
    if (st != FERRY_OK) {
        const char *name = ferry_dataset_sample_name(l->ds, index);
        const char *err = ferry_last_error();
        /* Name the file unless the dataset's message already starts with it. */
        if (name && strncmp(err, name, strlen(name)) != 0)
            snprintf(msg, sizeof msg, "sample %zu (%s): %s", index, name, err);
        else
            snprintf(msg, sizeof msg, "sample %zu: %s", index, err);
    }
    double end = ferry_now();
    int64_t allocs = ferry_debug_thread_alloc_count() - allocs0;
    ferry_trace_event(l, "decode", w->id + 1, w->start, end, "index", index);

    pthread_mutex_lock(&l->lock);
    w->busy = false;
    if (warm)
        l->stats.allocs_after_warmup += (uint64_t)allocs;
    for (size_t i = 0; i < nskipped; i++)
        note_skipped(l, skipped[i]);
    l->stats.skipped += total_skipped - nskipped;
    if (gen != l->generation) {
        /* A reset voided this task; the reset is waiting for inflight to drain. */
        l->inflight--;
        pthread_cond_broadcast(&l->ready_cv);
        return true;
    }
    if (st != FERRY_OK) {
        if (s->err == FERRY_OK) {
            s->err = st;
            snprintf(s->errmsg, sizeof s->errmsg, "%s", msg);
        }
    } else {
        s->indices[pos] = index;
        s->host_labels[pos] = label;
    }
    if (++s->done < s->count) {
        l->inflight--;
        return true;
    }

    /* This was the slot's last sample. */
    if (s->err == FERRY_OK && l->gpu) {
        bool wait_released = s->wait_released;
        s->wait_released = false;
        pthread_mutex_unlock(&l->lock);
        double t = ferry_now();
        ferry_status cst = issue_copy(l, s, wait_released);
        pthread_mutex_lock(&l->lock);
        s->copy_issued = t;
        s->host_in_copy = true;
        s->timing_pending = cst == FERRY_OK;
        if (cst != FERRY_OK) {
            s->err = cst;
            snprintf(s->errmsg, sizeof s->errmsg, "batch %zu: H2D copy: %s", s->batch,
                     ferry_last_error());
        } else {
            l->stats.h2d_bytes += l->slot_bytes;
        }
    }
    l->inflight--;
    if (gen == l->generation)
        s->state = SLOT_READY;
    pthread_cond_broadcast(&l->ready_cv);
    return true;
}

/* Work remains to hand out in this epoch. Lock held. */
static bool epoch_has_work(ferry_loader *l)
{
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
    if (l->gpu)
        ferry_cuda_set_device(l->dev.index); /* copies and events on the loader's device */
    pthread_mutex_lock(&l->lock);
    while (!l->stop) {
        if (ferry_worker_run_one(l, w, NULL))
            continue;
        if (!l->cfg.persistent_workers && !epoch_has_work(l))
            break; /* the next reset starts fresh workers */
        pthread_cond_wait(&l->work_cv, &l->lock);
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

ferry_status ferry_workers_start(ferry_loader *l)
{
    for (size_t i = 0; i < l->nworkers; i++) {
        ferry_worker *w = &l->workers[i];
        int rc = pthread_create(&w->thread, NULL, worker_main, w);
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
    pthread_mutex_lock(&l->lock);
    l->stop = true;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->lock);
    for (size_t i = 0; i < l->nworkers; i++) {
        if (l->workers[i].started)
            pthread_join(l->workers[i].thread, NULL);
        l->workers[i].started = false;
    }
    pthread_mutex_lock(&l->lock);
    l->stop = false;
    pthread_mutex_unlock(&l->lock);
}
