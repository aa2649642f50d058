/*
 * request.c - the Pod request rules and folds for one manufacturer's families.
 *
 * Steps: (1) classify every accelerator key of every container; (2) apply the Pod-wide rules
 * (one family, one container group, no sidecar claims, one slicing container, one profile);
 * (3) apply the per-container shape rules of the family; (4) fold the memory demand into units.
 * Field errors accumulate, so one review reports every broken rule.
 */
#include "core/request.h"

#include "base/diag.h"
#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void add_error(struct tsr_request_verdict *v, enum tsr_request_rule rule, const char *fmt,
                      ...) __attribute__((format(printf, 3, 4)));

static void add_error(struct tsr_request_verdict *v, enum tsr_request_rule rule, const char *fmt,
                      ...)
{
        va_list ap;

        if (v->n_errors >= TSR_FIELD_ERRORS_MAX)
                return;
        v->rules[v->n_errors] = rule;
        va_start(ap, fmt);
        vsnprintf(v->errors[v->n_errors++], TSR_FIELD_ERROR_LEN, fmt, ap);
        va_end(ap);
}

const char *tsr_request_rule_name(enum tsr_request_rule r)
{
        switch (r) {
#define XX(E, name)                                                                                \
        case TSR_RULE_##E:                                                                         \
                return name;
                TSR_REQUEST_RULE_MAP(XX)
#undef XX
        }
        return "unknown";
}

static void add_edit(struct tsr_request_verdict *v, unsigned c, const char *key, int64_t value)
{
        struct tsr_res_edit *e;

        if (v->n_edits >= TSR_EDITS_MAX)
                return;
        e = &v->edits[v->n_edits++];
        e->container = c;
        snprintf(e->key, sizeof(e->key), "%s", key);
        e->value = value;
}

static const char *list_name(const struct tsr_container_req *c)
{
        return c->group == TSR_CG_APP ? "containers" : "initContainers";
}

/* The value of key: requests first, then limits; NULL when absent from both. */
static const struct tsr_res_item *lookup(const struct tsr_container_req *c, const char *key)
{
        for (size_t i = 0; i < c->n_requests; i++)
                if (strcmp(c->requests[i].key, key) == 0)
                        return &c->requests[i];
        for (size_t i = 0; i < c->n_limits; i++)
                if (strcmp(c->limits[i].key, key) == 0)
                        return &c->limits[i];
        return NULL;
}

/* The distinct keys of a container, requests and limits together. */
struct key_seen {
        size_t n;
        const char *keys[2 * TSR_RES_MAX];
};

static void collect_keys(const struct tsr_container_req *c, struct key_seen *seen)
{
        const struct tsr_res_item *lists[2] = {c->requests, c->limits};
        size_t counts[2] = {c->n_requests, c->n_limits};

        seen->n = 0;
        for (int l = 0; l < 2; l++) {
                for (size_t i = 0; i < counts[l]; i++) {
                        bool dup = false;

                        for (size_t k = 0; k < seen->n; k++)
                                dup |= strcmp(seen->keys[k], lists[l][i].key) == 0;
                        if (!dup)
                                seen->keys[seen->n++] = lists[l][i].key;
                }
        }
}

/* Per-container facts gathered in step 1. */
struct container_facts {
        unsigned families;   /* bit f = family f requested */
        bool slicing;        /* holds a sliced or partitioned key */
        const char *profile; /* the last profile key seen */
        size_t profile_len;
        unsigned profiles; /* distinct profile keys */
};

/* Distinct profile names across the Pod, for rule 4's message. */
struct profile_set {
        size_t n;
        struct {
                const char *ptr;
                size_t len;
        } names[TSR_RES_MAX];
};

