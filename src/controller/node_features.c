/*
 * node_features.c - the node feature labels (upstream publishes them through NFD): a managed
 * Node carries the labels core/chain.h derives for it (gpustack.ai/managed, the profile, the
 * general key, and with accelerators its acceleratable key and .count), so the Pod webhook's
 * .count pin and the ResourceFlavors' nodeLabels select on something real.
 *
 * Written by server-side apply of the Node's metadata.labels alone with the field manager
 * tessera-node-features: a label the manager applied before and no longer applies is removed by
 * the API server, and labels other writers own (the kubelet's, the device manager's fit labels)
 * are left alone. A Node that is no longer managed (its Devices object is gone) gets an empty
 * apply, which removes every label this manager owns. Nothing is written when the Node already
 * carries exactly the derived labels among the keys this reconciler owns. A node whose labels
 * cannot be derived (an os or arch that is no label value) is logged and gets none. The same key
 * keeps the Node's credits capacity (node_credits.c).
 */
#include "controller/controller_int.h"

#include "base/diag.h"
#include "base/err.h"
#include "base/log.h"
#include "codec/kueue_chain.h"
#include "controller/managed_nodes.h"
#include "core/pin.h"
#include "kube/cache.h"

#include <stdio.h>
#include <string.h>

/* Whether key is one of the feature labels this reconciler owns. */
static bool owned_key(const char *key)
{
        return !strcmp(key, TSR_CHAIN_MANAGED_LABEL) || !strcmp(key, TSR_CHAIN_PROFILE_LABEL) ||
               !strncmp(key, TSR_CHAIN_GENERAL_PREFIX, strlen(TSR_CHAIN_GENERAL_PREFIX)) ||
               !strncmp(key, TSR_ACCEL_COUNT_PREFIX, strlen(TSR_ACCEL_COUNT_PREFIX));
}

/* Whether the Node's labels hold exactly want among the owned keys. */
static bool up_to_date(json_t *node, json_t *want)
{
        json_t *have = json_object_get(json_object_get(node, "metadata"), "labels"), *v;
        const char *key;

        json_object_foreach(want, key, v)
        {
                if (!json_equal(json_object_get(have, key), v))
                        return false;
        }
        json_object_foreach(have, key, v)
        {
                if (owned_key(key) && !json_object_get(want, key))
                        return false;
        }
        return true;
}

int ctl_node_features_reconcile(struct tsr_controller *c, const char *name)
{
        struct ctl_node one;
        struct tsr_chain_labels labels = {0};
        struct tsr_diag diag;
        const struct ctl_node *n;
        json_t *node, *want, *body;
        char path[320];
        bool managed;
        int rc, credits_rc;

        tsr_diag_clear(&diag);
        node = tsr_kube_cache_get(c->cache, TSR_KUBE_CACHE_NODES, NULL, name);
        if (!node)
                return 0; /* deleted: nothing to label */
        rc = ctl_node_load(c, node, &one, &managed);
        if (rc) {
                json_decref(node);
                return rc;
        }
        n = managed ? &one : NULL;
        if (n) {
                int bad = tsr_chain_node_labels(&n->chain, &labels, &diag);

                if (bad) {
                        labels.n = 0;
                        tsr_log(TSR_LOG_WARN, "node labels not derived", "node", name, "error",
                                diag.msg, NULL);
                }
                if (n->fault[0])
                        tsr_log(TSR_LOG_WARN, "node's Devices serve nothing", "node", name, "error",
                                n->fault, NULL);
        }
        credits_rc = ctl_node_credits_reconcile(c, n, node);
        if (managed)
                ctl_node_release(&one);
        want = json_object();
        if (!want || tsr_kueue_labels_set(want, &labels))
                rc = TSR_ENOMEM;
        if (rc || up_to_date(node, want)) {
                json_decref(want);
                json_decref(node);
                return rc ? rc : credits_rc;
        }
        body = json_pack("{s:s, s:s, s:{s:s, s:o}}", "apiVersion", "v1", "kind", "Node", "metadata",
                         "name", name, "labels", want);
        snprintf(path, sizeof(path), "/api/v1/nodes/%s", name);
        rc = body ? ctl_apply(c, path, body, CTL_MANAGER_FEATURES, NULL, &diag) : TSR_ENOMEM;
        if (rc)
                tsr_log(TSR_LOG_WARN, "node labels not applied", "node", name, "error", diag.msg,
                        NULL);
        else
                tsr_log(TSR_LOG_INFO, "node labels applied", "node", name, NULL);
        json_decref(body);
        json_decref(node);
        return rc ? rc : credits_rc;
}
