/* Library: libferry-train (pkg-config ferry-train); <ferry/train.h> includes this header. */
/* Layers, losses, optimisers, mixed precision and checkpoints.
 *
 * Explicit forward and backward, as llm.c does, not a tape-based autograd: each
 * layer's forward saves exactly what its backward needs (Linear its input, ReLU
 * its output, MaxPool the argmax indices) and its backward computes the input
 * gradient and accumulates parameter gradients. A Sequential runs its children
 * forward, then backward in reverse. For the models ferry trains (MLPs, CNNs on
 * loader batches) this is less code than a graph, has no per-op bookkeeping, and
 * makes memory plain to see: activations are freed when backward has used them,
 * and output buffers are reused across steps when no one else holds them.
 * Gradient checks against finite differences cover every layer and loss.
 *
 * A training step on a batch (x: u8 images [N, 1, 28, 28] on the device, y: i64 labels [N]):
 *
 *     ferry_module *net; ferry_sequential_create(&net);
 *     ferry_module *l; ferry_flatten_create(&l);           ferry_sequential_add(net, l);
 *     ferry_linear_create(784, 256, true, &l);             ferry_sequential_add(net, l);
 *     ferry_relu_create(&l);                               ferry_sequential_add(net, l);
 *     ferry_linear_create(256, 10, true, &l);              ferry_sequential_add(net, l);
 *     ferry_module_init(net, 42);  ferry_module_to(net, dev);
 *     ferry_optim *opt; ferry_sgd_create(net, 0.1, 0.9, 0.0, &opt);
 *     ...
 *     ferry_tensor *xf; ferry_affine(x, 1 / 255.0, 0, FERRY_DTYPE_F32, stream, &xf);
 *     ferry_train_step(net, opt, NULL, xf, y, metrics, stream);   // or by hand:
 *         ferry_module_zero_grad(net, s); ferry_module_forward(net, xf, s, &logits);
 *         ferry_cross_entropy(logits, y, 1.0f, metrics, s, &dlogits);
 *         ferry_module_backward(net, dlogits, s, NULL); ferry_optim_step(opt, s);
 *
 * Parameters are f32 unless converted (ferry_module_to_dtype, or an ferry_amp for
 * mixed precision). f16/bf16 layers run on CUDA natively and on the CPU through
 * f32 (correct, for testing and portability, but slower than f32 there). */
#ifndef FERRY_NN_H
#define FERRY_NN_H

#include "ferry/export.h"
#include "ferry/ops.h"
#include "ferry/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- modules ---- */
typedef struct ferry_module ferry_module;

/* Weights and biases start as PyTorch's defaults (uniform in +-1/sqrt(fan_in)),
 * drawn with seed 0; call ferry_module_init to draw them from a seed. */
FERRY_API ferry_status ferry_linear_create(int64_t in_features, int64_t out_features, bool bias,
                                           ferry_module **out);
/* Square kernel; input [N, C_in, H, W]. */
FERRY_API ferry_status ferry_conv2d_create(int64_t in_channels, int64_t out_channels,
                                           int64_t kernel, int64_t stride, int64_t padding,
                                           bool bias, ferry_module **out);
/* A table of num_embeddings rows of embedding_dim values, drawn N(0, 1) as
 * PyTorch's: input i32 or i64 indices of any shape [...], output [..., dim].
 * An index outside [0, num_embeddings) fails the forward (FERRY_ERR_INVALID_ARG
 * naming the index and its position); the check reads one value back, so the
 * forward waits for its stream. Backward sums the gradients of repeated indices
 * in position order on every device (the same bits run after run) and gives no
 * input gradient (*dx NULL): an Embedding is a model's first layer. */
FERRY_API ferry_status ferry_embedding_create(int64_t num_embeddings, int64_t embedding_dim,
                                              ferry_module **out);
/* check false: the forward no longer reads the indices' check back, so it never
 * waits for its stream (a training step that must not, such as a captured
 * one); an index outside the table then gives a zero row and adds no gradient,
 * silently. true (the default) restores the error. INVALID_ARG when m is not
 * an Embedding. */
FERRY_API ferry_status ferry_embedding_check_indices(ferry_module *m, bool check);
/* stride 0 means stride = kernel (PyTorch's default). */
FERRY_API ferry_status ferry_maxpool2d_create(int64_t kernel, int64_t stride, int64_t padding,
                                              ferry_module **out);
