/*
 * devices_object.c - the Devices object and the fit labels: a JSON rendering of capability x
 * ledger, computed by core/geometry.c (free and live counts per profile), core/capability.c
 * (ceilings), core/views.c (the group's sliced detail) and core/fit.c (the labels).
 */
#include "codec/devices_object.h"

#include "base/diag.h"
#include "base/err.h"
#include "core/fit.h"
#include "core/geometry.h"
#include "core/instancetype.h"
#include "core/keys.h"
#include "core/views.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* One run [start, start + length) on the memory-slice axis. */
static json_t *placement_json(unsigned start, unsigned length)
{
        return json_pack("{s:I, s:I}", "start", (json_int_t)start, "length", (json_int_t)length);
}

/* The live instances as placements, ascending by start (they never overlap). */
static json_t *live_placements_json(const struct tsr_product *p, const struct tsr_mig_live *live)
{
        json_t *a = json_array();

        for (unsigned s = 0; a && s < TSR_MIG_AXIS_MAX; s++)
                for (unsigned k = 0; k < live->n; k++) {
                        const struct tsr_mig_instance *in = &live->inst[k];

                        if (in->start != s)
                                continue;
                        if (json_array_append_new(
                                a, placement_json(s, p->profiles[in->profile].size))) {
                                json_decref(a);
                                a = NULL;
                        }
                        break;
                }
        return a;
}

static json_t *allocation_json(const struct tsr_accel_cap *cap, const struct tsr_accel_ledger *l)
{
        json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I}", "id", cap->uuid, "index",
                              (json_int_t)cap->index, "mode", (json_int_t)l->mode, "allocated",
                              (json_int_t)l->allocated, "remaining", (json_int_t)l->remaining);
        json_t *rem, *alloc;
        uint32_t occupied;

        if (!o)
                return NULL;
        if (!cap->partitioned) {
                if (json_object_set_new(o, "allocatedSlices", json_integer(l->allocated_slices))) {
                        json_decref(o);
                        return NULL;
                }
                return o;
        }
        rem = json_array();
        alloc = json_array();
        occupied = tsr_geometry_occupied(cap->product, &l->live);
        for (unsigned i = 0; rem && alloc && i < cap->product->n_profiles; i++) {
                const struct tsr_mig_profile *mp = &cap->product->profiles[i];
                unsigned live = tsr_geometry_live_count(&l->live, i);

                if (!((cap->offered >> i) & 1u))
                        continue;
                if (json_array_append_new(
                        rem, json_pack("{s:s, s:I}", "name", mp->name, "count",
                                       (json_int_t)tsr_geometry_free_count(mp, occupied, live))) ||
                    json_array_append_new(alloc, json_pack("{s:s, s:I}", "name", mp->name, "count",
                                                           (json_int_t)live))) {
                        json_decref(rem);
                        rem = NULL;
                }
        }
        if (!rem || !alloc) {
                json_decref(rem);
                json_decref(alloc);
                json_decref(o);
                return NULL;
        }
        /* json_object_set_new takes its value even when it fails. */
        if (json_object_set_new(o, "remainingProfiles", rem) |
            json_object_set_new(o, "allocatedProfiles", alloc) |
            (l->live.n && json_object_set_new(o, "allocatedPhysicalPlacements",
                                              live_placements_json(cap->product, &l->live)))) {
                json_decref(o);
                return NULL;
        }
        return o;
}

/* Every legal placement of mp on an empty accelerator, ascending by start. */
static json_t *legal_placements_json(const struct tsr_mig_profile *mp)
{
        json_t *a = json_array();

        for (unsigned s = 0; a && s < TSR_MIG_AXIS_MAX; s++)
                if (((mp->starts >> s) & 1u) &&
                    json_array_append_new(a, placement_json(s, mp->size))) {
                        json_decref(a);
                        a = NULL;
                }
        return a;
}

