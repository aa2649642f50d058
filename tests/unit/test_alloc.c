/*
 * test_alloc.c - core/alloc: gate 5's packing for logical slices and MIG partitions.
 *
 * Hand-built cases first: a slice goes to the most-occupied accelerator that still fits it (fewest
 * remaining units), ties by position, skipping partitioned, exclusive and shared cards, cards
 * without a free slot (Hygon's four) and cards without the units; a partition goes to the
 * accelerator with the most occupied memory slices (ledger placements plus live hardware), ties by
 * position, at the lowest free legal start, honouring instanceCount; TSR_ENOTFOUND when no
 * accelerator offers the profile ("+me", another product's name, no partitioned card) and
 * TSR_ENOSPC when none has room, out untouched on both.
 *
 * Then a slow, obvious reference model (sort every accelerator by the packing key, take the first
 * that fits; mark occupied slices in a bool array and scan starts) is compared with
 * tsr_alloc_pick_slice and tsr_alloc_pick_partition over thousands of randomized ledgers on every
 * MIG product of the catalog plus a Hygon-like 4-slot, 4-unit product, with a fixed-seed LCG.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/err.h"
#include "core/alloc.h"

#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))
#define S(n)       (UINT32_C(1) << (n))
#define M          INT64_C(1600000)
#define MAX_ACCEL  8

#define H100_NAME   "NVIDIA H100 80GB HBM3"
#define RTXPRO_NAME "NVIDIA RTX PRO 6000 Blackwell Server Edition"

static const struct tsr_product *product(const char *name)
{
        const struct tsr_product *p = tsr_catalog_product_by_name(name);

        if (!p)
                fail_msg("product \"%s\" is not in the catalog", name);
        return p;
}

static unsigned pidx(const struct tsr_product *p, const char *name)
{
        const struct tsr_mig_profile *mp = tsr_product_profile(p, name);

        if (!mp)
                fail_msg("%s has no profile %s", p->name, name);
        return (unsigned)(mp - p->profiles);
}

static const struct tsr_mig_profile hygon_profiles[] = {
    {"2g.15gb", 1, 0, 16380, 2, 1, S(0) | S(1) | S(2) | S(3), 4},
    {"4g.31gb", 2, 1, 32760, 4, 2, S(0) | S(2), 2},
    {"8g.63gb", 3, 2, 65520, 8, 4, S(0), 1},
};
static const struct tsr_product hygon = {"Hygon C-3000", TSR_MFR_HYGON,          65520, 12, 128,
                                         hygon_profiles, N_ELEMS(hygon_profiles)};

struct group {
        size_t n;
        struct tsr_accel_cap caps[MAX_ACCEL];
        struct tsr_accel_ledger ledger[MAX_ACCEL];
};

/* n idle accelerators of p, those in parted (bit i) in MIG mode. */
static void group_init(struct group *g, const struct tsr_product *p, size_t n, uint32_t parted)
{
        memset(g, 0, sizeof(*g));
        g->n = n;
        for (size_t i = 0; i < n; i++) {
                tsr_capability_detect(p, (unsigned)i, "GPU", (parted >> i) & 1u, &g->caps[i]);
                g->ledger[i].mode = TSR_MODE_NONE;
                g->ledger[i].remaining = M;
        }
}

static void hold(struct group *g, size_t i, enum tsr_mode mode, int64_t units, unsigned slices)
{
        g->ledger[i].mode = mode;
        g->ledger[i].allocated += units;
        g->ledger[i].remaining = g->ledger[i].allocated >= M ? 0 : M - g->ledger[i].allocated;
        g->ledger[i].allocated_slices += slices;
}

static void place(struct group *g, size_t i, const char *profile, unsigned start)
{
        const struct tsr_product *p = g->caps[i].product;

        g->ledger[i].mode = TSR_MODE_PARTITIONED;
        if (tsr_geometry_add(p, &g->ledger[i].live, pidx(p, profile), start) != 0)
                fail_msg("cannot place %s at %u on accelerator %zu", profile, start, i);
}

