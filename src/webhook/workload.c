/*
 * workload.c - the Workload fit pin. It acts only when every condition of upstream §6 holds: the
 * queue name starts with gpustack-fnv64-, the LocalQueue exists, its ClusterQueue carries this
 * operator's mark, a same-named InstanceType names an accelerator group, the setting
 * workload-fit-affinity is on, and, on UPDATE, the old Workload holds no quota reservation (Kueue
 * lets PodSets change only then). Each PodSet gets its own requirements (core/pin.h).
 */
#include "webhook/workload.h"

#include "codec/affinity.h"
#include "codec/pod_spec.h"
#include "core/catalog.h"
#include "core/pin.h"

#include <stdlib.h>
#include <string.h>

#define ENTRANCE_PREFIX "gpustack-fnv64-"

/* Whether Workload w holds a quota reservation (status.admission, or QuotaReserved=True). */
static bool reserved(json_t *w)
{
        json_t *status = json_object_get(w, "status"), *cond;
        size_t i;

        if (json_object_get(status, "admission") &&
            !json_is_null(json_object_get(status, "admission")))
                return true;
        json_array_foreach(json_object_get(status, "conditions"), i, cond)
        {
                const char *type = json_string_value(json_object_get(cond, "type"));
                const char *st = json_string_value(json_object_get(cond, "status"));

                if (type && st && !strcmp(type, "QuotaReserved") && !strcmp(st, "True"))
                        return true;
        }
        return false;
}

/* The InstanceType whose fit labels pin w, or NULL when the pin does not apply. */
static json_t *pinning_instancetype(const struct tsr_webhook_lookup *lookup,
                                    const struct tsr_review *review)
{
        json_t *w = review->object, *lq = NULL, *cq = NULL, *it = NULL;
        const char *queue =
            json_string_value(json_object_get(json_object_get(w, "spec"), "queueName"));
        const char *ns =
            json_string_value(json_object_get(json_object_get(w, "metadata"), "namespace"));
        const char *cq_name, *mark, *group;

        if (!lookup->settings.value[TSR_SETTING_WORKLOAD_FIT_AFFINITY] || !queue ||
            strncmp(queue, ENTRANCE_PREFIX, strlen(ENTRANCE_PREFIX)))
                return NULL;
        if (!strcmp(review->operation, "UPDATE") &&
            (!review->old_object || reserved(review->old_object)))
                return NULL;
        lq = lookup->localqueue(lookup->ctx, ns ? ns : review->ns, queue);
        cq_name = json_string_value(json_object_get(json_object_get(lq, "spec"), "clusterQueue"));
        if (cq_name)
                cq = lookup->clusterqueue(lookup->ctx, cq_name);
        mark = json_string_value(json_object_get(
            json_object_get(json_object_get(cq, "metadata"), "labels"), TSR_OWNED_QUEUE_LABEL));
        if (mark && !strcmp(mark, TSR_OWNED_QUEUE_VALUE))
                it = lookup->instancetype(lookup->ctx, cq_name);
        group = json_string_value(json_object_get(json_object_get(it, "spec"), "acceleratorGroup"));
        if (it && (!group || !*group)) {
                json_decref(it);
                it = NULL;
        }
        json_decref(lq);
        json_decref(cq);
        return it;
}

int tsr_webhook_workload_mutate(const struct tsr_webhook_lookup *lookup,
                                const struct tsr_review *review, struct tsr_verdict *verdict,
                                struct tsr_diag *diag)
{
        json_t *it, *patched, *podset;
        const struct tsr_manufacturer *m;
        const char *group;
        char mfr[64];
        bool any = false;
        size_t i;

        (void)diag;
        tsr_verdict_allow(verdict);
        if ((strcmp(review->operation, "CREATE") && strcmp(review->operation, "UPDATE")) ||
            !review->object)
                return 0;
        it = pinning_instancetype(lookup, review);
        if (!it)
                return 0;
        group = json_string_value(json_object_get(json_object_get(it, "spec"), "acceleratorGroup"));
        snprintf(mfr, sizeof(mfr), "%.*s", (int)strcspn(group, "-"), group);
        m = tsr_catalog_manufacturer_by_key(mfr);
        patched = m ? json_deep_copy(review->object) : NULL;
        json_array_foreach(json_object_get(json_object_get(patched, "spec"), "podSets"), i, podset)
        {
                struct tsr_node_requirement pins[TSR_PIN_MAX];
                json_t *tmpl = json_object_get(podset, "template");
                struct tsr_pod_spec *spec;
                size_t n;
                bool changed = false;

                if (tsr_pod_spec_new(tmpl, &spec, NULL))
                        continue;
                n = tsr_pin_workload(&spec->req, m, group, pins);
                free(spec);
                if (n &&
                    tsr_affinity_require(json_object_get(tmpl, "spec"), pins, n, &changed) == 0)
                        any |= changed;
        }
        if (any)
                verdict->patched = patched;
        else
                json_decref(patched);
        json_decref(it);
        return 0;
}
