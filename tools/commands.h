/* The `ferry` command line: one function per subcommand, each in its own file.
 * Each returns the process exit status: 0 ok, 1 a failure it reported, 2 usage. */
#ifndef FERRY_TOOLS_COMMANDS_H
#define FERRY_TOOLS_COMMANDS_H

int cmd_info(int argc, char **argv);   /* tools/info.c */
int cmd_bench(int argc, char **argv);  /* tools/bench.c: h2d, decode, pipeline */
int cmd_check(int argc, char **argv);  /* tools/check.c: decode every image under paths */
int check_tokens(int argc, char **argv); /* tools/check_tokens.c: cmd_check with --tokens */
int cmd_export(int argc, char **argv); /* tools/export.c: IDX pairs to image folders */
int cmd_diff(int argc, char **argv);   /* tools/diff.c: compare two safetensors files */
int cmd_pack(int argc, char **argv);   /* tools/pack.c: image folder or IDX pair to tar shards */
int pack_tokens(int argc, char **argv); /* tools/pack_tokens.c: cmd_pack with --tokens */

/* Benchmarks, dispatched by cmd_bench. */
int bench_pipeline(int argc, char **argv); /* tools/bench_pipeline.c */
int bench_h2d(int argc, char **argv);      /* tools/bench_h2d.c */
int bench_decode(int argc, char **argv);   /* tools/bench_decode.c */
int bench_tokens(int argc, char **argv);   /* tools/bench_tokens.c */
/* The JPEG files of `ferry bench decode` (tools/bench_jpeg.c); crop 0: no crop rows. */
#include <stdbool.h>
struct tool_paths;
int bench_decode_jpeg(const char *dir, struct tool_paths *files, size_t crop, bool json);

/* The plain single-thread libpng loop (read file, png_image_* decode) over up to
 * max_files files of dir spread evenly (0: all): images/s, or -1. tools/bench_decode.c */
double bench_plain_libpng_rate(const char *dir, size_t max_files);

#endif
