/* Tar shards (ferry_dataset_shards): every sample decodes to the same bytes and
 * label as the same PNG in an image folder (the reference), for shards written
 * by this test's own ustar writer, by GNU tar and by Python's tarfile; the
 * loader gives the same batches with any worker count; corrupt shards fail at
 * create naming the shard, the member and the byte offset; incomplete keys fail
 * by name when loaded, or are skipped under on_error = SKIP. */
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "common/error.h"

/* ---- the reference: the same PNGs as an image folder ---- */
enum { N = 12, IW = 7, IH = 5 };
static const int64_t labels[N] = {0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2};
static uint8_t *png[N];
static size_t png_n[N];
static ferry_dataset *ref;

static void make_reference(void)
{
    if (ref)
        return;
    for (size_t i = 0; i < N; i++) {
        uint8_t px[IW * IH];
        for (size_t j = 0; j < sizeof px; j++)
            px[j] = (uint8_t)(i * 37 + j * 11 + (j % 3) * i);
        char rel[64];
        snprintf(rel, sizeof rel, "ref/c%lld/%06zu.png", (long long)labels[i], i);
        const char *p = ft_tmp(rel);
        ft_write_file(p, "", 0);
        ASSERT_OK(ferry_png_save(p, px, IW, IH, 1));
        png[i] = ft_read_file(p, &png_n[i]);
        /* The same bytes as plain files for GNU tar and Python to pack. */
        snprintf(rel, sizeof rel, "flat/sub_folder/%06zu.png", i);
        ft_write_file(ft_tmp(rel), png[i], png_n[i]);
        snprintf(rel, sizeof rel, "flat/sub_folder/%06zu.cls", i);
        char lab[8];
        snprintf(lab, sizeof lab, "%lld", (long long)labels[i]);
        ft_write_file(ft_tmp(rel), lab, strlen(lab));
    }
    ASSERT_OK(ferry_dataset_image_folder(ft_tmp("ref"), NULL, &ref));
}

static void write_label(ft_tar *t, size_t i, const char *fmt_key)
{
    char name[128], lab[16];
    snprintf(name, sizeof name, fmt_key, i);
    strcat(name, ".cls");
    snprintf(lab, sizeof lab, "%lld", (long long)labels[i]);
    ft_tar_text(t, name, lab);
}

static void write_image(ft_tar *t, size_t i, const char *fmt_key)
{
    char name[128];
    snprintf(name, sizeof name, fmt_key, i);
    strcat(name, ".png");
    ft_tar_file(t, name, png[i], png_n[i]);
}

/* Samples [a, b) with keys "%06zu", members in a scrambled order. */
static const char *write_shard(const char *rel, size_t a, size_t b, const char *classes)
{
    ft_tar t = {0};
    if (classes)
        ft_tar_text(&t, "__classes__.txt", classes);
    for (size_t i = b; i-- > a;)
        write_label(&t, i, "%06zu");
    for (size_t i = a + 1; i < b; i += 2) /* odd offsets first, then even */
        write_image(&t, i, "%06zu");
    for (size_t i = a; i < b; i += 2)
        write_image(&t, i, "%06zu");
    ft_tar_end(&t);
    return ft_tar_save(&t, rel);
}

/* Every sample of ds equals the reference's [first, first + len(ds)). */
static void assert_matches_reference(ferry_dataset *ds, size_t first)
{
    uint8_t a[IW * IH], b[IW * IH];
    ASSERT_EQ_SIZE(ferry_dataset_sample_bytes(ds), sizeof a);
    for (size_t i = 0; i < ferry_dataset_len(ds); i++) {
        int64_t la = -1, lb = -2, lc = -3;
        ASSERT_OK(ferry_dataset_get(ds, i, a, sizeof a, NULL, &la));
        ASSERT_OK(ferry_dataset_get(ref, first + i, b, sizeof b, NULL, &lb));
        ASSERT_MEM_EQ(a, b, sizeof a);
        ASSERT_EQ_INT(la, lb);
        ASSERT_OK(ferry_dataset_label(ds, i, &lc));
        ASSERT_EQ_INT(lc, lb);
    }
}

static ferry_dataset *open1(const char *path)
{
    ferry_dataset *ds = NULL;
    ASSERT_OK(ferry_dataset_shards(&path, 1, NULL, &ds));
    return ds;
}

