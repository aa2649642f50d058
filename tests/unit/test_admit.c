/*
 * test_admit.c - core/admit: gate 3, the `gpustack-node-devices` AdmissionCheck verdict
 * (seeds/admission.md "Gate 3"; spec/upstream-behavior.md §7).
 *
 * Hand-built cases first, one per sentence of the seed: eight accelerators sliced to 50 % cannot
 * serve five whole ones while a free node can; two 30 % slices share one free accelerator, two
 * 60 % slices do not; only a free or already-sliced accelerator takes a slice; an accelerator
 * holding its four slice slots (a Hygon-like test product) takes no fifth; shares land on N
 * distinct accelerators; partitions go to free placements, several per card; under TAS each
 * assigned node hosts its own Pods, a PodSet without placements is judged across its flavor's
 * pool, a gone node holds; an accelerator serves only its own flavor's PodSets; the budget is
 * global to the Workload; the role is named only for a Workload of several PodSets; inflight
 * Workloads are charged first; PodSets go partitions first, then larger units first. Expected
 * verdicts and messages are worked out by hand from the specs; each Retry family has one row that
 * checks the whole message.
 *
 * Then a slow, obvious reference model (its own per-card state: a bool per memory slice, the
 * documented packing per family, PodSets sorted by a stable bubble sort, each pool Pod tried on
 * every node in name order) is compared with tsr_admit_judge over thousands of randomized
 * clusters: 1-4 nodes of 1-8 accelerators of random catalog products (plus a Hygon-like one with
 * four slice slots) with MIG on or off per accelerator, ledgers built with tsr_ledger_build from
 * random valid records, random inflight Workloads and random Workloads of 1-3 PodSets, with and
 * without placements, with a fixed-seed LCG. Any disagreement prints the case.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "core/admit.h"

#include "support/catalog_fixtures.h"
#include "support/rng.h"

#include <stdio.h>
#include <string.h>

#define N_ELEMS(a)  (sizeof(a) / sizeof((a)[0]))
#define S(n)        (UINT32_C(1) << (n))
#define M           INT64_C(1600000)
#define SHARE       INT64_C(160000)
#define PCT(n)      ((int64_t)(n)*INT64_C(16000))
#define MAX_NODES   4
#define MAX_ACCEL   8
#define MAX_RECS    2048
#define MAX_PODSETS 3
#define MAX_PLACE   4
#define MAX_INFL    3

#define H100_NAME "NVIDIA H100 80GB HBM3"
#define RETRY_END "; will retry as capacity frees"

/* ---- snapshot builders ---------------------------------------------------------------------- */

struct node {
        char name[254]; /* a Node name is at most 253 bytes */
        bool present;
        unsigned flavor;
        size_t n;
        struct tsr_accel_cap caps[MAX_ACCEL];
        struct tsr_accel_ledger ledger[MAX_ACCEL];
        size_t nrec;
        struct tsr_alloc_record recs[MAX_RECS];
};

struct cluster {
        size_t n;
        struct node node[MAX_NODES];
        struct tsr_admit_node an[MAX_NODES];
};

static struct cluster cl; /* large: one static snapshot at a time */

static void cluster_reset(struct cluster *c)
{
        memset(c, 0, sizeof(*c));
}

/* Adds a present node of n accelerators of p in flavor, those in parted (bit i) in MIG mode. */
static size_t node_add(struct cluster *c, const char *name, const struct tsr_product *p, size_t n,
                       uint32_t parted, unsigned flavor)
{
        struct node *nd = &c->node[c->n];

        assert_true(c->n < MAX_NODES && n <= MAX_ACCEL);
        snprintf(nd->name, sizeof(nd->name), "%s", name);
        nd->present = true;
        nd->flavor = flavor;
        nd->n = n;
        nd->nrec = 0;
        for (size_t i = 0; i < n; i++) {
                char uuid[32];

                snprintf(uuid, sizeof(uuid), "GPU-%s-%zu", name, i);
                tsr_capability_detect(p, (unsigned)i, uuid, (parted >> i) & 1u, &nd->caps[i]);
        }
        return c->n++;
}

static void rec_add(struct cluster *c, size_t k, const struct tsr_alloc_record *r)
{
        struct node *nd = &c->node[k];

        assert_true(nd->nrec < MAX_RECS);
        nd->recs[nd->nrec++] = *r;
}

static void rec_exclusive(struct cluster *c, size_t k, unsigned accel)
{
        struct tsr_alloc_record r = {
            .accel = accel, .mode = TSR_MODE_EXCLUSIVE, .units = M, .profile = -1};

        rec_add(c, k, &r);
}

static void rec_shared(struct cluster *c, size_t k, unsigned accel, unsigned shares)
{
        struct tsr_alloc_record r = {.accel = accel,
                                     .mode = TSR_MODE_SHARED,
                                     .units = SHARE * shares,
                                     .shares = shares,
                                     .profile = -1};

        rec_add(c, k, &r);
}

static void rec_slice(struct cluster *c, size_t k, unsigned accel, int64_t units)
{
        struct tsr_alloc_record r = {
            .accel = accel, .mode = TSR_MODE_SLICED, .units = units, .profile = -1};

        rec_add(c, k, &r);
}

static void rec_partition(struct cluster *c, size_t k, unsigned accel, const char *profile,
                          unsigned start)
{
        const struct tsr_product *p = c->node[k].caps[accel].product;
        struct tsr_alloc_record r = {.accel = accel,
                                     .mode = TSR_MODE_PARTITIONED,
                                     .units = M / 2,
                                     .profile = fx_pidx(p, profile),
                                     .start = start};

        rec_add(c, k, &r);
}

/* Rebuilds every node's ledger from its records and fills the judge's node table. */
static void cluster_build(struct cluster *c)
{
        for (size_t k = 0; k < c->n; k++) {
                struct node *nd = &c->node[k];
                struct tsr_diag diag = {0};
                int rc = tsr_ledger_build(nd->caps, nd->n, nd->recs, nd->nrec, nd->ledger, &diag);

                if (rc)
                        fail_msg("node %s: tsr_ledger_build: %s", nd->name, tsr_err_name(rc));
                c->an[k] = (struct tsr_admit_node){nd->name, nd->present, nd->flavor,
                                                   nd->caps, nd->ledger,  nd->n};
        }
}

/* ---- Workload builders ---------------------------------------------------------------------- */

struct wl {
        char name[16];
        char psname[MAX_PODSETS][64]; /* a PodSet name is a DNS label: at most 63 bytes */
        struct tsr_admit_podset ps[MAX_PODSETS];
        struct tsr_admit_placement pl[MAX_PODSETS][MAX_PLACE];
        struct tsr_admit_workload w;
};

static void wl_init(struct wl *w, const char *name)
{
        memset(w, 0, sizeof(*w));
        snprintf(w->name, sizeof(w->name), "%s", name);
        w->w.name = w->name;
        w->w.podsets = w->ps;
}

/* Adds a PodSet of count Pods of demand d in flavor; returns its index. */
static size_t wl_podset(struct wl *w, const char *name, struct tsr_demand d, unsigned count,
                        unsigned flavor)
{
        size_t i = w->w.n_podsets++;

        assert_true(i < MAX_PODSETS);
        snprintf(w->psname[i], sizeof(w->psname[i]), "%s", name);
        w->ps[i].name = w->psname[i];
        w->ps[i].count = count;
        w->ps[i].demand = d;
        w->ps[i].flavor = flavor;
        w->ps[i].placements = w->pl[i];
        return i;
}

/* The topology assignment puts pods Pods of PodSet ps on snapshot node node. */
static void wl_place(struct wl *w, size_t ps, size_t node, unsigned pods)
{
        size_t x = w->ps[ps].n_placements++;

        assert_true(x < MAX_PLACE);
        w->pl[ps][x] = (struct tsr_admit_placement){node, pods};
}

static struct tsr_demand exclusive(unsigned cards)
{
        struct tsr_demand d = {.family = TSR_FAMILY_EXCLUSIVE, .cards = cards};

        return d;
}

static struct tsr_demand shared(unsigned cards)
{
        struct tsr_demand d = {.family = TSR_FAMILY_SHARED, .cards = cards};

        return d;
}

static struct tsr_demand sliced(int64_t units)
{
        struct tsr_demand d = {.family = TSR_FAMILY_SLICED, .cards = 1, .units = units};

        return d;
}

static struct tsr_demand partition(const char *profile, int64_t units)
{
        struct tsr_demand d = {.family = TSR_FAMILY_PARTITIONED, .cards = 1, .units = units};

        snprintf(d.profile, sizeof(d.profile), "%s", profile);
        return d;
}

/* Judges w against cl after the inflight Workloads infl[0..n_infl). */
static struct tsr_admit_verdict judge(struct wl *infl, size_t n_infl, struct wl *w)
{
        struct tsr_admit_workload list[MAX_INFL];
        struct tsr_admit_verdict v;
        struct tsr_diag diag = {0};
        int rc;

        assert_true(n_infl <= MAX_INFL);
        for (size_t i = 0; i < n_infl; i++)
                list[i] = infl[i].w;
        memset(&v, 0x5a, sizeof(v));
        rc = tsr_admit_judge(cl.an, cl.n, list, n_infl, &w->w, &v, &diag);
        if (rc)
                fail_msg("tsr_admit_judge(%s): %s", w->name, tsr_err_name(rc));
        return v;
}

static void expect_ready(const struct tsr_admit_verdict *v)
{
        if (v->state != TSR_CHECK_READY)
                fail_msg("want Ready, got %s: %s", tsr_check_state_name(v->state), v->message);
        assert_string_equal(v->message, TSR_ADMIT_READY_MESSAGE);
}

