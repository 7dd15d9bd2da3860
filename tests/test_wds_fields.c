/* WebDataset members as fields (ferry_dataset_shards_fields): images, .cls,
 * .npy arrays NumPy wrote (tests/data/npy, their data in X.bin), raw bytes;
 * the caller's order; a missing member failing by name; and the loader over
 * such shards (every field, any worker count, streaming, the skip policy). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "harness_http.h"

enum { W = 5, H = 3 };

typedef struct blob {
    uint8_t *d;
    size_t n;
} blob;

static blob fixture(const char *name, const char *ext)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/npy/%s.%s", FERRY_SOURCE_DIR, name, ext);
    FILE *f = fopen(path, "rb");
    ASSERT_MSG(f, "cannot open %s", path);
    blob b = {malloc(1 << 16), 0};
    b.n = fread(b.d, 1, 1 << 16, f);
    fclose(f);
    return b;
}

static void px_of(size_t i, uint8_t *px)
{
    for (size_t j = 0; j < W * H; j++)
        px[j] = (uint8_t)(i * 40 + j * 3);
}

/* Key k<i>: a PNG and a .cls (label i % 3), boxes from fixture box[i] (NULL:
 * none), and a .txt of i + 1 letters. */
static void put_sample(ft_tar *t, size_t i, const char *box)
{
    char key[16], name[48], txt[16];
    uint8_t px[W * H];
    px_of(i, px);
    snprintf(key, sizeof key, "k%zu", i);
    ft_tar_png_sample(t, key, px, W, H, i % 3, "wds_fields_tmp.png");
    if (box) {
        blob b = fixture(box, "npy");
        snprintf(name, sizeof name, "%s.boxes.npy", key);
        ft_tar_file(t, name, b.d, b.n);
        free(b.d);
    }
    memset(txt, 'a' + (int)i, i + 1);
    txt[i + 1] = '\0';
    snprintf(name, sizeof name, "%s.txt", key);
    ft_tar_text(t, name, txt);
}

static const char *const BOXES[] = {"f32_3x4", "f32_0x4", "boxes_v2", "f32_3x4"};

static const char *make_shard(const char *rel, size_t first, size_t n, bool one_missing)
{
    ft_tar t = {0};
    for (size_t i = first; i < first + n; i++)
        put_sample(&t, i, one_missing && i == first + 1 ? NULL : BOXES[i % 4]);
    ft_tar_end(&t);
    return ft_tar_save(&t, rel);
}

static const char *const MEMBERS[] = {"png", "cls", "boxes.npy", "txt"};

/* Sample i's fields as the fixtures say. */
static void check_sample(const uint8_t *img, int64_t cls, const float *boxes, size_t nbox,
                         const uint8_t *txt, size_t ntxt, size_t i)
{
    uint8_t px[W * H];
    px_of(i, px);
    ASSERT_MEM_EQ(img, px, sizeof px);
    ASSERT_EQ_INT(cls, (int64_t)(i % 3));
    blob want = fixture(BOXES[i % 4], "bin");
    ASSERT_EQ_SIZE(nbox * 16, want.n);
    ASSERT_MEM_EQ(boxes, want.d, want.n);
    for (size_t r = nbox; r < 3; r++)
        for (size_t c = 0; c < 4; c++)
            ASSERT(boxes[r * 4 + c] == 0.0f);
    free(want.d);
    ASSERT_EQ_SIZE(ntxt, i + 1);
    for (size_t j = 0; j < ntxt; j++)
        ASSERT_EQ_INT(txt[j], 'a' + (int)i);
}