static void expect_slice(const struct group *g, int64_t units, int want)
{
        struct tsr_alloc_pick out = {99, 99, 99};
        int rc = tsr_alloc_pick_slice(g->caps, g->ledger, g->n, units, &out);

        if (want < 0) {
                if (rc != TSR_ENOSPC)
                        fail_msg("slice of %lld: %s (accel %u), want TSR_ENOSPC", (long long)units,
                                 tsr_err_name(rc), out.accel);
                assert_int_equal(out.accel, 99);
                assert_int_equal(out.profile, 99);
                assert_int_equal(out.start, 99);
                return;
        }
        if (rc != 0 || out.accel != (unsigned)want)
                fail_msg("slice of %lld: %s accel %u, want accel %d", (long long)units,
                         tsr_err_name(rc), out.accel, want);
        assert_int_equal(out.profile, -1);
        assert_int_equal(out.start, 0);
}

static void expect_partition(const struct group *g, const uint32_t *hw, const char *profile,
                             int want_rc, unsigned want_accel, unsigned want_start)
{
        struct tsr_alloc_pick out = {99, 99, 99};
        int rc = tsr_alloc_pick_partition(g->caps, g->ledger, hw, g->n, profile, &out);

        if (rc != want_rc)
                fail_msg("partition %s: %s, want %s", profile, tsr_err_name(rc),
                         tsr_err_name(want_rc));
        if (want_rc != 0) {
                assert_int_equal(out.accel, 99);
                assert_int_equal(out.profile, 99);
                assert_int_equal(out.start, 99);
                return;
        }
        if (out.accel != want_accel || out.start != want_start)
                fail_msg("partition %s: accel %u start %u, want accel %u start %u", profile,
                         out.accel, out.start, want_accel, want_start);
        assert_int_equal(out.profile, (int)pidx(g->caps[out.accel].product, profile));
}

static void test_alloc__slice_idle_group_takes_first(void **state)
{
        struct group g;

        (void)state;
        group_init(&g, product(H100_NAME), 4, 0);
        expect_slice(&g, 800000, 0);
        expect_slice(&g, M, 0);
        expect_slice(&g, M + 1, -1);
}

static void test_alloc__slice_most_occupied_that_fits(void **state)
{
        struct group g;

        (void)state;
        group_init(&g, product(H100_NAME), 4, 0);
        hold(&g, 2, TSR_MODE_SLICED, 480000, 1); /* 30 %: 1120000 left */
        expect_slice(&g, 480000, 2);             /* an already-sliced card beats pristine ones */
        hold(&g, 1, TSR_MODE_SLICED, 960000, 1); /* 60 %: 640000 left */
        expect_slice(&g, 640000, 1);             /* fits exactly on the fuller card */
        expect_slice(&g, 640001, 2);             /* not on card 1 any more */
        expect_slice(&g, 1120000, 2);
        expect_slice(&g, 1120001, 0); /* only a pristine card holds it; first by position */
        hold(&g, 3, TSR_MODE_SLICED, 960000, 1); /* card 3 ties card 1 */
        expect_slice(&g, 16000, 1);              /* ties by position */
}

static void test_alloc__slice_skips_other_modes(void **state)
{
        struct group g;

        (void)state;
        group_init(&g, product(H100_NAME), 5, 0x4);
        hold(&g, 0, TSR_MODE_EXCLUSIVE, M, 0);
        hold(&g, 1, TSR_MODE_SHARED, 160000, 0); /* fuller than card 4 would be, but shared */
        expect_slice(&g, 16000, 3);              /* card 2 is partitioned */
        hold(&g, 3, TSR_MODE_SLICED, 1600000, 1);
        expect_slice(&g, 16000, 4);
        hold(&g, 4, TSR_MODE_SLICED, 1500000, 1);
        expect_slice(&g, 100000, 4);
        expect_slice(&g, 100001, -1);
}

