/* The caller's side of the loader: create (every buffer, once), next (hand out
 * the next ready slot; the caller's stream waits on its copy and runs the
 * conversion), reset, destroy, stats. workers.c is the other side. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/device_internal.h"
#include "common/error.h"
#include "dataset/core/caps.h"
#include "loader/internal.h"

/* Streaming mode reads each shard this far ahead of the last member read:
 * several members of ImageNet-sized images, little against the page cache. */
#define STREAM_READAHEAD ((size_t)4 << 20)

ferry_loader_config ferry_loader_config_default(void)
{
    ferry_loader_config c;
    memset(&c, 0, sizeof c);
    return c;
}

/* num_workers 0: one thread per online CPU, at most 8 (loader.h says why). */
static size_t default_workers(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 8 ? 8 : (size_t)n;
}

static size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

static bool is_float(ferry_dtype dt)
{
    return dt == FERRY_DTYPE_F32 || dt == FERRY_DTYPE_F16 || dt == FERRY_DTYPE_BF16;
}

/* Checks what the caller set; zeros are defaults and always pass. */
/* A batch larger than the dataset is cut to it (as PyTorch's DataLoader does),
 * but one that could never fit in this machine's memory is a mistake, not a
 * request: said now, naming batch_size, not as an allocation failure later. */
static ferry_status check_batch_size(const ferry_loader_config *c)
{
    const ferry_field *f;
    size_t nf, one = 0, bytes;
    (void)ferry_dataset_fields(c->dataset, &f, &nf);
    for (size_t k = 0; k < nf; k++) /* every field, a ragged one's length too */
        one += ferry_field_bytes(&f[k]) + (f[k].ragged ? sizeof(int64_t) : 0);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t mem = 0;
    if (pages <= 0 || page <= 0 || !ferry_mul_size((size_t)pages, (size_t)page, &mem))
        mem = SIZE_MAX;
    if (!ferry_mul_size(c->batch_size, one, &bytes) || bytes > mem)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "batch_size %zu: a batch of %zu-byte samples "
                          "needs more memory than this machine has (%zu bytes)", c->batch_size,
                          one, mem);
    return FERRY_OK;
}

static ferry_status check_config(const ferry_loader_config *c)
{
    if (!c->dataset)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "config.dataset is NULL");
    if (c->num_workers > 1024 && c->num_workers != FERRY_LOADER_NO_WORKERS)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "num_workers %zu is more than 1024 "
                          "(FERRY_LOADER_NO_WORKERS: decode in the caller's thread)", c->num_workers);
    if (c->prefetch > 1024)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "prefetch %zu is more than 1024", c->prefetch);
    if ((unsigned)c->pin_memory > FERRY_PIN_MEMORY_OFF)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "unknown pin_memory %d", (int)c->pin_memory);
    if ((unsigned)c->wire_dtype > FERRY_WIRE_F32)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "unknown wire_dtype %d (FERRY_WIRE_DEFAULT, "
                          "FERRY_WIRE_U8 or FERRY_WIRE_F32)", (int)c->wire_dtype);
    if (!is_float(c->out_dtype) && c->out_dtype != FERRY_DTYPE_U8)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "out_dtype must be f32, f16, bf16 or u8 (got %s)",
                          ferry_dtype_name(c->out_dtype));
    if (c->out_dtype == FERRY_DTYPE_U8 && c->wire_dtype == FERRY_WIRE_F32)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "out_dtype u8 needs wire_dtype u8");
    if (c->layout != FERRY_LAYOUT_CHW && c->layout != FERRY_LAYOUT_HWC)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "unknown layout %d", (int)c->layout);
    if (c->on_error != FERRY_ON_ERROR_FAIL && c->on_error != FERRY_ON_ERROR_SKIP)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "unknown on_error %d", (int)c->on_error);
    if (!(c->sample_timeout_s >= 0))
        return ferry_fail(FERRY_ERR_INVALID_ARG, "sample_timeout_s must be >= 0");
    for (int i = 0; i < 4; i++)
        if (!isfinite(c->std[i]) || !isfinite(c->mean[i]) || c->std[i] < 0)
            return ferry_fail(FERRY_ERR_INVALID_ARG, "mean[%d] = %g, std[%d] = %g: the mean must "
                              "be finite and the std finite and > 0 (0: the default, 1)", i,
                              (double)c->mean[i], i, (double)c->std[i]);
    return check_batch_size(c);
}

/* The config with every default filled in: what the rest of the loader reads
 * (only wire_dtype waits for the dataset's format, in plan_conversion). */
static ferry_loader_config resolve_config(const ferry_loader_config *cfg, bool gpu)
{
    ferry_loader_config c = *cfg;
    if (!c.batch_size)
        c.batch_size = 64;
    if (!c.prefetch)
        c.prefetch = 4;
    if (!c.num_workers)
        c.num_workers = default_workers();
    else if (c.num_workers == FERRY_LOADER_NO_WORKERS)
        c.num_workers = 0; /* inside the loader, 0 workers is the caller's thread */
    if (c.pin_memory == FERRY_PIN_MEMORY_AUTO)
        c.pin_memory = gpu ? FERRY_PIN_MEMORY_ON : FERRY_PIN_MEMORY_OFF;
    for (int i = 0; i < 4; i++)
        if (c.std[i] == 0.0f)
            c.std[i] = 1.0f;
    return c;
}

