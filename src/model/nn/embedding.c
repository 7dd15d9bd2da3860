/* Embedding: y[..., :] = weight[x[...], :] for i32 or i64 indices x of any
 * shape (torch.nn.Embedding without padding_idx, max_norm or sparse). Forward
 * saves the indices; backward adds each position's gradient row into the
 * table row it read (duplicates summed, in position order on every device:
 * kernels/cpu/embed.c, kernels/cuda/embed.cu). Indices have no gradient. */
#include <stdio.h>

#include "common/error.h"
#include "model/nn/internal.h"
#include "model/ops/common.h"

typedef struct fm_embedding {
    ferry_module base;
    int64_t num, dim;
    ferry_tensor *idx; /* saved indices (contiguous) */
    ferry_tensor *bad; /* i64 [1] on the module's device: the first bad position */
    bool unchecked;    /* ferry_embedding_check_indices(m, false) */
} fm_embedding;

static void embedding_drop(ferry_module *m)
{
    fm_embedding *e = (fm_embedding *)m;
    ferry_tensor_release(e->idx);
    e->idx = NULL;
}

static void embedding_destroy(ferry_module *m)
{
    fm_embedding *e = (fm_embedding *)m;
    ferry_tensor_release(e->bad);
    e->bad = NULL;
}

static ferry_status check_indices(ferry_module *m, ferry_tensor *x, const char *where)
{
    if (!x)
        return ferry_arg_error_(where, "input is NULL");
    if (x->dtype != FERRY_DTYPE_I32 && x->dtype != FERRY_DTYPE_I64)
        return ferry_fail(FERRY_ERR_DTYPE, "%s: indices must be i32 or i64, got %s", where, ferry_dtype_name(x->dtype));
    if (!ferry_device_eq(x->device, m->device)) {
        char a[FERRY_DEVICE_NAME_MAX], b[FERRY_DEVICE_NAME_MAX];
        return ferry_fail(FERRY_ERR_DEVICE_MISMATCH, "%s: indices on %s but the table on %s", where,
                          ferry_device_format(x->device, a, sizeof a), ferry_device_format(m->device, b, sizeof b));
    }
    if (x->ndim + 1 > FERRY_MAX_DIMS)
        return ferry_fail(FERRY_ERR_SHAPE, "%s: indices have %zu dims; the output would have more than %d", where,
                          x->ndim, FERRY_MAX_DIMS);
    return FERRY_OK;
}

/* The first position whose index is outside the table, as the kernel left it
 * in e->bad (n when none), read back: this waits for stream s. */
static ferry_status report_bad(ferry_module *m, ferry_tensor *xi, ferry_stream *s, const char *where)
{
    fm_embedding *e = (fm_embedding *)m;
    int64_t first = xi->numel;
    ferry_status st = ferry_memcpy(&first, ferry_tensor_data(e->bad), sizeof first, FERRY_COPY_D2H, m->device, s);
    if (st == FERRY_OK && s)
        st = ferry_stream_synchronize(s);
    if (st != FERRY_OK || first >= xi->numel)
        return st;
    int64_t v = 0;
    size_t es = ferry_dtype_size(xi->dtype);
    int32_t v32 = 0;
    const char *src = (const char *)ferry_tensor_data(xi) + (size_t)first * es;
    st = ferry_memcpy(xi->dtype == FERRY_DTYPE_I32 ? (void *)&v32 : (void *)&v, src, es, FERRY_COPY_D2H, m->device,
                      s);
    if (st == FERRY_OK && s)
        st = ferry_stream_synchronize(s);
    if (st != FERRY_OK)
        return st;
    if (xi->dtype == FERRY_DTYPE_I32)
        v = v32;
    return ferry_fail(FERRY_ERR_INVALID_ARG, "%s: index %lld at position %lld is outside [0, %lld)", where,
                      (long long)v, (long long)first, (long long)e->num);
}

/* e->bad on the module's device (made again after a move), set to n. */
static ferry_status bad_reset(fm_embedding *e, int64_t n, ferry_stream *s)
{
    ferry_module *m = &e->base;
    if (e->bad && !ferry_device_eq(e->bad->device, m->device)) {
        ferry_tensor_release(e->bad);
        e->bad = NULL;
    }
    int64_t one = 1;
    ferry_status st = e->bad ? FERRY_OK : ferry_tensor_empty_on_(&one, 1, FERRY_DTYPE_I64, m->device, s, &e->bad);
    return st == FERRY_OK ? ferry_tensor_fill(e->bad, (double)n, s) : st;
}

