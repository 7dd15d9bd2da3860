/* A small SVG plotter for the bench and the samples: bar charts and line charts
 * with axes and a legend, written straight to a FILE. Header-only so that the
 * samples, which are single files, can share it. */
#ifndef FERRY_TOOLS_SVG_PLOT_H
#define FERRY_TOOLS_SVG_PLOT_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>

static const char *const svg_colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                         "#9467bd", "#8c564b"};

static inline void svg_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* Axis ticks on round values: first_index * step, (first_index + 1) * step, ...,
 * count of them, the first at or below the data and the last at or above it.
 * step is 1, 2, 2.5 or 5 times a power of ten; decimals is what a label needs to
 * show it exactly (0.25: 2, 2.5: 1, 25: 0). Indices rather than a first value, so
 * the tick at zero is exactly 0 (never "-0.0" or 5.6e-17). */
typedef struct svg_ticks {
    double first_index; /* an integer */
    double step;
    int count;
    int decimals;
} svg_ticks;

static inline double svg_tick_value(const svg_ticks *t, int i) { return (t->first_index + i) * t->step; }

/* The tick whose index is nearest q, when q is within rounding of one; else
 * floor or ceil (up false / true). Division by a decimal step is inexact:
 * 0.3 / 0.1 is 2.9999999999999996. */
static inline double svg_tick_round(double q, bool up)
{
    double n = round(q);
    if (fabs(q - n) <= 1e-9 * (1 + fabs(q)))
        return n;
    return up ? ceil(q) : floor(q);
}

/* The ticks of the smallest round step that covers [lo, hi] in at most max_steps
 * intervals. An empty or non-finite range gets a small one around it. */
static inline svg_ticks svg_ticks_for(double lo, double hi, int max_steps)
{
    static const double mult[] = {1, 2, 2.5, 5};
    if (!isfinite(lo) || !isfinite(hi) || !isfinite(hi - lo))
        lo = 0, hi = 1;
    if (hi < lo) {
        double t = lo;
        lo = hi, hi = t;
    }
    if (hi == lo) {
        double d = lo == 0 ? 0.5 : fabs(lo) * 0.05;
        lo -= d, hi += d;
    }
    max_steps = max_steps < 1 ? 1 : max_steps;
    svg_ticks t = {0, 1, 2, 0};
    int e0 = (int)floor(log10((hi - lo) / max_steps)) - 1;
    for (int e = e0; e < e0 + 40; e++) {
        for (int m = 0; m < 4; m++) {
            t.step = mult[m] * pow(10, e);
            t.first_index = svg_tick_round(lo / t.step, false);
            double last = svg_tick_round(hi / t.step, true);
            if (last - t.first_index <= max_steps) {
                t.first_index += 0.0; /* -0.0 from floor(-0.0) is plain 0 */
                t.count = (int)(last - t.first_index) + 1;
                t.decimals = (mult[m] == 2.5) - e > 0 ? (mult[m] == 2.5) - e : 0;
                return t;
            }
        }
    }
    return t;
}

/* The label of tick i: just the digits the step needs ("0.25", "2.5", "1000"). */
static inline void svg_tick_label(char *buf, size_t size, const svg_ticks *t, int i)
{
    snprintf(buf, size, "%.*f", t->decimals, svg_tick_value(t, i));
}

