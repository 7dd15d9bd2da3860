/* Training checkpoints: a run interrupted anywhere and resumed from its last
 * checkpoint (model, optimiser, loss scaler, Dropout's draws, loader position)
 * ends bit-identical to the uninterrupted run, on the CPU and on a GPU, with
 * another number of workers; a checkpoint write that fails at any step, or a
 * process killed while writing, leaves the previous checkpoint whole; a torn or
 * changed file is refused by name. */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

int64_t ferry_debug_fail_io_after(int64_t k); /* src/common/atomic_file.h */

enum { N = 36, SIDE = 8, CLASSES = 4, BATCH = 5, EPOCHS = 2 };

static const char *make_folder(void)
{
    static char root[512];
    if (root[0])
        return root;
    snprintf(root, sizeof root, "%s", ft_tmp("data"));
    uint8_t px[SIDE * SIDE];
    char path[600];
    for (size_t i = 0; i < N; i++) {
        for (size_t j = 0; j < sizeof px; j++)
            px[j] = (uint8_t)((i % CLASSES) * 60 + (j % SIDE) * 5 + i);
        snprintf(path, sizeof path, "%s/c%zu/%03zu.png", root, i % CLASSES, i);
        ft_write_file(path, "", 0);
        ASSERT_OK(ferry_png_save(path, px, SIDE, SIDE, 1));
    }
    return root;
}

typedef struct run {
    ferry_dataset *ds;
    ferry_loader *loader;
    ferry_module *net;
    ferry_optim *opt;
    ferry_amp *amp;
    ferry_device dev;
} run;

typedef struct variant {
    bool adam, amp;
} variant;

static void run_open(run *r, const char *device, size_t workers, variant v)
{
    memset(r, 0, sizeof *r);
    ASSERT_OK(ferry_device_parse(device, &r->dev));
    ferry_image_config cfg = ferry_image_config_default();
    cfg.random_crop_pad = 1;
    cfg.random_hflip = true;
    ASSERT_OK(ferry_dataset_image_folder(make_folder(), &cfg, &r->ds));
    ferry_loader_config c = ferry_loader_config_default();
    c.dataset = r->ds;
    c.batch_size = BATCH;
    c.shuffle = true;
    c.seed = 5;
    c.num_workers = workers ? workers : FERRY_LOADER_NO_WORKERS;
    c.device = ft_device(device);
    c.pin_memory = FERRY_PIN_MEMORY_OFF;
    ASSERT_OK(ferry_loader_create(&c, &r->loader));
    ferry_module *l[5];
    ASSERT_OK(ferry_sequential_create(&r->net));
    ASSERT_OK(ferry_flatten_create(&l[0]));
    ASSERT_OK(ferry_linear_create(SIDE * SIDE, 16, true, &l[1]));
    ASSERT_OK(ferry_relu_create(&l[2]));
    ASSERT_OK(ferry_dropout_create(0.25, 77, &l[3]));
    ASSERT_OK(ferry_linear_create(16, CLASSES, true, &l[4]));
    for (int i = 0; i < 5; i++)
        ASSERT_OK(ferry_sequential_add(r->net, l[i]));
    ASSERT_OK(ferry_module_init(r->net, 3));
    ASSERT_OK(ferry_module_to(r->net, r->dev));
    ferry_module_train(r->net, true);
    if (v.amp) {
        ferry_amp_config ac = ferry_amp_config_default(FERRY_DTYPE_BF16);
        ac.growth_interval = 3; /* so the scale changes within the run */
        ASSERT_OK(ferry_amp_create(r->net, &ac, &r->amp));
    }
    if (v.adam)
        ASSERT_OK(ferry_adam_create(r->net, 0.01, 0.9, 0.999, 1e-8, 0.0, &r->opt));
    else
        ASSERT_OK(ferry_sgd_create(r->net, 0.05, 0.9, 1e-4, &r->opt));
}

static void run_close(run *r)
{
    ferry_optim_destroy(r->opt);
    ferry_amp_destroy(r->amp);
    ferry_module_destroy(r->net);
    ferry_loader_destroy(r->loader);
    ferry_dataset_release(r->ds);
}

static ferry_checkpoint parts(run *r, bool with_loader)
{
    return (ferry_checkpoint){r->net, r->opt, r->amp, with_loader ? r->loader : NULL, NULL};
}

/* Trains from where the loader is to the end of epoch EPOCHS - 1, or until
 * stop_after optimiser steps in all; true when the run is complete. */
static bool train(run *r, size_t stop_after)
{
    ferry_loader_state s;
    ASSERT_OK(ferry_loader_state_get(r->loader, &s));
    size_t steps = 0;
    for (uint64_t e = s.epoch; e < EPOCHS; e++) {
        if (e != s.epoch)
            ASSERT_OK(ferry_loader_reset(r->loader, e));
        ferry_batch b;
        ferry_status st;
        while ((st = ferry_loader_next(r->loader, NULL, &b)) == FERRY_OK) {
            ASSERT_OK(ferry_train_step(r->net, r->opt, r->amp, b.images, b.labels, NULL, NULL));
            if (++steps == stop_after)
                return false;
        }
        ASSERT_STATUS(st, FERRY_END);
    }
    return true;
}

