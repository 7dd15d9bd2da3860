/* The tensor core: creation on a device, refcounts, to()/cpu()/to_dtype round
 * trips, half-precision conversions against reference bit patterns, printing
 * compared with PyTorch-style strings, non-contiguous copies, bad shapes, and
 * every allocation failing in turn. CUDA tests skip without a GPU. */
#include <stdlib.h>

#include "harness.h"
#include "common/error.h"
#include "tensor/internal.h"

static char *print_to_string(const ferry_tensor *t)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    ferry_status st = ferry_tensor_print(t, f);
    fclose(f);
    if (st != FERRY_OK)
        ft_fail(__FILE__, __LINE__, "print: %s", ferry_last_error());
    return buf;
}

#define ASSERT_PRINTS(t, want)                                                 \
    do {                                                                       \
        char *got_ = print_to_string(t);                                       \
        if (strcmp(got_, want) != 0) {                                         \
            printf("  got:\n%s  want:\n%s", got_, want);                       \
            free(got_);                                                        \
            ft_fail(__FILE__, __LINE__, "print output differs");               \
        }                                                                      \
        free(got_);                                                            \
    } while (0)

static float f32_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

TEST(dtype_sizes_and_names)
{
    ASSERT_EQ_SIZE(ferry_dtype_size(FERRY_DTYPE_F32), 4);
    ASSERT_EQ_SIZE(ferry_dtype_size(FERRY_DTYPE_F16), 2);
    ASSERT_EQ_SIZE(ferry_dtype_size(FERRY_DTYPE_BF16), 2);
    ASSERT_EQ_SIZE(ferry_dtype_size(FERRY_DTYPE_U8), 1);
    ASSERT_EQ_SIZE(ferry_dtype_size(FERRY_DTYPE_I32), 4);
    ASSERT_EQ_SIZE(ferry_dtype_size(FERRY_DTYPE_I64), 8);
    ASSERT_EQ_SIZE(ferry_dtype_size(FERRY_DTYPE_COUNT), 0);
    ASSERT_STR_EQ(ferry_dtype_name(FERRY_DTYPE_BF16), "bf16");
    ASSERT_STR_EQ(ferry_dtype_name((ferry_dtype)99), "invalid");
}

TEST(f16_reference_values)
{
    static const struct { float f; uint16_t h; } cases[] = {
        {0.0f, 0x0000}, {-0.0f, 0x8000}, {1.0f, 0x3c00}, {-2.0f, 0xc000}, {65504.0f, 0x7bff},
        {65519.0f, 0x7bff}, {65520.0f, 0x7c00}, {1e6f, 0x7c00}, {-1e6f, 0xfc00},
        {0.1f, 0x2e66}, {1.0f / 3.0f, 0x3555}, {6.103515625e-05f, 0x0400}, /* 2^-14 */
        {5.9604644775390625e-08f, 0x0001},                                   /* 2^-24 */
        {1e-8f, 0x0000}, {2.98023223876953125e-08f, 0x0000},                 /* 2^-25: tie to 0 */
        {8.94069671630859375e-08f, 0x0002},                                  /* 1.5 * 2^-24: tie to 2 */
        {1.00048828125f, 0x3c00},                                            /* 1 + 2^-11: tie to even */
        {1.00146484375f, 0x3c02},                                            /* 1 + 3*2^-11: up */
        {3.0517578125e-05f, 0x0200},                                         /* 2^-15, subnormal */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ASSERT_MSG(ferry_f32_to_f16(cases[i].f) == cases[i].h, "f16(%g) = 0x%04x, want 0x%04x",
                   (double)cases[i].f, ferry_f32_to_f16(cases[i].f), cases[i].h);
    ASSERT_EQ_INT(ferry_f32_to_f16(f32_bits(0x7f800000)), 0x7c00);
    ASSERT_EQ_INT(ferry_f32_to_f16(f32_bits(0xff800000)), 0xfc00);
    uint16_t n = ferry_f32_to_f16(f32_bits(0x7fc00000));
    ASSERT((n & 0x7c00) == 0x7c00 && (n & 0x3ff) != 0);
    n = ferry_f32_to_f16(f32_bits(0x7f800001)); /* signalling NaN with a low payload */
    ASSERT((n & 0x7c00) == 0x7c00 && (n & 0x3ff) != 0);
    ASSERT_EQ_INT(ferry_f16_to_f32(0x3c00), 1.0);
    ASSERT_EQ_INT(ferry_f16_to_f32(0x7bff), 65504.0);
    ASSERT(ferry_f16_to_f32(0x0001) == 5.9604644775390625e-08f);
    ASSERT(ferry_f16_to_f32(0x8001) == -5.9604644775390625e-08f);
    ASSERT(ferry_f16_to_f32(0x3555) == 0.333251953125f);
    ASSERT(isinf(ferry_f16_to_f32(0x7c00)) && ferry_f16_to_f32(0xfc00) < 0);
    ASSERT(isnan(ferry_f16_to_f32(0x7e00)));
    /* every finite half round-trips exactly */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00)
            continue;
        ASSERT_MSG(ferry_f32_to_f16(ferry_f16_to_f32((uint16_t)h)) == h, "0x%04x does not round-trip", h);
    }
}

