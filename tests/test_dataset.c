/* Datasets: image-folder ordering and labels, list files and their errors, memory,
 * views (subset, indices, split), custom callbacks, and ferry_dataset_open
 * telling the kinds apart. */
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include "common/dir.h" /* ferry_debug_fail_dir_read_after */
#include "harness.h"

static void put_png(const char *rel, uint8_t value, size_t w, size_t h)
{
    uint8_t px[64 * 64];
    memset(px, value, w * h);
    const char *p = ft_tmp(rel);
    ft_write_file(p, "", 0); /* makes the folders */
    ASSERT_OK(ferry_png_save(p, px, w, h, 1));
}

TEST(image_folder_orders_bytewise_and_labels)
{
    put_png("f/b/2.png", 1, 4, 3);
    put_png("f/b/10.png", 2, 4, 3);
    put_png("f/a/x.png", 3, 4, 3);
    put_png("f/B/z.png", 4, 4, 3);
    ft_write_file(ft_tmp("f/a/notes.txt"), "x", 1);
    ft_write_file(ft_tmp("f/a/.hidden.png"), "x", 1);
    ft_write_file(ft_tmp("f/.git/c.png"), "x", 1);
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("f"), NULL, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), 4);
    ASSERT_EQ_SIZE(ferry_dataset_class_count(ds), 3);
    ASSERT_STR_EQ(ferry_dataset_class_name(ds, 0), "B");
    ASSERT_STR_EQ(ferry_dataset_class_name(ds, 1), "a");
    ASSERT_STR_EQ(ferry_dataset_class_name(ds, 2), "b");
    ASSERT(ferry_dataset_class_name(ds, 3) == NULL);
    const ferry_sample_format *f = ferry_dataset_format(ds);
    ASSERT_EQ_SIZE(f->channels, 1);
    ASSERT_EQ_SIZE(f->height, 3);
    ASSERT_EQ_SIZE(f->width, 4);
    static const uint8_t values[4] = {4, 3, 2, 1}; /* B/z, a/x, b/10, b/2 */
    static const int64_t labels[4] = {0, 1, 2, 2};
    uint8_t out[12];
    for (size_t i = 0; i < 4; i++) {
        int64_t l;
        ASSERT_OK(ferry_dataset_get(ds, i, out, sizeof out, NULL, &l));
        ASSERT_EQ_INT(out[0], values[i]);
        ASSERT_EQ_INT(l, labels[i]);
        ASSERT_OK(ferry_dataset_label(ds, i, &l));
        ASSERT_EQ_INT(l, labels[i]);
    }
    ASSERT_STR_CONTAINS(ferry_dataset_sample_name(ds, 2), "f/b/10.png");
    /* Stage timing is added up when asked for. */
    ferry_sample_timing timing = {0};
    ferry_sample_ctx ctx = {.timing = &timing};
    ASSERT_OK(ferry_dataset_get(ds, 0, out, sizeof out, &ctx, NULL));
    ASSERT(timing.read_s > 0 && timing.decode_s > 0 && timing.transform_s >= 0);
    /* Out of range and a short buffer. */
    ASSERT_STATUS(ferry_dataset_get(ds, 4, out, sizeof out, NULL, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_dataset_get(ds, 0, out, 11, NULL, NULL), FERRY_ERR_INVALID_ARG);
    ferry_dataset_release(ds);
    ferry_dataset_release(NULL);
}

/* Images in sub-folders of a class folder are its samples (as torchvision's
 * ImageFolder loads them), in bytewise path order below the class folder; a
 * link back up the tree is not followed (no loop, no duplicates), and a
 * hidden sub-folder is left out like a hidden file. */
