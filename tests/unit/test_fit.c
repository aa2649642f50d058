/*
 * test_fit.c - core/fit: the per-card fit labels of spec/upstream-behavior.md §6 and the
 * per-accelerator predicates they are built from.
 *
 *   sliced-max-free-units = the largest ledger `remaining` of any one accelerator that can serve a
 *       logical slice (unpartitioned, free or already sliced) and still has a free slice slot;
 *   shared-free-cards     = how many accelerators can still grant an ownership share
 *       (unpartitioned, free or shared, remaining >= 160,000);
 *   present               = the node has an unpartitioned accelerator of the model.
 *
 * Hand-built rows first, on H100 80GB cards (128 slice slots) and a Hygon-like card with four:
 * the spec's example ({640000, 640000, 1600000} -> 1600000; {640000, 640000} -> 640000), a card
 * holding all its slots not counting however much it has left, exclusive and shared cards never
 * counting for slices, share boundaries at 160,000, partitioned cards ignored, a partition-only or
 * empty node not present. Ledgers are built with tsr_ledger_build from allocation records, so the
 * rows read like the Pods that hold them. Then the predicates tsr_fit_slice / _share / _whole,
 * table-driven. Last, a slow reference model written from the spec text compared with
 * tsr_fit_labels_project over randomized nodes (fixed-seed LCG).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/err.h"
#include "core/fit.h"

#include "support/catalog_fixtures.h"
#include "support/rng.h"

#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))
#define M          INT64_C(1600000)
#define SHARE      INT64_C(160000)
#define MAX_ACCEL  8
#define MAX_RECS   16

#define H100_NAME "NVIDIA H100 80GB HBM3"

/* One card of a row: its population and what its Pods hold. */
struct card {
        bool partitioned;
        enum tsr_mode mode; /* NONE: idle */
        int64_t units;      /* per record: sliced units; shared: ignored */
        unsigned records;   /* how many records of that mode hold it */
};

struct row {
        const char *what;
        const struct tsr_product *product; /* NULL: H100 */
        struct card cards[MAX_ACCEL];      /* up to n */
        size_t n;
        struct tsr_fit_labels want;
};

struct node {
        size_t n;
        struct tsr_accel_cap caps[MAX_ACCEL];
        struct tsr_accel_ledger ledger[MAX_ACCEL];
};

static void build_node(const struct row *r, struct node *nd)
{
        const struct tsr_product *p = r->product ? r->product : fx_product(H100_NAME);
        static struct tsr_alloc_record recs[512];
        size_t nrec = 0;

        memset(nd, 0, sizeof(*nd));
        nd->n = r->n;
        for (size_t i = 0; i < r->n; i++) {
                const struct card *c = &r->cards[i];

                tsr_capability_detect(p, (unsigned)i, "GPU", c->partitioned, &nd->caps[i]);
                for (unsigned k = 0; k < c->records; k++) {
                        struct tsr_alloc_record *rec;

                        if (nrec >= N_ELEMS(recs))
                                fail_msg("%s: too many records for the test", r->what);
                        rec = &recs[nrec++];

                        memset(rec, 0, sizeof(*rec));
                        rec->accel = (unsigned)i;
                        rec->mode = c->mode;
                        rec->units = c->mode == TSR_MODE_EXCLUSIVE ? M : c->units;
                        rec->shares = 1;
                        rec->profile = -1;
                }
        }
        if (tsr_ledger_build(nd->caps, nd->n, recs, nrec, nd->ledger, NULL) != 0)
                fail_msg("%s: the ledger does not build", r->what);
}

static void check_labels(const char *what, const struct tsr_fit_labels *got,
                         const struct tsr_fit_labels *want)
{
        if (got->present != want->present ||
            got->sliced_max_free_units != want->sliced_max_free_units ||
            got->shared_free_cards != want->shared_free_cards)
                fail_msg("%s: present %d sliced %lld shared %lld, want %d %lld %lld", what,
                         got->present, (long long)got->sliced_max_free_units,
                         (long long)got->shared_free_cards, want->present,
                         (long long)want->sliced_max_free_units,
                         (long long)want->shared_free_cards);
}