TEST(bf16_reference_values)
{
    ASSERT_EQ_INT(ferry_f32_to_bf16(1.0f), 0x3f80);
    ASSERT_EQ_INT(ferry_f32_to_bf16(-0.0f), 0x8000);
    ASSERT_EQ_INT(ferry_f32_to_bf16(3.0f), 0x4040);
    ASSERT_EQ_INT(ferry_f32_to_bf16(1.00390625f), 0x3f80);  /* 1 + 2^-8: tie to even */
    ASSERT_EQ_INT(ferry_f32_to_bf16(1.01171875f), 0x3f82);  /* 1 + 3*2^-8: tie to even (up) */
    ASSERT_EQ_INT(ferry_f32_to_bf16(1.0078125f), 0x3f81);   /* exact */
    ASSERT_EQ_INT(ferry_f32_to_bf16(f32_bits(0x3f808001)), 0x3f81); /* just above the tie */
    ASSERT_EQ_INT(ferry_f32_to_bf16(f32_bits(0x7f7fffff)), 0x7f80); /* FLT_MAX rounds to inf */
    ASSERT_EQ_INT(ferry_f32_to_bf16(f32_bits(0x7f800000)), 0x7f80);
    ASSERT_EQ_INT(ferry_f32_to_bf16(f32_bits(0x00000001)), 0x0000); /* tiny subnormal */
    uint16_t n = ferry_f32_to_bf16(f32_bits(0x7f800001));
    ASSERT((n & 0x7f80) == 0x7f80 && (n & 0x7f) != 0);
    ASSERT(isnan(ferry_bf16_to_f32(n)));
    ASSERT(ferry_bf16_to_f32(0x3f80) == 1.0f);
    ASSERT(ferry_bf16_to_f32(0xc040) == -3.0f);
}

TEST(empty_zeros_from_host_on_cpu)
{
    int64_t shape[] = {2, 3};
    ferry_tensor *t;
    ASSERT_OK(ferry_tensor_zeros(shape, 2, FERRY_DTYPE_F32, ferry_cpu(), &t));
    ASSERT_EQ_SIZE(ferry_tensor_ndim(t), 2);
    ASSERT_EQ_INT(ferry_tensor_dim(t, 0), 2);
    ASSERT_EQ_INT(ferry_tensor_dim(t, 1), 3);
    ASSERT_EQ_INT(ferry_tensor_dim(t, 5), 0);
    ASSERT_EQ_INT(ferry_tensor_numel(t), 6);
    ASSERT_EQ_SIZE(ferry_tensor_nbytes(t), 24);
    ASSERT_EQ_INT(ferry_tensor_strides(t)[0], 3);
    ASSERT_EQ_INT(ferry_tensor_strides(t)[1], 1);
    ASSERT(ferry_tensor_is_contiguous(t));
    ASSERT(ferry_device_eq(ferry_tensor_device(t), ferry_cpu()));
    ASSERT_EQ_INT(ferry_tensor_dtype(t), FERRY_DTYPE_F32);
    const float *z = ferry_tensor_data(t);
    for (int i = 0; i < 6; i++)
        ASSERT(z[i] == 0.0f);
    ferry_tensor_release(t);

    int32_t vals[] = {1, 2, 3, 4, 5, 6};
    ASSERT_OK(ferry_tensor_from_host(vals, shape, 2, FERRY_DTYPE_I32, ferry_cpu(), &t));
    ASSERT(ferry_tensor_data(t) != (void *)vals);
    ASSERT_MEM_EQ(ferry_tensor_data(t), vals, sizeof vals);
    int32_t back[6];
    ASSERT_OK(ferry_tensor_copy_to_host(t, back, sizeof back));
    ASSERT_MEM_EQ(back, vals, sizeof vals);
    ASSERT_STATUS(ferry_tensor_copy_to_host(t, back, sizeof back - 1), FERRY_ERR_INVALID_ARG);
    ferry_tensor_release(t);
    ferry_tensor_release(NULL);

    ASSERT_OK(ferry_tensor_empty(NULL, 0, FERRY_DTYPE_F32, ferry_cpu(), &t)); /* a scalar */
    ASSERT_EQ_INT(ferry_tensor_numel(t), 1);
    ferry_tensor_release(t);
}