/* status.physicalSliced of a partitioned accelerator: its offered profiles, in table order. */
static json_t *physical_sliced_json(const struct tsr_accel_cap *cap)
{
        json_t *profiles = json_array();

        for (unsigned i = 0; profiles && i < cap->product->n_profiles; i++) {
                const struct tsr_mig_profile *mp = &cap->product->profiles[i];

                if (!((cap->offered >> i) & 1u))
                        continue;
                if (json_array_append_new(
                        profiles,
                        json_pack("{s:s, s:I, s:I, s:I, s:I, s:o}", "name", mp->name, "memoryMib",
                                  (json_int_t)tsr_mig_profile_nominal_mib(mp), "computeSlices",
                                  (json_int_t)mp->compute_slices, "memorySlices",
                                  (json_int_t)mp->size, "count",
                                  (json_int_t)tsr_capability_profile_ceiling(cap, i), "placements",
                                  legal_placements_json(mp)))) {
                        json_decref(profiles);
                        profiles = NULL;
                }
        }
        return profiles ? json_pack("{s:I, s:o}", "count",
                                    (json_int_t)tsr_capability_partition_count(cap), "profiles",
                                    profiles)
                        : NULL;
}

/*
 * The accelerator's topology: the bus id detection read; the rest is nothing tessera detects,
 * and "" is the schema's "unknown".
 */
static json_t *topology_json(const struct tsr_accel_cap *cap)
{
        return json_pack("{s:s, s:s, s:s, s:s, s:s}", "pciBusId", cap->pci_bus_id, "pciRootId", "",
                         "pciClass", "", "numaAffinity", "", "cpuAffinity", "");
}

static json_t *capability_json(const struct tsr_accel_cap *cap)
{
        json_t *st;

        if (!cap->partitioned) {
                st = json_pack("{s:b, s:{s:b, s:I}}", "unhealthy", 0, "logicalSliced",
                               "coresPercentageOvercommit", cap->cores_overcommit, "count",
                               (json_int_t)cap->slice_slots);
        } else {
                json_t *ps = physical_sliced_json(cap);

                st = ps ? json_pack("{s:b, s:o}", "unhealthy", 0, "physicalSliced", ps) : NULL;
        }
        return st ? json_pack("{s:s, s:I, s:[I], s:o, s:o}", "id", cap->uuid, "index",
                              (json_int_t)cap->index, "physicalIndexes", (json_int_t)cap->index,
                              "topology", topology_json(cap), "status", st)
                  : NULL;
}

/*
 * The group's acceleratorSlicedDetail: core/views.c's capability-only aggregate (the one the
 * InstanceType's slicedDetail is), logical only with an unpartitioned accelerator, physical only
 * with a partitioned one.
 */
static json_t *sliced_detail_json(const struct tsr_accel_cap *caps,
                                  const struct tsr_accel_ledger *ledger, size_t n)
{
        const struct tsr_pool_node node = {caps, ledger, n};
        struct tsr_pool_views v;
        json_t *d = json_object(), *profiles;

        tsr_views_compute(&node, 1, &v);
        if (!d)
                return NULL;
        if (v.logical_present &&
            json_object_set_new(d, "logical",
                                json_pack("{s:b, s:I}", "coresPercentageOvercommit",
                                          v.logical_overcommit, "count",
                                          (json_int_t)v.logical_count))) {
                json_decref(d);
                return NULL;
        }
        if (!v.physical_present)
                return d;
        profiles = json_array();
        for (size_t i = 0; profiles && i < v.n_profiles; i++) {
                const struct tsr_profile_figure *f = &v.physical_profiles[i];

                if (json_array_append_new(profiles,
                                          json_pack("{s:s, s:I, s:I}", "name", f->name, "count",
                                                    (json_int_t)f->count, "memoryMib",
                                                    (json_int_t)f->memory_mib))) {
                        json_decref(profiles);
                        profiles = NULL;
                }
        }
        if (json_object_set_new(d, "physical",
                                profiles
                                    ? json_pack("{s:I, s:o}", "count", (json_int_t)v.physical_count,
                                                "profiles", profiles)
                                    : NULL)) {
                json_decref(d);
                return NULL;
        }
        return d;
}

/* The common product of caps[0..n), or NULL (none, or TSR_EINVAL in *rc for a mix). */
static const struct tsr_product *product_of(const struct tsr_accel_cap *caps, size_t n, int *rc,
                                            struct tsr_diag *diag)
{
        *rc = 0;
        for (size_t i = 1; i < n; i++)
                if (caps[i].product != caps[0].product) {
                        *rc = tsr_diag_set(diag, TSR_EINVAL,
                                           "accelerators %zu and 0 are of different products", i);
                        return NULL;
                }
        return n ? caps[0].product : NULL;
}

