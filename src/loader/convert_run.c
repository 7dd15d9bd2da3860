/* The loader's batch conversion on each backend: its own data kernel, picked by
 * the backend's kind, so the device layer carries no kernel table for it and
 * the loader needs nothing of the training library's kernels. */
#include "common/error.h"
#include "device/backend.h"
#include "device/device_internal.h"
#include "device/sim/sim.h"
#include "loader/convert.h"

typedef struct convert_args {
    ferry_convert_spec spec;
    const void *src;
    void *dst;
} convert_args;

/* On the simulated GPU's stream thread, when it runs CPU code. */
static ferry_status convert_host_op(void *arg)
{
    const convert_args *a = arg;
    ferry_convert_cpu(&a->spec, a->src, a->dst);
    return FERRY_OK;
}

static ferry_status convert_sim(int dev, const ferry_convert_spec *spec, const void *src, void *dst,
                                void *native)
{
#if FERRY_SIM_KERNELS
    if (ferry_sim_cuda_sources())
        return ferry_convert_cuda_sim(dev, spec, src, dst, native);
#endif
    convert_args a = {*spec, src, dst};
    return ferry_sim_launch_host(dev, native, "kernel batch_convert", convert_host_op, &a, sizeof a);
}

static ferry_status check_stream(ferry_device d, ferry_stream *s)
{
    if (!s || ferry_device_eq(ferry_stream_device(s), d))
        return FERRY_OK;
    char a[FERRY_DEVICE_NAME_MAX], b[FERRY_DEVICE_NAME_MAX];
    return ferry_fail(FERRY_ERR_DEVICE_MISMATCH, "batch conversion: the stream is on %s, the batch on %s",
                      ferry_device_format(ferry_stream_device(s), a, sizeof a),
                      ferry_device_format(d, b, sizeof b));
}

ferry_status ferry_convert_batch(ferry_device d, ferry_stream *s, const ferry_convert_spec *spec,
                                 const void *src, void *dst)
{
    /* scale and shift hold FERRY_CONVERT_MAX_CHANNELS values: more would be read past them. */
    if (spec->affine && spec->channels > FERRY_CONVERT_MAX_CHANNELS)
        return ferry_fail(FERRY_ERR_LIMIT, "batch conversion: %zu channels with scale and shift; the kernel "
                          "holds %d", spec->channels, FERRY_CONVERT_MAX_CHANNELS);
    ferry_status st = check_stream(d, s);
    if (st != FERRY_OK)
        return st;
    const ferry_backend *b = ferry_backend_for(d, &st);
    if (!b)
        return st;
    void *native = s ? ferry_stream_native(s) : NULL;
    switch (b->kind) {
    case FERRY_BACKEND_CPU:
        ferry_convert_cpu(spec, src, dst);
        return FERRY_OK;
    case FERRY_BACKEND_SIM:
        return convert_sim(d.index, spec, src, dst, native);
    case FERRY_BACKEND_CUDA:
#if FERRY_HAVE_CUDA
        return ferry_convert_cuda(d.index, spec, src, dst, native);
#else
        break;
#endif
    }
    return ferry_fail(FERRY_ERR_NO_DEVICE, "batch conversion: no kernel for the device's backend (%s)", b->name);
}
