/*
 * gate3_bench.c - gate 3's cost at cluster scale: verdicts per second on a pool of N nodes of
 * eight H100s, judged the way a caller that snapshots per Workload does (tsr_admit_judge: the
 * pool made, the inflight Workloads charged and the Workload judged, every time) next to a pool
 * kept for many verdicts (tsr_admit_pool_judge), side by side in one run; then the ledger rebuilt
 * from every Pod's allocation annotation (tsr_admit_snapshot_ledger), and what one Pod event
 * costs (one annotation decoded and its records charged with tsr_ledger_charge).
 *
 * The pool: node names in a shuffled order (a snapshot never gets them sorted), each node with 20
 * Pods' records -- GPUs 0-3 three 25 % slices each, GPUs 4-5 whole, GPUs 6-7 three shares each --
 * and one inflight Workload (a 25 % slice pinned to a random node) per 100 nodes. The queries,
 * drawn with a fixed seed:
 *   - pinned: one 25 % slice on a random node (the TAS case: the Workload names its node);
 *   - unpinned-fits: one 25 % slice without a placement (the first node in name order hosts it);
 *   - unpinned-full: one whole GPU without a placement: no node has one, so the verdict walks the
 *     whole pool (Retry); a kept pool remembers the walk.
 * Before timing, both ways must give the same verdict, state and message, on the first 2,000
 * queries of each kind; the exit status is 1 otherwise.
 *
 * Ownership: everything is built and freed here; single-threaded.
 */
#include "bench_common.h"

#include "base/diag.h"
#include "codec/admit_snapshot.h"
#include "codec/alloc_annotation.h"
#include "core/admit.h"
#include "core/capability.h"
#include "core/catalog.h"
#include "core/ledger.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GPUS      8
#define PODS_NODE 20
#define SLICE     INT64_C(400000) /* 25 % of 1,600,000 units */
#define SHARE     INT64_C(160000)
#define CHECKED   2000

static uint64_t rng_state = 42;

static unsigned rnd(unsigned n)
{
        rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
        return (unsigned)((rng_state >> 33) % n);
}

struct pool_fixture {
        size_t n;
        char (*names)[32];
        struct tsr_accel_cap (*caps)[GPUS];
        struct tsr_accel_ledger (*ledgers)[GPUS];
        struct tsr_alloc_record (*recs)[PODS_NODE];
        struct tsr_admit_node *nodes;
        size_t n_inflight;
        struct tsr_admit_podset *inflight_ps;
        struct tsr_admit_placement *inflight_pl;
        struct tsr_admit_workload *inflight;
};

static const struct tsr_product *h100(void)
{
        const struct tsr_product *p = tsr_catalog_product_by_name("NVIDIA H100 80GB HBM3");

        if (!p) {
                fprintf(stderr, "gate3_bench: the catalog has no H100\n");
                exit(1);
        }
        return p;
}

static struct tsr_demand slice_demand(void)
{
        return (struct tsr_demand){.family = TSR_FAMILY_SLICED, .cards = 1, .units = SLICE};
}

/* The records of one node's 20 Pods. */
static void node_records(struct tsr_alloc_record *r)
{
        size_t k = 0;

        for (unsigned g = 0; g < 4; g++)
                for (int i = 0; i < 3; i++)
                        r[k++] = (struct tsr_alloc_record){
                            .accel = g, .mode = TSR_MODE_SLICED, .units = SLICE, .profile = -1};
        for (unsigned g = 4; g < 6; g++)
                r[k++] = (struct tsr_alloc_record){
                    .accel = g, .mode = TSR_MODE_EXCLUSIVE, .units = 1600000, .profile = -1};
        for (unsigned g = 6; g < 8; g++)
                for (int i = 0; i < 3; i++)
                        r[k++] = (struct tsr_alloc_record){.accel = g,
                                                           .mode = TSR_MODE_SHARED,
                                                           .units = SHARE,
                                                           .shares = 1,
                                                           .profile = -1};
}