static void test_alloc__slice_needs_a_free_slot(void **state)
{
        static const struct tsr_product k100 = {"Hygon K100", TSR_MFR_HYGON, 65520, 12,
                                                128,          NULL,          0};
        struct group g;

        (void)state;
        group_init(&g, &k100, 2, 0);
        assert_int_equal(g.caps[0].slice_slots, 4);
        for (int i = 0; i < 3; i++)
                hold(&g, 0, TSR_MODE_SLICED, 160000, 1);
        expect_slice(&g, 160000, 0); /* a fourth slice still fits card 0 */
        hold(&g, 0, TSR_MODE_SLICED, 160000, 1);
        expect_slice(&g, 160000, 1); /* no fifth, however much memory card 0 has left */
        for (int i = 0; i < 4; i++)
                hold(&g, 1, TSR_MODE_SLICED, 16000, 1);
        expect_slice(&g, 16000, -1);
}

static void test_alloc__slice_empty_group(void **state)
{
        struct tsr_alloc_pick out = {99, 99, 99};

        (void)state;
        assert_int_equal(tsr_alloc_pick_slice(NULL, NULL, 0, 16000, &out), TSR_ENOSPC);
        assert_int_equal(out.accel, 99);
}

static void test_alloc__partition_idle_group(void **state)
{
        struct group g;

        (void)state;
        group_init(&g, product(H100_NAME), 4, 0xf);
        expect_partition(&g, NULL, "3g.40gb", 0, 0, 0);
        expect_partition(&g, NULL, "7g.80gb", 0, 0, 0);
        expect_partition(&g, NULL, "1g.10gb", 0, 0, 0);
}

static void test_alloc__partition_packs_most_occupied(void **state)
{
        struct group g;

        (void)state;
        group_init(&g, product(H100_NAME), 4, 0xf);
        place(&g, 2, "1g.10gb", 0);
        expect_partition(&g, NULL, "3g.40gb", 0, 2, 4); /* 1 slice used beats 0 */
        place(&g, 1, "3g.40gb", 0);
        expect_partition(&g, NULL, "1g.10gb", 0, 1, 4); /* 4 used beats 1 */
        expect_partition(&g, NULL, "3g.40gb", 0, 1, 4);
        expect_partition(&g, NULL, "2g.20gb", 0, 1, 4);
        expect_partition(&g, NULL, "4g.40gb", 0, 0, 0); /* slice 0 is taken on 1 and 2 */
        expect_partition(&g, NULL, "7g.80gb", 0, 0, 0);
        place(&g, 3, "1g.10gb", 6); /* one slice used: card 3 now beats the pristine card 0 */
        expect_partition(&g, NULL, "4g.40gb", 0, 3, 0);
        expect_partition(&g, NULL, "7g.80gb", 0, 0, 0);
}

static void test_alloc__partition_lowest_free_legal_start(void **state)
{
        struct group g;

        (void)state;
        group_init(&g, product(H100_NAME), 1, 0x1);
        place(&g, 0, "1g.10gb", 0);
        place(&g, 0, "1g.10gb", 2);
        expect_partition(&g, NULL, "1g.10gb", 0, 0, 1);
        expect_partition(&g, NULL, "1g.20gb", 0, 0, 4); /* starts 0, 2 are blocked */
        expect_partition(&g, NULL, "2g.20gb", 0, 0, 4);
        expect_partition(&g, NULL, "3g.40gb", 0, 0, 4);
        expect_partition(&g, NULL, "4g.40gb", TSR_ENOSPC, 0, 0);
        place(&g, 0, "1g.10gb", 5);
        expect_partition(&g, NULL, "1g.20gb", 0, 0, 6);
        expect_partition(&g, NULL, "2g.20gb", TSR_ENOSPC, 0, 0); /* 4-5 blocked, 6 not a start */
}

