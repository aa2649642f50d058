/*
 * cluster.c - the virtual cluster's objects and projections, its timers, and the reconcile loop
 * that runs the actors of actors.h until nothing moves.
 */
#include "sim/cluster.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"
#include "base/quantity.h"
#include "codec/admit_snapshot.h"
#include "codec/devices_object.h"
#include "codec/kueue_chain.h"
#include "core/pod_resources.h"
#include "core/tas.h"
#include "mig/marker_store.h"
#include "mig/reclaim.h"
#include "sim/actors.h"
#include "sim/resources.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reconcile rounds before the loop gives up on reaching a fixed point (a bug guard). */
#define RECONCILE_ROUNDS_MAX 64

void tsr_cluster_init(struct tsr_cluster *c)
{
        memset(c, 0, sizeof(*c));
        c->next_pass = SIM_RECLAIM_PERIOD;
        tsr_settings_defaults(&c->settings);
}

/*
 * What was computed from a node's Pods at a generation, served again until sim_node_changed moves
 * the node's generation (memo_of then empties it): the ledger tsr_cluster_ledger built (with its
 * result), the node keys projected from it, the labels (fit labels included), the requests of the
 * unfinished Pods bound there (sim_node_state_refresh's used), the allocatable
 * (sim_node_allocatable), and whether each of those Pods is held (tsr_cluster_held). labels is a
 * reference of the memo's own; callers get another and only read it.
 */
struct sim_ledger_memo {
        unsigned long gen;
        bool ledger_valid, keys_valid, used_valid, held_valid, alloc_valid;
        int rc;
        struct tsr_diag diag;
        struct tsr_accel_ledger ledger[SIM_GPUS_MAX];
        struct tsr_node_keys keys;
        json_t *labels;
        struct pod_resources used;
        struct pod_resources alloc;
        bool *held; /* n_held: the node's Pods in cluster order */
        size_t n_held;
};

/* The node's memo, emptied first when the node's generation moved since it was filled. */
static struct sim_ledger_memo *memo_of(const struct sim_node *n)
{
        struct sim_ledger_memo *m = n->memo;

        if (m->gen != n->gen) {
                m->gen = n->gen;
                m->ledger_valid = m->keys_valid = m->used_valid = m->held_valid = false;
                m->alloc_valid = false;
                json_decref(m->labels);
                m->labels = NULL;
        }
        return m;
}

static void memo_free(struct sim_ledger_memo *m)
{
        if (m) {
                json_decref(m->labels);
                free(m->held);
        }
        free(m);
}

static void workload_release(struct sim_workload *w)
{
        for (size_t p = 0; p < w->n_podsets; p++) {
                json_decref(w->podsets[p].tmpl);
                free(w->podsets[p].assign);
        }
}

void tsr_cluster_release(struct tsr_cluster *c)
{
        for (size_t i = 0; i < c->n_nodes; i++) {
                memo_free(c->nodes[i].memo);
                free(c->nodes[i].bound);
                tsr_mig_reclaimer_free(c->nodes[i].reclaimer);
                tsr_mig_store_free(c->nodes[i].markers);
                tsr_fake_gpus_free(c->nodes[i].gpus);
        }
        for (size_t i = 0; i < c->n_pods; i++)
                json_decref(c->pods[i].obj);
        for (size_t i = 0; i < c->n_workloads; i++)
                workload_release(&c->workloads[i]);
        for (size_t i = 0; i < TSR_CHAIN_POOLS_MAX; i++)
                json_decref(c->instancetypes[i].obj);
        free(c->nodes);
        free(c->chain);
        free(c->pods);
        free(c->workloads);
        tsr_cluster_init(c);
}

int tsr_cluster_setting(struct tsr_cluster *c, const char *name, json_t *value,
                        struct tsr_diag *diag)
{
        int s = tsr_setting_find(name);

        if (s < 0)
                return tsr_diag_set(diag, TSR_EINVAL, "unknown setting \"%s\"", name);
        if (!json_is_boolean(value))
                return tsr_diag_set(diag, TSR_EINVAL, "setting \"%s\" takes true or false", name);
        if (s != TSR_SETTING_WORKLOAD_FIT_AFFINITY &&
            json_is_true(value) != tsr_setting_default((enum tsr_setting)s))
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "setting \"%s\" is only simulated at its default, %s", name,
                                    tsr_setting_default((enum tsr_setting)s) ? "true" : "false");
        c->settings.value[s] = json_is_true(value);
        return 0;
}

int tsr_cluster_node(const struct tsr_cluster *c, const char *name)
{
        for (size_t i = 0; i < c->n_nodes; i++)
                if (!strcmp(c->nodes[i].name, name))
                        return (int)i;
        return -1;
}

