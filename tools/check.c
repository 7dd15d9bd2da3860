/* `ferry check PATH...`: decodes every image (.png, .jpg, .jpeg) under the paths with the library's
 * limits and reports the bad ones, one line each, in path order. An entry that
 * cannot be read at all (a dangling link, no permission, a folder or FIFO named
 * x.png, a folder that cannot be opened, a path that does not exist) is a bad
 * file too: "path: reason", and the exit status 1. */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fields_tool.h"
#include "cli_args.h"
#include "common/error.h"
#include "commands.h"
#include "ferry.h"
#include "files.h"
#include "shards.h"

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
    size_t max_file_bytes = ferry_image_config_default().limits.max_file_bytes;
    uint8_t *file = NULL, *pix = NULL;
    size_t file_cap = 0, pix_cap = 0;
    /* Every line goes through ferry_format_cut, which escapes control
     * characters: a file or member name cannot rewrite the terminal. */
    char msg[1200];
    for (;;) {
        size_t i = atomic_fetch_add(&job->next, 1);
        if (i >= job->files->n)
            break;
        const char *path = job->files->v[i];
        if (job->files->why[i]) { /* known while listing: nothing to read */
            ferry_format_cut(msg, sizeof msg, "%s%s%s", path, path[0] ? ": " : "", job->files->why[i]);
            job->reasons[i] = strdup(msg);
            continue;
        }
        size_t n = 0;
        int r = tool_read_file(path, &file, &file_cap, &n, max_file_bytes);
        msg[0] = '\0';
        if (r == -2) {
            ferry_format_cut(msg, sizeof msg, "%s: file is over the limit of %zu bytes", path,
                             max_file_bytes);
        } else if (r == -3) {
            ferry_format_cut(msg, sizeof msg, "%s: is not a regular file", path);
        } else if (r != 0) {
            int e = errno;
            ferry_format_cut(msg, sizeof msg, "%s: %s", path, ferry__open_error_reason(path, e));
        } else if (tool_decode_check(file, n, path, s, &pix, &pix_cap) != FERRY_OK) {
            snprintf(msg, sizeof msg, "%s", ferry_last_error());
        }
        if (msg[0])
            job->reasons[i] = strdup(msg);
    }
    free(file);
    free(pix);
    ferry_scratch_destroy(s);
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: ferry check [--workers N] PATH...\n"
               "decodes every image (.png, .jpg, .jpeg) under the paths (a file given by name is\n"
               "checked whatever its name) with the library's limits; prints 'path: reason' per bad\n"
               "file, including entries that cannot be read (dangling links, no permission, folders\n"
               "named x.png), and exits 1 if any.\n"
               "A .tar, .tar.gz or .tgz file, a folder of them or a list file naming them (one\n"
               "a line) is read as tar shards: every sample is decoded.\n"
               "  --workers N, -j N: threads, 1 to 256 (default 1)\n"
               "  --fields LIST: shards read as these members, e.g. png,cls,boxes.npy\n"
               "                 (ferry_dataset_shards_fields): every field of every sample\n"
               "                 decoded, then each field and the ragged ones' lengths shown\n");
}

#define CHECK_CMD "ferry check"

/* Whether dir holds a sub-folder that is not hidden (links followed): then it is
 * an image folder, ROOT/<class>/..., and is checked as the dataset lists it. */
static bool has_class_folders(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    struct dirent *e;
    bool found = false;
    while (!found && (e = readdir(d)) != NULL) {
        char p[4200];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        found = e->d_name[0] != '.' && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
    }
    closedir(d);
    return found;
}

/* The dataset's note of unreadable entries is left out (check names each one
 * itself); other warnings (a link loop not followed) are passed on. */
static void quiet_log(ferry_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level >= FERRY_LOG_WARN && !strstr(msg, "cannot be read"))
        fprintf(stderr, "ferry check: %s\n", msg);
}

/* An image folder's samples exactly as ferry_dataset_image_folder lists them
 * (class folders walked recursively, hidden entries and other names left
 * out); when it refuses the folder, one bad entry says why, and every .png
 * under it is checked as files. */