/* Chooses what crosses the wire and what the device does to it. */
static ferry_status plan_conversion(ferry_loader *l)
{
    const ferry_sample_format *f = ferry_dataset_format(l->ds);
    const ferry_loader_config *c = &l->cfg;
    if (l->image_field == SIZE_MAX) { /* no images: the fields cross as stored */
        l->cfg.wire_dtype = FERRY_WIRE_U8;
        return FERRY_OK;
    }
    if (f->dtype != FERRY_DTYPE_U8 && f->dtype != FERRY_DTYPE_F32)
        return ferry_fail(FERRY_ERR_UNSUPPORTED, "loader: datasets of %s samples are not supported",
                          ferry_dtype_name(f->dtype));
    if (f->dtype == FERRY_DTYPE_F32 && c->wire_dtype == FERRY_WIRE_U8)
        return ferry_fail(FERRY_ERR_INVALID_ARG,
                          "the dataset holds f32 samples; wire_dtype u8 cannot carry them "
                          "(leave it FERRY_WIRE_DEFAULT, or FERRY_WIRE_F32)");
    if (l->cfg.wire_dtype == FERRY_WIRE_DEFAULT)
        l->cfg.wire_dtype = f->dtype == FERRY_DTYPE_F32 ? FERRY_WIRE_F32 : FERRY_WIRE_U8;
    if (c->out_dtype == FERRY_DTYPE_U8 && c->wire_dtype != FERRY_WIRE_U8)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "out_dtype u8 needs u8 samples (the "
                          "dataset holds %s)", ferry_dtype_name(f->dtype));
    if (is_float(c->out_dtype) && f->channels > FERRY_CONVERT_MAX_CHANNELS)
        return ferry_fail(FERRY_ERR_UNSUPPORTED, "loader: normalising %zu channels (at most %d)",
                          f->channels, FERRY_CONVERT_MAX_CHANNELS);

    /* u8 images go to 0..1 first (as ToTensor does), then (x - mean) / std. */
    ferry_convert_spec affine = {
        .channels = f->channels, .height = f->height, .width = f->width,
        .src_dtype = f->dtype, .src_layout = f->layout,
        .dst_dtype = FERRY_DTYPE_F32, .dst_layout = c->layout, .affine = true,
    };
    for (size_t ch = 0; ch < f->channels && ch < FERRY_CONVERT_MAX_CHANNELS; ch++) {
        double range = f->dtype == FERRY_DTYPE_U8 ? 255.0 : 1.0;
        affine.scale[ch] = (float)(1.0 / (range * (double)c->std[ch]));
        affine.shift[ch] = (float)(-(double)c->mean[ch] / (double)c->std[ch]);
    }

    size_t elems = f->channels * f->height * f->width;
    l->sample_bytes = ferry_dataset_sample_bytes(l->ds);
    l->wire_sample_bytes = elems * ferry_dtype_size(c->wire_dtype == FERRY_WIRE_F32 ? FERRY_DTYPE_F32
                                                                              : FERRY_DTYPE_U8);
    l->out_sample_bytes = elems * ferry_dtype_size(c->out_dtype);

    if (c->wire_dtype == FERRY_WIRE_F32) {
        /* Normalised on the host; the device only narrows f32 to f16/bf16. */
        l->wire_spec = affine;
        l->dev_spec = affine;
        l->dev_spec.src_dtype = FERRY_DTYPE_F32;
        l->dev_spec.src_layout = c->layout;
        l->dev_spec.dst_dtype = c->out_dtype;
        l->dev_spec.affine = false;
        l->convert_on_device = c->out_dtype != FERRY_DTYPE_F32;
    } else if (c->out_dtype == FERRY_DTYPE_U8) {
        l->dev_spec = affine;
        l->dev_spec.dst_dtype = FERRY_DTYPE_U8;
        l->dev_spec.affine = false;
        l->convert_on_device = f->layout != c->layout;
    } else {
        l->dev_spec = affine;
        l->dev_spec.dst_dtype = c->out_dtype;
        l->convert_on_device = true;
    }
    return FERRY_OK;
}

/* The views of slot s for batches of `size` samples into images[v], labels[v]. */
static ferry_status make_view(ferry_loader *l, ferry_slot *s, int v, size_t size)
{
    const ferry_sample_format *f = ferry_dataset_format(l->ds);
    int64_t shape[4] = {(int64_t)size, (int64_t)f->channels, (int64_t)f->height, (int64_t)f->width};
    if (l->cfg.layout == FERRY_LAYOUT_HWC) {
        shape[1] = (int64_t)f->height;
        shape[2] = (int64_t)f->width;
        shape[3] = (int64_t)f->channels;
    }
    ferry_tensor_release(s->images[v]);
    ferry_tensor_release(s->labels[v]);
    s->images[v] = s->labels[v] = NULL;
    ferry_status st = FERRY_OK;
    if (l->image_field != SIZE_MAX)
        st = ferry_tensor_from_blob(s->out, shape, 4, l->cfg.out_dtype, l->dev, &s->images[v]);
    if (st == FERRY_OK && l->label_field != SIZE_MAX)
        st = ferry_tensor_from_blob(s->dev_labels, shape, 1, FERRY_DTYPE_I64, l->dev, &s->labels[v]);
    if (st == FERRY_OK)
        st = ferry_loader_field_views_(l, s, v, size);
    return st;
}

ferry_status ferry_loader_views_for_rest_(ferry_loader *l, size_t short_size)
{
    for (size_t k = 0; k < l->nslots; k++) {
        ferry_status st = make_view(l, &l->slots[k], 2, short_size);
        if (st != FERRY_OK)
            return st;
    }
    return FERRY_OK;
}

static ferry_status make_views(ferry_loader *l, ferry_slot *s)
{
    size_t sizes[2] = {l->batch, l->epoch_len % l->batch};
    for (int v = 0; v < 2; v++) {
        if (sizes[v] == 0 || (v == 1 && l->cfg.drop_last))
            continue;
        ferry_status st = make_view(l, s, v, sizes[v]);
        if (st != FERRY_OK)
            return st;
    }
    return FERRY_OK;
}

