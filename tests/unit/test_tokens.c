/*
 * test_tokens.c - core/tokens: per-accelerator token counts and health for every family, and
 * token IDs, on the H100 walkthrough node of seeds/nvidia-mig.md (GPUs 0-2 MIG on, 3-7 off):
 * unpartitioned cards serve exclusive 1, shared 10, sliced 7; partitioned ones a pool of live
 * instances + the largest free count; visibility 512 everywhere; tokens of a card held in another
 * mode are unhealthy. IDs round-trip, pad to 4 digits, step shares by 160,000, and malformed IDs
 * are refused. tsr_tokens_max bounds every count.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/err.h"
#include "core/geometry.h"
#include "core/tokens.h"

#include "support/catalog_fixtures.h"

#include <string.h>

#define H100_NAME "NVIDIA H100 80GB HBM3"

static void expect_count(enum tsr_family f, const struct fx_node *nd, unsigned g, unsigned total,
                         unsigned healthy)
{
        unsigned h = 12345, t = tsr_tokens_count(f, &nd->caps[g], &nd->ledger[g], &h);

        if (t != total || h != healthy)
                fail_msg("%s tokens of GPU %u: %u (%u healthy), want %u (%u healthy)",
                         tsr_family_name(f), g, t, h, total, healthy);
}

static void counts_per_family(void **state)
{
        const struct tsr_product *p = fx_product(H100_NAME);
        struct tsr_alloc_record recs[] = {
            /* GPU 0: a 3g.40gb at 0; GPU 3: a slice; GPU 4: a share; GPU 5: exclusive */
            {0, TSR_MODE_PARTITIONED, 800000, 1, fx_pidx(p, "3g.40gb"), 0, false},
            {3, TSR_MODE_SLICED, 800000, 1, -1, 0, false},
            {4, TSR_MODE_SHARED, TSR_UNITS_PER_SHARE, 1, -1, 0, false},
            {5, TSR_MODE_EXCLUSIVE, TSR_UNITS_PER_ACCEL, 1, -1, 0, false},
        };
        struct fx_node nd;

        (void)state;
        fx_node_build(&nd, p, 8, 0x7, recs, sizeof(recs) / sizeof(recs[0]));
        /* partitioned GPU 0: one instance + 4 free 1g slots at 4..6 (the largest free count) */
        expect_count(TSR_FAMILY_PARTITIONED, &nd, 0, 1 + 3, 1 + 3);
        expect_count(TSR_FAMILY_PARTITIONED, &nd, 1, 7, 7);
        expect_count(TSR_FAMILY_EXCLUSIVE, &nd, 0, 0, 0);
        expect_count(TSR_FAMILY_SLICED, &nd, 1, 0, 0);
        /* unpartitioned */
        expect_count(TSR_FAMILY_EXCLUSIVE, &nd, 6, 1, 1);
        expect_count(TSR_FAMILY_SHARED, &nd, 6, 10, 10);
        expect_count(TSR_FAMILY_SLICED, &nd, 6, nd.caps[6].slice_slots, nd.caps[6].slice_slots);
        expect_count(TSR_FAMILY_PARTITIONED, &nd, 6, 0, 0);
        /* held in another mode: advertised, unhealthy */
        expect_count(TSR_FAMILY_EXCLUSIVE, &nd, 3, 1, 0);
        expect_count(TSR_FAMILY_SHARED, &nd, 3, 10, 0);
        expect_count(TSR_FAMILY_SLICED, &nd, 3, nd.caps[3].slice_slots, nd.caps[3].slice_slots);
        expect_count(TSR_FAMILY_SHARED, &nd, 4, 10, 10);
        expect_count(TSR_FAMILY_SLICED, &nd, 4, nd.caps[4].slice_slots, 0);
        expect_count(TSR_FAMILY_EXCLUSIVE, &nd, 5, 1, 1);
        expect_count(TSR_FAMILY_SHARED, &nd, 5, 10, 0);
        for (unsigned g = 0; g < 8; g++)
                expect_count(TSR_FAMILY_VISIBILITY, &nd, g, 512, 512);
        expect_count(TSR_FAMILY_NONE, &nd, 6, 0, 0);
}

