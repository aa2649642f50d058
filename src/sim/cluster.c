/*
 * cluster.c - the virtual cluster and the five gates a Pod passes in it.
 *
 * A Pod's path: gate 1 (tsr_request_evaluate: rules and folds, edits written into the Pod) at
 * apply; then, each time the cluster changes, every pending Pod in creation order tries gate 2
 * (its pool's credits quota: accelerators x M, against the Pods already admitted), node choice
 * (the first node by name whose keys fit, as TAS assigns a hostname), gate 3 (the accelerator
 * check on that node's ledger), gate 4 (the node's allocatable keys minus the requests of the
 * Pods on it) and gate 5 (the allocator picks the accelerator and placement, carves the MIG
 * instance on the fake GPUs, writes the marker and the allocation annotation).
 */
#include "sim/cluster.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"
#include "core/alloc.h"
#include "core/instancetype.h"
#include "core/keys.h"
#include "core/request.h"
#include "sim/pod_spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POD_WEBHOOK_MUTATE   "mutate.gpustack-worker.core.v1.pod"
#define POD_WEBHOOK_VALIDATE "validate.gpustack-worker.core.v1.pod"
#define QUEUE_LABEL          "kueue.x-k8s.io/queue-name"

void tsr_cluster_init(struct tsr_cluster *c)
{
        memset(c, 0, sizeof(*c));
        c->next_pass = SIM_RECLAIM_PERIOD;
}

void tsr_cluster_release(struct tsr_cluster *c)
{
        for (size_t i = 0; i < c->n_nodes; i++)
                tsr_fake_gpus_free(c->nodes[i].gpus);
        for (size_t i = 0; i < c->n_pods; i++)
                json_decref(c->pods[i].obj);
        free(c->nodes);
        free(c->pods);
        tsr_cluster_init(c);
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
        }
}

int tsr_cluster_add_node(struct tsr_cluster *c, const char *name, int64_t cpu_milli,
                         int64_t memory_bytes, const char *os, const char *arch,
                         const struct tsr_product *product, unsigned gpu_count, const bool *mig_on,
                         struct tsr_diag *diag)
{
        struct sim_node *nodes, *n;
        int rc;

        if (tsr_cluster_node(c, name) >= 0)
                return tsr_diag_set(diag, TSR_EEXIST, "node \"%s\" is declared twice", name);
        if (strlen(name) >= SIM_NAME_MAX || strlen(os) >= 32 || strlen(arch) >= 32)
                return tsr_diag_set(diag, TSR_EINVAL, "node \"%s\": name too long", name);
        if (product && (gpu_count == 0 || gpu_count > SIM_GPUS_MAX))
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "node \"%s\": accelerator count must be "
                                    "within [1, %d]",
                                    name, SIM_GPUS_MAX);
        nodes = realloc(c->nodes, (c->n_nodes + 1) * sizeof(*nodes));
        if (!nodes)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        c->nodes = nodes;
        n = &nodes[c->n_nodes];
        memset(n, 0, sizeof(*n));
        snprintf(n->name, sizeof(n->name), "%s", name);
        snprintf(n->os, sizeof(n->os), "%s", os);
        snprintf(n->arch, sizeof(n->arch), "%s", arch);
        n->cpu_milli = cpu_milli;
        n->memory_bytes = memory_bytes;
        n->product = product;
        n->gpu_count = product ? gpu_count : 0;
        if (product) {
                rc = tsr_fake_gpus_new(name, product, gpu_count, mig_on, &n->gpus);
                if (rc)
                        return tsr_diag_set(diag, rc, "node \"%s\": cannot create its GPUs", name);
        }
        c->n_nodes++;
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

int tsr_cluster_pod_allocation(const struct sim_pod *p, struct tsr_container_allocation *out,
                               size_t max, size_t *n, struct tsr_diag *diag)
{
        json_t *ann = json_object_get(json_object_get(p->obj, "metadata"), "annotations");
        const char *v = json_string_value(json_object_get(ann, TSR_ALLOC_ANNOTATION));

        *n = 0;
        if (!v)
                return 0;
        return tsr_alloc_annotation_decode(v, out, max, n, diag);
}

static bool pod_live(const struct sim_pod *p)
{
        return p->node >= 0;
}

int tsr_cluster_ledger(const struct tsr_cluster *c, size_t i, struct tsr_accel_ledger *ledger,
                       struct tsr_diag *diag)
{
        const struct sim_node *n = &c->nodes[i];
        struct tsr_alloc_record recs[SIM_MARKERS_MAX];
        size_t nrec = 0;

