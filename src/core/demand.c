/*
 * demand.c - a Pod's (or one container's) accelerator demand from its resource lists.
 */
#include "core/demand.h"

#include "core/catalog.h"
#include "core/pod_resources.h"

#include <stdio.h>
#include <string.h>

static bool named_in_requests(const struct tsr_container_req *c, const char *key)
{
        for (size_t i = 0; i < c->n_requests; i++)
                if (strcmp(c->requests[i].key, key) == 0)
                        return true;
        return false;
}

/* Folds one key of container c (its value read requests-first) into d. */
static void add_key(const struct tsr_container_req *c, const char *key,
                    const struct tsr_manufacturer *m, struct tsr_demand *d)
{
        struct tsr_key_class kc;
        enum tsr_family fam;
        int64_t v;

        tsr_key_classify(key, &kc);
        if (kc.kind == TSR_KEY_NONE || kc.manufacturer != m)
                return;
        fam = tsr_key_family(kc.kind);
        if (fam == TSR_FAMILY_VISIBILITY || fam == TSR_FAMILY_NONE)
                return;
        v = tsr_container_request(c, key, false);
        if (d->family != TSR_FAMILY_NONE && d->family != fam)
                d->mixed = true;
        /* Only the reported family's keys shape the demand: a key of a family earlier in the
         * order replaces what a later family's keys had gathered. */
        if (d->family != TSR_FAMILY_NONE && fam > d->family)
                return;
        if (fam != d->family) {
                d->family = fam;
                d->cards = 0;
                d->units = 0;
                d->profile[0] = '\0';
        }
        switch (kc.kind) {
        case TSR_KEY_EXCLUSIVE:
        case TSR_KEY_SHARED:
                if (v > 0 && v <= TSR_DEMAND_CARDS_MAX - (int64_t)d->cards)
                        d->cards += (unsigned)v;
                else if (v > 0)
                        d->cards = TSR_DEMAND_CARDS_MAX;
                break;
        case TSR_KEY_SLICED_UNITS:
        case TSR_KEY_PARTITIONED_UNITS:
                if (v > d->units)
                        d->units = v;
                break;
        case TSR_KEY_PARTITIONED_PROFILE:
                /* several profiles (refused by gate 1): the smallest name, as upstream */
                if (!d->profile[0] || strncmp(kc.profile, d->profile, sizeof(d->profile)) < 0)
                        snprintf(d->profile, sizeof(d->profile), "%.*s", (int)kc.profile_len,
                                 kc.profile);
                break;
        default:
                break;
        }
}

/* Folds container c's keys of manufacturer m into d: requests, then limits requests lack. */
static void add_container(const struct tsr_container_req *c, const struct tsr_manufacturer *m,
                          struct tsr_demand *d)
{
        for (size_t i = 0; i < c->n_requests; i++)
                add_key(c, c->requests[i].key, m, d);
        for (size_t i = 0; i < c->n_limits; i++)
                if (!named_in_requests(c, c->limits[i].key))
                        add_key(c, c->limits[i].key, m, d);
}

static void finish(struct tsr_demand *d)
{
        if (d->family == TSR_FAMILY_SLICED || d->family == TSR_FAMILY_PARTITIONED)
                d->cards = 1;
}

void tsr_demand_of_pod(const struct tsr_pod_req *pod, const struct tsr_manufacturer *m,
                       struct tsr_demand *out)
{
        memset(out, 0, sizeof(*out));
        for (size_t i = 0; i < pod->n; i++)
                if (pod->c[i].group != TSR_CG_SIDECAR)
                        add_container(&pod->c[i], m, out);
        finish(out);
}

void tsr_demand_of_container(const struct tsr_pod_req *pod, size_t i,
                             const struct tsr_manufacturer *m, struct tsr_demand *out)
{
        memset(out, 0, sizeof(*out));
        if (i < pod->n)
                add_container(&pod->c[i], m, out);
        finish(out);
}

int64_t tsr_demand_units_per_card(const struct tsr_demand *d)
{
        switch (d->family) {
        case TSR_FAMILY_EXCLUSIVE:
                return TSR_UNITS_PER_ACCEL;
        case TSR_FAMILY_SHARED:
                return TSR_UNITS_PER_SHARE;
        case TSR_FAMILY_SLICED:
        case TSR_FAMILY_PARTITIONED:
                return d->units;
        default:
                return 0;
        }
}

void tsr_demand_describe(const struct tsr_demand *d, char *out, size_t len)
{
        switch (d->family) {
        case TSR_FAMILY_EXCLUSIVE:
                snprintf(out, len, "%u whole accelerator%s", d->cards, d->cards == 1 ? "" : "s");
                break;
        case TSR_FAMILY_SHARED:
                snprintf(out, len, "a free share on %u distinct accelerator%s", d->cards,
                         d->cards == 1 ? "" : "s");
                break;
        case TSR_FAMILY_SLICED:
                snprintf(out, len, "%lld free units and a free slice slot on one accelerator",
                         (long long)d->units);
                break;
        case TSR_FAMILY_PARTITIONED:
                snprintf(out, len, "a free %s placement", d->profile);
                break;
        default:
                snprintf(out, len, "no accelerator");
                break;
        }
}