void tsr_cluster_redetect(struct tsr_cluster *c, size_t i)
{
        struct sim_node *n = &c->nodes[i];

        for (unsigned g = 0; g < n->gpu_count; g++) {
                struct tsr_gpu_info info;

                tsr_fake_gpu_ops.device_info(n->gpus, g, &info);
                tsr_capability_detect(n->product, g, info.uuid, info.mig_current, &n->caps[g]);
                tsr_capability_set_pci_bus_id(&n->caps[g], info.bus_id);
        }
        sim_node_changed(c, (int)i);
}

/*
 * Grows the chain's view of the nodes to n_nodes + 1 entries, the last one next (which may point
 * outside c->nodes). Returns 0 or TSR_ENOMEM.
 */
static int chain_grow(struct tsr_cluster *c, const struct tsr_chain_node *next)
{
        struct tsr_chain_node *chain = realloc(c->chain, (c->n_nodes + 1) * sizeof(*chain));

        if (!chain)
                return TSR_ENOMEM;
        c->chain = chain;
        chain[c->n_nodes] = *next;
        return 0;
}

/* Points the chain's view of nodes [0, n) at c->nodes again (after they moved). */
static void chain_refresh(struct tsr_cluster *c, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                const struct sim_node *node = &c->nodes[i];

                c->chain[i] =
                    (struct tsr_chain_node){node->name,    node->os,        node->arch,
                                            node->product, node->gpu_count, node->cpu_milli};
        }
}

/* Whether the nodes and next still derive a chain within its bounds (tsr_chain_pools). */
static int chain_admits(struct tsr_cluster *c, const struct tsr_chain_node *next,
                        struct tsr_diag *diag)
{
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
        struct tsr_chain_flavor flavors[TSR_CHAIN_FLAVORS_MAX];
        size_t np, nf;
        int rc = chain_grow(c, next);

        if (rc)
                return tsr_diag_set(diag, rc, "out of memory");
        rc = tsr_chain_pools(c->chain, c->n_nodes + 1, pools, TSR_CHAIN_POOLS_MAX, &np, diag);
        for (size_t p = 0; p < np && !rc; p++)
                rc = tsr_chain_flavors(c->chain, c->n_nodes + 1, &pools[p], flavors,
                                       TSR_CHAIN_FLAVORS_MAX, &nf, NULL, diag);
        return rc;
}

int tsr_cluster_add_node(struct tsr_cluster *c, const char *name, int64_t cpu_milli,
                         int64_t memory_bytes, const char *os, const char *arch,
                         const struct tsr_product *product, unsigned gpu_count, const bool *mig_on,
                         struct tsr_diag *diag)
{
        struct tsr_chain_node next = {name, os, arch, product, product ? gpu_count : 0, cpu_milli};
        struct sim_node *nodes, *n;
        int rc;

        if (tsr_cluster_node(c, name) >= 0)
                return tsr_diag_set(diag, TSR_EEXIST, "node \"%s\" is declared twice", name);
        if (strlen(name) >= SIM_NAME_MAX || strlen(os) >= 32 || strlen(arch) >= 32)
                return tsr_diag_set(diag, TSR_EINVAL, "node \"%s\": name too long", name);
        if (product && (gpu_count == 0 || gpu_count > SIM_GPUS_MAX))
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "node \"%s\": accelerator count must be within [1, %d]", name,
                                    SIM_GPUS_MAX);
        rc = chain_admits(c, &next, diag);
        if (rc)
                return rc;
        nodes = realloc(c->nodes, (c->n_nodes + 1) * sizeof(*nodes));
        if (!nodes)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        c->nodes = nodes;
        chain_refresh(c, c->n_nodes);
        n = &nodes[c->n_nodes];
        memset(n, 0, sizeof(*n));
        snprintf(n->name, sizeof(n->name), "%s", name);
        snprintf(n->os, sizeof(n->os), "%s", os);
        snprintf(n->arch, sizeof(n->arch), "%s", arch);
        n->cpu_milli = cpu_milli;
        n->memory_bytes = memory_bytes;
        n->product = product;
        n->gpu_count = product ? gpu_count : 0;
        n->memo = calloc(1, sizeof(*n->memo));
        if (!n->memo)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        if (product) {
                struct tsr_mig_gpus gpus = {&tsr_fake_gpu_ops, NULL};

                rc = tsr_fake_gpus_new(name, product, gpu_count, mig_on, &n->gpus);
                gpus.be = n->gpus;
                if (!rc)
                        rc = tsr_mig_store_memory_new(&n->markers);
                if (!rc)
                        rc = tsr_mig_reclaimer_new(&gpus, n->markers, NULL, NULL, &n->reclaimer);
                if (rc) {
                        tsr_mig_store_free(n->markers);
                        tsr_fake_gpus_free(n->gpus);
                        memo_free(n->memo);
                        return tsr_diag_set(diag, rc, "node \"%s\": cannot create its GPUs", name);
                }
        }
        c->n_nodes++;
        chain_refresh(c, c->n_nodes); /* chain_admits made the room */
        c->nodes_gen++;
        c->quota_valid = false; /* a new flavor may come before the ones reserved in */
        c->n_pools = 0; /* the nodes only change here: the pools are derived once per node */
        tsr_chain_pools(c->chain, c->n_nodes, c->pools, TSR_CHAIN_POOLS_MAX, &c->n_pools, NULL);
        if (product)
                tsr_cluster_redetect(c, c->n_nodes - 1);
        return 0;
}