static void test_alloc__partition_respects_live_hardware(void **state)
{
        struct group g;
        uint32_t hw[3] = {0x3, 0, 0}; /* an unreclaimed instance on slices 0-1 of card 0 */

        (void)state;
        group_init(&g, product(H100_NAME), 3, 0x7);
        expect_partition(&g, hw, "1g.10gb", 0, 0, 2);
        expect_partition(&g, hw, "3g.40gb", 0, 0, 4);
        expect_partition(&g, hw, "7g.80gb", 0, 1, 0);
        hw[1] = 0x80;
        expect_partition(&g, hw, "7g.80gb", 0, 2, 0);
        expect_partition(&g, hw, "3g.40gb", 0, 0, 4); /* 2 used beats 1 */
        place(&g, 2, "2g.20gb", 2);
        expect_partition(&g, hw, "3g.40gb", 0, 0, 4); /* tie at two slices: position */
        hw[2] = 0x1;
        expect_partition(&g, hw, "3g.40gb", 0, 2, 4); /* three used */
        hw[0] = hw[1] = hw[2] = 0xff;
        expect_partition(&g, hw, "1g.10gb", TSR_ENOSPC, 0, 0);
        expect_partition(&g, NULL, "1g.10gb", 0, 2, 0); /* without hw, card 2 has room at 0 */
}

static void test_alloc__partition_honours_instance_count(void **state)
{
        static const struct tsr_mig_profile profiles[] = {
            {"1g.5gb", 19, 0, 4864, 1, 1, 0xff, 2},
            {"4g.20gb", 5, 3, 19968, 4, 4, S(0) | S(4), 2},
        };
        static const struct tsr_product p = {"capped", TSR_MFR_NVIDIA, 40960, 8, 64, profiles, 2};
        struct group g;

        (void)state;
        group_init(&g, &p, 2, 0x3);
        place(&g, 0, "1g.5gb", 0);
        expect_partition(&g, NULL, "1g.5gb", 0, 0, 1);
        place(&g, 0, "1g.5gb", 1);
        expect_partition(&g, NULL, "1g.5gb", 0, 1, 0); /* card 0 holds its two; slices are free */
        expect_partition(&g, NULL, "4g.20gb", 0, 0, 4);
        place(&g, 1, "1g.5gb", 7);
        place(&g, 1, "1g.5gb", 6);
        expect_partition(&g, NULL, "1g.5gb", TSR_ENOSPC, 0, 0);
}

static void test_alloc__partition_not_found_vs_no_space(void **state)
{
        struct group g;

        (void)state;
        group_init(&g, product(H100_NAME), 2, 0x3);
        expect_partition(&g, NULL, "1g.10gb+me", TSR_ENOTFOUND, 0, 0); /* never offered */
        expect_partition(&g, NULL, "3g.20gb", TSR_ENOTFOUND, 0, 0);    /* an A100-40GB name */
        expect_partition(&g, NULL, "", TSR_ENOTFOUND, 0, 0);
        place(&g, 0, "7g.80gb", 0);
        place(&g, 1, "7g.80gb", 0);
        expect_partition(&g, NULL, "1g.10gb", TSR_ENOSPC, 0, 0);
        expect_partition(&g, NULL, "1g.10gb+me", TSR_ENOTFOUND, 0, 0);

        group_init(&g, product(H100_NAME), 2, 0); /* no partitioned card at all */
        expect_partition(&g, NULL, "3g.40gb", TSR_ENOTFOUND, 0, 0);
        group_init(&g, product(H100_NAME), 3, 0x4); /* only card 2 is partitioned */
        expect_partition(&g, NULL, "3g.40gb", 0, 2, 0);
}

static void test_alloc__partition_rtx_pro_6000(void **state)
{
        struct group g;

        (void)state;
        group_init(&g, product(RTXPRO_NAME), 1, 0x1);
        place(&g, 0, "2g.48gb", 6);
        expect_partition(&g, NULL, "1g.24gb", 0, 0, 0);
        expect_partition(&g, NULL, "2g.48gb", 0, 0, 0);
        expect_partition(&g, NULL, "4g.96gb", TSR_ENOSPC, 0, 0);
        expect_partition(&g, NULL, "1g.24gb+me", TSR_ENOTFOUND, 0, 0);
        expect_partition(&g, NULL, "2g.48gb+gfx", TSR_ENOTFOUND, 0, 0);
        place(&g, 0, "1g.24gb-me", 0);
        expect_partition(&g, NULL, "1g.24gb", 0, 0, 3);
        expect_partition(&g, NULL, "2g.48gb-me", TSR_ENOSPC, 0, 0);
}