TEST(image_folder_walks_class_folders_recursively)
{
    put_png("r/a/x.png", 1, 2, 2);
    put_png("r/a/2019/y.png", 2, 2, 2);
    put_png("r/a/2019/deep/z.png", 3, 2, 2);
    put_png("r/a/.cache/h.png", 9, 2, 2);
    put_png("r/b/w.png", 4, 2, 2);
    ASSERT(symlink("..", ft_tmp("r/a/2019/up")) == 0);
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("r"), NULL, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), 4);
    static const uint8_t values[4] = {3, 2, 1, 4}; /* 2019/deep/z.png, 2019/y.png, x.png; b */
    static const int64_t labels[4] = {0, 0, 0, 1};
    uint8_t out[4];
    for (size_t i = 0; i < 4; i++) {
        int64_t l;
        ASSERT_OK(ferry_dataset_get(ds, i, out, sizeof out, NULL, &l));
        ASSERT_EQ_INT(out[0], values[i]);
        ASSERT_EQ_INT(l, labels[i]);
    }
    ASSERT_STR_CONTAINS(ferry_dataset_sample_name(ds, 0), "r/a/2019/deep/z.png");
    ferry_dataset_release(ds);
}

TEST(image_folder_errors_name_the_path)
{
    ferry_dataset *ds = NULL;
    ft_write_file(ft_tmp("empty/.keep"), "", 0);
    ASSERT_STATUS(ferry_dataset_image_folder(ft_tmp("empty"), NULL, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "empty");
    put_png("e2/a/1.png", 1, 2, 2);
    ft_write_file(ft_tmp("e2/b/readme.txt"), "x", 1);
    ASSERT_STATUS(ferry_dataset_image_folder(ft_tmp("e2"), NULL, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "e2/b: class folder has no image files (.png, .jpg, .jpeg)");
    ASSERT_STATUS(ferry_dataset_image_folder(ft_tmp("missing"), NULL, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "missing");
    /* A corrupt file fails get() with its path and libpng's reason. */
    put_png("bad/a/0.png", 1, 4, 4);
    size_t n;
    uint8_t *good = ft_read_file(ft_tmp("bad/a/0.png"), &n);
    good[n - 20] ^= 0xff;
    ft_write_file(ft_tmp("bad/a/1.png"), good, n);
    ft_write_file(ft_tmp("bad/a/2.png"), "text, not png", 13);
    free(good);
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("bad"), NULL, &ds));
    uint8_t out[16];
    ASSERT_OK(ferry_dataset_get(ds, 0, out, sizeof out, NULL, NULL));
    ASSERT_STATUS(ferry_dataset_get(ds, 1, out, sizeof out, NULL, NULL), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "bad/a/1.png: ");
    ASSERT_STATUS(ferry_dataset_get(ds, 2, out, sizeof out, NULL, NULL), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "bad/a/2.png: not a PNG file");
    ferry_dataset_release(ds);
    /* Another size: without a size in the config, an error at create (never a
     * silent resize); with one, resized by default, an error when asked. */
    put_png("sz/a/0.png", 5, 4, 4);
    put_png("sz/a/1.png", 6, 8, 2);
    ASSERT_STATUS(ferry_dataset_image_folder(ft_tmp("sz"), NULL, &ds), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "0.png is 4x4, ");
    ASSERT_STR_CONTAINS(ferry_last_error(), "1.png is 8x2; set height and width");
    ferry_image_config cfg = ferry_image_config_default();
    cfg.height = cfg.width = 4;
    cfg.channels = 1;
    cfg.resize = FERRY_RESIZE_ERROR;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("sz"), &cfg, &ds));
    ASSERT_STATUS(ferry_dataset_get(ds, 1, out, sizeof out, NULL, NULL), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "image is 8x2, samples are 4x4");
    ferry_dataset_release(ds);
    cfg.resize = FERRY_RESIZE_BILINEAR;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("sz"), &cfg, &ds));
    ASSERT_OK(ferry_dataset_get(ds, 1, out, sizeof out, NULL, NULL));
    for (int i = 0; i < 16; i++)
        ASSERT_EQ_INT(out[i], 6);
    ferry_dataset_release(ds);
}