        for (size_t k = 0; k < c->n_pods; k++) {
                const struct sim_pod *p = &c->pods[k];
                struct tsr_container_allocation alloc[TSR_ALLOC_CONTAINERS_MAX];
                size_t na;
                int rc;

                if (p->node != (int)i)
                        continue;
                rc = tsr_cluster_pod_allocation(p, alloc, TSR_ALLOC_CONTAINERS_MAX, &na, diag);
                if (rc)
                        return rc;
                for (size_t a = 0; a < na; a++) {
                        for (size_t x = 0; x < alloc[a].n && nrec < SIM_MARKERS_MAX; x++) {
                                const struct tsr_accel_allocation *aa = &alloc[a].accels[x];
                                struct tsr_alloc_record *r = &recs[nrec++];

                                r->accel = aa->index;
                                r->mode = aa->mode;
                                r->units = aa->allocated;
                                r->shares = 1;
                                r->profile = -1;
                                r->start = aa->start;
                                r->finished = p->phase == SIM_SUCCEEDED || p->phase == SIM_FAILED;
                                if (aa->mode == TSR_MODE_PARTITIONED && n->product)
                                        for (size_t q = 0; q < n->product->n_profiles; q++)
                                                if (!strcmp(n->product->profiles[q].name,
                                                            aa->profile))
                                                        r->profile = (int)q;
                        }
                }
        }
        return tsr_ledger_build(n->caps, n->gpu_count, recs, nrec, ledger, diag);
}

int tsr_cluster_node_keys(const struct tsr_cluster *c, size_t i, struct tsr_node_keys *out,
                          struct tsr_diag *diag)
{
        const struct sim_node *n = &c->nodes[i];
        struct tsr_accel_ledger ledger[SIM_GPUS_MAX];
        int rc;

        out->n = 0;
        if (!n->product)
                return 0;
        rc = tsr_cluster_ledger(c, i, ledger, diag);
        if (rc)
                return rc;
        return tsr_node_keys_project(tsr_catalog_manufacturer(n->product->manufacturer), n->caps,
                                     ledger, n->gpu_count, out, diag);
}

static void pool_of(const struct sim_node *n, const struct tsr_product *product, struct sim_pool *p)
{
        memset(p, 0, sizeof(*p));
        tsr_instancetype_name(product, n->os, n->arch, p->name, sizeof(p->name));
        tsr_instancetype_entrance(p->name, p->entrance);
        p->product = product;
        snprintf(p->os, sizeof(p->os), "%s", n->os);
        snprintf(p->arch, sizeof(p->arch), "%s", n->arch);
}

static void pools_add(struct sim_pool *pools, size_t *n, const struct sim_pool *p)
{
        size_t at = 0;

        for (size_t i = 0; i < *n; i++)
                if (!strcmp(pools[i].name, p->name))
                        return;
        if (*n >= SIM_POOLS_MAX)
                return;
        while (at < *n && strcmp(pools[at].name, p->name) < 0)
                at++;
        memmove(&pools[at + 1], &pools[at], (*n - at) * sizeof(*pools));
        pools[at] = *p;
        (*n)++;
}

void tsr_cluster_pools(const struct tsr_cluster *c, struct sim_pool *pools, size_t *n)
{
        *n = 0;
        for (size_t i = 0; i < c->n_nodes; i++) {
                struct sim_pool p;

                pool_of(&c->nodes[i], NULL, &p);
                pools_add(pools, n, &p);
                if (c->nodes[i].product) {
                        pool_of(&c->nodes[i], c->nodes[i].product, &p);
                        pools_add(pools, n, &p);
                }
        }
}

/* Whether node n serves pool p: the generic pool spans every node of its os/arch. */
static bool node_in_pool(const struct sim_node *n, const struct sim_pool *p)
{
        if (strcmp(n->os, p->os) || strcmp(n->arch, p->arch))
                return false;
        return !p->product || n->product == p->product;
}

int tsr_cluster_pool_views(const struct tsr_cluster *c, const struct sim_pool *p,
                           struct tsr_pool_views *out, struct tsr_diag *diag)
{
        struct tsr_pool_node *nodes;
        struct tsr_accel_ledger *ledgers;
        size_t n = 0;
        int rc = 0;

