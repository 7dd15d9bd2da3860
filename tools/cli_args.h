/* Command-line arguments for the `ferry` tool (the files of tools/) and the
 * samples (which include it as "../tools/cli_args.h"): -h/--help, options
 * that take a value, and strict numbers. Header-only because each sample is
 * built as a single file against libferry.a, which holds none of this.
 *
 * A bad value is one line on stderr naming the program, the option, the value
 * and what is accepted, e.g.
 *   ferry bench: --batch -5: expected an integer from 1 to 65536
 * and the caller exits with CLI_USAGE. Numbers are digits only: no sign, no
 * white space, nothing after them; strtoull alone would read "-5" as a huge
 * value and " 7x" as 7. */
#ifndef FERRY_TOOLS_CLI_ARGS_H
#define FERRY_TOOLS_CLI_ARGS_H

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The exit status of a usage error (0 ok, 1 a failure the program reported). */
#define CLI_USAGE 2

/* The library's messages name its API (stream_shuffle_buffer, on_error =
 * FERRY_ON_ERROR_SKIP); a command-line user has flags, or none. msg with those
 * names put in the user's words, into buf. */
static inline const char *cli_words(const char *msg, char *buf, size_t n)
{
    static const char *const from_to[][2] = {
        {"stream_shuffle_buffer reads", "--stream B reads"},
        {"stream_shuffle_buffer", "the streaming shuffle buffer (--stream)"},
        {" (on_error = FERRY_ON_ERROR_SKIP skips and counts them)",
         " (`ferry check` names them all; fix or remove them)"},
        {"image_config.shard_cache_bytes", "the shard cache (256 MiB)"},
        {" (with on_error = SKIP it is skipped and named in the loader's stats)", ""},
    };
    size_t k = 0;
    buf[0] = '\0';
    while (*msg && k + 1 < n) {
        size_t i = 0, nf = sizeof from_to / sizeof from_to[0];
        while (i < nf && strncmp(msg, from_to[i][0], strlen(from_to[i][0])) != 0)
            i++;
        if (i < nf) {
            k += (size_t)snprintf(buf + k, n - k, "%s", from_to[i][1]);
            msg += strlen(from_to[i][0]);
            if (k >= n)
                k = n - 1;
        } else {
            buf[k++] = *msg++;
        }
    }
    buf[k] = '\0';
    return buf;
}

static inline bool cli_is_help(const char *arg)
{
    return !strcmp(arg, "-h") || !strcmp(arg, "--help");
}

/* Whether arg is one of names (NULL-terminated): the options that take a value. */
static inline bool cli_in(const char *arg, const char *const *names)
{
    for (size_t k = 0; names[k]; k++)
        if (!strcmp(arg, names[k]))
            return true;
    return false;
}

/* The value of option argv[*i], advancing *i past it; NULL after saying
 * "PROG: OPT needs a value" when it is the last argument. The value is taken
 * as is, even when it starts with '-' (so "--batch -5" is reported as a bad
 * number, not as an unknown option). */
static inline const char *cli_value(const char *prog, int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "%s: %s needs a value\n", prog, argv[*i]);
        return NULL;
    }
    *i += 1;
    return argv[*i];
}

/* "PROG: OPT VALUE: expected WHAT" (an empty value shown as ''). Returns CLI_USAGE. */
static inline int cli_bad_value(const char *prog, const char *opt, const char *value,
                                const char *what)
{
    fprintf(stderr, "%s: %s %s: expected %s\n", prog, opt, value[0] ? value : "''", what);
    return CLI_USAGE;
}

/* "PROG: unknown option 'ARG'" or "unexpected argument", then the usage, on stderr. */
static inline int cli_unknown(const char *prog, const char *arg, void (*usage)(FILE *))
{
    fprintf(stderr, "%s: %s '%s'\n", prog, arg[0] == '-' && arg[1] ? "unknown option" :
                                           "unexpected argument", arg);
    if (usage)
        usage(stderr);
    return CLI_USAGE;
}

