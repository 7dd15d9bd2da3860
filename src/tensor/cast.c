/* The tensor core's dtype conversion on each backend (ferry_tensor_to_dtype):
 * a data kernel of the core, picked by the backend's kind, written once in
 * tensor/half.h for the host (half.c) and the GPU (tensor_cuda.cu). */
#include "common/error.h"
#include "device/backend.h"
#include "device/device_internal.h"
#include "device/sim/sim.h"
#include "tensor/internal.h"

typedef struct cast_args {
    const void *x;
    void *y;
    ferry_dtype xdt, ydt;
    int64_t n;
} cast_args;

/* On the simulated GPU's stream thread, when it runs CPU code. */
static ferry_status cast_host_op(void *arg)
{
    const cast_args *a = arg;
    ferry_convert_host_(a->x, a->xdt, a->y, a->ydt, a->n);
    return FERRY_OK;
}

static ferry_status cast_sim(int dev, void *native, const cast_args *a)
{
#if FERRY_SIM_KERNELS
    if (ferry_sim_cuda_sources())
        return ferry_convert_cuda__sim(a->x, a->xdt, a->y, a->ydt, a->n, dev, native);
#endif
    return ferry_sim_launch_host(dev, native, "kernel cast", cast_host_op, a, sizeof *a);
}

ferry_status ferry_tensor_cast_(ferry_device d, ferry_stream *s, ferry_dtype xdt, const void *x,
                                ferry_dtype ydt, void *y, int64_t n)
{
    ferry_status st;
    if (s && !ferry_device_eq(ferry_stream_device(s), d))
        return ferry_fail(FERRY_ERR_DEVICE_MISMATCH, "dtype conversion: the stream is on another device "
                          "than the tensor");
    const ferry_backend *b = ferry_backend_for(d, &st);
    if (!b)
        return st;
    if (n <= 0)
        return FERRY_OK;
    void *native = s ? ferry_stream_native(s) : NULL;
    cast_args a = {x, y, xdt, ydt, n};
    switch (b->kind) {
    case FERRY_BACKEND_CPU:
        ferry_convert_host_(x, xdt, y, ydt, n);
        return FERRY_OK;
    case FERRY_BACKEND_SIM:
        return cast_sim(d.index, native, &a);
    case FERRY_BACKEND_CUDA:
#if FERRY_HAVE_CUDA
        return ferry_convert_cuda_(x, xdt, y, ydt, n, d.index, native);
#else
        break;
#endif
    }
    return ferry_fail(FERRY_ERR_NO_DEVICE, "dtype conversion: no kernel for the device's backend (%s)", b->name);
}
