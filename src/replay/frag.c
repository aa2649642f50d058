/*
 * frag.c - the typical workload and the node fragment.
 */
#include "replay/frag.h"

#include "base/err.h"

#include <stdlib.h>
#include <string.h>

struct group {
        const struct tsr_trace_pod *pod; /* the shape's first pod */
        unsigned count;
};

static int shape_cmp(const struct tsr_trace_pod *a, const struct tsr_trace_pod *b)
{
        if (a->cpu_milli != b->cpu_milli)
                return a->cpu_milli < b->cpu_milli ? -1 : 1;
        if (a->gpu_milli != b->gpu_milli)
                return a->gpu_milli < b->gpu_milli ? -1 : 1;
        if (a->num_gpu != b->num_gpu)
                return a->num_gpu < b->num_gpu ? -1 : 1;
        return strcmp(a->gpu_spec, b->gpu_spec);
}

static int by_shape(const void *x, const void *y)
{
        return shape_cmp(*(const struct tsr_trace_pod *const *)x,
                         *(const struct tsr_trace_pod *const *)y);
}

/* Count descending, then shape descending. */
static int by_popularity(const void *x, const void *y)
{
        const struct group *a = x, *b = y;

        if (a->count != b->count)
                return a->count > b->count ? -1 : 1;
        return -shape_cmp(a->pod, b->pod);
}

int tsr_frag_workload_new(const struct tsr_rcluster *c, const struct tsr_trace_pod *pods, size_t n,
                          struct tsr_frag_workload *out, struct tsr_diag *diag)
{
        const struct tsr_trace_pod **sorted;
        struct group *g;
        size_t ng = 0, keep = 0, covered = 0, total = 0;

        if (!n)
                return tsr_diag_set(diag, TSR_EINVAL, "the pod list is empty");
        sorted = malloc(n * sizeof(*sorted));
        g = malloc(n * sizeof(*g));
        if (!sorted || !g) {
                free(sorted);
                free(g);
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < n; i++)
                sorted[i] = &pods[i];
        qsort(sorted, n, sizeof(*sorted), by_shape);
        for (size_t i = 0; i < n; i++) {
                if (ng && !shape_cmp(g[ng - 1].pod, sorted[i]))
                        g[ng - 1].count++;
                else
                        g[ng++] = (struct group){sorted[i], 1};
        }
        free(sorted);
        qsort(g, ng, sizeof(*g), by_popularity);
        while (keep < ng && covered * 100 < n * TSR_FRAG_POPULARITY)
                covered += g[keep++].count;
        out->shape = calloc(keep, sizeof(*out->shape));
        if (!out->shape) {
                free(g);
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        }
        out->n = keep;
        for (size_t k = 0; k < keep; k++) {
                struct tsr_rpod rp;

                tsr_rcluster_pod(c, g[k].pod, &rp);
                out->shape[k] =
                    (struct tsr_frag_shape){rp.cpu, rp.milli, rp.num_gpu, rp.models, g[k].count, 0};
                total += g[k].count;
        }
        for (size_t k = 0; k < keep; k++)
                out->shape[k].p = (double)out->shape[k].count / (double)total;
        free(g);
        return 0;
}

void tsr_frag_workload_free(struct tsr_frag_workload *w)
{
        free(w->shape);
        w->shape = NULL;
        w->n = 0;
}

double tsr_frag_node(const struct tsr_frag_workload *w, unsigned model, int64_t cpu_free,
                     const int16_t *free, unsigned n_gpus)
{
        int64_t free_n = 0;
        double f = 0;

        for (unsigned g = 0; g < n_gpus; g++)
                free_n += free[g];
        if (!free_n)
                return 0;
        for (size_t k = 0; k < w->n; k++) {
                const struct tsr_frag_shape *m = &w->shape[k];
                int64_t small = 0;
                unsigned fit = 0;

                if (!m->num_gpu || !((m->models >> model) & 1u) || cpu_free < m->cpu) {
                        f += m->p * (double)free_n;
                        continue;
                }
                for (unsigned g = 0; g < n_gpus; g++) {
                        if (free[g] >= (int)m->milli)
                                fit++;
                        else
                                small += free[g];
                }
                f += m->p * (double)(fit < m->num_gpu ? free_n : small);
        }
        return f;
}

double tsr_frag_rnode(const struct tsr_frag_workload *w, const struct tsr_rnode *n)
{
        return tsr_frag_node(w, n->model, n->cpu_free, n->free, n->n_gpus);
}