/* Retry with exactly the message exact, or (exact NULL) any message ending as a Retry does. */
static void expect_retry(const struct tsr_admit_verdict *v, const char *exact)
{
        size_t len = strnlen(v->message, sizeof(v->message)), tail = strlen(RETRY_END);

        if (v->state != TSR_CHECK_RETRY)
                fail_msg("want Retry, got %s: %.*s", tsr_check_state_name(v->state),
                         (int)sizeof(v->message), v->message);
        assert_true(len < sizeof(v->message));
        if (exact)
                assert_string_equal(v->message, exact);
        if (len < tail || strcmp(v->message + len - tail, RETRY_END) != 0)
                fail_msg("Retry message does not end in \"%s\": %s", RETRY_END, v->message);
}

/* The Retry message names every string of the NULL-terminated list. */
static void expect_mentions(const struct tsr_admit_verdict *v, ...)
{
        va_list ap;
        const char *s;

        va_start(ap, v);
        while ((s = va_arg(ap, const char *)) != NULL)
                if (!strstr(v->message, s))
                        fail_msg("message lacks \"%s\": %s", s, v->message);
        va_end(ap);
}

static void expect_lacks(const struct tsr_admit_verdict *v, const char *s)
{
        if (strstr(v->message, s))
                fail_msg("message names \"%s\": %s", s, v->message);
}

/* ---- hand-built cases ----------------------------------------------------------------------- */

static void test_admit__state_names(void **state)
{
        (void)state;
        assert_string_equal(tsr_check_state_name(TSR_CHECK_PENDING), "Pending");
        assert_string_equal(tsr_check_state_name(TSR_CHECK_READY), "Ready");
        assert_string_equal(tsr_check_state_name(TSR_CHECK_RETRY), "Retry");
        assert_string_equal(tsr_check_state_name(TSR_CHECK_REJECTED), "Rejected");
        assert_string_equal(TSR_ADMIT_READY_MESSAGE,
                            "the assigned flavor pool has enough free cards to place the request");
}

/* The longest Retry message, with a 253-byte node name, a 63-byte role and the longest profile
 * name, is written whole (it was cut at 512 bytes before the verdict's message grew). */
static void test_admit__longest_retry_message_is_whole(void **state)
{
        char node[254], role[64], profile[TSR_PROFILE_MAX];
        struct wl w;
        struct tsr_admit_verdict v;
        size_t n, len;

        (void)state;
        memset(node, 'n', sizeof(node) - 1);
        node[sizeof(node) - 1] = '\0';
        memset(role, 'r', sizeof(role) - 1);
        role[sizeof(role) - 1] = '\0';
        memset(profile, 'p', sizeof(profile) - 1);
        profile[sizeof(profile) - 1] = '\0';
        cluster_reset(&cl);
        n = node_add(&cl, node, fx_product(H100_NAME), 8, 0xffu, 0); /* every card in MIG mode */
        cluster_build(&cl);
        wl_init(&w, "long");
        wl_place(&w, wl_podset(&w, role, partition(profile, M / 2), 4000000000u, 0), n,
                 4000000000u);
        wl_place(&w, wl_podset(&w, "other", exclusive(1), 1, 0), n, 1);
        v = judge(NULL, 0, &w);
        expect_retry(&v, NULL);
        len = strlen(v.message);
        assert_true(len >= 512); /* past the old 512-byte message */
        assert_true(len < sizeof(v.message) - 1);
        assert_string_equal(v.message + len - strlen(RETRY_END), RETRY_END);
        assert_non_null(strstr(v.message, node));
        assert_non_null(strstr(v.message, role));
}

/* "eight accelerators sliced to 50 % each cannot serve a request for five whole accelerators" */
static void test_admit__sliced_halves_cannot_serve_whole(void **state)
{
        struct wl w;
        struct tsr_admit_verdict v;
        size_t sl, fr;

        (void)state;
        cluster_reset(&cl);
        sl = node_add(&cl, "sliced", fx_product(H100_NAME), 8, 0, 0);
        fr = node_add(&cl, "free", fx_product(H100_NAME), 8, 0, 0);
        for (unsigned i = 0; i < 8; i++)
                rec_slice(&cl, sl, i, PCT(50));
        cluster_build(&cl);

        wl_init(&w, "five");
        wl_place(&w, wl_podset(&w, "main", exclusive(5), 1, 0), sl, 1);
        v = judge(NULL, 0, &w);
        expect_retry(&v, "node \"sliced\" fits 0 of 1 Pod: each needs 5 whole accelerators, 0 "
                         "free; will retry as capacity frees");

        /* 8 x 50 % is four accelerators' worth, yet not even four whole ones are free. */
        w.ps[0].demand = exclusive(4);
        v = judge(NULL, 0, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "node \"sliced\"", "4 whole accelerators", "0 free", NULL);

        /* The free node could serve it. */
        w.ps[0].demand = exclusive(5);
        w.pl[0][0].node = fr;
        expect_ready((v = judge(NULL, 0, &w), &v));
        /* Across the pool, the free node serves it too. */
        w.ps[0].n_placements = 0;
        expect_ready((v = judge(NULL, 0, &w), &v));
}

/* "two 30 % slices fit one free accelerator" (both on the same card) */
static void test_admit__two_30pct_slices_share_one_card(void **state)
{
        struct wl w, infl;
        struct tsr_admit_verdict v;
        size_t a, b;

        (void)state;
        cluster_reset(&cl);
        a = node_add(&cl, "one", fx_product(H100_NAME), 1, 0, 0);
        b = node_add(&cl, "two", fx_product(H100_NAME), 2, 0, 0);
        cluster_build(&cl);

        wl_init(&w, "slices");
        wl_place(&w, wl_podset(&w, "main", sliced(PCT(30)), 2, 0), a, 2);
        expect_ready((v = judge(NULL, 0, &w), &v));

        /* Charged as inflight on two cards, both slices land on card 0: card 1 stays whole. */
        wl_init(&infl, "first");
        wl_place(&infl, wl_podset(&infl, "main", sliced(PCT(30)), 2, 0), b, 2);
        wl_init(&w, "whole");
        wl_place(&w, wl_podset(&w, "main", exclusive(1), 1, 0), b, 1);
        expect_ready((v = judge(&infl, 1, &w), &v));
        w.ps[0].demand = exclusive(2);
        v = judge(&infl, 1, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "node \"two\"", "2 whole accelerators", "1 free", NULL);
}

/* "two 60 % slices do not" */
static void test_admit__two_60pct_slices_need_two_cards(void **state)
{
        struct wl w;
        struct tsr_admit_verdict v;
        size_t a, b;

        (void)state;
        cluster_reset(&cl);
        a = node_add(&cl, "one", fx_product(H100_NAME), 1, 0, 0);
        b = node_add(&cl, "two", fx_product(H100_NAME), 2, 0, 0);
        cluster_build(&cl);

        wl_init(&w, "slices");
        wl_place(&w, wl_podset(&w, "main", sliced(PCT(60)), 2, 0), a, 2);
        v = judge(NULL, 0, &w);
        /* After the first slice the card has 1600000 - 960000 = 640000 units. */
        expect_retry(&v, "node \"one\" fits 1 of 2 Pods: each needs 960000 free units and a free "
                         "slice slot on one accelerator, the freest accelerator has 640000 "
                         "units; will retry as capacity frees");
        w.pl[0][0].node = b;
        expect_ready((v = judge(NULL, 0, &w), &v));
}

/* "Only a free or already-sliced accelerator takes one." */
static void test_admit__slice_only_on_free_or_sliced_card(void **state)
{
        struct wl w;
        struct tsr_admit_verdict v;
        size_t a;

        (void)state;
        cluster_reset(&cl);
        a = node_add(&cl, "mixed", fx_product(H100_NAME), 4, S(2), 0);
        rec_exclusive(&cl, a, 0);
        rec_shared(&cl, a, 1, 1);      /* shared: 1440000 left */
        rec_slice(&cl, a, 3, PCT(30)); /* sliced: 1120000 left; card 2 is partitioned */
        cluster_build(&cl);

        wl_init(&w, "slice");
        wl_place(&w, wl_podset(&w, "main", sliced(1120000), 1, 0), a, 1);
        expect_ready((v = judge(NULL, 0, &w), &v));
        /* One unit more fits only the shared card or the partitioned one: neither takes it. */
        w.ps[0].demand = sliced(1120001);
        v = judge(NULL, 0, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "node \"mixed\"", "fits 0 of 1 Pod", "1120001 free units",
                        "the freest accelerator has 1120000 units", NULL);
        /* Two 30 % slices on top of card 3's 30 %: both fit card 3 (90 %). */
        w.ps[0].demand = sliced(PCT(30));
        w.ps[0].count = w.pl[0][0].pods = 2;
        expect_ready((v = judge(NULL, 0, &w), &v));
        w.ps[0].count = w.pl[0][0].pods = 3;
        v = judge(NULL, 0, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "fits 2 of 3 Pods", "the freest accelerator has 160000 units", NULL);

        /* With card 3 held exclusively too, nothing takes a slice. */
        cluster_reset(&cl);
        a = node_add(&cl, "mixed", fx_product(H100_NAME), 4, S(2), 0);
        rec_exclusive(&cl, a, 0);
        rec_shared(&cl, a, 1, 1);
        rec_exclusive(&cl, a, 3);
        cluster_build(&cl);
        w.ps[0].demand = sliced(PCT(1));
        w.ps[0].count = w.pl[0][0].pods = 1;
        v = judge(NULL, 0, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "fits 0 of 1 Pod", "no accelerator with a free slice slot", NULL);
}