int tsr_cluster_pod(const struct tsr_cluster *c, const char *ns, const char *name)
{
        for (size_t i = 0; i < c->n_pods; i++)
                if (!strcmp(c->pods[i].name, name) && !strcmp(c->pods[i].ns, ns))
                        return (int)i;
        return -1;
}

int tsr_cluster_workload(const struct tsr_cluster *c, const char *ns, const char *name)
{
        for (size_t i = 0; i < c->n_workloads; i++)
                if (!strcmp(c->workloads[i].name, name) && !strcmp(c->workloads[i].ns, ns))
                        return (int)i;
        return -1;
}

bool tsr_cluster_pod_finished(const struct sim_pod *p)
{
        return p->phase == SIM_SUCCEEDED || p->phase == SIM_FAILED;
}

int tsr_cluster_pod_allocation(const struct sim_pod *p, struct tsr_container_allocation *out,
                               size_t max, size_t *n, struct tsr_diag *diag)
{
        return tsr_alloc_annotation_of_pod(p->obj, out, max, n, diag);
}

/* ---- projections of one node -------------------------------------------------------------- */

void sim_node_changed(struct tsr_cluster *c, int i)
{
        if (i < 0)
                return;
        c->nodes[i].gen++;
        c->nodes_gen++;
}

/* Answers from the memo when it is of the node's generation: true with ledger and diag set. */
static bool memo_answer(const struct sim_node *n, struct tsr_accel_ledger *ledger, int *rc,
                        struct tsr_diag *diag)
{
        const struct sim_ledger_memo *m = memo_of(n);

        if (!m->ledger_valid)
                return false;
        memcpy(ledger, m->ledger, n->gpu_count * sizeof(*ledger));
        *rc = m->rc;
        if (m->rc && diag)
                *diag = m->diag;
        return true;
}

static void memo_keep(const struct sim_node *n, const struct tsr_accel_ledger *ledger, int rc,
                      const struct tsr_diag *diag)
{
        struct sim_ledger_memo *m = memo_of(n);

        m->ledger_valid = true;
        m->rc = rc;
        m->diag = *diag;
        memcpy(m->ledger, ledger, n->gpu_count * sizeof(*ledger));
}

const bool *tsr_cluster_held(const struct tsr_cluster *c, size_t i, size_t *n)
{
        const struct sim_node *node = &c->nodes[i];
        struct sim_ledger_memo *m = memo_of(node);
        const struct tsr_manufacturer *mf;
        size_t count = 0;
        bool *held;

        if (!node->product)
                return NULL;
        if (m->held_valid) {
                *n = m->n_held;
                return m->held;
        }
        mf = tsr_catalog_manufacturer(node->product->manufacturer);
        count = node->n_bound;
        held = realloc(m->held, (count + 1) * sizeof(*held));
        if (!held)
                return NULL;
        m->held = held;
        m->n_held = 0;
        for (size_t x = 0; x < count; x++)
                held[m->n_held++] = tsr_admit_snapshot_held(c->pods[node->bound[x]].obj, mf);
        m->held_valid = true;
        *n = m->n_held;
        return held;
}

int tsr_cluster_ledger(const struct tsr_cluster *c, size_t i, struct tsr_accel_ledger *ledger,
                       struct tsr_diag *diag)
{
        const struct sim_node *n = &c->nodes[i];
        json_t **pods;
        struct tsr_diag why;
        struct tsr_snapshot_node node = {.name = n->name,
                                         .present = true,
                                         .product = n->product,
                                         .caps = n->caps,
                                         .n = n->gpu_count,
                                         .pods = NULL};
        int rc;

        if (memo_answer(n, ledger, &rc, diag))
                return rc;
        pods = malloc((n->n_bound + 1) * sizeof(*pods));
        if (!pods)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        node.pods = pods;
        for (size_t x = 0; x < n->n_bound; x++)
                pods[node.n_pods++] = c->pods[n->bound[x]].obj;
        tsr_diag_clear(&why);
        rc = tsr_admit_snapshot_ledger(&node, ledger, &why);
        free(pods);
        if (rc != TSR_ENOMEM)
                memo_keep(n, ledger, rc, &why);
        if (rc && diag)
                *diag = why;
        return rc;
}

int tsr_cluster_node_keys(const struct tsr_cluster *c, size_t i, struct tsr_node_keys *out,
                          struct tsr_diag *diag)
{
        const struct sim_node *n = &c->nodes[i];
        struct sim_ledger_memo *m = memo_of(n);
        struct tsr_accel_ledger ledger[SIM_GPUS_MAX];
        int rc;