TEST(members_become_fields_in_the_callers_order)
{
    const char *p = make_shard("wds_fields_a.tar", 0, 4, false);
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_shards_fields(&p, 1, NULL, MEMBERS, 4, &ds));
    const ferry_field *f;
    size_t n;
    ASSERT_OK(ferry_dataset_fields(ds, &f, &n));
    ASSERT_EQ_SIZE(n, 4);
    ASSERT_STR_EQ(f[0].name, "png");
    ASSERT_EQ_INT(f[0].role, FERRY_FIELD_IMAGE);
    ASSERT_EQ_SIZE(f[0].shape[0], 1);
    ASSERT_EQ_SIZE(f[0].shape[1], H);
    ASSERT_EQ_SIZE(f[0].shape[2], W);
    ASSERT_EQ_INT(f[1].dtype, FERRY_DTYPE_I64);
    ASSERT_EQ_SIZE(f[1].ndim, 0);
    ASSERT_EQ_INT(f[2].dtype, FERRY_DTYPE_F32);
    ASSERT(f[2].ragged); /* 3 boxes or none */
    ASSERT_EQ_SIZE(f[2].ndim, 2);
    ASSERT_EQ_SIZE(f[2].shape[0], 3);
    ASSERT_EQ_SIZE(f[2].shape[1], 4);
    ASSERT(f[3].ragged && f[3].dtype == FERRY_DTYPE_U8 && f[3].shape[0] == 4);
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), 4);
    for (size_t i = 0; i < 4; i++) {
        uint8_t img[W * H], txt[4];
        int64_t cls;
        float boxes[12];
        void *dst[4] = {img, &cls, boxes, txt};
        size_t len[4];
        ASSERT_OK(ferry_dataset_get_fields(ds, i, dst, len, NULL));
        check_sample(img, cls, boxes, len[2], txt, len[3], i);
        int64_t lab;
        ASSERT_OK(ferry_dataset_label(ds, i, &lab));
        ASSERT_EQ_INT(lab, (int64_t)(i % 3));
    }
    ASSERT_STR_CONTAINS(ferry_dataset_sample_name(ds, 2), "wds_fields_a.tar:k2");
    ferry_dataset_release(ds);

    /* Another order, another selection: the fields follow it. */
    const char *const two[] = {"boxes.npy", "cls"};
    ASSERT_OK(ferry_dataset_shards_fields(&p, 1, NULL, two, 2, &ds));
    ASSERT_OK(ferry_dataset_fields(ds, &f, &n));
    ASSERT_EQ_SIZE(n, 2);
    ASSERT_STR_EQ(f[0].name, "boxes.npy");
    ASSERT_STR_EQ(f[1].name, "cls");
    ASSERT_EQ_SIZE(ferry_dataset_sample_bytes(ds), 0);
    ferry_dataset_release(ds);
}

static void check_batch(const ferry_batch *b)
{
    uint8_t img[8][W * H], txt[8][16];
    int64_t cls[8], nbox[8] = {3, 3, 3, 3, 3, 3, 3, 3}, ntxt[8];
    float boxes[8][12];
    size_t B = b->size, tmax = (size_t)ferry_tensor_shape(ferry_batch_field(b, "txt"))[1];
    ASSERT(B <= 8 && tmax <= 16);
    ASSERT_OK(ferry_tensor_copy_to_host(ferry_batch_field(b, "png"), img, B * sizeof img[0]));
    ASSERT_OK(ferry_tensor_copy_to_host(b->labels, cls, B * sizeof cls[0]));
    ASSERT_OK(ferry_tensor_copy_to_host(ferry_batch_field(b, "boxes.npy"), boxes, B * sizeof boxes[0]));
    if (ferry_batch_lengths(b, "boxes.npy")) /* a fixed field when every key has 3 */
        ASSERT_OK(ferry_tensor_copy_to_host(ferry_batch_lengths(b, "boxes.npy"), nbox, B * 8));
    uint8_t packed[8 * 16];
    ASSERT_OK(ferry_tensor_copy_to_host(ferry_batch_field(b, "txt"), packed, B * tmax));
    for (size_t p = 0; p < B; p++)
        memcpy(txt[p], packed + p * tmax, tmax);
    ASSERT_OK(ferry_tensor_copy_to_host(ferry_batch_lengths(b, "txt"), ntxt, B * 8));
    for (size_t p = 0; p < B; p++) {
        /* the dataset index is the key's number: one shard of keys in order,
         * or two whose second starts where the first ends */
        size_t i = b->indices[p];
        check_sample(img[p], cls[p], boxes[p], (size_t)nbox[p], txt[p], (size_t)ntxt[p], i);
        for (size_t j = (size_t)ntxt[p]; j < tmax; j++)
            ASSERT_EQ_INT(txt[p][j], 0);
    }
}

TEST(loader_batches_every_member_for_any_worker_count)
{
    const char *p[2] = {make_shard("wds_fields_b0.tar", 0, 4, false),
                        make_shard("wds_fields_b1.tar", 4, 3, false)};
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_shards_fields(p, 2, NULL, MEMBERS, 4, &ds));
    uint64_t digest[3];
    size_t workers[] = {FERRY_LOADER_NO_WORKERS, 1, 3};
    for (int w = 0; w < 3; w++) {
        ferry_loader_config c = {.dataset = ds, .batch_size = 3, .shuffle = true, .seed = 2,
                                 .num_workers = workers[w], .out_dtype = FERRY_DTYPE_U8};
        if (w == 2)
            c.stream_shuffle_buffer = 2; /* streaming: shard by shard */
        ferry_loader *l;
        ASSERT_OK(ferry_loader_create(&c, &l));
        ferry_batch b;
        size_t seen = 0;
        digest[w] = FT_DIGEST_SEED;
        while (ferry_loader_next(l, NULL, &b) == FERRY_OK) {
            check_batch(&b);
            seen += b.size;
            digest[w] = ft_batch_digest(digest[w], &b);
        }
        ASSERT_EQ_SIZE(seen, 7);
        ferry_loader_stats s;
        ASSERT_OK(ferry_loader_stats_get(l, &s));
        ASSERT_EQ_INT(s.allocs_after_warmup, 0);
        ferry_loader_destroy(l);
    }
    ASSERT_EQ_INT(digest[0], digest[1]);
    ferry_dataset_release(ds);
}