static void profile_set_add(struct profile_set *s, const char *p, size_t len)
{
        size_t at = 0;

        for (size_t i = 0; i < s->n; i++)
                if (s->names[i].len == len && strncmp(s->names[i].ptr, p, len) == 0)
                        return;
        if (s->n >= TSR_RES_MAX)
                return;
        while (at < s->n) {
                size_t l = s->names[at].len < len ? s->names[at].len : len;
                int c = strncmp(s->names[at].ptr, p, l);

                if (c > 0 || (c == 0 && s->names[at].len > len))
                        break;
                at++;
        }
        memmove(&s->names[at + 1], &s->names[at], (s->n - at) * sizeof(s->names[0]));
        s->names[at].ptr = p;
        s->names[at].len = len;
        s->n++;
}

static void classify(const struct tsr_container_req *c, const struct tsr_manufacturer *m,
                     struct container_facts *f, struct profile_set *all)
{
        struct key_seen seen;

        memset(f, 0, sizeof(*f));
        collect_keys(c, &seen);
        for (size_t k = 0; k < seen.n; k++) {
                struct tsr_key_class kc;
                enum tsr_family fam;

                tsr_key_classify(seen.keys[k], &kc);
                if (kc.kind == TSR_KEY_NONE)
                        continue;
                fam = tsr_key_family(kc.kind);
                if (fam == TSR_FAMILY_VISIBILITY)
                        continue;
                /* Rules 1 and 6 count every manufacturer's keys, as upstream does. */
                f->families |= 1u << fam;
                if (fam == TSR_FAMILY_SLICED || fam == TSR_FAMILY_PARTITIONED)
                        f->slicing = true;
                if (kc.kind == TSR_KEY_PARTITIONED_PROFILE && kc.manufacturer == m) {
                        if (!f->profile || f->profile_len != kc.profile_len ||
                            strncmp(f->profile, kc.profile, kc.profile_len) != 0)
                                f->profiles++;
                        f->profile = kc.profile;
                        f->profile_len = kc.profile_len;
                        if (c->group != TSR_CG_SIDECAR)
                                profile_set_add(all, kc.profile, kc.profile_len);
                }
        }
}

/* The families in families, by name in sorted order as upstream prints them. */
static void family_list(unsigned families, char *buf, size_t len)
{
        static const enum tsr_family sorted[] = {TSR_FAMILY_EXCLUSIVE, TSR_FAMILY_PARTITIONED,
                                                 TSR_FAMILY_SHARED, TSR_FAMILY_SLICED};
        size_t o = 0;

        buf[0] = '\0';
        for (size_t i = 0; i < sizeof(sorted) / sizeof(sorted[0]); i++) {
                enum tsr_family f = sorted[i];
                int n;

                if (!((families >> f) & 1u))
                        continue;
                n = snprintf(buf + o, len - o, "%s%s", o ? " " : "", tsr_family_name(f));
                if (n < 0 || (size_t)n >= len - o)
                        return;
                o += (size_t)n;
        }
}

/* The value as apimachinery prints it in an Invalid value error: its canonical form. */
static const char *shown(const struct tsr_res_item *it, char *buf)
{
        if (!it)
                return "";
        return tsr_quantity_format(&it->q, buf);
}

static bool is_exactly_one(const struct tsr_res_item *it)
{
        return it && tsr_quantity_is_int(&it->q, 1);
}

/* The path of key in container c, anchored at limits as upstream anchors it. */
static void path(char *out, size_t len, const struct tsr_container_req *c, const char *key)
{
        snprintf(out, len, "spec.%s[%u].resources.limits[%s]", list_name(c), c->index, key);
}

