/*
 * arrival.c - the protocol's submission order and its arrival bins.
 */
#include "replay/arrival.h"

#include "base/err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int64_t tsr_replay_request(const struct tsr_trace_pod *p)
{
        return p->num_gpu ? (int64_t)p->num_gpu * p->gpu_milli : 0;
}

static int pod_name_cmp(const void *a, const void *b)
{
        const struct tsr_trace_pod *pa = *(const struct tsr_trace_pod *const *)a;
        const struct tsr_trace_pod *pb = *(const struct tsr_trace_pod *const *)b;

        return strcmp(pa->name, pb->name);
}

int tsr_replay_order_build(const struct tsr_trace_pod *pods, size_t n, int64_t target,
                           struct tsr_rng *rng, const struct tsr_trace_pod ***out, size_t *n_out,
                           size_t *clones)
{
        size_t cap = n + 16, len = n, added = 0;
        const struct tsr_trace_pod **v = malloc(cap * sizeof(*v));
        int64_t total = 0;

        if (!v)
                return TSR_ENOMEM;
        for (size_t i = 0; i < n; i++) {
                v[i] = pods + i;
                total += tsr_replay_request(pods + i);
        }
        qsort(v, len, sizeof(*v), pod_name_cmp);
        tsr_rng_shuffle(rng, v, len, sizeof(*v));
        /* Past the target test once: at the target, zero-request (CPU-only) clones still go in
         * until a GPU pod is drawn, as run.c does. */
        for (bool tune_up = n && total < target; tune_up;) {
                const struct tsr_trace_pod *c = pods + tsr_rng_below(rng, n);

                if (total + tsr_replay_request(c) > target)
                        break;
                if (len == cap) {
                        const struct tsr_trace_pod **grown = realloc(v, 2 * cap * sizeof(*v));

                        if (!grown) {
                                free(v);
                                return TSR_ENOMEM;
                        }
                        v = grown;
                        cap *= 2;
                }
                v[len++] = c;
                total += tsr_replay_request(c);
                added++;
        }
        while (len && total > target) {
                size_t j = (size_t)tsr_rng_below(rng, len);

                total -= tsr_replay_request(v[j]);
                len--;
                memmove(v + j, v + j + 1, (len - j) * sizeof(*v));
        }
        *out = v;
        *n_out = len;
        *clones = added;
        return 0;
}

void tsr_replay_bins_add(struct tsr_replay_bins *b, int64_t arrived, int64_t capacity,
                         const double *v, size_t nv)
{
        long x = lround((double)arrived / (double)capacity * 100.0);

        if (x < 0 || x >= TSR_REPLAY_POINTS)
                return;
        for (size_t k = 0; k < nv && k < TSR_REPLAY_BIN_VALUES; k++)
                b->sum[k][x] += v[k];
        b->n[x]++;
}

bool tsr_replay_bins_point(const struct tsr_replay_bins *b, unsigned x, double *v, size_t nv)
{
        long from = x;

        if (x >= TSR_REPLAY_POINTS)
                return false;
        if (!b->n[x])
                from = x + 1 < TSR_REPLAY_POINTS && b->n[x + 1] ? (long)x + 1 : (long)x - 1;
        if (from < 0 || !b->n[from])
                return false;
        for (size_t k = 0; k < nv && k < TSR_REPLAY_BIN_VALUES; k++)
                v[k] = b->sum[k][from] / b->n[from];
        return true;
}
