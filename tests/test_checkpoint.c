/* safetensors: round trips, a hand-written known-bytes file, malformed headers
 * (every one FERRY_ERR_FORMAT, never a crash), and model + optimiser checkpoints. */
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "ferry/nn.h"

#define CPU ferry_cpu()

/* A file written by hand from the format description: header length 8 bytes LE,
 * JSON, then two F32 values and three I64. */
static size_t known_file(unsigned char *buf)
{
    const char *hdr = "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"I64\",\"shape\":[3,1],\"data_offsets\":[8,32]}}";
    size_t hl = strlen(hdr);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(hl >> (8 * i));
    memcpy(buf + 8, hdr, hl);
    float a[2] = {1.5f, -2.0f};
    int64_t b[3] = {7, -1, 1LL << 40};
    memcpy(buf + 8 + hl, a, 8);
    memcpy(buf + 16 + hl, b, 24);
    return 8 + hl + 32;
}

TEST(safetensors_known_bytes)
{
    unsigned char buf[512];
    size_t n = known_file(buf);
    ferry_safetensors *f = NULL;
    ASSERT_OK(ferry_safetensors_parse(buf, n, &f));
    ASSERT_EQ_SIZE(ferry_safetensors_tensor_count(f), 2);
    ASSERT_STR_EQ(ferry_safetensors_metadata(f, "format"), "pt");
    ASSERT(ferry_safetensors_metadata(f, "nope") == NULL);
    ferry_tensor *a = NULL, *b = NULL;
    ASSERT_OK(ferry_safetensors_get(f, "a", CPU, &a));
    ASSERT_OK(ferry_safetensors_get(f, "b", CPU, &b));
    ASSERT_NEAR(((float *)ferry_tensor_data(a))[1], -2.0, 0);
    ASSERT_EQ_INT(ferry_tensor_dim(b, 0), 3);
    ASSERT_EQ_INT(((int64_t *)ferry_tensor_data(b))[2], 1LL << 40);
    ASSERT_STATUS(ferry_safetensors_get(f, "c", CPU, &a), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "\"c\"");
    ferry_tensor_release(a);
    ferry_tensor_release(b);
    ferry_safetensors_destroy(f);
}

TEST(safetensors_round_trip_all_dtypes)
{
    static const ferry_dtype dts[] = {FERRY_DTYPE_F32, FERRY_DTYPE_F16, FERRY_DTYPE_BF16,
                                      FERRY_DTYPE_U8, FERRY_DTYPE_I32, FERRY_DTYPE_I64};
    ferry_tensor *ts[6], *src = NULL;
    const char *names[6] = {"f32", "we\"ird\\name", "bf16", "u8", "i32", "empty/i64"};
    int64_t shape[3] = {2, 3, 4};
    ASSERT_OK(ferry_tensor_randn(shape, 3, FERRY_DTYPE_F32, CPU, 1, &src));
    for (int i = 0; i < 6; i++)
        ASSERT_OK(ferry_affine(src, 10, 0, dts[i], NULL, &ts[i]));
    ferry_tensor_release(ts[5]);
    int64_t zero[2] = {0, 5};
    ASSERT_OK(ferry_tensor_zeros(zero, 2, FERRY_DTYPE_I64, CPU, &ts[5]));
    const char *meta[2] = {"epoch", "3"};
    const char *path = ft_tmp("rt.safetensors");
    ASSERT_OK(ferry_safetensors_save(path, names, ts, 6, meta, 1));
    ferry_safetensors *f = NULL;
    ASSERT_OK(ferry_safetensors_open(path, &f));
    ASSERT_STR_EQ(ferry_safetensors_metadata(f, "epoch"), "3");
    for (int i = 0; i < 6; i++) {
        ferry_tensor *t = NULL;
        ASSERT_OK(ferry_safetensors_get(f, names[i], CPU, &t));
        ASSERT_EQ_INT(ferry_tensor_dtype(t), ferry_tensor_dtype(ts[i]));
        ASSERT_EQ_SIZE(ferry_tensor_nbytes(t), ferry_tensor_nbytes(ts[i]));
        ASSERT_MEM_EQ(ferry_tensor_data(t), ferry_tensor_data(ts[i]), ferry_tensor_nbytes(t));
        ferry_tensor_release(t);
        ferry_tensor_release(ts[i]);
    }
    ferry_safetensors_destroy(f);
    /* The header is padded so the data starts 8-aligned. */
    size_t n = 0;
    unsigned char *raw = ft_read_file(path, &n);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | raw[i];
    ASSERT_EQ_INT(hl % 8, 0);
    free(raw);
    ferry_tensor_release(src);
}