/* "a Hygon accelerator holding its four slices takes no fifth however much memory it has left" */
static void test_admit__slice_slots_are_counted(void **state)
{
        static const struct tsr_product dcu = {"Test DCU", TSR_MFR_HYGON, 65520, 12, 128, NULL, 0};
        struct wl w;
        struct tsr_admit_verdict v;
        size_t a;

        (void)state;
        cluster_reset(&cl);
        a = node_add(&cl, "dcu", &dcu, 1, 0, 0);
        cl.node[a].caps[0] = (struct tsr_accel_cap){
            .index = 0, .uuid = "DCU-0", .product = &dcu, .partitioned = false, .slice_slots = 4};
        for (int i = 0; i < 4; i++)
                rec_slice(&cl, a, 0, PCT(10));
        cluster_build(&cl);
        assert_int_equal(cl.node[a].ledger[0].remaining, PCT(60)); /* 960000 units left */

        wl_init(&w, "fifth");
        wl_place(&w, wl_podset(&w, "main", sliced(PCT(10)), 1, 0), a, 1);
        v = judge(NULL, 0, &w);
        expect_retry(&v, "node \"dcu\" fits 0 of 1 Pod: each needs 160000 free units and a free "
                         "slice slot on one accelerator, no accelerator with a free slice slot; "
                         "will retry as capacity frees");

        /* Three held: one more fits, a second of this Workload's own does not. */
        cl.node[a].nrec = 3;
        cluster_build(&cl);
        expect_ready((v = judge(NULL, 0, &w), &v));
        w.ps[0].count = w.pl[0][0].pods = 2;
        v = judge(NULL, 0, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "fits 1 of 2 Pods", "no accelerator with a free slice slot", NULL);
}

/* "an owner share ... N distinct accelerators": shares on too few cards do not add up. */
static void test_admit__shared_needs_distinct_cards(void **state)
{
        struct wl w;
        struct tsr_admit_verdict v;
        size_t a, b;

        (void)state;
        cluster_reset(&cl);
        a = node_add(&cl, "two", fx_product(H100_NAME), 2, 0, 0);
        b = node_add(&cl, "busy", fx_product(H100_NAME), 4, 0, 0);
        rec_exclusive(&cl, b, 0);
        rec_shared(&cl, b, 1, 9);  /* one share left */
        rec_shared(&cl, b, 2, 10); /* none left */
        rec_slice(&cl, b, 3, PCT(10));
        cluster_build(&cl);

        wl_init(&w, "shares");
        wl_place(&w, wl_podset(&w, "main", shared(3), 1, 0), a, 1);
        v = judge(NULL, 0, &w); /* 20 free shares, 2 cards */
        expect_retry(&v, "node \"two\" fits 0 of 1 Pod: each needs a free share on 3 distinct "
                         "accelerators, 2 with a free share; will retry as capacity frees");
        w.ps[0].demand = shared(2);
        w.ps[0].count = w.pl[0][0].pods = 10; /* ten shares on each card: exactly full */
        expect_ready((v = judge(NULL, 0, &w), &v));
        w.ps[0].count = w.pl[0][0].pods = 11;
        v = judge(NULL, 0, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "fits 10 of 11 Pods", "0 with a free share", NULL);

        /* Only card 1 can grant a share: exclusive, full and sliced cards cannot. */
        w.pl[0][0].node = b;
        w.ps[0].count = w.pl[0][0].pods = 1;
        v = judge(NULL, 0, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "node \"busy\"", "2 distinct accelerators", "1 with a free share",
                        NULL);
        w.ps[0].demand = shared(1);
        expect_ready((v = judge(NULL, 0, &w), &v));
}

/* "a free placement of the profile for a partition", several per card */
static void test_admit__partitions_by_free_placement(void **state)
{
        const struct tsr_product *h100 = fx_product(H100_NAME);
        struct wl w;
        struct tsr_admit_verdict v;
        size_t a, b, c;

        (void)state;
        cluster_reset(&cl);
        a = node_add(&cl, "mig", h100, 1, S(0), 0);
        b = node_add(&cl, "low", h100, 1, S(0), 0);
        c = node_add(&cl, "high", h100, 1, S(0), 0);
        rec_partition(&cl, b, 0, "3g.40gb", 0);
        rec_partition(&cl, c, 0, "3g.40gb", 4);
        cluster_build(&cl);

        wl_init(&w, "parts");
        wl_place(&w, wl_podset(&w, "main", partition("3g.40gb", M / 2), 2, 0), a, 2);
        expect_ready((v = judge(NULL, 0, &w), &v)); /* starts 0 and 4 of one H100 */
        w.ps[0].count = w.pl[0][0].pods = 3;
        v = judge(NULL, 0, &w);
        expect_retry(&v, "node \"mig\" fits 2 of 3 Pods: each needs a free 3g.40gb placement, 0 "
                         "free 3g.40gb placements; will retry as capacity frees");
        w.ps[0].demand = partition("1g.10gb", M / 8);
        w.ps[0].count = w.pl[0][0].pods = 7;
        expect_ready((v = judge(NULL, 0, &w), &v));
        w.ps[0].count = w.pl[0][0].pods = 8;
        v = judge(NULL, 0, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "fits 7 of 8 Pods", "0 free 1g.10gb placements", NULL);

        /* A 4g.40gb starts only at 0: after a 3g.40gb at 0 there is no room on that card. */
        wl_init(&w, "four");
        wl_place(&w, wl_podset(&w, "main", partition("4g.40gb", M / 2), 1, 0), b, 1);
        v = judge(NULL, 0, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "node \"low\"", "a free 4g.40gb placement", "0 free 4g.40gb placements",
                        NULL);
        w.pl[0][0].node = c; /* the 3g.40gb at 4 leaves slices 0-3 */
        expect_ready((v = judge(NULL, 0, &w), &v));
        w.ps[0].demand = partition("3g.40gb", M / 2);
        w.pl[0][0].node = b; /* one 3g.40gb still fits at 4 */
        expect_ready((v = judge(NULL, 0, &w), &v));
        /* An offered-nowhere profile has no placement. */
        w.ps[0].demand = partition("1g.10gb+me", M / 8);
        w.pl[0][0].node = a;
        expect_retry((v = judge(NULL, 0, &w), &v), NULL);

        /* No partitioned accelerator: the partition waits; a whole one cannot use MIG cards. */
        cluster_reset(&cl);
        a = node_add(&cl, "plain", h100, 2, 0, 0);
        b = node_add(&cl, "mig", h100, 2, S(0) | S(1), 0);
        cluster_build(&cl);
        wl_init(&w, "parts");
        wl_place(&w, wl_podset(&w, "main", partition("3g.40gb", M / 2), 1, 0), a, 1);
        v = judge(NULL, 0, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "node \"plain\"", "no partitioned accelerator", NULL);
        w.ps[0].demand = exclusive(1);
        w.pl[0][0].node = b;
        v = judge(NULL, 0, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "node \"mig\"", "1 whole accelerator", "0 free", NULL);
}

/* "Under TAS ... Each node named there must host its own share of the PodSet." */
static void test_admit__tas_node_hosts_its_own_pods(void **state)
{
        struct wl w;
        struct tsr_admit_verdict v;
        size_t a, b;

        (void)state;
        cluster_reset(&cl);
        a = node_add(&cl, "a", fx_product(H100_NAME), 1, 0, 0);
        b = node_add(&cl, "b", fx_product(H100_NAME), 1, 0, 0);
        cluster_build(&cl);

        /* The pool has two free cards, but both Pods are assigned to node a. */
        wl_init(&w, "pair");
        wl_place(&w, wl_podset(&w, "main", exclusive(1), 2, 0), a, 2);
        v = judge(NULL, 0, &w);
        expect_retry(&v, "node \"a\" fits 1 of 2 Pods: each needs 1 whole accelerator, 0 free; "
                         "will retry as capacity frees");
        w.pl[0][0].pods = 1;
        wl_place(&w, 0, b, 1);
        expect_ready((v = judge(NULL, 0, &w), &v));
        /* The second node named must host its own Pod, too. */
        w.pl[0][1].pods = 2;
        w.ps[0].count = 3;
        v = judge(NULL, 0, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "node \"b\"", "fits 1 of 2 Pods", NULL);

        /* A slice assigned to a fragmented node waits even though another node has room. */
        cluster_reset(&cl);
        a = node_add(&cl, "frag", fx_product(H100_NAME), 2, 0, 0);
        b = node_add(&cl, "room", fx_product(H100_NAME), 1, 0, 0);
        rec_slice(&cl, a, 0, PCT(50));
        rec_slice(&cl, a, 1, PCT(50));
        cluster_build(&cl);
        wl_init(&w, "slice");
        wl_place(&w, wl_podset(&w, "main", sliced(PCT(60)), 1, 0), a, 1);
        v = judge(NULL, 0, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "node \"frag\"", "the freest accelerator has 800000 units", NULL);
        w.pl[0][0].node = b;
        expect_ready((v = judge(NULL, 0, &w), &v));
}

