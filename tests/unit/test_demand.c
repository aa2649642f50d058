/*
 * test_demand.c - core/demand: what a Pod, or one of its containers, asks of one manufacturer's
 * accelerators, as gates 3 and 5 see it (spec/upstream-behavior.md §7 "Demand parsing").
 *
 * Every row is a Pod written as compact container rows ("key=value" lists parsed with
 * tsr_quantity_parse) and the demand it must give on NVIDIA. Covered, per Pod: cards summed over
 * init and app containers (exclusive, shared), native sidecars ignored, requests before limits,
 * sliced/partitioned cards = 1 with units = the largest .units, profile = the smallest name,
 * visibility, RDMA, cpu and other manufacturers' keys ignored, a mixed Pod reporting the first
 * family in the order exclusive, shared, sliced, partitioned with that family's shape alone and
 * the mixed flag, and the card count
 * saturating at TSR_DEMAND_CARDS_MAX. Per container: the container alone, a sidecar included, an
 * index past the Pod. Then tsr_demand_units_per_card (per-card need: 1,600,000 exclusive, 160,000
 * shared, the units for a slice or a partition) and tsr_demand_describe.
 *
 * Expected values come from the spec and the header's contract, never the code's output.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/catalog.h"
#include "core/demand.h"

#include "support/pod_rows.h"

#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

#define APP     TSR_CG_APP
#define INIT    TSR_CG_INIT
#define SIDECAR TSR_CG_SIDECAR

#define EX   TSR_FAMILY_EXCLUSIVE
#define SHF  TSR_FAMILY_SHARED
#define SLF  TSR_FAMILY_SLICED
#define PTF  TSR_FAMILY_PARTITIONED
#define NONE TSR_FAMILY_NONE

#define G            "nvidia.com/gpu"
#define SH           G ".shared"
#define SL           G ".sliced"
#define SLU          SL ".units"
#define PCT          SL ".memory-percentage"
#define CORES        SL ".cores-percentage"
#define PT           G ".partitioned"
#define PTU          PT ".units"
#define MIG(profile) PT ".mig-" profile
#define VIS          "device.gpustack.ai/nvidia.visibility"

#define ROW_CONTAINERS 4
#define ROW_LIST_MAX   384

struct want {
        enum tsr_family family;
        unsigned cards;
        int64_t units;
        const char *profile; /* NULL: none */
        bool mixed;
};

struct row {
        const char *what;
        struct pod_row c[ROW_CONTAINERS]; /* up to the first with neither list */
        struct want want;
};

/* The pod a row builds, and the text its items borrow. Static: a tsr_pod_req is large. */
static struct pod_rows built;

static const struct tsr_pod_req *build_pod(const char *what, const struct pod_row *rows)
{
        return pod_rows_build(&built, ROW_LIST_MAX, what, rows, ROW_CONTAINERS,
                              POD_ROWS_INDEX_POSITION);
}

static const struct tsr_manufacturer *nvidia(void)
{
        return tsr_catalog_manufacturer(TSR_MFR_NVIDIA);
}

static void check_demand(const char *what, const struct tsr_demand *d, const struct want *w)
{
        const char *profile = w->profile ? w->profile : "";

        if (d->family != w->family)
                fail_msg("%s: family %s, want %s", what, tsr_family_name(d->family),
                         tsr_family_name(w->family));
        if (d->cards != w->cards)
                fail_msg("%s: %u cards, want %u", what, d->cards, w->cards);
        if (d->units != w->units)
                fail_msg("%s: units %lld, want %lld", what, (long long)d->units,
                         (long long)w->units);
        if (strcmp(d->profile, profile) != 0)
                fail_msg("%s: profile \"%s\", want \"%s\"", what, d->profile, profile);
        if (d->mixed != w->mixed)
                fail_msg("%s: mixed %d, want %d", what, d->mixed, w->mixed);
}

static void check_pod_rows(const struct row *rows, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                struct tsr_demand d;

                memset(&d, 0x5a, sizeof(d));
                tsr_demand_of_pod(build_pod(rows[i].what, rows[i].c), nvidia(), &d);
                check_demand(rows[i].what, &d, &rows[i].want);
        }
}