/* ---- reference model ---------------------------------------------------------------------- */

static uint64_t rng_state;

static unsigned rnd(unsigned n)
{
        rng_state = rng_state * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
        return (unsigned)((rng_state >> 33) % n);
}

/* Reference slice pick: order every accelerator by (remaining, position), take the first fit. */
static int ref_slice(const struct group *g, int64_t units, unsigned *accel)
{
        size_t order[MAX_ACCEL];

        for (size_t i = 0; i < g->n; i++)
                order[i] = i;
        for (size_t i = 1; i < g->n; i++) /* insertion sort */
                for (size_t j = i; j > 0; j--) {
                        const struct tsr_accel_ledger *a = &g->ledger[order[j - 1]];
                        const struct tsr_accel_ledger *b = &g->ledger[order[j]];
                        size_t t;

                        if (a->remaining < b->remaining ||
                            (a->remaining == b->remaining && order[j - 1] < order[j]))
                                break;
                        t = order[j - 1];
                        order[j - 1] = order[j];
                        order[j] = t;
                }
        for (size_t k = 0; k < g->n; k++) {
                const struct tsr_accel_cap *c = &g->caps[order[k]];
                const struct tsr_accel_ledger *l = &g->ledger[order[k]];
                bool free_or_sliced = l->mode == TSR_MODE_NONE || l->mode == TSR_MODE_SLICED;

                if (c->partitioned || !free_or_sliced)
                        continue;
                if (l->allocated_slices >= c->slice_slots || l->remaining < units)
                        continue;
                *accel = (unsigned)order[k];
                return 0;
        }
        return TSR_ENOSPC;
}

/* Reference partition pick, slice by slice with a bool array per accelerator. */
static int ref_partition(const struct group *g, const uint32_t *hw, const char *name,
                         struct tsr_alloc_pick *out)
{
        bool offered_anywhere = false;
        int best = -1, best_used = -1, best_start = -1, best_profile = -1;

        for (size_t i = 0; i < g->n; i++) {
                const struct tsr_accel_cap *c = &g->caps[i];
                const struct tsr_accel_ledger *l = &g->ledger[i];
                const struct tsr_product *p = c->product;
                const struct tsr_mig_profile *mp = NULL;
                bool taken[TSR_MIG_AXIS_MAX] = {false};
                unsigned profile = 0, live_of = 0;
                int used = 0, start = -1;

                if (!c->partitioned)
                        continue;
                for (unsigned k = 0; k < p->n_profiles; k++)
                        if (strcmp(p->profiles[k].name, name) == 0 && (c->offered & S(k))) {
                                mp = &p->profiles[k];
                                profile = k;
                        }
                if (!mp)
                        continue;
                offered_anywhere = true;
                for (unsigned k = 0; k < l->live.n; k++) {
                        const struct tsr_mig_profile *lp = &p->profiles[l->live.inst[k].profile];

                        for (unsigned s = 0; s < lp->size; s++)
                                taken[l->live.inst[k].start + s] = true;
                        if (l->live.inst[k].profile == profile)
                                live_of++;
                }
                for (unsigned s = 0; hw && s < TSR_MIG_AXIS_MAX; s++)
                        if (hw[i] & S(s))
                                taken[s] = true;
                for (unsigned s = 0; s < TSR_MIG_AXIS_MAX; s++)
                        used += taken[s];
                if (live_of >= mp->max_instances)
                        continue;
                for (unsigned s = 0; s + mp->size <= TSR_MIG_AXIS_MAX && start < 0; s++) {
                        bool clash = false;

                        if (!(mp->starts & S(s)))
                                continue;
                        for (unsigned k = s; k < s + mp->size; k++)
                                clash |= taken[k];
                        if (!clash)
                                start = (int)s;
                }
                if (start < 0)
                        continue;
                if (used > best_used) { /* strictly more: earlier positions win ties */
                        best = (int)i;
                        best_used = used;
                        best_start = start;
                        best_profile = (int)profile;
                }
        }
        if (!offered_anywhere)
                return TSR_ENOTFOUND;
        if (best < 0)
                return TSR_ENOSPC;
        out->accel = (unsigned)best;
        out->profile = best_profile;
        out->start = (unsigned)best_start;
        return 0;
}

