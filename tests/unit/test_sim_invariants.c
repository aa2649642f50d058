/*
 * test_sim_invariants.c - long randomized runs of the simulator: queued Pods of every family
 * (exclusive, shared, logical slices, MIG partitions on H100 and A30, CPU-only, pod groups) are
 * applied and deleted and the clock moves, and after every step
 *   - every ledger is within its budget and consistent with its capability, hardware instances
 *     are disjoint, and no flavor's reserved quota exceeds its nominal quota (tsr_cluster_check);
 *   - no Pod that Kueue admitted was refused by its own node's allocator: gate 3 fitted it with
 *     the allocator's own packing, so Allocate must agree -- except for the documented
 *     replacement gap (the ledger frees a deleted Pod's partition before the reclaimer destroys
 *     the instance), which the allocator names in its message and which is counted here;
 *   - an admitted Pod whose Workload holds its quota is bound or finished, never lost;
 *   - every node's ledger as the simulator serves it (tsr_cluster_ledger, memoized per node
 *     generation) equals the one rebuilt now from the Pods bound there, and the requests the
 *     scheduler charges to it (sim_node_states, memoized the same way) equal those of a walk over
 *     every Pod now, its allocatable has the keys projected now, and each bound Pod's held
 *     state (tsr_cluster_held) equals the one read now: no change missed;
 *   - each node's list of bound Pods is the Pods bound there, in order;
 *   - every Workload has a member Pod, and one whose Pods all ended is finished;
 *   - the InstanceType the webhooks' memo serves is the one built now;
 *   - every Workload below the actors' watermark is at rest (sim_workload_at_rest);
 *   - TAS's usage as kept (its memo of Workloads whose Pods are all bound) is the one counted
 *     now from the Pods and the assignments;
 *   - every Workload the check judges holds the verdict a snapshot made afresh for it alone
 *     gives, listing every Workload and reading every Pod object (no memo, no Workload left
 *     out): the pass's shortcuts (one snapshot per queue, settled Workloads not listed) judge
 *     what a verdict per Workload judged.
 * Several fixed seeds; every failure prints the seed and step.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/buf.h"
#include "base/diag.h"
#include "codec/admit_snapshot.h"
#include "codec/devices_object.h"
#include "core/node_keys.h"
#include "core/pod_resources.h"
#include "core/catalog.h"
#include "sim/actors.h"
#include "sim/cluster.h"
#include "sim/render.h"
#include "sim/resources.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define H100_QUEUE "gpustack-fnv64-e4768a65ca0ce96b"
#define A30_QUEUE  "gpustack-fnv64-1fa0b82c71651ffd"
#define CPU_QUEUE  "gpustack-fnv64-3b93966fd73eb9ec"

static uint64_t rng;

static unsigned rnd(unsigned n)
{
        rng = rng * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
        return (unsigned)((rng >> 33) % n);
}

static void build_cluster(struct tsr_cluster *c)
{
        const struct tsr_product *h100 = tsr_catalog_product_by_name("NVIDIA H100 80GB HBM3");
        const struct tsr_product *a30 = tsr_catalog_product_by_name("NVIDIA A30");
        const bool h100_mig_a[4] = {true, false, false, false};
        const bool h100_mig_b[8] = {true, true, false, false, false, false, false, false};
        const bool a30_mig[2] = {true, true};
        struct tsr_diag diag;

        tsr_cluster_init(c);
        assert_int_equal(tsr_cluster_add_node(c, "h100-a", 64000, INT64_C(512) << 30, "linux",
                                              "amd64", h100, 4, h100_mig_a, &diag),
                         0);
        assert_int_equal(tsr_cluster_add_node(c, "h100-b", 128000, INT64_C(1024) << 30, "linux",
                                              "amd64", h100, 8, h100_mig_b, &diag),
                         0);
        assert_int_equal(tsr_cluster_add_node(c, "a30-a", 32000, INT64_C(256) << 30, "linux",
                                              "amd64", a30, 2, a30_mig, &diag),
                         0);
        assert_int_equal(tsr_cluster_add_node(c, "cpu-a", 16000, INT64_C(64) << 30, "linux",
                                              "amd64", NULL, 0, NULL, &diag),
                         0);
}

/* The resource limits of a random request, and its queue. */
static json_t *random_limits(const char **queue, bool *partition)
{
        static const char *const h100_profiles[] = {"1g.10gb", "1g.20gb", "2g.20gb",
                                                    "3g.40gb", "4g.40gb", "7g.80gb"};
        static const char *const a30_profiles[] = {"1g.6gb", "2g.12gb", "4g.24gb"};
        char key[96], value[16];

        *partition = false;
        *queue = H100_QUEUE;
        switch (rnd(7)) {
        case 0:
                snprintf(value, sizeof(value), "%u", 1 + rnd(3));
                return json_pack("{s:s, s:s}", "nvidia.com/gpu", value, "cpu", "1");
        case 1:
                snprintf(value, sizeof(value), "%u", 1 + rnd(3));
                return json_pack("{s:s, s:s}", "nvidia.com/gpu.shared", value, "cpu", "1");
        case 2:
                snprintf(value, sizeof(value), "%u", 5 * (1 + rnd(19)));
                return json_pack("{s:s, s:s}", "nvidia.com/gpu.sliced", "1",
                                 "nvidia.com/gpu.sliced.memory-percentage", value);
        case 3:
                snprintf(value, sizeof(value), "%u", 1024 * (1 + rnd(79)));
                return json_pack("{s:s, s:s}", "nvidia.com/gpu.sliced", "1",
                                 "nvidia.com/gpu.sliced.memory-mib", value);
        case 4:
                *partition = true;
                snprintf(key, sizeof(key), "nvidia.com/gpu.partitioned.mig-%s",
                         h100_profiles[rnd(6)]);
                return json_pack("{s:s, s:s}", "nvidia.com/gpu.partitioned", "1", key, "1");
        case 5:
                *partition = true;
                *queue = A30_QUEUE;
                snprintf(key, sizeof(key), "nvidia.com/gpu.partitioned.mig-%s",
                         a30_profiles[rnd(3)]);
                return json_pack("{s:s, s:s}", "nvidia.com/gpu.partitioned", "1", key, "1");
        default:
                *queue = CPU_QUEUE;
                snprintf(value, sizeof(value), "%u", 1 + rnd(6));
                return json_pack("{s:s}", "cpu", value);
        }
}

