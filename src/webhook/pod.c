/*
 * pod.c - gate 1 as the `gpustack-worker-mutation` and `gpustack-worker-validation` Pod webhooks
 * (seeds/admission.md "Gate 1"; spec/upstream-behavior.md §2, §3).
 *
 * Both read the InstanceType fronting the Pod's queue -- the one labelled
 * schedule.gpustack.ai/queue-entrance=<the Pod's kueue.x-k8s.io/queue-name>, never the LocalQueue
 * itself -- for the fold's divisor (the per-accelerator VRAM: status.detail.memory, else the older
 * spec.memory, read by instancetype_detail.h) and the offered partition profiles
 * (status.detail.slicedDetail.physical.profiles). The mutating half folds the memory demand into
 * .sliced.units / .partitioned.units, defaults .sliced.cores-percentage and adds the shared
 * card-count pin; a Pod that breaks a rule is left to the validating half, which denies it with
 * the rules' messages. A CPU-only InstanceType admits no accelerator key. Both act on CREATE only
 * and on Pods carrying the queue label (the objectSelector).
 *
 * Before the status writer has computed the detail, a Pod that needs no fold (exclusive, shared,
 * no accelerator) is judged as usual; a slice or a partition that passes the Pod-wide rules gets
 * upstream's retryable answer (503 "... not ready yet; retry"), as does a partition whose offered
 * profiles or whose profile's memoryMib are not there yet. A memory that is there but is not a
 * positive whole number of MiB makes a folding Pod's review fail (400) with the reader's message.
 *
 * What is read of an InstanceType is kept per thread while its revision holds, when the lookup
 * offers revisions (the memo below): a pure function of the object, so the answers are the same.
 */
#include "webhook/pod.h"

#include "base/diag.h"
#include "base/err.h"
#include "codec/affinity.h"
#include "codec/json_tree.h"
#include "codec/object_revision.h"
#include "codec/pod_spec.h"
#include "core/catalog.h"
#include "core/keys.h"
#include "core/pin.h"
#include "core/request.h"
#include "webhook/instancetype_detail.h"
#include "webhook/json_read.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUEUE_LABEL "kueue.x-k8s.io/queue-name"

/* The pool gate 1 folds against, read from an InstanceType object. */
struct fold_source {
        struct tsr_fold_pool pool; /* memory_mib 0 while the memory is not known */
        struct tsr_instancetype_detail detail;
        char accel_key[TSR_KEY_MAX]; /* spec.acceleratorGroup, "" for a CPU-only type */
        /* Why the memory could not be read: 0, or an error a Pod that folds is answered with. */
        int memory_rc;
        struct tsr_diag memory_diag;
};

static const struct tsr_json_pick container_reads[] = {
    {"name", NULL}, {"restartPolicy", NULL}, {"resources", NULL}, {NULL, NULL}};

const struct tsr_json_pick tsr_webhook_pod_reads[] = {
    {"metadata.labels", NULL},              /* queue_of */
    {"metadata.deletionTimestamp", NULL},   /* dispatch's deletion guard */
    {"spec.containers[]", container_reads}, /* codec/pod_spec.c, its edits */
    {"spec.initContainers[]", container_reads},
    {"spec.affinity", NULL}, /* codec/affinity.c, the card-count pin */
    {NULL, NULL},
};

static const char *queue_of(json_t *pod)
{
        return json_string_value(json_object_get(
            json_object_get(json_object_get(pod, "metadata"), "labels"), QUEUE_LABEL));
}

/*
 * Reads the fold source out of InstanceType it. Returns 0 or TSR_EPARSE. A memory that cannot be
 * read is not an error yet: only a Pod whose fold needs it is refused for it (memory_rc).
 */
