/*
 * tessera_policy.c - what a cluster running tessera does with each pod of the trace: the Workload
 * webhook's fit pin, Kueue's flavor order and Topology-Aware Scheduling at hostname level, and
 * the device plugin's allocator (gate 5), each through the same core functions the daemons and
 * the simulator call. Only signals tessera really publishes steer it.
 *
 * Mapping: a fractional pod is a logical slice, memory-percentage = gpu_milli / 10, so it asks
 * `.sliced: 1` and `.sliced.units` = gpu_milli * 1600 (of TSR_UNITS_PER_ACCEL per GPU); a
 * whole-GPU pod asks `nvidia.com/gpu: num_gpu` (exclusive); a CPU-only pod asks CPU and memory.
 *
 * Per pod:
 * 1. Flavors: one per (GPU model, GPUs per node), tried smallest per-node count first, ties by
 *    model name (spec/upstream-behavior.md §9); only models the pod's gpu_spec accepts. A
 *    CPU-only pod has one generic flavor of every node.
 * 2. In a flavor, TAS counts how many such pods each node still fits, for every resource the pod
 *    asks: CPU, memory, pod slots, and the device plugin's tokens (`.sliced`: the free slice slots
 *    of the cards not held whole; `.sliced.units`: their remaining units; `nvidia.com/gpu`: the
 *    free whole cards) -- after the fit pin (`sliced-max-free-units Gt U-1`, core/fit.h's
 *    projection of the node's ledger) has excluded nodes with no single card that fits. The node
 *    with the least free capacity (fewest fits) wins, ties by name; the first flavor that fits
 *    takes the pod.
 * 3. The allocator picks the card: the most-occupied card that still fits a slice, or the
 *    lowest-index free cards (core/alloc.h), and charges the node's ledger.
 *
 * The fit labels the pin reads are the device manager's, published after a change to a node's
 * cards: with env->label_lag L, a node's labels are projected again L binds after the first
 * change not yet shown, from its ledger as it is then (one publish covers every change in
 * between, as the device manager's coalescing window does); until then the pin reads the old
 * ones. A stale label can let a slice onto a node whose TAS count still fits it (the count is
 * over the device plugin's tokens, which are exact) but no card of which can hold it: gate 5 then
 * refuses it and the pod is dropped, as a Pod that fails at Allocate is. 0 reads the ledger.
 *
 * State: per node its accelerators' capability and ledger (the device manager's view), kept in
 * step by bound(); with a lag, each node's published labels and when they are next due; the
 * flavors and their nodes in name order.
 */
#include "replay/policy_int.h"

#include "core/alloc.h"
#include "core/capability.h"
#include "core/catalog.h"
#include "core/fit.h"
#include "core/tas.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define UNITS_PER_MILLI (TSR_UNITS_PER_ACCEL / TSR_TRACE_MILLI)
/* The unpartitioned NVIDIA card the ledgers model: a logical slice's arithmetic is the same on
 * every unpartitioned NVIDIA product (units and the manufacturer's slice slots). */
#define STAND_IN_PRODUCT "NVIDIA H100 80GB HBM3"

struct flavor {
        unsigned model, gpus;
        size_t *node; /* the flavor's nodes, by name */
        size_t n;
};

struct tessera {
        struct tsr_accel_cap *caps;      /* node i's cards at caps + first[i] */
        struct tsr_accel_ledger *ledger; /* aligned with caps */
        size_t *first;
        struct flavor *flavor; /* in trial order; the last is the generic one */
        size_t n_flavors;
        size_t *order; /* every node by name */
        struct tsr_alloc_pick pick[TSR_TRACE_GPUS_MAX];
        unsigned lag;                     /* env->label_lag */
        struct tsr_fit_labels *published; /* per node, with a lag */
        uint64_t *due;                    /* per node: the bind its labels follow at, or 0 */
        uint64_t binds;                   /* binds so far */
};

static void tessera_stop(void *state)
{
        struct tessera *t = state;

        if (!t)
                return;
        for (size_t f = 0; f < t->n_flavors; f++)
                free(t->flavor[f].node);
        free(t->flavor);
        free(t->caps);
        free(t->ledger);
        free(t->first);
        free(t->order);
        free(t->published);
        free(t->due);
        free(t);
}

static int flavor_before(const struct tsr_rcluster *c, const struct flavor *a,
                         const struct flavor *b)
{
        if (a->gpus != b->gpus)
                return a->gpus < b->gpus ? -1 : 1;
        return strcmp(c->models[a->model], c->models[b->model]);
}

