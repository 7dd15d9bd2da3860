/* Gzip-compressed shards (.tar.gz, .tgz): every sample is the same as in the
 * same shards uncompressed (the reference), read directly in any order, from
 * several threads, and through the loader in every order with any worker
 * count; streaming decompresses each shard once an epoch with the ring of
 * kept images within its stated bound; a full shuffle does too while the ring
 * holds; a small ring stays within its bytes and still gives the same bytes;
 * corrupt gzip or tar inside it fails at create naming the shard and where;
 * the index kept beside a shard (shard_index_cache) is used exactly while the
 * shard is unchanged. */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "harness.h"
#include "dataset/core/internal.h"
#include "dataset/shards/shards.h"

/* 5 shards; shard 1 is written in reverse key order (its stream passes the
 * samples backwards), shard 2 carries a 300 KiB member of no sample (skipped
 * through the stream's buffers), shard 3 is 3 gzip members one after another
 * and named .tgz. */
enum { NSHARDS = 5, N = 40, IW = 5, IH = 4 };
static const size_t shard_len[NSHARDS] = {9, 11, 6, 1, 13};

static void add_sample(ft_tar *t, size_t shard, size_t i)
{
    uint8_t px[IW * IH];
    for (size_t j = 0; j < sizeof px; j++)
        px[j] = (uint8_t)(i * 37 + j * 11);
    const char *p = ft_tmp("gz/tmp.png");
    ft_write_file(p, "", 0); /* (makes the folder) */
    ASSERT_OK(ferry_png_save(p, px, IW, IH, 1));
    size_t n;
    uint8_t *bytes = ft_read_file(p, &n);
    char name[64], lab[16];
    snprintf(name, sizeof name, "s%zu_%03zu.cls", shard, i);
    snprintf(lab, sizeof lab, "%zu\n", i % 5);
    ft_tar_text(t, name, lab);
    snprintf(name, sizeof name, "s%zu_%03zu.png", shard, i);
    ft_tar_file(t, name, bytes, n);
    free(bytes);
}

/* The shards as .tar under gz/plain and compressed under gz/zip (same order:
 * .tgz sorts after .tar.gz only by name, so the names keep the order). */
static void write_shards(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    size_t first = 0;
    for (size_t s = 0; s < NSHARDS; s++) {
        ft_tar t = {0};
        for (size_t k = 0; k < shard_len[s]; k++) {
            size_t i = first + (s == 1 ? shard_len[s] - 1 - k : k);
            add_sample(&t, s, i);
            if (s == 2 && k == 2) {
                uint8_t *big = calloc(300 << 10, 1);
                ASSERT(big);
                ft_tar_file(&t, "zz_notes.bin", big, 300 << 10);
                free(big);
            }
        }
        first += shard_len[s];
        ft_tar_end(&t);
        ft_tar copy = {0};
        ft_tar_put(&copy, t.d, t.n);
        char rel[64];
        snprintf(rel, sizeof rel, "gz/plain/%02zu.tar", s);
        ft_tar_save(&t, rel);
        snprintf(rel, sizeof rel, s == 3 ? "gz/zip/%02zu.tgz" : "gz/zip/%02zu.tar.gz", s);
        ft_tar_save_gz(&copy, rel, s == 3 ? 3 : 1);
    }
}

static ferry_dataset *open_dir(const char *rel, size_t cache_bytes)
{
    write_shards();
    ferry_image_config cfg = ferry_image_config_default();
    if (cache_bytes)
        cfg.shard_cache_bytes = cache_bytes;
    const char *dir = ft_tmp(rel);
    ferry_dataset *ds = NULL;
    ASSERT_OK(ferry_dataset_shards(&dir, 1, &cfg, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), N);
    return ds;
}

static ferry_gz_cache_stats stats_of(const ferry_dataset *ds)
{
    ferry_gz_cache_stats s;
    ASSERT(ferry__dataset_gz_stats(ds, &s));
    return s;
}

/* Sample i of a and b: the same pixels and label. */
static void assert_same_sample(ferry_dataset *a, ferry_dataset *b, size_t i)
{
    uint8_t x[IW * IH], y[IW * IH];
    int64_t lx = -1, ly = -2;
    ASSERT_OK(ferry_dataset_get(a, i, x, sizeof x, NULL, &lx));
    ASSERT_OK(ferry_dataset_get(b, i, y, sizeof y, NULL, &ly));
    ASSERT_MSG(!memcmp(x, y, sizeof x) && lx == ly, "sample %zu differs (%s)", i,
               ferry_dataset_sample_name(b, i));
}

