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

int64_t tsr_credits_of_pod(const struct tsr_pod_req *pod, const struct tsr_manufacturer *m)
{
        int64_t credits = 0;

        credits =
            sat_add(credits, sat_mul(request_of(pod, m, TSR_KEY_EXCLUSIVE), TSR_UNITS_PER_ACCEL));
        credits =
            sat_add(credits, sat_mul(request_of(pod, m, TSR_KEY_SHARED), TSR_UNITS_PER_SHARE));
        credits = sat_add(credits, sat_mul(request_of(pod, m, TSR_KEY_SLICED_UNITS),
                                           request_of(pod, m, TSR_KEY_SLICED)));
        if (m->partition_kind)
                credits = sat_add(credits, request_of(pod, m, TSR_KEY_PARTITIONED_UNITS));
        return credits;
}

int64_t tsr_credits_quota(int64_t accelerators)
{
        return sat_mul(accelerators, TSR_UNITS_PER_ACCEL);
}
