/*
 * render_workload.c - Kueue Workloads as kubectl shows them: the printer columns of the
 * kueue.x-k8s.io Workload CRD (NAME, QUEUE, RESERVED IN, ADMITTED, FINISHED, AGE), or the
 * v1beta2 objects with their conditions, admission (flavors, resource usage, the compressed
 * hostname-level topology assignment) and the gpustack-node-devices check's state.
 */
#include "sim/render.h"

#include "base/buf.h"
#include "base/err.h"
#include "base/quantity.h"
#include "codec/kueue_chain.h"
#include "core/credits.h"
#include "core/pod_resources.h"
#include "sim/resources.h"
#include "sim/table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* 2026-01-01T00:00:00Z, the virtual clock's zero. */
#define SIM_EPOCH INT64_C(1767225600)

void sim_render_time(int64_t t, char *out, size_t len)
{
        time_t at = (time_t)(SIM_EPOCH + t);
        struct tm tm;

        gmtime_r(&at, &tm);
        strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static json_t *condition(const char *type, bool status, const char *reason, const char *message,
                         int64_t at)
{
        char when[32];

        sim_render_time(at, when, sizeof(when));
        return json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", type, "status",
                         status ? "True" : "False", "reason", reason, "message", message,
                         "lastTransitionTime", when);
}

static json_t *conditions(const struct sim_workload *w)
{
        json_t *a = json_array();
        char msg[SIM_NAME_MAX + 64];

        if (w->reserved) {
                snprintf(msg, sizeof(msg), "Quota reserved in ClusterQueue %s", w->cluster_queue);
                json_array_append_new(
                    a, condition("QuotaReserved", true, "QuotaReserved", msg, w->reserved_at));
        } else if (w->pending[0]) {
                json_array_append_new(a, condition("QuotaReserved", false, "Pending", w->pending,
                                                   w->evicted ? w->evicted_at : w->created));
        }
        if (w->admitted)
                json_array_append_new(a, condition("Admitted", true, "Admitted",
                                                   "The workload is admitted", w->admitted_at));
        if (w->evicted)
                json_array_append_new(
                    a, condition("Evicted", true, "AdmissionCheck", w->evicted_msg, w->evicted_at));
        if (w->finished)
                json_array_append_new(
                    a, condition("Finished", true, w->failed ? "Failed" : "Succeeded",
                                 w->failed ? "Pod failed" : "Pod succeeded", w->finished_at));
        return a;
}

/* The v1beta2 compressed topology assignment: one slice, hostname values and Pod counts. */
static json_t *topology_assignment(const struct tsr_cluster *c, const struct sim_podset *ps)
{
        json_t *roots = json_array(), *counts = json_array(), *pods;
        bool same = true;

        for (size_t a = 0; a < ps->n_assign; a++) {
                json_array_append_new(roots, json_string(c->nodes[ps->assign[a].node].name));
                json_array_append_new(counts, json_integer(ps->assign[a].count));
                same &= ps->assign[a].count == ps->assign[0].count;
        }
        if (same && ps->n_assign) {
                pods = json_pack("{s:I}", "universal", (json_int_t)ps->assign[0].count);
                json_decref(counts);
        } else {
                pods = json_pack("{s:o}", "individual", counts);
        }
        return json_pack("{s:[s], s:[{s:I, s:[{s:{s:o}}], s:o}]}", "levels",
                         TSR_CHAIN_HOSTNAME_LABEL, "slices", "domainCount",
                         (json_int_t)ps->n_assign, "valuesPerLevel", "individual", "roots", roots,
                         "podCounts", pods);
}

static json_t *quantity(int64_t v, bool milli)
{
        char s[TSR_QUANTITY_STR_MAX];
        struct tsr_quantity q = {v, milli ? -3 : 0, TSR_QF_DECIMAL_SI};

        return json_string(tsr_quantity_format(&q, s));
}

static json_t *admission(const struct tsr_cluster *c, const struct sim_workload *w)
{
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
        const struct tsr_chain_pool *pool = NULL;
        json_t *assignments = json_array();
        size_t np;

        tsr_cluster_pools(c, pools, &np);
        for (size_t i = 0; i < np; i++)
                if (!strcmp(pools[i].name, w->cluster_queue))
                        pool = &pools[i];
        for (size_t s = 0; pool && s < w->n_podsets; s++) {
                const struct sim_podset *ps = &w->podsets[s];
                struct tsr_chain_flavor flavors[TSR_CHAIN_FLAVORS_MAX];
                struct tsr_pod_spec *spec;
                char resource[TSR_KEY_MAX] = "cpu";
                json_t *usage = json_object();
                size_t nf;
                int64_t per_pod = 0;

                tsr_cluster_flavors(c, pool, flavors, &nf, NULL);
                if (tsr_pod_spec_new(ps->tmpl, &spec, NULL) == 0) {
                        if (pool->product) {
                                const struct tsr_manufacturer *m =
                                    tsr_catalog_manufacturer(pool->product->manufacturer);

                                tsr_credits_resource(m, resource, sizeof(resource));
                                per_pod = tsr_credits_of_pod(&spec->req, m);
                        } else {
                                per_pod = tsr_pod_request(&spec->req, "cpu", true);
                        }
                        free(spec);
                }
                json_object_set_new(usage, resource, quantity(per_pod * ps->count, !pool->product));
                json_array_append_new(
                    assignments,
                    json_pack(
                        "{s:s, s:I, s:{s:s}, s:o, s:o}", "name", ps->name, "count",
                        (json_int_t)ps->count, "flavors", resource,
                        ps->flavor >= 0 && (size_t)ps->flavor < nf ? flavors[ps->flavor].name : "",
                        "resourceUsage", usage, "topologyAssignment", topology_assignment(c, ps)));
        }
        return json_pack("{s:s, s:o}", "clusterQueue", w->cluster_queue, "podSetAssignments",
                         assignments);
}

