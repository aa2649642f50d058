/*
 * test_pin.c - core/pin: the node requirements a request is pinned to.
 *
 * The Workload fit pin (spec/upstream-behavior.md §6): per PodSet template,
 *   sliced-max-free-units.fit.gpustack.ai/<aKey> Gt U-1  for a logical slice of U > 0 units,
 *   shared-free-cards.fit.gpustack.ai/<aKey> Gt N-1      for shares on N >= 2 accelerators,
 * with the spec's examples (.sliced.units: 800000 -> Gt 799999; .shared: 2 -> Gt 1; .shared: 1 ->
 * nothing) and N, U the largest of any one container, never the sum. The Pod card-count pin
 * (§2): acceleratable.feature.gpustack.ai/<aKey>.count Gt N-1 for a shared request of N >= 2.
 * Whole-card, partition, visibility and other manufacturers' requests get no pin.
 *
 * Pods are compact container rows ("key=value" lists parsed with tsr_quantity_parse). Expected
 * keys and values are spelled out from the spec, never taken from the code's output.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/catalog.h"
#include "core/pin.h"

#include "support/pod_rows.h"

#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

#define APP     TSR_CG_APP
#define INIT    TSR_CG_INIT
#define SIDECAR TSR_CG_SIDECAR

#define G   "nvidia.com/gpu"
#define SH  G ".shared"
#define SL  G ".sliced"
#define SLU SL ".units"
#define PCT SL ".memory-percentage"
#define PT  G ".partitioned"
#define PTU PT ".units"
#define VIS "device.gpustack.ai/nvidia.visibility"

#define AKEY       "nvidia-h100"
#define FIT_SLICED "sliced-max-free-units.fit.gpustack.ai/" AKEY
#define FIT_SHARED "shared-free-cards.fit.gpustack.ai/" AKEY
#define CARD_COUNT "acceleratable.feature.gpustack.ai/" AKEY ".count"

#define ROW_CONTAINERS 4
#define ROW_LIST_MAX   384

struct crow {
        enum tsr_container_group group;
        const char *limits;
        const char *requests;
};

/* One expected requirement: the operator is always "Gt". */
struct want_req {
        const char *key;
        const char *value;
};

struct row {
        const char *what;
        struct pod_row c[ROW_CONTAINERS];      /* up to the first with neither list */
        struct want_req workload[TSR_PIN_MAX]; /* up to the first without a key */
        struct want_req card_count;            /* key NULL: none */
};

/* The pod a row builds, and the text its items borrow. Static: a tsr_pod_req is large. */
static struct pod_rows built;

static const struct tsr_pod_req *build_pod(const struct row *r)
{
        return pod_rows_build(&built, ROW_LIST_MAX, r->what, r->c, ROW_CONTAINERS,
                              POD_ROWS_INDEX_POSITION);
}

static bool req_is(const struct tsr_node_requirement *r, const struct want_req *w)
{
        return strcmp(r->key, w->key) == 0 && strcmp(r->op, "Gt") == 0 &&
               strcmp(r->value, w->value) == 0;
}

static void check_rows(const struct row *rows, size_t nrows, enum tsr_manufacturer_id mid,
                       const char *akey)
{
        const struct tsr_manufacturer *m = tsr_catalog_manufacturer(mid);

        for (size_t i = 0; i < nrows; i++) {
                const struct row *r = &rows[i];
                const struct tsr_pod_req *p = build_pod(r);
                struct tsr_node_requirement out[TSR_PIN_MAX], one;
                size_t want = 0, n;

                while (want < TSR_PIN_MAX && r->workload[want].key)
                        want++;
                memset(out, 0, sizeof(out));
                n = tsr_pin_workload(p, m, akey, out);
                if (n != want)
                        fail_msg("%s: %zu workload pins, want %zu (first: %s %s %s)", r->what, n,
                                 want, n ? out[0].key : "-", n ? out[0].op : "-",
                                 n ? out[0].value : "-");
                /* Every wanted requirement is there, whatever the order. */
                for (size_t k = 0; k < want; k++) {
                        bool found = false;

                        for (size_t j = 0; j < n && !found; j++)
                                found = req_is(&out[j], &r->workload[k]);
                        if (!found)
                                fail_msg("%s: no workload pin %s Gt %s (got %s %s %s)", r->what,
                                         r->workload[k].key, r->workload[k].value, out[0].key,
                                         out[0].op, out[0].value);
                }
                memset(&one, 0, sizeof(one));
                n = tsr_pin_card_count(p, m, akey, &one);
                if (n != (r->card_count.key ? 1u : 0u))
                        fail_msg("%s: %zu card-count pins, want %d (%s %s %s)", r->what, n,
                                 r->card_count.key != NULL, one.key, one.op, one.value);
                if (n && !req_is(&one, &r->card_count))
                        fail_msg("%s: card-count pin %s %s %s, want %s Gt %s", r->what, one.key,
                                 one.op, one.value, r->card_count.key, r->card_count.value);
        }
}

static void test_pin__spec_examples(void **state)
{
        static const struct row rows[] = {
            {"a 50 % slice: .sliced.units 800000",
             {{APP, SL "=1 " PCT "=50 " SLU "=800000", NULL}},
             {{FIT_SLICED, "799999"}},
             {NULL, NULL}},
            {".shared: 2", {{APP, SH "=2", NULL}}, {{FIT_SHARED, "1"}}, {CARD_COUNT, "1"}},
            {".shared: 1", {{APP, SH "=1", NULL}}, {{NULL, NULL}}, {NULL, NULL}},
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows), TSR_MFR_NVIDIA, AKEY);
}

