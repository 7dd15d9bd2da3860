/* `ferry pack SRC OUT`: writes an image folder (or an IDX pair) as tar shards,
 * OUT/shard-000000.tar, ..., the samples shuffled by --seed (default 0) unless
 * --no-shuffle: the k-th sample written becomes KEY.png (the file's bytes,
 * unchanged, so it decodes to the same pixels) and KEY.cls (its label), KEY
 * being k zero-padded, and each shard starts with __classes__.txt. Shuffled,
 * because a folder lists class after class and a streaming loader reads shards
 * in stored order: its shuffle buffer mixes only neighbours. OUT/PACK.txt
 * records the source, the count and the seed, and maps each key to its shard
 * and source file. Every image is decoded before it is packed (a truncated
 * JPEG stops the pack, named), unless --no-check. With --no-shuffle,
 * ferry_dataset_shards(OUT) has the source's samples in the source's order:
 * `ferry bench OUT` prints the source's digest. With --upload URL the finished
 * shards (and PACK.txt) are then PUT to URL/shard-000000.tar, ... (http(s)://,
 * or s3://BUCKET/PREFIX signed as reads are; builds with libcurl), with
 * OUT/urls.txt, the list of their URLs a reader passes (uploaded as
 * URL/urls.txt), and the brace pattern naming them printed. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli_args.h"
#include "common/error.h" /* ferry_format_cut: names escaped */
#include "commands.h"
#include "common/redact.h"
#include "dataset/remote/remote.h"
#include "ferry.h"
#include "files.h"
#include "pack_side.h"
#include "tar_write.h"
#include "url_list.h"

#define PACK "ferry pack"

typedef struct pack_opts {
    const char *src, *out, *labels;
    const char *upload;  /* a base URL, or NULL */
    uint64_t shard_size;
    uint64_t seed;
    bool shuffle;
    bool index;          /* --index: SHARD.ferry-index beside each shard */
    bool check;          /* decode every image before packing it (--no-check: not) */
} pack_opts;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ferry pack SRC OUT [--shard-size SIZE] [--seed N | --no-shuffle] [--no-check]\n"
            "       ferry pack IMAGES.idx OUT --labels LABELS.idx [--shard-size SIZE] [...]\n"
            "writes the image folder SRC (SRC/<class>/<file>.png or .jpg/.jpeg, the bytes as\n"
            "they are), or an IDX pair as PNGs, as tar shards OUT/shard-000000.tar, ... in\n"
            "shuffled order: KEY.png (KEY.jpg for a JPEG) and KEY.cls per sample (KEY = the\n"
            "position written, zero-padded), __classes__.txt first in each\n"
            "shard, and OUT/PACK.txt saying the source, the count, the seed and each key's\n"
            "shard and source file. Every image is decoded first: a bad one stops the pack.\n"
            "Files beside an image with its stem (x.jpg + x.boxes.npy, x.labels.npy) go in\n"
            "as KEY.boxes.npy, KEY.labels.npy: ferry_dataset_shards_fields reads them.\n"
            "Read them with ferry_dataset_shards, `ferry bench OUT` or `ferry check OUT`.\n"
            "  --seed N:          the shuffle's seed (default 0); the same seed, the same order\n"
            "  --no-shuffle:      keep the source's order (a folder's is class after class,\n"
            "                     which a streaming loader cannot mix: see docs/SHARDS.md)\n"
            "  --no-check:        pack the files' bytes without decoding them first (by\n"
            "                     default every image is decoded, and a bad one stops the\n"
            "                     pack, named); run `ferry check OUT` after\n"
            "  --shard-size SIZE: start a new shard before one passes SIZE bytes (a sample is\n"
            "                     never split); a number with K, M or G (KiB, MiB, GiB) or\n"
            "                     none (bytes), 10K to 1024G; default 256M\n"
            "  --labels FILE:     SRC is an IDX images file and FILE its IDX labels\n"
            "  --index:           also write each shard's index beside it (SHARD.ferry-index):\n"
            "                     uploaded with the shards, it lets readers by URL start\n"
            "                     without fetching every shard\n"
            "  --upload URL:      then PUT each shard (and its index) and PACK.txt to URL/NAME:\n"
            "                     http(s)://HOST/PATH or s3://BUCKET/PREFIX (AWS_* variables,\n"
            "                     as for reading); OUT/urls.txt lists the shards' URLs (also\n"
            "                     put to URL/urls.txt): read them by that file, or by the\n"
            "                     brace pattern printed, 'URL/shard-{000000..0000NN}.tar'\n");
}

