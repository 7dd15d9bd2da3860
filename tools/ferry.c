/* `ferry`: the command line. Dispatches to one function per subcommand. */
#include <stdio.h>
#include <string.h>

#include "ferry.h"
#include "cli_args.h"
#include "commands.h"

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} commands[] = {
    {"info", cmd_info, "version, build features, devices, pinned memory"},
    {"bench", cmd_bench, "benchmarks: h2d, decode DIR, tokens PATH, DIR (the pipeline)"},
    {"check", cmd_check, "decode every image (.png, .jpg, .jpeg) under PATH...; report the bad ones"},
    {"export", cmd_export, "write fashion-mnist (or an IDX pair) as a PNG image folder"},
    {"diff", cmd_diff, "compare two safetensors files (checkpoints) tensor by tensor"},
    {"pack", cmd_pack, "write an image folder (PNG, JPEG) or IDX pair as tar shards"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: ferry COMMAND [ARGS]\n       ferry --version\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n'ferry COMMAND --help' shows a command's options.\n");
}

/* The library's warnings, in the command line's words (cli_words). */
static void cli_log(ferry_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level < FERRY_LOG_WARN)
        return;
    char buf[2048];
    fprintf(stderr, "ferry: %s: %s\n", level == FERRY_LOG_WARN ? "warning" : "error",
            cli_words(msg, buf, sizeof buf));
}

int main(int argc, char **argv)
{
    ferry_set_log(cli_log, NULL);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (cli_is_help(argv[1]) || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("ferry %s\n", ferry_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    if (argv[1][0] == '-')
        return cli_unknown("ferry", argv[1], usage);
    fprintf(stderr, "ferry: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return CLI_USAGE;
}
