/*
 * test_request.c - core/request, gate 1: the seven request rules of spec/upstream-behavior.md §2
 * with their exact upstream messages and field paths, and the folds of §3, on an NVIDIA H100 80GB
 * pool (81920 MiB; profiles at the memory their names state, as the capability publishes them:
 * 1g.10gb 10240, 1g.20gb 20480, 2g.20gb 20480, 3g.40gb 40960, 4g.40gb 40960, 7g.80gb 81920 MiB).
 *
 * Every row is a Pod written as compact container rows ("key=value key=value" for limits and
 * requests, parsed with tsr_quantity_parse) and the verdict it must get: the exact joined message
 * (none for an admit), the family and the folded units; an admitted row also names the slicing
 * container, the profile and the exact set of edits. A failing row names itself.
 *
 * Invariants: no row depends on another's state; expectations come from the spec, never from the
 * code (a row the code disagrees with is reported, not bent).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "core/catalog.h"
#include "core/request.h"

#include "support/pod_rows.h"

#include <string.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* ---- resource keys and the upstream messages, spelled out as the spec prints them ---------- */

#define G            "nvidia.com/gpu"
#define SH           G ".shared"
#define SL           G ".sliced"
#define SLU          SL ".units"
#define CORES        SL ".cores-percentage"
#define PCT          SL ".memory-percentage"
#define MIB          SL ".memory-mib"
#define PT           G ".partitioned"
#define PTU          PT ".units"
#define MIG(profile) PT ".mig-" profile
#define VIS          "device.gpustack.ai/nvidia.visibility"
#define RDMA         "device.gpustack.ai/rdma"

/* Field paths, anchored at limits as upstream anchors them. */
#define AT_C(i, key) "spec.containers[" #i "].resources.limits[" key "]"
#define AT_I(i, key) "spec.initContainers[" #i "].resources.limits[" key "]"

/* Rule 1. */
#define E_FAMILIES(list)                                                                           \
        "spec: Forbidden: a Pod may request only one accelerator family, found [" list "]"
#define E_GROUPS                                                                                   \
        "spec.initContainers: Forbidden: a Pod's accelerator requests must all sit in one "        \
        "container group; spec.initContainers must give up its request, because its devices are "  \
        "held for the Pod's whole life while the scheduler charges the Pod only once"
/* Rule 2. */
#define E_SLICED_ONE(at, v)                                                                        \
        at ": Invalid value: \"" v "\": a logical slice request is always a single accelerator; "  \
           "multi-accelerator logical slicing is not supported yet"
#define E_SLICED_MEMORY(at)                                                                        \
        at ": Required value: a nvidia.com/gpu.sliced request must set "                           \
           "nvidia.com/gpu.sliced.memory-percentage or nvidia.com/gpu.sliced.memory-mib"
#define E_SLICED_BOTH(at)                                                                          \
        at ": Forbidden: cannot set both nvidia.com/gpu.sliced.memory-percentage and "             \
           "nvidia.com/gpu.sliced.memory-mib"
#define E_SLICED_CARD(at)  at ": Required value: a sliced request must set nvidia.com/gpu.sliced"
#define E_RANGE(at, v, hi) at ": Invalid value: \"" v "\": must be within (0, " hi "]"
/* Rule 3. */
#define E_PART_ONE(at, v)                                                                          \
        at ": Invalid value: \"" v "\": a partition request is always a single accelerator; "      \
           "request one Pod per instance"
#define E_PART_PROFILE(at)                                                                         \
        at ": Required value: a nvidia.com/gpu.partitioned request must name a profile, e.g. "     \
           "nvidia.com/gpu.partitioned.<kind>-<profile>"
#define E_PART_CARD(at)                                                                            \
        at ": Required value: a partition request must set nvidia.com/gpu.partitioned"
/* Rule 4. */
#define E_PROFILES(list)                                                                           \
        "spec: Forbidden: a Pod may request only one partition profile, found [" list "]"
/* Rule 5. */
#define E_PROFILE_ONE(at, v)                                                                       \
        at ": Invalid value: \"" v "\": a partition profile request must be exactly 1 instance"
/* Rule 6. */
#define E_SLICERS(n) "spec: Forbidden: at most one container may request a slicing family, found " n
/* Rule 7. */
#define E_SIDECAR(i)                                                                               \
        "spec.initContainers[" #i "].resources.limits: Forbidden: a restartable init container "   \
        "(a native sidecar) may not request an accelerator; move the request to an app container"
/* §3: the profile must be one the pool offers. */
#define E_UNOFFERED(at, p)                                                                         \
        at ": Invalid value: \"" p "\": partition profile \"" p "\" is not offered by the target " \
           "pool"

/* ---- rows ------------------------------------------------------------------------------------ */

#define APP     TSR_CG_APP
#define INIT    TSR_CG_INIT
#define SIDECAR TSR_CG_SIDECAR

#define ROW_CONTAINERS 4
#define ROW_EDITS      3
#define ROW_LIST_MAX   512

/* One container: its lists are "key=value" words separated by single spaces, or NULL. */
struct crow {
        const char *name;
        enum tsr_container_group group;
        unsigned index; /* position in spec.containers / spec.initContainers */
        const char *limits;
        const char *requests;
};

struct want_edit {
        unsigned container; /* index into the row's containers */
        const char *key;
        int64_t value;
};

struct row {
        const char *what;
        struct crow c[ROW_CONTAINERS]; /* up to the first without a name */
        const char *msg;               /* the joined message; NULL: admitted */
        enum tsr_family family;
        int64_t units;
        /* Checked on an admitted row only: */
        const char *slicer;                /* name of the slicing container; NULL: none */
        const char *profile;               /* NULL: none */
        struct want_edit edits[ROW_EDITS]; /* up to the first without a key */
};

/* The pod a row builds, and the text its items borrow. Static: a tsr_pod_req is large. */
static struct pod_rows built;