static void test_demand__pod_exclusive_and_shared_cards(void **state)
{
        static const struct row rows[] = {
            {"one app, one card", {{APP, G "=1", NULL}}, {EX, 1, 0, NULL, false}},
            {"two apps add up",
             {{APP, G "=1", NULL}, {APP, G "=2", NULL}},
             {EX, 3, 0, NULL, false}},
            /* §7: cards = sum over init + app containers (not the scheduler's max) */
            {"init and app add up",
             {{INIT, G "=2", NULL}, {APP, G "=1", NULL}},
             {EX, 3, 0, NULL, false}},
            {"init only", {{INIT, G "=4", NULL}}, {EX, 4, 0, NULL, false}},
            {"a sidecar is ignored",
             {{SIDECAR, G "=2", NULL}, {APP, G "=1", NULL}},
             {EX, 1, 0, NULL, false}},
            {"a sidecar alone asks nothing", {{SIDECAR, SH "=2", NULL}}, {NONE, 0, 0, NULL, false}},
            {"requests before limits", {{APP, G "=3", G "=2"}}, {EX, 2, 0, NULL, false}},
            {"limit alone", {{APP, G "=3", NULL}}, {EX, 3, 0, NULL, false}},
            {"shares", {{APP, SH "=2", NULL}}, {SHF, 2, 0, NULL, false}},
            {"shares over init and app",
             {{INIT, SH "=1", NULL}, {APP, SH "=2", NULL}, {APP, NULL, SH "=3"}},
             {SHF, 6, 0, NULL, false}},
            {"zero cards keep the family", {{APP, G "=0", NULL}}, {EX, 0, 0, NULL, false}},
        };

        (void)state;
        check_pod_rows(rows, N_ELEMS(rows));
}

static void test_demand__pod_sliced_and_partitioned(void **state)
{
        static const struct row rows[] = {
            {"50 % slice",
             {{APP, SL "=1 " PCT "=50 " CORES "=100 " SLU "=800000", NULL}},
             {SLF, 1, 800000, NULL, false}},
            {"slice units from requests",
             {{APP, SL "=1 " SLU "=1", SL "=1 " SLU "=640000"}},
             {SLF, 1, 640000, NULL, false}},
            /* the largest .units of any container */
            {"units = the max",
             {{APP, SL "=1 " SLU "=480000", NULL},
              {APP, SL "=1 " SLU "=960000", NULL},
              {APP, SL "=1 " SLU "=160000", NULL}},
             {SLF, 1, 960000, NULL, false}},
            {"slice without folded units",
             {{APP, SL "=1 " PCT "=30", NULL}},
             {SLF, 1, 0, NULL, false}},
            {"3g.40gb",
             {{APP, PT "=1 " MIG("3g.40gb") "=1 " PTU "=800000", NULL}},
             {PTF, 1, 800000, "3g.40gb", false}},
            /* several profiles (refused by gate 1): the smallest name */
            {"smallest profile name",
             {{APP, PT "=1 " MIG("3g.40gb") "=1 " MIG("1g.10gb") "=1 " PTU "=800000", NULL}},
             {PTF, 1, 800000, "1g.10gb", false}},
            {"smallest across containers",
             {{APP, PT "=1 " MIG("7g.80gb") "=1 " PTU "=1600000", NULL},
              {APP, PT "=1 " MIG("2g.20gb") "=1 " PTU "=400000", NULL},
              {APP, PT "=1 " MIG("1g.20gb") "=1 " PTU "=400000", NULL}},
             {PTF, 1, 1600000, "1g.20gb", false}},
            {"partition units = the max",
             {{INIT, PT "=1 " MIG("1g.10gb") "=1 " PTU "=200000", NULL},
              {APP, PT "=1 " MIG("1g.10gb") "=1 " PTU "=195000", NULL}},
             {PTF, 1, 200000, "1g.10gb", false}},
        };

        (void)state;
        check_pod_rows(rows, N_ELEMS(rows));
}

static void test_demand__pod_ignores_other_keys(void **state)
{
        static const struct row rows[] = {
            {"no containers", {{0}}, {NONE, 0, 0, NULL, false}},
            {"cpu and memory only",
             {{APP, "cpu=2 memory=4Gi", "cpu=1"}},
             {NONE, 0, 0, NULL, false}},
            {"visibility only", {{APP, VIS "=1", NULL}}, {NONE, 0, 0, NULL, false}},
            {"visibility beside a slice",
             {{APP, SL "=1 " SLU "=800000", NULL}, {APP, VIS "=1", NULL}},
             {SLF, 1, 800000, NULL, false}},
            {"visibility beside whole cards",
             {{APP, G "=2 " VIS "=2", NULL}},
             {EX, 2, 0, NULL, false}},
            {"rdma", {{APP, "device.gpustack.ai/rdma=1", NULL}}, {NONE, 0, 0, NULL, false}},
            {"another manufacturer", {{APP, "amd.com/gpu=2", NULL}}, {NONE, 0, 0, NULL, false}},
            {"another manufacturer's visibility",
             {{APP, "device.gpustack.ai/amd.visibility=1 hygon.com/dcu.shared=2", NULL}},
             {NONE, 0, 0, NULL, false}},
            {"another manufacturer beside nvidia",
             {{APP, "amd.com/gpu=2 " G "=1", NULL}, {APP, "huawei.com/npu.sliced=1", NULL}},
             {EX, 1, 0, NULL, false}},
            {"unknown sub-key", {{APP, G ".sliced.bogus=1", NULL}}, {NONE, 0, 0, NULL, false}},
            {"credits key",
             {{APP, "credits.gpustack.ai/nvidia=1600000", NULL}},
             {NONE, 0, 0, NULL, false}},
        };

        (void)state;
        check_pod_rows(rows, N_ELEMS(rows));
}

