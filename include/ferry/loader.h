/* Library: libferry (pkg-config ferry); <ferry.h> includes this header. */
/* The loader: the data path from files to batches on a device.
 *
 *   workers --decode+transform straight into--> pinned slot k (host)
 *           --one cudaMemcpyAsync on slot k's copy stream--> device slot k
 *           --event--> caller's stream: u8 -> f32/f16/bf16 + normalise, fused
 *
 * A ring of `prefetch` slots, sized once at create: after the first batch no host
 * or device memory is allocated. Workers pull single samples from every batch in
 * flight, so one slow file does not hold a whole batch behind one thread. The
 * sequence of batches (order and bytes) depends only on (seed, epoch), never on
 * the number of workers or on thread timing.
 *
 * One thread drives a loader (next, reset, stats, destroy); the loader's own
 * workers are its business. A batch belongs to the stream it was delivered on
 * until the next call to next(): its slot is refilled only after that stream
 * has passed the point of that call, so keep the stream alive until then (a
 * reset, restore or destroy does not use it: each waits for the device when
 * a batch is still out). A
 * different stream per call works (each slot has its own copy stream, so one
 * slow consumer stream holds up only its own slot). */
#ifndef FERRY_LOADER_H
#define FERRY_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferry/dataset.h"
#include "ferry/device.h"
#include "ferry/export.h"
#include "ferry/status.h"
#include "ferry/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ferry_sampler {
    FERRY_SAMPLER_DEFAULT = 0,   /* sequential, or random when shuffle */
    FERRY_SAMPLER_SEQUENTIAL,
    FERRY_SAMPLER_RANDOM,
    FERRY_SAMPLER_INDICES,       /* the caller's index list (permuted when shuffle) */
    FERRY_SAMPLER_DISTRIBUTED    /* rank's share of world_size, padded as PyTorch's DistributedSampler */
} ferry_sampler;

typedef enum ferry_on_error {
    FERRY_ON_ERROR_FAIL = 0, /* next() returns the error naming the sample and file */
    FERRY_ON_ERROR_SKIP      /* the bad sample is counted and named once, and replaced by a
                              * good one drawn at random from the epoch, seeded by (seed, epoch,
                              * place): a run of bad files is not one image many times */
} ferry_on_error;

/* Whether the host slots are page-locked (pinned): copies from them are
 * asynchronous and faster, and they take memory the system cannot page out. */
typedef enum ferry_pin_memory {
    FERRY_PIN_MEMORY_AUTO = 0, /* pinned when the loader's device is a GPU; silent otherwise */
    FERRY_PIN_MEMORY_ON,       /* pinned; on a CPU device a warning, and pageable memory */
    FERRY_PIN_MEMORY_OFF       /* pageable, even for a GPU */
} ferry_pin_memory;

/* What crosses PCIe (docs/DESIGN.md, section 1, steps 2 and 7). */
typedef enum ferry_wire_dtype {
    FERRY_WIRE_DEFAULT = 0, /* the dataset's own: u8 images as u8 (a quarter of f32's bytes,
                             * normalised on the device), f32 samples as f32 */
    FERRY_WIRE_U8,
    FERRY_WIRE_F32          /* normalised on the host */
} ferry_wire_dtype;

/* A field delivered in another dtype than it is stored in
 * (ferry_loader_config.field_dtypes). */
typedef struct ferry_field_dtype {
    const char *name;       /* a field of the dataset, not its image or label field */
    ferry_dtype dtype;
} ferry_field_dtype;

/* num_workers: no threads; next() decodes in the caller's thread. */
#define FERRY_LOADER_NO_WORKERS ((size_t)-1)

/* Every field's zero is its default: a config of {0} with dataset (and
 * batch_size, unless 64 suits) set is complete.
 *
 *     ferry_loader_config cfg = {.dataset = ds, .batch_size = 256};
 */