static void *file_bytes(const char *path, size_t *n) { return ft_read_file(path, n); }

static void resume_everywhere(variant v)
{
    const char *devs[2] = {"cpu", "cuda:0"};
    size_t ndev = ferry_cuda_device_count() > 0 ? 2 : 1;
    size_t total = EPOCHS * ((N + BATCH - 1) / BATCH);
    for (size_t d = 0; d < ndev; d++) {
        run r;
        run_open(&r, devs[d], 2, v);
        ASSERT(train(&r, SIZE_MAX));
        ferry_checkpoint c = parts(&r, false);
        ASSERT_OK(ferry_checkpoint_save(ft_tmp("ref.st"), &c));
        run_close(&r);
        size_t nref = 0;
        void *ref = file_bytes(ft_tmp("ref.st"), &nref);
        /* Cut after these steps: inside epoch 0, at its end, inside epoch 1. */
        static const size_t cuts[] = {1, 5, 8, 11};
        for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
            ASSERT(cuts[k] < total);
            run_open(&r, devs[d], k % 3, v);
            ASSERT(!train(&r, cuts[k]));
            c = parts(&r, true);
            ASSERT_OK(ferry_checkpoint_save(ft_tmp("cut.st"), &c));
            run_close(&r);
            run_open(&r, devs[d], 2 - k % 3 + 1, v); /* other workers, fresh init */
            c = parts(&r, true);
            ASSERT_OK(ferry_checkpoint_load(ft_tmp("cut.st"), &c));
            ASSERT(train(&r, SIZE_MAX));
            c = parts(&r, false);
            ASSERT_OK(ferry_checkpoint_save(ft_tmp("end.st"), &c));
            run_close(&r);
            size_t nend = 0;
            void *end = file_bytes(ft_tmp("end.st"), &nend);
            ASSERT_MSG(nend == nref && !memcmp(end, ref, nref),
                       "%s, %s%s: cut after step %zu and resumed: the final checkpoint differs "
                       "from the uninterrupted run's", devs[d], v.adam ? "Adam" : "SGD",
                       v.amp ? " + AMP" : "", cuts[k]);
            free(end);
        }
        free(ref);
    }
}

TEST(resume_adam_bit_for_bit) { resume_everywhere((variant){true, false}); }
TEST(resume_sgd_amp_bit_for_bit) { resume_everywhere((variant){false, true}); }

/* A write that fails at its k-th file operation, for every k: the previous
 * checkpoint is still there, whole, and no temporary file is left behind. */
TEST(failed_writes_leave_the_previous_checkpoint)
{
    run r;
    run_open(&r, "cpu", 1, (variant){true, false});
    ferry_checkpoint c = parts(&r, true);
    const char *path = ft_tmp("ck/atomic.st");
    ft_write_file(ft_tmp("ck/.keep"), "", 0);
    ASSERT_OK(ferry_checkpoint_save(path, &c));
    size_t nold = 0;
    void *old = file_bytes(path, &nold);
    ASSERT(!train(&r, 3)); /* the state moves on */
    size_t failures = 0;
    for (int64_t k = 1; k < 1000; k++) {
        ferry_debug_fail_io_after(k);
        ferry_status st = ferry_checkpoint_save(path, &c);
        int64_t left = ferry_debug_fail_io_after(0);
        size_t n = 0;
        void *now = file_bytes(path, &n);
        if (st == FERRY_OK) {
            ASSERT_MSG(left > 0, "k = %lld: the write succeeded though an operation failed", (long long)k);
            ASSERT(n != nold || memcmp(now, old, n));
            free(now);
            break;
        }
        failures++;
        ASSERT_STATUS(st, FERRY_ERR_IO);
        ASSERT_STR_CONTAINS(ferry_last_error(), "atomic.st");
        /* Before the rename: the old file. After it (the folder's fsync): the new
         * one, complete. Never anything else. */
        bool is_old = n == nold && !memcmp(now, old, n);
        if (!is_old) {
            ASSERT_STR_CONTAINS(ferry_last_error(), "syncing its folder");
            ferry_safetensors *f = NULL;
            ASSERT_OK(ferry_safetensors_open(path, &f));
            ferry_safetensors_destroy(f);
        }
        free(now);
        /* PATH.tmpPID-RANDOM: any PATH.tmp* left is one too many. */
        const char *slash = strrchr(path, '/');
        char dir[700], tmp[700];
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
        snprintf(tmp, sizeof tmp, "%s.tmp", slash + 1);
        DIR *dd = opendir(dir);
        struct dirent *de;
        while (dd && (de = readdir(dd)) != NULL)
            ASSERT_MSG(strncmp(de->d_name, tmp, strlen(tmp)) != 0, "k = %lld: %s/%s left behind",
                       (long long)k, dir, de->d_name);
        if (dd)
            closedir(dd);
    }
    ASSERT_MSG(failures >= 5, "only %zu failure points (open, writes, fsync, close, rename, folder)", failures);
    free(old);
    run_close(&r);
}