TEST(shard_samples_equal_the_image_folder)
{
    make_reference();
    const char *p = write_shard("one.tar", 0, N, "shirt\ntrouser\r\nbag");
    ferry_dataset *ds = open1(p);
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), N);
    assert_matches_reference(ds, 0);
    ASSERT_EQ_SIZE(ferry_dataset_class_count(ds), 3);
    ASSERT_STR_EQ(ferry_dataset_class_name(ds, 1), "trouser");
    ASSERT_STR_EQ(ferry_dataset_class_name(ds, 2), "bag");
    char want[4096];
    snprintf(want, sizeof want, "%s:000007.png", p);
    ASSERT_STR_EQ(ferry_dataset_sample_name(ds, 7), want);
    ferry_dataset_release(ds);

    /* Without class names: the largest label + 1. */
    ds = open1(write_shard("noclasses.tar", 0, N, NULL));
    ASSERT_EQ_SIZE(ferry_dataset_class_count(ds), 3);
    ASSERT(ferry_dataset_class_name(ds, 0) == NULL);
    ferry_dataset_release(ds);
}

TEST(shards_from_a_folder_a_list_file_and_paths_keep_their_order)
{
    make_reference();
    const char *a = write_shard("many/shard-0.tar", 0, 5, NULL);
    const char *b = write_shard("many/shard-1.tar", 5, 9, NULL);
    const char *c = write_shard("many/shard-2.tar", 9, N, NULL);
    ft_write_file(ft_tmp("many/notes.txt"), "x", 1); /* not a shard: ignored */
    ferry_dataset *ds = open1(ft_tmp("many"));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), N);
    assert_matches_reference(ds, 0);
    ferry_dataset_release(ds);

    const char *list = "# the shards\nmany/shard-0.tar\n\n  many/shard-1.tar  \r\nmany/shard-2.tar";
    ft_write_file(ft_tmp("shards.txt"), list, strlen(list));
    ds = open1(ft_tmp("shards.txt"));
    assert_matches_reference(ds, 0);
    ferry_dataset_release(ds);

    /* Explicit paths in the caller's order: samples follow it. */
    const char *paths[] = {b, c, a};
    ASSERT_OK(ferry_dataset_shards(paths, 3, NULL, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), N);
    uint8_t x[IW * IH], y[IW * IH];
    int64_t lx, ly;
    ASSERT_OK(ferry_dataset_get(ds, 0, x, sizeof x, NULL, &lx));
    ASSERT_OK(ferry_dataset_get(ref, 5, y, sizeof y, NULL, &ly));
    ASSERT_MEM_EQ(x, y, sizeof x);
    ASSERT_OK(ferry_dataset_get(ds, N - 1, x, sizeof x, NULL, &lx));
    ASSERT_OK(ferry_dataset_get(ref, 4, y, sizeof y, NULL, &ly));
    ASSERT_MEM_EQ(x, y, sizeof x);
    ferry_dataset_release(ds);

    /* The same file twice would count its samples twice. */
    const char *twice[] = {a, b, ft_tmp("many/../many/shard-0.tar")};
    ASSERT_STATUS(ferry_dataset_shards(twice, 3, NULL, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "given twice");
    ASSERT_STR_CONTAINS(ferry_last_error(), a);

    const char *missing = ft_tmp("nope.tar");
    ASSERT_STATUS(ferry_dataset_shards(&missing, 1, NULL, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), missing);
    ft_write_file(ft_tmp("empty/x.png"), "", 0);
    const char *empty = ft_tmp("empty");
    ASSERT_STATUS(ferry_dataset_shards(&empty, 1, NULL, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "no shards (.tar, .tar.gz or .tgz files)");
    ASSERT_STATUS(ferry_dataset_shards(NULL, 1, NULL, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_dataset_shards(&empty, 0, NULL, &ds), FERRY_ERR_INVALID_ARG);
}

/* One epoch's batches (images and labels) folded into a digest. */
static uint64_t epoch_digest(ferry_dataset *ds, size_t workers, ferry_on_error policy,
                             uint64_t *allocs_after_warmup, ferry_loader_stats *stats_out)
{
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = ds;
    c.batch_size = 5;
    c.num_workers = workers ? workers : FERRY_LOADER_NO_WORKERS;
    c.shuffle = true;
    c.seed = 99;
    c.device = ferry_cpu();
    c.pin_memory = FERRY_PIN_MEMORY_OFF;
    c.out_dtype = FERRY_DTYPE_U8;
    c.on_error = policy;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    uint64_t h = ft_epoch_digest(l);
    ferry_loader_stats s;
    ASSERT_OK(ferry_loader_stats_get(l, &s));
    if (allocs_after_warmup)
        *allocs_after_warmup = s.allocs_after_warmup;
    if (stats_out) {
        *stats_out = s;
        for (size_t i = 0; i < s.num_skipped_names; i++) /* valid only until destroy */
            stats_out->skipped_names[i] = strdup(s.skipped_names[i]);
    }
    ferry_loader_destroy(l);
    return h;
}

TEST(loader_batches_equal_the_folders_for_any_worker_count)
{
    make_reference();
    write_shard("w/a.tar", 0, 7, NULL);
    write_shard("w/b.tar", 7, N, NULL);
    ferry_dataset *ds = open1(ft_tmp("w"));
    uint64_t want = epoch_digest(ref, 0, FERRY_ON_ERROR_FAIL, NULL, NULL);
    size_t counts[] = {0, 1, 2, 3};
    for (size_t k = 0; k < 4; k++) {
        uint64_t allocs = 1;
        uint64_t got = epoch_digest(ds, counts[k], FERRY_ON_ERROR_FAIL, &allocs, NULL);
        ASSERT_MSG(got == want, "digest with %zu workers differs from the image folder's", counts[k]);
        ASSERT_EQ_INT(allocs, 0);
    }
    ferry_dataset_release(ds);
}

/* A shard whose keys 1..4 cannot be loaded, each for its own reason. */
static const char *write_incomplete(size_t *hdr_of_cls3, size_t *hdr_of_png1)
{
    ft_tar t = {0};
    ft_tar_text(&t, "classes.txt", "a\nb\nc\n");
    for (size_t i = 0; i < 7; i++) {
        char name[32];
        if (i != 2) { /* 2: no image */
            snprintf(name, sizeof name, "%06zu.png", i);
            size_t at;
            if (i == 4) /* 4: a corrupt PNG (cut short) */
                at = ft_tar_file(&t, name, png[i], png_n[i] / 2);
            else
                at = ft_tar_file(&t, name, png[i], png_n[i]);
            if (i == 1)
                *hdr_of_png1 = at;
        }
        snprintf(name, sizeof name, "%06zu.cls", i);
        if (i == 1) /* 1: no label */
            continue;
        size_t at = ft_tar_text(&t, name, i == 3 ? "seven" : i == 5 ? "9" : i == 6 ? " 2\n" : "1");
        if (i == 3)
            *hdr_of_cls3 = at;
    }
    ft_tar_end(&t);
    return ft_tar_save(&t, "incomplete.tar");
}

static void assert_get_fails(ferry_dataset *ds, size_t i, ferry_status want, const char *name,
                             const char *reason)
{
    uint8_t out[IW * IH];
    ASSERT_STATUS(ferry_dataset_get(ds, i, out, sizeof out, NULL, NULL), want);
    ASSERT_STR_CONTAINS(ferry_last_error(), name);
    ASSERT_STR_CONTAINS(ferry_last_error(), reason);
}

TEST(incomplete_keys_fail_by_name_when_loaded)
{
    make_reference();
    size_t cls3 = 0, png1 = 0;
    const char *p = write_incomplete(&cls3, &png1);
    ferry_dataset *ds = open1(p);
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), 7);
    ASSERT_EQ_SIZE(ferry_dataset_class_count(ds), 3);
    char name[4096], where[64];
    snprintf(name, sizeof name, "%s:000001.png", p);
    snprintf(where, sizeof where, "at byte %zu", png1);
    assert_get_fails(ds, 1, FERRY_ERR_FORMAT, name, "has no .cls label");
    ASSERT_STR_CONTAINS(ferry_last_error(), where);
    int64_t lab;
    ASSERT_STATUS(ferry_dataset_label(ds, 1, &lab), FERRY_ERR_FORMAT);
    snprintf(name, sizeof name, "%s:000002:", p);
    assert_get_fails(ds, 2, FERRY_ERR_FORMAT, name, "no image (.png, .jpg or .jpeg)");
    ASSERT_OK(ferry_dataset_label(ds, 2, &lab)); /* the label is there */
    ASSERT_EQ_INT(lab, 1);
    snprintf(name, sizeof name, "%s:000003.png", p);
    snprintf(where, sizeof where, "at byte %zu", cls3);
    assert_get_fails(ds, 3, FERRY_ERR_FORMAT, name, "is not a label");
    ASSERT_STR_CONTAINS(ferry_last_error(), where);
    snprintf(name, sizeof name, "%s:000004.png", p);
    assert_get_fails(ds, 4, FERRY_ERR_FORMAT, name, "");
    snprintf(name, sizeof name, "%s:000005.png", p);
    assert_get_fails(ds, 5, FERRY_ERR_FORMAT, name, "label 9");
    ASSERT_STR_CONTAINS(ferry_last_error(), "3 class names");
    ASSERT_OK(ferry_dataset_label(ds, 6, &lab));
    ASSERT_EQ_INT(lab, 2);

    /* Under the skip policy: the same batches with any worker count, the bad
     * ones named in the stats. */
    ferry_loader_stats s0, s;
    uint64_t d0 = epoch_digest(ds, 0, FERRY_ON_ERROR_SKIP, NULL, &s0);
    for (size_t w = 1; w <= 3; w++) {
        ASSERT(epoch_digest(ds, w, FERRY_ON_ERROR_SKIP, NULL, &s) == d0);
        for (size_t i = 0; i < s.num_skipped_names; i++)
            free((char *)s.skipped_names[i]);
    }
    ASSERT(s0.skipped >= 5); /* a replacement may fail too */
    bool seen[7] = {0};
    for (size_t i = 0; i < s0.num_skipped_names; i++) {
        const char *colon = strrchr(s0.skipped_names[i], ':');
        ASSERT(colon);
        seen[atoi(colon + 1)] = true;
        free((char *)s0.skipped_names[i]);
    }
    ASSERT(!seen[0] && seen[1] && seen[2] && seen[3] && seen[4] && seen[5] && !seen[6]);

    /* Under the fail policy the loader names the sample. */
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = ds;
    c.batch_size = 7;
    c.device = ferry_cpu();
    c.pin_memory = FERRY_PIN_MEMORY_OFF;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_batch b;
    ASSERT_STATUS(ferry_loader_next(l, NULL, &b), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "incomplete.tar:00000");
    ferry_loader_destroy(l);
    ferry_dataset_release(ds);
}

