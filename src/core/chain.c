/*
 * chain.c - pools, flavors, the Topology and the feature labels of the Kueue chain.
 */
#include "core/chain.h"

#include "base/diag.h"
#include "base/err.h"
#include "base/fnv.h"
#include "core/credits.h"
#include "core/pin.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Formats into out (len bytes), or returns TSR_ETOOBIG leaving out untouched. */
__attribute__((format(printf, 3, 4))) static int put(char *out, size_t len, const char *fmt, ...)
{
        va_list ap;
        int k;

        va_start(ap, fmt);
        k = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (k < 0 || (size_t)k >= len)
                return TSR_ETOOBIG;
        va_start(ap, fmt);
        vsnprintf(out, len, fmt, ap);
        va_end(ap);
        return 0;
}

static bool accelerated(const struct tsr_chain_node *n)
{
        return n->product && n->accel_count > 0;
}

static int64_t sat_add(int64_t a, int64_t b)
{
        return b > INT64_MAX - a ? INT64_MAX : a + b;
}

/* A node whose os, arch and product can stand in labels and names. */
static int node_check(const struct tsr_chain_node *n, struct tsr_diag *diag)
{
        char akey[TSR_NAME_MAX], capacity[TSR_NAME_MAX + 16];

        if (!tsr_key_is_name_segment(n->os, strlen(n->os)) ||
            !tsr_key_is_name_segment(n->arch, strlen(n->arch)))
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "node \"%s\": os \"%s\" and arch \"%s\" must be label values",
                                    n->name, n->os, n->arch);
        if (!accelerated(n))
                return 0;
        if (tsr_instancetype_accel_key(n->product, akey, sizeof(akey)))
                return tsr_diag_set(diag, TSR_ETOOBIG, "node \"%s\": product \"%s\": name too long",
                                    n->name, n->product->name);
        snprintf(capacity, sizeof(capacity), "%s.capacity", akey);
        if (!tsr_key_is_name_segment(capacity, strlen(capacity)))
                return tsr_diag_set(
                    diag, TSR_EINVAL,
                    "node \"%s\": \"%s\" is not a label name (63 characters at most)", n->name,
                    capacity);
        return 0;
}

static int pool_of(const struct tsr_chain_node *n, const struct tsr_product *product,
                   struct tsr_chain_pool *p, struct tsr_diag *diag)
{
        memset(p, 0, sizeof(*p));
        if (tsr_instancetype_name(product, n->os, n->arch, p->name, sizeof(p->name)))
                return tsr_diag_set(diag, TSR_ETOOBIG, "node \"%s\": its pool's name is too long",
                                    n->name);
        tsr_instancetype_entrance(p->name, p->entrance);
        p->product = product;
        snprintf(p->os, sizeof(p->os), "%s", n->os);
        snprintf(p->arch, sizeof(p->arch), "%s", n->arch);
        return 0;
}

/* Inserts p into pools[0..*n) by name unless a pool of that name is there. */
static int pools_add(struct tsr_chain_pool *pools, size_t max, size_t *n,
                     const struct tsr_chain_pool *p, struct tsr_diag *diag)
{
        size_t at = 0;

        for (size_t i = 0; i < *n; i++)
                if (!strcmp(pools[i].name, p->name))
                        return 0;
        if (*n >= max)
                return tsr_diag_set(diag, TSR_ETOOBIG, "more than %zu InstanceTypes", max);
        while (at < *n && strcmp(pools[at].name, p->name) < 0)
                at++;
        memmove(&pools[at + 1], &pools[at], (*n - at) * sizeof(*pools));
        pools[at] = *p;
        (*n)++;
        return 0;
}

int tsr_chain_pools(const struct tsr_chain_node *nodes, size_t n_nodes,
                    struct tsr_chain_pool *pools, size_t max, size_t *n, struct tsr_diag *diag)
{
        size_t got = 0;

        for (size_t i = 0; i < n_nodes; i++) {
                struct tsr_chain_pool p;
                int rc = node_check(&nodes[i], diag);

                if (!rc)
                        rc = pool_of(&nodes[i], NULL, &p, diag);
                if (!rc)
                        rc = pools_add(pools, max, &got, &p, diag);
                if (!rc && accelerated(&nodes[i])) {
                        rc = pool_of(&nodes[i], nodes[i].product, &p, diag);
                        if (!rc)
                                rc = pools_add(pools, max, &got, &p, diag);
                }
                if (rc)
                        return rc;
        }
        *n = got;
        return 0;
}

bool tsr_chain_node_in_pool(const struct tsr_chain_node *node, const struct tsr_chain_pool *p)
{
        if (strcmp(node->os, p->os) || strcmp(node->arch, p->arch))
                return false;
        return !p->product || (accelerated(node) && node->product == p->product);
}

static unsigned per_node(const struct tsr_chain_node *node, const struct tsr_chain_pool *p)
{
        return p->product ? node->accel_count : (unsigned)(node->cpu_milli / 1000);
}

static int flavor_name(const struct tsr_chain_pool *p, unsigned per, char *out, size_t len,
                       struct tsr_diag *diag)
{
        char akey[TSR_NAME_MAX];
        int rc;

        if (!p->product)
                rc = put(out, len, "gpustack--" TSR_CHAIN_GENERAL_KEY "-%s-%s-%uc", p->os, p->arch,
                         per);
        else if ((rc = tsr_instancetype_accel_key(p->product, akey, sizeof(akey))) == 0)
                rc = put(out, len, "gpustack--" TSR_CHAIN_GENERAL_KEY "--%s-%s-%s-%ud", akey, p->os,
                         p->arch, per);
        return rc ? tsr_diag_set(diag, rc, "pool %s: a flavor's name is too long", p->name) : 0;
}

