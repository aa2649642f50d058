/*
 * fit.c - which accelerator can take which claim, and the fit labels built from that.
 */
#include "core/fit.h"

bool tsr_fit_slice(const struct tsr_accel_cap *cap, const struct tsr_accel_ledger *l, int64_t units)
{
        return !cap->partitioned && cap->slice_slots > 0 &&
               (l->mode == TSR_MODE_NONE || l->mode == TSR_MODE_SLICED) &&
               l->allocated_slices < cap->slice_slots && l->remaining >= units;
}

bool tsr_fit_share(const struct tsr_accel_cap *cap, const struct tsr_accel_ledger *l)
{
        return !cap->partitioned && (l->mode == TSR_MODE_NONE || l->mode == TSR_MODE_SHARED) &&
               l->remaining >= TSR_UNITS_PER_SHARE;
}

bool tsr_fit_whole(const struct tsr_accel_cap *cap, const struct tsr_accel_ledger *l)
{
        return !cap->partitioned && l->mode == TSR_MODE_NONE && l->remaining >= TSR_UNITS_PER_ACCEL;
}

void tsr_fit_labels_project(const struct tsr_accel_cap *caps, const struct tsr_accel_ledger *ledger,
                            size_t n, struct tsr_fit_labels *out)
{
        out->present = false;
        out->sliced_max_free_units = 0;
        out->shared_free_cards = 0;
        for (size_t i = 0; i < n; i++) {
                if (caps[i].partitioned)
                        continue;
                out->present = true;
                if (tsr_fit_slice(&caps[i], &ledger[i], 0) &&
                    ledger[i].remaining > out->sliced_max_free_units)
                        out->sliced_max_free_units = ledger[i].remaining;
                if (tsr_fit_share(&caps[i], &ledger[i]))
                        out->shared_free_cards++;
        }
}
