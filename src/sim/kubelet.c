/*
 * kubelet.c - the node side of the simulation (gate 5): the kubelet admitting a bound Pod, the
 * device plugins' preferred allocation and Allocate under the node's lock, MIG carving with an
 * ownership marker, containers that exit, and the MIG reclaim loop.
 *
 * Accelerator-bound families (exclusive, shared, sliced): the kubelet asks the plugin for its
 * preferred tokens (core/alloc.h's packing order on the live ledger) and takes them; when the
 * plugin has no preference that satisfies the request, the kubelet takes the first available
 * healthy tokens, and Allocate then refuses what it must (another mode, two shares of one card, a
 * slice without a slot or units). A partition token is a fungible count: the plugin picks the GPU
 * and the lowest free placement itself, against the live hardware too, so a slot whose instance
 * has not been reclaimed yet is never double-booked. A refused allocation fails the Pod with
 * UnexpectedAdmissionError, as the kubelet does.
 */
#include "sim/actors.h"

#include "base/err.h"
#include "core/alloc.h"
#include "core/demand.h"
#include "core/instancetype.h"
#include "mig/carve.h"
#include "mig/reclaim.h"
#include "sim/commands.h"
#include "sim/resources.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- admission ---------------------------------------------------------------------------- */

/* Free tokens of one accelerator for family f (0 when the card is held in another mode). */
static unsigned free_tokens(const struct tsr_accel_cap *cap, const struct tsr_accel_ledger *l,
                            enum tsr_family f)
{
        if (cap->partitioned)
                return 0;
        switch (f) {
        case TSR_FAMILY_EXCLUSIVE:
                return l->mode == TSR_MODE_NONE;
        case TSR_FAMILY_SHARED:
                if (l->mode != TSR_MODE_NONE && l->mode != TSR_MODE_SHARED)
                        return 0;
                return (unsigned)(l->remaining / TSR_UNITS_PER_SHARE);
        case TSR_FAMILY_SLICED:
                if (l->mode != TSR_MODE_NONE && l->mode != TSR_MODE_SLICED)
                        return 0;
                return cap->slice_slots - l->allocated_slices;
        default:
                return 0;
        }
}

struct failure {
        bool failed;
        char message[512];
};

