/* ferry_dataset_open: one path, told apart by what it is (the rules the
 * command-line tools used before they moved here), opened by the dataset
 * kind it names. Telling apart reads at most a folder's entries and a file's
 * first 4 KiB; the dataset's own create does the real checking. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/dir.h"
#include "common/error.h"
#include "dataset/remote/remote.h"
#include "dataset/shards/shards.h"
#include "ferry/dataset.h"

#define HEAD_BYTES 4096

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && !strcmp(s + n - m, tail);
}

/* The first line of text that is neither blank nor a '#' comment, into line. */
static bool first_line(const char *head, size_t n, char *line, size_t size)
{
    size_t i = 0;
    while (i < n) {
        size_t e = i;
        while (e < n && head[e] != '\n' && head[e] != '\r')
            e++;
        size_t len = e - i;
        if (len && head[i] != '#') {
            if (len >= size)
                len = size - 1;
            memcpy(line, head + i, len);
            line[len] = '\0';
            return true;
        }
        i = e + 1;
    }
    return false;
}

/* A folder of shards: an entry that is a shard and no sub-folder (an image
 * folder's classes are sub-folders). Both is refused: which one the user
 * meant is theirs to say, and guessing would silently train on the wrong
 * files (shards beside a folder of previews, say). */
static ferry_status probe_folder(const char *path, ferry_dataset_kind *kind)
{
    DIR *d = opendir(path);
    if (!d)
        return ferry_fail(FERRY_ERR_IO, "%s: %s", path, strerror(errno));
    char shard[256] = "", sub[256] = ""; /* the first of each, for the message */
    bool idx = false;
    struct dirent *e;
    int err = 0;
    while (!(shard[0] && sub[0]) && (e = ferry_dir_next(d, &err)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        idx |= strstr(e->d_name, "-images-idx") != NULL;
        bool is_dir = e->d_type == DT_DIR;
        if (e->d_type == DT_UNKNOWN || e->d_type == DT_LNK) {
            char p[4096];
            struct stat sb;
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            is_dir = stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
        }
        char *first = is_dir ? sub : ferry_dataset_is_shard_path(e->d_name) ? shard : NULL;
        if (first && !first[0])
            snprintf(first, sizeof shard, "%s", e->d_name);
    }
    closedir(d);
    if (err) /* what the rest holds decides the kind */
        return ferry_fail(FERRY_ERR_IO, "%s: reading the folder: %s", path, strerror(err));
    if (shard[0] && sub[0])
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: holds tar shards (%s) and sub-folders (%s): "
                          "open it with ferry_dataset_shards or ferry_dataset_image_folder to say "
                          "which it is", path, shard, sub);
    if (shard[0]) {
        *kind = FERRY_DATASET_SHARDS;
        return FERRY_OK;
    }
    if (idx && !sub[0]) /* which pair (train, t10k) is the caller's to say */
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: a folder of IDX files; open the images file "
                          "itself (its labels file is found beside it)", path);
    *kind = FERRY_DATASET_IMAGE_FOLDER;
    return FERRY_OK;
}

/* IDX images by their magic (00 00 08 03 or 04: u8, 3 or 4 dimensions), or a
 * gzip file named as IDX images are. */
static bool is_idx_images(const char *path, const unsigned char *h, size_t n)
{
    if (n >= 4 && h[0] == 0 && h[1] == 0 && h[2] == 0x08 && (h[3] == 3 || h[3] == 4))
        return true;
    return n >= 2 && h[0] == 0x1f && h[1] == 0x8b && strstr(path, "idx3") != NULL;
}

static bool is_idx_labels(const char *path, const unsigned char *h, size_t n)
{
    if (n >= 4 && h[0] == 0 && h[1] == 0 && h[2] == 0x08 && h[3] == 1)
        return true;
    return n >= 2 && h[0] == 0x1f && h[1] == 0x8b && strstr(path, "idx1") != NULL;
}

static ferry_status unknown_file(const char *path, const char *what)
{
    return ferry_fail(FERRY_ERR_FORMAT, "%s: not a dataset ferry can open (%s); expected an image "
                      "folder, a list file (\"path,label\" lines), tar shards (.tar, .tar.gz, "
                      ".tgz), a list of shards or an IDX images file", path, what);
}

