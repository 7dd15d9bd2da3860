/* Fields: custom and memory datasets declared by fields, and the loader's
 * batch of one tensor per field, with every promise the loader makes for
 * images (one copy per batch, no allocation after warm-up, the same bytes for
 * any worker count, resume, streaming, the skip policy). Run plain (CPU) and
 * with FERRY_SIM_GPUS=2: the loader then delivers to the simulated GPU. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "common/error.h"

/* ---- a custom dataset whose every field is a function of the index ---- */
enum { XDIM = 3, PTS_MAX = 5, IMG_C = 3, IMG_H = 4, IMG_W = 5 };

typedef struct gen {
    bool image;          /* an IMAGE field first */
    size_t bad_every;    /* > 0: samples with index % bad_every == 1 fail */
} gen;

static float x_val(size_t i, size_t j) { return (float)(i * 10 + j) + 0.25f; }
static size_t pts_len(size_t i) { return i % (PTS_MAX + 1); }
static float pt_val(size_t i, size_t r, size_t c) { return (float)(i * 100 + r * 2 + c); }
static int64_t cls_val(size_t i) { return (int64_t)(i % 7); }
static uint8_t px_val(size_t i, size_t j) { return (uint8_t)(i * 31 + j * 7); }

/* The fields, in order: [image,] x f32 [3], cls i64, pts f32 ragged [5, 2]. */
static size_t gen_fields(const gen *g, ferry_field *f)
{
    size_t n = 0;
    if (g->image)
        f[n++] = (ferry_field){.name = "image", .dtype = FERRY_DTYPE_U8, .ndim = 3,
                               .shape = {IMG_C, IMG_H, IMG_W}, .role = FERRY_FIELD_IMAGE};
    f[n++] = (ferry_field){.name = "x", .dtype = FERRY_DTYPE_F32, .ndim = 1, .shape = {XDIM}};
    f[n++] = (ferry_field){.name = "cls", .dtype = FERRY_DTYPE_I64, .ndim = 0};
    f[n++] = (ferry_field){.name = "pts", .dtype = FERRY_DTYPE_F32, .ndim = 2,
                           .shape = {PTS_MAX, 2}, .ragged = true};
    return n;
}

static ferry_status gen_get(void *user, size_t i, void *const *dst, size_t *lengths,
                            const struct ferry_sample_ctx *ctx)
{
    (void)ctx;
    const gen *g = user;
    if (g->bad_every && i % g->bad_every == 1) {
        return ferry_set_error(FERRY_ERR_FORMAT, "made to fail");
    }
    size_t k = 0;
    if (g->image) {
        uint8_t *px = dst[k++];
        for (size_t j = 0; j < IMG_C * IMG_H * IMG_W; j++)
            px[j] = px_val(i, j);
    }
    float *x = dst[k++];
    for (size_t j = 0; j < XDIM; j++)
        x[j] = x_val(i, j);
    int64_t c = cls_val(i);
    memcpy(dst[k++], &c, sizeof c);
    float *p = dst[k];
    /* Garbage past the length: the library must zero it. */
    for (size_t j = 0; j < PTS_MAX * 2; j++)
        p[j] = -7.0f;
    for (size_t r = 0; r < pts_len(i); r++)
        for (size_t cc = 0; cc < 2; cc++)
            p[r * 2 + cc] = pt_val(i, r, cc);
    lengths[k] = pts_len(i);
    return FERRY_OK;
}

static ferry_dataset *gen_dataset(gen *g, size_t n, const size_t *shard_ends, size_t nshards)
{
    ferry_field f[8];
    ferry_dataset_field_callbacks cb = {.len = n, .fields = f, .num_fields = gen_fields(g, f),
                                        .get = gen_get, .shard_ends = shard_ends,
                                        .num_shards = nshards};
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_custom_fields(&cb, g, &ds));
    return ds;
}

/* ---- reading a batch back ---- */
typedef struct host_batch {
    size_t size;
    size_t idx[64];
    float x[64][XDIM];
    int64_t cls[64];
    float pts[64][PTS_MAX * 2];
    int64_t len[64];
    uint8_t img[64][IMG_C * IMG_H * IMG_W];
} host_batch;

static void copy_field(ferry_tensor *t, void *dst, size_t bytes)
{
    ASSERT(t);
    ASSERT_EQ_SIZE(ferry_tensor_nbytes(t), bytes);
    ASSERT_OK(ferry_tensor_copy_to_host(t, dst, bytes));
}