static void fail(struct failure *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail(struct failure *f, const char *fmt, ...)
{
        va_list ap;

        f->failed = true;
        va_start(ap, fmt);
        vsnprintf(f->message, sizeof(f->message), fmt, ap);
        va_end(ap);
}

/* The kubelet's token choice for an accelerator-bound claim: the plugin's preference, else the
 * first available tokens in device order. Fills accels[0..d->cards). */
static bool choose_tokens(const struct sim_node *n, const struct tsr_accel_ledger *ledger,
                          const struct tsr_demand *d, const char *key, unsigned *accels,
                          struct failure *f)
{
        struct tsr_alloc_pick picks[TSR_ALLOC_BATCH_MAX];
        unsigned available = 0, want = d->cards, taken = 0;
        int rc;

        if (want > TSR_ALLOC_BATCH_MAX) {
                fail(f,
                     "Pod was rejected: Allocate failed due to requested number of devices "
                     "unavailable for %s. Requested: %u, Available: %u, which is unexpected",
                     key, want, 0u);
                return false;
        }
        rc = d->family == TSR_FAMILY_EXCLUSIVE
                 ? tsr_alloc_pick_exclusive(n->caps, ledger, n->gpu_count, want, picks)
             : d->family == TSR_FAMILY_SHARED
                 ? tsr_alloc_pick_shared(n->caps, ledger, n->gpu_count, want, picks)
                 : tsr_alloc_pick_slice(n->caps, ledger, n->gpu_count, d->units, picks);
        if (rc == 0) {
                for (unsigned k = 0; k < want; k++)
                        accels[k] = picks[k].accel;
                return true;
        }
        for (unsigned g = 0; g < n->gpu_count; g++)
                available += free_tokens(&n->caps[g], &ledger[g], d->family);
        if (available < want) {
                fail(f,
                     "Pod was rejected: Allocate failed due to requested number of devices "
                     "unavailable for %s. Requested: %u, Available: %u, which is unexpected",
                     key, want, available);
                return false;
        }
        for (unsigned g = 0; g < n->gpu_count && taken < want; g++)
                for (unsigned t = free_tokens(&n->caps[g], &ledger[g], d->family);
                     t > 0 && taken < want; t--)
                        accels[taken++] = g;
        return true;
}

/* A token's device ID, "<group>:<device>:<index>" with the index padded to 4 digits. */
static void device_id(char *out, size_t len, const char *group, const char *uuid, unsigned index)
{
        snprintf(out, len, "%.100s:%.100s:%04u", group, uuid, index);
}

/* Allocates one accelerator-bound container; charges ledger and fills ca. */
static void allocate_bound(struct sim_node *n, struct tsr_accel_ledger *ledger,
                           const struct tsr_demand *d, const char *group, const char *key,
                           struct tsr_container_allocation *ca, struct failure *f)
{
        unsigned accels[TSR_ALLOC_BATCH_MAX];
        char why[512];

        if (!choose_tokens(n, ledger, d, key, accels, f))
                return;
        if (tsr_alloc_refuse(n->caps, ledger, n->gpu_count, d->family, accels, d->cards, d->units,
                             why, sizeof(why))) {
                fail(f,
                     "Pod was rejected: Allocate failed due to rpc error: code = "
                     "FailedPrecondition desc = %s, which is unexpected",
                     why);
                return;
        }
        for (unsigned k = 0; k < d->cards && ca->n < TSR_ALLOC_ACCELS_MAX; k++) {
                const struct tsr_accel_ledger *l = &ledger[accels[k]];
                struct tsr_accel_allocation *aa = &ca->accels[ca->n++];
                struct tsr_alloc_pick pick = {accels[k], -1, 0};
                /* the token the kubelet handed out: the next share or slice slot */
                unsigned token = d->family == TSR_FAMILY_SHARED
                                     ? (unsigned)(l->allocated / TSR_UNITS_PER_SHARE) *
                                           (unsigned)TSR_UNITS_PER_SHARE
                                 : d->family == TSR_FAMILY_SLICED ? l->allocated_slices
                                                                  : 0;

                snprintf(aa->id, sizeof(aa->id), "%s", n->caps[accels[k]].uuid);
                aa->index = accels[k];
                aa->allocated = tsr_demand_units_per_card(d);
                aa->slices = d->family == TSR_FAMILY_SLICED;
                if (ca->n_device_ids < TSR_ALLOC_ACCELS_MAX)
                        device_id(ca->device_ids[ca->n_device_ids++], sizeof(ca->device_ids[0]),
                                  group, n->caps[accels[k]].uuid, token);
                aa->mode = tsr_alloc_charge(n->caps, ledger, d, &pick);
        }
}

/*
 * Carves (or reuses, or adopts) the partition of one container through src/mig/carve.h, which
 * writes the ownership marker before it answers; charges ledger and fills ca.
 */
static void allocate_partition(struct sim_node *n, struct tsr_accel_ledger *ledger,
                               const struct sim_pod *p, const struct tsr_demand *d,
                               const char *group, struct tsr_container_allocation *ca,
                               struct failure *f)
{
        const struct tsr_mig_gpus gpus = {&tsr_fake_gpu_ops, n->gpus};
        const struct tsr_mig_request req = {p->uid, ca->container, d->profile};
        struct tsr_accel_allocation *aa;
        struct tsr_mig_grant g;
        struct tsr_alloc_pick pick;
        struct tsr_diag diag;
        int rc;

        tsr_diag_clear(&diag);
        rc = tsr_mig_reserve(&gpus, n->markers, n->caps, ledger, n->gpu_count, &req, &g, &diag);
        if (rc == TSR_ENOSPC || rc == TSR_ENOTFOUND) {
                /* The replacement gap: the ledger frees a deleted Pod's slot before the
                 * reclaimer destroys its instance. Say so when that is what blocks. */
                fail(
                    f,
                    "Pod was rejected: Allocate failed due to rpc error: code = "
                    "FailedPrecondition desc = %s%s, which is unexpected",
                    diag.msg,
                    tsr_alloc_pick_partition(n->caps, ledger, NULL, n->gpu_count, d->profile, &pick)
                        ? ""
                        : SIM_RECLAIM_GAP);
                return;
        }
        if (rc) {
                fail(f,
                     "Pod was rejected: Allocate failed due to rpc error: code = Internal desc "
                     "= %s, which is unexpected",
                     diag.msg);
                return;
        }
        pick = (struct tsr_alloc_pick){g.gpu, g.profile, g.marker.start};
        aa = &ca->accels[ca->n++];
        snprintf(aa->id, sizeof(aa->id), "%s", n->caps[g.gpu].uuid);
        aa->index = g.gpu;
        aa->mode = tsr_alloc_charge(n->caps, ledger, d, &pick);
        aa->allocated = d->units;
        snprintf(aa->profile, sizeof(aa->profile), "%s", g.marker.profile);
        aa->start = g.marker.start;
        aa->length = g.marker.length;
        snprintf(aa->physical_id, sizeof(aa->physical_id), "%s", g.marker.mig_uuid);
        device_id(ca->device_ids[ca->n_device_ids++], sizeof(ca->device_ids[0]), group,
                  n->caps[g.gpu].uuid, g.marker.start);
}

/* Seconds a `sleep ARG` takes: a plain number of seconds or a Go-style duration, else -1. */
static int64_t sleep_seconds(const char *arg)
{
        int64_t seconds = 0;
        const char *s = arg;

        if (!arg || !*arg)
                return -1;
        while (*s >= '0' && *s <= '9' && seconds <= SIM_SLEEP_MAX_SECONDS)
                seconds = seconds * 10 + (*s++ - '0');
        if (*s == '\0')
                return seconds <= SIM_SLEEP_MAX_SECONDS ? seconds : -1;
        return sim_parse_duration(arg, &seconds) == 0 ? seconds : -1;
}

/*
 * When a container's command ends, in seconds from its start: `true` and `false` at once (false
 * fails), `sleep N` after N; anything else (an image's own entrypoint) runs until deleted (-1).
 */
static int64_t exits_after(json_t *container, bool *failed)
{
        json_t *cmd = json_object_get(container, "command");
        json_t *argv = json_array_size(cmd) ? cmd : json_object_get(container, "args");
        const char *prog = json_string_value(json_array_get(argv, 0));
        size_t argc = json_array_size(argv);

        *failed = false;
        if (!prog)
                return -1;
        if (argc == 1 && (!strcmp(prog, "true") || !strcmp(prog, "false"))) {
                *failed = prog[0] == 'f';
                return 0;
        }
        if (argc == 2 && !strcmp(prog, "sleep"))
                return sleep_seconds(json_string_value(json_array_get(argv, 1)));
        return -1;
}

const char *sim_pod_phase_name(enum sim_phase phase)
{
        switch (phase) {
        case SIM_RUNNING:
                return "Running";
        case SIM_SUCCEEDED:
                return "Succeeded";
        case SIM_FAILED:
                return "Failed";
        case SIM_PENDING:
                break;
        }
        return "Pending";
}

/* Moves Pod p to phase, writing it to the object's status.phase too (what ledgers read). */
static void set_phase(struct tsr_cluster *c, struct sim_pod *p, enum sim_phase phase)
{
        json_t *status = json_object_get(p->obj, "status");

        p->phase = phase;
        sim_node_changed(c, p->node);
        if (tsr_cluster_pod_finished(p))
                c->membership_gen++;
        if (!json_is_object(status)) {
                status = json_object();
                json_object_set_new(p->obj, "status", status);
        }
        json_object_set_new(status, "phase", json_string(sim_pod_phase_name(phase)));
}

/* Starts the Pod's containers: Running, with the exit time of the last app container. */
static void start(struct tsr_cluster *c, struct sim_pod *p)
{
        json_t *containers = json_object_get(json_object_get(p->obj, "spec"), "containers");
        json_t *ct;
        size_t i;
        int64_t last = 0;
        bool failed = false;

        set_phase(c, p, SIM_RUNNING);
        p->reason[0] = '\0';
        json_array_foreach(containers, i, ct)
        {
                bool f;
                int64_t after = exits_after(ct, &f);

                failed |= f;
                if (after < 0 || last < 0)
                        last = -1;
                else if (after > last)
                        last = after;
        }
        p->finish_failed = failed;
        p->finish_at = last < 0 ? -1 : c->now + last;
        if (p->finish_at == c->now)
                set_phase(c, p, failed ? SIM_FAILED : SIM_SUCCEEDED);
}

void sim_kubelet_admit(struct tsr_cluster *c, size_t k)
{
        struct sim_pod *p = &c->pods[k];
        struct sim_node *n = &c->nodes[p->node];
        struct tsr_accel_ledger ledger[SIM_GPUS_MAX];
        struct tsr_container_allocation *allocs = NULL;
        const struct tsr_manufacturer *m;
        struct tsr_pod_spec *spec = NULL;
        struct failure f = {0};
        char group[TSR_NAME_MAX], *json = NULL;
        size_t na = 0;

        if (!n->product) {
                start(c, p);
                return;
        }
        m = tsr_catalog_manufacturer(n->product->manufacturer);
        allocs = calloc(TSR_ALLOC_CONTAINERS_MAX, sizeof(*allocs));
        if (!allocs || tsr_pod_spec_new(p->obj, &spec, NULL) ||
            tsr_cluster_ledger(c, (size_t)p->node, ledger, NULL)) {
                fail(&f,
                     "Pod was rejected: the kubelet could not read the Pod or its node's ledger");
                goto out;
        }
        tsr_instancetype_group_id(n->product, group, sizeof(group));
        for (size_t i = 0; i < spec->req.n && !f.failed; i++) {
                struct tsr_demand d;
                struct tsr_container_allocation *ca;
                char key[TSR_KEY_MAX];

                tsr_demand_of_container(&spec->req, i, m, &d);
                if (d.family == TSR_FAMILY_NONE || d.family == TSR_FAMILY_VISIBILITY)
                        continue;
                if (d.mixed || na >= TSR_ALLOC_CONTAINERS_MAX) {
                        fail(&f,
                             "Pod was rejected: Allocate failed due to rpc error: code = "
                             "FailedPrecondition desc = container %s asks for two "
                             "accelerator families, which is unexpected",
                             spec->req.c[i].name);
                        break;
                }
                ca = &allocs[na++];
                snprintf(ca->container, sizeof(ca->container), "%s", spec->req.c[i].name);
                snprintf(ca->group_id, sizeof(ca->group_id), "%.*s", (int)sizeof(ca->group_id) - 1,
                         group);
                snprintf(ca->manufacturer, sizeof(ca->manufacturer), "%s", m->key);
                if (d.family == TSR_FAMILY_PARTITIONED) {
                        allocate_partition(n, ledger, p, &d, group, ca, &f);
                        continue;
                }
                tsr_key_format(key, m,
                               d.family == TSR_FAMILY_EXCLUSIVE ? TSR_KEY_EXCLUSIVE
                               : d.family == TSR_FAMILY_SHARED  ? TSR_KEY_SHARED
                                                                : TSR_KEY_SLICED,
                               NULL);
                allocate_bound(n, ledger, &d, group, key, ca, &f);
        }
        if (!f.failed && na > 0 && tsr_alloc_annotation_encode(allocs, na, &json) == 0) {
                sim_pod_set_annotation(p->obj, TSR_ALLOC_ANNOTATION, json);
                sim_node_changed(c, p->node);
        }
out:
        free(json);
        free(spec);
        free(allocs);
        if (f.failed) {
                set_phase(c, p, SIM_FAILED);
                snprintf(p->reason, sizeof(p->reason), "UnexpectedAdmissionError");
                snprintf(p->message, sizeof(p->message), "%s", f.message);
                return;
        }
        start(c, p);
}

void sim_kubelet_finish_due(struct tsr_cluster *c)
{
        for (size_t k = 0; k < c->n_pods; k++) {
                struct sim_pod *p = &c->pods[k];

                if (p->phase == SIM_RUNNING && p->finish_at >= 0 && p->finish_at <= c->now)
                        set_phase(c, p, p->finish_failed ? SIM_FAILED : SIM_SUCCEEDED);
        }
}

/* ---- reclaim ------------------------------------------------------------------------------ */

/*
 * One pass of src/mig/reclaim.h over node i: every Pod of the cluster is live, and the allocation
 * annotations of the Pods bound to the node are its claims.
 */
void sim_kubelet_reclaim_pass(struct tsr_cluster *c, size_t i)
{
        struct sim_node *n = &c->nodes[i];
        struct tsr_container_allocation alloc[TSR_ALLOC_CONTAINERS_MAX];
        struct tsr_mig_claim *claims = NULL;
        const char **live = calloc(c->n_pods + 1, sizeof(*live));
        struct tsr_mig_view view = {NULL, 0, NULL, 0};
        size_t cap = 0;

        if (!live)
                return;
        for (size_t k = 0; k < c->n_pods; k++) {
                const struct sim_pod *p = &c->pods[k];
                size_t na;

                live[view.n_live++] = p->uid;
                if (p->node != (int)i ||
                    tsr_cluster_pod_allocation(p, alloc, TSR_ALLOC_CONTAINERS_MAX, &na, NULL))
                        continue;
                for (size_t a = 0; a < na; a++)
                        for (size_t x = 0; x < alloc[a].n; x++) {
                                const struct tsr_accel_allocation *aa = &alloc[a].accels[x];

                                if (aa->index >= n->gpu_count)
                                        continue;
                                if (view.n_claims == cap) {
                                        size_t more = cap ? cap * 2 : 16;
                                        struct tsr_mig_claim *grown =
                                            realloc(claims, more * sizeof(*claims));

                                        if (!grown)
                                                goto out;
                                        claims = grown;
                                        cap = more;
                                }
                                claims[view.n_claims++] = (struct tsr_mig_claim){
                                    p->uid, n->caps[aa->index].uuid,
                                    aa->mode == TSR_MODE_PARTITIONED, aa->start, aa->length};
                        }
        }
        view.live = live;
        view.claims = claims;
        tsr_mig_reclaim_pass(n->reclaimer, &view, NULL, NULL);
out:
        free(claims);
        free(live);
}