FERRY_API ferry_status ferry_avgpool2d_create(int64_t kernel, int64_t stride, int64_t padding,
                                              ferry_module **out);
/* eps 1e-5 and momentum 0.1 are PyTorch's defaults; statistics stay f32. */
FERRY_API ferry_status ferry_batchnorm2d_create(int64_t channels, double eps, double momentum,
                                                ferry_module **out);
/* Masks come from Philox keyed by (seed, FERRY_RNG_DROPOUT, call number). */
FERRY_API ferry_status ferry_dropout_create(double p, uint64_t seed, ferry_module **out);
FERRY_API ferry_status ferry_relu_create(ferry_module **out);
/* [N, ...] -> [N, prod(...)] */
FERRY_API ferry_status ferry_flatten_create(ferry_module **out);
FERRY_API ferry_status ferry_sequential_create(ferry_module **out);
/* Appends child; seq owns it from now on, even when this call fails. Children
 * must be on seq's device and dtype (move the whole model afterwards). */
FERRY_API ferry_status ferry_sequential_add(ferry_module *seq, ferry_module *child);
FERRY_API void ferry_module_destroy(ferry_module *m);

/* "Linear(784, 256)", "Sequential(4)". */
FERRY_API const char *ferry_module_name(const ferry_module *m);
/* Prints the model tree with parameter counts. */
FERRY_API void ferry_module_print(const ferry_module *m, FILE *f);

/* Redraws every parameter from (seed, FERRY_RNG_INIT, parameter number), so a
 * seed names one model on any device. BatchNorm resets to weight 1, bias 0. */
FERRY_API ferry_status ferry_module_init(ferry_module *m, uint64_t seed);

/* y = m(x). x must be on m's device; a dtype other than m's is converted (values,
 * not scaled: normalise u8 images with ferry_affine first). In training mode the
 * module keeps what backward needs until backward runs. */
FERRY_API ferry_status ferry_module_forward(ferry_module *m, ferry_tensor *x, ferry_stream *s,
                                            ferry_tensor **y);
/* From dL/dy, accumulates dL/dparameters into the gradients and returns dL/dx in
 * *dx (pass dx NULL when not wanted: the first layer then skips that work).
 * Needs a training-mode forward first. */
FERRY_API ferry_status ferry_module_backward(ferry_module *m, ferry_tensor *dy, ferry_stream *s,
                                             ferry_tensor **dx);
FERRY_API ferry_status ferry_module_zero_grad(ferry_module *m, ferry_stream *s);
/* Moves parameters, gradients, buffers (and AMP masters) to d. */
FERRY_API ferry_status ferry_module_to(ferry_module *m, ferry_device d);
/* Converts parameters and gradients (not BatchNorm statistics) to dt: .half(). */
FERRY_API ferry_status ferry_module_to_dtype(ferry_module *m, ferry_dtype dt);
/* Training mode (the default) or evaluation mode (BatchNorm uses running
 * statistics, Dropout passes through, nothing is saved for backward). */
FERRY_API void ferry_module_train(ferry_module *m, bool training);
FERRY_API bool ferry_module_is_training(const ferry_module *m);
FERRY_API ferry_device ferry_module_device(const ferry_module *m);
FERRY_API ferry_dtype ferry_module_dtype(const ferry_module *m);
/* Number of trainable scalars (PyTorch's sum(p.numel() for p in parameters())). */
FERRY_API int64_t ferry_module_trainable_numel(const ferry_module *m);

/* Parameters and buffers, in a stable order, named like PyTorch's state_dict
 * ("0.weight", "2.running_mean"). The tensors belong to the module: valid until
 * the next to/to_dtype/destroy; retain them to keep them longer. */
typedef struct ferry_param {
    const char *name;
    ferry_tensor *value;
    ferry_tensor *grad; /* NULL for buffers */
    bool buffer;        /* running statistics: saved and moved, not trained */
} ferry_param;
FERRY_API size_t ferry_module_param_count(const ferry_module *m);
FERRY_API ferry_status ferry_module_param(const ferry_module *m, size_t i, ferry_param *out);