/*
 * tsr_tokens_max: the count itself for every family but partitioned, 0 where a family is not
 * served, and for partitioned a bound no placement reaches: every product's GPU filled with its
 * smallest profile (the most live instances), and empty (the most free).
 */
static void max_bounds_count(void **state)
{
        const struct tsr_product *p = fx_product(H100_NAME);
        struct fx_node nd;
        struct tsr_accel_ledger full;
        unsigned bound;

        (void)state;
        fx_node_build(&nd, p, 8, 0x7, NULL, 0);
        for (unsigned g = 0; g < 8; g++)
                for (int f = TSR_FAMILY_NONE; f <= TSR_FAMILY_VISIBILITY; f++) {
                        unsigned max = tsr_tokens_max((enum tsr_family)f, &nd.caps[g]);
                        unsigned n =
                            tsr_tokens_count((enum tsr_family)f, &nd.caps[g], &nd.ledger[g], NULL);

                        if (f == TSR_FAMILY_PARTITIONED)
                                assert_true(nd.caps[g].partitioned ? n <= max : max == 0);
                        else
                                assert_int_equal(max, n);
                }
        bound = tsr_tokens_max(TSR_FAMILY_PARTITIONED, &nd.caps[0]);
        assert_int_equal(bound, 2 * TSR_MIG_AXIS_MAX);
        tsr_ledger_reset(&full);
        full.mode = TSR_MODE_PARTITIONED;
        for (unsigned st = 0; st < TSR_MIG_AXIS_MAX; st++)
                (void)tsr_geometry_add(p, &full.live, 0, st);
        assert_true(full.live.n > 0);
        assert_true(tsr_tokens_count(TSR_FAMILY_PARTITIONED, &nd.caps[0], &full, NULL) <= bound);
}

static void ids_round_trip(void **state)
{
        char id[TSR_TOKEN_ID_MAX], dev[TSR_UUID_MAX];
        unsigned idx = 0;

        (void)state;
        assert_int_equal(tsr_token_format(id, "nvidia-h100", "GPU-abc", 7), 0);
        assert_string_equal(id, "nvidia-h100:GPU-abc:0007");
        assert_int_equal(tsr_token_parse(id, "nvidia-h100", dev, &idx), 0);
        assert_string_equal(dev, "GPU-abc");
        assert_int_equal(idx, 7);
        assert_int_equal(tsr_token_index(TSR_FAMILY_SHARED, 9), 1440000);
        assert_int_equal(tsr_token_index(TSR_FAMILY_SLICED, 9), 9);
        assert_int_equal(tsr_token_format(id, "g", "GPU-x", tsr_token_index(TSR_FAMILY_SHARED, 1)),
                         0);
        assert_string_equal(id, "g:GPU-x:160000");
        assert_int_equal(tsr_token_parse(id, NULL, dev, &idx), 0);
        assert_int_equal(idx, 160000);
        /* another group, or malformed */
        assert_int_equal(tsr_token_parse("other:GPU-x:0001", "g", dev, &idx), TSR_EPARSE);
        const char *bad[] = {"",       "g",        "g:GPU",    ":GPU:1",           "g::1",
                             "g:GPU:", "g:GPU:1x", "g:GPU:-1", "g:GPU:99999999999"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                if (tsr_token_parse(bad[i], NULL, dev, &idx) != TSR_EPARSE)
                        fail_msg("\"%s\" parsed", bad[i]);
        assert_int_equal(tsr_token_format(id, "g:x", "GPU", 1), TSR_EINVAL);
        assert_int_equal(tsr_token_format(id, "", "GPU", 1), TSR_EINVAL);
        assert_int_equal(tsr_token_format(id, "g", "", 1), TSR_EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(counts_per_family),
            cmocka_unit_test(max_bounds_count),
            cmocka_unit_test(ids_round_trip),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
