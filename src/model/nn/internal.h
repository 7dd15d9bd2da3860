/* Internal: what a module looks like inside. Every layer is a struct whose first
 * member is a ferry_module, plus a table of its functions (fm_ops). Parameters
 * live in fm_param records owned by the layer; a module's flat list points at
 * all parameters of its subtree with their state_dict names. */
#ifndef FERRY_MODEL_NN_INTERNAL_H
#define FERRY_MODEL_NN_INTERNAL_H

#include "ferry/nn.h"
#include "model/kernels/kernels.h"
#include "tensor/internal.h"

typedef struct fm_param {
    char name[32];        /* "weight", "bias", "running_mean" */
    ferry_tensor *value;  /* in the module's dtype (f32 when keep_f32) */
    ferry_tensor *grad;   /* same shape, dtype, device; NULL for buffers */
    ferry_tensor *master; /* AMP: f32 master weights (== value when keep_f32), else NULL */
    ferry_tensor *master_grad; /* AMP: f32 unscaled gradient, else NULL */
    bool buffer;
    bool keep_f32;        /* stays f32 when the module goes to half (BatchNorm) */
    double init_lo, init_hi; /* uniform init range; lo == hi: constant */
    bool init_normal;        /* instead: normal, mean init_lo, std init_hi - init_lo (Embedding) */
} fm_param;

typedef struct fm_ref {
    char name[128];
    fm_param *p;
} fm_ref;

typedef struct fm_ops {
    ferry_status (*forward)(ferry_module *m, ferry_tensor *x, ferry_stream *s, ferry_tensor **y);
    ferry_status (*backward)(ferry_module *m, ferry_tensor *dy, ferry_stream *s, ferry_tensor **dx);
    void (*drop_saved)(ferry_module *m); /* release what forward saved (may be NULL) */
    void (*destroy)(ferry_module *m);    /* layer-specific cleanup (may be NULL) */
} fm_ops;

struct ferry_module {
    const fm_ops *ops;
    char name[160];
    fm_param *params;           /* this layer's own */
    size_t nparams;
    fm_ref *flat;               /* the whole subtree's, in order */
    size_t nflat;
    ferry_module **children;    /* Sequential only */
    size_t nchildren, cap;
    ferry_device device;
    ferry_dtype dtype;
    bool training;
    ferry_tensor *out;          /* forward output buffer, reused when no one else holds it */
    ferry_tensor *dxbuf;        /* backward input-gradient buffer, likewise */
    ferry_tensor *lossbuf;      /* ferry_train_step's dlogits buffer, likewise */
    ferry_tensor *inbuf;        /* ferry_train_step's input in the module's dtype, likewise */
    /* A ReLU after this layer goes into its bias add (Sequential sets both for
     * one forward): bias_relu says the layer can (Linear, Conv2d with a bias),
     * act_relu asks it to, input_relu tells the ReLU its input is rectified. */
    bool bias_relu, act_relu, input_relu;
    /* Takes integer indices, not values (an Embedding, or a Sequential that
     * starts with one): ferry_train_step passes its input through unconverted. */
    bool index_input;
    ferry_grad_ready_fn grad_ready; /* ferry_module_set_grad_hook; NULL when none */
    void *grad_ready_ctx;
    /* Host calls on this module that may move its buffers (forward, backward,
     * to): a captured training step (train_graph.c) stays valid while the
     * count it saw after capture holds, since a replay runs no host code. */
    uint64_t calls;
};

/* Allocates a zeroed layer struct of `size` bytes with name and params. */
ferry_status fm_module_new(size_t size, const fm_ops *ops, const char *name, size_t nparams,
                           ferry_module **out);
/* Creates value (and grad unless buffer) for params[i] on the module's device. */
ferry_status fm_param_alloc(ferry_module *m, size_t i, const char *name, const int64_t *shape,
                            size_t ndim, bool buffer, double lo, double hi);
/* Rebuilds m->flat from its params or children. */
ferry_status fm_flat_rebuild(ferry_module *m);
/* Finishes a new Linear or Conv2d: params[0] "weight" of wshape and, when bias,
 * params[1] "bias" of [out_features], both uniform in +-bound (PyTorch's
 * default), then the initial draw. On failure m is destroyed; on success *out = m. */
ferry_status fm_weight_bias_finish(ferry_module *m, const int64_t *wshape, size_t wdims, bool bias,
                                   double bound, ferry_module **out);

/* A tensor of the given shape in *slot, reusing the one there when this module
 * holds its only reference and it fits; returns a new reference for the caller. */
ferry_status fm_buffer(ferry_tensor **slot, const int64_t *shape, size_t ndim, ferry_dtype dt,
                       ferry_device d, ferry_stream *s, ferry_tensor **out);

