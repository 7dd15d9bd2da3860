/* Internal: the loader's state, shared by loader.c (the caller's side: create,
 * next, reset, destroy) and workers.c (the workers' side: claim a sample, decode
 * it into its slot, copy a finished slot to the device). */
#ifndef FERRY_LOADER_INTERNAL_H
#define FERRY_LOADER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "common/error.h"
#include "common/mutex.h"
#include "loader/convert.h"
#include "ferry/loader.h"
#include "loader/sampler.h"

/* Epochs from this on would share random streams with earlier ones: the
 * Philox key holds the stream's kind in its top byte and the epoch below it
 * (FERRY_RNG_SHUFFLE | epoch). */
#define FERRY_LOADER_EPOCH_LIMIT_ (UINT64_C(1) << 56)

typedef enum slot_state {
    SLOT_FREE = 0,  /* no batch assigned */
    SLOT_FILLING,   /* workers decode samples into it */
    SLOT_READY,     /* all samples in, H2D copy queued; waiting for the caller */
    SLOT_DELIVERED  /* handed to the caller by next() */
} slot_state;

/* A field of the dataset other than the image and the label (those keep
 * their regions and conversion): its place in a slot. */
typedef struct ferry_loader_field {
    size_t index;           /* in the dataset's fields */
    size_t bytes;           /* per sample, at the field's full shape */
    size_t offset;          /* in a slot: batch * bytes */
    size_t lengths_offset;  /* ragged: batch i64 lengths; 0 otherwise */
    bool ragged;
    bool cast;              /* delivered as out_dtype, converted after the copy */
    ferry_dtype dtype, out_dtype;
    size_t out_offset;      /* cast: in the slot's field_out region */
    size_t parent;          /* a view's field (in xf), whose region it shares; SIZE_MAX: none */
} ferry_loader_field;

/* What ferry_batch.fields points at: every field's tensor of one view of a
 * slot, by the dataset's field order. */
struct ferry_batch_fields {
    size_t n;
    const ferry_field *fields;               /* the dataset's */
    ferry_tensor *tensors[FERRY_FIELD_MAX];  /* the image's and label's are images[v], labels[v] */
    ferry_tensor *lengths[FERRY_FIELD_MAX];  /* ragged fields only */
    bool owned[FERRY_FIELD_MAX];             /* tensors[k] is this table's to release */
};

/* One batch in flight: a page-locked host buffer, its device twin and the
 * converted output, sized once at create. */
typedef struct ferry_slot {
    /* Fixed at create. */
    uint8_t *host;            /* wire images (batch * wire_sample_bytes), then int64 labels */
    int64_t *host_labels;
    void *dev;                /* device copy of host (== host on the CPU) */
    int64_t *dev_labels;
    void *out;                /* converted images (== dev when no conversion is needed) */
    uint8_t *field_out;       /* fields converted to another dtype (field_dtypes), or NULL */
    size_t *indices;          /* batch dataset indices, on the host */
    ferry_stream *copy_stream; /* the slot's own: its H2D copy waits only for its release */
    ferry_event *copy_start, *copy_done; /* around the H2D copy, on copy_stream */
    ferry_event *released;    /* on the caller's stream when it asked for the next batch */
    /* Views: [0] a full batch, [1] the epoch's short last batch, [2] the short
     * last batch of an epoch resumed with another world size (made at restore). */
    ferry_tensor *images[3], *labels[3];
    struct ferry_batch_fields fields[3]; /* the same views, every field by name */

    /* Per fill; guarded by ferry_loader.lock. */
    slot_state state;
    size_t batch;             /* batch number within the epoch */
    size_t count;             /* samples in this batch */
    size_t next_pos;          /* next position to hand to a worker */
    size_t done;              /* positions finished */
    bool wait_released;       /* the next copy into dev must wait on `released` */
    bool host_in_copy;        /* a copy from host may still run: sync copy_done before writing */
    bool host_syncing;        /* a worker is waiting for that copy now */
    bool timing_pending;      /* copy_start/copy_done not yet added to the stats */
    double copy_issued;       /* host clock when the copy was queued (for the trace) */
    ferry_status err;         /* policy fail: the first sample error of this batch */
    char errmsg[FERRY_ERROR_MAX];
    /* Policy skip: counted in the stats when the batch is delivered, so the
     * count does not depend on how far the workers got before a reset. */
    uint64_t skipped;
    size_t skipped_idx[8];    /* the first ones, for the stats' names (sorted) */
    size_t nskipped_idx;
} ferry_slot;

