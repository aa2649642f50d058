/*
 * test_alloc.c - core/alloc: gate 5's packing for every family, and Allocate's refusals.
 *
 * Hand-built cases first: a slice goes to the most-occupied accelerator that still fits it (fewest
 * remaining units), ties by position, skipping partitioned, exclusive and shared cards, cards
 * without a free slot (Hygon's four) and cards without the units; a partition goes to the
 * accelerator with the most occupied memory slices (ledger placements plus live hardware), ties by
 * position, at the lowest free legal start, honouring instanceCount; TSR_ENOTFOUND when no
 * accelerator offers the profile ("+me", another product's name, no partitioned card) and
 * TSR_ENOSPC when none has room, out untouched on both.
 *
 * Exclusive picks take free whole cards by position; shared picks take distinct cards, the most
 * occupied first (fewest remaining units, so a shared card before a free one), ties by position,
 * never an exclusive, sliced or partitioned card; TSR_ENOSPC leaves out untouched.
 * tsr_alloc_place charges each family's picks the way tsr_ledger_charge charges the records
 * Allocate writes (M for a whole card, 160,000 for a share, units and a slot for a slice, units
 * and a placement for a partition), honours hw_occupied, caps a claim at TSR_ALLOC_BATCH_MAX
 * cards, and on TSR_ENOSPC / TSR_ENOTFOUND leaves the ledger byte-identical.
 * tsr_alloc_refuse refuses a card held in another mode (exclusive never shares), a partitioned
 * card, two shares of one card in one grant, a card with no free share, a slice on a card with
 * all its slots (H100 128, Hygon-like 4) or too few units, and accepts the rest; its messages name
 * the card (UUID, index) and the numbers that refused it.
 *
 * Then slow, obvious reference models (sort every accelerator by the packing key, take the first
 * that fits; mark occupied slices in a bool array and scan starts; charge by hand) are compared
 * with tsr_alloc_pick_slice, tsr_alloc_pick_partition, tsr_alloc_pick_shared and tsr_alloc_place
 * (choices and resulting ledgers, exactly) over thousands of randomized ledgers on every product
 * of the catalog plus a Hygon-like 4-slot MIG product and a 4-slot K100, with a fixed-seed LCG.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/err.h"
#include "core/alloc.h"

#include "support/catalog_fixtures.h"
#include "support/rng.h"

#include <stdio.h>
#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))
#define S(n)       (UINT32_C(1) << (n))
#define M          INT64_C(1600000)
#define MAX_ACCEL  8

#define H100_NAME   "NVIDIA H100 80GB HBM3"
#define RTXPRO_NAME "NVIDIA RTX PRO 6000 Blackwell Server Edition"

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
        if (tsr_geometry_add(p, &g->ledger[i].live, fx_pidx(p, profile), start) != 0)
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
        assert_int_equal(out.profile, (int)fx_pidx(g->caps[out.accel].product, profile));
}

static void test_alloc__slice_idle_group_takes_first(void **state)
{
        struct group g;

        (void)state;
        group_init(&g, fx_product(H100_NAME), 4, 0);
        expect_slice(&g, 800000, 0);
        expect_slice(&g, M, 0);
        expect_slice(&g, M + 1, -1);
}

static void test_alloc__slice_most_occupied_that_fits(void **state)
{
        struct group g;

        (void)state;
        group_init(&g, fx_product(H100_NAME), 4, 0);
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
        group_init(&g, fx_product(H100_NAME), 5, 0x4);
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
        struct group g;

        (void)state;
        group_init(&g, &fx_hygon_k100, 2, 0);
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
        group_init(&g, fx_product(H100_NAME), 4, 0xf);
        expect_partition(&g, NULL, "3g.40gb", 0, 0, 0);
        expect_partition(&g, NULL, "7g.80gb", 0, 0, 0);
        expect_partition(&g, NULL, "1g.10gb", 0, 0, 0);
}

static void test_alloc__partition_packs_most_occupied(void **state)
{
        struct group g;

        (void)state;
        group_init(&g, fx_product(H100_NAME), 4, 0xf);
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
        group_init(&g, fx_product(H100_NAME), 1, 0x1);
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
        group_init(&g, fx_product(H100_NAME), 3, 0x7);
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
        group_init(&g, fx_product(H100_NAME), 2, 0x3);
        expect_partition(&g, NULL, "1g.10gb+me", TSR_ENOTFOUND, 0, 0); /* never offered */
        expect_partition(&g, NULL, "3g.20gb", TSR_ENOTFOUND, 0, 0);    /* an A100-40GB name */
        expect_partition(&g, NULL, "", TSR_ENOTFOUND, 0, 0);
        place(&g, 0, "7g.80gb", 0);
        place(&g, 1, "7g.80gb", 0);
        expect_partition(&g, NULL, "1g.10gb", TSR_ENOSPC, 0, 0);
        expect_partition(&g, NULL, "1g.10gb+me", TSR_ENOTFOUND, 0, 0);

        group_init(&g, fx_product(H100_NAME), 2, 0); /* no partitioned card at all */
        expect_partition(&g, NULL, "3g.40gb", TSR_ENOTFOUND, 0, 0);
        group_init(&g, fx_product(H100_NAME), 3, 0x4); /* only card 2 is partitioned */
        expect_partition(&g, NULL, "3g.40gb", 0, 2, 0);
}

