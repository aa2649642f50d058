/*
 * kueue_workload.c - a v1beta2 Workload into gate 3's neutral struct: field by field, every type
 * and range checked, JSON null read as absent (Go writes null for an empty list without
 * omitempty), and the compressed topology assignment expanded to hostname-level domains.
 */
#include "codec/kueue_workload.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"
#include "codec/kueue_chain.h"
#include "core/chain.h"
#include "core/credits.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOSTNAME_MAX 253 /* a node name is a DNS subdomain */
#define LEVELS_MAX   16
#define SLICES_MAX   1000
#define ROOTS_MAX    100000
#define PATH_LEN     192

struct parse {
        struct tsr_kueue_workload *k;
        struct tsr_diag *diag;
        const char *ns, *name; /* for messages, "" until read */
        size_t n_domains, cap_domains;
        size_t *at;                          /* domains[i]'s hostname: an offset into names */
        struct tsr_buf names;                /* hostnames, NUL-separated */
        size_t first[TSR_KUEUE_PODSETS_MAX]; /* a PodSet's first domain */
        bool assigned[TSR_KUEUE_PODSETS_MAX];
};

/* TSR_EINVAL with "Workload ns/name: <path>[.<key>]: <what>". key may be NULL. */
__attribute__((format(printf, 4, 5))) static int bad(struct parse *p, const char *path,
                                                     const char *key, const char *fmt, ...)
{
        char what[256];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        return tsr_diag_set(p->diag, TSR_EINVAL, "Workload %s/%s: %s%s%s: %s", p->ns, p->name, path,
                            key ? "." : "", key ? key : "", what);
}

/* o[key], with JSON null read as absent. */
static json_t *field(json_t *o, const char *key)
{
        json_t *v = json_object_get(o, key);

        return json_is_null(v) ? NULL : v;
}

/* o[key] as a string; *out stays NULL when it is absent and not required. */
static int str_field(struct parse *p, json_t *o, const char *path, const char *key, bool required,
                     const char **out)
{
        json_t *v = field(o, key);

        *out = NULL;
        if (!v && !required)
                return 0;
        if (!json_is_string(v))
                return bad(p, path, key, v ? "must be a string" : "required");
        *out = json_string_value(v);
        return 0;
}

/* o[key] as an integer in lo..hi; *out = dflt when it is absent and not required. */
static int int_field(struct parse *p, json_t *o, const char *path, const char *key, int64_t lo,
                     int64_t hi, bool required, int64_t dflt, int64_t *out)
{
        json_t *v = field(o, key);

        *out = dflt;
        if (!v && !required)
                return 0;
        if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
                return bad(p, path, key, "must be an integer in %lld..%lld", (long long)lo,
                           (long long)hi);
        *out = json_integer_value(v);
        return 0;
}

/* o[key] as a list of at most max entries (absent: empty); *out NULL when absent. */
static int list_field(struct parse *p, json_t *o, const char *path, const char *key, size_t max,
                      json_t **out)
{
        json_t *v = field(o, key);

        *out = v;
        if (v && (!json_is_array(v) || json_array_size(v) > max))
                return bad(p, path, key, "must be a list of at most %zu entries", max);
        return 0;
}

static int read_metadata(struct parse *p, json_t *obj)
{
        json_t *meta = field(obj, "metadata");
        const char *ns, *name;
        int rc;

        if (!json_is_object(meta))
                return bad(p, "metadata", NULL, "must be an object");
        rc = str_field(p, meta, "metadata", "namespace", true, &ns);
        if (!rc)
                rc = str_field(p, meta, "metadata", "name", true, &name);
        if (rc)
                return rc;
        if (!*ns || !*name)
                return bad(p, "metadata", *ns ? "name" : "namespace", "must not be empty");
        p->ns = p->k->w.ns = ns;
        p->name = p->k->w.name = name;
        return 0;
}

static int read_podset(struct parse *p, json_t *o, size_t i)
{
        struct tsr_snapshot_podset *ps = &p->k->podsets[i];
        char path[PATH_LEN];
        const char *name;
        int64_t count;
        int rc;

        snprintf(path, sizeof(path), "spec.podSets[%zu]", i);
        if (!json_is_object(o))
                return bad(p, path, NULL, "must be an object");
        rc = str_field(p, o, path, "name", false, &name);
        if (!rc)
                rc = int_field(p, o, path, "count", 0, INT32_MAX, false, 1, &count);
        if (rc)
                return rc;
        name = name ? name : "main";
        if (!*name)
                return bad(p, path, "name", "must not be empty");
        for (size_t k = 0; k < i; k++)
                if (!strcmp(p->k->podsets[k].name, name))
                        return bad(p, path, "name", "\"%s\" names two PodSets", name);
        ps->name = name;
        ps->count = (unsigned)count;
        ps->tmpl = field(o, "template");
        if (!json_is_object(ps->tmpl))
                return bad(p, path, "template", ps->tmpl ? "must be an object" : "required");
        return 0;
}