static ferry_status alloc_slots(ferry_loader *l)
{
    /* Host: one pinned allocation for every slot (images, labels, then the
     * other fields: fields.c). */
    size_t images, out_images, host_total, end = SIZE_MAX;
    if (ferry_mul_size(l->batch, l->wire_sample_bytes, &images) &&
        ferry_mul_size(l->batch, l->out_sample_bytes, &out_images) &&
        images <= SIZE_MAX / 4 && out_images <= SIZE_MAX / 4) {
        l->labels_offset = align_up(images, 256);
        end = ferry_loader_layout_fields_(l, l->labels_offset + l->batch * sizeof(int64_t));
    }
    ferry_status st0 = end == SIZE_MAX ? FERRY_OK : ferry_loader_field_casts_(l, &l->cfg);
    if (st0 != FERRY_OK)
        return st0;
    if (end > SIZE_MAX / 4 || !ferry_mul_size(align_up(end, 4096), l->nslots, &host_total))
        return ferry_fail(FERRY_ERR_LIMIT, "loader: %zu slots of %zu samples of %zu bytes do not fit in memory",
                          l->nslots, l->batch, l->wire_sample_bytes);
    l->slot_bytes = end;
    size_t host_stride = align_up(l->slot_bytes, 4096);

    bool want_pinned = l->cfg.pin_memory == FERRY_PIN_MEMORY_ON && l->gpu;
    ferry_status st = ferry_pinned_pool_create(host_total, want_pinned, &l->pool);
    if (st == FERRY_OK)
        st = ferry_pinned_pool_alloc(l->pool, host_total, 4096, &l->host_block);
    if (st != FERRY_OK)
        return ferry_fail_prefix(st, "loader: %zu slots of %zu bytes: ", l->nslots, l->slot_bytes);
    ferry_pinned_pool_stats ps;
    ferry_pinned_pool_stats_get(l->pool, &ps);
    l->stats.pinned = ps.pinned;
    l->stats.host_bytes = host_total;

    /* Device: the copy of each slot (not on the CPU, where the slot is used in
     * place) and the converted output, in one allocation. */
    size_t dev_stride = l->gpu ? align_up(l->slot_bytes, 256) : 0;
    size_t out_stride = l->convert_on_device ? align_up(out_images, 256) : 0;
    size_t dev_total = (dev_stride + out_stride + l->field_out_bytes) * l->nslots;
    /* A copy stream per slot: a copy that waits for its slot's release holds up
     * no other slot's copy (one shared stream would queue them all behind it). */
    for (size_t k = 0; l->gpu && k < l->nslots; k++)
        if ((st = ferry_stream_create(l->dev, &l->slots[k].copy_stream)) != FERRY_OK)
            return st;
    if (dev_total) {
        /* Filed under slot 0's copy stream, which writes it first: the allocator
         * hands a block back only in that stream's order (and destroy frees it
         * before the streams go, after synchronising the device). */
        st = ferry_device_alloc(l->dev, dev_total, l->slots[0].copy_stream, &l->dev_block);
        if (st != FERRY_OK)
            return ferry_fail_prefix(st, "loader: device buffers for %zu slots: ", l->nslots);
    }
    l->stats.device_bytes = dev_total;

    for (size_t k = 0; k < l->nslots; k++) {
        ferry_slot *s = &l->slots[k];
        s->host = (uint8_t *)l->host_block + k * host_stride;
        s->host_labels = (int64_t *)(s->host + l->labels_offset);
        uint8_t *d = (uint8_t *)l->dev_block + k * (dev_stride + out_stride + l->field_out_bytes);
        s->field_out = l->field_out_bytes ? d + dev_stride + out_stride : NULL;
        s->dev = l->gpu ? (void *)d : (void *)s->host;
        s->dev_labels = (int64_t *)((uint8_t *)s->dev + l->labels_offset);
        s->out = l->convert_on_device ? (void *)(d + dev_stride) : s->dev;
        s->indices = ferry_host_calloc(l->batch, sizeof *s->indices);
        if (!s->indices)
            return FERRY_ERR_NO_MEMORY;
        if ((st = ferry_event_create(l->dev, true, &s->copy_start)) != FERRY_OK ||
            (st = ferry_event_create(l->dev, true, &s->copy_done)) != FERRY_OK ||
            (st = ferry_event_create(l->dev, false, &s->released)) != FERRY_OK ||
            (st = make_views(l, s)) != FERRY_OK)
            return st;
    }
    return FERRY_OK;
}

static ferry_status alloc_workers(ferry_loader *l)
{
    size_t n = l->nworkers ? l->nworkers : 1; /* the caller acts as worker 0 */
    l->workers = ferry_host_calloc(n, sizeof *l->workers);
    if (!l->workers)
        return FERRY_ERR_NO_MEMORY;
    bool via_buffer = l->cfg.wire_dtype == FERRY_WIRE_F32;
    for (size_t i = 0; i < n; i++) {
        ferry_worker *w = &l->workers[i];
        w->id = i;
        w->loader = l;
        ferry_status st = ferry_scratch_create(&w->scratch);
        if (st != FERRY_OK)
            return st;
        if (via_buffer && !(w->sample_buf = ferry_host_aligned(64, l->sample_bytes)))
            return FERRY_ERR_NO_MEMORY;
    }
    return FERRY_OK;
}

/* Decodes the epoch's first sample through each worker's scratch, so that its
 * buffers and the arena libpng allocates from are sized before the first
 * batch: with images of one size nothing is allocated after it (a larger file
 * or image than any seen grows that worker's buffers once). That sample is one
 * this loader reads anyway (a rank's own, in its own shard), and the epoch's
 * plan counts these reads (plan_reads): a remote shard's bytes are fetched
 * once, for the epoch, and a gzip shard is not decompressed again for them.
 * A failure is left to the epoch, which reports it by name. */
static ferry_status warm_scratch(ferry_loader *l, size_t index)
{
    if (!ferry__dataset_uses_scratch(l->ds))
        return FERRY_OK;
    /* One sample's fields in a buffer of their own (the slots may already be
     * filling): the image first, then each other field, 64-byte aligned. */
    size_t off[FERRY_FIELD_MAX], total = (l->sample_bytes + 63) & ~(size_t)63;
    for (size_t j = 0; j < l->nxf; j++) {
        off[j] = total;
        total += (l->xf[j].bytes + 63) & ~(size_t)63; /* each fits a slot: no overflow */
    }
    uint8_t *buf = ferry_host_aligned(64, total ? total : 64);
    if (!buf)
        return FERRY_ERR_NO_MEMORY;
    size_t n = l->nworkers ? l->nworkers : 1;
    for (size_t i = 0; i < n; i++) {
        ferry_sample_ctx ctx = {.seed = l->cfg.seed, .train = !l->cfg.eval,
                                .scratch = l->workers[i].scratch};
        int64_t label;
        void *dst[FERRY_FIELD_MAX];
        size_t lengths[FERRY_FIELD_MAX];
        if (l->image_field != SIZE_MAX)
            dst[l->image_field] = buf;
        if (l->label_field != SIZE_MAX)
            dst[l->label_field] = &label;
        for (size_t j = 0; j < l->nxf; j++)
            dst[l->xf[j].index] = buf + off[j];
        (void)ferry_dataset_get_fields(l->ds, index, dst, lengths, &ctx);
    }
    ferry_clear_error();
    ferry_host_free(buf);
    return FERRY_OK;
}

/* The sample the warm-up decodes: epoch 0's first (order[0]). Gzip shards
 * take the first sample of its shard instead, so that the warm-up
 * decompresses one member, not the shard up to that sample. */
static size_t warm_index(const ferry_loader *l)
{
    size_t first = l->epoch_len ? l->order[0] : 0;
    const size_t *ends, *seq;
    size_t k = l->gzip_shards ? ferry__dataset_shard_ends(l->ds, &ends, &seq) : 0;
    if (k == 0)
        return first;
    size_t pos = first;
    for (size_t p = 0; seq && p < ends[k - 1]; p++)
        if (seq[p] == first) {
            pos = p;
            break;
        }
    size_t start = 0;
    for (size_t j = 0; j < k && ends[j] <= pos; j++)
        start = ends[j];
    return seq ? seq[start] : start;
}