TEST(list_file_paths_labels_and_comments)
{
    put_png("l/img/a.png", 10, 3, 3);
    put_png("l/img/b,c.png", 20, 3, 3);
    const char *list = "# a comment\n\nimg/a.png,3\n  img/b,c.png\t1 \r\n";
    ft_write_file(ft_tmp("l/list.txt"), list, strlen(list));
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_list_file(ft_tmp("l/list.txt"), NULL, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), 2);
    ASSERT_EQ_SIZE(ferry_dataset_class_count(ds), 4);
    uint8_t out[9];
    int64_t l;
    ASSERT_OK(ferry_dataset_get(ds, 1, out, sizeof out, NULL, &l));
    ASSERT_EQ_INT(out[4], 20);
    ASSERT_EQ_INT(l, 1);
    ferry_dataset_release(ds);
}

TEST(list_file_errors_give_line_numbers)
{
    ferry_dataset *ds = NULL;
    const char *bad1 = "# header\nimg/a.png,1\nimg/b.png\n";
    ft_write_file(ft_tmp("le/1.txt"), bad1, strlen(bad1));
    ASSERT_STATUS(ferry_dataset_list_file(ft_tmp("le/1.txt"), NULL, &ds), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "1.txt:3: expected \"path,label\"");
    const char *bad2 = "a.png,1\n\nb.png,cat\n";
    ft_write_file(ft_tmp("le/2.txt"), bad2, strlen(bad2));
    ASSERT_STATUS(ferry_dataset_list_file(ft_tmp("le/2.txt"), NULL, &ds), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "2.txt:3: label \"cat\"");
    const char *bad3 = "a.png,-1\n";
    ft_write_file(ft_tmp("le/3.txt"), bad3, strlen(bad3));
    ASSERT_STATUS(ferry_dataset_list_file(ft_tmp("le/3.txt"), NULL, &ds), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "3.txt:1:");
    ft_write_file(ft_tmp("le/4.txt"), "# nothing\n", 10);
    ASSERT_STATUS(ferry_dataset_list_file(ft_tmp("le/4.txt"), NULL, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "no entries");
    /* The first image is missing: creating the dataset names it. */
    ft_write_file(ft_tmp("le/5.txt"), "gone.png,0\n", 11);
    ASSERT_STATUS(ferry_dataset_list_file(ft_tmp("le/5.txt"), NULL, &ds), FERRY_ERR_IO);
    ASSERT_STR_CONTAINS(ferry_last_error(), "le/gone.png");
    ASSERT(ds == NULL);
}

TEST(memory_dataset_u8_and_f32_without_copy)
{
    float data[3 * 2 * 2];
    for (int i = 0; i < 12; i++)
        data[i] = (float)i * 0.5f;
    int64_t labels[3] = {2, 0, 1};
    ferry_sample_format fmt = {1, 2, 2, FERRY_LAYOUT_CHW, FERRY_DTYPE_F32};
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_memory(data, &fmt, 3, labels, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_sample_bytes(ds), 16);
    ASSERT_EQ_SIZE(ferry_dataset_class_count(ds), 3);
    float out[4];
    int64_t l;
    data[9] = 42.0f; /* not copied: changes show */
    ASSERT_OK(ferry_dataset_get(ds, 2, out, sizeof out, NULL, &l));
    ASSERT_EQ_INT(l, 1);
    ASSERT_NEAR(out[1], 42.0, 0);
    ASSERT_NEAR(out[0], 4.0, 0);
    ferry_dataset_release(ds);
    fmt.dtype = FERRY_DTYPE_I64;
    ASSERT_STATUS(ferry_dataset_memory(data, &fmt, 3, labels, &ds), FERRY_ERR_DTYPE);
}

static uint8_t mem[100];
static int64_t mem_labels[100];

static ferry_dataset *hundred(void)
{
    for (int i = 0; i < 100; i++) {
        mem[i] = (uint8_t)i;
        mem_labels[i] = i % 10;
    }
    ferry_sample_format fmt = {1, 1, 1, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8};
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_memory(mem, &fmt, 100, mem_labels, &ds));
    return ds;
}