TEST(an_image_over_the_size_limit_fails_when_loaded)
{
    make_reference();
    const char *p = write_shard("limit.tar", 0, 3, NULL);
    ferry_image_config cfg = ferry_image_config_default();
    cfg.height = IH;
    cfg.width = IW;
    cfg.channels = 1;
    cfg.limits.max_file_bytes = png_n[1] - 1;
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_shards(&p, 1, &cfg, &ds));
    char name[4096];
    snprintf(name, sizeof name, "%s:000001.png", p);
    assert_get_fails(ds, 1, FERRY_ERR_LIMIT, name, "over the limit");
    ASSERT_STR_CONTAINS(ferry_last_error(), "at byte");
    ferry_dataset_release(ds);
}

/* A one-sample shard body (000000.png and .cls); returns the png header's offset. */
static size_t one_sample(ft_tar *t)
{
    ft_tar_text(t, "000000.cls", "0");
    return ft_tar_file(t, "000000.png", png[0], png_n[0]);
}

/* Create must fail with want, naming the shard and each of the needles. */
static void assert_create_fails(ft_tar *t, const char *rel, ferry_status want, const char *n1,
                                const char *n2)
{
    ft_assert_shard_fails(ft_tar_save(t, rel), want, n1, n2);
}

TEST(corrupt_shards_fail_at_create_naming_member_and_offset)
{
    make_reference();
    ft_tar t = {0};
    char at[64];

    size_t h = one_sample(&t);
    t.d[h + 10] ^= 0x20; /* a flipped bit in the name: the checksum no longer matches */
    ft_tar_end(&t);
    snprintf(at, sizeof at, "header at byte %zu", h);
    assert_create_fails(&t, "bad_sum.tar", FERRY_ERR_FORMAT, at, "bad header checksum");

    one_sample(&t);
    t.n = 1024 + 512 + png_n[0] / 2; /* cut inside the last member's data */
    assert_create_fails(&t, "cut_data.tar", FERRY_ERR_FORMAT, "000000.png", "truncated");
    snprintf(at, sizeof at, "at byte %zu", (size_t)512 * 2);
    ASSERT_STR_CONTAINS(ferry_last_error(), at);

    one_sample(&t);
    ft_tar_text(&t, "000001.cls", "0");
    t.n -= 512 + 300; /* cut inside the last header */
    assert_create_fails(&t, "cut_header.tar", FERRY_ERR_FORMAT, "truncated inside the header", NULL);

    one_sample(&t); /* no end-of-archive blocks: cut at a member boundary */
    assert_create_fails(&t, "no_end.tar", FERRY_ERR_FORMAT, "without the end-of-archive", NULL);

    one_sample(&t);
    h = ft_tar_header(&t, "000001.png", '2', 0, NULL);
    ft_tar_end(&t);
    snprintf(at, sizeof at, "000001.png at byte %zu", h);
    assert_create_fails(&t, "symlink.tar", FERRY_ERR_FORMAT, at, "symbolic link");

    one_sample(&t);
    h = ft_tar_header(&t, "000001.png", '1', 0, NULL);
    ft_tar_end(&t);
    snprintf(at, sizeof at, "000001.png at byte %zu", h);
    assert_create_fails(&t, "hardlink.tar", FERRY_ERR_FORMAT, at, "hard link");

    one_sample(&t);
    ft_tar_header(&t, "000001.png", '6', 0, NULL);
    ft_tar_end(&t);
    assert_create_fails(&t, "fifo.tar", FERRY_ERR_FORMAT, "000001.png", "a FIFO");

    h = one_sample(&t);
    size_t h2 = ft_tar_file(&t, "000000.PNG", png[1], png_n[1]);
    ft_tar_end(&t);
    snprintf(at, sizeof at, "000000.png at byte %zu", h);
    char at2[64];
    snprintf(at2, sizeof at2, "000000.PNG at byte %zu", h2);
    assert_create_fails(&t, "dup.tar", FERRY_ERR_FORMAT, at, at2);
    ASSERT_STR_CONTAINS(ferry_last_error(), "duplicate key");

    one_sample(&t);
    h = ft_tar_header(&t, "000001.png", '0', 10, NULL);
    memcpy(t.d + h + 124, "12x45678901", 11); /* the size field, checksum fixed below */
    memset(t.d + h + 148, ' ', 8);
    long sum = 0;
    for (int i = 0; i < 512; i++)
        sum += t.d[h + i];
    snprintf((char *)t.d + h + 148, 8, "%06lo", sum);
    ft_tar_end(&t);
    snprintf(at, sizeof at, "header at byte %zu", h);
    assert_create_fails(&t, "bad_size.tar", FERRY_ERR_FORMAT, at, "size field");

    one_sample(&t);
    h = ft_tar_header(&t, "PaxHeaders/x", 'x', 12, NULL);
    ft_tar_put(&t, "99 path=x.png\n", 12);
    ft_tar_pad(&t);
    ft_tar_end(&t);
    snprintf(at, sizeof at, "pax header at byte %zu", h);
    assert_create_fails(&t, "bad_pax.tar", FERRY_ERR_FORMAT, at, "malformed pax record");

    one_sample(&t);
    const char *kv[] = {"path=000001.png"};
    h = ft_tar_pax(&t, 'x', kv, 1);
    ft_tar_end(&t);
    snprintf(at, sizeof at, "extended header at byte %zu", h);
    assert_create_fails(&t, "pax_at_end.tar", FERRY_ERR_FORMAT, at, "not a member");

    /* A pax size that runs past the end of the shard. */
    one_sample(&t);
    const char *big[] = {"size=99999999"};
    h = ft_tar_pax(&t, 'x', big, 1);
    ft_tar_file(&t, "000001.png", png[1], png_n[1]);
    ft_tar_end(&t);
    snprintf(at, sizeof at, "000001.png at byte %zu", h);
    assert_create_fails(&t, "pax_size.tar", FERRY_ERR_FORMAT, at, "99999999 bytes");

    /* Compressed other than with gzip (tests/test_shards_gz.c has gzip). */
    static const uint8_t zst[] = {0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0, 0, 3, 1, 2, 3};
    ft_tar_put(&t, zst, sizeof zst);
    assert_create_fails(&t, "packed.tar", FERRY_ERR_UNSUPPORTED, "zstd-compressed", NULL);
    static const uint8_t xz[] = {0xfd, '7', 'z', 'X', 'Z', 0, 0, 0, 0, 3, 1, 2, 3};
    ft_tar_put(&t, xz, sizeof xz);
    assert_create_fails(&t, "packed-xz.tar", FERRY_ERR_UNSUPPORTED, "xz-compressed", NULL);

    ft_tar_put(&t, "hello, this is not a tar file at all", 36);
    for (int i = 0; i < 30; i++)
        ft_tar_put(&t, "0123456789abcdef0123456789abcdef", 32);
    assert_create_fails(&t, "text.tar", FERRY_ERR_FORMAT, "header at byte 0", "not a tar");

    /* Class names that differ between shards. */
    const char *a = write_shard("cls/a.tar", 0, 4, "x\ny\nz\n");
    const char *b = write_shard("cls/b.tar", 4, 8, "x\nY\nz\n");
    const char *both[] = {a, b};
    ferry_dataset *ds = NULL;
    ASSERT_STATUS(ferry_dataset_shards(both, 2, NULL, &ds), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "line 2");
    ASSERT_STR_CONTAINS(ferry_last_error(), b);

    /* No samples at all. */
    ft_tar_text(&t, "readme.txt", "nothing here");
    ft_tar_end(&t);
    assert_create_fails(&t, "nosamples.tar", FERRY_ERR_INVALID_ARG, "no samples", NULL);
}

