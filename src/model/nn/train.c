/* One-call training and evaluation steps for classifiers: the loop every sample
 * would otherwise write, with mixed precision behind one argument and a failed
 * step (out of memory) leaving the model as it was. */
#include "common/error.h"
#include "ferry/ops.h"
#include "model/nn/internal.h"

void fm_set_dtype_all(ferry_module *m, ferry_dtype dt)
{
    m->dtype = dt;
    m->calls++;
    for (size_t i = 0; i < m->nchildren; i++)
        fm_set_dtype_all(m->children[i], dt);
}

ferry_status ferry_train_step(ferry_module *m, ferry_optim *o, ferry_amp *amp, ferry_tensor *x,
                              ferry_tensor *labels, ferry_metrics *metrics, ferry_stream *s)
{
    if (!m || !o || !x || !labels)
        return FERRY_ARG_ERROR("%s is NULL", !m ? "module" : !o ? "optimiser" : !x ? "x" : "labels");
    if (!m->training)
        return ferry_fail(FERRY_ERR_BAD_STATE, "%s is in eval mode (call ferry_module_train(m, true))", m->name);
    ferry_tensor *logits = NULL, *dlogits = NULL;
    /* The loss scale stays on the device: the loss kernel reads it there, so the
     * step never waits for the previous step's scale update. */
    ferry_tensor *scale = NULL;
    ferry_status st = amp ? fm_amp_loss_scale(amp, &scale) : FERRY_OK;
    if (st == FERRY_OK)
        st = ferry_module_zero_grad(m, s);
    /* x in the model's dtype (mixed precision: f16 or bf16) in a buffer the
     * next step reuses, so a step allocates nothing after its first. */
    ferry_tensor *xin = NULL;
    if (st == FERRY_OK && x->dtype != m->dtype && !m->index_input && ferry_device_eq(x->device, m->device)) {
        st = fm_buffer(&m->inbuf, x->shape, x->ndim, m->dtype, m->device, s, &xin);
        if (st == FERRY_OK)
            st = ferry_tensor_copy(xin, x, s);
    } else if (st == FERRY_OK) {
        xin = ferry_tensor_retain(x);
    }
    if (st == FERRY_OK)
        st = ferry_module_forward(m, xin, s, &logits);
    ferry_tensor_release(xin);
    if (st == FERRY_OK)
        st = fm_cross_entropy_(logits, labels, 1.0f, scale, false, metrics, s, &m->lossbuf, &dlogits);
    ferry_tensor_release(logits);
    if (st == FERRY_OK)
        st = ferry_module_backward(m, dlogits, s, NULL);
    ferry_tensor_release(dlogits);
    if (st == FERRY_OK)
        st = amp ? ferry_amp_step(amp, o, s, NULL) : ferry_optim_step(o, s);
    if (st != FERRY_OK)
        fm_drop_saved_all(m);
    return st;
}

ferry_status ferry_eval_step(ferry_module *m, ferry_tensor *x, ferry_tensor *labels,
                             ferry_metrics *metrics, ferry_stream *s)
{
    if (!m || !x || !labels)
        return FERRY_ARG_ERROR("%s is NULL", !m ? "module" : !x ? "x" : "labels");
    bool was = m->training;
    ferry_module_train(m, false);
    ferry_tensor *logits = NULL;
    ferry_status st = ferry_module_forward(m, x, s, &logits);
    if (st == FERRY_OK)
        st = ferry_cross_entropy(logits, labels, 1.0f, metrics, s, NULL);
    ferry_tensor_release(logits);
    ferry_module_train(m, was);
    return st;
}