typedef struct ferry_loader_config {
    ferry_dataset *dataset;     /* required; the loader keeps a reference */
    size_t batch_size;          /* 0: 64; more than the dataset: one batch of it all;
                                 * a batch over this machine's memory: INVALID_ARG */
    bool shuffle;               /* default false */
    uint64_t seed;              /* default 0 */
    bool drop_last;             /* drop a last, short batch; default false */
    ferry_sampler sampler;
    const size_t *indices;      /* FERRY_SAMPLER_INDICES: copied at create */
    size_t num_indices;
    size_t rank, world_size;    /* FERRY_SAMPLER_DISTRIBUTED */
    /* Decoding threads. 0: one per online CPU, at most 8 (decoding is
     * CPU-bound and scales with cores; the cap leaves a large machine's other
     * cores to the training process). FERRY_LOADER_NO_WORKERS: none, next()
     * decodes in the caller's thread. */
    size_t num_workers;
    size_t prefetch;            /* slots: batches in flight; 0: 4. 1: no read-ahead */
    ferry_pin_memory pin_memory; /* default AUTO: pinned for a GPU device */
    ferry_device device;        /* zero: the default device (cuda:0 when there is a GPU, else
                                 * the CPU); ferry_device_parse reads "cpu", "cuda:N", "default" */
    ferry_wire_dtype wire_dtype; /* default: the dataset's dtype (u8 images stay u8) */
    ferry_dtype out_dtype;      /* F32 (0, the default), F16, BF16, or U8 (raw, no normalisation) */
    float mean[4], std[4];      /* per channel, on the 0..1 scale; default 0 and 1 (a std of 0: 1);
                                 * a std < 0 or either not finite: INVALID_ARG */
    ferry_layout layout;        /* images out as NCHW (default) or NHWC */
    ferry_on_error on_error;
    double sample_timeout_s;    /* > 0: a sample taking longer is FERRY_ERR_TIMEOUT; default 0 (none) */
    bool restart_workers;       /* stop the threads at each epoch's end and start them again
                                 * at the next (PyTorch's persistent_workers = False); default
                                 * false: they persist */
    bool out_of_order;          /* deliver batches as they are ready, not in sampler order;
                                 * default false (in order) */
    bool eval;                  /* no random augmentation (evaluation); default false */
    /* Streaming mode, for datasets with shards (tar shards larger than the
     * page cache, gzip shards, a subset or split of them, a custom dataset
     * with shard_ends): > 0 replaces the shuffled order (shuffle = true;
     * random or distributed sampler) by the shards in a seeded order, each
     * one's samples in the order they are stored in it, passed through a
     * shuffle buffer of this many entries: a sample comes at most this many
     * - 1 places before its place in the shards' order, and each shard is
     * read front to back. The order depends on (seed, epoch, world size)
     * only, never on num_workers. A gzip shard is decompressed once an epoch;
     * the images decompressed ahead of their turn, at most this many plus
     * prefetch * batch_size, wait in image_config.shard_cache_bytes. With
     * the distributed sampler, rank r takes the r-th of world_size contiguous
     * ranges of the streaming order (each ceil(N / world_size) samples, a
     * short one padded by one), so a rank reads its own run of shards and
     * shares at most the two at its range's ends; a state saved mid-epoch
     * resumes on the same world size only. Default 0 (off). docs/DESIGN.md
     * says how (read-ahead, memory), docs/DISTRIBUTED.md what ranks read. */
    size_t stream_shuffle_buffer;
    /* Fields (ferry/fields.h) other than the image and the label cross as
     * stored; these named ones are then converted on the device, after the
     * copy, on the stream given to next() (as ferry_tensor_to_dtype converts:
     * float to integer truncates and saturates), into buffers sized at
     * create. Copied at create; a name the dataset lacks, or its image or
     * label field, is FERRY_ERR_INVALID_ARG. */
    const ferry_field_dtype *field_dtypes;
    size_t num_field_dtypes;
} ferry_loader_config;

/* A zeroed config: every field its default (kept for code written before zero
 * meant default everywhere). */
FERRY_API ferry_loader_config ferry_loader_config_default(void);

typedef struct ferry_loader ferry_loader;

