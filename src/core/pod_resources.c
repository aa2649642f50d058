/*
 * pod_resources.c - effective Pod requests. Containers arrive init list first (in order), then
 * the app list, as pod_spec_read produces them; the sidecar sum is accumulated in that order.
 */
#include "core/pod_resources.h"

#include <string.h>

static int64_t sat_add(int64_t a, int64_t b)
{
        return b > INT64_MAX - a ? INT64_MAX : a + b;
}

int64_t tsr_container_request(const struct tsr_container_req *c, const char *key, bool milli)
{
        const struct tsr_res_item *lists[2] = {c->requests, c->limits};
        size_t counts[2] = {c->n_requests, c->n_limits};

        for (int l = 0; l < 2; l++) {
                for (size_t i = 0; i < counts[l]; i++) {
                        int64_t v = 0;

                        if (strcmp(lists[l][i].key, key) != 0)
                                continue;
                        if (milli ? tsr_quantity_milli(&lists[l][i].q, &v)
                                  : tsr_quantity_value(&lists[l][i].q, &v))
                                return INT64_MAX;
                        return v < 0 ? 0 : v;
                }
        }
        return 0;
}

int64_t tsr_pod_request(const struct tsr_pod_req *pod, const char *key, bool milli)
{
        int64_t running = 0, sidecars = 0, init_peak = 0;

        for (size_t i = 0; i < pod->n; i++) {
                const struct tsr_container_req *c = &pod->c[i];
                int64_t v = tsr_container_request(c, key, milli);

                switch (c->group) {
                case TSR_CG_SIDECAR:
                        sidecars = sat_add(sidecars, v);
                        break;
                case TSR_CG_INIT:
                        if (sat_add(v, sidecars) > init_peak)
                                init_peak = sat_add(v, sidecars);
                        break;
                case TSR_CG_APP:
                        running = sat_add(running, v);
                        break;
                }
        }
        running = sat_add(running, sidecars);
        return running > init_peak ? running : init_peak;
}
