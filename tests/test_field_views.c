/* Field views and batch dtypes (fields.h): a view has no bytes of its own
 * but entries of an earlier field, so the batch carries them once; a field's
 * batch_dtype converts it after the copy (on the device, or by the workers on
 * the CPU), field_dtypes overriding it. Checked for custom and memory
 * datasets, against values computed here, on the CPU and (FERRY_SIM_GPUS=2)
 * the simulated GPU; bad declarations are refused naming the field. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "common/error.h"

enum { N = 23, L = 6, B = 4 };

static uint16_t seq_val(size_t i, size_t j) { return (uint16_t)(i * 1000 + j * 7 + 60000 * (j == 5)); }

/* seq u16 [6] (arriving as i64), head = seq[0:4], tail = seq[2:6], id i32 scalar. */
static size_t view_fields(ferry_field *f)
{
    f[0] = (ferry_field){.name = "seq", .dtype = FERRY_DTYPE_U16, .ndim = 1, .shape = {L},
                         .batch_dtype = FERRY_DTYPE_I64};
    f[1] = (ferry_field){.name = "head", .dtype = FERRY_DTYPE_U16, .ndim = 1, .shape = {4},
                         .view_of = "seq"};
    f[2] = (ferry_field){.name = "tail", .dtype = FERRY_DTYPE_U16, .ndim = 1, .shape = {4},
                         .view_of = "seq", .view_start = 2};
    f[3] = (ferry_field){.name = "id", .dtype = FERRY_DTYPE_I32, .ndim = 0};
    return 4;
}

static ferry_status views_get(void *user, size_t i, void *const *dst, size_t *lengths,
                              const struct ferry_sample_ctx *ctx)
{
    (void)user;
    (void)lengths;
    (void)ctx;
    if (dst[1] || dst[2])
        return ferry_set_error(FERRY_ERR_INVALID_ARG, "a view was given a destination");
    uint16_t *s = dst[0];
    for (size_t j = 0; j < L; j++)
        s[j] = seq_val(i, j);
    int32_t id = (int32_t)i;
    memcpy(dst[3], &id, sizeof id);
    return FERRY_OK;
}

static ferry_dataset *views_dataset(void)
{
    ferry_field f[4];
    ferry_dataset_field_callbacks cb = {.len = N, .fields = f, .num_fields = view_fields(f),
                                        .get = views_get};
    ferry_dataset *ds = NULL;
    ASSERT_OK(ferry_dataset_custom_fields(&cb, NULL, &ds));
    return ds;
}

static ferry_tensor *host(ferry_tensor *t)
{
    ferry_tensor *h = NULL;
    ASSERT_OK(ferry_tensor_to(t, ferry_cpu(), false, &h));
    return h;
}

/* Every batch of ds through a loader on the test's device: seq as want_dt,
 * head and tail its strided views, against seq_val. */
static void check_loader(ferry_dataset *ds, const ferry_field_dtype *fd, ferry_dtype want_dt)
{
    ferry_device dev = getenv("FERRY_SIM_GPUS") ? ft_device("cuda:0") : ferry_cpu();
    ferry_loader_config c = {.dataset = ds, .batch_size = B, .shuffle = true, .seed = 9,
                             .num_workers = 2, .device = dev, .field_dtypes = fd,
                             .num_field_dtypes = fd ? 1 : 0};
    ferry_loader *l = NULL;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_batch b;
    size_t seen = 0;
    while (ferry_loader_next(l, NULL, &b) == FERRY_OK) {
        ferry_tensor *seq = ferry_batch_field(&b, "seq"), *head = ferry_batch_field(&b, "head"),
                     *tail = ferry_batch_field(&b, "tail");
        ASSERT_EQ_INT(ferry_tensor_dtype(seq), want_dt);
        ASSERT_EQ_INT(ferry_tensor_dtype(tail), want_dt);
        ASSERT_EQ_INT(ferry_tensor_dim(tail, 1), 4);
        ASSERT_EQ_INT(ferry_tensor_strides(tail)[0], L);
        ASSERT(!ferry_tensor_is_contiguous(tail));
        ASSERT(ferry_tensor_data(head) == ferry_tensor_data(seq));
        ASSERT(ferry_tensor_data(tail) == (char *)ferry_tensor_data(seq) + 2 * ferry_dtype_size(want_dt));
        ferry_tensor *hs = host(seq), *hh = host(head), *ht = host(tail), *id = host(ferry_batch_field(&b, "id"));
        for (size_t i = 0; i < b.size; i++) {
            size_t s = b.indices[i];
            ASSERT_EQ_INT(((const int32_t *)ferry_tensor_data(id))[i], (int64_t)s);
            for (size_t j = 0; j < L; j++)
                ASSERT_EQ_INT(ft_at2(hs, i, j), seq_val(s, j));
            for (size_t j = 0; j < 4; j++) {
                ASSERT_EQ_INT(ft_at2(hh, i, j), seq_val(s, j));
                ASSERT_EQ_INT(ft_at2(ht, i, j), seq_val(s, j + 2));
            }
        }
        ferry_tensor_release(hs);
        ferry_tensor_release(hh);
        ferry_tensor_release(ht);
        ferry_tensor_release(id);
        seen += b.size;
    }
    ASSERT_EQ_SIZE(seen, N);
    ferry_loader_destroy(l);
}