static void permutation(size_t *v, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        v[i] = i;
    for (size_t i = n; i > 1; i--) {
        seed = seed * 1103515245u + 12345u;
        size_t j = (seed >> 8) % i, t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

TEST(every_sample_matches_the_uncompressed_shards_in_any_order)
{
    ferry_dataset *plain = open_dir("gz/plain", 0), *zip = open_dir("gz/zip", 0);
    ASSERT_EQ_SIZE(ferry_dataset_class_count(zip), 5);
    ASSERT_EQ_SIZE(ferry__dataset_gzip_shards(zip), NSHARDS);
    ASSERT_EQ_SIZE(ferry__dataset_gzip_shards(plain), 0);
    ASSERT(!ferry__dataset_gz_stats(plain, &(ferry_gz_cache_stats){0}));
    ASSERT_STR_CONTAINS(ferry_dataset_sample_name(zip, 9), "01.tar.gz:s1_009.png");
    size_t order[N];
    for (size_t i = 0; i < N; i++)
        assert_same_sample(plain, zip, i);
    for (size_t i = N; i-- > 0;)
        assert_same_sample(plain, zip, i);
    permutation(order, N, 7);
    for (size_t i = 0; i < N; i++)
        assert_same_sample(plain, zip, order[i]);
    ferry_gz_cache_stats s = stats_of(zip);
    ASSERT_EQ_INT(s.from_ring + s.from_stream, 3 * N + 1); /* + the format probe at create */
    ASSERT_EQ_INT(s.evicted, 0);
    ferry_dataset_release(plain);
    ferry_dataset_release(zip);
}

/* Without a plan, an image the stream passes is kept until read once: the
 * samples in reverse order cost one pass of each shard. */
TEST(reading_backwards_decompresses_each_shard_once)
{
    ferry_dataset *zip = open_dir("gz/zip", 0);
    ferry_gz_cache_stats s0 = stats_of(zip);
    uint64_t d0 = s0.decompressed;
    uint8_t x[IW * IH];
    for (size_t i = N; i-- > 0;)
        ASSERT_OK(ferry_dataset_get(zip, i, x, sizeof x, NULL, NULL));
    ferry_gz_cache_stats s = stats_of(zip);
    ASSERT_EQ_INT(s.rewinds, 0);
    ASSERT_EQ_INT(s.passes - s0.passes, NSHARDS);
    ASSERT_MSG(s.decompressed - d0 < 800 << 10, "%llu bytes decompressed for one pass",
               (unsigned long long)(s.decompressed - d0));
    ASSERT_EQ_SIZE(s.kept, 0); /* every kept image was read */
    ASSERT(s.kept_peak > 0);
    ferry_dataset_release(zip);
}

typedef struct reader {
    ferry_dataset *plain, *zip;
    unsigned seed;
    int bad;
} reader;

static void *read_all(void *arg)
{
    reader *r = arg;
    size_t order[N];
    permutation(order, N, r->seed);
    ferry_scratch *s = NULL;
    if (ferry_scratch_create(&s) != FERRY_OK)
        return (void *)1;
    ferry_sample_ctx ctx = {.scratch = s};
    for (int rep = 0; rep < 3; rep++)
        for (size_t k = 0; k < N; k++) {
            uint8_t x[IW * IH], y[IW * IH];
            int64_t lx, ly;
            if (ferry_dataset_get(r->zip, order[k], x, sizeof x, &ctx, &lx) != FERRY_OK ||
                ferry_dataset_get(r->plain, order[k], y, sizeof y, NULL, &ly) != FERRY_OK ||
                memcmp(x, y, sizeof x) || lx != ly)
                r->bad++;
        }
    ferry_scratch_destroy(s);
    return NULL;
}

TEST(threads_reading_at_once_get_the_right_bytes)
{
    ferry_dataset *plain = open_dir("gz/plain", 0), *zip = open_dir("gz/zip", 0);
    enum { T = 4 };
    pthread_t th[T];
    reader r[T];
    for (int t = 0; t < T; t++) {
        r[t] = (reader){.plain = plain, .zip = zip, .seed = (unsigned)t * 31 + 1};
        ASSERT(pthread_create(&th[t], NULL, read_all, &r[t]) == 0);
    }
    for (int t = 0; t < T; t++) {
        ASSERT(pthread_join(th[t], NULL) == 0);
        ASSERT_EQ_INT(r[t].bad, 0);
    }
    ferry_dataset_release(plain);
    ferry_dataset_release(zip);
}

/* ---- through the loader ---- */

typedef struct run {
    bool shuffle;
    size_t buffer, workers;
    uint64_t epoch;
    size_t epochs;        /* run epoch, epoch + 1, ... in one loader; 0 is 1 */
} run;

enum { BATCH = 4, PREFETCH = 2 };

/* The epochs' digest of every image and label byte, in delivery order; each
 * epoch must deliver n samples. */
static uint64_t epoch_digest_n(ferry_dataset *ds, const run *o, size_t n_want)
{
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = ds;
    c.batch_size = BATCH;
    c.prefetch = PREFETCH;
    c.shuffle = o->shuffle;
    c.seed = 11;
    c.num_workers = o->workers ? o->workers : FERRY_LOADER_NO_WORKERS;
    c.device = ferry_cpu();
    c.pin_memory = FERRY_PIN_MEMORY_OFF;
    c.out_dtype = FERRY_DTYPE_U8;
    c.stream_shuffle_buffer = o->buffer;
    ferry_loader *l;
    ASSERT_OK(ferry_loader_create(&c, &l));
    uint64_t h = FT_DIGEST_SEED;
    for (size_t e = 0; e < (o->epochs ? o->epochs : 1); e++) {
        if (o->epoch + e)
            ASSERT_OK(ferry_loader_reset(l, o->epoch + e));
        size_t n = 0;
        ferry_batch b;
        ferry_status st;
        while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK) {
            h = ft_batch_digest(h, &b);
            n += b.size;
        }
        ASSERT_STATUS(st, FERRY_END);
        ASSERT_EQ_SIZE(n, n_want);
    }
    ferry_loader_stats ls;
    ASSERT_OK(ferry_loader_stats_get(l, &ls));
    ASSERT_EQ_INT(ls.allocs_after_warmup, 0);
    ferry_loader_destroy(l);
    return h;
}

static uint64_t epoch_digest(ferry_dataset *ds, const run *o)
{
    return epoch_digest_n(ds, o, N);
}

TEST(the_loader_gives_the_uncompressed_batches_in_every_order)
{
    ferry_dataset *plain = open_dir("gz/plain", 0), *zip = open_dir("gz/zip", 0);
    const run orders[] = {
        {.shuffle = false}, {.shuffle = true, .epoch = 1}, {.shuffle = true, .buffer = 1},
        {.shuffle = true, .buffer = 6, .epoch = 2}};
    const size_t workers[] = {0, 1, 3};
    for (size_t k = 0; k < sizeof orders / sizeof *orders; k++) {
        run o = orders[k];
        uint64_t want = epoch_digest(plain, &o);
        for (size_t w = 0; w < 3; w++) {
            o.workers = workers[w];
            ASSERT_MSG(epoch_digest(zip, &o) == want, "order %zu with %zu workers: other bytes "
                       "than the uncompressed shards", k, workers[w]);
        }
    }
    ferry_dataset_release(plain);
    ferry_dataset_release(zip);
}

/* Loader create warms each worker's buffers by loading one sample, and the
 * first epoch's plan counts those reads: no pass of their own (one pass per
 * worker while the warm-up read before the plan). */
static size_t warm_passes(size_t workers)
{
    (void)workers;
    return 0;
}

/* The bound README and the config state: in streaming mode the ring holds at
 * most the shuffle buffer plus the batches in flight; each shard is
 * decompressed once an epoch (no rewind, nothing evicted). */
TEST(streaming_decompresses_each_shard_once_within_the_bound)
{
    size_t tar_bytes = 0;
    for (size_t s = 0; s < NSHARDS; s++) {
        char rel[64];
        snprintf(rel, sizeof rel, "gz/plain/%02zu.tar", s);
        size_t n;
        free(ft_read_file(ft_tmp(rel), &n));
        tar_bytes += n;
    }
    const size_t buffers[] = {1, 5, 12}, workers[] = {0, 2, 4};
    for (size_t b = 0; b < 3; b++)
        for (size_t w = 0; w < 3; w++) {
            ferry_dataset *zip = open_dir("gz/zip", 0);
            ferry_gz_cache_stats s0 = stats_of(zip);
            run o = {.shuffle = true, .buffer = buffers[b], .workers = workers[w], .epochs = 2};
            epoch_digest(zip, &o);
            ferry_gz_cache_stats s = stats_of(zip);
            ASSERT_EQ_INT(s.rewinds, 0);
            ASSERT_EQ_INT(s.passes - s0.passes, 2 * NSHARDS + warm_passes(workers[w]));
            ASSERT_EQ_INT(s.evicted, 0);
            ASSERT_MSG(s.decompressed - s0.decompressed <= 2 * tar_bytes, "buffer %zu, %zu "
                       "workers: %llu bytes decompressed for 2 epochs of %zu", buffers[b],
                       workers[w], (unsigned long long)(s.decompressed - s0.decompressed),
                       tar_bytes);
            ASSERT_MSG(s.kept_peak <= buffers[b] + PREFETCH * BATCH, "buffer %zu, %zu workers: "
                       "%zu images held at once", buffers[b], workers[w], s.kept_peak);
            if (buffers[b] == 12)
                ASSERT(s.kept_peak > 0);
            ferry_dataset_release(zip);
        }
}

TEST(a_full_shuffle_decompresses_each_shard_once_while_the_ring_holds)
{
    ferry_dataset *zip = open_dir("gz/zip", 0);
    uint64_t p0 = stats_of(zip).passes;
    run o = {.shuffle = true, .workers = 2, .epochs = 3};
    epoch_digest(zip, &o);
    ferry_gz_cache_stats s = stats_of(zip);
    ASSERT_EQ_INT(s.rewinds, 0);
    ASSERT_EQ_INT(s.passes - p0, 3 * NSHARDS + warm_passes(2));
    ASSERT_EQ_INT(s.evicted, 0);
    ASSERT(s.from_ring > 0);
    ASSERT_EQ_SIZE(s.kept, 0); /* the plan kept only what the epochs read */
    ferry_dataset_release(zip);
}

TEST(a_small_ring_stays_within_its_bytes_and_gives_the_same_batches)
{
    ferry_dataset *plain = open_dir("gz/plain", 0);
    const size_t caps[] = {1, 300};
    for (size_t k = 0; k < 2; k++) {
        ferry_dataset *zip = open_dir("gz/zip", caps[k]);
        for (uint64_t e = 0; e < 2; e++) {
            run o = {.shuffle = true, .workers = 2, .epoch = e};
            ASSERT(epoch_digest(zip, &o) == epoch_digest(plain, &o));
            o.buffer = 3;
            ASSERT(epoch_digest(zip, &o) == epoch_digest(plain, &o));
        }
        ferry_gz_cache_stats s = stats_of(zip);
        ASSERT_MSG(s.kept_bytes_peak <= caps[k], "%zu bytes held with a ring of %zu",
                   s.kept_bytes_peak, caps[k]);
        ASSERT(s.rewinds > 0); /* the price of the small ring */
        ferry_dataset_release(zip);
    }
    ferry_dataset_release(plain);
}

/* A class-names member of 360 KiB that starts 900 KiB into the tar crosses
 * the end of the walk's 1 MiB read window: its start is kept, the rest read. */
TEST(a_member_across_the_read_window_is_read_whole)
{
    ft_tar t = {0};
    uint8_t *pad = calloc(900 << 10, 1);
    ASSERT(pad);
    ft_tar_file(&t, "zz_pad.bin", pad, 900 << 10);
    free(pad);
    enum { NC = 30000 };
    char *names = malloc(NC * 12 + 1);
    ASSERT(names);
    for (size_t c = 0; c < NC; c++)
        snprintf(names + c * 12, 13, "class_%05zu\n", c);
    ft_tar_text(&t, "__classes__.txt", names);
    free(names);
    for (size_t i = 0; i < 4; i++)
        add_sample(&t, 0, i);
    ft_tar_end(&t);
    ft_tar copy = {0};
    ft_tar_put(&copy, t.d, t.n);
    const char *p = ft_tar_save(&t, "window/w.tar");
    const char *q = ft_tar_save_gz(&copy, "window/w.tar.gz", 1);
    ferry_dataset *a = NULL, *b = NULL;
    ASSERT_OK(ferry_dataset_shards(&p, 1, NULL, &a));
    ASSERT_OK(ferry_dataset_shards(&q, 1, NULL, &b));
    ASSERT_EQ_SIZE(ferry_dataset_class_count(a), NC);
    ASSERT_EQ_SIZE(ferry_dataset_class_count(b), NC);
    for (size_t c = 0; c < NC; c += 997)
        ASSERT_STR_EQ(ferry_dataset_class_name(b, c), ferry_dataset_class_name(a, c));
    ASSERT_STR_EQ(ferry_dataset_class_name(b, NC - 1), "class_29999");
    for (size_t i = 0; i < 4; i++)
        assert_same_sample(a, b, i);
    ferry_dataset_release(a);
    ferry_dataset_release(b);
}

/* More gzip shards than streams (8): streams move between shards, the spent
 * ones first, and every order still gives the uncompressed bytes. */
TEST(more_gzip_shards_than_streams_give_the_same_batches)
{
    for (size_t k = 0, i = 0; k < 13; k++) {
        ft_tar t = {0};
        for (size_t j = 0; j < 3; j++, i++)
            add_sample(&t, k, i);
        ft_tar_end(&t);
        ft_tar copy = {0};
        ft_tar_put(&copy, t.d, t.n);
        char rel[64];
        snprintf(rel, sizeof rel, "many/plain/%02zu.tar", k);
        ft_tar_save(&t, rel);
        snprintf(rel, sizeof rel, "many/zip/%02zu.tar.gz", k);
        ft_tar_save_gz(&copy, rel, 1);
    }
    const char *pp = ft_tmp("many/plain"), *pz = ft_tmp("many/zip");
    ferry_dataset *plain = NULL, *zip = NULL;
    ASSERT_OK(ferry_dataset_shards(&pp, 1, NULL, &plain));
    ASSERT_OK(ferry_dataset_shards(&pz, 1, NULL, &zip));
    for (size_t i = ferry_dataset_len(zip); i-- > 0;)
        assert_same_sample(plain, zip, i);
    const run orders[] = {{.shuffle = true, .workers = 2, .epochs = 2},
                          {.shuffle = true, .buffer = 4, .workers = 3, .epochs = 2}};
    for (size_t k = 0; k < 2; k++) {
        uint64_t want = epoch_digest_n(plain, &orders[k], 39);
        ASSERT_MSG(epoch_digest_n(zip, &orders[k], 39) == want, "order %zu: other bytes", k);
    }
    ferry_gz_cache_stats s = stats_of(zip);
    ASSERT_EQ_INT(s.rewinds, 0); /* a moved stream starts its new shard over by design */
    ferry_dataset_release(plain);
    ferry_dataset_release(zip);
}

/* ---- bad input ---- */

/* A one-sample tar in t. */
static void one_sample(ft_tar *t)
{
    add_sample(t, 0, 0);
}

static const char *save_gz(ft_tar *t, const char *rel)
{
    return ft_tar_save_gz(t, rel, 1);
}

TEST(corrupt_gzip_shards_fail_at_create_naming_the_shard_and_where)
{
    ft_tar t = {0};
    char at[96];

    /* The compressed file cut short. */
    one_sample(&t);
    ft_tar_end(&t);
    const char *p = save_gz(&t, "bad/cut.tar.gz");
    size_t n;
    uint8_t *z = ft_read_file(p, &n);
    ft_write_file(p, z, n / 2);
    ft_assert_shard_fails(p, FERRY_ERR_FORMAT, "gzip", "truncated");

    /* A flipped byte in the compressed data: deflate or the CRC says so. */
    z[n / 2] ^= 0x55;
    z[n - 6] ^= 0x55;
    ft_write_file(p, z, n);
    ft_assert_shard_fails(p, FERRY_ERR_FORMAT, "gzip", "compressed byte");
    free(z);

    /* Good gzip around a tar cut inside a member's data. */
    one_sample(&t);
    size_t h = t.n;
    ft_tar_file(&t, "000001.png", "0123456789", 10);
    t.n = h + 512 + 4;
    p = save_gz(&t, "bad/member.tar.gz");
    snprintf(at, sizeof at, "member 000001.png at byte %zu", h);
    ft_assert_shard_fails(p, FERRY_ERR_FORMAT, at, "truncated");

    /* ... without the end-of-archive blocks. */
    one_sample(&t);
    p = save_gz(&t, "bad/noend.tar.gz");
    ft_assert_shard_fails(p, FERRY_ERR_FORMAT, "end-of-archive", NULL);

    /* ... with a header whose checksum is wrong. */
    one_sample(&t);
    h = ft_tar_text(&t, "000001.cls", "1");
    t.d[h + 3] ^= 0x20;
    ft_tar_end(&t);
    p = save_gz(&t, "bad/sum.tar.gz");
    snprintf(at, sizeof at, "header at byte %zu", h);
    ft_assert_shard_fails(p, FERRY_ERR_FORMAT, at, "checksum");

    /* Bytes after the last gzip member that start no member are ignored, as
     * gzip(1) ignores them. */
    one_sample(&t);
    ft_tar_end(&t);
    p = save_gz(&t, "bad/trailing.tar.gz");
    z = ft_read_file(p, &n);
    z = realloc(z, n + 8);
    ASSERT(z);
    memset(z + n, 0, 8);
    z[n] = 0x1f; /* half a gzip magic is not a member either */
    ft_write_file(p, z, n + 8);
    free(z);
    ferry_dataset *ds = NULL;
    ASSERT_OK(ferry_dataset_shards(&p, 1, NULL, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), 1);
    ferry_dataset_release(ds);

    /* A member size of nearly 2^64 would wrap the walk back to byte 0 while
     * the size of a gzip tar is not known: it is refused, and create ends. */
    ft_tar_opts big = {.base256 = true};
    h = ft_tar_header(&t, "a.png", '0', UINT64_MAX - 1023, &big);
    ft_tar_end(&t);
    p = save_gz(&t, "bad/huge.tar.gz");
    snprintf(at, sizeof at, "member a.png at byte %zu", h);
    ft_assert_shard_fails(p, FERRY_ERR_FORMAT, at, "not a real one");
}

TEST(a_shard_cut_after_create_fails_by_name_when_loaded)
{
    ft_tar t = {0};
    for (size_t i = 0; i < 6; i++)
        add_sample(&t, 0, i);
    ft_tar_end(&t);
    const char *p = save_gz(&t, "late/a.tar.gz");
    ferry_dataset *ds = NULL;
    ASSERT_OK(ferry_dataset_shards(&p, 1, NULL, &ds));
    size_t n;
    uint8_t *z = ft_read_file(p, &n);
    ft_write_file(p, z, n / 3);
    free(z);
    uint8_t x[IW * IH];
    ASSERT_STATUS(ferry_dataset_get(ds, 5, x, sizeof x, NULL, NULL), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), p);
    ASSERT_STR_CONTAINS(ferry_last_error(), "truncated");
    /* The stream is left mid-member by the failure: the next read starts over. */
    ASSERT_STATUS(ferry_dataset_get(ds, 4, x, sizeof x, NULL, NULL), FERRY_ERR_FORMAT);
    ferry_dataset_release(ds);
}