TEST(pax_gnu_and_ustar_names_sizes_and_types)
{
    make_reference();
    ft_tar t = {0};
    char longdir[200];
    memset(longdir, 'd', 150);
    strcpy(longdir + 150, "/");
    char name[300];
    ft_tar_header(&t, "./", '5', 0, NULL);               /* a folder: ignored */
    const char *glob[] = {"comment=made by the test"};
    ft_tar_pax(&t, 'g', glob, 1);                        /* global records: ignored */
    /* 0: pax path (over 100 bytes) and pax size (the ustar field says 0). */
    snprintf(name, sizeof name, "path=%s%06d.png", longdir, 0);
    char size_kv[32];
    snprintf(size_kv, sizeof size_kv, "size=%zu", png_n[0]);
    const char *kv0[] = {name, size_kv};
    ft_tar_pax(&t, 'x', kv0, 2);
    ft_tar_header(&t, "shortened.png", '0', 0, NULL);
    ft_tar_put(&t, png[0], png_n[0]);
    ft_tar_pad(&t);
    snprintf(name, sizeof name, "%s%06d.cls", longdir, 0);
    ft_tar_longname(&t, name);                           /* 0's label: a GNU long name */
    ft_tar_header(&t, "././@LongLink-ignored", '0', 1, &(ft_tar_opts){.gnu_magic = true});
    ft_tar_put(&t, "0", 1);
    ft_tar_pad(&t);
    /* 1: the ustar prefix field, base-256 size, "./" names. */
    char prefix[160];
    memcpy(prefix, longdir, 150);
    prefix[150] = '\0';
    ft_tar_opts pre = {.prefix = prefix, .base256 = true};
    ft_tar_file_opts(&t, "000001.png", png[1], png_n[1], &pre);
    char dotted[160] = "./";
    strcat(dotted, prefix);
    ft_tar_file_opts(&t, "000001.cls", "0", 1, &(ft_tar_opts){.prefix = dotted});
    /* 2: checksum as old tars summed it (signed), a json to ignore, a hidden file. */
    ft_tar_opts old = {.signed_sum = true, .uname = "\xe9t\xe9"};
    snprintf(name, sizeof name, "%s000002.png", longdir);
    ft_tar_longname(&t, name);
    ft_tar_file_opts(&t, "x", png[2], png_n[2], &old);
    snprintf(name, sizeof name, "%s000002.cls", longdir);
    ft_tar_longname(&t, name);
    ft_tar_file(&t, "y", "0", 1);
    snprintf(name, sizeof name, "%s000002.json", longdir);
    ft_tar_longname(&t, name);
    ft_tar_file(&t, "z", "{}", 2);
    ft_tar_file(&t, "._000003.png", "junk", 4);
    ft_tar_end(&t);
    const char *p = ft_tar_save(&t, "formats.tar");
    ferry_dataset *ds = open1(p);
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), 3);
    assert_matches_reference(ds, 0);
    char want[4096];
    snprintf(want, sizeof want, "%s:%s000002.png", p, longdir);
    ASSERT_STR_EQ(ferry_dataset_sample_name(ds, 2), want);
    ferry_dataset_release(ds);
}

