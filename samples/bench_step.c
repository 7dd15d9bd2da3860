/* The training step alone, timed: train_gray's model (the CNN or the MLP) on
 * one batch of random images already on the device, eager (ferry_train_step)
 * or as one CUDA graph (--graph, ferry_train_graph_step), so the step's own
 * cost shows without the loader. scripts/gpu-check.sh runs it beside
 * bench/step_torch.py (the same step in PyTorch, eager and torch.compile).
 *
 *   build/samples/bench_step [--model cnn|mlp] [--batch N] [--steps N] [--warmup N]
 *                            [--amp] [--graph] [--device D]
 *
 * Prints one JSON line: {"model": ..., "batch": N, "amp": b, "graph": b,
 * "steps": N, "ms_per_step": X, "images_per_s": Y, "loss": Z}. The time is the
 * wall clock from the first timed step to the stream's end (the warm-up steps,
 * the graph's capture among them, are not in it). */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "../tools/cli_args.h"

#define PROG "bench_step"

typedef struct bopts {
    const char *model, *device;
    size_t batch, steps, warmup;
    bool amp, graph;
} bopts;

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_step [--model cnn|mlp] [--batch N] [--steps N] [--warmup N] [--amp]\n"
               "                  [--graph] [--device D]\n"
               "  --model cnn (default) or mlp (train_gray's), --batch 1 to 65536 (256),\n"
               "  --steps 1 to 1000000 timed steps (200), --warmup 2 to 1000 untimed (5);\n"
               "  --graph: each step replays one captured CUDA graph. Prints one JSON line.\n");
}

static const char *const value_opts[] = {"--model", "--batch", "--steps", "--warmup", "--device", NULL};

static int parse_args(int argc, char **argv, bopts *o)
{
    static const char *const models[] = {"cnn", "mlp", NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(a, "--amp")) {
            o->amp = true;
        } else if (!strcmp(a, "--graph")) {
            o->graph = true;
        } else if (cli_in(a, value_opts)) {
            const char *v = cli_value(PROG, argc, argv, &i);
            int k = 0;
            int rc = !v                          ? CLI_USAGE
                     : !strcmp(a, "--batch")  ? cli_size(PROG, a, v, 1, 65536, &o->batch)
                     : !strcmp(a, "--steps")  ? cli_size(PROG, a, v, 1, 1000000, &o->steps)
                     : !strcmp(a, "--warmup") ? cli_size(PROG, a, v, 2, 1000, &o->warmup)
                     : !strcmp(a, "--model")  ? cli_choice(PROG, a, v, models, &k)
                                              : 0;
            if (rc != 0)
                return rc;
            if (!strcmp(a, "--model"))
                o->model = models[k];
            else if (!strcmp(a, "--device"))
                o->device = v;
        } else {
            return cli_unknown(PROG, a, usage);
        }
    }
    return 0;
}

static ferry_status one_step(ferry_train_graph *g, ferry_module *net, ferry_optim *opt, ferry_amp *amp,
                             ferry_tensor *x, ferry_tensor *y, ferry_metrics *met, ferry_stream *s)
{
    return g ? ferry_train_graph_step(g, x, y, s) : ferry_train_step(net, opt, amp, x, y, met, s);
}

static ferry_status bench(const bopts *o)
{
    ferry_device dev;
    CHECK(pick_device(o->device, &dev));
    bool cnn = !strcmp(o->model, "cnn");
    ferry_module *net;
    CHECK(cnn ? model_cnn(1, 28, 28, 10, &net) : model_mlp(784, 10, &net));
    CHECK(ferry_module_init(net, 0));
    CHECK(ferry_module_to(net, dev));
    ferry_optim *opt;
    CHECK(ferry_sgd_create(net, 0.05, 0.9, 5e-4, &opt));
    ferry_amp *amp = NULL;
    if (o->amp) {
        ferry_amp_config ac = ferry_amp_config_default(FERRY_DTYPE_BF16);
        CHECK(ferry_amp_create(net, &ac, &amp));
    }
    ferry_metrics *met;
    CHECK(ferry_metrics_create(dev, &met));
    ferry_stream *s;
    CHECK(ferry_stream_create(dev, &s));
    int64_t b = (int64_t)o->batch, xs[4] = {b, 1, 28, 28};
    ferry_tensor *x, *y;
    CHECK(ferry_tensor_randn(xs, 4, FERRY_DTYPE_F32, dev, 1, &x));
    int64_t *labels = malloc((size_t)b * sizeof *labels);
    if (!labels)
        return FERRY_ERR_NO_MEMORY;
    for (int64_t i = 0; i < b; i++)
        labels[i] = (i * 7 + 3) % 10;
    ferry_status st = ferry_tensor_from_host(labels, &b, 1, FERRY_DTYPE_I64, dev, &y);
    free(labels);
    CHECK(st);
    ferry_train_graph *g = NULL;
    if (o->graph)
        CHECK(ferry_train_graph_create(net, opt, amp, met, &g));
    CHECK(ferry_metrics_reset(met, s));
    for (size_t i = 0; i < o->warmup; i++)
        CHECK(one_step(g, net, opt, amp, x, y, met, s));
    CHECK(ferry_stream_synchronize(s));
    double t0 = sample_now();
    for (size_t i = 0; i < o->steps; i++)
        CHECK(one_step(g, net, opt, amp, x, y, met, s));
    CHECK(ferry_stream_synchronize(s));
    double secs = sample_now() - t0;
    double loss = 0;
    CHECK(ferry_metrics_get(met, &loss, NULL, NULL));
    printf("{\"model\": \"%s\", \"batch\": %zu, \"amp\": %s, \"graph\": %s, \"steps\": %zu, "
           "\"captures\": %lld, \"ms_per_step\": %.4f, \"images_per_s\": %.1f, \"loss\": %.6f}\n",
           o->model, o->batch, o->amp ? "true" : "false", o->graph ? "true" : "false", o->steps,
           (long long)ferry_train_graph_captures(g), 1e3 * secs / (double)o->steps,
           (double)o->steps * (double)o->batch / secs, loss);
    ferry_train_graph_destroy(g);
    ferry_tensor_release(x);
    ferry_tensor_release(y);
    ferry_stream_destroy(s);
    ferry_metrics_destroy(met);
    ferry_amp_destroy(amp);
    ferry_optim_destroy(opt);
    ferry_module_destroy(net);
    return FERRY_OK;
}

int main(int argc, char **argv)
{
    bopts o = {.model = "cnn", .batch = 256, .steps = 200, .warmup = 5};
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    return bench(&o) == FERRY_OK ? 0 : 1;
}
