/*
 * test_ledger.c - core/ledger: rebuilding per-accelerator ledgers from allocation records, and the
 * invariant check.
 *
 * Covers (ledger.h, spec/upstream-behavior.md §3, §5, §8): every accelerator seeds at mode None
 * with M = 1,600,000 remaining; an exclusive record takes 1,600,000, a share 160,000 per share
 * (0 shares read as 1), a slice its units and one slot, a partition its units and its placement;
 * the first charging record fixes the mode while a record in another mode still charges; remaining
 * clamps at 0; records of finished Pods stop charging every family but partitions; a record past
 * the group, an illegal start, an overlapping or unknown-profile partition are TSR_EINVAL. Then
 * tsr_ledger_check accepts every ledger built here and catches each broken invariant of a ledger
 * broken by hand (budget, mode vs population, slots, placements).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "core/ledger.h"

#include "support/catalog_fixtures.h"

#include <stdio.h>
#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))
#define M          INT64_C(1600000)

#define H100_NAME   "NVIDIA H100 80GB HBM3"
#define RTXPRO_NAME "NVIDIA RTX PRO 6000 Blackwell Server Edition"

static struct tsr_alloc_record rec(unsigned accel, enum tsr_mode mode, int64_t units)
{
        struct tsr_alloc_record r = {accel, mode, units, 0, -1, 0, false};

        return r;
}

static struct tsr_alloc_record share(unsigned accel, unsigned shares)
{
        struct tsr_alloc_record r = {accel, TSR_MODE_SHARED, 0, shares, -1, 0, false};

        return r;
}

static struct tsr_alloc_record part(unsigned accel, int profile, unsigned start, int64_t units)
{
        struct tsr_alloc_record r = {accel, TSR_MODE_PARTITIONED, units, 0, profile, start, false};

        return r;
}

static struct tsr_alloc_record finished(struct tsr_alloc_record r)
{
        r.finished = true;
        return r;
}

static void must_build(const struct tsr_accel_cap *caps, size_t n,
                       const struct tsr_alloc_record *recs, size_t nrec,
                       struct tsr_accel_ledger *out)
{
        struct tsr_diag d;
        int rc;

        tsr_diag_clear(&d);
        rc = tsr_ledger_build(caps, n, recs, nrec, out, &d);
        if (rc != 0)
                fail_msg("ledger_build = %s (%s), want TSR_OK", tsr_err_name(rc), d.msg);
}

static void expect_build_fails(const struct tsr_accel_cap *caps, size_t n,
                               const struct tsr_alloc_record *recs, size_t nrec, const char *why)
{
        struct tsr_accel_ledger out[8];
        struct tsr_diag d;
        int rc;

        tsr_diag_clear(&d);
        rc = tsr_ledger_build(caps, n, recs, nrec, out, &d);
        if (rc != TSR_EINVAL)
                fail_msg("%s: ledger_build = %s, want TSR_EINVAL", why, tsr_err_name(rc));
        assert_int_equal(d.code, TSR_EINVAL);
        assert_true(d.msg[0] != '\0');
}

static void expect_ledger(const struct tsr_accel_ledger *l, enum tsr_mode mode, int64_t allocated,
                          int64_t remaining, unsigned slices, unsigned live)
{
        if (l->mode != mode || l->allocated != allocated || l->remaining != remaining ||
            l->allocated_slices != slices || l->live.n != live)
                fail_msg("ledger %s/%lld/%lld/%u/%u, want %s/%lld/%lld/%u/%u",
                         tsr_mode_name(l->mode), (long long)l->allocated, (long long)l->remaining,
                         l->allocated_slices, l->live.n, tsr_mode_name(mode), (long long)allocated,
                         (long long)remaining, slices, live);
}

static void test_ledger__mode_names_and_values(void **state)
{
        (void)state;
        /* Upstream DeviceAllocationMode: 0 None, 1 Exclusive, 2 Shared, 3 Sliced, 4 Partitioned. */
        assert_int_equal(TSR_MODE_NONE, 0);
        assert_int_equal(TSR_MODE_EXCLUSIVE, 1);
        assert_int_equal(TSR_MODE_SHARED, 2);
        assert_int_equal(TSR_MODE_SLICED, 3);
        assert_int_equal(TSR_MODE_PARTITIONED, 4);
        assert_string_equal(tsr_mode_name(TSR_MODE_NONE), "None");
        assert_string_equal(tsr_mode_name(TSR_MODE_EXCLUSIVE), "Exclusive");
        assert_string_equal(tsr_mode_name(TSR_MODE_SHARED), "Shared");
        assert_string_equal(tsr_mode_name(TSR_MODE_SLICED), "Sliced");
        assert_string_equal(tsr_mode_name(TSR_MODE_PARTITIONED), "Partitioned");
}

