/*
 * catalog_fixtures.c - catalog lookups and hardware fixtures; see catalog_fixtures.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"

#include "catalog_fixtures.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))
#define S(n)       (UINT32_C(1) << (n))

const struct tsr_product *fx_product(const char *name)
{
        const struct tsr_product *p = tsr_catalog_product_by_name(name);

        if (!p)
                fail_msg("product \"%s\" is not in the catalog", name);
        return p;
}

int fx_pidx(const struct tsr_product *p, const char *name)
{
        const struct tsr_mig_profile *mp = tsr_product_profile(p, name);

        if (!mp)
                fail_msg("%s has no profile %s", p->name, name);
        return (int)(mp - p->profiles);
}

const struct tsr_mig_profile fx_hygon_c3000_profiles[3] = {
    {"2g.15gb", 1, 0, 16380, 2, 1, S(0) | S(1) | S(2) | S(3), 4},
    {"4g.31gb", 2, 1, 32760, 4, 2, S(0) | S(2), 2},
    {"8g.63gb", 3, 2, 65520, 8, 4, S(0), 1},
};

const struct tsr_product fx_hygon_c3000 = {"Hygon C-3000",
                                           TSR_MFR_HYGON,
                                           65520,
                                           12,
                                           128,
                                           fx_hygon_c3000_profiles,
                                           N_ELEMS(fx_hygon_c3000_profiles)};

const struct tsr_product fx_hygon_k100 = {"Hygon K100", TSR_MFR_HYGON, 65520, 12, 128, NULL, 0};

void fx_detect(struct tsr_accel_cap *caps, size_t n, const struct tsr_product *p, uint32_t parted)
{
        for (size_t i = 0; i < n; i++)
                tsr_capability_detect(p, (unsigned)i, "GPU", (parted >> i) & 1u, &caps[i]);
}

void fx_node_build(struct fx_node *nd, const struct tsr_product *p, size_t n, uint32_t parted,
                   const struct tsr_alloc_record *recs, size_t nrec)
{
        struct tsr_diag d;
        int rc;

        nd->n = n;
        fx_detect(nd->caps, n, p, parted);
        tsr_diag_clear(&d);
        rc = tsr_ledger_build(nd->caps, n, recs, nrec, nd->ledger, &d);
        if (rc != 0)
                fail_msg("ledger_build = %s (%s)", tsr_err_name(rc), d.msg);
}
