/* train_chars: a character-level language model (makemore's MLP: the last k
 * characters, an Embedding, a hidden layer, the next character by
 * cross-entropy) trained on the English text of the Debian package `fortunes`.
 *
 *     train_chars [--text PATH] [--device cpu|cuda:N] [--seconds S] [--steps N]
 *                 [--context K] [--out DIR] [--seed N] [--lines N] [--eval-every N] [--val N]
 *                 [--batch N] [--lr X]
 *
 * The text (a file, or a folder's files but *.dat and *.u8: the fortune files)
 * loses its "%" separator lines and every byte but newline and printable ASCII;
 * its first 90% trains and the rest validates. It prints the validation loss
 * (nats per character) against two baselines on the same validation text:
 * unigram (the entropy of the training text's character frequencies) and
 * bigram (add-one-smoothed counts of character pairs); the goal is below both.
 * Then a few lines the model writes, and DIR/train_chars.svg (the loss curve).
 *
 * The data feed is a custom ferry_dataset of k-character contexts (sample: k
 * u8 character ids; label: the next one) through ferry_loader, kept in
 * chars_dataset() alone so that a token dataset can replace it.
 * tests/test_train_chars.c runs this file's tc_run for a few seconds. */
#include <dirent.h>
#include <stdlib.h>

#include "common.h"

#define TC_PROG "train_chars"
#define TC_DEFAULT_TEXT "/usr/share/games/fortunes"
#define TC_MAX_POINTS 400

typedef struct tc_opts {
    const char *text, *device, *out;
    double seconds;   /* stop after this long (0: no limit) */
    size_t steps;     /* stop after this many steps (0: no limit) */
    size_t context;   /* k */
    size_t lines;     /* generated lines printed */
    size_t val_max;   /* validation positions evaluated */
    size_t eval_every; /* steps between points of the curve */
    size_t batch;
    double lr;         /* AdamW's */
    uint64_t seed;
    bool quiet;
} tc_opts;

static tc_opts tc_defaults(void)
{
    return (tc_opts){.text = TC_DEFAULT_TEXT, .out = ".", .seconds = 60, .context = 8, .lines = 4,
                     .val_max = 20000, .eval_every = 200, .batch = 256, .lr = 3e-3, .seed = 1};
}

typedef struct tc_result {
    double unigram, bigram; /* baselines, nats per character */
    double first_val, val_loss;
    size_t steps, vocab, chars;
} tc_result;

/* ---- the text ---- */
typedef struct tc_text {
    uint8_t *ids;   /* the text as vocabulary ids */
    size_t n;
    size_t vocab;
    char chars[256]; /* id -> character */
} tc_text;

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static bool ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}

/* Appends file path's kept bytes to *buf (drops "%" lines and all but '\n' and
 * printable ASCII). */
static ferry_status append_file(const char *path, char **buf, size_t *n, size_t *cap)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return ferry_set_error(FERRY_ERR_IO, "%s: %s", path, strerror(errno));
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        if (!strcmp(line, "%\n"))
            continue;
        size_t len = strlen(line);
        if (*n + len + 1 > *cap) {
            size_t c = *cap ? *cap * 2 : 1 << 20;
            while (c < *n + len + 1)
                c *= 2;
            char *p = realloc(*buf, c);
            if (!p) {
                fclose(f);
                return ferry_set_error(FERRY_ERR_NO_MEMORY, "%s: no memory for the text", path);
            }
            *buf = p;
            *cap = c;
        }
        for (size_t i = 0; i < len; i++)
            if (line[i] == '\n' || (line[i] >= 32 && line[i] < 127))
                (*buf)[(*n)++] = line[i];
    }
    bool bad = ferror(f);
    fclose(f);
    return bad ? ferry_set_error(FERRY_ERR_IO, "%s: read error", path) : FERRY_OK;
}

