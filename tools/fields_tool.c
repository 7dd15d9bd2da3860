/* Fields in the tools: `--fields` for ferry check and ferry bench. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fields_tool.h"

int tool_fields_parse(const char *cmd, const char *list, tool_fields *out)
{
    memset(out, 0, sizeof *out);
    if (!list || !list[0] || strlen(list) >= sizeof out->buf) {
        fprintf(stderr, "%s: --fields: a list of members, e.g. png,cls,boxes.npy\n", cmd);
        return -1;
    }
    snprintf(out->buf, sizeof out->buf, "%s", list);
    for (char *save = NULL, *t = strtok_r(out->buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (out->n == FERRY_FIELD_MAX) {
            fprintf(stderr, "%s: --fields: more than %d members\n", cmd, FERRY_FIELD_MAX);
            return -1;
        }
        out->names[out->n++] = t;
    }
    return out->n ? 0 : -1;
}

void tool_fields_print(FILE *f, const ferry_dataset *ds)
{
    const ferry_field *fl;
    size_t n;
    if (ferry_dataset_fields(ds, &fl, &n) != FERRY_OK)
        return;
    for (size_t k = 0; k < n; k++) {
        fprintf(f, "  field %-12s %-4s [", fl[k].name, ferry_dtype_name(fl[k].dtype));
        for (size_t d = 0; d < fl[k].ndim; d++)
            fprintf(f, "%s%s%zu", d ? ", " : "", d == 0 && fl[k].ragged ? "<=" : "", fl[k].shape[d]);
        fprintf(f, "]%s", fl[k].role == FERRY_FIELD_IMAGE ? " image"
                          : fl[k].ragged ? " ragged: padded, lengths beside" : "");
        if (fl[k].view_of)
            fprintf(f, " view of %s[%zu:%zu]", fl[k].view_of, fl[k].view_start,
                    fl[k].view_start + fl[k].shape[0]);
        if (fl[k].batch_dtype != FERRY_DTYPE_F32 && fl[k].batch_dtype != fl[k].dtype)
            fprintf(f, " (arrives as %s)", ferry_dtype_name(fl[k].batch_dtype));
        fputc('\n', f);
    }
}

typedef struct fcheck {
    ferry_dataset *ds;
    char **reasons;
    size_t *lengths;      /* per sample x field */
    size_t nf;
    atomic_size_t next;
} fcheck;

static void *fcheck_worker(void *arg)
{
    fcheck *j = arg;
    const ferry_field *fl;
    size_t nf, len = ferry_dataset_len(j->ds), total = 0, off[FERRY_FIELD_MAX];
    ferry_dataset_fields(j->ds, &fl, &nf);
    for (size_t k = 0; k < nf; k++) {
        off[k] = total;
        total += (ferry_field_bytes(&fl[k]) + 63) / 64 * 64;
    }
    ferry_scratch *s = NULL;
    ferry_scratch_create(&s);
    uint8_t *buf = aligned_alloc(64, total ? total : 64);
    void *dst[FERRY_FIELD_MAX];
    for (size_t k = 0; buf && k < nf; k++)
        dst[k] = buf + off[k];
    ferry_sample_ctx ctx = {.scratch = s};
    for (size_t i; buf && (i = atomic_fetch_add(&j->next, 1)) < len;)
        if (ferry_dataset_get_fields(j->ds, i, dst, j->lengths + i * nf, &ctx) != FERRY_OK)
            j->reasons[i] = strdup(ferry_last_error());
    free(buf);
    ferry_scratch_destroy(s);
    return NULL;
}

/* Each ragged field's lengths over the good samples. */
static void print_lengths(const fcheck *j, size_t len)
{
    const ferry_field *fl;
    size_t nf;
    ferry_dataset_fields(j->ds, &fl, &nf);
    for (size_t k = 0; k < nf; k++) {
        if (!fl[k].ragged)
            continue;
        size_t lo = SIZE_MAX, hi = 0, good = 0;
        double sum = 0;
        for (size_t i = 0; i < len; i++) {
            if (j->reasons[i])
                continue;
            size_t v = j->lengths[i * nf + k];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            sum += (double)v;
            good++;
        }
        if (good)
            printf("  field %-12s lengths: least %zu, most %zu, mean %.2f\n", fl[k].name, lo, hi,
                   sum / (double)good);
    }
}

int tool_check_shard_fields(const char *path, const tool_fields *tf, size_t workers,
                            size_t *total, size_t *bad)
{
    ferry_image_config cfg = ferry_image_config_default();
    cfg.height = cfg.width = 32; /* as ferry check reads shards: every size decodes */
    ferry_dataset *ds;
    if (ferry_dataset_shards_fields(&path, 1, &cfg, tf->names, tf->n, &ds) != FERRY_OK) {
        printf("%s\n", ferry_last_error());
        (*total)++;
        (*bad)++;
        return 0;
    }
    size_t len = ferry_dataset_len(ds), nf;
    const ferry_field *fl;
    ferry_dataset_fields(ds, &fl, &nf);
    fcheck j = {.ds = ds, .reasons = calloc(len ? len : 1, sizeof(char *)),
                .lengths = calloc((len ? len : 1) * nf, sizeof(size_t)), .nf = nf};
    if (!j.reasons || !j.lengths) {
        free(j.reasons);
        free(j.lengths);
        ferry_dataset_release(ds);
        return -1;
    }
    atomic_init(&j.next, 0);
    pthread_t th[256];
    size_t started = 0;
    for (size_t t = 1; t < workers && t < 256; t++)
        if (pthread_create(&th[started], NULL, fcheck_worker, &j) == 0)
            started++;
    fcheck_worker(&j);
    for (size_t t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    for (size_t i = 0; i < len; i++)
        if (j.reasons[i]) {
            printf("%s\n", j.reasons[i]);
            (*bad)++;
        }
    printf("%s: %zu samples, fields:\n", path, len);
    tool_fields_print(stdout, ds);
    print_lengths(&j, len);
    for (size_t i = 0; i < len; i++)
        free(j.reasons[i]);
    *total += len;
    free(j.reasons);
    free(j.lengths);
    ferry_dataset_release(ds);
    return 0;
}