/* The flavors of the GPU nodes in trial order, then the generic one; nodes by name in each. */
static int build_flavors(const struct tsr_rcluster *c, struct tessera *t)
{
        t->flavor = calloc(c->n_nodes + 1, sizeof(*t->flavor));
        if (!t->flavor)
                return -1;
        for (size_t k = 0; k < c->n_nodes; k++) {
                const struct tsr_rnode *n = &c->nodes[t->order[k]];
                size_t f = 0;

                if (!n->n_gpus)
                        continue;
                while (f < t->n_flavors &&
                       (t->flavor[f].model != n->model || t->flavor[f].gpus != n->n_gpus))
                        f++;
                if (f == t->n_flavors) {
                        struct flavor nf = {n->model, n->n_gpus, NULL, 0};
                        size_t at = t->n_flavors++;

                        while (at > 0 && flavor_before(c, &nf, &t->flavor[at - 1]) < 0) {
                                t->flavor[at] = t->flavor[at - 1];
                                at--;
                        }
                        t->flavor[at] = nf;
                }
        }
        for (size_t f = 0; f <= t->n_flavors; f++)
                if (!(t->flavor[f].node = malloc((c->n_nodes ? c->n_nodes : 1) * sizeof(size_t))))
                        return -1;
        for (size_t k = 0; k < c->n_nodes; k++) {
                size_t i = t->order[k];
                const struct tsr_rnode *n = &c->nodes[i];
                struct flavor *generic = &t->flavor[t->n_flavors];

                generic->node[generic->n++] = i;
                for (size_t f = 0; f < t->n_flavors; f++)
                        if (t->flavor[f].model == n->model && t->flavor[f].gpus == n->n_gpus)
                                t->flavor[f].node[t->flavor[f].n++] = i;
        }
        t->n_flavors++; /* the generic flavor, last */
        return 0;
}

/* Node i's fit labels as its ledger stands now. */
static void node_labels(const struct tessera *t, const struct tsr_rcluster *c, size_t i,
                        struct tsr_fit_labels *out)
{
        tsr_fit_labels_project(&t->caps[t->first[i]], &t->ledger[t->first[i]], c->nodes[i].n_gpus,
                               out);
}

static int tessera_start(const struct tsr_policy_env *env, void **state)
{
        const struct tsr_rcluster *c = env->cluster;
        const struct tsr_product *product = tsr_catalog_product_by_name(STAND_IN_PRODUCT);
        struct tessera *t = calloc(1, sizeof(*t));
        size_t cards = 0, n = c->n_nodes ? c->n_nodes : 1;

        if (!t || !product)
                goto fail;
        t->first = malloc(n * sizeof(*t->first));
        t->order = malloc(n * sizeof(*t->order));
        if (!t->first || !t->order)
                goto fail;
        for (size_t i = 0; i < c->n_nodes; i++) {
                t->first[i] = cards;
                cards += c->nodes[i].n_gpus;
        }
        t->caps = malloc((cards ? cards : 1) * sizeof(*t->caps));
        t->ledger = malloc((cards ? cards : 1) * sizeof(*t->ledger));
        if (!t->caps || !t->ledger)
                goto fail;
        for (size_t i = 0; i < c->n_nodes; i++)
                for (unsigned g = 0; g < c->nodes[i].n_gpus; g++) {
                        tsr_capability_detect(product, g, "GPU-replay", false,
                                              &t->caps[t->first[i] + g]);
                        tsr_ledger_reset(&t->ledger[t->first[i] + g]);
                }
        if (tsr_trace_nodes_by_name(env->nodes, c->n_nodes, t->order) || build_flavors(c, t))
                goto fail;
        t->lag = env->label_lag;
        if (t->lag) {
                t->published = malloc(n * sizeof(*t->published));
                t->due = calloc(n, sizeof(*t->due));
                if (!t->published || !t->due)
                        goto fail;
                for (size_t i = 0; i < c->n_nodes; i++)
                        node_labels(t, c, i, &t->published[i]);
        }
        *state = t;
        return 0;
fail:
        tessera_stop(t);
        return -1;
}