static ferry_status embedding_forward(ferry_module *m, ferry_tensor *x, ferry_stream *s, ferry_tensor **y)
{
    fm_embedding *e = (fm_embedding *)m;
    char where[192];
    snprintf(where, sizeof where, "%s.forward", m->name);
    ferry_status st = check_indices(m, x, where);
    ferry_tensor *xi = NULL, *yt = NULL;
    if (st == FERRY_OK)
        st = ferry_tensor_contiguous(x, s, &xi);
    if (st != FERRY_OK)
        return st;
    int64_t shape[FERRY_MAX_DIMS];
    for (size_t i = 0; i < xi->ndim; i++)
        shape[i] = xi->shape[i];
    shape[xi->ndim] = e->dim;
    st = fm_buffer(&m->out, shape, xi->ndim + 1, m->dtype, m->device, s, &yt);
    if (st == FERRY_OK && !e->unchecked)
        st = bad_reset(e, xi->numel, s);
    if (st == FERRY_OK) {
        fk_ctx c = fm_ctx(xi, s);
        fk_embed k = {.n = xi->numel, .vocab = e->num, .dim = e->dim, .idt = xi->dtype,
                      .bad = e->unchecked ? NULL : ferry_tensor_data(e->bad)};
        st = FK(&c, embed_fwd, m->dtype, ferry_tensor_data(yt), ferry_tensor_data(m->params[0].value),
                ferry_tensor_data(xi), &k);
    }
    if (st == FERRY_OK && !e->unchecked)
        st = report_bad(m, xi, s, where);
    if (st != FERRY_OK) {
        ferry_tensor_release(xi);
        ferry_tensor_release(yt);
        return st;
    }
    embedding_drop(m);
    e->idx = m->training ? xi : NULL;
    if (!m->training)
        ferry_tensor_release(xi);
    *y = yt;
    return FERRY_OK;
}

static ferry_status embedding_backward(ferry_module *m, ferry_tensor *dy, ferry_stream *s, ferry_tensor **dx)
{
    fm_embedding *e = (fm_embedding *)m;
    char where[192];
    snprintf(where, sizeof where, "%s.backward", m->name);
    if (!e->idx)
        return ferry_fail(FERRY_ERR_BAD_STATE, "%s: backward needs a training-mode forward first", where);
    ferry_tensor *idx = e->idx;
    int64_t shape[FERRY_MAX_DIMS];
    for (size_t i = 0; i < idx->ndim; i++)
        shape[i] = idx->shape[i];
    shape[idx->ndim] = e->dim;
    ferry_tensor *g = NULL;
    ferry_status st = fm_grad_input(m, dy, shape, idx->ndim + 1, s, where, &g);
    if (st == FERRY_OK) {
        fk_ctx c = fm_ctx(idx, s);
        fk_embed k = {.n = idx->numel, .vocab = e->num, .dim = e->dim, .idt = idx->dtype};
        st = FK(&c, embed_bwd, m->dtype, ferry_tensor_data(m->params[0].grad), ferry_tensor_data(g),
                ferry_tensor_data(idx), &k);
    }
    ferry_tensor_release(g);
    embedding_drop(m);
    if (dx)
        *dx = NULL; /* indices have no gradient */
    return st;
}

static const fm_ops embedding_ops = {embedding_forward, embedding_backward, embedding_drop, embedding_destroy};

ferry_status ferry_embedding_check_indices(ferry_module *m, bool check)
{
    if (!m || m->ops != &embedding_ops)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "ferry_embedding_check_indices: %s is not an Embedding",
                          m ? m->name : "NULL");
    ((fm_embedding *)m)->unchecked = !check;
    return FERRY_OK;
}

ferry_status ferry_embedding_create(int64_t num_embeddings, int64_t embedding_dim, ferry_module **out)
{
    if (!out || num_embeddings <= 0 || embedding_dim <= 0)
        return ferry_fail(FERRY_ERR_INVALID_ARG, "Embedding(%lld, %lld): sizes must be positive%s",
                          (long long)num_embeddings, (long long)embedding_dim, out ? "" : " (and out not NULL)");
    char name[160];
    snprintf(name, sizeof name, "Embedding(%lld, %lld)", (long long)num_embeddings, (long long)embedding_dim);
    ferry_module *m = NULL;
    ferry_status st = fm_module_new(sizeof(fm_embedding), &embedding_ops, name, 1, &m);
    if (st != FERRY_OK)
        return st;
    fm_embedding *e = (fm_embedding *)m;
    e->num = num_embeddings;
    e->dim = embedding_dim;
    m->index_input = true;
    int64_t wshape[2] = {num_embeddings, embedding_dim};
    /* N(0, 1), PyTorch's init for an embedding table. */
    st = fm_param_alloc(m, 0, "weight", wshape, 2, false, 0.0, 1.0);
    m->params[0].init_normal = true;
    if (st == FERRY_OK)
        st = fm_flat_rebuild(m);
    if (st == FERRY_OK)
        st = ferry_module_init(m, 0);
    if (st != FERRY_OK) {
        ferry_module_destroy(m);
        return st;
    }
    *out = m;
    return FERRY_OK;
}