#define IDLE                                                                                       \
        {                                                                                          \
                false, TSR_MODE_NONE, 0, 0                                                         \
        }
#define PARTED                                                                                     \
        {                                                                                          \
                true, TSR_MODE_NONE, 0, 0                                                          \
        }
#define WHOLE                                                                                      \
        {                                                                                          \
                false, TSR_MODE_EXCLUSIVE, 0, 1                                                    \
        }
#define SLICED(units, slices)                                                                      \
        {                                                                                          \
                false, TSR_MODE_SLICED, units, slices                                              \
        }
#define SHARED(shares)                                                                             \
        {                                                                                          \
                false, TSR_MODE_SHARED, 0, shares                                                  \
        }

static void test_fit__labels(void **state)
{
        static const struct row rows[] = {
            /* spec §6: remaining {640000, 640000, 1600000} -> 1600000 (60 % slices: 960000) */
            {"spec example, three cards",
             NULL,
             {SLICED(960000, 1), SLICED(960000, 1), IDLE},
             3,
             {true, 1600000, 1}},
            /* spec §6: {640000, 640000} -> 640000 */
            {"spec example, two cards",
             NULL,
             {SLICED(960000, 1), SLICED(960000, 1)},
             2,
             {true, 640000, 0}},
            {"one idle card", NULL, {IDLE}, 1, {true, 1600000, 1}},
            {"eight idle cards",
             NULL,
             {IDLE, IDLE, IDLE, IDLE, IDLE, IDLE, IDLE, IDLE},
             8,
             {true, 1600000, 8}},
            /* two 30 % slices: 1600000 - 960000 = 640000; 10 % x 3: 1600000 - 480000 */
            {"the largest remaining of the sliced cards",
             NULL,
             {SLICED(480000, 2), SLICED(160000, 3)},
             2,
             {true, 1120000, 0}},
            {"an exclusive card counts for neither", NULL, {WHOLE}, 1, {true, 0, 0}},
            {"a shared card never takes a slice",
             NULL,
             {SHARED(1), SLICED(1280000, 1)},
             2,
             {true, 320000, 1}},
            /* 9 shares leave 160000: one more share fits; 10 leave 0 */
            {"nine shares still grant one",
             NULL,
             {SHARED(9), SHARED(10), SHARED(3)},
             3,
             {true, 0, 2}},
            {"every card full", NULL, {SHARED(10), WHOLE, SLICED(1600000, 1)}, 3, {true, 0, 0}},
            {"a fully charged sliced card still has a slot",
             NULL,
             {SLICED(800000, 2)},
             1,
             {true, 0, 0}},
            {"partitioned cards are ignored",
             NULL,
             {PARTED, SLICED(800000, 1), PARTED},
             3,
             {true, 800000, 0}},
            {"partition-only node", NULL, {PARTED, PARTED, PARTED}, 3, {false, 0, 0}},
            {"empty node", NULL, {IDLE}, 0, {false, 0, 0}},
            /* four slices of 160000: 960000 left, but no slot; three of 320000: 640000 left */
            {"Hygon: all four slots used",
             &fx_hygon_k100,
             {SLICED(160000, 4), SLICED(320000, 3)},
             2,
             {true, 640000, 0}},
            {"Hygon: every card out of slots",
             &fx_hygon_k100,
             {SLICED(16000, 4), SLICED(16000, 4)},
             2,
             {true, 0, 0}},
            {"Hygon: idle card", &fx_hygon_k100, {SLICED(16000, 4), IDLE}, 2, {true, 1600000, 1}},
            /* H100: 128 slots of 1 unit leave 1599872 units, but no slot */
            {"H100: all 128 slots used",
             NULL,
             {SLICED(1, 128), SLICED(1600000 - 16000, 1)},
             2,
             {true, 16000, 0}},
            {"H100: 127 slots used",
             NULL,
             {SLICED(1, 127), SLICED(1600000 - 16000, 1)},
             2,
             {true, 1600000 - 127, 0}},
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(rows); i++) {
                struct node nd;
                struct tsr_fit_labels got;

                build_node(&rows[i], &nd);
                memset(&got, 0x5a, sizeof(got));
                tsr_fit_labels_project(nd.caps, nd.ledger, nd.n, &got);
                check_labels(rows[i].what, &got, &rows[i].want);
        }
}