TEST(custom_views_and_batch_dtype)
{
    ferry_dataset *ds = views_dataset();
    const ferry_field *f;
    size_t n;
    ASSERT_OK(ferry_dataset_fields(ds, &f, &n));
    ASSERT_STR_EQ(f[2].view_of, "seq");
    check_loader(ds, NULL, FERRY_DTYPE_I64);                                   /* batch_dtype */
    check_loader(ds, &(ferry_field_dtype){"seq", FERRY_DTYPE_U16}, FERRY_DTYPE_U16); /* as stored */
    check_loader(ds, &(ferry_field_dtype){"seq", FERRY_DTYPE_F32}, FERRY_DTYPE_F32);
    ferry_dataset_release(ds);
}

TEST(memory_views_need_no_data)
{
    uint16_t seq[N * L];
    int32_t id[N];
    for (size_t i = 0; i < N; i++) {
        id[i] = (int32_t)i;
        for (size_t j = 0; j < L; j++)
            seq[i * L + j] = seq_val(i, j);
    }
    ferry_field f[4];
    view_fields(f);
    ferry_memory_field cols[4] = {{.field = f[0], .data = seq}, {.field = f[1]}, {.field = f[2]},
                                  {.field = f[3], .data = id}};
    ferry_dataset *ds = NULL;
    ASSERT_OK(ferry_dataset_memory_fields(cols, 4, N, &ds));
    check_loader(ds, NULL, FERRY_DTYPE_I64);
    /* get_fields: the view's dst may be NULL, an own field's may not */
    uint16_t s[L];
    int32_t v = -1;
    void *dst[4] = {s, NULL, NULL, &v};
    ASSERT_OK(ferry_dataset_get_fields(ds, 5, dst, NULL, NULL));
    ASSERT_EQ_INT(v, 5);
    ASSERT_EQ_INT(s[5], seq_val(5, 5));
    dst[0] = NULL;
    ASSERT_STATUS(ferry_dataset_get_fields(ds, 5, dst, NULL, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "'seq'");
    ferry_dataset_release(ds);
}

/* The label path (a label-only read decodes into a buffer of its own) gives
 * views no destination either. */
static ferry_status labelled_get(void *user, size_t i, void *const *dst, size_t *lengths,
                                 const struct ferry_sample_ctx *ctx)
{
    (void)user;
    (void)lengths;
    (void)ctx;
    if (dst[1])
        return ferry_set_error(FERRY_ERR_INVALID_ARG, "a view was given a destination");
    uint16_t *s = dst[0];
    for (size_t j = 0; j < L; j++)
        s[j] = seq_val(i, j);
    int64_t lab = (int64_t)(i % 5);
    memcpy(dst[2], &lab, sizeof lab);
    return FERRY_OK;
}

TEST(label_reads_skip_views)
{
    ferry_field f[4]; /* view_fields writes four */
    view_fields(f);
    f[2] = (ferry_field){.name = "label", .dtype = FERRY_DTYPE_I64, .ndim = 0};
    ferry_dataset_field_callbacks cb = {.len = N, .fields = f, .num_fields = 3,
                                        .num_classes = 5, .get = labelled_get};
    ferry_dataset *ds = NULL;
    ASSERT_OK(ferry_dataset_custom_fields(&cb, NULL, &ds));
    for (size_t i = 0; i < N; i++) {
        int64_t lab = -1;
        ASSERT_OK(ferry_dataset_label(ds, i, &lab));
        ASSERT_EQ_INT(lab, (int64_t)(i % 5));
    }
    ferry_dataset_release(ds);
}

static void refused(ferry_field *f, size_t n, const char *needle)
{
    ferry_dataset_field_callbacks cb = {.len = N, .fields = f, .num_fields = n, .get = views_get};
    ferry_dataset *ds = NULL;
    ASSERT_STATUS(ferry_dataset_custom_fields(&cb, NULL, &ds), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), needle);
    ASSERT(ds == NULL);
}

