/*
 * carve.c - reuse, adopt or create, then mark (carve.h).
 */
#include "mig/carve.h"

#include "base/err.h"
#include "core/alloc.h"
#include "core/geometry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct reserve {
        const struct tsr_mig_gpus *gpus;
        struct tsr_mig_store *store;
        const struct tsr_accel_cap *caps;
        const struct tsr_accel_ledger *ledger;
        size_t n;
        const struct tsr_mig_request *req;
        struct tsr_mig_marker_entry *markers;
        size_t n_markers;
        struct tsr_mig_snapshot *snap;
};

/* The profile index of name on card g when g is partitioned and offers it, else -1. */
static int offered_profile(const struct reserve *r, unsigned g, const char *name)
{
        const struct tsr_accel_cap *cap = &r->caps[g];
        const struct tsr_mig_profile *mp;
        int i;

        if (!cap->partitioned || !cap->product || !(mp = tsr_product_profile(cap->product, name)))
                return -1;
        i = (int)(mp - cap->product->profiles);
        return (cap->offered >> i) & 1u ? i : -1;
}

static void fill_marker(const struct reserve *r, unsigned g, int profile,
                        const struct tsr_gpu_instance *in, struct tsr_mig_marker *m)
{
        const struct tsr_mig_profile *mp = &r->caps[g].product->profiles[profile];

        memset(m, 0, sizeof(*m));
        snprintf(m->pod_uid, sizeof(m->pod_uid), "%s", r->req->pod_uid);
        snprintf(m->container, sizeof(m->container), "%s", r->req->container);
        snprintf(m->card, sizeof(m->card), "%s", r->snap->card[g].uuid);
        snprintf(m->profile, sizeof(m->profile), "%s", mp->name);
        snprintf(m->mig_uuid, sizeof(m->mig_uuid), "%s", in->mig_uuid);
        m->gi_id = in->gi_id;
        m->ci_id = in->ci_id;
        m->compute_slices = mp->compute_slices;
        m->start = in->start;
        m->length = mp->size;
}

static void grant(struct tsr_mig_grant *out, enum tsr_mig_how how, unsigned g, int profile,
                  const struct tsr_mig_marker *m)
{
        out->how = how;
        out->gpu = g;
        out->profile = profile;
        out->marker = *m;
}

/* The refusal of every container of a Pod whose directory is flooded with markers. */
static int flooded(const struct tsr_mig_marker_entry *e, struct tsr_diag *diag)
{
        return tsr_diag_set(diag, TSR_ESTALE, "%s (%s); recreate the Pod", e->why, e->path);
}

/* Step 1: the container's own marker. 0 with *out, 1 when it has none, else fails closed. */
static int reuse(const struct reserve *r, struct tsr_mig_grant *out, struct tsr_diag *diag)
{
        for (size_t i = 0; i < r->n_markers; i++) {
                const struct tsr_mig_marker_entry *e = &r->markers[i];
                const struct tsr_gpu_instance *in = NULL;
                int g, profile;

                if (strcmp(e->pod_uid, r->req->pod_uid))
                        continue;
                if (e->flooded)
                        return flooded(e, diag);
                if (strcmp(e->container, r->req->container))
                        continue;
                if (e->corrupt)
                        return tsr_diag_set(diag, TSR_ESTALE,
                                            "the MIG ownership marker %s is corrupt (%s); "
                                            "recreate the Pod",
                                            e->path, e->why);
                g = tsr_mig_snapshot_find(r->snap, e->m.card);
                if (g >= 0 && (size_t)g < r->n)
                        in = tsr_mig_owned(&r->snap->card[g], &e->m, false);
                if (!in || tsr_gpu_instance_subdivided(in))
                        return tsr_diag_set(diag, TSR_ESTALE,
                                            "the MIG instance %s (GPU instance %u on %s) recorded "
                                            "for pod %s container %s is gone or was recreated; "
                                            "recreate the Pod",
                                            e->m.mig_uuid, e->m.gi_id, e->m.card, e->m.pod_uid,
                                            e->m.container);
                profile = offered_profile(r, (unsigned)g, e->m.profile);
                if (profile < 0 || strcmp(e->m.profile, r->req->profile))
                        return tsr_diag_set(diag, TSR_ESTALE,
                                            "the MIG ownership marker of pod %s container %s "
                                            "records profile %s, %s",
                                            e->m.pod_uid, e->m.container, e->m.profile,
                                            profile < 0 ? "which the GPU no longer offers"
                                                        : "not the one requested");
                grant(out, TSR_MIG_REUSED, (unsigned)g, profile, &e->m);
                return 0;
        }
        return 1;
}

