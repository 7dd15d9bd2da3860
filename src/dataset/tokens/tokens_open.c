/* Opening a token dataset: the config checked, the shards opened, the
 * samples cut (windows counted per shard, or documents found and packed),
 * the count cut to a multiple of len_multiple, and the dataset of fields
 * made (tokens_fields.c). */
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "dataset/tokens/tokens.h"

#define DEFAULT_T 1024
#define MAX_T ((size_t)1 << 24)
#define DEFAULT_BUFFER 1000
#define MAX_BUFFER ((size_t)1 << 20)

static ferry_status check_config(const ferry_tokens_config *c)
{
    if (c->seq_len > MAX_T)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "seq_len %zu is over %zu", c->seq_len, MAX_T);
    if (c->cut != FERRY_TOKENS_WINDOWS && c->cut != FERRY_TOKENS_DOCUMENTS)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "cut %d is not a ferry_token_cut", (int)c->cut);
    if ((unsigned)c->format > FERRY_TOKENS_NPY)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "format %d is not a ferry_token_format",
                          (int)c->format);
    if (c->raw_token_bytes && c->raw_token_bytes != 2 && c->raw_token_bytes != 4)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "raw_token_bytes is %zu (2 or 4)",
                          c->raw_token_bytes);
    if (c->pack_buffer > MAX_BUFFER)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "pack_buffer %zu is over %zu", c->pack_buffer,
                          MAX_BUFFER);
    if (c->cut == FERRY_TOKENS_DOCUMENTS && (c->delimiter < 0 || c->delimiter > UINT32_MAX))
        return ferry_fail(FERRY_ERR_INVALID_ARG, "documents need a delimiter token from 0 to "
                          "2^32 - 1 (it is %lld)", (long long)c->delimiter);
    if (c->token_dtype != FERRY_DTYPE_F32 && c->token_dtype != FERRY_DTYPE_I32 &&
        c->token_dtype != FERRY_DTYPE_I64 && c->token_dtype != FERRY_DTYPE_U16 &&
        c->token_dtype != FERRY_DTYPE_U32)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "token_dtype %s: inputs and targets are i32 "
                          "(the default), i64, u16 or u32", ferry_dtype_name(c->token_dtype));
    if (c->pad_token > UINT32_MAX)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "pad_token %lld is over 2^32 - 1",
                          (long long)c->pad_token);
    return FERRY_OK;
}

static ferry_status cut_windows(ferry_tokens *t)
{
    t->win_ends = ferry_host_calloc(t->src.n ? t->src.n : 1, sizeof *t->win_ends);
    if (!t->win_ends)
        return FERRY_ERR_NO_MEMORY;
    size_t total = 0;
    for (size_t k = 0; k < t->src.n; k++) {
        uint64_t c = t->src.shards[k].h.count, w = c > t->T ? (c - 1) / t->T : 0;
        if (w > SIZE_MAX - total)
            return ferry_fail(FERRY_ERR_LIMIT, "over 2^64 windows");
        total += (size_t)w;
        t->win_ends[k] = total;
        t->info.tokens_dropped += c - (w ? w * t->T + 1 : 0);
    }
    t->len = total;
    return FERRY_OK;
}

static ferry_status cut_documents(ferry_tokens *t, const ferry_tokens_config *c)
{
    ferry_tok_doc *docs = NULL;
    size_t n = 0;
    ferry_status st = ferry__tok_find_docs(&t->src, (uint32_t)c->delimiter, &docs, &n);
    size_t *order = st == FERRY_OK ? ferry_host_malloc((n ? n : 1) * sizeof *order) : NULL;
    if (st == FERRY_OK && !order)
        st = FERRY_ERR_NO_MEMORY;
    if (st == FERRY_OK) {
        ferry__tok_order(c->seed, order, n);
        st = ferry__tok_pack(docs, order, n, t->T + 1, c->pack_buffer ? c->pack_buffer :
                             DEFAULT_BUFFER, &t->rows);
    }
    ferry_host_free(order);
    ferry_host_free(docs);
    if (st != FERRY_OK)
        return st;
    t->info.documents = n;
    t->info.tokens_cropped = t->rows.cropped;
    t->info.tokens_padded = t->rows.padded;
    t->len = t->rows.nrows;
    return FERRY_OK;
}

/* The tail past a multiple of m, dropped (its tokens counted). */
static void trim(ferry_tokens *t, size_t m)
{
    size_t keep = t->len - t->len % m;
    for (size_t i = keep; i < t->len; i++) {
        if (t->cut == FERRY_TOKENS_WINDOWS) {
            t->info.tokens_dropped += t->T; /* its last token starts the next window */
            continue;
        }
        for (size_t p = t->rows.first[i]; p < t->rows.first[i + 1]; p++)
            t->info.tokens_dropped += t->rows.pieces[p].len;
    }
    t->len = keep;
    for (size_t k = 0; t->win_ends && k < t->src.n; k++)
        if (t->win_ends[k] > keep) /* the shards' runs end at the cut */
            t->win_ends[k] = keep;
}

