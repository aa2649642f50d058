/*
 * scheduler.c - kube-scheduler (gate 4): binds every pending, ungated, unbound Pod in creation
 * order to a node that passes its nodeSelector and required node affinity and whose allocatable
 * keys, cpu, memory and pod count cover the Pod's requests on top of those already bound there.
 * A Pod Kueue admitted under TAS carries its node in a hostname nodeSelector, so the scheduler
 * only checks that node: a node without room leaves it Pending rather than moving it. Among
 * several feasible nodes it scores like NodeResourcesFit's default LeastAllocated over cpu and
 * memory, ties by the order the scenario declares the nodes. An unschedulable Pod keeps a
 * PodScheduled message in kube-scheduler's words ("0/N nodes are available: ...").
 */
#include "sim/actors.h"

#include "codec/affinity.h"
#include "sim/resources.h"

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

/* NodeResourcesFit's LeastAllocated score: the free share of cpu and memory left after the Pod. */
static double least_allocated(const struct sim_node_state *s, const struct pod_resources *req)
{
        static const char *const scored[] = {"cpu", "memory"};
        double score = 0;

        for (size_t r = 0; r < 2; r++) {
                int64_t have = pod_resources_get(s->alloc, scored[r]);
                int64_t used = pod_resources_get(sim_node_state_used(s), scored[r]);
                int64_t want = pod_resources_get(req, scored[r]);

                if (have > 0)
                        score += (double)(have - (used > 0 ? used : 0) - (want > 0 ? want : 0)) /
                                 (double)have;
        }
        return score;
}

/* Tries to bind Pod k over node states ns; returns true when it bound. */
static bool bind_one(struct tsr_cluster *c, struct sim_node_state *ns, size_t k)
{
        struct sim_pod *p = &c->pods[k];
        struct tsr_pod_spec *spec;
        struct pod_resources req;
        struct reasons rs = {0};
        int best = -1;
        double best_score = -1;

        if (tsr_pod_spec_new(p->obj, &spec, NULL))
                return false;
        pod_spec_resources(&spec->req, &req);
        free(spec);
        for (size_t i = 0; i < c->n_nodes; i++) {
                const char *short_of = NULL;
                char text[TSR_KEY_MAX + 16];

                if (!tsr_affinity_matches(json_object_get(p->obj, "spec"), c->nodes[i].name,
                                          ns[i].labels)) {
                        rs.affinity++;
                } else if (!sim_node_state_fits(&ns[i], &req, &short_of)) {
                        snprintf(text, sizeof(text), "Insufficient %s", short_of);
                        reason_add(&rs, text);
                } else if (least_allocated(&ns[i], &req) > best_score) {
                        best = (int)i;
                        best_score = least_allocated(&ns[i], &req);
                }
        }
        if (best < 0) {
                size_t o = (size_t)snprintf(p->message, sizeof(p->message),
                                            "0/%zu nodes are available: ", c->n_nodes);

                for (size_t r = 0; r < rs.n && o < sizeof(p->message); r++)
                        o += (size_t)snprintf(p->message + o, sizeof(p->message) - o, "%s%u %s",
                                              r ? ", " : "", rs.r[r].count, rs.r[r].text);
                if (rs.affinity && o < sizeof(p->message))
                        o += (size_t)snprintf(p->message + o, sizeof(p->message) - o,
                                              "%s%u node(s) didn't match Pod's node "
                                              "affinity/selector",
                                              rs.n ? ", " : "", rs.affinity);
                if (o < sizeof(p->message))
                        snprintf(p->message + o, sizeof(p->message) - o, ".");
                return false;
        }
        if (sim_pod_bind(c, k, (size_t)best)) {
                snprintf(p->message, sizeof(p->message), "out of memory");
                return false;
        }
        c->ip_seq++;
        snprintf(p->ip, sizeof(p->ip), "10.244.%d.%u", best % 256, 2 + c->ip_seq % 250);
        p->message[0] = '\0';
        sim_kubelet_admit(c, k);
        sim_node_state_refresh(c, &ns[best], (size_t)best);
        return true;
}

bool sim_scheduler_bind(struct tsr_cluster *c)
{
        struct sim_node_state *ns = NULL;
        bool moved = false;

        for (size_t k = 0; k < c->n_pods; k++) {
                const struct sim_pod *p = &c->pods[k];

                if (p->node >= 0 || p->gated || p->phase != SIM_PENDING)
                        continue;
                if (!ns && !(ns = sim_node_states(c)))
                        return moved;
                moved |= bind_one(c, ns, k);
        }
        sim_node_states_free(ns, c->n_nodes);
        return moved;
}