/* "A PodSet without a hostname-level assignment is judged across the flavor's whole node pool." */
static void test_admit__no_placement_judged_across_pool(void **state)
{
        struct wl w;
        struct tsr_admit_verdict v;

        (void)state;
        cluster_reset(&cl);
        node_add(&cl, "b", fx_product(H100_NAME), 1, 0, 0);
        node_add(&cl, "a", fx_product(H100_NAME), 1, 0, 0);
        node_add(&cl, "other", fx_product(H100_NAME), 4, 0, 1); /* another flavor */
        cluster_build(&cl);

        wl_init(&w, "pool");
        wl_podset(&w, "main", exclusive(1), 2, 0);
        expect_ready((v = judge(NULL, 0, &w), &v));
        w.ps[0].count = 3;
        v = judge(NULL, 0, &w);
        expect_retry(&v, "the flavor's node pool fits 2 of 3 Pods: each needs 1 whole "
                         "accelerator, 1 more do not fit; will retry as capacity frees");
        /* One Pod's accelerators come from one node: two cards on two nodes do not serve it. */
        w.ps[0].demand = exclusive(2);
        w.ps[0].count = 1;
        v = judge(NULL, 0, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "the flavor's node pool", "fits 0 of 1 Pod", "2 whole accelerators",
                        NULL);
        w.ps[0].flavor = 1; /* node "other" serves flavor 1 */
        expect_ready((v = judge(NULL, 0, &w), &v));
}

/* "A node whose Node object is gone serves no node-scoped demand, so the Workload is held." */
static void test_admit__gone_node_holds(void **state)
{
        struct wl w;
        struct tsr_admit_verdict v;
        size_t gone, live;

        (void)state;
        cluster_reset(&cl);
        gone = node_add(&cl, "gone", fx_product(H100_NAME), 8, 0, 0);
        live = node_add(&cl, "live", fx_product(H100_NAME), 1, 0, 0);
        cl.node[gone].present = false;
        cluster_build(&cl);

        wl_init(&w, "held");
        wl_place(&w, wl_podset(&w, "main", exclusive(1), 1, 0), gone, 1);
        v = judge(NULL, 0, &w);
        expect_retry(&v, "node \"gone\" assigned no longer exists; will retry as capacity frees");
        w.pl[0][0].node = live;
        expect_ready((v = judge(NULL, 0, &w), &v));

        /* With two PodSets, the role is named. */
        wl_init(&w, "roles");
        wl_place(&w, wl_podset(&w, "prefill", exclusive(1), 1, 0), live, 1);
        wl_place(&w, wl_podset(&w, "decode", sliced(PCT(10)), 1, 0), gone, 1);
        v = judge(NULL, 0, &w);
        expect_retry(&v, "node \"gone\" assigned for role \"decode\" no longer exists; will retry "
                         "as capacity frees");

        /* Across the pool the gone node serves nothing: one card of "live" serves one Pod. */
        wl_init(&w, "pool");
        wl_podset(&w, "main", exclusive(1), 1, 0);
        expect_ready((v = judge(NULL, 0, &w), &v));
        w.ps[0].count = 2;
        v = judge(NULL, 0, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "the flavor's node pool", "fits 1 of 2 Pods", NULL);
}

/* "An accelerator is eligible for a demand only when its own key is one that demand's flavor
 * covers." */
static void test_admit__flavor_scopes_accelerators(void **state)
{
        struct wl w;
        struct tsr_admit_verdict v;
        size_t a, b;

        (void)state;
        cluster_reset(&cl);
        a = node_add(&cl, "a", fx_product(H100_NAME), 2, 0, 0);
        b = node_add(&cl, "b", fx_product(H100_NAME), 2, 0, 1);
        rec_exclusive(&cl, b, 0);
        cluster_build(&cl);

        wl_init(&w, "flavored");
        wl_podset(&w, "main", exclusive(2), 1, 1);
        v = judge(NULL, 0, &w); /* node a's two free cards are flavor 0's */
        expect_retry(&v, NULL);
        expect_mentions(&v, "the flavor's node pool", "fits 0 of 1 Pod", NULL);
        w.ps[0].flavor = 0;
        expect_ready((v = judge(NULL, 0, &w), &v));
        /* A placement on a node of another flavor serves nothing. */
        w.ps[0].flavor = 1;
        w.ps[0].demand = exclusive(1);
        wl_place(&w, 0, a, 1);
        v = judge(NULL, 0, &w); /* its two free cards are not this PodSet's */
        expect_retry(&v, "node \"a\" fits 0 of 1 Pod: each needs 1 whole accelerator, none in "
                         "the PodSet's flavor; will retry as capacity frees");
        w.pl[0][0].node = b;
        expect_ready((v = judge(NULL, 0, &w), &v));
        /* An admission that names no single accelerator flavor holds (spec §7). */
        w.ps[0].flavor = TSR_ADMIT_NO_FLAVOR;
        v = judge(NULL, 0, &w);
        assert_int_equal(v.state, TSR_CHECK_RETRY);
        assert_string_equal(v.message, "the Workload's admission does not resolve to a single "
                                       "accelerator flavor; will retry once it does");
}

/* "The per-accelerator budget stays global to the Workload, so two roles on one flavor cannot
 * spend one accelerator twice." */
static void test_admit__budget_global_to_workload(void **state)
{
        struct wl w;
        struct tsr_admit_verdict v;
        size_t a;

        (void)state;
        cluster_reset(&cl);
        a = node_add(&cl, "a", fx_product(H100_NAME), 1, 0, 0);
        node_add(&cl, "b", fx_product(H100_NAME), 1, 0, 1);
        cluster_build(&cl);

        wl_init(&w, "roles");
        wl_place(&w, wl_podset(&w, "prefill", exclusive(1), 1, 0), a, 1);
        wl_place(&w, wl_podset(&w, "decode", exclusive(1), 1, 0), a, 1);
        v = judge(NULL, 0, &w);
        expect_retry(&v, "node \"a\" fits 0 of 1 Pod for role \"decode\": each needs 1 whole "
                         "accelerator, 0 free; will retry as capacity frees");
        /* Without placements, too. */
        w.ps[0].n_placements = w.ps[1].n_placements = 0;
        v = judge(NULL, 0, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "the flavor's node pool", "role \"decode\"", NULL);
        /* Two roles on two flavors each have their own accelerator. */
        w.ps[1].flavor = 1;
        expect_ready((v = judge(NULL, 0, &w), &v));

        /* Two 60 % slices of two roles do not share one card; two 30 % slices do. */
        wl_init(&w, "slices");
        wl_place(&w, wl_podset(&w, "prefill", sliced(PCT(60)), 1, 0), a, 1);
        wl_place(&w, wl_podset(&w, "decode", sliced(PCT(60)), 1, 0), a, 1);
        v = judge(NULL, 0, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "node \"a\"", "role \"decode\"", "640000 units", NULL);
        w.ps[0].demand = w.ps[1].demand = sliced(PCT(30));
        expect_ready((v = judge(NULL, 0, &w), &v));
}

/* "The verdict message names the role that is starved" (only for more than one PodSet). */
static void test_admit__role_named_only_with_several_podsets(void **state)
{
        struct wl w;
        struct tsr_admit_verdict v;
        size_t a;

        (void)state;
        cluster_reset(&cl);
        a = node_add(&cl, "a", fx_product(H100_NAME), 2, 0, 0);
        rec_exclusive(&cl, a, 0);
        cluster_build(&cl);

        wl_init(&w, "single");
        wl_place(&w, wl_podset(&w, "worker", exclusive(2), 1, 0), a, 1);
        v = judge(NULL, 0, &w);
        expect_retry(&v, NULL);
        expect_lacks(&v, "role");
        expect_lacks(&v, "worker");

        /* The first PodSet is the starved one; the second never gets judged. */
        wl_place(&w, wl_podset(&w, "leader", shared(1), 1, 0), a, 1);
        v = judge(NULL, 0, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "for role \"worker\"", "2 whole accelerators", "1 free", NULL);
        expect_lacks(&v, "leader");
        /* The second one starved. */
        w.ps[0].demand = exclusive(1);
        w.ps[1].demand = shared(2);
        v = judge(NULL, 0, &w);
        expect_retry(&v, "node \"a\" fits 0 of 1 Pod for role \"leader\": each needs a free share "
                         "on 2 distinct accelerators, 0 with a free share; will retry as "
                         "capacity frees");
}

/* "So the check first fits every other Workload on the node that is admitted or holds this
 * check's Ready: the Pods its topology assignment puts there, minus those the rebuilt ledger
 * already holds." */
static void test_admit__inflight_charged_first(void **state)
{
        struct wl w, infl[2];
        struct tsr_admit_verdict v;
        size_t a, b;

        (void)state;
        cluster_reset(&cl);
        a = node_add(&cl, "a", fx_product(H100_NAME), 1, 0, 0);
        b = node_add(&cl, "b", fx_product(H100_NAME), 2, 0, 0);
        rec_exclusive(&cl, b, 0); /* the held first Pod of Workload "first" on node b */
        cluster_build(&cl);

        wl_init(&w, "second");
        wl_place(&w, wl_podset(&w, "main", exclusive(1), 1, 0), a, 1);
        wl_init(&infl[0], "first");
        wl_place(&infl[0], wl_podset(&infl[0], "main", exclusive(1), 1, 0), a, 1);
        expect_ready((v = judge(NULL, 0, &w), &v));
        v = judge(infl, 1, &w);
        expect_retry(&v, "node \"a\" fits 0 of 1 Pod: each needs 1 whole accelerator, 0 free; "
                         "will retry as capacity frees");
        /* An inflight placement whose Pods the ledger already holds charges nothing. */
        infl[0].pl[0][0].pods = 0;
        expect_ready((v = judge(infl, 1, &w), &v));
        /* An inflight Workload without a hostname-level assignment is not counted. */
        infl[0].pl[0][0].pods = 1;
        infl[0].ps[0].n_placements = 0;
        expect_ready((v = judge(infl, 1, &w), &v));

        /* Node b: "first" has two Pods there, one held (card 0), one not yet. */
        wl_init(&infl[0], "first");
        wl_place(&infl[0], wl_podset(&infl[0], "main", exclusive(1), 2, 0), b, 1);
        w.pl[0][0].node = b;
        expect_ready((v = judge(NULL, 0, &w), &v));
        v = judge(infl, 1, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "node \"b\"", "0 free", NULL);
        infl[0].pl[0][0].pods = 0;
        expect_ready((v = judge(infl, 1, &w), &v));

        /* Inflight slices pack like the allocator's: two inflight 30 % slices plus ours. */
        wl_init(&infl[0], "s1");
        wl_place(&infl[0], wl_podset(&infl[0], "main", sliced(PCT(30)), 1, 0), a, 1);
        wl_init(&infl[1], "s2");
        wl_place(&infl[1], wl_podset(&infl[1], "main", sliced(PCT(30)), 1, 0), a, 1);
        wl_init(&w, "third");
        wl_place(&w, wl_podset(&w, "main", sliced(PCT(40)), 1, 0), a, 1);
        expect_ready((v = judge(infl, 2, &w), &v));
        w.ps[0].demand = sliced(PCT(41));
        v = judge(infl, 2, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "the freest accelerator has 640000 units", NULL);
}