/* "64M", "1G", "100000": bytes. */
static int parse_size(const char *opt, const char *v, uint64_t *out)
{
    size_t n = strlen(v);
    uint64_t mul = 1, x;
    char digits[32];
    if (n && strchr("kKmMgG", v[n - 1])) {
        char c = (char)(v[n - 1] | 0x20);
        mul = c == 'k' ? 1ull << 10 : c == 'm' ? 1ull << 20 : 1ull << 30;
        n--;
    }
    bool ok = n > 0 && n < sizeof digits;
    if (ok) {
        memcpy(digits, v, n);
        digits[n] = '\0';
        ok = cli_digits_u64(digits, &x) && x <= (1ull << 40) / mul &&
             x * mul >= 10240 && x * mul <= 1ull << 40;
    }
    if (!ok)
        return cli_bad_value(PACK, opt, v, "a size from 10K to 1024G, e.g. 64M or 1G");
    *out = x * mul;
    return 0;
}

/* 0, CLI_USAGE after saying why, or -1 after --help. */
static int parse_args(int argc, char **argv, pack_opts *o)
{
    *o = (pack_opts){.shard_size = 256ull << 20, .shuffle = true, .check = true};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            usage(stdout);
            return -1;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--no-shuffle")) {
            o->shuffle = false;
        } else if (!strcmp(a, "--index")) {
            o->index = true;
        } else if (!strcmp(a, "--no-check")) {
            o->check = false;
        } else if (!strcmp(a, "--seed")) {
            if (!(v = cli_value(PACK, argc, argv, &i)) || cli_u64(PACK, a, v, &o->seed) != 0)
                return CLI_USAGE;
        } else if (!strcmp(a, "--upload")) {
            if (!(v = cli_value(PACK, argc, argv, &i)))
                return CLI_USAGE;
            if (!ferry__is_url(v))
                return cli_bad_value(PACK, a, v, "an http://, https:// or s3:// URL");
            o->upload = v;
        } else if (!strcmp(a, "--shard-size") || !strcmp(a, "--labels")) {
            if (!(v = cli_value(PACK, argc, argv, &i)))
                return CLI_USAGE;
            if (a[2] == 'l')
                o->labels = v;
            else if (parse_size(a, v, &o->shard_size) != 0)
                return CLI_USAGE;
        } else if ((a[0] == '-' && a[1]) || o->out) {
            return cli_unknown(PACK, a, usage); /* an unknown option, or a third path */
        } else if (!o->src) {
            o->src = a;
        } else {
            o->out = a;
        }
    }
    if (!o->out) {
        fprintf(stderr, PACK ": needs SRC and OUT (see ferry pack --help)\n");
        return CLI_USAGE;
    }
    return 0;
}

/* Old shards in OUT would mix with the new ones in ferry_dataset_shards(OUT). */
static int out_is_free(const char *out)
{
    DIR *d = opendir(out);
    if (!d) {
        fprintf(stderr, PACK ": %s: %s\n", out, strerror(errno));
        return -1;
    }
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.' && ferry_dataset_is_shard_path(e->d_name)) { /* .tar.gz too */
            char shown[FERRY_ERROR_MAX];
            ferry_format_cut(shown, sizeof shown, "%s already holds shards (%s)", out, e->d_name);
            fprintf(stderr, PACK ": %s; remove them or pick another folder\n", shown);
            rc = -1;
        }
    }
    closedir(d);
    return rc;
}