static ferry_status probe_file(const char *path, ferry_dataset_kind *kind)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return ferry_fail(FERRY_ERR_IO, "%s: %s", path, strerror(errno));
    unsigned char head[HEAD_BYTES];
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    if (is_idx_images(path, head, n)) {
        *kind = FERRY_DATASET_IDX;
        return FERRY_OK;
    }
    if (is_idx_labels(path, head, n))
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: an IDX labels file; open the images file "
                          "(its labels are found beside it)", path);
    if (n >= 2 && head[0] == 0x1f && head[1] == 0x8b)
        return unknown_file(path, "gzip data, but not named .tar.gz, .tgz or as IDX images");
    if (n >= 8 && !memcmp(head, "\x89PNG", 4))
        return unknown_file(path, "a PNG image; open the folder of class folders it is in");
    if (n >= 3 && head[0] == 0xff && head[1] == 0xd8 && head[2] == 0xff)
        return unknown_file(path, "a JPEG image; open the folder of class folders it is in");
    if (n == 0)
        return unknown_file(path, "an empty file");
    if (memchr(head, '\0', n))
        return unknown_file(path, "binary data");
    char line[1024];
    if (!first_line((const char *)head, n, line, sizeof line))
        return unknown_file(path, "a text file without an entry");
    if (ferry_dataset_is_shard_path(line)) {
        *kind = FERRY_DATASET_SHARDS;
        return FERRY_OK;
    }
    if (strchr(line, ',') || strchr(line, '\t')) {
        *kind = FERRY_DATASET_LIST_FILE;
        return FERRY_OK;
    }
    return unknown_file(path, "a text file whose first entry is neither a shard path nor "
                              "\"path,label\"");
}

ferry_status ferry_dataset_probe(const char *path, ferry_dataset_kind *kind)
{
    if (!kind)
        return FERRY_ARG_ERROR("kind is NULL");
    *kind = FERRY_DATASET_UNKNOWN;
    if (!path || !*path)
        return FERRY_ARG_ERROR("path is %s", path ? "empty" : "NULL");
    /* A shard by name, a URL included: nothing to read. */
    if (ferry_dataset_is_shard_path(path)) {
        *kind = FERRY_DATASET_SHARDS;
        return FERRY_OK;
    }
    if (ferry__is_url(path) && path[strlen(path) - 1] == '/')
        return ferry__url_folder_error(path);
    if (ferry__is_url(path))
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: a URL is opened as a tar shard, and this one "
                          "does not end in .tar, .tar.gz or .tgz", path);
    struct stat sb;
    if (stat(path, &sb) != 0) /* stat first: opening a FIFO would block */
        return ferry_fail(errno == ENOENT || errno == ENOTDIR ? FERRY_ERR_INVALID_ARG : FERRY_ERR_IO,
                          "%s: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return probe_folder(path, kind);
    if (!S_ISREG(sb.st_mode))
        return unknown_file(path, "neither a folder nor a regular file");
    return probe_file(path, kind);
}

/* The labels beside IDX images: "X-images-idx3-ubyte[.gz]" has
 * "X-labels-idx1-ubyte[.gz]" (MNIST's and Fashion-MNIST's names). */
static ferry_status idx_labels_path(const char *images, char *out, size_t size) /* size <= 4096 */
{
    const char *base = strrchr(images, '/'), *at = strstr(base ? base + 1 : images, "images-idx3");
    if (!at || strlen(images) >= size)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: IDX images, but not named X-images-idx3-... "
                          "so the labels file cannot be found; call ferry_dataset_idx with both",
                          images);
    size_t pre = (size_t)(at - images);
    snprintf(out, size, "%.*slabels-idx1%s", (int)pre, images, at + strlen("images-idx3"));
    struct stat sb;
    if (stat(out, &sb) == 0)
        return FERRY_OK;
    /* The pair may differ in compression: try the other one. */
    char alt[4096];
    size_t n = strlen(out);
    if (ends_with(out, ".gz")) {
        memcpy(alt, out, n - 3);
        alt[n - 3] = '\0';
    } else if (n + 4 <= sizeof alt) {
        memcpy(alt, out, n);
        memcpy(alt + n, ".gz", 4);
    } else {
        alt[0] = '\0';
    }
    if (alt[0] && strlen(alt) < size && stat(alt, &sb) == 0) {
        snprintf(out, size, "%s", alt);
        return FERRY_OK;
    }
    return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: IDX images without their labels: %s: %s", images,
                      out, strerror(ENOENT));
}

ferry_status ferry_dataset_open(const char *path, const ferry_image_config *cfg, ferry_dataset **out)
{
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    *out = NULL;
    ferry_dataset_kind kind;
    ferry_status st = ferry_dataset_probe(path, &kind);
    if (st != FERRY_OK)
        return st;
    switch (kind) {
    case FERRY_DATASET_IMAGE_FOLDER:
        return ferry_dataset_image_folder(path, cfg, out);
    case FERRY_DATASET_LIST_FILE:
        return ferry_dataset_list_file(path, cfg, out);
    case FERRY_DATASET_SHARDS:
        return ferry_dataset_shards(&path, 1, cfg, out);
    case FERRY_DATASET_IDX: {
        char labels[4096];
        if ((st = idx_labels_path(path, labels, sizeof labels)) != FERRY_OK)
            return st;
        return ferry_dataset_idx(path, labels, cfg, out);
    }
    default:
        return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: not a dataset ferry can open", path);
    }
}