static void rules_sliced(const struct tsr_container_req *c, unsigned ci,
                         const struct tsr_fold_pool *pool, struct tsr_request_verdict *v)
{
        const struct tsr_manufacturer *m = pool->manufacturer;
        char card[TSR_KEY_MAX], pct[TSR_KEY_MAX], mib[TSR_KEY_MAX], cores[TSR_KEY_MAX];
        char units[TSR_KEY_MAX], p[TSR_KEY_MAX + 64], qbuf[TSR_QUANTITY_STR_MAX];
        const struct tsr_res_item *icard, *ipct, *imib, *icores;

        tsr_key_format(card, m, TSR_KEY_SLICED, NULL);
        tsr_key_format(pct, m, TSR_KEY_SLICED_MEMORY_PERCENT, NULL);
        tsr_key_format(mib, m, TSR_KEY_SLICED_MEMORY_MIB, NULL);
        tsr_key_format(cores, m, TSR_KEY_SLICED_CORES, NULL);
        tsr_key_format(units, m, TSR_KEY_SLICED_UNITS, NULL);
        icard = lookup(c, card);
        ipct = lookup(c, pct);
        imib = lookup(c, mib);
        icores = lookup(c, cores);

        path(p, sizeof(p), c, card);
        if (!icard) {
                add_error(v, TSR_RULE_SLICED, "%s: Required value: a sliced request must set %s", p,
                          card);
                return;
        }
        if (!is_exactly_one(icard))
                add_error(v, TSR_RULE_SLICED,
                          "%s: Invalid value: \"%s\": a logical slice request is always a "
                          "single accelerator; multi-accelerator logical slicing is not "
                          "supported yet",
                          p, shown(icard, qbuf));
        if (!ipct && !imib)
                add_error(v, TSR_RULE_SLICED, "%s: Required value: a %s request must set %s or %s",
                          p, card, pct, mib);
        if (ipct && imib) {
                path(p, sizeof(p), c, mib);
                add_error(v, TSR_RULE_SLICED, "%s: Forbidden: cannot set both %s and %s", p, pct,
                          mib);
        }
        if (ipct) {
                struct tsr_quantity zero = tsr_quantity_from_int(0, TSR_QF_DECIMAL_SI);
                struct tsr_quantity hundred = tsr_quantity_from_int(100, TSR_QF_DECIMAL_SI);

                if (tsr_quantity_cmp(&ipct->q, &zero) <= 0 ||
                    tsr_quantity_cmp(&ipct->q, &hundred) > 0) {
                        path(p, sizeof(p), c, pct);
                        add_error(v, TSR_RULE_SLICED,
                                  "%s: Invalid value: \"%s\": must be within (0, 100]", p,
                                  shown(ipct, qbuf));
                }
        }
        if (imib && !ipct) {
                int64_t want = 0;

                if (tsr_quantity_value(&imib->q, &want) != 0 || want <= 0 ||
                    (uint64_t)want > pool->memory_mib) {
                        path(p, sizeof(p), c, mib);
                        add_error(v, TSR_RULE_SLICED,
                                  "%s: Invalid value: \"%s\": must be within (0, %llu]", p,
                                  shown(imib, qbuf), (unsigned long long)pool->memory_mib);
                }
        }
        if (icores) {
                struct tsr_quantity zero = tsr_quantity_from_int(0, TSR_QF_DECIMAL_SI);
                struct tsr_quantity hundred = tsr_quantity_from_int(100, TSR_QF_DECIMAL_SI);

                if (tsr_quantity_cmp(&icores->q, &zero) <= 0 ||
                    tsr_quantity_cmp(&icores->q, &hundred) > 0) {
                        path(p, sizeof(p), c, cores);
                        add_error(v, TSR_RULE_SLICED,
                                  "%s: Invalid value: \"%s\": must be within (0, 100]", p,
                                  shown(icores, qbuf));
                }
        } else {
                add_edit(v, ci, cores, 100);
        }
        if (v->n_errors)
                return;
        /* The fold: memory-percentage wins over memory-mib. */
        if (ipct) {
                int64_t milli = 0;

                tsr_quantity_milli(&ipct->q, &milli);
                v->units = milli * TSR_UNITS_PER_PERCENT / 1000;
        } else {
                int64_t want = 0;

                tsr_quantity_value(&imib->q, &want);
                v->units =
                    (int64_t)((uint64_t)want * (uint64_t)TSR_UNITS_PER_ACCEL / pool->memory_mib);
        }
        if (v->units <= 0) {
                path(p, sizeof(p), c, ipct ? pct : mib);
                add_error(v, TSR_RULE_FOLD,
                          "%s: Invalid value: \"%s\": cannot derive a positive %s", p,
                          shown(ipct ? ipct : imib, qbuf), units);
                return;
        }
        add_edit(v, ci, units, v->units);
}