/* Gzip shards, and the streaming order: which samples this epoch reads from
 * first_batch on, so that a gzip shard's stream keeps exactly the images
 * still to come and a remote shard's stream starts before its first read.
 * nwarm reads of sample warm come first (the warm-up's, at create). A hint: a
 * failure (no memory) costs speed, never data. */
static void plan_reads(ferry_loader *l, size_t first_batch, size_t warm, size_t nwarm)
{
    if (!l->gzip_shards && !l->stream_perm)
        return;
    size_t a = first_batch * l->batch, b = l->num_batches * l->batch;
    if (b > l->epoch_len)
        b = l->epoch_len;
    if (a > b)
        a = b;
    size_t head = l->stream_perm ? ferry_sampler_stream_head(&l->plan, l->epoch + 1, l->stream_head_perm)
                                 : SIZE_MAX;
    const size_t *idx = l->order + a;
    size_t n = b - a;
    size_t *with_warm = NULL;
    if (nwarm && n <= SIZE_MAX / sizeof *with_warm - nwarm &&
        (with_warm = ferry_host_malloc((n + nwarm) * sizeof *with_warm))) {
        for (size_t i = 0; i < nwarm; i++)
            with_warm[i] = warm;
        memcpy(with_warm + nwarm, idx, n * sizeof *idx);
        idx = with_warm;
        n += nwarm;
    }
    if (ferry__dataset_plan_reads(l->ds, idx, n, head) != FERRY_OK)
        ferry_clear_error();
    ferry_host_free(with_warm);
}

/* Lays out epoch `epoch`: its order, and the first batches in the free slots. Lock held. */
static void start_epoch(ferry_loader *l, uint64_t epoch, size_t first_batch, size_t rest,
                        bool use_rest)
{
    FERRY_ASSERT_HELD(&l->lock);
    FERRY_ASSERT(l->inflight == 0);
    l->epoch = epoch;
    if (use_rest) {
        l->epoch_len = rest;
        l->num_batches = rest / l->batch + (!l->cfg.drop_last && rest % l->batch != 0);
    } else {
        l->epoch_len = l->full_epoch_len;
        l->num_batches = l->full_num_batches;
        l->resumed_from = 0;
        ferry_sampler_order(&l->plan, epoch, l->order, l->order_scratch);
    }
    if (l->stream_perm) /* the shards are read from their start again */
        ferry__dataset_set_readahead(l->ds, STREAM_READAHEAD);
    plan_reads(l, first_batch, 0, 0);
    FERRY_ASSERT(first_batch <= l->num_batches);
    l->next_assign = first_batch;
    l->next_deliver = first_batch;
    l->delivered = first_batch;
    l->failed = FERRY_OK;
    l->failmsg[0] = '\0';
    ferry_slots_assign(l);
}

/* The device cfg names (zero: the default), if it can be used. */
static ferry_status resolve_device(const ferry_loader_config *cfg, ferry_device *dev)
{
    *dev = ferry_device_resolve(cfg->device);
    ferry_status st = ferry_device_check(*dev);
    if (st != FERRY_OK)
        return ferry_fail_prefix(st, "loader: ");
    return FERRY_OK;
}

/* The loader struct with its config, device and locks; no buffers yet. */
static ferry_loader *new_loader(const ferry_loader_config *cfg, ferry_device dev)
{
    ferry_loader *l = ferry_host_calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->cfg = resolve_config(cfg, dev.type == FERRY_DEVICE_CUDA);
    l->cfg.indices = NULL;
    l->ds = ferry_dataset_retain(cfg->dataset);
    l->dev = dev;
    l->gpu = dev.type == FERRY_DEVICE_CUDA;
    l->batch = l->cfg.batch_size;
    l->nslots = l->cfg.prefetch;
    l->nworkers = l->cfg.num_workers;
    l->t0 = ferry_now();
    ferry_mutex_init(&l->lock);
    ferry_mutex_init(&l->trace_lock);
    pthread_cond_init(&l->work_cv, NULL);
    pthread_cond_init(&l->ready_cv, NULL);
    return l;
}

/* Gzip shards have no random access: in a full shuffle workers wait on each
 * other's shard streams, and a shard is decompressed again whenever a sample
 * behind its stream was not kept (the ring full). */
static void warn_gzip_order(ferry_loader *l)
{
    const size_t *ends;
    size_t k = ferry__dataset_shard_ends(l->ds, &ends, NULL);
    l->gzip_shards = ferry__dataset_gzip_shards(l->ds);
    if (l->gzip_shards && l->plan.shuffle && !l->cfg.stream_shuffle_buffer &&
        l->plan.kind != FERRY_SAMPLER_INDICES)
        ferry_log(FERRY_LOG_WARN, "loader: %zu of the %zu shards are gzip-compressed and the order "
                  "is a full shuffle: workers wait on each other's shard streams, and a shard is "
                  "decompressed again when image_config.shard_cache_bytes cannot hold what its "
                  "stream passes; stream_shuffle_buffer reads each shard once an epoch, front to "
                  "back", l->gzip_shards, k);
}

/* A stream reads shards front to back: a shuffle buffer of B samples mixes
 * only neighbours within B, so shards stored class after class (a folder
 * packed unshuffled) give batches of mostly one class. Class-sorted shows as
 * neighbours sharing a label far more often than chance (the sum of the
 * squared class shares); the first million stored samples are enough. */
static void warn_sorted_stream(ferry_loader *l, const size_t *ends, const size_t *seq, size_t k)
{
    size_t n = ends[k - 1] < 1000000 ? ends[k - 1] : 1000000, same = 0, pairs = 0;
    size_t nc = ferry_dataset_class_count(l->ds);
    if (n < 64 || nc < 2 || nc > 100000)
        return;
    size_t *count = ferry_host_calloc(nc, sizeof *count);
    if (!count)
        return;
    int64_t prev = -1, lab;
    for (size_t i = 0; i < n; i++) {
        if (ferry_dataset_label(l->ds, seq ? seq[i] : i, &lab) != FERRY_OK || lab < 0 ||
            (size_t)lab >= nc) {
            prev = -1;
            continue;
        }
        count[lab]++;
        same += lab == prev;
        pairs += prev >= 0;
        prev = lab;
    }
    double chance = 0;
    for (size_t c = 0; c < nc; c++)
        chance += ((double)count[c] / (double)n) * ((double)count[c] / (double)n);
    ferry_host_free(count);
    double frac = pairs ? (double)same / (double)pairs : 0;
    if (frac > 0.5 && frac > chance + 0.25)
        ferry_log(FERRY_LOG_WARN, "loader: the shards are stored sorted by class (%.0f%% of "
                  "neighbouring samples share a label, %.0f%% by chance): streaming reads them "
                  "in stored order and a shuffle buffer of %zu mixes only that far, so batches "
                  "will be mostly one class; pack them shuffled (ferry pack shuffles by default) "
                  "or use a full shuffle", 100 * frac, 100 * chance, l->cfg.stream_shuffle_buffer);
}