static int read_spec(struct parse *p, json_t *obj)
{
        json_t *spec = field(obj, "spec"), *podsets, *active, *o;
        size_t i;
        int rc;

        if (!json_is_object(spec))
                return bad(p, "spec", NULL, "must be an object");
        active = field(spec, "active");
        if (active && !json_is_boolean(active))
                return bad(p, "spec", "active", "must be a boolean");
        p->k->w.active = !active || json_is_true(active);
        rc = list_field(p, spec, "spec", "podSets", TSR_KUEUE_PODSETS_MAX, &podsets);
        if (rc)
                return rc;
        if (json_array_size(podsets) == 0)
                return bad(p, "spec", "podSets", "must list 1 to %d PodSets",
                           TSR_KUEUE_PODSETS_MAX);
        json_array_foreach(podsets, i, o)
        {
                rc = read_podset(p, o, i);
                if (rc)
                        return rc;
        }
        p->k->w.n_podsets = json_array_size(podsets);
        p->k->w.podsets = p->k->podsets;
        return 0;
}

static int read_conditions(struct parse *p, json_t *status)
{
        struct tsr_snapshot_workload *w = &p->k->w;
        json_t *conditions, *c;
        size_t i;
        int rc = list_field(p, status, "status", "conditions", SIZE_MAX, &conditions);

        json_array_foreach(conditions, i, c)
        {
                char path[PATH_LEN];
                const char *type, *value;
                bool on;

                snprintf(path, sizeof(path), "status.conditions[%zu]", i);
                if (rc)
                        break;
                if (!json_is_object(c))
                        return bad(p, path, NULL, "must be an object");
                rc = str_field(p, c, path, "type", true, &type);
                if (!rc)
                        rc = str_field(p, c, path, "status", true, &value);
                if (rc)
                        break;
                on = !strcmp(value, "True");
                if (!strcmp(type, "QuotaReserved"))
                        w->reserved = on;
                else if (!strcmp(type, "Admitted"))
                        w->admitted = on;
                else if (!strcmp(type, "Evicted"))
                        w->evicted = on;
                else if (!strcmp(type, "Finished"))
                        w->finished = on;
        }
        return rc;
}

/* Grows the domain arrays for one more; TSR_ETOOBIG past the ceiling. */
static int domain_room(struct parse *p, const char *path)
{
        size_t cap = p->cap_domains ? 2 * p->cap_domains : 16;
        struct tsr_snapshot_domain *d;
        size_t *at;

        if (p->n_domains < p->cap_domains)
                return 0;
        if (p->n_domains >= TSR_KUEUE_DOMAINS_MAX)
                return tsr_diag_set(p->diag, TSR_ETOOBIG,
                                    "Workload %s/%s: %s: more than %d hostname-level domains",
                                    p->ns, p->name, path, TSR_KUEUE_DOMAINS_MAX);
        d = realloc(p->k->domains, cap * sizeof(*d));
        if (!d)
                return tsr_diag_set(p->diag, TSR_ENOMEM, "out of memory");
        p->k->domains = d;
        at = realloc(p->at, cap * sizeof(*at));
        if (!at)
                return tsr_diag_set(p->diag, TSR_ENOMEM, "out of memory");
        p->at = at;
        p->cap_domains = cap;
        return 0;
}

/*
 * Checks one entry of valuesPerLevel for a slice of dc domains: exactly one of universal (a
 * string) and individual {prefix?, suffix?, roots[dc] (strings)}.
 */
static int check_values(struct parse *p, json_t *v, const char *path, int64_t dc)
{
        json_t *universal, *individual, *roots, *root;
        const char *affix;
        size_t i;
        int rc;

        if (!json_is_object(v))
                return bad(p, path, NULL, "must be an object");
        universal = field(v, "universal");
        individual = field(v, "individual");
        if (!universal == !individual)
                return bad(p, path, NULL, "must set exactly one of universal and individual");
        if (universal)
                return json_is_string(universal) ? 0
                                                 : bad(p, path, "universal", "must be a string");
        if (!json_is_object(individual))
                return bad(p, path, "individual", "must be an object");
        rc = str_field(p, individual, path, "individual.prefix", false, &affix);
        if (!rc)
                rc = str_field(p, individual, path, "individual.suffix", false, &affix);
        if (rc)
                return rc;
        roots = field(individual, "roots");
        if (!json_is_array(roots) || (int64_t)json_array_size(roots) != dc)
                return bad(p, path, "individual.roots", "must list domainCount (%lld) values",
                           (long long)dc);
        json_array_foreach(roots, i, root)
        {
                if (!json_is_string(root))
                        return bad(p, path, "individual.roots", "entry %zu is not a string", i);
        }
        return 0;
}