/* Applies one random Pod (or a two-Pod group). Returns whether it asks for a partition. */
static bool apply_random(struct tsr_cluster *c, unsigned serial)
{
        struct tsr_buf out = TSR_BUF_INIT;
        struct tsr_diag diag;
        const char *queue;
        bool partition;
        json_t *limits = random_limits(&queue, &partition);
        unsigned members = rnd(8) == 0 ? 2 : 1;

        for (unsigned m = 0; m < members; m++) {
                char name[64], group[64], secs[16];
                json_t *labels = json_pack("{s:s}", "kueue.x-k8s.io/queue-name", queue);
                json_t *container, *pod;

                snprintf(name, sizeof(name), "p%u-%u", serial, m);
                snprintf(group, sizeof(group), "g%u", serial);
                container = json_pack("{s:s, s:s, s:{s:O}}", "name", "main", "image", "busybox",
                                      "resources", "limits", limits);
                if (rnd(2)) {
                        snprintf(secs, sizeof(secs), "%u", 10 + rnd(200));
                        json_object_set_new(container, "command",
                                            json_pack("[s, s]", "sleep", secs));
                }
                pod = json_pack("{s:s, s:s, s:{s:s, s:o}, s:{s:s, s:[o]}}", "apiVersion", "v1",
                                "kind", "Pod", "metadata", "name", name, "labels", labels, "spec",
                                "restartPolicy", "Never", "containers", container);
                if (members > 1) {
                        json_object_set_new(labels, "kueue.x-k8s.io/pod-group-name",
                                            json_string(group));
                        json_object_set_new(
                            json_object_get(pod, "metadata"), "annotations",
                            json_pack("{s:s}", "kueue.x-k8s.io/pod-group-total-count", "2"));
                }
                assert_int_equal(tsr_cluster_apply_pod(c, pod, &out, &diag), 0);
        }
        json_decref(limits);
        tsr_buf_release(&out);
        return partition;
}

