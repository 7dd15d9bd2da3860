/* Devices: parsing and formatting "cpu" / "cuda" / "cuda:N", how many GPUs there
 * are, the current device and its guard, properties, synchronize, and which
 * backend serves a device. Also the version and build description. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "device/backend.h"
#include "device/sim/sim.h"
#include "device/device_internal.h"
#include "common/error.h"

/* The device count is asked of the driver once: it cannot change while the
 * process runs, and asking again costs a driver call (and, without a driver, a
 * failed library load) on every tensor operation. Written once under
 * pthread_once, read-only afterwards. */
static pthread_once_t count_once = PTHREAD_ONCE_INIT;
static int cuda_count;

static void count_devices(void)
{
    /* The simulation, when asked for, replaces real GPUs (sim.h). */
    if ((cuda_count = ferry_sim_device_count()) > 0)
        return;
#if FERRY_HAVE_CUDA
    cuda_count = ferry_backend_cuda()->device_count();
#else
    cuda_count = 0;
#endif
}

int ferry_cuda_device_count(void)
{
    pthread_once(&count_once, count_devices);
    return cuda_count;
}

bool ferry_cuda_is_available(void) { return ferry_cuda_device_count() > 0; }

bool ferry_cuda_is_built(void)
{
#if FERRY_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

/* FERRY_VERSION is in include/ferry/export.h, the one place the version is written. */
const char *ferry_version(void) { return FERRY_VERSION; }

/* The text is a pure function of the build; a thread-local buffer keeps
 * concurrent callers from racing on the formatting. */
/* The BLAS is libferry-train's, named by the Makefile (BLAS=): libferry does
 * not include a CBLAS header. */
#ifndef FERRY_BUILD_BLAS
#define FERRY_BUILD_BLAS "a CBLAS"
#endif
const char *ferry_build_features(void)
{
#if FERRY_HAVE_CUDA
    static _Thread_local char buf[96];
    int v = ferry_cuda_runtime_version();
    snprintf(buf, sizeof buf, "CUDA %d.%d, cuBLAS, BLAS: " FERRY_BUILD_BLAS, v / 1000, (v % 1000) / 10);
    return buf;
#else
    return "CPU only (no CUDA), BLAS: " FERRY_BUILD_BLAS;
#endif
}

/* The backend serving every cuda:N: the simulation or the CUDA runtime. */
static const ferry_backend *gpu_backend(void)
{
    if (ferry_sim_device_count() > 0)
        return ferry_backend_sim();
#if FERRY_HAVE_CUDA
    return ferry_backend_cuda();
#else
    return NULL;
#endif
}

bool ferry_cuda_is_simulated(void) { return ferry_sim_device_count() > 0; }

const ferry_backend *ferry_backend_gpu(void)
{
    if (ferry_cuda_is_available())
        return gpu_backend();
    return NULL;
}

static ferry_status no_cuda_device(const char *what)
{
    if (!ferry_cuda_is_built())
        return ferry_fail(FERRY_ERR_NO_DEVICE,
                          "%s: no CUDA device (this build of ferry has no CUDA support; "
                          "rebuild with nvcc and CUDA=1)", what);
#if FERRY_HAVE_CUDA
    if (ferry_cuda_driver_version() == 0)
        return ferry_fail(FERRY_ERR_NO_DEVICE, "%s: no CUDA device (no CUDA driver installed: no GPU)",
                          what);
#endif
    return ferry_fail(FERRY_ERR_NO_DEVICE,
                      "%s: no CUDA device (this machine has 0 CUDA devices: no GPU or no driver)",
                      what);
}

/* A sentence naming how many devices exist, for "cuda:7 does not exist". */
static ferry_status missing_device(const char *quoted)
{
    int n = ferry_cuda_device_count();
    if (n == 0)
        return no_cuda_device(quoted);
    if (n == 1)
        return ferry_fail(FERRY_ERR_NO_DEVICE,
                          "%s does not exist: this machine has 1 CUDA device (cuda:0)", quoted);
    return ferry_fail(FERRY_ERR_NO_DEVICE,
                      "%s does not exist: this machine has %d CUDA devices (cuda:0 to cuda:%d)",
                      quoted, n, n - 1);
}

const ferry_backend *ferry_backend_for(ferry_device d, ferry_status *st)
{
    d = ferry_device_resolve(d);
    if (d.type == FERRY_DEVICE_CPU && d.index == 0) {
        *st = FERRY_OK;
        return ferry_backend_cpu();
    }
    char name[64];
    if (d.type == FERRY_DEVICE_CUDA && d.index >= 0) {
        if (d.index < ferry_cuda_device_count()) {
            *st = FERRY_OK;
            return gpu_backend();
        }
        snprintf(name, sizeof name, "device cuda:%d", d.index);
        *st = missing_device(name);
        return NULL;
    }
    if (d.type == FERRY_DEVICE_INVALID)
        *st = ferry_fail(FERRY_ERR_INVALID_ARG, "the invalid device (what a failed "
                         "ferry_device_parse leaves: check its status)");
    else
        *st = ferry_fail(FERRY_ERR_INVALID_ARG, "invalid device (type %d, index %d)", (int)d.type,
                         d.index);
    return NULL;
}

ferry_status ferry_device_check(ferry_device d)
{
    ferry_status st;
    ferry_backend_for(d, &st);
    return st;
}

ferry_status ferry_device_parse(const char *s, ferry_device *out)
{
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    /* Until parsed: nothing usable, not the zero (default) device. */
    *out = (ferry_device){FERRY_DEVICE_INVALID, -1};
    if (!s)
        return ferry_fail(FERRY_ERR_INVALID_ARG,
                          "invalid device string (null): expected \"cpu\", \"cuda\", \"cuda:N\" or \"default\"");
    if (!strcmp(s, "cpu")) {
        *out = ferry_cpu();
        return FERRY_OK;
    }
    if (!strcmp(s, "default")) { /* the zero device: resolved where it is used */
        *out = (ferry_device){FERRY_DEVICE_DEFAULT, 0};
        return FERRY_OK;
    }
    char quoted[96];
    snprintf(quoted, sizeof quoted, "device \"%.80s\"", s);
    if (!strcmp(s, "cuda")) {
        if (!ferry_cuda_is_available())
            return no_cuda_device(quoted);
        int cur = 0;
        ferry_status st = ferry_cuda_current_device(&cur);
        if (st != FERRY_OK)
            return st;
        *out = ferry_cuda(cur);
        return FERRY_OK;
    }
    if (!strncmp(s, "cuda:", 5) && s[5] >= '0' && s[5] <= '9') {
        long long v = 0;
        const char *p = s + 5;
        for (; *p >= '0' && *p <= '9'; p++) {
            v = v * 10 + (*p - '0');
            if (v > INT_MAX)
                break;
        }
        if (*p == '\0' && v <= INT_MAX) {
            if (v >= ferry_cuda_device_count())
                return missing_device(quoted);
            *out = ferry_cuda((int)v);
            return FERRY_OK;
        }
    }
    return ferry_fail(FERRY_ERR_INVALID_ARG,
                      "invalid device string \"%.80s\": expected \"cpu\", \"cuda\", \"cuda:N\" or \"default\" "
                      "with N a device index", s);
}

const char *ferry_device_format(ferry_device d, char *buf, size_t size)
{
    if (!buf || size == 0)
        return "";
    if (d.type == FERRY_DEVICE_DEFAULT && d.index == 0)
        snprintf(buf, size, "default");
    else if (d.type == FERRY_DEVICE_CPU)
        snprintf(buf, size, "cpu");
    else if (d.type == FERRY_DEVICE_CUDA)
        snprintf(buf, size, "cuda:%d", d.index);
    else
        snprintf(buf, size, "invalid");
    return buf;
}

ferry_device ferry_device_default(void)
{
    return ferry_cuda_is_available() ? ferry_cuda(0) : ferry_cpu();
}

/* Only the zero value resolves: {DEFAULT, 3} stays invalid, as a typo would be. */
ferry_device ferry_device_resolve(ferry_device d)
{
    if (d.type == FERRY_DEVICE_DEFAULT && d.index == 0)
        return ferry_device_default();
    return d;
}

ferry_status ferry_cuda_current_device(int *index)
{
    if (!index)
        return FERRY_ARG_ERROR("index is NULL");
    const ferry_backend *be = ferry_backend_gpu();
    if (!be)
        return no_cuda_device(__func__);
    return be->get_device(index);
}

ferry_status ferry_cuda_set_device(int index)
{
    ferry_status st;
    const ferry_backend *be = ferry_backend_for(ferry_cuda(index), &st);
    if (!be)
        return st;
    return be->set_device(index);
}

ferry_status ferry_device_guard_enter(ferry_device_guard *g, ferry_device d)
{
    if (!g)
        return FERRY_ARG_ERROR("guard is NULL");
    g->prev_index = -1;
    d = ferry_device_resolve(d);
    ferry_status st;
    const ferry_backend *be = ferry_backend_for(d, &st);
    if (!be)
        return st;
    if (d.type == FERRY_DEVICE_CPU)
        return FERRY_OK;
    int prev = 0;
    if ((st = be->get_device(&prev)) != FERRY_OK)
        return st;
    if (prev != d.index && (st = be->set_device(d.index)) != FERRY_OK)
        return st;
    g->prev_index = prev;
    return FERRY_OK;
}

void ferry_device_guard_exit(ferry_device_guard *g)
{
    if (!g || g->prev_index < 0)
        return;
    const ferry_backend *be = ferry_backend_gpu();
    if (be && be->set_device(g->prev_index) != FERRY_OK)
        ferry_log(FERRY_LOG_WARN, "device guard: could not restore cuda:%d: %s", g->prev_index,
                  ferry_last_error());
    g->prev_index = -1;
}

ferry_status ferry_device_properties(ferry_device d, ferry_device_props *out)
{
    if (!out)
        return FERRY_ARG_ERROR("out is NULL");
    ferry_status st;
    const ferry_backend *be = ferry_backend_for(d, &st);
    if (!be)
        return st;
    memset(out, 0, sizeof *out);
    return be->props(d.index, out);
}

ferry_status ferry_device_synchronize(ferry_device d)
{
    ferry_status st;
    const ferry_backend *be = ferry_backend_for(d, &st);
    if (!be)
        return st;
    return be->synchronize(d.index);
}