static int read_source(json_t *it, struct fold_source *s, struct tsr_diag *diag)
{
        const char *group = json_string_value(tsr_json_at(it, "spec.acceleratorGroup"));
        const char *dash;
        char mfr[64];
        int rc;

        memset(s, 0, sizeof(*s));
        if (!group || !*group)
                return 0;
        if (strlen(group) >= sizeof(s->accel_key))
                return tsr_diag_set(diag, TSR_EPARSE, "spec.acceleratorGroup is too long");
        strcpy(s->accel_key, group);
        dash = strchr(group, '-');
        snprintf(mfr, sizeof(mfr), "%.*s", dash ? (int)(dash - group) : (int)strlen(group), group);
        s->pool.manufacturer = tsr_catalog_manufacturer_by_key(mfr);
        if (!s->pool.manufacturer)
                return tsr_diag_set(diag, TSR_EPARSE,
                                    "InstanceType accelerator group %s names no known manufacturer",
                                    group);
        rc = tsr_instancetype_detail_read(it, &s->detail, diag);
        if (rc)
                return rc;
        s->memory_rc = tsr_instancetype_detail_memory_mib(it, &s->pool.memory_mib, &s->memory_diag);
        s->pool.n_profiles = s->detail.n_profiles;
        s->pool.profiles = s->detail.profiles; /* names borrowed from it */
        return 0;
}

/*
 * The fold sources this thread read last, each with the revision of the InstanceType it was read
 * from (codec/object_revision.h): a review whose InstanceType has the revision of one of them uses
 * it instead of copying the object and reading it again. Every change to an object moves its
 * resourceVersion, and a deleted and recreated one has a new uid, so a memo is never stale; it is
 * keyed by the revision of the copy it was read from, never by one read before the copy. The
 * strings the source borrows from its object (the manufacturer, the profile names) are copied in;
 * a source whose strings do not fit is not kept. Thread-local: no locking, nothing shared.
 */
#define MEMO_SLOTS        4
#define MEMO_NAME_MAX     32
#define MEMO_REVISION_MAX 160

struct source_memo {
        char revision[MEMO_REVISION_MAX]; /* "" while the slot is empty */
        struct fold_source source;        /* its strings point into the two below */
        char manufacturer[MEMO_NAME_MAX];
        char names[TSR_MIG_PROFILES_MAX][MEMO_NAME_MAX];
};

static _Thread_local struct source_memo memo[MEMO_SLOTS];
static _Thread_local unsigned memo_next; /* the slot the next kept source takes */

/* Points the source's own pointers at itself after a copy (pool.profiles into its detail). */
static void source_fix(struct fold_source *s)
{
        s->pool.profiles = s->detail.profiles;
}

static const struct fold_source *memo_find(const char *revision)
{
        for (unsigned i = 0; i < MEMO_SLOTS; i++)
                if (memo[i].revision[0] && !strcmp(memo[i].revision, revision))
                        return &memo[i].source;
        return NULL;
}

/* Keeps s, read from InstanceType it, unless its strings do not fit a slot. */
static void memo_keep(json_t *it, const struct fold_source *s)
{
        struct source_memo *m = &memo[memo_next];
        const char *mfr = s->detail.manufacturer ? s->detail.manufacturer : "";
        char revision[MEMO_REVISION_MAX];

        if (strlen(mfr) >= MEMO_NAME_MAX || !tsr_object_revision(it, revision, sizeof(revision)))
                return;
        for (size_t i = 0; i < s->detail.n_profiles; i++)
                if (strlen(s->detail.profiles[i].name) >= MEMO_NAME_MAX)
                        return;
        strcpy(m->revision, revision);
        m->source = *s;
        source_fix(&m->source);
        strcpy(m->manufacturer, mfr);
        m->source.detail.manufacturer = m->manufacturer;
        for (size_t i = 0; i < s->detail.n_profiles; i++) {
                strcpy(m->names[i], s->detail.profiles[i].name);
                m->source.detail.profiles[i].name = m->names[i];
        }
        memo_next = (memo_next + 1) % MEMO_SLOTS;
}

/* The first accelerator key any container names, or NULL. */
static const char *first_accelerator_key(const struct tsr_pod_req *req)
{
        for (size_t i = 0; i < req->n; i++) {
                const struct tsr_container_req *c = &req->c[i];
                const struct tsr_res_item *lists[2] = {c->requests, c->limits};
                size_t counts[2] = {c->n_requests, c->n_limits};

                for (int l = 0; l < 2; l++) {
                        for (size_t k = 0; k < counts[l]; k++) {
                                struct tsr_key_class kc;

                                tsr_key_classify(lists[l][k].key, &kc);
                                if (kc.kind != TSR_KEY_NONE)
                                        return lists[l][k].key;
                        }
                }
        }
        return NULL;
}