static void pool_build(struct pool_fixture *f, size_t n)
{
        const struct tsr_product *p = h100();
        size_t *order = malloc(n * sizeof(*order));

        memset(f, 0, sizeof(*f));
        f->n = n;
        f->names = calloc(n, sizeof(*f->names));
        f->caps = calloc(n, sizeof(*f->caps));
        f->ledgers = calloc(n, sizeof(*f->ledgers));
        f->recs = calloc(n, sizeof(*f->recs));
        f->nodes = calloc(n, sizeof(*f->nodes));
        f->n_inflight = n / 100 ? n / 100 : 1;
        f->inflight_ps = calloc(f->n_inflight, sizeof(*f->inflight_ps));
        f->inflight_pl = calloc(f->n_inflight, sizeof(*f->inflight_pl));
        f->inflight = calloc(f->n_inflight, sizeof(*f->inflight));
        if (!order || !f->names || !f->caps || !f->ledgers || !f->recs || !f->nodes ||
            !f->inflight_ps || !f->inflight_pl || !f->inflight) {
                fprintf(stderr, "gate3_bench: out of memory\n");
                exit(1);
        }
        for (size_t k = 0; k < n; k++)
                order[k] = k;
        for (size_t k = n; k > 1; k--) { /* Fisher-Yates: names out of order */
                size_t j = rnd((unsigned)k), t = order[k - 1];

                order[k - 1] = order[j];
                order[j] = t;
        }
        for (size_t k = 0; k < n; k++) {
                struct tsr_diag diag = {0};

                snprintf(f->names[k], sizeof(f->names[k]), "gpu-node-%05zu", order[k]);
                for (unsigned g = 0; g < GPUS; g++) {
                        char uuid[48];

                        snprintf(uuid, sizeof(uuid), "GPU-%05zu-%u", order[k], g);
                        tsr_capability_detect(p, g, uuid, false, &f->caps[k][g]);
                }
                node_records(f->recs[k]);
                if (tsr_ledger_build(f->caps[k], GPUS, f->recs[k], PODS_NODE, f->ledgers[k],
                                     &diag)) {
                        fprintf(stderr, "gate3_bench: ledger: %s\n", diag.msg);
                        exit(1);
                }
                f->nodes[k] = (struct tsr_admit_node){.name = f->names[k],
                                                      .present = true,
                                                      .flavor = 0,
                                                      .caps = f->caps[k],
                                                      .ledger = f->ledgers[k],
                                                      .n = GPUS};
        }
        for (size_t i = 0; i < f->n_inflight; i++) {
                f->inflight_pl[i] = (struct tsr_admit_placement){rnd((unsigned)n), 1};
                f->inflight_ps[i] = (struct tsr_admit_podset){.name = "main",
                                                              .count = 1,
                                                              .demand = slice_demand(),
                                                              .flavor = 0,
                                                              .n_placements = 1,
                                                              .placements = &f->inflight_pl[i]};
                f->inflight[i] = (struct tsr_admit_workload){"inflight", 1, &f->inflight_ps[i]};
        }
        free(order);
}

static void pool_release(struct pool_fixture *f)
{
        free(f->names);
        free(f->caps);
        free(f->ledgers);
        free(f->recs);
        free(f->nodes);
        free(f->inflight_ps);
        free(f->inflight_pl);
        free(f->inflight);
}

enum query_kind { PINNED, UNPINNED_FITS, UNPINNED_FULL, QUERY_KINDS };

static const char *const kind_name[] = {"pinned", "unpinned-fits", "unpinned-full"};

/* One query of kind: a Workload of one Pod. */
struct query {
        struct tsr_admit_podset ps;
        struct tsr_admit_placement pl;
        struct tsr_admit_workload w;
};

static void query_draw(struct query *q, enum query_kind kind, size_t n)
{
        q->pl = (struct tsr_admit_placement){rnd((unsigned)n), 1};
        q->ps = (struct tsr_admit_podset){.name = "main", .count = 1, .flavor = 0};
        q->ps.demand = slice_demand();
        if (kind == UNPINNED_FULL)
                q->ps.demand = (struct tsr_demand){
                    .family = TSR_FAMILY_EXCLUSIVE, .cards = 1, .units = 1600000};
        if (kind == PINNED) {
                q->ps.n_placements = 1;
                q->ps.placements = &q->pl;
        }
        q->w = (struct tsr_admit_workload){"judged", 1, &q->ps};
}

static int judge_once(const struct pool_fixture *f, const struct query *q,
                      struct tsr_admit_verdict *v)
{
        struct tsr_diag diag = {0};

        return tsr_admit_judge(f->nodes, f->n, f->inflight, f->n_inflight, &q->w, v, &diag);
}

static struct tsr_admit_pool *pool_kept(const struct pool_fixture *f)
{
        struct tsr_admit_pool *p = NULL;
        struct tsr_diag diag = {0};

        if (tsr_admit_pool_new(f->nodes, f->n, &p, &diag)) {
                fprintf(stderr, "gate3_bench: %s\n", diag.msg);
                exit(1);
        }
        for (size_t i = 0; i < f->n_inflight; i++)
                if (tsr_admit_pool_charge(p, &f->inflight[i], &diag)) {
                        fprintf(stderr, "gate3_bench: %s\n", diag.msg);
                        exit(1);
                }
        return p;
}