/* Checks podCounts for dc domains: exactly one of universal and individual[dc], each >= 1. */
static int check_counts(struct parse *p, json_t *pc, const char *path, int64_t dc)
{
        json_t *universal, *individual, *c;
        size_t i;
        int64_t v;

        if (!json_is_object(pc))
                return bad(p, path, NULL, pc ? "must be an object" : "required");
        universal = field(pc, "universal");
        individual = field(pc, "individual");
        if (!universal == !individual)
                return bad(p, path, NULL, "must set exactly one of universal and individual");
        if (universal)
                return int_field(p, pc, path, "universal", 1, INT32_MAX, true, 0, &v);
        if (!json_is_array(individual) || (int64_t)json_array_size(individual) != dc)
                return bad(p, path, "individual", "must list domainCount (%lld) counts",
                           (long long)dc);
        json_array_foreach(individual, i, c)
        {
                if (!json_is_integer(c) || json_integer_value(c) < 1 ||
                    json_integer_value(c) > INT32_MAX)
                        return bad(p, path, "individual", "entry %zu must be an integer in 1..%d",
                                   i, INT32_MAX);
        }
        return 0;
}

/* Appends the name of domain d of a checked valuesPerLevel entry v to names, as a domain. */
static int add_domain(struct parse *p, json_t *v, size_t d, unsigned pods, const char *path)
{
        json_t *individual = field(v, "individual");
        const char *prefix = json_string_value(field(individual, "prefix"));
        const char *suffix = json_string_value(field(individual, "suffix"));
        const char *root = individual
                               ? json_string_value(json_array_get(field(individual, "roots"), d))
                               : json_string_value(field(v, "universal"));
        size_t at = p->names.len, len;
        int rc = domain_room(p, path);

        if (rc)
                return rc;
        len = strlen(prefix ? prefix : "") + strlen(root) + strlen(suffix ? suffix : "");
        if (len < 1 || len > HOSTNAME_MAX)
                return bad(p, path, NULL,
                           "domain %zu: \"%s%s%s\" is not a node name (1 to %d characters)", d,
                           prefix ? prefix : "", root, suffix ? suffix : "", HOSTNAME_MAX);
        rc = tsr_buf_addf(&p->names, "%s%s%s", prefix ? prefix : "", root, suffix ? suffix : "");
        if (!rc)
                rc = tsr_buf_addch(&p->names, '\0');
        if (rc)
                return tsr_diag_set(p->diag, rc, "out of memory");
        p->at[p->n_domains] = at;
        p->k->domains[p->n_domains++] = (struct tsr_snapshot_domain){NULL, pods};
        return 0;
}

static int read_slice(struct parse *p, json_t *s, const char *path, size_t n_levels, int host)
{
        char at[PATH_LEN];
        json_t *values, *counts, *v;
        int64_t dc;
        size_t i;
        int rc;

        if (!json_is_object(s))
                return bad(p, path, NULL, "must be an object");
        rc = int_field(p, s, path, "domainCount", 1, ROOTS_MAX, true, 0, &dc);
        if (rc)
                return rc;
        values = field(s, "valuesPerLevel");
        if (!json_is_array(values) || json_array_size(values) != n_levels)
                return bad(p, path, "valuesPerLevel", "must have %zu entries, one per level",
                           n_levels);
        json_array_foreach(values, i, v)
        {
                snprintf(at, sizeof(at), "%.128s.valuesPerLevel[%zu]", path, i);
                rc = check_values(p, v, at, dc);
                if (rc)
                        return rc;
        }
        snprintf(at, sizeof(at), "%.128s.podCounts", path);
        counts = field(s, "podCounts");
        rc = check_counts(p, counts, at, dc);
        if (rc || host < 0)
                return rc;
        snprintf(at, sizeof(at), "%.128s.valuesPerLevel[%d]", path, host);
        for (int64_t d = 0; d < dc && !rc; d++) {
                json_t *u = field(counts, "universal");
                json_t *n = u ? u : json_array_get(field(counts, "individual"), (size_t)d);

                rc = add_domain(p, json_array_get(values, (size_t)host), (size_t)d,
                                (unsigned)json_integer_value(n), at);
        }
        return rc;
}