/* §7 "Sort: partitioned first, then descending unitsPerCard, then family." */
static void test_admit__podset_order(void **state)
{
        const struct tsr_product *h100 = fx_product(H100_NAME);
        struct wl w;
        struct tsr_admit_verdict v;
        size_t a, s, m;

        (void)state;
        cluster_reset(&cl);
        a = node_add(&cl, "a", h100, 2, S(1), 0);
        rec_exclusive(&cl, a, 0);
        rec_partition(&cl, a, 1, "7g.80gb", 0);
        s = node_add(&cl, "s", h100, 2, 0, 0);
        m = node_add(&cl, "m", h100, 1, S(0), 0);
        cluster_build(&cl);

        /* Both starve on node a; the partition PodSet is judged first though declared last and
         * asking fewer units (800000 < 1600000). */
        wl_init(&w, "mixed");
        wl_place(&w, wl_podset(&w, "chat", exclusive(1), 1, 0), a, 1);
        wl_place(&w, wl_podset(&w, "embed", partition("3g.40gb", M / 2), 1, 0), a, 1);
        v = judge(NULL, 0, &w);
        expect_retry(&v, "node \"a\" fits 0 of 1 Pod for role \"embed\": each needs a free "
                         "3g.40gb placement, 0 free 3g.40gb placements; will retry as capacity "
                         "frees");

        /* Larger slices first: 60 %, 60 % on cards 0 and 1, then 40 %, 40 % fill both. In
         * declared order the two 40 % would share card 0 and leave room for one 60 % only. */
        wl_init(&w, "slices");
        wl_place(&w, wl_podset(&w, "small", sliced(PCT(40)), 2, 0), s, 2);
        wl_place(&w, wl_podset(&w, "large", sliced(PCT(60)), 2, 0), s, 2);
        expect_ready((v = judge(NULL, 0, &w), &v));

        /* Larger partitions first: 4g.40gb at 0, then 1g.10gb at 4. In declared order the
         * 1g.10gb would take slice 0, the 4g.40gb's only start. */
        wl_init(&w, "parts");
        wl_place(&w, wl_podset(&w, "small", partition("1g.10gb", M / 8), 1, 0), m, 1);
        wl_place(&w, wl_podset(&w, "large", partition("4g.40gb", M / 2), 1, 0), m, 1);
        expect_ready((v = judge(NULL, 0, &w), &v));

        /* Across families by units: the exclusive PodSet (1600000 per card) takes both cards
         * before the shared one (160000); the shared one is the starved role. */
        wl_init(&w, "families");
        wl_place(&w, wl_podset(&w, "share", shared(1), 1, 0), s, 1);
        wl_place(&w, wl_podset(&w, "whole", exclusive(2), 1, 0), s, 1);
        v = judge(NULL, 0, &w);
        expect_retry(&v, NULL);
        expect_mentions(&v, "node \"s\"", "role \"share\"", "0 with a free share", NULL);
        expect_lacks(&v, "\"whole\"");
}

/* A PodSet that asks for no accelerator of the manufacturer needs nothing. */
static void test_admit__podset_without_demand(void **state)
{
        struct wl w;
        struct tsr_admit_verdict v;
        size_t a;

        (void)state;
        cluster_reset(&cl);
        a = node_add(&cl, "a", fx_product(H100_NAME), 1, 0, 0);
        rec_exclusive(&cl, a, 0);
        cluster_build(&cl);
        wl_init(&w, "cpu");
        wl_place(&w, wl_podset(&w, "main", (struct tsr_demand){.family = TSR_FAMILY_NONE}, 3, 0), a,
                 3);
        expect_ready((v = judge(NULL, 0, &w), &v));
        wl_init(&w, "empty");
        expect_ready((v = judge(NULL, 0, &w), &v));
}

/* A placement that names no snapshot node is an error, not a verdict; *out is untouched. */
static void test_admit__placement_out_of_range(void **state)
{
        struct wl w, infl;
        struct tsr_admit_verdict v;
        struct tsr_diag diag = {0};
        size_t a;

        (void)state;
        cluster_reset(&cl);
        a = node_add(&cl, "a", fx_product(H100_NAME), 1, 0, 0);
        cluster_build(&cl);
        wl_init(&w, "bad");
        wl_place(&w, wl_podset(&w, "main", exclusive(1), 1, 0), 1, 1);
        memset(&v, 0x5a, sizeof(v));
        assert_int_equal(tsr_admit_judge(cl.an, cl.n, NULL, 0, &w.w, &v, &diag), TSR_EINVAL);
        assert_int_equal(v.message[0], 0x5a);

        w.pl[0][0].node = a;
        wl_init(&infl, "bad-inflight");
        wl_place(&infl, wl_podset(&infl, "main", exclusive(1), 1, 0), 7, 1);
        assert_int_equal(tsr_admit_judge(cl.an, cl.n, &infl.w, 1, &w.w, &v, &diag), TSR_EINVAL);
        assert_int_equal(v.message[0], 0x5a);
}

/* ---- reference model ------------------------------------------------------------------------ */

struct rcard {
        const struct tsr_product *p;
        bool part;
        uint32_t offered;
        unsigned slots;
        enum tsr_mode mode;
        int64_t allocated;
        unsigned slices;
        bool occ[TSR_MIG_AXIS_MAX];
        unsigned live_of[TSR_MIG_PROFILES_MAX];
};

struct rnode {
        const char *name;
        bool present;
        unsigned flavor;
        size_t n;
        struct rcard card[MAX_ACCEL];
};

struct rmodel {
        size_t n;
        struct rnode node[MAX_NODES];
};

/* Where the reference first failed: podset index, and node index or -1 for the pool. */
struct rverdict {
        bool ready;
        size_t podset;
        int node;
        bool gone;
};

static int64_t rrem(const struct rcard *c)
{
        return c->allocated >= M ? 0 : M - c->allocated;
}

static void ref_load(const struct cluster *c, struct rmodel *m)
{
        memset(m, 0, sizeof(*m));
        m->n = c->n;
        for (size_t k = 0; k < c->n; k++) {
                const struct node *nd = &c->node[k];
                struct rnode *rn = &m->node[k];

                rn->name = nd->name;
                rn->present = nd->present;
                rn->flavor = nd->flavor;
                rn->n = nd->n;
                for (size_t i = 0; i < nd->n; i++) {
                        const struct tsr_accel_ledger *l = &nd->ledger[i];
                        struct rcard *rc = &rn->card[i];

                        rc->p = nd->caps[i].product;
                        rc->part = nd->caps[i].partitioned;
                        rc->offered = nd->caps[i].offered;
                        rc->slots = nd->caps[i].slice_slots;
                        rc->mode = l->mode;
                        rc->allocated = l->allocated;
                        rc->slices = l->allocated_slices;
                        for (unsigned x = 0; x < l->live.n; x++) {
                                const struct tsr_mig_profile *mp =
                                    &rc->p->profiles[l->live.inst[x].profile];

                                for (unsigned s = 0; s < mp->size; s++)
                                        rc->occ[l->live.inst[x].start + s] = true;
                                rc->live_of[l->live.inst[x].profile]++;
                        }
                }
        }
}

static void ref_charge(struct rcard *c, enum tsr_mode mode, int64_t units)
{
        if (c->mode == TSR_MODE_NONE)
                c->mode = mode;
        c->allocated += units;
}

static bool ref_exclusive(struct rnode *n, unsigned cards)
{
        unsigned whole = 0;

        for (size_t i = 0; i < n->n; i++)
                whole +=
                    !n->card[i].part && n->card[i].mode == TSR_MODE_NONE && rrem(&n->card[i]) >= M;
        if (whole < cards)
                return false;
        for (size_t i = 0; i < n->n && cards > 0; i++) {
                if (n->card[i].part || n->card[i].mode != TSR_MODE_NONE || rrem(&n->card[i]) < M)
                        continue;
                ref_charge(&n->card[i], TSR_MODE_EXCLUSIVE, M);
                cards--;
        }
        return true;
}

static bool ref_shared(struct rnode *n, unsigned cards)
{
        size_t list[MAX_ACCEL], len = 0;

        for (size_t i = 0; i < n->n; i++) {
                const struct rcard *c = &n->card[i];

                if (!c->part && (c->mode == TSR_MODE_NONE || c->mode == TSR_MODE_SHARED) &&
                    rrem(c) >= SHARE)
                        list[len++] = i;
        }
        if (len < cards)
                return false;
        /* Selection sort by (remaining, position). */
        for (size_t a = 0; a < len; a++)
                for (size_t b = a + 1; b < len; b++) {
                        int64_t ra = rrem(&n->card[list[a]]), rb = rrem(&n->card[list[b]]);

                        if (rb < ra || (rb == ra && list[b] < list[a])) {
                                size_t t = list[a];

                                list[a] = list[b];
                                list[b] = t;
                        }
                }
        for (unsigned k = 0; k < cards; k++)
                ref_charge(&n->card[list[k]], TSR_MODE_SHARED, SHARE);
        return true;
}