/* What both halves share: the Pod read, its InstanceType's fold source, and the rules' verdict. */
/*
 * The calling thread's Pod spec, 115 KB kept for the thread's life (freed by the key's destructor
 * when the thread ends): a malloc and free of that size for every review made glibc consolidate
 * its free lists each time, about a tenth of the webhook's CPU under load.
 */
static pthread_key_t spec_key;
static pthread_once_t spec_once = PTHREAD_ONCE_INIT;
static bool spec_key_made;

static void spec_key_make(void)
{
        spec_key_made = pthread_key_create(&spec_key, free) == 0;
}

static struct tsr_pod_spec *spec_scratch(void)
{
        struct tsr_pod_spec *ps;

        pthread_once(&spec_once, spec_key_make);
        if (!spec_key_made)
                return NULL;
        ps = pthread_getspecific(spec_key);
        if (!ps) {
                ps = malloc(sizeof(*ps));
                if (ps && pthread_setspecific(spec_key, ps)) {
                        free(ps);
                        ps = NULL;
                }
        }
        return ps;
}

struct gate1 {
        struct tsr_pod_spec *spec; /* the thread's scratch */
        json_t *instancetype;
        struct fold_source source;
        struct tsr_request_verdict rules;
};

static void gate1_release(struct gate1 *g)
{
        json_decref(g->instancetype);
}

/*
 * Reads the Pod and judges it. Returns 0 with *skip set when the review is not gate 1's, 0 with
 * the verdict denied when the Pod cannot be sized, or an error for a Pod that cannot be read.
 */
static int gate1_judge(const struct tsr_webhook_lookup *lookup, const struct tsr_review *review,
                       struct gate1 *g, bool *skip, struct tsr_verdict *verdict,
                       struct tsr_diag *diag)
{
        const struct tsr_profile_figure *offered;
        const struct fold_source *kept;
        const char *queue, *key;
        char revision[MEMO_REVISION_MAX];
        size_t matches = 0;
        int rc;

        *skip = true;
        /* Not the verdict's 10 KB of rules: tsr_request_evaluate sets them before any reading. */
        g->spec = NULL;
        g->instancetype = NULL;
        memset(&g->source, 0, sizeof(g->source));
        g->rules.n_errors = 0;
        g->rules.n_edits = 0;
        if (strcmp(review->operation, "CREATE") || !review->object ||
            !(queue = queue_of(review->object)))
                return 0;
        *skip = false;
        g->spec = spec_scratch();
        rc = g->spec ? tsr_pod_spec_read(review->object, &g->spec->req, &g->spec->text, diag)
                     : tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        if (rc == TSR_ETOOBIG) {
                /* A Pod past what gate 1 sizes is answered, not failed: the limit is named. */
                tsr_verdict_deny(verdict, 403, "Forbidden",
                                 "%s (the most tessera's Pod webhook "
                                 "sizes)",
                                 diag ? diag->msg : "too many containers or resources");
                return 0;
        }
        if (rc)
                return rc;
        if (lookup->instancetype_revision_by_entrance &&
            lookup->instancetype_revision_by_entrance(lookup->ctx, queue, revision,
                                                      sizeof(revision)) &&
            (kept = memo_find(revision))) {
                g->source = *kept;
                source_fix(&g->source);
        } else {
                g->instancetype = lookup->instancetype_by_entrance(lookup->ctx, queue, &matches);
                if (matches != 1) {
                        tsr_verdict_deny(
                            verdict, 403, "Forbidden",
                            "%zu InstanceTypes carry schedule.gpustack.ai/queue-entrance=%s; "
                            "a Pod on this queue cannot be sized without exactly one",
                            matches, queue);
                        return 0;
                }
                rc = read_source(g->instancetype, &g->source, diag);
                if (rc)
                        return rc;
                if (lookup->instancetype_revision_by_entrance)
                        memo_keep(g->instancetype, &g->source);
        }
        if (!g->source.accel_key[0]) {
                key = first_accelerator_key(&g->spec->req);
                if (key)
                        tsr_verdict_deny(verdict, 403, "Forbidden",
                                         "spec: Forbidden: the InstanceType behind queue %s offers "
                                         "no accelerators; remove %s",
                                         queue, key);
                else
                        tsr_verdict_allow(verdict);
                return 0;
        }
        rc = tsr_request_evaluate(&g->spec->req, &g->source.pool, &g->rules, diag);
        if (rc)
                return rc;
        if (g->rules.awaits_memory && g->source.memory_rc) {
                /* A memory that is there but unreadable: the object is wrong, not late. */
                tsr_diag_set(diag, g->source.memory_rc, "%s", g->source.memory_diag.msg);
                return g->source.memory_rc;
        }
        if (g->rules.awaits_memory) {
                tsr_verdict_deny(verdict, 503, "ServiceUnavailable",
                                 "the accelerator memory of the InstanceType behind queue %s is "
                                 "not ready yet; retry",
                                 queue);
                return 0;
        }
        offered = g->rules.family == TSR_FAMILY_PARTITIONED && g->rules.profile
                      ? tsr_instancetype_detail_profile(&g->source.detail, g->rules.profile)
                      : NULL;
        if (g->rules.family == TSR_FAMILY_PARTITIONED &&
            (!g->source.detail.sliced_detail ||
             (!g->rules.n_errors && offered && !offered->memory_mib))) {
                /* No offered profiles yet, or the profile's memoryMib not computed yet. */
                tsr_verdict_deny(verdict, 503, "ServiceUnavailable",
                                 "the partition profiles of the InstanceType behind queue %s are "
                                 "not ready yet; retry",
                                 queue);
                return 0;
        }
        return 0;
}