static void read_batch(const ferry_batch *b, bool image, host_batch *h)
{
    ASSERT(b->size <= 64);
    memset(h, 0, sizeof *h);
    h->size = b->size;
    memcpy(h->idx, b->indices, b->size * sizeof *b->indices);
    copy_field(ferry_batch_field(b, "x"), h->x, b->size * sizeof h->x[0]);
    copy_field(ferry_batch_field(b, "cls"), h->cls, b->size * sizeof h->cls[0]);
    copy_field(ferry_batch_field(b, "pts"), h->pts, b->size * sizeof h->pts[0]);
    copy_field(ferry_batch_lengths(b, "pts"), h->len, b->size * sizeof h->len[0]);
    ASSERT(ferry_batch_lengths(b, "x") == NULL);
    ASSERT(ferry_batch_field(b, "nope") == NULL);
    ASSERT(b->labels == ferry_batch_field(b, "cls"));
    if (image) {
        ASSERT(b->images == ferry_batch_field(b, "image"));
        copy_field(b->images, h->img, b->size * sizeof h->img[0]);
    } else {
        ASSERT(b->images == NULL);
    }
}

/* Every field of place p holds what sample h->idx[p] is, padding zero. */
static void check_place(const host_batch *h, size_t p, bool image)
{
    size_t i = h->idx[p];
    for (size_t j = 0; j < XDIM; j++)
        ASSERT_MSG(h->x[p][j] == x_val(i, j), "place %zu (sample %zu): x[%zu] = %g", p, i, j,
                   (double)h->x[p][j]);
    ASSERT_EQ_INT(h->cls[p], cls_val(i));
    ASSERT_EQ_INT(h->len[p], (int64_t)pts_len(i));
    for (size_t r = 0; r < PTS_MAX; r++)
        for (size_t c = 0; c < 2; c++) {
            float want = r < pts_len(i) ? pt_val(i, r, c) : 0.0f;
            ASSERT_MSG(h->pts[p][r * 2 + c] == want, "sample %zu: pts[%zu][%zu] = %g, want %g", i,
                       r, c, (double)h->pts[p][r * 2 + c], (double)want);
        }
    for (size_t j = 0; image && j < IMG_C * IMG_H * IMG_W; j++)
        ASSERT_EQ_INT(h->img[p][j], px_val(i, j));
}

static ferry_loader_config fields_config(ferry_dataset *ds, size_t batch, size_t workers)
{
    ferry_loader_config c = {.dataset = ds, .batch_size = batch,
                             .num_workers = workers ? workers : FERRY_LOADER_NO_WORKERS,
                             .out_dtype = FERRY_DTYPE_U8};
    return c;
}

/* One epoch's batches, every place checked; the whole epoch into all (may be NULL). */
static size_t run_epoch(ferry_loader *l, bool image, host_batch *all, size_t max)
{
    ferry_batch b;
    ferry_status st;
    size_t nb = 0;
    host_batch h;
    while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK) {
        read_batch(&b, image, &h);
        for (size_t p = 0; p < h.size; p++)
            check_place(&h, p, image);
        if (all) {
            ASSERT(nb < max);
            all[nb] = h;
        }
        nb++;
    }
    ASSERT_STATUS(st, FERRY_END);
    return nb;
}