static bool ref_slice(struct rnode *n, int64_t units)
{
        int best = -1;

        for (size_t i = 0; i < n->n; i++) {
                const struct rcard *c = &n->card[i];

                if (c->part || c->slots == 0 || c->slices >= c->slots || rrem(c) < units)
                        continue;
                if (c->mode != TSR_MODE_NONE && c->mode != TSR_MODE_SLICED)
                        continue;
                if (best < 0 || rrem(c) < rrem(&n->card[best]))
                        best = (int)i;
        }
        if (best < 0)
                return false;
        n->card[best].slices++;
        ref_charge(&n->card[best], TSR_MODE_SLICED, units);
        return true;
}

static bool ref_partition(struct rnode *n, const char *profile, int64_t units)
{
        int best = -1, best_used = -1, best_start = -1, best_prof = -1;

        for (size_t i = 0; i < n->n; i++) {
                const struct rcard *c = &n->card[i];
                const struct tsr_mig_profile *mp = NULL;
                int prof = -1, start = -1, used = 0;

                if (!c->part)
                        continue;
                for (unsigned k = 0; k < c->p->n_profiles; k++)
                        if ((c->offered & S(k)) && strcmp(c->p->profiles[k].name, profile) == 0)
                                prof = (int)k;
                if (prof < 0)
                        continue;
                mp = &c->p->profiles[prof];
                if (c->live_of[prof] >= mp->max_instances)
                        continue;
                for (unsigned s = 0; s + mp->size <= TSR_MIG_AXIS_MAX && start < 0; s++) {
                        bool clash = false;

                        if (!(mp->starts & S(s)))
                                continue;
                        for (unsigned x = s; x < s + mp->size; x++)
                                clash |= c->occ[x];
                        if (!clash)
                                start = (int)s;
                }
                if (start < 0)
                        continue;
                for (unsigned s = 0; s < TSR_MIG_AXIS_MAX; s++)
                        used += c->occ[s];
                if (used > best_used) {
                        best = (int)i;
                        best_used = used;
                        best_start = start;
                        best_prof = prof;
                }
        }
        if (best < 0)
                return false;
        for (unsigned x = 0; x < n->card[best].p->profiles[best_prof].size; x++)
                n->card[best].occ[best_start + (int)x] = true;
        n->card[best].live_of[best_prof]++;
        ref_charge(&n->card[best], TSR_MODE_PARTITIONED, units);
        return true;
}

/* One Pod of ps on node n, as the allocator would place it; false when it does not fit. */
static bool ref_place(struct rnode *n, const struct tsr_admit_podset *ps)
{
        const struct tsr_demand *d = &ps->demand;

        if (!n->present || n->flavor != ps->flavor)
                return false;
        switch (d->family) {
        case TSR_FAMILY_EXCLUSIVE:
                return ref_exclusive(n, d->cards);
        case TSR_FAMILY_SHARED:
                return ref_shared(n, d->cards);
        case TSR_FAMILY_SLICED:
                return ref_slice(n, d->units);
        case TSR_FAMILY_PARTITIONED:
                return ref_partition(n, d->profile, d->units);
        default:
                return true;
        }
}

static int64_t ref_units(const struct tsr_demand *d)
{
        return d->family == TSR_FAMILY_EXCLUSIVE ? M
               : d->family == TSR_FAMILY_SHARED  ? SHARE
                                                 : d->units;
}

/* Whether PodSet a goes after PodSet b: partitions first, more units first, then family. */
static bool ref_after(const struct tsr_admit_podset *a, const struct tsr_admit_podset *b)
{
        bool pa = a->demand.family == TSR_FAMILY_PARTITIONED;
        bool pb = b->demand.family == TSR_FAMILY_PARTITIONED;

        if (pa != pb)
                return pb;
        if (ref_units(&a->demand) != ref_units(&b->demand))
                return ref_units(&a->demand) < ref_units(&b->demand);
        return a->demand.family > b->demand.family;
}

static struct rverdict ref_judge(const struct cluster *c, const struct tsr_admit_workload *infl,
                                 size_t n_infl, const struct tsr_admit_workload *w)
{
        static struct rmodel m;
        struct rverdict out = {.ready = true};
        size_t order[MAX_PODSETS], by_name[MAX_NODES];

        ref_load(c, &m);
        /* Inflight Workloads, PodSets as declared, each Pod best effort on its assigned node. */
        for (size_t i = 0; i < n_infl; i++)
                for (size_t p = 0; p < infl[i].n_podsets; p++) {
                        const struct tsr_admit_podset *ps = &infl[i].podsets[p];

                        for (size_t x = 0; x < ps->n_placements; x++)
                                for (unsigned k = 0; k < ps->placements[x].pods; k++)
                                        ref_place(&m.node[ps->placements[x].node], ps);
                }
        /* PodSets by a stable bubble sort; nodes by name. */
        for (size_t p = 0; p < w->n_podsets; p++)
                order[p] = p;
        for (size_t pass = 0; pass < w->n_podsets; pass++)
                for (size_t p = 0; p + 1 < w->n_podsets; p++)
                        if (ref_after(&w->podsets[order[p]], &w->podsets[order[p + 1]])) {
                                size_t t = order[p];

                                order[p] = order[p + 1];
                                order[p + 1] = t;
                        }
        for (size_t k = 0; k < m.n; k++)
                by_name[k] = k;
        for (size_t pass = 0; pass < m.n; pass++)
                for (size_t k = 0; k + 1 < m.n; k++)
                        if (strcmp(m.node[by_name[k]].name, m.node[by_name[k + 1]].name) > 0) {
                                size_t t = by_name[k];

                                by_name[k] = by_name[k + 1];
                                by_name[k + 1] = t;
                        }
        for (size_t o = 0; o < w->n_podsets; o++) {
                const struct tsr_admit_podset *ps = &w->podsets[order[o]];

                if (ps->demand.family == TSR_FAMILY_NONE)
                        continue;
                out.podset = order[o];
                for (size_t x = 0; x < ps->n_placements; x++) {
                        struct rnode *n = &m.node[ps->placements[x].node];

                        out.node = (int)ps->placements[x].node;
                        if (!n->present) {
                                out.ready = false;
                                out.gone = true;
                                return out;
                        }
                        for (unsigned k = 0; k < ps->placements[x].pods; k++)
                                if (!ref_place(n, ps)) {
                                        out.ready = false;
                                        return out;
                                }
                }
                if (ps->n_placements)
                        continue;
                out.node = -1;
                for (unsigned k = 0; k < ps->count; k++) {
                        bool placed = false;

                        for (size_t j = 0; j < m.n && !placed; j++)
                                placed = ref_place(&m.node[by_name[j]], ps);
                        if (!placed) {
                                out.ready = false;
                                return out;
                        }
                }
        }
        return out;
}

/* ---- random cases --------------------------------------------------------------------------- */

static const char *const node_names[] = {"gpu-d", "gpu-a", "gpu-c", "gpu-b", "gpu-aa"};
static const int64_t slice_units[] = {16000,  160000, 320000,  480000,  640000,
                                      800000, 960000, 1120000, 1440000, 1600000};
static const char *const foreign_profiles[] = {"3g.71gb", "bogus", "1g.5gb", "2g.15gb", ""};

static int64_t profile_units(const struct tsr_product *p, const struct tsr_mig_profile *mp)
{
        int64_t u = (int64_t)(tsr_mig_profile_nominal_mib(mp) * (uint64_t)M / p->vram_mib);

        return u > 0 ? u : 1;
}

/* Random valid records for accelerator i of node k. */
static void random_records(struct cluster *c, size_t k, unsigned i)
{
        struct node *nd = &c->node[k];
        const struct tsr_accel_cap *cap = &nd->caps[i];
        struct tsr_alloc_record r = {.accel = i, .profile = -1};

        if (cap->partitioned) {
                const struct tsr_product *p = cap->product;
                struct tsr_mig_live live = {0};
                unsigned steps = rnd(5);

                for (unsigned s = 0; s < steps; s++) {
                        unsigned prof = rnd((unsigned)p->n_profiles);
                        const struct tsr_mig_profile *mp = &p->profiles[prof];
                        unsigned start = rnd_start(mp->starts);

                        if (tsr_geometry_live_count(&live, prof) >= mp->max_instances &&
                            rnd(8) != 0)
                                continue;
                        if (tsr_geometry_add(p, &live, prof, start) != 0)
                                continue;
                        r.mode = TSR_MODE_PARTITIONED;
                        r.units = profile_units(p, mp);
                        r.profile = (int)prof;
                        r.start = start;
                        r.finished = rnd(5) == 0; /* still charged */
                        rec_add(c, k, &r);
                }
                return;
        }
        switch (rnd(8)) {
        case 0:
        case 1:
        case 2:
                break;
        case 3:
                r.mode = TSR_MODE_EXCLUSIVE;
                r.units = M;
                r.finished = rnd(4) == 0; /* no longer charged */
                rec_add(c, k, &r);
                break;
        case 4: {
                unsigned n = 1 + rnd(4);

                for (unsigned x = 0; x < n; x++) {
                        r.mode = TSR_MODE_SHARED;
                        r.shares = 1 + (rnd(3) == 0 ? rnd(9) : 0);
                        r.units = SHARE * r.shares;
                        r.finished = rnd(6) == 0;
                        rec_add(c, k, &r);
                }
                break;
        }
        default: {
                unsigned n = 1 + rnd(3);

                if (rnd(6) == 0 && nd->nrec + cap->slice_slots + 8 < MAX_RECS)
                        n = cap->slice_slots - rnd(2); /* all slots, or all but one */
                for (unsigned x = 0; x < n; x++) {
                        r.mode = TSR_MODE_SLICED;
                        r.units = n > 4 ? 1000 + rnd(4000) : slice_units[rnd(7)];
                        r.finished = rnd(8) == 0;
                        rec_add(c, k, &r);
                }
                break;
        }
        }
        if (rnd(20) == 0) { /* a record of another mode still charges */
                struct tsr_alloc_record x = {.accel = i, .profile = -1, .shares = 1};

                x.mode = rnd(2) ? TSR_MODE_EXCLUSIVE : TSR_MODE_SLICED;
                x.units = x.mode == TSR_MODE_EXCLUSIVE ? M : slice_units[rnd(4)];
                rec_add(c, k, &x);
        }
}