TEST(views_keep_base_alive)
{
    ferry_dataset *base = hundred(), *sub, *idx;
    ASSERT_OK(ferry_dataset_subset(base, 10, 20, &sub));
    size_t pick[3] = {99, 0, 50};
    ASSERT_OK(ferry_dataset_indices(base, pick, 3, &idx));
    ferry_dataset_release(base); /* the views still hold it */
    ASSERT_EQ_SIZE(ferry_dataset_len(sub), 10);
    uint8_t v;
    int64_t l;
    ASSERT_OK(ferry_dataset_get(sub, 3, &v, 1, NULL, &l));
    ASSERT_EQ_INT(v, 13);
    ASSERT_EQ_INT(l, 3);
    ASSERT_OK(ferry_dataset_get(idx, 0, &v, 1, NULL, NULL));
    ASSERT_EQ_INT(v, 99);
    ASSERT_EQ_SIZE(ferry_dataset_class_count(idx), 10);
    ferry_dataset *sub2;
    ASSERT_OK(ferry_dataset_subset(sub, 2, 4, &sub2));
    ASSERT_OK(ferry_dataset_get(sub2, 1, &v, 1, NULL, NULL));
    ASSERT_EQ_INT(v, 13);
    ferry_dataset_release(sub);
    ferry_dataset_release(sub2);
    ferry_dataset_release(idx);
    base = hundred();
    ASSERT_STATUS(ferry_dataset_subset(base, 5, 101, &sub), FERRY_ERR_INVALID_ARG);
    size_t badpick[1] = {100};
    ASSERT_STATUS(ferry_dataset_indices(base, badpick, 1, &idx), FERRY_ERR_INVALID_ARG);
    ferry_dataset_release(base);
}

TEST(split_is_seeded_disjoint_and_complete)
{
    ferry_dataset *base = hundred(), *tr, *va, *tr2, *va2;
    ASSERT_OK(ferry_dataset_split(base, 0.25, 5, &tr, &va));
    ASSERT_OK(ferry_dataset_split(base, 0.25, 5, &tr2, &va2));
    ASSERT_EQ_SIZE(ferry_dataset_len(tr), 75);
    ASSERT_EQ_SIZE(ferry_dataset_len(va), 25);
    int seen[100] = {0};
    for (size_t i = 0; i < 75; i++) {
        uint8_t a, b;
        ASSERT_OK(ferry_dataset_get(tr, i, &a, 1, NULL, NULL));
        ASSERT_OK(ferry_dataset_get(tr2, i, &b, 1, NULL, NULL));
        ASSERT_EQ_INT(a, b);
        seen[a]++;
    }
    for (size_t i = 0; i < 25; i++) {
        uint8_t a;
        ASSERT_OK(ferry_dataset_get(va, i, &a, 1, NULL, NULL));
        seen[a]++;
    }
    for (int i = 0; i < 100; i++)
        ASSERT_EQ_INT(seen[i], 1);
    ferry_dataset *tr3, *va3;
    ASSERT_OK(ferry_dataset_split(base, 0.25, 6, &tr3, &va3));
    int same = 1;
    for (size_t i = 0; i < 25 && same; i++) {
        uint8_t a, b;
        ASSERT_OK(ferry_dataset_get(va, i, &a, 1, NULL, NULL));
        ASSERT_OK(ferry_dataset_get(va3, i, &b, 1, NULL, NULL));
        same = a == b;
    }
    ASSERT(!same);
    ASSERT_STATUS(ferry_dataset_split(base, 1.5, 5, &tr3, &va3), FERRY_ERR_INVALID_ARG);
    ferry_dataset_release(base);
    ferry_dataset_release(tr);
    ferry_dataset_release(va);
    ferry_dataset_release(tr2);
    ferry_dataset_release(va2);
    ferry_dataset_release(tr3);
    ferry_dataset_release(va3);
}