/* Horizontal bars: one per label, value in `unit`. */
static inline int svg_bar_chart(const char *path, const char *title, const char *unit,
                         const char *const *labels, const double *values, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    const double left = 230, right = 40, top = 50, bar_h = 22, gap = 8;
    const double width = 760, height = top + n * (bar_h + gap) + 50;
    double vmax = 0;
    for (size_t i = 0; i < n; i++)
        vmax = values[i] > vmax ? values[i] : vmax;
    svg_ticks ticks = svg_ticks_for(0, vmax > 0 ? vmax : 1, 5);
    vmax = svg_tick_value(&ticks, ticks.count - 1);
    const double plot_w = width - left - right;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", width, height);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"28\" font-size=\"16\">", left);
    svg_escape(f, title);
    fprintf(f, "</text>\n");
    for (int t = 0; t < ticks.count; t++) {
        double x = left + plot_w * svg_tick_value(&ticks, t) / vmax;
        char label[64];
        svg_tick_label(label, sizeof label, &ticks, t);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#ddd\"/>\n", x, top - 5,
                x, height - 40);
        fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n", x, height - 25, label);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">", left + plot_w / 2, height - 8);
    svg_escape(f, unit);
    fprintf(f, "</text>\n");
    for (size_t i = 0; i < n; i++) {
        double y = top + i * (bar_h + gap), w = plot_w * values[i] / vmax;
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">", left - 8, y + bar_h * 0.7);
        svg_escape(f, labels[i]);
        fprintf(f, "</text>\n<rect x=\"%.0f\" y=\"%.1f\" width=\"%.1f\" height=\"%.0f\" fill=\"%s\"/>\n",
                left, y, w, bar_h, svg_colors[0]);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%.0f</text>\n", left + w + 4, y + bar_h * 0.7, values[i]);
    }
    fprintf(f, "</svg>\n");
    return fclose(f) == 0 ? 0 : -1;
}

/* One panel of a line chart: `nseries` series of n points each, x = 1..n. */
typedef struct svg_series {
    const char *name;
    const double *y;
} svg_series;

static inline void svg_line_panel(FILE *f, double x0, double y0, double w, double h, const char *title,
                           const svg_series *series, size_t nseries, size_t n)
{
    double ymin = INFINITY, ymax = -INFINITY;
    for (size_t s = 0; s < nseries; s++)
        for (size_t i = 0; i < n; i++) {
            ymin = series[s].y[i] < ymin ? series[s].y[i] : ymin;
            ymax = series[s].y[i] > ymax ? series[s].y[i] : ymax;
        }
    /* A little room above and below the points, then out to round ticks. */
    double pad = (ymax - ymin) * 0.03;
    svg_ticks ticks = svg_ticks_for(ymin - pad, ymax + pad, 5);
    ymin = svg_tick_value(&ticks, 0);
    ymax = svg_tick_value(&ticks, ticks.count - 1);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"14\">", x0, y0 - 10);
    svg_escape(f, title);
    fprintf(f, "</text>\n<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
               "stroke=\"#999\"/>\n", x0, y0, w, h);
    for (int t = 0; t < ticks.count; t++) {
        double y = y0 + h - h * (svg_tick_value(&ticks, t) - ymin) / (ymax - ymin);
        char label[64];
        svg_tick_label(label, sizeof label, &ticks, t);
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", x0, y,
                x0 + w, y);
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", x0 - 4, y + 4, label);
    }
    for (size_t i = 0; i < n; i++) {
        double x = n > 1 ? x0 + w * i / (double)(n - 1) : x0 + w / 2;
        fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%zu</text>\n", x, y0 + h + 16, i + 1);
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">epoch</text>\n", x0 + w / 2, y0 + h + 32);
    for (size_t s = 0; s < nseries; s++) {
        const char *color = svg_colors[s % 6];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", color);
        for (size_t i = 0; i < n; i++) {
            if (!isfinite(series[s].y[i]))
                continue; /* a value not known (a NAN): no point */
            double x = n > 1 ? x0 + w * i / (double)(n - 1) : x0 + w / 2;
            double y = y0 + h - h * (series[s].y[i] - ymin) / (ymax - ymin);
            fprintf(f, "%.1f,%.1f ", x, y);
        }
        fprintf(f, "\"/>\n");
        for (size_t i = 0; i < n; i++) {
            if (!isfinite(series[s].y[i]))
                continue;
            double x = n > 1 ? x0 + w * i / (double)(n - 1) : x0 + w / 2;
            double y = y0 + h - h * (series[s].y[i] - ymin) / (ymax - ymin);
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", x, y, color);
        }
        fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"3\" fill=\"%s\"/>"
                   "<text x=\"%.0f\" y=\"%.0f\">", x0 + 10, y0 + 14 + 16 * s, color, x0 + 26, y0 + 19 + 16 * s);
        svg_escape(f, series[s].name);
        fprintf(f, "</text>\n");
    }
}

#endif