static void test_ledger__empty_seeds_every_accelerator(void **state)
{
        struct tsr_accel_cap caps[8];
        struct tsr_accel_ledger out[8];

        (void)state;
        fx_detect(caps, 8, fx_product(H100_NAME), 0x0f);
        memset(out, 0x5a, sizeof(out));
        must_build(caps, 8, NULL, 0, out);
        for (size_t i = 0; i < 8; i++)
                expect_ledger(&out[i], TSR_MODE_NONE, 0, M, 0, 0);
}

static void test_ledger__charges_per_family(void **state)
{
        const struct tsr_product *h100 = fx_product(H100_NAME);
        struct tsr_accel_cap caps[6];
        struct tsr_accel_ledger out[6];
        /* 3g.40gb: floor(40448 x 1600000 / 81920) = 790000; 1g.10gb: 9984 -> 195000. */
        const struct tsr_alloc_record recs[] = {
            rec(0, TSR_MODE_EXCLUSIVE, 0),
            share(1, 1),
            share(1, 0),
            share(2, 2),
            rec(3, TSR_MODE_SLICED, 800000),
            rec(3, TSR_MODE_SLICED, 320000),
            part(4, fx_pidx(h100, "3g.40gb"), 0, 790000),
            part(4, fx_pidx(h100, "1g.10gb"), 4, 195000),
        };

        (void)state;
        fx_detect(caps, 6, fx_product(H100_NAME), 0x30);
        must_build(caps, 6, recs, N_ELEMS(recs), out);
        expect_ledger(&out[0], TSR_MODE_EXCLUSIVE, 1600000, 0, 0, 0);
        expect_ledger(&out[1], TSR_MODE_SHARED, 320000, 1280000, 0, 0);
        expect_ledger(&out[2], TSR_MODE_SHARED, 320000, 1280000, 0, 0);
        expect_ledger(&out[3], TSR_MODE_SLICED, 1120000, 480000, 2, 0);
        expect_ledger(&out[4], TSR_MODE_PARTITIONED, 985000, 615000, 0, 2);
        expect_ledger(&out[5], TSR_MODE_NONE, 0, M, 0, 0);
        assert_int_equal(out[4].live.inst[0].profile, fx_pidx(h100, "3g.40gb"));
        assert_int_equal(out[4].live.inst[0].start, 0);
        assert_int_equal(out[4].live.inst[1].profile, fx_pidx(h100, "1g.10gb"));
        assert_int_equal(out[4].live.inst[1].start, 4);
        for (size_t i = 0; i < 6; i++)
                assert_int_equal(tsr_ledger_check(&caps[i], &out[i], NULL), 0);
}

static void test_ledger__first_record_fixes_mode(void **state)
{
        struct tsr_accel_cap caps[3];
        struct tsr_accel_ledger out[3];
        const struct tsr_alloc_record recs[] = {
            rec(0, TSR_MODE_SLICED, 800000), /* fixes Sliced ... */
            rec(0, TSR_MODE_EXCLUSIVE, 0),   /* ... a cross-mode record still charges */
            share(1, 1),
            rec(1, TSR_MODE_SLICED, 160000),
            rec(2, TSR_MODE_NONE, 500000), /* a None record charges nothing, fixes nothing */
            share(2, 1),
        };

        (void)state;
        fx_detect(caps, 3, fx_product(H100_NAME), 0);
        must_build(caps, 3, recs, N_ELEMS(recs), out);
        expect_ledger(&out[0], TSR_MODE_SLICED, 2400000, 0, 1, 0);
        expect_ledger(&out[1], TSR_MODE_SHARED, 320000, 1280000, 1, 0);
        expect_ledger(&out[2], TSR_MODE_SHARED, 160000, 1440000, 0, 0);
}

static void test_ledger__remaining_clamps_at_zero(void **state)
{
        struct tsr_accel_cap caps[2];
        struct tsr_accel_ledger out[2];
        const struct tsr_alloc_record recs[] = {
            rec(0, TSR_MODE_EXCLUSIVE, 0),
            rec(0, TSR_MODE_EXCLUSIVE, 0),
            rec(1, TSR_MODE_SLICED, 1000000),
            rec(1, TSR_MODE_SLICED, 1000000),
        };

        (void)state;
        fx_detect(caps, 2, fx_product(H100_NAME), 0);
        must_build(caps, 2, recs, N_ELEMS(recs), out);
        expect_ledger(&out[0], TSR_MODE_EXCLUSIVE, 3200000, 0, 0, 0);
        expect_ledger(&out[1], TSR_MODE_SLICED, 2000000, 0, 2, 0);
}