/* The state of the shard being written. */
typedef struct packer {
    const pack_opts *o;
    ferry_dataset *ds;
    char *classes;       /* the class names, one a line; NULL without names */
    size_t classes_len;
    tar_out tar;
    bool open;
    size_t shard, samples_in_shard;
    char part[4200], final[4096];
    uint64_t total_bytes;
    uint8_t *buf;        /* one sample's PNG */
    size_t cap;
    uint8_t *pixels;     /* IDX: one decoded sample */
    char tmp_png[4096];  /* IDX: where the encoder writes */
    ferry_scratch *scratch; /* the decode check's */
    uint8_t *check_px;   /* the decode check's output */
    size_t check_cap;
    size_t *key_shard;   /* per key written: its shard's number (for PACK.txt) */
    pack_side side;      /* files beside the images with their stem (x.boxes.npy) */
    uint8_t *side_buf;   /* one sample's side files, one after the other */
    size_t side_cap;
    size_t side_count;   /* side files carried */
} packer;

/* At most this many side files beside one image. */
#define PACK_SIDE_MAX 32

static int close_shard(packer *p)
{
    if (!p->open)
        return 0;
    p->open = false;
    p->total_bytes += p->tar.bytes + tar_end_bytes(p->tar.bytes);
    if (tar_out_close(&p->tar) != 0 || rename(p->part, p->final) != 0) {
        fprintf(stderr, PACK ": %s: %s\n", p->final, strerror(errno));
        return -1;
    }
    return 0;
}

static int open_shard(packer *p)
{
    snprintf(p->final, sizeof p->final, "%s/shard-%06zu.tar", p->o->out, p->shard);
    /* Written under another name first: an interrupted pack leaves no .tar
     * that looks complete. */
    snprintf(p->part, sizeof p->part, "%s.part", p->final);
    if (tar_out_open(&p->tar, p->part) != 0 ||
        (p->classes && tar_out_add(&p->tar, "__classes__.txt", p->classes, p->classes_len) != 0)) {
        fprintf(stderr, PACK ": %s: %s\n", p->part, strerror(errno));
        if (p->tar.f)
            tar_out_close(&p->tar);
        return -1;
    }
    p->open = true;
    p->shard++;
    p->samples_in_shard = 0;
    return 0;
}

/* Sample i's PNG bytes into p->buf: the file itself, or the IDX image encoded. */
static int sample_png(packer *p, size_t i, size_t *n)
{
    const char *path = p->tmp_png;
    if (!p->o->labels) {
        path = ferry_dataset_sample_name(p->ds, i);
    } else {
        const ferry_sample_format *f = ferry_dataset_format(p->ds);
        if (ferry_dataset_get(p->ds, i, p->pixels, ferry_dataset_sample_bytes(p->ds), NULL, NULL) != FERRY_OK ||
            ferry_png_save(path, p->pixels, f->width, f->height, f->channels) != FERRY_OK) {
            fprintf(stderr, PACK ": sample %zu: %s\n", i, ferry_last_error());
            return -1;
        }
    }
    int r = tool_read_file(path, &p->buf, &p->cap, n, 0);
    if (r != 0) {
        /* A source file's name is someone else's: escaped as messages are. */
        char shown[FERRY_ERROR_MAX];
        ferry_format_cut(shown, sizeof shown, "%s: %s", path, r == -3 ? "is not a regular file" :
                         ferry__open_error_reason(path, errno));
        fprintf(stderr, PACK ": %s\n", shown);
        return -1;
    }
    return 0;
}

/* Image i's side files read into p->side_buf: *n of them, the j-th at
 * off[j] (off[*n] the end), its path p->side.paths[*first + j]. */
