/*
 * cluster.c - the replayed cluster: node table, filters, binding.
 */
#include "replay/cluster.h"

#include "base/err.h"

#include <stdlib.h>
#include <string.h>

static int model_index(struct tsr_rcluster *c, const char *model)
{
        for (size_t m = 0; m < c->n_models; m++)
                if (!strcmp(c->models[m], model))
                        return (int)m;
        if (c->n_models == TSR_RCLUSTER_MODELS_MAX)
                return -1;
        strcpy(c->models[c->n_models], model);
        return (int)c->n_models++;
}

int tsr_rcluster_init(struct tsr_rcluster *c, const struct tsr_trace_node *nodes, size_t n,
                      struct tsr_diag *diag)
{
        memset(c, 0, sizeof(*c));
        c->nodes = calloc(n ? n : 1, sizeof(*c->nodes));
        if (!c->nodes)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        c->n_nodes = n;
        for (size_t i = 0; i < n; i++) {
                int m = model_index(c, nodes[i].model);

                if (m < 0) {
                        free(c->nodes);
                        c->nodes = NULL;
                        return tsr_diag_set(diag, TSR_ETOOBIG,
                                            "node %s: more than %d GPU models in the node list",
                                            nodes[i].name, TSR_RCLUSTER_MODELS_MAX);
                }
                c->nodes[i].model = (unsigned)m;
                c->total_gpus += nodes[i].gpus;
        }
        c->total_milli = (int64_t)c->total_gpus * TSR_TRACE_MILLI;
        tsr_rcluster_reset(c, nodes);
        return 0;
}

void tsr_rcluster_release(struct tsr_rcluster *c)
{
        free(c->nodes);
        c->nodes = NULL;
        c->n_nodes = 0;
}

void tsr_rcluster_reset(struct tsr_rcluster *c, const struct tsr_trace_node *nodes)
{
        for (size_t i = 0; i < c->n_nodes; i++) {
                struct tsr_rnode *n = &c->nodes[i];
                unsigned model = n->model;

                memset(n, 0, sizeof(*n));
                n->model = model;
                n->cpu_cap = n->cpu_free = nodes[i].cpu_milli;
                n->mem_cap = n->mem_free = nodes[i].memory_mib;
                n->n_gpus = nodes[i].gpus;
                for (unsigned g = 0; g < n->n_gpus; g++)
                        n->free[g] = TSR_TRACE_MILLI;
        }
        c->used_milli = 0;
}

void tsr_rcluster_pod(const struct tsr_rcluster *c, const struct tsr_trace_pod *p,
                      struct tsr_rpod *out)
{
        memset(out, 0, sizeof(*out));
        out->cpu = p->cpu_milli;
        out->mem = p->memory_mib;
        out->num_gpu = p->num_gpu;
        out->milli = p->num_gpu ? p->gpu_milli : 0;
        out->fractional = tsr_trace_pod_fractional(p);
        for (size_t m = 0; m < c->n_models; m++)
                if (tsr_trace_spec_accepts(p->gpu_spec, c->models[m]))
                        out->models |= 1ull << m;
}

unsigned tsr_rnode_free_gpus(const struct tsr_rnode *n)
{
        unsigned k = 0;

        for (unsigned g = 0; g < n->n_gpus; g++)
                k += n->free[g] == TSR_TRACE_MILLI;
        return k;
}

int64_t tsr_rnode_free_milli(const struct tsr_rnode *n)
{
        int64_t s = 0;

        for (unsigned g = 0; g < n->n_gpus; g++)
                s += n->free[g];
        return s;
}

size_t tsr_rnode_tas_resources(const struct tsr_rnode *n, int64_t cpu, int64_t mem,
                               struct tsr_tas_resource *out)
{
        out[0] = (struct tsr_tas_resource){n->cpu_cap, n->cpu_cap - n->cpu_free, cpu};
        out[1] = (struct tsr_tas_resource){n->mem_cap, n->mem_cap - n->mem_free, mem};
        out[2] = (struct tsr_tas_resource){TSR_RNODE_PODS_MAX, n->pods, 1};
        return TSR_RNODE_TAS_RESOURCES;
}

int tsr_rnode_best_gpu(const struct tsr_rnode *n, unsigned milli)
{
        int best = -1;

        for (unsigned g = 0; g < n->n_gpus; g++)
                if (n->free[g] >= (int)milli && (best < 0 || n->free[g] < n->free[best]))
                        best = (int)g;
        return best;
}

bool tsr_rnode_fits(const struct tsr_rnode *n, const struct tsr_rpod *p)
{
        if (n->cpu_free < p->cpu || n->mem_free < p->mem || n->pods >= TSR_RNODE_PODS_MAX)
                return false;
        if (!p->num_gpu)
                return true;
        if (!n->n_gpus || !((p->models >> n->model) & 1u))
                return false;
        if (p->fractional)
                return tsr_rnode_best_gpu(n, p->milli) >= 0;
        return tsr_rnode_free_gpus(n) >= p->num_gpu;
}

void tsr_rnode_whole_gpus(const struct tsr_rnode *n, unsigned count, struct tsr_rplace *pl)
{
        pl->n_gpus = 0;
        for (unsigned g = 0; g < n->n_gpus && pl->n_gpus < count; g++)
                if (n->free[g] == TSR_TRACE_MILLI)
                        pl->gpu[pl->n_gpus++] = (uint8_t)g;
}

void tsr_rcluster_bind(struct tsr_rcluster *c, const struct tsr_rpod *p,
                       const struct tsr_rplace *pl)
{
        struct tsr_rnode *n = &c->nodes[pl->node];

        n->cpu_free -= p->cpu;
        n->mem_free -= p->mem;
        n->pods++;
        if (!p->num_gpu)
                return;
        for (unsigned k = 0; k < pl->n_gpus; k++)
                n->free[pl->gpu[k]] -= (int16_t)p->milli;
        c->used_milli += (int64_t)p->milli * pl->n_gpus;
        n->tag_pods[p->fractional ? 0 : p->num_gpu]++;
}