/* What one worker is doing, for the timeout check; guarded by lock. */
typedef struct ferry_worker {
    pthread_t thread;
    bool started;
    size_t id;
    ferry_loader *loader;
    ferry_scratch *scratch;
    void *sample_buf;          /* wire f32: the u8 sample before conversion */
    /* Stage seconds of this worker's samples. Added to by the worker without the
     * lock (once per sample), read and reset by stats under it: atomic. */
    _Atomic double read_s, decode_s, transform_s;
    bool busy;
    size_t slot, pos, index;
    double start;              /* seconds, monotonic */
} ferry_worker;

struct ferry_loader {
    ferry_loader_config cfg;   /* copy; cfg.indices points at `own_indices` */
    ferry_dataset *ds;         /* a reference */
    ferry_device dev;
    ferry_sampler_plan plan;
    size_t *own_indices;
    size_t *order;             /* the epoch's sample order */
    _Atomic unsigned char *known_bad; /* on_error = SKIP: per dataset sample, it failed once */
    size_t *order_scratch;     /* dataset_len entries, for the distributed sampler */
    size_t *stream_perm;       /* streaming mode: one entry per shard, for the sampler */
    size_t *stream_head_perm;  /* the same, for the next epoch's head (plan_reads) */
    size_t gzip_shards;        /* of the dataset's shards, the gzip ones: plan_reads each epoch */
    size_t epoch_len, num_batches, batch;
    size_t full_epoch_len, full_num_batches; /* an epoch from its start (epoch_len is less
                                              * while an epoch resumed elastically runs) */
    size_t sample_bytes;       /* decoded sample (dataset format) */
    size_t wire_sample_bytes;  /* sample as it crosses to the device */
    size_t out_sample_bytes;
    size_t labels_offset;      /* in a slot's host buffer */
    size_t image_field, label_field; /* the dataset's (SIZE_MAX: none) */
    size_t nxf;                /* the other fields, laid out after the labels */
    ferry_loader_field xf[FERRY_FIELD_MAX];
    size_t field_out_bytes;    /* per slot: the converted fields' region */
    size_t slot_bytes;         /* bytes copied H2D per slot */
    bool convert_on_device;    /* a conversion runs after the copy */
    ferry_convert_spec wire_spec;  /* host: u8 sample -> f32 wire (wire f32 only) */
    ferry_convert_spec dev_spec;   /* device: wire batch -> out batch */
    bool gpu;                  /* dev is a CUDA device */

    ferry_pinned_pool *pool;
    void *host_block;          /* every slot's host memory: one allocation */
    void *dev_block;           /* every slot's device memory: one allocation */
    ferry_slot *slots;
    size_t nslots;
    ferry_worker *workers;
    size_t nworkers;
    ferry_scratch *caller_scratch;  /* num_workers == 0 */
    void *caller_sample_buf;

    ferry_mutex lock;
    pthread_cond_t work_cv;    /* workers: tasks appeared, or stop */
    pthread_cond_t ready_cv;   /* caller: a slot became ready or failed; reset: idle */

    /* Guarded by lock. */
    uint64_t epoch;
    uint64_t resumed_from;     /* global order position this epoch was resumed from with
                                * another world size (ferry_loader_restore); 0 otherwise */
    uint64_t generation;       /* bumped by reset: tasks of older generations are void */
    size_t next_assign;        /* next batch to give a slot */
    size_t next_deliver;       /* in order: the batch next() returns next */
    size_t delivered;          /* batches returned this epoch */
    size_t inflight;           /* samples being decoded now */
    bool stop;                 /* destroy: workers exit */
    ferry_status failed;       /* sticky failure until reset */
    char failmsg[FERRY_ERROR_MAX];
    ferry_slot *current;       /* the slot last returned by next() */
    ferry_stream *last_stream; /* the stream given to the last next(): the current batch's */