static void test_ledger__finished_pods_stop_charging_except_partitions(void **state)
{
        const struct tsr_product *h100 = fx_product(H100_NAME);
        struct tsr_accel_cap caps[5];
        struct tsr_accel_ledger out[5];
        const struct tsr_alloc_record recs[] = {
            finished(rec(0, TSR_MODE_EXCLUSIVE, 0)),
            finished(share(1, 1)),
            finished(rec(2, TSR_MODE_SLICED, 800000)),
            rec(2, TSR_MODE_SLICED, 160000),
            finished(rec(3, TSR_MODE_EXCLUSIVE, 0)), /* a finished record fixes no mode */
            share(3, 1),
            finished(part(4, fx_pidx(h100, "7g.80gb"), 0, 1585000)),
        };

        (void)state;
        fx_detect(caps, 5, fx_product(H100_NAME), 0x10);
        must_build(caps, 5, recs, N_ELEMS(recs), out);
        expect_ledger(&out[0], TSR_MODE_NONE, 0, M, 0, 0);
        expect_ledger(&out[1], TSR_MODE_NONE, 0, M, 0, 0);
        expect_ledger(&out[2], TSR_MODE_SLICED, 160000, 1440000, 1, 0);
        expect_ledger(&out[3], TSR_MODE_SHARED, 160000, 1440000, 0, 0);
        expect_ledger(&out[4], TSR_MODE_PARTITIONED, 1585000, 15000, 0, 1);
}

/* MetaX and Cambricon slices outlive their container: a finished Pod's slice still charges. */
static void test_ledger__finished_metax_and_cambricon_slices_keep_charging(void **state)
{
        const struct tsr_product metax = {"MetaX C500", TSR_MFR_METAX, 65536, 8, 64, NULL, 0};
        const struct tsr_product cambricon = {
            "Cambricon MLU370", TSR_MFR_CAMBRICON, 49152, 8, 64, NULL, 0};
        struct tsr_accel_cap caps[2];
        struct tsr_accel_ledger out[2];
        const struct tsr_alloc_record recs[] = {
            finished(rec(0, TSR_MODE_SLICED, 400000)),
            finished(rec(1, TSR_MODE_SLICED, 800000)),
        };

        (void)state;
        tsr_capability_detect(&metax, 0, "GPU-metax-0", false, &caps[0]);
        tsr_capability_detect(&cambricon, 1, "MLU-cambricon-1", false, &caps[1]);
        must_build(caps, 2, recs, N_ELEMS(recs), out);
        expect_ledger(&out[0], TSR_MODE_SLICED, 400000, M - 400000, 1, 0);
        expect_ledger(&out[1], TSR_MODE_SLICED, 800000, M - 800000, 1, 0);
}

static void test_ledger__rtx_pro_placements(void **state)
{
        const struct tsr_product *rtx = fx_product(RTXPRO_NAME);
        struct tsr_accel_cap caps[1];
        struct tsr_accel_ledger out[1];
        /* The blog's mixed layout: 2g at 0:6 plus 1g at 6:3 and 9:3. */
        const struct tsr_alloc_record recs[] = {
            part(0, fx_pidx(rtx, "2g.48gb"), 0, 788000),
            part(0, fx_pidx(rtx, "1g.24gb"), 6, 394000),
            part(0, fx_pidx(rtx, "1g.24gb-me"), 9, 394000),
        };
        const struct tsr_alloc_record bad[] = {
            part(0, fx_pidx(rtx, "1g.24gb"), 1, 394000), /* legal starts are 0, 3, 6, 9 */
        };
        const struct tsr_alloc_record clash[] = {
            part(0, fx_pidx(rtx, "1g.24gb"), 9, 394000),
            part(0, fx_pidx(rtx, "2g.48gb"), 6, 788000), /* 6..11 overlaps 9..11 */
        };

        (void)state;
        fx_detect(caps, 1, fx_product(RTXPRO_NAME), 1);
        must_build(caps, 1, recs, N_ELEMS(recs), out);
        expect_ledger(&out[0], TSR_MODE_PARTITIONED, 1576000, 24000, 0, 3);
        assert_int_equal(tsr_ledger_check(&caps[0], &out[0], NULL), 0);
        expect_build_fails(caps, 1, bad, N_ELEMS(bad), "1g.24gb at start 1");
        expect_build_fails(caps, 1, clash, N_ELEMS(clash), "2g.48gb over a 1g.24gb");
}

