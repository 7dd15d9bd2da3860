/* The output format of an image dataset whose config leaves channels or size
 * 0 (include/ferry/dataset.h, ferry_image_config): never decided by which file
 * sorts first. A folder mixing RGBA, RGB and gray at 22, 32 and 48 px is an
 * error naming two files, in any order; one size with mixed kinds is RGB,
 * said once at create; all gray stays gray; a size in the config makes
 * channels 0 RGB. Shards, not read whole at create, refuse an image of
 * another size or kind by name when it is loaded. */
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

/* An image of w x w px with c channels (1 gray, 3 RGB, 4 RGBA), at rel. */
static void put_image(const char *rel, size_t w, size_t c, uint8_t v)
{
    uint8_t *px = malloc(w * w * c);
    ASSERT(px);
    memset(px, v, w * w * c);
    const char *p = ft_tmp(rel);
    ft_write_file(p, "", 0); /* makes the folders */
    ASSERT_OK(ferry_png_save(p, px, w, w, c));
    free(px);
}

static char logged[8][1024];
static size_t nlogged;

static void catch_log(ferry_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level >= FERRY_LOG_WARN && nlogged < 8)
        snprintf(logged[nlogged++], sizeof logged[0], "%s", msg);
}

/* The mixed folder of the report: RGBA, RGB and gray at 22, 32 and 48 px,
 * the gray 32-px one sorting first (gray_name "0") or last ("z"). */
static const char *mixed_folder(const char *root, const char *gray_name)
{
    char rel[256];
    static const size_t sizes[3] = {22, 32, 48}, kinds[3] = {4, 3, 1};
    for (size_t i = 0; i < 9; i++) {
        snprintf(rel, sizeof rel, "%s/c%zu/m%zu.png", root, i % 3, i);
        put_image(rel, sizes[i % 3], kinds[(i / 3) % 3], (uint8_t)i);
    }
    snprintf(rel, sizeof rel, "%s/c0/%s.png", root, gray_name);
    put_image(rel, 32, 1, 200);
    return ft_tmp(root);
}

TEST(mixed_sizes_are_an_error_naming_two_files_in_any_order)
{
    ferry_dataset *ds = NULL;
    ASSERT_STATUS(ferry_dataset_image_folder(mixed_folder("m1", "0"), NULL, &ds),
                  FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "the images differ in size");
    ASSERT_STR_CONTAINS(ferry_last_error(), "m1/c0/0.png is 32x32");
    ASSERT_STR_CONTAINS(ferry_last_error(), "m1/c0/m0.png is 22x22");
    ASSERT_STR_CONTAINS(ferry_last_error(), "set height and width");
    ASSERT(ds == NULL);
    ASSERT_STATUS(ferry_dataset_image_folder(mixed_folder("m2", "z"), NULL, &ds),
                  FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "the images differ in size");
    /* The same files through a list file. */
    ft_write_file(ft_tmp("m1/list.txt"), "c0/m0.png,0\nc1/m1.png,1\n", 24);
    ASSERT_STATUS(ferry_dataset_list_file(ft_tmp("m1/list.txt"), NULL, &ds), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "c1/m1.png is 32x32");
    /* With the size given they load, RGB, in either order. */
    ferry_image_config cfg = ferry_image_config_default();
    cfg.height = cfg.width = 32;
    const char *roots[2] = {"m1", "m2"};
    for (int k = 0; k < 2; k++) {
        ASSERT_OK(ferry_dataset_image_folder(ft_tmp(roots[k]), &cfg, &ds));
        const ferry_sample_format *f = ferry_dataset_format(ds);
        ASSERT_EQ_SIZE(f->channels, 3);
        ASSERT_EQ_SIZE(f->height, 32);
        ASSERT_EQ_SIZE(f->width, 32);
        ferry_dataset_release(ds);
    }
}

/* One size, gray and colour mixed: RGB in both orders, and create says so once. */
TEST(one_size_mixed_kinds_is_rgb_in_any_order_and_said_once)
{
    static const char *const gray_names[2] = {"0", "z"};
    for (int k = 0; k < 2; k++) {
        char root[32], rel[64];
        snprintf(root, sizeof root, "k%d", k);
        snprintf(rel, sizeof rel, "%s/a/m.png", root);
        put_image(rel, 32, 3, 1);
        snprintf(rel, sizeof rel, "%s/b/n.png", root);
        put_image(rel, 32, 4, 2);
        snprintf(rel, sizeof rel, "%s/a/%s.png", root, gray_names[k]);
        put_image(rel, 32, 1, 3);
        nlogged = 0;
        ferry_set_log(catch_log, NULL);
        ferry_dataset *ds;
        ferry_status st = ferry_dataset_image_folder(ft_tmp(root), NULL, &ds);
        ferry_set_log(NULL, NULL);
        ASSERT_OK(st);
        const ferry_sample_format *f = ferry_dataset_format(ds);
        ASSERT_EQ_SIZE(f->channels, 3);
        ASSERT_EQ_SIZE(f->height, 32);
        ASSERT_EQ_SIZE(ferry_dataset_sample_bytes(ds), 3 * 32 * 32);
        ASSERT_EQ_SIZE(nlogged, 1);
        ASSERT_STR_CONTAINS(logged[0], "1 of the 3 images are gray");
        ASSERT_STR_CONTAINS(logged[0], "decoded as RGB");
        ASSERT_STR_CONTAINS(logged[0], "set channels = 1 for gray");
        ferry_dataset_release(ds);
    }
}