static ferry_status read_folder(const char *dir, char **buf, size_t *n, size_t *cap)
{
    DIR *d = opendir(dir);
    if (!d)
        return ferry_set_error(FERRY_ERR_IO, "%s: %s", dir, strerror(errno));
    char **names = NULL;
    size_t count = 0, room = 0;
    ferry_status st = FERRY_OK;
    for (struct dirent *e; st == FERRY_OK && (e = readdir(d));) {
        char path[4096];
        struct stat sb;
        if (e->d_name[0] == '.' || ends_with(e->d_name, ".dat") || ends_with(e->d_name, ".u8") ||
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path || stat(path, &sb) ||
            !S_ISREG(sb.st_mode))
            continue;
        if (count == room) {
            room = room ? room * 2 : 64;
            char **p = realloc(names, room * sizeof *names);
            if (!p) {
                st = ferry_set_error(FERRY_ERR_NO_MEMORY, "no memory");
                break;
            }
            names = p;
        }
        if (!(names[count] = strdup(path)))
            st = ferry_set_error(FERRY_ERR_NO_MEMORY, "no memory");
        else
            count++;
    }
    closedir(d);
    qsort(names, count, sizeof *names, name_cmp); /* the same text on every machine */
    for (size_t i = 0; i < count; i++) {
        if (st == FERRY_OK)
            st = append_file(names[i], buf, n, cap);
        free(names[i]);
    }
    free(names);
    return st;
}

static ferry_status text_load(const char *path, tc_text *t)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return ferry_set_error(FERRY_ERR_IO, "%s: %s (the Debian package fortunes installs the default "
                               "text: apt-get install fortunes)", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    ferry_status st = S_ISDIR(sb.st_mode) ? read_folder(path, &buf, &n, &cap) : append_file(path, &buf, &n, &cap);
    if (st == FERRY_OK && n < 10000)
        st = ferry_set_error(FERRY_ERR_INVALID_ARG, "%s: only %zu characters of text; train_chars wants at least "
                             "10000", path, n);
    if (st != FERRY_OK) {
        free(buf);
        return st;
    }
    int id[256];
    memset(id, -1, sizeof id);
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < n; i++)
        id[(uint8_t)buf[i]] = 0;
    for (int c = 0; c < 256; c++)
        if (id[c] == 0) {
            t->chars[t->vocab] = (char)c;
            id[c] = (int)t->vocab++;
        }
    t->ids = (uint8_t *)buf; /* ids written over the characters, in place */
    for (size_t i = 0; i < n; i++)
        t->ids[i] = (uint8_t)id[(uint8_t)buf[i]];
    t->n = n;
    return FERRY_OK;
}

/* ---- the baselines, in nats per character ---- */
/* Entropy of the character frequencies of ids[0, n). */
static double unigram_entropy(const uint8_t *ids, size_t n, size_t vocab)
{
    double count[256] = {0}, h = 0;
    for (size_t i = 0; i < n; i++)
        count[ids[i]]++;
    for (size_t c = 0; c < vocab; c++)
        if (count[c] > 0)
            h -= count[c] / (double)n * log(count[c] / (double)n);
    return h;
}

/* Cross-entropy on positions [vb, ve) of a bigram model counted on [1, te). */
static double bigram_loss(const uint8_t *ids, size_t te, size_t vb, size_t ve, size_t vocab)
{
    double *pair = calloc(vocab * vocab, sizeof *pair), *row = calloc(vocab, sizeof *row);
    double loss = NAN;
    if (pair && row && ve > vb) {
        for (size_t i = 1; i < te; i++) {
            pair[ids[i - 1] * vocab + ids[i]]++;
            row[ids[i - 1]]++;
        }
        loss = 0;
        for (size_t i = vb; i < ve; i++)
            loss -= log((pair[ids[i - 1] * vocab + ids[i]] + 1) / (row[ids[i - 1]] + (double)vocab));
        loss /= (double)(ve - vb);
    }
    free(pair);
    free(row);
    return loss;
}

/* ---- the data feed: k-character contexts as a custom dataset ---- */
typedef struct chars_src {
    const uint8_t *ids;
    size_t first, k; /* sample j: context ids[first + j - k, first + j), label ids[first + j] */
} chars_src;