static void test_ledger__build_errors(void **state)
{
        const struct tsr_product *h100 = fx_product(H100_NAME);
        struct tsr_accel_cap caps[2];
        const struct tsr_alloc_record past[] = {rec(2, TSR_MODE_EXCLUSIVE, 0)};
        const struct tsr_alloc_record past_none[] = {rec(7, TSR_MODE_NONE, 0)};
        const struct tsr_alloc_record overlap[] = {
            part(0, fx_pidx(h100, "3g.40gb"), 0, 790000),
            part(0, fx_pidx(h100, "4g.40gb"), 0, 790000),
        };
        const struct tsr_alloc_record overlap_finished[] = {
            finished(part(0, fx_pidx(h100, "3g.40gb"), 4, 790000)),
            part(0, fx_pidx(h100, "1g.10gb"), 5, 195000),
        };
        const struct tsr_alloc_record same_start[] = {
            part(0, fx_pidx(h100, "1g.10gb"), 3, 195000),
            part(0, fx_pidx(h100, "1g.10gb"), 3, 195000),
        };
        const struct tsr_alloc_record illegal[] = {part(0, fx_pidx(h100, "3g.40gb"), 2, 790000)};
        const struct tsr_alloc_record illegal7[] = {part(0, fx_pidx(h100, "1g.10gb"), 7, 195000)};
        const struct tsr_alloc_record no_profile[] = {part(0, -1, 0, 790000)};
        const struct tsr_alloc_record bad_profile[] = {part(0, 7, 0, 790000)};
        const struct tsr_alloc_record far_start[] = {part(0, fx_pidx(h100, "1g.10gb"), 40, 195000)};

        (void)state;
        fx_detect(caps, 2, fx_product(H100_NAME), 0x1);
        expect_build_fails(caps, 2, past, N_ELEMS(past), "accelerator 2 of 2");
        expect_build_fails(caps, 2, past_none, N_ELEMS(past_none), "accelerator 7, mode None");
        expect_build_fails(caps, 2, overlap, N_ELEMS(overlap), "4g.40gb over 3g.40gb");
        expect_build_fails(caps, 2, overlap_finished, N_ELEMS(overlap_finished),
                           "1g.10gb over a finished Pod's 3g.40gb");
        expect_build_fails(caps, 2, same_start, N_ELEMS(same_start), "two 1g.10gb at 3");
        expect_build_fails(caps, 2, illegal, N_ELEMS(illegal), "3g.40gb at 2");
        expect_build_fails(caps, 2, illegal7, N_ELEMS(illegal7), "1g.10gb at 7");
        expect_build_fails(caps, 2, no_profile, N_ELEMS(no_profile), "profile -1");
        expect_build_fails(caps, 2, bad_profile, N_ELEMS(bad_profile), "profile 7 of 7");
        expect_build_fails(caps, 2, far_start, N_ELEMS(far_start), "start 40");
}

/* Asserts check refuses l on cap with TSR_ESTALE and a message naming the accelerator. */
static void expect_check_fails(const struct tsr_accel_cap *cap, const struct tsr_accel_ledger *l,
                               const char *why)
{
        struct tsr_diag d;
        char idx[32];
        int rc;

        tsr_diag_clear(&d);
        rc = tsr_ledger_check(cap, l, &d);
        if (rc != TSR_ESTALE)
                fail_msg("%s: ledger_check = %s, want TSR_ESTALE", why, tsr_err_name(rc));
        assert_int_equal(d.code, TSR_ESTALE);
        snprintf(idx, sizeof(idx), "accelerator %u", cap->index);
        if (!strstr(d.msg, idx))
                fail_msg("%s: message \"%s\" does not name %s", why, d.msg, idx);
}

static struct tsr_accel_ledger fresh(void)
{
        struct tsr_accel_ledger l;

        memset(&l, 0, sizeof(l));
        l.mode = TSR_MODE_NONE;
        l.remaining = M;
        return l;
}