static int destroyed;
static ferry_status cb_get(void *user, size_t index, void *dst, size_t bytes,
                           const ferry_sample_ctx *ctx, int64_t *label)
{
    (void)user; (void)ctx;
    if (index == 3)
        return FERRY_ERR_IO;
    memset(dst, (int)index, bytes);
    *label = (int64_t)index * 2;
    return FERRY_OK;
}
static const char *cb_name(void *user, size_t index) { (void)user; return index == 3 ? "three" : "other"; }
static void cb_destroy(void *user) { (void)user; destroyed++; }

TEST(custom_callbacks)
{
    ferry_dataset_callbacks cb = {.len = 5, .format = {1, 2, 2, FERRY_LAYOUT_CHW, FERRY_DTYPE_U8},
                                  .num_classes = 10, .get = cb_get, .name = cb_name,
                                  .destroy = cb_destroy};
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_custom(&cb, NULL, &ds));
    uint8_t out[4];
    int64_t l;
    ASSERT_OK(ferry_dataset_get(ds, 2, out, sizeof out, NULL, &l));
    ASSERT_EQ_INT(out[3], 2);
    ASSERT_EQ_INT(l, 4);
    ASSERT_OK(ferry_dataset_label(ds, 4, &l));
    ASSERT_EQ_INT(l, 8);
    ASSERT_STATUS(ferry_dataset_get(ds, 3, out, sizeof out, NULL, &l), FERRY_ERR_IO);
    ASSERT_STR_CONTAINS(ferry_last_error(), "three: ");
    ASSERT_STR_EQ(ferry_dataset_sample_name(ds, 3), "three");
    ferry_dataset_release(ds);
    ASSERT_EQ_INT(destroyed, 1);
}

/* ---- ferry_dataset_open ---- */

/* ds and ref have the same samples: length, classes, every sample's bytes and label. */
static void assert_same_dataset(ferry_dataset *ds, ferry_dataset *ref)
{
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), ferry_dataset_len(ref));
    ASSERT_EQ_SIZE(ferry_dataset_class_count(ds), ferry_dataset_class_count(ref));
    size_t n = ferry_dataset_sample_bytes(ref);
    ASSERT_EQ_SIZE(ferry_dataset_sample_bytes(ds), n);
    uint8_t *a = malloc(n), *b = malloc(n);
    for (size_t i = 0; i < ferry_dataset_len(ref); i++) {
        int64_t la = -1, lb = -2;
        ASSERT_OK(ferry_dataset_get(ds, i, a, n, NULL, &la));
        ASSERT_OK(ferry_dataset_get(ref, i, b, n, NULL, &lb));
        ASSERT_MEM_EQ(a, b, n);
        ASSERT_EQ_INT(la, lb);
    }
    free(a);
    free(b);
}

/* Opens path, checks the kind probe gives and that it holds ref's samples. */
static void assert_opens_as(const char *path, ferry_dataset_kind want, ferry_dataset *ref)
{
    ferry_dataset_kind k = FERRY_DATASET_UNKNOWN;
    ASSERT_OK(ferry_dataset_probe(path, &k));
    ASSERT_MSG(k == want, "%s: kind %d, want %d", path, (int)k, (int)want);
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_open(path, NULL, &ds));
    assert_same_dataset(ds, ref);
    ferry_dataset_release(ds);
}

static size_t idx_file(uint8_t *buf, uint8_t nd, const uint32_t *dims, const uint8_t *data, size_t n)
{
    buf[0] = 0;
    buf[1] = 0;
    buf[2] = 0x08;
    buf[3] = nd;
    for (size_t i = 0; i < nd; i++)
        for (int b = 0; b < 4; b++)
            buf[4 + 4 * i + (size_t)b] = (uint8_t)(dims[i] >> (24 - 8 * b));
    memcpy(buf + 4 + 4 * nd, data, n);
    return 4 + 4 * (size_t)nd + n;
}

