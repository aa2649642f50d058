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

/* The mean over the series' seeds of the unallocated GPUs on shape sh at arrival 100 %. */
static double mean_idle(const struct tsr_replay_series *v, enum tsr_replay_shape sh)
{
        double sum = 0;
        size_t n = 0;

        for (size_t k = 0; k < v->n; k++)
                if (v->runs[k].have_idle) {
                        sum += v->runs[k].idle_gpus[sh];
                        n++;
                }
        return n ? sum / (double)n : 0;
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
        rc = rc ? rc
                : tsr_buf_addf(out,
                               "\n\nUnallocated GPUs at arrival 100 %% by node shape (mean over "
                               "seeds; CPU-starved: less free CPU than any typical GPU task "
                               "asks)\n%-14s",
                               "policy");
        for (int sh = 0; !rc && sh < TSR_REPLAY_SHAPES; sh++)
                rc = tsr_buf_addf(out, " %18s", tsr_replay_shape_name((enum tsr_replay_shape)sh));
        for (size_t i = 0; !rc && i < t->n_series; i++) {
                rc = tsr_buf_addf(out, "\n%-14s", tsr_policy_name(t->series[i].policy));
                for (int sh = 0; !rc && sh < TSR_REPLAY_SHAPES; sh++)
                        rc = tsr_buf_addf(out, " %18.1f",
                                          mean_idle(&t->series[i], (enum tsr_replay_shape)sh));
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
#define BAR_ROW    22 /* one policy's bar in the node-shape panel */
#define BAR_EXTRA  110

static const char *const colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                      "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
static const char *const shape_colours[TSR_REPLAY_SHAPES] = {"#d62728", "#c7c7c7", "#9ecae1",
                                                             "#4292c6", "#08519c", "#bcbd22"};

/* Unallocated GPU % at point x over the series' seeds: what 0 mean, 1 least, 2 most. */
static double unalloc_pct(const struct tsr_replay_series *v, unsigned x, int what)
{
        double r = what ? 100 - v->runs[0].alloc_pct[x] : 100 - mean_at(v, x, 0);

        for (size_t k = 1; what && k < v->n; k++) {
                double u = 100 - v->runs[k].alloc_pct[x];

                r = what == 1 ? fmin(r, u) : fmax(r, u);
        }
        return r;
}

/* The curve panel at vertical offset y0: each policy's mean over seeds, the band from its least
 * to its most seed, and the published mean at 100 % as a diamond; axes from 0 to the largest
 * unallocated % seen. */
static int svg_curves(struct tsr_buf *out, const struct tsr_replay_trace_report *t, int y0)
{
        double top = 0, w = SVG_W - SVG_LEFT - SVG_RIGHT, h = SVG_PANEL - SVG_TOP - SVG_BOTTOM;
        double gpus = t->setup->cluster.total_gpus;
        int rc = 0;

        for (size_t i = 0; i < t->n_series; i++)
                for (unsigned x = X_FROM; t->series[i].n && x <= X_TO; x++)
                        top = fmax(top, unalloc_pct(&t->series[i], x, 2));
        top = ceil(top / 5) * 5;
        if (top <= 0)
                top = 5;
#define PX(x) (SVG_LEFT + (double)((x)-X_FROM) / (X_TO - X_FROM) * w)
#define PY(v) (y0 + SVG_TOP + h - (v) / top * h)
        rc = tsr_buf_addf(out,
                          "<text x=\"%d\" y=\"%d\" font-size=\"15\">%s: unallocated GPUs against "
                          "arrived workload (%zu seeds)</text>\n<text transform=\"translate(%d "
                          "%.0f) rotate(-90)\" font-size=\"11\" text-anchor=\"middle\">"
                          "unallocated GPUs (%% of capacity)</text>\n",
                          SVG_LEFT, y0 + 24, t->trace, t->n_series ? t->series[0].n : 0, 22,
                          y0 + SVG_TOP + h / 2);
        for (double v = 0; !rc && v <= top + 1e-9; v += 5)
                rc = tsr_buf_addf(out,
                                  "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" "
                                  "stroke=\"#ddd\"/><text x=\"%d\" y=\"%.1f\" font-size=\"11\" "
                                  "text-anchor=\"end\">%.0f</text>\n",
                                  SVG_LEFT, PY(v), SVG_LEFT + w, PY(v), SVG_LEFT - 6, PY(v) + 4, v);
        for (unsigned x = X_FROM; !rc && x <= X_TO; x += 10)
                rc = tsr_buf_addf(out,
                                  "<text x=\"%.1f\" y=\"%.0f\" font-size=\"11\" "
                                  "text-anchor=\"middle\">%u</text>\n",
                                  PX(x), y0 + SVG_TOP + h + 16, x);
        for (size_t i = 0; !rc && i < t->n_series; i++) {
                const struct tsr_replay_series *v = &t->series[i];
                const char *c = colours[i % (sizeof(colours) / sizeof(colours[0]))];
                const char *name = tsr_policy_name(v->policy);
                double pub = tsr_replay_published(t->trace, name);
                char pubs[32] = "";

                if (!v->n)
                        continue;
                rc = tsr_buf_addf(out, "<polygon fill=\"%s\" fill-opacity=\"0.15\" points=\"", c);
                for (unsigned x = X_FROM; !rc && x <= X_TO; x++)
                        rc = tsr_buf_addf(out, "%.1f,%.1f ", PX(x), PY(unalloc_pct(v, x, 1)));
                for (unsigned x = X_TO + 1; !rc && x-- > X_FROM;)
                        rc = tsr_buf_addf(out, "%.1f,%.1f ", PX(x), PY(unalloc_pct(v, x, 2)));
                rc = rc ? rc
                        : tsr_buf_addf(out,
                                       "\"/>\n<polyline fill=\"none\" stroke=\"%s\" "
                                       "stroke-width=\"2\" points=\"",
                                       c);
                for (unsigned x = X_FROM; !rc && x <= X_TO; x++)
                        rc = tsr_buf_addf(out, "%.1f,%.1f ", PX(x), PY(unalloc_pct(v, x, 0)));
                rc = rc ? rc : tsr_buf_adds(out, "\"/>\n");
                if (!rc && pub >= 0) {
                        double py = PY(pub / gpus * 100);

                        snprintf(pubs, sizeof(pubs), ", published %.0f", pub);
                        rc = tsr_buf_addf(out,
                                          "<polygon fill=\"%s\" stroke=\"black\" points=\"%.1f,"
                                          "%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f\"/>\n",
                                          c, PX(100), py - 5, PX(100) + 5, py, PX(100), py + 5,
                                          PX(100) - 5, py);
                }
                rc = rc ? rc
                        : tsr_buf_addf(out,
                                       "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\" "
                                       "fill=\"%s\">%s: %.0f GPUs at 100%s</text>\n",
                                       SVG_LEFT + w + 10, y0 + SVG_TOP + 16.0 * (double)i + 4, c,
                                       name, tsr_replay_mean_unallocated(t->setup, v), pubs);
        }
#undef PX
#undef PY
        return rc ? rc
                  : tsr_buf_addf(out,
                                 "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\">line: mean over "
                                 "seeds; band: least to most;</text>\n<text x=\"%.0f\" "
                                 "y=\"%.0f\" font-size=\"11\">diamond: the published mean at "
                                 "100 %%</text>\n<rect x=\"%d\" y=\"%d\" width=\"%.0f\" "
                                 "height=\"%.0f\" fill=\"none\" stroke=\"#333\"/>\n<text "
                                 "x=\"%.0f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">"
                                 "arrived workload (%% of GPU capacity)</text>\n",
                                 SVG_LEFT + w + 10, y0 + SVG_TOP + 16.0 * (double)t->n_series + 20,
                                 SVG_LEFT + w + 10, y0 + SVG_TOP + 16.0 * (double)t->n_series + 34,
                                 SVG_LEFT, y0 + SVG_TOP, w, h, SVG_LEFT + w / 2,
                                 y0 + SVG_PANEL - 12);
}

static int svg_shapes_height(const struct tsr_replay_trace_report *t)
{
        return (int)t->n_series * BAR_ROW + BAR_EXTRA;
}

/* The node-shape panel at y0: one stacked bar per policy of its mean unallocated GPUs at arrival
 * 100 % by node shape. */
static int svg_shapes(struct tsr_buf *out, const struct tsr_replay_trace_report *t, int y0)
{
        double most = 0, w = SVG_W - SVG_LEFT - SVG_RIGHT + 200, left = SVG_LEFT + 40;
        int rc;

        for (size_t i = 0; i < t->n_series; i++) {
                double sum = 0;

                for (int sh = 0; sh < TSR_REPLAY_SHAPES; sh++)
                        sum += mean_idle(&t->series[i], (enum tsr_replay_shape)sh);
                most = fmax(most, sum);
        }
        most = most > 0 ? ceil(most / 100) * 100 : 100;
        w -= left - SVG_LEFT;
        rc = tsr_buf_addf(out,
                          "<text x=\"%d\" y=\"%d\" font-size=\"15\">%s: where the unallocated "
                          "GPUs are at arrival 100 %% (mean over seeds)</text>\n",
                          SVG_LEFT, y0 + 24, t->trace);
        for (double v = 0; !rc && v <= most + 1e-9; v += most / 5) {
                double x = left + v / most * w;

                rc = tsr_buf_addf(out,
                                  "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                                  "stroke=\"#ddd\"/><text x=\"%.1f\" y=\"%d\" font-size=\"11\" "
                                  "text-anchor=\"middle\">%.0f</text>\n",
                                  x, y0 + 36, x, y0 + 36 + (int)t->n_series * BAR_ROW, x,
                                  y0 + 50 + (int)t->n_series * BAR_ROW, v);
        }
        for (size_t i = 0; !rc && i < t->n_series; i++) {
                double x = left, y = y0 + 40 + (double)i * BAR_ROW;

                rc = tsr_buf_addf(out,
                                  "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\" "
                                  "text-anchor=\"end\">%s</text>\n",
                                  left - 6, y + 13, tsr_policy_name(t->series[i].policy));
                for (int sh = 0; !rc && sh < TSR_REPLAY_SHAPES; sh++) {
                        double g = mean_idle(&t->series[i], (enum tsr_replay_shape)sh);

                        rc = g > 0
                                 ? tsr_buf_addf(out,
                                                "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" "
                                                "height=\"%d\" fill=\"%s\"><title>%s: %.1f "
                                                "GPUs</title></rect>\n",
                                                x, y, g / most * w, BAR_ROW - 6, shape_colours[sh],
                                                tsr_replay_shape_name((enum tsr_replay_shape)sh), g)
                                 : 0;
                        x += g / most * w;
                }
        }
        rc = rc ? rc
                : tsr_buf_addf(out,
                               "<text x=\"%.0f\" y=\"%d\" font-size=\"11\" "
                               "text-anchor=\"middle\">unallocated GPUs at arrival 100 %%</text>\n",
                               left + w / 2, y0 + 66 + (int)t->n_series * BAR_ROW);
        for (int sh = 0; !rc && sh < TSR_REPLAY_SHAPES; sh++)
                rc = tsr_buf_addf(
                    out,
                    "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" "
                    "fill=\"%s\"/><text x=\"%d\" y=\"%d\" font-size=\"11\">%s</text>\n",
                    SVG_LEFT + sh * 125, y0 + 78 + (int)t->n_series * BAR_ROW, shape_colours[sh],
                    SVG_LEFT + sh * 125 + 16, y0 + 88 + (int)t->n_series * BAR_ROW,
                    tsr_replay_shape_name((enum tsr_replay_shape)sh));
        return rc;
}

int tsr_replay_report_svg(struct tsr_buf *out, const struct tsr_replay_trace_report *t, size_t n)
{
        int height = 0, y = 0, rc;

        for (size_t r = 0; r < n; r++)
                height += SVG_PANEL + svg_shapes_height(&t[r]);
        rc = tsr_buf_addf(out,
                          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
                          "height=\"%d\" font-family=\"sans-serif\">\n<rect width=\"100%%\" "
                          "height=\"100%%\" fill=\"white\"/>\n",
                          SVG_W, height);
        for (size_t r = 0; !rc && r < n; r++) {
                rc = svg_curves(out, &t[r], y);
                y += SVG_PANEL;
                rc = rc ? rc : svg_shapes(out, &t[r], y);
                y += svg_shapes_height(&t[r]);
        }
        return rc ? rc : tsr_buf_adds(out, "</svg>\n");
}