TEST(safetensors_python_reads_ours)
{
    if (system("python3 -c 'import safetensors' >/dev/null 2>&1") != 0)
        SKIP("python3 with safetensors not available (the known-bytes test covers the format)");
    int64_t s[2] = {2, 2};
    ferry_tensor *t = NULL;
    ASSERT_OK(ferry_tensor_arange(0, 4, 1, FERRY_DTYPE_F32, CPU, &t));
    ferry_tensor *r = NULL;
    ASSERT_OK(ferry_tensor_reshape(t, s, 2, &r));
    const char *names[1] = {"w"};
    const char *path = ft_tmp("py.safetensors");
    ASSERT_OK(ferry_safetensors_save(path, names, &r, 1, NULL, 0));
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "python3 -c \"from safetensors.numpy import load_file; d=load_file('%s'); "
             "assert d['w'].tolist()==[[0,1],[2,3]]\"", path);
    ASSERT_EQ_INT(system(cmd), 0);
    ferry_tensor_release(t);
    ferry_tensor_release(r);
}

TEST(safetensors_rejects_malformed_headers)
{
    static const char *bad[] = {
        "", "{", "[]", "{\"a\":1}", "{\"a\":{}}", "{\"a\":{\"dtype\":\"F32\"}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}",      /* wrong size */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}",      /* reversed */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4000]}}",   /* past the end */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}",
        /* Element counts under 2^62 whose bytes wrap to 0 modulo 2^64. */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}",
        "{\"a\":{\"dtype\":\"I64\",\"shape\":[2305843009213693952],\"data_offsets\":[0,0]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1073741824,1073741824,4],\"data_offsets\":[0,0]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} x",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}",
        "{\"__metadata__\":{\"k\":1}}",
        "{\"a\\u0000\":{}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}",
        "{\"a\":{\"dtype\":\"F32\" \"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\x01\":{}}",
    };
    unsigned char buf[1024];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t hl = strlen(bad[i]);
        for (int k = 0; k < 8; k++)
            buf[k] = (unsigned char)(hl >> (8 * k));
        memcpy(buf + 8, bad[i], hl);
        memset(buf + 8 + hl, 0, 8);
        ferry_safetensors *f = NULL;
        ferry_status st = ferry_safetensors_parse(buf, 8 + hl + 4, &f);
        ASSERT_MSG(st == FERRY_ERR_FORMAT, "header %zu (%s): got %s", i, bad[i], ferry_status_str(st));
        ASSERT(f == NULL);
    }
    /* Header lengths that do not fit, and a too-short file. */
    unsigned char huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'};
    ferry_safetensors *f = NULL;
    ASSERT_STATUS(ferry_safetensors_parse(huge, 10, &f), FERRY_ERR_FORMAT);
    ASSERT_STATUS(ferry_safetensors_parse(huge, 5, &f), FERRY_ERR_FORMAT);
    /* A folder is an I/O error naming it, not a read of LONG_MAX bytes. */
    ASSERT_STATUS(ferry_safetensors_open(ft_tmpdir(), &f), FERRY_ERR_IO);
    ASSERT_STR_CONTAINS(ferry_last_error(), ft_tmpdir());
    ASSERT_STR_CONTAINS(ferry_last_error(), "a folder, not a file");
    /* Unsupported dtypes are named. */
    const char *f64 = "{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}";
    size_t hl = strlen(f64);
    for (int k = 0; k < 8; k++)
        buf[k] = (unsigned char)(hl >> (8 * k));
    memcpy(buf + 8, f64, hl);
    ASSERT_STATUS(ferry_safetensors_parse(buf, 8 + hl + 8, &f), FERRY_ERR_UNSUPPORTED);
    ASSERT_STR_CONTAINS(ferry_last_error(), "F64");
    /* Every truncation of a good file fails cleanly or parses. */
    unsigned char good[512];
    size_t gn = known_file(good);
    for (size_t cut = 0; cut < gn; cut++) {
        ferry_status st = ferry_safetensors_parse(good, cut, &f);
        ASSERT(st == FERRY_ERR_FORMAT);
    }
    ASSERT_STATUS(ferry_safetensors_open(ft_tmp("missing.safetensors"), &f), FERRY_ERR_IO);
}

/* The tensors must tile the data section exactly, as the format's reference
 * reader requires: overlaps, holes, a leading gap and a tail are refused, naming
 * the tensors. */