TEST(custom_fields_reach_the_batch_by_name)
{
    gen g = {0};
    ferry_dataset *ds = gen_dataset(&g, 23, NULL, 0);
    const ferry_field *f;
    size_t n;
    ASSERT_OK(ferry_dataset_fields(ds, &f, &n));
    ASSERT_EQ_SIZE(n, 3);
    ASSERT_STR_EQ(f[2].name, "pts");
    ASSERT_EQ_SIZE(ferry_field_bytes(&f[2]), PTS_MAX * 2 * 4);
    ASSERT_EQ_SIZE(ferry_dataset_sample_bytes(ds), 0); /* no image */
    int64_t lab;
    ASSERT_OK(ferry_dataset_label(ds, 9, &lab));
    ASSERT_EQ_INT(lab, cls_val(9));

    ferry_loader_config c = fields_config(ds, 4, 2);
    c.shuffle = true;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    host_batch all[8];
    ASSERT_EQ_SIZE(run_epoch(l, false, all, 8), 6);
    ASSERT_EQ_SIZE(all[5].size, 3); /* the short last batch has its own views */
    bool seen[23] = {0};
    for (size_t k = 0; k < 6; k++)
        for (size_t p = 0; p < all[k].size; p++)
            seen[all[k].idx[p]] = true;
    for (size_t i = 0; i < 23; i++)
        ASSERT(seen[i]);
    ferry_batch b;
    ASSERT_OK(ferry_loader_reset(l, 1));
    ASSERT_OK(ferry_loader_next(l, NULL, &b));
    ASSERT_EQ_SIZE(ferry_batch_field_count(&b), 3);
    const ferry_field *info;
    ASSERT(ferry_batch_field_at(&b, 2, &info) == ferry_batch_field(&b, "pts"));
    ASSERT_STR_EQ(info->name, "pts");
    ASSERT(ferry_batch_field_at(&b, 3, &info) == NULL && info == NULL);
    ASSERT_EQ_INT(ferry_tensor_ndim(ferry_batch_field(&b, "pts")), 3);
    ASSERT_EQ_INT(ferry_tensor_shape(ferry_batch_field(&b, "pts"))[1], PTS_MAX);
    ASSERT_EQ_INT(ferry_tensor_dtype(ferry_batch_lengths(&b, "pts")), FERRY_DTYPE_I64);
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
}

/* The image field keeps the images' path: converted exactly as the same
 * pixels from an image dataset are, with the other fields beside it. */
TEST(image_field_converts_as_an_image_dataset_does)
{
    enum { N = 9 };
    gen g = {.image = true};
    ferry_dataset *ds = gen_dataset(&g, N, NULL, 0);
    static uint8_t px[N][IMG_C * IMG_H * IMG_W];
    static int64_t labels[N];
    for (size_t i = 0; i < N; i++) {
        for (size_t j = 0; j < sizeof px[0]; j++)
            px[i][j] = px_val(i, j);
        labels[i] = cls_val(i);
    }
    ferry_sample_format fmt = {IMG_C, IMG_H, IMG_W, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8};
    ferry_dataset *plain;
    ASSERT_OK(ferry_dataset_memory(px, &fmt, N, labels, &plain));
    const ferry_field *pf;
    size_t pn;
    ASSERT_OK(ferry_dataset_fields(plain, &pf, &pn));
    ASSERT_EQ_SIZE(pn, 2);
    ASSERT_STR_EQ(pf[0].name, "image");
    ASSERT_EQ_INT(pf[0].role, FERRY_FIELD_IMAGE);
    ASSERT_STR_EQ(pf[1].name, "label");

    ferry_loader_config c = fields_config(ds, 4, 3);
    c.out_dtype = FERRY_DTYPE_F32;
    c.layout = FERRY_LAYOUT_HWC;
    c.mean[0] = 0.5f, c.mean[1] = 0.25f, c.std[0] = 0.2f, c.std[2] = 2.0f;
    ferry_loader *a, *p;
    ASSERT_OK(ferry_loader_create(&c, &a));
    c.dataset = plain;
    ASSERT_OK(ferry_loader_create(&c, &p));
    ferry_batch ba, bp;
    float fa[4 * IMG_C * IMG_H * IMG_W], fp[4 * IMG_C * IMG_H * IMG_W];
    int64_t la[4], lp[4];
    float xa[4][XDIM];
    while (ferry_loader_next(a, NULL, &ba) == FERRY_OK) {
        ASSERT_OK(ferry_loader_next(p, NULL, &bp));
        size_t bytes = ba.size * sizeof fa[0] * IMG_C * IMG_H * IMG_W;
        copy_field(ba.images, fa, bytes);
        copy_field(bp.images, fp, bytes);
        ASSERT_MEM_EQ(fa, fp, bytes);
        ASSERT_EQ_INT(ferry_tensor_shape(ba.images)[3], IMG_C); /* NHWC */
        copy_field(ba.labels, la, ba.size * 8);
        copy_field(bp.labels, lp, ba.size * 8);
        ASSERT_MEM_EQ(la, lp, ba.size * 8);
        ASSERT(ferry_batch_field(&bp, "label") == bp.labels);
        copy_field(ferry_batch_field(&ba, "x"), xa, ba.size * sizeof xa[0]);
        for (size_t q = 0; q < ba.size; q++)
            ASSERT(xa[q][1] == x_val(ba.indices[q], 1));
    }
    ferry_loader_destroy(a);
    ferry_loader_destroy(p);
    ferry_dataset_release(plain);

    /* ferry_dataset_get still reads the image and the label of such a dataset. */
    uint8_t one[IMG_C * IMG_H * IMG_W];
    int64_t lab;
    ASSERT_OK(ferry_dataset_get(ds, 5, one, sizeof one, NULL, &lab));
    ASSERT_MEM_EQ(one, px[5], sizeof one);
    ASSERT_EQ_INT(lab, cls_val(5));
    ferry_dataset_release(ds);
    gen g2 = {0};
    ds = gen_dataset(&g2, 3, NULL, 0);
    ASSERT_STATUS(ferry_dataset_get(ds, 0, one, sizeof one, NULL, &lab), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "ferry_dataset_get_fields");
    ferry_dataset_release(ds);
}