TEST(from_blob_borrows)
{
    float data[4] = {1, 2, 3, 4};
    int64_t shape[] = {4};
    ferry_tensor *t;
    ASSERT_OK(ferry_tensor_from_blob(data, shape, 1, FERRY_DTYPE_F32, ferry_cpu(), &t));
    ASSERT(ferry_tensor_data(t) == (void *)data);
    data[2] = 42;
    float back[4];
    ASSERT_OK(ferry_tensor_copy_to_host(t, back, sizeof back));
    ASSERT(back[2] == 42.0f);
    ferry_tensor_release(t); /* must not free data */
    ASSERT_STATUS(ferry_tensor_from_blob(NULL, shape, 1, FERRY_DTYPE_F32, ferry_cpu(), &t),
                  FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_tensor_from_blob(data, shape, 1, FERRY_DTYPE_F32,
                                         ferry_cuda(ferry_cuda_device_count()), &t),
                  FERRY_ERR_NO_DEVICE);
}

TEST(refcounts_and_to_same_device)
{
    int64_t shape[] = {3};
    ferry_tensor *t, *u, *v;
    ASSERT_OK(ferry_tensor_zeros(shape, 1, FERRY_DTYPE_F32, ferry_cpu(), &t));
    ASSERT_OK(ferry_tensor_to(t, ferry_cpu(), false, &u));
    ASSERT(u == t);
    ASSERT_OK(ferry_tensor_cpu(t, &v));
    ASSERT(v == t);
    ASSERT(ferry_tensor_retain(t) == t);
    ASSERT_EQ_INT(t->refs, 4);
    ferry_tensor_release(t);
    ferry_tensor_release(u);
    ferry_tensor_release(v);
    ASSERT_EQ_INT(t->refs, 1);
    ASSERT_OK(ferry_tensor_to_dtype(t, FERRY_DTYPE_F32, &u));
    ASSERT(u == t);
    ferry_tensor_release(u);
    ferry_tensor_release(t);
}

TEST(to_missing_device_fails_cleanly)
{
    int64_t shape[] = {3};
    ferry_tensor *t, *u = (ferry_tensor *)1;
    ASSERT_OK(ferry_tensor_zeros(shape, 1, FERRY_DTYPE_F32, ferry_cpu(), &t));
    ASSERT_STATUS(ferry_tensor_to(t, ferry_cuda(ferry_cuda_device_count()), true, &u), FERRY_ERR_NO_DEVICE);
    ASSERT(u == NULL);
    ASSERT_STATUS(ferry_tensor_zeros(shape, 1, FERRY_DTYPE_F32, ferry_cuda(ferry_cuda_device_count()), &u),
                  FERRY_ERR_NO_DEVICE);
    ferry_tensor_release(t);
}