        out->n = 0;
        if (!n->product)
                return 0;
        if (m->keys_valid) {
                out->n = m->keys.n;
                memcpy(out->keys, m->keys.keys, m->keys.n * sizeof(m->keys.keys[0]));
                return 0;
        }
        rc = tsr_cluster_ledger(c, i, ledger, diag);
        if (!rc)
                rc = tsr_node_keys_project(tsr_catalog_manufacturer(n->product->manufacturer),
                                           n->caps, ledger, n->gpu_count, out, diag);
        if (!rc) { /* only what succeeded is kept */
                m->keys.n = out->n;
                memcpy(m->keys.keys, out->keys, out->n * sizeof(out->keys[0]));
                m->keys_valid = true;
        }
        return rc;
}

static int set_label(json_t *labels, const char *key, const char *value)
{
        return json_object_set_new(labels, key, json_string(value));
}

json_t *tsr_cluster_node_labels(const struct tsr_cluster *c, size_t i)
{
        const struct sim_node *n = &c->nodes[i];
        struct sim_ledger_memo *m = memo_of(n);
        struct tsr_chain_labels features;
        json_t *labels;
        int rc;

        if (m->labels)
                return json_incref(m->labels);
        labels = json_object();
        if (!labels)
                return NULL;
        /* the kubelet's */
        rc = set_label(labels, TSR_CHAIN_HOSTNAME_LABEL, n->name);
        rc |= set_label(labels, TSR_CHAIN_OS_LABEL, n->os);
        rc |= set_label(labels, TSR_CHAIN_ARCH_LABEL, n->arch);
        /* the controller's: the chain's feature labels, then the fit labels */
        if (tsr_chain_node_labels(&c->chain[i], &features, NULL) == 0)
                rc |= tsr_kueue_labels_set(labels, &features);
        if (n->product) {
                struct tsr_accel_ledger ledger[SIM_GPUS_MAX];

                if (tsr_cluster_ledger(c, i, ledger, NULL) == 0)
                        rc |= tsr_devices_fit_labels(n->caps, ledger, n->gpu_count, labels, NULL);
        }
        if (rc) {
                json_decref(labels);
                return NULL;
        }
        json_decref(m->labels);
        m->labels = json_incref(labels);
        return labels;
}

static json_t *quantity_json(int64_t v, enum tsr_qformat f)
{
        char s[TSR_QUANTITY_STR_MAX];
        struct tsr_quantity q = tsr_quantity_from_int(v, f);

        return json_string(tsr_quantity_format(&q, s));
}

/* cpu, memory and pods of node n, as capacity and allocatable both carry them. */
static json_t *base_resources(const struct sim_node *n)
{
        char cpu[TSR_QUANTITY_STR_MAX];
        struct tsr_quantity q = {n->cpu_milli, -3, TSR_QF_DECIMAL_SI};

        return json_pack("{s:s, s:o, s:s}", "cpu", tsr_quantity_format(&q, cpu), "memory",
                         quantity_json(n->memory_bytes, TSR_QF_BINARY_SI), "pods", "110");
}

json_t *tsr_cluster_node_allocatable(const struct tsr_cluster *c, size_t i)
{
        struct tsr_node_keys keys;
        json_t *out;

        if (tsr_cluster_node_keys(c, i, &keys, NULL))
                return NULL;
        out = base_resources(&c->nodes[i]);
        for (size_t k = 0; out && k < keys.n; k++)
                json_object_set_new(out, keys.keys[k].name,
                                    quantity_json(keys.keys[k].allocatable, TSR_QF_DECIMAL_SI));
        return out;
}

/* ---- pools and flavors (core/chain.h) ---------------------------------------------------- */

void tsr_cluster_pools(const struct tsr_cluster *c, struct tsr_chain_pool *pools, size_t *n)
{
        memcpy(pools, c->pools, c->n_pools * sizeof(*pools));
        *n = c->n_pools;
}

const struct tsr_chain_pool *tsr_cluster_pool_by_entrance(const struct tsr_chain_pool *pools,
                                                          size_t n, const char *queue)
{
        for (size_t i = 0; i < n; i++)
                if (!strcmp(pools[i].entrance, queue))
                        return &pools[i];
        return NULL;
}

void tsr_cluster_flavors(const struct tsr_cluster *c, const struct tsr_chain_pool *p,
                         struct tsr_chain_flavor *flavors, size_t *n, int *node_flavor)
{
        *n = 0;
        tsr_chain_flavors(c->chain, c->n_nodes, p, flavors, TSR_CHAIN_FLAVORS_MAX, n, node_flavor,
                          NULL);
}

int tsr_cluster_pool_views(const struct tsr_cluster *c, const struct tsr_chain_pool *p,
                           struct tsr_pool_views *out, struct tsr_diag *diag)
{
        struct tsr_pool_node *nodes;
        struct tsr_accel_ledger *ledgers;
        size_t n = 0;
        int rc = 0;