/* Marks in seen[] (indexed by the step that created it) every Pod that got bound. */
static void mark_bound(const struct tsr_cluster *c, bool *seen, unsigned steps)
{
        for (size_t k = 0; k < c->n_pods; k++) {
                unsigned serial;

                if (c->pods[k].node >= 0 && sscanf(c->pods[k].name, "p%u-", &serial) == 1 &&
                    serial < steps)
                        seen[serial] = true;
        }
}

static bool same_ledger(const struct tsr_accel_ledger *a, const struct tsr_accel_ledger *b)
{
        if (a->mode != b->mode || a->allocated != b->allocated || a->remaining != b->remaining ||
            a->allocated_slices != b->allocated_slices || a->live.n != b->live.n)
                return false;
        return !memcmp(a->live.inst, b->live.inst, a->live.n * sizeof(a->live.inst[0]));
}

/* Node i's served keys and fit labels against those projected from its ledger fresh. */
static void check_projections(const struct tsr_cluster *c, size_t i,
                              const struct tsr_accel_ledger *fresh, uint64_t seed, unsigned step)
{
        const struct sim_node *n = &c->nodes[i];
        struct tsr_node_keys *served = test_malloc(sizeof(*served)),
                             *want = test_malloc(sizeof(*want));
        json_t *labels = tsr_cluster_node_labels(c, i), *fit = json_object();
        const char *key;
        json_t *value;

        assert_int_equal(tsr_cluster_node_keys(c, i, served, NULL), 0);
        assert_int_equal(tsr_node_keys_project(tsr_catalog_manufacturer(n->product->manufacturer),
                                               n->caps, fresh, n->gpu_count, want, NULL),
                         0);
        if (served->n != want->n)
                fail_msg("seed %llu step %u: node %s: %zu keys served, %zu projected",
                         (unsigned long long)seed, step, n->name, served->n, want->n);
        for (size_t k = 0; k < want->n; k++)
                if (strcmp(served->keys[k].name, want->keys[k].name) ||
                    served->keys[k].allocatable != want->keys[k].allocatable ||
                    served->keys[k].capacity != want->keys[k].capacity)
                        fail_msg("seed %llu step %u: node %s: key %s is stale",
                                 (unsigned long long)seed, step, n->name, want->keys[k].name);
        assert_non_null(labels);
        assert_int_equal(tsr_devices_fit_labels(n->caps, fresh, n->gpu_count, fit, NULL), 0);
        json_object_foreach(fit, key, value)
        {
                if (!json_equal(json_object_get(labels, key), value))
                        fail_msg("seed %llu step %u: node %s: fit label %s is stale",
                                 (unsigned long long)seed, step, n->name, key);
        }
        json_decref(fit);
        json_decref(labels);
        test_free(served);
        test_free(want);
}

/* Node i's served ledger against one rebuilt from its Pods now. */
static void check_ledger(const struct tsr_cluster *c, size_t i, uint64_t seed, unsigned step)
{
        const struct sim_node *n = &c->nodes[i];
        struct tsr_accel_ledger served[SIM_GPUS_MAX], fresh[SIM_GPUS_MAX];
        json_t **pods = test_calloc(c->n_pods + 1, sizeof(*pods));
        struct tsr_snapshot_node sn = {.name = n->name,
                                       .present = true,
                                       .product = n->product,
                                       .caps = n->caps,
                                       .n = n->gpu_count,
                                       .pods = pods};
        int a, b;

        for (size_t k = 0; k < c->n_pods; k++)
                if (c->pods[k].node == (int)i)
                        pods[sn.n_pods++] = c->pods[k].obj;
        a = tsr_cluster_ledger(c, i, served, NULL);
        b = tsr_admit_snapshot_ledger(&sn, fresh, NULL);
        if (n->product) {
                size_t n_held = 0;
                const bool *held = tsr_cluster_held(c, i, &n_held);
                const struct tsr_manufacturer *m =
                    tsr_catalog_manufacturer(n->product->manufacturer);

                assert_non_null(held);
                if (n_held != sn.n_pods)
                        fail_msg("seed %llu step %u: node %s: %zu held states for %zu Pods",
                                 (unsigned long long)seed, step, n->name, n_held, sn.n_pods);
                for (size_t x = 0; x < n_held; x++)
                        if (held[x] != tsr_admit_snapshot_held(pods[x], m))
                                fail_msg("seed %llu step %u: node %s: Pod %zu's held state is "
                                         "stale",
                                         (unsigned long long)seed, step, n->name, x);
        }
        test_free(pods);
        if (a != b)
                fail_msg("seed %llu step %u: node %s: ledger served %d, rebuilt %d",
                         (unsigned long long)seed, step, n->name, a, b);
        for (unsigned g = 0; !a && g < n->gpu_count; g++)
                if (!same_ledger(&served[g], &fresh[g]))
                        fail_msg("seed %llu step %u: node %s GPU %u: the served ledger is stale",
                                 (unsigned long long)seed, step, n->name, g);
        if (!a && n->product)
                check_projections(c, i, fresh, seed, step);
}