TEST(bad_views_are_refused_by_name)
{
    ferry_field f[4];
    view_fields(f);
    f[1].view_of = "nothing";
    refused(f, 4, "'head' is a view of 'nothing', which is no earlier field");
    view_fields(f);
    f[1].view_of = "tail"; /* a later field */
    refused(f, 4, "no earlier field");
    view_fields(f);
    f[2].view_of = "head";
    refused(f, 4, "a view itself");
    ferry_field sc[2] = {{.name = "id", .dtype = FERRY_DTYPE_I32, .ndim = 0},
                         {.name = "v", .dtype = FERRY_DTYPE_I32, .ndim = 1, .shape = {1},
                          .view_of = "id"}};
    refused(sc, 2, "a scalar");
    view_fields(f);
    f[2].view_start = 3; /* [3, 7) of 6 */
    refused(f, 4, "entries [3, 3 + 4) of 'seq', which has 6");
    view_fields(f);
    f[2].view_start = (size_t)-1; /* no wrap-around */
    refused(f, 4, "which has 6");
    view_fields(f);
    f[1].dtype = FERRY_DTYPE_I32;
    refused(f, 4, "'head', a view of 'seq', must have its dtype");
    view_fields(f);
    f[1].batch_dtype = FERRY_DTYPE_I32;
    refused(f, 4, "'head', a view of 'seq'");
    view_fields(f);
    f[0].batch_dtype = (ferry_dtype)99;
    refused(f, 4, "field 'seq': batch_dtype 99");
    /* a ragged parent */
    ferry_field r[2] = {{.name = "pts", .dtype = FERRY_DTYPE_F32, .ndim = 2, .shape = {5, 2},
                         .ragged = true},
                        {.name = "first", .dtype = FERRY_DTYPE_F32, .ndim = 2, .shape = {1, 2},
                         .view_of = "pts"}};
    refused(r, 2, "ragged");
}

/* A view of an image dataset's image field cannot be delivered: the image
 * goes through its own conversion. */
TEST(views_of_the_image_are_refused_by_the_loader)
{
    ferry_field f[3] = {
        {.name = "image", .dtype = FERRY_DTYPE_U8, .ndim = 3, .shape = {1, 4, 4},
         .role = FERRY_FIELD_IMAGE},
        {.name = "row0", .dtype = FERRY_DTYPE_U8, .ndim = 3, .shape = {1, 4, 4},
         .view_of = "image"},
        {.name = "label", .dtype = FERRY_DTYPE_I64, .ndim = 0},
    };
    uint8_t px[N * 16] = {0};
    int64_t lab[N] = {0};
    ferry_memory_field cols[3] = {{.field = f[0], .data = px}, {.field = f[1]},
                                  {.field = f[2], .data = lab}};
    ferry_dataset *ds = NULL;
    ASSERT_OK(ferry_dataset_memory_fields(cols, 3, N, &ds));
    ferry_loader_config c = {.dataset = ds, .batch_size = B, .device = ferry_cpu()};
    ferry_loader *l = NULL;
    ASSERT_STATUS(ferry_loader_create(&c, &l), FERRY_ERR_UNSUPPORTED);
    ASSERT_STR_CONTAINS(ferry_last_error(), "'row0' is a view of 'image'");
    ferry_dataset_release(ds);
}

