/* The plots' axis ticks (tools/svg_plot.h): round steps (1, 2, 2.5, 5 x 10^k),
 * covering the data, the smallest such step, labels with just the digits the step
 * needs; against hand-worked ranges and, for many random ranges, against a
 * brute-force search over every candidate step. */
#include <stdlib.h>

#include "harness.h"
#include "../tools/svg_plot.h"

static void expect_ticks(double lo, double hi, int max_steps, const char *want)
{
    svg_ticks t = svg_ticks_for(lo, hi, max_steps);
    char got[512] = "", label[64];
    for (int i = 0; i < t.count; i++) {
        svg_tick_label(label, sizeof label, &t, i);
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", i ? " " : "", label);
    }
    ASSERT_MSG(strcmp(got, want) == 0, "ticks(%g, %g, %d): \"%s\", want \"%s\"", lo, hi, max_steps, got,
               want);
}

TEST(ticks_on_round_values)
{
    expect_ticks(0.412, 0.529, 5, "0.40 0.45 0.50 0.55"); /* the old axis: 0.412 ... 0.529 */
    expect_ticks(0, 1, 5, "0.0 0.2 0.4 0.6 0.8 1.0");
    expect_ticks(0, 1, 4, "0.00 0.25 0.50 0.75 1.00");
    expect_ticks(0, 10, 4, "0.0 2.5 5.0 7.5 10.0");
    expect_ticks(0, 100, 4, "0 25 50 75 100");
    expect_ticks(0, 9300, 5, "0 2000 4000 6000 8000 10000");
    expect_ticks(0.3, 0.7, 4, "0.3 0.4 0.5 0.6 0.7"); /* 0.3 / 0.1 is 2.9999999999999996 */
    expect_ticks(-0.3, 0.25, 5, "-0.4 -0.2 0.0 0.2 0.4");
    expect_ticks(-7, -2, 5, "-7 -6 -5 -4 -3 -2");
    expect_ticks(1e-4, 3.5e-4, 5, "0.00010 0.00015 0.00020 0.00025 0.00030 0.00035");
    expect_ticks(2.31, 2.37, 3, "2.300 2.325 2.350 2.375");
}

/* Empty, reversed and non-finite ranges still give a usable axis. */
TEST(ticks_on_odd_ranges)
{
    expect_ticks(0, 0, 5, "-0.50 -0.25 0.00 0.25 0.50");
    expect_ticks(2, 2, 4, "1.90 1.95 2.00 2.05 2.10");
    expect_ticks(1, 0, 5, "0.0 0.2 0.4 0.6 0.8 1.0");
    expect_ticks(NAN, 1, 5, "0.0 0.2 0.4 0.6 0.8 1.0");
    expect_ticks(0, INFINITY, 5, "0.0 0.2 0.4 0.6 0.8 1.0");
    expect_ticks(-1e308, 1e308, 5, "0.0 0.2 0.4 0.6 0.8 1.0"); /* the span overflows */
    svg_ticks t = svg_ticks_for(0, 1, 0); /* at least one interval */
    ASSERT_EQ_INT(t.count, 2);
    ASSERT_NEAR(t.step, 1, 0);
}

/* The reference: every step m x 10^k around the range, in increasing order; the
 * first whose multiples cover [lo, hi] in at most max_steps intervals (counted in
 * long double, with the tick nearest a quotient that is within rounding of an
 * integer taken as exact). */
static double reference_step(double lo, double hi, int max_steps)
{
    static const double mult[] = {1, 2, 2.5, 5};
    for (int e = -12; e <= 12; e++)
        for (int m = 0; m < 4; m++) {
            long double step = mult[m] * powl(10, e);
            long double a = floorl((long double)lo / step + 1e-9L), b = ceill((long double)hi / step - 1e-9L);
            if (b - a <= max_steps)
                return (double)step;
        }
    return NAN;
}

TEST(ticks_match_a_brute_force_search)
{
    srand(1234);
    for (int trial = 0; trial < 20000; trial++) {
        double scale = pow(10, rand() % 13 - 6);
        double lo = scale * ((double)rand() / RAND_MAX * 20 - 10);
        double hi = lo + scale * (double)rand() / RAND_MAX * 10 + scale * 1e-3;
        int max_steps = 3 + rand() % 6;
        svg_ticks t = svg_ticks_for(lo, hi, max_steps);
        double want = reference_step(lo, hi, max_steps);
        ASSERT_MSG(fabs(t.step - want) <= 1e-9 * want, "ticks(%.17g, %.17g, %d): step %g, want %g", lo, hi,
                   max_steps, t.step, want);
        double first = svg_tick_value(&t, 0), last = svg_tick_value(&t, t.count - 1);
        ASSERT_MSG(first <= lo + 1e-9 * t.step && last >= hi - 1e-9 * t.step && t.count - 1 <= max_steps,
                   "ticks(%.17g, %.17g, %d): %d ticks %.17g .. %.17g", lo, hi, max_steps, t.count, first, last);
        /* The label shows the tick exactly: parsed back, it is the tick value. */
        char label[64];
        svg_tick_label(label, sizeof label, &t, t.count / 2);
        double v = svg_tick_value(&t, t.count / 2);
        ASSERT_MSG(fabs(strtod(label, NULL) - v) <= 1e-9 * t.step, "label \"%s\" for tick %.17g", label, v);
    }
}

/* No more digits than the step needs: dropping one would change some tick. */
TEST(labels_carry_just_the_needed_digits)
{
    ASSERT_EQ_INT(svg_ticks_for(0, 1, 5).decimals, 1);       /* 0.2 */
    ASSERT_EQ_INT(svg_ticks_for(0, 1, 4).decimals, 2);       /* 0.25 */
    ASSERT_EQ_INT(svg_ticks_for(0, 10, 4).decimals, 1);      /* 2.5 */
    ASSERT_EQ_INT(svg_ticks_for(0, 100, 4).decimals, 0);     /* 25 */
    ASSERT_EQ_INT(svg_ticks_for(0, 5e6, 5).decimals, 0);     /* 1000000 */
    ASSERT_EQ_INT(svg_ticks_for(0, 0.005, 5).decimals, 3);   /* 0.001 */
    char label[64];
    svg_ticks t = svg_ticks_for(-1, 1, 4); /* -1.0 -0.5 0.0 0.5 1.0 */
    svg_tick_label(label, sizeof label, &t, 2);
    ASSERT_STR_EQ(label, "0.0");
}