static ferry_status cut(ferry_tokens *t, const ferry_tokens_config *c)
{
    ferry_status st = c->cut == FERRY_TOKENS_WINDOWS ? cut_windows(t) : cut_documents(t, c);
    if (st != FERRY_OK)
        return st;
    trim(t, c->len_multiple ? c->len_multiple : 1);
    if (!t->len)
        return ferry_fail_at(FERRY_ERR_INVALID_ARG, t->src.shards[0].path, "%s%llu tokens in "
                          "%zu files give no sample of %zu + 1 tokens%s", t->src.n > 1 ?
                          "(and the rest) " : "", (unsigned long long)t->info.tokens, t->src.n, t->T,
                          c->len_multiple > 1 ? " (after the cut to len_multiple)" : "");
    return ferry__tokens_make_dataset(t);
}

ferry_status ferry_tokens_open(const char *const *paths, size_t n, const ferry_tokens_config *cfg,
                               ferry_tokens **out)
{
    if (!out)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "ferry_tokens_open: out is NULL");
    *out = NULL;
    if (!paths || !n)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "ferry_tokens_open: no paths");
    ferry_tokens_config c = cfg ? *cfg : (ferry_tokens_config){0};
    ferry_status st = check_config(&c);
    if (st != FERRY_OK)
        return st;
    ferry_tokens *t = ferry_host_calloc(1, sizeof *t);
    if (!t)
        return FERRY_ERR_NO_MEMORY;
    atomic_init(&t->refs, 1);
    t->cut = c.cut;
    t->T = c.seq_len ? c.seq_len : DEFAULT_T;
    t->dtype = c.token_dtype == FERRY_DTYPE_F32 ? FERRY_DTYPE_I32 : c.token_dtype;
    t->pad = (uint32_t)(c.pad_token > 0 ? c.pad_token : c.delimiter > 0 ? c.delimiter : 0);
    st = ferry__tok_source_open(paths, n, &c, &t->src);
    if (st != FERRY_OK) {
        ferry_host_free(t);
        return st;
    }
    if (t->dtype == FERRY_DTYPE_U16 && t->src.token_bytes == 4) {
        ferry__tok_source_close(&t->src);
        ferry_host_free(t);
        return ferry_fail(FERRY_ERR_INVALID_ARG, "token_dtype u16: the token files hold u32 "
                          "tokens, which u16 cannot carry");
    }
    t->info.shards = t->src.n;
    for (size_t k = 0; k < t->src.n; k++)
        t->info.tokens += t->src.shards[k].h.count;
    if ((st = cut(t, &c)) != FERRY_OK) {
        ferry__tokens_unref(t);
        return st;
    }
    t->info.samples = t->len;
    *out = t;
    return FERRY_OK;
}

void ferry_tokens_destroy(ferry_tokens *t)
{
    if (!t)
        return;
    ferry_dataset_release(t->ds); /* its last reference drops the dataset's on t */
    ferry__tokens_unref(t);
}

ferry_dataset *ferry_tokens_dataset(const ferry_tokens *t) { return t ? t->ds : NULL; }
size_t ferry_tokens_len(const ferry_tokens *t) { return t ? t->len : 0; }
size_t ferry_tokens_seq_len(const ferry_tokens *t) { return t ? t->T : 0; }
size_t ferry_tokens_token_bytes(const ferry_tokens *t) { return t ? t->src.token_bytes : 0; }

void ferry_tokens_info_get(const ferry_tokens *t, ferry_tokens_info *out)
{
    if (out)
        *out = t ? t->info : (ferry_tokens_info){0};
}

ferry_status ferry_tokens_probe(const char *path, ferry_token_format format,
                                size_t raw_token_bytes, uint64_t *count, size_t *token_bytes)
{
    if (!path)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "ferry_tokens_probe: path is NULL");
    ferry_tokens_config c = {.format = format, .raw_token_bytes = raw_token_bytes};
    ferry_status st = check_config(&c);
    ferry_tok_source s;
    if (st == FERRY_OK)
        st = ferry__tok_source_open(&path, 1, &c, &s);
    if (st != FERRY_OK)
        return st;
    if (count)
        *count = s.n ? s.shards[0].h.count : 0;
    if (token_bytes)
        *token_bytes = s.token_bytes;
    ferry__tok_source_close(&s);
    return FERRY_OK;
}