static void test_demand__pod_mixed_families(void **state)
{
        /* The family reported is the first in the order exclusive, shared, sliced, partitioned,
         * with that family's shape alone (the header's per-family definitions), mixed set. */
        static const struct row rows[] = {
            {"whole + shares", {{APP, SH "=2", NULL}, {APP, G "=1", NULL}}, {EX, 1, 0, NULL, true}},
            {"whole + shares in one container",
             {{APP, G "=1 " SH "=2", NULL}},
             {EX, 1, 0, NULL, true}},
            {"shares + slice",
             {{APP, SL "=1 " SLU "=800000", NULL}, {APP, SH "=2", NULL}},
             {SHF, 2, 0, NULL, true}},
            {"slice + partition",
             {{APP, PT "=1 " MIG("3g.40gb") "=1 " PTU "=1600000", NULL},
              {APP, SL "=1 " SLU "=800000", NULL}},
             {SLF, 1, 800000, NULL, true}},
            {"slice units + partition units",
             {{APP, SLU "=400000 " PTU "=800000", NULL}},
             {SLF, 1, 400000, NULL, true}},
            {"partition + whole in one container",
             {{APP, PT "=1 " MIG("3g.40gb") "=1 " PTU "=800000 " G "=1", NULL}},
             {EX, 1, 0, NULL, true}},
            {"whole in init, slice in app",
             {{INIT, G "=1", NULL}, {APP, SL "=1 " SLU "=800000", NULL}},
             {EX, 1, 0, NULL, true}},
            {"whole cards after shares still add up",
             {{APP, SH "=3", NULL}, {APP, G "=1", NULL}, {APP, G "=2", NULL}},
             {EX, 3, 0, NULL, true}},
        };

        (void)state;
        check_pod_rows(rows, N_ELEMS(rows));
}

static void test_demand__cards_saturate(void **state)
{
        static const struct row rows[] = {
            {"exactly the ceiling", {{APP, G "=4096", NULL}}, {EX, 4096, 0, NULL, false}},
            {"past the ceiling", {{APP, G "=5000", NULL}}, {EX, 4096, 0, NULL, false}},
            {"a sum past the ceiling",
             {{APP, G "=4000", NULL}, {APP, G "=100", NULL}},
             {EX, 4096, 0, NULL, false}},
            {"huge", {{APP, SH "=9E", NULL}, {APP, SH "=9E", NULL}}, {SHF, 4096, 0, NULL, false}},
            {"just below",
             {{APP, G "=4000", NULL}, {APP, G "=95", NULL}},
             {EX, 4095, 0, NULL, false}},
        };

        (void)state;
        check_pod_rows(rows, N_ELEMS(rows));
}

