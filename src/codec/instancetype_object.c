/*
 * instancetype_object.c - the InstanceType of one pool (instancetype_object.h).
 */
#include "codec/instancetype_object.h"

#include "core/catalog.h"
#include "core/instancetype.h"
#include "core/printable.h"

#include <stdio.h>
#include <string.h>

static json_t *view_json(const struct tsr_view *v)
{
        return json_pack("{s:I, s:I, s:I}", "capacity", (json_int_t)v->capacity, "onceMaxRequest",
                         (json_int_t)v->once_max, "remaining", (json_int_t)v->remaining);
}

static json_t *profiles_json(const struct tsr_profile_figure *p, size_t n, bool memory)
{
        json_t *a = json_array();

        for (size_t i = 0; a && i < n; i++) {
                json_t *o =
                    json_pack("{s:s, s:I}", "name", p[i].name, "count", (json_int_t)p[i].count);

                if (o && memory &&
                    json_object_set_new(o, "memoryMib", json_integer((json_int_t)p[i].memory_mib)))
                        o = (json_decref(o), NULL);
                if (!o || json_array_append_new(a, o))
                        a = (json_decref(a), NULL);
        }
        return a;
}

json_t *tsr_instancetype_object_authored(const struct tsr_chain_pool *p)
{
        struct tsr_unit_spec u = tsr_instancetype_unit(p->product);
        struct tsr_unit_text ut;
        char group[TSR_NAME_MAX];
        json_t *spec;

        tsr_printable_unit_text(&u, &ut);
        spec = json_pack("{s:b, s:s, s:s, s:{s:s, s:s}, s:s}", "acceleratable", p->product != NULL,
                         "os", p->os, "arch", p->arch, "unitResources", "cpu", ut.cpu, "ram",
                         ut.ram, "localStorage", ut.storage);
        if (!spec)
                return NULL;
        if (json_object_set_new(spec, "generalGroup", json_string(TSR_CHAIN_GENERAL_KEY)) ||
            (p->product && (tsr_instancetype_accel_key(p->product, group, sizeof(group)) ||
                            json_object_set_new(spec, "acceleratorGroup", json_string(group)))))
                return json_decref(spec), NULL;
        return json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:o}", "apiVersion",
                         TSR_INSTANCETYPE_API_VERSION, "kind", TSR_INSTANCETYPE_KIND, "metadata",
                         "name", p->name, "labels", TSR_INSTANCETYPE_ENTRANCE, p->entrance, "spec",
                         spec);
}

/* status.detail: the product and the capability-only slicedDetail. */
static json_t *detail_json(const struct tsr_chain_pool *p, const struct tsr_pool_views *v)
{
        json_t *logical = json_object(), *physical = json_object(), *detail;
        char memory[32];

        if (logical && v->logical_present &&
            (json_object_set_new(logical, "coresPercentageOvercommit",
                                 json_boolean(v->logical_overcommit)) |
             json_object_set_new(logical, "count", json_integer(v->logical_count))))
                logical = (json_decref(logical), NULL);
        if (physical && v->physical_present &&
            (json_object_set_new(physical, "count", json_integer(v->physical_count)) |
             json_object_set_new(physical, "profiles",
                                 profiles_json(v->physical_profiles, v->n_profiles, true))))
                physical = (json_decref(physical), NULL);
        if (!logical || !physical) {
                json_decref(logical);
                json_decref(physical);
                return NULL;
        }
        detail =
            json_pack("{s:{s:o, s:o}}", "slicedDetail", "logical", logical, "physical", physical);
        if (!detail || !p->product)
                return detail;
        snprintf(memory, sizeof(memory), "%lluMi", (unsigned long long)p->product->vram_mib);
        if (json_object_set_new(
                detail, "manufacturer",
                json_string(tsr_catalog_manufacturer(p->product->manufacturer)->key)) |
            json_object_set_new(detail, "product", json_string(p->product->name)) |
            json_object_set_new(detail, "memory", json_string(memory)))
                return json_decref(detail), NULL;
        return detail;
}

/* v with every count at 0, the profile names kept (a draining pool). */
static void zero_counts(struct tsr_pool_views *v, struct tsr_view *cpu)
{
        memset(&v->ex, 0, sizeof(v->ex));
        memset(&v->sh, 0, sizeof(v->sh));
        memset(&v->sl, 0, sizeof(v->sl));
        memset(&v->pt, 0, sizeof(v->pt));
        memset(cpu, 0, sizeof(*cpu));
        for (size_t i = 0; i < v->n_profiles; i++)
                v->remaining_profiles[i].count = v->allocated_profiles[i].count = 0;
}

json_t *tsr_instancetype_object_status(const struct tsr_chain_pool *p,
                                       const struct tsr_pool_views *views,
                                       const struct tsr_view *cpu_view,
                                       const struct tsr_instancetype_state *st)
{
        struct tsr_unit_spec u = tsr_instancetype_unit(p->product);
        struct tsr_pool_views v = *views;
        struct tsr_view cpu = *cpu_view;
        struct tsr_printable pr;
        json_t *pt, *printable, *status;

        if (st && st->draining)
                zero_counts(&v, &cpu);
        tsr_printable_fill(&u, &v, &cpu, &pr);
        pt = view_json(&v.pt);
        if (pt && (json_object_set_new(pt, "remainingProfiles",
                                       profiles_json(v.remaining_profiles, v.n_profiles, false)) |
                   json_object_set_new(pt, "allocatedProfiles",
                                       profiles_json(v.allocated_profiles, v.n_profiles, false))))
                pt = (json_decref(pt), NULL);
        printable = json_pack("{s:s, s:s, s:s}", "unit", pr.unit, "accelerator", pr.accelerator,
                              "cpu", pr.cpu);
        if (printable && pr.partitions[0] &&
            json_object_set_new(printable, "partitions", json_string(pr.partitions)))
                printable = (json_decref(printable), NULL);
        if (!pt || !printable) {
                json_decref(pt);
                json_decref(printable);
                return NULL;
        }
        status =
            json_pack("{s:o, s:o, s:o, s:o, s:o, s:s, s:s, s:o, s:o}", "accelerator",
                      view_json(&v.ex), "acceleratorShared", view_json(&v.sh), "acceleratorSliced",
                      view_json(&v.sl), "acceleratorPartitioned", pt, "cpu", view_json(&cpu),
                      "entrance", p->entrance, "phase", st && st->phase ? st->phase : "Active",
                      "detail", detail_json(p, &v), "printable", printable);
        if (status && st && st->phase_message && st->phase_message[0] &&
            json_object_set_new(status, "phaseMessage", json_string(st->phase_message)))
                status = (json_decref(status), NULL);
        return status;
}

json_t *tsr_instancetype_object_build(const struct tsr_chain_pool *p,
                                      const struct tsr_pool_views *v, const struct tsr_view *cpu,
                                      const struct tsr_instancetype_state *st)
{
        json_t *o = tsr_instancetype_object_authored(p);

        if (o && json_object_set_new(o, "status", tsr_instancetype_object_status(p, v, cpu, st)))
                o = (json_decref(o), NULL);
        return o;
}
