/* `ferry bench`: dispatches to the benchmark named by the first argument; a folder
 * (or nothing) means the pipeline benchmark. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
} benches[] = {
    {"", NULL}, /* entries are added as benchmarks land */
};

int cmd_bench(int argc, char **argv)
{
    if (argc >= 2) {
        for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
            if (benches[i].fn && !strcmp(argv[1], benches[i].name))
                return benches[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "usage: ferry bench h2d | decode DIR | [DIR] (pipeline)\n");
    return 2;
}