/* The scheduler's view of what each node's unfinished Pods request against the same afresh. */
/* The requests of the unfinished Pods bound to node i, from a walk over every Pod. */
static void walk_used(const struct tsr_cluster *c, size_t i, struct pod_resources *out)
{
        struct pod_resources *r = test_malloc(sizeof(*r));

        out->n = 0;
        for (size_t k = 0; k < c->n_pods; k++) {
                const struct sim_pod *p = &c->pods[k];
                struct tsr_pod_spec *spec;

                if (p->node != (int)i || tsr_cluster_pod_finished(p))
                        continue;
                assert_int_equal(tsr_pod_spec_new(p->obj, &spec, NULL), 0);
                pod_spec_resources(&spec->req, r);
                sim_resources_charge(out, r, 1);
                free(spec);
        }
        test_free(r);
}

/* Each node's list of bound Pods is the Pods bound there, in the cluster's order. */
static void check_bound_lists(const struct tsr_cluster *c, uint64_t seed, unsigned step)
{
        for (size_t i = 0; i < c->n_nodes; i++) {
                const struct sim_node *n = &c->nodes[i];
                size_t x = 0;

                for (size_t k = 0; k < c->n_pods; k++) {
                        if (c->pods[k].node != (int)i)
                                continue;
                        if (x >= n->n_bound || n->bound[x] != k)
                                fail_msg("seed %llu step %u: node %s: bound Pod %zu is not entry "
                                         "%zu of its list",
                                         (unsigned long long)seed, step, n->name, k, x);
                        x++;
                }
                if (x != n->n_bound)
                        fail_msg("seed %llu step %u: node %s lists %zu bound Pods, %zu are",
                                 (unsigned long long)seed, step, n->name, n->n_bound, x);
        }
}

static void check_used(const struct tsr_cluster *c, uint64_t seed, unsigned step)
{
        struct sim_node_state *served = sim_node_states(c);
        struct pod_resources *fresh = test_malloc(sizeof(*fresh));

        assert_non_null(served);
        for (size_t i = 0; i < c->n_nodes; i++) {
                struct tsr_node_keys keys;

                /* allocatable: the node's own figures, then its keys projected now */
                assert_int_equal(tsr_cluster_node_keys(c, i, &keys, NULL), 0);
                if (served[i].alloc->n != 3 + keys.n ||
                    pod_resources_get(served[i].alloc, "cpu") != c->nodes[i].cpu_milli)
                        fail_msg("seed %llu step %u: node %s: allocatable is stale",
                                 (unsigned long long)seed, step, c->nodes[i].name);
                for (size_t k = 0; k < keys.n; k++)
                        if (pod_resources_get(served[i].alloc, keys.keys[k].name) !=
                            keys.keys[k].allocatable)
                                fail_msg("seed %llu step %u: node %s: %s allocatable is stale",
                                         (unsigned long long)seed, step, c->nodes[i].name,
                                         keys.keys[k].name);
                walk_used(c, i, fresh);
                if (fresh->n != sim_node_state_used(&served[i])->n)
                        fail_msg("seed %llu step %u: node %s: %zu resources used, %zu served",
                                 (unsigned long long)seed, step, c->nodes[i].name, fresh->n,
                                 sim_node_state_used(&served[i])->n);
                for (size_t r = 0; r < fresh->n; r++)
                        if (pod_resources_get(sim_node_state_used(&served[i]), fresh->r[r].name) !=
                            fresh->r[r].value)
                                fail_msg("seed %llu step %u: node %s: %s used is stale",
                                         (unsigned long long)seed, step, c->nodes[i].name,
                                         fresh->r[r].name);
        }
        test_free(fresh);
        sim_node_states_free(served, c->n_nodes);
}