/* ---- shards written by other programs ---- */

static bool have(const char *cmd)
{
    char c[256];
    snprintf(c, sizeof c, "command -v %s >/dev/null 2>&1", cmd);
    return system(c) == 0;
}

/* A shard of the flat files must equal the reference (keys "sub_folder/N"). */
static void check_external(const char *p)
{
    ferry_dataset *ds = open1(p);
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), N);
    assert_matches_reference(ds, 0);
    char want[4096];
    snprintf(want, sizeof want, "%s:sub_folder/000003.png", p);
    ASSERT_STR_EQ(ferry_dataset_sample_name(ds, 3), want);
    ferry_dataset_release(ds);
}

TEST(shards_written_by_gnu_tar)
{
    make_reference();
    if (!have("tar"))
        SKIP("tar is not installed");
    /* A folder name over 100 bytes makes GNU tar use ././@LongLink, pax format
     * pax path records, ustar the prefix field. */
    char deep[400];
    snprintf(deep, sizeof deep, "%s/flat/%060d", ft_tmpdir(), 0);
    ASSERT_EQ_INT(mkdir(deep, 0755), 0);
    snprintf(deep, sizeof deep, "%s/flat/%060d/%060d", ft_tmpdir(), 0, 1);
    ASSERT_EQ_INT(mkdir(deep, 0755), 0);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cp %s/flat/sub_folder/000011.* %s/ && rm %s/flat/sub_folder/000011.*",
             ft_tmpdir(), deep, ft_tmpdir());
    ASSERT_EQ_INT(system(cmd), 0);
    const char *formats[] = {"gnu", "posix", "ustar"};
    for (int k = 0; k < 3; k++) {
        char out[64];
        snprintf(out, sizeof out, "gnutar-%s.tar", formats[k]);
        snprintf(cmd, sizeof cmd, "tar --format=%s -cf %s -C %s/flat . 2>&1", formats[k],
                 ft_tmp(out), ft_tmpdir());
        ASSERT_EQ_INT(system(cmd), 0);
        ferry_dataset *ds = open1(ft_tmp(out));
        ASSERT_EQ_SIZE(ferry_dataset_len(ds), N);
        /* The deep folder's key sorts first ('0' < 's'): sample 11 is first. */
        uint8_t a[IW * IH], b[IW * IH];
        ASSERT_OK(ferry_dataset_get(ds, 0, a, sizeof a, NULL, NULL));
        ASSERT_OK(ferry_dataset_get(ref, 11, b, sizeof b, NULL, NULL));
        ASSERT_MEM_EQ(a, b, sizeof a);
        ASSERT(strstr(ferry_dataset_sample_name(ds, 0), deep + strlen(ft_tmpdir()) + 6));
        for (size_t i = 1; i < N; i++) {
            int64_t la, lb;
            ASSERT_OK(ferry_dataset_get(ds, i, a, sizeof a, NULL, &la));
            ASSERT_OK(ferry_dataset_get(ref, i - 1, b, sizeof b, NULL, &lb));
            ASSERT_MEM_EQ(a, b, sizeof a);
            ASSERT_EQ_INT(la, lb);
        }
        ferry_dataset_release(ds);
    }
    snprintf(cmd, sizeof cmd, "mv %s/000011.* %s/flat/sub_folder/ && rm -r %s/flat/%060d", deep,
             ft_tmpdir(), ft_tmpdir(), 0);
    ASSERT_EQ_INT(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "tar -cf %s -C %s/flat sub_folder", ft_tmp("gnutar-plain.tar"), ft_tmpdir());
    ASSERT_EQ_INT(system(cmd), 0);
    check_external(ft_tmp("gnutar-plain.tar"));
}