static int groups_json(const char *group, const char *mfr, const struct tsr_product *p,
                       const struct tsr_accel_cap *caps, const struct tsr_accel_ledger *ledger,
                       size_t n, json_t **spec, json_t **status)
{
        json_t *spec_acc = json_array(), *stat_acc = json_array();

        for (size_t g = 0; spec_acc && stat_acc && g < n; g++)
                if (json_array_append_new(spec_acc, capability_json(&caps[g])) ||
                    json_array_append_new(stat_acc, allocation_json(&caps[g], &ledger[g]))) {
                        json_decref(spec_acc);
                        spec_acc = NULL;
                }
        if (!spec_acc || !stat_acc) {
                json_decref(spec_acc);
                json_decref(stat_acc);
                return TSR_ENOMEM;
        }
        *spec =
            json_pack("{s:s, s:s, s:s, s:I, s:o, s:o}", "id", group, "manufacturer", mfr, "name",
                      p->name, "memory", (json_int_t)p->vram_mib, "acceleratorSlicedDetail",
                      sliced_detail_json(caps, ledger, n), "accelerators", spec_acc);
        *status = json_pack("{s:s, s:s, s:o}", "id", group, "manufacturer", mfr, "accelerators",
                            stat_acc);
        if (!*spec || !*status) {
                json_decref(*spec);
                json_decref(*status);
                return TSR_ENOMEM;
        }
        return 0;
}

int tsr_devices_object_build(const char *node, const struct tsr_accel_cap *caps,
                             const struct tsr_accel_ledger *ledger, size_t n, json_t **out,
                             struct tsr_diag *diag)
{
        const struct tsr_product *p;
        json_t *spec_groups = json_array(), *stat_groups = json_array(), *spec, *status, *o;
        char group[TSR_NAME_MAX];
        int rc;

        p = product_of(caps, n, &rc, diag);
        if (rc || !spec_groups || !stat_groups) {
                json_decref(spec_groups);
                json_decref(stat_groups);
                return rc ? rc : tsr_diag_set(diag, TSR_ENOMEM, "Devices %s: out of memory", node);
        }
        if (p) {
                rc = tsr_instancetype_group_id(p, group, sizeof(group));
                if (!rc)
                        rc = groups_json(group, tsr_catalog_manufacturer(p->manufacturer)->key, p,
                                         caps, ledger, n, &spec, &status);
                if (!rc && (json_array_append_new(spec_groups, spec) |
                            json_array_append_new(stat_groups, status)))
                        rc = TSR_ENOMEM;
                if (rc) {
                        json_decref(spec_groups);
                        json_decref(stat_groups);
                        return tsr_diag_set(diag, rc, "Devices %s: %s", node,
                                            rc == TSR_ENOMEM ? "out of memory"
                                                             : "group id too long");
                }
        }
        o = json_pack("{s:s, s:s, s:{s:s}, s:{s:o}, s:{s:o}}", "apiVersion",
                      TSR_DEVICES_API_VERSION, "kind", TSR_DEVICES_KIND, "metadata", "name", node,
                      "spec", "groups", spec_groups, "status", "groups", stat_groups);
        if (!o)
                return tsr_diag_set(diag, TSR_ENOMEM, "Devices %s: out of memory", node);
        *out = o;
        return 0;
}

/* Sets prefix+akey to v; a key that is not a valid label key is skipped (upstream does). */
static int set_label(json_t *labels, const char *prefix, const char *akey, int64_t v)
{
        char key[TSR_NAME_MAX + 64], value[24];

        snprintf(key, sizeof(key), "%s%s", prefix, akey);
        if (!tsr_key_is_resource_name(key))
                return 0;
        snprintf(value, sizeof(value), "%lld", (long long)v);
        return json_object_set_new(labels, key, json_string(value)) ? TSR_ENOMEM : 0;
}

int tsr_devices_fit_labels(const struct tsr_accel_cap *caps, const struct tsr_accel_ledger *ledger,
                           size_t n, json_t *labels, struct tsr_diag *diag)
{
        const struct tsr_product *p;
        struct tsr_fit_labels fit;
        char akey[TSR_NAME_MAX];
        int rc;

        p = product_of(caps, n, &rc, diag);
        if (rc || !p)
                return rc;
        tsr_fit_labels_project(caps, ledger, n, &fit);
        if (!fit.present)
                return 0;
        if (tsr_instancetype_accel_key(p, akey, sizeof(akey)))
                return tsr_diag_set(diag, TSR_ETOOBIG, "the accelerator key of %s is too long",
                                    p->name);
        rc = set_label(labels, TSR_FIT_SLICED_PREFIX, akey, fit.sliced_max_free_units);
        if (!rc)
                rc = set_label(labels, TSR_FIT_SHARED_PREFIX, akey, fit.shared_free_cards);
        return rc ? tsr_diag_set(diag, rc, "fit labels: out of memory") : 0;
}

