/* Printing tensors the way PyTorch does: nested brackets, elements right-aligned
 * to a common width, four decimals (or scientific notation when the magnitudes
 * call for it), and "..." in place of the middle of long dimensions when the
 * tensor has more than 1000 elements. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "tensor/half.h"
#include "tensor/internal.h"

#define SUMMARY_THRESHOLD 1000
#define EDGE_ITEMS 3

typedef struct printer {
    const ferry_tensor *t;
    const void *host; /* contiguous copy of the elements, native dtype */
    bool summarize;
    bool is_float;
    bool sci;
    int width;
    /* statistics over the printed elements */
    double max_abs, min_abs_nonzero;
    bool all_int, any_finite;
    FILE *f;
} printer;

static ferry_scalar_ elem(const printer *p, int64_t k)
{
    return ferry_load_(p->host, p->t->dtype, k);
}

static int format_elem(const printer *p, int64_t k, char *buf, size_t size)
{
    ferry_scalar_ s = elem(p, k);
    if (!p->is_float)
        return snprintf(buf, size, "%" PRId64, s.i);
    double v = s.f;
    if (isnan(v))
        return snprintf(buf, size, "nan");
    if (isinf(v))
        return snprintf(buf, size, v > 0 ? "inf" : "-inf");
    return snprintf(buf, size, p->sci ? "%.4e" : "%.4f", v);
}

typedef void (*visit_fn)(printer *p, int64_t k);

/* Visits the printed elements in order: all of them, or the edges of each long
 * dimension when summarising. k is the row-major element index. */
static void visit(printer *p, size_t dim, int64_t base, visit_fn fn)
{
    const ferry_tensor *t = p->t;
    if (dim == t->ndim) {
        fn(p, base);
        return;
    }
    int64_t n = t->shape[dim], inner = 1;
    for (size_t i = dim + 1; i < t->ndim; i++)
        inner *= t->shape[i];
    bool cut = p->summarize && n > 2 * EDGE_ITEMS;
    for (int64_t i = 0; i < n; i++) {
        if (cut && i == EDGE_ITEMS)
            i = n - EDGE_ITEMS;
        visit(p, dim + 1, base + i * inner, fn);
    }
}

static void collect(printer *p, int64_t k)
{
    ferry_scalar_ s = elem(p, k);
    if (!p->is_float || !isfinite(s.f))
        return;
    double a = fabs(s.f);
    p->any_finite = true;
    if (a > p->max_abs)
        p->max_abs = a;
    if (a > 0 && (p->min_abs_nonzero == 0 || a < p->min_abs_nonzero))
        p->min_abs_nonzero = a;
    if (s.f != floor(s.f))
        p->all_int = false;
}

static void measure(printer *p, int64_t k)
{
    char buf[64];
    int n = format_elem(p, k, buf, sizeof buf);
    if (n > p->width)
        p->width = n;
}

static void emit(printer *p, size_t dim, int64_t base)
{
    const ferry_tensor *t = p->t;
    char buf[64];
    if (dim == t->ndim) {
        format_elem(p, base, buf, sizeof buf);
        fprintf(p->f, "%*s", p->width, buf);
        return;
    }
    int64_t n = t->shape[dim], inner = 1;
    for (size_t i = dim + 1; i < t->ndim; i++)
        inner *= t->shape[i];
    bool cut = p->summarize && n > 2 * EDGE_ITEMS;
    bool last = dim + 1 == t->ndim;
    fputc('[', p->f);
    for (int64_t i = 0; i < n; i++) {
        if (i > 0) {
            if (last) {
                fputs(", ", p->f);
            } else {
                /* PyTorch: one newline per remaining dimension, then indent to
                 * just inside this bracket ("tensor(" is 7 characters). */
                fputc(',', p->f);
                for (size_t k = dim + 1; k < t->ndim; k++)
                    fputc('\n', p->f);
                fprintf(p->f, "%*s", (int)(7 + dim + 1), "");
            }
        }
        if (cut && i == EDGE_ITEMS) {
            fputs(last ? " ..." : "...", p->f);
            i = n - EDGE_ITEMS - 1;
            continue;
        }
        emit(p, dim + 1, base + i * inner);
    }
    fputc(']', p->f);
}

static void suffix(const ferry_tensor *t, FILE *f)
{
    if (t->device.type != FERRY_DEVICE_CPU) {
        char dn[FERRY_DEVICE_NAME_MAX];
        fprintf(f, ", device='%s'", ferry_device_format(t->device, dn, sizeof dn));
    }
    fprintf(f, ", dtype=%s)\n", ferry_dtype_name(t->dtype));
}

ferry_status ferry_tensor_print(const ferry_tensor *t, FILE *f)
{
    if (!t || !f)
        return FERRY_ARG_ERROR("%s is NULL", t ? "f" : "t");
    if (t->numel == 0) {
        fputs("tensor([]", f);
        if (t->ndim != 1) {
            fputs(", size=(", f);
            for (size_t i = 0; i < t->ndim; i++)
                fprintf(f, "%s%" PRId64, i ? ", " : "", t->shape[i]);
            fputc(')', f);
        }
        suffix(t, f);
        return FERRY_OK;
    }
    size_t bytes = ferry_tensor_nbytes(t);
    void *host = ferry_host_malloc(bytes);
    if (!host)
        return FERRY_ERR_NO_MEMORY;
    ferry_status st = ferry_tensor_copy_to_host(t, host, bytes);
    if (st != FERRY_OK) {
        ferry_host_free(host);
        return st;
    }
    printer p = {.t = t, .host = host, .f = f, .all_int = true};
    p.summarize = t->numel > SUMMARY_THRESHOLD;
    p.is_float = t->dtype == FERRY_DTYPE_F32 || t->dtype == FERRY_DTYPE_F16 ||
                 t->dtype == FERRY_DTYPE_BF16;
    if (p.is_float) {
        visit(&p, 0, 0, collect);
        /* PyTorch's rule: scientific when the numbers are huge, tiny, or span more
         * than three orders of magnitude (whole numbers only when huge). */
        if (p.any_finite) {
            if (p.all_int)
                p.sci = p.max_abs > 1e8;
            else
                p.sci = p.max_abs > 1e8 || p.min_abs_nonzero < 1e-4 ||
                        (p.min_abs_nonzero > 0 && p.max_abs / p.min_abs_nonzero > 1000);
        }
    }
    visit(&p, 0, 0, measure);
    fputs("tensor(", f);
    emit(&p, 0, 0);
    suffix(t, f);
    ferry_host_free(host);
    return FERRY_OK;
}
