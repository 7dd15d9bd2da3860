/* ferry_dist in a build without MPI (make DIST=0, or mpicc not found): init
 * says so, and nothing else can be reached without a ferry_dist. */
#include "common/error.h"
#include "ferry/dist.h"

static ferry_status not_built(const char *where)
{
    return ferry_fail(FERRY_ERR_UNSUPPORTED,
                      "%s: this build of ferry has no MPI (built with DIST=0 or without mpicc); "
                      "install libopenmpi-dev and rebuild",
                      where);
}

ferry_dist_config ferry_dist_config_default(void)
{
    ferry_dist_config c = {.device = {FERRY_DEVICE_DEFAULT, 0}, .timeout_s = 0};
    return c;
}

ferry_status ferry_dist_create(const ferry_dist_config *cfg, ferry_dist **out)
{
    (void)cfg;
    if (out)
        *out = NULL;
    return not_built(__func__);
}

void ferry_dist_destroy(ferry_dist *d) { (void)d; }
int ferry_dist_rank(const ferry_dist *d) { (void)d; return 0; }
int ferry_dist_world_size(const ferry_dist *d) { (void)d; return 1; }
int ferry_dist_local_rank(const ferry_dist *d) { (void)d; return 0; }
ferry_device ferry_dist_device(const ferry_dist *d) { (void)d; return ferry_cpu(); }
const char *ferry_dist_backend(const ferry_dist *d) { (void)d; return "none"; }
bool ferry_dist_mpi_is_built(void) { return false; }
bool ferry_dist_nccl_is_built(void) { return false; }

ferry_status ferry_dist_all_reduce(ferry_dist *d, ferry_tensor *t, ferry_reduce_op op,
                                   ferry_stream *s)
{
    (void)d, (void)t, (void)op, (void)s;
    return not_built(__func__);
}

ferry_status ferry_dist_broadcast(ferry_dist *d, ferry_tensor *t, int root, ferry_stream *s)
{
    (void)d, (void)t, (void)root, (void)s;
    return not_built(__func__);
}

ferry_status ferry_dist_barrier(ferry_dist *d)
{
    (void)d;
    return not_built(__func__);
}

ferry_status ferry_dist_abort(ferry_dist *d, ferry_status why)
{
    (void)d;
    return why;
}

ferry_status ferry_ddp_create(ferry_dist *d, ferry_module *m, size_t bucket_bytes, ferry_ddp **out)
{
    (void)d, (void)m, (void)bucket_bytes;
    if (out)
        *out = NULL;
    return not_built(__func__);
}

void ferry_ddp_destroy(ferry_ddp *p) { (void)p; }
size_t ferry_ddp_bucket_count(const ferry_ddp *p) { (void)p; return 0; }

ferry_status ferry_ddp_sync_buffers(ferry_ddp *p, ferry_stream *s)
{
    (void)p, (void)s;
    return not_built(__func__);
}