TEST(bytes_identical_for_any_worker_count_one_copy_per_batch)
{
    gen g = {.image = true};
    ferry_dataset *ds = gen_dataset(&g, 37, NULL, 0);
    static host_batch ref[16], got[16];
    size_t workers[] = {0, 1, 3};
    for (size_t w = 0; w < 3; w++) {
        ferry_loader_config c = fields_config(ds, 5, workers[w]);
        c.shuffle = true;
        c.seed = 11;
        c.prefetch = 3;
        ferry_loader *l;
        ASSERT_OK(ferry_loader_create(&c, &l));
        ASSERT_OK(ferry_loader_reset(l, 2));
        size_t nb = run_epoch(l, true, w ? got : ref, 16);
        ASSERT_EQ_SIZE(nb, 8);
        if (w)
            ASSERT_MEM_EQ(got, ref, sizeof ref);
        /* One copy a batch holds every field: each field's device memory lies
         * in the span the loader copies per batch. */
        ferry_loader_stats s;
        ASSERT_OK(ferry_loader_stats_get(l, &s));
        ASSERT_OK(ferry_loader_reset(l, 0));
        ferry_batch b;
        ASSERT_OK(ferry_loader_next(l, NULL, &b));
        if (ferry_loader_device(l).type == FERRY_DEVICE_CUDA) {
            ASSERT(s.h2d_bytes > 0 && s.h2d_bytes % 8 == 0);
            size_t per = (size_t)(s.h2d_bytes / 8);
            const uint8_t *lo = ferry_tensor_data(b.images);
            ASSERT(lo);
            for (size_t k = 0; k < ferry_batch_field_count(&b); k++) {
                const ferry_field *fi;
                ferry_tensor *t = ferry_batch_field_at(&b, k, &fi);
                if (fi->role == FERRY_FIELD_IMAGE)
                    continue; /* out_dtype u8, same layout: the copied bytes themselves */
                const uint8_t *d = ferry_tensor_data(t);
                ASSERT_MSG(d >= lo && d + ferry_tensor_nbytes(t) <= lo + per,
                           "field '%s' lies outside the batch's one copy", fi->name);
            }
            const uint8_t *len = ferry_tensor_data(ferry_batch_lengths(&b, "pts"));
            ASSERT(len >= lo && len + 5 * 8 <= lo + per);
        }
        ferry_loader_destroy(l);
    }
    ferry_dataset_release(ds);
}

TEST(no_allocations_after_warmup_with_fields)
{
    gen g = {.image = true};
    ferry_dataset *ds = gen_dataset(&g, 60, NULL, 0);
    ferry_loader_config c = fields_config(ds, 6, 2);
    c.shuffle = true;
    c.out_dtype = FERRY_DTYPE_F32;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_batch b;
    int64_t live0 = 0;
    for (int e = 0; e < 3; e++) {
        if (e)
            ASSERT_OK(ferry_loader_reset(l, (uint64_t)e));
        while (ferry_loader_next(l, NULL, &b) == FERRY_OK)
            if (!live0)
                live0 = ferry_debug_alloc_live();
    }
    ASSERT_EQ_INT(ferry_debug_alloc_live(), live0);
    ferry_loader_stats s;
    ASSERT_OK(ferry_loader_stats_get(l, &s));
    ASSERT_EQ_INT(s.allocs_after_warmup, 0);
    ASSERT_EQ_INT(s.samples, 180);
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
}