/* x on m's device (else the standard mismatch error naming where), converted to
 * m's dtype when needed, contiguous. Returns a new reference. */
ferry_status fm_input(ferry_module *m, ferry_tensor *x, ferry_stream *s, const char *where,
                      ferry_tensor **out);
/* Checks dy has the given shape on m's device. */
ferry_status fm_grad_input(ferry_module *m, ferry_tensor *dy, const int64_t *shape, size_t ndim,
                           ferry_stream *s, const char *where, ferry_tensor **out);

void fm_drop_saved_all(ferry_module *m);
void fm_set_dtype_all(ferry_module *m, ferry_dtype dt);

/* The optimiser's view of a parameter: the tensor to update and its gradient. */
static inline ferry_tensor *fm_param_target(fm_param *p) { return p->master ? p->master : p->value; }
static inline ferry_tensor *fm_param_tgrad(fm_param *p)
{
    return p->master_grad ? p->master_grad : p->grad;
}

/* Moves *t to d (replacing the reference). */
ferry_status fm_tensor_move(ferry_tensor **t, ferry_device d);

/* Optimiser state for checkpoints (optim.c). */
size_t fm_optim_state_count(const ferry_optim *o, size_t *per_param);
ferry_status fm_optim_prepare(ferry_optim *o);
/* The j-th state tensor of flat parameter i (NULL when none) and its suffix. */
ferry_tensor *fm_optim_state(ferry_optim *o, size_t i, size_t j, const char **suffix);
ferry_module *fm_optim_module(ferry_optim *o);
void fm_optim_get_hparams(const ferry_optim *o, char *buf, size_t size);
/* Counts the changes of where the optimiser keeps its device state (a new
 * step count from a checkpoint): a captured step is replayed only while it holds. */
uint64_t fm_optim_version(const ferry_optim *o);
/* Adds a replayed step's rows to metrics' host-side counts, as the cross-entropy
 * call that was captured adds them when it runs on the host. */
void fm_metrics_add_rows(ferry_metrics *m, int64_t rows);
/* Sets the device's step count (a checkpoint's); waits for the device first. */
ferry_status fm_optim_set_steps(ferry_optim *o, int64_t steps);
/* ferry_optim_step whose updates, and the count's advance, are dropped on the
 * device when skip (f32 [1] on the module's device; NULL: never) is nonzero. */
ferry_status fm_optim_step_(ferry_optim *o, ferry_stream *s, const ferry_tensor *skip);

/* Mixed precision (amp.c): *out = the loss scale, an f32 [1] tensor on the
 * module's device (moved there first if the module moved; borrowed, not a new
 * reference), for losses that scale their gradient on the device. */
ferry_status fm_amp_loss_scale(ferry_amp *a, ferry_tensor **out);
/* The loss scale and growth tracker (f32 [1], i64 [1], on the module's device)
 * and the module, for checkpoints. */
ferry_status fm_amp_state(ferry_amp *a, ferry_module **m, ferry_tensor **scale, ferry_tensor **tracker);
/* Dropout's draw counter (the mask of its next training forward), or NULL when m
 * is not a Dropout; for checkpoints. */
uint64_t *fm_dropout_calls(ferry_module *m);

/* Metrics' running sums as one line of text, for a checkpoint's metadata
 * ("ferry-metrics/1 loss=<f32 bits, hex> correct=N bad=N count=N classified=N
 * bad_seen=N": exact, so a resumed epoch adds to the very sums it stopped at).
 * Waits for the device. size >= FM_METRICS_TEXT_MAX. */
#define FM_METRICS_TEXT_MAX 192
ferry_status fm_metrics_format(ferry_metrics *m, char *buf, size_t size);
/* Parses text (FERRY_ERR_FORMAT naming what is wrong) and, when apply, sets
 * m's sums to it. Parsing first and applying after lets a checkpoint check
 * every part before it changes any. */
ferry_status fm_metrics_parse(ferry_metrics *m, const char *text, bool apply);

/* Losses (loss.c): ferry_cross_entropy, with the gradient scale read on the
 * device from scale[0] (f32 [1] on the logits' device) when scale is not NULL.
 * check_now: read the bad-label count back and fail now (a host wait); false
 * leaves it to ferry_metrics_get when metrics is not NULL (ferry_train_step).
 * dslot (may be NULL): a buffer slot (fm_buffer) the gradient is taken from. */
ferry_status fm_cross_entropy_(ferry_tensor *logits, ferry_tensor *labels, float grad_scale,
                               const ferry_tensor *scale, bool check_now, ferry_metrics *metrics, ferry_stream *s,
                               ferry_tensor **dslot, ferry_tensor **dlogits);

#endif