static const struct tsr_pod_req *build_pod(const struct row *r)
{
        pod_rows_begin(&built, ROW_LIST_MAX);
        for (size_t i = 0; i < ROW_CONTAINERS && r->c[i].name; i++)
                pod_rows_add(&built, r->what, r->c[i].name, r->c[i].group, r->c[i].index,
                             r->c[i].limits, r->c[i].requests);
        return &built.pod;
}

/* The pool: an NVIDIA H100 80GB InstanceType offering every MIG profile but +me. */
static const struct tsr_profile_figure h100_profiles[] = {
    {"1g.10gb", 7, 10240}, {"1g.20gb", 4, 20480}, {"2g.20gb", 3, 20480},
    {"3g.40gb", 2, 40960}, {"4g.40gb", 1, 40960}, {"7g.80gb", 1, 81920},
};

static struct tsr_fold_pool h100_pool(void)
{
        struct tsr_fold_pool p = {
            .manufacturer = tsr_catalog_manufacturer(TSR_MFR_NVIDIA),
            .memory_mib = 81920,
            .n_profiles = N_ELEMS(h100_profiles),
            .profiles = h100_profiles,
        };

        return p;
}

static void check_edits(const struct row *r, const struct tsr_request_verdict *v)
{
        size_t want = 0;

        while (want < ROW_EDITS && r->edits[want].key)
                want++;
        for (size_t i = 0; i < v->n_edits; i++)
                if (v->edits[i].container >= built.pod.n)
                        fail_msg("%s: edit %zu names container %u of %zu", r->what, i,
                                 v->edits[i].container, built.pod.n);
        for (size_t k = 0; k < want; k++) {
                const struct want_edit *w = &r->edits[k];
                bool found = false;

                for (size_t i = 0; i < v->n_edits && !found; i++)
                        found = v->edits[i].container == w->container &&
                                strcmp(v->edits[i].key, w->key) == 0 &&
                                v->edits[i].value == w->value;
                if (!found)
                        fail_msg("%s: no edit %s=%lld on container %u", r->what, w->key,
                                 (long long)w->value, w->container);
        }
        if (v->n_edits != want)
                fail_msg("%s: %zu edits, want %zu (first: %s=%lld)", r->what, v->n_edits, want,
                         v->n_edits ? v->edits[0].key : "-",
                         v->n_edits ? (long long)v->edits[0].value : 0LL);
}

static void check_rows_on(const struct tsr_fold_pool *pool, const struct row *rows, size_t n)
{
        static struct tsr_request_verdict v;
        static char msg[TSR_FIELD_ERRORS_MAX * TSR_FIELD_ERROR_LEN];

        for (size_t i = 0; i < n; i++) {
                const struct row *r = &rows[i];
                const struct tsr_pod_req *p = build_pod(r);
                struct tsr_diag d;
                int rc;

                tsr_diag_clear(&d);
                rc = tsr_request_evaluate(p, pool, &v, &d);
                if (rc != 0)
                        fail_msg("%s: evaluate = %s (%s), want TSR_OK", r->what, tsr_err_name(rc),
                                 d.msg);
                tsr_request_message(&v, msg, sizeof(msg));
                if (strcmp(msg, r->msg ? r->msg : "") != 0)
                        fail_msg("%s:\n   got \"%s\"\n  want \"%s\"", r->what, msg,
                                 r->msg ? r->msg : "");
                if ((v.n_errors == 0) != (r->msg == NULL))
                        fail_msg("%s: %zu errors but message \"%s\"", r->what, v.n_errors, msg);
                if (v.family != r->family)
                        fail_msg("%s: family %s, want %s", r->what, tsr_family_name(v.family),
                                 tsr_family_name(r->family));
                if (v.units != r->units)
                        fail_msg("%s: units %lld, want %lld", r->what, (long long)v.units,
                                 (long long)r->units);
                if (r->msg)
                        continue;
                if (!r->slicer && v.container != -1)
                        fail_msg("%s: slicing container %d, want none", r->what, v.container);
                if (r->slicer && (v.container < 0 || (size_t)v.container >= p->n ||
                                  strcmp(p->c[v.container].name, r->slicer) != 0))
                        fail_msg("%s: slicing container %d, want %s", r->what, v.container,
                                 r->slicer);
                if ((r->profile == NULL) != (v.profile == NULL) ||
                    (r->profile && strcmp(v.profile, r->profile) != 0))
                        fail_msg("%s: profile %s, want %s", r->what,
                                 v.profile ? v.profile : "(none)",
                                 r->profile ? r->profile : "(none)");
                check_edits(r, &v);
        }
}

static void check_rows(const struct row *rows, size_t n)
{
        struct tsr_fold_pool pool = h100_pool();

        check_rows_on(&pool, rows, n);
}

/* ---- the seven rules ------------------------------------------------------------------------ */