        nodes = calloc(c->n_nodes ? c->n_nodes : 1, sizeof(*nodes));
        /* not calloc: tsr_cluster_ledger fills each node's accelerators, nothing reads the rest */
        ledgers = malloc((c->n_nodes ? c->n_nodes : 1) * SIM_GPUS_MAX * sizeof(*ledgers));
        if (!nodes || !ledgers) {
                rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                goto out;
        }
        for (size_t i = 0; i < c->n_nodes; i++) {
                struct tsr_accel_ledger *l = &ledgers[n * SIM_GPUS_MAX];

                if (!p->product || !tsr_chain_node_in_pool(&c->chain[i], p))
                        continue;
                rc = tsr_cluster_ledger(c, i, l, diag);
                if (rc)
                        goto out;
                nodes[n].caps = c->nodes[i].caps;
                nodes[n].ledger = l;
                nodes[n].n = c->nodes[i].gpu_count;
                n++;
        }
        tsr_views_compute(nodes, n, out);
out:
        free(nodes);
        free(ledgers);
        return rc;
}

static const struct pod_resources *memo_used(const struct tsr_cluster *c, size_t i);

void tsr_cluster_pool_cpu(const struct tsr_cluster *c, const struct tsr_chain_pool *p,
                          struct tsr_view *out)
{
        memset(out, 0, sizeof(*out));
        if (p->product)
                return;
        for (size_t i = 0; i < c->n_nodes; i++) {
                int64_t free_cores;

                if (!tsr_chain_node_in_pool(&c->chain[i], p))
                        continue;
                int64_t requested = pod_resources_get(memo_used(c, i), "cpu");

                free_cores = (c->nodes[i].cpu_milli - (requested > 0 ? requested : 0)) / 1000;
                out->capacity += c->nodes[i].cpu_milli / 1000;
                out->remaining += free_cores;
                if (free_cores > out->once_max)
                        out->once_max = free_cores;
        }
}

/* ---- shared helpers of the actors --------------------------------------------------------- */

void sim_resources_charge(struct pod_resources *u, const struct pod_resources *req, unsigned count)
{
        for (size_t r = 0; r < req->n; r++)
                pod_resources_add(u, req->r[r].name,
                                  count && req->r[r].value > INT64_MAX / count
                                      ? INT64_MAX
                                      : req->r[r].value * (int64_t)count);
}

void sim_node_used(const struct tsr_cluster *c, size_t i, struct pod_resources *out)
{
        const struct sim_node *n = &c->nodes[i];

        out->n = 0;
        for (size_t x = 0; x < n->n_bound; x++) {
                const struct sim_pod *p = &c->pods[n->bound[x]];
                struct tsr_pod_spec *spec;
                struct pod_resources r;

                if (tsr_cluster_pod_finished(p) || tsr_pod_spec_new(p->obj, &spec, NULL))
                        continue;
                pod_spec_resources(&spec->req, &r);
                sim_resources_charge(out, &r, 1);
                free(spec);
        }
}

/* Node i's allocatable as the memo keeps it: cpu (milli), memory, pods and every node key. */
static const struct pod_resources *memo_alloc(const struct tsr_cluster *c, size_t i)
{
        struct sim_ledger_memo *m = memo_of(&c->nodes[i]);
        struct tsr_node_keys keys;

        if (m->alloc_valid)
                return &m->alloc;
        m->alloc.n = 0;
        pod_resources_add(&m->alloc, "cpu", c->nodes[i].cpu_milli);
        pod_resources_add(&m->alloc, "memory", c->nodes[i].memory_bytes);
        pod_resources_add(&m->alloc, "pods", 110);
        /* without its keys the list is served as it is, and computed again next time */
        if (tsr_cluster_node_keys(c, i, &keys, NULL) == 0) {
                for (size_t k = 0; k < keys.n; k++)
                        pod_resources_add(&m->alloc, keys.keys[k].name, keys.keys[k].allocatable);
                m->alloc_valid = true;
        }
        return &m->alloc;
}

/* The requests of node i's unfinished Pods as the memo keeps them. */
static const struct pod_resources *memo_used(const struct tsr_cluster *c, size_t i)
{
        struct sim_ledger_memo *m = memo_of(&c->nodes[i]);

        if (!m->used_valid) {
                sim_node_used(c, i, &m->used);
                m->used_valid = true;
        }
        return &m->used;
}

void sim_node_state_refresh(const struct tsr_cluster *c, struct sim_node_state *s, size_t i)
{
        json_decref(s->labels);
        s->labels = tsr_cluster_node_labels(c, i);
        s->alloc = memo_alloc(c, i);
        s->bound = memo_used(c, i);
        sim_node_state_uncharge(s);
}

void sim_node_state_uncharge(struct sim_node_state *s)
{
        free(s->charged);
        s->charged = NULL;
}