/*
 * TAS's usage as kept (sim_kueue_tas_states, with its memo of Workloads whose Pods are all
 * bound) equals the one counted now: the bound Pods' requests plus, for every Workload holding
 * quota, each assignment's Pods not bound to their node.
 */
static void check_tas(struct tsr_cluster *c, uint64_t seed, unsigned step)
{
        struct sim_node_state *kept = sim_kueue_tas_states(c);
        struct pod_resources *fresh = test_calloc(c->n_nodes + 1, sizeof(*fresh));
        struct pod_resources *req = test_malloc(sizeof(*req));

        assert_non_null(kept);
        for (size_t i = 0; i < c->n_nodes; i++)
                walk_used(c, i, &fresh[i]);
        for (size_t k = 0; k < c->n_workloads; k++) {
                const struct sim_workload *w = &c->workloads[k];

                if (!w->reserved || w->finished)
                        continue;
                for (size_t s = 0; s < w->n_podsets; s++) {
                        const struct sim_podset *ps = &w->podsets[s];
                        struct tsr_pod_spec *spec;

                        assert_int_equal(tsr_pod_spec_new(ps->tmpl, &spec, NULL), 0);
                        pod_spec_resources(&spec->req, req);
                        free(spec);
                        for (size_t a = 0; a < ps->n_assign; a++) {
                                unsigned bound = 0;

                                for (size_t x = 0; x < c->n_pods; x++) {
                                        const struct sim_pod *p = &c->pods[x];

                                        bound += p->node == (int)ps->assign[a].node &&
                                                 !strcmp(p->workload, w->name) &&
                                                 !strcmp(p->ns, w->ns) &&
                                                 !strcmp(p->podset, ps->name);
                                }
                                if (bound < ps->assign[a].count)
                                        sim_resources_charge(&fresh[ps->assign[a].node], req,
                                                             ps->assign[a].count - bound);
                        }
                }
        }
        for (size_t i = 0; i < c->n_nodes; i++) {
                if (fresh[i].n != sim_node_state_used(&kept[i])->n)
                        fail_msg("seed %llu step %u: node %s: TAS counts %zu resources, %zu kept",
                                 (unsigned long long)seed, step, c->nodes[i].name, fresh[i].n,
                                 sim_node_state_used(&kept[i])->n);
                for (size_t r = 0; r < fresh[i].n; r++)
                        if (pod_resources_get(sim_node_state_used(&kept[i]), fresh[i].r[r].name) !=
                            fresh[i].r[r].value)
                                fail_msg("seed %llu step %u: node %s: TAS's %s usage is stale",
                                         (unsigned long long)seed, step, c->nodes[i].name,
                                         fresh[i].r[r].name);
        }
        test_free(req);
        test_free(fresh);
        sim_node_states_free(kept, c->n_nodes);
}

/* What a reference listing owns for one Workload. */
struct reference_owned {
        struct tsr_snapshot_podset *podsets;
        struct tsr_snapshot_domain *domains[SIM_PODSETS_MAX];
};

/* Workload w as gate 3 reads it into *sw (the simulator's own adapter is what this checks). */
static void reference_workload(const struct tsr_cluster *c, const struct sim_workload *w,
                               const struct tsr_chain_flavor *flavors, size_t n_flavors,
                               struct tsr_snapshot_workload *sw, struct reference_owned *own)
{
        own->podsets = test_calloc(w->n_podsets + 1, sizeof(*own->podsets));
        *sw = (struct tsr_snapshot_workload){
            .ns = w->ns,
            .name = w->name,
            .cluster_queue = w->cluster_queue,
            .active = true,
            .reserved = w->reserved,
            .admitted = w->admitted,
            .evicted = w->evicted,
            .finished = w->finished,
            .has_check = w->has_check,
            .check = w->check,
            .check_message = w->check_msg,
            .n_podsets = w->n_podsets,
            .podsets = own->podsets,
        };
        for (size_t p = 0; p < w->n_podsets; p++) {
                const struct sim_podset *ps = &w->podsets[p];
                struct tsr_snapshot_domain *d = test_calloc(ps->n_assign + 1, sizeof(*d));

                own->domains[p] = d;
                for (size_t a = 0; a < ps->n_assign; a++)
                        d[a] = (struct tsr_snapshot_domain){c->nodes[ps->assign[a].node].name,
                                                            ps->assign[a].count};
                own->podsets[p] = (struct tsr_snapshot_podset){
                    .name = ps->name,
                    .count = ps->count,
                    .tmpl = ps->tmpl,
                    .flavor = ps->flavor >= 0 && (size_t)ps->flavor < n_flavors
                                  ? flavors[ps->flavor].name
                                  : NULL,
                    .n_domains = ps->n_assign,
                    .domains = d,
                };
        }
}