        nodes = calloc(c->n_nodes ? c->n_nodes : 1, sizeof(*nodes));
        ledgers = calloc(c->n_nodes ? c->n_nodes : 1, SIM_GPUS_MAX * sizeof(*ledgers));
        if (!nodes || !ledgers) {
                rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                goto out;
        }
        for (size_t i = 0; i < c->n_nodes; i++) {
                struct tsr_accel_ledger *l = &ledgers[n * SIM_GPUS_MAX];

                if (!p->product || !node_in_pool(&c->nodes[i], p))
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

/* Requests of Pods bound to node i, of key name (milli for cpu). */
static int64_t node_used(const struct tsr_cluster *c, size_t i, const char *name, bool milli)
{
        int64_t used = 0;

        for (size_t k = 0; k < c->n_pods; k++) {
                const struct sim_pod *p = &c->pods[k];
                struct tsr_pod_req req;
                struct pod_spec_text text;

                if (p->node != (int)i || p->phase == SIM_SUCCEEDED || p->phase == SIM_FAILED)
                        continue;
                if (pod_spec_read(p->obj, &req, &text, NULL) == 0)
                        used += pod_spec_request(&req, name, milli);
        }
        return used;
}

void tsr_cluster_pool_cpu(const struct tsr_cluster *c, const struct sim_pool *p,
                          struct tsr_view *out)
{
        memset(out, 0, sizeof(*out));
        if (p->product)
                return;
        for (size_t i = 0; i < c->n_nodes; i++) {
                int64_t free_cores;

                if (!node_in_pool(&c->nodes[i], p))
                        continue;
                free_cores = (c->nodes[i].cpu_milli - node_used(c, i, "cpu", true)) / 1000;
                out->capacity += c->nodes[i].cpu_milli / 1000;
                out->remaining += free_cores;
                if (free_cores > out->once_max)
                        out->once_max = free_cores;
        }
}

/* ---- gate 1 ------------------------------------------------------------------------------- */

static const struct sim_pool *pool_by_entrance(const struct sim_pool *pools, size_t n,
                                               const char *queue)
{
        for (size_t i = 0; i < n; i++)
                if (!strcmp(pools[i].entrance, queue))
                        return &pools[i];
        return NULL;
}

static int deny(struct tsr_buf *out, const char *webhook, const char *msg)
{
        return tsr_buf_addf(out,
                            "Error from server (Forbidden): admission webhook \"%s\" denied "
                            "the request: %s\n",
                            webhook, msg);
}

static const char *queue_of(json_t *pod)
{
        return json_string_value(json_object_get(
            json_object_get(json_object_get(pod, "metadata"), "labels"), QUEUE_LABEL));
}

/* Runs gate 1 on pod. Returns 0 and sets *denied when the webhook refused it. */
static int gate1(struct tsr_cluster *c, json_t *pod, struct tsr_buf *out, bool *denied,
                 struct tsr_diag *diag)
{
        struct sim_pool pools[SIM_POOLS_MAX];
        const struct sim_pool *pool;
        struct tsr_pool_views views;
        struct tsr_fold_pool fold;
        struct tsr_pod_req *req;
        struct pod_spec_text *text;
        struct tsr_request_verdict *v;
        const char *queue = queue_of(pod);
        char msg[TSR_FIELD_ERRORS_MAX * TSR_FIELD_ERROR_LEN];
        size_t np;
        int rc;

        *denied = false;
        if (!queue)
                return 0; /* the webhooks select on the queue label */
        tsr_cluster_pools(c, pools, &np);
        pool = pool_by_entrance(pools, np, queue);
        if (!pool || !pool->product) {
                if (pool)
                        return 0; /* a CPU pool: no accelerator rules to apply */
                snprintf(msg, sizeof(msg),
                         "no InstanceType carries schedule.gpustack.ai/"
                         "queue-entrance=%s",
                         queue);
                *denied = true;
                return deny(out, POD_WEBHOOK_MUTATE, msg);
        }
        rc = tsr_cluster_pool_views(c, pool, &views, diag);
        if (rc)
                return rc;
        req = malloc(sizeof(*req));
        text = malloc(sizeof(*text));
        v = malloc(sizeof(*v));
        if (!req || !text || !v) {
                rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                goto out;
        }
        rc = pod_spec_read(pod, req, text, diag);
        if (rc)
                goto out;
        fold.manufacturer = tsr_catalog_manufacturer(pool->product->manufacturer);
        fold.memory_mib = pool->product->vram_mib;
        fold.n_profiles = views.n_profiles;
        fold.profiles = views.physical_profiles;
        rc = tsr_request_evaluate(req, &fold, v, diag);
        if (rc)
                goto out;
        if (v->n_errors) {
                *denied = true;
                rc = deny(out, POD_WEBHOOK_VALIDATE, tsr_request_message(v, msg, sizeof(msg)));
                goto out;
        }
        for (size_t i = 0; i < v->n_edits && !rc; i++)
                rc = pod_spec_apply_edit(pod, req, &v->edits[i]);
out:
        free(req);
        free(text);
        free(v);
        return rc;
}

/* ---- gates 2-5 ---------------------------------------------------------------------------- */

static int64_t pod_credits(const struct tsr_pod_req *req, const struct tsr_manufacturer *m)
{
        char k[TSR_KEY_MAX];
        int64_t credits = 0;

        tsr_key_format(k, m, TSR_KEY_EXCLUSIVE, NULL);
        credits += pod_spec_request(req, k, false) * TSR_UNITS_PER_ACCEL;
        tsr_key_format(k, m, TSR_KEY_SHARED, NULL);
        credits += pod_spec_request(req, k, false) * TSR_UNITS_PER_SHARE;
        tsr_key_format(k, m, TSR_KEY_SLICED_UNITS, NULL);
        int64_t units = pod_spec_request(req, k, false);
        tsr_key_format(k, m, TSR_KEY_SLICED, NULL);
        credits += units * pod_spec_request(req, k, false);
        if (tsr_key_format(k, m, TSR_KEY_PARTITIONED_UNITS, NULL) == 0)
                credits += pod_spec_request(req, k, false);
        return credits;
}

/* Gate 2: the pool's ClusterQueue quota, accelerators x M, against admitted Pods' credits. */
static bool gate2(const struct tsr_cluster *c, const struct sim_pool *pool, int64_t need)
{
        const struct tsr_manufacturer *m = tsr_catalog_manufacturer(pool->product->manufacturer);
        int64_t nominal = 0, used = 0;

        for (size_t i = 0; i < c->n_nodes; i++)
                if (node_in_pool(&c->nodes[i], pool))
                        nominal += (int64_t)c->nodes[i].gpu_count * TSR_UNITS_PER_ACCEL;
        for (size_t k = 0; k < c->n_pods; k++) {
                const struct sim_pod *p = &c->pods[k];
                struct tsr_pod_req req;
                struct pod_spec_text text;
                const char *q = queue_of(p->obj);

                if (!pod_live(p) || !q || strcmp(q, pool->entrance) || p->phase == SIM_SUCCEEDED ||
                    p->phase == SIM_FAILED)
                        continue;
                if (pod_spec_read(p->obj, &req, &text, NULL) == 0)
                        used += pod_credits(&req, m);
        }
        return used + need <= nominal;
}

/* Gate 4: every accelerator key, cpu and memory the Pod asks for fits node i's allocatable. */
static bool gate4(const struct tsr_cluster *c, size_t i, const struct tsr_pod_req *req)
{
        const struct sim_node *n = &c->nodes[i];
        struct tsr_node_keys keys;

        if (tsr_cluster_node_keys(c, i, &keys, NULL))
                return false;
        if (pod_spec_request(req, "cpu", true) > n->cpu_milli - node_used(c, i, "cpu", true))
                return false;
        if (pod_spec_request(req, "memory", false) >
            n->memory_bytes - node_used(c, i, "memory", false))
                return false;
        for (size_t k = 0; k < req->n; k++) {
                const struct tsr_container_req *cr = &req->c[k];
                const struct tsr_res_item *lists[2] = {cr->requests, cr->limits};
                size_t counts[2] = {cr->n_requests, cr->n_limits};

                for (int l = 0; l < 2; l++) {
                        for (size_t x = 0; x < counts[l]; x++) {
                                struct tsr_key_class kc;
                                const struct tsr_node_key *nk;
                                const char *name = lists[l][x].key;

                                tsr_key_classify(name, &kc);
                                if (kc.kind == TSR_KEY_NONE)
                                        continue;
                                nk = tsr_node_keys_find(&keys, name);
                                if (!nk || pod_spec_request(req, name, false) >
                                               nk->allocatable - node_used(c, i, name, false))
                                        return false;
                        }
                }
        }
        return true;
}

/* What the Pod's accelerator container asks of gate 3 and gate 5. */
struct accel_demand {
        enum tsr_family family;
        int container; /* index into the request */
        int64_t units;
        char profile[64];
};

static void demand_of(const struct tsr_pod_req *req, const struct tsr_manufacturer *m,
                      struct accel_demand *d)
{
        memset(d, 0, sizeof(*d));
        d->container = -1;
        for (size_t k = 0; k < req->n; k++) {
                const struct tsr_container_req *cr = &req->c[k];
                const struct tsr_res_item *lists[2] = {cr->requests, cr->limits};
                size_t counts[2] = {cr->n_requests, cr->n_limits};

                for (int l = 0; l < 2; l++) {
                        for (size_t x = 0; x < counts[l]; x++) {
                                struct tsr_key_class kc;
                                int64_t v = 0;

                                tsr_key_classify(lists[l][x].key, &kc);
                                if (kc.manufacturer != m)
                                        continue;
                                if (kc.kind == TSR_KEY_SLICED_UNITS ||
                                    kc.kind == TSR_KEY_PARTITIONED_UNITS) {
                                        tsr_quantity_value(&lists[l][x].q, &v);
                                        d->units = v;
                                }
                                if (kc.kind == TSR_KEY_PARTITIONED_PROFILE)
                                        snprintf(d->profile, sizeof(d->profile), "%.*s",
                                                 (int)kc.profile_len, kc.profile);
                                if (kc.kind == TSR_KEY_SLICED || kc.kind == TSR_KEY_PARTITIONED) {
                                        d->family = tsr_key_family(kc.kind);
                                        d->container = (int)k;
                                }
                        }
                }
        }
}

/* Live hardware beyond the ledger, per GPU: instances not yet reclaimed. */
static void hardware_occupied(const struct sim_node *n, uint32_t *out)
{
        for (unsigned g = 0; g < n->gpu_count; g++) {
                struct tsr_gpu_instance inst[TSR_GPU_INSTANCES_MAX];
                size_t ni = 0;

                out[g] = 0;
                if (tsr_fake_gpu_ops.gi_list(n->gpus, g, inst, TSR_GPU_INSTANCES_MAX, &ni))
                        continue;
                for (size_t k = 0; k < ni; k++)
                        out[g] |= tsr_geometry_span(inst[k].start, inst[k].size);
        }
}

static int pick(const struct sim_node *n, const struct tsr_accel_ledger *ledger,
                const struct accel_demand *d, const uint32_t *hw, struct tsr_alloc_pick *out)
{
        if (d->family == TSR_FAMILY_SLICED)
                return tsr_alloc_pick_slice(n->caps, ledger, n->gpu_count, d->units, out);
        if (d->family == TSR_FAMILY_PARTITIONED)
                return tsr_alloc_pick_partition(n->caps, ledger, hw, n->gpu_count, d->profile, out);
        return TSR_EINVAL;
}

static void set_annotation(json_t *pod, const char *key, const char *value)
{
        json_t *meta = json_object_get(pod, "metadata");
        json_t *ann = json_object_get(meta, "annotations");

        if (!ann) {
                ann = json_object();
                json_object_set_new(meta, "annotations", ann);
        }
        json_object_set_new(ann, key, json_string(value));
}

/* Gate 5 on node i: pick, carve, mark, annotate. Returns 0 or an allocation error. */
static int gate5(struct tsr_cluster *c, size_t i, struct sim_pod *p, const struct tsr_pod_req *req,
                 const struct accel_demand *d)
{
        struct sim_node *n = &c->nodes[i];
        struct tsr_accel_ledger ledger[SIM_GPUS_MAX];
        uint32_t hw[SIM_GPUS_MAX];
        struct tsr_alloc_pick pk;
        struct tsr_container_allocation ca;
        struct tsr_accel_allocation *aa;
        struct tsr_gpu_info info;
        char group[128], *json = NULL;
        int rc;

        rc = tsr_cluster_ledger(c, i, ledger, NULL);
        if (rc)
                return rc;
        hardware_occupied(n, hw);
        rc = pick(n, ledger, d, hw, &pk);
        if (rc)
                return rc;
        memset(&ca, 0, sizeof(ca));
        snprintf(ca.container, sizeof(ca.container), "%s", req->c[d->container].name);
        tsr_instancetype_group_id(n->product, group, sizeof(group));
        snprintf(ca.group_id, sizeof(ca.group_id), "%s", group);
        snprintf(ca.manufacturer, sizeof(ca.manufacturer), "%s",
                 tsr_catalog_manufacturer(n->product->manufacturer)->key);
        tsr_fake_gpu_ops.device_info(n->gpus, pk.accel, &info);
        aa = &ca.accels[ca.n++];
        snprintf(aa->id, sizeof(aa->id), "%s", info.uuid);
        aa->index = pk.accel;
        aa->allocated = d->units;
        if (d->family == TSR_FAMILY_SLICED) {
                aa->mode = TSR_MODE_SLICED;
                aa->slices = 1;
                snprintf(ca.device_ids[ca.n_device_ids++], sizeof(ca.device_ids[0]), "%s:%s:%04u",
                         group, info.uuid, ledger[pk.accel].allocated_slices);
        } else {
                const struct tsr_mig_profile *mp = &n->product->profiles[pk.profile];
                struct sim_marker *mk;
                unsigned gi, ci;

                if (n->n_markers >= SIM_MARKERS_MAX)
                        return TSR_ETOOBIG;
                rc =
                    tsr_fake_gpu_ops.gi_create(n->gpus, pk.accel, mp->gi_profile_id, pk.start, &gi);
                if (rc)
                        return rc;
                mk = &n->markers[n->n_markers];
                rc = tsr_fake_gpu_ops.ci_create(n->gpus, pk.accel, gi, &ci, mk->mig_uuid);
                if (rc) {
                        tsr_fake_gpu_ops.gi_destroy(n->gpus, pk.accel, gi);
                        return rc;
                }
                snprintf(mk->pod_uid, sizeof(mk->pod_uid), "%s", p->uid);
                snprintf(mk->container, sizeof(mk->container), "%s", ca.container);
                snprintf(mk->profile, sizeof(mk->profile), "%s", mp->name);
                mk->gpu = pk.accel;
                mk->gi_id = gi;
                mk->ci_id = ci;
                mk->misses = 0;
                n->n_markers++;
                aa->mode = TSR_MODE_PARTITIONED;
                snprintf(aa->profile, sizeof(aa->profile), "%s", mp->name);
                aa->start = pk.start;
                aa->length = mp->size;
                snprintf(aa->physical_id, sizeof(aa->physical_id), "%s", mk->mig_uuid);
                snprintf(ca.device_ids[ca.n_device_ids++], sizeof(ca.device_ids[0]), "%s:%s:%04u",
                         group, info.uuid, pk.start);
        }
        rc = tsr_alloc_annotation_encode(&ca, 1, &json);
        if (rc)
                return rc;
        set_annotation(p->obj, TSR_ALLOC_ANNOTATION, json);
        free(json);
        return 0;
}

static void bind(struct tsr_cluster *c, struct sim_pod *p, int node)
{
        const struct sim_node *n = &c->nodes[node];
        json_t *spec = json_object_get(p->obj, "spec");

        c->ip_seq++;
        snprintf(p->ip, sizeof(p->ip), "10.244.%d.%u", node % 256, 2 + c->ip_seq % 250);
        p->node = node;
        p->phase = SIM_RUNNING;
        p->reason[0] = '\0';
        json_object_set_new(spec, "nodeName", json_string(n->name));
}

/* Tries to take pending Pod p through gates 2-5. */
static void schedule(struct tsr_cluster *c, struct sim_pod *p)
{
        struct sim_pool pools[SIM_POOLS_MAX];
        const struct sim_pool *pool = NULL;
        struct tsr_pod_req req;
        struct pod_spec_text text;
        struct accel_demand d = {.container = -1};
        const char *queue = queue_of(p->obj);
        size_t np;
        const struct tsr_manufacturer *m = NULL;

        if (pod_spec_read(p->obj, &req, &text, NULL))
                return;
        if (queue) {
                tsr_cluster_pools(c, pools, &np);
                pool = pool_by_entrance(pools, np, queue);
                if (!pool) {
                        snprintf(p->reason, sizeof(p->reason), "LocalQueue %s does not exist",
                                 queue);
                        return;
                }
        }
        if (pool && pool->product) {
                m = tsr_catalog_manufacturer(pool->product->manufacturer);
                demand_of(&req, m, &d);
                if (!gate2(c, pool, pod_credits(&req, m))) {
                        snprintf(p->reason, sizeof(p->reason),
                                 "couldn't assign flavors: "
                                 "insufficient unused quota for credits.gpustack.ai/%s",
                                 m->key);
                        return;
                }
        }
        snprintf(p->reason, sizeof(p->reason), "no node fits the request");
        for (size_t i = 0; i < c->n_nodes; i++) {
                struct tsr_accel_ledger ledger[SIM_GPUS_MAX];
                struct tsr_alloc_pick pk;
                struct sim_node *n = &c->nodes[i];

                if ((pool && !node_in_pool(n, pool)) || !gate4(c, i, &req))
                        continue;
                if (d.family == TSR_FAMILY_SLICED || d.family == TSR_FAMILY_PARTITIONED) {
                        /* Gate 3: the accelerator check on the node TAS assigned. */
                        if (tsr_cluster_ledger(c, i, ledger, NULL) ||
                            pick(n, ledger, &d, NULL, &pk)) {
                                snprintf(p->reason, sizeof(p->reason),
                                         "gpustack-node-devices: "
                                         "Retry: no accelerator on node %s fits the request",
                                         n->name);
                                return;
                        }
                        if (gate5(c, i, p, &req, &d)) {
                                snprintf(p->reason, sizeof(p->reason),
                                         "UnexpectedAdmissionError: allocation failed on %s",
                                         n->name);
                                return;
                        }
                } else if (d.family != TSR_FAMILY_NONE) {
                        snprintf(p->reason, sizeof(p->reason),
                                 "the %s family is not simulated "
                                 "yet",
                                 tsr_family_name(d.family));
                        return;
                }
                bind(c, p, (int)i);
                return;
        }
}

static void reconcile(struct tsr_cluster *c)
{
        for (size_t k = 0; k < c->n_pods; k++)
                if (c->pods[k].node < 0 && c->pods[k].phase == SIM_PENDING)
                        schedule(c, &c->pods[k]);
}

int tsr_cluster_apply_pod(struct tsr_cluster *c, json_t *pod, struct tsr_buf *out,
                          struct tsr_diag *diag)
{
        json_t *meta = json_object_get(pod, "metadata");
        const char *name = json_string_value(json_object_get(meta, "name"));
        const char *ns = json_string_value(json_object_get(meta, "namespace"));
        struct sim_pod *p;
        bool denied;
        int rc;

        if (!ns)
                ns = "default";
        if (!name || !*name || strlen(name) >= SIM_NAME_MAX || strlen(ns) >= SIM_NAME_MAX) {
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
        rc = gate1(c, pod, out, &denied, diag);
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
        p = &c->pods[c->n_pods++];
        memset(p, 0, sizeof(*p));
        snprintf(p->name, sizeof(p->name), "%s", name);
        snprintf(p->ns, sizeof(p->ns), "%s", ns);
        c->uid_seq++;
        snprintf(p->uid, sizeof(p->uid), "00000000-0000-4000-8000-%012x", c->uid_seq);
        p->obj = pod;
        p->node = -1;
        p->phase = SIM_PENDING;
        p->created = c->now;
        json_object_set_new(meta, "namespace", json_string(ns));
        json_object_set_new(meta, "uid", json_string(p->uid));
        rc = tsr_buf_addf(out, "pod/%s created\n", name);
        reconcile(c);
        return rc;
}

/* ---- reclaim ------------------------------------------------------------------------------ */

static bool uid_live(const struct tsr_cluster *c, const char *uid)
{
        for (size_t k = 0; k < c->n_pods; k++)
                if (!strcmp(c->pods[k].uid, uid))
                        return true;
        return false;
}

static bool gpu_drained(const struct tsr_cluster *c, size_t node, unsigned gpu)
{
        for (size_t k = 0; k < c->n_pods; k++) {
                struct tsr_container_allocation alloc[TSR_ALLOC_CONTAINERS_MAX];
                size_t na;

                if (c->pods[k].node != (int)node ||
                    tsr_cluster_pod_allocation(&c->pods[k], alloc, TSR_ALLOC_CONTAINERS_MAX, &na,
                                               NULL))
                        continue;
                for (size_t a = 0; a < na; a++)
                        for (size_t x = 0; x < alloc[a].n; x++)
                                if (alloc[a].accels[x].index == gpu)
                                        return false;
        }
        return true;
}

static void destroy(struct sim_node *n, unsigned gpu, unsigned gi)
{
        struct tsr_gpu_instance inst[TSR_GPU_INSTANCES_MAX];
        size_t ni = 0;

        if (tsr_fake_gpu_ops.gi_list(n->gpus, gpu, inst, TSR_GPU_INSTANCES_MAX, &ni))
                return;
        for (size_t k = 0; k < ni; k++) {
                if (inst[k].gi_id != gi)
                        continue;
                if (inst[k].n_ci)
                        tsr_fake_gpu_ops.ci_destroy(n->gpus, gpu, gi, inst[k].ci_id);
                tsr_fake_gpu_ops.gi_destroy(n->gpus, gpu, gi);
        }
}

static struct sim_orphan *orphan_slot(struct sim_node *n, unsigned gpu, unsigned gi)
{
        for (size_t k = 0; k < n->n_orphans; k++)
                if (n->orphans[k].gpu == gpu && n->orphans[k].gi_id == gi)
                        return &n->orphans[k];
        if (n->n_orphans >= SIM_MARKERS_MAX)
                return NULL;
        n->orphans[n->n_orphans] = (struct sim_orphan){gpu, gi, 0};
        return &n->orphans[n->n_orphans++];
}

/* One reclaim pass over node i: debounce dead owners and drained orphans, then destroy. */
static void reclaim_pass(struct tsr_cluster *c, size_t i)
{
        struct sim_node *n = &c->nodes[i];
        size_t k = 0;

        while (k < n->n_markers) {
                struct sim_marker *mk = &n->markers[k];

                if (uid_live(c, mk->pod_uid)) {
                        mk->misses = 0;
                        k++;
                        continue;
                }
                if (++mk->misses < SIM_RECLAIM_MISSES) {
                        k++;
                        continue;
                }
                destroy(n, mk->gpu, mk->gi_id);
                memmove(mk, mk + 1, (n->n_markers - k - 1) * sizeof(*mk));
                n->n_markers--;
        }
        for (unsigned g = 0; g < n->gpu_count; g++) {
                struct tsr_gpu_instance inst[TSR_GPU_INSTANCES_MAX];
                size_t ni = 0;

                if (tsr_fake_gpu_ops.gi_list(n->gpus, g, inst, TSR_GPU_INSTANCES_MAX, &ni))
                        continue;
                for (size_t x = 0; x < ni; x++) {
                        bool marked = false;
                        struct sim_orphan *o;

                        for (size_t m = 0; m < n->n_markers; m++)
                                marked |=
                                    n->markers[m].gpu == g && n->markers[m].gi_id == inst[x].gi_id;
                        if (marked || !gpu_drained(c, i, g))
                                continue;
                        o = orphan_slot(n, g, inst[x].gi_id);
                        if (o && ++o->misses >= SIM_RECLAIM_MISSES)
                                destroy(n, g, inst[x].gi_id);
                }
        }
        /* Forget orphan counters of instances that are gone. */
        k = 0;
        while (k < n->n_orphans) {
                struct tsr_gpu_instance inst[TSR_GPU_INSTANCES_MAX];
                size_t ni = 0;
                bool present = false;

                tsr_fake_gpu_ops.gi_list(n->gpus, n->orphans[k].gpu, inst, TSR_GPU_INSTANCES_MAX,
                                         &ni);
                for (size_t x = 0; x < ni; x++)
                        present |= inst[x].gi_id == n->orphans[k].gi_id;
                if (present) {
                        k++;
                        continue;
                }
                memmove(&n->orphans[k], &n->orphans[k + 1],
                        (n->n_orphans - k - 1) * sizeof(n->orphans[0]));
                n->n_orphans--;
        }
}

int tsr_cluster_delete_pod(struct tsr_cluster *c, const char *ns, const char *name)
{
        int k = tsr_cluster_pod(c, ns, name);
        int node;

        if (k < 0)
                return TSR_ENOTFOUND;
        node = c->pods[k].node;
        json_decref(c->pods[k].obj);
        memmove(&c->pods[k], &c->pods[k + 1], (c->n_pods - (size_t)k - 1) * sizeof(c->pods[0]));
        c->n_pods--;
        if (node >= 0 && c->nodes[node].product)
                reclaim_pass(c, (size_t)node);
        reconcile(c);
        return 0;
}

void tsr_cluster_advance(struct tsr_cluster *c, int64_t seconds)
{
        int64_t end = c->now + seconds;

        while (c->next_pass <= end) {
                c->now = c->next_pass;
                for (size_t i = 0; i < c->n_nodes; i++)
                        if (c->nodes[i].product)
                                reclaim_pass(c, i);
                c->next_pass += SIM_RECLAIM_PERIOD;
                reconcile(c);
        }
        c->now = end;
        reconcile(c);
}