bool sim_node_state_charge(struct sim_node_state *s, const struct pod_resources *req,
                           unsigned count)
{
        if (!s->charged) {
                s->charged = malloc(sizeof(*s->charged));
                if (!s->charged)
                        return false;
                pod_resources_copy(s->charged, s->bound);
        }
        sim_resources_charge(s->charged, req, count);
        return true;
}

struct sim_node_state *sim_node_states(const struct tsr_cluster *c)
{
        struct sim_node_state *ns = calloc(c->n_nodes + 1, sizeof(*ns));

        for (size_t i = 0; ns && i < c->n_nodes; i++)
                sim_node_state_refresh(c, &ns[i], i);
        return ns;
}

unsigned sim_node_state_fits(const struct sim_node_state *s, const struct pod_resources *req,
                             const char **short_of)
{
        struct tsr_tas_resource r[POD_RESOURCES_MAX];
        int64_t fits;
        int short_k;

        for (size_t k = 0; k < req->n; k++)
                r[k] = (struct tsr_tas_resource){
                    pod_resources_get(s->alloc, req->r[k].name),
                    pod_resources_get(sim_node_state_used(s), req->r[k].name), req->r[k].value};
        fits = tsr_tas_fits(r, req->n, &short_k);
        *short_of = short_k < 0 ? NULL : req->r[short_k].name;
        return (unsigned)fits;
}

void sim_node_states_free(struct sim_node_state *ns, size_t n)
{
        for (size_t i = 0; ns && i < n; i++) {
                json_decref(ns[i].labels);
                free(ns[i].charged);
        }
        free(ns);
}

const char *sim_pod_label(const struct sim_pod *p, const char *key)
{
        return json_string_value(
            json_object_get(json_object_get(json_object_get(p->obj, "metadata"), "labels"), key));
}

void sim_pod_set_annotation(json_t *pod, const char *key, const char *value)
{
        json_t *meta = json_object_get(pod, "metadata");
        json_t *ann = json_object_get(meta, "annotations");

        if (!ann) {
                ann = json_object();
                json_object_set_new(meta, "annotations", ann);
        }
        json_object_set_new(ann, key, json_string(value));
}

/* ---- Pods --------------------------------------------------------------------------------- */

/* The API server's defaulting: a container's request of a resource it only limits is the limit. */
static void default_requests(json_t *pod)
{
        const char *lists[2] = {"initContainers", "containers"};

        for (int l = 0; l < 2; l++) {
                json_t *ct;
                size_t i;

                json_array_foreach(json_object_get(json_object_get(pod, "spec"), lists[l]), i, ct)
                {
                        json_t *res = json_object_get(ct, "resources");
                        json_t *limits = json_object_get(res, "limits");
                        json_t *requests = json_object_get(res, "requests"), *v;
                        const char *key;

                        if (!json_is_object(limits) || json_object_size(limits) == 0)
                                continue;
                        if (!json_is_object(requests)) {
                                requests = json_object();
                                json_object_set_new(res, "requests", requests);
                        }
                        json_object_foreach(limits, key, v)
                        {
                                if (!json_object_get(requests, key))
                                        json_object_set(requests, key, v);
                        }
                }
        }
}

int tsr_cluster_apply_pod(struct tsr_cluster *c, json_t *pod, struct tsr_buf *out,
                          struct tsr_diag *diag)
{
        json_t *meta = json_object_get(pod, "metadata");
        const char *name = json_string_value(json_object_get(meta, "name"));
        const char *given_ns = json_string_value(json_object_get(meta, "namespace"));
        char ns[SIM_NAME_MAX];
        struct sim_pod *p;
        bool denied;
        int rc;