/* Called by ferry_module_backward(m, ...) each time the gradients of params
 * [first, first + count) of m (indices as ferry_module_param's) are final: for a
 * Sequential after each child's backward, last child first; for a single layer
 * once, at the end. count may be 0 (a child without parameters). A status other
 * than FERRY_OK stops the backward with it. Data-parallel training (ferry_ddp,
 * ferry/dist.h) uses this to all-reduce a bucket of gradients while backward
 * still runs. One hook per module; fn NULL removes it. */
typedef ferry_status (*ferry_grad_ready_fn)(void *ctx, ferry_module *m, size_t first, size_t count,
                                            ferry_stream *s);
FERRY_API ferry_status ferry_module_set_grad_hook(ferry_module *m, ferry_grad_ready_fn fn,
                                                  void *ctx);

/* ---- losses ----
 * Metrics accumulate loss, correct predictions and sample count on the device, so
 * a training loop reads them once per epoch, not once per step. */
typedef struct ferry_metrics ferry_metrics;
FERRY_API ferry_status ferry_metrics_create(ferry_device d, ferry_metrics **out);
FERRY_API void ferry_metrics_destroy(ferry_metrics *m);
FERRY_API ferry_status ferry_metrics_reset(ferry_metrics *m, ferry_stream *s);
/* Waits for the device (all its streams). Mean loss per sample, accuracy in [0, 1] (0 when no
 * classification loss was added), samples seen. Fails (FERRY_ERR_INVALID_ARG)
 * when some label was outside [0, classes). */
FERRY_API ferry_status ferry_metrics_get(ferry_metrics *m, double *loss, double *accuracy,
                                          int64_t *count);

/* Mean cross-entropy of logits [N, C] against class labels [N] (i64 or i32),
 * as torch.nn.functional.cross_entropy. Adds to metrics (may be NULL). When
 * dlogits is not NULL, *dlogits gets dL/dlogits times grad_scale (1 normally; the
 * loss scale under mixed precision). A label outside [0, C) fails at once
 * (FERRY_ERR_INVALID_ARG, on every device: a wait for the device) and is also
 * reported by ferry_metrics_get. */
FERRY_API ferry_status ferry_cross_entropy(ferry_tensor *logits, ferry_tensor *labels,
                                           float grad_scale, ferry_metrics *metrics,
                                           ferry_stream *s, ferry_tensor **dlogits);
/* Mean squared error over all elements; pred and target have one shape and dtype. */
FERRY_API ferry_status ferry_mse_loss(ferry_tensor *pred, ferry_tensor *target, float grad_scale,
                                      ferry_metrics *metrics, ferry_stream *s,
                                      ferry_tensor **dpred);

/* ---- optimisers (PyTorch's update rules) ----
 * They update the module's parameters in place from its gradients; state
 * (momentum, moments) is created on the first step, on the parameters' device. */
typedef struct ferry_optim ferry_optim;
FERRY_API ferry_status ferry_sgd_create(ferry_module *m, double lr, double momentum,
                                        double weight_decay, ferry_optim **out);
/* dampening 0, nesterov false are the defaults of ferry_sgd_create. */
FERRY_API ferry_status ferry_sgd_create_ex(ferry_module *m, double lr, double momentum,
                                           double dampening, double weight_decay, bool nesterov,
                                           ferry_optim **out);
/* L2 weight decay added to the gradient (torch.optim.Adam). */
FERRY_API ferry_status ferry_adam_create(ferry_module *m, double lr, double beta1, double beta2,
                                         double eps, double weight_decay, ferry_optim **out);
/* Decoupled weight decay (torch.optim.AdamW; its default weight_decay is 0.01). */
FERRY_API ferry_status ferry_adamw_create(ferry_module *m, double lr, double beta1, double beta2,
                                          double eps, double weight_decay, ferry_optim **out);
FERRY_API void ferry_optim_destroy(ferry_optim *o);
FERRY_API ferry_status ferry_optim_step(ferry_optim *o, ferry_stream *s);
FERRY_API void ferry_optim_set_lr(ferry_optim *o, double lr);
FERRY_API double ferry_optim_lr(const ferry_optim *o);
/* Steps taken (steps mixed precision skipped do not count). The count lives on
 * the module's device, so this waits for the device's streams to read it; -1,
 * with ferry_last_error set, when the read fails; 0 for NULL. */
FERRY_API int64_t ferry_optim_step_count(const ferry_optim *o);