static void write_gzip(const char *path, const void *p, size_t n)
{
    gzFile g = gzopen(path, "wb");
    ASSERT(g);
    ASSERT_EQ_INT(gzwrite(g, p, (unsigned)n), (int)n);
    ASSERT_EQ_INT(gzclose(g), Z_OK);
}

TEST(open_tells_folder_list_shards_and_idx_apart)
{
    /* An image folder, and a list file naming the same images. */
    put_png("open/folder/cat/1.png", 10, 4, 3);
    put_png("open/folder/cat/2.png", 20, 4, 3);
    put_png("open/folder/dog/3.png", 30, 4, 3);
    ferry_dataset *ref, *zero;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("open/folder"), NULL, &ref));
    assert_opens_as(ft_tmp("open/folder"), FERRY_DATASET_IMAGE_FOLDER, ref);
    /* A zeroed image config is the defaults. */
    ASSERT_OK(ferry_dataset_open(ft_tmp("open/folder"), &(ferry_image_config){0}, &zero));
    assert_same_dataset(zero, ref);
    ferry_dataset_release(zero);
    const char *list = "# the folder's images\nfolder/cat/1.png,0\nfolder/cat/2.png,0\n"
                       "folder/dog/3.png,1\n";
    ft_write_file(ft_tmp("open/list.txt"), list, strlen(list));
    assert_opens_as(ft_tmp("open/list.txt"), FERRY_DATASET_LIST_FILE, ref);
    ferry_dataset_release(ref);

    /* Tar shards: one by name, a folder of them, a list of them, a URL by name. */
    size_t png_n;
    void *png = ft_read_file(ft_tmp("open/folder/cat/1.png"), &png_n);
    ft_tar t = {0};
    ft_tar_file(&t, "a.png", png, png_n);
    ft_tar_text(&t, "a.cls", "0");
    ft_tar_file(&t, "b.png", png, png_n);
    ft_tar_text(&t, "b.cls", "1");
    ft_tar_end(&t);
    const char *shard = ft_tar_save(&t, "open/shards/s0.tar");
    free(png);
    ASSERT_OK(ferry_dataset_shards(&shard, 1, NULL, &ref));
    ASSERT_EQ_SIZE(ferry_dataset_len(ref), 2);
    assert_opens_as(shard, FERRY_DATASET_SHARDS, ref);
    assert_opens_as(ft_tmp("open/shards"), FERRY_DATASET_SHARDS, ref);
    ft_write_file(ft_tmp("open/shards.txt"), "\n# one shard\nshards/s0.tar\n", 27);
    assert_opens_as(ft_tmp("open/shards.txt"), FERRY_DATASET_SHARDS, ref);
    ferry_dataset_release(ref);
    ferry_dataset_kind k = FERRY_DATASET_UNKNOWN;
    ASSERT_OK(ferry_dataset_probe("https://example.invalid/shards/s0.tar", &k));
    ASSERT_EQ_INT(k, FERRY_DATASET_SHARDS);
    ASSERT_OK(ferry_dataset_probe("s3://bucket/train-0001.tar.gz", &k));
    ASSERT_EQ_INT(k, FERRY_DATASET_SHARDS);

    /* IDX images, their labels found beside them: plain, gzip, and mixed. */
    uint8_t px[5 * 4 * 3], lab[5], img[16 + sizeof px], labf[8 + sizeof lab];
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (uint8_t)(i * 37 + 5);
    for (size_t i = 0; i < sizeof lab; i++)
        lab[i] = (uint8_t)(i % 3);
    uint32_t d3[3] = {5, 4, 3}, d1[1] = {5};
    size_t ni = idx_file(img, 3, d3, px, sizeof px), nl = idx_file(labf, 1, d1, lab, sizeof lab);
    ft_write_file(ft_tmp("open/idx/train-images-idx3-ubyte"), img, ni);
    ft_write_file(ft_tmp("open/idx/train-labels-idx1-ubyte"), labf, nl);
    write_gzip(ft_tmp("open/idx/t10k-images-idx3-ubyte.gz"), img, ni);
    write_gzip(ft_tmp("open/idx/t10k-labels-idx1-ubyte.gz"), labf, nl);
    write_gzip(ft_tmp("open/idx/mix-images-idx3-ubyte.gz"), img, ni);
    ft_write_file(ft_tmp("open/idx/mix-labels-idx1-ubyte"), labf, nl);
    ASSERT_OK(ferry_dataset_idx(ft_tmp("open/idx/train-images-idx3-ubyte"),
                                ft_tmp("open/idx/train-labels-idx1-ubyte"), NULL, &ref));
    assert_opens_as(ft_tmp("open/idx/train-images-idx3-ubyte"), FERRY_DATASET_IDX, ref);
    assert_opens_as(ft_tmp("open/idx/t10k-images-idx3-ubyte.gz"), FERRY_DATASET_IDX, ref);
    assert_opens_as(ft_tmp("open/idx/mix-images-idx3-ubyte.gz"), FERRY_DATASET_IDX, ref);
    /* The file's name is what holds "images-idx3", not a folder above it. */
    ft_write_file(ft_tmp("open/my-images-idx3-set/train-images-idx3-ubyte"), img, ni);
    ft_write_file(ft_tmp("open/my-images-idx3-set/train-labels-idx1-ubyte"), labf, nl);
    assert_opens_as(ft_tmp("open/my-images-idx3-set/train-images-idx3-ubyte"), FERRY_DATASET_IDX, ref);
    ferry_dataset_release(ref);
}