/* A batch: views of the slot, valid until the next ferry_loader_next, reset or
 * destroy on this loader. Do not release the tensors; copy what you keep. Code
 * with its own kernels reads plain values from them: ferry_tensor_data (a
 * device pointer on a GPU), ferry_tensor_dtype, _shape, _strides (in elements)
 * and _device, all in libferry; the data is ready in the order of the stream
 * given to ferry_loader_next (ferry_stream_cuda_handle: its cudaStream_t, to
 * launch kernels after it). Users of the model layer pass the tensors on. */
typedef struct ferry_batch_fields ferry_batch_fields;
typedef struct ferry_batch {
    ferry_tensor *images;   /* [B,C,H,W] (or [B,H,W,C]) out_dtype on the loader's device;
                             * the IMAGE field's (NULL when the dataset has none) */
    ferry_tensor *labels;   /* [B] i64 on the loader's device: the label field's (the first
                             * i64 scalar; NULL when the dataset has none) */
    size_t size;            /* B */
    const size_t *indices;  /* the B dataset indices, on the host */
    uint64_t epoch;
    size_t index;           /* batch number within the epoch */
    const ferry_batch_fields *fields; /* every field: ferry_batch_field */
} ferry_batch;

/* Field `name` of the batch: [B, shape...] of the field's dtype on the
 * loader's device (the image field's is `images`, the label's `labels`); a
 * ragged field [B, max, ...] padded with zeros. NULL when there is no such
 * field (or b is NULL). A view of the slot, as images and labels are. */
FERRY_API ferry_tensor *ferry_batch_field(const ferry_batch *b, const char *name);
/* A ragged field's lengths: [B] i64 on the loader's device, each sample's
 * entries along the first dimension. NULL for a fixed field or none. */
FERRY_API ferry_tensor *ferry_batch_lengths(const ferry_batch *b, const char *name);
/* The batch's fields, in the dataset's order: the count, and field i's
 * tensor with its description in *info (may be NULL). */
FERRY_API size_t ferry_batch_field_count(const ferry_batch *b);
FERRY_API ferry_tensor *ferry_batch_field_at(const ferry_batch *b, size_t i,
                                             const ferry_field **info);

FERRY_API ferry_status ferry_loader_create(const ferry_loader_config *cfg, ferry_loader **out);
FERRY_API void ferry_loader_destroy(ferry_loader *l);

/* The next batch. Work for it is queued on `stream` (NULL: the device's default
 * stream): the stream waits on the batch's copy, the host never does. Returns
 * FERRY_END after the epoch's last batch; then call ferry_loader_reset. */
FERRY_API ferry_status ferry_loader_next(ferry_loader *l, ferry_stream *stream, ferry_batch *out);

/* Starts epoch `epoch` (an epoch's order depends on seed and epoch). Safe at any
 * time, mid-epoch or after a failure. The loader starts at epoch 0, decoding
 * ahead from create: reset(l, 0) before the first next() keeps what is already
 * decoded (nothing is redone). Epochs run to 2^56 - 1 (the random streams
 * tell no more apart); a larger one is FERRY_ERR_INVALID_ARG. */
FERRY_API ferry_status ferry_loader_reset(ferry_loader *l, uint64_t epoch);

/* Batches per epoch. */
FERRY_API size_t ferry_loader_len(const ferry_loader *l);
/* Samples per epoch (for this rank). */
FERRY_API size_t ferry_loader_sample_count(const ferry_loader *l);
FERRY_API ferry_device ferry_loader_device(const ferry_loader *l);

#define FERRY_LOADER_MAX_SKIPPED_NAMES 64

