/*
 * reclaim.c - the reclaim pass and recovery (reclaim.h). Debounce state lives in the reclaimer,
 * keyed by marker path or by orphan identity, and is forgotten for whatever a pass no longer sees.
 */
#include "mig/reclaim.h"

#include "base/err.h"
#include "core/geometry.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATE_KEY_MAX (TSR_MIG_PATH_MAX + 64)
#define STATES_MAX    (TSR_MIG_MARKERS_MAX + TSR_MIG_CARDS_MAX * TSR_GPU_INSTANCES_MAX)

struct debounce {
        char key[STATE_KEY_MAX];
        unsigned misses;         /* consecutive passes the owner was absent (orphan: drained) */
        unsigned destroy_misses; /* consecutive destroys refused with IN_USE */
        unsigned hold_misses;    /* consecutive passes a corrupt marker was held */
        bool seen;               /* looked at in this pass */
};

struct tsr_mig_reclaimer {
        struct tsr_mig_gpus gpus;
        struct tsr_mig_store *store;
        tsr_mig_log_fn *log;
        void *log_arg;
        size_t n, cap; /* states[0..n) */
        struct debounce *states;
};

/* One pass's inputs, read up front. */
struct pass {
        struct tsr_mig_reclaimer *r;
        const struct tsr_mig_view *view;
        struct tsr_mig_pass_stats *stats;
        struct tsr_mig_marker_entry *markers;
        size_t n_markers;
        struct tsr_mig_snapshot *snap;
};

static void logf_(const struct tsr_mig_reclaimer *r, enum tsr_mig_log_level level, const char *fmt,
                  ...) __attribute__((format(printf, 3, 4)));

static void logf_(const struct tsr_mig_reclaimer *r, enum tsr_mig_log_level level, const char *fmt,
                  ...)
{
        char msg[1024];
        va_list ap;

        if (!r->log)
                return;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        r->log(r->log_arg, level, msg);
}

int tsr_mig_reclaimer_new(const struct tsr_mig_gpus *gpus, struct tsr_mig_store *store,
                          tsr_mig_log_fn *log, void *log_arg, struct tsr_mig_reclaimer **out)
{
        struct tsr_mig_reclaimer *r = calloc(1, sizeof(*r));

        if (!r)
                return TSR_ENOMEM;
        r->gpus = *gpus;
        r->store = store;
        r->log = log;
        r->log_arg = log_arg;
        *out = r;
        return 0;
}

void tsr_mig_reclaimer_free(struct tsr_mig_reclaimer *r)
{
        if (!r)
                return;
        free(r->states);
        free(r);
}

/* The debounce state of key, created at zero; NULL when out of memory (nothing is then done). */
static struct debounce *state(struct tsr_mig_reclaimer *r, const char *key)
{
        struct debounce *d;

        for (size_t i = 0; i < r->n; i++)
                if (!strcmp(r->states[i].key, key)) {
                        r->states[i].seen = true;
                        return &r->states[i];
                }
        if (r->n == r->cap) {
                size_t cap = r->cap ? r->cap * 2 : 32;
                struct debounce *s;

                if (cap > STATES_MAX || !(s = realloc(r->states, cap * sizeof(*s))))
                        return NULL;
                r->states = s;
                r->cap = cap;
        }
        d = &r->states[r->n++];
        memset(d, 0, sizeof(*d));
        snprintf(d->key, sizeof(d->key), "%s", key);
        d->seen = true;
        return d;
}

/* Forgets the state of everything this pass did not look at. */
static void forget_unseen(struct tsr_mig_reclaimer *r)
{
        size_t k = 0;

        for (size_t i = 0; i < r->n; i++)
                if (r->states[i].seen) {
                        r->states[i].seen = false;
                        r->states[k++] = r->states[i];
                }
        r->n = k;
}

static bool live(const struct tsr_mig_view *v, const char *uid)
{
        for (size_t i = 0; i < v->n_live; i++)
                if (!strcmp(v->live[i], uid))
                        return true;
        return false;
}

static bool drained(const struct tsr_mig_view *v, const char *card)
{
        for (size_t i = 0; i < v->n_claims; i++)
                if (!strcmp(v->claims[i].card, card))
                        return false;
        return true;
}