static int read_side(packer *p, size_t i, size_t *first, size_t *n, size_t *stem,
                     size_t off[PACK_SIDE_MAX + 1])
{
    *n = 0;
    off[0] = 0;
    const char *img = p->o->labels ? NULL : ferry_dataset_sample_name(p->ds, i);
    if (!img || !p->side.n)
        return 0;
    *n = pack_side_find(&p->side, img, first, stem);
    if (*n > PACK_SIDE_MAX) {
        fprintf(stderr, PACK ": %s: %zu files share its stem, more than %d\n", img, *n,
                PACK_SIDE_MAX);
        return -1;
    }
    for (size_t j = 0; j < *n; j++) {
        const char *path = p->side.paths[*first + j];
        uint8_t *b = NULL;
        size_t cap = 0, got = 0;
        if (tool_read_file(path, &b, &cap, &got, 0) != 0) {
            char shown[FERRY_ERROR_MAX];
            ferry_format_cut(shown, sizeof shown, "%s: %s", path, ferry__open_error_reason(path, errno));
            fprintf(stderr, PACK ": %s\n", shown);
            free(b);
            return -1;
        }
        if (off[j] + got > p->side_cap) {
            size_t c = (off[j] + got) * 2;
            uint8_t *q = realloc(p->side_buf, c);
            if (!q) {
                free(b);
                return -1;
            }
            p->side_buf = q;
            p->side_cap = c;
        }
        memcpy(p->side_buf + off[j], b, got);
        off[j + 1] = off[j] + got;
        free(b);
    }
    return 0;
}

/* Source sample i as the k-th written. */
static int add_sample(packer *p, size_t i, size_t k, int digits)
{
    size_t n = 0;
    int64_t label;
    if (ferry_dataset_label(p->ds, i, &label) != FERRY_OK) {
        fprintf(stderr, PACK ": sample %zu: %s\n", i, ferry_last_error());
        return -1;
    }
    if (sample_png(p, i, &n) != 0)
        return -1;
    /* What is packed decodes: a truncated JPEG found now is named by its
     * source file, not later as shard-000000.tar:000012.jpg. (An IDX sample
     * was just encoded from pixels: nothing to check.) */
    if (p->o->check && !p->o->labels &&
        tool_decode_check(p->buf, n, ferry_dataset_sample_name(p->ds, i), p->scratch, &p->check_px,
                          &p->check_cap) != FERRY_OK) {
        fprintf(stderr, PACK ": %s\n" PACK ": nothing was packed: every image is decoded before it "
                "is packed; `ferry check %s` lists the bad ones (fix or remove them), or pack with "
                "--no-check to take the bytes as they are\n", ferry_last_error(), p->o->src);
        return -1;
    }
    char key[64], name[80], text[32];
    snprintf(key, sizeof key, "%0*zu", digits & 31, k); /* digits <= 20: the mask only bounds it */
    int tn = snprintf(text, sizeof text, "%lld", (long long)label);
    uint64_t adds = tar_member_bytes(n) + tar_member_bytes((size_t)tn);
    size_t side_first = 0, nside = 0, stem = 0, side_off[PACK_SIDE_MAX + 1];
    if (read_side(p, i, &side_first, &nside, &stem, side_off) != 0)
        return -1;
    for (size_t j = 0; j < nside; j++)
        adds += tar_member_bytes(side_off[j + 1] - side_off[j]);
    /* A new shard when this sample would push the current one past the size. */
    if (p->open && p->samples_in_shard &&
        p->tar.bytes + adds + tar_end_bytes(p->tar.bytes + adds) > p->o->shard_size &&
        close_shard(p) != 0)
        return -1;
    if (!p->open && open_shard(p) != 0)
        return -1;
    p->key_shard[k] = p->shard - 1;
    /* A JPEG goes in as KEY.jpg (its bytes unchanged), anything else as KEY.png. */
    const char *src = p->o->labels ? NULL : ferry_dataset_sample_name(p->ds, i);
    const char *dot = src ? strrchr(src, '.') : NULL;
    bool jpg = dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"));
    snprintf(name, sizeof name, "%s.%s", key, jpg ? "jpg" : "png");
    int rc = tar_out_add(&p->tar, name, p->buf, n);
    snprintf(name, sizeof name, "%s.cls", key);
    if (rc == 0)
        rc = tar_out_add(&p->tar, name, text, (size_t)tn);
    /* Side files as KEY.<what follows the stem>: x.boxes.npy -> KEY.boxes.npy. */
    for (size_t j = 0; j < nside && rc == 0; j++) {
        char side_name[200];
        const char *ext = p->side.paths[side_first + j] + stem + 1;
        if (snprintf(side_name, sizeof side_name, "%s.%s", key, ext) >= (int)sizeof side_name) {
            fprintf(stderr, PACK ": %s: a name too long for a shard member\n",
                    p->side.paths[side_first + j]);
            return -1;
        }
        rc = tar_out_add(&p->tar, side_name, p->side_buf + side_off[j],
                         side_off[j + 1] - side_off[j]);
        p->side_count++;
    }
    if (rc != 0) {
        fprintf(stderr, PACK ": %s: %s\n", p->part, strerror(errno));
        return -1;
    }
    p->samples_in_shard++;
    return 0;
}

