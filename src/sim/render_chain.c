/*
 * render_chain.c - the Kueue chain objects the virtual cluster derives (core/chain.h), built by
 * the same codec/kueue_chain.h builders `tessera controller` applies: `kubectl get
 * resourceflavors|clusterqueues|localqueues|topologies|admissionchecks [NAME] [-o json]`.
 * The simulated controller holds the gpustack-node-devices check Active, so every accelerated
 * queue references it; no queue is stopped.
 */
#include "sim/render.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"
#include "codec/kueue_chain.h"
#include "sim/table.h"

#include <string.h>

json_t *sim_clusterqueue_json(const struct tsr_cluster *c, const struct tsr_chain_pool *p)
{
        struct tsr_chain_flavor flavors[TSR_CHAIN_FLAVORS_MAX];
        json_t *cq;
        size_t nf;

        tsr_cluster_flavors(c, p, flavors, &nf, NULL);
        return tsr_kueue_cluster_queue(p, flavors, nf, TSR_KUEUE_STOP_NONE, p->product != NULL, &cq,
                                       NULL)
                   ? NULL
                   : cq;
}

enum kind_id { KIND_FLAVOR, KIND_CLUSTERQUEUE, KIND_LOCALQUEUE, KIND_TOPOLOGY, KIND_CHECK };

/* One kind of the chain: its names as kubectl spells them, its API resource, namespaced or not. */
struct kind {
        enum kind_id id;
        const char *plural, *singular, *resource;
        bool namespaced;
};

static const struct kind kinds[] = {
    {KIND_FLAVOR, "resourceflavors", "resourceflavor", "resourceflavors.kueue.x-k8s.io", false},
    {KIND_CLUSTERQUEUE, "clusterqueues", "clusterqueue", "clusterqueues.kueue.x-k8s.io", false},
    {KIND_LOCALQUEUE, "localqueues", "localqueue", "localqueues.kueue.x-k8s.io", true},
    {KIND_TOPOLOGY, "topologies", "topology", "topologies.kueue.x-k8s.io", false},
    {KIND_CHECK, "admissionchecks", "admissioncheck", "admissionchecks.kueue.x-k8s.io", false},
};

/* Builds the objects of kind id that pool p (NULL: none, the cluster's own) contributes. */
static int pool_objects(const struct tsr_cluster *c, enum kind_id id,
                        const struct tsr_chain_pool *p, const char *ns, json_t *items,
                        struct tsr_diag *diag)
{
        struct tsr_chain_flavor flavors[TSR_CHAIN_FLAVORS_MAX];
        json_t *obj = NULL;
        size_t nf;
        int rc = 0;

        switch (id) {
        case KIND_FLAVOR:
                tsr_cluster_flavors(c, p, flavors, &nf, NULL);
                for (size_t f = 0; f < nf && !rc; f++) {
                        rc = tsr_kueue_resource_flavor(p, &flavors[f], &obj, diag);
                        if (!rc && json_array_append_new(items, obj))
                                rc = TSR_ENOMEM;
                }
                return rc;
        case KIND_CLUSTERQUEUE:
                obj = sim_clusterqueue_json(c, p);
                rc = obj ? 0 : TSR_ENOMEM;
                break;
        case KIND_LOCALQUEUE:
                rc = tsr_kueue_local_queue(p, ns, &obj, diag);
                break;
        case KIND_TOPOLOGY:
                rc = tsr_kueue_topology(&obj, diag);
                break;
        case KIND_CHECK:
                rc = tsr_kueue_admission_check(&obj, diag);
                break;
        }
        return rc ? rc : json_array_append_new(items, obj) ? TSR_ENOMEM : 0;
}

/* Appends every object of kind id in namespace ns to items. */
static int collect(const struct tsr_cluster *c, enum kind_id id, const char *ns, json_t *items,
                   struct tsr_diag *diag)
{
        struct tsr_chain_pool pools[TSR_CHAIN_POOLS_MAX];
        size_t np;
        int rc = 0;

        if (id == KIND_TOPOLOGY || id == KIND_CHECK)
                return pool_objects(c, id, NULL, ns, items, diag);
        tsr_cluster_pools(c, pools, &np);
        for (size_t p = 0; p < np && !rc; p++)
                rc = pool_objects(c, id, &pools[p], ns, items, diag);
        return rc;
}

static const char *name_of(json_t *obj)
{
        return json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
}

int sim_render_chain(const struct tsr_cluster *c, const char *what, const char *ns,
                     const char *name, bool json, struct tsr_buf *out, struct tsr_diag *diag)
{
        const char *header[] = {"NAME", NULL};
        json_t *items = json_array(), *shown = json_array(), *obj;
        struct sim_table t;
        size_t k = 0, i;
        int rc;

        while (strcmp(kinds[k].plural, what) && strcmp(kinds[k].singular, what))
                k++;
        rc = items && shown ? collect(c, kinds[k].id, ns, items, diag) : TSR_ENOMEM;
        if (!rc)
                rc = sim_table_init(&t, header);
        if (rc) {
                json_decref(items);
                json_decref(shown);
                return rc == TSR_ENOMEM ? tsr_diag_set(diag, rc, "out of memory") : rc;
        }
        json_array_foreach(items, i, obj)
        {
                const char *row[] = {name_of(obj)};

                if (name && strcmp(name, row[0]))
                        continue;
                if (!rc && json_array_append(shown, obj))
                        rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                if (!rc)
                        rc = sim_table_row(&t, row);
        }
        if (!rc && name && json_array_size(shown) == 0)
                rc = tsr_buf_addf(out, "Error from server (NotFound): %s \"%s\" not found\n",
                                  kinds[k].resource, name);
        else if (!rc && json_array_size(shown) == 0 && !json)
                rc = kinds[k].namespaced
                         ? tsr_buf_addf(out, "No resources found in %s namespace.\n", ns)
                         : tsr_buf_adds(out, "No resources found\n");
        else if (!rc)
                rc = sim_render_result(shown, name != NULL, json, &t, out);
        sim_table_release(&t);
        json_decref(items);
        json_decref(shown);
        return rc;
}

bool sim_render_chain_kind(const char *what)
{
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
                if (!strcmp(kinds[k].plural, what) || !strcmp(kinds[k].singular, what))
                        return true;
        return false;
}