/* Both ways agree on the first CHECKED queries of kind; returns the Ready count. */
static unsigned agree(const struct pool_fixture *f, struct tsr_admit_pool *p, enum query_kind kind)
{
        unsigned ready = 0;

        for (unsigned i = 0; i < CHECKED; i++) {
                struct tsr_admit_verdict a, b;
                struct tsr_diag diag = {0};
                struct query q;

                query_draw(&q, kind, f->n);
                if (judge_once(f, &q, &a) || tsr_admit_pool_judge(p, &q.w, &b, &diag) ||
                    a.state != b.state || strcmp(a.message, b.message)) {
                        fprintf(stderr,
                                "gate3_bench: %s query %u: the kept pool answered \"%s\", "
                                "once \"%s\"\n",
                                kind_name[kind], i, b.message, a.message);
                        exit(1);
                }
                ready += a.state == TSR_CHECK_READY;
        }
        return ready;
}

/* Verdicts per second over about seconds, the pool kept or made per verdict. */
static double rate(const struct pool_fixture *f, struct tsr_admit_pool *kept, enum query_kind kind,
                   double seconds)
{
        int64_t start = bench_now_ns(), end = start + (int64_t)(seconds * BENCH_NS_PER_SECOND);
        int64_t now = start;
        unsigned long done = 0;

        while (now < end) {
                for (int i = 0; i < 64; i++) {
                        struct tsr_admit_verdict v;
                        struct tsr_diag diag = {0};
                        struct query q;

                        query_draw(&q, kind, f->n);
                        if (kept ? tsr_admit_pool_judge(kept, &q.w, &v, &diag)
                                 : judge_once(f, &q, &v)) {
                                fprintf(stderr, "gate3_bench: verdict failed\n");
                                exit(1);
                        }
                        done++;
                }
                now = bench_now_ns();
        }
        return (double)done / ((double)(now - start) / BENCH_NS_PER_SECOND);
}

/* ---- the ledger from annotations --------------------------------------------------------------
 */

/* One Pod object carrying record r's allocation annotation. */
static json_t *annotated_pod(const struct tsr_alloc_record *r, size_t node, size_t x)
{
        struct tsr_container_allocation a = {.container = "main", .manufacturer = "nvidia", .n = 1};
        char name[64], *text;
        json_t *pod;

        snprintf(a.group_id, sizeof(a.group_id), "nvidia.com/gpu");
        snprintf(a.accels[0].id, sizeof(a.accels[0].id), "GPU-%05zu-%u", node, r->accel);
        a.accels[0].index = r->accel;
        a.accels[0].mode = r->mode;
        a.accels[0].allocated = r->units;
        a.accels[0].slices = r->mode == TSR_MODE_SLICED;
        if (tsr_alloc_annotation_encode(&a, 1, &text)) {
                fprintf(stderr, "gate3_bench: encode failed\n");
                exit(1);
        }
        snprintf(name, sizeof(name), "pod-%05zu-%02zu", node, x);
        pod = json_pack("{s:{s:s, s:s, s:{s:s}}, s:{s:s}}", "metadata", "name", name, "namespace",
                        "default", "annotations", TSR_ALLOC_ANNOTATION, text, "spec", "nodeName",
                        "n");
        free(text);
        return pod;
}