static bool marked(const struct pass *p, const struct tsr_mig_card *card,
                   const struct tsr_gpu_instance *in)
{
        for (size_t i = 0; i < p->n_markers; i++) {
                const struct tsr_mig_marker_entry *e = &p->markers[i];

                if (!e->corrupt && !strcmp(e->m.card, card->uuid) &&
                    tsr_mig_owned(card, &e->m, true) == in)
                        return true;
        }
        return false;
}

/* Reads the markers and every card; refuses a subdivided instance. */
static int read_all(struct pass *p, struct tsr_diag *diag)
{
        int rc;

        rc = tsr_mig_store_list(p->r->store, &p->markers, &p->n_markers, diag);
        if (!rc)
                rc = tsr_mig_snapshot_new(&p->r->gpus, &p->snap, diag);
        return rc;
}

static int refuse_subdivided(const struct pass *p, struct tsr_diag *diag)
{
        for (unsigned g = 0; g < p->snap->n; g++)
                for (size_t k = 0; k < p->snap->card[g].n; k++) {
                        const struct tsr_gpu_instance *in = &p->snap->card[g].inst[k];

                        if (tsr_gpu_instance_subdivided(in))
                                return tsr_diag_set(diag, TSR_ENOTSUP,
                                                    "GPU %u (%s): GPU instance %u was subdivided "
                                                    "by hand (%u compute instances); nothing is "
                                                    "reclaimed on this node until it is back to "
                                                    "one compute instance",
                                                    g, p->snap->card[g].uuid, in->gi_id, in->n_ci);
                }
        return 0;
}

enum outcome { KEPT, GONE };

/* A destroy the driver refused: IN_USE is a straggler, retried every pass. */
static enum outcome refused(struct pass *p, struct debounce *st, unsigned g,
                            const struct tsr_gpu_instance *in, const char *call, int rc)
{
        const char *detail =
            p->r->gpus.ops->error_detail ? p->r->gpus.ops->error_detail(p->r->gpus.be) : "";

        if (rc != TSR_EINUSE) {
                logf_(p->r, TSR_MIG_LOG_ERROR,
                      "GPU %u (%s): %s of GPU instance %u failed: %s%s%s; retried next pass", g,
                      p->snap->card[g].uuid, call, in->gi_id, tsr_mig_nvml_error(rc),
                      detail[0] ? ": " : "", detail);
                return KEPT;
        }
        p->stats->in_use++;
        if (st && ++st->destroy_misses % TSR_MIG_RECLAIM_MAX_DESTROY_MISSES == 0)
                logf_(p->r, TSR_MIG_LOG_WARN,
                      "GPU %u (%s): GPU instance %u (%s) is still in use after %u reclaim "
                      "passes; a process holds it",
                      g, p->snap->card[g].uuid, in->gi_id, in->mig_uuid, st->destroy_misses);
        return KEPT;
}

/*
 * Destroys the instance like target on card g, after re-reading the card: compute instance, then
 * GPU instance. GONE when it no longer exists afterwards (destroyed now, or already gone).
 */