static void rules_partitioned(const struct tsr_container_req *c, unsigned ci,
                              const struct container_facts *f, const struct tsr_fold_pool *pool,
                              struct tsr_request_verdict *v)
{
        const struct tsr_manufacturer *m = pool->manufacturer;
        char card[TSR_KEY_MAX], units[TSR_KEY_MAX], pkey[TSR_KEY_MAX], p[TSR_KEY_MAX + 64];
        char profile[TSR_KEY_MAX], qbuf[TSR_QUANTITY_STR_MAX];
        const struct tsr_res_item *icard, *iprof;
        const struct tsr_profile_figure *offered = NULL;

        tsr_key_format(card, m, TSR_KEY_PARTITIONED, NULL);
        tsr_key_format(units, m, TSR_KEY_PARTITIONED_UNITS, NULL);
        icard = lookup(c, card);
        path(p, sizeof(p), c, card);
        if (!icard) {
                add_error(v, TSR_RULE_PARTITIONED,
                          "%s: Required value: a partition request must set %s", p, card);
                return;
        }
        if (!is_exactly_one(icard))
                add_error(v, TSR_RULE_PARTITIONED,
                          "%s: Invalid value: \"%s\": a partition request is always a single "
                          "accelerator; request one Pod per instance",
                          p, shown(icard, qbuf));
        if (!f->profile) {
                add_error(v, TSR_RULE_PARTITIONED,
                          "%s: Required value: a %s request must name a profile, e.g. "
                          "%s.<kind>-<profile>",
                          p, card, card);
                return;
        }
        if (f->profiles > 1)
                return; /* rule 4 is reported Pod-wide */
        snprintf(profile, sizeof(profile), "%.*s", (int)f->profile_len, f->profile);
        if (tsr_key_format(pkey, m, TSR_KEY_PARTITIONED_PROFILE, profile) != 0)
                snprintf(pkey, sizeof(pkey), "%.*s", (int)(sizeof(pkey) - 1), card);
        iprof = lookup(c, pkey);
        if (!is_exactly_one(iprof)) {
                path(p, sizeof(p), c, pkey);
                add_error(v, TSR_RULE_PROFILE_ONE,
                          "%s: Invalid value: \"%s\": a partition profile request must be "
                          "exactly 1 instance",
                          p, shown(iprof, qbuf));
        }
        for (size_t i = 0; i < pool->n_profiles; i++)
                if (strcmp(pool->profiles[i].name, profile) == 0)
                        offered = &pool->profiles[i];
        if (!offered) {
                path(p, sizeof(p), c, pkey);
                add_error(v, TSR_RULE_UNOFFERED,
                          "%s: Invalid value: \"%s\": partition profile \"%s\" is not offered "
                          "by the target pool",
                          p, profile, profile);
        }
        v->profile = f->profile;
        if (v->n_errors)
                return;
        v->units =
            (int64_t)(offered->memory_mib * (uint64_t)TSR_UNITS_PER_ACCEL / pool->memory_mib);
        add_edit(v, ci, units, v->units);
}

int tsr_request_evaluate(const struct tsr_pod_req *pod, const struct tsr_fold_pool *pool,
                         struct tsr_request_verdict *out, struct tsr_diag *diag)
{
        struct tsr_request_verdict *v = out; /* written in place: it is some 10 KB */
        struct container_facts facts[TSR_CONTAINERS_MAX];
        unsigned families = 0, groups = 0, slicers = 0;
        struct profile_set all = {0};
        char list[TSR_FIELD_ERROR_LEN / 2];

        if (!pool->manufacturer)
                return tsr_diag_set(diag, TSR_EINVAL, "the pool names no manufacturer");
        if (pod->n > TSR_CONTAINERS_MAX)
                return tsr_diag_set(diag, TSR_EINVAL, "the Pod has more than %d containers",
                                    TSR_CONTAINERS_MAX);
        /* The header only: errors and edits are read up to their counts, never past them. */
        v->family = TSR_FAMILY_NONE;
        v->container = -1;
        v->profile = NULL;
        v->units = 0;
        v->awaits_memory = false;
        v->n_errors = 0;
        v->n_edits = 0;