/* Digits only into *out; false on anything else or overflow. */
static inline bool cli_digits_u64(const char *s, uint64_t *out)
{
    if (*s < '0' || *s > '9')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *out = (uint64_t)v;
    return true;
}

/* An integer from lo to hi into *out; 0, or CLI_USAGE after the one-line message. */
static inline int cli_size(const char *prog, const char *opt, const char *value, size_t lo,
                           size_t hi, size_t *out)
{
    uint64_t v;
    if (!cli_digits_u64(value, &v) || v < lo || v > hi) {
        char what[96];
        snprintf(what, sizeof what, "an integer from %zu to %zu", lo, hi);
        return cli_bad_value(prog, opt, value, what);
    }
    *out = (size_t)v;
    return 0;
}

/* Any unsigned 64-bit integer (seeds). */
static inline int cli_u64(const char *prog, const char *opt, const char *value, uint64_t *out)
{
    if (!cli_digits_u64(value, out))
        return cli_bad_value(prog, opt, value, "an integer from 0 to 18446744073709551615");
    return 0;
}

/* A finite number in [lo, hi], or (lo, hi] when lo_open; 0 or CLI_USAGE. An
 * infinite hi means no upper bound. */
static inline int cli_double(const char *prog, const char *opt, const char *value, double lo,
                             bool lo_open, double hi, double *out)
{
    char *end = NULL;
    errno = 0;
    /* strtod would skip leading white space: refused like any other stray character. */
    double v = value[0] && !isspace((unsigned char)value[0]) ? strtod(value, &end) : NAN;
    bool ok = !isnan(v) && !errno && end && !*end && isfinite(v) && (lo_open ? v > lo : v >= lo) &&
              v <= hi;
    if (ok) {
        *out = v;
        return 0;
    }
    char what[128];
    if (isinf(hi))
        snprintf(what, sizeof what, "a finite number %s %.15g", lo_open ? ">" : ">=", lo);
    else if (lo_open)
        snprintf(what, sizeof what, "a number greater than %.15g and at most %.15g", lo, hi);
    else
        snprintf(what, sizeof what, "a number from %.15g to %.15g", lo, hi);
    return cli_bad_value(prog, opt, value, what);
}

/* A comma-separated list of 1 to max integers from lo to hi ("0,1,2"). */
static inline int cli_size_list(const char *prog, const char *opt, const char *value, size_t lo,
                                size_t hi, size_t *out, size_t max, size_t *n)
{
    size_t k = 0;
    const char *s = value;
    bool ok = true;
    while (ok) {
        size_t len = strcspn(s, ",");
        char item[32];
        uint64_t v = 0;
        ok = k < max && len > 0 && len < sizeof item;
        if (ok) {
            memcpy(item, s, len);
            item[len] = '\0';
            ok = cli_digits_u64(item, &v) && v >= lo && v <= hi;
        }
        if (ok)
            out[k++] = (size_t)v;
        if (!ok || s[len] == '\0')
            break;
        s += len + 1;
    }
    if (!ok) {
        char what[128];
        snprintf(what, sizeof what, "a comma-separated list of up to %zu integers from %zu to %zu",
                 max, lo, hi);
        return cli_bad_value(prog, opt, value, what);
    }
    *n = k;
    return 0;
}

/* One of the words in choices (NULL-terminated): its index into *out. */
static inline int cli_choice(const char *prog, const char *opt, const char *value,
                             const char *const *choices, int *out)
{
    for (int k = 0; choices[k]; k++)
        if (!strcmp(value, choices[k])) {
            *out = k;
            return 0;
        }
    char what[160] = "one of";
    for (int k = 0; choices[k]; k++) {
        size_t used = strlen(what);
        snprintf(what + used, sizeof what - used, "%s %s", k ? "," : "", choices[k]);
    }
    return cli_bad_value(prog, opt, value, what);
}

#endif