static void reference_release(struct reference_owned *own, size_t n_podsets)
{
        for (size_t p = 0; p < n_podsets; p++)
                test_free(own->domains[p]);
        test_free(own->podsets);
}

/*
 * Judges every Workload the check judges afresh and compares with the verdict it holds. Returns
 * how many it compared.
 */
static unsigned check_verdicts(const struct tsr_cluster *c, uint64_t seed, unsigned step)
{
        unsigned compared = 0;
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
        size_t np;

        tsr_cluster_pools(c, pools, &np);
        for (size_t k = 0; k < c->n_workloads; k++) {
                const struct sim_workload *w = &c->workloads[k];
                const struct tsr_chain_pool *pool = NULL;
                struct tsr_chain_flavor flavors[TSR_CHAIN_FLAVORS_MAX];
                size_t nf, n_nodes = 0, n_pods = 0;
                struct reference_owned *own;
                struct tsr_snapshot_workload *listed, *target;
                struct tsr_snapshot_node *nodes;
                json_t **pods;
                int *node_flavor;
                struct tsr_admit_verdict verdict;
                struct tsr_diag diag = {0};

                for (size_t i = 0; i < np; i++)
                        if (pools[i].product && !strcmp(pools[i].name, w->cluster_queue))
                                pool = &pools[i];
                if (!pool)
                        continue;
                own = test_calloc(c->n_workloads + 1, sizeof(*own));
                listed = test_calloc(c->n_workloads + 1, sizeof(*listed));
                node_flavor = test_calloc(c->n_nodes + 1, sizeof(*node_flavor));
                tsr_cluster_flavors(c, pool, flavors, &nf, node_flavor);
                for (size_t o = 0; o < c->n_workloads; o++)
                        reference_workload(c, &c->workloads[o], flavors, nf, &listed[o], &own[o]);
                target = &listed[k];
                if (!tsr_admit_snapshot_judges(target)) {
                        for (size_t o = 0; o < c->n_workloads; o++)
                                reference_release(&own[o], c->workloads[o].n_podsets);
                        test_free(own);
                        test_free(listed);
                        test_free(node_flavor);
                        continue;
                }
                nodes = test_calloc(c->n_nodes + 1, sizeof(*nodes));
                pods = test_calloc(c->n_pods + 1, sizeof(*pods));
                for (size_t i = 0; i < c->n_nodes; i++) {
                        size_t first = n_pods;

                        if (node_flavor[i] < 0)
                                continue;
                        for (size_t x = 0; x < c->n_pods; x++)
                                if (c->pods[x].node == (int)i)
                                        pods[n_pods++] = c->pods[x].obj;
                        nodes[n_nodes++] = (struct tsr_snapshot_node){
                            .name = c->nodes[i].name,
                            .present = true,
                            .flavor = flavors[node_flavor[i]].name,
                            .product = c->nodes[i].product,
                            .caps = c->nodes[i].caps,
                            .n = c->nodes[i].gpu_count,
                            .pods = &pods[first],
                            .n_pods = n_pods - first,
                        };
                }
                if (tsr_admit_snapshot_judge(pool->product, nodes, n_nodes, listed, c->n_workloads,
                                             target, &verdict, &diag))
                        fail_msg("seed %llu step %u: Workload %s: %s", (unsigned long long)seed,
                                 step, w->name, diag.msg);
                if (verdict.state != w->check || strcmp(verdict.message, w->check_msg))
                        fail_msg("seed %llu step %u: Workload %s holds %d \"%s\", a verdict of "
                                 "its own gives %d \"%s\"",
                                 (unsigned long long)seed, step, w->name, (int)w->check,
                                 w->check_msg, (int)verdict.state, verdict.message);
                compared++;
                for (size_t o = 0; o < c->n_workloads; o++)
                        reference_release(&own[o], c->workloads[o].n_podsets);
                test_free(own);
                test_free(listed);
                test_free(node_flavor);
                test_free(nodes);
                test_free(pods);
        }
        return compared;
}