int tsr_devices_object_capabilities(json_t *devices, struct tsr_accel_cap *caps, size_t max,
                                    size_t *n, struct tsr_diag *diag)
{
        json_t *groups = json_object_get(json_object_get(devices, "spec"), "groups");
        size_t count = 0, g, a;
        json_t *group, *acc;

        if (!json_is_object(devices) || (groups && !json_is_array(groups)))
                return tsr_diag_set(diag, TSR_EINVAL, "Devices: spec.groups is not a list");
        json_array_foreach(groups, g, group)
        {
                const char *name = json_string_value(json_object_get(group, "name"));
                json_t *accs = json_object_get(group, "accelerators");
                const struct tsr_product *p = name ? tsr_catalog_product_by_name(name) : NULL;

                if (!p)
                        return tsr_diag_set(diag, TSR_EINVAL,
                                            "Devices: spec.groups[%zu].name \"%s\" is no product "
                                            "tessera knows",
                                            g, name ? name : "");
                if (!json_is_array(accs))
                        return tsr_diag_set(diag, TSR_EINVAL,
                                            "Devices: spec.groups[%zu].accelerators is not a list",
                                            g);
                if (count && caps[0].product != p)
                        return tsr_diag_set(diag, TSR_EINVAL,
                                            "Devices: spec.groups[%zu] is a second product (%s)", g,
                                            name);
                json_array_foreach(accs, a, acc)
                {
                        const char *id = json_string_value(json_object_get(acc, "id"));
                        json_t *index = json_object_get(acc, "index");
                        json_t *status = json_object_get(acc, "status");
                        const char *bus = json_string_value(
                            json_object_get(json_object_get(acc, "topology"), "pciBusId"));
                        bool mig = json_object_get(status, "physicalSliced") != NULL;

                        if (!id || !json_is_integer(index) || json_integer_value(index) < 0 ||
                            json_integer_value(index) > 1023 || !json_is_object(status))
                                return tsr_diag_set(diag, TSR_EINVAL,
                                                    "Devices: spec.groups[%zu].accelerators[%zu] "
                                                    "needs an id, an index (0-1023) and a status",
                                                    g, a);
                        if (count >= max)
                                return tsr_diag_set(diag, TSR_ETOOBIG,
                                                    "Devices: more than %zu accelerators", max);
                        tsr_capability_detect(p, (unsigned)json_integer_value(index), id, mig,
                                              &caps[count]);
                        if (bus)
                                tsr_capability_set_pci_bus_id(&caps[count], bus);
                        count++;
                }
        }
        *n = count;
        return 0;
}

/* ---- the ledger read back ------------------------------------------------------------------ */

/* The status accelerator being read, for messages. */
struct acc_at {
        size_t group, pos; /* status.groups[group].accelerators[pos] */
        unsigned index;    /* its accelerator index, once read */
};

/* TSR_EINVAL with "Devices: status.groups[g].accelerators[a] (accelerator i): <fmt>". */
__attribute__((format(printf, 3, 4))) static int
acc_fail(const struct acc_at *at, struct tsr_diag *diag, const char *fmt, ...)
{
        char what[TSR_DIAG_MSG_MAX];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        return tsr_diag_set(diag, TSR_EINVAL,
                            "Devices: status.groups[%zu].accelerators[%zu] (accelerator %u): %s",
                            at->group, at->pos, at->index, what);
}

/* The integer key of acc into *v: present, an integer, not negative. */
static int read_number(json_t *acc, const char *key, const struct acc_at *at, int64_t *v,
                       struct tsr_diag *diag)
{
        json_t *j = json_object_get(acc, key);

        if (!json_is_integer(j))
                return acc_fail(at, diag, "%s is missing or not an integer", key);
        *v = json_integer_value(j);
        if (*v < 0)
                return acc_fail(at, diag, "%s %lld is negative", key, (long long)*v);
        return 0;
}