/* Streaming mode: the shard boundaries for the sampler. */
static ferry_status plan_stream(ferry_loader *l)
{
    const size_t *ends, *seq;
    size_t k = ferry__dataset_shard_ends(l->ds, &ends, &seq);
    if (!k)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "stream_shuffle_buffer needs a dataset with "
                          "shards (tar shards, a subset or split of them, or a custom dataset that sets "
                          "shard_ends)");
    if (!(l->stream_perm = ferry_host_malloc(k * sizeof *l->stream_perm)) ||
        !(l->stream_head_perm = ferry_host_malloc(k * sizeof *l->stream_head_perm)))
        return FERRY_ERR_NO_MEMORY;
    ferry_sampler_plan_stream(&l->plan, ends, seq, k, l->stream_perm);
    warn_sorted_stream(l, ends, seq, k);
    return FERRY_OK; /* read-ahead goes on at each epoch's start */
}

/* The sampler (with the loader's own copy of cfg->indices), the epoch's length
 * and batch count, and the slot count and batch size those allow. */
static ferry_status plan_epochs(ferry_loader *l, const ferry_loader_config *cfg, size_t len)
{
    ferry_loader_config plan_cfg = l->cfg; /* defaults resolved; the caller's indices */
    plan_cfg.indices = cfg->indices;
    if (cfg->sampler == FERRY_SAMPLER_INDICES && cfg->indices && cfg->num_indices) {
        l->own_indices = ferry_host_malloc(cfg->num_indices * sizeof(size_t));
        if (!l->own_indices)
            return FERRY_ERR_NO_MEMORY;
        memcpy(l->own_indices, cfg->indices, cfg->num_indices * sizeof(size_t));
        plan_cfg.indices = l->own_indices;
        l->cfg.indices = l->own_indices;
    }
    ferry_status st = ferry_sampler_plan_init(&l->plan, &plan_cfg, len);
    if (st == FERRY_OK && cfg->stream_shuffle_buffer)
        st = plan_stream(l);
    if (st != FERRY_OK)
        return st;
    l->epoch_len = l->full_epoch_len = ferry_sampler_len(&l->plan);
    /* Written so that a huge batch_size cannot overflow. */
    l->num_batches = l->epoch_len / l->batch + (!cfg->drop_last && l->epoch_len % l->batch != 0);
    l->full_num_batches = l->num_batches;
    if (l->num_batches == 0) /* before the clamp below: the message names the asked size */
        return ferry_fail(FERRY_ERR_INVALID_ARG,
                          "drop_last with batch_size %zu leaves no batch of %zu samples",
                          l->batch, l->epoch_len);
    /* A batch never holds more than the epoch: size the slots for that. */
    if (l->batch > l->epoch_len)
        l->batch = l->epoch_len;
    if (l->nslots > l->num_batches + 1)
        l->nslots = l->num_batches + 1;
    return FERRY_OK;
}