TEST(bad_shapes)
{
    ferry_tensor *t = (ferry_tensor *)1;
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    ASSERT_STATUS(ferry_tensor_empty(nine, 9, FERRY_DTYPE_F32, ferry_cpu(), &t), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "9 dimensions");
    ASSERT(t == NULL);
    int64_t neg[] = {2, -1};
    ASSERT_STATUS(ferry_tensor_empty(neg, 2, FERRY_DTYPE_F32, ferry_cpu(), &t), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "[2, -1]");
    int64_t huge[] = {INT64_C(1) << 40, INT64_C(1) << 40};
    ASSERT_STATUS(ferry_tensor_empty(huge, 2, FERRY_DTYPE_F32, ferry_cpu(), &t), FERRY_ERR_LIMIT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "[1099511627776, 1099511627776]");
    int64_t bytes_overflow[] = {INT64_C(1) << 62};
    ASSERT_STATUS(ferry_tensor_empty(bytes_overflow, 1, FERRY_DTYPE_F32, ferry_cpu(), &t), FERRY_ERR_LIMIT);
    ASSERT_STATUS(ferry_tensor_empty(NULL, 2, FERRY_DTYPE_F32, ferry_cpu(), &t), FERRY_ERR_INVALID_ARG);
    int64_t ok[] = {2};
    ASSERT_STATUS(ferry_tensor_empty(ok, 1, (ferry_dtype)42, ferry_cpu(), &t), FERRY_ERR_DTYPE);
    ASSERT_STATUS(ferry_tensor_empty(ok, 1, FERRY_DTYPE_F32, ferry_cpu(), NULL), FERRY_ERR_INVALID_ARG);
    /* a zero dimension makes an empty tensor, however big the others */
    int64_t empty[] = {0, INT64_C(1) << 40, INT64_C(1) << 40};
    ASSERT_OK(ferry_tensor_empty(empty, 3, FERRY_DTYPE_F32, ferry_cpu(), &t));
    ASSERT_EQ_INT(ferry_tensor_numel(t), 0);
    ferry_tensor_release(t);
}

TEST(to_dtype_all_pairs_on_cpu)
{
    /* values every dtype can hold exactly */
    static const double vals[] = {0, 1, 2, 3, 7, 100, 127, 0};
    int64_t shape[] = {8};
    for (int a = 0; a < FERRY_DTYPE_COUNT; a++) {
        for (int b = 0; b < FERRY_DTYPE_COUNT; b++) {
            char buf[64];
            for (int i = 0; i < 8; i++) {
                switch (a) {
                case FERRY_DTYPE_F32: ((float *)buf)[i] = (float)vals[i]; break;
                case FERRY_DTYPE_F16: ((uint16_t *)buf)[i] = ferry_f32_to_f16((float)vals[i]); break;
                case FERRY_DTYPE_BF16: ((uint16_t *)buf)[i] = ferry_f32_to_bf16((float)vals[i]); break;
                case FERRY_DTYPE_U8: ((uint8_t *)buf)[i] = (uint8_t)vals[i]; break;
                case FERRY_DTYPE_I32: ((int32_t *)buf)[i] = (int32_t)vals[i]; break;
                default: ((int64_t *)buf)[i] = (int64_t)vals[i]; break;
                }
            }
            ferry_tensor *t, *u, *w;
            ASSERT_OK(ferry_tensor_from_host(buf, shape, 1, (ferry_dtype)a, ferry_cpu(), &t));
            ASSERT_OK(ferry_tensor_to_dtype(t, (ferry_dtype)b, &u));
            ASSERT_EQ_INT(ferry_tensor_dtype(u), b);
            ASSERT_OK(ferry_tensor_to_dtype(u, (ferry_dtype)a, &w));
            char back[64];
            ASSERT_OK(ferry_tensor_copy_to_host(w, back, sizeof back));
            ASSERT_MSG(!memcmp(back, buf, 8 * ferry_dtype_size((ferry_dtype)a)), "%s -> %s -> %s differs",
                       ferry_dtype_name((ferry_dtype)a), ferry_dtype_name((ferry_dtype)b),
                       ferry_dtype_name((ferry_dtype)a));
            ferry_tensor_release(t);
            ferry_tensor_release(u);
            ferry_tensor_release(w);
        }
    }
}

