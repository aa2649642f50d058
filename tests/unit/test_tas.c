/*
 * test_tas.c - core/tas: TAS's count, order and assignment at hostname level.
 *
 * Hand-built rows first: the count is the minimum over the asked resources, an absent resource
 * or one short of a single Pod holds none and names itself, unasked resources are not counted,
 * usage below zero counts as zero; the order is fewest fits first, ties by name; an assignment
 * fills the fullest node first and refuses, assigning nothing, when the nodes hold too few.
 * Then slow reference models written from the rule's text: the count by placing Pods one at a
 * time until one resource runs out, the assignment by repeatedly taking the smallest remaining
 * candidate by (fits, name) -- compared with tsr_tas_fits and tsr_tas_assign over randomized
 * nodes (fixed-seed LCG).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/tas.h"

#include "support/rng.h"

#include <stdio.h>
#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static void test_tas__count(void **state)
{
        /* cpu 8000 of 16000 used, asks 3000; memory 64 of 64 free, asks 16; pods 1001 */
        struct tsr_tas_resource r[] = {{16000, 8000, 3000}, {64, 0, 16}, {1001, 3, 1}};
        struct tsr_tas_resource absent[] = {{16000, 0, 1000}, {-1, 0, 1}};
        struct tsr_tas_resource unasked[] = {{0, 0, 0}, {10, 4, 2}, {-1, 0, -5}};
        struct tsr_tas_resource negative_use[] = {{10, -7, 5}};
        struct tsr_tas_resource short_second[] = {{10, 0, 1}, {10, 8, 3}, {0, 0, 1}};
        int short_of = 7;

        (void)state;
        assert_int_equal(tsr_tas_fits(r, N_ELEMS(r), &short_of), 2);
        assert_int_equal(short_of, -1);
        assert_int_equal(tsr_tas_fits(absent, N_ELEMS(absent), &short_of), 0);
        assert_int_equal(short_of, 1);
        assert_int_equal(tsr_tas_fits(unasked, N_ELEMS(unasked), &short_of), 3);
        assert_int_equal(short_of, -1);
        assert_int_equal(tsr_tas_fits(negative_use, 1, NULL), 2);
        /* the first resource that admits none is named, not a later one */
        assert_int_equal(tsr_tas_fits(short_second, N_ELEMS(short_second), &short_of), 0);
        assert_int_equal(short_of, 1);
        /* asking for nothing: as many as TAS counts at most */
        assert_int_equal(tsr_tas_fits(unasked, 1, NULL), TSR_TAS_FITS_MAX);
        assert_int_equal(tsr_tas_fits((struct tsr_tas_resource[]){{INT64_MAX, 0, 1}}, 1, NULL),
                         TSR_TAS_FITS_MAX);
}

static void test_tas__order_and_assign(void **state)
{
        struct tsr_tas_candidate c[] = {
            {0, "node-c", 3}, {1, "node-a", 5}, {2, "node-b", 3}, {3, "node-d", 1}};
        struct tsr_tas_candidate a = {0, "x", 2}, b = {1, "y", 2}, d = {2, "a", 3};
        struct tsr_tas_take out[N_ELEMS(c)];
        size_t n_out = 99;

        (void)state;
        assert_true(tsr_tas_before(&a, &b));
        assert_false(tsr_tas_before(&b, &a));
        assert_true(tsr_tas_before(&a, &d)); /* fewer fits beats the name */
        assert_false(tsr_tas_before(&a, &a));
        /* 6 Pods: node-d takes 1, then node-b (3, before node-c by name) 3, then node-c 2 */
        assert_true(tsr_tas_assign(c, N_ELEMS(c), 6, out, &n_out));
        assert_int_equal(n_out, 3);
        assert_int_equal(out[0].node, 3);
        assert_int_equal(out[0].count, 1);
        assert_int_equal(out[1].node, 2);
        assert_int_equal(out[1].count, 3);
        assert_int_equal(out[2].node, 0);
        assert_int_equal(out[2].count, 2);
        /* 13 Pods do not fit 12: nothing assigned */
        assert_false(tsr_tas_assign(c, N_ELEMS(c), 13, out, &n_out));
        assert_int_equal(n_out, 0);
        /* exactly all of them */
        assert_true(tsr_tas_assign(c, N_ELEMS(c), 12, out, &n_out));
        assert_int_equal(n_out, 4);
        assert_int_equal(out[3].node, 1);
        assert_int_equal(out[3].count, 5);
}

