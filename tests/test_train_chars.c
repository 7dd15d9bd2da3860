/* samples/train_chars.c trained briefly on the fortunes text (the Debian
 * package fortunes; skipped, saying so, without it), a fixed number of steps
 * (about a second on the CPU, 20 on the simulated GPU): its validation loss
 * must fall below the unigram baseline (the entropy of the character
 * frequencies), on the CPU and on cuda:0 (real or FERRY_SIM_GPUS), and it
 * writes its loss curve as SVG. The sample's own tc_run, not a copy. */
#define TRAIN_CHARS_NO_MAIN
#include "../samples/train_chars.c"

#include <stdlib.h>

#include "harness.h"

static void train_briefly(const char *device, size_t steps, size_t eval_every, size_t val, size_t batch, double lr)
{
    struct stat sb;
    if (stat(TC_DEFAULT_TEXT, &sb) != 0)
        ft_skip_missing("data", TC_DEFAULT_TEXT " is absent: the Debian package fortunes has the text "
                        "(scripts/install-deps.sh fortunes)");
    char dir[] = "/tmp/ferry-train-chars-XXXXXX";
    ASSERT(mkdtemp(dir));
    tc_opts o = tc_defaults();
    o.device = device;
    o.steps = steps; /* steps, not seconds: the same result however busy the machine */
    o.seconds = 120;  /* a cap only */
    o.out = dir;
    o.lines = 2;
    o.eval_every = eval_every;
    o.val_max = val;
    o.batch = batch;
    o.lr = lr;
    tc_result r;
    ASSERT_OK(tc_run(&o, &r));
    ASSERT_MSG(r.val_loss < r.unigram, "%s: validation loss %.4f after %zu steps is not below the unigram baseline %.4f",
               device, r.val_loss, r.steps, r.unigram);
    ASSERT_MSG(r.val_loss < r.first_val, "%s: validation loss %.4f, untrained %.4f", device, r.val_loss, r.first_val);
    ASSERT(r.bigram < r.unigram); /* the baselines themselves: English has structure */
    char path[4096];
    snprintf(path, sizeof path, "%s/train_chars.svg", dir);
    FILE *f = fopen(path, "r");
    ASSERT_MSG(f, "%s was not written", path);
    char head[5] = {0};
    ASSERT(fread(head, 1, 4, f) == 4);
    fclose(f);
    ASSERT_STR_EQ(head, "<svg");
    remove(path);
    rmdir(dir);
}

TEST(train_chars_beats_the_unigram_baseline_on_the_cpu)
{
    train_briefly("cpu", 150, 50, 5000, 256, 3e-3);
}

TEST(train_chars_beats_the_unigram_baseline_on_cuda)
{
    ft_require_cuda();
    /* The simulated GPU runs the CUDA sources' cross-entropy (a block per row)
     * slowly: smaller batches, a larger step, one validation of fewer
     * positions at the end. */
    train_briefly("cuda:0", 60, 1000000, 2000, 64, 1e-2);
}