static bool marked(const struct reserve *r, const char *uuid, const struct tsr_mig_card *card,
                   const struct tsr_gpu_instance *in)
{
        for (size_t i = 0; i < r->n_markers; i++) {
                const struct tsr_mig_marker_entry *e = &r->markers[i];

                if (!e->corrupt && !strcmp(e->m.card, uuid) &&
                    tsr_mig_owned(card, &e->m, true) == in)
                        return true;
        }
        return false;
}

/* Writes m; on failure undoes the compute instance (and GPU instance) this call created. */
static int mark(const struct reserve *r, unsigned g, const struct tsr_mig_marker *m, bool made_ci,
                bool made_gi, struct tsr_diag *diag)
{
        int rc = tsr_mig_store_put(r->store, m, diag);

        if (rc && made_ci)
                r->gpus->ops->ci_destroy(r->gpus->be, g, m->gi_id, m->ci_id);
        if (rc && made_gi)
                r->gpus->ops->gi_destroy(r->gpus->be, g, m->gi_id);
        return rc;
}

static int make_ci(const struct reserve *r, unsigned g, const char *profile,
                   struct tsr_gpu_instance *in, struct tsr_diag *diag)
{
        int rc = r->gpus->ops->ci_create(r->gpus->be, g, in->gi_id, &in->ci_id, in->mig_uuid);

        if (rc)
                return tsr_diag_set(diag, rc, "failed to create compute instance on %s: %s",
                                    profile, tsr_mig_nvml_error(rc));
        in->n_ci = 1;
        return 0;
}

/* Step 2: an unmarked live instance. 0 with *out, 1 when there is none, else an error. */
static int adopt(const struct reserve *r, struct tsr_mig_grant *out, struct tsr_diag *diag)
{
        for (unsigned g = 0; g < r->snap->n && g < r->n; g++) {
                const struct tsr_mig_card *card = &r->snap->card[g];
                int profile = offered_profile(r, g, r->req->profile);
                const struct tsr_mig_profile *mp;
                uint32_t claimed;

                if (profile < 0 || !card->mig ||
                    tsr_mig_markers_hold_card(r->markers, r->n_markers, card->uuid))
                        continue;
                mp = &r->caps[g].product->profiles[profile];
                claimed = tsr_geometry_occupied(r->caps[g].product, &r->ledger[g].live);
                for (size_t k = 0; k < card->n; k++) {
                        struct tsr_gpu_instance in = card->inst[k];
                        struct tsr_mig_marker m;
                        bool made_ci = in.n_ci == 0;
                        int rc;

                        if (in.gi_profile_id != mp->gi_profile_id ||
                            tsr_gpu_instance_subdivided(&in) ||
                            (claimed & tsr_geometry_span(in.start, in.size)) ||
                            marked(r, card->uuid, card, &card->inst[k]))
                                continue;
                        if (made_ci && (rc = make_ci(r, g, mp->name, &in, diag)))
                                return rc;
                        fill_marker(r, g, profile, &in, &m);
                        rc = mark(r, g, &m, made_ci, false, diag);
                        if (rc)
                                return rc;
                        grant(out, TSR_MIG_ADOPTED, g, profile, &m);
                        return 0;
                }
        }
        return 1;
}

/* Step 3: a new GPU instance and compute instance at the pick's placement. */
static int create(const struct reserve *r, struct tsr_mig_grant *out, struct tsr_diag *diag)
{
        uint32_t hw[TSR_MIG_CARDS_MAX] = {0};
        struct tsr_gpu_instance in;
        const struct tsr_mig_profile *mp;
        struct tsr_alloc_pick pick;
        struct tsr_mig_marker m;
        size_t n = r->n < r->snap->n ? r->n : r->snap->n;
        int rc;

        for (unsigned g = 0; g < n; g++)
                for (size_t k = 0; k < r->snap->card[g].n; k++)
                        hw[g] |= tsr_geometry_span(r->snap->card[g].inst[k].start,
                                                   r->snap->card[g].inst[k].size);
        rc = tsr_alloc_pick_partition(r->caps, r->ledger, hw, n, r->req->profile, &pick);
        if (rc)
                return tsr_diag_set(diag, rc, "no partitioned GPU has a free %s placement",
                                    r->req->profile);
        mp = &r->caps[pick.accel].product->profiles[pick.profile];
        memset(&in, 0, sizeof(in));
        in.start = pick.start;
        in.size = mp->size;
        rc = r->gpus->ops->gi_create(r->gpus->be, pick.accel, mp->gi_profile_id, pick.start,
                                     &in.gi_id);
        if (rc)
                return tsr_diag_set(diag, rc, "failed to create GPU instance %s: %s", mp->name,
                                    tsr_mig_nvml_error(rc));
        rc = make_ci(r, pick.accel, mp->name, &in, diag);
        if (rc) {
                r->gpus->ops->gi_destroy(r->gpus->be, pick.accel, in.gi_id);
                return rc;
        }
        fill_marker(r, pick.accel, pick.profile, &in, &m);
        rc = mark(r, pick.accel, &m, true, true, diag);
        if (rc)
                return rc;
        grant(out, TSR_MIG_CREATED, pick.accel, pick.profile, &m);
        return 0;
}