    /* Stats; guarded by lock. */
    ferry_loader_stats stats;
    char skipped_names[FERRY_LOADER_MAX_SKIPPED_NAMES][256];
    bool warm;                 /* the first batch has been delivered */
    size_t idle_workers;       /* waiting on work_cv; guarded by lock */
    /* What next() counts after it has let go of the lock (the caller's time in
     * it, its allocations): written by the caller alone, read by stats_get. */
    _Atomic uint64_t next_ns, next_allocs;

    FILE *trace;               /* FERRY_TRACE: Chrome trace events; guarded by trace_lock */
    ferry_mutex trace_lock;
    bool trace_first;
    double t0;
};

/* loader.c: voids the epoch in flight and lays out `epoch` from batch
 * `first_batch` (restore: the batches before it were delivered before). With
 * `rest` the order is already in l->order, `rest` samples long (an epoch resumed
 * with another world size). Starts the workers again when they stopped. */
ferry_status ferry_loader_restart_(ferry_loader *l, uint64_t epoch, size_t first_batch,
                                   size_t rest, bool use_rest);
/* state.c: a hash of what identifies the dataset cheaply (length, format,
 * classes, sample names at spread-out indices). */
uint64_t ferry_loader_dataset_id_(const ferry_dataset *ds);
/* loader.c: views for the short last batch (short_size) of an elastically
 * resumed epoch, in every slot. */
ferry_status ferry_loader_views_for_rest_(ferry_loader *l, size_t short_size);

/* fields.c: the fields past image and label laid out from slot offset start
 * (returns the end; SIZE_MAX on overflow), their views in slot s, the
 * destinations of sample pos of host (a slot's host buffer) for get_fields,
 * and the lengths it gave, stored. */
size_t ferry_loader_layout_fields_(ferry_loader *l, size_t start);
/* cfg.field_dtypes checked and applied to the laid-out fields (sets
 * field_out_bytes); after ferry_loader_layout_fields_. */
ferry_status ferry_loader_field_casts_(ferry_loader *l, const ferry_loader_config *cfg);
/* Queues the conversions of slot s's fields (count samples) on stream. */
ferry_status ferry_loader_convert_fields_(const ferry_loader *l, const ferry_slot *s, size_t count,
                                          ferry_stream *stream);
/* The CPU's conversion of sample pos's fields into field_out, by the worker
 * that decoded it (on a GPU the device converts the batch at delivery). */
void ferry_loader_convert_sample_fields_(const ferry_loader *l, const ferry_slot *s, size_t pos);
ferry_status ferry_loader_field_views_(ferry_loader *l, ferry_slot *s, int v, size_t size);
void ferry_loader_field_views_release_(ferry_slot *s);
void ferry_loader_field_dsts_(const ferry_loader *l, uint8_t *host, size_t pos, void *image,
                              int64_t *label, void **dst);
void ferry_loader_store_lengths_(const ferry_loader *l, uint8_t *host, size_t pos,
                                 const size_t *lengths);

/* workers.c */
ferry_status ferry_workers_start(ferry_loader *l);
void ferry_workers_stop(ferry_loader *l);   /* sets stop, joins */
/* Runs one task of `only` (or of any slot when NULL) in the calling thread.
 * Call with lock held; returns with it held (it lets go of it while decoding
 * or waiting). False when there was nothing to do. */
bool ferry_worker_run_one(ferry_loader *l, ferry_worker *w, ferry_slot *only);
/* Gives free slots the next batches. Lock held. */
void ferry_slots_assign(ferry_loader *l);
/* Adds a slot's copy time to the stats if its events are done. Lock held. */
void ferry_slot_collect_timing(ferry_loader *l, ferry_slot *s, bool wait);
/* Adds a delivered slot's skipped samples to the stats. Lock held. */
void ferry_slot_count_skips(ferry_loader *l, const ferry_slot *s);

/* trace.c */
void ferry_trace_open(ferry_loader *l);
void ferry_trace_close(ferry_loader *l);
void ferry_trace_event(ferry_loader *l, const char *name, size_t tid, double start, double end,
                       const char *arg_name, size_t arg);

#endif