/* The count as the rule reads: place Pods one at a time until a resource cannot take one. */
static int64_t reference_fits(const struct tsr_tas_resource *r, size_t n)
{
        int64_t used[8], placed = 0;

        for (size_t k = 0; k < n; k++)
                used[k] = r[k].used > 0 ? r[k].used : 0;
        for (;;) {
                for (size_t k = 0; k < n; k++)
                        if (r[k].want > 0 &&
                            (r[k].allocatable < 0 || used[k] + r[k].want > r[k].allocatable))
                                return placed;
                if (placed == TSR_TAS_FITS_MAX)
                        return placed;
                for (size_t k = 0; k < n; k++)
                        if (r[k].want > 0)
                                used[k] += r[k].want;
                placed++;
        }
}

static void test_tas__fits_match_reference(void **state)
{
        unsigned compared = 0, zero = 0;

        (void)state;
        rng_seed(17);
        for (unsigned round = 0; round < 20000; round++) {
                struct tsr_tas_resource r[8];
                size_t n = 1 + rnd(8);

                for (size_t k = 0; k < n; k++) {
                        r[k].allocatable = rnd(10) ? (int64_t)rnd(400) : -1;
                        r[k].used = (int64_t)rnd(300) - 20;
                        r[k].want = rnd(6) ? (int64_t)rnd(40) + 1 : -(int64_t)rnd(3);
                }
                if (round % 5000 == 0) /* now and then a Pod that asks for nothing */
                        for (size_t k = 0; k < n; k++)
                                r[k].want = 0;
                assert_int_equal(tsr_tas_fits(r, n, NULL), reference_fits(r, n));
                zero += reference_fits(r, n) == 0;
                compared++;
        }
        assert_true(zero > compared / 10 && zero < compared * 9 / 10);
}

static void test_tas__assign_matches_reference(void **state)
{
        static char names[64][16];
        unsigned assigned = 0, refused = 0;

        (void)state;
        rng_seed(23);
        for (unsigned round = 0; round < 3000; round++) {
                struct tsr_tas_candidate c[64], ref[64];
                struct tsr_tas_take out[64];
                bool taken[64] = {false};
                size_t n = 1 + rnd(40), n_out, x = 0;
                unsigned count = 1 + rnd(60), left = count;
                int64_t total = 0;
                bool ok;

                for (size_t k = 0; k < n; k++) {
                        snprintf(names[k], sizeof(names[k]), "node-%02u", rnd(30));
                        c[k] = (struct tsr_tas_candidate){k, names[k], 1 + (int64_t)rnd(6)};
                        total += c[k].fits;
                }
                memcpy(ref, c, sizeof(c));
                ok = tsr_tas_assign(c, n, count, out, &n_out);
                assert_int_equal(ok, total >= count);
                if (!ok) {
                        assert_int_equal(n_out, 0);
                        refused++;
                        continue;
                }
                /* selection by (fits, name), then by index among equal names (any is TAS's) */
                while (left > 0) {
                        size_t best = SIZE_MAX;
                        unsigned take;

                        for (size_t k = 0; k < n; k++)
                                if (!taken[k] &&
                                    (best == SIZE_MAX || ref[k].fits < ref[best].fits ||
                                     (ref[k].fits == ref[best].fits &&
                                      strcmp(ref[k].name, ref[best].name) < 0)))
                                        best = k;
                        taken[best] = true;
                        take = ref[best].fits < left ? (unsigned)ref[best].fits : left;
                        assert_true(x < n_out);
                        assert_int_equal(out[x].count, take);
                        assert_int_equal(ref[out[x].node].fits, ref[best].fits);
                        assert_string_equal(ref[out[x].node].name, ref[best].name);
                        left -= take;
                        x++;
                }
                assert_int_equal(x, n_out);
                assigned++;
        }
        assert_true(assigned > 500 && refused > 100);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_tas__count),
            cmocka_unit_test(test_tas__order_and_assign),
            cmocka_unit_test(test_tas__fits_match_reference),
            cmocka_unit_test(test_tas__assign_matches_reference),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