TEST(resume_is_bit_exact_with_fields)
{
    gen g = {0};
    ferry_dataset *ds = gen_dataset(&g, 41, NULL, 0);
    ferry_loader_config c = fields_config(ds, 4, 2);
    c.shuffle = true;
    c.seed = 5;
    static host_batch ref[16], got[16];
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ASSERT_EQ_SIZE(run_epoch(l, false, ref, 16), 11);
    ASSERT_OK(ferry_loader_reset(l, 0));
    ferry_batch b;
    for (int k = 0; k < 4; k++)
        ASSERT_OK(ferry_loader_next(l, NULL, &b));
    ferry_loader_state st;
    ASSERT_OK(ferry_loader_state_get(l, &st));
    ferry_loader_destroy(l);

    c.num_workers = 3;
    c.prefetch = 2;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ASSERT_OK(ferry_loader_restore(l, &st));
    ASSERT_EQ_SIZE(run_epoch(l, false, got, 16), 7);
    ASSERT_MEM_EQ(got, ref + 4, 7 * sizeof got[0]);
    ferry_loader_destroy(l);

    /* Another field list is another dataset: restore says so. */
    ferry_field f[4];
    gen_fields(&g, f);
    f[2].shape[0] = PTS_MAX + 1;
    ferry_dataset_field_callbacks cb = {.len = 41, .fields = f, .num_fields = 3, .get = gen_get};
    ferry_dataset *other;
    ASSERT_OK(ferry_dataset_custom_fields(&cb, &g, &other));
    c.dataset = other;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ASSERT_STATUS(ferry_loader_restore(l, &st), FERRY_ERR_INVALID_ARG);
    ferry_loader_destroy(l);
    ferry_dataset_release(other);
    ferry_dataset_release(ds);
}

TEST(skip_policy_replaces_every_field_of_a_sample)
{
    gen g = {.image = true, .bad_every = 5};
    ferry_dataset *ds = gen_dataset(&g, 30, NULL, 0);
    ferry_loader_config c = fields_config(ds, 4, 2);
    c.on_error = FERRY_ON_ERROR_SKIP;
    c.shuffle = true;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    static host_batch all[8];
    ASSERT_EQ_SIZE(run_epoch(l, true, all, 8), 8); /* every place consistent */
    for (size_t k = 0; k < 8; k++)
        for (size_t p = 0; p < all[k].size; p++)
            ASSERT(all[k].idx[p] % 5 != 1);
    ferry_loader_stats s;
    ASSERT_OK(ferry_loader_stats_get(l, &s));
    ASSERT_EQ_INT(s.skipped, 6);
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
}

TEST(streaming_mode_reads_field_shards)
{
    size_t ends[] = {10, 20, 25, 40};
    gen g = {0};
    ferry_dataset *ds = gen_dataset(&g, 40, ends, 4);
    ferry_loader_config c = fields_config(ds, 8, 2);
    c.shuffle = true;
    c.stream_shuffle_buffer = 4;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    static host_batch all[8];
    ASSERT_EQ_SIZE(run_epoch(l, false, all, 8), 5);
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
}

/* A view (subset, split) carries its base's fields. */
TEST(views_keep_the_fields)
{
    gen g = {0};
    ferry_dataset *ds = gen_dataset(&g, 20, NULL, 0), *sub, *tr, *va;
    ASSERT_OK(ferry_dataset_subset(ds, 7, 15, &sub));
    ASSERT_OK(ferry_dataset_split(sub, 0.25, 3, &tr, &va));
    const ferry_field *f;
    size_t n;
    ASSERT_OK(ferry_dataset_fields(tr, &f, &n));
    ASSERT_EQ_SIZE(n, 3);
    ASSERT(f[2].ragged);
    float x[XDIM], pts[PTS_MAX * 2];
    int64_t cls;
    size_t len[3];
    void *dst[3] = {x, &cls, pts};
    ASSERT_OK(ferry_dataset_get_fields(sub, 4, dst, len, NULL));
    ASSERT(x[2] == x_val(11, 2));
    ASSERT_EQ_SIZE(len[2], pts_len(11));
    ASSERT_EQ_SIZE(len[0], XDIM);
    ASSERT_EQ_SIZE(len[1], 1);
    /* Through a loader: each place is what get_fields gives for its index. */
    ferry_loader_config c = fields_config(tr, 3, 2);
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_batch b;
    host_batch h;
    size_t seen = 0;
    while (ferry_loader_next(l, NULL, &b) == FERRY_OK) {
        read_batch(&b, false, &h);
        for (size_t p = 0; p < h.size; p++, seen++) {
            ASSERT_OK(ferry_dataset_get_fields(tr, h.idx[p], dst, len, NULL));
            ASSERT_MEM_EQ(h.x[p], x, sizeof x);
            ASSERT_MEM_EQ(h.pts[p], pts, sizeof pts);
            ASSERT_EQ_INT(h.len[p], (int64_t)len[2]);
        }
    }
    ASSERT_EQ_SIZE(seen, 6);
    ferry_loader_destroy(l);
    ferry_dataset_release(tr);
    ferry_dataset_release(va);
    ferry_dataset_release(sub);
    ferry_dataset_release(ds);
}