/* How many pods like pod node i still fits, as TAS counts it (0: excluded or full). */
static int64_t fits(const struct tsr_policy_env *env, const struct tessera *t, size_t i,
                    const struct tsr_rpod *pod)
{
        const struct tsr_rnode *n = &env->cluster->nodes[i];
        const struct tsr_accel_cap *caps = &t->caps[t->first[i]];
        const struct tsr_accel_ledger *l = &t->ledger[t->first[i]];
        struct tsr_tas_resource r[TSR_RNODE_TAS_RESOURCES + 2];
        size_t k = tsr_rnode_tas_resources(n, pod->cpu, pod->mem, r);

        if (pod->fractional) {
                int64_t units = (int64_t)pod->milli * UNITS_PER_MILLI, slots = 0, free_units = 0;
                struct tsr_fit_labels labels;

                if (t->lag)
                        labels = t->published[i];
                else
                        node_labels(t, env->cluster, i, &labels);
                if (!labels.present || labels.sliced_max_free_units < units)
                        return 0; /* the fit pin: sliced-max-free-units Gt units-1 */
                for (unsigned g = 0; g < n->n_gpus; g++) {
                        if (l[g].mode != TSR_MODE_NONE && l[g].mode != TSR_MODE_SLICED)
                                continue;
                        slots += caps[g].slice_slots - l[g].allocated_slices;
                        free_units += l[g].remaining;
                }
                r[k++] = (struct tsr_tas_resource){slots, 0, 1};          /* .sliced */
                r[k++] = (struct tsr_tas_resource){free_units, 0, units}; /* .sliced.units */
        } else if (pod->num_gpu) {
                int64_t whole = 0;

                for (unsigned g = 0; g < n->n_gpus; g++)
                        whole += tsr_fit_whole(&caps[g], &l[g]);
                r[k++] = (struct tsr_tas_resource){whole, 0, pod->num_gpu}; /* nvidia.com/gpu */
        }
        return tsr_tas_fits(r, k, NULL);
}

static bool tessera_place(const struct tsr_policy_env *env, void *state, const struct tsr_rpod *pod,
                          struct tsr_rplace *out)
{
        struct tessera *t = state;
        const struct tsr_rcluster *c = env->cluster;
        size_t best = SIZE_MAX;

        for (size_t f = 0; f < t->n_flavors && best == SIZE_MAX; f++) {
                const struct flavor *fl = &t->flavor[f];
                bool generic = f + 1 == t->n_flavors;
                struct tsr_tas_candidate least = {0};

                if (generic != !pod->num_gpu || (!generic && !((pod->models >> fl->model) & 1u)))
                        continue;
                for (size_t k = 0; k < fl->n; k++) {
                        size_t i = fl->node[k];
                        struct tsr_tas_candidate cand = {i, env->nodes[i].name,
                                                         fits(env, t, i, pod)};

                        if (cand.fits && (best == SIZE_MAX || tsr_tas_before(&cand, &least))) {
                                best = i;
                                least = cand;
                        }
                }
        }
        if (best == SIZE_MAX)
                return false;
        out->node = best;
        out->n_gpus = 0;
        if (pod->num_gpu) {
                const struct tsr_accel_cap *caps = &t->caps[t->first[best]];
                const struct tsr_accel_ledger *l = &t->ledger[t->first[best]];
                unsigned n_gpus = c->nodes[best].n_gpus;
                int rc = pod->fractional
                             ? tsr_alloc_pick_slice(caps, l, n_gpus,
                                                    (int64_t)pod->milli * UNITS_PER_MILLI, t->pick)
                             : tsr_alloc_pick_exclusive(caps, l, n_gpus, pod->num_gpu, t->pick);

                if (rc)
                        return false; /* gate 5 refuses: TAS counted what the cards cannot hold */
                out->n_gpus = pod->fractional ? 1 : pod->num_gpu;
                for (unsigned k = 0; k < out->n_gpus; k++)
                        out->gpu[k] = (uint8_t)t->pick[k].accel;
        }
        return true;
}

/* A bind moves the clock on: every node whose labels are due by now shows its cards as they are. */
static void publish_due(struct tessera *t, const struct tsr_rcluster *c)
{
        for (size_t i = 0; t->lag && i < c->n_nodes; i++)
                if (t->due[i] && t->due[i] <= t->binds) {
                        node_labels(t, c, i, &t->published[i]);
                        t->due[i] = 0;
                }
}

static void tessera_bound(const struct tsr_policy_env *env, void *state, const struct tsr_rpod *pod,
                          const struct tsr_rplace *pl)
{
        struct tessera *t = state;
        struct tsr_demand d = {0};

        t->binds++;
        if (pod->num_gpu) {
                if (t->lag && !t->due[pl->node])
                        t->due[pl->node] = t->binds + t->lag;
                d.family = pod->fractional ? TSR_FAMILY_SLICED : TSR_FAMILY_EXCLUSIVE;
                d.cards = pod->fractional ? 1 : pod->num_gpu;
                d.units = (int64_t)pod->milli * UNITS_PER_MILLI;
                for (unsigned k = 0; k < pl->n_gpus; k++) {
                        struct tsr_alloc_pick p = {pl->gpu[k], -1, 0};

                        tsr_alloc_charge(&t->caps[t->first[pl->node]],
                                         &t->ledger[t->first[pl->node]], &d, &p);
                }
        }
        publish_due(t, env->cluster);
}

const struct tsr__policy_ops tsr__policy_tessera = {"tessera", tessera_start, tessera_stop,
                                                    tessera_place, tessera_bound};