/* Live placements of one partitioned accelerator, to be given profiles. */
struct placement_match {
        unsigned n;                           /* placements */
        unsigned n_profiles;                  /* the product's */
        uint8_t start[TSR_MIG_AXIS_MAX];      /* placement k's first slice */
        uint32_t takes[TSR_MIG_AXIS_MAX];     /* bit i: profile i can sit at placement k */
        unsigned count[TSR_MIG_PROFILES_MAX]; /* allocatedProfiles: instances of profile i */
        int profile_of[TSR_MIG_AXIS_MAX];     /* profile given placement k, -1 none yet */
};

/*
 * Gives placement k a profile that can take it: one with an instance left, or one whose
 * instances all sit on placements of which one moves to another profile it can take (an
 * augmenting path; tried marks the profiles this search has visited). Backtracking this way
 * finds an assignment whenever one exists, in polynomial time, where a greedy choice in start
 * order can fail (1g.20gb and 2g.20gb share starts 0, 2, 4; only 1g.20gb sits at 6).
 */
static bool assign_profile(struct placement_match *m, unsigned k, uint32_t *tried)
{
        for (unsigned i = 0; i < m->n_profiles; i++) {
                unsigned used = 0;

                if (!((m->takes[k] >> i) & 1u) || ((*tried >> i) & 1u))
                        continue;
                *tried |= UINT32_C(1) << i;
                for (unsigned q = 0; q < m->n; q++)
                        used += m->profile_of[q] == (int)i;
                if (used < m->count[i]) {
                        m->profile_of[k] = (int)i;
                        return true;
                }
                for (unsigned q = 0; q < m->n; q++)
                        if (m->profile_of[q] == (int)i && assign_profile(m, q, tried)) {
                                m->profile_of[k] = (int)i;
                                return true;
                        }
        }
        return false;
}

/* allocatedProfiles of a partitioned accelerator into m->count: offered names, each once. */
static int read_profile_counts(json_t *acc, const struct tsr_accel_cap *cap,
                               const struct acc_at *at, struct placement_match *m,
                               struct tsr_diag *diag)
{
        json_t *list = json_object_get(acc, "allocatedProfiles"), *e;
        uint32_t seen = 0;
        size_t k;

        if (!json_is_array(list))
                return acc_fail(at, diag, "allocatedProfiles is missing or not a list");
        json_array_foreach(list, k, e)
        {
                const char *name = json_string_value(json_object_get(e, "name"));
                const struct tsr_mig_profile *mp =
                    name ? tsr_product_profile(cap->product, name) : NULL;
                unsigned i = mp ? (unsigned)(mp - cap->product->profiles) : 0;
                json_t *count = json_object_get(e, "count");

                if (!json_is_object(e) || !name)
                        return acc_fail(at, diag, "allocatedProfiles[%zu] has no name", k);
                if (!mp || !((cap->offered >> i) & 1u))
                        return acc_fail(at, diag,
                                        "allocatedProfiles[%zu] names %s, not a profile it offers",
                                        k, name);
                if ((seen >> i) & 1u)
                        return acc_fail(at, diag, "allocatedProfiles lists %s twice", name);
                seen |= UINT32_C(1) << i;
                if (!json_is_integer(count))
                        return acc_fail(at, diag,
                                        "allocatedProfiles[%zu] (%s) count is missing or not an "
                                        "integer",
                                        k, name);
                if (json_integer_value(count) < 0)
                        return acc_fail(at, diag,
                                        "allocatedProfiles[%zu] (%s) count %lld is negative", k,
                                        name, (long long)json_integer_value(count));
                if (json_integer_value(count) > TSR_MIG_AXIS_MAX)
                        return acc_fail(at, diag,
                                        "allocatedProfiles[%zu] (%s) count %lld is above the %d "
                                        "partitions an axis holds",
                                        k, name, (long long)json_integer_value(count),
                                        TSR_MIG_AXIS_MAX);
                m->count[i] = (unsigned)json_integer_value(count);
        }
        return 0;
}

/*
 * allocatedPhysicalPlacements into m: each {start, length} on the axis, disjoint, taken by some
 * offered profile (m->takes).
 */
static int read_placements(json_t *acc, const struct tsr_accel_cap *cap, const struct acc_at *at,
                           struct placement_match *m, struct tsr_diag *diag)
{
        json_t *list = json_object_get(acc, "allocatedPhysicalPlacements"), *e;
        uint32_t occupied = 0;
        size_t k;

