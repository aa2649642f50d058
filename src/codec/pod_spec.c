/*
 * pod_spec.c - Pod JSON <-> core request model.
 */
#include "codec/pod_spec.h"

#include "codec/json_tree.h"

#include "base/diag.h"
#include "base/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int read_list(json_t *res, const char *which, struct tsr_res_item *items, size_t *n,
                     struct tsr_pod_spec_text *text, const char *where, struct tsr_diag *diag)
{
        json_t *map = json_object_get(res, which), *v;
        const char *key;

        *n = 0;
        if (!map)
                return 0;
        if (!json_is_object(map))
                return tsr_diag_set(diag, TSR_EPARSE, "%s.resources.%s must be a map", where,
                                    which);
        if (json_object_size(map) > TSR_RES_MAX)
                return tsr_diag_set(diag, TSR_ETOOBIG,
                                    "%s.resources.%s: Too many: %zu: must have at most %d items",
                                    where, which, json_object_size(map), TSR_RES_MAX);
        json_object_foreach(map, key, v)
        {
                struct tsr_res_item *it;
                const char *s;

                it = &items[*n];
                if (json_is_string(v)) {
                        s = json_string_value(v);
                } else if (json_is_integer(v) &&
                           text->n < sizeof(text->values) / sizeof(text->values[0])) {
                        snprintf(text->values[text->n], sizeof(text->values[0]), "%lld",
                                 (long long)json_integer_value(v));
                        s = text->values[text->n++];
                } else {
                        return tsr_diag_set(diag, TSR_EPARSE,
                                            "%s.resources.%s[%s]: not a "
                                            "quantity",
                                            where, which, key);
                }
                if (tsr_quantity_parse(s, &it->q, NULL) != 0)
                        return tsr_diag_set(diag, TSR_EPARSE,
                                            "%s.resources.%s[%s]: \"%s\" is "
                                            "not a quantity",
                                            where, which, key, s);
                it->key = key;
                it->text = s;
                (*n)++;
        }
        return 0;
}

static int read_containers(json_t *list, bool init, struct tsr_pod_req *out,
                           struct tsr_pod_spec_text *text, struct tsr_diag *diag)
{
        size_t i;
        json_t *c;

        if (list && !json_is_array(list))
                return tsr_diag_set(diag, TSR_EPARSE, "spec.%s must be a list",
                                    init ? "initContainers" : "containers");
        json_array_foreach(list, i, c)
        {
                struct tsr_container_req *r;
                const char *policy = json_string_value(json_object_get(c, "restartPolicy"));
                json_t *res = json_object_get(c, "resources");
                char where[64];
                int rc;

                r = &out->c[out->n];
                memset(r, 0, sizeof(*r));
                r->name = json_string_value(json_object_get(c, "name"));
                if (!r->name)
                        return tsr_diag_set(diag, TSR_EPARSE, "spec.%s[%zu].name: Required value",
                                            init ? "initContainers" : "containers", i);
                r->group = !init                                   ? TSR_CG_APP
                           : (policy && !strcmp(policy, "Always")) ? TSR_CG_SIDECAR
                                                                   : TSR_CG_INIT;
                r->index = (unsigned)i;
                snprintf(where, sizeof(where), "spec.%s[%zu]",
                         init ? "initContainers" : "containers", i);
                rc = read_list(res, "limits", r->limits, &r->n_limits, text, where, diag);
                if (!rc)
                        rc = read_list(res, "requests", r->requests, &r->n_requests, text, where,
                                       diag);
                if (rc)
                        return rc;
                out->n++;
        }
        return 0;
}

int tsr_pod_spec_read(json_t *pod, struct tsr_pod_req *out, struct tsr_pod_spec_text *text,
                      struct tsr_diag *diag)
{
        json_t *spec = json_object_get(pod, "spec");
        json_t *init = json_object_get(spec, "initContainers");
        json_t *app = json_object_get(spec, "containers");
        size_t total = json_array_size(init) + json_array_size(app);
        int rc;

        out->n = 0;
        text->n = 0;
        if (total > TSR_CONTAINERS_MAX)
                return tsr_diag_set(diag, TSR_ETOOBIG,
                                    "spec.containers: Too many: %zu: must have at most %d items "
                                    "(containers and initContainers together)",
                                    total, TSR_CONTAINERS_MAX);
        rc = read_containers(init, true, out, text, diag);
        if (!rc)
                rc = read_containers(app, false, out, text, diag);
        return rc;
}

int tsr_pod_spec_new(json_t *pod, struct tsr_pod_spec **out, struct tsr_diag *diag)
{
        struct tsr_pod_spec *ps = malloc(sizeof(*ps));
        int rc;

        if (!ps)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        rc = tsr_pod_spec_read(pod, &ps->req, &ps->text, diag);
        if (rc) {
                free(ps);
                return rc;
        }
        *out = ps;
        return 0;
}

bool tsr_pod_finished(json_t *pod)
{
        const char *phase =
            json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));

        return phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"));
}

/*
 * parent's object member key, made parent's own (json_tree.h: it may be shared) or created empty.
 * NULL on ENOMEM.
 */
static json_t *own_object(json_t *parent, const char *key)
{
        json_t *child;

        if (json_object_get(parent, key))
                return tsr_json_own_member(parent, key);
        child = json_object();
        return child && !json_object_set_new(parent, key, child) ? child : NULL;
}

int tsr_pod_spec_write_edit(json_t *pod, const struct tsr_pod_req *req,
                            const struct tsr_res_edit *e)
{
        const struct tsr_container_req *r = &req->c[e->container];
        const char *list = r->group == TSR_CG_APP ? "containers" : "initContainers";
        const char *which[2] = {"requests", "limits"};
        json_t *c, *res;
        char value[32];

        if (!json_is_object(
                json_array_get(json_object_get(json_object_get(pod, "spec"), list), r->index)))
                return TSR_EINVAL;
        /* Each step is made pod's own before it is written: pod may share them (json_tree.h). */
        c = tsr_json_own_element(tsr_json_own_member(tsr_json_own_member(pod, "spec"), list),
                                 r->index);
        res = c ? own_object(c, "resources") : NULL;
        if (!res)
                return TSR_ENOMEM;
        snprintf(value, sizeof(value), "%lld", (long long)e->value);
        for (int w = 0; w < 2; w++) {
                json_t *map = own_object(res, which[w]);

                if (!map || json_object_set_new(map, e->key, json_string(value)))
                        return TSR_ENOMEM;
        }
        return 0;
}