TEST(shards_written_by_python_tarfile)
{
    make_reference();
    if (access("/usr/bin/python3", X_OK) != 0)
        SKIP("/usr/bin/python3 is not installed");
    const char *formats[] = {"PAX_FORMAT", "GNU_FORMAT", "USTAR_FORMAT"};
    for (int k = 0; k < 3; k++) {
        char out[64], cmd[8192];
        snprintf(out, sizeof out, "py-%s.tar", formats[k]);
        /* Members added one by one in reverse order, with a non-ASCII owner
         * (a pax record in PAX_FORMAT); the reader sorts by key. */
        snprintf(cmd, sizeof cmd,
                 "/usr/bin/python3 -c \"import tarfile,os,sys\n"
                 "d=sys.argv[2]\n"
                 "with tarfile.open(sys.argv[1],'w',format=tarfile.%s) as t:\n"
                 "  for n in sorted(os.listdir(d+'/sub_folder'),reverse=True):\n"
                 "    i=t.gettarinfo(d+'/sub_folder/'+n,'sub_folder/'+n)\n"
                 "    i.uname='%s'\n"
                 "    t.addfile(i,open(d+'/sub_folder/'+n,'rb'))\n\" %s %s/flat",
                 formats[k], k == 0 ? "\\u00e9" : "x", ft_tmp(out), ft_tmpdir());
        ASSERT_EQ_INT(system(cmd), 0);
        check_external(ft_tmp(out));
    }
}