static int by_text(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Refuses a hostname named twice among the domains from first on. */
static int check_distinct(struct parse *p, size_t first, const char *path)
{
        size_t n = p->n_domains - first;
        const char **names;
        int rc = 0;

        if (n < 2)
                return 0;
        names = malloc(n * sizeof(*names));
        if (!names)
                return tsr_diag_set(p->diag, TSR_ENOMEM, "out of memory");
        for (size_t i = 0; i < n; i++)
                names[i] = p->names.ptr + p->at[first + i];
        qsort(names, n, sizeof(*names), by_text);
        for (size_t i = 1; i < n && !rc; i++)
                if (!strcmp(names[i - 1], names[i]))
                        rc = bad(p, path, NULL, "names node \"%s\" twice", names[i]);
        free(names);
        return rc;
}

static int read_topology(struct parse *p, json_t *ta, const char *path)
{
        json_t *levels, *slices, *v;
        size_t i, first = p->n_domains;
        int host = -1, rc;

        if (!json_is_object(ta))
                return bad(p, path, NULL, "must be an object");
        levels = field(ta, "levels");
        if (!json_is_array(levels) || json_array_size(levels) < 1 ||
            json_array_size(levels) > LEVELS_MAX)
                return bad(p, path, "levels", "must list 1 to %d node label keys", LEVELS_MAX);
        json_array_foreach(levels, i, v)
        {
                if (!json_is_string(v))
                        return bad(p, path, "levels", "entry %zu is not a string", i);
                if (!strcmp(json_string_value(v), TSR_CHAIN_HOSTNAME_LABEL))
                        host = (int)i;
        }
        rc = list_field(p, ta, path, "slices", SLICES_MAX, &slices);
        json_array_foreach(slices, i, v)
        {
                char at[PATH_LEN];

                if (rc)
                        break;
                snprintf(at, sizeof(at), "%.128s.slices[%zu]", path, i);
                rc = read_slice(p, v, at, json_array_size(levels), host);
        }
        return rc ? rc : check_distinct(p, first, path);
}

/* The flavor of the one accelerator credits resource in flavors, or NULL. */
static int read_flavors(struct parse *p, json_t *flavors, const char *path, const char **out)
{
        const char *key, *flavor = NULL;
        size_t credits = 0;
        json_t *v;

        *out = NULL;
        if (!flavors)
                return 0;
        if (!json_is_object(flavors))
                return bad(p, path, "flavors", "must be an object");
        json_object_foreach(flavors, key, v)
        {
                if (!json_is_string(v))
                        return bad(p, path, "flavors", "\"%s\" must name a flavor", key);
                if (!strncmp(key, TSR_CREDITS_PREFIX, strlen(TSR_CREDITS_PREFIX))) {
                        credits++;
                        flavor = json_string_value(v);
                }
        }
        *out = credits == 1 ? flavor : NULL;
        return 0;
}

static int read_assignment(struct parse *p, json_t *a, size_t i)
{
        struct tsr_kueue_workload *k = p->k;
        char path[PATH_LEN], topo[PATH_LEN];
        const char *name, *flavor;
        json_t *ta;
        int64_t count;
        size_t s = 0;
        int rc;

        snprintf(path, sizeof(path), "status.admission.podSetAssignments[%zu]", i);
        if (!json_is_object(a))
                return bad(p, path, NULL, "must be an object");
        rc = str_field(p, a, path, "name", true, &name);
        if (rc)
                return rc;
        while (s < k->w.n_podsets && strcmp(k->podsets[s].name, name))
                s++;
        if (s == k->w.n_podsets)
                return bad(p, path, "name", "no PodSet \"%s\"", name);
        if (p->assigned[s])
                return bad(p, path, "name", "PodSet \"%s\" is assigned twice", name);
        p->assigned[s] = true;
        rc = read_flavors(p, field(a, "flavors"), path, &flavor);
        if (!rc)
                rc = int_field(p, a, path, "count", 0, INT32_MAX, false, k->podsets[s].count,
                               &count);
        if (rc)
                return rc;
        k->podsets[s].flavor = flavor;
        k->podsets[s].count = (unsigned)count;
        p->first[s] = p->n_domains;
        ta = field(a, "topologyAssignment");
        snprintf(topo, sizeof(topo), "%.128s.topologyAssignment", path);
        rc = ta ? read_topology(p, ta, topo) : 0;
        k->podsets[s].n_domains = p->n_domains - p->first[s];
        return rc;
}

static int read_admission(struct parse *p, json_t *status)
{
        json_t *admission = field(status, "admission"), *assignments, *a;
        const char *cq;
        size_t i;
        int rc;

        p->k->w.cluster_queue = "";
        if (!admission)
                return 0;
        if (!json_is_object(admission))
                return bad(p, "status.admission", NULL, "must be an object");
        rc = str_field(p, admission, "status.admission", "clusterQueue", true, &cq);
        if (!rc)
                rc = list_field(p, admission, "status.admission", "podSetAssignments",
                                TSR_KUEUE_PODSETS_MAX, &assignments);
        if (rc)
                return rc;
        p->k->w.cluster_queue = cq;
        json_array_foreach(assignments, i, a)
        {
                rc = read_assignment(p, a, i);
                if (rc)
                        return rc;
        }
        return 0;
}

static int read_checks(struct parse *p, json_t *status)
{
        struct tsr_snapshot_workload *w = &p->k->w;
        json_t *checks, *c;
        size_t i;
        int rc = list_field(p, status, "status", "admissionChecks", SIZE_MAX, &checks);

        w->check = TSR_CHECK_PENDING;
        w->check_message = "";
        json_array_foreach(checks, i, c)
        {
                char path[PATH_LEN];
                const char *name, *state, *message;
                int s = TSR_CHECK_PENDING;

                snprintf(path, sizeof(path), "status.admissionChecks[%zu]", i);
                if (rc)
                        break;
                if (!json_is_object(c))
                        return bad(p, path, NULL, "must be an object");
                rc = str_field(p, c, path, "name", true, &name);
                if (rc)
                        break;
                if (strcmp(name, TSR_KUEUE_NODE_DEVICES))
                        continue;
                if (w->has_check)
                        return bad(p, path, "name", "lists %s twice", TSR_KUEUE_NODE_DEVICES);
                rc = str_field(p, c, path, "state", true, &state);
                if (!rc)
                        rc = str_field(p, c, path, "message", false, &message);
                if (rc)
                        break;
                while (s <= TSR_CHECK_REJECTED && strcmp(state, tsr_check_state_name(s)))
                        s++;
                if (s > TSR_CHECK_REJECTED)
                        return bad(p, path, "state",
                                   "\"%s\" is not Pending, Ready, Retry or Rejected", state);
                w->has_check = true;
                w->check = (enum tsr_check_state)s;
                w->check_message = message ? message : "";
        }
        return rc;
}

static int read_status(struct parse *p, json_t *obj)
{
        json_t *status = field(obj, "status");
        int rc;

        if (status && !json_is_object(status))
                return bad(p, "status", NULL, "must be an object");
        rc = read_conditions(p, status);
        if (!rc)
                rc = read_admission(p, status);
        if (!rc)
                rc = read_checks(p, status);
        return rc;
}

/* Points the domains at their hostnames and each PodSet at its domains. */
static int finish(struct parse *p)
{
        struct tsr_kueue_workload *k = p->k;

        k->hostnames = tsr_buf_detach(&p->names);
        if (!k->hostnames)
                return tsr_diag_set(p->diag, TSR_ENOMEM, "out of memory");
        for (size_t i = 0; i < p->n_domains; i++)
                k->domains[i].node = k->hostnames + p->at[i];
        for (size_t s = 0; s < k->w.n_podsets; s++)
                k->podsets[s].domains = k->podsets[s].n_domains ? &k->domains[p->first[s]] : NULL;
        return 0;
}

int tsr_kueue_workload_parse(json_t *obj, struct tsr_kueue_workload **out, struct tsr_diag *diag)
{
        struct parse p = {.diag = diag, .ns = "", .name = ""};
        int rc;

        if (!json_is_object(obj))
                return tsr_diag_set(diag, TSR_EINVAL, "Workload: not a JSON object");
        p.k = calloc(1, sizeof(*p.k));
        if (!p.k)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        tsr_buf_init(&p.names);
        rc = read_metadata(&p, obj);
        if (!rc)
                rc = read_spec(&p, obj);
        if (!rc)
                rc = read_status(&p, obj);
        if (!rc)
                rc = finish(&p);
        free(p.at);
        tsr_buf_release(&p.names);
        if (rc) {
                tsr_kueue_workload_free(p.k);
                return rc;
        }
        *out = p.k;
        return 0;
}

void tsr_kueue_workload_free(struct tsr_kueue_workload *k)
{
        if (!k)
                return;
        free(k->domains);
        free(k->hostnames);
        free(k);
}
