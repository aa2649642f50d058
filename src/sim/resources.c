/*
 * resources.c - resource lists: lookup, accumulation, a Pod's effective requests.
 */
#include "sim/resources.h"

#include "core/pod_resources.h"

#include <stdio.h>
#include <string.h>

int64_t pod_resources_get(const struct pod_resources *l, const char *name)
{
        for (size_t i = 0; i < l->n; i++)
                if (!strcmp(l->r[i].name, name))
                        return l->r[i].value;
        return -1;
}

void pod_resources_copy(struct pod_resources *dst, const struct pod_resources *src)
{
        dst->n = src->n;
        memcpy(dst->r, src->r, src->n * sizeof(src->r[0]));
}

void pod_resources_add(struct pod_resources *l, const char *name, int64_t value)
{
        for (size_t i = 0; i < l->n; i++) {
                if (strcmp(l->r[i].name, name))
                        continue;
                l->r[i].value =
                    value > INT64_MAX - l->r[i].value ? INT64_MAX : l->r[i].value + value;
                return;
        }
        if (l->n >= POD_RESOURCES_MAX)
                return;
        snprintf(l->r[l->n].name, sizeof(l->r[l->n].name), "%s", name);
        l->r[l->n].value = value;
        l->n++;
}

void pod_spec_resources(const struct tsr_pod_req *req, struct pod_resources *out)
{
        out->n = 0;
        for (size_t i = 0; i < req->n; i++) {
                const struct tsr_container_req *c = &req->c[i];
                const struct tsr_res_item *lists[2] = {c->requests, c->limits};
                size_t counts[2] = {c->n_requests, c->n_limits};

                for (int l = 0; l < 2; l++) {
                        for (size_t k = 0; k < counts[l]; k++) {
                                const char *name = lists[l][k].key;

                                if (pod_resources_get(out, name) >= 0)
                                        continue;
                                pod_resources_add(out, name,
                                                  tsr_pod_request(req, name, !strcmp(name, "cpu")));
                        }
                }
        }
        pod_resources_add(out, "pods", 1);
}
