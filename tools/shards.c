/* Shards in the tools: `ferry check` over them. */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "shards.h"


/* The library's rule (ferry_dataset_probe), so that the tools and
 * ferry_dataset_open never disagree on what a path is. */
bool tool_is_shards(const char *path)
{
    ferry_dataset_kind kind;
    return ferry_dataset_probe(path, &kind) == FERRY_OK && kind == FERRY_DATASET_SHARDS;
}

typedef struct check_job {
    ferry_dataset *ds;
    char **reasons;      /* per sample: NULL when it decodes */
    atomic_size_t next;
} check_job;

static void *check_worker(void *arg)
{
    check_job *j = arg;
    ferry_scratch *s = NULL;
    ferry_scratch_create(&s);
    size_t bytes = ferry_dataset_sample_bytes(j->ds), len = ferry_dataset_len(j->ds);
    void *buf = malloc(bytes);
    ferry_sample_ctx ctx = {.scratch = s};
    for (size_t i; buf && (i = atomic_fetch_add(&j->next, 1)) < len;) {
        if (ferry_dataset_get(j->ds, i, buf, bytes, &ctx, NULL) == FERRY_OK)
            continue;
        /* A failed get's message starts with the sample's name, once
         * (docs/API_ERRORS.md, "Messages"): it is the reason as it stands. */
        j->reasons[i] = strdup(ferry_last_error());
    }
    free(buf);
    ferry_scratch_destroy(s);
    return NULL;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A folder of shards that fails as a whole (one corrupt shard fails create):
 * each shard checked on its own, so every bad one is named, not only the first. */
static int check_each_shard(const char *dir, size_t workers, size_t *total, size_t *bad)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !ferry_dataset_is_shard_path(e->d_name))
            continue;
        if (n == cap) {
            char **v = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *v);
            if (!v) {
                rc = -1;
                break;
            }
            names = v;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        if (!(names[n] = malloc(len)))
            rc = -1;
        else
            snprintf(names[n++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, cmp_name);
    for (size_t i = 0; i < n; i++) {
        if (rc == 0)
            rc = tool_check_shards(names[i], workers, total, bad);
        free(names[i]);
    }
    free(names);
    return rc;
}

int tool_check_shards(const char *path, size_t workers, size_t *total, size_t *bad)
{
    ferry_dataset *ds;
    struct stat sb;
    /* A size given: shards of images of many sizes (ImageNet's) are whole, and
     * with no size each image of another size than the first would fail (the
     * library never resizes unasked). Every byte is still decoded. */
    ferry_image_config cfg = ferry_image_config_default();
    cfg.height = cfg.width = 32;
    if (ferry_dataset_shards(&path, 1, &cfg, &ds) != FERRY_OK) {
        if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            /* Shards each fine that do not go together (their class names
             * differ): the folder is bad as a whole, as the library says. */
            char why[1024];
            snprintf(why, sizeof why, "%s", ferry_last_error());
            size_t bad0 = *bad;
            int rc = check_each_shard(path, workers, total, bad);
            if (rc == 0 && *bad == bad0) {
                printf("%s\n", why);
                (*total)++;
                (*bad)++;
            }
            return rc;
        }
        printf("%s\n", ferry_last_error());
        (*total)++;
        (*bad)++;
        return 0;
    }
    size_t len = ferry_dataset_len(ds);
    check_job j = {.ds = ds, .reasons = calloc(len, sizeof(char *))};
    if (!j.reasons) {
        ferry_dataset_release(ds);
        return -1;
    }
    atomic_init(&j.next, 0);
    pthread_t th[256];
    size_t started = 0;
    for (size_t t = 1; t < workers && t < 256; t++)
        if (pthread_create(&th[started], NULL, check_worker, &j) == 0)
            started++;
    check_worker(&j);
    for (size_t t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    for (size_t i = 0; i < len; i++)
        if (j.reasons[i]) {
            printf("%s\n", j.reasons[i]);
            free(j.reasons[i]);
            (*bad)++;
        }
    *total += len;
    free(j.reasons);
    ferry_dataset_release(ds);
    return 0;
}