        if (given_ns && strlen(given_ns) >= SIM_NAME_MAX) {
                json_decref(pod);
                return tsr_diag_set(diag, TSR_EPARSE, "Pod metadata.namespace: Too long");
        }
        snprintf(ns, sizeof(ns), "%s", given_ns ? given_ns : "default");
        if (!name || !*name || strlen(name) >= SIM_NAME_MAX) {
                json_decref(pod);
                return tsr_diag_set(diag, TSR_EPARSE, "Pod metadata.name: Required value");
        }
        if (!json_is_array(json_object_get(json_object_get(pod, "spec"), "containers"))) {
                rc = tsr_diag_set(diag, TSR_EPARSE, "Pod \"%s\": spec.containers: Required value",
                                  name);
                json_decref(pod);
                return rc;
        }
        if (tsr_cluster_pod(c, ns, name) >= 0) {
                rc = tsr_buf_addf(out,
                                  "Error from server (AlreadyExists): pods \"%s\" already "
                                  "exists\n",
                                  name);
                json_decref(pod);
                return rc;
        }
        json_object_set_new(meta, "namespace", json_string(ns));
        default_requests(pod);
        rc = sim_webhook_pod(c, &pod, out, &denied, diag);
        if (rc || denied) {
                json_decref(pod);
                return rc;
        }
        if (c->n_pods == c->cap_pods) {
                size_t cap = c->cap_pods ? c->cap_pods * 2 : 16;
                struct sim_pod *pods = realloc(c->pods, cap * sizeof(*pods));

                if (!pods) {
                        json_decref(pod);
                        return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                }
                c->pods = pods;
                c->cap_pods = cap;
        }
        meta = json_object_get(pod, "metadata");
        name = json_string_value(json_object_get(meta, "name"));
        p = &c->pods[c->n_pods++];
        memset(p, 0, sizeof(*p));
        snprintf(p->name, sizeof(p->name), "%s", name);
        snprintf(p->ns, sizeof(p->ns), "%s", ns);
        c->uid_seq++;
        snprintf(p->uid, sizeof(p->uid), "00000000-0000-4000-8000-%012x", c->uid_seq);
        p->obj = pod;
        p->node = -1;
        p->workload_at = -1;
        p->phase = SIM_PENDING;
        p->created = c->now;
        p->finish_at = -1;
        p->gated = sim_pod_label(p, SIM_QUEUE_LABEL) != NULL;
        json_object_set_new(meta, "uid", json_string(p->uid));
        rc = tsr_buf_addf(out, "pod/%s created\n", p->name);
        tsr_cluster_reconcile(c);
        return rc;
}

/* Drops deleted Pod k from node's list of bound Pods (node < 0: none) and shifts every list. */
static void unbind(struct tsr_cluster *c, size_t k, int node)
{
        for (size_t i = 0; i < c->n_nodes; i++) {
                struct sim_node *n = &c->nodes[i];
                size_t kept = 0;

                for (size_t x = 0; x < n->n_bound; x++) {
                        if (n->bound[x] == k && (int)i == node)
                                continue;
                        n->bound[kept++] = n->bound[x] > k ? n->bound[x] - 1 : n->bound[x];
                }
                n->n_bound = kept;
        }
}

int sim_pod_bind(struct tsr_cluster *c, size_t k, size_t i)
{
        struct sim_node *n = &c->nodes[i];
        size_t at = n->n_bound;

        if (n->n_bound == n->cap_bound) {
                size_t cap = n->cap_bound ? 2 * n->cap_bound : 16;
                size_t *grown = realloc(n->bound, cap * sizeof(*grown));

                if (!grown)
                        return TSR_ENOMEM;
                n->bound = grown;
                n->cap_bound = cap;
        }
        while (at > 0 && n->bound[at - 1] > k) /* ascending: an older Pod may bind later */
                at--;
        memmove(&n->bound[at + 1], &n->bound[at], (n->n_bound - at) * sizeof(*n->bound));
        n->bound[at] = k;
        n->n_bound++;
        c->pods[k].node = (int)i;
        json_object_set_new(json_object_get(c->pods[k].obj, "spec"), "nodeName",
                            json_string(n->name));
        sim_node_changed(c, (int)i);
        return 0;
}

int tsr_cluster_delete_pod(struct tsr_cluster *c, const char *ns, const char *name)
{
        int k = tsr_cluster_pod(c, ns, name);
        int node;

        if (k < 0)
                return TSR_ENOTFOUND;
        node = c->pods[k].node;
        c->membership_gen++;
        if (c->pods[k].workload[0] && c->pods[k].workload_at >= 0) {
                c->workloads[c->pods[k].workload_at].settled = false;
                c->workloads[c->pods[k].workload_at].bound_all = false;
                sim_workload_changed(c, (size_t)c->pods[k].workload_at);
        }
        sim_node_changed(c, node);
        json_decref(c->pods[k].obj);
        memmove(&c->pods[k], &c->pods[k + 1], (c->n_pods - (size_t)k - 1) * sizeof(c->pods[0]));
        c->n_pods--;
        unbind(c, (size_t)k, node);
        if (node >= 0 && c->nodes[node].product)
                sim_kubelet_reclaim_pass(c, (size_t)node);
        tsr_cluster_reconcile(c);
        return 0;
}

/* ---- Workload storage (kueue.c creates and removes them) ---------------------------------- */

struct sim_workload *sim_workload_add(struct tsr_cluster *c)
{
        struct sim_workload *w;

        if (c->n_workloads == c->cap_workloads) {
                size_t cap = c->cap_workloads ? c->cap_workloads * 2 : 16;
                struct sim_workload *ws = realloc(c->workloads, cap * sizeof(*ws));

                if (!ws)
                        return NULL;
                c->workloads = ws;
                c->cap_workloads = cap;
        }
        w = &c->workloads[c->n_workloads++];
        memset(w, 0, sizeof(*w));
        for (size_t p = 0; p < SIM_PODSETS_MAX; p++)
                w->podsets[p].flavor = -1;
        c->uid_seq++;
        snprintf(w->uid, sizeof(w->uid), "00000000-0000-4000-8000-%012x", c->uid_seq);
        w->created = c->now;
        return w;
}