static unsigned pick_start(uint32_t starts)
{
        unsigned n = (unsigned)__builtin_popcount(starts), k = rnd(n);

        for (unsigned s = 0; s < TSR_MIG_AXIS_MAX; s++)
                if ((starts & S(s)) && k-- == 0)
                        return s;
        return 0;
}

static const int64_t remaining_choices[] = {0,      16000,  160000,  320000,  480000,  640000,
                                            800000, 960000, 1120000, 1440000, 1584000, 1600000};

/* A random group of p: random populations, modes, slices, placements. */
static void random_group(struct group *g, const struct tsr_product *p)
{
        size_t n = 1 + rnd(MAX_ACCEL);
        uint32_t parted = 0;

        for (size_t i = 0; i < n; i++)
                if (rnd(3) != 0)
                        parted |= S(i);
        group_init(g, p, n, parted);
        for (size_t i = 0; i < n; i++) {
                struct tsr_accel_ledger *l = &g->ledger[i];

                if (g->caps[i].partitioned) {
                        unsigned steps = rnd(8);

                        for (unsigned k = 0; k < steps; k++) {
                                unsigned prof = rnd((unsigned)p->n_profiles);
                                const struct tsr_mig_profile *mp = &p->profiles[prof];
                                unsigned start = pick_start(mp->starts);

                                if (tsr_geometry_live_count(&l->live, prof) >= mp->max_instances &&
                                    rnd(8) != 0)
                                        continue;
                                if (tsr_geometry_add(p, &l->live, prof, start) == 0)
                                        l->mode = TSR_MODE_PARTITIONED;
                        }
                        continue;
                }
                switch (rnd(5)) {
                case 0:
                        break;
                case 1:
                        hold(g, i, TSR_MODE_EXCLUSIVE, M, 0);
                        break;
                case 2:
                        hold(g, i, TSR_MODE_SHARED, TSR_UNITS_PER_SHARE * (1 + rnd(10)), 0);
                        break;
                default: {
                        unsigned slots = g->caps[i].slice_slots;
                        int64_t rem = remaining_choices[rnd(N_ELEMS(remaining_choices))];

                        l->mode = TSR_MODE_SLICED;
                        l->allocated = M - rem;
                        l->remaining = rem;
                        l->allocated_slices = rnd(4) == 0 ? slots : 1 + rnd(slots < 6 ? slots : 6);
                        break;
                }
                }
        }
}

static void test_alloc__slice_matches_reference(void **state)
{
        const struct tsr_product *products;
        size_t np = tsr_catalog_products(&products);
        unsigned compared = 0, picked = 0;

        (void)state;
        rng_state = 7;
        for (size_t pi = 0; pi <= np; pi++) {
                const struct tsr_product *p = pi < np ? &products[pi] : &hygon;

                if (!tsr_product_has_mig(p))
                        continue;
                for (int round = 0; round < 400; round++) {
                        struct group g;

                        random_group(&g, p);
                        for (int q = 0; q < 4; q++) {
                                int64_t units =
                                    rnd(4) == 0
                                        ? 1 + (int64_t)rnd((unsigned)M + 1)
                                        : remaining_choices[rnd(N_ELEMS(remaining_choices))];
                                struct tsr_alloc_pick out = {99, 99, 99};
                                unsigned want = 99;
                                int rc, want_rc;

                                if (units == 0) /* the webhook never folds a 0-unit slice */
                                        units = 1;
                                rc = tsr_alloc_pick_slice(g.caps, g.ledger, g.n, units, &out);
                                want_rc = ref_slice(&g, units, &want);
                                if (rc != want_rc || (rc == 0 && out.accel != want))
                                        fail_msg("%s round %d: slice %lld -> %s/%u, reference "
                                                 "%s/%u",
                                                 p->name, round, (long long)units, tsr_err_name(rc),
                                                 out.accel, tsr_err_name(want_rc), want);
                                if (rc != 0)
                                        assert_int_equal(out.accel, 99);
                                picked += rc == 0;
                                compared++;
                        }
                }
        }
        assert_true(compared > 10000);
        assert_true(picked > compared / 4 && picked < compared);
}