int tsr_mig_reserve(const struct tsr_mig_gpus *gpus, struct tsr_mig_store *store,
                    const struct tsr_accel_cap *caps, const struct tsr_accel_ledger *ledger,
                    size_t n, const struct tsr_mig_request *req, struct tsr_mig_grant *out,
                    struct tsr_diag *diag)
{
        struct reserve r = {gpus, store, caps, ledger, n, req, NULL, 0, NULL};
        int rc;

        rc = tsr_mig_store_list(store, &r.markers, &r.n_markers, diag);
        if (!rc)
                rc = tsr_mig_snapshot_new(gpus, &r.snap, diag);
        if (!rc)
                rc = reuse(&r, out, diag);
        if (rc == 1)
                rc = adopt(&r, out, diag);
        if (rc == 1)
                rc = create(&r, out, diag);
        free(r.snap);
        free(r.markers);
        return rc;
}

/* ---- the instance a container holds -------------------------------------------------------- */

/*
 * Whether the driver offers mp on GPU g now (profile_info at its NVML index, with the catalog's id
 * and compute slices, as detection asks it): 0 when it does, 1 when it does not, or the backend's
 * error with diag.
 */
static int driver_offers(const struct tsr_mig_gpus *gpus, unsigned g,
                         const struct tsr_mig_profile *mp, struct tsr_diag *diag)
{
        struct tsr_gpu_profile_info pi;
        const char *detail;
        int rc = gpus->ops->profile_info(gpus->be, g, mp->nvml_index, &pi);

        if (rc == TSR_ENOTSUP || rc == TSR_EINVAL || rc == TSR_ENOTFOUND)
                return 1;
        if (!rc)
                return pi.id == mp->gi_profile_id && pi.slices == mp->compute_slices ? 0 : 1;
        detail = gpus->ops->error_detail ? gpus->ops->error_detail(gpus->be) : "";
        return tsr_diag_set(diag, rc, "GPU %u: reading profile %s: %s%s%s", g, mp->name,
                            tsr_mig_nvml_error(rc), detail[0] ? ": " : "", detail);
}

/* The GPU instance gi_id on card, or NULL. */
static const struct tsr_gpu_instance *instance_by_id(const struct tsr_mig_card *card,
                                                     unsigned gi_id)
{
        for (size_t k = 0; k < card->n; k++)
                if (card->inst[k].gi_id == gi_id)
                        return &card->inst[k];
        return NULL;
}

/* The live checks of tsr_mig_held on marker m, once found on GPU g of snap. */
static int held_live(const struct tsr_mig_gpus *gpus, const struct tsr_accel_cap *cap,
                     const struct tsr_mig_card *c, unsigned g, const struct tsr_mig_marker *m,
                     struct tsr_diag *diag)
{
        const struct tsr_mig_profile *mp =
            cap->product ? tsr_product_profile(cap->product, m->profile) : NULL;
        const struct tsr_gpu_instance *in;
        bool offered = false;
        int rc;