static void test_alloc__partition_rtx_pro_6000(void **state)
{
        struct group g;

        (void)state;
        group_init(&g, fx_product(RTXPRO_NAME), 1, 0x1);
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

/* ---- exclusive and shared picks, placement, refusals ----------------------------------------- */

#define NO_PICK                                                                                    \
        {                                                                                          \
                99, 99, 99                                                                         \
        }

/* Gives every accelerator of g a distinct UUID, "GPU-<index>", for the refusal messages. */
static void name_uuids(struct group *g)
{
        for (size_t i = 0; i < g->n; i++)
                snprintf(g->caps[i].uuid, sizeof(g->caps[i].uuid), "GPU-%zu", i);
}

/* Checks a multi-pick result: want_rc, and on success the accelerators want[0..count) in order. */
static void expect_many(const char *what, int rc, const struct tsr_alloc_pick *out, int want_rc,
                        const unsigned *want, unsigned count)
{
        if (rc != want_rc)
                fail_msg("%s: %s, want %s", what, tsr_err_name(rc), tsr_err_name(want_rc));
        for (unsigned k = 0; k < TSR_ALLOC_BATCH_MAX; k++) {
                bool picked = want_rc == 0 && k < count;

                if (!picked) {
                        if (out[k].accel != 99 || out[k].profile != 99 || out[k].start != 99)
                                fail_msg("%s: out[%u] written (accel %u)", what, k, out[k].accel);
                        continue;
                }
                if (out[k].accel != want[k] || out[k].profile != -1 || out[k].start != 0)
                        fail_msg("%s: pick %u is accel %u/%d/%u, want %u/-1/0", what, k,
                                 out[k].accel, out[k].profile, out[k].start, want[k]);
        }
}

static void reset_out(struct tsr_alloc_pick *out)
{
        for (unsigned k = 0; k < TSR_ALLOC_BATCH_MAX; k++)
                out[k] = (struct tsr_alloc_pick)NO_PICK;
}

static void pick_exclusive(const struct group *g, unsigned count, int want_rc, const unsigned *want)
{
        struct tsr_alloc_pick out[TSR_ALLOC_BATCH_MAX];
        char what[64];

        reset_out(out);
        snprintf(what, sizeof(what), "exclusive x%u", count);
        expect_many(what, tsr_alloc_pick_exclusive(g->caps, g->ledger, g->n, count, out), out,
                    want_rc, want, count);
}

static void pick_shared(const struct group *g, unsigned count, int want_rc, const unsigned *want)
{
        struct tsr_alloc_pick out[TSR_ALLOC_BATCH_MAX];
        char what[64];

        reset_out(out);
        snprintf(what, sizeof(what), "shared x%u", count);
        expect_many(what, tsr_alloc_pick_shared(g->caps, g->ledger, g->n, count, out), out, want_rc,
                    want, count);
}

static void test_alloc__exclusive_free_whole_by_position(void **state)
{
        static const unsigned want[] = {1, 4, 6};
        struct group g;

        (void)state;
        group_init(&g, fx_product(H100_NAME), 7, 0x4); /* card 2 is partitioned */
        hold(&g, 0, TSR_MODE_SLICED, 480000, 1);
        hold(&g, 3, TSR_MODE_SHARED, 160000, 0);
        hold(&g, 5, TSR_MODE_EXCLUSIVE, M, 0);
        pick_exclusive(&g, 0, 0, want);
        pick_exclusive(&g, 1, 0, want);
        pick_exclusive(&g, 2, 0, want);
        pick_exclusive(&g, 3, 0, want);
        pick_exclusive(&g, 4, TSR_ENOSPC, want);
        pick_exclusive(&g, 7, TSR_ENOSPC, want);

        group_init(&g, fx_product(H100_NAME), 2, 0x3); /* partitioned cards are never whole */
        pick_exclusive(&g, 1, TSR_ENOSPC, want);
        {
                struct tsr_alloc_pick out[TSR_ALLOC_BATCH_MAX];

                reset_out(out);
                assert_int_equal(tsr_alloc_pick_exclusive(NULL, NULL, 0, 1, out), TSR_ENOSPC);
                assert_int_equal(out[0].accel, 99);
        }
}

static void test_alloc__shared_most_occupied_first(void **state)
{
        static const unsigned want[] = {2, 5, 1, 0};
        static const unsigned shared_first[] = {2, 0, 1};
        static const unsigned last_share[] = {0, 1};
        struct group g;

        (void)state;
        group_init(&g, fx_product(H100_NAME), 8, 0x80);            /* card 7 is partitioned */
        hold(&g, 1, TSR_MODE_SHARED, 2 * TSR_UNITS_PER_SHARE, 0);  /* 1280000 left */
        hold(&g, 2, TSR_MODE_SHARED, 5 * TSR_UNITS_PER_SHARE, 0);  /* 800000 left */
        hold(&g, 3, TSR_MODE_EXCLUSIVE, M, 0);                     /* never shared */
        hold(&g, 4, TSR_MODE_SHARED, 10 * TSR_UNITS_PER_SHARE, 0); /* no share left */
        hold(&g, 5, TSR_MODE_SHARED, 5 * TSR_UNITS_PER_SHARE, 0);  /* ties card 2 */
        hold(&g, 6, TSR_MODE_SLICED, 160000, 1);                   /* never shared */
        pick_shared(&g, 0, 0, want);
        pick_shared(&g, 1, 0, want); /* fewest remaining */
        pick_shared(&g, 2, 0, want); /* the tie by position */
        pick_shared(&g, 3, 0, want);
        pick_shared(&g, 4, 0, want); /* the free card last */
        pick_shared(&g, 5, TSR_ENOSPC, want);

        /* A card already shared beats free ones ahead of it; free ones then go by position. */
        group_init(&g, fx_product(H100_NAME), 3, 0);
        hold(&g, 2, TSR_MODE_SHARED, TSR_UNITS_PER_SHARE, 0);
        pick_shared(&g, 1, 0, shared_first);
        pick_shared(&g, 2, 0, shared_first);
        pick_shared(&g, 3, 0, shared_first);
        pick_shared(&g, 4, TSR_ENOSPC, shared_first); /* distinct cards: three at most */

        /* Nine shares leave exactly one: that card is the most occupied that still grants. */
        group_init(&g, fx_product(H100_NAME), 2, 0);
        hold(&g, 0, TSR_MODE_SHARED, 9 * TSR_UNITS_PER_SHARE, 0);
        hold(&g, 1, TSR_MODE_SHARED, TSR_UNITS_PER_SHARE, 0);
        pick_shared(&g, 2, 0, last_share);

        group_init(&g, fx_product(H100_NAME), 4, 0xf); /* partition-only */
        pick_shared(&g, 1, TSR_ENOSPC, want);
}

/* A copy of a ledger array, to compare byte for byte. */
struct snapshot {
        struct tsr_accel_ledger ledger[MAX_ACCEL];
};

static void snap(const struct group *g, struct snapshot *s)
{
        memcpy(s->ledger, g->ledger, sizeof(s->ledger));
}

static void expect_untouched(const char *what, const struct group *g, const struct snapshot *s)
{
        if (memcmp(s->ledger, g->ledger, sizeof(s->ledger)) != 0)
                fail_msg("%s: the ledger changed", what);
}

static void expect_ledger(const char *what, const struct group *g, size_t i, enum tsr_mode mode,
                          int64_t allocated, int64_t remaining, unsigned slices, unsigned live)
{
        const struct tsr_accel_ledger *l = &g->ledger[i];

        if (l->mode != mode || l->allocated != allocated || l->remaining != remaining ||
            l->allocated_slices != slices || l->live.n != live)
                fail_msg("%s: card %zu is %s %lld/%lld slices %u live %u, want %s %lld/%lld "
                         "slices %u live %u",
                         what, i, tsr_mode_name(l->mode), (long long)l->allocated,
                         (long long)l->remaining, l->allocated_slices, l->live.n,
                         tsr_mode_name(mode), (long long)allocated, (long long)remaining, slices,
                         live);
}

static bool ledger_equal(const struct tsr_accel_ledger *a, const struct tsr_accel_ledger *b)
{
        if (a->mode != b->mode || a->allocated != b->allocated || a->remaining != b->remaining ||
            a->allocated_slices != b->allocated_slices || a->live.n != b->live.n)
                return false;
        for (unsigned k = 0; k < a->live.n; k++)
                if (a->live.inst[k].profile != b->live.inst[k].profile ||
                    a->live.inst[k].start != b->live.inst[k].start)
                        return false;
        return true;
}

/* Places d on g; on success checks that each pick was charged as tsr_ledger_charge charges it. */
static int place_checked(const char *what, struct group *g, const struct tsr_demand *d,
                         const uint32_t *hw, struct tsr_alloc_pick *picks, size_t *n_picks)
{
        static const enum tsr_mode modes[] = {
            [TSR_FAMILY_EXCLUSIVE] = TSR_MODE_EXCLUSIVE,
            [TSR_FAMILY_SHARED] = TSR_MODE_SHARED,
            [TSR_FAMILY_SLICED] = TSR_MODE_SLICED,
            [TSR_FAMILY_PARTITIONED] = TSR_MODE_PARTITIONED,
        };
        struct group want = *g;
        int rc =
            tsr_alloc_place(g->caps, g->ledger, g->n, d, hw, picks, TSR_ALLOC_BATCH_MAX, n_picks);

        if (rc != 0)
                return rc;
        for (size_t k = 0; k < *n_picks; k++) {
                struct tsr_alloc_record r = {
                    .accel = picks[k].accel,
                    .mode = modes[d->family],
                    .units = tsr_demand_units_per_card(d),
                    .shares = 1,
                    .profile = picks[k].profile,
                    .start = picks[k].start,
                };

                if (tsr_ledger_charge(&want.caps[r.accel], &want.ledger[r.accel], &r, NULL) != 0)
                        fail_msg("%s: pick %zu cannot be charged", what, k);
        }
        for (size_t i = 0; i < g->n; i++)
                if (!ledger_equal(&g->ledger[i], &want.ledger[i]))
                        fail_msg("%s: card %zu is not charged as tsr_ledger_charge charges it",
                                 what, i);
        return 0;
}

static struct tsr_demand demand(enum tsr_family f, unsigned cards, int64_t units,
                                const char *profile)
{
        struct tsr_demand d;

        memset(&d, 0, sizeof(d));
        d.family = f;
        d.cards = cards;
        d.units = units;
        snprintf(d.profile, sizeof(d.profile), "%s", profile ? profile : "");
        return d;
}

static void test_alloc__place_charges_each_family(void **state)
{
        struct tsr_alloc_pick picks[TSR_ALLOC_BATCH_MAX];
        struct tsr_demand d;
        struct group g;
        size_t np = 99;
        const struct tsr_product *h100 = fx_product(H100_NAME);

        (void)state;
        /* Exclusive: two whole cards by position, each charged M. */
        group_init(&g, h100, 3, 0);
        d = demand(TSR_FAMILY_EXCLUSIVE, 2, 0, NULL);
        assert_int_equal(place_checked("exclusive", &g, &d, NULL, picks, &np), 0);
        assert_int_equal(np, 2);
        assert_int_equal(picks[0].accel, 0);
        assert_int_equal(picks[1].accel, 1);
        assert_int_equal(picks[0].profile, -1);
        expect_ledger("exclusive", &g, 0, TSR_MODE_EXCLUSIVE, M, 0, 0, 0);
        expect_ledger("exclusive", &g, 1, TSR_MODE_EXCLUSIVE, M, 0, 0, 0);
        expect_ledger("exclusive", &g, 2, TSR_MODE_NONE, 0, M, 0, 0);

        /* Shared: the busier card first, one share (160000) on each of two cards. */
        group_init(&g, h100, 2, 0);
        hold(&g, 1, TSR_MODE_SHARED, 3 * TSR_UNITS_PER_SHARE, 0);
        d = demand(TSR_FAMILY_SHARED, 2, 0, NULL);
        assert_int_equal(place_checked("shared", &g, &d, NULL, picks, &np), 0);
        assert_int_equal(np, 2);
        assert_int_equal(picks[0].accel, 1);
        assert_int_equal(picks[1].accel, 0);
        expect_ledger("shared", &g, 1, TSR_MODE_SHARED, 640000, 960000, 0, 0);
        expect_ledger("shared", &g, 0, TSR_MODE_SHARED, 160000, 1440000, 0, 0);

        /* Sliced: 800000 does not fit card 1's 640000, so card 0; then 640000 fits card 1. */
        group_init(&g, h100, 2, 0);
        hold(&g, 1, TSR_MODE_SLICED, 960000, 1);
        d = demand(TSR_FAMILY_SLICED, 1, 800000, NULL);
        assert_int_equal(place_checked("sliced", &g, &d, NULL, picks, &np), 0);
        assert_int_equal(np, 1);
        assert_int_equal(picks[0].accel, 0);
        expect_ledger("sliced", &g, 0, TSR_MODE_SLICED, 800000, 800000, 1, 0);
        d = demand(TSR_FAMILY_SLICED, 1, 640000, NULL);
        assert_int_equal(place_checked("sliced", &g, &d, NULL, picks, &np), 0);
        assert_int_equal(picks[0].accel, 1);
        expect_ledger("sliced", &g, 1, TSR_MODE_SLICED, 1600000, 0, 2, 0);
        expect_ledger("sliced", &g, 0, TSR_MODE_SLICED, 800000, 800000, 1, 0);

        /* Partition: 3g.40gb at slice 0, then packed onto the same card at slice 4. */
        group_init(&g, h100, 2, 0x3);
        d = demand(TSR_FAMILY_PARTITIONED, 1, 800000, "3g.40gb");
        assert_int_equal(place_checked("partition", &g, &d, NULL, picks, &np), 0);
        assert_int_equal(np, 1);
        assert_int_equal(picks[0].accel, 0);
        assert_int_equal(picks[0].start, 0);
        assert_int_equal(picks[0].profile, (int)fx_pidx(h100, "3g.40gb"));
        expect_ledger("partition", &g, 0, TSR_MODE_PARTITIONED, 800000, 800000, 0, 1);
        assert_int_equal(g.ledger[0].live.inst[0].start, 0);
        assert_int_equal(place_checked("partition", &g, &d, NULL, picks, &np), 0);
        assert_int_equal(picks[0].accel, 0);
        assert_int_equal(picks[0].start, 4);
        expect_ledger("partition", &g, 0, TSR_MODE_PARTITIONED, 1600000, 0, 0, 2);
        expect_ledger("partition", &g, 1, TSR_MODE_NONE, 0, M, 0, 0);
}

static void test_alloc__place_enospc_leaves_ledger_unchanged(void **state)
{
        static struct tsr_accel_cap big_caps[TSR_ALLOC_BATCH_MAX + 6];
        static struct tsr_accel_ledger big[TSR_ALLOC_BATCH_MAX + 6], big_before[N_ELEMS(big)];
        const struct tsr_product *h100 = fx_product(H100_NAME);
        static const struct {
                const char *what;
                enum tsr_family family;
                unsigned cards;
                int64_t units;
                const char *profile;
                int want_rc;
        } rows[] = {
            {"no free whole card", TSR_FAMILY_EXCLUSIVE, 1, 0, NULL, TSR_ENOSPC},
            {"more cards than the node", TSR_FAMILY_EXCLUSIVE, 5, 0, NULL, TSR_ENOSPC},
            {"no card grants a share", TSR_FAMILY_SHARED, 1, 0, NULL, TSR_ENOSPC},
            {"shares on more cards than the node", TSR_FAMILY_SHARED, 9, 0, NULL, TSR_ENOSPC},
            {"no free slice slot", TSR_FAMILY_SLICED, 1, 16000, NULL, TSR_ENOSPC},
            {"no placement", TSR_FAMILY_PARTITIONED, 1, 1600000, "7g.80gb", TSR_ENOSPC},
            {"no such profile", TSR_FAMILY_PARTITIONED, 1, 200000, "1g.10gb+me", TSR_ENOTFOUND},
        };
        struct group g;
        struct snapshot before;

        (void)state;
        group_init(&g, h100, 4, 0x8);
        hold(&g, 0, TSR_MODE_EXCLUSIVE, M, 0);
        hold(&g, 1, TSR_MODE_SHARED, 10 * TSR_UNITS_PER_SHARE, 0);
        hold(&g, 2, TSR_MODE_SLICED, 128, 128); /* all 128 slots, 1599872 units left */
        place(&g, 3, "1g.10gb", 0);
        snap(&g, &before);
        for (size_t i = 0; i < N_ELEMS(rows); i++) {
                struct tsr_demand d =
                    demand(rows[i].family, rows[i].cards, rows[i].units, rows[i].profile);
                struct tsr_alloc_pick picks[TSR_ALLOC_BATCH_MAX];
                size_t np = 99;
                int rc;

                reset_out(picks);
                rc = tsr_alloc_place(g.caps, g.ledger, g.n, &d, NULL, picks, N_ELEMS(picks), &np);
                if (rc != rows[i].want_rc)
                        fail_msg("%s: %s, want %s", rows[i].what, tsr_err_name(rc),
                                 tsr_err_name(rows[i].want_rc));
                expect_untouched(rows[i].what, &g, &before);
                assert_int_equal(picks[0].accel, 99);
        }

        /* At most TSR_ALLOC_BATCH_MAX accelerators per claim, however many are free. */
        memset(big, 0, sizeof(big));
        for (size_t i = 0; i < N_ELEMS(big); i++) {
                tsr_capability_detect(h100, (unsigned)i, "GPU", false, &big_caps[i]);
                tsr_ledger_reset(&big[i]);
        }
        memcpy(big_before, big, sizeof(big));
        for (int f = 0; f < 2; f++) {
                struct tsr_demand d = demand(f ? TSR_FAMILY_SHARED : TSR_FAMILY_EXCLUSIVE,
                                             TSR_ALLOC_BATCH_MAX + 1, 0, NULL);
                struct tsr_alloc_pick picks[TSR_ALLOC_BATCH_MAX];
                size_t np = 99;

                assert_int_equal(tsr_alloc_place(big_caps, big, N_ELEMS(big), &d, NULL, picks,
                                                 N_ELEMS(picks), &np),
                                 TSR_ENOSPC);
                assert_memory_equal(big, big_before, sizeof(big));
                d.cards = TSR_ALLOC_BATCH_MAX;
                assert_int_equal(tsr_alloc_place(big_caps, big, N_ELEMS(big), &d, NULL, picks,
                                                 N_ELEMS(picks), &np),
                                 0);
                assert_int_equal(np, TSR_ALLOC_BATCH_MAX);
                for (unsigned k = 0; k < TSR_ALLOC_BATCH_MAX; k++)
                        assert_int_equal(picks[k].accel, k);
                assert_int_equal(big[TSR_ALLOC_BATCH_MAX].mode, TSR_MODE_NONE);
                memcpy(big, big_before, sizeof(big));
        }
}

static void test_alloc__place_partition_respects_hw_occupied(void **state)
{
        const struct tsr_product *h100 = fx_product(H100_NAME);
        uint32_t hw[2] = {0x0f, 0}; /* an unreclaimed instance on slices 0-3 of card 0 */
        struct tsr_alloc_pick picks[TSR_ALLOC_BATCH_MAX];
        struct tsr_demand d;
        struct snapshot before;
        struct group g;
        size_t np = 0;

        (void)state;
        group_init(&g, h100, 2, 0x3);
        d = demand(TSR_FAMILY_PARTITIONED, 1, 800000, "3g.40gb");
        assert_int_equal(place_checked("hw 3g", &g, &d, hw, picks, &np), 0);
        assert_int_equal(picks[0].accel, 0); /* four slices busy beats none */
        assert_int_equal(picks[0].start, 4);
        expect_ledger("hw 3g", &g, 0, TSR_MODE_PARTITIONED, 800000, 800000, 0, 1);
        d = demand(TSR_FAMILY_PARTITIONED, 1, 800000, "4g.40gb");
        assert_int_equal(place_checked("hw 4g", &g, &d, hw, picks, &np), 0);
        assert_int_equal(picks[0].accel, 1); /* card 0 is full: hardware 0-3, ledger 4-7 */
        assert_int_equal(picks[0].start, 0);
        hw[1] = 0xff;
        d = demand(TSR_FAMILY_PARTITIONED, 1, 200000, "1g.10gb");
        snap(&g, &before);
        assert_int_equal(tsr_alloc_place(g.caps, g.ledger, g.n, &d, hw, picks, N_ELEMS(picks), &np),
                         TSR_ENOSPC);
        expect_untouched("hw full", &g, &before);
        /* Without the hardware mask, card 0 has room on slices 0-3. */
        assert_int_equal(place_checked("no hw", &g, &d, NULL, picks, &np), 0);
        assert_int_equal(picks[0].accel, 0);
        assert_int_equal(picks[0].start, 0);
}

static void test_alloc__place_nothing_and_pick_limits(void **state)
{
        const struct tsr_product *h100 = fx_product(H100_NAME);
        struct tsr_alloc_pick picks[TSR_ALLOC_BATCH_MAX];
        struct tsr_demand d;
        struct snapshot before;
        struct group g;
        size_t np = 99;

        (void)state;
        group_init(&g, h100, 4, 0);
        snap(&g, &before);
        /* A Pod without an accelerator of the manufacturer, or only visibility: nothing. */
        d = demand(TSR_FAMILY_NONE, 0, 0, NULL);
        assert_int_equal(tsr_alloc_place(g.caps, g.ledger, g.n, &d, NULL, picks, 4, &np), 0);
        assert_int_equal(np, 0);
        expect_untouched("none", &g, &before);
        d = demand(TSR_FAMILY_VISIBILITY, 1, 0, NULL);
        np = 99;
        assert_int_equal(tsr_alloc_place(g.caps, g.ledger, g.n, &d, NULL, picks, 4, &np), 0);
        assert_int_equal(np, 0);
        expect_untouched("visibility", &g, &before);
        /* Zero whole cards: nothing to take. */
        d = demand(TSR_FAMILY_EXCLUSIVE, 0, 0, NULL);
        assert_int_equal(tsr_alloc_place(g.caps, g.ledger, g.n, &d, NULL, picks, 4, &np), 0);
        assert_int_equal(np, 0);
        expect_untouched("zero cards", &g, &before);

        /* picks may be NULL; n_picks still counts. n_picks may be NULL too. */
        d = demand(TSR_FAMILY_EXCLUSIVE, 2, 0, NULL);
        assert_int_equal(tsr_alloc_place(g.caps, g.ledger, g.n, &d, NULL, NULL, 0, &np), 0);
        assert_int_equal(np, 2);
        expect_ledger("no picks", &g, 1, TSR_MODE_EXCLUSIVE, M, 0, 0, 0);
        d = demand(TSR_FAMILY_EXCLUSIVE, 1, 0, NULL);
        assert_int_equal(tsr_alloc_place(g.caps, g.ledger, g.n, &d, NULL, picks, 4, NULL), 0);
        expect_ledger("no count", &g, 2, TSR_MODE_EXCLUSIVE, M, 0, 0, 0);

        /* At most max picks are written; all the chosen accelerators are charged. */
        group_init(&g, h100, 4, 0);
        reset_out(picks);
        d = demand(TSR_FAMILY_SHARED, 3, 0, NULL);
        assert_int_equal(tsr_alloc_place(g.caps, g.ledger, g.n, &d, NULL, picks, 1, &np), 0);
        assert_int_equal(np, 3);
        assert_int_equal(picks[0].accel, 0);
        assert_int_equal(picks[1].accel, 99);
        for (size_t i = 0; i < 3; i++)
                expect_ledger("max 1", &g, i, TSR_MODE_SHARED, 160000, 1440000, 0, 0);
        expect_ledger("max 1", &g, 3, TSR_MODE_NONE, 0, M, 0, 0);
}

/* One refusal case: the claim, and facts its message must carry (NULL-terminated). */
struct refusal {
        const char *what;
        bool hygon; /* on the 4-slot group instead of the H100 one */
        enum tsr_family family;
        unsigned accels[3];
        size_t count;
        int64_t units;
        bool refused;
        const char *facts[6];
};

static void test_alloc__refuse(void **state)
{
        static const struct refusal rows[] = {
            {"exclusive on a free card", false, TSR_FAMILY_EXCLUSIVE, {0}, 1, 0, false, {NULL}},
            {"exclusive on an exclusive card",
             false,
             TSR_FAMILY_EXCLUSIVE,
             {1},
             1,
             0,
             true,
             {"GPU-1", "index 1", "Exclusive", "an exclusive claim", NULL}},
            {"exclusive on a shared card",
             false,
             TSR_FAMILY_EXCLUSIVE,
             {0, 2},
             2,
             0,
             true,
             {"GPU-2", "index 2", "Shared", "exclusive", NULL}},
            {"exclusive on a sliced card",
             false,
             TSR_FAMILY_EXCLUSIVE,
             {4},
             1,
             0,
             true,
             {"GPU-4", "index 4", "Sliced", "exclusive", NULL}},
            {"exclusive on a partitioned card",
             false,
             TSR_FAMILY_EXCLUSIVE,
             {5},
             1,
             0,
             true,
             {"GPU-5", "index 5", "partition", NULL}},
            {"shares on a free and a shared card",
             false,
             TSR_FAMILY_SHARED,
             {0, 2},
             2,
             0,
             false,
             {NULL}},
            {"share on a shared card", false, TSR_FAMILY_SHARED, {2}, 1, 0, false, {NULL}},
            {"share on an exclusive card",
             false,
             TSR_FAMILY_SHARED,
             {1},
             1,
             0,
             true,
             {"GPU-1", "index 1", "Exclusive", "shared", NULL}},
            {"share on a sliced card",
             false,
             TSR_FAMILY_SHARED,
             {4},
             1,
             0,
             true,
             {"GPU-4", "index 4", "Sliced", "shared", NULL}},
            {"share on a partitioned card",
             false,
             TSR_FAMILY_SHARED,
             {5},
             1,
             0,
             true,
             {"GPU-5", "index 5", "partition", NULL}},
            {"two shares of one card in one grant",
             false,
             TSR_FAMILY_SHARED,
             {2, 0, 2},
             3,
             0,
             true,
             {"GPU-2", "index 2", "two", "share", NULL}},
            {"two shares of one free card",
             false,
             TSR_FAMILY_SHARED,
             {0, 0},
             2,
             0,
             true,
             {"GPU-0", "index 0", "two", NULL}},
            {"no free share",
             false,
             TSR_FAMILY_SHARED,
             {0, 3},
             2,
             0,
             true,
             {"GPU-3", "index 3", "share", NULL}},
            {"share on the ninth-share card", false, TSR_FAMILY_SHARED, {6}, 1, 0, false, {NULL}},
            {"slice on a free card", false, TSR_FAMILY_SLICED, {0}, 1, 800000, false, {NULL}},
            {"slice, exact fit", false, TSR_FAMILY_SLICED, {4}, 1, 640000, false, {NULL}},
            {"slice, one unit short",
             false,
             TSR_FAMILY_SLICED,
             {4},
             1,
             640001,
             true,
             {"GPU-4", "index 4", "640000", "640001", NULL}},
            {"slice on an exclusive card",
             false,
             TSR_FAMILY_SLICED,
             {1},
             1,
             16000,
             true,
             {"GPU-1", "index 1", "Exclusive", "sliced", NULL}},
            {"slice on a shared card",
             false,
             TSR_FAMILY_SLICED,
             {2},
             1,
             16000,
             true,
             {"GPU-2", "index 2", "Shared", "sliced", NULL}},
            {"slice on a partitioned card",
             false,
             TSR_FAMILY_SLICED,
             {5},
             1,
             16000,
             true,
             {"GPU-5", "index 5", "partition", NULL}},
            {"slice on an H100 with all 128 slots used",
             false,
             TSR_FAMILY_SLICED,
             {7},
             1,
             16000,
             true,
             {"GPU-7", "index 7", "128", "slot", NULL}},
            {"Hygon: fourth slice", true, TSR_FAMILY_SLICED, {1}, 1, 160000, false, {NULL}},
            {"Hygon: no fifth slice, however much memory is left",
             true,
             TSR_FAMILY_SLICED,
             {0},
             1,
             16000,
             true,
             {"GPU-0", "index 0", "4", "slot", NULL}},
            {"Hygon: too few units",
             true,
             TSR_FAMILY_SLICED,
             {1},
             1,
             1120001,
             true,
             {"GPU-1", "index 1", "1120000", "1120001", NULL}},
            {"an accelerator past the node",
             false,
             TSR_FAMILY_EXCLUSIVE,
             {8},
             1,
             0,
             true,
             {"8", NULL}},
            {"no tokens", false, TSR_FAMILY_SHARED, {0}, 0, 0, false, {NULL}},
        };
        struct group g, hy;

        (void)state;
        group_init(&g, fx_product(H100_NAME), 8, 0x20);
        hold(&g, 1, TSR_MODE_EXCLUSIVE, M, 0);
        hold(&g, 2, TSR_MODE_SHARED, 3 * TSR_UNITS_PER_SHARE, 0);  /* 1120000 left */
        hold(&g, 3, TSR_MODE_SHARED, 10 * TSR_UNITS_PER_SHARE, 0); /* none left */
        hold(&g, 4, TSR_MODE_SLICED, 960000, 1);                   /* 640000 left */
        hold(&g, 6, TSR_MODE_SHARED, 9 * TSR_UNITS_PER_SHARE, 0);  /* one share left */
        hold(&g, 7, TSR_MODE_SLICED, 128, 128);                    /* every slot taken */
        name_uuids(&g);
        group_init(&hy, &fx_hygon_k100, 2, 0);
        hold(&hy, 0, TSR_MODE_SLICED, 4 * 16000, 4);  /* four slots, 1536000 left */
        hold(&hy, 1, TSR_MODE_SLICED, 3 * 160000, 3); /* three slots, 1120000 left */
        name_uuids(&hy);
        assert_int_equal(hy.caps[0].slice_slots, 4);

        for (size_t i = 0; i < N_ELEMS(rows); i++) {
                const struct refusal *r = &rows[i];
                const struct group *on = r->hygon ? &hy : &g;
                char msg[512];
                bool refused;

                memset(msg, 0, sizeof(msg));
                refused = tsr_alloc_refuse(on->caps, on->ledger, on->n, r->family, r->accels,
                                           r->count, r->units, msg, sizeof(msg));
                if (refused != r->refused)
                        fail_msg("%s: refused %d, want %d (\"%s\")", r->what, refused, r->refused,
                                 msg);
                for (size_t k = 0; r->refused && r->facts[k]; k++)
                        if (!strstr(msg, r->facts[k]))
                                fail_msg("%s: \"%s\" does not say \"%s\"", r->what, msg,
                                         r->facts[k]);
        }
}

/* ---- reference model ---------------------------------------------------------------------- */

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

static const int64_t remaining_choices[] = {0,      16000,  160000,  320000,  480000,  640000,
                                            800000, 960000, 1120000, 1440000, 1584000, 1600000};

/*
 * A random group of p: random populations (each card partitioned with probability num/den),
 * modes, slices, placements.
 */
static void random_group_with(struct group *g, const struct tsr_product *p, unsigned num,
                              unsigned den)
{
        size_t n = 1 + rnd(MAX_ACCEL);
        uint32_t parted = 0;

        for (size_t i = 0; i < n; i++)
                if (rnd(den) >= den - num)
                        parted |= S(i);
        group_init(g, p, n, parted);
        for (size_t i = 0; i < n; i++) {
                struct tsr_accel_ledger *l = &g->ledger[i];

                if (g->caps[i].partitioned) {
                        unsigned steps = rnd(8);

                        for (unsigned k = 0; k < steps; k++) {
                                unsigned prof = rnd((unsigned)p->n_profiles);
                                const struct tsr_mig_profile *mp = &p->profiles[prof];
                                unsigned start = rnd_start(mp->starts);

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

/* A random group of p, two cards in three partitioned. */
static void random_group(struct group *g, const struct tsr_product *p)
{
        random_group_with(g, p, 2, 3);
}

static void test_alloc__slice_matches_reference(void **state)
{
        const struct tsr_product *products;
        size_t np = tsr_catalog_products(&products);
        unsigned compared = 0, picked = 0;

        (void)state;
        rng_seed(7);
        for (size_t pi = 0; pi <= np; pi++) {
                const struct tsr_product *p = pi < np ? &products[pi] : &fx_hygon_c3000;

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
        rng_seed(42);
        for (size_t pi = 0; pi <= np; pi++) {
                const struct tsr_product *p = pi < np ? &products[pi] : &fx_hygon_c3000;
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

/* Reference exclusive pick: every free whole card in position order, the first count of them. */
static int ref_exclusive(const struct group *g, unsigned count, unsigned *accels)
{
        unsigned have = 0;

        for (size_t i = 0; i < g->n; i++) {
                const struct tsr_accel_ledger *l = &g->ledger[i];

                if (!g->caps[i].partitioned && l->mode == TSR_MODE_NONE && l->remaining >= M &&
                    have < count)
                        accels[have++] = (unsigned)i;
        }
        return have < count ? TSR_ENOSPC : 0;
}

/* Reference shared pick: sort every card by (remaining, position), keep those that can grant a
 * share, take the first count. */
static int ref_shared(const struct group *g, unsigned count, unsigned *accels)
{
        size_t order[MAX_ACCEL];
        unsigned have = 0;

        for (size_t i = 0; i < g->n; i++)
                order[i] = i;
        for (size_t i = 0; i < g->n; i++) /* selection sort */
                for (size_t j = i + 1; j < g->n; j++) {
                        const struct tsr_accel_ledger *a = &g->ledger[order[i]];
                        const struct tsr_accel_ledger *b = &g->ledger[order[j]];
                        size_t t;

                        if (b->remaining < a->remaining ||
                            (b->remaining == a->remaining && order[j] < order[i])) {
                                t = order[i];
                                order[i] = order[j];
                                order[j] = t;
                        }
                }
        for (size_t k = 0; k < g->n && have < count; k++) {
                const struct tsr_accel_ledger *l = &g->ledger[order[k]];
                bool free_or_shared = l->mode == TSR_MODE_NONE || l->mode == TSR_MODE_SHARED;

                if (g->caps[order[k]].partitioned || !free_or_shared ||
                    l->remaining < TSR_UNITS_PER_SHARE)
                        continue;
                accels[have++] = (unsigned)order[k];
        }
        return have < count ? TSR_ENOSPC : 0;
}

/* Reference charge, by hand: the mode of the first holder, units off the budget (clamped at 0),
 * one slot per slice, the placement appended to the live list. */
static void ref_charge(const struct tsr_accel_cap *cap, struct tsr_accel_ledger *l,
                       enum tsr_mode mode, int64_t units, const struct tsr_alloc_pick *p)
{
        (void)cap;
        if (l->mode == TSR_MODE_NONE)
                l->mode = mode;
        l->allocated += units;
        l->remaining = l->allocated >= M ? 0 : M - l->allocated;
        if (mode == TSR_MODE_SLICED)
                l->allocated_slices++;
        if (mode == TSR_MODE_PARTITIONED) {
                l->live.inst[l->live.n].profile = (uint8_t)p->profile;
                l->live.inst[l->live.n].start = (uint8_t)p->start;
                l->live.n++;
        }
}

/* Reference placement on g (charged in place on success): picks as the reference picks above. */
static int ref_place(struct group *g, const struct tsr_demand *d, const uint32_t *hw,
                     struct tsr_alloc_pick *picks, size_t *n_picks)
{
        unsigned accels[MAX_ACCEL + 2];
        struct tsr_alloc_pick one;
        int rc;

        *n_picks = 0;
        switch (d->family) {
        case TSR_FAMILY_EXCLUSIVE:
        case TSR_FAMILY_SHARED:
                rc = d->family == TSR_FAMILY_EXCLUSIVE ? ref_exclusive(g, d->cards, accels)
                                                       : ref_shared(g, d->cards, accels);
                if (rc)
                        return rc;
                for (unsigned k = 0; k < d->cards; k++) {
                        picks[k] = (struct tsr_alloc_pick){accels[k], -1, 0};
                        ref_charge(&g->caps[accels[k]], &g->ledger[accels[k]],
                                   d->family == TSR_FAMILY_EXCLUSIVE ? TSR_MODE_EXCLUSIVE
                                                                     : TSR_MODE_SHARED,
                                   d->family == TSR_FAMILY_EXCLUSIVE ? M : TSR_UNITS_PER_SHARE,
                                   &picks[k]);
                }
                *n_picks = d->cards;
                return 0;
        case TSR_FAMILY_SLICED:
                rc = ref_slice(g, d->units, &one.accel);
                if (rc)
                        return rc;
                one.profile = -1;
                one.start = 0;
                ref_charge(&g->caps[one.accel], &g->ledger[one.accel], TSR_MODE_SLICED, d->units,
                           &one);
                break;
        case TSR_FAMILY_PARTITIONED:
                rc = ref_partition(g, hw, d->profile, &one);
                if (rc)
                        return rc;
                ref_charge(&g->caps[one.accel], &g->ledger[one.accel], TSR_MODE_PARTITIONED,
                           d->units, &one);
                break;
        default:
                return 0;
        }
        picks[0] = one;
        *n_picks = 1;
        return 0;
}

static void test_alloc__shared_matches_reference(void **state)
{
        const struct tsr_product *products;
        size_t np = tsr_catalog_products(&products);
        unsigned compared = 0, picked = 0;

        (void)state;
        rng_seed(1234);
        for (size_t pi = 0; pi <= np; pi++) {
                const struct tsr_product *p = pi < np ? &products[pi] : &fx_hygon_c3000;

                for (int round = 0; round < 300; round++) {
                        struct group g;

                        random_group_with(&g, p, 1, 4);
                        for (unsigned count = 0; count <= g.n + 1; count++) {
                                struct tsr_alloc_pick out[TSR_ALLOC_BATCH_MAX];
                                unsigned want[MAX_ACCEL + 2];
                                int rc, want_rc;

                                reset_out(out);
                                rc = tsr_alloc_pick_shared(g.caps, g.ledger, g.n, count, out);
                                want_rc = ref_shared(&g, count, want);
                                if (rc != want_rc)
                                        fail_msg("%s round %d: shared x%u -> %s, reference %s",
                                                 p->name, round, count, tsr_err_name(rc),
                                                 tsr_err_name(want_rc));
                                expect_many(p->name, rc, out, want_rc, want, count);
                                picked += rc == 0 && count > 0;
                                compared++;
                        }
                }
        }
        assert_true(compared > 10000);
        assert_true(picked > compared / 8 && picked < compared);
}

static void test_alloc__place_matches_reference(void **state)
{
        static const char *const foreign[] = {"3g.71gb", "bogus", "1g.5gb", "2g.15gb"};
        const struct tsr_product *products;
        size_t np = tsr_catalog_products(&products);
        unsigned compared = 0, ok[5] = {0}, refused[5] = {0};

        (void)state;
        rng_seed(99);
        for (size_t pi = 0; pi <= np + 1; pi++) {
                const struct tsr_product *p = pi < np    ? &products[pi]
                                              : pi == np ? &fx_hygon_c3000
                                                         : &fx_hygon_k100;
                unsigned width = tsr_product_mig_width(p);

                for (int round = 0; round < 200; round++) {
                        struct group g, ref;
                        uint32_t hw[MAX_ACCEL] = {0};
                        bool use_hw = width > 0 && rnd(2) == 0;

                        random_group_with(&g, p, 1, 4);
                        for (size_t i = 0; use_hw && i < g.n; i++)
                                if (rnd(3) == 0)
                                        hw[i] = (uint32_t)rnd(1u << width);
                        ref = g;
                        /* A sequence of claims on one evolving ledger. */
                        for (int q = 0; q < 6; q++) {
                                struct tsr_alloc_pick out[TSR_ALLOC_BATCH_MAX],
                                    want[TSR_ALLOC_BATCH_MAX];
                                struct tsr_demand d;
                                struct snapshot before;
                                size_t n_out = 99, n_want = 0;
                                int rc, want_rc;
                                enum tsr_family f = (enum tsr_family)(rnd(5));

                                memset(&d, 0, sizeof(d));
                                d.family = f;
                                switch (f) {
                                case TSR_FAMILY_EXCLUSIVE:
                                case TSR_FAMILY_SHARED:
                                        d.cards = rnd(4) == 0 ? rnd((unsigned)g.n + 2) : 1 + rnd(2);
                                        break;
                                case TSR_FAMILY_SLICED:
                                        d.cards = 1;
                                        d.units =
                                            rnd(4) == 0
                                                ? 1 + (int64_t)rnd((unsigned)M)
                                                : remaining_choices[1 +
                                                                    rnd(N_ELEMS(remaining_choices) -
                                                                        1)];
                                        break;
                                case TSR_FAMILY_PARTITIONED:
                                        d.cards = 1;
                                        d.units = 1 + (int64_t)rnd((unsigned)M);
                                        snprintf(
                                            d.profile, sizeof(d.profile), "%s",
                                            p->n_profiles && rnd(8) != 0
                                                ? p->profiles[rnd((unsigned)p->n_profiles)].name
                                                : foreign[rnd(N_ELEMS(foreign))]);
                                        break;
                                default:
                                        break;
                                }
                                reset_out(out);
                                snap(&g, &before);
                                rc = tsr_alloc_place(g.caps, g.ledger, g.n, &d, use_hw ? hw : NULL,
                                                     out, N_ELEMS(out), &n_out);
                                want_rc = ref_place(&ref, &d, use_hw ? hw : NULL, want, &n_want);
                                if (rc != want_rc)
                                        fail_msg("%s round %d claim %d (%s): %s, reference %s",
                                                 p->name, round, q, tsr_family_name(f),
                                                 tsr_err_name(rc), tsr_err_name(want_rc));
                                if (rc != 0) {
                                        expect_untouched(p->name, &g, &before);
                                        refused[f]++;
                                        continue;
                                }
                                if (n_out != n_want)
                                        fail_msg("%s round %d claim %d (%s): %zu picks, "
                                                 "reference %zu",
                                                 p->name, round, q, tsr_family_name(f), n_out,
                                                 n_want);
                                for (size_t k = 0; k < n_want; k++)
                                        if (out[k].accel != want[k].accel ||
                                            out[k].profile != want[k].profile ||
                                            out[k].start != want[k].start)
                                                fail_msg("%s round %d claim %d (%s): pick %zu "
                                                         "%u/%d/%u, reference %u/%d/%u",
                                                         p->name, round, q, tsr_family_name(f), k,
                                                         out[k].accel, out[k].profile, out[k].start,
                                                         want[k].accel, want[k].profile,
                                                         want[k].start);
                                for (size_t i = 0; i < g.n; i++)
                                        if (!ledger_equal(&g.ledger[i], &ref.ledger[i]))
                                                fail_msg("%s round %d claim %d (%s): card %zu "
                                                         "charged %s %lld/%lld/%u, reference "
                                                         "%s %lld/%lld/%u",
                                                         p->name, round, q, tsr_family_name(f), i,
                                                         tsr_mode_name(g.ledger[i].mode),
                                                         (long long)g.ledger[i].allocated,
                                                         (long long)g.ledger[i].remaining,
                                                         g.ledger[i].allocated_slices,
                                                         tsr_mode_name(ref.ledger[i].mode),
                                                         (long long)ref.ledger[i].allocated,
                                                         (long long)ref.ledger[i].remaining,
                                                         ref.ledger[i].allocated_slices);
                                ok[f] += n_want > 0;
                                compared++;
                        }
                }
        }
        assert_true(compared > 10000);
        /* Every family is placed and refused many times. */
        for (int f = TSR_FAMILY_EXCLUSIVE; f <= TSR_FAMILY_PARTITIONED; f++)
                if (ok[f] < 200 || refused[f] < 200)
                        fail_msg("%s: %u placed, %u refused", tsr_family_name((enum tsr_family)f),
                                 ok[f], refused[f]);
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
            cmocka_unit_test(test_alloc__exclusive_free_whole_by_position),
            cmocka_unit_test(test_alloc__shared_most_occupied_first),
            cmocka_unit_test(test_alloc__place_charges_each_family),
            cmocka_unit_test(test_alloc__place_enospc_leaves_ledger_unchanged),
            cmocka_unit_test(test_alloc__place_partition_respects_hw_occupied),
            cmocka_unit_test(test_alloc__place_nothing_and_pick_limits),
            cmocka_unit_test(test_alloc__refuse),
            cmocka_unit_test(test_alloc__shared_matches_reference),
            cmocka_unit_test(test_alloc__place_matches_reference),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