static enum outcome destroy(struct pass *p, struct debounce *st, unsigned g,
                            const struct tsr_gpu_instance *target, const char *why)
{
        const struct tsr_gpu_ops *ops = p->r->gpus.ops;
        void *be = p->r->gpus.be;
        struct tsr_mig_card card;
        const struct tsr_gpu_instance *in = NULL;
        struct tsr_diag diag;
        uint32_t span;
        int rc;

        tsr_diag_clear(&diag);
        if (tsr_mig_card_read(&p->r->gpus, g, &card, &diag)) {
                logf_(p->r, TSR_MIG_LOG_ERROR, "re-reading before a destroy: %s", diag.msg);
                return KEPT;
        }
        for (size_t k = 0; k < card.n && !in; k++)
                if (card.inst[k].gi_id == target->gi_id && card.inst[k].start == target->start &&
                    (card.inst[k].n_ci == 0 || !strcmp(card.inst[k].mig_uuid, target->mig_uuid)))
                        in = &card.inst[k];
        if (!in)
                return GONE;
        if (tsr_gpu_instance_subdivided(in))
                return KEPT; /* the next pass refuses the node */
        span = tsr_geometry_span(in->start, in->size);
        for (size_t i = 0; i < p->view->n_claims; i++) {
                const struct tsr_mig_claim *c = &p->view->claims[i];

                if (c->partition && !strcmp(c->card, card.uuid) && live(p->view, c->pod_uid) &&
                    (tsr_geometry_span(c->start, c->length) & span)) {
                        p->stats->held++;
                        logf_(p->r, TSR_MIG_LOG_ERROR,
                              "GPU %u (%s): GPU instance %u at %u+%u is kept: running pod %s "
                              "claims placement %u+%u by its allocation annotation",
                              g, card.uuid, in->gi_id, in->start, in->size, c->pod_uid, c->start,
                              c->length);
                        return KEPT;
                }
        }
        if (in->n_ci && (rc = ops->ci_destroy(be, g, in->gi_id, in->ci_id)) && rc != TSR_ENOTFOUND)
                return refused(p, st, g, in, "destroying the compute instance", rc);
        rc = ops->gi_destroy(be, g, in->gi_id);
        if (rc && rc != TSR_ENOTFOUND)
                return refused(p, st, g, in, "destroying the GPU instance", rc);
        p->stats->destroyed++;
        logf_(p->r, TSR_MIG_LOG_INFO, "GPU %u (%s): destroyed GPU instance %u at %u+%u (%s)", g,
              card.uuid, target->gi_id, target->start, target->size, why);
        return GONE;
}

static void remove_marker(struct pass *p, const struct tsr_mig_marker_entry *e, const char *why)
{
        struct tsr_diag diag;

        tsr_diag_clear(&diag);
        if (tsr_mig_store_remove(p->r->store, e->path, &diag)) {
                logf_(p->r, TSR_MIG_LOG_ERROR, "removing MIG marker: %s", diag.msg);
                return;
        }
        p->stats->markers_removed++;
        logf_(p->r, TSR_MIG_LOG_INFO, "removed MIG marker %s (%s)", e->path, why);
}

static void sweep_corrupt(struct pass *p, const struct tsr_mig_marker_entry *e, struct debounce *st)
{
        /* A flood is never removed here: its directory, once its Pod is gone, is the kubelet's. */
        if (e->flooded) {
                p->stats->held++;
                if (++st->hold_misses % TSR_MIG_RECLAIM_MAX_CORRUPT_HOLD_MISSES == 0)
                        logf_(p->r, TSR_MIG_LOG_WARN,
                              "%s: %s, held for %u passes; no unmarked instance on any GPU is "
                              "reclaimed until the directory is gone",
                              e->path, e->why, st->hold_misses);
                return;
        }
        if (live(p->view, e->pod_uid)) {
                st->misses = 0;
                p->stats->held++;
                if (++st->hold_misses % TSR_MIG_RECLAIM_MAX_CORRUPT_HOLD_MISSES == 0)
                        logf_(p->r, TSR_MIG_LOG_WARN,
                              "corrupt MIG marker %s held for %u passes (%s): pod %s is live; no "
                              "unmarked instance on %s is reclaimed meanwhile",
                              e->path, st->hold_misses, e->why, e->pod_uid, e->card);
                return;
        }
        if (++st->misses >= TSR_MIG_RECLAIM_MAX_MISSES)
                remove_marker(p, e, "corrupt, and its pod is gone");
}

static void sweep_marker(struct pass *p, const struct tsr_mig_marker_entry *e)
{
        char key[STATE_KEY_MAX];
        struct debounce *st;
        const struct tsr_gpu_instance *in = NULL;
        int g;

        snprintf(key, sizeof(key), "m:%s", e->path);
        st = state(p->r, key);
        if (!st)
                return;
        if (e->corrupt) {
                sweep_corrupt(p, e, st);
                return;
        }
        if (live(p->view, e->m.pod_uid)) {
                st->misses = st->destroy_misses = 0;
                return;
        }
        if (++st->misses < TSR_MIG_RECLAIM_MAX_MISSES)
                return;
        g = tsr_mig_snapshot_find(p->snap, e->m.card);
        if (g >= 0)
                in = tsr_mig_owned(&p->snap->card[g], &e->m, true);
        if (!in) {
                remove_marker(p, e, "its instance is gone");
                return;
        }
        if (destroy(p, st, (unsigned)g, in, "its pod is gone") == GONE)
                remove_marker(p, e, "its instance was destroyed");
}