/*
 * Each InstanceType the webhooks' memo serves as current equals the one built now: no change
 * of a node missed, and no handler wrote into what its lookup returned.
 */
static void check_instancetypes(const struct tsr_cluster *c, uint64_t seed, unsigned step)
{
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
        size_t np;

        tsr_cluster_pools(c, pools, &np);
        for (size_t i = 0; i < np; i++) {
                const struct sim_instancetype_memo *m = &c->instancetypes[i];
                json_t *now;

                if (!m->obj || m->gen != c->nodes_gen)
                        continue;
                now = sim_instancetype_json(c, &pools[i]);
                if (!json_equal(now, m->obj))
                        fail_msg("seed %llu step %u: InstanceType %s served is stale",
                                 (unsigned long long)seed, step, pools[i].name);
                json_decref(now);
        }
}

/* Every Workload below the actors' watermark is at rest. */
static void check_at_rest(const struct tsr_cluster *c, uint64_t seed, unsigned step)
{
        for (size_t k = 0; k < c->workloads_at_rest && k < c->n_workloads; k++)
                if (!sim_workload_at_rest(&c->workloads[k]))
                        fail_msg("seed %llu step %u: Workload %s is below the watermark (%zu) but "
                                 "not at rest",
                                 (unsigned long long)seed, step, c->workloads[k].name,
                                 c->workloads_at_rest);
        if (c->workloads_at_rest > c->n_workloads)
                fail_msg("seed %llu step %u: watermark %zu past %zu Workloads",
                         (unsigned long long)seed, step, c->workloads_at_rest, c->n_workloads);
}

/* Every Workload has a member, and one whose members all ended is finished. */
static void check_membership(const struct tsr_cluster *c, uint64_t seed, unsigned step)
{
        for (size_t k = 0; k < c->n_workloads; k++) {
                const struct sim_workload *w = &c->workloads[k];
                unsigned members = 0, ended = 0;

                for (size_t x = 0; x < c->n_pods; x++) {
                        const struct sim_pod *p = &c->pods[x];

                        if (strcmp(p->workload, w->name) || strcmp(p->ns, w->ns))
                                continue;
                        members++;
                        ended += tsr_cluster_pod_finished(p);
                }
                if (!members)
                        fail_msg("seed %llu step %u: Workload %s outlives its last Pod",
                                 (unsigned long long)seed, step, w->name);
                if (ended == members && !w->finished)
                        fail_msg("seed %llu step %u: Workload %s is not finished, its %u Pods are",
                                 (unsigned long long)seed, step, w->name, members);
        }
}

static void check_step(const struct tsr_cluster *c, uint64_t seed, unsigned step)
{
        struct tsr_diag diag = {0};
        for (size_t i = 0; i < c->n_nodes; i++)
                check_ledger(c, i, seed, step);
        check_bound_lists(c, seed, step);
        check_used(c, seed, step);
        check_membership(c, seed, step);
        check_at_rest(c, seed, step);
        check_instancetypes(c, seed, step);
        if (tsr_cluster_check(c, &diag))
                fail_msg("seed %llu step %u: %s", (unsigned long long)seed, step, diag.msg);
        for (size_t k = 0; k < c->n_pods; k++) {
                const struct sim_pod *p = &c->pods[k];
                int w = tsr_cluster_workload(c, p->ns, p->workload);

                /* the Pod's kept index is the Workload its name finds (none: -1) */
                if (p->workload[0] && p->workload_at != w)
                        fail_msg("seed %llu step %u: Pod %s keeps Workload index %d, its name "
                                 "finds %d",
                                 (unsigned long long)seed, step, p->name, p->workload_at, w);
                if (!strcmp(p->reason, "UnexpectedAdmissionError") &&
                    !strstr(p->message, SIM_RECLAIM_GAP))
                        fail_msg("seed %llu step %u: admitted Pod %s refused by its allocator: %s",
                                 (unsigned long long)seed, step, p->name, p->message);
                if (w >= 0 && c->workloads[w].admitted && !c->workloads[w].finished &&
                    p->node < 0 && !p->gated && p->phase == SIM_PENDING)
                        fail_msg("seed %llu step %u: admitted Pod %s is not bound: %s",
                                 (unsigned long long)seed, step, p->name, p->message);
        }
}