        /* 1. classify; 2. Pod-wide rules. */
        for (size_t i = 0; i < pod->n; i++) {
                const struct tsr_container_req *c = &pod->c[i];

                classify(c, pool->manufacturer, &facts[i], &all);
                if (!facts[i].families)
                        continue;
                if (c->group == TSR_CG_SIDECAR) {
                        add_error(v, TSR_RULE_SIDECAR,
                                  "spec.initContainers[%u].resources.limits: Forbidden: a "
                                  "restartable init container (a native sidecar) may not request "
                                  "an accelerator; move the request to an app container",
                                  c->index);
                        continue;
                }
                families |= facts[i].families;
                groups |= 1u << c->group;
                if (facts[i].slicing) {
                        slicers++;
                        v->container = (int)i;
                }
        }
        if (__builtin_popcount(families) > 1) {
                family_list(families, list, sizeof(list));
                add_error(v, TSR_RULE_FAMILY,
                          "spec: Forbidden: a Pod may request only one accelerator family, "
                          "found [%s]",
                          list);
        }
        if (groups == ((1u << TSR_CG_APP) | (1u << TSR_CG_INIT)))
                add_error(v, TSR_RULE_GROUP,
                          "spec.initContainers: Forbidden: a Pod's accelerator requests must "
                          "all sit in one container group; spec.initContainers must give up its "
                          "request, because its devices are held for the Pod's whole life while "
                          "the scheduler charges the Pod only once");
        if (all.n > 1) {
                size_t o = 0;

                for (size_t i = 0; i < all.n && o < sizeof(list); i++) {
                        int n = snprintf(list + o, sizeof(list) - o, "%s%.*s", i ? " " : "",
                                         (int)all.names[i].len, all.names[i].ptr);

                        if (n < 0)
                                break;
                        o += (size_t)n;
                }
                add_error(v, TSR_RULE_PROFILES,
                          "spec: Forbidden: a Pod may request only one partition profile, "
                          "found [%s]",
                          list);
        }
        if (slicers > 1)
                add_error(v, TSR_RULE_SLICERS,
                          "spec: Forbidden: at most one container may request a slicing "
                          "family, found %u",
                          slicers);
        for (int f = TSR_FAMILY_EXCLUSIVE; f <= TSR_FAMILY_PARTITIONED; f++)
                if (families == (1u << f))
                        v->family = (enum tsr_family)f;

        /* 3 and 4: the slicing container's shape and fold. */
        if (!v->n_errors && v->container >= 0) {
                const struct tsr_container_req *c = &pod->c[v->container];

                if (pool->memory_mib == 0 &&
                    (v->family == TSR_FAMILY_SLICED || v->family == TSR_FAMILY_PARTITIONED))
                        v->awaits_memory = true; /* both fold against the memory */
                else if (v->family == TSR_FAMILY_SLICED)
                        rules_sliced(c, (unsigned)v->container, pool, v);
                else if (v->family == TSR_FAMILY_PARTITIONED)
                        rules_partitioned(c, (unsigned)v->container, &facts[v->container], pool, v);
        }
        return 0;
}

char *tsr_request_message(const struct tsr_request_verdict *v, char *buf, size_t len)
{
        size_t o = 0;

        buf[0] = '\0';
        if (v->n_errors == 1) {
                snprintf(buf, len, "%s", v->errors[0]);
                return buf;
        }
        for (size_t i = 0; i < v->n_errors && o < len; i++) {
                int n = snprintf(buf + o, len - o, "%s%s%s", i ? ", " : "[", v->errors[i],
                                 i + 1 == v->n_errors ? "]" : "");

                if (n < 0)
                        break;
                o += (size_t)n;
        }
        return buf;
}