static void test_fit__share_boundary(void **state)
{
        struct node nd;
        struct tsr_fit_labels got;
        static const struct row two = {"two idle", NULL, {IDLE, IDLE}, 2, {true, 0, 0}};

        (void)state;
        build_node(&two, &nd);
        /* Hand-set ledgers around one share: 160000 grants, 159999 does not. */
        nd.ledger[0].mode = TSR_MODE_SHARED;
        nd.ledger[0].allocated = M - SHARE;
        nd.ledger[0].remaining = SHARE;
        nd.ledger[1].mode = TSR_MODE_SHARED;
        nd.ledger[1].allocated = M - SHARE + 1;
        nd.ledger[1].remaining = SHARE - 1;
        tsr_fit_labels_project(nd.caps, nd.ledger, nd.n, &got);
        assert_true(got.present);
        assert_int_equal(got.shared_free_cards, 1);
        assert_int_equal(got.sliced_max_free_units, 0);
        assert_true(tsr_fit_share(&nd.caps[0], &nd.ledger[0]));
        assert_false(tsr_fit_share(&nd.caps[1], &nd.ledger[1]));
        /* An idle card whose remaining fell below a share (never from records) grants none. */
        nd.ledger[1].mode = TSR_MODE_NONE;
        assert_false(tsr_fit_share(&nd.caps[1], &nd.ledger[1]));
}

static void test_fit__predicates(void **state)
{
        static const struct {
                const char *what;
                struct row node; /* one card */
                int64_t units;   /* for tsr_fit_slice */
                bool slice, share, whole;
        } rows[] = {
            {"idle, a whole-card slice", {"", NULL, {IDLE}, 1, {0}}, M, true, true, true},
            {"idle, more than a card", {"", NULL, {IDLE}, 1, {0}}, M + 1, false, true, true},
            {"idle, a zero slice", {"", NULL, {IDLE}, 1, {0}}, 0, true, true, true},
            {"partitioned", {"", NULL, {PARTED}, 1, {0}}, 16000, false, false, false},
            {"exclusive", {"", NULL, {WHOLE}, 1, {0}}, 0, false, false, false},
            {"shared once", {"", NULL, {SHARED(1)}, 1, {0}}, 16000, false, true, false},
            {"shared ten times", {"", NULL, {SHARED(10)}, 1, {0}}, 16000, false, false, false},
            /* 1600000 - 960000 = 640000 left */
            {"sliced, exact fit",
             {"", NULL, {SLICED(960000, 1)}, 1, {0}},
             640000,
             true,
             false,
             false},
            {"sliced, one unit short",
             {"", NULL, {SLICED(960000, 1)}, 1, {0}},
             640001,
             false,
             false,
             false},
            {"Hygon, three slots used",
             {"", &fx_hygon_k100, {SLICED(16000, 3)}, 1, {0}},
             16000,
             true,
             false,
             false},
            {"Hygon, four slots used",
             {"", &fx_hygon_k100, {SLICED(16000, 4)}, 1, {0}},
             16000,
             false,
             false,
             false},
            {"Hygon idle", {"", &fx_hygon_k100, {IDLE}, 1, {0}}, M, true, true, true},
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(rows); i++) {
                struct node nd;
                bool slice, share, whole;

                build_node(&rows[i].node, &nd);
                slice = tsr_fit_slice(&nd.caps[0], &nd.ledger[0], rows[i].units);
                share = tsr_fit_share(&nd.caps[0], &nd.ledger[0]);
                whole = tsr_fit_whole(&nd.caps[0], &nd.ledger[0]);
                if (slice != rows[i].slice || share != rows[i].share || whole != rows[i].whole)
                        fail_msg("%s: slice %d share %d whole %d, want %d %d %d", rows[i].what,
                                 slice, share, whole, rows[i].slice, rows[i].share, rows[i].whole);
        }
}