/* Opens path with each folder read failing in turn (EIO, as on a network or
 * FUSE file system): an error naming the folder every time, never a dataset
 * short of some entries; once no read fails, ref's samples and labels. */
static void folder_read_sweep(const char *path, ferry_dataset *ref)
{
    int64_t k = 1;
    for (;; k++) {
        ferry_debug_fail_dir_read_after(k);
        ferry_dataset *ds = NULL;
        ferry_status st = ferry_dataset_open(path, NULL, &ds);
        if (ferry_debug_fail_dir_read_after(0) > 0) { /* fewer than k reads: none failed */
            ASSERT_OK(st);
            assert_same_dataset(ds, ref);
            ferry_dataset_release(ds);
            break;
        }
        ASSERT_MSG(st == FERRY_ERR_IO, "%s with read %lld failing: %s, not an I/O error", path,
                   (long long)k, st == FERRY_OK ? "opened" : ferry_last_error());
        ASSERT_STR_CONTAINS(ferry_last_error(), "reading the folder");
        ASSERT_STR_CONTAINS(ferry_last_error(), path);
    }
    ASSERT_MSG(k > 4, "%s: only %lld folder reads, the sweep tests little", path, (long long)k - 1);
}

TEST(a_folder_read_that_fails_is_an_error_not_fewer_samples)
{
    /* An image folder: classes read, each class's files and sub-folders. */
    put_png("rd/folder/a/1.png", 10, 4, 3);
    put_png("rd/folder/a/deep/2.png", 20, 4, 3);
    put_png("rd/folder/b/3.png", 30, 4, 3);
    put_png("rd/folder/c/4.png", 40, 4, 3);
    ferry_dataset *ref;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("rd/folder"), NULL, &ref));
    ASSERT_EQ_SIZE(ferry_dataset_class_count(ref), 3);
    folder_read_sweep(ft_tmp("rd/folder"), ref);
    ferry_dataset_release(ref);

    /* A folder of shards. */
    size_t png_n;
    void *png = ft_read_file(ft_tmp("rd/folder/a/1.png"), &png_n);
    const char *shards[3];
    for (int i = 0; i < 3; i++) {
        ft_tar t = {0};
        ft_tar_file(&t, "x.png", png, png_n);
        ft_tar_text(&t, "x.cls", i == 1 ? "1" : "0");
        ft_tar_end(&t);
        char rel[64];
        snprintf(rel, sizeof rel, "rd/shards/s%d.tar", i);
        shards[i] = ft_tar_save(&t, rel);
    }
    ASSERT_OK(ferry_dataset_shards(shards, 3, NULL, &ref));
    folder_read_sweep(ft_tmp("rd/shards"), ref);
    ferry_dataset_release(ref);
    free(png);
}