static ferry_status chars_get(void *user, size_t index, void *dst, size_t dst_bytes, const ferry_sample_ctx *ctx,
                              int64_t *label)
{
    (void)ctx;
    const chars_src *s = user;
    size_t p = s->first + index;
    if (dst_bytes != s->k)
        return ferry_set_error(FERRY_ERR_INVALID_ARG, "expected %zu bytes, got %zu", s->k, dst_bytes);
    memcpy(dst, s->ids + p - s->k, s->k);
    *label = s->ids[p];
    return FERRY_OK;
}

/* Positions [first, first + count) of t (first >= k) as a dataset of u8 [1, 1, k]. */
static ferry_status chars_dataset(const tc_text *t, chars_src *src, size_t first, size_t count, size_t k,
                                  ferry_dataset **out)
{
    *src = (chars_src){.ids = t->ids, .first = first, .k = k};
    ferry_dataset_callbacks cb = {.len = count,
                                  .format = {.channels = 1, .height = 1, .width = k, .dtype = FERRY_DTYPE_U8},
                                  .num_classes = t->vocab,
                                  .get = chars_get};
    return ferry_dataset_custom(&cb, src, out);
}

/* ---- the model ---- */
#define TC_EMBED 16
#define TC_HIDDEN 256

static ferry_status chars_model(size_t vocab, size_t k, uint64_t seed, ferry_device dev, ferry_module **out)
{
    ferry_module *m[5] = {0};
    ferry_status made[5] = {
        ferry_embedding_create((int64_t)vocab, TC_EMBED, &m[0]),
        ferry_flatten_create(&m[1]),
        ferry_linear_create((int64_t)k * TC_EMBED, TC_HIDDEN, true, &m[2]),
        ferry_relu_create(&m[3]),
        ferry_linear_create(TC_HIDDEN, (int64_t)vocab, true, &m[4]),
    };
    CHECK(sequential(m, made, 5, out));
    ferry_status st = ferry_module_init(*out, seed);
    if (st == FERRY_OK)
        st = ferry_module_to(*out, dev);
    if (st != FERRY_OK) {
        sample_report();
        ferry_module_destroy(*out);
        *out = NULL;
    }
    return st;
}

/* The batch's u8 contexts as i32 indices on the device. */
static ferry_status batch_indices(const ferry_batch *b, ferry_tensor **idx)
{
    return ferry_tensor_to_dtype(b->images, FERRY_DTYPE_I32, idx);
}

/* Mean loss over the whole validation loader, in evaluation mode. */
static ferry_status eval_loss(ferry_module *net, ferry_loader *val, ferry_metrics *met, double *loss)
{
    CHECK(ferry_metrics_reset(met, NULL));
    CHECK(ferry_loader_reset(val, 0));
    ferry_batch b;
    ferry_status st;
    while ((st = ferry_loader_next(val, NULL, &b)) == FERRY_OK) {
        ferry_tensor *idx = NULL;
        st = batch_indices(&b, &idx);
        if (st == FERRY_OK)
            st = ferry_eval_step(net, idx, b.labels, met, NULL);
        ferry_tensor_release(idx);
        if (st != FERRY_OK)
            break;
    }
    if (st != FERRY_END)
        CHECK(st);
    CHECK(ferry_metrics_get(met, loss, NULL, NULL));
    return FERRY_OK;
}

/* ---- generation ---- */
static double tc_uniform(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (double)(*s >> 11) * 0x1.0p-53;
}

/* The next character id, drawn from the model's distribution after ctx. */
static ferry_status next_char(ferry_module *net, ferry_device dev, const int32_t *ctx, size_t k, size_t vocab,
                              uint64_t *rng, int *out)
{
    int64_t shape[2] = {1, (int64_t)k};
    ferry_tensor *x = NULL, *logits = NULL, *host = NULL;
    float p[256];
    ferry_status st = ferry_tensor_from_host(ctx, shape, 2, FERRY_DTYPE_I32, dev, &x);
    if (st == FERRY_OK)
        st = ferry_module_forward(net, x, NULL, &logits);
    if (st == FERRY_OK)
        st = ferry_tensor_cpu(logits, &host);
    if (st == FERRY_OK)
        st = ferry_tensor_copy_to_host(host, p, vocab * sizeof(float));
    ferry_tensor_release(x);
    ferry_tensor_release(logits);
    ferry_tensor_release(host);
    CHECK(st);
    float mx = p[0];
    for (size_t c = 1; c < vocab; c++)
        mx = p[c] > mx ? p[c] : mx;
    double sum = 0;
    for (size_t c = 0; c < vocab; c++)
        sum += exp((double)p[c] - mx);
    double u = tc_uniform(rng) * sum;
    *out = (int)vocab - 1;
    for (size_t c = 0; c < vocab; c++) {
        u -= exp((double)p[c] - mx);
        if (u < 0) {
            *out = (int)c;
            break;
        }
    }
    return FERRY_OK;
}