/* Every allocation of create failed in turn: a clean FERRY_ERR_NO_MEMORY and
 * nothing leaked. Then every allocation of loading the samples: nothing leaked,
 * and a failure (libpng's arena may absorb some) is reported as one. */
static ferry_status load_all(ferry_dataset *ds)
{
    ferry_scratch *s = NULL;
    ferry_status st = ferry_scratch_create(&s);
    ferry_sample_ctx ctx = {.scratch = s};
    uint8_t out[IW * IH];
    for (size_t i = 0; st == FERRY_OK && i < N; i++)
        st = ferry_dataset_get(ds, i, out, sizeof out, &ctx, NULL);
    ferry_scratch_destroy(s);
    return st;
}

/* A shard dataset keeps every shard open: past the process's limit on open
 * files, create says so and what to do, and gives every descriptor back. */
TEST(more_shards_than_open_files_allowed_fail_at_create_saying_why)
{
    make_reference();
    for (int k = 0; k < 40; k++) {
        char rel[64];
        snprintf(rel, sizeof rel, "fdlimit/%02d.tar", k);
        write_shard(rel, (size_t)k % N, (size_t)k % N + 1, NULL);
    }
    struct rlimit old;
    ASSERT(getrlimit(RLIMIT_NOFILE, &old) == 0);
    int probe = dup(0); /* the lowest free descriptor: about how many are open */
    ASSERT(probe >= 0);
    close(probe);
    struct rlimit low = {.rlim_cur = (rlim_t)probe + 16, .rlim_max = old.rlim_max};
    ASSERT(setrlimit(RLIMIT_NOFILE, &low) == 0);
    const char *p = ft_tmp("fdlimit");
    ferry_dataset *ds = NULL;
    ferry_status st = ferry_dataset_shards(&p, 1, NULL, &ds);
    int after = dup(0);
    ASSERT(setrlimit(RLIMIT_NOFILE, &old) == 0);
    ASSERT_STATUS(st, FERRY_ERR_IO);
    ASSERT(ds == NULL);
    ASSERT_STR_CONTAINS(ferry_last_error(), "keeps each of its 40 shards open");
    ASSERT_STR_CONTAINS(ferry_last_error(), "ulimit -n");
    ASSERT_EQ_INT(after, probe); /* none left open */
    close(after);
    ASSERT_OK(ferry_dataset_shards(&p, 1, NULL, &ds)); /* with the limit back */
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), 40);
    ferry_dataset_release(ds);
}

