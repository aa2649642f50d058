/*
 * publish.c - one call computes the wanted state (keys, labels, Devices object) from capability x
 * ledger, compares it with the record, and only then talks to the API server: the Node part
 * (one GET, then at most one status patch and one labels patch, each holding only what the
 * Node lacks or must lose) and the Devices part (GET or POST when unknown, then at most one
 * spec patch and one status patch). Every write is a JSON merge patch (RFC 7386), so null
 * removes a key and a retry is harmless. The record is replaced only after the last request
 * succeeded.
 */
#include "devicemanager/publish.h"

#include "base/diag.h"
#include "base/err.h"
#include "base/quantity.h"
#include "codec/devices_object.h"
#include "core/fit.h"
#include "core/keys.h"
#include "core/node_keys.h"
#include "kube/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODES_PATH   "/api/v1/nodes/"
#define DEVICES_PATH "/apis/" TSR_DEVICES_API_VERSION "/devices"
#define PATH_LEN     (sizeof(DEVICES_PATH) + 256 + sizeof("/status"))
#define NODE_MAX     253

/* What one call wants the API server to hold. */
struct want {
        json_t *capacity; /* node-capacity key -> quantity string */
        json_t *labels;   /* fit label -> value */
        json_t *devices;  /* the Devices object */
};

void tsr_dm_published_init(struct tsr_dm_published *p, const struct tsr_manufacturer *m)
{
        memset(p, 0, sizeof(*p));
        p->manufacturer = m;
}

void tsr_dm_published_release(struct tsr_dm_published *p)
{
        json_decref(p->capacity);
        json_decref(p->labels);
        json_decref(p->spec);
        json_decref(p->status);
        tsr_dm_published_init(p, p->manufacturer);
}

/* ---- what is ours ------------------------------------------------------------------------- */

/* A node-capacity key of m (never a device-plugin pool); *kind receives its kind. */
static bool our_key(const char *name, const struct tsr_manufacturer *m, enum tsr_key_kind *kind)
{
        struct tsr_key_class kc;

        tsr_key_classify(name, &kc);
        *kind = kc.kind;
        if (!kc.manufacturer || kc.manufacturer->id != m->id)
                return false;
        switch (kc.kind) {
        case TSR_KEY_SLICED_UNITS:
        case TSR_KEY_SLICED_CORES:
        case TSR_KEY_SLICED_MEMORY_PERCENT:
        case TSR_KEY_SLICED_MEMORY_MIB:
        case TSR_KEY_PARTITIONED_UNITS:
        case TSR_KEY_PARTITIONED_PROFILE:
                return true;
        default:
                return false;
        }
}

/* A fit label of one of m's models ("<prefix><manufacturer>-<group id>"). */
static bool our_label(const char *name, const struct tsr_manufacturer *m)
{
        static const char *const prefixes[] = {TSR_FIT_SLICED_PREFIX, TSR_FIT_SHARED_PREFIX};
        size_t ml = strlen(m->key);

        for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
                size_t pl = strlen(prefixes[i]);

                if (!strncmp(name, prefixes[i], pl) && !strncmp(name + pl, m->key, ml) &&
                    name[pl + ml] == '-')
                        return true;
        }
        return false;
}

/* True when the pool (the bare .sliced or .partitioned key) is above 0 in the Node's capacity. */
static bool pool_up(json_t *capacity, const struct tsr_manufacturer *m, enum tsr_key_kind pool)
{
        char name[TSR_KEY_MAX];
        struct tsr_quantity q;
        const char *s;
        int64_t v;

        if (tsr_key_format(name, m, pool, NULL))
                return false;
        s = json_string_value(json_object_get(capacity, name));
        return s && !tsr_quantity_parse(s, &q, NULL) && !tsr_quantity_value(&q, &v) && v > 0;
}

/* ---- the wanted state --------------------------------------------------------------------- */

static void want_release(struct want *w)
{
        json_decref(w->capacity);
        json_decref(w->labels);
        json_decref(w->devices);
}

static int want_build(const char *node, const struct tsr_manufacturer *m,
                      const struct tsr_accel_cap *caps, const struct tsr_accel_ledger *ledger,
                      size_t n, struct want *w, struct tsr_diag *diag)
{
        struct tsr_node_keys *keys = NULL;
        enum tsr_key_kind kind;
        int rc = 0;

        w->capacity = json_object();
        w->labels = json_object();
        w->devices = NULL;
        if (!w->capacity || !w->labels)
                return tsr_diag_set(diag, TSR_ENOMEM, "publish %s: out of memory", node);
        if (n) {
                keys = malloc(sizeof(*keys));
                if (!keys)
                        return tsr_diag_set(diag, TSR_ENOMEM, "publish %s: out of memory", node);
                rc = tsr_node_keys_project(m, caps, ledger, n, keys, diag);
                for (size_t i = 0; !rc && i < keys->n; i++) {
                        char s[TSR_QUANTITY_STR_MAX];
                        struct tsr_quantity q =
                            tsr_quantity_from_int(keys->keys[i].capacity, TSR_QF_DECIMAL_SI);

                        if (our_key(keys->keys[i].name, m, &kind) &&
                            json_object_set_new(w->capacity, keys->keys[i].name,
                                                json_string(tsr_quantity_format(&q, s))))
                                rc = tsr_diag_set(diag, TSR_ENOMEM, "publish %s: out of memory",
                                                  node);
                }
                free(keys);
        }
        if (!rc)
                rc = tsr_devices_fit_labels(caps, ledger, n, w->labels, diag);
        if (!rc)
                rc = tsr_devices_object_build(node, caps, ledger, n, &w->devices, diag);
        return rc;
}