json_t *sim_workload_json(const struct tsr_cluster *c, const struct sim_workload *w)
{
        json_t *podsets = json_array(), *status = json_object(), *o;
        char created[32];

        for (size_t s = 0; s < w->n_podsets; s++)
                json_array_append_new(podsets,
                                      json_pack("{s:s, s:I, s:O}", "name", w->podsets[s].name,
                                                "count", (json_int_t)w->podsets[s].count,
                                                "template", w->podsets[s].tmpl));
        json_object_set_new(status, "conditions", conditions(w));
        if (w->reserved)
                json_object_set_new(status, "admission", admission(c, w));
        if (w->has_check) {
                char when[32];
                json_t *check;

                sim_render_time(w->check_changed, when, sizeof(when));
                check = json_pack("{s:s, s:s, s:s, s:s}", "name", TSR_KUEUE_NODE_DEVICES, "state",
                                  tsr_check_state_name(w->check), "message", w->check_msg,
                                  "lastTransitionTime", when);
                if (w->retry_count)
                        json_object_set_new(check, "retryCount", json_integer(w->retry_count));
                if (w->check == TSR_CHECK_RETRY || w->retry_count)
                        json_object_set_new(check, "requeueAfterSeconds",
                                            json_integer(SIM_RETRY_SECONDS));
                json_object_set_new(status, "admissionChecks", json_pack("[o]", check));
        }
        if (w->requeue_at > 0) {
                char when[32];

                sim_render_time(w->requeue_at, when, sizeof(when));
                json_object_set_new(status, "requeueState",
                                    json_pack("{s:I, s:s}", "count", (json_int_t)w->retry_count,
                                              "requeueAt", when));
        }
        sim_render_time(w->created, created, sizeof(created));
        o = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s}, s:{s:s, s:b, s:o}, s:o}", "apiVersion",
                      "kueue.x-k8s.io/v1beta2", "kind", "Workload", "metadata", "name", w->name,
                      "namespace", w->ns, "uid", w->uid, "creationTimestamp", created, "spec",
                      "queueName", w->queue, "active", 1, "podSets", podsets, "status", status);
        return o;
}

int sim_render_workloads(const struct tsr_cluster *c, const char *ns, const char *name, bool json,
                         struct tsr_buf *out)
{
        const char *header[] = {"NAME",     "QUEUE", "RESERVED IN", "ADMITTED",
                                "FINISHED", "AGE",   NULL};
        json_t *items = json_array();
        struct sim_table t;
        size_t shown = 0;
        int rc = sim_table_init(&t, header);

        size_t *order = malloc((c->n_workloads ? c->n_workloads : 1) * sizeof(*order));

        /* The API server lists a namespace's objects by name. */
        for (size_t k = 0; order && k < c->n_workloads; k++) {
                size_t at = k;

                while (at > 0 &&
                       strcmp(c->workloads[order[at - 1]].name, c->workloads[k].name) > 0) {
                        order[at] = order[at - 1];
                        at--;
                }
                order[at] = k;
        }
        if (!order)
                rc = TSR_ENOMEM;
        for (size_t x = 0; x < c->n_workloads && !rc; x++) {
                const struct sim_workload *w = &c->workloads[order[x]];
                char age[32];

                if (strcmp(w->ns, ns) || (name && strcmp(w->name, name)))
                        continue;
                shown++;
                if (json) {
                        json_array_append_new(items, sim_workload_json(c, w));
                        continue;
                }
                sim_render_age(c->now - w->created, age, sizeof(age));
                const char *row[] = {w->name,
                                     w->queue,
                                     w->reserved || w->finished ? w->cluster_queue : "",
                                     w->admitted ? "True" : "",
                                     w->finished ? "True" : "",
                                     age};
                rc = sim_table_row(&t, row);
        }
        if (!rc && !shown && name)
                rc = tsr_buf_addf(out,
                                  "Error from server (NotFound): workloads.kueue.x-k8s.io \"%s\" "
                                  "not found\n",
                                  name);
        else if (!rc && !shown && !json)
                rc = tsr_buf_addf(out, "No resources found in %s namespace.\n", ns);
        else if (!rc)
                rc = sim_render_result(items, name != NULL, json, &t, out);
        sim_table_release(&t);
        json_decref(items);
        free(order);
        return rc;
}
