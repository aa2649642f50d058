/*
 * render.c - kubectl presentations of the virtual cluster's objects.
 */
#include "sim/render.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"
#include "base/quantity.h"
#include "codec/devices_object.h"
#include "codec/instancetype_object.h"
#include "core/catalog.h"
#include "core/instancetype.h"
#include "core/printable.h"
#include "sim/actors.h"
#include "sim/table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *qty(int64_t v, enum tsr_qformat f)
{
        char s[TSR_QUANTITY_STR_MAX];
        struct tsr_quantity q = tsr_quantity_from_int(v, f);

        return json_string(tsr_quantity_format(&q, s));
}

int sim_render_dump(json_t *v, struct tsr_buf *out)
{
        char *s = json_dumps(v, JSON_INDENT(4) | JSON_SORT_KEYS);
        int rc;

        json_decref(v);
        if (!s)
                return TSR_ENOMEM;
        rc = tsr_buf_addf(out, "%s\n", s);
        free(s);
        return rc;
}

int sim_render_result(json_t *items, bool by_name, bool json, const struct sim_table *t,
                      struct tsr_buf *out)
{
        if (!json)
                return sim_table_print(t, out);
        return sim_render_dump(by_name ? json_incref(json_array_get(items, 0))
                                       : json_pack("{s:s, s:s, s:O}", "apiVersion", "v1", "kind",
                                                   "List", "items", items),
                               out);
}

/* ---- InstanceTypes ------------------------------------------------------------------------ */

json_t *sim_instancetype_json(const struct tsr_cluster *c, const struct tsr_chain_pool *p)
{
        struct tsr_pool_views v;
        struct tsr_view cpu;

        if (tsr_cluster_pool_views(c, p, &v, NULL))
                return NULL;
        tsr_cluster_pool_cpu(c, p, &cpu);
        return tsr_instancetype_object_build(p, &v, &cpu, NULL);
}

int sim_render_instancetypes(const struct tsr_cluster *c, const char *name, const char *output,
                             struct tsr_buf *out, struct tsr_diag *diag)
{
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
        struct sim_table t;
        bool wide = output && !strcmp(output, "wide");
        bool json = output && !strcmp(output, "json");
        const char *header[] = {
            "NAME", "ENTRANCE", "UNIT(CPU/RAM)/STORAGE",    "ACCELERATOR(EX/SH/SL/PT)",
            "CPU",  "PHASE",    wide ? "PARTITIONS" : NULL, NULL};
        json_t *items = json_array();
        size_t np, shown = 0;
        int rc = 0;

        tsr_cluster_pools(c, pools, &np);
        rc = sim_table_init(&t, header);
        for (size_t i = 0; i < np && !rc; i++) {
                struct tsr_pool_views v;
                struct tsr_view cpu;
                struct tsr_unit_spec u = tsr_instancetype_unit(pools[i].product);
                struct tsr_printable pr;

                if (name && strcmp(name, pools[i].name))
                        continue;
                rc = tsr_cluster_pool_views(c, &pools[i], &v, diag);
                if (rc)
                        break;
                tsr_cluster_pool_cpu(c, &pools[i], &cpu);
                shown++;
                if (json) {
                        json_array_append_new(
                            items, tsr_instancetype_object_build(&pools[i], &v, &cpu, NULL));
                        continue;
                }
                /* The cells status.printable carries (codec/instancetype_object.h), from one
                 * formatter. */
                tsr_printable_fill(&u, &v, &cpu, &pr);
                const char *row[] = {pools[i].name, pools[i].entrance, pr.unit,      pr.accelerator,
                                     pr.cpu,        "Active",          pr.partitions};
                rc = sim_table_row(&t, row);
        }
        if (!rc && name && !shown)
                rc = tsr_buf_addf(out,
                                  "Error from server (NotFound): instancetypes.worker."
                                  "gpustack.ai \"%s\" not found\n",
                                  name);
        else if (!rc)
                rc = sim_render_result(items, name != NULL, json, &t, out);
        sim_table_release(&t);
        json_decref(items);
        return rc;
}