TEST(a_missing_member_fails_by_name_and_skip_skips_it)
{
    const char *p = make_shard("wds_fields_c.tar", 0, 4, true); /* k1 has no boxes */
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_shards_fields(&p, 1, NULL, MEMBERS, 4, &ds));
    uint8_t img[W * H], txt[16];
    int64_t cls;
    float boxes[12];
    void *dst[4] = {img, &cls, boxes, txt};
    size_t len[4];
    ASSERT_STATUS(ferry_dataset_get_fields(ds, 1, dst, len, NULL), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "wds_fields_c.tar:k1");
    ASSERT_STR_CONTAINS(ferry_last_error(), "no .boxes.npy member");
    ferry_loader_config c = {.dataset = ds, .batch_size = 4, .num_workers = 2,
                             .out_dtype = FERRY_DTYPE_U8, .on_error = FERRY_ON_ERROR_SKIP};
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_batch b;
    ASSERT_OK(ferry_loader_next(l, NULL, &b));
    check_batch(&b);
    for (size_t q = 0; q < 4; q++)
        ASSERT(b.indices[q] != 1);
    ferry_loader_stats s;
    ASSERT_OK(ferry_loader_stats_get(l, &s));
    ASSERT_EQ_INT(s.skipped, 1);
    ASSERT_STR_CONTAINS(s.skipped_names[0], "k1");
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
}

TEST(bad_members_and_requests_are_named)
{
    /* An array numpy wrote in Fortran order, in a key's .boxes.npy. */
    ft_tar t = {0};
    put_sample(&t, 0, "f32_3x4");
    put_sample(&t, 1, "fortran");
    ft_tar_end(&t);
    const char *p = ft_tar_save(&t, "wds_fields_d.tar");
    ferry_dataset *ds;
    ASSERT_STATUS(ferry_dataset_shards_fields(&p, 1, NULL, MEMBERS, 4, &ds), FERRY_ERR_UNSUPPORTED);
    ASSERT_STR_CONTAINS(ferry_last_error(), "wds_fields_d.tar:k1");
    ASSERT_STR_CONTAINS(ferry_last_error(), "wds_fields_d.tar:k1: member .boxes.npy: NPY array in "
                        "Fortran order");

    /* Shapes that differ beyond the first dimension. */
    t = (ft_tar){0};
    put_sample(&t, 0, "f32_3x4");
    put_sample(&t, 1, "f32_4d");
    ft_tar_end(&t);
    p = ft_tar_save(&t, "wds_fields_e.tar");
    ASSERT_STATUS(ferry_dataset_shards_fields(&p, 1, NULL, MEMBERS, 4, &ds), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "wds_fields_e.tar:k0 and ");
    ASSERT_STR_CONTAINS(ferry_last_error(), "wds_fields_e.tar:k1");

    p = make_shard("wds_fields_f.tar", 0, 2, false);
    const char *const two_images[] = {"png", "jpg"};
    ASSERT_STATUS(ferry_dataset_shards_fields(&p, 1, NULL, two_images, 2, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "both images");
    const char *const absent[] = {"png", "depth.npy"};
    ASSERT_STATUS(ferry_dataset_shards_fields(&p, 1, NULL, absent, 2, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "no key in the shards has a .depth.npy member");
    const char *const either[] = {"jpg;png", "cls"};
    ASSERT_OK(ferry_dataset_shards_fields(&p, 1, NULL, either, 2, &ds));
    ferry_dataset_release(ds);

}

/* A gzip shard (written as two gzip members, as pigz does) is held
 * decompressed, within image_config.shard_cache_bytes. */
TEST(gzip_shards_give_the_same_fields)
{
    ft_tar g = {0};
    for (size_t i = 0; i < 4; i++)
        put_sample(&g, i, BOXES[i % 4]);
    ft_tar_end(&g);
    const char *p = ft_tar_save_gz(&g, "wds_fields_g.tar.gz", 2);
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_shards_fields(&p, 1, NULL, MEMBERS, 4, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), 4);
    ferry_loader_config c = {.dataset = ds, .batch_size = 4, .num_workers = 2,
                             .out_dtype = FERRY_DTYPE_U8};
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_batch b;
    ASSERT_OK(ferry_loader_next(l, NULL, &b));
    check_batch(&b);
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);

    ferry_image_config cfg = ferry_image_config_default();
    cfg.shard_cache_bytes = 4096; /* less than the tar */
    ASSERT_STATUS(ferry_dataset_shards_fields(&p, 1, &cfg, MEMBERS, 4, &ds), FERRY_ERR_LIMIT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "wds_fields_g.tar.gz");
    ASSERT_STR_CONTAINS(ferry_last_error(), "shard_cache_bytes");
}