/* ---- mixed precision ----
 * The model computes in f16 or bf16 (BatchNorm statistics and affine parameters
 * stay f32) while the optimiser updates f32 master weights. The loss gradient is
 * multiplied by a dynamic scale; a step whose gradients hold inf or nan is
 * skipped and halves the scale, and growth_interval good steps in a row double
 * it (torch.cuda.amp.GradScaler's policy). */
typedef struct ferry_amp_config {
    ferry_dtype dtype;       /* FERRY_DTYPE_F16 or FERRY_DTYPE_BF16 */
    float init_scale;        /* 65536 */
    float growth_factor;     /* 2 */
    float backoff_factor;    /* 0.5 */
    int64_t growth_interval; /* 2000 */
} ferry_amp_config;
FERRY_API ferry_amp_config ferry_amp_config_default(ferry_dtype dt);
typedef struct ferry_amp ferry_amp;
/* Converts m to cfg->dtype with f32 master copies of its parameters. */
FERRY_API ferry_status ferry_amp_create(ferry_module *m, const ferry_amp_config *cfg,
                                        ferry_amp **out);
/* Destroying the amp leaves the model in its half dtype. */
FERRY_API void ferry_amp_destroy(ferry_amp *a);
/* The current loss scale. It lives on the device, so this waits for the
 * device's streams to read it (call it for logging, not every step); NaN, with
 * ferry_last_error set, when the read fails; 1 for NULL. */
FERRY_API float ferry_amp_scale(const ferry_amp *a);
/* Unscales the gradients into the masters; if all are finite, steps o on them and
 * copies the masters back into the half weights; then updates the loss scale.
 * The inf/nan check, the skip, the optimiser's step count and the scale are all
 * decided on the device, in s's order: with skipped NULL the call only queues
 * work and never waits for the device. With skipped non-NULL it waits for s to
 * answer whether this step was skipped. */
FERRY_API ferry_status ferry_amp_step(ferry_amp *a, ferry_optim *o, ferry_stream *s, bool *skipped);

/* One classification training step: zero_grad, forward, cross-entropy (scaled
 * when amp is not NULL), backward, optimiser (or amp) step. x is converted to the
 * model's dtype. If it fails (FERRY_ERR_DEVICE_OOM for a batch that does not
 * fit), the parameters are unchanged, saved activations are freed and the model
 * stays usable. With metrics, the step never waits for the device: a label
 * outside [0, classes) adds nothing to the loss and the gradients and is
 * reported by ferry_metrics_get (FERRY_ERR_INVALID_ARG); without metrics it
 * fails the step at once, as ferry_cross_entropy does. */
FERRY_API ferry_status ferry_train_step(ferry_module *m, ferry_optim *o, ferry_amp *amp,
                                        ferry_tensor *x, ferry_tensor *labels,
                                        ferry_metrics *metrics, ferry_stream *s);
/* ---- one CUDA graph per training step ----
 * ferry_train_step captured once (CUDA stream capture) and replayed for every
 * batch of the same shape: one graph launch instead of ~40 kernel launches.
 * Each step copies x and labels into the graph's own device buffers (x and
 * labels may be any tensors on the module's device, such as the loader's
 * batch) and launches the graph on s. The first step of a shape, and the first
 * after anything that may have moved the module's buffers or the optimiser's
 * state (another forward or backward on the module, such as ferry_eval_step;
 * ferry_module_to; a learning-rate change; a checkpoint load), runs eagerly;
 * the next captures. Results are those of ferry_train_step, bit for bit.
 * metrics is required (the graph cannot wait on the host to check labels).
 * On the CPU, or when x is not on the module's device, every step is eager.
 * A capture that fails (a step that would wait on the host or allocate) is an
 * error naming what it tried; the graph is dropped and the next step eager. */
typedef struct ferry_train_graph ferry_train_graph;
FERRY_API ferry_status ferry_train_graph_create(ferry_module *m, ferry_optim *o, ferry_amp *amp,
                                                ferry_metrics *metrics, ferry_train_graph **out);
FERRY_API void ferry_train_graph_destroy(ferry_train_graph *g);
FERRY_API ferry_status ferry_train_graph_step(ferry_train_graph *g, ferry_tensor *x,
                                              ferry_tensor *labels, ferry_stream *s);
/* How many captures g has made (for logs and tests). */
FERRY_API int64_t ferry_train_graph_captures(const ferry_train_graph *g);