/* ---- Node --------------------------------------------------------------------------------- */

int sim_render_node(const struct tsr_cluster *c, size_t node, struct tsr_buf *out,
                    struct tsr_diag *diag)
{
        const struct sim_node *n = &c->nodes[node];
        struct tsr_node_keys keys;
        json_t *cap, *alloc, *labels;
        char cpu[TSR_QUANTITY_STR_MAX];
        struct tsr_quantity q = {n->cpu_milli, -3, TSR_QF_DECIMAL_SI};
        int rc = tsr_cluster_node_keys(c, node, &keys, diag);

        if (rc)
                return rc;
        cap = json_pack("{s:s, s:o, s:s}", "cpu", tsr_quantity_format(&q, cpu), "memory",
                        qty(n->memory_bytes, TSR_QF_BINARY_SI), "pods", "110");
        for (size_t i = 0; i < keys.n; i++)
                json_object_set_new(cap, keys.keys[i].name,
                                    qty(keys.keys[i].capacity, TSR_QF_DECIMAL_SI));
        alloc = tsr_cluster_node_allocatable(c, node);
        labels = tsr_cluster_node_labels(c, node);
        if (!cap || !alloc || !labels) {
                json_decref(cap);
                json_decref(alloc);
                json_decref(labels);
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        }
        return sim_render_dump(json_pack("{s:s, s:s, s:{s:s, s:o}, s:{s:o, s:o}}", "apiVersion",
                                         "v1", "kind", "Node", "metadata", "name", n->name,
                                         "labels", labels, "status", "capacity", cap, "allocatable",
                                         alloc),
                               out);
}

/* ---- Devices ------------------------------------------------------------------------------ */

static void cap_summary(const struct tsr_accel_cap *cap, char *out, size_t len)
{
        size_t o;

        if (!cap->partitioned) {
                snprintf(out, len, "{\"coresPercentageOvercommit\": %s, \"count\": %u}",
                         cap->cores_overcommit ? "true" : "false", cap->slice_slots);
                return;
        }
        o = (size_t)snprintf(out, len, "count=%u profiles=", tsr_capability_partition_count(cap));
        for (unsigned i = 0, first = 1; i < cap->product->n_profiles && o < len; i++) {
                int n;

                if (!((cap->offered >> i) & 1u))
                        continue;
                n = snprintf(out + o, len - o, "%s%s(%u)", first ? "" : ",",
                             cap->product->profiles[i].name,
                             tsr_capability_profile_ceiling(cap, i));
                if (n < 0)
                        return;
                o += (size_t)n;
                first = 0;
        }
}

static void index_list(const struct sim_node *n, bool partitioned, char *out, size_t len)
{
        size_t o = 0;
        bool any = false;

        out[0] = '\0';
        for (unsigned g = 0; g < n->gpu_count && o < len; g++) {
                int k;

                if (n->caps[g].partitioned != partitioned)
                        continue;
                k = snprintf(out + o, len - o, "%s%u", any ? ", " : "[", g);
                if (k < 0)
                        return;
                o += (size_t)k;
                any = true;
        }
        snprintf(out + o, len - o, "%s", any ? "]" : "-");
}

static int devices_summary(const struct sim_node *n, struct tsr_buf *out)
{
        char label[SIM_GPUS_MAX][32], body[SIM_GPUS_MAX][1024], sliceable[512], parted[512];
        size_t width = 0;
        int rc;

        index_list(n, false, sliceable, sizeof(sliceable));
        index_list(n, true, parted, sizeof(parted));
        rc = tsr_buf_addf(out,
                          "group %s: %u GPU(s); logically sliceable indices %s; "
                          "partitioned indices %s\n",
                          n->product->name, n->gpu_count, sliceable, parted);
        for (unsigned g = 0; g < n->gpu_count; g++) {
                snprintf(label[g], sizeof(label[g]), "GPU %u %s:", g,
                         n->caps[g].partitioned ? "partitioned" : "logicalSliced");
                if (strlen(label[g]) > width)
                        width = strlen(label[g]);
                cap_summary(&n->caps[g], body[g], sizeof(body[g]));
        }
        /* A run of more than two lines identical to the one before them folds into one. */
        for (unsigned g = 0; g < n->gpu_count && !rc;) {
                unsigned run = g + 1;

                while (run < n->gpu_count && n->caps[run].partitioned == n->caps[g].partitioned &&
                       !strcmp(body[run], body[g]))
                        run++;
                rc = tsr_buf_addf(out, "  %-*s %s\n", (int)width, label[g], body[g]);
                if (run - g - 1 > 2) {
                        rc = rc ? rc : tsr_buf_adds(out, "  \xe2\x80\xa6");
                        rc = rc ? rc : tsr_buf_pad(out, ' ', width);
                        rc =
                            rc ? rc : tsr_buf_addf(out, "(GPUs %u-%u identical)\n", g + 1, run - 1);
                        g = run;
                } else {
                        g++;
                }
        }
        return rc;
}

