/* `ferry info`: version, build features, every device with its properties, and
 * whether pinned host memory works. Exits 0 without a GPU. Devices served by the
 * simulated GPU (FERRY_SIM_GPUS) say so on their line. */
#include <stdio.h>
#include <string.h>

#include "ferry/train.h"
#ifdef FERRY_HAVE_CUDA
#include "device/cuda_check.h" /* ferry_cuda_error_text */
#endif
#include "cli_args.h"
#include "commands.h"

static double gib(size_t b) { return (double)b / (1024.0 * 1024.0 * 1024.0); }

/* Under a CUDA device's line: which of the build's GPU code runs on it, so a
 * missing architecture shows here rather than as "no kernel image" at the first
 * launch. The simulated GPU runs the CPU kernels; the check still tells what a
 * real GPU of its compute capability would run. */
static void print_arch_fit(const ferry_device_props *p)
{
    int arch = 0;
    ferry_arch_fit fit = ferry_cuda_arch_fit(ferry_cuda_archs(), p->cc_major, p->cc_minor, &arch);
    const char *sim = ferry_cuda_is_simulated() ? " (simulated: the CPU kernels run)" : "";
    if (*sim && !ferry_cuda_is_built())
        printf("          GPU code: none needed%s\n", sim);
    else if (fit == FERRY_ARCH_FIT_SASS)
        printf("          GPU code: sm_%d, machine code for this GPU%s\n", arch, sim);
    else if (fit == FERRY_ARCH_FIT_PTX)
        printf("          GPU code: compute_%d PTX, JIT-compiled by the driver at the first launch "
               "(CUDA_ARCH=%d%d builds machine code)%s\n", arch, p->cc_major, p->cc_minor, sim);
    else
        printf("          GPU code: NONE for compute capability %d.%d: kernels fail with \"no kernel "
               "image\"; rebuild with CUDA_ARCH=%d%d (a CUDA toolkit that supports it)%s\n",
               p->cc_major, p->cc_minor, p->cc_major, p->cc_minor, sim);
}

static void print_device(ferry_device d)
{
    char name[FERRY_DEVICE_NAME_MAX];
    ferry_device_props p;
    ferry_device_format(d, name, sizeof name);
    if (ferry_device_properties(d, &p) != FERRY_OK) {
        printf("  %-7s (properties unavailable: %s)\n", name, ferry_last_error());
        return;
    }
    if (d.type == FERRY_DEVICE_CPU)
        printf("  %-7s %s, %d cores, %.2f GiB memory (%.2f GiB available)\n", name, p.name,
               p.multiprocessors, gib(p.total_memory), gib(p.free_memory));
    else if (ferry_cuda_is_simulated())
        /* Say so on the device's own line: nothing below it is a measurement. */
        printf("  %-7s %s, compute capability %d.%d, %d SMs, %.2f GiB memory (%.2f GiB free) "
               "(simulated: FERRY_SIM_GPUS=%d; results follow CUDA's rules, timings mean nothing)\n",
               name, p.name, p.cc_major, p.cc_minor, p.multiprocessors, gib(p.total_memory),
               gib(p.free_memory), ferry_cuda_device_count());
    else
        printf("  %-7s %s, compute capability %d.%d, %d SMs, %.2f GiB memory (%.2f GiB free)\n",
               name, p.name, p.cc_major, p.cc_minor, p.multiprocessors, gib(p.total_memory),
               gib(p.free_memory));
    if (d.type == FERRY_DEVICE_CUDA)
        print_arch_fit(&p);
}

/* Takes one small piece from a pinned pool to see whether page-locking works. */
static void print_pinned(void)
{
    ferry_pinned_pool *pool = NULL;
    void *piece = NULL;
    if (ferry_pinned_pool_create(1 << 20, true, &pool) != FERRY_OK ||
        ferry_pinned_pool_alloc(pool, 4096, 0, &piece) != FERRY_OK) {
        printf("pinned memory: failed: %s\n", ferry_last_error());
        ferry_pinned_pool_destroy(pool);
        return;
    }
    ferry_pinned_pool_stats st;
    ferry_pinned_pool_stats_get(pool, &st);
    printf("pinned memory: %s\n",
           !st.pinned                 ? "no (no CUDA device; aligned pageable memory instead)"
           : ferry_cuda_is_simulated() ? "yes (simulated: ordinary memory the simulated GPU treats as page-locked)"
                                       : "yes (page-locked via cudaHostAlloc)");
    ferry_pinned_pool_free(pool, piece);
    ferry_pinned_pool_destroy(pool);
}

static void info_usage(FILE *f)
{
    fprintf(f, "usage: ferry info\nprints the version, build features, devices and pinned memory\n");
}

/* Why there is no GPU, in the README's words, with what the CUDA runtime said. */
static void print_no_gpu_reason(void)
{
    if (!ferry_cuda_is_built()) {
        printf("  no CUDA device: this build of ferry has no CUDA support (nvcc was not found, "
               "or CUDA=0)\n");
        return;
    }
    const char *said = "";
#ifdef FERRY_HAVE_CUDA
    int k = 0;
    cudaError_t e = cudaGetDeviceCount(&k);
    said = e != cudaSuccess ? ferry_cuda_error_text(e) : "";
    (void)cudaGetLastError();
#endif
    /* No driver at all is said as such (a too-old driver is a different fix). */
    if (!strncmp(said, "no CUDA driver installed", 24)) {
        printf("  no CUDA device: %s\n", said);
        return;
    }
    printf("  no CUDA device: this machine has 0 CUDA devices: no GPU or no driver%s%s%s\n",
           said[0] ? " (the CUDA runtime says: " : "", said, said[0] ? ")" : "");
}

int cmd_info(int argc, char **argv)
{
    if (argc > 1 && cli_is_help(argv[1])) {
        info_usage(stdout);
        return 0;
    }
    if (argc > 1)
        return cli_unknown("ferry info", argv[1], info_usage);
    printf("ferry %s\n", ferry_version());
    printf("build: %s\n", ferry_build_features());
    printf("GPU code: %s\n", ferry_cuda_is_built() ? ferry_cuda_archs() : "none (built without CUDA)");
    printf("distributed: %s\n", !ferry_dist_mpi_is_built() ? "no (built without MPI)"
                                 : ferry_dist_nccl_is_built() ? "MPI (CPU) and NCCL (CUDA)"
                                                           : "MPI (CPU; no NCCL for CUDA)");
    int n = ferry_cuda_device_count();
    printf("devices:\n");
    print_device(ferry_cpu());
    if (n == 0)
        print_no_gpu_reason();
    for (int i = 0; i < n; i++)
        print_device(ferry_cuda(i));
    print_pinned();
    return 0;
}