/* ---- the index kept beside each shard ---- */

/* Warnings about the kept index (the shard's incomplete key warns too). */
static int warnings;
static char last_warning[512];
static void count_log(ferry_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level == FERRY_LOG_WARN && strstr(msg, "index")) {
        warnings++;
        snprintf(last_warning, sizeof last_warning, "%s", msg);
    }
}

static ferry_status open_ix(const char *dir, bool cache, ferry_dataset **ds)
{
    ferry_image_config cfg = ferry_image_config_default();
    cfg.shard_index_cache = cache;
    *ds = NULL;
    return ferry_dataset_shards(&dir, 1, &cfg, ds);
}

/* Flips a byte of path at off, keeping its size and modification time. */
static void spoil_keeping_mtime(const char *path, size_t off)
{
    struct stat sb;
    ASSERT(stat(path, &sb) == 0);
    size_t n;
    uint8_t *d = ft_read_file(path, &n);
    ASSERT(off < n);
    d[off] ^= 0x20;
    ft_write_file(path, d, n);
    free(d);
    struct timespec t[2] = {sb.st_atim, sb.st_mtim};
    ASSERT(utimensat(AT_FDCWD, path, t, 0) == 0);
}

TEST(the_index_kept_beside_a_shard_is_used_while_the_shard_is_unchanged)
{
    /* A plain and a gzip shard. */
    ft_tar t = {0};
    add_sample(&t, 0, 0);
    size_t h1 = ft_tar_text(&t, "s0_001.cls", "1");
    add_sample(&t, 0, 2);
    ft_tar_end(&t);
    const char *a = ft_tar_save(&t, "ix/a.tar");
    for (size_t i = 3; i < 7; i++)
        add_sample(&t, 1, i);
    ft_tar_text(&t, "__classes__.txt", "c0\nc1\nc2\nc3\nc4\n");
    ft_tar_end(&t);
    const char *b = ft_tar_save_gz(&t, "ix/b.tar.gz", 1);
    char ia[4200], ib[4200];
    snprintf(ia, sizeof ia, "%s.ferry-index", a);
    snprintf(ib, sizeof ib, "%s.ferry-index", b);
    const char *dir = ft_tmp("ix");

    ferry_dataset *ref, *ds;
    ASSERT_OK(open_ix(dir, false, &ref));
    ASSERT(access(ia, F_OK) != 0); /* only when asked */
    ASSERT_OK(open_ix(dir, true, &ds));
    ASSERT(access(ia, F_OK) == 0 && access(ib, F_OK) == 0);
    ferry_dataset_release(ds);
    size_t na, nb;
    uint8_t *saved_a = ft_read_file(ia, &na), *saved_b = ft_read_file(ib, &nb);

    /* Spoil a header of the plain shard, size and time kept: a fresh index
     * fails, the kept one is used and gives the same samples as before. */
    spoil_keeping_mtime(a, h1 + 3);
    ASSERT_STATUS(open_ix(dir, false, &ds), FERRY_ERR_FORMAT);
    ASSERT_OK(open_ix(dir, true, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), ferry_dataset_len(ref));
    ASSERT_EQ_SIZE(ferry_dataset_class_count(ds), 5);
    ASSERT_STR_EQ(ferry_dataset_class_name(ds, 4), "c4");
    for (size_t i = 0; i < ferry_dataset_len(ref); i++) {
        ASSERT_STR_EQ(ferry_dataset_sample_name(ds, i), ferry_dataset_sample_name(ref, i));
        uint8_t x[IW * IH] = {0}, y[IW * IH] = {0};
        int64_t lx = -5, ly = -6;
        ferry_status sx = ferry_dataset_get(ref, i, x, sizeof x, NULL, &lx);
        ferry_status sy = ferry_dataset_get(ds, i, y, sizeof y, NULL, &ly);
        ASSERT_MSG(sx == sy && lx == ly && !memcmp(x, y, sizeof x), "sample %zu differs", i);
        if (i == 1) /* the key without an image fails the same way */
            ASSERT_STR_CONTAINS(ferry_last_error(), "no image (.png, .jpg or .jpeg)");
    }
    ferry_dataset_release(ds);

    /* A path spelled otherwise finds the same index, and names with it. */
    const char *dot = ft_tmp("ix/.");
    ASSERT_OK(open_ix(dot, true, &ds));
    ASSERT_STR_CONTAINS(ferry_dataset_sample_name(ds, 0), "/ix/./a.tar:s0_000.png");
    ferry_dataset_release(ds);

    /* A newer shard: the kept index is stale, and the spoilt header is seen. */
    ASSERT(utimensat(AT_FDCWD, a, NULL, 0) == 0);
    ASSERT_STATUS(open_ix(dir, true, &ds), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "a.tar");
    spoil_keeping_mtime(a, h1 + 3); /* mended */

    /* A damaged index is ignored, and written again. */
    spoil_keeping_mtime(ib, nb / 2);
    ASSERT_OK(open_ix(dir, true, &ds));
    ferry_dataset_release(ds);
    size_t n2;
    uint8_t *again = ft_read_file(ib, &n2);
    ASSERT(n2 == nb && !memcmp(again, saved_b, nb));
    free(again);

    /* An index whose CRC is right but whose records are not the indexer's (a
     * name far outside the names, a label no .cls gives) is not trusted. */
    for (int what = 0; what < 2; what++) {
        ferry_dataset_release(ref);
        ASSERT_OK(open_ix(dir, true, &ref)); /* (writes a good index) */
        size_t n;
        uint8_t *d = ft_read_file(ib, &n);
        ASSERT(n > 112 + sizeof(ferry_shard_sample) && !memcmp(d, "FERRYIX1", 8));
        ferry_shard_sample rec; /* the first record follows the 112-byte head */
        memcpy(&rec, d + 112, sizeof rec);
        ASSERT_EQ_INT(rec.problem, FERRY_SHARD_OK); /* (the layout is as assumed) */
        if (what == 0)
            rec.name = (size_t)1 << 40;
        else
            rec.label = INT64_MAX;
        memcpy(d + 112, &rec, sizeof rec);
        uint32_t crc = (uint32_t)crc32(crc32(0, NULL, 0), d, (uInt)(n - 4));
        memcpy(d + n - 4, &crc, 4);
        ft_write_file(ib, d, n);
        free(d);
        ASSERT_OK(open_ix(dir, true, &ds));
        for (size_t i = 0; i < ferry_dataset_len(ref); i++) {
            ASSERT_STR_EQ(ferry_dataset_sample_name(ds, i), ferry_dataset_sample_name(ref, i));
            int64_t la = -2, lb = -3;
            ASSERT_EQ_INT(ferry_dataset_label(ds, i, &la), ferry_dataset_label(ref, i, &lb));
            ASSERT_EQ_INT(la, lb);
        }
        ferry_dataset_release(ds);
    }

    /* An index that cannot be written is one warning, not a failure. */
    ASSERT(unlink(ia) == 0);
    ASSERT(mkdir(ia, 0755) == 0);
    warnings = 0;
    ferry_set_log(count_log, NULL);
    ASSERT_OK(open_ix(dir, true, &ds));
    ferry_set_log(NULL, NULL);
    ASSERT_EQ_INT(warnings, 1);
    ASSERT_STR_CONTAINS(last_warning, "cannot keep the index");
    ASSERT_STR_CONTAINS(last_warning, "a.tar.ferry-index");
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), ferry_dataset_len(ref));
    ferry_dataset_release(ds);
    ASSERT(rmdir(ia) == 0);
    free(saved_a);
    free(saved_b);
    ferry_dataset_release(ref);
}