int tsr_webhook_pod_mutate(const struct tsr_webhook_lookup *lookup, const struct tsr_review *review,
                           struct tsr_verdict *verdict, struct tsr_diag *diag)
{
        struct gate1 g;
        struct tsr_node_requirement pin;
        bool skip, changed;
        int rc = gate1_judge(lookup, review, &g, &skip, verdict, diag);

        if (rc || skip || verdict->code || !g.source.accel_key[0] || g.rules.n_errors) {
                if (!rc && (skip || (!verdict->code && g.rules.n_errors)))
                        tsr_verdict_allow(verdict); /* the validating half denies it */
                gate1_release(&g);
                return rc;
        }
        verdict->patched = tsr_json_share(review->object); /* written copy on write */
        if (!verdict->patched)
                rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        for (size_t i = 0; !rc && i < g.rules.n_edits; i++)
                rc = tsr_pod_spec_write_edit(verdict->patched, &g.spec->req, &g.rules.edits[i]);
        if (!rc && tsr_pin_card_count(&g.spec->req, g.source.pool.manufacturer, g.source.accel_key,
                                      &pin)) {
                json_t *spec = tsr_json_own_member(verdict->patched, "spec");

                rc = !spec && json_object_get(verdict->patched, "spec")
                         ? TSR_ENOMEM
                         : tsr_affinity_require(spec, &pin, 1, &changed);
                if (rc == TSR_EPARSE) {
                        rc = 0;
                        json_decref(verdict->patched);
                        verdict->patched = NULL;
                        tsr_verdict_deny(verdict, 403, "Forbidden",
                                         "spec.affinity.nodeAffinity: Invalid value: the required "
                                         "node affinity cannot take the card-count pin");
                        gate1_release(&g);
                        return 0;
                }
        }
        if (rc) {
                json_decref(verdict->patched);
                verdict->patched = NULL;
        } else {
                tsr_verdict_allow(verdict);
        }
        gate1_release(&g);
        return rc;
}

int tsr_webhook_pod_validate(const struct tsr_webhook_lookup *lookup,
                             const struct tsr_review *review, struct tsr_verdict *verdict,
                             struct tsr_diag *diag)
{
        struct gate1 g;
        char msg[TSR_FIELD_ERRORS_MAX * TSR_FIELD_ERROR_LEN];
        bool skip;
        int rc = gate1_judge(lookup, review, &g, &skip, verdict, diag);

        if (!rc && skip)
                tsr_verdict_allow(verdict);
        else if (!rc && !verdict->code && g.source.accel_key[0] && g.rules.n_errors) {
                tsr_verdict_deny(verdict, 403, "Forbidden", "%s",
                                 tsr_request_message(&g.rules, msg, sizeof(msg)));
                snprintf(verdict->rule, sizeof(verdict->rule), "%s",
                         tsr_request_rule_name(g.rules.rules[0]));
        } else if (!rc && !verdict->code)
                tsr_verdict_allow(verdict);
        gate1_release(&g);
        return rc;
}