/* ---- reference model ---------------------------------------------------------------------- */

/* The labels straight from the spec's sentences, one accelerator at a time. */
static void ref_labels(const struct node *nd, struct tsr_fit_labels *out)
{
        memset(out, 0, sizeof(*out));
        for (size_t i = 0; i < nd->n; i++) {
                const struct tsr_accel_cap *c = &nd->caps[i];
                const struct tsr_accel_ledger *l = &nd->ledger[i];
                bool whole_capable = !c->partitioned;
                bool can_slice =
                    whole_capable && (l->mode == TSR_MODE_NONE || l->mode == TSR_MODE_SLICED);
                bool free_slot = l->allocated_slices < c->slice_slots;
                bool can_share = whole_capable &&
                                 (l->mode == TSR_MODE_NONE || l->mode == TSR_MODE_SHARED) &&
                                 l->remaining >= SHARE;

                if (!whole_capable)
                        continue;
                out->present = true;
                if (can_slice && free_slot && l->remaining > out->sliced_max_free_units)
                        out->sliced_max_free_units = l->remaining;
                if (can_share)
                        out->shared_free_cards++;
        }
}

static void test_fit__labels_match_reference(void **state)
{
        static const int64_t slice_units[] = {1, 16000, 160000, 480000, 800000, 960000, 1600000};
        const struct tsr_product *products;
        size_t np = tsr_catalog_products(&products);
        unsigned compared = 0, present = 0, nonzero_sliced = 0, nonzero_shared = 0;

        (void)state;
        rng_seed(11);
        for (size_t pi = 0; pi <= np; pi++) {
                const struct tsr_product *p = pi < np ? &products[pi] : &fx_hygon_k100;

                for (int round = 0; round < 300; round++) {
                        struct row r = {"random", NULL, {IDLE}, 0, {0}};
                        struct node nd;
                        struct tsr_fit_labels got, want;

                        r.n = rnd(MAX_ACCEL + 1);
                        for (size_t i = 0; i < r.n; i++) {
                                struct card *c = &r.cards[i];

                                c->partitioned = rnd(4) == 0;
                                switch (rnd(4)) {
                                case 0:
                                        break;
                                case 1:
                                        c->mode = TSR_MODE_EXCLUSIVE;
                                        c->records = 1;
                                        break;
                                case 2:
                                        c->mode = TSR_MODE_SHARED;
                                        c->records = 1 + rnd(10);
                                        break;
                                default:
                                        c->mode = TSR_MODE_SLICED;
                                        c->units = slice_units[rnd(N_ELEMS(slice_units))];
                                        c->records = 1 + rnd(MAX_RECS);
                                        break;
                                }
                                if (c->partitioned) { /* a partitioned card holds no such record */
                                        c->mode = TSR_MODE_NONE;
                                        c->records = 0;
                                }
                        }
                        r.product = p;
                        build_node(&r, &nd);
                        /* Sometimes fill a sliced card's slots without touching its units. */
                        for (size_t i = 0; i < nd.n; i++)
                                if (nd.ledger[i].mode == TSR_MODE_SLICED && rnd(3) == 0)
                                        nd.ledger[i].allocated_slices = nd.caps[i].slice_slots;
                        tsr_fit_labels_project(nd.caps, nd.ledger, nd.n, &got);
                        ref_labels(&nd, &want);
                        check_labels(p->name, &got, &want);
                        compared++;
                        present += want.present;
                        nonzero_sliced += want.sliced_max_free_units > 0;
                        nonzero_shared += want.shared_free_cards > 0;
                }
        }
        assert_true(compared > 5000);
        assert_true(present > compared / 2 && present < compared);
        assert_true(nonzero_sliced > compared / 4 && nonzero_shared > compared / 4);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_fit__labels),
            cmocka_unit_test(test_fit__share_boundary),
            cmocka_unit_test(test_fit__predicates),
            cmocka_unit_test(test_fit__labels_match_reference),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