static void test_ledger__check_accepts_consistent_ledgers(void **state)
{
        const struct tsr_product *h100 = fx_product(H100_NAME);
        struct tsr_accel_cap whole, parted;
        struct tsr_accel_ledger l = fresh();

        (void)state;
        tsr_capability_detect(h100, 5, "GPU-5", false, &whole);
        tsr_capability_detect(h100, 6, "GPU-6", true, &parted);
        assert_int_equal(tsr_ledger_check(&whole, &l, NULL), 0);
        assert_int_equal(tsr_ledger_check(&parted, &l, NULL), 0);
        l.mode = TSR_MODE_SLICED;
        l.allocated = 800000;
        l.remaining = 800000;
        l.allocated_slices = 128;
        assert_int_equal(tsr_ledger_check(&whole, &l, NULL), 0);
        l = fresh();
        l.mode = TSR_MODE_PARTITIONED;
        l.allocated = 790000 + 2 * 195000;
        l.remaining = M - l.allocated;
        l.live.n = 3;
        l.live.inst[0].profile = (uint8_t)fx_pidx(h100, "3g.40gb");
        l.live.inst[0].start = 4;
        l.live.inst[1].profile = (uint8_t)fx_pidx(h100, "1g.10gb");
        l.live.inst[1].start = 0;
        l.live.inst[2].profile = (uint8_t)fx_pidx(h100, "1g.10gb");
        l.live.inst[2].start = 3;
        assert_int_equal(tsr_ledger_check(&parted, &l, NULL), 0);
        l = fresh();
        l.mode = TSR_MODE_EXCLUSIVE;
        l.allocated = M;
        l.remaining = 0;
        assert_int_equal(tsr_ledger_check(&whole, &l, NULL), 0);
}

static void test_ledger__check_catches_budget_breaks(void **state)
{
        struct tsr_accel_cap whole;
        struct tsr_accel_ledger l;

        (void)state;
        tsr_capability_detect(fx_product(H100_NAME), 5, "GPU-5", false, &whole);

        l = fresh(); /* remaining not M - allocated */
        l.mode = TSR_MODE_SHARED;
        l.allocated = 160000;
        expect_check_fails(&whole, &l, "remaining M with 160000 charged");

        l = fresh(); /* remaining past M */
        l.allocated = -160000;
        l.remaining = M + 160000;
        expect_check_fails(&whole, &l, "negative charge");

        l = fresh(); /* negative remaining */
        l.mode = TSR_MODE_EXCLUSIVE;
        l.allocated = M + 1;
        l.remaining = -1;
        expect_check_fails(&whole, &l, "remaining -1");

        l = fresh(); /* clamped, but charged past the budget */
        l.mode = TSR_MODE_EXCLUSIVE;
        l.allocated = 2 * M;
        l.remaining = 0;
        expect_check_fails(&whole, &l, "charged 2M");
}

static void test_ledger__check_catches_mode_population_breaks(void **state)
{
        const struct tsr_product *h100 = fx_product(H100_NAME);
        struct tsr_accel_cap whole, parted;
        struct tsr_accel_ledger l;
        static const enum tsr_mode whole_modes[] = {TSR_MODE_EXCLUSIVE, TSR_MODE_SHARED,
                                                    TSR_MODE_SLICED};

        (void)state;
        tsr_capability_detect(h100, 2, "GPU-2", false, &whole);
        tsr_capability_detect(h100, 3, "GPU-3", true, &parted);
        for (size_t i = 0; i < N_ELEMS(whole_modes); i++) {
                l = fresh();
                l.mode = whole_modes[i];
                l.allocated = 160000;
                l.remaining = M - 160000;
                expect_check_fails(&parted, &l, tsr_mode_name(whole_modes[i]));
        }
        l = fresh();
        l.mode = TSR_MODE_PARTITIONED;
        l.allocated = 790000;
        l.remaining = M - 790000;
        expect_check_fails(&whole, &l, "unpartitioned accelerator in Partitioned mode");
        l.mode = TSR_MODE_NONE;
        l.allocated = 0;
        l.remaining = M;
        l.live.n = 1;
        l.live.inst[0].profile = (uint8_t)fx_pidx(h100, "3g.40gb");
        l.live.inst[0].start = 0;
        expect_check_fails(&whole, &l, "unpartitioned accelerator with a live placement");
}

