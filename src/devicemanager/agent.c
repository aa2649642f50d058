/*
 * agent.c - the node's device-plugin state and Allocate under the node-wide lock.
 */
#include "devicemanager/agent.h"

#include "base/err.h"
#include "codec/alloc_annotation.h"
#include "codec/pod_spec.h"
#include "core/pod_resources.h"
#include "core/tokens.h"
#include "deviceplugin/preferred.h"
#include "devicemanager/grant_file.h"
#include "mig/carve.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * An Allocate whose annotation the Pod does not show yet. A visibility grant is reserved too, so
 * that its container is not named again, but charges nothing and is never written into the
 * annotation: it lasts until its Pod is gone.
 */
struct reservation {
        struct tsr_grant g;
        bool recorded;   /* the annotation write succeeded (the watch may lag behind it) */
        bool visibility; /* a visibility grant: nothing to record (recorded is true) */
};

struct subscriber {
        void (*fn)(void *ctx);
        void *ctx;
};

/* A Pod whose records a ledger build left out; logged once, when it first is. */
struct offender {
        char uid[128];
        bool seen; /* by the build in progress */
};

/* A log line made under mu, logged once mu is released. */
struct note {
        const char *level;
        char msg[1024];
};

#define NOTES_MAX 16
/* offend()'s longest note: an accelerator UUID, the Pod's namespace, name and uid, what named
 * the accelerator and why it is held back, besides its own words (at most 1297 bytes with the
 * callers' buffers), so that none is cut */
#define HELD_BACK_MAX 1312

struct tsr_dm_agent {
        pthread_mutex_t mu; /* the node-wide allocation lock; guards everything below */
        struct tsr_accel_cap *caps;
        struct tsr_dp_node node;
        struct tsr_dm_agent_opts opts;
        struct reservation *res;
        size_t n_res, cap_res;
        struct subscriber *subs;
        size_t n_subs;
        /* per accelerator, from the last ledger build: why it takes no new grant ("": it does) */
        char (*held_back)[HELD_BACK_MAX];
        struct offender *off; /* the Pods the last builds left out */
        size_t n_off, cap_off;
        struct note notes[NOTES_MAX];
        size_t n_notes;
        /* how many reservations settle has dropped, ever (record's reuse of a Pod checks it) */
        unsigned long settled;
        /* the device view: the last ledger published and its held-back accelerators (node.n) */
        struct tsr_accel_ledger *view;
        bool *view_held;
        bool have_view;
};

static const char *str_at(json_t *o, const char *a, const char *b)
{
        return json_string_value(json_object_get(json_object_get(o, a), b));
}