/* ---- out of memory ---- */

static ferry_status load_all(ferry_dataset *ds)
{
    uint8_t x[IW * IH];
    for (size_t i = ferry_dataset_len(ds); i-- > 0;) {
        ferry_status st = ferry_dataset_get(ds, i, x, sizeof x, NULL, NULL);
        if (st != FERRY_OK)
            return st;
    }
    return FERRY_OK;
}

/* Every allocation of create (indexing, or loading the kept index) and of
 * loading samples fails in turn: each failure is reported, nothing leaks. */
TEST(every_failed_allocation_is_reported_and_nothing_leaks)
{
    write_shards();
    ferry_image_config cfg = ferry_image_config_default();
    const char *p = ft_tmp("gz/zip");
    for (int cached = 0; cached < 2; cached++) {
        cfg.shard_index_cache = cached;
        ferry_dataset *ds;
        ASSERT_OK(ferry_dataset_shards(&p, 1, &cfg, &ds)); /* (writes the kept index) */
        ASSERT_OK(load_all(ds));
        int64_t live0 = ferry_debug_alloc_live();
        for (int phase = 0; phase < 2; phase++) {
            size_t failures = 0;
            for (int64_t k = 1;; k++) {
                ASSERT_MSG(k < 100000, "the sweep did not end");
                ferry_dataset *d2 = NULL;
                ferry_status st = FERRY_OK;
                ferry_debug_fail_alloc_after(k);
                if (phase == 0)
                    st = ferry_dataset_shards(&p, 1, &cfg, &d2);
                else
                    st = load_all(ds);
                bool never_failed = ferry_debug_fail_alloc_after(0) > 0;
                ferry_dataset_release(d2);
                ASSERT_MSG(ferry_debug_alloc_live() == live0, "cached %d, phase %d: failing "
                           "allocation %lld leaked %lld", cached, phase, (long long)k,
                           (long long)(ferry_debug_alloc_live() - live0));
                if (never_failed) {
                    ASSERT_OK(st);
                    break;
                }
                failures++;
                if (phase == 0)
                    ASSERT_MSG(st == FERRY_ERR_NO_MEMORY, "failing allocation %lld in create "
                               "gave %s (%s)", (long long)k, ferry_status_str(st),
                               ferry_last_error());
                else if (st != FERRY_OK)
                    ASSERT(ferry_last_error()[0] != '\0');
            }
            if (phase == 0)
                ASSERT_MSG(failures > 5, "create: only %zu allocations were failed", failures);
        }
        ferry_dataset_release(ds);
    }
}
