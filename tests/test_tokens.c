/* Token datasets: llm.c shards (uint16 and uint32), headerless files and .npy
 * arrays against tests/ref/tokens (written by make_tokens_ref.py with NumPy,
 * independently); windows and packed documents (tokens, cu_seqlens offsets,
 * position ids, cropped and padded counts) against the same reference; every
 * corrupt header refused naming the file and what is wrong; folders and list
 * files; ranks 1 to 8 disjoint with equal counts; the same batches for any
 * worker count; resume on the same and another world size; shards by URL read
 * by Range. */
#include <stdlib.h>
#include <unistd.h>

#include <dirent.h>

#include "harness.h"
#include "harness_http.h"
#include "ferry/tokens.h"

#define LLVMFuzzerTestOneInput ferry_fuzz_tokens
#include "fuzz/fuzz_tokens.c"
#undef LLVMFuzzerTestOneInput

#define REF FERRY_SOURCE_DIR "/tests/ref/tokens/"

static const char *const S1[] = {REF "s1_000.bin", REF "s1_001.npy", REF "s1_002.bin"};

static FILE *open_ref(const char *name)
{
    char p[512];
    snprintf(p, sizeof p, REF "%s", name);
    FILE *f = fopen(p, "r");
    ASSERT_MSG(f, "%s: missing (run tests/ref/make_tokens_ref.py)", p);
    return f;
}

static uint64_t next_num(FILE *f)
{
    unsigned long long v = 0;
    ASSERT_MSG(fscanf(f, "%llu", &v) == 1, "reference file ends early");
    return v;
}