int tsr_chain_flavors(const struct tsr_chain_node *nodes, size_t n_nodes,
                      const struct tsr_chain_pool *p, struct tsr_chain_flavor *flavors, size_t max,
                      size_t *n, int *node_flavor, struct tsr_diag *diag)
{
        size_t got = 0;

        for (size_t i = 0; i < n_nodes; i++) {
                unsigned per = per_node(&nodes[i], p);
                size_t at = 0;

                if (!tsr_chain_node_in_pool(&nodes[i], p))
                        continue;
                while (at < got && flavors[at].per_node < per)
                        at++;
                if (at == got || flavors[at].per_node != per) {
                        struct tsr_chain_flavor f = {.per_node = per};
                        int rc = flavor_name(p, per, f.name, sizeof(f.name), diag);

                        if (rc)
                                return rc;
                        if (got >= max)
                                return tsr_diag_set(diag, TSR_ETOOBIG,
                                                    "pool %s: more than %zu ResourceFlavors",
                                                    p->name, max);
                        memmove(&flavors[at + 1], &flavors[at], (got - at) * sizeof(*flavors));
                        flavors[at] = f;
                        got++;
                }
                flavors[at].nodes++;
                flavors[at].nominal = sat_add(
                    flavors[at].nominal, p->product ? tsr_credits_quota(per) : nodes[i].cpu_milli);
        }
        *n = got;
        for (size_t i = 0; node_flavor && i < n_nodes; i++) {
                node_flavor[i] = -1;
                if (!tsr_chain_node_in_pool(&nodes[i], p))
                        continue;
                for (size_t f = 0; f < got; f++)
                        if (flavors[f].per_node == per_node(&nodes[i], p))
                                node_flavor[i] = (int)f;
        }
        return 0;
}

void tsr_chain_topology(struct tsr_chain_topology *out)
{
        uint64_t h = TSR_FNV64_OFFSET;

        memset(out, 0, sizeof(*out));
        out->levels[out->n_levels++] = TSR_CHAIN_HOSTNAME_LABEL;
        for (size_t i = 0; i < out->n_levels; i++) {
                if (i)
                        h = tsr_fnv1a64_update(h, "", 1);
                h = tsr_fnv1a64_update(h, out->levels[i], strlen(out->levels[i]));
        }
        snprintf(out->profile, sizeof(out->profile), "fnv64-%016llx", (unsigned long long)h);
        snprintf(out->name, sizeof(out->name), "gpustack-%s", out->profile);
}

/* The feature key of product's pool, or of the generic pool when product is NULL. */
static int feature_key(const struct tsr_product *product, char *out)
{
        char akey[TSR_NAME_MAX];
        int rc;

        if (!product)
                return put(out, TSR_KEY_MAX, "%s", TSR_CHAIN_GENERAL_PREFIX TSR_CHAIN_GENERAL_KEY);
        rc = tsr_instancetype_accel_key(product, akey, sizeof(akey));
        return rc ? rc : put(out, TSR_KEY_MAX, TSR_ACCEL_COUNT_PREFIX "%s", akey);
}

int tsr_chain_feature_key(const struct tsr_chain_pool *p, char *out)
{
        return feature_key(p->product, out);
}

static void label(struct tsr_chain_labels *l, const char *key, const char *value)
{
        snprintf(l->l[l->n].key, sizeof(l->l[l->n].key), "%s", key);
        snprintf(l->l[l->n].value, sizeof(l->l[l->n].value), "%s", value);
        l->n++;
}

/* product's accelerated labels: <feature key>=true and <feature key>.count=count. */
static int accel_labels(const struct tsr_product *product, unsigned count,
                        struct tsr_chain_labels *l)
{
        char key[TSR_KEY_MAX], count_key[TSR_KEY_MAX], value[16];
        int rc = feature_key(product, key);

        if (!rc)
                rc = put(count_key, sizeof(count_key), "%s.count", key);
        if (rc)
                return rc;
        snprintf(value, sizeof(value), "%u", count);
        label(l, key, "true");
        label(l, count_key, value);
        return 0;
}

/* The labels every derived node and flavor carry: managed, the profile, the general key. */
static void common_labels(struct tsr_chain_labels *l)
{
        struct tsr_chain_topology t;

        tsr_chain_topology(&t);
        label(l, TSR_CHAIN_MANAGED_LABEL, "true");
        label(l, TSR_CHAIN_PROFILE_LABEL, t.profile);
        label(l, TSR_CHAIN_GENERAL_PREFIX TSR_CHAIN_GENERAL_KEY, "true");
}

int tsr_chain_node_labels(const struct tsr_chain_node *n, struct tsr_chain_labels *out,
                          struct tsr_diag *diag)
{
        struct tsr_chain_labels l = {0};
        int rc = node_check(n, diag);

        if (rc)
                return rc;
        common_labels(&l);
        if (accelerated(n) && accel_labels(n->product, n->accel_count, &l))
                return tsr_diag_set(diag, TSR_ETOOBIG, "node \"%s\": label too long", n->name);
        *out = l;
        return 0;
}

int tsr_chain_flavor_node_labels(const struct tsr_chain_pool *p, const struct tsr_chain_flavor *f,
                                 struct tsr_chain_labels *out, struct tsr_diag *diag)
{
        struct tsr_chain_labels l = {0};

        common_labels(&l);
        label(&l, TSR_CHAIN_OS_LABEL, p->os);
        label(&l, TSR_CHAIN_ARCH_LABEL, p->arch);
        if (p->product && accel_labels(p->product, f->per_node, &l))
                return tsr_diag_set(diag, TSR_ETOOBIG, "flavor %s: label too long", f->name);
        *out = l;
        return 0;
}