TEST(to_dtype_rounds_and_saturates)
{
    float in[] = {-5.0f, 300.0f, 3.7f, -3.7f, NAN, INFINITY, 65520.0f, 1e-8f};
    int64_t shape[] = {8};
    ferry_tensor *t, *u8, *i32, *h;
    ASSERT_OK(ferry_tensor_from_host(in, shape, 1, FERRY_DTYPE_F32, ferry_cpu(), &t));
    ASSERT_OK(ferry_tensor_to_dtype(t, FERRY_DTYPE_U8, &u8));
    uint8_t want_u8[] = {0, 255, 3, 0, 0, 255, 255, 0};
    ASSERT_MEM_EQ(ferry_tensor_data(u8), want_u8, 8);
    ASSERT_OK(ferry_tensor_to_dtype(t, FERRY_DTYPE_I32, &i32));
    int32_t want_i32[] = {-5, 300, 3, -3, 0, INT32_MAX, 65520, 0};
    ASSERT_MEM_EQ(ferry_tensor_data(i32), want_i32, sizeof want_i32);
    ASSERT_OK(ferry_tensor_to_dtype(t, FERRY_DTYPE_F16, &h));
    const uint16_t *hp = ferry_tensor_data(h);
    ASSERT_EQ_INT(hp[0], 0xc500);
    ASSERT(isnan(ferry_f16_to_f32(hp[4])));
    ASSERT_EQ_INT(hp[5], 0x7c00);
    ASSERT_EQ_INT(hp[6], 0x7c00);
    ASSERT_EQ_INT(hp[7], 0x0000);
    ferry_tensor_release(t);
    ferry_tensor_release(u8);
    ferry_tensor_release(i32);
    ferry_tensor_release(h);
    int64_t big[] = {INT64_MAX, INT64_MIN, 5};
    int64_t s3[] = {3};
    ASSERT_OK(ferry_tensor_from_host(big, s3, 1, FERRY_DTYPE_I64, ferry_cpu(), &t));
    ASSERT_OK(ferry_tensor_to_dtype(t, FERRY_DTYPE_I32, &i32));
    int32_t want_sat[] = {INT32_MAX, INT32_MIN, 5};
    ASSERT_MEM_EQ(ferry_tensor_data(i32), want_sat, sizeof want_sat);
    ferry_tensor_release(t);
    ferry_tensor_release(i32);
}

/* A transposed view: copy_to_host, to_dtype and to() gather it in row-major order. */
TEST(non_contiguous_views)
{
    float m[6] = {0, 1, 2, 3, 4, 5}; /* 2x3 */
    int64_t shape[] = {2, 3};
    ferry_tensor *t, *tt, *c, *h;
    ASSERT_OK(ferry_tensor_from_host(m, shape, 2, FERRY_DTYPE_F32, ferry_cpu(), &t));
    int64_t tshape[] = {3, 2}, tstrides[] = {1, 3};
    ASSERT_OK(ferry_tensor_view_(t, tshape, tstrides, 2, 0, &tt));
    ASSERT(!ferry_tensor_is_contiguous(tt));
    float back[6], want[6] = {0, 3, 1, 4, 2, 5};
    ASSERT_OK(ferry_tensor_copy_to_host(tt, back, sizeof back));
    ASSERT_MEM_EQ(back, want, sizeof want);
    ASSERT_OK(ferry_tensor_to_dtype(tt, FERRY_DTYPE_F16, &h));
    ASSERT(ferry_tensor_is_contiguous(h));
    ASSERT_EQ_INT(((uint16_t *)ferry_tensor_data(h))[1], ferry_f32_to_f16(3.0f));
    ASSERT_PRINTS(tt, "tensor([[0.0000, 3.0000],\n"
                      "        [1.0000, 4.0000],\n"
                      "        [2.0000, 5.0000]], dtype=f32)\n");
    /* a column: offset 1, stride 3 */
    int64_t cshape[] = {2}, cstride[] = {3};
    ASSERT_OK(ferry_tensor_view_(t, cshape, cstride, 1, 1, &c));
    float col[2];
    ASSERT_OK(ferry_tensor_copy_to_host(c, col, sizeof col));
    ASSERT(col[0] == 1.0f && col[1] == 4.0f);
    ferry_tensor_release(t); /* views keep the storage alive */
    ASSERT_OK(ferry_tensor_copy_to_host(c, col, sizeof col));
    ASSERT(col[1] == 4.0f);
    ferry_tensor_release(tt);
    ferry_tensor_release(c);
    ferry_tensor_release(h);
}