static int collect_image_folder(const char *dir, tool_paths *files)
{
    ferry_dataset *ds = NULL;
    /* A size given, so that listing reads no header (the files are checked
     * next) and a folder of many sizes lists as it loads with one. */
    ferry_image_config cfg = ferry_image_config_default();
    cfg.height = cfg.width = 32;
    ferry_set_log(quiet_log, NULL);
    ferry_status st = ferry_dataset_image_folder(dir, &cfg, &ds);
    ferry_set_log(NULL, NULL);
    if (st != FERRY_OK) { /* it will not load (an empty class folder): say so, check the rest */
        /* A message that names a file (the folder, a class folder) says which;
         * one that names none gets the folder. */
        const char *e = ferry_last_error();
        if (tool_paths_push(files, ferry_error_subject() ? "" : dir, e) != 0)
            return -1;
        return tool_collect_png(dir, 1, files);
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < ferry_dataset_len(ds); i++)
        rc = tool_paths_push(files, ferry_dataset_sample_name(ds, i),
                             ferry__path_problem(ferry_dataset_sample_name(ds, i)));
    ferry_dataset_release(ds);
    return rc;
}

/* The options and paths: 0 with every path's files in *files, CLI_USAGE after
 * saying why, or -1 after --help. */
static int parse_args(int argc, char **argv, size_t *workers, tool_paths *files,
                      tool_fields *fields)
{
    int nargs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(a, "--workers") || !strcmp(a, "-j")) {
            const char *v = cli_value(CHECK_CMD, argc, argv, &i);
            if (!v || cli_size(CHECK_CMD, a, v, 1, 256, workers) != 0)
                return CLI_USAGE;
        } else if (!strcmp(a, "--fields")) {
            const char *v = cli_value(CHECK_CMD, argc, argv, &i);
            if (!v || tool_fields_parse(CHECK_CMD, v, fields) != 0)
                return CLI_USAGE;
        } else if (a[0] == '-' && a[1]) {
            return cli_unknown(CHECK_CMD, a, usage);
        } else if (tool_is_shards(a)) {
            nargs++; /* tar shards: checked sample by sample in cmd_check */
        } else {
            nargs++;
            size_t before = files->n;
            /* A path that cannot be read is a bad file (listed with its reason),
             * not a usage error; only running out of memory fails here. */
            if ((has_class_folders(a) ? collect_image_folder(a, files)
                                      : tool_collect_png(a, 1, files)) != 0) {
                char shown[FERRY_ERROR_MAX];
                ferry_format_cut(shown, sizeof shown, "%s", a);
                fprintf(stderr, CHECK_CMD ": %s: %s\n", shown, strerror(errno));
                return 1;
            }
            /* Nothing to check is not "all ok": an empty folder, one of other files. */
            if (files->n == before &&
                tool_paths_push(files, a, "no images (.png, .jpg, .jpeg) or tar shards in it "
                                "(ferry check reads those; other files are not samples)") != 0)
                return 1;
        }
    }
    if (nargs == 0) {
        usage(stderr);
        return CLI_USAGE;
    }
    return 0;
}

int cmd_check(int argc, char **argv)
{
    size_t workers = 1;
    tool_paths files = {0};
    tool_fields fields = {0};
    int rc = parse_args(argc, argv, &workers, &files, &fields);
    if (rc != 0) {
        tool_paths_free(&files);
        return rc < 0 ? 0 : rc;
    }
    check_job job = {.files = &files, .reasons = calloc(files.n ? files.n : 1, sizeof(char *))};
    if (!job.reasons) {
        fprintf(stderr, "ferry check: out of memory\n");
        tool_paths_free(&files);
        return 1;
    }
    atomic_init(&job.next, 0);
    pthread_t th[256];
    size_t started = 0;
    for (size_t t = 1; t < workers; t++)
        if (pthread_create(&th[started], NULL, check_worker, &job) == 0)
            started++;
    check_worker(&job);
    for (size_t t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    size_t bad = 0, samples = 0;
    for (size_t i = 0; i < files.n; i++)
        if (job.reasons[i]) {
            printf("%s\n", job.reasons[i]);
            free(job.reasons[i]);
            bad++;
        }
    for (int i = 1; i < argc && rc == 0; i++) /* the shard paths parse_args passed over */
        if (!strcmp(argv[i], "--workers") || !strcmp(argv[i], "-j") || !strcmp(argv[i], "--fields"))
            i++;
        else if (tool_is_shards(argv[i]) && fields.n)
            rc = tool_check_shard_fields(argv[i], &fields, workers, &samples, &bad);
        else if (tool_is_shards(argv[i]))
            rc = tool_check_shards(argv[i], workers, &samples, &bad);
    if (samples)
        printf("%zu files and %zu shard samples, %zu ok, %zu bad\n", files.n, samples,
               files.n + samples - bad, bad);
    else
        printf("%zu files, %zu ok, %zu bad\n", files.n, files.n - bad, bad);
    free(job.reasons);
    tool_paths_free(&files);
    return bad || rc ? 1 : 0;
}
