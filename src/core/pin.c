/*
 * pin.c - the per-PodSet and per-Pod pin requirements.
 */
#include "core/pin.h"

#include "core/fit.h"
#include "core/pod_resources.h"

#include <stdio.h>

/* The largest value of key kind any one container (init or app) asks for. */
static int64_t largest(const struct tsr_pod_req *pod, const struct tsr_manufacturer *m,
                       enum tsr_key_kind kind)
{
        char key[TSR_KEY_MAX];
        int64_t best = 0;

        if (tsr_key_format(key, m, kind, NULL) != 0)
                return 0;
        for (size_t i = 0; i < pod->n; i++) {
                int64_t v = tsr_container_request(&pod->c[i], key, false);

                if (v > best)
                        best = v;
        }
        return best;
}

static void gt(struct tsr_node_requirement *r, const char *prefix, const char *accel_key,
               const char *suffix, int64_t need)
{
        snprintf(r->key, sizeof(r->key), "%s%s%s", prefix, accel_key, suffix);
        snprintf(r->op, sizeof(r->op), "Gt");
        snprintf(r->value, sizeof(r->value), "%lld", (long long)(need - 1));
}

size_t tsr_pin_workload(const struct tsr_pod_req *tmpl, const struct tsr_manufacturer *m,
                        const char *accel_key, struct tsr_node_requirement *out)
{
        int64_t units = largest(tmpl, m, TSR_KEY_SLICED_UNITS);
        int64_t shares = largest(tmpl, m, TSR_KEY_SHARED);
        size_t n = 0;

        if (units > 0)
                gt(&out[n++], TSR_FIT_SLICED_PREFIX, accel_key, "", units);
        if (shares >= 2)
                gt(&out[n++], TSR_FIT_SHARED_PREFIX, accel_key, "", shares);
        return n;
}

size_t tsr_pin_card_count(const struct tsr_pod_req *pod, const struct tsr_manufacturer *m,
                          const char *accel_key, struct tsr_node_requirement *out)
{
        int64_t shares = largest(pod, m, TSR_KEY_SHARED);

        if (shares < 2)
                return 0;
        gt(out, TSR_ACCEL_COUNT_PREFIX, accel_key, ".count", shares);
        return 1;
}