/* Prints `lines` lines the model writes, each started after a newline. */
static ferry_status generate(ferry_module *net, ferry_device dev, const tc_text *t, size_t k, size_t lines,
                             uint64_t seed)
{
    int32_t ctx[64];
    int nl = 0;
    for (size_t c = 0; c < t->vocab; c++)
        if (t->chars[c] == '\n')
            nl = (int)c;
    for (size_t i = 0; i < k; i++)
        ctx[i] = nl;
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
    ferry_module_train(net, false);
    for (size_t line = 0; line < lines; line++) {
        printf("  > ");
        for (int len = 0; len < 120; len++) {
            int c;
            CHECK(next_char(net, dev, ctx, k, t->vocab, &rng, &c));
            memmove(ctx, ctx + 1, (k - 1) * sizeof *ctx);
            ctx[k - 1] = c;
            if (t->chars[c] == '\n')
                break;
            putchar(t->chars[c]);
        }
        putchar('\n');
    }
    ferry_module_train(net, true);
    return FERRY_OK;
}

/* ---- the curve ---- */
static int write_svg(const char *dir, const double *train, const double *val, size_t n, double unigram,
                     double bigram, size_t every)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/train_chars.svg", dir) >= (int)sizeof path)
        return -1;
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    double *uni = malloc((n ? n : 1) * sizeof *uni), *bi = malloc((n ? n : 1) * sizeof *bi);
    for (size_t i = 0; uni && bi && i < n; i++)
        uni[i] = unigram, bi[i] = bigram;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"520\" height=\"380\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"60\" y=\"24\" font-size=\"16\">train_chars: loss (nats/char), a point every %zu "
               "steps</text>\n", every);
    svg_series s[4] = {{"train", train}, {"validation", val}, {"unigram baseline", uni}, {"bigram baseline", bi}};
    if (uni && bi)
        svg_line_panel(f, 60, 60, 400, 260, "loss", s, 4, n);
    fprintf(f, "</svg>\n");
    free(uni);
    free(bi);
    return fclose(f) == 0 && uni && bi ? 0 : -1;
}

/* ---- training ---- */
typedef struct tc_run_state {
    tc_text text;
    chars_src train_src, val_src;
    ferry_dataset *train_ds, *val_ds;
    ferry_loader *train, *val;
    ferry_module *net;
    ferry_optim *opt;
    ferry_metrics *met, *vmet;
    double train_curve[TC_MAX_POINTS], val_curve[TC_MAX_POINTS];
    size_t points;
} tc_run_state;

static void tc_free(tc_run_state *r)
{
    ferry_optim_destroy(r->opt);
    ferry_module_destroy(r->net);
    ferry_metrics_destroy(r->met);
    ferry_metrics_destroy(r->vmet);
    ferry_loader_destroy(r->train);
    ferry_loader_destroy(r->val);
    ferry_dataset_release(r->train_ds);
    ferry_dataset_release(r->val_ds);
    free(r->text.ids);
}