static void sweep_orphans(struct pass *p, unsigned g)
{
        const struct tsr_mig_card *card = &p->snap->card[g];
        bool hold = tsr_mig_markers_hold_card(p->markers, p->n_markers, card->uuid),
             idle = drained(p->view, card->uuid);

        for (size_t k = 0; k < card->n; k++) {
                const struct tsr_gpu_instance *in = &card->inst[k];
                char key[STATE_KEY_MAX];
                struct debounce *st;

                if (marked(p, card, in))
                        continue;
                snprintf(key, sizeof(key), "o:%s:%u:%u:%s", card->uuid, in->gi_id, in->start,
                         in->mig_uuid);
                st = state(p->r, key);
                if (!st)
                        continue;
                if (hold) {
                        st->misses = 0;
                        p->stats->held++;
                        continue;
                }
                if (!idle) {
                        st->misses = st->destroy_misses = 0;
                        continue;
                }
                if (++st->misses >= TSR_MIG_RECLAIM_MAX_MISSES)
                        destroy(p, st, g, in, "an orphan on a drained GPU");
        }
}

int tsr_mig_reclaim_pass(struct tsr_mig_reclaimer *r, const struct tsr_mig_view *view,
                         struct tsr_mig_pass_stats *stats, struct tsr_diag *diag)
{
        struct tsr_mig_pass_stats local = {0, 0, 0, 0};
        struct pass p = {r, view, &local, NULL, 0, NULL};
        int rc = read_all(&p, diag);

        if (!rc)
                rc = refuse_subdivided(&p, diag);
        if (rc) {
                logf_(r, TSR_MIG_LOG_ERROR, "MIG reclaim pass skipped, nothing reclaimed: %s",
                      diag ? diag->msg : tsr_strerror(rc));
        } else {
                for (size_t i = 0; i < p.n_markers; i++)
                        sweep_marker(&p, &p.markers[i]);
                for (unsigned g = 0; g < p.snap->n; g++)
                        sweep_orphans(&p, g);
                forget_unseen(r);
        }
        free(p.snap);
        free(p.markers);
        if (!rc && stats)
                *stats = local;
        return rc;
}

int tsr_mig_reclaim_recover(struct tsr_mig_reclaimer *r, struct tsr_mig_recovery *out,
                            struct tsr_diag *diag)
{
        struct tsr_mig_recovery rec = {0, 0, 0, 0};
        struct pass p = {r, NULL, NULL, NULL, 0, NULL};
        int rc = read_all(&p, diag);

        if (rc) {
                logf_(r, TSR_MIG_LOG_ERROR,
                      "MIG recovery: %s; nothing will be reclaimed until "
                      "it reads",
                      diag ? diag->msg : tsr_strerror(rc));
                goto out;
        }
        for (size_t i = 0; i < p.n_markers; i++) {
                const struct tsr_mig_marker_entry *e = &p.markers[i];
                int g;

                if (e->corrupt) {
                        rec.corrupt++;
                        logf_(r, TSR_MIG_LOG_WARN, "MIG recovery: corrupt marker %s: %s", e->path,
                              e->why);
                        continue;
                }
                rec.markers++;
                g = tsr_mig_snapshot_find(p.snap, e->m.card);
                if (g >= 0 && tsr_mig_owned(&p.snap->card[g], &e->m, false))
                        continue;
                rec.stale++;
                logf_(r, TSR_MIG_LOG_WARN,
                      "MIG recovery: pod %s container %s lost its MIG instance %s (GPU instance "
                      "%u on %s: a GPU reset or a reboot); its device allocation fails closed "
                      "until the pod is recreated",
                      e->m.pod_uid, e->m.container, e->m.mig_uuid, e->m.gi_id, e->m.card);
        }
        for (unsigned g = 0; g < p.snap->n; g++)
                for (size_t k = 0; k < p.snap->card[g].n; k++)
                        rec.orphans += !marked(&p, &p.snap->card[g], &p.snap->card[g].inst[k]);
        *out = rec;
out:
        free(p.snap);
        free(p.markers);
        return rc;
}