TEST(print_matrix_and_vectors)
{
    float m[] = {1, 2, 3, 4};
    int64_t s22[] = {2, 2};
    ferry_tensor *t;
    ASSERT_OK(ferry_tensor_from_host(m, s22, 2, FERRY_DTYPE_F32, ferry_cpu(), &t));
    ASSERT_PRINTS(t, "tensor([[1.0000, 2.0000],\n        [3.0000, 4.0000]], dtype=f32)\n");
    ferry_tensor_release(t);

    int32_t v[] = {1, -20, 3};
    int64_t s3[] = {3};
    ASSERT_OK(ferry_tensor_from_host(v, s3, 1, FERRY_DTYPE_I32, ferry_cpu(), &t));
    ASSERT_PRINTS(t, "tensor([  1, -20,   3], dtype=i32)\n");
    ferry_tensor_release(t);

    float sc = 1.5f;
    ASSERT_OK(ferry_tensor_from_host(&sc, NULL, 0, FERRY_DTYPE_F32, ferry_cpu(), &t));
    ASSERT_PRINTS(t, "tensor(1.5000, dtype=f32)\n");
    ferry_tensor_release(t);

    float sci[] = {1e-5f, 1.0f};
    int64_t s2[] = {2};
    ASSERT_OK(ferry_tensor_from_host(sci, s2, 1, FERRY_DTYPE_F32, ferry_cpu(), &t));
    ASSERT_PRINTS(t, "tensor([1.0000e-05, 1.0000e+00], dtype=f32)\n");
    ferry_tensor_release(t);

    float odd[] = {NAN, INFINITY, 1.5f};
    ASSERT_OK(ferry_tensor_from_host(odd, s3, 1, FERRY_DTYPE_F32, ferry_cpu(), &t));
    ASSERT_PRINTS(t, "tensor([   nan,    inf, 1.5000], dtype=f32)\n");
    ferry_tensor_release(t);

    uint16_t halves[] = {ferry_f32_to_f16(0.5f), ferry_f32_to_f16(-2.0f)};
    ASSERT_OK(ferry_tensor_from_host(halves, s2, 1, FERRY_DTYPE_F16, ferry_cpu(), &t));
    ASSERT_PRINTS(t, "tensor([ 0.5000, -2.0000], dtype=f16)\n");
    ferry_tensor_release(t);
}