static ferry_status tc_setup(const tc_opts *o, tc_run_state *r, ferry_device dev, tc_result *res)
{
    CHECK(text_load(o->text, &r->text));
    size_t n = r->text.n, k = o->context, split = n / 10 * 9;
    size_t val_count = n - split < o->val_max ? n - split : o->val_max;
    res->vocab = r->text.vocab;
    res->chars = n;
    res->unigram = unigram_entropy(r->text.ids, split, r->text.vocab);
    res->bigram = bigram_loss(r->text.ids, split, split, split + val_count, r->text.vocab);
    CHECK(chars_dataset(&r->text, &r->train_src, k, split - k, k, &r->train_ds));
    CHECK(chars_dataset(&r->text, &r->val_src, split, val_count, k, &r->val_ds));
    ferry_loader_config tc = {.dataset = r->train_ds, .batch_size = o->batch, .shuffle = true, .seed = o->seed,
                              .drop_last = true, .num_workers = 2, .device = dev, .out_dtype = FERRY_DTYPE_U8};
    CHECK(ferry_loader_create(&tc, &r->train));
    ferry_loader_config vc = {.dataset = r->val_ds, .batch_size = 1000, .num_workers = 2, .device = dev,
                              .out_dtype = FERRY_DTYPE_U8, .eval = true};
    CHECK(ferry_loader_create(&vc, &r->val));
    CHECK(chars_model(r->text.vocab, k, o->seed, dev, &r->net));
    CHECK(ferry_adamw_create(r->net, o->lr, 0.9, 0.999, 1e-8, 0.0, &r->opt));
    CHECK(ferry_metrics_create(dev, &r->met));
    CHECK(ferry_metrics_create(dev, &r->vmet));
    return FERRY_OK;
}

/* One point of the curve: the train loss since the last point, the validation loss. */
static ferry_status tc_point(const tc_opts *o, tc_run_state *r, size_t step, double t0, tc_result *res)
{
    double tl = NAN, vl = 0; /* no train loss before the first step */
    if (step > 0) {
        CHECK(ferry_metrics_get(r->met, &tl, NULL, NULL));
        CHECK(ferry_metrics_reset(r->met, NULL));
    }
    CHECK(eval_loss(r->net, r->val, r->vmet, &vl));
    if (r->points == 0)
        res->first_val = vl;
    if (r->points < TC_MAX_POINTS) {
        r->train_curve[r->points] = tl;
        r->val_curve[r->points] = vl;
        r->points++;
    }
    res->val_loss = vl;
    if (!o->quiet)
        printf("step %6zu  %6.1fs  train %.4f  validation %.4f\n", step, sample_now() - t0, step ? tl : NAN, vl);
    return FERRY_OK;
}

static ferry_status tc_train(const tc_opts *o, tc_run_state *r, tc_result *res)
{
    double t0 = sample_now();
    uint64_t epoch = 0;
    size_t step = 0;
    CHECK(tc_point(o, r, 0, t0, res)); /* the untrained model's loss */
    for (;;) {
        bool out_of_time = o->seconds > 0 && sample_now() - t0 >= o->seconds;
        if ((o->steps && step >= o->steps) || out_of_time)
            break;
        ferry_batch b;
        ferry_status st = ferry_loader_next(r->train, NULL, &b);
        if (st == FERRY_END) {
            CHECK(ferry_loader_reset(r->train, ++epoch));
            continue;
        }
        CHECK(st);
        ferry_tensor *idx = NULL;
        st = batch_indices(&b, &idx);
        if (st == FERRY_OK)
            st = ferry_train_step(r->net, r->opt, NULL, idx, b.labels, r->met, NULL);
        ferry_tensor_release(idx);
        CHECK(st);
        if (++step % o->eval_every == 0)
            CHECK(tc_point(o, r, step, t0, res));
    }
    if (step % o->eval_every != 0)
        CHECK(tc_point(o, r, step, t0, res));
    res->steps = step;
    return FERRY_OK;
}

