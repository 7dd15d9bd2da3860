/* The simulated GPU's kernel table. By default it is the CUDA sources compiled
 * for the host (fk_cuda_sim_table, which launches each kernel as a stream
 * operation: kernel_exec.c). FERRY_SIM_KERNELS=cpu, or a build without the CUDA
 * toolkit's headers, runs the CPU kernels instead, each launched as a stream
 * operation that runs the CPU kernel on the stream's thread, in stream order.
 * Such a launch copies its arguments, and the small structs some of them point
 * to (an fk_nd, an fk_conv, an fk_gemm, ...), because the caller's copies are gone by the time
 * the operation runs, exactly as a CUDA launch copies its parameters. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "device/sim/sim.h"
#include "model/kernels/kernels.h"

/* Room for the pointed-to structs a launch keeps. */
typedef struct sim_keep {
    fk_nd nd;
    fk_conv conv;
    fk_gemm gemm;
    fk_plist plist;
    fk_zlist zlist;
    fk_xent xent;
    fk_bn bn;
    fk_sgd sgd;
    fk_adam adam;
    fk_embed embed;
} sim_keep;

typedef void (*keep_fn)(sim_keep *k, void *field);

/* keep_<field>: gives the launch its own copy of the struct an argument points
 * at, and points the argument at that copy. */
#define SIM_KEEP_STRUCT(type, field)                                                               \
    static void keep_##field(sim_keep *k, void *arg)                                               \
    {                                                                                              \
        const type **a = arg;                                                                      \
        if (*a) {                                                                                  \
            k->field = **a;                                                                        \
            *a = &k->field;                                                                        \
        }                                                                                          \
    }
SIM_KEEP_STRUCT(fk_nd, nd)
SIM_KEEP_STRUCT(fk_conv, conv)
SIM_KEEP_STRUCT(fk_gemm, gemm)
SIM_KEEP_STRUCT(fk_plist, plist)
SIM_KEEP_STRUCT(fk_zlist, zlist)
SIM_KEEP_STRUCT(fk_xent, xent)
SIM_KEEP_STRUCT(fk_bn, bn)
SIM_KEEP_STRUCT(fk_sgd, sgd)
SIM_KEEP_STRUCT(fk_adam, adam)
SIM_KEEP_STRUCT(fk_embed, embed)

static void keep_value(sim_keep *k, void *field)
{
    (void)k;
    (void)field;
}

#define SIM_KEEP_FN(x) _Generic((x), const fk_nd *: keep_nd,                                      \
                                    const fk_conv *: keep_conv,                                      \
                                    const fk_gemm *: keep_gemm,                                      \
                                    const fk_plist *: keep_plist,                                    \
                                    const fk_zlist *: keep_zlist,                                    \
                                    const fk_xent *: keep_xent,                                      \
                                    const fk_bn *: keep_bn,                                          \
                                    const fk_sgd *: keep_sgd,                                        \
                                    const fk_adam *: keep_adam,                                      \
                                    const fk_embed *: keep_embed, default: keep_value)

static ferry_status injected_fault(const char *kernel)
{
    return ferry_fail(FERRY_ERR_CUDA, "kernel %s: injected fault (an illegal memory access)", kernel);
}

#if FERRY_SIM_KERNELS
#define SIM_CUDA_CALL(name, ...)                                                                   \
    if (ferry_sim_cuda_sources())                                                                        \
        return fk_cuda_sim_table.name(c, FK_MAP(FK_ARG, FK_COMMA, __VA_ARGS__));
#else
#define SIM_CUDA_CALL(name, ...)
#endif

static fk_ctx cpu_ctx(void)
{
    fk_ctx c = {0};
    c.dev = ferry_cpu();
    c.k = &fk_cpu_table;
    return c;
}

/* Locals end in _ so that no kernel parameter can shadow them. */
#define SIM_FIELD(t, n) t n;
#define SIM_USE(t, n) k_->arg.n
#define SIM_STORE(t, n) k_->arg.n = n; SIM_KEEP_FN(k_->arg.n)(&k_->keep, (void *)&k_->arg.n);

#define SIM_KERNEL(name, ...)                                                                      \
    typedef struct sim_k_##name {                                                                  \
        sim_op op;                                                                                 \
        sim_keep keep;                                                                             \
        bool fault;                                                                                \
        struct {                                                                                   \
            FK_MAP(SIM_FIELD, FK_NOSEP, __VA_ARGS__)                                               \
        } arg;                                                                                     \
    } sim_k_##name;                                                                                \
    static ferry_status sim_run_##name(sim_op *op_)                                                \
    {                                                                                              \
        sim_k_##name *k_ = (sim_k_##name *)op_;                                                    \
        if (k_->fault)                                                                             \
            return injected_fault(#name);                                                          \
        fk_ctx cpu_ = cpu_ctx();                                                                   \
        return fk_cpu_table.name(&cpu_, FK_MAP(SIM_USE, FK_COMMA, __VA_ARGS__));                   \
    }                                                                                              \
    static ferry_status sim_##name(const fk_ctx *c, FK_PARAMS(__VA_ARGS__))                        \
    {                                                                                              \
        SIM_CUDA_CALL(name, __VA_ARGS__)                                                           \
        sim_stream *s_;                                                                            \
        ferry_status st_ = ferry_sim_launch_stream(c->dev.index, c->native, "kernel " #name, &s_); \
        if (st_ != FERRY_OK)                                                                       \
            return st_;                                                                            \
        sim_k_##name *k_ = calloc(1, sizeof *k_);                                                  \
        if (!k_)                                                                                   \
            return ferry_fail(FERRY_ERR_NO_MEMORY, "kernel " #name ": no memory to launch");       \
        k_->op.run = sim_run_##name;                                                               \
        k_->op.what = "kernel " #name;                                                             \
        k_->fault = ferry_sim_take_fault(c->dev.index);                                            \
        FK_MAP(SIM_STORE, FK_NOSEP, __VA_ARGS__)                                                   \
        return ferry_sim_enqueue(s_, &k_->op, NULL);                                                     \
    }

FK_KERNELS(SIM_KERNEL)

#define SIM_ENTRY(name, ...) .name = sim_##name,
const fk_table fk_sim_table = {FK_KERNELS(SIM_ENTRY)};