static void test_pin__largest_container_not_the_sum(void **state)
{
        static const struct row rows[] = {
            /* 1 + 1 = 2 accelerators in all, but no container asks for two */
            {"two containers of one share",
             {{APP, SH "=1", NULL}, {APP, SH "=1", NULL}},
             {{NULL, NULL}},
             {NULL, NULL}},
            {"shares 2 and 3",
             {{APP, SH "=2", NULL}, {APP, SH "=3", NULL}},
             {{FIT_SHARED, "2"}},
             {CARD_COUNT, "2"}},
            {"shares 4 in init, 2 in app",
             {{INIT, SH "=4", NULL}, {APP, SH "=2", NULL}},
             {{FIT_SHARED, "3"}},
             {CARD_COUNT, "3"}},
            {"units 480000 and 960000",
             {{APP, SL "=1 " SLU "=480000", NULL}, {APP, SL "=1 " SLU "=960000", NULL}},
             {{FIT_SLICED, "959999"}},
             {NULL, NULL}},
            {"requests before limits",
             {{APP, SH "=5", SH "=3"}},
             {{FIT_SHARED, "2"}},
             {CARD_COUNT, "2"}},
            {"limits alone",
             {{APP, SL "=1 " SLU "=640000", NULL}},
             {{FIT_SLICED, "639999"}},
             {NULL, NULL}},
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows), TSR_MFR_NVIDIA, AKEY);
}

static void test_pin__arithmetic(void **state)
{
        static const struct row rows[] = {
            {"one unit", {{APP, SL "=1 " SLU "=1", NULL}}, {{FIT_SLICED, "0"}}, {NULL, NULL}},
            {"a whole card of units",
             {{APP, SL "=1 " SLU "=1600000", NULL}},
             {{FIT_SLICED, "1599999"}},
             {NULL, NULL}},
            {"units written 1600k",
             {{APP, SL "=1 " SLU "=1600k", NULL}},
             {{FIT_SLICED, "1599999"}},
             {NULL, NULL}},
            {"zero units", {{APP, SL "=1 " SLU "=0", NULL}}, {{NULL, NULL}}, {NULL, NULL}},
            {"ten shares", {{APP, SH "=10", NULL}}, {{FIT_SHARED, "9"}}, {CARD_COUNT, "9"}},
            {"5000 shares",
             {{APP, SH "=5000", NULL}},
             {{FIT_SHARED, "4999"}},
             {CARD_COUNT, "4999"}},
            /* mixed (gate 1 refuses it), but each pin is computed on its own */
            {"a slice and shares",
             {{APP, SL "=1 " SLU "=800000", NULL}, {APP, SH "=2", NULL}},
             {{FIT_SLICED, "799999"}, {FIT_SHARED, "1"}},
             {CARD_COUNT, "1"}},
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows), TSR_MFR_NVIDIA, AKEY);
}

static void test_pin__no_pin(void **state)
{
        static const struct row rows[] = {
            {"no containers", {{0}}, {{NULL, NULL}}, {NULL, NULL}},
            {"cpu only", {{APP, "cpu=4", "cpu=1"}}, {{NULL, NULL}}, {NULL, NULL}},
            {"whole cards", {{APP, G "=4", NULL}}, {{NULL, NULL}}, {NULL, NULL}},
            {"a partition",
             {{APP, PT "=1 " PT ".mig-3g.40gb=1 " PTU "=800000", NULL}},
             {{NULL, NULL}},
             {NULL, NULL}},
            {"a slice without folded units",
             {{APP, SL "=1 " PCT "=50", NULL}},
             {{NULL, NULL}},
             {NULL, NULL}},
            {"visibility", {{APP, VIS "=2", NULL}}, {{NULL, NULL}}, {NULL, NULL}},
            {"another manufacturer's shares and units",
             {{APP, "amd.com/gpu.shared=4 amd.com/gpu.sliced=1 amd.com/gpu.sliced.units=800000",
               NULL}},
             {{NULL, NULL}},
             {NULL, NULL}},
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows), TSR_MFR_NVIDIA, AKEY);
}

static void test_pin__other_manufacturer_and_key(void **state)
{
        static const struct row rows[] = {
            {"hygon shares",
             {{APP, "hygon.com/dcu.shared=2", NULL}},
             {{"shared-free-cards.fit.gpustack.ai/hygon-k100", "1"}},
             {"acceleratable.feature.gpustack.ai/hygon-k100.count", "1"}},
            {"hygon slice",
             {{APP, "hygon.com/dcu.sliced=1 hygon.com/dcu.sliced.units=400000", NULL}},
             {{"sliced-max-free-units.fit.gpustack.ai/hygon-k100", "399999"}},
             {NULL, NULL}},
            {"nvidia keys on a hygon model", {{APP, SH "=2", NULL}}, {{NULL, NULL}}, {NULL, NULL}},
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows), TSR_MFR_HYGON, "hygon-k100");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_pin__spec_examples),
            cmocka_unit_test(test_pin__largest_container_not_the_sum),
            cmocka_unit_test(test_pin__arithmetic),
            cmocka_unit_test(test_pin__no_pin),
            cmocka_unit_test(test_pin__other_manufacturer_and_key),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