bool sim_workload_at_rest(const struct sim_workload *w)
{
        return w->finished || (w->reserved && w->admitted && !w->evicted && w->bound_all &&
                               (w->settled || !w->has_check));
}

size_t sim_workloads_from(struct tsr_cluster *c)
{
        while (c->workloads_at_rest < c->n_workloads &&
               sim_workload_at_rest(&c->workloads[c->workloads_at_rest]))
                c->workloads_at_rest++;
        return c->workloads_at_rest;
}

void sim_workload_changed(struct tsr_cluster *c, size_t k)
{
        if (k < c->workloads_at_rest)
                c->workloads_at_rest = k;
}

void sim_workload_remove(struct tsr_cluster *c, size_t k)
{
        sim_workload_changed(c, k); /* the ones above move down into k */
        workload_release(&c->workloads[k]);
        memmove(&c->workloads[k], &c->workloads[k + 1],
                (c->n_workloads - k - 1) * sizeof(c->workloads[0]));
        c->n_workloads--;
        for (size_t i = 0; i < c->n_pods; i++) {
                struct sim_pod *p = &c->pods[i];

                if (p->workload_at == (int)k)
                        p->workload_at = -1;
                else if (p->workload_at > (int)k)
                        p->workload_at--;
        }
}

/* ---- time and the reconcile loop ---------------------------------------------------------- */

void tsr_cluster_reconcile(struct tsr_cluster *c)
{
        for (int round = 0; round < RECONCILE_ROUNDS_MAX; round++) {
                bool moved = false;

                moved |= sim_kueue_sync(c);
                moved |= sim_kueue_schedule(c);
                moved |= sim_node_devices_check(c);
                moved |= sim_kueue_admit(c);
                moved |= sim_scheduler_bind(c);
                if (!moved)
                        return;
        }
}

/* The next timer after now: a reclaim pass, a container exit, or a Workload's requeue. */
static int64_t next_timer(const struct tsr_cluster *c)
{
        int64_t t = c->next_pass;

        for (size_t k = 0; k < c->n_pods; k++)
                if (c->pods[k].phase == SIM_RUNNING && c->pods[k].finish_at > c->now &&
                    c->pods[k].finish_at < t)
                        t = c->pods[k].finish_at;
        for (size_t k = 0; k < c->n_workloads; k++)
                if (c->workloads[k].requeue_at > c->now && c->workloads[k].requeue_at < t)
                        t = c->workloads[k].requeue_at;
        return t;
}

void tsr_cluster_advance(struct tsr_cluster *c, int64_t seconds)
{
        int64_t end = c->now + seconds;

        for (;;) {
                int64_t t = next_timer(c);

                if (t > end)
                        break;
                c->now = t;
                sim_kubelet_finish_due(c);
                if (c->next_pass <= c->now) {
                        for (size_t i = 0; i < c->n_nodes; i++)
                                if (c->nodes[i].product)
                                        sim_kubelet_reclaim_pass(c, i);
                        c->next_pass += SIM_RECLAIM_PERIOD;
                }
                tsr_cluster_reconcile(c);
        }
        c->now = end;
        tsr_cluster_reconcile(c);
}

/* ---- invariants --------------------------------------------------------------------------- */

int tsr_cluster_check(const struct tsr_cluster *c, struct tsr_diag *diag)
{
        for (size_t i = 0; i < c->n_nodes; i++) {
                const struct sim_node *n = &c->nodes[i];
                struct tsr_accel_ledger ledger[SIM_GPUS_MAX];
                struct tsr_diag why = {0};
                int rc = tsr_cluster_ledger(c, i, ledger, &why);

                if (rc)
                        return tsr_diag_set(diag, TSR_ESTALE, "node %s: ledger: %s", n->name,
                                            why.msg);
                for (unsigned g = 0; g < n->gpu_count; g++) {
                        struct tsr_gpu_instance inst[TSR_GPU_INSTANCES_MAX];
                        size_t ni = 0;
                        uint32_t seen = 0;

                        rc = tsr_ledger_check(&n->caps[g], &ledger[g], &why);
                        if (rc)
                                return tsr_diag_set(diag, TSR_ESTALE, "node %s: %s", n->name,
                                                    why.msg);
                        tsr_fake_gpu_ops.gi_list(n->gpus, g, inst, TSR_GPU_INSTANCES_MAX, &ni);
                        for (size_t k = 0; k < ni; k++) {
                                uint32_t span = tsr_geometry_span(inst[k].start, inst[k].size);

                                if (seen & span)
                                        return tsr_diag_set(diag, TSR_ESTALE,
                                                            "node %s GPU %u: hardware instances "
                                                            "overlap at %u",
                                                            n->name, g, inst[k].start);
                                seen |= span;
                        }
                }
        }
        return sim_kueue_check(c, diag);
}