/* Loads the text, trains, reports; *res gets the numbers. */
static ferry_status tc_run(const tc_opts *o, tc_result *res)
{
    memset(res, 0, sizeof *res);
    if (o->context < 1 || o->context > 64)
        return ferry_set_error(FERRY_ERR_INVALID_ARG, "--context %zu: expected 1 to 64", o->context);
    ferry_device dev;
    CHECK(pick_device(o->device, &dev));
    tc_run_state *r = calloc(1, sizeof *r);
    if (!r)
        return ferry_set_error(FERRY_ERR_NO_MEMORY, "no memory");
    ferry_status st = tc_setup(o, r, dev, res);
    if (st == FERRY_OK) {
        printf("text: %s, %zu characters, %zu distinct; context %zu; model Embedding(%zu, %d) -> %d -> %zu\n",
               o->text, res->chars, res->vocab, o->context, res->vocab, TC_EMBED, TC_HIDDEN, res->vocab);
        st = tc_train(o, r, res);
    }
    if (st == FERRY_OK) {
        bool below = res->val_loss < res->unigram && res->val_loss < res->bigram;
        printf("validation loss %.4f nats/char after %zu steps; baselines: unigram %.4f (entropy of the character "
               "frequencies), bigram %.4f; %s\n", res->val_loss, res->steps, res->unigram, res->bigram,
               below ? "below both" : res->val_loss < res->unigram ? "below the unigram only" : "above both");
        if (write_svg(o->out, r->train_curve, r->val_curve, r->points, res->unigram, res->bigram, o->eval_every) != 0)
            st = ferry_set_error(FERRY_ERR_IO, "%s/train_chars.svg: cannot write it", o->out);
        else
            printf("curve: %s/train_chars.svg\n", o->out);
    }
    if (st == FERRY_OK && o->lines) {
        printf("generated:\n");
        st = generate(r->net, dev, &r->text, o->context, o->lines, o->seed);
    }
    if (st != FERRY_OK)
        sample_report();
    tc_free(r);
    free(r);
    return st;
}

#ifndef TRAIN_CHARS_NO_MAIN
static void usage(FILE *f)
{
    fprintf(f, "usage: " TC_PROG " [--text PATH] [--device cpu|cuda:N] [--seconds S] [--steps N] [--context K]\n"
               "                   [--out DIR] [--seed N] [--lines N] [--eval-every N] [--val N]\n"
               "                   [--batch N] [--lr X]\n"
               "  trains a character-level MLP language model on PATH (default " TC_DEFAULT_TEXT
               ", the Debian package fortunes)\n"
               "  for S seconds (default 60; 0: no limit) or N steps, and writes DIR/train_chars.svg;\n"
               "  the validation loss over N positions (default 20000) every N steps (default 200);\n"
               "  batches of N contexts (default 256), AdamW at learning rate X (default 0.003)\n");
}

static int parse_args(int argc, char **argv, tc_opts *o)
{
    static const char *const value_opts[] = {"--text", "--device", "--seconds", "--steps", "--context", "--out",
                                             "--seed", "--lines", "--eval-every", "--val", "--batch", "--lr", NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            usage(stdout);
            return -1;
        }
        if (!cli_in(a, value_opts))
            return cli_unknown(TC_PROG, a, usage);
        const char *v = cli_value(TC_PROG, argc, argv, &i);
        int rc = 0;
        if (!v)
            return CLI_USAGE;
        if (!strcmp(a, "--text")) o->text = v;
        else if (!strcmp(a, "--device")) o->device = v;
        else if (!strcmp(a, "--out")) o->out = v;
        else if (!strcmp(a, "--seconds")) rc = cli_double(TC_PROG, a, v, 0, false, INFINITY, &o->seconds);
        else if (!strcmp(a, "--steps")) rc = cli_size(TC_PROG, a, v, 0, SIZE_MAX, &o->steps);
        else if (!strcmp(a, "--context")) rc = cli_size(TC_PROG, a, v, 1, 64, &o->context);
        else if (!strcmp(a, "--lines")) rc = cli_size(TC_PROG, a, v, 0, 100, &o->lines);
        else if (!strcmp(a, "--eval-every")) rc = cli_size(TC_PROG, a, v, 1, SIZE_MAX, &o->eval_every);
        else if (!strcmp(a, "--batch")) rc = cli_size(TC_PROG, a, v, 1, 1 << 20, &o->batch);
        else if (!strcmp(a, "--lr")) rc = cli_double(TC_PROG, a, v, 0, true, 1, &o->lr);
        else if (!strcmp(a, "--val")) rc = cli_size(TC_PROG, a, v, 1, SIZE_MAX, &o->val_max);
        else rc = cli_u64(TC_PROG, a, v, &o->seed);
        if (rc)
            return rc;
    }
    return 0;
}

int main(int argc, char **argv)
{
    tc_opts o = tc_defaults();
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    tc_result r;
    return tc_run(&o, &r) == FERRY_OK ? 0 : 1;
}
#endif