/* A multi-label target (a float vector), a regression value and two inputs,
 * from the caller's arrays; a ragged column packed with offsets. */
TEST(memory_fields_multilabel_and_ragged)
{
    enum { N = 7, NL = 4 };
    static float multi[N][NL], reg[N], in_a[N][2];
    static int32_t in_b[N][3];
    static uint8_t tags[64];
    size_t off[N + 1] = {0};
    for (size_t i = 0; i < N; i++) {
        for (size_t j = 0; j < NL; j++)
            multi[i][j] = (float)((i >> j) & 1);
        reg[i] = (float)i * 0.5f - 1.0f;
        in_a[i][0] = (float)i, in_a[i][1] = -(float)i;
        for (size_t j = 0; j < 3; j++)
            in_b[i][j] = (int32_t)(i * 3 + j);
        off[i + 1] = off[i] + i % 4;
        for (size_t r = off[i]; r < off[i + 1]; r++)
            tags[r] = (uint8_t)(i * 16 + r - off[i]);
    }
    ferry_memory_field cols[] = {
        {.field = {.name = "a", .dtype = FERRY_DTYPE_F32, .ndim = 1, .shape = {2}}, .data = in_a},
        {.field = {.name = "b", .dtype = FERRY_DTYPE_I32, .ndim = 1, .shape = {3}}, .data = in_b},
        {.field = {.name = "multi", .dtype = FERRY_DTYPE_F32, .ndim = 1, .shape = {NL}},
         .data = multi},
        {.field = {.name = "reg", .dtype = FERRY_DTYPE_F32, .ndim = 0}, .data = reg},
        {.field = {.name = "tags", .dtype = FERRY_DTYPE_U8, .ndim = 1, .shape = {3},
                   .ragged = true}, .data = tags, .offsets = off},
    };
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_memory_fields(cols, 5, N, &ds));
    ASSERT_STATUS(ferry_dataset_label(ds, 0, &(int64_t){0}), FERRY_ERR_UNSUPPORTED);
    ferry_loader_config c = fields_config(ds, N, 2);
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_batch b;
    ASSERT_OK(ferry_loader_next(l, NULL, &b));
    ASSERT(b.images == NULL && b.labels == NULL);
    float gm[N][NL], gr[N], ga[N][2];
    int32_t gb[N][3];
    uint8_t gt[N][3];
    int64_t gl[N];
    copy_field(ferry_batch_field(&b, "multi"), gm, sizeof gm);
    copy_field(ferry_batch_field(&b, "reg"), gr, sizeof gr);
    copy_field(ferry_batch_field(&b, "a"), ga, sizeof ga);
    copy_field(ferry_batch_field(&b, "b"), gb, sizeof gb);
    copy_field(ferry_batch_field(&b, "tags"), gt, sizeof gt);
    copy_field(ferry_batch_lengths(&b, "tags"), gl, sizeof gl);
    ASSERT_MEM_EQ(gm, multi, sizeof gm);
    ASSERT_MEM_EQ(gr, reg, sizeof gr);
    ASSERT_MEM_EQ(ga, in_a, sizeof ga);
    ASSERT_MEM_EQ(gb, in_b, sizeof gb);
    for (size_t i = 0; i < N; i++) {
        ASSERT_EQ_INT(gl[i], (int64_t)(i % 4 < 3 ? i % 4 : 3));
        for (size_t r = 0; r < 3; r++)
            ASSERT_EQ_INT(gt[i][r], r < i % 4 ? tags[off[i] + r] : 0);
    }
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
}

