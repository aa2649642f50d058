/*
 * ledger.c - folding allocation records into per-accelerator ledgers.
 */
#include "core/ledger.h"

#include "base/diag.h"
#include "base/err.h"

enum tsr_mode tsr_mode_of_family(enum tsr_family f)
{
        switch (f) {
        case TSR_FAMILY_EXCLUSIVE:
                return TSR_MODE_EXCLUSIVE;
        case TSR_FAMILY_SHARED:
                return TSR_MODE_SHARED;
        case TSR_FAMILY_SLICED:
                return TSR_MODE_SLICED;
        case TSR_FAMILY_PARTITIONED:
                return TSR_MODE_PARTITIONED;
        default:
                return TSR_MODE_NONE;
        }
}

const char *tsr_mode_name(enum tsr_mode m)
{
        switch (m) {
        case TSR_MODE_EXCLUSIVE:
                return "Exclusive";
        case TSR_MODE_SHARED:
                return "Shared";
        case TSR_MODE_SLICED:
                return "Sliced";
        case TSR_MODE_PARTITIONED:
                return "Partitioned";
        case TSR_MODE_NONE:
                break;
        }
        return "None";
}

static int64_t record_charge(const struct tsr_alloc_record *r)
{
        switch (r->mode) {
        case TSR_MODE_EXCLUSIVE:
                return TSR_UNITS_PER_ACCEL;
        case TSR_MODE_SHARED:
                return TSR_UNITS_PER_SHARE * (int64_t)(r->shares ? r->shares : 1);
        case TSR_MODE_SLICED:
        case TSR_MODE_PARTITIONED:
                return r->units;
        case TSR_MODE_NONE:
                break;
        }
        return 0;
}

/*
 * Whether a finished Pod's record still charges: a partition stays until its Pod is deleted, and
 * so does a MetaX or Cambricon slice, whose device outlives the container (upstream §8).
 */
static bool charges_when_finished(const struct tsr_accel_cap *cap, const struct tsr_alloc_record *r)
{
        enum tsr_manufacturer_id m;

        if (r->mode == TSR_MODE_PARTITIONED)
                return true;
        if (r->mode != TSR_MODE_SLICED || !cap->product)
                return false;
        m = cap->product->manufacturer;
        return m == TSR_MFR_METAX || m == TSR_MFR_CAMBRICON;
}

void tsr_ledger_reset(struct tsr_accel_ledger *l)
{
        l->mode = TSR_MODE_NONE;
        l->allocated = 0;
        l->remaining = TSR_UNITS_PER_ACCEL;
        l->allocated_slices = 0;
        l->live.n = 0;
}

int tsr_ledger_charge(const struct tsr_accel_cap *cap, struct tsr_accel_ledger *l,
                      const struct tsr_alloc_record *r, struct tsr_diag *diag)
{
        if (r->mode == TSR_MODE_NONE)
                return 0;
        if (r->finished && !charges_when_finished(cap, r))
                return 0;
        if (r->mode == TSR_MODE_PARTITIONED) {
                if (r->profile < 0 || !cap->product ||
                    tsr_geometry_add(cap->product, &l->live, (unsigned)r->profile, r->start) != 0)
                        return tsr_diag_set(diag, TSR_EINVAL,
                                            "accelerator %u cannot hold the recorded "
                                            "partition at slice %u",
                                            cap->index, r->start);
        }
        if (r->mode == TSR_MODE_SLICED)
                l->allocated_slices++;
        if (l->mode == TSR_MODE_NONE)
                l->mode = r->mode;
        l->allocated += record_charge(r);
        l->remaining = TSR_UNITS_PER_ACCEL - l->allocated;
        if (l->remaining < 0)
                l->remaining = 0;
        return 0;
}

int tsr_ledger_build(const struct tsr_accel_cap *caps, size_t n,
                     const struct tsr_alloc_record *recs, size_t nrec, struct tsr_accel_ledger *out,
                     struct tsr_diag *diag)
{
        for (size_t i = 0; i < n; i++)
                tsr_ledger_reset(&out[i]);
        for (size_t k = 0; k < nrec; k++) {
                int rc;

                if (recs[k].accel >= n)
                        return tsr_diag_set(diag, TSR_EINVAL,
                                            "allocation record names accelerator %u of %zu",
                                            recs[k].accel, n);
                rc = tsr_ledger_charge(&caps[recs[k].accel], &out[recs[k].accel], &recs[k], diag);
                if (rc)
                        return rc;
        }
        return 0;
}

int tsr_ledger_check(const struct tsr_accel_cap *cap, const struct tsr_accel_ledger *l,
                     struct tsr_diag *diag)
{
        int64_t expect = TSR_UNITS_PER_ACCEL - l->allocated;

        if (expect < 0)
                expect = 0;
        if (l->remaining != expect || l->remaining < 0 || l->remaining > TSR_UNITS_PER_ACCEL)
                return tsr_diag_set(diag, TSR_ESTALE,
                                    "accelerator %u: remaining %lld is not "
                                    "M - allocated",
                                    cap->index, (long long)l->remaining);
        if (l->allocated > TSR_UNITS_PER_ACCEL)
                return tsr_diag_set(diag, TSR_ESTALE,
                                    "accelerator %u: charged %lld units past "
                                    "its budget",
                                    cap->index, (long long)l->allocated);
        if (cap->partitioned && l->mode != TSR_MODE_NONE && l->mode != TSR_MODE_PARTITIONED)
                return tsr_diag_set(diag, TSR_ESTALE, "accelerator %u: partitioned but held %s",
                                    cap->index, tsr_mode_name(l->mode));
        if (!cap->partitioned && (l->mode == TSR_MODE_PARTITIONED || l->live.n))
                return tsr_diag_set(diag, TSR_ESTALE,
                                    "accelerator %u: unpartitioned but holds partitions",
                                    cap->index);
        if (l->allocated_slices > cap->slice_slots)
                return tsr_diag_set(diag, TSR_ESTALE, "accelerator %u: %u slices past its %u slots",
                                    cap->index, l->allocated_slices, cap->slice_slots);
        if (cap->partitioned) {
                uint32_t seen = 0;

                if (l->live.n > TSR_MIG_AXIS_MAX)
                        return tsr_diag_set(diag, TSR_ESTALE,
                                            "accelerator %u: %u placements on a %u-slice axis",
                                            cap->index, l->live.n, (unsigned)TSR_MIG_AXIS_MAX);
                for (unsigned i = 0; i < l->live.n; i++) {
                        const struct tsr_mig_instance *in = &l->live.inst[i];
                        const struct tsr_mig_profile *mp;
                        uint32_t span;

                        if (in->profile >= cap->product->n_profiles ||
                            in->start >= TSR_MIG_AXIS_MAX)
                                return tsr_diag_set(diag, TSR_ESTALE,
                                                    "accelerator %u: placement of profile %u at "
                                                    "%u is outside its tables",
                                                    cap->index, in->profile, in->start);
                        mp = &cap->product->profiles[in->profile];
                        span = tsr_geometry_span(in->start, mp->size);
                        if (!((mp->starts >> in->start) & 1u) || (seen & span))
                                return tsr_diag_set(diag, TSR_ESTALE,
                                                    "accelerator %u: placement %u:%u illegal or "
                                                    "overlapping",
                                                    cap->index, in->start, mp->size);
                        seen |= span;
                }
        }
        return 0;
}