        if (!c->mig)
                return tsr_diag_set(diag, TSR_ESTALE,
                                    "the MIG ownership marker of pod %s container %s records "
                                    "profile %s, which GPU %s no longer offers (MIG mode is off)",
                                    m->pod_uid, m->container, m->profile, m->card);
        if (mp && cap->partitioned &&
            (cap->offered >> (unsigned)(mp - cap->product->profiles)) & 1u) {
                rc = driver_offers(gpus, g, mp, diag);
                if (rc < 0)
                        return rc;
                offered = rc == 0;
        }
        if (!offered)
                return tsr_diag_set(diag, TSR_ESTALE,
                                    "the MIG ownership marker of pod %s container %s records "
                                    "profile %s, which GPU %s no longer offers",
                                    m->pod_uid, m->container, m->profile, m->card);
        in = instance_by_id(c, m->gi_id);
        if (!in)
                return tsr_diag_set(diag, TSR_ESTALE,
                                    "the MIG instance %s (GPU instance %u on %s) recorded for pod "
                                    "%s container %s is gone",
                                    m->mig_uuid, m->gi_id, m->card, m->pod_uid, m->container);
        if (!in->n_ci)
                return tsr_diag_set(diag, TSR_ESTALE,
                                    "the MIG instance %s (GPU instance %u on %s) recorded for pod "
                                    "%s container %s is gone: its GPU instance has no compute "
                                    "instance left",
                                    m->mig_uuid, m->gi_id, m->card, m->pod_uid, m->container);
        if (tsr_gpu_instance_subdivided(in))
                return tsr_diag_set(diag, TSR_ESTALE,
                                    "the MIG instance %s (GPU instance %u on %s) recorded for pod "
                                    "%s container %s was subdivided by hand (%u compute "
                                    "instances): it is no single device",
                                    m->mig_uuid, m->gi_id, m->card, m->pod_uid, m->container,
                                    in->n_ci);
        if (strcmp(in->mig_uuid, m->mig_uuid))
                return tsr_diag_set(diag, TSR_ESTALE,
                                    "the MIG instance %s (GPU instance %u on %s) recorded for pod "
                                    "%s container %s was recreated: GPU instance %u now carries %s",
                                    m->mig_uuid, m->gi_id, m->card, m->pod_uid, m->container,
                                    in->gi_id, in->mig_uuid);
        return 0;
}

int tsr_mig_held(const struct tsr_mig_gpus *gpus, struct tsr_mig_store *store,
                 const struct tsr_accel_cap *caps, size_t n, const char *pod_uid,
                 const char *container, const char *card, struct tsr_mig_marker *out, unsigned *gpu,
                 struct tsr_diag *diag)
{
        struct tsr_mig_marker_entry *markers = NULL;
        const struct tsr_mig_marker_entry *own = NULL, *elsewhere = NULL;
        struct tsr_mig_snapshot *snap = NULL;
        size_t n_markers = 0;
        int g = -1, rc;

        rc = tsr_mig_store_list(store, &markers, &n_markers, diag);
        for (size_t i = 0; !rc && i < n_markers && !own; i++) {
                const struct tsr_mig_marker_entry *e = &markers[i];

                if (!strcmp(e->pod_uid, pod_uid) && e->flooded)
                        rc = flooded(e, diag);
                if (strcmp(e->pod_uid, pod_uid) || strcmp(e->container, container))
                        continue;
                if (!strcmp(e->card, card))
                        own = e;
                else if (!elsewhere)
                        elsewhere = e;
        }
        if (rc)
                goto out;
        if (!own && elsewhere) {
                rc = tsr_diag_set(diag, TSR_ESTALE,
                                  "the MIG ownership marker of pod %s container %s names GPU %s, "
                                  "not GPU %s its allocation records",
                                  pod_uid, container, elsewhere->card, card);
                goto out;
        }
        if (!own) {
                rc = tsr_diag_set(diag, TSR_ESTALE,
                                  "the MIG ownership marker of pod %s container %s on GPU %s is "
                                  "missing",
                                  pod_uid, container, card);
                goto out;
        }
        if (own->corrupt) {
                rc = tsr_diag_set(diag, TSR_ESTALE,
                                  "the MIG ownership marker %s of pod %s container %s is corrupt "
                                  "(%s)",
                                  own->path, pod_uid, container, own->why);
                goto out;
        }
        rc = tsr_mig_snapshot_new(gpus, &snap, diag);
        if (rc)
                goto out;
        g = tsr_mig_snapshot_find(snap, own->m.card);
        if (g < 0 || (size_t)g >= n || strcmp(caps[g].uuid, own->m.card)) {
                rc = tsr_diag_set(diag, TSR_ESTALE,
                                  "the MIG ownership marker of pod %s container %s names GPU %s, "
                                  "which is not a GPU of this node",
                                  pod_uid, container, own->m.card);
                goto out;
        }
        rc = held_live(gpus, &caps[g], &snap->card[g], (unsigned)g, &own->m, diag);
        if (!rc) {
                *out = own->m;
                *gpu = (unsigned)g;
        }
out:
        free(snap);
        free(markers);
        return rc;
}