TEST(print_three_dims_and_empty)
{
    uint8_t v[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    int64_t s222[] = {2, 2, 2};
    ferry_tensor *t;
    ASSERT_OK(ferry_tensor_from_host(v, s222, 3, FERRY_DTYPE_U8, ferry_cpu(), &t));
    ASSERT_PRINTS(t, "tensor([[[0, 1],\n"
                     "         [2, 3]],\n"
                     "\n"
                     "        [[4, 5],\n"
                     "         [6, 7]]], dtype=u8)\n");
    ferry_tensor_release(t);
    int64_t s0[] = {0}, s20[] = {2, 0};
    ASSERT_OK(ferry_tensor_empty(s0, 1, FERRY_DTYPE_F32, ferry_cpu(), &t));
    ASSERT_PRINTS(t, "tensor([], dtype=f32)\n");
    ferry_tensor_release(t);
    ASSERT_OK(ferry_tensor_empty(s20, 2, FERRY_DTYPE_BF16, ferry_cpu(), &t));
    ASSERT_PRINTS(t, "tensor([], size=(2, 0), dtype=bf16)\n");
    ferry_tensor_release(t);
}

TEST(print_summarises_long_dims)
{
    int64_t v[2000];
    for (int i = 0; i < 2000; i++)
        v[i] = i;
    int64_t s[] = {2000};
    ferry_tensor *t;
    ASSERT_OK(ferry_tensor_from_host(v, s, 1, FERRY_DTYPE_I64, ferry_cpu(), &t));
    ASSERT_PRINTS(t, "tensor([   0,    1,    2,  ..., 1997, 1998, 1999], dtype=i64)\n");
    ferry_tensor_release(t);
    int64_t s2[] = {40, 50};
    ASSERT_OK(ferry_tensor_from_host(v, s2, 2, FERRY_DTYPE_I64, ferry_cpu(), &t));
    ASSERT_PRINTS(t, "tensor([[   0,    1,    2,  ...,   47,   48,   49],\n"
                     "        [  50,   51,   52,  ...,   97,   98,   99],\n"
                     "        [ 100,  101,  102,  ...,  147,  148,  149],\n"
                     "        ...,\n"
                     "        [1850, 1851, 1852,  ..., 1897, 1898, 1899],\n"
                     "        [1900, 1901, 1902,  ..., 1947, 1948, 1949],\n"
                     "        [1950, 1951, 1952,  ..., 1997, 1998, 1999]], dtype=i64)\n");
    ferry_tensor_release(t);
    /* 1000 elements or fewer print in full */
    int64_t s1000[] = {1000};
    ASSERT_OK(ferry_tensor_from_host(v, s1000, 1, FERRY_DTYPE_I64, ferry_cpu(), &t));
    char *out = print_to_string(t);
    ASSERT(strstr(out, "...") == NULL);
    ASSERT_STR_CONTAINS(out, " 500,");
    free(out);
    ferry_tensor_release(t);
}

/* Every host allocation made while creating and converting fails in turn; each
 * failure is reported and nothing leaks. */
TEST(creation_survives_every_allocation_failure)
{
    float data[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[] = {2, 3};
    ferry_tensor *warm;
    ASSERT_OK(ferry_tensor_from_host(data, shape, 2, FERRY_DTYPE_F32, ferry_cpu(), &warm));
    ferry_tensor_release(warm);
    ASSERT_OK(ferry_memory_empty_cache(ferry_cpu()));
    int64_t live = ferry_debug_alloc_live();
    for (int k = 1; k < 50; k++) {
        ferry_tensor *t = NULL, *h = NULL;
        ferry_debug_fail_alloc_after(k);
        ferry_status st = ferry_tensor_from_host(data, shape, 2, FERRY_DTYPE_F32, ferry_cpu(), &t);
        if (st == FERRY_OK)
            st = ferry_tensor_to_dtype(t, FERRY_DTYPE_BF16, &h);
        ferry_debug_fail_alloc_after(0);
        ferry_tensor_release(t);
        ferry_tensor_release(h);
        ASSERT_OK(ferry_memory_empty_cache(ferry_cpu()));
        ASSERT_MSG(ferry_debug_alloc_live() == live, "k=%d: %lld live allocations, want %lld", k,
                   (long long)ferry_debug_alloc_live(), (long long)live);
        if (st == FERRY_OK)
            return;
        ASSERT_MSG(st == FERRY_ERR_NO_MEMORY || st == FERRY_ERR_DEVICE_OOM, "k=%d: %s", k,
                   ferry_status_str(st));
    }
    ASSERT_MSG(0, "never succeeded");
}

/* ---- CUDA ---- */

TEST(cuda_to_and_back)
{
    ft_require_cuda();
    float m[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[] = {2, 3};
    ferry_tensor *t, *g, *g2, *back;
    ASSERT_OK(ferry_tensor_from_host(m, shape, 2, FERRY_DTYPE_F32, ferry_cpu(), &t));
    ASSERT_OK(ferry_tensor_to(t, ferry_cuda(0), true, &g));
    ASSERT(ferry_device_eq(ferry_tensor_device(g), ferry_cuda(0)));
    ASSERT_OK(ferry_tensor_to(g, ferry_cuda(0), false, &g2));
    ASSERT(g2 == g);
    ASSERT_OK(ferry_tensor_cpu(g, &back));
    ASSERT_MEM_EQ(ferry_tensor_data(back), m, sizeof m);
    ASSERT_PRINTS(g, "tensor([[1.0000, 2.0000, 3.0000],\n"
                     "        [4.0000, 5.0000, 6.0000]], device='cuda:0', dtype=f32)\n");
    ferry_tensor *z;
    ASSERT_OK(ferry_tensor_zeros(shape, 2, FERRY_DTYPE_I64, ferry_cuda(0), &z));
    int64_t zb[6] = {1, 1, 1, 1, 1, 1}, zero[6] = {0};
    ASSERT_OK(ferry_tensor_copy_to_host(z, zb, sizeof zb));
    ASSERT_MEM_EQ(zb, zero, sizeof zero);
    /* a transposed view on the GPU gathers correctly */
    int64_t tshape[] = {3, 2}, tstrides[] = {1, 3};
    ferry_tensor *tv, *tvc;
    ASSERT_OK(ferry_tensor_view_(g, tshape, tstrides, 2, 0, &tv));
    float tb[6], want[6] = {1, 4, 2, 5, 3, 6};
    ASSERT_OK(ferry_tensor_copy_to_host(tv, tb, sizeof tb));
    ASSERT_MEM_EQ(tb, want, sizeof want);
    ASSERT_OK(ferry_tensor_to(tv, ferry_cpu(), false, &tvc));
    ASSERT_MEM_EQ(ferry_tensor_data(tvc), want, sizeof want);
    ferry_stream *s;
    ferry_tensor *gs;
    ASSERT_OK(ferry_stream_create(ferry_cuda(0), &s));
    ASSERT_OK(ferry_tensor_to_stream(t, ferry_cuda(0), s, &gs));
    ASSERT_OK(ferry_stream_synchronize(s));
    ASSERT_OK(ferry_tensor_copy_to_host(gs, tb, sizeof tb));
    ASSERT_MEM_EQ(tb, m, sizeof m);
    ferry_tensor_release(gs);
    ferry_stream_destroy(s);
    ferry_tensor_release(tv);
    ferry_tensor_release(tvc);
    ferry_tensor_release(z);
    ferry_tensor_release(t);
    ferry_tensor_release(g);
    ferry_tensor_release(g2);
    ferry_tensor_release(back);
}

/* The GPU conversion kernel agrees with the CPU bit for bit, on every pair. */
TEST(cuda_to_dtype_matches_cpu)
{
    ft_require_cuda();
    enum { N = 4099 };
    float *src = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++)
        src[i] = (float)((i * 37) % 601 - 300) * 0.37f;
    src[0] = NAN;
    src[1] = INFINITY;
    src[2] = 1e-8f;
    src[3] = 65520.0f;
    int64_t shape[] = {N};
    ferry_tensor *base;
    ASSERT_OK(ferry_tensor_from_host(src, shape, 1, FERRY_DTYPE_F32, ferry_cpu(), &base));
    char *a = malloc(N * 8), *b = malloc(N * 8);
    for (int x = 0; x < FERRY_DTYPE_COUNT; x++) {
        ferry_tensor *cx, *gx;
        ASSERT_OK(ferry_tensor_to_dtype(base, (ferry_dtype)x, &cx));
        ASSERT_OK(ferry_tensor_to(cx, ferry_cuda(0), false, &gx));
        for (int y = 0; y < FERRY_DTYPE_COUNT; y++) {
            ferry_tensor *cy, *gy;
            ASSERT_OK(ferry_tensor_to_dtype(cx, (ferry_dtype)y, &cy));
            ASSERT_OK(ferry_tensor_to_dtype(gx, (ferry_dtype)y, &gy));
            ASSERT_OK(ferry_tensor_copy_to_host(cy, a, N * 8));
            ASSERT_OK(ferry_tensor_copy_to_host(gy, b, N * 8));
            ASSERT_MSG(!memcmp(a, b, N * ferry_dtype_size((ferry_dtype)y)), "%s -> %s: GPU differs from CPU",
                       ferry_dtype_name((ferry_dtype)x), ferry_dtype_name((ferry_dtype)y));
            ferry_tensor_release(cy);
            ferry_tensor_release(gy);
        }
        ferry_tensor_release(cx);
        ferry_tensor_release(gx);
    }
    free(a);
    free(b);
    free(src);
    ferry_tensor_release(base);
}