/* Every field of a batch (and the ragged ones' lengths) into an FNV-1a digest. */
static uint64_t all_fields_digest(uint64_t h, const ferry_batch *b)
{
    static uint8_t buf[1 << 16];
    for (size_t k = 0; k < ferry_batch_field_count(b); k++) {
        const ferry_field *info;
        ferry_tensor *parts[2] = {ferry_batch_field_at(b, k, &info), NULL};
        parts[1] = ferry_batch_lengths(b, info->name);
        for (int p = 0; p < 2; p++) {
            if (!parts[p])
                continue;
            size_t n = ferry_tensor_nbytes(parts[p]);
            ASSERT(n <= sizeof buf);
            ASSERT_OK(ferry_tensor_copy_to_host(parts[p], buf, n));
            for (size_t i = 0; i < n; i++)
                h = (h ^ buf[i]) * 1099511628211ull;
        }
    }
    return h;
}

TEST(resume_with_every_field_is_bit_exact)
{
    const char *p[2] = {make_shard("wds_fields_r0.tar", 0, 4, false),
                        make_shard("wds_fields_r1.tar", 4, 4, false)};
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_shards_fields(p, 2, NULL, MEMBERS, 4, &ds));
    ferry_loader_config c = {.dataset = ds, .batch_size = 2, .shuffle = true, .seed = 9,
                             .num_workers = 1, .out_dtype = FERRY_DTYPE_U8};
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_batch b;
    uint64_t rest = FT_DIGEST_SEED;
    ferry_loader_state st;
    for (int k = 0; ferry_loader_next(l, NULL, &b) == FERRY_OK; k++) {
        if (k == 1)
            ASSERT_OK(ferry_loader_state_get(l, &st));
        if (k >= 2)
            rest = all_fields_digest(rest, &b);
    }
    ferry_loader_destroy(l);
    c.num_workers = 3;
    c.prefetch = 2;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ASSERT_OK(ferry_loader_restore(l, &st));
    uint64_t again = FT_DIGEST_SEED;
    size_t n = 0;
    while (ferry_loader_next(l, NULL, &b) == FERRY_OK) {
        check_batch(&b);
        again = all_fields_digest(again, &b);
        n++;
    }
    ASSERT_EQ_SIZE(n, 2);
    ASSERT_EQ_INT(again, rest);
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
}

/* Shards named by URL: fetched into the remote cache, read from there. */
TEST(shards_by_url_give_the_same_fields)
{
#ifndef FERRY_HAVE_CURL
    SKIP("built without libcurl (CURL=0)");
#else
    make_shard("wds_http/s0.tar", 0, 4, false);
    make_shard("wds_http/s1.tar", 4, 3, false);
    ft_http *srv = ft_http_start(ft_tmp("wds_http"), NULL);
    char urls[2][512];
    snprintf(urls[0], sizeof urls[0], "%s/s0.tar", ft_http_base(srv));
    snprintf(urls[1], sizeof urls[1], "%s/s1.tar", ft_http_base(srv));
    const char *p[2] = {urls[0], urls[1]};
    ferry_image_config cfg = ferry_image_config_default();
    cfg.remote_cache_dir = ft_tmp("wds_http_cache");
    cfg.remote_timeout_s = 2;
    cfg.remote_retries = 1;
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_shards_fields(p, 2, &cfg, MEMBERS, 4, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), 7);
    ferry_loader_config c = {.dataset = ds, .batch_size = 4, .num_workers = 2, .shuffle = true,
                             .out_dtype = FERRY_DTYPE_U8};
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_batch b;
    size_t seen = 0;
    while (ferry_loader_next(l, NULL, &b) == FERRY_OK) {
        check_batch(&b);
        seen += b.size;
    }
    ASSERT_EQ_SIZE(seen, 7);
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
    ft_http_stop(srv);
#endif
}
