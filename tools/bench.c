/* `ferry bench`: dispatches to the benchmark named by the first argument; a folder
 * (or nothing) means the pipeline benchmark. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
} benches[] = {
    {"h2d", bench_h2d},
    {"decode", bench_decode},
    {"tokens", bench_tokens},
    {"", NULL}, /* entries are added as benchmarks land */
};

int cmd_bench(int argc, char **argv)
{
    if (argc >= 2) {
        for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
            if (benches[i].fn && !strcmp(argv[1], benches[i].name))
                return benches[i].fn(argc - 1, argv + 1);
    }
    /* Anything else is the pipeline benchmark over a folder. */
    return bench_pipeline(argc, argv);
}