static void test_alloc__partition_matches_reference(void **state)
{
        static const char *const foreign[] = {"3g.71gb", "bogus", "1g.5gb", "2g.15gb"};
        const struct tsr_product *products;
        size_t np = tsr_catalog_products(&products);
        unsigned compared = 0, counts[3] = {0, 0, 0};

        (void)state;
        rng_state = 42;
        for (size_t pi = 0; pi <= np; pi++) {
                const struct tsr_product *p = pi < np ? &products[pi] : &hygon;
                unsigned width = tsr_product_mig_width(p);

                if (!tsr_product_has_mig(p))
                        continue;
                for (int round = 0; round < 400; round++) {
                        struct group g;
                        uint32_t hw[MAX_ACCEL] = {0};
                        bool use_hw = rnd(2) == 0;

                        random_group(&g, p);
                        for (size_t i = 0; use_hw && i < g.n; i++)
                                if (rnd(3) == 0)
                                        hw[i] = (uint32_t)rnd(1u << width);
                        for (int q = 0; q < 6; q++) {
                                const char *name =
                                    rnd(8) == 0 ? foreign[rnd(N_ELEMS(foreign))]
                                                : p->profiles[rnd((unsigned)p->n_profiles)].name;
                                struct tsr_alloc_pick out = {99, 99, 99}, want = {99, 99, 99};
                                int rc = tsr_alloc_pick_partition(
                                    g.caps, g.ledger, use_hw ? hw : NULL, g.n, name, &out);
                                int want_rc = ref_partition(&g, use_hw ? hw : NULL, name, &want);

                                if (rc != want_rc || out.accel != want.accel ||
                                    out.profile != want.profile || out.start != want.start)
                                        fail_msg("%s round %d: %s -> %s %u/%d/%u, reference "
                                                 "%s %u/%d/%u",
                                                 p->name, round, name, tsr_err_name(rc), out.accel,
                                                 out.profile, out.start, tsr_err_name(want_rc),
                                                 want.accel, want.profile, want.start);
                                counts[rc == 0 ? 0 : rc == TSR_ENOSPC ? 1 : 2]++;
                                compared++;
                        }
                }
        }
        assert_true(compared > 30000);
        /* Every outcome is exercised. */
        assert_true(counts[0] > 1000 && counts[1] > 1000 && counts[2] > 1000);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_alloc__slice_idle_group_takes_first),
            cmocka_unit_test(test_alloc__slice_most_occupied_that_fits),
            cmocka_unit_test(test_alloc__slice_skips_other_modes),
            cmocka_unit_test(test_alloc__slice_needs_a_free_slot),
            cmocka_unit_test(test_alloc__slice_empty_group),
            cmocka_unit_test(test_alloc__partition_idle_group),
            cmocka_unit_test(test_alloc__partition_packs_most_occupied),
            cmocka_unit_test(test_alloc__partition_lowest_free_legal_start),
            cmocka_unit_test(test_alloc__partition_respects_live_hardware),
            cmocka_unit_test(test_alloc__partition_honours_instance_count),
            cmocka_unit_test(test_alloc__partition_not_found_vs_no_space),
            cmocka_unit_test(test_alloc__partition_rtx_pro_6000),
            cmocka_unit_test(test_alloc__slice_matches_reference),
            cmocka_unit_test(test_alloc__partition_matches_reference),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
