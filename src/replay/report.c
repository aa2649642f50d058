/*
 * report.c - tables, CSV and SVG of replay results.
 */
#include "replay/report.h"

#include "base/err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
        const char *trace, *policy;
        double gpus;
} published[] = {
#define PUBLISHED(t, p, g) {t, p, g},
#include "replay/published.def"
#undef PUBLISHED
};

const unsigned tsr_replay_curve_points[TSR_REPLAY_CURVE_POINTS] = {80,  90,  95,  100,
                                                                   105, 110, 120, 130};

double tsr_replay_published(const char *trace, const char *policy)
{
        for (size_t i = 0; i < sizeof(published) / sizeof(published[0]); i++)
                if (!strcmp(published[i].trace, trace) && !strcmp(published[i].policy, policy))
                        return published[i].gpus;
        return -1;
}

struct tsr_replay_stat tsr_replay_stat_of(const double *v, size_t n)
{
        struct tsr_replay_stat s = {0, 0};
        double ss = 0;

        for (size_t i = 0; i < n; i++)
                s.mean += v[i] / (double)n;
        for (size_t i = 0; i < n; i++)
                ss += (v[i] - s.mean) * (v[i] - s.mean);
        s.sd = n > 1 ? sqrt(ss / (double)(n - 1)) : 0;
        return s;
}

/* The mean over seeds of a per-run value at point x. */
static double mean_at(const struct tsr_replay_series *v, unsigned x, int what)
{
        double sum = 0;

        for (size_t k = 0; k < v->n; k++)
                sum += what == 0   ? v->runs[k].alloc_pct[x]
                       : what == 1 ? v->runs[k].frag_rate_pct[x]
                                   : v->runs[k].frag_total_pct[x];
        return v->n ? sum / (double)v->n : 0;
}

double tsr_replay_mean_unallocated(const struct tsr_replay_setup *s,
                                   const struct tsr_replay_series *v)
{
        double sum = 0;

        for (size_t k = 0; k < v->n; k++)
                sum += tsr_replay_unallocated_gpus(s, &v->runs[k], 100);
        return v->n ? sum / (double)v->n : 0;
}

int tsr_replay_report_table(struct tsr_buf *out, const struct tsr_replay_trace_report *t)
{
        const struct tsr_replay_setup *s = t->setup;
        size_t clones = t->n_series && t->series[0].n ? t->series[0].runs[0].clones : 0;
        int rc;

        rc = tsr_buf_addf(out,
                          "trace %s: %zu nodes, %u GPUs, %zu pods (first seed: +%zu clones to "
                          "%.0f %% of GPU capacity)\n\n",
                          t->trace, s->n_nodes, s->cluster.total_gpus, s->n_pods, clones,
                          s->tune * 100);
        rc = rc ? rc
                : tsr_buf_addf(out, "%-14s %-15s %-17s %-9s %-8s %-12s %s\n", "policy",
                               "alloc@100 %", "unalloc GPUs", "published", "vs pub.", "frag rate %",
                               "s/seed");
        for (size_t i = 0; !rc && i < t->n_series; i++) {
                const struct tsr_replay_series *v = &t->series[i];
                const char *name = tsr_policy_name(v->policy);
                double *alloc = malloc((v->n ? v->n : 1) * 2 * sizeof(*alloc)), *unalloc;
                double pub = tsr_replay_published(t->trace, name);
                struct tsr_replay_stat a, u, sec;
                char cmp[16] = "-", pubs[16] = "-";

                if (!alloc)
                        return TSR_ENOMEM;
                unalloc = alloc + v->n;
                for (size_t k = 0; k < v->n; k++) {
                        alloc[k] = v->runs[k].alloc_pct[100];
                        unalloc[k] = tsr_replay_unallocated_gpus(s, &v->runs[k], 100);
                }
                a = tsr_replay_stat_of(alloc, v->n);
                u = tsr_replay_stat_of(unalloc, v->n);
                sec = tsr_replay_stat_of(v->seconds, v->n);
                free(alloc);
                if (pub >= 0) {
                        snprintf(pubs, sizeof(pubs), "%.0f", pub);
                        snprintf(cmp, sizeof(cmp), "%+.1f %%", (u.mean - pub) / pub * 100);
                }
                rc = tsr_buf_addf(
                    out, "%-14s %6.2f ± %-6.2f %7.1f ± %-7.1f %-9s %-8s %-12.1f %.2f\n", name,
                    a.mean, a.sd, u.mean, u.sd, pubs, cmp, mean_at(v, 100, 1), sec.mean);
        }
        rc = rc ? rc
                : tsr_buf_addf(
                      out, "\nGPU allocation %% (mean over seeds) by arrived workload %%\n%-14s",
                      "policy");
        for (size_t p = 0; !rc && p < TSR_REPLAY_CURVE_POINTS; p++)
                rc = tsr_buf_addf(out, " %7u", tsr_replay_curve_points[p]);
        for (size_t i = 0; !rc && i < t->n_series; i++) {
                rc = tsr_buf_addf(out, "\n%-14s", tsr_policy_name(t->series[i].policy));
                for (size_t p = 0; !rc && p < TSR_REPLAY_CURVE_POINTS; p++)
                        rc = tsr_buf_addf(out, " %7.2f",
                                          mean_at(&t->series[i], tsr_replay_curve_points[p], 0));
        }
        return rc ? rc : tsr_buf_adds(out, "\n\n");
}