static void logf_(struct tsr_dm_agent *a, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void logf_(struct tsr_dm_agent *a, const char *level, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;

        if (!a->opts.log)
                return;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        a->opts.log(a->opts.ctx, level, msg);
}

static bool note(struct tsr_dm_agent *a, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Queues a log line under mu (flush_notes logs it); false when the queue is full. */
static bool note(struct tsr_dm_agent *a, const char *level, const char *fmt, ...)
{
        va_list ap;

        if (a->n_notes == NOTES_MAX)
                return false;
        a->notes[a->n_notes].level = level;
        va_start(ap, fmt);
        vsnprintf(a->notes[a->n_notes].msg, sizeof(a->notes[0].msg), fmt, ap);
        va_end(ap);
        a->n_notes++;
        return true;
}

/* Logs the queued lines, without mu. */
static void flush_notes(struct tsr_dm_agent *a)
{
        struct note *n;
        size_t k;

        pthread_mutex_lock(&a->mu);
        k = a->n_notes;
        n = k ? malloc(k * sizeof(*n)) : NULL;
        if (n) {
                memcpy(n, a->notes, k * sizeof(*n));
                a->n_notes = 0;
        }
        pthread_mutex_unlock(&a->mu);
        for (size_t i = 0; n && i < k; i++)
                if (a->opts.log)
                        a->opts.log(a->opts.ctx, n[i].level, n[i].msg);
        free(n);
}

/* ---- the grant journal ---------------------------------------------------------------------- */

/*
 * Writes every reservation that charges (all but visibility grants) to the grant journal; no
 * journal configured: nothing. Under mu. Returns 0, or the journal's error with diag.
 */
static int persist(struct tsr_dm_agent *a, struct tsr_diag *diag)
{
        struct tsr_grant *g;
        size_t n = 0;
        int rc;

        if (!a->opts.grants_path)
                return 0;
        g = malloc((a->n_res ? a->n_res : 1) * sizeof(*g));
        if (!g)
                return tsr_diag_set(diag, TSR_ENOMEM, "grant journal: out of memory");
        for (size_t k = 0; k < a->n_res; k++)
                if (!a->res[k].visibility)
                        g[n++] = a->res[k].g;
        rc = tsr_dm_grant_file_save(a->opts.grants_path, g, n, diag);
        free(g);
        return rc;
}

/*
 * Takes the grants a previous run journaled back as reservations, none recorded yet (sync records
 * them, or settles them once the Pods show them or are gone). Before the agent serves anything.
 */
static int restore(struct tsr_dm_agent *a, struct tsr_diag *diag)
{
        struct tsr_grant *g = NULL;
        size_t n = 0;
        int rc;

        if (!a->opts.grants_path)
                return 0;
        rc = tsr_dm_grant_file_load(a->opts.grants_path, &g, &n, diag);
        if (rc)
                return rc;
        if (n && !(a->res = calloc(n, sizeof(*a->res)))) {
                free(g);
                return tsr_diag_set(diag, TSR_ENOMEM, "device manager: out of memory");
        }
        for (size_t k = 0; k < n; k++)
                a->res[k].g = g[k];
        a->n_res = a->cap_res = n;
        free(g);
        if (n)
                logf_(a, "info",
                      "restored %zu grant(s) from the grant journal %s; they stay charged until "
                      "their Pods' allocation annotations show them or the Pods are gone",
                      n, a->opts.grants_path);
        return 0;
}

int tsr_dm_agent_new(const struct tsr_accel_cap *caps, size_t n,
                     const struct tsr_dm_agent_opts *opts, struct tsr_dm_agent **out,
                     struct tsr_diag *diag)
{
        struct tsr_dm_agent *a = calloc(1, sizeof(*a));
        int rc;

        if (!a || !(a->caps = malloc(n * sizeof(*caps))) ||
            !(a->held_back = calloc(n ? n : 1, sizeof(*a->held_back))) ||
            !(a->view = calloc(n ? n : 1, sizeof(*a->view))) ||
            !(a->view_held = calloc(n ? n : 1, sizeof(*a->view_held)))) {
                if (a) {
                        free(a->caps);
                        free(a->held_back);
                        free(a->view);
                }
                free(a);
                return tsr_diag_set(diag, TSR_ENOMEM, "device manager: out of memory");
        }
        memcpy(a->caps, caps, n * sizeof(*caps));
        rc = tsr_dp_node_init(&a->node, a->caps, n);
        if (rc) {
                free(a->view_held);
                free(a->view);
                free(a->held_back);
                free(a->caps);
                free(a);
                return tsr_diag_set(diag, rc,
                                    "device manager: the detected accelerators are not one "
                                    "product indexed from 0");
        }
        a->opts = *opts;
        pthread_mutex_init(&a->mu, NULL);
        rc = restore(a, diag);
        if (rc) {
                tsr_dm_agent_free(a);
                return rc;
        }
        *out = a;
        return 0;
}

void tsr_dm_agent_free(struct tsr_dm_agent *a)
{
        if (!a)
                return;
        pthread_mutex_destroy(&a->mu);
        free(a->res);
        free(a->subs);
        free(a->held_back);
        free(a->view);
        free(a->view_held);
        free(a->off);
        free(a->caps);
        free(a);
}

const struct tsr_dp_node *tsr_dm_agent_node(const struct tsr_dm_agent *a)
{
        return &a->node;
}

int tsr_dm_agent_subscribe(struct tsr_dm_agent *a, void (*fn)(void *ctx), void *ctx)
{
        struct subscriber *s;

        pthread_mutex_lock(&a->mu);
        s = realloc(a->subs, (a->n_subs + 1) * sizeof(*s));
        if (s) {
                a->subs = s;
                a->subs[a->n_subs++] = (struct subscriber){fn, ctx};
        }
        pthread_mutex_unlock(&a->mu);
        return s ? 0 : TSR_ENOMEM;
}

/* Calls the subscribers (without mu); they read the view. */
static void notify(struct tsr_dm_agent *a)
{
        struct subscriber subs[16];
        size_t n;

        pthread_mutex_lock(&a->mu);
        n = a->n_subs < 16 ? a->n_subs : 16;
        if (n) /* a->subs is NULL until the first subscriber */
                memcpy(subs, a->subs, n * sizeof(*subs));
        pthread_mutex_unlock(&a->mu);
        for (size_t i = 0; i < n; i++)
                subs[i].fn(subs[i].ctx);
}

void tsr_dm_agent_changed(struct tsr_dm_agent *a)
{
        bool any;

        pthread_mutex_lock(&a->mu);
        any = a->n_subs > 0;
        pthread_mutex_unlock(&a->mu);
        if (!any) /* nobody reads the view: no Pods read for it */
                return;
        tsr_dm_agent_refresh_view(a);
        notify(a);
}

/* ---- the ledger ----------------------------------------------------------------------------- */

/* pod's allocation annotation value, or NULL. */
static const char *annotation_of(json_t *pod)
{
        return json_string_value(
            json_object_get(json_object_get(json_object_get(pod, "metadata"), "annotations"),
                            TSR_ALLOC_ANNOTATION));
}

/* Decodes pod's allocation annotation into alloc[0..*na) (none when absent or unreadable). */
static void pod_allocation(json_t *pod, struct tsr_container_allocation *alloc, size_t *na)
{
        if (tsr_alloc_annotation_of_pod(pod, alloc, TSR_ALLOC_CONTAINERS_MAX, na, NULL))
                *na = 0;
}

static bool names_container(const struct tsr_container_allocation *alloc, size_t na,
                            const char *container)
{
        for (size_t i = 0; i < na; i++)
                if (!strcmp(alloc[i].container, container))
                        return true;
        return false;
}

static json_t *pod_by_uid(json_t *pods, const char *uid)
{
        size_t i;
        json_t *p;

        json_array_foreach(pods, i, p)
        {
                const char *u = str_at(p, "metadata", "uid");

                if (u && !strcmp(u, uid))
                        return p;
        }
        return NULL;
}

/*
 * Drops reservations the Pods settled: annotated, or their Pod gone. Under mu, with pods fetched
 * under it too: every reservation was made from an earlier list that held its Pod, so a Pod this
 * list lacks was deleted since (a list fetched before taking mu may predate the reservation).
 */
static void settle(struct tsr_dm_agent *a, json_t *pods)
{
        struct tsr_container_allocation *alloc;
        struct tsr_diag d;
        bool journaled = false;
        size_t k = 0;

        if (!pods)
                return;
        alloc = malloc(TSR_ALLOC_CONTAINERS_MAX * sizeof(*alloc));
        if (!alloc)
                return;
        while (k < a->n_res) {
                struct reservation *r = &a->res[k];
                json_t *p = pod_by_uid(pods, r->g.uid);
                size_t na = 0;

                if (p)
                        pod_allocation(p, alloc, &na);
                if (!p || names_container(alloc, na, r->g.alloc.container)) {
                        journaled |= !r->visibility;
                        memmove(r, r + 1, (a->n_res - k - 1) * sizeof(*r));
                        a->n_res--;
                        a->settled++;
                        continue;
                }
                k++;
        }
        free(alloc);
        tsr_diag_clear(&d);
        if (journaled && persist(a, &d)) /* harmless: a restart settles them again */
                note(a, "warn", "the grant journal still holds grants now settled: %s", d.msg);
}

/* Scratch storage of one ledger build. */
struct build {
        struct tsr_container_allocation *alloc; /* TSR_ALLOC_CONTAINERS_MAX */
        struct tsr_alloc_record recs[TSR_ALLOC_ACCELS_MAX];
        struct tsr_accel_ledger *saved; /* node.n: entries before the Pod being charged */
        bool *touched;                  /* node.n: saved holds the entry */
};

/*
 * Charges one Pod's allocation alloc[0..na) (finished: its Pod's whole GPUs, shares and slices are
 * released) to ledger, all or nothing. Returns 0, or TSR_EINVAL with why (ledger unchanged).
 */
static int charge_all(struct tsr_dm_agent *a, struct build *b,
                      const struct tsr_container_allocation *alloc, size_t na, bool finished,
                      struct tsr_accel_ledger *ledger, char *why, size_t len)
{
        int rc = 0;

        for (size_t c = 0; c < na && !rc; c++) {
                size_t nrec = 0;

                if (tsr_alloc_annotation_records(&alloc[c], 1, a->node.product, finished, b->recs,
                                                 TSR_ALLOC_ACCELS_MAX, &nrec)) {
                        snprintf(why, len, "container %s names more than %d accelerators",
                                 alloc[c].container, TSR_ALLOC_ACCELS_MAX);
                        rc = TSR_EINVAL;
                }
                for (size_t k = 0; k < nrec && !rc; k++) {
                        unsigned g = b->recs[k].accel;
                        struct tsr_diag d;

                        if (g >= a->node.n) {
                                snprintf(why, len,
                                         "container %s names accelerator %u of the node's %zu",
                                         alloc[c].container, g, a->node.n);
                                rc = TSR_EINVAL;
                                break;
                        }
                        if (!b->touched[g]) {
                                b->touched[g] = true;
                                b->saved[g] = ledger[g];
                        }
                        tsr_diag_clear(&d);
                        rc = tsr_ledger_charge(&a->caps[g], &ledger[g], &b->recs[k], &d);
                        if (rc)
                                snprintf(why, len, "container %s: %.300s", alloc[c].container,
                                         d.msg);
                }
        }
        for (size_t g = 0; g < a->node.n; g++) {
                if (rc && b->touched[g])
                        ledger[g] = b->saved[g];
                b->touched[g] = false;
        }
        return rc;
}

/* Whether alloc[0..na) names accelerator g, by index or by UUID. */
static bool names_accel(const struct tsr_dm_agent *a, const struct tsr_container_allocation *alloc,
                        size_t na, size_t g)
{
        for (size_t c = 0; c < na; c++)
                for (size_t x = 0; x < alloc[c].n; x++)
                        if (alloc[c].accels[x].index == g ||
                            !strcmp(alloc[c].accels[x].id, a->caps[g].uuid))
                                return true;
        return false;
}

/*
 * Leaves the records of Pod uid (ns/name) out of the ledger being built: what (its annotation, or
 * a reservation) failed as why says. Every accelerator it names -- alloc[0..na) by index or UUID,
 * or, when text is given (an annotation that does not decode), every one whose UUID the text
 * holds -- takes no new grant while it stays so; the Pod is logged the first time. Under mu.
 */
static void offend(struct tsr_dm_agent *a, const char *uid, const char *ns, const char *name,
                   const char *what, const char *why, const struct tsr_container_allocation *alloc,
                   size_t na, const char *text)
{
        char gpus[160] = "", tail[256];
        size_t len = 0, named = 0;
        struct offender *o;

        for (size_t g = 0; g < a->node.n; g++) {
                if (text ? !strstr(text, a->caps[g].uuid) : !names_accel(a, alloc, na, g))
                        continue;
                if (!a->held_back[g][0])
                        snprintf(a->held_back[g], sizeof(a->held_back[g]),
                                 "accelerator %s (index %zu) is named by %s of Pod %s/%s (uid %s), "
                                 "which %s; it takes no new grant until that is fixed or the Pod "
                                 "is gone",
                                 a->caps[g].uuid, g, what, ns, name, uid, why);
                if (len < sizeof(gpus))
                        len += (size_t)snprintf(gpus + len, sizeof(gpus) - len, "%s%zu",
                                                len ? ", " : "", g);
                named++;
        }
        for (size_t k = 0; k < a->n_off; k++)
                if (!strcmp(a->off[k].uid, uid)) {
                        a->off[k].seen = true;
                        return;
                }
        if (a->n_off == a->cap_off) {
                size_t cap = a->cap_off ? a->cap_off * 2 : 8;

                o = realloc(a->off, cap * sizeof(*o));
                if (!o)
                        return;
                a->off = o;
                a->cap_off = cap;
        }
        if (named)
                snprintf(tail, sizeof(tail),
                         "GPU%s %s take%s no new grant until it is fixed or the Pod is gone",
                         named > 1 ? "s" : "", gpus, named > 1 ? "" : "s");
        else
                snprintf(tail, sizeof(tail), "it names no GPU of this node");
        /* a line that does not fit the queue now is logged by a later build */
        if (!note(a, "error",
                  "%s of Pod %s/%s (uid %s) %s; its records are left out of the ledger, and %s",
                  what, ns, name, uid, why, tail))
                return;
        o = &a->off[a->n_off++];
        snprintf(o->uid, sizeof(o->uid), "%s", uid);
        o->seen = true;
}

/*
 * Builds the ledger from the reservations and pods' annotations (pods_known: pods is the API
 * server's list, not a stand-in). A reservation or a Pod whose records cannot be charged is left
 * out (offend). Under mu. Returns 0, or TSR_ENOMEM.
 */
static int build_ledger(struct tsr_dm_agent *a, json_t *pods, bool pods_known,
                        struct tsr_accel_ledger *ledger, struct tsr_diag *diag)
{
        struct build b = {malloc(TSR_ALLOC_CONTAINERS_MAX * sizeof(*b.alloc)),
                          {{0}},
                          malloc(a->node.n * sizeof(*b.saved)),
                          calloc(a->node.n, sizeof(bool))};
        char why[384], msg[416];
        json_t *p;
        size_t i, k;
        int rc = 0;

        if (!b.alloc || !b.saved || !b.touched) {
                rc = tsr_diag_set(diag, TSR_ENOMEM, "device manager: out of memory");
                goto out;
        }
        for (size_t g = 0; g < a->node.n; g++) {
                tsr_ledger_reset(&ledger[g]);
                a->held_back[g][0] = '\0';
        }
        for (k = 0; k < a->n_off; k++)
                a->off[k].seen = false;
        /* the grants made here first: an annotation that contradicts one is the one left out */
        for (k = 0; k < a->n_res; k++) {
                const struct reservation *r = &a->res[k];

                if (!charge_all(a, &b, &r->g.alloc, 1, false, ledger, why, sizeof(why)))
                        continue;
                snprintf(msg, sizeof(msg), "cannot be charged: %s", why);
                offend(a, r->g.uid, r->g.ns, r->g.name, "a reservation", msg, &r->g.alloc, 1, NULL);
        }
        json_array_foreach(pods, i, p)
        {
                const char *v = annotation_of(p), *uid = str_at(p, "metadata", "uid");
                const char *ns = str_at(p, "metadata", "namespace");
                const char *name = str_at(p, "metadata", "name");
                struct tsr_diag d;
                size_t na = 0;
                bool decoded;

                if (!v)
                        continue;
                tsr_diag_clear(&d);
                decoded =
                    !tsr_alloc_annotation_decode(v, b.alloc, TSR_ALLOC_CONTAINERS_MAX, &na, &d);
                if (!decoded)
                        snprintf(msg, sizeof(msg), "does not decode: %.380s", d.msg);
                else if (charge_all(a, &b, b.alloc, na,
                                    a->opts.release_terminated && tsr_pod_finished(p), ledger, why,
                                    sizeof(why)))
                        snprintf(msg, sizeof(msg), "cannot be charged: %s", why);
                else
                        continue;
                offend(a, uid ? uid : "", ns ? ns : "", name ? name : "",
                       "the allocation annotation", msg, b.alloc, decoded ? na : 0,
                       decoded ? NULL : v);
        }
        /* an offender no longer seen is forgotten (logged again should it offend again) */
        for (k = 0; pods_known && k < a->n_off;) {
                if (a->off[k].seen)
                        k++;
                else
                        a->off[k] = a->off[--a->n_off];
        }
out:
        free(b.alloc);
        free(b.saved);
        free(b.touched);
        return rc;
}

/*
 * The Pods now (the one read of the caller's pod source), the reservations settled, and the
 * ledger. Under mu; *pods is a new reference; *known (may be NULL): the source answered. Pods
 * unknown (the source failed) settle nothing: every reservation stays charged.
 */
static int snapshot(struct tsr_dm_agent *a, json_t **pods, bool *known,
                    struct tsr_accel_ledger *ledger, struct tsr_diag *diag)
{
        bool k;

        *pods = a->opts.pods ? a->opts.pods(a->opts.ctx) : NULL;
        k = *pods != NULL;
        if (known)
                *known = k;
        settle(a, *pods);
        if (!*pods)
                *pods = json_array();
        return build_ledger(a, *pods, k, ledger, diag);
}

/* Makes ledger, just built, and the held-back set it left the device view. Under mu. */
static void publish(struct tsr_dm_agent *a, const struct tsr_accel_ledger *ledger)
{
        memcpy(a->view, ledger, a->node.n * sizeof(*ledger));
        for (size_t g = 0; g < a->node.n; g++)
                a->view_held[g] = a->held_back[g][0] != '\0';
        a->have_view = true;
}

/*
 * Makes ledger (a copy) read every held-back accelerator as taking nothing new: an unpartitioned
 * one as held whole, a partitioned one with every legal placement occupied (nothing adopted or
 * created there; the container's own instance is still reused). Under mu.
 */
static void hold_back(const struct tsr_dm_agent *a, struct tsr_accel_ledger *ledger)
{
        for (size_t g = 0; g < a->node.n; g++) {
                const struct tsr_product *p = a->caps[g].product;
                struct tsr_accel_ledger *l = &ledger[g];
                uint32_t taken;

                if (!a->held_back[g][0])
                        continue;
                l->remaining = 0;
                if (!a->caps[g].partitioned || !p) {
                        l->mode = TSR_MODE_EXCLUSIVE;
                        continue;
                }
                l->mode = TSR_MODE_PARTITIONED;
                taken = tsr_geometry_occupied(p, &l->live);
                for (unsigned i = 0; i < p->n_profiles; i++)
                        for (unsigned st = 0; st < TSR_MIG_AXIS_MAX && l->live.n < TSR_MIG_AXIS_MAX;
                             st++) {
                                uint32_t span = tsr_geometry_span(st, p->profiles[i].size);

                                if (!((p->profiles[i].starts >> st) & 1u) || !(span & ~taken))
                                        continue;
                                l->live.inst[l->live.n++] =
                                    (struct tsr_mig_instance){(uint8_t)i, (uint8_t)st};
                                taken |= span;
                        }
        }
}

/*
 * The ledger now into ledger[0..n); held (may be NULL) receives which accelerators are held back.
 * Takes mu; logs what the build noted.
 */
static int ledger_now(struct tsr_dm_agent *a, struct tsr_accel_ledger *ledger, bool *held,
                      struct tsr_diag *diag)
{
        json_t *pods;
        int rc;

        pthread_mutex_lock(&a->mu);
        rc = snapshot(a, &pods, NULL, ledger, diag);
        for (size_t g = 0; held && g < a->node.n; g++)
                held[g] = a->held_back[g][0] != '\0';
        pthread_mutex_unlock(&a->mu);
        json_decref(pods);
        flush_notes(a);
        return rc;
}

int tsr_dm_agent_ledger(struct tsr_dm_agent *a, struct tsr_accel_ledger *ledger,
                        struct tsr_diag *diag)
{
        return ledger_now(a, ledger, NULL, diag);
}

int tsr_dm_agent_devices(struct tsr_dm_agent *a, enum tsr_family f, struct tsr_dp_device **out,
                         size_t *n)
{
        struct tsr_accel_ledger *ledger = malloc(a->node.n * sizeof(*ledger));
        bool *held = calloc(a->node.n, sizeof(*held));
        int rc = ledger && held ? ledger_now(a, ledger, held, NULL) : TSR_ENOMEM;

        if (!rc)
                rc = tsr_dp_devices(&a->node, ledger, f, out, n);
        /* a held-back accelerator's tokens read unhealthy (visibility tokens charge nothing) */
        for (size_t k = 0; !rc && f != TSR_FAMILY_VISIBILITY && k < *n; k++)
                if (held[(*out)[k].accel])
                        (*out)[k].healthy = false;
        free(ledger);
        free(held);
        return rc;
}

int tsr_dm_agent_refresh_view(struct tsr_dm_agent *a)
{
        struct tsr_accel_ledger *ledger = malloc(a->node.n * sizeof(*ledger));
        json_t *pods = NULL;
        int rc = TSR_ENOMEM;

        if (ledger) {
                pthread_mutex_lock(&a->mu);
                rc = snapshot(a, &pods, NULL, ledger, NULL);
                if (!rc)
                        publish(a, ledger);
                pthread_mutex_unlock(&a->mu);
        }
        json_decref(pods);
        free(ledger);
        flush_notes(a);
        return rc;
}

int tsr_dm_agent_view_shape(struct tsr_dm_agent *a, enum tsr_family f, struct tsr_dp_shape *shape)
{
        int rc = TSR_ESTALE;

        pthread_mutex_lock(&a->mu);
        if (a->have_view) {
                /* a held-back accelerator's tokens read unhealthy (visibility's charge nothing) */
                tsr_dp_shape(&a->node, a->view, f, f == TSR_FAMILY_VISIBILITY ? NULL : a->view_held,
                             shape);
                rc = 0;
        }
        pthread_mutex_unlock(&a->mu);
        return rc;
}

/* pod-resources' List when the agent may ask it, else NULL (the fallback). Under mu. */
static struct tsr_dp_kubelet_view *kubelet_view(struct tsr_dm_agent *a)
{
        struct tsr_dp_kubelet_view *kv = NULL;

        if (a->opts.identify_by_kubelet && a->opts.kubelet_view &&
            a->opts.kubelet_view(a->opts.ctx, &kv))
                kv = NULL;
        return kv;
}

static void kubelet_view_free(struct tsr_dm_agent *a, struct tsr_dp_kubelet_view *kv)
{
        if (kv)
                a->opts.kubelet_view_free(a->opts.ctx, kv);
}

static bool reserved_by(void *ctx, const char *uid, const char *container)
{
        const struct tsr_dm_agent *a = ctx;

        for (size_t k = 0; k < a->n_res; k++)
                if (!strcmp(a->res[k].g.uid, uid) &&
                    !strcmp(a->res[k].g.alloc.container, container))
                        return true;
        return false;
}

/* The reservation of (uid, container) that charges, for tsr_dp_identify_retry. Under mu. */
static bool granted_by(void *ctx, const char *uid, const char *container,
                       struct tsr_container_allocation *out)
{
        const struct tsr_dm_agent *a = ctx;

        for (size_t k = 0; k < a->n_res; k++)
                if (!a->res[k].visibility && !strcmp(a->res[k].g.uid, uid) &&
                    !strcmp(a->res[k].g.alloc.container, container)) {
                        *out = a->res[k].g.alloc;
                        return true;
                }
        return false;
}

/*
 * The units the next slice of size tokens packs by: those of the container Allocate would name
 * (identified as it does), else the smallest slice still waiting on the node (no card that cannot
 * hold it is preferred), else 0 (any free slot). Under mu; *kv receives the view asked for.
 */
static int64_t slice_units(struct tsr_dm_agent *a, json_t *pods, unsigned size,
                           struct tsr_dp_kubelet_view *kv)
{
        char resource[TSR_KEY_MAX], msg[256];
        struct tsr_dp_identity id;
        int64_t units = 0;

        if (tsr_dp_resource_name(&a->node, TSR_FAMILY_SLICED, resource))
                return 0;
        if (!tsr_dp_identify(&a->node, pods, kv, resource, NULL, size, reserved_by, a, &id, msg,
                             sizeof(msg)) &&
            id.demand.family == TSR_FAMILY_SLICED && id.demand.units > 0)
                return id.demand.units;
        if (tsr_dp_smallest_pending(&a->node, pods, resource, reserved_by, a, &units))
                units = 0;
        return units;
}

/* Whether every one of want[0..n_want) is among have[0..n_have); *at (may be NULL) receives
 * have's strings in want's order. */
static bool all_in(const char *const *want, size_t n_want, const char *const *have, size_t n_have,
                   const char **at)
{
        for (size_t i = 0; i < n_want; i++) {
                size_t j = 0;

                while (j < n_have && strcmp(want[i], have[j]))
                        j++;
                if (j == n_have)
                        return false;
                if (at)
                        at[i] = have[j];
        }
        return true;
}

/*
 * For a retried Allocate the kubelet prepares (tsr_dp_identify_retry names a container whose
 * grant's answer was lost, older than any container still waiting): the granted IDs, when every one
 * is offered and they hold every must-include, so that the kubelet asks for exactly what was
 * granted and Allocate serves it again. Under mu. True with out[0..*n_out) pointing into available.
 */
static bool retry_preference(struct tsr_dm_agent *a, json_t *pods,
                             const struct tsr_dp_kubelet_view *kv, enum tsr_family f,
                             const char *const *available, size_t n_avail, const char *const *must,
                             size_t n_must, unsigned size, const char **out, size_t *n_out)
{
        struct tsr_container_allocation *grant = malloc(sizeof(*grant));
        const char *ids[TSR_ALLOC_ACCELS_MAX];
        char resource[TSR_KEY_MAX], msg[256];
        struct tsr_dp_identity id, again;
        bool ok = false;

        if (grant && kv && !tsr_dp_resource_name(&a->node, f, resource) &&
            !tsr_dp_identify_retry(&a->node, pods, kv, resource, NULL, size, granted_by, a, &again,
                                   grant) &&
            (tsr_dp_identify(&a->node, pods, kv, resource, NULL, size, reserved_by, a, &id, msg,
                             sizeof(msg)) ||
             tsr_dp_pod_older(again.pod, id.pod)) &&
            grant->n_device_ids == size) {
                for (size_t k = 0; k < grant->n_device_ids; k++)
                        ids[k] = grant->device_ids[k];
                ok = all_in(ids, size, available, n_avail, out) &&
                     all_in(must, n_must, ids, size, NULL);
        }
        if (ok)
                *n_out = size;
        free(grant);
        return ok;
}

int tsr_dm_agent_preferred(struct tsr_dm_agent *a, enum tsr_family f, const char *const *available,
                           size_t n_avail, const char *const *must, size_t n_must, unsigned size,
                           const char **out, size_t *n_out)
{
        struct tsr_accel_ledger *ledger = malloc(a->node.n * sizeof(*ledger));
        struct tsr_dp_kubelet_view *kv = NULL;
        bool grants = f != TSR_FAMILY_VISIBILITY && f != TSR_FAMILY_NONE;
        bool again = false, known = false;
        int64_t units = 0;
        json_t *pods = NULL;
        int rc;

        if (!ledger)
                return TSR_ENOMEM;
        pthread_mutex_lock(&a->mu);
        rc = snapshot(a, &pods, &known, ledger, NULL);
        if (!rc && grants && !known) /* the retried container unknown: no preference on a guess */
                rc = TSR_EIO;
        if (!rc && grants)
                kv = kubelet_view(a);
        if (!rc && grants && size <= TSR_ALLOC_ACCELS_MAX)
                again = retry_preference(a, pods, kv, f, available, n_avail, must, n_must, size,
                                         out, n_out);
        if (!rc && !again && f == TSR_FAMILY_SLICED)
                units = slice_units(a, pods, size, kv);
        if (!rc)
                hold_back(a, ledger);
        pthread_mutex_unlock(&a->mu);
        kubelet_view_free(a, kv);
        json_decref(pods);
        flush_notes(a);
        if (!rc && !again)
                rc = tsr_dp_preferred(&a->node, ledger, f, available, n_avail, must, n_must, size,
                                      units, out, n_out);
        free(ledger);
        return rc;
}

/* ---- Allocate ------------------------------------------------------------------------------- */

static void answer(struct tsr_dm_answer *out, enum tsr_dm_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void answer(struct tsr_dm_answer *out, enum tsr_dm_code code, const char *fmt, ...)
{
        va_list ap;

        out->code = code;
        va_start(ap, fmt);
        vsnprintf(out->message, sizeof(out->message), fmt, ap);
        va_end(ap);
}

/* Why the first held-back accelerator ids[0..n_ids) name takes no new grant, or NULL. Under mu. */
static const char *held_back_by(const struct tsr_dm_agent *a, const char *const *ids, size_t n_ids)
{
        for (size_t k = 0; k < n_ids; k++) {
                char dev[TSR_UUID_MAX];
                unsigned idx;
                int g;

                if (!tsr_token_parse(ids[k], a->node.group, dev, &idx) &&
                    (g = tsr_dp_node_find(&a->node, dev)) >= 0 && a->held_back[g][0])
                        return a->held_back[g];
        }
        return NULL;
}

/* Settles a partition claim: a MIG instance reused, adopted or created, with its marker. */
static bool settle_partition(struct tsr_dm_agent *a, const struct tsr_accel_ledger *ledger,
                             const struct tsr_dp_identity *id, const char *uid,
                             const char *const *ids, size_t n_ids, struct tsr_dp_grant *g,
                             struct tsr_dm_answer *out)
{
        struct tsr_mig_request req = {uid, id->container, id->demand.profile};
        struct tsr_mig_grant mg;
        struct tsr_accel_allocation *aa;
        struct tsr_diag d;
        int rc;

        tsr_diag_clear(&d);
        rc = tsr_mig_reserve(&a->opts.gpus, a->opts.store, a->caps, ledger, a->node.n, &req, &mg,
                             &d);
        if (rc) {
                answer(out,
                       rc == TSR_ESTALE || rc == TSR_ENOSPC || rc == TSR_ENOTFOUND
                           ? TSR_DM_FAILED_PRECONDITION
                           : TSR_DM_INTERNAL,
                       "%s", d.msg);
                out->reason = rc == TSR_ESTALE      ? "marker_stale"
                              : rc == TSR_ENOSPC    ? "no_capacity"
                              : rc == TSR_ENOTFOUND ? "no_profile"
                                                    : "carve_failed";
                out->carve_failed = rc != TSR_ESTALE && rc != TSR_ENOSPC && rc != TSR_ENOTFOUND;
                return false;
        }
        out->carved = mg.how == TSR_MIG_CREATED;
        memset(g, 0, sizeof(*g));
        aa = &g->alloc.accels[g->alloc.n++];
        snprintf(aa->id, sizeof(aa->id), "%s", a->caps[mg.gpu].uuid);
        aa->index = mg.gpu;
        aa->mode = TSR_MODE_PARTITIONED;
        aa->allocated = id->demand.units;
        snprintf(aa->profile, sizeof(aa->profile), "%s", mg.marker.profile);
        aa->start = mg.marker.start;
        aa->length = mg.marker.length;
        snprintf(aa->physical_id, sizeof(aa->physical_id), "%s", mg.marker.mig_uuid);
        for (size_t k = 0; k < n_ids && k < TSR_ALLOC_ACCELS_MAX; k++)
                snprintf(g->alloc.device_ids[g->alloc.n_device_ids++],
                         sizeof(g->alloc.device_ids[0]), "%s", ids[k]);
        tsr_dp_grant_expose(g, mg.marker.mig_uuid);
        note(a, "info", "%s %s on GPU %u at %u for %s/%s",
             mg.how == TSR_MIG_REUSED    ? "reused"
             : mg.how == TSR_MIG_ADOPTED ? "adopted"
                                         : "created",
             mg.marker.profile, mg.gpu, mg.marker.start, uid, id->container);
        return true;
}

/*
 * The MIG device container (of Pod uid) holds as aa records it, for its Pod's visibility sidecar:
 * the instance its ownership marker names, read and liveness-checked now (tsr_mig_held), under mu,
 * which is the node's MIG lock: reclaim cannot destroy or recreate it before the answer is given.
 * Returns true with the MIG UUID in mig, or false with out answered (what: the container's kind,
 * "visibility" or "retried"): refused, never the parent GPU in its place.
 */
static bool visible_partition(struct tsr_dm_agent *a, const char *what, const char *pod,
                              const char *uid, const char *container,
                              const struct tsr_accel_allocation *aa, char *mig, size_t len,
                              struct tsr_dm_answer *out)
{
        struct tsr_mig_marker m;
        struct tsr_diag d;
        unsigned gpu;
        int rc;

        tsr_diag_clear(&d);
        rc = tsr_mig_held(&a->opts.gpus, a->opts.store, a->caps, a->node.n, uid, container, aa->id,
                          &m, &gpu, &d);
        if (!rc && aa->physical_id[0] && strcmp(aa->physical_id, m.mig_uuid))
                rc = tsr_diag_set(&d, TSR_ESTALE,
                                  "the allocation of container %s records MIG device %s, its "
                                  "MIG ownership marker %s",
                                  container, aa->physical_id, m.mig_uuid);
        if (rc) {
                answer(out, rc == TSR_ESTALE ? TSR_DM_FAILED_PRECONDITION : TSR_DM_INTERNAL,
                       "%s container %s of Pod %s refused: %s; the parent GPU is never shown in "
                       "place of a partition",
                       what, out->container, pod, d.msg);
                out->reason = strcmp(what, "visibility") ? "marker_stale" : "visibility";
                return false;
        }
        snprintf(mig, len, "%s", m.mig_uuid);
        return true;
}

/*
 * Visibility: the accelerators the Pod's other containers hold (none: "void"): a whole GPU, a
 * share or a slice by its UUID; a partition by its MIG device, live (visible_partition), or
 * nothing at all. Under mu. Returns true with g, or false with out answered (g granting nothing).
 */
static bool settle_visibility(struct tsr_dm_agent *a, json_t *pod, const char *uid,
                              struct tsr_dp_grant *g, struct tsr_dm_answer *out)
{
        struct tsr_container_allocation *alloc = malloc(TSR_ALLOC_CONTAINERS_MAX * sizeof(*alloc));
        size_t na = 0;
        bool ok = true;

        memset(g, 0, sizeof(*g));
        if (!alloc) {
                answer(out, TSR_DM_INTERNAL, "device manager: out of memory");
                return false;
        }
        pod_allocation(pod, alloc, &na);
        for (size_t k = 0; k < a->n_res && na < TSR_ALLOC_CONTAINERS_MAX; k++)
                if (!strcmp(a->res[k].g.uid, uid))
                        alloc[na++] = a->res[k].g.alloc;
        for (size_t i = 0; i < na && ok; i++)
                for (size_t x = 0; x < alloc[i].n && ok; x++) {
                        const struct tsr_accel_allocation *aa = &alloc[i].accels[x];
                        char mig[TSR_MIG_MARKER_UUID_MAX];
                        const char *dev = aa->id;

                        if (aa->mode == TSR_MODE_PARTITIONED || aa->physical_id[0]) {
                                ok = visible_partition(a, "visibility", out->pod, uid,
                                                       alloc[i].container, aa, mig, sizeof(mig),
                                                       out);
                                dev = mig;
                        }
                        if (ok && !strstr(g->visible, dev))
                                tsr_dp_grant_expose(g, dev);
                }
        free(alloc);
        if (!ok)
                memset(g, 0, sizeof(*g));
        return ok;
}

/*
 * Serves a retried Allocate (tsr_dp_identify_retry) from the grant made before its answer was
 * lost: the same accelerators exposed, a partition's MIG device read back from its marker and
 * checked live (visible_partition), nothing charged anew. Under mu. True with g, or false with out
 * answered.
 */
static bool serve_again(struct tsr_dm_agent *a, const char *uid,
                        const struct tsr_container_allocation *grant, struct tsr_dp_grant *g,
                        struct tsr_dm_answer *out)
{
        memset(g, 0, sizeof(*g));
        g->alloc = *grant;
        for (size_t x = 0; x < grant->n; x++) {
                const struct tsr_accel_allocation *aa = &grant->accels[x];
                char mig[TSR_MIG_MARKER_UUID_MAX];
                const char *dev = aa->id;

                if (aa->mode == TSR_MODE_PARTITIONED) {
                        if (!visible_partition(a, "retried", out->pod, uid, grant->container, aa,
                                               mig, sizeof(mig), out))
                                return false;
                        dev = mig;
                }
                if (!strstr(g->visible, dev))
                        tsr_dp_grant_expose(g, dev);
        }
        note(a, "info",
             "container %s of Pod %s asked again for what it was granted (the answer to its "
             "first Allocate was lost): served again, nothing charged anew",
             grant->container, out->pod);
        return true;
}

static int add_reservation(struct tsr_dm_agent *a, json_t *pod, const char *container,
                           const struct tsr_dp_grant *g, bool visibility)
{
        struct reservation *r;

        if (a->n_res == a->cap_res) {
                size_t cap = a->cap_res ? a->cap_res * 2 : 16;

                r = realloc(a->res, cap * sizeof(*r));
                if (!r)
                        return TSR_ENOMEM;
                a->res = r;
                a->cap_res = cap;
        }
        r = &a->res[a->n_res++];
        memset(r, 0, sizeof(*r));
        snprintf(r->g.uid, sizeof(r->g.uid), "%s", str_at(pod, "metadata", "uid"));
        snprintf(r->g.ns, sizeof(r->g.ns), "%s", str_at(pod, "metadata", "namespace"));
        snprintf(r->g.name, sizeof(r->g.name), "%s", str_at(pod, "metadata", "name"));
        r->g.alloc = g->alloc;
        r->visibility = r->recorded = visibility;
        snprintf(r->g.alloc.container, sizeof(r->g.alloc.container), "%s", container);
        snprintf(r->g.alloc.group_id, sizeof(r->g.alloc.group_id), "%.*s",
                 (int)sizeof(r->g.alloc.group_id) - 1, a->node.group);
        snprintf(r->g.alloc.manufacturer, sizeof(r->g.alloc.manufacturer), "%s", a->node.m->key);
        return 0;
}

/*
 * The annotation value for the Pod of reservation k: its current entries with every reservation
 * of the same Pod put over them. Under mu. A new string, or NULL.
 */
static char *annotation_for(struct tsr_dm_agent *a, json_t *pod, const char *uid)
{
        struct tsr_container_allocation *alloc = malloc(TSR_ALLOC_CONTAINERS_MAX * sizeof(*alloc));
        size_t na = 0;
        char *json = NULL;

        if (!alloc)
                return NULL;
        if (pod)
                pod_allocation(pod, alloc, &na);
        for (size_t k = 0; k < a->n_res; k++) {
                size_t i = 0;

                if (strcmp(a->res[k].g.uid, uid) || a->res[k].visibility)
                        continue;
                while (i < na && strcmp(alloc[i].container, a->res[k].g.alloc.container))
                        i++;
                if (i == TSR_ALLOC_CONTAINERS_MAX)
                        continue;
                alloc[i] = a->res[k].g.alloc;
                if (i == na)
                        na++;
        }
        if (tsr_alloc_annotation_encode(alloc, na, &json))
                json = NULL;
        free(alloc);
        return json;
}

/*
 * Records the reservations of uid on its Pod (outside mu); marks them recorded on success. The
 * annotation is the Pod's current one with the reservations put over it: seen (may be NULL) is
 * the Pod as the caller's snapshot showed it when settle had dropped since reservations in all;
 * it stands for a new read of the Pods while settle has dropped none since (each annotation entry
 * written after seen is then a reservation still held; a dropped one may be in an annotation seen
 * does not show yet, so the Pods are read again).
 */
static void record(struct tsr_dm_agent *a, const char *uid, json_t *seen, unsigned long since)
{
        char ns[254] = "", name[254] = "", *json = NULL;
        json_t *pods = NULL;
        struct tsr_diag d;
        int rc;

        pthread_mutex_lock(&a->mu);
        if (seen && a->settled != since)
                seen = NULL;
        if (!seen) { /* the source is called without mu while recording */
                pthread_mutex_unlock(&a->mu);
                pods = a->opts.pods ? a->opts.pods(a->opts.ctx) : NULL;
                pthread_mutex_lock(&a->mu);
        }
        for (size_t k = 0; k < a->n_res; k++)
                if (!strcmp(a->res[k].g.uid, uid)) {
                        snprintf(ns, sizeof(ns), "%s", a->res[k].g.ns);
                        snprintf(name, sizeof(name), "%s", a->res[k].g.name);
                }
        if (ns[0])
                json = annotation_for(a, seen ? seen : pod_by_uid(pods, uid), uid);
        pthread_mutex_unlock(&a->mu);
        json_decref(pods);
        if (!json || !a->opts.record)
                goto out;
        tsr_diag_clear(&d);
        rc = a->opts.record(a->opts.ctx, ns, name, uid, json, &d);
        if (rc) {
                logf_(a, "warn", "recording the allocation on Pod %s/%s failed (retried): %s", ns,
                      name, d.msg);
                goto out;
        }
        pthread_mutex_lock(&a->mu);
        for (size_t k = 0; k < a->n_res; k++)
                if (!strcmp(a->res[k].g.uid, uid))
                        a->res[k].recorded = true;
        pthread_mutex_unlock(&a->mu);
out:
        free(json);
}

/* Container name's .sliced.cores-percentage in pod: (0,100], 100 when it asks none (gate 1
 * defaults it; a value past 100, which gate 1 refuses, reads as 100: no throttling). */
static unsigned slice_cores(const struct tsr_dm_agent *a, json_t *pod, const char *name)
{
        struct tsr_pod_spec *spec = NULL;
        char key[TSR_KEY_MAX];
        int64_t v = 0;

        if (!tsr_key_format(key, a->node.m, TSR_KEY_SLICED_CORES, NULL) &&
            !tsr_pod_spec_new(pod, &spec, NULL))
                for (size_t i = 0; i < spec->req.n; i++)
                        if (!strcmp(spec->req.c[i].name, name))
                                v = tsr_container_request(&spec->req.c[i], key, false);
        free(spec);
        return v > 0 && v < 100 ? (unsigned)v : 100;
}

/* A granted slice's isolation caps into out->slice (g: the grant, one accelerator). */
static void slice_caps(const struct tsr_dm_agent *a, json_t *pod, const char *uid,
                       const struct tsr_dp_grant *g, struct tsr_dm_answer *out)
{
        const struct tsr_accel_allocation *aa = &g->alloc.accels[0];
        uint64_t mib = 0;

        if (g->alloc.n && aa->index < a->node.n && aa->allocated > 0)
                mib = (uint64_t)aa->allocated * a->caps[aa->index].product->vram_mib /
                      TSR_UNITS_PER_ACCEL;
        out->slice.granted = true;
        out->slice.memory_mib = mib ? mib : 1; /* 0 would read as no limit */
        out->slice.cores = slice_cores(a, pod, out->container);
        snprintf(out->slice.uid, sizeof(out->slice.uid), "%s", uid);
}

/* The first device ID that appears twice in ids, or NULL. The kubelet never repeats one; granting
 * a repeated one would give the container that device twice and charge it twice over. */
static const char *repeated_id(const char *const *ids, size_t n)
{
        for (size_t i = 1; i < n; i++)
                for (size_t j = 0; j < i; j++)
                        if (!strcmp(ids[i], ids[j]))
                                return ids[i];
        return NULL;
}

void tsr_dm_agent_allocate(struct tsr_dm_agent *a, enum tsr_family f, const char *const *ids,
                           size_t n_ids, struct tsr_dm_answer *out)
{
        struct tsr_accel_ledger *ledger = malloc(a->node.n * sizeof(*ledger));
        struct tsr_dp_kubelet_view *kv = NULL;
        struct tsr_dp_identity id, again;
        struct tsr_dp_grant *g = malloc(sizeof(*g));
        struct tsr_container_allocation *prior = malloc(sizeof(*prior));
        char resource[TSR_KEY_MAX], uid[128] = "";
        const char *dup;
        json_t *pods = NULL, *seen = NULL;
        unsigned long settled = 0;
        struct tsr_diag d;
        bool granted = false, known = false, published = false, retry = false, waiting;

        memset(out, 0, sizeof(*out));
        if (!ledger || !g || !prior || tsr_dp_resource_name(&a->node, f, resource))
                answer(out, TSR_DM_INTERNAL, "device manager: out of memory");
        else if ((dup = repeated_id(ids, n_ids))) {
                answer(out, TSR_DM_INVALID_ARGUMENT,
                       "device %s is named more than once in one container's request", dup);
                out->reason = "duplicate_device";
        }
        if (out->code != TSR_DM_OK) {
                free(ledger);
                free(g);
                free(prior);
                return;
        }
        tsr_diag_clear(&d);
        pthread_mutex_lock(&a->mu);
        if (snapshot(a, &pods, &known, ledger, &d)) {
                answer(out, TSR_DM_INTERNAL, "the node's ledger cannot be rebuilt: %s", d.msg);
                goto unlock;
        }
        if (!known) { /* an empty list would read as "nobody waits": say what failed */
                answer(out, TSR_DM_UNAVAILABLE,
                       "the Pods bound to this node could not be listed from the API server, so "
                       "the container cannot be named; nothing is granted on a guess");
                out->reason = "pods_unknown";
                goto unlock;
        }
        kv = kubelet_view(a);
        waiting = !tsr_dp_identify(&a->node, pods, kv, resource, ids, n_ids, reserved_by, a, &id,
                                   out->message, sizeof(out->message));
        retry = kv &&
                !tsr_dp_identify_retry(&a->node, pods, kv, resource, ids, n_ids, granted_by, a,
                                       &again, prior) &&
                (!waiting || tsr_dp_pod_older(again.pod, id.pod));
        if (!retry && kv &&
            !tsr_dp_identify_retry(&a->node, pods, kv, resource, NULL, n_ids, granted_by, a, &again,
                                   prior) &&
            (!waiting || tsr_dp_pod_older(again.pod, id.pod))) {
                /* the kubelet admits oldest first: this is the granted container asking again,
                 * for other devices; given to a younger one it would be granted twice */
                answer(out, TSR_DM_FAILED_PRECONDITION,
                       "container %s of Pod %s/%s was granted %.100s%s before a restart lost the "
                       "answer, and is asked again for other devices (%.100s%s): refused, so "
                       "that nothing is granted twice; deleting the Pod releases its grant",
                       again.container, str_at(again.pod, "metadata", "namespace"),
                       str_at(again.pod, "metadata", "name"), prior->device_ids[0],
                       prior->n_device_ids > 1 ? ", ..." : "", ids[0], n_ids > 1 ? ", ..." : "");
                out->reason = "retry_mismatch";
                snprintf(out->pod, sizeof(out->pod), "%s/%s",
                         str_at(again.pod, "metadata", "namespace"),
                         str_at(again.pod, "metadata", "name"));
                snprintf(out->container, sizeof(out->container), "%s", again.container);
                goto unlock;
        }
        if (retry) {
                id = again;
                out->message[0] = '\0';
        } else if (!waiting) {
                out->code = TSR_DM_FAILED_PRECONDITION;
                out->reason = "unidentified";
                goto unlock;
        }
        snprintf(uid, sizeof(uid), "%s", str_at(id.pod, "metadata", "uid"));
        snprintf(out->pod, sizeof(out->pod), "%s/%s", str_at(id.pod, "metadata", "namespace"),
                 str_at(id.pod, "metadata", "name"));
        snprintf(out->container, sizeof(out->container), "%s", id.container);
        if (id.demand.mixed || (id.demand.family != f && f != TSR_FAMILY_VISIBILITY)) {
                answer(out, TSR_DM_FAILED_PRECONDITION,
                       "container %s of Pod %s asks for more than one accelerator family",
                       id.container, out->pod);
                out->reason = "mixed_families";
                goto unlock;
        }
        switch (retry ? TSR_FAMILY_NONE : f) {
        case TSR_FAMILY_NONE:
                granted = serve_again(a, uid, prior, g, out);
                break;
        case TSR_FAMILY_PARTITIONED:
                hold_back(a, ledger);
                granted = settle_partition(a, ledger, &id, uid, ids, n_ids, g, out);
                break;
        case TSR_FAMILY_VISIBILITY:
                granted = settle_visibility(a, id.pod, uid, g, out);
                break;
        default: {
                const char *why = held_back_by(a, ids, n_ids);
                int rc;

                if (why) {
                        answer(out, TSR_DM_FAILED_PRECONDITION, "%s", why);
                        out->reason = "held_back";
                        break;
                }
                rc = tsr_dp_allocate_bound(&a->node, ledger, f, ids, n_ids, id.demand.units,
                                           a->opts.sliced_gate, id.container, g, out->message,
                                           sizeof(out->message));
                out->code = rc == 0            ? TSR_DM_OK
                            : rc == TSR_EPARSE ? TSR_DM_INVALID_ARGUMENT
                            : rc == TSR_ENOSPC ? TSR_DM_FAILED_PRECONDITION
                                               : TSR_DM_INTERNAL;
                out->reason = rc == 0            ? NULL
                              : rc == TSR_EPARSE ? "invalid_device"
                              : rc == TSR_ENOSPC ? "no_capacity"
                                                 : "internal";
                granted = rc == 0;
        }
        }
        if (granted && !retry &&
            add_reservation(a, id.pod, id.container, g, f == TSR_FAMILY_VISIBILITY)) {
                answer(out, TSR_DM_INTERNAL, "device manager: out of memory");
                granted = false;
        } else if (granted && !retry && f != TSR_FAMILY_VISIBILITY && persist(a, &d)) {
                /* a grant a crash could forget is one a restart could make twice: none is made */
                a->n_res--;
                answer(out, TSR_DM_INTERNAL,
                       "the grant to container %s of Pod %s cannot be made durable, so it is not "
                       "made: %s",
                       id.container, out->pod, d.msg);
                out->reason = "journal";
                granted = false;
        }
        if (granted) {
                out->code = TSR_DM_OK;
                out->reason = NULL;
                out->message[0] = '\0';
                snprintf(out->visible, sizeof(out->visible), "%s",
                         g->visible[0] ? g->visible : "void");
                if (f == TSR_FAMILY_SLICED)
                        slice_caps(a, id.pod, uid, g, out);
        }
        if (granted && !retry && f != TSR_FAMILY_VISIBILITY) {
                /* the device view the subscribers read: these Pods with the grant reserved, what
                 * a new snapshot would show (a Pod change since is the pod source's to report) */
                if (a->n_subs && !build_ledger(a, pods, known, ledger, NULL)) {
                        publish(a, ledger);
                        published = true;
                }
                seen = json_incref(id.pod);
                settled = a->settled;
        }
unlock:
        pthread_mutex_unlock(&a->mu);
        kubelet_view_free(a, kv);
        json_decref(pods);
        free(ledger);
        free(g);
        free(prior);
        flush_notes(a);
        if (out->code != TSR_DM_OK && !out->reason)
                out->reason = "internal";
        if (a->opts.allocated)
                a->opts.allocated(a->opts.ctx, f, out);
        if (out->code != TSR_DM_OK) {
                logf_(a, "warn", "Allocate of %zu %s device(s) refused: %s", n_ids, resource,
                      out->message);
                return;
        }
        logf_(a, "debug", "Allocate of %zu %s device(s) (%s%s) %s container %s of Pod %s: %s",
              n_ids, resource, ids[0], n_ids > 1 ? ", ..." : "",
              retry ? "served again to" : "granted to", out->container, out->pod, out->visible);
        if (f != TSR_FAMILY_VISIBILITY && !retry) {
                record(a, uid, seen, settled);
                json_decref(seen);
                if (!published) /* out of memory above: a view of its own */
                        tsr_dm_agent_changed(a);
                else
                        notify(a);
        }
}

size_t tsr_dm_agent_sync(struct tsr_dm_agent *a)
{
        char(*uids)[128] = NULL;
        size_t n = 0, left = 0;
        json_t *pods;

        pthread_mutex_lock(&a->mu);
        if (!a->n_res) { /* nothing to settle or record: no Pods read */
                pthread_mutex_unlock(&a->mu);
                return 0;
        }
        pods = a->opts.pods ? a->opts.pods(a->opts.ctx) : NULL;
        settle(a, pods);
        uids = calloc(a->n_res ? a->n_res : 1, sizeof(*uids));
        for (size_t k = 0; uids && k < a->n_res; k++)
                if (!a->res[k].recorded)
                        snprintf(uids[n++], sizeof(uids[0]), "%s", a->res[k].g.uid);
        pthread_mutex_unlock(&a->mu);
        json_decref(pods);
        for (size_t i = 0; i < n; i++)
                record(a, uids[i], NULL, 0);
        pthread_mutex_lock(&a->mu);
        for (size_t k = 0; k < a->n_res; k++)
                left += !a->res[k].recorded;
        pthread_mutex_unlock(&a->mu);
        free(uids);
        return left;
}

/* ---- reclaim -------------------------------------------------------------------------------- */

/* Appends the claims of one allocation of Pod uid to claims[*n..max). */
static void add_claims(const struct tsr_container_allocation *c, const char *uid,
                       struct tsr_mig_claim *claims, size_t max, size_t *n)
{
        for (size_t x = 0; x < c->n && *n < max; x++)
                claims[(*n)++] = (struct tsr_mig_claim){uid, c->accels[x].id,
                                                        c->accels[x].mode == TSR_MODE_PARTITIONED,
                                                        c->accels[x].start, c->accels[x].length};
}

int tsr_dm_agent_reclaim(struct tsr_dm_agent *a, struct tsr_mig_reclaimer *r,
                         struct tsr_mig_pass_stats *stats, struct tsr_diag *diag)
{
        struct tsr_container_allocation *alloc = malloc(TSR_ALLOC_CONTAINERS_MAX * sizeof(*alloc));
        const char **live = NULL;
        struct tsr_mig_claim *claims = NULL;
        size_t n_pods, max_claims, n_live = 0, n_claims = 0, i;
        json_t *pods, *p;
        int rc;

        pthread_mutex_lock(&a->mu);
        pods = a->opts.pods ? a->opts.pods(a->opts.ctx) : NULL;
        if (!pods) {
                pthread_mutex_unlock(&a->mu);
                free(alloc);
                return tsr_diag_set(diag, TSR_ESTALE,
                                    "reclaim skipped: the Pods bound to the node are unknown");
        }
        n_pods = json_array_size(pods);
        settle(a, pods);
        max_claims = (n_pods * TSR_ALLOC_CONTAINERS_MAX + a->n_res) * TSR_ALLOC_ACCELS_MAX + 1;
        live = calloc(n_pods + 1, sizeof(*live));
        claims = calloc(max_claims, sizeof(*claims));
        if (!alloc || !live || !claims) {
                rc = tsr_diag_set(diag, TSR_ENOMEM, "reclaim: out of memory");
                goto out;
        }
        json_array_foreach(pods, i, p)
        {
                const char *uid = str_at(p, "metadata", "uid");
                size_t na;

                if (!uid)
                        continue;
                live[n_live++] = uid;
                pod_allocation(p, alloc, &na);
                for (size_t c = 0; c < na; c++)
                        add_claims(&alloc[c], uid, claims, max_claims, &n_claims);
        }
        for (size_t k = 0; k < a->n_res; k++)
                add_claims(&a->res[k].g.alloc, a->res[k].g.uid, claims, max_claims, &n_claims);
        rc = tsr_mig_reclaim_pass(r, &(struct tsr_mig_view){live, n_live, claims, n_claims}, stats,
                                  diag);
out:
        pthread_mutex_unlock(&a->mu);
        free(alloc);
        free(live);
        free(claims);
        json_decref(pods);
        if (!rc && stats && stats->destroyed)
                tsr_dm_agent_changed(a);
        return rc;
}
