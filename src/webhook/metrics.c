/*
 * metrics.c - counters and a histogram per webhook, behind one mutex; rendered on demand.
 */
#include "webhook/metrics.h"

#include "base/buf.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define METRICS_SERIES_MAX 32

/* Prometheus client defaults for latency, in seconds. */
static const double buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                 0.1,    0.25,  0.5,    1,     2.5,  5,     10};
#define N_BUCKETS (sizeof(buckets) / sizeof(buckets[0]))

struct series {
        char label[48];
        uint64_t count;
};

struct webhook_metrics {
        struct series codes[METRICS_SERIES_MAX];
        size_t n_codes;
        struct series rules[METRICS_SERIES_MAX];
        size_t n_rules;
        uint64_t bucket[N_BUCKETS];
        uint64_t observations, patches;
        double sum;
};

struct tsr_metrics {
        pthread_mutex_t lock;
        const char *const *names;
        size_t n;
        struct webhook_metrics *w;
};

struct tsr_metrics *tsr_metrics_new(const char *const *names, size_t n)
{
        struct tsr_metrics *m = calloc(1, sizeof(*m));

        if (!m)
                return NULL;
        m->w = calloc(n ? n : 1, sizeof(*m->w));
        if (!m->w) {
                free(m);
                return NULL;
        }
        pthread_mutex_init(&m->lock, NULL);
        m->names = names;
        m->n = n;
        return m;
}

void tsr_metrics_free(struct tsr_metrics *m)
{
        if (!m)
                return;
        pthread_mutex_destroy(&m->lock);
        free(m->w);
        free(m);
}

static void bump(struct series *s, size_t *n, const char *label)
{
        for (size_t i = 0; i < *n; i++) {
                if (!strcmp(s[i].label, label)) {
                        s[i].count++;
                        return;
                }
        }
        if (*n >= METRICS_SERIES_MAX)
                return;
        strncpy(s[*n].label, label, sizeof(s[*n].label) - 1);
        s[*n].count = 1;
        (*n)++;
}

void tsr_metrics_observe(struct tsr_metrics *m, size_t w, int code, double seconds, bool denied,
                         const char *rule, bool patched)
{
        struct webhook_metrics *wm;
        char text[16];

        if (w >= m->n)
                return;
        snprintf(text, sizeof(text), "%d", code);
        pthread_mutex_lock(&m->lock);
        wm = &m->w[w];
        bump(wm->codes, &wm->n_codes, text);
        if (denied)
                bump(wm->rules, &wm->n_rules, rule && *rule ? rule : "unspecified");
        wm->patches += patched;
        for (size_t b = 0; b < N_BUCKETS; b++)
                wm->bucket[b] += seconds <= buckets[b];
        wm->observations++;
        wm->sum += seconds;
        pthread_mutex_unlock(&m->lock);
}

/* Appends one labelled counter's series for every webhook: the status codes, or the rules. */
static int render_series(const struct tsr_metrics *m, struct tsr_buf *out, const char *metric,
                         const char *label, bool rules)
{
        int rc = 0;

        for (size_t w = 0; !rc && w < m->n; w++) {
                const struct series *s = rules ? m->w[w].rules : m->w[w].codes;
                size_t n = rules ? m->w[w].n_rules : m->w[w].n_codes;

                for (size_t i = 0; !rc && i < n; i++)
                        rc = tsr_buf_addf(out, "%s{webhook=\"%s\",%s=\"%s\"} %llu\n", metric,
                                          m->names[w], label, s[i].label,
                                          (unsigned long long)s[i].count);
        }
        return rc;
}

static int render_histogram(const struct tsr_metrics *m, struct tsr_buf *out)
{
        static const char name[] = "tessera_webhook_request_duration_seconds";
        int rc = 0;

        for (size_t w = 0; !rc && w < m->n; w++) {
                const struct webhook_metrics *wm = &m->w[w];

                for (size_t b = 0; !rc && b < N_BUCKETS; b++)
                        rc = tsr_buf_addf(out, "%s_bucket{webhook=\"%s\",le=\"%g\"} %llu\n", name,
                                          m->names[w], buckets[b],
                                          (unsigned long long)wm->bucket[b]);
                if (!rc)
                        rc = tsr_buf_addf(out,
                                          "%s_bucket{webhook=\"%s\",le=\"+Inf\"} %llu\n"
                                          "%s_sum{webhook=\"%s\"} %.9f\n"
                                          "%s_count{webhook=\"%s\"} %llu\n",
                                          name, m->names[w], (unsigned long long)wm->observations,
                                          name, m->names[w], wm->sum, name, m->names[w],
                                          (unsigned long long)wm->observations);
        }
        return rc;
}

int tsr_metrics_render(struct tsr_metrics *m, struct tsr_buf *out)
{
        int rc;

        pthread_mutex_lock(&m->lock);
        rc = tsr_buf_adds(out, "# HELP tessera_webhook_requests_total Admission reviews answered, "
                               "by HTTP status.\n# TYPE tessera_webhook_requests_total counter\n");
        if (!rc)
                rc = render_series(m, out, "tessera_webhook_requests_total", "code", false);
        if (!rc)
                rc =
                    tsr_buf_adds(out, "# HELP tessera_webhook_denials_total Denied reviews, by the "
                                      "rule they broke.\n# TYPE tessera_webhook_denials_total "
                                      "counter\n");
        if (!rc)
                rc = render_series(m, out, "tessera_webhook_denials_total", "rule", true);
        if (!rc)
                rc = tsr_buf_adds(out, "# HELP tessera_webhook_patches_total Reviews answered with "
                                       "a JSON Patch.\n# TYPE tessera_webhook_patches_total "
                                       "counter\n");
        for (size_t w = 0; !rc && w < m->n; w++)
                rc = tsr_buf_addf(out, "tessera_webhook_patches_total{webhook=\"%s\"} %llu\n",
                                  m->names[w], (unsigned long long)m->w[w].patches);
        if (!rc)
                rc = tsr_buf_adds(out, "# HELP tessera_webhook_request_duration_seconds Time to "
                                       "answer a review.\n# TYPE "
                                       "tessera_webhook_request_duration_seconds histogram\n");
        if (!rc)
                rc = render_histogram(m, out);
        pthread_mutex_unlock(&m->lock);
        return rc;
}
