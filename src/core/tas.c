/*
 * tas.c - TAS's count, order and assignment at hostname level (core/tas.h).
 */
#include "core/tas.h"

#include <stdlib.h>
#include <string.h>

int64_t tsr_tas_fits(const struct tsr_tas_resource *r, size_t n, int *short_of)
{
        int64_t best = TSR_TAS_FITS_MAX;

        if (short_of)
                *short_of = -1;
        for (size_t k = 0; k < n; k++) {
                int64_t used = r[k].used > 0 ? r[k].used : 0, fit;

                if (r[k].want <= 0)
                        continue;
                fit = r[k].allocatable < 0 || r[k].allocatable - used < r[k].want
                          ? 0
                          : (r[k].allocatable - used) / r[k].want;
                if (fit < best) {
                        best = fit;
                        if (!fit && short_of)
                                *short_of = (int)k;
                }
                if (!best)
                        break;
        }
        return best;
}

bool tsr_tas_before(const struct tsr_tas_candidate *a, const struct tsr_tas_candidate *b)
{
        if (a->fits != b->fits)
                return a->fits < b->fits;
        return strcmp(a->name, b->name) < 0;
}

static int order_cmp(const void *pa, const void *pb)
{
        const struct tsr_tas_candidate *a = pa, *b = pb;

        return tsr_tas_before(a, b) ? -1 : tsr_tas_before(b, a) ? 1 : 0;
}

bool tsr_tas_assign(struct tsr_tas_candidate *c, size_t n, unsigned count, struct tsr_tas_take *out,
                    size_t *n_out)
{
        int64_t total = 0;
        unsigned left = count;

        *n_out = 0;
        for (size_t k = 0; k < n && total < count; k++)
                total += c[k].fits;
        if (total < count)
                return false;
        qsort(c, n, sizeof(*c), order_cmp);
        for (size_t k = 0; k < n && left > 0; k++) {
                unsigned take = c[k].fits < left ? (unsigned)c[k].fits : left;

                out[(*n_out)++] = (struct tsr_tas_take){c[k].node, take};
                left -= take;
        }
        return true;
}