        if (!list)
                return 0; /* nothing live */
        if (!json_is_array(list))
                return acc_fail(at, diag, "allocatedPhysicalPlacements is not a list");
        if (json_array_size(list) > TSR_MIG_AXIS_MAX)
                return acc_fail(at, diag,
                                "allocatedPhysicalPlacements lists %zu placements, more than the "
                                "%d an axis holds",
                                json_array_size(list), TSR_MIG_AXIS_MAX);
        json_array_foreach(list, k, e)
        {
                json_t *js = json_object_get(e, "start"), *jl = json_object_get(e, "length");
                json_int_t s = json_integer_value(js), len = json_integer_value(jl);
                uint32_t span;

                if (!json_is_integer(js) || !json_is_integer(jl))
                        return acc_fail(at, diag,
                                        "allocatedPhysicalPlacements[%zu] needs an integer start "
                                        "and length",
                                        k);
                if (s < 0 || len < 0)
                        return acc_fail(at, diag,
                                        "allocatedPhysicalPlacements[%zu] start %lld or length "
                                        "%lld is negative",
                                        k, (long long)s, (long long)len);
                if (len == 0 || s >= TSR_MIG_AXIS_MAX || len > TSR_MIG_AXIS_MAX - s)
                        return acc_fail(at, diag,
                                        "allocatedPhysicalPlacements[%zu] (start %lld, length "
                                        "%lld) is off the %d-slice axis",
                                        k, (long long)s, (long long)len, TSR_MIG_AXIS_MAX);
                span = tsr_geometry_span((unsigned)s, (unsigned)len);
                if (occupied & span)
                        return acc_fail(at, diag,
                                        "allocatedPhysicalPlacements[%zu] (start %lld, length "
                                        "%lld) overlaps another placement",
                                        k, (long long)s, (long long)len);
                occupied |= span;
                m->start[k] = (uint8_t)s;
                m->takes[k] = 0;
                m->profile_of[k] = -1;
                for (unsigned i = 0; i < m->n_profiles; i++) {
                        const struct tsr_mig_profile *mp = &cap->product->profiles[i];

                        if (((cap->offered >> i) & 1u) && mp->size == (unsigned)len &&
                            ((mp->starts >> s) & 1u))
                                m->takes[k] |= UINT32_C(1) << i;
                }
                if (!m->takes[k])
                        return acc_fail(at, diag,
                                        "allocatedPhysicalPlacements[%zu] (start %lld, length "
                                        "%lld) is no placement of a profile it offers",
                                        k, (long long)s, (long long)len);
                m->n++;
        }
        return 0;
}

/* The live instances of a partitioned accelerator: its placements, each given a profile. */
static int read_live(json_t *acc, const struct tsr_accel_cap *cap, const struct acc_at *at,
                     struct tsr_mig_live *live, struct tsr_diag *diag)
{
        struct placement_match m = {.n_profiles = (unsigned)cap->product->n_profiles};
        unsigned total = 0;
        int rc;

        rc = read_profile_counts(acc, cap, at, &m, diag);
        if (!rc)
                rc = read_placements(acc, cap, at, &m, diag);
        if (rc)
                return rc;
        for (unsigned i = 0; i < m.n_profiles; i++)
                total += m.count[i];
        if (total != m.n)
                return acc_fail(at, diag,
                                "allocatedProfiles counts %u partitions, which do not match the "
                                "%u of allocatedPhysicalPlacements",
                                total, m.n);
        for (unsigned k = 0; k < m.n; k++) {
                uint32_t tried = 0;

                if (!assign_profile(&m, k, &tried))
                        return acc_fail(at, diag,
                                        "allocatedProfiles counts do not match "
                                        "allocatedPhysicalPlacements: no profile is left for the "
                                        "placement at %u",
                                        m.start[k]);
        }
        live->n = m.n;
        for (unsigned k = 0; k < m.n; k++)
                live->inst[k] = (struct tsr_mig_instance){(uint8_t)m.profile_of[k], m.start[k]};
        return 0;
}

/*
 * One status accelerator (an object, at) into out[j], the entry of the cap whose index it names.
 * An entry not yet read has remaining -1 (tsr_devices_object_ledger marks them so).
 */
static int read_accelerator(json_t *acc, const struct tsr_accel_cap *caps, size_t n,
                            struct acc_at *at, struct tsr_accel_ledger *out, struct tsr_diag *diag)
{
        json_t *index = json_object_get(acc, "index");
        const char *id = json_string_value(json_object_get(acc, "id"));
        const struct tsr_accel_cap *cap = NULL;
        char uuid[TSR_UUID_MAX];
        struct tsr_accel_ledger *l;
        int64_t v = 0;
        int rc;

