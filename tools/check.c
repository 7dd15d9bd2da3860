/* `ferry check PATH...`: decodes every .png under the paths with the library's
 * limits and reports the bad ones, one line each, in path order. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "ferry.h"
#include "files.h"

typedef struct check_job {
    tool_paths *files;
    char **reasons;      /* per file: NULL when ok */
    atomic_size_t next;  /* the next file to take */
} check_job;

static void *check_worker(void *arg)
{
    check_job *job = arg;
    ferry_scratch *s = NULL;
    ferry_scratch_create(&s);
    ferry_image_config cfg = ferry_image_config_default();
    uint8_t *file = NULL, *pix = NULL;
    size_t file_cap = 0, pix_cap = 0;
    char msg[1200];
    for (;;) {
        size_t i = atomic_fetch_add(&job->next, 1);
        if (i >= job->files->n)
            break;
        const char *path = job->files->v[i];
        size_t n = 0;
        int r = tool_read_file(path, &file, &file_cap, &n, cfg.limits.max_file_bytes);
        msg[0] = '\0';
        if (r == -2) {
            snprintf(msg, sizeof msg, "%s: file is over the limit of %zu bytes", path,
                     cfg.limits.max_file_bytes);
        } else if (r != 0) {
            snprintf(msg, sizeof msg, "%s: %s", path, strerror(errno));
        } else {
            ferry_image_info info;
            ferry_sample_format fmt;
            ferry_status st = ferry_png_info(file, n, &info);
            if (st == FERRY_OK)
                st = ferry_image_format(&cfg, &info, &fmt);
            size_t need = st == FERRY_OK ? ferry_sample_format_bytes(&fmt) : 0;
            /* The limits are checked before the output buffer is sized. */
            size_t px = info.width * info.height;
            if (st == FERRY_OK && (info.width > cfg.limits.max_width || info.height > cfg.limits.max_height ||
                                   px / info.width != info.height || px > cfg.limits.max_pixels))
                need = 1; /* too big: let ferry_png_decode report the limit */
            if (st == FERRY_OK && need > pix_cap) {
                uint8_t *p = realloc(pix, need);
                if (p) {
                    pix = p;
                    pix_cap = need;
                }
            }
            /* A bad header is reported by the decoder too, with the path in it. */
            if (st == FERRY_OK || st == FERRY_ERR_FORMAT)
                st = ferry_png_decode(file, n, &cfg, s, path, pix ? pix : file, pix ? pix_cap : 0);
            if (st != FERRY_OK) {
                const char *e = ferry_last_error();
                if (!strncmp(e, path, strlen(path)))
                    snprintf(msg, sizeof msg, "%s", e);
                else
                    snprintf(msg, sizeof msg, "%s: %s", path, e);
            }
        }
        if (msg[0])
            job->reasons[i] = strdup(msg);
    }
    free(file);
    free(pix);
    ferry_scratch_destroy(s);
    return NULL;
}

int cmd_check(int argc, char **argv)
{
    long workers = 1;
    tool_paths files = {0};
    int nargs = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--workers") || !strcmp(argv[i], "-j")) {
            char *end;
            if (i + 1 >= argc || (workers = strtol(argv[++i], &end, 10)) < 1 || *end || workers > 256) {
                fprintf(stderr, "ferry check: --workers needs a number from 1 to 256\n");
                tool_paths_free(&files);
                return 2;
            }
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: ferry check [--workers N] PATH...\n"
                   "decodes every .png under the paths; prints 'path: reason' per bad file\n");
            tool_paths_free(&files);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "ferry check: unknown option '%s'\n", argv[i]);
            tool_paths_free(&files);
            return 2;
        } else {
            nargs++;
            if (tool_collect_png(argv[i], &files) != 0) {
                fprintf(stderr, "ferry check: %s: %s\n", argv[i], strerror(errno));
                tool_paths_free(&files);
                return 2;
            }
        }
    }
    if (nargs == 0) {
        fprintf(stderr, "usage: ferry check [--workers N] PATH...\n");
        return 2;
    }
    check_job job = {.files = &files, .reasons = calloc(files.n ? files.n : 1, sizeof(char *))};
    if (!job.reasons) {
        fprintf(stderr, "ferry check: out of memory\n");
        tool_paths_free(&files);
        return 1;
    }
    atomic_init(&job.next, 0);
    pthread_t th[256];
    long started = 0;
    for (long t = 1; t < workers; t++)
        if (pthread_create(&th[started], NULL, check_worker, &job) == 0)
            started++;
    check_worker(&job);
    for (long t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    size_t bad = 0;
    for (size_t i = 0; i < files.n; i++)
        if (job.reasons[i]) {
            printf("%s\n", job.reasons[i]);
            free(job.reasons[i]);
            bad++;
        }
    printf("%zu files, %zu ok, %zu bad\n", files.n, files.n - bad, bad);
    free(job.reasons);
    tool_paths_free(&files);
    return bad ? 1 : 0;
}
