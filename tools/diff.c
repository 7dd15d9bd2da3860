/* `ferry diff A B [--tol X]`: compares two safetensors files (checkpoints) tensor
 * by tensor: the same names, shapes and dtypes, and values within tol (largest
 * absolute difference; 0 means bit for bit). Prints the worst tensor; exit 0
 * when they match, 1 when not, 2 on bad arguments, 3 when a file or tensor
 * cannot be read (a script must not take "unreadable" for "different"). */

#define DIFF_CANNOT_READ 3
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "commands.h"
#include "ferry/train.h"

/* Largest |a - b| over two tensors of one shape, compared as f32 values. */
static ferry_status max_diff(ferry_tensor *a, ferry_tensor *b, double *out)
{
    ferry_tensor *fa = NULL, *fb = NULL;
    ferry_status st = ferry_tensor_to_dtype(a, FERRY_DTYPE_F32, &fa);
    if (st == FERRY_OK)
        st = ferry_tensor_to_dtype(b, FERRY_DTYPE_F32, &fb);
    *out = 0;
    if (st == FERRY_OK) {
        const float *x = ferry_tensor_data(fa), *y = ferry_tensor_data(fb);
        for (int64_t i = 0; i < ferry_tensor_numel(fa); i++) {
            double d = fabs((double)x[i] - (double)y[i]);
            if (!(d <= *out)) /* NaN on one side counts as infinitely far */
                *out = isnan(d) ? INFINITY : d;
        }
    }
    ferry_tensor_release(fa);
    ferry_tensor_release(fb);
    return st;
}

/* 0 when f and g hold the same tensors within tol, 1 otherwise, or
 * DIFF_CANNOT_READ. */
static int compare(ferry_safetensors *f, ferry_safetensors *g, const char *pa, const char *pb, double tol)
{
    size_t n = ferry_safetensors_tensor_count(f);
    if (n != ferry_safetensors_tensor_count(g)) {
        printf("%s has %zu tensors, %s has %zu\n", pa, n, pb, ferry_safetensors_tensor_count(g));
        return 1;
    }
    double worst = 0;
    const char *worst_name = "";
    for (size_t i = 0; i < n; i++) {
        const char *name = ferry_safetensors_name(f, i);
        ferry_dtype da, db;
        int64_t sa[FERRY_MAX_DIMS], sb[FERRY_MAX_DIMS];
        size_t na, nb;
        if (ferry_safetensors_info(f, name, &da, sa, &na) != FERRY_OK ||
            ferry_safetensors_info(g, name, &db, sb, &nb) != FERRY_OK) {
            printf("%s: not in %s\n", name, pb);
            return 1;
        }
        if (da != db || na != nb || memcmp(sa, sb, na * sizeof sa[0]) != 0) {
            printf("%s: dtype or shape differs (%s vs %s)\n", name, ferry_dtype_name(da), ferry_dtype_name(db));
            return 1;
        }
        ferry_tensor *a = NULL, *b = NULL;
        double d = 0;
        ferry_status st = ferry_safetensors_get(f, name, ferry_cpu(), &a);
        if (st == FERRY_OK)
            st = ferry_safetensors_get(g, name, ferry_cpu(), &b);
        if (st == FERRY_OK)
            st = max_diff(a, b, &d);
        ferry_tensor_release(a);
        ferry_tensor_release(b);
        if (st != FERRY_OK) {
            fprintf(stderr, "ferry diff: %s: %s\n", name, ferry_last_error());
            return DIFF_CANNOT_READ;
        }
        if (d > worst || i == 0) {
            worst = d;
            worst_name = name;
        }
    }
    bool same = worst <= tol;
    printf("%zu tensors; largest difference %.3g in %s: %s (tolerance %g)\n", n, worst, worst_name,
           same ? "same" : "DIFFERENT", tol);
    return same ? 0 : 1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: ferry diff A.safetensors B.safetensors [--tol X]\n"
               "compares two safetensors files tensor by tensor; exits 0 when the largest\n"
               "difference is at most X (a finite number >= 0, default 0), 1 when they differ,\n"
               "2 on bad arguments, 3 when a file cannot be read\n");
}

/* The arguments: 0 with both paths, CLI_USAGE after saying why, or -1 after --help. */
static int parse_args(int argc, char **argv, const char **paths, double *tol)
{
    size_t np = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (cli_is_help(a)) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(a, "--tol")) {
            if (!(v = cli_value("ferry diff", argc, argv, &i)) ||
                cli_double("ferry diff", a, v, 0, false, INFINITY, tol) != 0)
                return CLI_USAGE;
        } else if (np < 2 && (a[0] != '-' || !a[1])) {
            paths[np++] = a;
        } else {
            return cli_unknown("ferry diff", a, usage);
        }
    }
    if (np != 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    return 0;
}

int cmd_diff(int argc, char **argv)
{
    const char *paths[2] = {NULL, NULL};
    double tol = 0;
    int rc = parse_args(argc, argv, paths, &tol);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    ferry_safetensors *f = NULL, *g = NULL;
    if (ferry_safetensors_open(paths[0], &f) != FERRY_OK || ferry_safetensors_open(paths[1], &g) != FERRY_OK) {
        fprintf(stderr, "ferry diff: %s\n", ferry_last_error());
        ferry_safetensors_destroy(f);
        return DIFF_CANNOT_READ;
    }
    rc = compare(f, g, paths[0], paths[1], tol);
    ferry_safetensors_destroy(f);
    ferry_safetensors_destroy(g);
    return rc;
}