typedef struct ferry_loader_stats {
    uint64_t batches, samples, skipped;
    double read_s, decode_s, transform_s; /* CPU seconds (each worker thread's
                                           * CPU clock), summed over workers */
    double wait_s;                        /* caller's time blocked in next(): starvation */
    double next_s;                        /* caller's time in next() in all */
    double h2d_s;                         /* copy time, from events (0 on the CPU) */
    uint64_t h2d_bytes;
    uint64_t allocs_after_warmup;         /* host+device allocations after the first batch */
    bool pinned;                          /* the slots are page-locked */
    size_t host_bytes;                    /* host memory held for slots */
    size_t device_bytes;                  /* device memory held for slots */
    size_t num_skipped_names;           /* names kept, at most FERRY_LOADER_MAX_SKIPPED_NAMES */
    const char *skipped_names[FERRY_LOADER_MAX_SKIPPED_NAMES]; /* valid until reset/destroy */
} ferry_loader_stats;

/* Totals since create (or since ferry_loader_stats_reset). Batches, samples and
 * skipped samples count what next() delivered; the stage times count all work
 * done, batches decoded ahead included. */
FERRY_API ferry_status ferry_loader_stats_get(ferry_loader *l, ferry_loader_stats *out);
FERRY_API void ferry_loader_stats_reset(ferry_loader *l);

/* ---- resuming: where a loader is, saved and restored ----
 * Batches depend only on (seed, epoch, position in the epoch's order), so a
 * loader restored from a state delivers, bit for bit, the batches the original
 * would have delivered next, whatever num_workers, prefetch or in_order the new
 * loader has. Take the state between next() calls (after next() returned batch
 * k, the state resumes at batch k + 1). With out_of_order, a state can be
 * taken only when the batches delivered are the epoch's first ones (always at
 * an epoch's start or end); otherwise state_get is FERRY_ERR_BAD_STATE naming
 * the batch still loading, as no state resumes that point.
 *
 * World size may change (FERRY_SAMPLER_DISTRIBUTED, elastic restarts): the
 * samples of the epoch's global order not yet delivered, over all ranks, are
 * split again over the new ranks as a fresh epoch of that many samples would be
 * (ceil(rest / world) each; padding repeats the rest from its start, so only
 * padding samples are seen twice). Later epochs are what a fresh run with the
 * new world size gives; each rank's batch_size may change with the world size
 * (the same global batch over other ranks), and a distributed sampler resumes a
 * random or sequential one's run (its order over all ranks is theirs). The same
 * world size resumes exactly, padding included. Everything else in the
 * fingerprint must match, or restore fails naming the field and both values. */
typedef struct ferry_loader_state {
    uint64_t seed, epoch;
    uint64_t batches;       /* batches this loader delivered in the epoch */
    uint64_t position;      /* entries of the epoch's global order delivered, all ranks */
    uint64_t resumed_from;  /* position the epoch was resumed from with another world
                             * size (0: it ran from its start) */
    bool done;              /* the epoch's last batch was delivered */
    /* The fingerprint. */
    uint64_t dataset_len;
    uint64_t dataset_id;    /* a hash of the format, classes and sample names */
    uint64_t batch_size;
    uint64_t sampler;       /* ferry_sampler, resolved (never DEFAULT) */
    bool shuffle, drop_last;
    uint64_t world_size;    /* may differ at restore */
    uint64_t indices_id;    /* FERRY_SAMPLER_INDICES: a hash of the list; streaming: of
                             * stream_shuffle_buffer; else 0 */
} ferry_loader_state;

FERRY_API ferry_status ferry_loader_state_get(ferry_loader *l, ferry_loader_state *out);
/* FERRY_OK when the state fits this loader (the check restore makes first). */
FERRY_API ferry_status ferry_loader_state_check(const ferry_loader *l, const ferry_loader_state *st);
/* Voids the epoch in flight (as reset does) and continues where the state says. */
FERRY_API ferry_status ferry_loader_restore(ferry_loader *l, const ferry_loader_state *st);

/* One line of text ("ferry-loader-state/1 seed=... epoch=..."), for checkpoint
 * metadata; parse accepts exactly what format writes. */
#define FERRY_LOADER_STATE_TEXT_MAX 512
FERRY_API ferry_status ferry_loader_state_format(const ferry_loader_state *st, char *buf,
                                                 size_t size);
FERRY_API ferry_status ferry_loader_state_parse(const char *text, ferry_loader_state *out);

#ifdef __cplusplus
}
#endif
#endif