static void test_ledger__check_catches_slot_breaks(void **state)
{
        struct tsr_accel_cap whole;
        struct tsr_accel_ledger l = fresh();

        (void)state;
        tsr_capability_detect(fx_product(H100_NAME), 1, "GPU-1", false, &whole);
        l.mode = TSR_MODE_SLICED;
        l.allocated = 129 * 1000;
        l.remaining = M - l.allocated;
        l.allocated_slices = 129;
        expect_check_fails(&whole, &l, "129 slices on 128 slots");

        tsr_capability_detect(&fx_hygon_k100, 4, "DCU-4", false, &whole);
        l.allocated_slices = 4;
        assert_int_equal(tsr_ledger_check(&whole, &l, NULL), 0);
        l.allocated_slices = 5;
        expect_check_fails(&whole, &l, "5 slices on a Hygon's 4");
}

static void test_ledger__check_catches_placement_breaks(void **state)
{
        const struct tsr_product *h100 = fx_product(H100_NAME);
        struct tsr_accel_cap parted;
        struct tsr_accel_ledger l;

        (void)state;
        tsr_capability_detect(h100, 7, "GPU-7", true, &parted);

        l = fresh(); /* overlapping */
        l.mode = TSR_MODE_PARTITIONED;
        l.live.n = 2;
        l.live.inst[0].profile = (uint8_t)fx_pidx(h100, "3g.40gb");
        l.live.inst[0].start = 0;
        l.live.inst[1].profile = (uint8_t)fx_pidx(h100, "2g.20gb");
        l.live.inst[1].start = 2;
        expect_check_fails(&parted, &l, "2g.20gb at 2 inside 3g.40gb at 0");

        l.live.inst[1].profile = (uint8_t)fx_pidx(h100, "1g.10gb"); /* a duplicate start */
        l.live.inst[0].profile = (uint8_t)fx_pidx(h100, "1g.10gb");
        l.live.inst[0].start = 2;
        expect_check_fails(&parted, &l, "two 1g.10gb at 2");

        l.live.n = 1; /* an illegal start */
        l.live.inst[0].profile = (uint8_t)fx_pidx(h100, "4g.40gb");
        l.live.inst[0].start = 4;
        expect_check_fails(&parted, &l, "4g.40gb at 4");
        l.live.inst[0].profile = (uint8_t)fx_pidx(h100, "1g.10gb");
        l.live.inst[0].start = 7;
        expect_check_fails(&parted, &l, "1g.10gb at 7");
}

/* A hand-broken ledger may name a profile or a start outside every table: refused, not read. */
static void test_ledger__check_catches_out_of_table_placements(void **state)
{
        const struct tsr_product *h100 = fx_product(H100_NAME);
        struct tsr_accel_cap parted;
        struct tsr_accel_ledger l = fresh();

        (void)state;
        tsr_capability_detect(h100, 0, "GPU-0", true, &parted);
        l.mode = TSR_MODE_PARTITIONED;
        l.live.n = 1;
        l.live.inst[0].profile = (uint8_t)h100->n_profiles;
        l.live.inst[0].start = 0;
        expect_check_fails(&parted, &l, "profile index past the table");
        l.live.inst[0].profile = 200;
        expect_check_fails(&parted, &l, "profile index 200");
        l.live.inst[0].profile = (uint8_t)fx_pidx(h100, "1g.10gb");
        l.live.inst[0].start = 40;
        expect_check_fails(&parted, &l, "start 40");
        l.live.inst[0].start = 255;
        expect_check_fails(&parted, &l, "start 255");
        l.live.inst[0].start = 0;
        l.live.n = TSR_MIG_AXIS_MAX + 1;
        expect_check_fails(&parted, &l, "more instances than the axis holds");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_ledger__mode_names_and_values),
            cmocka_unit_test(test_ledger__empty_seeds_every_accelerator),
            cmocka_unit_test(test_ledger__charges_per_family),
            cmocka_unit_test(test_ledger__first_record_fixes_mode),
            cmocka_unit_test(test_ledger__remaining_clamps_at_zero),
            cmocka_unit_test(test_ledger__finished_pods_stop_charging_except_partitions),
            cmocka_unit_test(test_ledger__finished_metax_and_cambricon_slices_keep_charging),
            cmocka_unit_test(test_ledger__rtx_pro_placements),
            cmocka_unit_test(test_ledger__build_errors),
            cmocka_unit_test(test_ledger__check_accepts_consistent_ledgers),
            cmocka_unit_test(test_ledger__check_catches_budget_breaks),
            cmocka_unit_test(test_ledger__check_catches_mode_population_breaks),
            cmocka_unit_test(test_ledger__check_catches_slot_breaks),
            cmocka_unit_test(test_ledger__check_catches_placement_breaks),
            cmocka_unit_test(test_ledger__check_catches_out_of_table_placements),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