/* All gray stays gray (the Fashion-MNIST folder); a size in the config makes
 * channels 0 RGB without reading a header (nothing said: it is the rule). */
TEST(all_gray_is_gray_and_a_given_size_means_rgb)
{
    put_image("g/a/0.png", 28, 1, 7);
    put_image("g/b/1.png", 28, 1, 8);
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("g"), NULL, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_format(ds)->channels, 1);
    ASSERT_EQ_SIZE(ferry_dataset_format(ds)->height, 28);
    ferry_dataset_release(ds);
    ferry_image_config cfg = ferry_image_config_default();
    cfg.height = cfg.width = 28;
    nlogged = 0;
    ferry_set_log(catch_log, NULL);
    ferry_status st = ferry_dataset_image_folder(ft_tmp("g"), &cfg, &ds);
    ferry_set_log(NULL, NULL);
    ASSERT_OK(st);
    ASSERT_EQ_SIZE(nlogged, 0);
    ASSERT_EQ_SIZE(ferry_dataset_format(ds)->channels, 3);
    uint8_t out[3 * 28 * 28];
    ASSERT_OK(ferry_dataset_get(ds, 1, out, sizeof out, NULL, NULL));
    ASSERT_EQ_INT(out[0], 8);
    ASSERT_EQ_INT(out[28 * 28], 8);
    ASSERT_EQ_INT(out[2 * 28 * 28], 8);
    ferry_dataset_release(ds);
    cfg.channels = 1;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("g"), &cfg, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_format(ds)->channels, 1);
    ferry_dataset_release(ds);
}

/* A file replaced after create by one of another size fails by name when
 * loaded: the size create found is kept, never resized to. */
TEST(an_image_of_another_size_after_create_fails_by_name)
{
    put_image("late/a/0.png", 16, 3, 1);
    put_image("late/a/1.png", 16, 3, 2);
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("late"), NULL, &ds));
    put_image("late/a/1.png", 20, 3, 2);
    uint8_t out[3 * 16 * 16];
    ASSERT_STATUS(ferry_dataset_get(ds, 1, out, sizeof out, NULL, NULL), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "late/a/1.png: image is 20x20, the dataset's samples "
                                            "are 16x16 (the size of ");
    ASSERT_STR_CONTAINS(ferry_last_error(), "late/a/0.png)");
    ferry_dataset_release(ds);
}

/* A shard of (key, width, channels) images. */
static const char *shard(const char *rel, const char *const *keys, const size_t *w,
                         const size_t *c, size_t n)
{
    ft_tar t = {0};
    for (size_t i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s.png", keys[i]);
        put_image("tmp.png", w[i], c[i], (uint8_t)(10 + i));
        size_t len;
        void *png = ft_read_file(ft_tmp("tmp.png"), &len);
        ft_tar_file(&t, name, png, len);
        free(png);
        snprintf(name, sizeof name, "%s.cls", keys[i]);
        ft_tar_text(&t, name, "0");
    }
    ft_tar_end(&t);
    return ft_tar_save(&t, rel);
}

/* Shards take the first image's size and kind and refuse others by name, in
 * whichever order pack wrote them: never 3 x 48 x 48 in one order and
 * 1 x 32 x 32 in the other without a word. */
TEST(shards_refuse_another_size_or_kind_by_name_in_any_order)
{
    static const char *const keys[2] = {"a", "b"};
    static const size_t w1[2] = {32, 48}, c1[2] = {1, 3};
    static const size_t w2[2] = {48, 32}, c2[2] = {3, 1};
    const char *p1 = shard("s1.tar", keys, w1, c1, 2);
    const char *p2 = shard("s2.tar", keys, w2, c2, 2);
    const char *paths[2] = {p1, p2};
    for (int k = 0; k < 2; k++) {
        ferry_dataset *ds;
        ASSERT_OK(ferry_dataset_shards(&paths[k], 1, NULL, &ds));
        uint8_t out[3 * 48 * 48];
        ASSERT_OK(ferry_dataset_get(ds, 0, out, sizeof out, NULL, NULL));
        ASSERT_STATUS(ferry_dataset_get(ds, 1, out, sizeof out, NULL, NULL), FERRY_ERR_FORMAT);
        ASSERT_STR_CONTAINS(ferry_last_error(), "b.png: image is");
        ASSERT_STR_CONTAINS(ferry_last_error(), "a.png); set height and width");
        ferry_dataset_release(ds);
    }
    /* One size, another kind: refused too (channels 0 is the first's kind). */
    static const size_t w3[2] = {32, 32};
    const char *p3 = shard("s3.tar", keys, w3, c1, 2);
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_shards(&p3, 1, NULL, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_format(ds)->channels, 1);
    uint8_t out[3 * 32 * 32];
    ASSERT_STATUS(ferry_dataset_get(ds, 1, out, sizeof out, NULL, NULL), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "b.png: image is colour, the dataset's samples are "
                                            "gray (as ");
    ferry_dataset_release(ds);
    /* With the size given: RGB, both load. */
    ferry_image_config cfg = ferry_image_config_default();
    cfg.height = cfg.width = 32;
    ASSERT_OK(ferry_dataset_shards(&p2, 1, &cfg, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_format(ds)->channels, 3);
    ASSERT_OK(ferry_dataset_get(ds, 0, out, sizeof out, NULL, NULL));
    ASSERT_OK(ferry_dataset_get(ds, 1, out, sizeof out, NULL, NULL));
    ferry_dataset_release(ds);
}