/* A child rewrites a checkpoint in a loop and is killed at random instants: what
 * is on disk always loads, and is one of the versions written. */
TEST(killed_while_writing_leaves_a_whole_checkpoint)
{
    const char *path = ft_tmp("kill/ck.st");
    ft_write_file(ft_tmp("kill/.keep"), "", 0);
    const char *seed_env = getenv("FERRY_KILL_SEED");
    unsigned seed = seed_env ? (unsigned)strtoul(seed_env, NULL, 10) : 1234u;
    printf("  kill seed %u (FERRY_KILL_SEED to replay)\n", seed);
    srand(seed);
    for (int round = 0; round < 12; round++) {
        pid_t pid = fork();
        ASSERT(pid >= 0);
        if (pid == 0) {
            int64_t shape[1] = {20000};
            ferry_tensor *t = NULL;
            for (int v = 0;; v++) {
                if (ferry_tensor_full(shape, 1, (double)v, FERRY_DTYPE_F32, ferry_cpu(), &t) != FERRY_OK)
                    _exit(3);
                const char *name = "v";
                if (ferry_safetensors_save(path, &name, &t, 1, NULL, 0) != FERRY_OK)
                    _exit(4);
                ferry_tensor_release(t);
            }
        }
        usleep((useconds_t)(2000 + rand() % 30000));
        kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        ASSERT(WIFSIGNALED(status));
        ferry_safetensors *f = NULL;
        if (access(path, F_OK) != 0)
            continue; /* killed before the first rename */
        ASSERT_OK(ferry_safetensors_open(path, &f));
        ferry_tensor *t = NULL;
        ASSERT_OK(ferry_safetensors_get(f, "v", ferry_cpu(), &t));
        const float *p = ferry_tensor_data(t);
        for (int64_t i = 1; i < ferry_tensor_numel(t); i++)
            ASSERT(p[i] == p[0]);
        ferry_tensor_release(t);
        ferry_safetensors_destroy(f);
    }
}

TEST(torn_or_changed_checkpoints_are_refused_by_name)
{
    run r;
    run_open(&r, "cpu", 0, (variant){true, false});
    ferry_checkpoint c = parts(&r, true);
    const char *path = ft_tmp("bad.st");
    ASSERT_OK(ferry_checkpoint_save(path, &c));
    size_t n = 0;
    unsigned char *b = file_bytes(path, &n);
    /* One bit of the data flipped. */
    b[n - 3] ^= 0x10;
    ft_write_file(ft_tmp("flipped.st"), b, n);
    ASSERT_STATUS(ferry_checkpoint_load(ft_tmp("flipped.st"), &c), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "flipped.st");
    ASSERT_STR_CONTAINS(ferry_last_error(), "checksum");
    b[n - 3] ^= 0x10;
    /* Cut short. */
    ft_write_file(ft_tmp("short.st"), b, n - 9);
    ASSERT_STATUS(ferry_checkpoint_load(ft_tmp("short.st"), &c), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "short.st");
    free(b);
    run_close(&r);
}

/* A checkpoint whose loader state does not fit is refused before the model,
 * optimiser or loader change. */
TEST(a_checkpoint_of_another_loader_changes_nothing)
{
    run a, b;
    run_open(&a, "cpu", 1, (variant){true, false});
    ASSERT(!train(&a, 2));
    ferry_checkpoint ca = parts(&a, true);
    ASSERT_OK(ferry_checkpoint_save(ft_tmp("other.st"), &ca));
    run_open(&b, "cpu", 1, (variant){true, false});
    ferry_loader_destroy(b.loader);
    ferry_loader_config lc = ferry_loader_config_default();
    lc.dataset = b.ds;
    lc.batch_size = BATCH + 1;
    lc.device = ferry_cpu();
    lc.seed = 5; /* the run's: the batch size is what differs */
    ASSERT_OK(ferry_loader_create(&lc, &b.loader));
    ferry_checkpoint cb = parts(&b, false);
    ASSERT_OK(ferry_checkpoint_save(ft_tmp("before.st"), &cb));
    cb = parts(&b, true);
    ASSERT_STATUS(ferry_checkpoint_load(ft_tmp("other.st"), &cb), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "other.st");
    ASSERT_STR_CONTAINS(ferry_last_error(), "the batch size is 5 in the state, 6 here");
    cb = parts(&b, false);
    ASSERT_OK(ferry_checkpoint_save(ft_tmp("after.st"), &cb));
    size_t n1 = 0, n2 = 0;
    void *x = file_bytes(ft_tmp("before.st"), &n1), *y = file_bytes(ft_tmp("after.st"), &n2);
    ASSERT(n1 == n2 && !memcmp(x, y, n1));
    free(x);
    free(y);
    run_close(&a);
    run_close(&b);
}