static void test_request__rule1_one_family_one_group(void **state)
{
        static const struct row rows[] = {
            {
                .what = "rule 1 accepted: two app containers claim the same family",
                .c = {{"trainer", APP, 0, G "=1", NULL}, {"sidecar-metrics", APP, 1, G "=1", NULL}},
                .family = TSR_FAMILY_EXCLUSIVE,
            },
            {
                .what = "rule 1 accepted: the claim sits in the init group alone",
                .c = {{"warmup", INIT, 0, G "=1", NULL}, {"main", APP, 0, "cpu=1", NULL}},
                .family = TSR_FAMILY_EXCLUSIVE,
            },
            {
                .what = "rule 1 accepted: two app containers share",
                .c = {{"a", APP, 0, SH "=2", NULL}, {"b", APP, 1, SH "=1", NULL}},
                .family = TSR_FAMILY_SHARED,
            },
            {
                .what = "rule 1 rejected: exclusive and sliced in two containers",
                .c = {{"a", APP, 0, G "=1", NULL}, {"b", APP, 1, SL "=1 " PCT "=50", NULL}},
                .msg = E_FAMILIES("exclusive sliced"),
            },
            {
                .what = "rule 1 rejected: exclusive and shared in one container",
                .c = {{"main", APP, 0, G "=1 " SH "=1", NULL}},
                .msg = E_FAMILIES("exclusive shared"),
            },
            {
                .what = "rule 1 rejected: families listed sorted by name, as upstream prints them",
                .c = {{"a", APP, 0, SL "=1 " PCT "=50", NULL},
                      {"b", APP, 1, PT "=1 " MIG("3g.40gb") "=1", NULL}},
                .msg = "[" E_FAMILIES("partitioned sliced") ", " E_SLICERS("2") "]",
            },
            {
                .what = "rule 1 rejected: another manufacturer's key counts for its family",
                .c = {{"main", APP, 0, "amd.com/gpu=1 " SL "=1 " PCT "=50", NULL}},
                .msg = E_FAMILIES("exclusive sliced"),
            },
            {
                .what = "rule 1 rejected: the same family in the init and the app group",
                .c = {{"warmup", INIT, 0, G "=1", NULL}, {"main", APP, 0, G "=1", NULL}},
                .msg = E_GROUPS,
                .family = TSR_FAMILY_EXCLUSIVE,
            },
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_request__rule2_sliced_is_one_with_one_memory_budget(void **state)
{
        static const struct row rows[] = {
            {
                .what = "rule 2 rejected: the value is shown in canonical form (0.5 as 500m)",
                .c = {{"main", APP, 0, SL "=0.5 " PCT "=50", NULL}},
                .msg = E_SLICED_ONE(AT_C(0, SL), "500m"),
                .family = TSR_FAMILY_SLICED,
                .slicer = "main",
            },
            {
                .what = "rule 2 accepted: one accelerator, a memory percentage",
                .c = {{"main", APP, 0, SL "=1 " PCT "=50", NULL}},
                .family = TSR_FAMILY_SLICED,
                .units = 800000,
                .slicer = "main",
                .edits = {{0, CORES, 100}, {0, SLU, 800000}},
            },
            {
                .what = "rule 2 accepted: one accelerator, a memory MiB budget of the whole card",
                .c = {{"main", APP, 0, SL "=1 " MIB "=81920", NULL}},
                .family = TSR_FAMILY_SLICED,
                .units = 1600000,
                .slicer = "main",
                .edits = {{0, CORES, 100}, {0, SLU, 1600000}},
            },
            {
                .what = "rule 2 accepted: in the init group, paths and edits follow it",
                .c = {{"main", APP, 0, "cpu=1", NULL},
                      {"prep", INIT, 0, SL "=1 " MIB "=40960", NULL}},
                .family = TSR_FAMILY_SLICED,
                .units = 800000,
                .slicer = "prep",
                .edits = {{1, CORES, 100}, {1, SLU, 800000}},
            },
            {
                .what = "rule 2 rejected: .sliced 2",
                .c = {{"main", APP, 0, SL "=2 " PCT "=50", NULL}},
                .msg = E_SLICED_ONE(AT_C(0, SL), "2"),
                .family = TSR_FAMILY_SLICED,
            },
            {
                .what = "rule 2 rejected: .sliced 2 in the second app container",
                .c = {{"main", APP, 0, "cpu=1", NULL},
                      {"worker", APP, 1, SL "=2 " PCT "=50", NULL}},
                .msg = E_SLICED_ONE(AT_C(1, SL), "2"),
                .family = TSR_FAMILY_SLICED,
            },
            {
                .what = "rule 2 rejected: .sliced 2 in an init container",
                .c = {{"prep", INIT, 0, SL "=2 " PCT "=50", NULL}},
                .msg = E_SLICED_ONE(AT_I(0, SL), "2"),
                .family = TSR_FAMILY_SLICED,
            },
            {
                .what = "rule 2 rejected: no memory budget",
                .c = {{"main", APP, 0, SL "=1", NULL}},
                .msg = E_SLICED_MEMORY(AT_C(0, SL)),
                .family = TSR_FAMILY_SLICED,
            },
            {
                .what = "rule 2 rejected: both memory budgets",
                .c = {{"main", APP, 0, SL "=1 " PCT "=50 " MIB "=40960", NULL}},
                .msg = E_SLICED_BOTH(AT_C(0, MIB)),
                .family = TSR_FAMILY_SLICED,
            },
            {
                .what = "rule 2 rejected: memory percentage 0",
                .c = {{"main", APP, 0, SL "=1 " PCT "=0", NULL}},
                .msg = E_RANGE(AT_C(0, PCT), "0", "100"),
                .family = TSR_FAMILY_SLICED,
            },
            {
                .what = "rule 2 rejected: memory percentage 101",
                .c = {{"main", APP, 0, SL "=1 " PCT "=101", NULL}},
                .msg = E_RANGE(AT_C(0, PCT), "101", "100"),
                .family = TSR_FAMILY_SLICED,
            },
            {
                .what = "rule 2 rejected: memory percentage -10",
                .c = {{"main", APP, 0, SL "=1 " PCT "=-10", NULL}},
                .msg = E_RANGE(AT_C(0, PCT), "-10", "100"),
                .family = TSR_FAMILY_SLICED,
            },
            {
                .what = "rule 2 rejected: memory MiB 0",
                .c = {{"main", APP, 0, SL "=1 " MIB "=0", NULL}},
                .msg = E_RANGE(AT_C(0, MIB), "0", "81920"),
                .family = TSR_FAMILY_SLICED,
            },
            {
                .what = "rule 2 rejected: memory MiB above the card's VRAM",
                .c = {{"main", APP, 0, SL "=1 " MIB "=81921", NULL}},
                .msg = E_RANGE(AT_C(0, MIB), "81921", "81920"),
                .family = TSR_FAMILY_SLICED,
            },
            {
                .what = "rule 2 rejected: a sliced sub-key without the card key",
                .c = {{"main", APP, 0, PCT "=50", NULL}},
                .msg = E_SLICED_CARD(AT_C(0, SL)),
                .family = TSR_FAMILY_SLICED,
            },
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_request__rule3_partitioned_is_one_and_names_a_profile(void **state)
{
        static const struct row rows[] = {
            {
                .what = "rule 3 accepted: one accelerator, one 3g.40gb instance",
                .c = {{"main", APP, 0, PT "=1 " MIG("3g.40gb") "=1", NULL}},
                .family = TSR_FAMILY_PARTITIONED,
                .units = 800000,
                .slicer = "main",
                .profile = "3g.40gb",
                .edits = {{0, PTU, 800000}},
            },
            {
                .what = "rule 3 rejected: .partitioned 2",
                .c = {{"main", APP, 0, PT "=2 " MIG("1g.10gb") "=1", NULL}},
                .msg = E_PART_ONE(AT_C(0, PT), "2"),
                .family = TSR_FAMILY_PARTITIONED,
            },
            {
                .what = "rule 3 rejected: the bare card key names no profile",
                .c = {{"main", APP, 0, PT "=1", NULL}},
                .msg = E_PART_PROFILE(AT_C(0, PT)),
                .family = TSR_FAMILY_PARTITIONED,
            },
            {
                .what = "rule 3 rejected: a units key is no profile",
                .c = {{"main", APP, 0, PT "=1 " PTU "=800000", NULL}},
                .msg = E_PART_PROFILE(AT_C(0, PT)),
                .family = TSR_FAMILY_PARTITIONED,
            },
            {
                .what = "rule 3 rejected: a profile key without the card key",
                .c = {{"main", APP, 0, MIG("3g.40gb") "=1", NULL}},
                .msg = E_PART_CARD(AT_C(0, PT)),
                .family = TSR_FAMILY_PARTITIONED,
            },
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_request__rule4_one_profile_shape(void **state)
{
        static const struct row rows[] = {
            {
                .what = "rule 4 accepted: one per-profile key",
                .c = {{"main", APP, 0, PT "=1 " MIG("1g.10gb") "=1", NULL}},
                .family = TSR_FAMILY_PARTITIONED,
                .units = 200000,
                .slicer = "main",
                .profile = "1g.10gb",
                .edits = {{0, PTU, 200000}},
            },
            {
                .what = "rule 4 rejected: two profiles in one container, listed sorted",
                .c = {{"main", APP, 0, PT "=1 " MIG("3g.40gb") "=1 " MIG("1g.10gb") "=1", NULL}},
                .msg = E_PROFILES("1g.10gb 3g.40gb"),
                .family = TSR_FAMILY_PARTITIONED,
            },
            {
                .what = "rule 4 rejected: three profiles in one container",
                .c = {{"main", APP, 0,
                       PT "=1 " MIG("7g.80gb") "=1 " MIG("2g.20gb") "=1 " MIG("1g.20gb") "=1",
                       NULL}},
                .msg = E_PROFILES("1g.20gb 2g.20gb 7g.80gb"),
                .family = TSR_FAMILY_PARTITIONED,
            },
            {
                .what = "rule 4 rejected: Pod-wide, two containers name different profiles",
                .c = {{"a", APP, 0, PT "=1 " MIG("3g.40gb") "=1", NULL},
                      {"b", APP, 1, PT "=1 " MIG("1g.10gb") "=1", NULL}},
                .msg = "[" E_PROFILES("1g.10gb 3g.40gb") ", " E_SLICERS("2") "]",
                .family = TSR_FAMILY_PARTITIONED,
            },
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_request__rule5_profile_key_is_one(void **state)
{
        static const struct row rows[] = {
            {
                .what = "rule 5 accepted: 7g.80gb 1",
                .c = {{"main", APP, 0, PT "=1 " MIG("7g.80gb") "=1", NULL}},
                .family = TSR_FAMILY_PARTITIONED,
                .units = 1600000,
                .slicer = "main",
                .profile = "7g.80gb",
                .edits = {{0, PTU, 1600000}},
            },
            {
                .what = "rule 5 rejected: 3g.40gb 2",
                .c = {{"main", APP, 0, PT "=1 " MIG("3g.40gb") "=2", NULL}},
                .msg = E_PROFILE_ONE(AT_C(0, MIG("3g.40gb")), "2"),
                .family = TSR_FAMILY_PARTITIONED,
            },
            {
                .what = "rule 5 rejected: 3g.40gb 0",
                .c = {{"main", APP, 0, PT "=1 " MIG("3g.40gb") "=0", NULL}},
                .msg = E_PROFILE_ONE(AT_C(0, MIG("3g.40gb")), "0"),
                .family = TSR_FAMILY_PARTITIONED,
            },
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_request__rule6_one_slicing_container(void **state)
{
        static const struct row rows[] = {
            {
                .what = "rule 6 accepted: a slice beside the SSH sidecar's visibility",
                .c = {{"main", APP, 0, SL "=1 " PCT "=50", NULL}, {"sshd", APP, 1, VIS "=1", NULL}},
                .family = TSR_FAMILY_SLICED,
                .units = 800000,
                .slicer = "main",
                .edits = {{0, CORES, 100}, {0, SLU, 800000}},
            },
            {
                .what = "rule 6 accepted: a partition beside the visibility, sshd first",
                .c = {{"sshd", APP, 0, VIS "=1", NULL},
                      {"main", APP, 1, PT "=1 " MIG("3g.40gb") "=1", NULL}},
                .family = TSR_FAMILY_PARTITIONED,
                .units = 800000,
                .slicer = "main",
                .profile = "3g.40gb",
                .edits = {{1, PTU, 800000}},
            },
            {
                .what = "rule 6 rejected: two containers each hold a slice",
                .c = {{"a", APP, 0, SL "=1 " PCT "=50", NULL},
                      {"b", APP, 1, SL "=1 " PCT "=50", NULL}},
                .msg = E_SLICERS("2"),
                .family = TSR_FAMILY_SLICED,
            },
            {
                .what = "rule 6 rejected: three containers each hold a slice",
                .c = {{"a", APP, 0, SL "=1 " PCT "=10", NULL},
                      {"b", APP, 1, SL "=1 " PCT "=10", NULL},
                      {"c", APP, 2, SL "=1 " MIB "=1024", NULL}},
                .msg = E_SLICERS("3"),
                .family = TSR_FAMILY_SLICED,
            },
            {
                .what = "rule 6 rejected: two containers each hold the same partition profile",
                .c = {{"a", APP, 0, PT "=1 " MIG("3g.40gb") "=1", NULL},
                      {"b", APP, 1, PT "=1 " MIG("3g.40gb") "=1", NULL}},
                .msg = E_SLICERS("2"),
                .family = TSR_FAMILY_PARTITIONED,
            },
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_request__rule7_native_sidecar_requests_nothing(void **state)
{
        static const struct row rows[] = {
            {
                .what = "rule 7 accepted: the native sidecar asks only for cpu",
                .c = {{"log-shipper", SIDECAR, 0, "cpu=100m", NULL},
                      {"main", APP, 0, G "=1", NULL}},
                .family = TSR_FAMILY_EXCLUSIVE,
            },
            {
                .what = "rule 7 rejected: the native sidecar holds the claim",
                .c = {{"log-shipper", SIDECAR, 0, G "=1", NULL}},
                .msg = E_SIDECAR(0),
            },
            {
                .what = "rule 7 rejected: the sidecar's shape is not graded further",
                .c = {{"setup", INIT, 0, "cpu=1", NULL},
                      {"shipper", SIDECAR, 1, SL "=2", NULL},
                      {"main", APP, 0, G "=1", NULL}},
                .msg = E_SIDECAR(1),
                .family = TSR_FAMILY_EXCLUSIVE,
            },
            {
                .what = "rule 7 rejected: a sidecar's profile does not count for rule 4",
                .c = {{"shipper", SIDECAR, 0, PT "=1 " MIG("1g.10gb") "=1", NULL},
                      {"main", APP, 0, PT "=1 " MIG("3g.40gb") "=1", NULL}},
                .msg = E_SIDECAR(0),
                .family = TSR_FAMILY_PARTITIONED,
            },
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

/* ---- quantities, reading order, defaults, folds --------------------------------------------- */

static void test_request__exactly_one_is_exact(void **state)
{
        static const struct row rows[] = {
            {
                .what = ".sliced 1000m is 1",
                .c = {{"main", APP, 0, SL "=1000m " PCT "=50", NULL}},
                .family = TSR_FAMILY_SLICED,
                .units = 800000,
                .slicer = "main",
                .edits = {{0, CORES, 100}, {0, SLU, 800000}},
            },
            {
                .what = ".sliced 1m is not 1",
                .c = {{"main", APP, 0, SL "=1m " PCT "=50", NULL}},
                .msg = E_SLICED_ONE(AT_C(0, SL), "1m"),
                .family = TSR_FAMILY_SLICED,
            },
            {
                .what = ".sliced 1001m is not 1",
                .c = {{"main", APP, 0, SL "=1001m " PCT "=50", NULL}},
                .msg = E_SLICED_ONE(AT_C(0, SL), "1001m"),
                .family = TSR_FAMILY_SLICED,
            },
            {
                .what = ".partitioned and the profile key 1000m are 1",
                .c = {{"main", APP, 0, PT "=1000m " MIG("3g.40gb") "=1000m", NULL}},
                .family = TSR_FAMILY_PARTITIONED,
                .units = 800000,
                .slicer = "main",
                .profile = "3g.40gb",
                .edits = {{0, PTU, 800000}},
            },
            {
                .what = ".partitioned 1m is not 1",
                .c = {{"main", APP, 0, PT "=1m " MIG("3g.40gb") "=1", NULL}},
                .msg = E_PART_ONE(AT_C(0, PT), "1m"),
                .family = TSR_FAMILY_PARTITIONED,
            },
            {
                .what = "the profile key 1m is not 1",
                .c = {{"main", APP, 0, PT "=1 " MIG("3g.40gb") "=1m", NULL}},
                .msg = E_PROFILE_ONE(AT_C(0, MIG("3g.40gb")), "1m"),
                .family = TSR_FAMILY_PARTITIONED,
            },
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_request__requests_read_before_limits(void **state)
{
        static const struct row rows[] = {
            {
                .what = "requests .sliced 1 wins over limits .sliced 2",
                .c = {{"main", APP, 0, SL "=2 " PCT "=50", SL "=1"}},
                .family = TSR_FAMILY_SLICED,
                .units = 800000,
                .slicer = "main",
                .edits = {{0, CORES, 100}, {0, SLU, 800000}},
            },
            {
                .what = "requests .sliced 2 wins over limits .sliced 1; anchored at limits",
                .c = {{"main", APP, 0, SL "=1 " PCT "=50", SL "=2"}},
                .msg = E_SLICED_ONE(AT_C(0, SL), "2"),
                .family = TSR_FAMILY_SLICED,
            },
            {
                .what = "requests memory percentage 25 folds, not limits 50",
                .c = {{"main", APP, 0, SL "=1 " PCT "=50", PCT "=25"}},
                .family = TSR_FAMILY_SLICED,
                .units = 400000,
                .slicer = "main",
                .edits = {{0, CORES, 100}, {0, SLU, 400000}},
            },
            {
                .what = "requests memory MiB 20480 folds, not limits 40960",
                .c = {{"main", APP, 0, SL "=1 " MIB "=40960", MIB "=20480"}},
                .family = TSR_FAMILY_SLICED,
                .units = 400000,
                .slicer = "main",
                .edits = {{0, CORES, 100}, {0, SLU, 400000}},
            },
            {
                .what = "requests cores 30 is validated, not limits 0",
                .c = {{"main", APP, 0, SL "=1 " PCT "=50 " CORES "=0", CORES "=30"}},
                .family = TSR_FAMILY_SLICED,
                .units = 800000,
                .slicer = "main",
                .edits = {{0, SLU, 800000}},
            },
            {
                .what = "requests partition keys 1 win over limits 2",
                .c = {{"main", APP, 0, PT "=2 " MIG("3g.40gb") "=2", PT "=1 " MIG("3g.40gb") "=1"}},
                .family = TSR_FAMILY_PARTITIONED,
                .units = 800000,
                .slicer = "main",
                .profile = "3g.40gb",
                .edits = {{0, PTU, 800000}},
            },
            {
                .what = "a slice written in requests only",
                .c = {{"main", APP, 0, NULL, SL "=1 " PCT "=50"}},
                .family = TSR_FAMILY_SLICED,
                .units = 800000,
                .slicer = "main",
                .edits = {{0, CORES, 100}, {0, SLU, 800000}},
            },
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_request__cores_percentage_defaulted_and_validated(void **state)
{
        static const struct row rows[] = {
            {
                .what = "cores absent: defaulted to 100",
                .c = {{"main", APP, 0, SL "=1 " PCT "=50", NULL}},
                .family = TSR_FAMILY_SLICED,
                .units = 800000,
                .slicer = "main",
                .edits = {{0, CORES, 100}, {0, SLU, 800000}},
            },
            {
                .what = "cores 40 kept (the spec's worked example)",
                .c = {{"main", APP, 0, SL "=1 " PCT "=50 " CORES "=40", NULL}},
                .family = TSR_FAMILY_SLICED,
                .units = 800000,
                .slicer = "main",
                .edits = {{0, SLU, 800000}},
            },
            {
                .what = "cores 100 kept",
                .c = {{"main", APP, 0, SL "=1 " PCT "=50 " CORES "=100", NULL}},
                .family = TSR_FAMILY_SLICED,
                .units = 800000,
                .slicer = "main",
                .edits = {{0, SLU, 800000}},
            },
            {
                .what = "cores 0.5 is within (0, 100]",
                .c = {{"main", APP, 0, SL "=1 " PCT "=50 " CORES "=0.5", NULL}},
                .family = TSR_FAMILY_SLICED,
                .units = 800000,
                .slicer = "main",
                .edits = {{0, SLU, 800000}},
            },
            {
                .what = "cores 0 rejected",
                .c = {{"main", APP, 0, SL "=1 " PCT "=50 " CORES "=0", NULL}},
                .msg = E_RANGE(AT_C(0, CORES), "0", "100"),
                .family = TSR_FAMILY_SLICED,
            },
            {
                .what = "cores 101 rejected",
                .c = {{"main", APP, 0, SL "=1 " PCT "=50 " CORES "=101", NULL}},
                .msg = E_RANGE(AT_C(0, CORES), "101", "100"),
                .family = TSR_FAMILY_SLICED,
            },
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

/*
 * Folds: pct x 16,000; floor(mib x 1,600,000 / 81920); floor(profile MiB x 1,600,000 / 81920),
 * so a 3g.40gb (40960 MiB) costs what a 40Gi (40960 MiB) logical slice costs: 800,000.
 */
#define SLICE_PCT(pct, u)                                                                          \
        {                                                                                          \
                .what = "fold: memory percentage " pct,                                            \
                .c = {{"main", APP, 0, SL "=1 " PCT "=" pct, NULL}}, .family = TSR_FAMILY_SLICED,  \
                .units = u, .slicer = "main", .edits = {{0, CORES, 100}, {0, SLU, u}},             \
        }
#define SLICE_MIB(mib, u)                                                                          \
        {                                                                                          \
                .what = "fold: memory MiB " mib,                                                   \
                .c = {{"main", APP, 0, SL "=1 " MIB "=" mib, NULL}}, .family = TSR_FAMILY_SLICED,  \
                .units = u, .slicer = "main", .edits = {{0, CORES, 100}, {0, SLU, u}},             \
        }
#define PARTITION(prof, u)                                                                         \
        {                                                                                          \
                .what = "fold: partition " prof,                                                   \
                .c = {{"main", APP, 0, PT "=1 " MIG(prof) "=1", NULL}},                            \
                .family = TSR_FAMILY_PARTITIONED, .units = u, .slicer = "main", .profile = prof,   \
                .edits = {{0, PTU, u}},                                                            \
        }

static void test_request__folds(void **state)
{
        static const struct row rows[] = {
            SLICE_PCT("50", 800000),      SLICE_PCT("100", 1600000),
            SLICE_PCT("1", 16000),        SLICE_PCT("12.5", 200000),
            SLICE_MIB("40960", 800000),   SLICE_MIB("81920", 1600000),
            SLICE_MIB("1000", 19531),     SLICE_MIB("1", 19),
            PARTITION("1g.10gb", 200000), PARTITION("1g.20gb", 400000),
            PARTITION("2g.20gb", 400000), PARTITION("3g.40gb", 800000),
            PARTITION("4g.40gb", 800000), PARTITION("7g.80gb", 1600000),
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_request__units_always_recomputed(void **state)
{
        static const struct row rows[] = {
            {
                .what = "a client .sliced.units 5 is overwritten",
                .c = {{"main", APP, 0, SL "=1 " PCT "=50 " SLU "=5", NULL}},
                .family = TSR_FAMILY_SLICED,
                .units = 800000,
                .slicer = "main",
                .edits = {{0, CORES, 100}, {0, SLU, 800000}},
            },
            {
                .what = "a client .sliced.units 1600k in requests is overwritten",
                .c = {{"main", APP, 0, SL "=1 " MIB "=40960", SLU "=1600k"}},
                .family = TSR_FAMILY_SLICED,
                .units = 800000,
                .slicer = "main",
                .edits = {{0, CORES, 100}, {0, SLU, 800000}},
            },
            {
                .what = "a client .sliced.units equal to the fold is still written",
                .c = {{"main", APP, 0, SL "=1 " PCT "=50 " SLU "=800k " CORES "=100", NULL}},
                .family = TSR_FAMILY_SLICED,
                .units = 800000,
                .slicer = "main",
                .edits = {{0, SLU, 800000}},
            },
            {
                .what = "a client .partitioned.units 1 is overwritten",
                .c = {{"main", APP, 0, PT "=1 " MIG("3g.40gb") "=1 " PTU "=1", NULL}},
                .family = TSR_FAMILY_PARTITIONED,
                .units = 800000,
                .slicer = "main",
                .profile = "3g.40gb",
                .edits = {{0, PTU, 800000}},
            },
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_request__unoffered_profile_refused(void **state)
{
        static const struct tsr_profile_figure only_3g[] = {{"3g.40gb", 2, 40960}};
        static const struct row h100_rows[] = {
            {
                .what = "1g.24gb is not an H100 80GB profile",
                .c = {{"main", APP, 0, PT "=1 " MIG("1g.24gb") "=1", NULL}},
                .msg = E_UNOFFERED(AT_C(0, MIG("1g.24gb")), "1g.24gb"),
                .family = TSR_FAMILY_PARTITIONED,
            },
        };
        static const struct row only_3g_rows[] = {
            {
                .what = "a pool offering only 3g.40gb refuses 1g.10gb",
                .c = {{"main", APP, 0, PT "=1 " MIG("1g.10gb") "=1", NULL}},
                .msg = E_UNOFFERED(AT_C(0, MIG("1g.10gb")), "1g.10gb"),
                .family = TSR_FAMILY_PARTITIONED,
            },
            PARTITION("3g.40gb", 800000),
        };
        struct tsr_fold_pool pool = h100_pool();

        (void)state;
        check_rows(h100_rows, N_ELEMS(h100_rows));
        pool.n_profiles = N_ELEMS(only_3g);
        pool.profiles = only_3g;
        check_rows_on(&pool, only_3g_rows, N_ELEMS(only_3g_rows));
}

static void test_request__rdma_keys_ignored(void **state)
{
        static const struct row rows[] = {
            {
                .what = "rdma alone is no accelerator",
                .c = {{"main", APP, 0, RDMA "=1", NULL}},
            },
            {
                .what = "rdma keys beside a slice, in a second container too",
                .c = {{"main", APP, 0, SL "=1 " PCT "=50 " RDMA "=1 " RDMA ".shared=1", NULL},
                      {"worker", APP, 1, RDMA ".partitioned=2", NULL}},
                .family = TSR_FAMILY_SLICED,
                .units = 800000,
                .slicer = "main",
                .edits = {{0, CORES, 100}, {0, SLU, 800000}},
            },
            {
                .what = "rdma on a native sidecar",
                .c = {{"shipper", SIDECAR, 0, RDMA ".shared=1", NULL},
                      {"main", APP, 0, G "=1", NULL}},
                .family = TSR_FAMILY_EXCLUSIVE,
            },
            {
                .what = "rdma in the init group beside an app claim",
                .c = {{"warmup", INIT, 0, RDMA "=1", NULL}, {"main", APP, 0, G "=2", NULL}},
                .family = TSR_FAMILY_EXCLUSIVE,
            },
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_request__no_accelerator_admitted_untouched(void **state)
{
        static const struct row rows[] = {
            {
                .what = "cpu and memory only",
                .c = {{"main", APP, 0, "cpu=2 memory=4Gi", "cpu=500m memory=1Gi"}},
            },
            {
                .what = "no containers",
            },
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_request__errors_aggregate(void **state)
{
        static const struct row rows[] = {
            {
                .what = "rule 1 violated, rule 6 still reported",
                .c = {{"a", APP, 0, G "=1", NULL},
                      {"b", APP, 1, SL "=1 " PCT "=50", NULL},
                      {"c", APP, 2, SL "=1 " PCT "=50", NULL}},
                .msg = "[" E_FAMILIES("exclusive sliced") ", " E_SLICERS("2") "]",
            },
            {
                .what = "rule 1 violated, rule 4 still reported",
                .c = {{"a", APP, 0, G "=1", NULL},
                      {"b", APP, 1, PT "=1 " MIG("3g.40gb") "=1 " MIG("1g.10gb") "=1", NULL}},
                .msg =
                    "[" E_FAMILIES("exclusive partitioned") ", " E_PROFILES("1g.10gb 3g.40gb") "]",
            },
            {
                .what = "init and app group, two slicing containers",
                .c = {{"prep", INIT, 0, SL "=1 " PCT "=10", NULL},
                      {"main", APP, 0, SL "=1 " PCT "=10", NULL}},
                .msg = "[" E_GROUPS ", " E_SLICERS("2") "]",
                .family = TSR_FAMILY_SLICED,
            },
            {
                .what = "a sidecar claim and two families",
                .c = {{"shipper", SIDECAR, 0, G "=1", NULL},
                      {"a", APP, 0, G "=1", NULL},
                      {"b", APP, 1, SH "=1", NULL}},
                .msg = "[" E_SIDECAR(0) ", " E_FAMILIES("exclusive shared") "]",
            },
            {
                .what = ".sliced 2 without a memory budget",
                .c = {{"main", APP, 0, SL "=2", NULL}},
                .msg = "[" E_SLICED_ONE(AT_C(0, SL), "2") ", " E_SLICED_MEMORY(AT_C(0, SL)) "]",
                .family = TSR_FAMILY_SLICED,
            },
            {
                .what = ".sliced 2, memory percentage 0, cores 101",
                .c = {{"main", APP, 0, SL "=2 " PCT "=0 " CORES "=101", NULL}},
                .msg = "[" E_SLICED_ONE(AT_C(0, SL), "2") ", " E_RANGE(
                    AT_C(0, PCT), "0", "100") ", " E_RANGE(AT_C(0, CORES), "101", "100") "]",
                .family = TSR_FAMILY_SLICED,
            },
            {
                .what = ".partitioned 2 and the profile key 2",
                .c = {{"main", APP, 0, PT "=2 " MIG("3g.40gb") "=2", NULL}},
                .msg = "[" E_PART_ONE(AT_C(0, PT), "2") ", " E_PROFILE_ONE(AT_C(0, MIG("3g.40gb")),
                                                                           "2") "]",
                .family = TSR_FAMILY_PARTITIONED,
            },
        };

        (void)state;
        check_rows(rows, N_ELEMS(rows));
}

static void test_request__unusable_pool_is_einval(void **state)
{
        static const struct row r = {.what = "slice",
                                     .c = {{"main", APP, 0, SL "=1 " PCT "=50", NULL}}};
        struct tsr_fold_pool pool = h100_pool();
        static struct tsr_request_verdict v;
        struct tsr_diag d;

        (void)state;
        memset(&v, 0x5a, sizeof(v));
        pool.manufacturer = NULL;
        tsr_diag_clear(&d);
        assert_int_equal(tsr_request_evaluate(build_pod(&r), &pool, &v, &d), TSR_EINVAL);
        assert_int_equal(d.code, TSR_EINVAL);
        assert_true(v.n_errors == (size_t)0x5a5a5a5a5a5a5a5aULL); /* *out untouched */
}

/*
 * A pool whose memory is not known yet (memory_mib 0, the InstanceType's detail not computed):
 * a slice or a partition that passes the Pod-wide rules awaits the memory, with no fold and no
 * edit; a Pod that needs no fold is judged as usual; a Pod-wide rule still denies at once.
 */
static void test_request__pool_without_memory(void **state)
{
        static const struct row waits[] = {
            {.what = "a percentage slice", .c = {{"main", APP, 0, SL "=1 " PCT "=50", NULL}}},
            {.what = "a MiB slice", .c = {{"main", APP, 0, SL "=1 " MIB "=40960", NULL}}},
            {.what = "a partition", .c = {{"main", APP, 0, PT "=1 " MIG("3g.40gb") "=1", NULL}}},
            {.what = "a malformed slice", .c = {{"main", APP, 0, SL "=2 " PCT "=50", NULL}}},
        };
        static const struct row judged[] = {
            {.what = "exclusive",
             .c = {{"main", APP, 0, G "=2", NULL}},
             .family = TSR_FAMILY_EXCLUSIVE},
            {.what = "shared", .c = {{"main", APP, 0, SH "=1", NULL}}, .family = TSR_FAMILY_SHARED},
            {.what = "no accelerator", .c = {{"main", APP, 0, "cpu=2", NULL}}},
            {.what = "two families",
             .c = {{"main", APP, 0, G "=1 " SL "=1 " PCT "=50", NULL}},
             .msg = E_FAMILIES("exclusive sliced")},
        };
        struct tsr_fold_pool pool = h100_pool();
        static struct tsr_request_verdict v;

        (void)state;
        pool.memory_mib = 0;
        for (size_t i = 0; i < N_ELEMS(waits); i++) {
                assert_int_equal(tsr_request_evaluate(build_pod(&waits[i]), &pool, &v, NULL), 0);
                if (!v.awaits_memory || v.n_errors || v.n_edits || v.units)
                        fail_msg("%s: awaits %d, %zu errors, %zu edits, units %lld", waits[i].what,
                                 v.awaits_memory, v.n_errors, v.n_edits, (long long)v.units);
        }
        check_rows_on(&pool, judged, N_ELEMS(judged));
        for (size_t i = 0; i < N_ELEMS(judged); i++) {
                assert_int_equal(tsr_request_evaluate(build_pod(&judged[i]), &pool, &v, NULL), 0);
                assert_false(v.awaits_memory);
        }
        /* With the memory known, nothing awaits it. */
        pool = h100_pool();
        assert_int_equal(tsr_request_evaluate(build_pod(&waits[0]), &pool, &v, NULL), 0);
        assert_false(v.awaits_memory);
        assert_int_equal(v.units, 800000);
}

/* Each error carries the rule it breaks, for the webhook's denials metric. */
static void test_request__errors_name_their_rules(void **state)
{
        static const struct row rows[] = {
            {
                .what = "rules named: one family, then one slicing container",
                .c = {{"a", APP, 0, G "=1", NULL},
                      {"b", APP, 1, SL "=1 " PCT "=50", NULL},
                      {"c", APP, 2, SL "=1 " PCT "=50", NULL}},
                .msg = "[" E_FAMILIES("exclusive sliced") ", " E_SLICERS("2") "]",
            },
        };
        struct tsr_fold_pool pool = h100_pool();
        static struct tsr_request_verdict v;

        (void)state;
        check_rows(rows, N_ELEMS(rows));
        assert_int_equal(tsr_request_evaluate(build_pod(&rows[0]), &pool, &v, NULL), 0);
        assert_int_equal(v.n_errors, 2);
        assert_string_equal(tsr_request_rule_name(v.rules[0]), "one-family");
        assert_string_equal(tsr_request_rule_name(v.rules[1]), "one-slicing-container");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_request__errors_name_their_rules),
            cmocka_unit_test(test_request__rule1_one_family_one_group),
            cmocka_unit_test(test_request__rule2_sliced_is_one_with_one_memory_budget),
            cmocka_unit_test(test_request__rule3_partitioned_is_one_and_names_a_profile),
            cmocka_unit_test(test_request__rule4_one_profile_shape),
            cmocka_unit_test(test_request__rule5_profile_key_is_one),
            cmocka_unit_test(test_request__rule6_one_slicing_container),
            cmocka_unit_test(test_request__rule7_native_sidecar_requests_nothing),
            cmocka_unit_test(test_request__exactly_one_is_exact),
            cmocka_unit_test(test_request__requests_read_before_limits),
            cmocka_unit_test(test_request__cores_percentage_defaulted_and_validated),
            cmocka_unit_test(test_request__folds),
            cmocka_unit_test(test_request__units_always_recomputed),
            cmocka_unit_test(test_request__unoffered_profile_refused),
            cmocka_unit_test(test_request__rdma_keys_ignored),
            cmocka_unit_test(test_request__no_accelerator_admitted_untouched),
            cmocka_unit_test(test_request__errors_aggregate),
            cmocka_unit_test(test_request__unusable_pool_is_einval),
            cmocka_unit_test(test_request__pool_without_memory),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
