/*
 * printable.h - the composite cells of the `kubectl get instancetypes` table, as one formatter.
 *
 * The table (seeds/nvidia-mig.md: NAME ENTRANCE UNIT(CPU/RAM)/STORAGE ACCELERATOR(EX/SH/SL/PT)
 * CPU PHASE, -o wide adds PARTITIONS) has four cells made of several numbers. Upstream builds them
 * in its aggregated API; tessera writes them into the tessera extension status.printable
 * {unit, accelerator, cpu, partitions}, which the CRD's printer columns read. The simulator's
 * table prints its rows from the same struct, so the two can never disagree:
 *   unit         "<cpu>/<ram>/<storage>" of the unit spec, each the spec string ("12/192Gi/100Gi")
 *   accelerator  "<ex> <sh> <sl> <pt>", each view "onceMaxRequest/remaining" ("8/8 8/80 100/800
 *                0/0")
 *   cpu          the CPU view, "onceMaxRequest/remaining" ("128/132")
 *   partitions   "<profile>:<remaining>" joined by ',' in the views' profile order
 *                ("1g.10gb:52,1g.20gb:30,..."), "" when the pool offers no profile (the table
 *                prints "<none>", the object leaves the field out)
 * The unit spec's strings are Kubernetes quantities in canonical form (tsr_quantity_format): the
 * cores DecimalSI ("12"), RAM and storage BinarySI from GiB ("192Gi", "100Gi"); the same strings
 * are spec.unitResources.cpu/.ram and spec.localStorage. A view's numbers are counts, printed as
 * the integers the status fields hold (an SL remaining of 8000 reads "8000", not DecimalSI "8k").
 *
 * Invariants: every field is NUL-terminated and fits its array: a view cell is at most two
 * int64 numbers, the profile list at most TSR_MIG_PROFILES_MAX entries (a longer one is cut at
 * the last entry that fits, never mid-entry). Pure: no allocation, cannot fail; the inputs are
 * borrowed for the call and nothing in *out points into them.
 */
#ifndef TSR_CORE_PRINTABLE_H
#define TSR_CORE_PRINTABLE_H

#include "base/quantity.h"
#include "core/instancetype.h"
#include "core/views.h"

/* A view cell: two int64 numbers, '/' and the NUL. */
#define TSR_PRINTABLE_VIEW_MAX (2 * 20 + 2)

/* The unit spec as the InstanceType's spec strings. */
struct tsr_unit_text {
        char cpu[TSR_QUANTITY_STR_MAX];     /* spec.unitResources.cpu, "12" */
        char ram[TSR_QUANTITY_STR_MAX];     /* spec.unitResources.ram, "192Gi" */
        char storage[TSR_QUANTITY_STR_MAX]; /* spec.localStorage, "100Gi" */
};

struct tsr_printable {
        char unit[3 * TSR_QUANTITY_STR_MAX];
        char accelerator[4 * TSR_PRINTABLE_VIEW_MAX];
        char cpu[TSR_PRINTABLE_VIEW_MAX];
        char partitions[1024];
};

/* Writes the unit spec u as the InstanceType's spec strings into *out. */
void tsr_printable_unit_text(const struct tsr_unit_spec *u, struct tsr_unit_text *out);

/* Fills *out from the unit spec u, the pool's views v and its CPU view cpu. */
void tsr_printable_fill(const struct tsr_unit_spec *u, const struct tsr_pool_views *v,
                        const struct tsr_view *cpu, struct tsr_printable *out);

#endif