TEST(bad_declarations_and_lengths_are_named)
{
    float data[4] = {0};
    size_t bad_off[3] = {0, 5, 6};
    ferry_memory_field cols[2] = {
        {.field = {.name = "v", .dtype = FERRY_DTYPE_F32, .ndim = 1, .shape = {2}}, .data = data},
        {.field = {.name = "v", .dtype = FERRY_DTYPE_F32, .ndim = 0}, .data = data},
    };
    ferry_dataset *ds;
    ASSERT_STATUS(ferry_dataset_memory_fields(cols, 2, 2, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "two fields are called 'v'");
    cols[1].field = (ferry_field){.name = "s", .dtype = FERRY_DTYPE_F32, .ragged = true};
    ASSERT_STATUS(ferry_dataset_memory_fields(cols, 2, 2, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "'s': a scalar cannot be ragged");
    cols[1].field = (ferry_field){.name = "r", .dtype = FERRY_DTYPE_F32, .ndim = 1,
                                  .shape = {4}, .ragged = true};
    cols[1].offsets = bad_off;
    ASSERT_STATUS(ferry_dataset_memory_fields(cols, 2, 2, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "'r': sample 0 has rows [0, 5)");
    cols[1].field = (ferry_field){.name = "img", .dtype = FERRY_DTYPE_I32, .ndim = 3,
                                  .shape = {1, 2, 2}, .role = FERRY_FIELD_IMAGE};
    ASSERT_STATUS(ferry_dataset_memory_fields(cols, 2, 1, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "'img': an IMAGE field is a fixed u8 or f32");
    cols[1].field = (ferry_field){.name = "big", .dtype = FERRY_DTYPE_F32, .ndim = 2,
                                  .shape = {(size_t)1 << 40, (size_t)1 << 40}};
    ASSERT_STATUS(ferry_dataset_memory_fields(cols, 2, 1, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "'big'");

    gen g = {0};
    ds = gen_dataset(&g, 4, NULL, 0);
    size_t idx;
    ASSERT_STATUS(ferry_dataset_field_index(ds, "boxes", &idx), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "no field 'boxes' (the dataset's fields: 'x', 'cls', 'pts')");
    ASSERT_OK(ferry_dataset_field_index(ds, "pts", &idx));
    ASSERT_EQ_SIZE(idx, 2);
    ferry_dataset_release(ds);
}

/* A get that gives a ragged field more rows than its maximum, or none. */
static size_t give_len;
static ferry_status overlong_get(void *user, size_t i, void *const *dst, size_t *lengths,
                                 const struct ferry_sample_ctx *ctx)
{
    (void)user, (void)i, (void)ctx;
    memset(dst[0], 0, 8);
    if (give_len != SIZE_MAX)
        lengths[0] = give_len;
    return FERRY_OK;
}

static const char *overlong_name(void *user, size_t i)
{
    (void)user;
    return i == 2 ? "two.bin" : NULL;
}

TEST(a_ragged_length_over_its_maximum_fails_by_name)
{
    ferry_field f = {.name = "boxes", .dtype = FERRY_DTYPE_F32, .ndim = 2, .shape = {2, 4},
                     .ragged = true, .role = FERRY_FIELD_BOXES_XYXY};
    ferry_dataset_field_callbacks cb = {.len = 3, .fields = &f, .num_fields = 1,
                                        .get = overlong_get, .name = overlong_name};
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_custom_fields(&cb, NULL, &ds));
    float buf[8];
    void *dst[1] = {buf};
    size_t len[1];
    give_len = 3;
    ASSERT_STATUS(ferry_dataset_get_fields(ds, 2, dst, len, NULL), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "two.bin: field 'boxes': 3 entries, more than its maximum 2");
    give_len = SIZE_MAX;
    ASSERT_STATUS(ferry_dataset_get_fields(ds, 1, dst, len, NULL), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "sample 1: field 'boxes': get gave no length");
    ASSERT_STATUS(ferry_dataset_get_fields(ds, 1, dst, NULL, NULL), FERRY_ERR_INVALID_ARG);
    give_len = 1;
    ferry_loader_config c = fields_config(ds, 3, 1);
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_batch b;
    ASSERT_OK(ferry_loader_next(l, NULL, &b));
    ferry_loader_destroy(l);
    give_len = 5;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ASSERT_STATUS(ferry_loader_next(l, NULL, &b), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "field 'boxes': 5 entries");
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
}

/* A field asked for in another dtype arrives converted on the device: i32
 * inputs as f32, a ragged f32 field as f16 (its padding still zero). */
TEST(field_dtypes_convert_on_the_device)
{
    enum { N = 6 };
    static int32_t ints[N][3];
    static float vals[16];
    size_t off[N + 1] = {0};
    for (size_t i = 0; i < N; i++) {
        for (size_t j = 0; j < 3; j++)
            ints[i][j] = (int32_t)(i * 1000 + j) - 2500;
        off[i + 1] = off[i] + i % 3;
    }
    for (size_t r = 0; r < 16; r++)
        vals[r] = 0.5f * (float)r - 3.0f;
    ferry_memory_field cols[] = {
        {.field = {.name = "ints", .dtype = FERRY_DTYPE_I32, .ndim = 1, .shape = {3}}, .data = ints},
        {.field = {.name = "vals", .dtype = FERRY_DTYPE_F32, .ndim = 1, .shape = {2}, .ragged = true},
         .data = vals, .offsets = off},
    };
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_memory_fields(cols, 2, N, &ds));
    ferry_field_dtype casts[] = {{"ints", FERRY_DTYPE_F32}, {"vals", FERRY_DTYPE_F16}};
    ferry_loader_config c = fields_config(ds, N, 2);
    c.field_dtypes = casts;
    c.num_field_dtypes = 2;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_batch b;
    for (int e = 0; e < 2; e++) {
        ASSERT_OK(ferry_loader_reset(l, (uint64_t)e));
        ASSERT_OK(ferry_loader_next(l, NULL, &b));
        ASSERT_EQ_INT(ferry_tensor_dtype(ferry_batch_field(&b, "ints")), FERRY_DTYPE_F32);
        ASSERT_EQ_INT(ferry_tensor_dtype(ferry_batch_field(&b, "vals")), FERRY_DTYPE_F16);
        float fi[N][3];
        uint16_t hv[N][2];
        int64_t len[N];
        copy_field(ferry_batch_field(&b, "ints"), fi, sizeof fi);
        copy_field(ferry_batch_field(&b, "vals"), hv, sizeof hv);
        copy_field(ferry_batch_lengths(&b, "vals"), len, sizeof len);
        for (size_t i = 0; i < N; i++) {
            for (size_t j = 0; j < 3; j++)
                ASSERT(fi[i][j] == (float)ints[i][j]);
            ASSERT_EQ_INT(len[i], (int64_t)(i % 3));
            for (size_t r = 0; r < 2; r++) {
                /* every value here is exact in f16: k/2 - 3 */
                float want = r < i % 3 ? vals[off[i] + r] : 0.0f;
                uint16_t h = hv[i][r];
                int ex = (h >> 10) & 31;
                float mant = (float)(h & 1023);
                float got = ex ? ldexpf(1.0f + mant / 1024.0f, ex - 15) : ldexpf(mant / 1024.0f, -14);
                got = (h & 0x8000) ? -got : got;
                ASSERT_MSG(got == want, "sample %zu vals[%zu]: %g, want %g", i, r, (double)got,
                           (double)want);
            }
        }
    }
    ferry_loader_stats s;
    ASSERT_OK(ferry_loader_stats_get(l, &s));
    ASSERT_EQ_INT(s.allocs_after_warmup, 0);
    ferry_loader_destroy(l);

    ferry_field_dtype bad[] = {{"nope", FERRY_DTYPE_F32}};
    c.field_dtypes = bad;
    c.num_field_dtypes = 1;
    ASSERT_STATUS(ferry_loader_create(&c, &l), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "field_dtypes[0]: no field 'nope'");
    ferry_dataset_release(ds);
}

/* An elastic restore (another world size) makes the short batch's views again,
 * fields included, as often as it is restored: every place still holds its
 * sample, and nothing is released twice (ASan). */
TEST(elastic_restore_remakes_the_field_views)
{
    gen g = {.image = true};
    ferry_dataset *ds = gen_dataset(&g, 29, NULL, 0);
    ferry_loader_config c = fields_config(ds, 3, 2);
    c.sampler = FERRY_SAMPLER_DISTRIBUTED;
    c.world_size = 2;
    c.shuffle = true;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_batch b;
    ASSERT_OK(ferry_loader_next(l, NULL, &b));
    ferry_loader_state st;
    ASSERT_OK(ferry_loader_state_get(l, &st));
    ferry_loader_destroy(l);
    /* 29 - 2 x 3 = 23 left over 3 ranks: 8 each, a short batch of 2 (a fresh
     * epoch's is 1): views made at restore */
    c.world_size = 3;
    ASSERT_OK(ferry_loader_create(&c, &l));
    for (int round = 0; round < 3; round++) {
        ASSERT_OK(ferry_loader_restore(l, &st));
        ASSERT_EQ_SIZE(run_epoch(l, true, NULL, 0), 3);
    }
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
}
