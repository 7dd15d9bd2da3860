/* The simulated GPU's launch of a host function as a stream operation, for the
 * data kernels (the loader's batch conversion, the tensor core's dtype cast)
 * when the simulation runs CPU code rather than the CUDA sources, and the
 * choice between the two (FERRY_SIM_KERNELS). The argument block is copied
 * into the operation, as a CUDA launch copies its parameters: the caller's
 * copy is gone by the time the operation runs. */
#include <pthread.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "device/sim/sim.h"

typedef struct host_op {
    sim_op op;
    ferry_sim_host_fn fn;
    const char *what;
    bool fault;
    alignas(max_align_t) unsigned char arg[];
} host_op;

static ferry_status host_op_run(sim_op *op)
{
    host_op *h = (host_op *)op;
    if (h->fault)
        return ferry_fail(FERRY_ERR_CUDA, "%s: injected fault (an illegal memory access)", h->what);
    return h->fn(h->arg);
}

ferry_status ferry_sim_launch_host(int dev, void *native, const char *what, ferry_sim_host_fn fn,
                                   const void *arg, size_t bytes)
{
    sim_stream *s;
    ferry_status st = ferry_sim_launch_stream(dev, native, what, &s);
    if (st != FERRY_OK)
        return st;
    /* The simulator's bookkeeping uses malloc on purpose (docs/DESIGN.md, section 6). */
    host_op *h = calloc(1, sizeof *h + bytes);
    if (!h)
        return ferry_fail(FERRY_ERR_NO_MEMORY, "%s: no memory to launch", what);
    h->op.run = host_op_run;
    h->op.what = what;
    h->fn = fn;
    h->what = what;
    h->fault = ferry_sim_take_fault(dev);
    if (bytes)
        memcpy(h->arg, arg, bytes);
    return ferry_sim_enqueue(s, &h->op, NULL);
}

#if FERRY_SIM_KERNELS
static bool cuda_sources;
static pthread_once_t cuda_sources_once = PTHREAD_ONCE_INIT;

static void read_kernels_choice(void)
{
    const char *v = getenv("FERRY_SIM_KERNELS");
    cuda_sources = !(v && strcmp(v, "cpu") == 0);
    if (v && *v && strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0)
        ferry_log(FERRY_LOG_WARN, "FERRY_SIM_KERNELS=%s: expected cuda or cpu; running the CUDA sources", v);
}
#endif

bool ferry_sim_cuda_sources(void)
{
#if FERRY_SIM_KERNELS
    pthread_once(&cuda_sources_once, read_kernels_choice);
    return cuda_sources;
#else
    return false;
#endif
}