TEST(safetensors_rejects_overlaps_holes_and_tails)
{
    static const struct {
        const char *header;
        size_t data;
        const char *says[3];
    } cases[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
         12, {"\"a\"", "\"b\"", "overlap"}},
        {"{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
         4, {"\"a\"", "\"b\"", "overlap"}},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
         12, {"[4, 8)", "\"a\" and \"b\"", "no tensor"}},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, {"[0, 4)", "\"a\"", "no tensor"}},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 12, {"\"a\"", "8 bytes", "no tensor"}},
        {"{}", 4, {"4 bytes", "no tensor", "data"}},
    };
    unsigned char buf[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t hl = strlen(cases[i].header);
        for (int k = 0; k < 8; k++)
            buf[k] = (unsigned char)(hl >> (8 * k));
        memcpy(buf + 8, cases[i].header, hl);
        memset(buf + 8 + hl, 0, cases[i].data);
        ferry_safetensors *f = NULL;
        ferry_status st = ferry_safetensors_parse(buf, 8 + hl + cases[i].data, &f);
        ASSERT_MSG(st == FERRY_ERR_FORMAT, "case %zu: got %s", i, ferry_status_str(st));
        ASSERT(f == NULL);
        for (int k = 0; k < 3; k++)
            ASSERT_STR_CONTAINS(ferry_last_error(), cases[i].says[k]);
    }
    /* Exact tiling in any order, zero-size tensors included, is fine. */
    const char *ok = "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
                     "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
                     "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    size_t hl = strlen(ok);
    for (int k = 0; k < 8; k++)
        buf[k] = (unsigned char)(hl >> (8 * k));
    memcpy(buf + 8, ok, hl);
    memset(buf + 8 + hl, 0, 8);
    ferry_safetensors *f = NULL;
    ASSERT_OK(ferry_safetensors_parse(buf, 8 + hl + 8, &f));
    ferry_safetensors_destroy(f);
}

