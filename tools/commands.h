/* The `ferry` command line: one function per subcommand, each in its own file.
 * Each returns the process exit status: 0 ok, 1 a failure it reported, 2 usage. */
#ifndef FERRY_TOOLS_COMMANDS_H
#define FERRY_TOOLS_COMMANDS_H

int cmd_info(int argc, char **argv);   /* tools/info.c */
int cmd_bench(int argc, char **argv);  /* tools/bench.c: h2d, decode, pipeline */

#endif