/* The class names as __classes__.txt's text; none when a name has a newline. */
static int collect_classes(packer *p)
{
    size_t k = ferry_dataset_class_count(p->ds), len = 0;
    for (size_t c = 0; c < k; c++) {
        const char *s = ferry_dataset_class_name(p->ds, c);
        if (!s || !*s || strchr(s, '\n'))
            return 0;
        len += strlen(s) + 1;
    }
    if (!k || !(p->classes = malloc(len)))
        return k ? -1 : 0;
    for (size_t c = 0; c < k; c++) {
        const char *s = ferry_dataset_class_name(p->ds, c);
        memcpy(p->classes + p->classes_len, s, strlen(s));
        p->classes_len += strlen(s);
        p->classes[p->classes_len++] = '\n';
    }
    return 0;
}

static ferry_status open_source(const pack_opts *o, ferry_dataset **ds)
{
    if (!o->labels) {
        /* The files are copied, never decoded: a size given so that the listing
         * reads no header and a folder of many sizes (ImageNet's) packs. Its
         * readers set a size, or meet the rule ferry_image_config states. */
        ferry_image_config cfg = ferry_image_config_default();
        cfg.height = cfg.width = 32;
        return ferry_dataset_image_folder(o->src, &cfg, ds);
    }
    ferry_image_config cfg = ferry_image_config_default();
    cfg.layout = FERRY_LAYOUT_HWC; /* what PNG rows are */
    return ferry_dataset_idx(o->src, o->labels, &cfg, ds);
}

/* The order written: the source's, or a seeded Fisher-Yates shuffle of it
 * (stream b = UINT64_MAX, a name no loader epoch takes). */