ferry_status ferry_loader_create(const ferry_loader_config *cfg, ferry_loader **out)
{
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    *out = NULL;
    if (!cfg)
        return FERRY_ARG_ERROR("config is NULL");
    ferry_status st = check_config(cfg);
    if (st != FERRY_OK)
        return FERRY_ARG_CONTEXT(st);
    ferry_device dev;
    if ((st = resolve_device(cfg, &dev)) != FERRY_OK)
        return st;
    size_t len = ferry_dataset_len(cfg->dataset);
    if (len == 0)
        return FERRY_ARG_ERROR("the dataset is empty");
    /* Under FAIL an unreadable file known now would stop the run when its turn
     * comes, perhaps hours in: say so before anything starts. */
    const char *bad = NULL;
    size_t nbad = ferry_dataset_unreadable_count(cfg->dataset, &bad);
    if (nbad && cfg->on_error == FERRY_ON_ERROR_FAIL)
        return ferry_fail(FERRY_ERR_IO, "loader: %zu of the dataset's %zu files cannot be read, the "
                          "first: %s (on_error = FERRY_ON_ERROR_SKIP skips and counts them)",
                          nbad, len, bad);

    ferry_loader *l = new_loader(cfg, dev);
    if (!l)
        return FERRY_ERR_NO_MEMORY;
    /* Only an explicit ON warns: AUTO on a CPU device is the plain case. */
    if (cfg->pin_memory == FERRY_PIN_MEMORY_ON && !l->gpu)
        ferry_log(FERRY_LOG_WARN, "pin_memory requested but %s; using pageable memory",
                  ferry_cuda_is_available() ? "the loader's device is the CPU"
                                            : "no CUDA device is available");
    if ((st = plan_epochs(l, cfg, len)) != FERRY_OK)
        goto fail;
    warn_gzip_order(l);

    l->order = ferry_host_malloc(l->epoch_len * sizeof(size_t));
    l->order_scratch = ferry_host_malloc(len * sizeof(size_t));
    l->slots = ferry_host_calloc(l->nslots, sizeof *l->slots);
    if (cfg->on_error == FERRY_ON_ERROR_SKIP)
        l->known_bad = ferry_host_calloc(len ? len : 1, sizeof *l->known_bad);
    if (!l->order || !l->order_scratch || !l->slots ||
        (cfg->on_error == FERRY_ON_ERROR_SKIP && !l->known_bad)) {
        st = FERRY_ERR_NO_MEMORY;
        goto fail;
    }
    const ferry_field *fields;
    size_t nfields;
    (void)ferry_dataset_fields(l->ds, &fields, &nfields);
    l->image_field = l->label_field = SIZE_MAX;
    for (size_t k = 0; k < nfields; k++) {
        if (fields[k].role == FERRY_FIELD_IMAGE && l->image_field == SIZE_MAX)
            l->image_field = k;
        if (fields[k].dtype == FERRY_DTYPE_I64 && fields[k].ndim == 0 && l->label_field == SIZE_MAX)
            l->label_field = k;
    }
    if ((st = plan_conversion(l)) != FERRY_OK)
        goto fail;
    if ((st = alloc_slots(l)) != FERRY_OK || (st = alloc_workers(l)) != FERRY_OK)
        goto fail;
    ferry_trace_open(l);
    l->cfg.field_dtypes = NULL; /* applied to the slots: the caller's array need not outlive create */
    l->cfg.num_field_dtypes = 0;

    ferry_mutex_lock(&l->lock);
    start_epoch(l, 0, 0, 0, false);
    /* The warm-up's reads in front of epoch 0's plan. No worker runs yet:
     * the warm-up has the dataset to itself. */
    size_t warm = warm_index(l);
    size_t nwarm = !ferry__dataset_uses_scratch(l->ds) ? 0 : l->nworkers ? l->nworkers : 1;
    if (nwarm)
        plan_reads(l, 0, warm, nwarm);
    ferry_mutex_unlock(&l->lock);
    if ((st = warm_scratch(l, warm)) != FERRY_OK)
        goto fail;
    if ((st = ferry_workers_start(l)) != FERRY_OK)
        goto fail;
    *out = l;
    return FERRY_OK;

fail:
    {
        /* A refused configuration is an argument error: the helpers above
         * (plan_epochs, plan_conversion) give bare reasons. */
        if (st == FERRY_ERR_INVALID_ARG)
            FERRY_ARG_CONTEXT(st);
        /* Keep the message of the first failure across the cleanup. */
        char msg[FERRY_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s", ferry_last_error());
        ferry_loader_destroy(l);
        return ferry_fail(st, "%s", msg);
    }
}

void ferry_loader_destroy(ferry_loader *l)
{
    if (!l)
        return;
    ferry_workers_stop(l);
    /* Kernels on the caller's stream may still read the slots. */
    if (l->gpu)
        ferry_device_synchronize(l->dev);
    ferry_trace_close(l);
    if (l->slots) {
        for (size_t k = 0; k < l->nslots; k++) {
            ferry_slot *s = &l->slots[k];
            ferry_loader_field_views_release_(s);
            for (int v = 0; v < 3; v++) {
                ferry_tensor_release(s->images[v]);
                ferry_tensor_release(s->labels[v]);
            }
            ferry_event_destroy(s->copy_start);
            ferry_event_destroy(s->copy_done);
            ferry_event_destroy(s->released);
            ferry_host_free(s->indices);
        }
    }
    if (l->workers) {
        size_t n = l->nworkers ? l->nworkers : 1;
        for (size_t i = 0; i < n; i++) {
            ferry_scratch_destroy(l->workers[i].scratch);
            ferry_host_free(l->workers[i].sample_buf);
        }
    }
    if (l->dev_block)
        ferry_device_free(l->dev, l->dev_block);
    if (l->host_block)
        ferry_pinned_pool_free(l->pool, l->host_block);
    ferry_pinned_pool_destroy(l->pool);
    for (size_t k = 0; l->slots && k < l->nslots; k++)
        ferry_stream_destroy(l->slots[k].copy_stream);
    ferry_host_free(l->workers);
    ferry_host_free(l->slots);
    ferry_host_free(l->order);
    ferry_host_free((void *)l->known_bad);
    ferry_host_free(l->order_scratch);
    if (l->stream_perm) /* set by this loader; a random-access loader wants it off */
        ferry__dataset_set_readahead(l->ds, 0);
    if (l->gzip_shards || l->stream_perm) /* the plan was this loader's */
        (void)ferry__dataset_plan_reads(l->ds, NULL, 0, SIZE_MAX);
    ferry_host_free(l->stream_perm);
    ferry_host_free(l->stream_head_perm);
    ferry_host_free(l->own_indices);
    ferry_dataset_release(l->ds);
    pthread_cond_destroy(&l->work_cv);
    pthread_cond_destroy(&l->ready_cv);
    ferry_mutex_destroy(&l->trace_lock);
    ferry_mutex_destroy(&l->lock);
    ferry_host_free(l);
}

/* The slot next() should return, or NULL when it must wait. Lock held. */
static ferry_slot *find_target(ferry_loader *l, bool *ready)
{
    FERRY_ASSERT_HELD(&l->lock);
    ferry_slot *best = NULL;
    for (size_t k = 0; k < l->nslots; k++) {
        ferry_slot *s = &l->slots[k];
        if (!l->cfg.out_of_order) {
            if ((s->state == SLOT_FILLING || s->state == SLOT_READY) && s->batch == l->next_deliver)
                best = s;
        } else if (s->state == SLOT_READY && (!best || s->batch < best->batch)) {
            best = s;
        }
    }
    *ready = best && best->state == SLOT_READY;
    return best;
}

/* A worker has spent longer than the timeout on a sample of `target`. Lock held. */
static bool timed_out(ferry_loader *l, ferry_slot *target)
{
    FERRY_ASSERT_HELD(&l->lock);
    if (l->cfg.sample_timeout_s <= 0)
        return false;
    double now = ferry_now();
    for (size_t i = 0; i < l->nworkers; i++) {
        ferry_worker *w = &l->workers[i];
        if (!w->busy || (target && &l->slots[w->slot] != target) ||
            now - w->start <= l->cfg.sample_timeout_s)
            continue;
        const char *name = ferry_dataset_sample_name(l->ds, w->index);
        l->failed = FERRY_ERR_TIMEOUT;
        ferry_format_cut(l->failmsg, sizeof l->failmsg,
                         "sample %zu%s%s%s has taken %.3f s, longer than the %.3f s timeout",
                         w->index, name ? " (" : "", name ? name : "", name ? ")" : "",
                         now - w->start, l->cfg.sample_timeout_s);
        return true;
    }
    return false;
}

/* Until a worker says something changed (or 10 ms pass, for the timeout check). Lock held. */
static void wait_ready(ferry_loader *l)
{
    FERRY_ASSERT_HELD(&l->lock);
    if (l->cfg.sample_timeout_s <= 0) {
        ferry_cond_wait(&l->ready_cv, &l->lock);
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 10 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    ferry_cond_timedwait(&l->ready_cv, &l->lock, &ts);
}

/* Makes the caller's stream wait for the slot's copy and converts it. Lock not held. */
static ferry_status deliver(ferry_loader *l, ferry_slot *s, ferry_stream *stream)
{
    FERRY_ASSERT_NOT_HELD(&l->lock);
    FERRY_ASSERT(s->state == SLOT_DELIVERED);
    ferry_status st = FERRY_OK;
    /* The caller's stream (NULL: the loader's device's default stream), not the
     * host, waits for the copy. */
    if (l->gpu)
        st = ferry_stream_wait_event(stream, s->copy_done);
    if (st == FERRY_OK && l->convert_on_device) {
        ferry_convert_spec sp = l->dev_spec;
        sp.count = s->count;
        st = ferry_convert_batch(l->dev, stream, &sp, s->dev, s->out);
    }
    if (st == FERRY_OK && l->field_out_bytes && l->gpu) /* the CPU's: by the workers */
        st = ferry_loader_convert_fields_(l, s, s->count, stream);
    return st;
}

static ferry_status check_next_args(ferry_loader *l, ferry_stream *stream, ferry_batch *out)
{
    if (!l || !out)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s is NULL", l ? "out" : "loader");
    memset(out, 0, sizeof *out);
    if (stream && !ferry_device_eq(ferry_stream_device(stream), l->dev)) {
        char a[FERRY_DEVICE_NAME_MAX], b[FERRY_DEVICE_NAME_MAX];
        return ferry_fail(FERRY_ERR_DEVICE_MISMATCH, "the stream is on %s but the loader delivers to %s",
                          ferry_device_format(ferry_stream_device(stream), a, sizeof a),
                          ferry_device_format(l->dev, b, sizeof b));
    }
    return FERRY_OK;
}

/* The caller is done with the previous batch once `stream`, the one it was
 * delivered on, gets here. Lock held. */
static void release_current(ferry_loader *l, ferry_stream *stream)
{
    FERRY_ASSERT_HELD(&l->lock);
    ferry_slot *prev = l->current;
    if (!prev)
        return;
    FERRY_ASSERT(prev->state == SLOT_DELIVERED);
    if (l->gpu && ferry_event_record(prev->released, stream) == FERRY_OK)
        prev->wait_released = true;
    prev->state = SLOT_FREE;
    l->current = NULL;
    ferry_slots_assign(l);
}

/* Whether next() should wake an idle worker as it leaves: when fewer than
 * half the slots are decoded ahead. A wake costs the caller a system call
 * (5 us on a small VM, more when it wakes every worker at once), so next()
 * wakes one worker, that one the next while work remains
 * (ferry_worker_run_one), and only once the read-ahead runs low: with half
 * the slots still ready the workers lose nothing by starting a step later.
 * A caller about to wait wakes them all at once (await_target). Lock held. */
static bool should_wake(ferry_loader *l)
{
    FERRY_ASSERT_HELD(&l->lock);
    if (l->idle_workers == 0)
        return false;
    size_t ready = 0, low = l->nslots / 2 ? l->nslots / 2 : 1;
    for (size_t k = 0; k < l->nslots; k++)
        ready += l->slots[k].state == SLOT_READY;
    return ready < low;
}

/* Waits for the slot next() returns to be ready, decoding in this thread when
 * there are no workers; stops early when the loader fails or a sample times
 * out. Returns that slot (NULL when none), *ready as find_target. Lock held. */
static ferry_slot *await_target(ferry_loader *l, bool *ready)
{
    FERRY_ASSERT_HELD(&l->lock);
    ferry_slot *s;
    ferry_worker *self = l->nworkers == 0 ? &l->workers[0] : NULL;
    while (!(s = find_target(l, ready)) || !*ready) {
        if (l->failed != FERRY_OK || (s && s->state == SLOT_READY))
            break;
        if (self) {
            if (!ferry_worker_run_one(l, self, s))
                break; /* nothing to run: cannot happen while a slot is filling */
        } else if (timed_out(l, s)) {
            break;
        } else {
            if (l->idle_workers > 0) /* starved: every idle worker, at once */
                pthread_cond_broadcast(&l->work_cv);
            wait_ready(l);
        }
    }
    return s;
}

/* FERRY_OK when s is a good ready batch; otherwise the loader's failure, which
 * the batch's own error becomes, sticky until reset. Lock held. */
static ferry_status check_target(ferry_loader *l, ferry_slot *s, bool ready)
{
    FERRY_ASSERT_HELD(&l->lock);
    ferry_status st = FERRY_OK;
    if (l->failed != FERRY_OK) {
        st = ferry_fail(l->failed, "%s", l->failmsg);
    } else if (!s || !ready) {
        st = ferry_fail(FERRY_ERR_BAD_STATE, "loader: no batch is in flight (internal error)");
    } else if (s->err != FERRY_OK) {
        l->failed = s->err;
        ferry_format_cut(l->failmsg, sizeof l->failmsg, "%s", s->errmsg);
        st = ferry_fail(s->err, "%s", s->errmsg);
    }
    if (st != FERRY_OK || !s) {
        l->failed = st;
        if (!l->failmsg[0])
            ferry_format_cut(l->failmsg, sizeof l->failmsg, "%s", ferry_last_error());
        pthread_cond_broadcast(&l->work_cv);
    }
    return st;
}

/* Hands the ready slot to the caller. Lock held. */
static void take_slot(ferry_loader *l, ferry_slot *s)
{
    FERRY_ASSERT_HELD(&l->lock);
    FERRY_ASSERT(s->state == SLOT_READY && !l->current);
    FERRY_ASSERT(l->cfg.out_of_order || s->batch == l->next_deliver);
    s->state = SLOT_DELIVERED;
    l->current = s;
    l->delivered++;
    if (!l->cfg.out_of_order)
        l->next_deliver++;
}

static void fill_batch(const ferry_loader *l, const ferry_slot *s, ferry_batch *out)
{
    int v = s->count == l->batch ? 0 : s->count == l->full_epoch_len % l->batch ? 1 : 2;
    out->images = s->images[v];
    out->labels = s->labels[v];
    out->size = s->count;
    out->indices = s->indices;
    out->epoch = l->epoch;
    out->index = s->batch;
    out->fields = &s->fields[v];
}

ferry_status ferry_loader_next(ferry_loader *l, ferry_stream *stream, ferry_batch *out)
{
    ferry_status st = check_next_args(l, stream, out);
    if (st != FERRY_OK)
        return FERRY_ARG_CONTEXT(st); /* bare reasons there */
    double t_enter = ferry_now();
    int64_t allocs0 = ferry_debug_thread_alloc_count();
    ferry_mutex_lock(&l->lock);
    if (l->failed != FERRY_OK) {
        st = ferry_fail(FERRY_ERR_BAD_STATE,
                        "the loader failed earlier (%s); call ferry_loader_reset or destroy it",
                        l->failmsg);
        ferry_mutex_unlock(&l->lock);
        return st;
    }
    /* The previous batch was used on the stream it was delivered on: its slot is
     * released in that stream's order, even if this call names another. */
    if (l->current) /* a batch was delivered by a next() that has returned */
        l->warm = true;
    bool warm = l->warm;
    release_current(l, l->last_stream);
    l->last_stream = stream;
    if (l->delivered == l->num_batches) {
        ferry_mutex_unlock(&l->lock);
        return FERRY_END;
    }

    bool ready;
    double t_wait = ferry_now();
    ferry_slot *s = await_target(l, &ready);
    double waited = ferry_now() - t_wait;
    l->stats.wait_s += waited;
    st = check_target(l, s, ready);
    if (st == FERRY_OK && s) {
        take_slot(l, s);
        l->stats.batches++;
        l->stats.samples += s->count;
        ferry_slot_count_skips(l, s);
    }
    bool wake = should_wake(l);
    ferry_mutex_unlock(&l->lock);
    if (wake)
        pthread_cond_signal(&l->work_cv);
    if (st != FERRY_OK || !s)
        return st;

    /* The slot is ours now: no worker touches a delivered slot. The lock is
     * not taken again: a second round would wait on the workers just woken. */
    st = deliver(l, s, stream);
    fill_batch(l, s, out);

    double t_exit = ferry_now();
    ferry_trace_event(l, waited > 0 ? "next (waiting)" : "next", 0, t_enter, t_exit, "batch", s->batch);
    if (warm)
        atomic_fetch_add_explicit(&l->next_allocs, (uint64_t)(ferry_debug_thread_alloc_count() - allocs0),
                                  memory_order_relaxed);
    atomic_fetch_add_explicit(&l->next_ns, (uint64_t)((t_exit - t_enter) * 1e9), memory_order_relaxed);
    return st;
}

ferry_status ferry_loader_reset(ferry_loader *l, uint64_t epoch)
{
    if (!l)
        return FERRY_ARG_ERROR("loader is NULL");
    if (epoch >= FERRY_LOADER_EPOCH_LIMIT_)
        return FERRY_ARG_ERROR("epoch %" PRIu64 " is past 2^56 - 1, the last the random streams "
                               "tell apart", epoch);
    /* Asked for the epoch the loader is already at, from its start, with
     * nothing delivered or failed (the usual reset(l, 0) before the first
     * loop): the batches decoded ahead are the ones wanted, so keep them. */
    ferry_mutex_lock(&l->lock);
    bool fresh = epoch == l->epoch && l->delivered == 0 && l->next_deliver == 0 &&
                 !l->current && l->failed == FERRY_OK && l->resumed_from == 0 &&
                 l->epoch_len == l->full_epoch_len;
    ferry_mutex_unlock(&l->lock);
    if (fresh)
        return FERRY_OK;
    return ferry_loader_restart_(l, epoch, 0, 0, false);
}

ferry_status ferry_loader_restart_(ferry_loader *l, uint64_t epoch, size_t first_batch,
                                   size_t rest, bool use_rest)
{
    if (l->cfg.restart_workers)
        ferry_workers_stop(l);
    ferry_mutex_lock(&l->lock);
    /* Void every claimed task and let the ones being decoded drain. */
    l->generation++;
    l->next_assign = l->num_batches;
    for (size_t k = 0; k < l->nslots; k++)
        if (l->slots[k].state == SLOT_FILLING)
            l->slots[k].next_pos = l->slots[k].count;
    while (l->inflight > 0)
        ferry_cond_wait(&l->ready_cv, &l->lock);
    /* A batch still out: its stream need not live past the next next(), and
     * the caller may have destroyed it before this reset (reset is allowed at
     * any time), so no event goes on it. Waiting for the device orders every
     * use of the batch queued so far before its slot is refilled; only a reset
     * with a batch out (mid-epoch) pays it. */
    ferry_status sync = FERRY_OK;
    if (l->current && l->gpu)
        sync = ferry_device_synchronize(l->dev);
    l->current = NULL;
    l->last_stream = NULL;
    for (size_t k = 0; k < l->nslots; k++) {
        ferry_slot *s = &l->slots[k];
        s->state = SLOT_FREE;
        s->host_in_copy = l->gpu; /* a voided batch may have queued its copy */
    }
    start_epoch(l, epoch, first_batch, rest, use_rest);
    pthread_cond_broadcast(&l->work_cv);
    ferry_mutex_unlock(&l->lock);
    ferry_status st = l->cfg.restart_workers ? ferry_workers_start(l) : FERRY_OK;
    return sync != FERRY_OK ? sync : st;
}

size_t ferry_loader_len(const ferry_loader *l) { return l ? l->full_num_batches : 0; }
size_t ferry_loader_sample_count(const ferry_loader *l)
{
    if (!l)
        return 0;
    return l->cfg.drop_last ? l->full_num_batches * l->batch : l->full_epoch_len;
}
ferry_device ferry_loader_device(const ferry_loader *l) { return l ? l->dev : ferry_cpu(); }

ferry_status ferry_loader_stats_get(ferry_loader *l, ferry_loader_stats *out)
{
    if (!l || !out)
        return FERRY_ARG_ERROR("%s is NULL", l ? "out" : "loader");
    ferry_mutex_lock(&l->lock);
    for (size_t k = 0; k < l->nslots; k++)
        ferry_slot_collect_timing(l, &l->slots[k], false);
    *out = l->stats;
    out->next_s += (double)atomic_load(&l->next_ns) * 1e-9;
    out->allocs_after_warmup += atomic_load(&l->next_allocs);
    size_t n = l->nworkers ? l->nworkers : 1;
    for (size_t i = 0; i < n; i++) {
        out->read_s += atomic_load(&l->workers[i].read_s);
        out->decode_s += atomic_load(&l->workers[i].decode_s);
        out->transform_s += atomic_load(&l->workers[i].transform_s);
    }
    ferry_mutex_unlock(&l->lock);
    return FERRY_OK;
}

void ferry_loader_stats_reset(ferry_loader *l)
{
    if (!l)
        return;
    ferry_mutex_lock(&l->lock);
    ferry_loader_stats keep = l->stats;
    memset(&l->stats, 0, sizeof l->stats);
    l->stats.pinned = keep.pinned;
    l->stats.host_bytes = keep.host_bytes;
    l->stats.device_bytes = keep.device_bytes;
    atomic_store(&l->next_ns, 0);
    atomic_store(&l->next_allocs, 0);
    size_t n = l->nworkers ? l->nworkers : 1;
    for (size_t i = 0; i < n; i++) {
        atomic_store(&l->workers[i].read_s, 0.0);
        atomic_store(&l->workers[i].decode_s, 0.0);
        atomic_store(&l->workers[i].transform_s, 0.0);
    }
    ferry_mutex_unlock(&l->lock);
}