static ferry_module *small_cnn(void)
{
    ferry_module *seq = NULL, *l = NULL;
    ASSERT_OK(ferry_sequential_create(&seq));
    ASSERT_OK(ferry_conv2d_create(1, 4, 3, 1, 1, true, &l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_batchnorm2d_create(4, 1e-5, 0.1, &l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_relu_create(&l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_avgpool2d_create(2, 0, 0, &l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_flatten_create(&l)); ASSERT_OK(ferry_sequential_add(seq, l));
    ASSERT_OK(ferry_linear_create(4 * 4 * 4, 3, true, &l)); ASSERT_OK(ferry_sequential_add(seq, l));
    return seq;
}

TEST(checkpoint_model_and_adam_round_trip)
{
    ferry_module *a = small_cnn(), *b = small_cnn();
    ASSERT_OK(ferry_module_init(a, 1));
    ASSERT_OK(ferry_module_init(b, 2));
    ferry_optim *oa = NULL, *ob = NULL;
    ASSERT_OK(ferry_adam_create(a, 1e-2, 0.9, 0.999, 1e-8, 0, &oa));
    ASSERT_OK(ferry_adam_create(b, 1e-2, 0.9, 0.999, 1e-8, 0, &ob));
    int64_t xs[4] = {5, 1, 8, 8}, n = 5;
    int64_t lab[5] = {0, 1, 2, 1, 0};
    ferry_tensor *x = NULL, *y = NULL;
    ASSERT_OK(ferry_tensor_randn(xs, 4, FERRY_DTYPE_F32, CPU, 3, &x));
    ASSERT_OK(ferry_tensor_from_host(lab, &n, 1, FERRY_DTYPE_I64, CPU, &y));
    for (int i = 0; i < 3; i++)
        ASSERT_OK(ferry_train_step(a, oa, NULL, x, y, NULL, NULL));
    const char *path = ft_tmp("ck.safetensors");
    ASSERT_OK(ferry_checkpoint_save(path, &(ferry_checkpoint){.module = a, .optim = oa}));
    ASSERT_OK(ferry_checkpoint_load(path, &(ferry_checkpoint){.module = b, .optim = ob}));
    ASSERT_EQ_INT(ferry_optim_step_count(ob), 3);
    /* The same next step on both gives the same parameters. */
    ASSERT_OK(ferry_train_step(a, oa, NULL, x, y, NULL, NULL));
    ASSERT_OK(ferry_train_step(b, ob, NULL, x, y, NULL, NULL));
    for (size_t i = 0; i < ferry_module_param_count(a); i++) {
        ferry_param p, q;
        ASSERT_OK(ferry_module_param(a, i, &p));
        ASSERT_OK(ferry_module_param(b, i, &q));
        ASSERT_STR_EQ(p.name, q.name);
        ASSERT_MEM_EQ(ferry_tensor_data(p.value), ferry_tensor_data(q.value), ferry_tensor_nbytes(p.value));
    }
    /* Another kind of optimiser is refused, and nothing changes. */
    ferry_optim *sgd = NULL;
    ASSERT_OK(ferry_sgd_create(b, 0.1, 0, 0, &sgd));
    ferry_param q0;
    ASSERT_OK(ferry_module_param(b, 0, &q0));
    float w0 = ((float *)ferry_tensor_data(q0.value))[0];
    ASSERT_STATUS(ferry_checkpoint_load(path, &(ferry_checkpoint){.module = b, .optim = sgd}),
                  FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "the checkpoint's optimiser is Adam, this one is SGD");
    ASSERT_NEAR(((float *)ferry_tensor_data(q0.value))[0], w0, 0);
    ASSERT_EQ_INT(ferry_optim_step_count(sgd), 0);
    ferry_optim_destroy(sgd);
    ferry_safetensors *f = NULL;
    ASSERT_OK(ferry_safetensors_open(path, &f));
    ASSERT_STR_CONTAINS(ferry_safetensors_metadata(f, "optim"), "Adam lr=0.01");
    ferry_tensor *t = NULL;
    ASSERT_OK(ferry_safetensors_get(f, "optim.5.weight.exp_avg_sq", CPU, &t));
    ferry_tensor_release(t);
    ASSERT_OK(ferry_safetensors_get(f, "1.running_var", CPU, &t));
    ferry_tensor_release(t);
    ferry_safetensors_destroy(f);
    ferry_tensor_release(x);
    ferry_tensor_release(y);
    ferry_optim_destroy(oa);
    ferry_optim_destroy(ob);
    ferry_module_destroy(a);
    ferry_module_destroy(b);
}

TEST(checkpoint_mismatch_names_the_tensor)
{
    ferry_module *a = small_cnn(), *b = NULL, *l = NULL;
    const char *path = ft_tmp("mm.safetensors");
    ASSERT_OK(ferry_checkpoint_save(path, &(ferry_checkpoint){.module = a}));
    ASSERT_OK(ferry_sequential_create(&b));
    ASSERT_OK(ferry_conv2d_create(1, 5, 3, 1, 1, true, &l));
    ASSERT_OK(ferry_sequential_add(b, l));
    ferry_param p;
    ASSERT_OK(ferry_module_param(b, 0, &p));
    float before = ((float *)ferry_tensor_data(p.value))[0];
    ASSERT_STATUS(ferry_checkpoint_load(path, &(ferry_checkpoint){.module = b}), FERRY_ERR_SHAPE);
    ASSERT_STR_CONTAINS(ferry_last_error(), "tensor \"0.weight\" has shape [4, 1, 3, 3] in the checkpoint but [5, 1, 3, 3]");
    ASSERT_NEAR(((float *)ferry_tensor_data(p.value))[0], before, 0); /* unchanged */
    ferry_module_destroy(b);
    ASSERT_OK(ferry_sequential_create(&b));
    for (int i = 0; i < 3; i++) {
        ASSERT_OK(ferry_relu_create(&l));
        ASSERT_OK(ferry_sequential_add(b, l));
    }
    ASSERT_OK(ferry_linear_create(2, 2, true, &l));
    ASSERT_OK(ferry_sequential_add(b, l));
    ASSERT_STATUS(ferry_checkpoint_load(path, &(ferry_checkpoint){.module = b}), FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "no tensor \"3.weight\"");
    ASSERT_STR_CONTAINS(ferry_last_error(), "saved from another model (another kind");
    ferry_module_destroy(b);
    b = small_cnn();
    ASSERT_OK(ferry_module_to_dtype(b, FERRY_DTYPE_F16));
    ASSERT_STATUS(ferry_checkpoint_load(path, &(ferry_checkpoint){.module = b}), FERRY_ERR_DTYPE);
    ASSERT_STR_CONTAINS(ferry_last_error(), "tensor \"0.weight\" is f32 in the checkpoint but f16 in the model");
    ferry_module_destroy(b);
    ferry_module_destroy(a);
}

/* A save replaces only a regular file: a device node (made here, as /dev/full
 * is: 1, 7; a FIFO when not root) and a folder are refused by name and left
 * as they were; a symbolic link is written through, to its target, and stays a
 * link (a dangling one creates its target). */
TEST(save_refuses_devices_and_writes_through_links)
{
    float v = 3.0f;
    ferry_tensor *t;
    ASSERT_OK(ferry_tensor_from_host(&v, (int64_t[]){1}, 1, FERRY_DTYPE_F32, CPU, &t));
    const char *names[] = {"w"};
    const char *dev = ft_tmp("full");
    bool node = mknod(dev, S_IFCHR | 0666, makedev(1, 7)) == 0;
    if (!node)
        ASSERT(mkfifo(dev, 0666) == 0);
    ferry_status st = ferry_safetensors_save(dev, names, &t, 1, NULL, 0);
    ASSERT_STATUS(st, FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), node ? "is a character device, not a regular file" : "is a FIFO");
    ASSERT_STR_CONTAINS(ferry_last_error(), dev);
    struct stat sb;
    ASSERT(lstat(dev, &sb) == 0 && (node ? S_ISCHR(sb.st_mode) : S_ISFIFO(sb.st_mode)));
    ASSERT(mkdir(ft_tmp("adir"), 0755) == 0);
    ASSERT_STATUS(ferry_safetensors_save(ft_tmp("adir"), names, &t, 1, NULL, 0), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "is a folder");
    /* Through a link (relative, in the same folder) to an existing file. */
    ft_write_file(ft_tmp("real.safetensors"), "old", 3);
    ASSERT(symlink("real.safetensors", ft_tmp("link.safetensors")) == 0);
    ASSERT_OK(ferry_safetensors_save(ft_tmp("link.safetensors"), names, &t, 1, NULL, 0));
    ASSERT(lstat(ft_tmp("link.safetensors"), &sb) == 0 && S_ISLNK(sb.st_mode));
    ferry_safetensors *f;
    ASSERT_OK(ferry_safetensors_open(ft_tmp("real.safetensors"), &f));
    ASSERT_EQ_SIZE(ferry_safetensors_tensor_count(f), 1);
    ferry_safetensors_destroy(f);
    /* A dangling link: its target is created. */
    ASSERT(symlink("new.safetensors", ft_tmp("dangling.safetensors")) == 0);
    ASSERT_OK(ferry_safetensors_save(ft_tmp("dangling.safetensors"), names, &t, 1, NULL, 0));
    ASSERT(lstat(ft_tmp("dangling.safetensors"), &sb) == 0 && S_ISLNK(sb.st_mode));
    ASSERT(stat(ft_tmp("new.safetensors"), &sb) == 0 && S_ISREG(sb.st_mode));
    ferry_tensor_release(t);
}

/* A kill during a save leaves PATH.tmpPID, as large as the checkpoint: the
 * next save (and a resume's read) removes those of processes that are gone,
 * and keeps a live process's. */
TEST(save_removes_temporaries_of_dead_processes)
{
    pid_t child = fork();
    ASSERT(child >= 0);
    if (child == 0)
        _exit(0);
    ASSERT(waitpid(child, NULL, 0) == child); /* its pid now names no process */
    char stale[4096], live[4096], other[4096];
    snprintf(stale, sizeof stale, "%s.tmp%ld", ft_tmp("run.safetensors"), (long)child);
    snprintf(live, sizeof live, "%s.tmp%ld", ft_tmp("run.safetensors"), (long)getppid());
    snprintf(other, sizeof other, "%s.tmp%ld", ft_tmp("other.safetensors"), (long)child);
    ft_write_file(stale, "partial", 7);
    ft_write_file(live, "partial", 7);
    ft_write_file(other, "partial", 7);
    float v = 1.0f;
    ferry_tensor *t;
    ASSERT_OK(ferry_tensor_from_host(&v, (int64_t[]){1}, 1, FERRY_DTYPE_F32, CPU, &t));
    const char *names[] = {"w"};
    ASSERT_OK(ferry_safetensors_save(ft_tmp("run.safetensors"), names, &t, 1, NULL, 0));
    struct stat sb;
    ASSERT_MSG(stat(stale, &sb) != 0, "%s is still there", stale);
    ASSERT(stat(live, &sb) == 0);  /* its process may still be saving */
    ASSERT(stat(other, &sb) == 0); /* another checkpoint's */
    /* Reading (as a resume does) cleans up too. */
    ft_write_file(stale, "partial", 7);
    ferry_module *m;
    ASSERT_OK(ferry_linear_create(1, 1, true, &m));
    ASSERT_OK(ferry_checkpoint_save(ft_tmp("m.safetensors"), &(ferry_checkpoint){.module = m}));
    snprintf(stale, sizeof stale, "%s.tmp%ld", ft_tmp("m.safetensors"), (long)child);
    ft_write_file(stale, "partial", 7);
    ASSERT_OK(ferry_checkpoint_load(ft_tmp("m.safetensors"), &(ferry_checkpoint){.module = m}));
    ASSERT_MSG(stat(stale, &sb) != 0, "%s is still there after a read", stale);
    ferry_module_destroy(m);
    ferry_tensor_release(t);
}