        if (!json_is_integer(index) || json_integer_value(index) < 0)
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "Devices: status.groups[%zu].accelerators[%zu]: index is "
                                    "missing, not an integer or negative",
                                    at->group, at->pos);
        for (size_t j = 0; j < n && !cap; j++)
                if ((json_int_t)caps[j].index == json_integer_value(index))
                        cap = &caps[j];
        if (!cap)
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "Devices: status.groups[%zu].accelerators[%zu]: index %lld "
                                    "names no accelerator of the spec's %zu",
                                    at->group, at->pos, (long long)json_integer_value(index), n);
        at->index = cap->index;
        l = &out[cap - caps];
        if (l->remaining != -1)
                return acc_fail(at, diag, "index is listed twice");
        snprintf(uuid, sizeof(uuid), "%s", id ? id : "");
        if (!id || strcmp(uuid, cap->uuid))
                return acc_fail(at, diag, "id %s is not the spec accelerator's (%s)",
                                id ? id : "(missing)", cap->uuid);
        tsr_ledger_reset(l);
        rc = read_number(acc, "mode", at, &v, diag);
        if (!rc && v > TSR_MODE_PARTITIONED)
                rc = acc_fail(at, diag, "mode %lld is not an allocation mode (0-%d)", (long long)v,
                              TSR_MODE_PARTITIONED);
        l->mode = (enum tsr_mode)v;
        if (!rc)
                rc = read_number(acc, "allocated", at, &l->allocated, diag);
        if (!rc)
                rc = read_number(acc, "remaining", at, &l->remaining, diag);
        if (rc)
                return rc;
        if (cap->partitioned)
                return read_live(acc, cap, at, &l->live, diag);
        /* An API server holding the upstream CRD prunes the extension: read as none taken. */
        if (!json_object_get(acc, "allocatedSlices"))
                return 0;
        rc = read_number(acc, "allocatedSlices", at, &v, diag);
        if (!rc && v > (int64_t)cap->slice_slots)
                rc = acc_fail(at, diag, "allocatedSlices %lld is above its %u slice slots",
                              (long long)v, cap->slice_slots);
        l->allocated_slices = rc ? 0 : (unsigned)v;
        return rc;
}

int tsr_devices_object_ledger(json_t *devices, const struct tsr_accel_cap *caps, size_t n,
                              struct tsr_accel_ledger *out, struct tsr_diag *diag)
{
        json_t *status = json_object_get(devices, "status");
        json_t *groups = json_object_get(status, "groups"), *group, *accs, *acc;
        struct acc_at at = {0, 0, 0};
        struct tsr_diag why;
        int rc = 0;

        for (size_t j = 0; j < n; j++) {
                tsr_ledger_reset(&out[j]);
                out[j].remaining = -1; /* not read yet */
        }
        if (!json_is_object(devices) || (status && !json_is_object(status)) ||
            (groups && !json_is_array(groups)))
                return tsr_diag_set(diag, TSR_EINVAL,
                                    "Devices: not an object, or status.groups is not a list");
        json_array_foreach(groups, at.group, group)
        {
                accs = json_object_get(group, "accelerators");
                if (!json_is_object(group) || (accs && !json_is_array(accs)))
                        return tsr_diag_set(diag, TSR_EINVAL,
                                            "Devices: status.groups[%zu] is not an object with a "
                                            "list of accelerators",
                                            at.group);
                json_array_foreach(accs, at.pos, acc)
                {
                        at.index = 0;
                        if (!json_is_object(acc))
                                return tsr_diag_set(diag, TSR_EINVAL,
                                                    "Devices: status.groups[%zu].accelerators[%zu] "
                                                    "is not an object",
                                                    at.group, at.pos);
                        rc = read_accelerator(acc, caps, n, &at, out, diag);
                        if (rc)
                                return rc;
                }
        }
        for (size_t j = 0; j < n; j++) {
                tsr_diag_clear(&why);
                if (out[j].remaining == -1)
                        tsr_ledger_reset(&out[j]); /* absent from status: untouched */
                else if (tsr_ledger_check(&caps[j], &out[j], &why))
                        return tsr_diag_set(diag, TSR_EINVAL, "Devices: status: %s", why.msg);
        }
        return 0;
}