/* A product for the pool: a catalog product or the Hygon-like one. */
static const struct tsr_product *random_product(void)
{
        const struct tsr_product *products;
        size_t np = tsr_catalog_products(&products);
        unsigned k = rnd((unsigned)np + 2);

        return k >= np ? &fx_hygon_c3000 : &products[k];
}

static void random_cluster(struct cluster *c, const struct tsr_product *flavor_product[2])
{
        size_t n = 1 + rnd(MAX_NODES);
        unsigned first = rnd(N_ELEMS(node_names));
        unsigned load = rnd(4); /* accelerators with records: none, 1/3, 2/3 or all */

        cluster_reset(c);
        for (size_t k = 0; k < n; k++) {
                unsigned flavor = rnd(3) == 0;
                const struct tsr_product *p =
                    rnd(8) == 0 ? random_product() : flavor_product[flavor];
                size_t g = 1 + rnd(MAX_ACCEL);
                uint32_t parted = 0;
                unsigned mig = rnd(3); /* none, some, all in MIG mode */

                for (size_t i = 0; i < g; i++)
                        if (mig == 2 || (mig == 1 && rnd(2)))
                                parted |= S(i);
                node_add(c, node_names[(first + k) % N_ELEMS(node_names)], p, g, parted, flavor);
                c->node[k].present = rnd(16) != 0;
                for (unsigned i = 0; i < g; i++)
                        if (rnd(3) < load)
                                random_records(c, k, i);
        }
        cluster_build(c);
}

static struct tsr_demand random_demand(const struct tsr_product *p)
{
        switch (rnd(4)) {
        case 0:
                return exclusive(rnd(10) == 0 ? 1 + rnd(9) : 1 + rnd(3));
        case 1:
                return shared(rnd(10) == 0 ? 1 + rnd(9) : 1 + rnd(3));
        case 2:
                return sliced(rnd(4) == 0 ? 1 + (int64_t)rnd((unsigned)M)
                                          : slice_units[rnd(N_ELEMS(slice_units))]);
        default:
                if (tsr_product_has_mig(p) && rnd(8) != 0) {
                        const struct tsr_mig_profile *mp =
                            &p->profiles[rnd((unsigned)p->n_profiles)];

                        return partition(mp->name, profile_units(p, mp));
                }
                return partition(foreign_profiles[rnd(N_ELEMS(foreign_profiles))],
                                 1 + (int64_t)rnd((unsigned)M));
        }
}

/* A node for a PodSet of flavor: usually one of that flavor. */
static size_t random_node(const struct cluster *c, unsigned flavor)
{
        size_t k = rnd((unsigned)c->n);

        for (int tries = 0; tries < 4 && c->node[k].flavor != flavor && rnd(6) != 0; tries++)
                k = rnd((unsigned)c->n);
        return k;
}

static void random_workload(const struct cluster *c, struct wl *w, const char *name,
                            const struct tsr_product *flavor_product[2], bool inflight)
{
        unsigned n = rnd(10) < 6 ? 1 : rnd(10) < 7 ? 2 : 3;

        wl_init(w, name);
        for (unsigned p = 0; p < n; p++) {
                char psname[8];
                unsigned flavor = rnd(10) == 0 ? rnd(2) : c->node[rnd((unsigned)c->n)].flavor;
                unsigned count = rnd(4) == 0 ? 3 : 1 + rnd(2);
                struct tsr_demand d = rnd(25) == 0 ? (struct tsr_demand){.family = TSR_FAMILY_NONE}
                                                   : random_demand(flavor_product[flavor]);
                size_t i;

                snprintf(psname, sizeof(psname), "ps%u", p);
                i = wl_podset(w, psname, d, count, flavor);
                if (rnd(inflight ? 4 : 3) == 0)
                        continue; /* no hostname-level assignment */
                if (inflight) {
                        unsigned np = 1 + rnd(2);

                        for (unsigned x = 0; x < np; x++)
                                wl_place(w, i, random_node(c, flavor), rnd(3));
                        continue;
                }
                if (count == 1 || rnd(2)) {
                        wl_place(w, i, random_node(c, flavor), count);
                } else {
                        unsigned first = 1 + rnd(count - 1);

                        wl_place(w, i, random_node(c, flavor), first);
                        wl_place(w, i, random_node(c, flavor), count - first);
                }
        }
}

/* Up to MAX_INFL random inflight Workloads on cl into infl and list; returns how many. */
static size_t random_inflights(struct wl *infl, struct tsr_admit_workload *list,
                               const struct tsr_product *flavor_product[2])
{
        unsigned n = rnd(MAX_INFL + 1);

        for (unsigned i = 0; i < n; i++) {
                char name[24];

                snprintf(name, sizeof(name), "inflight%u", i);
                random_workload(&cl, &infl[i], name, flavor_product, true);
                list[i] = infl[i].w;
        }
        return n;
}

static void print_demand(const struct tsr_admit_podset *ps)
{
        const struct tsr_demand *d = &ps->demand;

        print_message("#     podset %s flavor %u count %u: %s cards %u units %lld profile \"%s\"; "
                      "placements",
                      ps->name, ps->flavor, ps->count, tsr_family_name(d->family), d->cards,
                      (long long)d->units, d->profile);
        for (size_t x = 0; x < ps->n_placements; x++)
                print_message(" node%zu:%u", ps->placements[x].node, ps->placements[x].pods);
        print_message("%s\n", ps->n_placements ? "" : " none");
}

static void print_case(const struct cluster *c, const struct wl *infl, size_t n_infl,
                       const struct wl *w)
{
        for (size_t k = 0; k < c->n; k++) {
                const struct node *nd = &c->node[k];

                print_message("#   node%zu \"%s\" present %d flavor %u: %s\n", k, nd->name,
                              nd->present, nd->flavor, nd->n ? nd->caps[0].product->name : "-");
                for (size_t i = 0; i < nd->n; i++) {
                        const struct tsr_accel_ledger *l = &nd->ledger[i];

                        print_message(
                            "#     accel %zu %s slots %u: %s allocated %lld remaining %lld "
                            "slices %u live",
                            i, nd->caps[i].partitioned ? "MIG" : "whole", nd->caps[i].slice_slots,
                            tsr_mode_name(l->mode), (long long)l->allocated,
                            (long long)l->remaining, l->allocated_slices);
                        for (unsigned x = 0; x < l->live.n; x++)
                                print_message(
                                    " %s@%u",
                                    nd->caps[i].product->profiles[l->live.inst[x].profile].name,
                                    l->live.inst[x].start);
                        print_message("\n");
                }
        }
        for (size_t i = 0; i < n_infl; i++) {
                print_message("#   inflight %s\n", infl[i].name);
                for (size_t p = 0; p < infl[i].w.n_podsets; p++)
                        print_demand(&infl[i].ps[p]);
        }
        print_message("#   judged %s\n", w->name);
        for (size_t p = 0; p < w->w.n_podsets; p++)
                print_demand(&w->ps[p]);
}

/* The code's verdict agrees with the reference's, and its message names what the reference
 * found short: the node (or the pool) and, for several PodSets, the role. */
static bool agrees(const struct cluster *c, const struct wl *w, const struct rverdict *r,
                   const struct tsr_admit_verdict *v, char *why, size_t len)
{
        char want[96];

        if (r->ready)
                return v->state == TSR_CHECK_READY &&
                       strcmp(v->message, TSR_ADMIT_READY_MESSAGE) == 0;
        if (v->state != TSR_CHECK_RETRY) {
                snprintf(why, len, "state %s", tsr_check_state_name(v->state));
                return false;
        }
        if (r->node >= 0)
                snprintf(want, sizeof(want), "node \"%s\"", c->node[r->node].name);
        else
                snprintf(want, sizeof(want), "the flavor's node pool");
        if (!strstr(v->message, want)) {
                snprintf(why, len, "message lacks %s", want);
                return false;
        }
        snprintf(want, sizeof(want), "role \"%s\"", w->ps[r->podset].name);
        if (w->w.n_podsets > 1 && !strstr(v->message, want)) {
                snprintf(why, len, "message lacks %s", want);
                return false;
        }
        if (w->w.n_podsets == 1 && strstr(v->message, "role")) {
                snprintf(why, len, "message names a role");
                return false;
        }
        if (r->gone != (strstr(v->message, "no longer exists") != NULL)) {
                snprintf(why, len, "gone node %s", r->gone ? "not reported" : "reported");
                return false;
        }
        return true;
}

