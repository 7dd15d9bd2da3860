/* The per-stage times (ferry_sample_timing, ferry_loader_stats' read_s,
 * decode_s, transform_s, and so `ferry bench`'s per-image stages) are the
 * worker thread's CPU time, not wall time: a read that waits on a slow server
 * counts the little CPU it used, not the wait. The server is the tests' own
 * on 127.0.0.1, answering each request after a delay. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h" /* ferry_now, ferry_thread_cpu_now */
#include "harness.h"
#include "harness_http.h"

enum { PER = 8, IW = 16, IH = 12 };
#define DELAY_S 0.3

/* One shard of PER gray PNGs, with its index beside it (so that create
 * fetches the index, not the shard). */
static const char *www(void)
{
    ft_tar t = {0};
    for (size_t i = 0; i < PER; i++) {
        uint8_t px[IW * IH];
        for (size_t j = 0; j < sizeof px; j++)
            px[j] = (uint8_t)(i * 17 + j * 3);
        char key[32];
        snprintf(key, sizeof key, "k%03zu", i);
        ft_tar_png_sample(&t, key, px, IW, IH, (int)(i % 2), "stagecpu/tmp.png");
    }
    ft_tar_end(&t);
    ft_tar_save(&t, "stagecpu/www/a.tar");
    ferry_image_config c = ferry_image_config_default();
    c.shard_index_cache = true;
    const char *shard = ft_tmp("stagecpu/www/a.tar");
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_shards(&shard, 1, &c, &ds));
    ferry_dataset_release(ds);
    return ft_tmp("stagecpu/www");
}

/* The thread CPU clock does not run while the thread sleeps. */
TEST(thread_cpu_clock_skips_sleep)
{
    double c0 = ferry_thread_cpu_now(), w0 = ferry_now();
    struct timespec ts = {0, 200000000};
    while (nanosleep(&ts, &ts) != 0) {
    }
    double c1 = ferry_thread_cpu_now(), w1 = ferry_now();
    ASSERT(w1 - w0 >= 0.19);
    ASSERT_MSG(c1 - c0 < 0.05, "%.3f CPU seconds in a 0.2 s sleep", c1 - c0);
    volatile double x = 0; /* and runs while it works */
    double c2 = ferry_thread_cpu_now();
    while (ferry_thread_cpu_now() - c2 < 0.02)
        x += 1;
    ASSERT(ferry_thread_cpu_now() - c2 >= 0.02);
}

/* A sample of a shard by URL whose server waits DELAY_S before answering:
 * get() takes at least that long, its read stage far less (CPU), and the
 * decode is counted. */
TEST(read_stage_is_cpu_time_not_the_wait_on_the_server)
{
#ifndef FERRY_HAVE_CURL
    SKIP("built without libcurl (CURL=0)");
#endif
    ft_http *srv = ft_http_start(www(), NULL);
    char url[300];
    snprintf(url, sizeof url, "%s/a.tar", ft_http_base(srv));
    ferry_image_config c = ferry_image_config_default();
    ft_write_file(ft_tmp("stagecpu/.made"), "", 0);
    c.remote_cache_dir = ft_tmp("stagecpu/cache");
    c.remote_timeout_s = 5;
    const char *u = url;
    ferry_dataset *ds;
    ASSERT_OK(ferry_dataset_shards(&u, 1, &c, &ds));
    ft_http_set_faults(srv, &(ft_http_faults){.delay_s = DELAY_S});
    ferry_scratch *s;
    ASSERT_OK(ferry_scratch_create(&s));
    ferry_sample_timing t = {0};
    ferry_sample_ctx ctx = {.scratch = s, .timing = &t};
    size_t n = ferry_dataset_sample_bytes(ds);
    uint8_t *dst = malloc(n);
    int64_t label;
    double w0 = ferry_now();
    ASSERT_OK(ferry_dataset_get(ds, 3, dst, n, &ctx, &label));
    double wall = ferry_now() - w0;
    ASSERT_EQ_INT(label, 1);
    ASSERT_MSG(wall >= DELAY_S * 0.9, "get took %.3f s, the server waits %.1f s", wall, DELAY_S);
    ASSERT_MSG(t.read_s < DELAY_S / 3, "read stage %.3f s of a %.3f s get: wall time, not CPU",
               t.read_s, wall);
    ASSERT(t.decode_s > 0);
    free(dst);
    ferry_scratch_destroy(s);
    ferry_dataset_release(ds);
    ft_http_stop(srv);
}