/*
 * At rest no Workload waits for the check, so the pass's verdicts are compared by asking again:
 * one admitted Workload (chosen by step) is made to wait for the check, the simulator's pass
 * judges it among every other Workload, inflight, settled or not, and a snapshot of its own
 * must agree; then the Workload is put back as it was. Returns how many were compared.
 */
static unsigned rejudge_one(struct tsr_cluster *c, uint64_t seed, unsigned step)
{
        size_t n = 0, pick;
        struct sim_workload *w = NULL;
        struct sim_workload saved;
        unsigned compared;

        for (size_t k = 0; k < c->n_workloads; k++) {
                const struct sim_workload *o = &c->workloads[k];

                n += o->reserved && o->admitted && !o->finished && !o->evicted && o->has_check;
        }
        if (!n)
                return 0;
        pick = step % n;
        for (size_t k = 0; k < c->n_workloads && !w; k++) {
                struct sim_workload *o = &c->workloads[k];

                if (o->reserved && o->admitted && !o->finished && !o->evicted && o->has_check &&
                    pick-- == 0)
                        w = o;
        }
        if (!w)
                return 0;
        saved = *w;
        sim_workload_changed(c, (size_t)(w - c->workloads));
        w->admitted = false;
        w->check = TSR_CHECK_PENDING;
        w->check_msg[0] = '\0';
        sim_node_devices_check(c);
        compared = check_verdicts(c, seed, step);
        w->admitted = saved.admitted;
        w->check = saved.check;
        w->check_changed = saved.check_changed;
        memcpy(w->check_msg, saved.check_msg, sizeof(w->check_msg));
        return compared;
}

static void run(uint64_t seed, unsigned steps, unsigned *admitted, unsigned *rejudged)
{
        struct tsr_cluster c;
        bool *seen = test_calloc(steps, sizeof(*seen));

        rng = seed;
        build_cluster(&c);
        for (unsigned step = 0; step < steps; step++) {
                unsigned op = rnd(10);

                if (op < 5 || c.n_pods == 0) {
                        apply_random(&c, step);
                } else if (op < 8) {
                        size_t k = rnd((unsigned)c.n_pods);
                        char ns[SIM_NAME_MAX], name[SIM_NAME_MAX];

                        snprintf(ns, sizeof(ns), "%s", c.pods[k].ns);
                        snprintf(name, sizeof(name), "%s", c.pods[k].name);
                        assert_int_equal(tsr_cluster_delete_pod(&c, ns, name), 0);
                } else {
                        tsr_cluster_advance(&c, rnd(90));
                }
                check_step(&c, seed, step);
                /* the watermark as high as it goes, so a removal below it must move it */
                (void)sim_workloads_from(&c);
                check_tas(&c, seed, step);
                *rejudged += rejudge_one(&c, seed, step);
                mark_bound(&c, seen, steps);
        }
        for (unsigned s = 0; s < steps; s++)
                *admitted += seen[s];
        test_free(seen);
        tsr_cluster_release(&c);
}

static void test_sim_invariants__randomized_runs(void **state)
{
        unsigned admitted = 0, rejudged = 0;

        (void)state;
        for (uint64_t seed = 1; seed <= 6; seed++)
                run(seed, 250, &admitted, &rejudged);
        /* The runs must exercise admission, not only queueing: hundreds of requests got a node. */
        print_message("# %u of %u applied requests were bound\n", admitted, 6u * 250u);
        assert_true(admitted > 300);
        /* ... and the pass's verdicts were compared on most steps */
        print_message("# %u verdicts compared with a snapshot of their own\n", rejudged);
        assert_true(rejudged > 6u * 250u / 2);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_sim_invariants__randomized_runs),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