int sim_render_devices(const struct tsr_cluster *c, size_t node, bool json, struct tsr_buf *out,
                       struct tsr_diag *diag)
{
        const struct sim_node *n = &c->nodes[node];
        struct tsr_accel_ledger ledger[SIM_GPUS_MAX];
        json_t *obj;
        int rc;

        if (!n->product)
                return tsr_buf_addf(out,
                                    "Error from server (NotFound): devices.worker.gpustack.ai "
                                    "\"%s\" not found\n",
                                    n->name);
        if (!json)
                return devices_summary(n, out);
        rc = tsr_cluster_ledger(c, node, ledger, diag);
        if (!rc)
                rc = tsr_devices_object_build(n->name, n->caps, ledger, n->gpu_count, &obj, diag);
        return rc ? rc : sim_render_dump(obj, out);
}

/* ---- Pods --------------------------------------------------------------------------------- */

void sim_render_age(int64_t s, char *out, size_t len)
{
        if (s < 0)
                s = 0;
        if (s < 120)
                snprintf(out, len, "%llds", (long long)s);
        else if (s < 600)
                snprintf(out, len, s % 60 ? "%lldm%llds" : "%lldm", (long long)(s / 60),
                         (long long)(s % 60));
        else if (s < 3 * 3600)
                snprintf(out, len, "%lldm", (long long)(s / 60));
        else if (s < 8 * 3600)
                snprintf(out, len, (s / 60) % 60 ? "%lldh%lldm" : "%lldh", (long long)(s / 3600),
                         (long long)((s / 60) % 60));
        else if (s < 48 * 3600)
                snprintf(out, len, "%lldh", (long long)(s / 3600));
        else
                snprintf(out, len, "%lldd", (long long)(s / 86400));
}

/* The STATUS column kubectl prints: the Pod's reason, its scheduling gate, or its state. */
static const char *status_column(const struct sim_pod *p)
{
        if (p->reason[0])
                return p->reason;
        if (p->gated && p->phase == SIM_PENDING)
                return "SchedulingGated";
        if (p->phase == SIM_SUCCEEDED)
                return "Completed";
        if (p->phase == SIM_FAILED)
                return "Error";
        return sim_pod_phase_name(p->phase);
}

int sim_render_pods(const struct tsr_cluster *c, const char *ns, const char *name, bool wide,
                    struct tsr_buf *out)
{
        struct sim_table t;
        const char *header[] = {"NAME", "READY", "STATUS",         "RESTARTS",        "AGE",
                                "IP",   "NODE",  "NOMINATED NODE", "READINESS GATES", NULL};
        size_t *idx, n = 0;
        int rc;

