/* `ferry bench`: dispatches to the benchmark named by the first argument; token
 * data (a .bin or .npy file, or a folder of them) means `ferry bench tokens`;
 * any other folder (or nothing) the pipeline benchmark. */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "dataset/tokens/tokens.h"

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
} benches[] = {
    {"h2d", bench_h2d},
    {"decode", bench_decode},
    {"tokens", bench_tokens},
    {"", NULL}, /* entries are added as benchmarks land */
};

/* Token data: a .bin or .npy file, or a folder holding one (not hidden). */
static bool is_token_data(const char *path)
{
    if (ferry__tok_is_token_path(path))
        return true;
    DIR *d = opendir(path);
    struct dirent *e;
    bool found = false;
    while (d && !found && (e = readdir(d)) != NULL)
        found = e->d_name[0] != '.' && ferry__tok_is_token_path(e->d_name);
    if (d)
        closedir(d);
    return found;
}

int cmd_bench(int argc, char **argv)
{
    if (argc >= 2 && is_token_data(argv[1]))
        return bench_tokens(argc, argv); /* `ferry bench TOKENS...`: as `ferry bench tokens` */
    if (argc >= 2) {
        for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
            if (benches[i].fn && !strcmp(argv[1], benches[i].name))
                return benches[i].fn(argc - 1, argv + 1);
    }
    /* Anything else is the pipeline benchmark over a folder. */
    return bench_pipeline(argc, argv);
}