static void ledger_bench(const struct pool_fixture *f)
{
        const struct tsr_product *p = h100();
        json_t **pods = malloc(f->n * PODS_NODE * sizeof(*pods));
        struct tsr_accel_ledger out[GPUS];
        double best = 1e30, event_best = 1e30;

        if (!pods) {
                fprintf(stderr, "gate3_bench: out of memory\n");
                exit(1);
        }
        for (size_t k = 0; k < f->n; k++)
                for (size_t x = 0; x < PODS_NODE; x++)
                        pods[k * PODS_NODE + x] = annotated_pod(&f->recs[k][x], k, x);
        for (int round = 0; round < 5; round++) {
                int64_t t0 = bench_now_ns();

                for (size_t k = 0; k < f->n; k++) {
                        struct tsr_snapshot_node sn = {.name = f->names[k],
                                                       .present = true,
                                                       .product = p,
                                                       .caps = f->caps[k],
                                                       .n = GPUS,
                                                       .pods = &pods[k * PODS_NODE],
                                                       .n_pods = PODS_NODE};
                        struct tsr_diag diag = {0};

                        if (tsr_admit_snapshot_ledger(&sn, out, &diag)) {
                                fprintf(stderr, "gate3_bench: ledger of %s: %s\n", f->names[k],
                                        diag.msg);
                                exit(1);
                        }
                        for (unsigned g = 0; g < GPUS; g++)
                                if (out[g].mode != f->ledgers[k][g].mode ||
                                    out[g].allocated != f->ledgers[k][g].allocated ||
                                    out[g].allocated_slices != f->ledgers[k][g].allocated_slices) {
                                        fprintf(stderr,
                                                "gate3_bench: rebuilt ledger of %s GPU %u: mode "
                                                "%d allocated %lld slices %u, from records: mode "
                                                "%d allocated %lld slices %u\n",
                                                f->names[k], g, (int)out[g].mode,
                                                (long long)out[g].allocated,
                                                out[g].allocated_slices, (int)f->ledgers[k][g].mode,
                                                (long long)f->ledgers[k][g].allocated,
                                                f->ledgers[k][g].allocated_slices);
                                        exit(1);
                                }
                }
                double ms = (double)(bench_now_ns() - t0) / 1e6;

                if (ms < best)
                        best = ms;
        }
        /* one Pod event: its annotation decoded and its records charged to its node's ledger */
        for (int round = 0; round < 5; round++) {
                struct tsr_container_allocation *alloc =
                    malloc(TSR_ALLOC_CONTAINERS_MAX * sizeof(*alloc));
                struct tsr_alloc_record recs[TSR_ALLOC_ACCELS_MAX];
                size_t events = f->n * PODS_NODE < 20000 ? f->n * PODS_NODE : 20000;
                int64_t t0 = bench_now_ns();

                for (size_t e = 0; e < events; e++) {
                        size_t k = e / PODS_NODE, na, nrec = 0;

                        if (tsr_alloc_annotation_of_pod(pods[e], alloc, TSR_ALLOC_CONTAINERS_MAX,
                                                        &na, NULL) ||
                            tsr_alloc_annotation_records(alloc, na, p, false, recs,
                                                         TSR_ALLOC_ACCELS_MAX, &nrec)) {
                                fprintf(stderr, "gate3_bench: event decode failed\n");
                                exit(1);
                        }
                        if (e % PODS_NODE == 0)
                                for (unsigned g = 0; g < GPUS; g++)
                                        tsr_ledger_reset(&out[g]);
                        for (size_t r = 0; r < nrec; r++)
                                tsr_ledger_charge(&f->caps[k][recs[r].accel], &out[recs[r].accel],
                                                  &recs[r], NULL);
                }
                double us = (double)(bench_now_ns() - t0) / 1e3 / (double)events;

                if (us < event_best)
                        event_best = us;
                free(alloc);
        }
        printf("ledger rebuild | %zu Pods on %zu nodes | %.1f ms | %.2f us/Pod | one Pod event "
               "(decode + charge) %.2f us\n",
               f->n * PODS_NODE, f->n, best, best * 1e3 / (double)(f->n * PODS_NODE), event_best);
        for (size_t i = 0; i < f->n * PODS_NODE; i++)
                json_decref(pods[i]);
        free(pods);
}

int main(int argc, char **argv)
{
        size_t sizes[] = {500, 5000};
        double seconds = 1.0, kept_rate[2][QUERY_KINDS] = {{0}};
        char cpu[128];

        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
                        seconds = atof(argv[++i]);
                } else {
                        fprintf(stderr, "usage: bench_gate3 [--seconds S]\n");
                        return 2;
                }
        }
        bench_cpu_model(cpu, sizeof(cpu));
        printf("# %s, load %.2f; H100 x %d per node, %d Pods' records per node, one inflight "
               "Workload per 100 nodes, node names shuffled\n",
               cpu, bench_load_average(), GPUS, PODS_NODE);
        printf("nodes | query | Ready of %d | per-verdict snapshot v/s | kept pool v/s | kept / "
               "per-verdict\n",
               CHECKED);
        for (size_t s = 0; s < 2; s++) {
                struct pool_fixture f;
                struct tsr_admit_pool *kept;

                pool_build(&f, sizes[s]);
                kept = pool_kept(&f);
                for (int k = 0; k < QUERY_KINDS; k++) {
                        unsigned ready = agree(&f, kept, (enum query_kind)k);
                        double once = rate(&f, NULL, (enum query_kind)k, seconds);

                        kept_rate[s][k] = rate(&f, kept, (enum query_kind)k, seconds);
                        printf("%zu | %s | %u | %.0f | %.0f | %.1f\n", sizes[s], kind_name[k],
                               ready, once, kept_rate[s][k], kept_rate[s][k] / once);
                }
                tsr_admit_pool_free(kept);
                ledger_bench(&f);
                pool_release(&f);
        }
        for (int k = 0; k < QUERY_KINDS; k++)
                printf("kept pool %s: 5000 nodes / 500 nodes = %.2f\n", kind_name[k],
                       kept_rate[1][k] / kept_rate[0][k]);
        return 0;
}