/* Forward in evaluation mode plus loss and accuracy into metrics; restores the
 * module's mode afterwards. */
FERRY_API ferry_status ferry_eval_step(ferry_module *m, ferry_tensor *x, ferry_tensor *labels,
                                       ferry_metrics *metrics, ferry_stream *s);

/* ---- checkpoints: safetensors ----
 * A training run's state, for using a model later or resuming the run (README,
 * "Resume a run"). Parameters and buffers are saved under their state_dict
 * names, optimiser state under "optim.<param>.<state>" with its
 * hyper-parameters and step count in the header's __metadata__. What is given
 * is saved or restored:
 *   module  required: parameters and buffers (f32 masters under mixed precision)
 *           and each Dropout's draw counter (the masks to come)
 *   optim   its state (momentum, Adam moments) and step count
 *   amp     the loss scale and its growth tracker
 *   loader  its state (ferry_loader_state, in the metadata): loading restores it,
 *           so the next batch is the one the saved run would have had next
 *   metrics the running sums of the epoch under way (loss, correct predictions,
 *           samples; in the metadata, exactly): loading restores them, so the
 *           figures of an epoch resumed mid-way count the whole epoch, as the
 *           uninterrupted run's do. A checkpoint without them loads with a
 *           warning and leaves the metrics as they are.
 * Augmentation needs nothing more: it is keyed by (seed, epoch, sample).
 * The file is written beside the target and renamed over it after an fsync, the
 * folder synced after: a crash at any instant leaves the previous checkpoint or
 * the new one. The data's CRC-32 is in the header: a torn or changed file is
 * FERRY_ERR_FORMAT naming it. Loading checks every part (tensors, metadata, the
 * loader's fingerprint) before it changes any: a name, shape or dtype that
 * does not fit the module is FERRY_ERR_FORMAT / FERRY_ERR_SHAPE /
 * FERRY_ERR_DTYPE naming the tensor, and leaves everything as it was. */
typedef struct ferry_loader ferry_loader;
typedef struct ferry_checkpoint {
    ferry_module *module;
    ferry_optim *optim;
    ferry_amp *amp;
    ferry_loader *loader;
    ferry_metrics *metrics; /* may be NULL; the last field, so code written before it compiles */
} ferry_checkpoint;
FERRY_API ferry_status ferry_checkpoint_save(const char *path, const ferry_checkpoint *c);
FERRY_API ferry_status ferry_checkpoint_load(const char *path, const ferry_checkpoint *c);

/* A safetensors file: 8-byte little-endian header length, a JSON header
 * {"name": {"dtype": "F32", "shape": [..], "data_offsets": [a, b]}, ...,
 * "__metadata__": {"key": "value"}}, then the raw little-endian data. The parser
 * rejects anything malformed with FERRY_ERR_FORMAT. */
typedef struct ferry_safetensors ferry_safetensors;
FERRY_API ferry_status ferry_safetensors_open(const char *path, ferry_safetensors **out);
/* The same from bytes in memory (copied). */
FERRY_API ferry_status ferry_safetensors_parse(const void *data, size_t size,
                                               ferry_safetensors **out);
FERRY_API void ferry_safetensors_destroy(ferry_safetensors *f);
FERRY_API size_t ferry_safetensors_tensor_count(const ferry_safetensors *f);
FERRY_API const char *ferry_safetensors_name(const ferry_safetensors *f, size_t i);
/* FERRY_ERR_INVALID_ARG naming the tensor when absent. */
FERRY_API ferry_status ferry_safetensors_get(const ferry_safetensors *f, const char *name,
                                             ferry_device d, ferry_tensor **out);
/* dtype and shape (shape: FERRY_MAX_DIMS entries) of a tensor without reading it. */
FERRY_API ferry_status ferry_safetensors_info(const ferry_safetensors *f, const char *name,
                                              ferry_dtype *dt, int64_t *shape, size_t *ndim);
/* NULL when absent. */
FERRY_API const char *ferry_safetensors_metadata(const ferry_safetensors *f, const char *key);
/* meta: n_meta key/value pairs (meta[2i], meta[2i+1]); may be NULL. */
FERRY_API ferry_status ferry_safetensors_save(const char *path, const char *const *names,
                                              ferry_tensor *const *tensors, size_t n,
                                              const char *const *meta, size_t n_meta);

#ifdef __cplusplus
}
#endif
#endif
