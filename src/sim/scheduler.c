/*
 * scheduler.c - kube-scheduler (gate 4): binds every pending, ungated, unbound Pod in creation
 * order to a node that passes its nodeSelector and required node affinity and whose allocatable
 * keys, cpu, memory and pod count cover the Pod's requests on top of those already bound there.
 * A Pod Kueue admitted under TAS carries its node in a hostname nodeSelector, so the scheduler
 * only checks that node: a node without room leaves it Pending rather than moving it. Among
 * several feasible nodes it scores like NodeResourcesFit's default LeastAllocated over cpu and
 * memory, ties by name. An unschedulable Pod keeps a PodScheduled message in kube-scheduler's
 * words ("0/N nodes are available: ...").
 */
#include "sim/actors.h"

#include "codec/affinity.h"
#include "sim/pod_spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reasons one node cannot host the Pod, counted across nodes for the message. */
struct reasons {
        unsigned affinity;
        size_t n;
        struct {
                char text[TSR_KEY_MAX + 16];
                unsigned count;
        } r[16];
};

static void reason_add(struct reasons *rs, const char *text)
{
        for (size_t i = 0; i < rs->n; i++) {
                if (!strcmp(rs->r[i].text, text)) {
                        rs->r[i].count++;
                        return;
                }
        }
        if (rs->n >= sizeof(rs->r) / sizeof(rs->r[0]))
                return;
        snprintf(rs->r[rs->n].text, sizeof(rs->r[rs->n].text), "%s", text);
        rs->r[rs->n].count = 1;
        rs->n++;
}

/* Whether Pod req fits node i; names the first short resource in *short_of. Scores it in *score. */
static bool fits(const struct tsr_cluster *c, size_t i, const struct pod_resources *req,
                 const char **short_of, double *score)
{
        struct pod_resources alloc;

        sim_node_allocatable(c, i, &alloc);
        *score = 0;
        for (size_t r = 0; r < req->n; r++) {
                const char *name = req->r[r].name;
                int64_t have = pod_resources_get(&alloc, name);
                int64_t used = !strcmp(name, "pods") ? 0 : sim_node_requested(c, i, name);

                if (!strcmp(name, "pods"))
                        for (size_t k = 0; k < c->n_pods; k++)
                                used += c->pods[k].node == (int)i &&
                                        !tsr_cluster_pod_finished(&c->pods[k]);
                if (req->r[r].value <= 0)
                        continue;
                if (have < 0 || have - used < req->r[r].value) {
                        *short_of = name;
                        return false;
                }
                if (!strcmp(name, "cpu") || !strcmp(name, "memory"))
                        *score += (double)(have - used - req->r[r].value) / (double)have;
        }
        return true;
}

/* Tries to bind Pod k; returns true when it bound. */
static bool bind_one(struct tsr_cluster *c, size_t k)
{
        struct sim_pod *p = &c->pods[k];
        struct pod_spec *spec;
        struct pod_resources req;
        struct reasons rs = {0};
        int best = -1;
        double best_score = -1;

        if (pod_spec_new(p->obj, &spec, NULL))
                return false;
        pod_spec_resources(&spec->req, &req);
        free(spec);
        for (size_t i = 0; i < c->n_nodes; i++) {
                json_t *labels = tsr_cluster_node_labels(c, i);
                const char *short_of = NULL;
                double score;
                char text[TSR_KEY_MAX + 16];

                if (!tsr_affinity_matches(json_object_get(p->obj, "spec"), c->nodes[i].name,
                                          labels)) {
                        rs.affinity++;
                } else if (!fits(c, i, &req, &short_of, &score)) {
                        snprintf(text, sizeof(text), "Insufficient %s", short_of);
                        reason_add(&rs, text);
                } else if (score > best_score) {
                        best = (int)i;
                        best_score = score;
                }
                json_decref(labels);
        }
        if (best < 0) {
                size_t o = (size_t)snprintf(p->message, sizeof(p->message),
                                            "0/%zu nodes are available: ", c->n_nodes);

                for (size_t r = 0; r < rs.n && o < sizeof(p->message); r++)
                        o += (size_t)snprintf(p->message + o, sizeof(p->message) - o, "%s%u %s",
                                              r ? ", " : "", rs.r[r].count, rs.r[r].text);
                if (rs.affinity && o < sizeof(p->message))
                        snprintf(p->message + o, sizeof(p->message) - o,
                                 "%s%u node(s) didn't match Pod's node affinity/selector",
                                 rs.n ? ", " : "", rs.affinity);
                return false;
        }
        c->ip_seq++;
        snprintf(p->ip, sizeof(p->ip), "10.244.%d.%u", best % 256, 2 + c->ip_seq % 250);
        p->node = best;
        p->message[0] = '\0';
        json_object_set_new(json_object_get(p->obj, "spec"), "nodeName",
                            json_string(c->nodes[best].name));
        sim_kubelet_admit(c, k);
        return true;
}

bool sim_scheduler_bind(struct tsr_cluster *c)
{
        bool moved = false;

        for (size_t k = 0; k < c->n_pods; k++) {
                const struct sim_pod *p = &c->pods[k];

                if (p->node >= 0 || p->gated || p->phase != SIM_PENDING)
                        continue;
                moved |= bind_one(c, k);
        }
        return moved;
}
