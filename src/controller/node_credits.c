/*
 * node_credits.c - a managed Node's credits capacity: credits.gpustack.ai/<manufacturer> =
 * accelerators x 1,600,000 on Node.status.capacity (the kubelet copies unknown extended resources
 * from capacity into allocatable; the test nodes carry it in both).
 *
 * Why: Kueue v0.17.0's Topology-Aware Scheduling fits a PodSet against each node's allocatable
 * with the Workload's quota requests, after resources.transformations (flavorassigner
 * ComputeTASNetUsage), so a Pod asking for nvidia.com/gpu reaches TAS as credits, and a node
 * that advertises no credits never fits (docs/controller.md). This is tessera's addition to the
 * upstream chain; upstream's Kueue version judged TAS on the Pod's own requests.
 *
 * Written by server-side apply of status.capacity[<key>] alone with the field manager
 * tessera-node-features (nodes/status): the device manager's merge patches of its own counting
 * keys leave it alone, and a Node that stops being managed gets an empty apply, which removes the
 * key. Nothing is written when capacity already says it.
 */
#include "controller/controller_int.h"

#include "base/diag.h"
#include "base/err.h"
#include "base/log.h"
#include "base/quantity.h"
#include "controller/managed_nodes.h"
#include "core/credits.h"
#include "kube/cache.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int ctl_node_credits_reconcile(struct tsr_controller *c, const struct ctl_node *n, json_t *node)
{
        json_t *have = json_object_get(json_object_get(node, "status"), "capacity");
        json_t *want = json_object(), *body;
        const char *name =
            json_string_value(json_object_get(json_object_get(node, "metadata"), "name"));
        char key[TSR_KEY_MAX], value[TSR_QUANTITY_STR_MAX], path[320];
        struct tsr_diag diag;
        const char *k;
        json_t *v;
        bool stale = false;
        int rc;

        if (!want || !name)
                return json_decref(want), TSR_ENOMEM;
        if (n && n->chain.product) {
                struct tsr_quantity q = tsr_quantity_from_int(
                    tsr_credits_quota(n->chain.accel_count), TSR_QF_DECIMAL_SI);

                tsr_credits_resource(tsr_catalog_manufacturer(n->chain.product->manufacturer), key,
                                     sizeof(key));
                json_object_set_new(want, key, json_string(tsr_quantity_format(&q, value)));
        }
        json_object_foreach(have, k, v)
        {
                if (!strncmp(k, TSR_CREDITS_PREFIX, strlen(TSR_CREDITS_PREFIX)) &&
                    !json_object_get(want, k))
                        stale = true;
        }
        json_object_foreach(want, k, v)
        {
                if (!json_equal(json_object_get(have, k), v))
                        stale = true;
        }
        if (!stale) {
                json_decref(want);
                return 0;
        }
        body = json_pack("{s:s, s:s, s:{s:s}, s:{s:o}}", "apiVersion", "v1", "kind", "Node",
                         "metadata", "name", name, "status", "capacity", want);
        snprintf(path, sizeof(path), "/api/v1/nodes/%s/status", name);
        tsr_diag_clear(&diag);
        rc = body ? ctl_apply(c, path, body, CTL_MANAGER_FEATURES, NULL, &diag) : TSR_ENOMEM;
        if (rc)
                tsr_log(TSR_LOG_WARN, "node credits not applied", "node", name, "error", diag.msg,
                        NULL);
        json_decref(body);
        return rc;
}
