/*
 * credits.c - the credits transformation of one manufacturer's keys.
 */
#include "core/credits.h"

#include "core/keys.h"
#include "core/pod_resources.h"

#include <stdio.h>

static int64_t sat_mul(int64_t a, int64_t b)
{
        if (a <= 0 || b <= 0)
                return 0;
        return a > INT64_MAX / b ? INT64_MAX : a * b;
}

static int64_t sat_add(int64_t a, int64_t b)
{
        return b > INT64_MAX - a ? INT64_MAX : a + b;
}

void tsr_credits_resource(const struct tsr_manufacturer *m, char *out, size_t len)
{
        snprintf(out, len, TSR_CREDITS_PREFIX "%s", m->key);
}

static int64_t request_of(const struct tsr_pod_req *pod, const struct tsr_manufacturer *m,
                          enum tsr_key_kind kind)
{
        char key[TSR_KEY_MAX];

        if (tsr_key_format(key, m, kind, NULL) != 0)
                return 0;
        return tsr_pod_request(pod, key, false);
}

size_t tsr_credits_transformations(const struct tsr_manufacturer *m,
                                   struct tsr_credits_transformation *out)
{
        size_t n = 0;

        out[n++] = (struct tsr_credits_transformation){TSR_KEY_EXCLUSIVE, TSR_KEY_NONE,
                                                       TSR_UNITS_PER_ACCEL};
        out[n++] =
            (struct tsr_credits_transformation){TSR_KEY_SHARED, TSR_KEY_NONE, TSR_UNITS_PER_SHARE};
        out[n++] = (struct tsr_credits_transformation){TSR_KEY_SLICED_UNITS, TSR_KEY_SLICED, 1};
        if (m->partition_kind)
                out[n++] =
                    (struct tsr_credits_transformation){TSR_KEY_PARTITIONED_UNITS, TSR_KEY_NONE, 1};
        /* The counts cost nothing: replaced, so that no queue is asked for them (Kueue v0.17.0
         * has no quotaCheckStrategy IgnoreUndeclared). multiplyBy reads the Pod's own requests,
         * so .sliced still multiplies the units. */
        out[n++] = (struct tsr_credits_transformation){TSR_KEY_SLICED, TSR_KEY_NONE, 0};
        if (m->partition_kind)
                out[n++] =
                    (struct tsr_credits_transformation){TSR_KEY_PARTITIONED, TSR_KEY_NONE, 0};
        return n;
}

int64_t tsr_credits_of_pod(const struct tsr_pod_req *pod, const struct tsr_manufacturer *m)
{
        struct tsr_credits_transformation t[TSR_CREDITS_TRANSFORMATIONS_MAX];
        size_t n = tsr_credits_transformations(m, t);
        int64_t credits = 0;

        for (size_t i = 0; i < n; i++) {
                int64_t v = sat_mul(request_of(pod, m, t[i].input), t[i].credits);

                if (t[i].multiply_by != TSR_KEY_NONE)
                        v = sat_mul(v, request_of(pod, m, t[i].multiply_by));
                credits = sat_add(credits, v);
        }
        return credits;
}

int64_t tsr_credits_quota(int64_t accelerators)
{
        return sat_mul(accelerators, TSR_UNITS_PER_ACCEL);
}