static uint32_t tok_at(const void *row, size_t j, size_t width)
{
    const uint8_t *p = (const uint8_t *)row + j * width;
    return width == 2 ? (uint32_t)(p[0] | p[1] << 8)
                      : (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                            (uint32_t)p[3] << 24;
}

static ferry_tokens *open_tokens(const char *const *paths, size_t n, ferry_tokens_config c)
{
    ferry_tokens *t = NULL;
    ASSERT_OK(ferry_tokens_open(paths, n, &c, &t));
    return t;
}

/* Every window of t against the reference file: count, dropped tokens, tokens. */
static void check_windows(ferry_tokens *t, const char *ref)
{
    FILE *f = open_ref(ref);
    size_t n = (size_t)next_num(f), T = ferry_tokens_seq_len(t), w = ferry_tokens_token_bytes(t);
    ferry_tokens_info info;
    ferry_tokens_info_get(t, &info);
    ASSERT_EQ_SIZE(ferry_tokens_len(t), n);
    ASSERT_EQ_INT(info.tokens_dropped, next_num(f));
    uint8_t *row = malloc((T + 1) * 4);
    for (size_t i = 0; i < n; i++) {
        ASSERT_OK(ferry_tokens_read(t, i, row));
        for (size_t j = 0; j <= T; j++)
            ASSERT_MSG(tok_at(row, j, w) == next_num(f), "%s: window %zu token %zu", ref, i, j);
    }
    free(row);
    fclose(f);
}

TEST(windows_llmc_and_npy_match_numpy)
{
    ferry_tokens *t = open_tokens(S1, 3, (ferry_tokens_config){.seq_len = 7});
    ASSERT_EQ_SIZE(ferry_tokens_token_bytes(t), 2);
    check_windows(t, "s1_windows_T7.txt");
    ferry_tokens_destroy(t);
}

TEST(windows_llmc_u32_match_numpy)
{
    const char *p = REF "s2_000.bin";
    ferry_tokens *t = open_tokens(&p, 1, (ferry_tokens_config){.seq_len = 5});
    ASSERT_EQ_SIZE(ferry_tokens_token_bytes(t), 4);
    check_windows(t, "s2_windows_T5.txt");
    ferry_tokens_destroy(t);
}

TEST(windows_headerless_match_numpy)
{
    const char *p = REF "raw_train.bin";
    ferry_tokens *t = open_tokens(&p, 1, (ferry_tokens_config){.seq_len = 9,
                                                               .format = FERRY_TOKENS_RAW});
    check_windows(t, "raw_windows_T9.txt");
    ferry_tokens_destroy(t);
    /* As llm.c's format it is refused: its first int32 is no magic. */
    ferry_tokens *bad = NULL;
    ASSERT_STATUS(ferry_tokens_open(&p, 1, &(ferry_tokens_config){.seq_len = 9}, &bad),
                  FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "raw_train.bin");
    ASSERT_STR_CONTAINS(ferry_last_error(), "llm.c's 1024-byte header");
}

static void check_documents(size_t T, size_t B, uint64_t seed)
{
    char ref[64];
    snprintf(ref, sizeof ref, "s1_docs_T%zu_B%zu_S%llu.txt", T, B, (unsigned long long)seed);
    ferry_tokens *t = open_tokens(S1, 3, (ferry_tokens_config){
        .seq_len = T, .cut = FERRY_TOKENS_DOCUMENTS, .delimiter = 50256, .pack_buffer = B,
        .seed = seed});
    FILE *f = open_ref(ref);
    ferry_tokens_info info;
    ferry_tokens_info_get(t, &info);
    size_t n = (size_t)next_num(f);
    ASSERT_EQ_SIZE(ferry_tokens_len(t), n);
    ASSERT_EQ_SIZE(info.documents, next_num(f));
    ASSERT_EQ_INT(info.tokens_cropped, next_num(f));
    ASSERT_EQ_INT(info.tokens_padded, next_num(f));
    uint16_t row[64];
    int32_t off[64], pos[64];
    for (size_t i = 0; i < n; i++) {
        ASSERT_OK(ferry_tokens_read(t, i, row));
        for (size_t j = 0; j <= T; j++)
            ASSERT_MSG(row[j] == next_num(f), "%s: row %zu token %zu", ref, i, j);
        size_t nd = 0;
        ASSERT_OK(ferry_tokens_row_docs(t, i, off, T + 1, &nd, pos));
        ASSERT_EQ_SIZE(nd, next_num(f));
        for (size_t j = 0; j <= nd; j++)
            ASSERT_MSG(off[j] == (int32_t)next_num(f), "%s: row %zu offset %zu", ref, i, j);
        for (size_t j = 0; j < T; j++)
            ASSERT_MSG(pos[j] == (int32_t)next_num(f), "%s: row %zu position %zu", ref, i, j);
    }
    fclose(f);
    ferry_tokens_destroy(t);
}

TEST(documents_best_fit_matches_numpy)
{
    check_documents(15, 4, 5);
    check_documents(31, 1000, 0);
    check_documents(8, 1, 3);
}

TEST(documents_every_token_once_unless_cropped)
{
    ferry_tokens *t = open_tokens(S1, 3, (ferry_tokens_config){
        .seq_len = 15, .cut = FERRY_TOKENS_DOCUMENTS, .delimiter = 50256, .pack_buffer = 4});
    ferry_tokens_info in;
    ferry_tokens_info_get(t, &in);
    ASSERT_EQ_INT(in.tokens, 16 * in.samples + in.tokens_cropped - in.tokens_padded);
    int32_t off[17];
    size_t nd;
    ASSERT_STATUS(ferry_tokens_row_docs(t, 0, off, 1, &nd, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_tokens_row_docs(t, in.samples, off, 17, &nd, NULL), FERRY_ERR_INVALID_ARG);
    ferry_tokens_destroy(t);
}

/* ---- corrupt forms ---- */

static void llmc_file(const char *path, int32_t magic, int32_t version, int32_t count,
                      size_t tokens, size_t width)
{
    size_t n = 1024 + tokens * width;
    uint8_t *d = calloc(1, n);
    memcpy(d, &magic, 4);
    memcpy(d + 4, &version, 4);
    memcpy(d + 8, &count, 4);
    ft_write_file(path, d, n);
    free(d);
}

static void refused(const char *path, ferry_tokens_config c, ferry_status want, const char *a,
                    const char *b)
{
    ferry_tokens *t = NULL;
    ASSERT_STATUS(ferry_tokens_open(&path, 1, &c, &t), want);
    ASSERT(t == NULL);
    const char *base = strrchr(path, '/');
    ASSERT_STR_CONTAINS(ferry_last_error(), base ? base + 1 : path);
    if (a)
        ASSERT_STR_CONTAINS(ferry_last_error(), a);
    if (b)
        ASSERT_STR_CONTAINS(ferry_last_error(), b);
    uint64_t cnt;
    size_t w;
    if (want == FERRY_ERR_FORMAT) /* probe says the same */
        ASSERT_STATUS(ferry_tokens_probe(path, c.format, c.raw_token_bytes, &cnt, &w), want);
}

TEST(corrupt_llmc_headers_are_named)
{
    ferry_tokens_config c = {.seq_len = 4};
    llmc_file(ft_tmp("magic.bin"), 12345, 1, 10, 10, 2);
    refused(ft_tmp("magic.bin"), c, FERRY_ERR_FORMAT, "magic 12345", "20240520");
    llmc_file(ft_tmp("ver.bin"), 20240520, 7, 10, 10, 2);
    refused(ft_tmp("ver.bin"), c, FERRY_ERR_FORMAT, "magic 20240520 with version 7", NULL);
    llmc_file(ft_tmp("ver32.bin"), 20240801, 1, 10, 10, 4);
    refused(ft_tmp("ver32.bin"), c, FERRY_ERR_FORMAT, "version 1", NULL);
    llmc_file(ft_tmp("trunc.bin"), 20240520, 1, 100, 10, 2);
    refused(ft_tmp("trunc.bin"), c, FERRY_ERR_FORMAT, "100 tokens", "truncated");
    llmc_file(ft_tmp("trail.bin"), 20240520, 1, 5, 10, 2);
    refused(ft_tmp("trail.bin"), c, FERRY_ERR_FORMAT, "5 tokens", "trailing");
    llmc_file(ft_tmp("neg.bin"), 20240801, 7, -1, 10, 4);
    refused(ft_tmp("neg.bin"), c, FERRY_ERR_FORMAT, "tokens", NULL);
    ft_write_file(ft_tmp("short.bin"), "\x58\xf2\x34\x01", 4);
    refused(ft_tmp("short.bin"), c, FERRY_ERR_FORMAT, "shorter than llm.c's", NULL);
    ft_write_file(ft_tmp("odd.bin"), "abc", 3);
    refused(ft_tmp("odd.bin"), (ferry_tokens_config){.format = FERRY_TOKENS_RAW},
            FERRY_ERR_FORMAT, "2-byte tokens", NULL);
    /* A good header with too few tokens for one sample. */
    llmc_file(ft_tmp("few.bin"), 20240520, 1, 4, 4, 2);
    refused(ft_tmp("few.bin"), c, FERRY_ERR_INVALID_ARG, "no sample", NULL);
}

static void npy_file(const char *path, const char *dict, size_t data_bytes)
{
    char h[256];
    size_t dl = strlen(dict), hl = (10 + dl + 1 + 63) / 64 * 64 - 10;
    memcpy(h, "\x93NUMPY\x01\x00", 8);
    h[8] = (char)(hl & 0xff);
    h[9] = (char)(hl >> 8);
    memset(h + 10, ' ', hl);
    memcpy(h + 10, dict, dl);
    h[10 + hl - 1] = '\n';
    size_t n = 10 + hl + data_bytes;
    uint8_t *d = calloc(1, n);
    memcpy(d, h, 10 + hl);
    ft_write_file(path, d, n);
    free(d);
}

TEST(corrupt_npy_headers_are_named)
{
    ferry_tokens_config c = {.seq_len = 4};
    npy_file(ft_tmp("ok.npy"), "{'descr': '<u2', 'fortran_order': False, 'shape': (20,), }", 40);
    uint64_t cnt = 0;
    size_t w = 0;
    ASSERT_OK(ferry_tokens_probe(ft_tmp("ok.npy"), FERRY_TOKENS_AUTO, 0, &cnt, &w));
    ASSERT_EQ_INT(cnt, 20);
    ASSERT_EQ_SIZE(w, 2);
    npy_file(ft_tmp("2d.npy"), "{'descr': '<u2', 'fortran_order': False, 'shape': (4, 5), }", 40);
    refused(ft_tmp("2d.npy"), c, FERRY_ERR_FORMAT, "2 dimensions", NULL);
    npy_file(ft_tmp("f4.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (10,), }", 40);
    refused(ft_tmp("f4.npy"), c, FERRY_ERR_UNSUPPORTED, "f4", NULL);
    npy_file(ft_tmp("be.npy"), "{'descr': '>u2', 'fortran_order': False, 'shape': (10,), }", 20);
    refused(ft_tmp("be.npy"), c, FERRY_ERR_UNSUPPORTED, "big-endian", NULL);
    npy_file(ft_tmp("tr.npy"), "{'descr': '<u2', 'fortran_order': False, 'shape': (30,), }", 40);
    refused(ft_tmp("tr.npy"), c, FERRY_ERR_FORMAT, "truncated", NULL);
    npy_file(ft_tmp("huge.npy"), "{'descr': '<u4', 'fortran_order': False, "
             "'shape': (99999999999999999999999,), }", 40);
    refused(ft_tmp("huge.npy"), c, FERRY_ERR_FORMAT, "overflows", NULL);
    npy_file(ft_tmp("nokey.npy"), "{'descr': '<u2', 'shape': (10,), }", 20);
    refused(ft_tmp("nokey.npy"), c, FERRY_ERR_FORMAT, "lacks", NULL);
    uint8_t big[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0xff, 0xff, '{', '}'};
    ft_write_file(ft_tmp("hlen.npy"), big, sizeof big);
    refused(ft_tmp("hlen.npy"), c, FERRY_ERR_FORMAT, "header of 65535 bytes", NULL);
    uint8_t v9[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 9, 0, 2, 0, '{', '}'};
    ft_write_file(ft_tmp("v9.npy"), v9, sizeof v9);
    refused(ft_tmp("v9.npy"), c, FERRY_ERR_UNSUPPORTED, "version 9.0", NULL);
}

TEST(mixed_widths_and_bad_config_refused)
{
    const char *p[] = {REF "s1_000.bin", REF "s2_000.bin"};
    ferry_tokens *t = NULL;
    ASSERT_STATUS(ferry_tokens_open(p, 2, &(ferry_tokens_config){.seq_len = 4}, &t),
                  FERRY_ERR_FORMAT);
    ASSERT_STR_CONTAINS(ferry_last_error(), "s2_000.bin: 4-byte tokens");
    ASSERT_STATUS(ferry_tokens_open(p, 1, &(ferry_tokens_config){.cut = FERRY_TOKENS_DOCUMENTS,
                                                                  .delimiter = -1}, &t),
                  FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "delimiter");
    ASSERT_STATUS(ferry_tokens_open(p, 1, &(ferry_tokens_config){.raw_token_bytes = 3}, &t),
                  FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_tokens_open(p, 0, NULL, &t), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_tokens_open(p, 1, NULL, NULL), FERRY_ERR_INVALID_ARG);
    ferry_tokens_destroy(NULL);
    ASSERT(ferry_tokens_dataset(NULL) == NULL);
}

/* ---- folders and list files ---- */

static void copy_file(const char *from, const char *to)
{
    size_t n;
    void *d = ft_read_file(from, &n);
    ft_write_file(to, d, n);
    free(d);
}

TEST(folder_and_list_file_name_the_shards)
{
    copy_file(S1[2], ft_tmp("dir/s1_002.bin")); /* written out of order: sorted by name */
    copy_file(S1[0], ft_tmp("dir/s1_000.bin"));
    copy_file(S1[1], ft_tmp("dir/s1_001.npy"));
    ft_write_file(ft_tmp("dir/notes.txt"), "x", 1);
    const char *dir = ft_tmp("dir");
    ferry_tokens *t = open_tokens(&dir, 1, (ferry_tokens_config){.seq_len = 7});
    check_windows(t, "s1_windows_T7.txt");
    ferry_tokens_destroy(t);
    const char *list = "# shards\n" REF "s1_000.bin\n" REF "s1_001.npy\n\n" REF "s1_002.bin\n";
    ft_write_file(ft_tmp("list.txt"), list, strlen(list));
    const char *lp = ft_tmp("list.txt");
    t = open_tokens(&lp, 1, (ferry_tokens_config){.seq_len = 7});
    check_windows(t, "s1_windows_T7.txt");
    ferry_tokens_destroy(t);
    const char *pat = REF "s1_{000,002}.bin"; /* braces */
    t = open_tokens(&pat, 1, (ferry_tokens_config){.seq_len = 7});
    ferry_tokens_info in;
    ferry_tokens_info_get(t, &in);
    ASSERT_EQ_SIZE(in.shards, 2);
    ferry_tokens_destroy(t);
    ft_write_file(ft_tmp("empty/x.txt"), "x", 1);
    const char *empty = ft_tmp("empty");
    ASSERT_STATUS(ferry_tokens_open(&empty, 1, NULL, &t), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "no token files");
}

/* ---- through the loader ---- */

/* FNV-1a over every field of the rest of l's epoch (and ragged lengths). */
static uint64_t fields_digest(ferry_loader *l)
{
    uint64_t h = FT_DIGEST_SEED;
    ferry_batch b;
    ferry_status st;
    while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK) {
        for (size_t k = 0; k < ferry_batch_field_count(&b); k++) {
            const ferry_field *f = NULL;
            ferry_tensor *x = ferry_batch_field_at(&b, k, &f);
            const uint8_t *d = ferry_tensor_data(x);
            for (size_t i = 0, n = ferry_tensor_nbytes(x); i < n; i++)
                h = (h ^ d[i]) * 1099511628211ull;
            const int64_t *len = ferry_tensor_data(ferry_batch_lengths(&b, f->name));
            for (size_t i = 0; len && i < b.size; i++)
                h = (h ^ (uint64_t)len[i]) * 1099511628211ull;
        }
        for (size_t i = 0; i < b.size; i++)
            h = (h ^ b.indices[i]) * 1099511628211ull;
    }
    ASSERT_STATUS(st, FERRY_END);
    return h;
}

/* An llm.c file whose token j is j (width 4: u32; 2: u16, so tokens < 65536):
 * a window names itself by its first token. */
static const char *counting_file(const char *rel, size_t tokens, size_t width)
{
    const char *p = ft_tmp(rel);
    uint8_t *d = calloc(1, 1024 + tokens * width);
    int32_t h[3] = {width == 2 ? 20240520 : 20240801, width == 2 ? 1 : 7, (int32_t)tokens};
    memcpy(d, h, sizeof h);
    for (size_t j = 0; j < tokens; j++) {
        uint32_t v = (uint32_t)j; /* little-endian, as the files */
        for (size_t b = 0; b < width; b++)
            d[1024 + j * width + b] = (uint8_t)(v >> (8 * b));
    }
    ft_write_file(p, d, 1024 + tokens * width);
    free(d);
    return p;
}

static ferry_loader *token_loader(ferry_dataset *ds, size_t rank, size_t world, size_t workers,
                                  uint64_t seed, size_t batch)
{
    ferry_loader_config c = {.dataset = ds, .batch_size = batch, .shuffle = true, .seed = seed,
                             .num_workers = workers, .prefetch = 2, .device = ferry_cpu(),
                             .pin_memory = FERRY_PIN_MEMORY_OFF};
    if (world) {
        c.sampler = FERRY_SAMPLER_DISTRIBUTED;
        c.rank = rank;
        c.world_size = world;
    }
    ferry_loader *l = NULL;
    ASSERT_OK(ferry_loader_create(&c, &l));
    return l;
}

/* The windows (first tokens / T) l delivers until the epoch's end, checked
 * whole against the counting stream, appended to out. */
static size_t drain(ferry_loader *l, size_t T, size_t *out, size_t max)
{
    size_t n = 0;
    ferry_batch b;
    ferry_status st;
    while ((st = ferry_loader_next(l, NULL, &b)) == FERRY_OK && n < max) {
        const ferry_tensor *in = ferry_batch_field(&b, "inputs"), *tg = ferry_batch_field(&b, "targets");
        ASSERT(in && tg);
        for (size_t i = 0; i < b.size; i++) {
            int64_t x0 = ft_at2(in, i, 0);
            ASSERT_EQ_INT(x0 % (int64_t)T, 0);
            for (size_t j = 0; j < T; j++) {
                ASSERT_EQ_INT(ft_at2(in, i, j), x0 + (int64_t)j);
                ASSERT_EQ_INT(ft_at2(tg, i, j), x0 + (int64_t)j + 1);
            }
            ASSERT_EQ_SIZE((size_t)x0 / T, b.indices[i]);
            out[n++] = (size_t)x0 / T;
        }
    }
    ASSERT_STATUS(st, FERRY_END);
    return n;
}

TEST(ranks_1_to_8_disjoint_equal_counts)
{
    enum { T = 4, WINDOWS = 841 }; /* one past 840: the multiple cuts one */
    const char *p = counting_file("count.bin", WINDOWS * T + 1, 4);
    ferry_tokens *t = open_tokens(&p, 1, (ferry_tokens_config){.seq_len = T, .len_multiple = 840});
    ASSERT_EQ_SIZE(ferry_tokens_len(t), 840);
    size_t *got = malloc(840 * sizeof *got);
    for (uint64_t seed = 0; seed < 3; seed++) {
        for (size_t w = 1; w <= 8; w++) {
            uint8_t seen[840] = {0};
            size_t each = 0;
            for (size_t r = 0; r < w; r++) {
                ferry_loader *l = token_loader(ferry_tokens_dataset(t), r, w, 2, seed, 16);
                size_t n = drain(l, T, got, 840);
                ferry_loader_destroy(l);
                if (r == 0)
                    each = n;
                ASSERT_MSG(n == each, "world %zu: rank %zu got %zu, rank 0 %zu", w, r, n, each);
                for (size_t i = 0; i < n; i++) {
                    ASSERT_MSG(got[i] < 840 && !seen[got[i]], "world %zu seed %llu: window %zu "
                               "twice", w, (unsigned long long)seed, got[i]);
                    seen[got[i]] = 1;
                }
            }
            ASSERT_EQ_SIZE(each * w, 840);
        }
    }
    free(got);
    ferry_tokens_destroy(t);
}

TEST(same_batches_any_worker_count)
{
    const char *p = counting_file("count2.bin", 300 * 8 + 5, 4);
    ferry_tokens *t = open_tokens(&p, 1, (ferry_tokens_config){.seq_len = 8});
    ferry_dataset *ds = ferry_dataset_retain(ferry_tokens_dataset(t));
    ferry_tokens_destroy(t); /* the dataset keeps what it needs */
    uint64_t want = 0;
    size_t workers[] = {FERRY_LOADER_NO_WORKERS, 1, 2, 5};
    for (size_t k = 0; k < 4; k++) {
        ferry_loader *l = token_loader(ds, 0, 0, workers[k], 9, 7);
        ASSERT_OK(ferry_loader_reset(l, 3));
        uint64_t d = fields_digest(l);
        ferry_loader_destroy(l);
        if (k == 0)
            want = d;
        ASSERT_MSG(d == want, "%zu workers: other batches", workers[k]);
    }
    ferry_dataset_release(ds);
}

TEST(resume_same_and_other_world_size)
{
    enum { T = 4, N = 120, B = 5 };
    const char *p = counting_file("count3.bin", N * T + 1, 4);
    ferry_tokens *t = open_tokens(&p, 1, (ferry_tokens_config){.seq_len = T, .len_multiple = 12});
    ferry_dataset *ds = ferry_tokens_dataset(t);
    /* Same world size (2): rank 0 stops after 3 batches; a new loader with other
     * workers gives the rest bit for bit. */
    ferry_loader *a = token_loader(ds, 0, 2, 2, 4, B);
    ferry_batch b;
    for (int i = 0; i < 3; i++)
        ASSERT_OK(ferry_loader_next(a, NULL, &b));
    ferry_loader_state s;
    ASSERT_OK(ferry_loader_state_get(a, &s));
    uint64_t rest_a = fields_digest(a);
    ferry_loader *c = token_loader(ds, 0, 2, 3, 4, B);
    ASSERT_OK(ferry_loader_restore(c, &s));
    ASSERT_MSG(fields_digest(c) == rest_a, "resumed batches differ");
    ferry_loader_destroy(a);
    ferry_loader_destroy(c);
    /* Another world size: 2 ranks take 3 batches each, then 3 ranks finish
     * the epoch: every window at least once, repeats only the padding. */
    size_t seen[N] = {0}, got[N];
    ferry_loader_state st2;
    for (size_t r = 0; r < 2; r++) {
        ferry_loader *l = token_loader(ds, r, 2, 2, 4, B);
        for (int i = 0; i < 3; i++) {
            ASSERT_OK(ferry_loader_next(l, NULL, &b));
            for (size_t j = 0; j < b.size; j++)
                seen[b.indices[j]]++;
        }
        if (r == 0)
            ASSERT_OK(ferry_loader_state_get(l, &st2));
        ferry_loader_destroy(l);
    }
    size_t total = 0;
    for (size_t r = 0; r < 3; r++) {
        ferry_loader *l = token_loader(ds, r, 3, 2, 4, B);
        ASSERT_OK(ferry_loader_restore(l, &st2));
        size_t n = drain(l, T, got, N);
        for (size_t i = 0; i < n; i++)
            seen[got[i]]++;
        total += n;
        ferry_loader_destroy(l);
    }
    size_t rest = N - 30, pad = (rest + 2) / 3 * 3 - rest, twice = 0;
    ASSERT_EQ_SIZE(total, rest + pad);
    for (size_t i = 0; i < N; i++) {
        ASSERT_MSG(seen[i] >= 1 && seen[i] <= 2, "window %zu seen %zu times", i, seen[i]);
        twice += seen[i] == 2;
    }
    ASSERT_EQ_SIZE(twice, pad);
    ferry_tokens_destroy(t);
}

TEST(corrupt_shard_mid_run_is_named_or_skipped)
{
    const char *p = counting_file("shrink.bin", 50 * 4 + 1, 4);
    ferry_tokens *t = open_tokens(&p, 1, (ferry_tokens_config){.seq_len = 4});
    ASSERT_EQ_INT(truncate(p, 1024 + 100 * 4), 0); /* the file shrinks after open */
    uint32_t row[5];
    ASSERT_STATUS(ferry_tokens_read(t, 40, row), FERRY_ERR_IO);
    ASSERT_STR_CONTAINS(ferry_last_error(), "shrink.bin");
    ASSERT_OK(ferry_tokens_read(t, 10, row));
    ASSERT_EQ_INT(row[0], 40);
    ferry_loader_config c = {.dataset = ferry_tokens_dataset(t), .batch_size = 10,
                             .num_workers = 2, .device = ferry_cpu(),
                             .on_error = FERRY_ON_ERROR_SKIP};
    ferry_loader *l = NULL;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_batch b;
    size_t n = 0;
    while (ferry_loader_next(l, NULL, &b) == FERRY_OK)
        n += b.size;
    ASSERT_EQ_SIZE(n, 50);
    ferry_loader_stats ls;
    ASSERT_OK(ferry_loader_stats_get(l, &ls));
    ASSERT(ls.skipped > 0);
    ferry_loader_destroy(l);
    ferry_tokens_destroy(t);
}

/* ---- remote ---- */

TEST(remote_shards_read_by_range)
{
    ft_http *srv = ft_http_start(FERRY_SOURCE_DIR "/tests/ref/tokens", NULL);
    char urls[3][256];
    const char *u[3];
    const char *names[] = {"s1_000.bin", "s1_001.npy", "s1_002.bin"};
    for (int i = 0; i < 3; i++) {
        snprintf(urls[i], sizeof urls[i], "%s/%s", ft_http_base(srv), names[i]);
        u[i] = urls[i];
    }
    ferry_tokens *t = NULL;
    ferry_status st = ferry_tokens_open(u, 3, &(ferry_tokens_config){.seq_len = 7}, &t);
    if (st == FERRY_ERR_UNSUPPORTED) {
        ft_http_stop(srv);
        SKIP("built without libcurl");
    }
    ASSERT_OK(st);
    unsigned before = ft_http_count(srv, "Range: bytes=");
    check_windows(t, "s1_windows_T7.txt");
    /* One Range request per window: only its bytes cross. */
    ASSERT_EQ_INT(ft_http_count(srv, "Range: bytes=") - before, ferry_tokens_len(t));
    ferry_tokens_destroy(t);
    ASSERT_OK(ferry_tokens_open(u, 3, &(ferry_tokens_config){
        .seq_len = 15, .cut = FERRY_TOKENS_DOCUMENTS, .delimiter = 50256, .pack_buffer = 4,
        .seed = 5}, &t));
    ferry_tokens_info in;
    ferry_tokens_info_get(t, &in);
    ASSERT_EQ_SIZE(in.samples, 31);
    ferry_tokens_destroy(t);
    ft_http_stop(srv);
}

/* The Range reads of windows keep their connections (a pool of the
 * source's): reading every window opens a few, not one a window. */
TEST(remote_windows_reuse_connections)
{
    ft_http_faults f = {.keep_alive = true};
    ft_http *srv = ft_http_start(FERRY_SOURCE_DIR "/tests/ref/tokens", &f);
    char url[256];
    snprintf(url, sizeof url, "%s/s1_000.bin", ft_http_base(srv));
    const char *u = url;
    ferry_tokens *t = NULL;
    ferry_status st = ferry_tokens_open(&u, 1, &(ferry_tokens_config){.seq_len = 3}, &t);
    if (st == FERRY_ERR_UNSUPPORTED) {
        ft_http_stop(srv);
        SKIP("built without libcurl");
    }
    ASSERT_OK(st);
    size_t n = ferry_tokens_len(t);
    ASSERT(n >= 20);
    uint16_t row[4];
    for (size_t i = 0; i < n; i++)
        ASSERT_OK(ferry_tokens_read(t, i, row));
    unsigned req = ft_http_requests(srv), conns = ft_http_connections(srv);
    ASSERT_MSG(req >= n && conns <= 2, "%u connections for %u requests", conns, req);
    ferry_tokens_destroy(t);
    ft_http_stop(srv);
}

/* docs/API_ERRORS.md, tokens.h: every public call's answer to bad input. */
TEST(tokens_api_bad_input)
{
    ferry_tokens *t = NULL;
    const char *p = REF "s1_000.bin";
    ASSERT_STATUS(ferry_tokens_open(NULL, 1, NULL, &t), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_tokens_open(&p, 1, NULL, NULL), FERRY_ERR_INVALID_ARG);
    const char *nul[] = {NULL};
    ASSERT_STATUS(ferry_tokens_open(nul, 1, NULL, &t), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_tokens_open(&p, 1, &(ferry_tokens_config){.cut = 7}, &t),
                  FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_tokens_open(&p, 1, &(ferry_tokens_config){.format = 9}, &t),
                  FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_tokens_open(&p, 1, &(ferry_tokens_config){.seq_len = SIZE_MAX}, &t),
                  FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_tokens_open(&p, 1, &(ferry_tokens_config){.pack_buffer = SIZE_MAX}, &t),
                  FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_tokens_open(&p, 1, &(ferry_tokens_config){.token_dtype = FERRY_DTYPE_F16},
                                    &t), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "token_dtype f16");
    const char *missing = REF "no_such.bin";
    ASSERT_STATUS(ferry_tokens_open(&missing, 1, NULL, &t), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "no_such.bin");
    ASSERT(t == NULL);
    ferry_tokens_destroy(NULL);
    ASSERT(ferry_tokens_dataset(NULL) == NULL);
    ASSERT_EQ_SIZE(ferry_tokens_len(NULL), 0);
    ASSERT_EQ_SIZE(ferry_tokens_seq_len(NULL), 0);
    ASSERT_EQ_SIZE(ferry_tokens_token_bytes(NULL), 0);
    ferry_tokens_info in = {.shards = 5};
    ferry_tokens_info_get(NULL, &in);
    ASSERT_EQ_SIZE(in.shards, 0);
    ASSERT_STATUS(ferry_tokens_probe(NULL, FERRY_TOKENS_AUTO, 0, NULL, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_tokens_probe(p, FERRY_TOKENS_RAW, 3, NULL, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_OK(ferry_tokens_probe(p, FERRY_TOKENS_AUTO, 0, NULL, NULL));
    t = open_tokens(&p, 1, (ferry_tokens_config){.seq_len = 8});
    ferry_tokens_info_get(t, NULL);
    uint16_t row[9];
    int32_t off[9];
    size_t nd;
    ASSERT_STATUS(ferry_tokens_read(NULL, 0, row), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_tokens_read(t, 0, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_tokens_read(t, ferry_tokens_len(t), row), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_tokens_row_docs(NULL, 0, off, 9, &nd, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_tokens_row_docs(t, 0, NULL, 9, &nd, NULL), FERRY_ERR_INVALID_ARG);
    ASSERT_STATUS(ferry_tokens_row_docs(t, 0, off, 1, &nd, NULL), FERRY_ERR_INVALID_ARG);
    int32_t pos[8];
    ASSERT_OK(ferry_tokens_row_docs(t, 0, off, 9, &nd, pos)); /* a window: one document */
    ASSERT_EQ_SIZE(nd, 1);
    ASSERT_EQ_INT(off[0], 0);
    ASSERT_EQ_INT(off[1], 8);
    ASSERT_EQ_INT(pos[7], 7);
    ferry_tokens_destroy(t);
}

/* On a GPU (the simulated one too): the rows cross as stored (u16) and
 * arrive as dt, widened on the device; inputs and targets are views of them. */
static void gpu_rows(ferry_dtype dt)
{
    ferry_tokens *t = open_tokens(S1, 3, (ferry_tokens_config){.seq_len = 7, .token_dtype = dt});
    ferry_loader_config c = {.dataset = ferry_tokens_dataset(t), .batch_size = 8, .shuffle = true,
                             .seed = 1, .num_workers = 2, .device = ft_device("cuda:0")};
    ferry_loader *l = NULL;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_batch b;
    size_t seen = 0;
    uint16_t want[8];
    while (ferry_loader_next(l, NULL, &b) == FERRY_OK) {
        ferry_tensor *rows = ferry_batch_field(&b, "tokens"), *in = NULL, *tg = NULL;
        ASSERT_EQ_INT(ferry_tensor_dtype(rows), dt);
        ASSERT_EQ_INT(ferry_tensor_device(rows).type, FERRY_DEVICE_CUDA);
        ASSERT(ferry_tensor_data(ferry_batch_field(&b, "inputs")) == ferry_tensor_data(rows));
        ASSERT(ferry_tensor_data(ferry_batch_field(&b, "targets")) ==
               (char *)ferry_tensor_data(rows) + ferry_dtype_size(dt));
        ASSERT_OK(ferry_tensor_to(ferry_batch_field(&b, "inputs"), ferry_cpu(), false, &in));
        ASSERT_OK(ferry_tensor_to(ferry_batch_field(&b, "targets"), ferry_cpu(), false, &tg));
        for (size_t i = 0; i < b.size; i++) {
            ASSERT_OK(ferry_tokens_read(t, b.indices[i], want));
            for (size_t j = 0; j < 7; j++) {
                ASSERT_EQ_INT(ft_at2(in, i, j), want[j]);
                ASSERT_EQ_INT(ft_at2(tg, i, j), want[j + 1]);
            }
        }
        seen += b.size;
        ferry_tensor_release(in);
        ferry_tensor_release(tg);
    }
    ASSERT_EQ_SIZE(seen, ferry_tokens_len(t));
    ferry_loader_destroy(l);
    ferry_tokens_destroy(t);
}

TEST(windows_reach_the_gpu_as_fields)
{
    ft_require_cuda();
    gpu_rows(FERRY_DTYPE_I32);
    gpu_rows(FERRY_DTYPE_I64);
    gpu_rows(FERRY_DTYPE_U16);
    gpu_rows(FERRY_DTYPE_U32);
}

/* What crosses to the device per batch is the rows as stored: 2 bytes a
 * token, not the 8 that widened inputs and targets would take. */
TEST(tokens_cross_as_stored)
{
    ft_require_cuda();
    enum { T = 255, B = 16 };
    const char *p = counting_file("cross.bin", 64 * T + 1, 4);
    const char *p16 = counting_file("cross16.bin", 64 * T + 1, 2);
    for (int wide = 0; wide < 2; wide++) {
        ferry_tokens *t = open_tokens(wide ? &p : &p16, 1, (ferry_tokens_config){.seq_len = T});
        ferry_loader_config c = {.dataset = ferry_tokens_dataset(t), .batch_size = B,
                                 .num_workers = 2, .device = ft_device("cuda:0"), .drop_last = true};
        ferry_loader *l = NULL;
        ASSERT_OK(ferry_loader_create(&c, &l));
        ferry_batch b;
        size_t batches = 0;
        while (ferry_loader_next(l, NULL, &b) == FERRY_OK) {
            ferry_tensor *in = NULL;
            ASSERT_EQ_INT(ferry_tensor_dtype(ferry_batch_field(&b, "inputs")), FERRY_DTYPE_I32);
            ASSERT_OK(ferry_tensor_to(ferry_batch_field(&b, "inputs"), ferry_cpu(), false, &in));
            ASSERT_EQ_INT(ft_at2(in, 3, 5), (int64_t)b.indices[3] * T + 5);
            ferry_tensor_release(in);
            batches++;
        }
        ferry_loader_stats st;
        ASSERT_OK(ferry_loader_stats_get(l, &st));
        size_t per = (size_t)(st.h2d_bytes / batches), rows = B * (T + 1) * (wide ? 4 : 2);
        ASSERT_MSG(per >= rows && per < rows + 4096, "%zu bytes a batch crossed for %zu of rows "
                   "(%s tokens)", per, rows, wide ? "u32" : "u16");
        ferry_loader_destroy(l);
        ferry_tokens_destroy(t);
    }
}

/* The fields as declared: the stored row, two views of it, and in a batch
 * on the CPU (widened by the workers there) inputs and targets as strided
 * views of the one [B, T + 1] row, not copies. */
TEST(inputs_and_targets_are_views_of_the_row)
{
    enum { T = 7 };
    ferry_tokens *t = open_tokens(S1, 3, (ferry_tokens_config){.seq_len = T});
    const ferry_field *f = NULL;
    size_t nf = 0;
    ASSERT_OK(ferry_dataset_fields(ferry_tokens_dataset(t), &f, &nf));
    ASSERT_EQ_SIZE(nf, 3);
    ASSERT_STR_EQ(f[0].name, "tokens");
    ASSERT_EQ_INT(f[0].dtype, FERRY_DTYPE_U16);
    ASSERT_EQ_INT(f[0].batch_dtype, FERRY_DTYPE_I32);
    ASSERT_EQ_SIZE(f[0].shape[0], T + 1);
    ASSERT_STR_EQ(f[1].view_of, "tokens");
    ASSERT_EQ_SIZE(f[1].view_start, 0);
    ASSERT_STR_EQ(f[2].view_of, "tokens");
    ASSERT_EQ_SIZE(f[2].view_start, 1);
    ferry_loader_config c = {.dataset = ferry_tokens_dataset(t), .batch_size = 5, .shuffle = true,
                             .seed = 4, .num_workers = 2, .device = ferry_cpu()};
    ferry_loader *l = NULL;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_batch b;
    uint16_t want[T + 1];
    while (ferry_loader_next(l, NULL, &b) == FERRY_OK) {
        ferry_tensor *rows = ferry_batch_field(&b, "tokens"), *in = ferry_batch_field(&b, "inputs"),
                     *tg = ferry_batch_field(&b, "targets");
        ASSERT(ferry_tensor_is_contiguous(rows));
        ASSERT_EQ_INT(ferry_tensor_dtype(in), FERRY_DTYPE_I32);
        ASSERT_EQ_INT(ferry_tensor_dim(in, 0), (int64_t)b.size);
        ASSERT_EQ_INT(ferry_tensor_dim(in, 1), T);
        ASSERT_EQ_INT(ferry_tensor_strides(in)[0], T + 1);
        ASSERT_EQ_INT(ferry_tensor_strides(tg)[1], 1);
        ASSERT(ferry_tensor_data(in) == ferry_tensor_data(rows));
        ASSERT(ferry_tensor_data(tg) == (int32_t *)ferry_tensor_data(rows) + 1);
        ASSERT(ferry_batch_lengths(&b, "inputs") == NULL);
        for (size_t i = 0; i < b.size; i++) {
            ASSERT_OK(ferry_tokens_read(t, b.indices[i], want));
            for (size_t j = 0; j <= T; j++)
                ASSERT_EQ_INT(ft_at2(rows, i, j), want[j]);
        }
    }
    ferry_loader_destroy(l);
    /* field_dtypes names the row, not a view; naming the row overrides the dataset's i32 */
    ferry_field_dtype bad = {"targets", FERRY_DTYPE_I64}, good = {"tokens", FERRY_DTYPE_U16};
    c.field_dtypes = &bad;
    c.num_field_dtypes = 1;
    ASSERT_STATUS(ferry_loader_create(&c, &l), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "'targets' is a view of 'tokens'");
    c.field_dtypes = &good;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ASSERT_OK(ferry_loader_next(l, NULL, &b));
    ASSERT_EQ_INT(ferry_tensor_dtype(ferry_batch_field(&b, "targets")), FERRY_DTYPE_U16);
    ASSERT_OK(ferry_tokens_read(t, b.indices[0], want));
    ASSERT_EQ_INT(ft_at2(ferry_batch_field(&b, "targets"), 0, T - 1), want[T]);
    ferry_loader_destroy(l);
    ferry_tokens_destroy(t);
    /* u32 files cannot arrive as u16 */
    const char *p32 = REF "s2_000.bin";
    ASSERT_STATUS(ferry_tokens_open(&p32, 1, &(ferry_tokens_config){.seq_len = 4,
                                    .token_dtype = FERRY_DTYPE_U16}, &t), FERRY_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(ferry_last_error(), "token_dtype u16");
}

/* Documents through the loader: every row's inputs, targets, offsets (with
 * their lengths) and positions as ferry_tokens_read and _row_docs give them. */
TEST(documents_through_the_loader_as_fields)
{
    enum { T = 15 };
    ferry_tokens *t = open_tokens(S1, 3, (ferry_tokens_config){
        .seq_len = T, .cut = FERRY_TOKENS_DOCUMENTS, .delimiter = 50256, .pack_buffer = 4,
        .seed = 5});
    const ferry_field *f = NULL;
    size_t nf = 0;
    ASSERT_OK(ferry_dataset_fields(ferry_tokens_dataset(t), &f, &nf));
    ASSERT_EQ_SIZE(nf, 5);
    ASSERT_STR_EQ(f[3].name, "offsets");
    ASSERT(f[3].ragged);
    ferry_loader_config c = {.dataset = ferry_tokens_dataset(t), .batch_size = 6, .shuffle = true,
                             .seed = 2, .num_workers = 3, .device = ferry_cpu()};
    ferry_loader *l = NULL;
    ASSERT_OK(ferry_loader_create(&c, &l));
    ferry_batch b;
    size_t seen = 0;
    while (ferry_loader_next(l, NULL, &b) == FERRY_OK) {
        const ferry_tensor *in = ferry_batch_field(&b, "inputs"), *tg = ferry_batch_field(&b, "targets");
        const int32_t *off = ferry_tensor_data(ferry_batch_field(&b, "offsets"));
        const int32_t *pos = ferry_tensor_data(ferry_batch_field(&b, "positions"));
        const int64_t *len = ferry_tensor_data(ferry_batch_lengths(&b, "offsets"));
        ASSERT(in && tg && off && pos && len);
        for (size_t i = 0; i < b.size; i++) {
            uint16_t row[T + 1];
            int32_t o[T + 1], p[T];
            size_t nd = 0;
            ASSERT_OK(ferry_tokens_read(t, b.indices[i], row));
            ASSERT_OK(ferry_tokens_row_docs(t, b.indices[i], o, T + 1, &nd, p));
            ASSERT_EQ_INT(len[i], nd + 1);
            for (size_t j = 0; j < T; j++) {
                ASSERT_EQ_INT(ft_at2(in, i, j), row[j]);
                ASSERT_EQ_INT(ft_at2(tg, i, j), row[j + 1]);
                ASSERT_EQ_INT(pos[i * T + j], p[j]);
            }
            for (size_t j = 0; j <= nd; j++)
                ASSERT_EQ_INT(off[i * (T + 1) + j], o[j]);
        }
        seen += b.size;
    }
    ASSERT_EQ_SIZE(seen, ferry_tokens_len(t));
    ferry_loader_destroy(l);
    ferry_tokens_destroy(t);
    /* get_fields writes the row as stored and the boundaries; views get no dst. */
    t = open_tokens(S1, 3, (ferry_tokens_config){
        .seq_len = T, .cut = FERRY_TOKENS_DOCUMENTS, .delimiter = 50256});
    ASSERT_OK(ferry_dataset_fields(ferry_tokens_dataset(t), &f, &nf));
    ASSERT_STR_EQ(f[0].name, "tokens");
    ASSERT_EQ_SIZE(f[0].shape[0], T + 1);
    void *dst[5];
    uint16_t row[T + 1], want[T + 1];
    int32_t o[T + 1], p[T], o2[T + 1];
    size_t lens[5] = {0}, nd = 0;
    dst[0] = row;
    dst[1] = dst[2] = NULL;
    dst[3] = o;
    dst[4] = p;
    ASSERT_OK(ferry_dataset_get_fields(ferry_tokens_dataset(t), 2, dst, lens, NULL));
    ASSERT_OK(ferry_tokens_read(t, 2, want));
    ASSERT_MEM_EQ(row, want, sizeof row);
    ASSERT_OK(ferry_tokens_row_docs(t, 2, o2, T + 1, &nd, NULL));
    ASSERT_EQ_SIZE(lens[3], nd + 1);
    ASSERT_EQ_SIZE(lens[1], T);
    ASSERT_MEM_EQ(o, o2, (nd + 1) * sizeof *o);
    ferry_tokens_destroy(t);
}

/* Streaming mode reads windows shard by shard (they come in shard runs):
 * every window once per epoch, each shard's in a bounded neighbourhood. */
TEST(streaming_reads_every_window_once)
{
    ferry_tokens *t = open_tokens(S1, 3, (ferry_tokens_config){.seq_len = 7,
                                                               .token_dtype = FERRY_DTYPE_U16});
    size_t n = ferry_tokens_len(t);
    ferry_loader_config c = {.dataset = ferry_tokens_dataset(t), .batch_size = 5, .shuffle = true,
                             .seed = 3, .num_workers = 2, .device = ferry_cpu(),
                             .stream_shuffle_buffer = 8};
    ferry_loader *l = NULL;
    ASSERT_OK(ferry_loader_create(&c, &l));
    uint8_t seen[512] = {0};
    ASSERT(n < sizeof seen);
    size_t got = 0;
    ferry_batch b;
    uint16_t want[8];
    while (ferry_loader_next(l, NULL, &b) == FERRY_OK) {
        const uint16_t *rows = ferry_tensor_data(ferry_batch_field(&b, "tokens"));
        for (size_t i = 0; i < b.size; i++, got++) {
            ASSERT(!seen[b.indices[i]]);
            seen[b.indices[i]] = 1;
            ASSERT_OK(ferry_tokens_read(t, b.indices[i], want));
            ASSERT_MEM_EQ(rows + i * 8, want, sizeof want);
        }
    }
    ASSERT_EQ_SIZE(got, n);
    ferry_loader_destroy(l);
    ferry_tokens_destroy(t);
}

/* A server that fails a few requests: the reads retry and give the same tokens. */
TEST(remote_shards_survive_transient_errors)
{
    ft_http_faults f = {.fail_first = 2, .fail_status = 503};
    ft_http *srv = ft_http_start(FERRY_SOURCE_DIR "/tests/ref/tokens", &f);
    char url[256];
    snprintf(url, sizeof url, "%s/s2_000.bin", ft_http_base(srv));
    const char *u = url;
    ferry_tokens *t = NULL;
    ferry_status st = ferry_tokens_open(&u, 1, &(ferry_tokens_config){.seq_len = 5,
                                                                       .remote_retries = 3}, &t);
    if (st == FERRY_ERR_UNSUPPORTED) {
        ft_http_stop(srv);
        SKIP("built without libcurl");
    }
    ASSERT_OK(st);
    check_windows(t, "s2_windows_T5.txt");
    ferry_tokens_destroy(t);
    /* A URL that is not there is named. */
    snprintf(url, sizeof url, "%s/missing.bin", ft_http_base(srv));
    ASSERT(ferry_tokens_open(&u, 1, NULL, &t) != FERRY_OK);
    ASSERT_STR_CONTAINS(ferry_last_error(), "missing.bin");
    ft_http_stop(srv);
}

/* The fuzz target's seed corpus and crashers (tests/fuzz/corpus/tokens,
 * tests/data/crashers/tokens), replayed with this build's compiler and
 * sanitizers, and every reference file of tests/ref/tokens. */
static size_t replay(const char *dir)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        size_t len = 0;
        uint8_t *data = ft_read_file(p, &len);
        ferry_fuzz_tokens(data, len);
        free(data);
        n++;
    }
    if (d)
        closedir(d);
    return n;
}

TEST(fuzz_corpus_replays)
{
    ASSERT(replay(FERRY_SOURCE_DIR "/tests/fuzz/corpus/tokens") >= 5);
    replay(FERRY_SOURCE_DIR "/tests/data/crashers/tokens");
    ASSERT(replay(FERRY_SOURCE_DIR "/tests/ref/tokens") >= 5);
}