static void test_demand__per_container(void **state)
{
        static const struct {
                const char *what;
                struct pod_row c[ROW_CONTAINERS];
                size_t index;
                struct want want;
        } rows[] = {
            {"the container alone",
             {{APP, G "=1", NULL}, {APP, G "=2", NULL}},
             1,
             {EX, 2, 0, NULL, false}},
            {"an init container alone",
             {{INIT, SH "=3", NULL}, {APP, SH "=2", NULL}},
             0,
             {SHF, 3, 0, NULL, false}},
            /* One Allocate call serves whatever the container holds, a sidecar included. */
            {"a sidecar container",
             {{SIDECAR, G "=1", NULL}, {APP, G "=2", NULL}},
             0,
             {EX, 1, 0, NULL, false}},
            {"a slicing container",
             {{APP, VIS "=1", NULL}, {APP, SL "=1 " SLU "=480000", NULL}},
             1,
             {SLF, 1, 480000, NULL, false}},
            {"a visibility-only container",
             {{APP, VIS "=1", NULL}, {APP, SL "=1 " SLU "=480000", NULL}},
             0,
             {NONE, 0, 0, NULL, false}},
            {"a partition container",
             {{APP, "cpu=1", NULL}, {APP, PT "=1 " MIG("1g.10gb") "=1 " PTU "=200000", NULL}},
             1,
             {PTF, 1, 200000, "1g.10gb", false}},
            {"requests before limits", {{APP, SH "=4", SH "=2"}}, 0, {SHF, 2, 0, NULL, false}},
            {"an index past the Pod", {{APP, G "=1", NULL}}, 1, {NONE, 0, 0, NULL, false}},
            {"a mixed container",
             {{APP, SL "=1 " SLU "=800000 " PT "=1", NULL}},
             0,
             {SLF, 1, 800000, NULL, true}},
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(rows); i++) {
                struct tsr_demand d;

                memset(&d, 0x5a, sizeof(d));
                tsr_demand_of_container(build_pod(rows[i].what, rows[i].c), rows[i].index, nvidia(),
                                        &d);
                check_demand(rows[i].what, &d, &rows[i].want);
        }
}

static void test_demand__units_per_card(void **state)
{
        static const struct {
                struct tsr_demand d;
                int64_t want;
        } rows[] = {
            {{EX, 3, 0, "", false}, 1600000},
            {{EX, 1, 777, "", false}, 1600000}, /* units never matter for whole cards */
            {{SHF, 2, 0, "", false}, 160000},
            {{SLF, 1, 800000, "", false}, 800000},
            {{SLF, 1, 16000, "", false}, 16000},
            {{PTF, 1, 400000, "2g.15gb", false}, 400000},
            {{NONE, 0, 0, "", false}, 0},
            {{TSR_FAMILY_VISIBILITY, 1, 5, "", false}, 0},
        };

        (void)state;
        for (size_t i = 0; i < N_ELEMS(rows); i++) {
                int64_t got = tsr_demand_units_per_card(&rows[i].d);

                if (got != rows[i].want)
                        fail_msg("row %zu (%s): %lld, want %lld", i,
                                 tsr_family_name(rows[i].d.family), (long long)got,
                                 (long long)rows[i].want);
        }
}

static void test_demand__describe(void **state)
{
        static const struct tsr_demand two_whole = {EX, 2, 0, "", false};
        static const struct tsr_demand one_whole = {EX, 1, 0, "", false};
        static const struct tsr_demand shares = {SHF, 3, 0, "", false};
        static const struct tsr_demand slice = {SLF, 1, 800000, "", false};
        static const struct tsr_demand part = {PTF, 1, 800000, "3g.40gb", false};
        static const struct tsr_demand none = {NONE, 0, 0, "", false};
        char out[128], small[8];

        (void)state;
        /* The header's own examples, exactly. */
        tsr_demand_describe(&two_whole, out, sizeof(out));
        assert_string_equal(out, "2 whole accelerators");
        tsr_demand_describe(&part, out, sizeof(out));
        assert_string_equal(out, "a free 3g.40gb placement");
        /* The rest name their numbers, in the singular where there is one. */
        tsr_demand_describe(&one_whole, out, sizeof(out));
        assert_string_equal(out, "1 whole accelerator");
        tsr_demand_describe(&shares, out, sizeof(out));
        assert_non_null(strstr(out, "share"));
        assert_non_null(strstr(out, "3 distinct accelerators"));
        tsr_demand_describe(&slice, out, sizeof(out));
        assert_non_null(strstr(out, "800000"));
        assert_non_null(strstr(out, "slot"));
        tsr_demand_describe(&none, out, sizeof(out));
        assert_true(out[0] != '\0');
        assert_null(strstr(out, "whole"));
        /* A short buffer gets a NUL-terminated prefix. */
        memset(small, 'x', sizeof(small));
        tsr_demand_describe(&two_whole, small, sizeof(small));
        assert_string_equal(small, "2 whole");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_demand__pod_exclusive_and_shared_cards),
            cmocka_unit_test(test_demand__pod_sliced_and_partitioned),
            cmocka_unit_test(test_demand__pod_ignores_other_keys),
            cmocka_unit_test(test_demand__pod_mixed_families),
            cmocka_unit_test(test_demand__cards_saturate),
            cmocka_unit_test(test_demand__per_container),
            cmocka_unit_test(test_demand__units_per_card),
            cmocka_unit_test(test_demand__describe),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