int tsr_replay_report_csv(struct tsr_buf *out, const struct tsr_replay_trace_report *t, size_t n,
                          int header)
{
        int rc = header ? tsr_buf_adds(out, "trace,policy,seed,arrival_pct,alloc_pct,"
                                            "unallocated_gpus,frag_total_pct,frag_rate_pct\n")
                        : 0;

        for (size_t r = 0; !rc && r < n; r++)
                for (size_t i = 0; !rc && i < t[r].n_series; i++) {
                        const struct tsr_replay_series *v = &t[r].series[i];

                        for (size_t k = 0; !rc && k < v->n; k++)
                                for (unsigned x = 0; !rc && x < TSR_REPLAY_POINTS; x++) {
                                        const struct tsr_replay_result *run = &v->runs[k];

                                        if (!run->have[x])
                                                continue;
                                        rc = tsr_buf_addf(
                                            out, "%s,%s,%llu,%u,%.4f,%.2f,%.4f,%.4f\n", t[r].trace,
                                            tsr_policy_name(v->policy),
                                            (unsigned long long)v->seeds[k], x, run->alloc_pct[x],
                                            tsr_replay_unallocated_gpus(t[r].setup, run, x),
                                            run->frag_total_pct[x], run->frag_rate_pct[x]);
                                }
                }
        return rc;
}

#define SVG_W      860
#define SVG_PANEL  400
#define SVG_LEFT   70
#define SVG_RIGHT  310
#define SVG_TOP    40
#define SVG_BOTTOM 50
#define X_FROM     80
#define X_TO       130

static const char *const colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                      "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

/* One panel at vertical offset y0: axes from 0 to the largest unallocated % seen. */
static int svg_panel(struct tsr_buf *out, const struct tsr_replay_trace_report *t, int y0)
{
        double top = 0, w = SVG_W - SVG_LEFT - SVG_RIGHT, h = SVG_PANEL - SVG_TOP - SVG_BOTTOM;
        int rc = 0;

        for (size_t i = 0; i < t->n_series; i++)
                for (unsigned x = X_FROM; x <= X_TO; x++)
                        if (100 - mean_at(&t->series[i], x, 0) > top)
                                top = 100 - mean_at(&t->series[i], x, 0);
        top = ceil(top / 5) * 5;
        if (top <= 0)
                top = 5;
        rc = tsr_buf_addf(out,
                          "<text x=\"%d\" y=\"%d\" font-size=\"15\">%s: unallocated GPU %% vs "
                          "arrived workload %%</text>\n",
                          SVG_LEFT, y0 + 24, t->trace);
        for (double v = 0; !rc && v <= top + 1e-9; v += 5) {
                double y = y0 + SVG_TOP + h - v / top * h;

                rc = tsr_buf_addf(out,
                                  "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" "
                                  "stroke=\"#ddd\"/><text x=\"%d\" y=\"%.1f\" font-size=\"11\" "
                                  "text-anchor=\"end\">%.0f</text>\n",
                                  SVG_LEFT, y, SVG_LEFT + w, y, SVG_LEFT - 6, y + 4, v);
        }
        for (unsigned x = X_FROM; !rc && x <= X_TO; x += 10) {
                double px = SVG_LEFT + (double)(x - X_FROM) / (X_TO - X_FROM) * w;

                rc = tsr_buf_addf(out,
                                  "<text x=\"%.1f\" y=\"%.0f\" font-size=\"11\" "
                                  "text-anchor=\"middle\">%u</text>\n",
                                  px, y0 + SVG_TOP + h + 16, x);
        }
        for (size_t i = 0; !rc && i < t->n_series; i++) {
                const char *c = colours[i % (sizeof(colours) / sizeof(colours[0]))];

                rc = tsr_buf_addf(out,
                                  "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
                                  "points=\"",
                                  c);
                for (unsigned x = X_FROM; !rc && x <= X_TO; x++)
                        rc = tsr_buf_addf(out, "%.1f,%.1f ",
                                          SVG_LEFT + (double)(x - X_FROM) / (X_TO - X_FROM) * w,
                                          y0 + SVG_TOP + h -
                                              (100 - mean_at(&t->series[i], x, 0)) / top * h);
                rc = rc ? rc
                        : tsr_buf_addf(out,
                                       "\"/>\n<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\" "
                                       "fill=\"%s\">%s (%.0f GPUs at 100)</text>\n",
                                       SVG_LEFT + w + 10, y0 + SVG_TOP + 16.0 * (double)i + 4, c,
                                       tsr_policy_name(t->series[i].policy),
                                       tsr_replay_mean_unallocated(t->setup, &t->series[i]));
        }
        return rc ? rc
                  : tsr_buf_addf(out,
                                 "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" "
                                 "fill=\"none\" stroke=\"#333\"/>\n<text x=\"%.0f\" y=\"%d\" "
                                 "font-size=\"11\" text-anchor=\"middle\">arrived workload (%% "
                                 "of GPU capacity)</text>\n",
                                 SVG_LEFT, y0 + SVG_TOP, w, h, SVG_LEFT + w / 2,
                                 y0 + SVG_PANEL - 12);
}

int tsr_replay_report_svg(struct tsr_buf *out, const struct tsr_replay_trace_report *t, size_t n)
{
        int rc = tsr_buf_addf(out,
                              "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
                              "height=\"%zu\" font-family=\"sans-serif\">\n<rect width=\"100%%\" "
                              "height=\"100%%\" fill=\"white\"/>\n",
                              SVG_W, n * SVG_PANEL);

        for (size_t r = 0; !rc && r < n; r++)
                rc = svg_panel(out, &t[r], (int)(r * SVG_PANEL));
        return rc ? rc : tsr_buf_adds(out, "</svg>\n");
}
