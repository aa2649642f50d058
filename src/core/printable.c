/*
 * printable.c - the composite cells of `kubectl get instancetypes` (printable.h).
 */
#include "core/printable.h"

#include <stdio.h>
#include <string.h>

void tsr_printable_unit_text(const struct tsr_unit_spec *u, struct tsr_unit_text *out)
{
        struct tsr_quantity cpu = tsr_quantity_from_int(u->cpu, TSR_QF_DECIMAL_SI);
        struct tsr_quantity ram =
            tsr_quantity_from_int((int64_t)u->ram_gib << 30, TSR_QF_BINARY_SI);
        struct tsr_quantity storage =
            tsr_quantity_from_int((int64_t)u->storage_gib << 30, TSR_QF_BINARY_SI);

        tsr_quantity_format(&cpu, out->cpu);
        tsr_quantity_format(&ram, out->ram);
        tsr_quantity_format(&storage, out->storage);
}

static void view_cell(const struct tsr_view *v, char *out, size_t len)
{
        snprintf(out, len, "%lld/%lld", (long long)v->once_max, (long long)v->remaining);
}

/* "<name>:<count>" joined by ','; stops before the first entry that does not fit whole. */
static void partitions(const struct tsr_pool_views *v, char *out, size_t len)
{
        size_t o = 0;

        out[0] = '\0';
        for (size_t k = 0; k < v->n_profiles; k++) {
                int n = snprintf(out + o, len - o, "%s%s:%lld", k ? "," : "",
                                 v->remaining_profiles[k].name,
                                 (long long)v->remaining_profiles[k].count);

                if (n < 0 || (size_t)n >= len - o) {
                        out[o] = '\0';
                        return;
                }
                o += (size_t)n;
        }
}

void tsr_printable_fill(const struct tsr_unit_spec *u, const struct tsr_pool_views *v,
                        const struct tsr_view *cpu, struct tsr_printable *out)
{
        char ex[TSR_PRINTABLE_VIEW_MAX], sh[TSR_PRINTABLE_VIEW_MAX], sl[TSR_PRINTABLE_VIEW_MAX],
            pt[TSR_PRINTABLE_VIEW_MAX];
        struct tsr_unit_text t;

        memset(out, 0, sizeof(*out));
        tsr_printable_unit_text(u, &t);
        snprintf(out->unit, sizeof(out->unit), "%s/%s/%s", t.cpu, t.ram, t.storage);
        view_cell(&v->ex, ex, sizeof(ex));
        view_cell(&v->sh, sh, sizeof(sh));
        view_cell(&v->sl, sl, sizeof(sl));
        view_cell(&v->pt, pt, sizeof(pt));
        snprintf(out->accelerator, sizeof(out->accelerator), "%s %s %s %s", ex, sh, sl, pt);
        view_cell(cpu, out->cpu, sizeof(out->cpu));
        partitions(v, out->partitions, sizeof(out->partitions));
}
