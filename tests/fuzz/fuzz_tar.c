/* Fuzz target: tar shards (ferry_dataset_shards on the input written as
 * shard.tar), and the same bytes gzip-compressed as shard.tar.gz, which must
 * give exactly what the plain shard gives: the same failure at create, or the
 * same samples, names past the path, labels, statuses and decoded bytes. */
#include <zlib.h>

#include "fuzz.h"

enum { SIDE = 4, MAX_SAMPLES = 16 };

/* in, gzip-compressed, into a malloc'd buffer (*n bytes); NULL when zlib fails. */
static uint8_t *tar_fuzz_gzip(const uint8_t *in, size_t size, size_t *n)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return NULL;
    size_t cap = deflateBound(&z, (uLong)size) + 32;
    uint8_t *out = malloc(cap);
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)size;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    int r = out ? deflate(&z, Z_FINISH) : Z_MEM_ERROR;
    *n = z.total_out;
    deflateEnd(&z);
    if (r != Z_STREAM_END) {
        free(out);
        return NULL;
    }
    return out;
}

/* What one dataset gives: the create status, then per sample its status,
 * label and pixels. */
typedef struct tar_fuzz_result {
    ferry_status create;
    size_t len, classes;
    ferry_status st[MAX_SAMPLES];
    int64_t label[MAX_SAMPLES];
    uint8_t px[MAX_SAMPLES][SIDE * SIDE];
    char name[MAX_SAMPLES][64]; /* after "PATH:" */
} tar_fuzz_result;

static void tar_fuzz_open(const char *path, tar_fuzz_result *r)
{
    memset(r, 0, sizeof *r);
    ferry_image_config cfg = ferry_image_config_default();
    cfg.channels = 1;
    cfg.height = SIDE;
    cfg.width = SIDE;
    cfg.limits.max_file_bytes = 64 << 10;
    cfg.limits.max_pixels = 1 << 16;
    cfg.shard_cache_bytes = 4096;
    ferry_dataset *ds = NULL;
    r->create = ferry_dataset_shards(&path, 1, &cfg, &ds);
    if (r->create != FERRY_OK)
        return;
    r->len = ferry_dataset_len(ds);
    r->classes = ferry_dataset_class_count(ds);
    size_t plen = strlen(path);
    /* Backwards, so that the gzip reader must go back (or have kept). */
    for (size_t k = r->len < MAX_SAMPLES ? r->len : MAX_SAMPLES; k-- > 0;) {
        const char *name = ferry_dataset_sample_name(ds, k);
        if (!name || strncmp(name, path, plen) || name[plen] != ':') {
            fprintf(stderr, "fuzz_tar: sample %zu is named %s, not %s:...\n", k,
                    name ? name : "(null)", path);
            abort();
        }
        snprintf(r->name[k], sizeof r->name[k], "%s", name + plen + 1);
        r->label[k] = -7;
        r->st[k] = ferry_dataset_get(ds, k, r->px[k], sizeof r->px[k], NULL, &r->label[k]);
    }
    ferry_dataset_release(ds);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ferry_fuzz_quiet();
    char p[320], q[320];
    ferry_fuzz_write("shard.tar", data, size, p, sizeof p);
    static tar_fuzz_result a, b;
    tar_fuzz_open(p, &a);
    /* A gzip input is read as gzip whatever its name: compare plain tars only. */
    if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b)
        return 0;
    size_t zn = 0;
    uint8_t *z = tar_fuzz_gzip(data, size, &zn);
    if (!z)
        return 0;
    ferry_fuzz_write("shard.tar.gz", z, zn, q, sizeof q);
    free(z);
    tar_fuzz_open(q, &b);
    /* A plain tar's size is known before reading; a gzip one's only at its end,
     * so the two may blame different bytes. Both must fail, or neither. */
    bool same = (a.create == FERRY_OK) == (b.create == FERRY_OK) && a.len == b.len &&
                a.classes == b.classes;
    for (size_t k = 0; same && a.create == FERRY_OK && k < a.len && k < MAX_SAMPLES; k++)
        same = a.st[k] == b.st[k] && a.label[k] == b.label[k] && !strcmp(a.name[k], b.name[k]) &&
               (a.st[k] != FERRY_OK || !memcmp(a.px[k], b.px[k], sizeof a.px[k]));
    if (!same) {
        fprintf(stderr, "fuzz_tar: the gzip shard differs from the plain one (create %s / %s, "
                "%zu / %zu samples)\n", ferry_status_str(a.create), ferry_status_str(b.create),
                a.len, b.len);
        abort();
    }
    return 0;
}