static size_t *pack_order(const pack_opts *o, size_t len)
{
    size_t *order = malloc((len ? len : 1) * sizeof *order);
    if (!order)
        return NULL;
    for (size_t i = 0; i < len; i++)
        order[i] = i;
    ferry_rng r;
    ferry_rng_init(&r, o->seed, FERRY_RNG_SHUFFLE, UINT64_MAX);
    for (size_t i = len; o->shuffle && i > 1; i--) {
        size_t j = (size_t)ferry_rng_below(&r, i), t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
    return order;
}

/* OUT/PACK.txt: where the shards came from and how to make the same again,
 * and where each key came from (names escaped: one line each). */
static int write_info(const packer *p, const size_t *order, size_t len, int digits)
{
    const pack_opts *o = p->o;
    char path[4200];
    snprintf(path, sizeof path, "%s/PACK.txt", o->out);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, PACK ": %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "source: %s%s%s\nsamples: %zu\n", o->src, o->labels ? " --labels " : "",
            o->labels ? o->labels : "", len);
    if (o->shuffle)
        fprintf(f, "order: shuffled, --seed %llu\n", (unsigned long long)o->seed);
    else
        fprintf(f, "order: the source's (--no-shuffle)\n");
    fprintf(f, "checked: %s\n", o->labels ? "encoded from the IDX pixels"
                               : o->check ? "every image decoded before it was packed"
                                          : "no (--no-check): run `ferry check` on the shards");
    fprintf(f, "keys: KEY SHARD SOURCE, one a line\n");
    for (size_t k = 0; k < len; k++) {
        fprintf(f, "%0*zu shard-%06zu.tar ", digits & 31, k, p->key_shard[k]);
        if (o->labels)
            fprintf(f, "%s#%zu", o->src, order[k]);
        else
            tool_fputs_escaped(ferry_dataset_sample_name(p->ds, order[k]), f);
        fputc('\n', f);
    }
    if (fclose(f) != 0) {
        fprintf(stderr, PACK ": %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int pack_all(packer *p)
{
    size_t len = ferry_dataset_len(p->ds);
    int digits = 6;
    for (size_t m = 1000000; m <= len - (len > 0) && digits < 20; m *= 10)
        digits++;
    if (collect_classes(p) != 0 || (!p->o->labels && pack_side_init(&p->side, p->ds) != 0))
        return -1;
    if (p->o->labels) {
        snprintf(p->tmp_png, sizeof p->tmp_png, "%s/.pack-%ld.png", p->o->out, (long)getpid());
        if (!(p->pixels = malloc(ferry_dataset_sample_bytes(p->ds))))
            return -1;
    }
    size_t *order = pack_order(p->o, len);
    p->key_shard = malloc((len ? len : 1) * sizeof *p->key_shard);
    if (!order || !p->key_shard || ferry_scratch_create(&p->scratch) != FERRY_OK) {
        free(order);
        return -1;
    }
    int rc = 0;
    for (size_t k = 0; k < len && rc == 0; k++)
        rc = add_sample(p, order[k], k, digits);
    if (rc == 0)
        rc = write_info(p, order, len, digits);
    free(order);
    if (close_shard(p) != 0)
        rc = -1;
    if (p->o->labels)
        unlink(p->tmp_png);
    pack_side_free(&p->side);
    free(p->side_buf);
    return rc;
}

/* PUTs OUT/name to base/name (base's first bn characters). */
static int upload_one(const packer *p, const char *base, size_t bn, const char *name)
{
    ferry_remote_opts ro = {.timeout_s = 10, .retries = 5};
    char path[4200], url[4200];
    snprintf(path, sizeof path, "%s/%s", p->o->out, name);
    char shown[4200]; /* a password in the URL is not printed */
    if ((size_t)snprintf(url, sizeof url, "%.*s/%s", (int)bn, base, name) >= sizeof url) {
        ferry_redact_urls(base, shown, sizeof shown);
        fprintf(stderr, PACK ": --upload %s: the URL is too long\n", shown);
        return -1;
    }
    double t0 = tool_now();
    if (ferry__remote_put(url, path, &ro) != FERRY_OK) {
        fprintf(stderr, PACK ": upload: %s\n", ferry_last_error());
        return -1;
    }
    ferry_redact_urls(url, shown, sizeof shown);
    printf("%s: uploaded in %.1f s\n", shown, tool_now() - t0);
    return 0;
}

/* --upload: each finished shard (with its index under --index), then
 * urls.txt (written to OUT first) and PACK.txt, PUT to URL/NAME; PACK.txt
 * last, so that a bucket with it holds every shard. The local copies stay.
 * A reader cannot list URL (HTTP lists no files): it is told what to pass. */
static int upload_all(const packer *p)
{
    const char *base = p->o->upload;
    size_t bn = url_list_base_len(base);
    char list[4200], pattern[4200];
    snprintf(list, sizeof list, "%s/urls.txt", p->o->out);
    if (url_list_write(list, base, p->shard) != 0) {
        fprintf(stderr, PACK ": %s: %s\n", list, strerror(errno));
        return -1;
    }
    for (size_t k = 0; k < p->shard; k++) {
        char name[64];
        snprintf(name, sizeof name, "shard-%06zu.tar", k);
        if (upload_one(p, base, bn, name) != 0)
            return -1;
        snprintf(name, sizeof name, "shard-%06zu.tar.ferry-index", k);
        if (p->o->index && upload_one(p, base, bn, name) != 0)
            return -1;
    }
    if (upload_one(p, base, bn, "urls.txt") != 0 || upload_one(p, base, bn, "PACK.txt") != 0)
        return -1;
    printf("read them by URL with the list %s (one shard URL a line)", list);
    if (url_list_pattern(pattern, sizeof pattern, base, p->shard) == 0)
        printf(", or by the pattern '%s'", pattern);
    printf(" (a URL of the folder cannot be read: HTTP lists no files)\n");
    return 0;
}

/* --index: reading the shards with shard_index_cache writes each index. */
static int write_indexes(const pack_opts *o)
{
    ferry_image_config c = ferry_image_config_default();
    c.shard_index_cache = true;
    const char *dir = o->out;
    ferry_dataset *ds;
    if (ferry_dataset_shards(&dir, 1, &c, &ds) != FERRY_OK) {
        fprintf(stderr, PACK ": indexing %s: %s\n", o->out, ferry_last_error());
        return -1;
    }
    ferry_dataset_release(ds);
    return 0;
}

/* After a failure: no shard of an incomplete pack is left to be read as whole. */
static void remove_partial(packer *p)
{
    if (p->open) {
        tar_out_close(&p->tar);
        unlink(p->part);
    }
    for (size_t k = 0; k + (p->open ? 1 : 0) < p->shard; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/shard-%06zu.tar", p->o->out, k);
        unlink(path);
    }
}

int cmd_pack(int argc, char **argv)
{
    pack_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    packer p = {.o = &o};
    if (open_source(&o, &p.ds) != FERRY_OK) {
        fprintf(stderr, PACK ": %s\n", ferry_last_error());
        return 1;
    }
    if (tool_mkdirs(o.out) != 0) {
        fprintf(stderr, PACK ": %s: %s\n", o.out, strerror(errno));
        ferry_dataset_release(p.ds);
        return 1;
    }
    double t0 = tool_now();
    rc = out_is_free(o.out) == 0 && pack_all(&p) == 0 ? 0 : 1;
    if (rc != 0)
        remove_partial(&p);
    else if (o.index && write_indexes(&o) != 0)
        rc = 1; /* the shards are whole: they stay, with PACK.txt */
    if (rc == 0)
        printf("%s: %zu samples in %zu shard(s), %.1f MiB, in %.1f s, %s, %s\n", o.out,
               ferry_dataset_len(p.ds), p.shard, (double)p.total_bytes / (1 << 20),
               tool_now() - t0, o.shuffle ? "shuffled (order in PACK.txt)" : "in source order",
               o.labels ? "encoded from the IDX pixels"
               : o.check ? "every image decode-checked"
                         : "NOT decode-checked (--no-check: run `ferry check` on them)");
    if (rc == 0 && p.side_count)
        printf("%s: %zu side files carried (KEY.EXT beside each image's KEY.png or KEY.jpg, "
               "from SRC's x.EXT beside x.png or x.jpg)\n", o.out, p.side_count);
    /* A failed upload leaves the shards on disk, whole: upload them again. */
    if (rc == 0 && o.upload && upload_all(&p) != 0)
        rc = 1;
    free(p.classes);
    free(p.buf);
    free(p.pixels);
    free(p.check_px);
    free(p.key_shard);
    ferry_scratch_destroy(p.scratch);
    ferry_dataset_release(p.ds);
    return rc;
}
