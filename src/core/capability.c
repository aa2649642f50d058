/*
 * capability.c - detection of one accelerator's capability from its product and MIG mode.
 */
#include "core/capability.h"

#include "core/geometry.h"
#include "core/keys.h"

#include <string.h>

void tsr_capability_detect(const struct tsr_product *p, unsigned index, const char *uuid,
                           bool mig_on, struct tsr_accel_cap *out)
{
        const struct tsr_manufacturer *m = tsr_catalog_manufacturer(p->manufacturer);
        size_t len = strlen(uuid);

        memset(out, 0, sizeof(*out));
        out->index = index;
        if (len >= sizeof(out->uuid))
                len = sizeof(out->uuid) - 1;
        memcpy(out->uuid, uuid, len);
        out->product = p;
        out->partitioned = mig_on && tsr_product_has_mig(p) && m->partition_kind;
        if (!out->partitioned) {
                out->slice_slots = m->slice_slots;
                out->cores_overcommit = m->cores_overcommit;
                return;
        }
        for (size_t i = 0; i < p->n_profiles && i < TSR_MIG_PROFILES_MAX; i++) {
                char key[TSR_KEY_MAX];

                if (p->profiles[i].starts == 0)
                        continue;
                if (tsr_key_format(key, m, TSR_KEY_PARTITIONED_PROFILE, p->profiles[i].name) != 0)
                        continue;
                out->offered |= UINT32_C(1) << i;
        }
}

void tsr_capability_set_pci_bus_id(struct tsr_accel_cap *c, const char *bus_id)
{
        size_t len = strlen(bus_id);

        if (len >= sizeof(c->pci_bus_id))
                len = sizeof(c->pci_bus_id) - 1;
        memcpy(c->pci_bus_id, bus_id, len);
        c->pci_bus_id[len] = '\0';
}

unsigned tsr_capability_profile_ceiling(const struct tsr_accel_cap *c, unsigned i)
{
        if (!c->partitioned || !((c->offered >> i) & 1u))
                return 0;
        return tsr_geometry_free_count(&c->product->profiles[i], 0, 0);
}

unsigned tsr_capability_partition_count(const struct tsr_accel_cap *c)
{
        unsigned best = 0;

        for (unsigned i = 0; i < c->product->n_profiles; i++) {
                unsigned n = tsr_capability_profile_ceiling(c, i);

                if (n > best)
                        best = n;
        }
        return best;
}