TEST(every_failed_allocation_is_reported_and_nothing_leaks)
{
    make_reference();
    write_shard("oom/a.tar", 0, 6, "x\ny\nz");
    write_shard("oom/b.tar", 6, N, "x\ny\nz");
    const char *p = ft_tmp("oom");
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_shards(&p, 1, NULL, &ds)); /* warm anything process-wide */
    ASSERT_OK(load_all(ds));
    int64_t live0 = ferry_debug_alloc_live();
    for (int phase = 0; phase < 2; phase++) {
        size_t failures = 0;
        for (int64_t k = 1;; k++) {
            ASSERT_MSG(k < 100000, "the sweep did not end");
            ferry_dataset *d2 = NULL;
            ferry_debug_fail_alloc_after(phase == 0 ? k : 0);
            ferry_status st = phase == 0 ? ferry_dataset_shards(&p, 1, NULL, &d2) : FERRY_OK;
            if (phase == 1) {
                ferry_debug_fail_alloc_after(k);
                st = load_all(ds);
            }
            ferry_dataset_release(d2);
            bool never_failed = ferry_debug_fail_alloc_after(0) > 0;
            ASSERT_MSG(ferry_debug_alloc_live() == live0, "phase %d: failing allocation %lld "
                       "leaked %lld", phase, (long long)k,
                       (long long)(ferry_debug_alloc_live() - live0));
            if (never_failed) {
                ASSERT_OK(st);
                break;
            }
            failures++;
            if (phase == 0)
                ASSERT_MSG(st == FERRY_ERR_NO_MEMORY, "failing allocation %lld in create gave %s "
                           "(%s)", (long long)k, ferry_status_str(st), ferry_last_error());
            else if (st != FERRY_OK)
                ASSERT(ferry_last_error()[0] != '\0');
        }
        ASSERT_MSG(failures > 5, "phase %d: only %zu allocations were failed", phase, failures);
    }
    ferry_dataset_release(ds);
}