/* ---- requests ----------------------------------------------------------------------------- */

/* Merge-patches path with body (taken: freed here; NULL is out of memory). */
static int patch(struct tsr_kube_client *c, const char *path, json_t *body, struct tsr_diag *diag)
{
        int rc;

        if (!body)
                return tsr_diag_set(diag, TSR_ENOMEM, "PATCH %s: out of memory", path);
        rc = tsr_kube_client_patch(c, path, TSR_KUBE_PATCH_MERGE, body, NULL, NULL, NULL, diag);
        json_decref(body);
        return rc;
}

/*
 * Adds to p what map (the Node's capacity or allocatable) must gain or lose: every wanted key
 * whose pool is up and whose value differs, and null for every key of ours not wanted or not up.
 */
static int diff_keys(json_t *map, const struct want *w, const struct tsr_manufacturer *m,
                     const bool up[2], json_t *p, bool *withheld)
{
        enum tsr_key_kind kind;
        const char *k;
        json_t *v;
        int rc = 0;

        json_object_foreach(w->capacity, k, v)
        {
                our_key(k, m, &kind);
                if (!up[tsr_key_family(kind) == TSR_FAMILY_PARTITIONED]) {
                        *withheld = true;
                        continue;
                }
                if (!json_equal(json_object_get(map, k), v))
                        rc |= json_object_set(p, k, v);
        }
        json_object_foreach(map, k, v)
        {
                if (!our_key(k, m, &kind))
                        continue;
                if (!json_object_get(w->capacity, k) ||
                    !up[tsr_key_family(kind) == TSR_FAMILY_PARTITIONED])
                        rc |= json_object_set_new(p, k, json_null());
        }
        return rc ? TSR_ENOMEM : 0;
}

/* Adds to p the labels wanted that differ, and null for every fit label of ours not wanted. */
static int diff_labels(json_t *labels, const struct want *w, const struct tsr_manufacturer *m,
                       json_t *p)
{
        const char *k;
        json_t *v;
        int rc = 0;

        json_object_foreach(w->labels, k, v)
        {
                if (!json_equal(json_object_get(labels, k), v))
                        rc |= json_object_set(p, k, v);
        }
        json_object_foreach(labels, k, v)
        {
                if (our_label(k, m) && !json_object_get(w->labels, k))
                        rc |= json_object_set_new(p, k, json_null());
        }
        return rc ? TSR_ENOMEM : 0;
}

/* Reads the Node and patches its keys and labels; *withheld: gating held a key back. */
static int node_sync(struct tsr_kube_client *c, const char *node, const struct tsr_manufacturer *m,
                     const struct want *w, bool *withheld, struct tsr_diag *diag)
{
        json_t *obj = NULL, *st, *pc = json_object(), *pa = json_object(), *pl = json_object();
        char path[PATH_LEN];
        bool up[2];
        int rc;

        snprintf(path, sizeof(path), NODES_PATH "%s", node);
        rc = pc && pa && pl ? tsr_kube_client_get(c, path, &obj, NULL, diag)
                            : tsr_diag_set(diag, TSR_ENOMEM, "publish %s: out of memory", node);
        if (rc)
                goto out;
        st = json_object_get(obj, "status");
        up[0] = pool_up(json_object_get(st, "capacity"), m, TSR_KEY_SLICED);
        up[1] = pool_up(json_object_get(st, "capacity"), m, TSR_KEY_PARTITIONED);
        if (diff_keys(json_object_get(st, "capacity"), w, m, up, pc, withheld) ||
            diff_keys(json_object_get(st, "allocatable"), w, m, up, pa, withheld) ||
            diff_labels(json_object_get(json_object_get(obj, "metadata"), "labels"), w, m, pl)) {
                rc = tsr_diag_set(diag, TSR_ENOMEM, "publish %s: out of memory", node);
                goto out;
        }
        if (json_object_size(pc) || json_object_size(pa)) {
                snprintf(path, sizeof(path), NODES_PATH "%s/status", node);
                rc = patch(c, path,
                           json_pack("{s:{s:O, s:O}}", "status", "capacity", pc, "allocatable", pa),
                           diag);
        }
        if (!rc && json_object_size(pl)) {
                snprintf(path, sizeof(path), NODES_PATH "%s", node);
                rc = patch(c, path, json_pack("{s:{s:O}}", "metadata", "labels", pl), diag);
        }
out:
        json_decref(obj);
        json_decref(pc);
        json_decref(pa);
        json_decref(pl);
        return rc;
}

