/*
 * test_geometry.c - core/geometry against a slow, obvious reference model, on every MIG product
 * of the catalog, over randomized carve/free sequences; plus the walkthrough's carved-GPU table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/catalog.h"
#include "core/geometry.h"

#include "support/rng.h"

/* Reference: the largest set of non-overlapping free placements, by exhaustive search. */
static unsigned ref_best(const struct tsr_mig_profile *mp, unsigned from, bool *taken)
{
        unsigned best = 0;

        for (unsigned s = from; s < TSR_MIG_AXIS_MAX; s++) {
                bool clash = false;

                if (!((mp->starts >> s) & 1u))
                        continue;
                for (unsigned k = s; k < s + mp->size; k++)
                        clash |= k >= TSR_MIG_AXIS_MAX || taken[k];
                if (clash)
                        continue;
                for (unsigned k = s; k < s + mp->size; k++)
                        taken[k] = true;
                unsigned n = 1 + ref_best(mp, s + 1, taken);
                for (unsigned k = s; k < s + mp->size; k++)
                        taken[k] = false;
                if (n > best)
                        best = n;
        }
        return best;
}

static unsigned ref_free(const struct tsr_mig_profile *mp, uint32_t occupied, unsigned live)
{
        bool taken[TSR_MIG_AXIS_MAX];
        unsigned n;

        for (unsigned k = 0; k < TSR_MIG_AXIS_MAX; k++)
                taken[k] = (occupied >> k) & 1u;
        n = ref_best(mp, 0, taken);
        if (live >= mp->max_instances)
                return 0;
        return n < mp->max_instances - live ? n : mp->max_instances - live;
}

static void test_geometry__matches_reference_on_every_product(void **state)
{
        const struct tsr_product *products;
        size_t np = tsr_catalog_products(&products);
        unsigned checked = 0;

        (void)state;
        rng_seed(42);
        for (size_t p = 0; p < np; p++) {
                const struct tsr_product *pr = &products[p];

                if (!tsr_product_has_mig(pr))
                        continue;
                for (int round = 0; round < 300; round++) {
                        struct tsr_mig_live live = {0};

                        for (int step = 0; step < 12; step++) {
                                uint32_t occ = tsr_geometry_occupied(pr, &live);
                                unsigned prof = rnd((unsigned)pr->n_profiles);
                                const struct tsr_mig_profile *mp = &pr->profiles[prof];

                                for (unsigned q = 0; q < pr->n_profiles; q++) {
                                        unsigned lv = tsr_geometry_live_count(&live, q);

                                        assert_int_equal(
                                            tsr_geometry_free_count(&pr->profiles[q], occ, lv),
                                            ref_free(&pr->profiles[q], occ, lv));
                                        checked++;
                                }
                                if (live.n && rnd(3) == 0) { /* free a random instance */
                                        unsigned k = rnd(live.n);

                                        live.inst[k] = live.inst[live.n - 1];
                                        live.n--;
                                        continue;
                                }
                                int start = tsr_geometry_lowest_start(mp, occ);

                                if (start >= 0 &&
                                    tsr_geometry_live_count(&live, prof) < mp->max_instances)
                                        assert_int_equal(
                                            tsr_geometry_add(pr, &live, prof, (unsigned)start), 0);
                                else if (start < 0)
                                        assert_int_equal(ref_free(mp, occ, 0), 0);
                        }
                }
        }
        assert_true(checked > 10000);
}

static void test_geometry__walkthrough_carved_gpu(void **state)
{
        const struct tsr_product *h100 = tsr_catalog_product_by_name("NVIDIA H100 80GB HBM3");
        struct tsr_mig_live live = {0};
        unsigned expect[] = {3, 1, 2, 1, 1, 0, 0}; /* catalog order: 1g.10gb, +me, 1g.20gb, ... */
        uint32_t occ;

        (void)state;
        assert_non_null(h100);
        assert_int_equal(tsr_product_mig_width(h100), 8);
        assert_int_equal(tsr_geometry_add(h100, &live, 4, 0), 0);     /* 3g.40gb at 0 */
        assert_int_not_equal(tsr_geometry_add(h100, &live, 5, 0), 0); /* 4g.40gb overlaps */
        occ = tsr_geometry_occupied(h100, &live);
        assert_int_equal(occ, 0x0f);
        for (unsigned i = 0; i < 7; i++)
                assert_int_equal(tsr_geometry_free_count(&h100->profiles[i], occ,
                                                         tsr_geometry_live_count(&live, i)),
                                 expect[i]);
        assert_int_equal(tsr_geometry_lowest_start(&h100->profiles[4], occ), 4);
}

static void test_geometry__axis_is_never_assumed_eight(void **state)
{
        (void)state;
        assert_int_equal(tsr_product_mig_width(tsr_catalog_product_by_name("NVIDIA A30")), 4);
        assert_int_equal(tsr_product_mig_width(tsr_catalog_product_by_name(
                             "NVIDIA RTX PRO 6000 Blackwell Server Edition")),
                         12);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_geometry__matches_reference_on_every_product),
            cmocka_unit_test(test_geometry__walkthrough_carved_gpu),
            cmocka_unit_test(test_geometry__axis_is_never_assumed_eight),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