static void test_admit__matches_reference(void **state)
{
        static struct wl infl[MAX_INFL], w;
        unsigned compared = 0, ready = 0, with_inflight = 0, pooled = 0, multi = 0;

        (void)state;
        rng_seed(2024);
        for (int round = 0; round < 6000; round++) {
                const struct tsr_product *fp[2] = {random_product(), random_product()};
                size_t n_infl;
                struct tsr_admit_workload list[MAX_INFL];

                if (rnd(2))
                        fp[1] = fp[0];
                random_cluster(&cl, fp);
                n_infl = random_inflights(infl, list, fp);
                for (int q = 0; q < 4; q++) {
                        struct tsr_admit_verdict v;
                        struct tsr_diag diag = {0};
                        struct rverdict r;
                        char why[128] = "";
                        int rc;

                        random_workload(&cl, &w, "judged", fp, false);
                        memset(&v, 0x5a, sizeof(v));
                        rc = tsr_admit_judge(cl.an, cl.n, list, n_infl, &w.w, &v, &diag);
                        r = ref_judge(&cl, list, n_infl, &w.w);
                        if (rc != 0 || !agrees(&cl, &w, &r, &v, why, sizeof(why))) {
                                print_message("# round %d query %d:\n", round, q);
                                print_case(&cl, infl, n_infl, &w);
                                fail_msg("tsr_admit_judge: %s %s \"%.*s\" (%s); reference: %s "
                                         "(podset %zu, node %d)",
                                         tsr_err_name(rc), tsr_check_state_name(v.state),
                                         (int)sizeof(v.message), v.message, why,
                                         r.ready ? "Ready" : "Retry", r.podset, r.node);
                        }
                        compared++;
                        ready += r.ready;
                        with_inflight += n_infl > 0;
                        pooled += !r.ready && r.node < 0;
                        multi += !r.ready && w.w.n_podsets > 1;
                }
        }
        print_message("# compared %u verdicts (%u Ready, %u with inflight Workloads)\n", compared,
                      ready, with_inflight);
        assert_true(compared >= 20000);
        /* Both verdicts, and every kind of Retry, are exercised. */
        assert_true(ready > compared / 5 && ready < compared * 4 / 5);
        assert_true(pooled > 500 && multi > 500);
}

/*
 * The pool walk starts past nodes that cannot host one Pod, and only those: not past a node an
 * earlier verdict placed on (it undid that), nor past one an earlier PodSet of the same verdict
 * filled (the base still has room there).
 */
static void test_admit__pool_walk_skips_only_full_nodes(void **state)
{
        struct tsr_admit_pool *pool = NULL;
        struct tsr_diag diag = {0};
        struct tsr_admit_verdict v;
        struct wl one, two, mixed;
        size_t a;

        (void)state;
        cluster_reset(&cl);
        a = node_add(&cl, "a", fx_product(H100_NAME), 2, 0, 0);
        node_add(&cl, "b", fx_product(H100_NAME), 1, 0, 0);
        node_add(&cl, "c", fx_product(H100_NAME), 1, 0, 0);
        rec_exclusive(&cl, a, 0); /* a: one free card; b: full; c: one free card */
        rec_exclusive(&cl, 1, 0);
        cluster_build(&cl);
        assert_int_equal(tsr_admit_pool_new(cl.an, cl.n, &pool, &diag), 0);

        wl_init(&one, "one");
        wl_podset(&one, "main", exclusive(1), 1, 0);
        wl_init(&two, "two");
        wl_podset(&two, "main", exclusive(1), 2, 0);
        wl_init(&mixed, "mixed");
        wl_place(&mixed, wl_podset(&mixed, "pinned", exclusive(1), 1, 0), a, 1);
        wl_podset(&mixed, "pool", exclusive(1), 1, 0);

        assert_int_equal(tsr_admit_pool_judge(pool, &one.w, &v, &diag), 0);
        expect_ready(&v);
        assert_int_equal(tsr_admit_pool_judge(pool, &two.w, &v, &diag), 0);
        expect_ready(&v); /* a and c */
        assert_int_equal(tsr_admit_pool_judge(pool, &mixed.w, &v, &diag), 0);
        expect_ready(&v); /* a pinned, c from the pool: a was full only inside this verdict */
        assert_int_equal(tsr_admit_pool_judge(pool, &two.w, &v, &diag), 0);
        expect_ready(&v);
        two.ps[0].count = 3;
        assert_int_equal(tsr_admit_pool_judge(pool, &two.w, &v, &diag), 0);
        expect_retry(&v, "the flavor's node pool fits 2 of 3 Pods: each needs 1 whole "
                         "accelerator, 1 more do not fit; will retry as capacity frees");
        tsr_admit_pool_free(pool);
}

/*
 * A pool built once and judged many times answers exactly what a fresh tsr_admit_judge answers
 * for the same nodes and charges: verdicts in any order and repeated (the undo log leaves the pool
 * as it was, the pool walk's memo only skips nodes that cannot host), a charge between verdicts,
 * and a node added after the pool was built.
 */
static void test_admit__pool_judges_like_once(void **state)
{
        static struct wl infl[MAX_INFL + 1], w[6];
        unsigned compared = 0, late_charges = 0, added = 0;

        (void)state;
        rng_seed(4242);
        for (int round = 0; round < 3000; round++) {
                const struct tsr_product *fp[2] = {random_product(), random_product()};
                struct tsr_admit_workload list[MAX_INFL + 1];
                struct tsr_admit_pool *pool = NULL;
                struct tsr_diag diag = {0};
                size_t n_infl, n_pool;

                if (rnd(2))
                        fp[1] = fp[0];
                random_cluster(&cl, fp);
                /* the last node joins the pool after it was built, now and then */
                n_pool = cl.n > 1 && rnd(4) == 0 ? cl.n - 1 : cl.n;
                assert_int_equal(tsr_admit_pool_new(cl.an, n_pool, &pool, &diag), 0);
                if (n_pool < cl.n) {
                        size_t at;

                        assert_int_equal(tsr_admit_pool_add(pool, &cl.an[n_pool], &at, &diag), 0);
                        assert_int_equal(at, n_pool);
                        added++;
                }
                assert_int_equal(tsr_admit_pool_nodes(pool), cl.n);
                n_infl = random_inflights(infl, list, fp);
                for (size_t i = 0; i < n_infl; i++)
                        assert_int_equal(tsr_admit_pool_charge(pool, &list[i], &diag), 0);
                for (size_t q = 0; q < N_ELEMS(w); q++)
                        random_workload(&cl, &w[q], "judged", fp, false);
                for (int q = 0; q < 12; q++) {
                        const struct tsr_admit_workload *target = &w[rnd(N_ELEMS(w))].w;
                        struct tsr_admit_verdict once, pooled;

                        if (q == 6 && rnd(2)) { /* a Workload turns inflight between verdicts */
                                random_workload(&cl, &infl[n_infl], "late", fp, true);
                                list[n_infl] = infl[n_infl].w;
                                assert_int_equal(tsr_admit_pool_charge(pool, &list[n_infl], &diag),
                                                 0);
                                n_infl++;
                                late_charges++;
                        }
                        memset(&once, 0x5a, sizeof(once));
                        memset(&pooled, 0xa5, sizeof(pooled));
                        assert_int_equal(
                            tsr_admit_judge(cl.an, cl.n, list, n_infl, target, &once, &diag), 0);
                        assert_int_equal(tsr_admit_pool_judge(pool, target, &pooled, &diag), 0);
                        if (once.state != pooled.state || strcmp(once.message, pooled.message)) {
                                print_message("# round %d query %d:\n", round, q);
                                print_case(&cl, infl, n_infl, &w[0]);
                                fail_msg("pool: %s \"%s\"; once: %s \"%s\"",
                                         tsr_check_state_name(pooled.state), pooled.message,
                                         tsr_check_state_name(once.state), once.message);
                        }
                        compared++;
                }
                tsr_admit_pool_free(pool);
        }
        print_message("# compared %u pool verdicts with fresh ones (%u late charges, %u added "
                      "nodes)\n",
                      compared, late_charges, added);
        assert_true(compared >= 30000 && late_charges > 1000 && added > 500);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_admit__state_names),
            cmocka_unit_test(test_admit__longest_retry_message_is_whole),
            cmocka_unit_test(test_admit__sliced_halves_cannot_serve_whole),
            cmocka_unit_test(test_admit__two_30pct_slices_share_one_card),
            cmocka_unit_test(test_admit__two_60pct_slices_need_two_cards),
            cmocka_unit_test(test_admit__slice_only_on_free_or_sliced_card),
            cmocka_unit_test(test_admit__slice_slots_are_counted),
            cmocka_unit_test(test_admit__shared_needs_distinct_cards),
            cmocka_unit_test(test_admit__partitions_by_free_placement),
            cmocka_unit_test(test_admit__tas_node_hosts_its_own_pods),
            cmocka_unit_test(test_admit__no_placement_judged_across_pool),
            cmocka_unit_test(test_admit__gone_node_holds),
            cmocka_unit_test(test_admit__flavor_scopes_accelerators),
            cmocka_unit_test(test_admit__budget_global_to_workload),
            cmocka_unit_test(test_admit__role_named_only_with_several_podsets),
            cmocka_unit_test(test_admit__inflight_charged_first),
            cmocka_unit_test(test_admit__podset_order),
            cmocka_unit_test(test_admit__podset_without_demand),
            cmocka_unit_test(test_admit__placement_out_of_range),
            cmocka_unit_test(test_admit__matches_reference),
            cmocka_unit_test(test_admit__pool_walk_skips_only_full_nodes),
            cmocka_unit_test(test_admit__pool_judges_like_once),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