/* Reads the Devices object of node into *cur, creating it (POST) when it is missing. */
static int devices_read(struct tsr_kube_client *c, const char *node, json_t *devices, json_t **cur,
                        struct tsr_diag *diag)
{
        char path[PATH_LEN];
        char *body;
        int rc;

        snprintf(path, sizeof(path), DEVICES_PATH "/%s", node);
        rc = tsr_kube_client_get(c, path, cur, NULL, diag);
        if (rc != TSR_ENOTFOUND)
                return rc;
        tsr_diag_clear(diag); /* missing is not a failure: it is created */
        body = json_dumps(devices, JSON_COMPACT);
        if (!body)
                return tsr_diag_set(diag, TSR_ENOMEM, "publish %s: out of memory", node);
        rc = tsr_kube_client_request(c, "POST", DEVICES_PATH, "application/json", body,
                                     strlen(body), NULL, cur, NULL, diag);
        free(body);
        return rc;
}

/* Patches what of spec and status differs from what the server holds (cur_spec, cur_status). */
static int devices_write(struct tsr_kube_client *c, const char *node, json_t *devices,
                         json_t *cur_spec, json_t *cur_status, struct tsr_diag *diag)
{
        json_t *spec = json_object_get(devices, "spec"),
               *status = json_object_get(devices, "status");
        char path[PATH_LEN];
        int rc = 0;

        if (!json_equal(spec, cur_spec)) {
                snprintf(path, sizeof(path), DEVICES_PATH "/%s", node);
                rc = patch(c, path, json_pack("{s:O}", "spec", spec), diag);
        }
        if (!rc && !json_equal(status, cur_status)) {
                snprintf(path, sizeof(path), DEVICES_PATH "/%s/status", node);
                rc = patch(c, path, json_pack("{s:O}", "status", status), diag);
        }
        return rc;
}

/*
 * Brings the Devices object to devices. Known (last holds its spec and status): patch what
 * differs; a 404 there (deleted meanwhile) falls back to unknown once. Unknown: read or create
 * it, then patch what differs.
 */
static int devices_sync(struct tsr_kube_client *c, const char *node, json_t *devices,
                        const struct tsr_dm_published *last, struct tsr_diag *diag)
{
        json_t *cur = NULL;
        int rc;

        if (last->spec && last->status) {
                rc = devices_write(c, node, devices, last->spec, last->status, diag);
                if (rc != TSR_ENOTFOUND)
                        return rc;
        }
        rc = devices_read(c, node, devices, &cur, diag);
        if (!rc)
                rc = devices_write(c, node, devices, json_object_get(cur, "spec"),
                                   json_object_get(cur, "status"), diag);
        json_decref(cur);
        return rc;
}

/* ---- the call ----------------------------------------------------------------------------- */

static bool node_name_ok(const char *s)
{
        size_t n = s ? strlen(s) : 0;

        if (!n || n > NODE_MAX)
                return false;
        return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789.-") == n;
}

static void record(struct tsr_dm_published *last, const struct want *w, bool node_known)
{
        json_t *spec = json_object_get(w->devices, "spec");
        json_t *status = json_object_get(w->devices, "status");

        tsr_dm_published_release(last);
        last->node_known = node_known;
        last->capacity = json_incref(w->capacity);
        last->labels = json_incref(w->labels);
        last->spec = json_incref(spec);
        last->status = json_incref(status);
}

int tsr_dm_publish(struct tsr_kube_client *c, const char *node, const struct tsr_accel_cap *caps,
                   const struct tsr_accel_ledger *ledger, size_t n, struct tsr_dm_published *last,
                   struct tsr_diag *diag)
{
        const struct tsr_manufacturer *m = last->manufacturer;
        struct want w;
        bool node_known = last->node_known, withheld = false;
        int rc;

        if (!node_name_ok(node))
                return tsr_diag_set(diag, TSR_EINVAL, "publish: bad node name \"%.80s\"",
                                    node ? node : "");
        for (size_t i = 0; i < n; i++)
                if (caps[i].product->manufacturer != m->id)
                        return tsr_diag_set(diag, TSR_EINVAL,
                                            "publish %s: accelerator %zu is not %s's", node, i,
                                            m->key);
        rc = want_build(node, m, caps, ledger, n, &w, diag);
        if (!rc && (!node_known || !json_equal(w.capacity, last->capacity) ||
                    !json_equal(w.labels, last->labels))) {
                rc = node_sync(c, node, m, &w, &withheld, diag);
                node_known = !withheld;
        }
        if (!rc && !(json_equal(json_object_get(w.devices, "spec"), last->spec) &&
                     json_equal(json_object_get(w.devices, "status"), last->status)))
                rc = devices_sync(c, node, w.devices, last, diag);
        if (!rc)
                record(last, &w, node_known);
        want_release(&w);
        return rc;
}