/* What is not a dataset fails naming the path and what it looks like. */
TEST(open_refuses_what_it_cannot_tell)
{
    ferry_dataset *ds = (ferry_dataset *)1;
    const char *missing = ft_tmp("open2/missing");
    ASSERT_STATUS(ferry_dataset_open(missing, NULL, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT(ds == NULL);
    ASSERT_STR_CONTAINS(ferry_last_error(), missing);

    put_png("open2/one.png", 1, 2, 2);
    ASSERT_STATUS(ferry_dataset_open(ft_tmp("open2/one.png"), NULL, &ds), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), ft_tmp("open2/one.png"));
    ASSERT_STR_CONTAINS(ferry_last_error(), "a PNG image");

    ft_write_file(ft_tmp("open2/notes.txt"), "just words\n", 11);
    ASSERT_STATUS(ferry_dataset_open(ft_tmp("open2/notes.txt"), NULL, &ds), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "notes.txt: not a dataset ferry can open");

    uint8_t lab[8] = {0, 0, 8, 1, 0, 0, 0, 0};
    ft_write_file(ft_tmp("open2/x-labels-idx1-ubyte"), lab, sizeof lab);
    ASSERT_STATUS(ferry_dataset_open(ft_tmp("open2/x-labels-idx1-ubyte"), NULL, &ds),
                  FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "open the images file");
    /* IDX images whose labels are not beside them: the expected name is given. */
    uint8_t img[4 + 12 + 4] = {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4};
    ft_write_file(ft_tmp("open2/y-images-idx3-ubyte"), img, sizeof img);
    ASSERT_STATUS(ferry_dataset_open(ft_tmp("open2/y-images-idx3-ubyte"), NULL, &ds),
                  FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "y-labels-idx1-ubyte");
    /* A folder of IDX files: which pair is for the caller to say. */
    ASSERT_STATUS(ferry_dataset_open(ft_tmp("open2"), NULL, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "a folder of IDX files");

    ASSERT_STATUS(ferry_dataset_open("http://example.invalid/list.txt", NULL, &ds),
                  FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "http://example.invalid/list.txt");
    /* A bad shard named as one fails in the shards' own create, by name. */
    ft_write_file(ft_tmp("open3/junk.tar"), "junk", 4);
    ASSERT_STATUS(ferry_dataset_open(ft_tmp("open3/junk.tar"), NULL, &ds), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "junk.tar");
    /* Shards beside a sub-folder (of previews, say): which dataset is meant
     * is the caller's to say, never guessed; hidden entries do not count. */
    put_png("open4/.thumbs/t.png", 1, 2, 2);
    ft_tar t = {0};
    ft_tar_text(&t, "a.cls", "0");
    ft_tar_end(&t);
    ft_tar_save(&t, "open4/s0.tar");
    ferry_dataset_kind kind;
    ASSERT_OK(ferry_dataset_probe(ft_tmp("open4"), &kind));
    ASSERT(kind == FERRY_DATASET_SHARDS);
    put_png("open4/previews/p.png", 1, 2, 2);
    ASSERT_STATUS(ferry_dataset_probe(ft_tmp("open4"), &kind), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_dataset_open(ft_tmp("open4"), NULL, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT(ds == NULL);
    ASSERT_STR_CONTAINS(ferry_last_error(), ft_tmp("open4"));
    ASSERT_STR_CONTAINS(ferry_last_error(), "tar shards (s0.tar) and sub-folders (previews)");
    ASSERT_STR_CONTAINS(ferry_last_error(), "ferry_dataset_image_folder");
}