        if (!wide)
                header[5] = NULL;
        idx = malloc((c->n_pods ? c->n_pods : 1) * sizeof(*idx));
        if (!idx)
                return TSR_ENOMEM;
        for (size_t k = 0; k < c->n_pods; k++) {
                size_t at = n;

                if (strcmp(c->pods[k].ns, ns) || (name && strcmp(c->pods[k].name, name)))
                        continue;
                while (at > 0 && strcmp(c->pods[idx[at - 1]].name, c->pods[k].name) > 0) {
                        idx[at] = idx[at - 1];
                        at--;
                }
                idx[at] = k;
                n++;
        }
        if (n == 0) {
                free(idx);
                return name ? tsr_buf_addf(out,
                                           "Error from server (NotFound): pods \"%s\" not "
                                           "found\n",
                                           name)
                            : tsr_buf_addf(out, "No resources found in %s namespace.\n", ns);
        }
        rc = sim_table_init(&t, header);
        for (size_t i = 0; i < n && !rc; i++) {
                const struct sim_pod *p = &c->pods[idx[i]];
                size_t containers =
                    json_array_size(json_object_get(json_object_get(p->obj, "spec"), "containers"));
                char ready[32], age[32];
                bool bound = p->node >= 0;

                snprintf(ready, sizeof(ready), "%zu/%zu", p->phase == SIM_RUNNING ? containers : 0,
                         containers);
                sim_render_age(c->now - p->created, age, sizeof(age));
                const char *row[] = {p->name,
                                     ready,
                                     status_column(p),
                                     "0",
                                     age,
                                     bound ? p->ip : "<none>",
                                     bound ? c->nodes[p->node].name : "<none>",
                                     "<none>",
                                     "<none>"};
                rc = sim_table_row(&t, row);
        }
        if (!rc)
                rc = sim_table_print(&t, out);
        sim_table_release(&t);
        free(idx);
        return rc;
}

int sim_render_pod_json(const struct tsr_cluster *c, size_t pod, struct tsr_buf *out)
{
        const struct sim_pod *p = &c->pods[pod];
        json_t *o = json_deep_copy(p->obj);
        json_t *status = json_pack("{s:s}", "phase", sim_pod_phase_name(p->phase));
        json_t *scheduled;

        if (p->reason[0])
                json_object_set_new(status, "reason", json_string(p->reason));
        if (p->reason[0] && p->message[0])
                json_object_set_new(status, "message", json_string(p->message));
        if (p->node >= 0)
                scheduled = json_pack("{s:s, s:s}", "type", "PodScheduled", "status", "True");
        else if (p->gated)
                scheduled = json_pack("{s:s, s:s, s:s, s:s}", "type", "PodScheduled", "status",
                                      "False", "reason", "SchedulingGated", "message",
                                      "Scheduling is blocked due to non-empty scheduling gates");
        else
                scheduled = json_pack("{s:s, s:s, s:s, s:s}", "type", "PodScheduled", "status",
                                      "False", "reason", "Unschedulable", "message",
                                      p->message[0] ? p->message : "waiting for the scheduler");
        json_object_set_new(status, "conditions", json_pack("[o]", scheduled));
        if (p->node >= 0)
                json_object_set_new(status, "podIP", json_string(p->ip));
        json_object_set_new(o, "status", status);
        return sim_render_dump(o, out);
}

int sim_render_container_smi(const struct tsr_cluster *c, size_t pod, struct tsr_buf *out,
                             struct tsr_diag *diag)
{
        const struct sim_pod *p = &c->pods[pod];
        struct tsr_container_allocation alloc[TSR_ALLOC_CONTAINERS_MAX];
        size_t na;
        int rc;

        if (p->phase != SIM_RUNNING)
                return tsr_buf_addf(out,
                                    "error: unable to upgrade connection: container not "
                                    "found (\"%s\")\n",
                                    p->name);
        rc = tsr_cluster_pod_allocation(p, alloc, TSR_ALLOC_CONTAINERS_MAX, &na, diag);
        if (rc)
                return rc;
        if (na == 0)
                return tsr_buf_adds(out, "No devices were found\n");
        for (size_t x = 0; x < alloc[0].n && !rc; x++) {
                const struct tsr_accel_allocation *a = &alloc[0].accels[x];

                rc = tsr_buf_addf(out, "GPU %zu: %s (UUID: %s)\n", x,
                                  c->nodes[p->node].product->name, a->id);
                if (!rc && a->mode == TSR_MODE_PARTITIONED)
                        rc = tsr_buf_addf(out, "  MIG %-12sDevice %2u: (UUID: %s)\n", a->profile,
                                          0u, a->physical_id);
        }
        return rc;
}
