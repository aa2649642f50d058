/*
 * replay_cmd.c - `tessera replay`: options, loading, the runs, the reports.
 */
#include "cli/replay_cmd.h"

#include "base/buf.h"
#include "base/err.h"
#include "cli/options.h"
#include "cli/read_file.h"
#include "replay/mig.h"
#include "replay/mig_optimum.h"
#include "replay/report.h"
#include "replay/run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TRACE_MAX ((size_t)256 << 20)
#define PODS_MAX  16 /* pod lists in one invocation */
#define SEEDS_MAX 64
#define PROG      "tessera replay"

#define MIG_DEFAULT_PRODUCT "NVIDIA H100 80GB HBM3"
#define MIG_INSTANCES_MAX   1000000 /* --mig-optimum */
#define LABEL_LAG_MAX       1000000 /* --label-lag, in binds */

static void usage(FILE *f)
{
        fputs("usage: tessera replay --nodes NODES.csv --pods PODS.csv [--pods PODS.csv ...]\n"
              "                      [--policy NAME[,NAME...]] [--seeds 42-51] [--tune 1.3]\n"
              "                      [--ties first|random] [--label-lag BINDS] [--csv FILE]\n"
              "                      [--svg FILE] [--check-published PCT]\n"
              "       tessera replay --mig-product NAME --nodes NODES.csv --pods PODS.csv ...\n"
              "                      [--seeds 42-51] [--tune 1.3]\n"
              "       tessera replay --mig-optimum N --pods PODS.csv [--mig-product NAME]\n"
              "                      [--mig-tasks 12] [--seeds 42-51]\n\n"
              "Replays each pod list on the node list under the FGD (ATC'23) protocol: pods\n"
              "shuffled per seed, tuned to TUNE x the GPU capacity, placed one at a time, a pod\n"
              "that fits nowhere dropped, none leaving. Prints per pod list the GPU allocation\n"
              "and unallocated GPUs at 100 % arrived (mean +- SD over the seeds), beside the\n"
              "FGD artifact's published number, and the curve from 80 to 130 %.\n\n"
              "  --policy   Random, DotProd, GpuClustering, GpuPacking, BestFit, FGD, tessera,\n"
              "             or all (the default)\n"
              "  --seeds    a range A-B or a list A,B,C (default 42-51, the protocol's)\n"
              "  --ties     how the scheduler framework breaks equal top scores: first (the run's\n"
              "             node order, a random permutation per seed: the default, as the\n"
              "             artifact behaves) or random (upstream selectHost)\n"
              "  --label-lag  tessera: binds between a change to a node's cards and its fit\n"
              "             labels showing it (default 0: at once); a slice the stale pin lets\n"
              "             onto a node with no card for it is refused at gate 5 and dropped\n"
              "  --csv      every seed's curve, one row per arrival point\n"
              "  --svg      unallocated GPU % against arrived workload, one line per policy\n"
              "  --check-published PCT  exit 1 when a policy with a published number is more\n"
              "             than PCT % away from it\n\n"
              "MIG variant: every GPU of the node list becomes a NAME in MIG mode (a MIG\n"
              "product of src/core/products.def: \"NVIDIA H100 80GB HBM3\", \"NVIDIA\n"
              "A100-SXM4-80GB\", ...). A fractional task takes the smallest profile whose\n"
              "memory covers gpu_milli/1000 of the GPU's (ties: fewest compute slices), a\n"
              "whole-GPU task one full-GPU instance per GPU. Same order and arrival axis as\n"
              "above, tessera's chain only (TAS on the partition keys, the core allocator);\n"
              "prints the GPU memory held and used at 100 %.\n"
              "  --mig-product NAME  run the MIG variant on NAME instead of the policies\n"
              "  --mig-optimum N     per seed, N random small instances (1-2 nodes x 1-2\n"
              "             GPUs, tasks drawn from each pod list's fractional sizes): tessera\n"
              "             online against the exact optimum by exhaustive search (drops\n"
              "             allowed) and the work-conserving one (a task that fits is placed),\n"
              "             on --mig-product (default " MIG_DEFAULT_PRODUCT ")\n"
              "  --mig-tasks MAX     at most MAX tasks per instance (default 12, at most 16)\n",
              f);
}

static int parse_seeds(const char *arg, uint64_t *seeds, size_t *n)
{
        const char *dash = strchr(arg, '-');
        long long a, b;
        char first[32];

        *n = 0;
        if (dash && !strchr(arg, ',')) {
                if ((size_t)(dash - arg) >= sizeof(first))
                        return -1;
                memcpy(first, arg, (size_t)(dash - arg));
                first[dash - arg] = '\0';
                if (cli_parse_number(first, 0, INT32_MAX, &a) ||
                    cli_parse_number(dash + 1, 0, INT32_MAX, &b) || b < a || b - a >= SEEDS_MAX)
                        return -1;
                for (long long s = a; s <= b; s++)
                        seeds[(*n)++] = (uint64_t)s;
                return 0;
        }
        for (const char *p = arg;;) {
                const char *comma = strchr(p, ',');
                size_t k = comma ? (size_t)(comma - p) : strlen(p);

                if (k >= sizeof(first) || *n == SEEDS_MAX)
                        return -1;
                memcpy(first, p, k);
                first[k] = '\0';
                if (cli_parse_number(first, 0, INT32_MAX, &a))
                        return -1;
                seeds[(*n)++] = (uint64_t)a;
                if (!comma)
                        return 0;
                p = comma + 1;
        }
}

static int parse_policies(const char *arg, enum tsr_policy_id *ids, size_t *n)
{
        char name[64];

        *n = 0;
        if (!strcmp(arg, "all")) {
                for (int i = 0; i < TSR_POLICY_COUNT; i++)
                        ids[(*n)++] = (enum tsr_policy_id)i;
                return 0;
        }
        for (const char *p = arg;;) {
                const char *comma = strchr(p, ',');
                size_t k = comma ? (size_t)(comma - p) : strlen(p);
                int id;

                if (k >= sizeof(name) || *n == TSR_POLICY_COUNT)
                        return -1;
                memcpy(name, p, k);
                name[k] = '\0';
                id = tsr_policy_by_name(name);
                if (id < 0) {
                        fprintf(stderr, "%s: --policy: no policy \"%s\"\n", PROG, name);
                        return -1;
                }
                ids[(*n)++] = (enum tsr_policy_id)id;
                if (!comma)
                        return 0;
                p = comma + 1;
        }
}

/* "openb_pod_list_default.csv" -> "default". */
static void trace_name(const char *path, char *out, size_t len)
{
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        const char *prefix = "openb_pod_list_";
        size_t k;

        if (!strncmp(base, prefix, strlen(prefix)))
                base += strlen(prefix);
        snprintf(out, len, "%s", base);
        k = strlen(out);
        if (k > 4 && !strcmp(out + k - 4, ".csv"))
                out[k - 4] = '\0';
}

static int load(const char *path, struct tsr_buf *text)
{
        int rc = cli_read_file(path, TRACE_MAX, text);

        if (rc)
                fprintf(stderr, "%s: %s: %s\n", PROG, path,
                        rc == TSR_ETOOBIG ? "larger than 256 MiB" : "cannot read the file");
        return rc;
}

static int write_out(const char *path, const struct tsr_buf *b)
{
        FILE *f = fopen(path, "wb");
        int ok = f && fwrite(b->ptr, 1, b->len, f) == b->len;

        if (f && fclose(f))
                ok = 0;
        if (!ok)
                fprintf(stderr, "%s: cannot write %s\n", PROG, path);
        return ok ? 0 : -1;
}

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Everything one pod list needs, and what its runs produced. */
struct trace_run {
        char name[128];
        struct tsr_trace_pod *pods;
        size_t n_pods;
        struct tsr_replay_setup setup;
        bool have_setup;
        struct tsr_replay_series series[TSR_POLICY_COUNT];
        struct tsr_replay_result *runs;
        double *seconds;
};

struct options {
        const char *nodes, *pods[PODS_MAX], *csv, *svg, *mig_product;
        size_t n_pods, n_seeds, n_policies, mig_optimum, mig_tasks;
        bool policy_set;
        uint64_t seeds[SEEDS_MAX];
        enum tsr_policy_id policies[TSR_POLICY_COUNT];
        double tune, check;
        enum tsr_ties ties;
        unsigned label_lag;
};

static int parse_args(int argc, char **argv, struct options *o)
{
        o->tune = 1.3;
        o->ties = TSR_TIES_FIRST;
        o->check = -1;
        o->n_seeds = 10;
        o->mig_tasks = 12;
        for (size_t i = 0; i < 10; i++)
                o->seeds[i] = 42 + i;
        parse_policies("all", o->policies, &o->n_policies);
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
                char *end;

                if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
                        usage(stdout);
                        exit(0);
                }
                if (!v) {
                        fprintf(stderr, "%s: %s needs a value\n", PROG, a);
                        return -1;
                }
                i++;
                if (!strcmp(a, "--nodes")) {
                        o->nodes = v;
                } else if (!strcmp(a, "--pods")) {
                        if (o->n_pods == PODS_MAX) {
                                fprintf(stderr, "%s: more than %d --pods\n", PROG, PODS_MAX);
                                return -1;
                        }
                        o->pods[o->n_pods++] = v;
                } else if (!strcmp(a, "--csv")) {
                        o->csv = v;
                } else if (!strcmp(a, "--svg")) {
                        o->svg = v;
                } else if (!strcmp(a, "--policy")) {
                        if (parse_policies(v, o->policies, &o->n_policies))
                                return -1;
                        o->policy_set = true;
                } else if (!strcmp(a, "--mig-product")) {
                        o->mig_product = v;
                } else if (!strcmp(a, "--mig-optimum") || !strcmp(a, "--mig-tasks")) {
                        bool tasks = !strcmp(a, "--mig-tasks");
                        long long k;

                        if (cli_parse_number(
                                v, 1, tasks ? TSR_MIG_OPT_TASKS_MAX : MIG_INSTANCES_MAX, &k)) {
                                fprintf(stderr, "%s: %s \"%s\" is not a number in 1..%d\n", PROG, a,
                                        v, tasks ? TSR_MIG_OPT_TASKS_MAX : MIG_INSTANCES_MAX);
                                return -1;
                        }
                        *(tasks ? &o->mig_tasks : &o->mig_optimum) = (size_t)k;
                } else if (!strcmp(a, "--label-lag")) {
                        long long k;

                        if (cli_parse_number(v, 0, LABEL_LAG_MAX, &k)) {
                                fprintf(stderr, "%s: --label-lag \"%s\" is not a number in 0..%d\n",
                                        PROG, v, LABEL_LAG_MAX);
                                return -1;
                        }
                        o->label_lag = (unsigned)k;
                } else if (!strcmp(a, "--seeds")) {
                        if (parse_seeds(v, o->seeds, &o->n_seeds)) {
                                fprintf(stderr,
                                        "%s: --seeds \"%s\": want A-B or A,B,... (at most %d "
                                        "seeds, each 0..2147483647)\n",
                                        PROG, v, SEEDS_MAX);
                                return -1;
                        }
                } else if (!strcmp(a, "--ties")) {
                        if (strcmp(v, "first") && strcmp(v, "random")) {
                                fprintf(stderr, "%s: --ties \"%s\": want first or random\n", PROG,
                                        v);
                                return -1;
                        }
                        o->ties = !strcmp(v, "first") ? TSR_TIES_FIRST : TSR_TIES_RANDOM;
                } else if (!strcmp(a, "--tune") || !strcmp(a, "--check-published")) {
                        double d = strtod(v, &end);

                        if (*end || end == v || !(d > 0 && d <= 100)) {
                                fprintf(stderr, "%s: %s \"%s\" is not a number in (0, 100]\n", PROG,
                                        a, v);
                                return -1;
                        }
                        *(!strcmp(a, "--tune") ? &o->tune : &o->check) = d;
                } else {
                        fprintf(stderr, "%s: unknown option %s (see --help)\n", PROG, a);
                        return -1;
                }
        }
        if (o->mig_optimum) {
                if (!o->n_pods) {
                        fprintf(stderr, "%s: --mig-optimum needs at least one --pods\n", PROG);
                        return -1;
                }
        } else if (!o->nodes || !o->n_pods) {
                fprintf(stderr, "%s: --nodes and at least one --pods are required (see --help)\n",
                        PROG);
                return -1;
        }
        if ((o->mig_product || o->mig_optimum) && (o->csv || o->svg || o->check > 0)) {
                fprintf(stderr,
                        "%s: --csv, --svg and --check-published are not for the MIG variant\n",
                        PROG);
                return -1;
        }
        if ((o->mig_product || o->mig_optimum) && o->label_lag) {
                fprintf(stderr,
                        "%s: --label-lag is not for the MIG variant (its partitions "
                        "carry no fit pin)\n",
                        PROG);
                return -1;
        }
        if ((o->mig_product || o->mig_optimum) && o->policy_set &&
            (o->n_policies != 1 || o->policies[0] != TSR_POLICY_TESSERA)) {
                fprintf(stderr,
                        "%s: the MIG variant runs tessera's chain only (--policy tessera)\n", PROG);
                return -1;
        }
        return 0;
}

/* The MIG product named name, or NULL (with a message). */
static const struct tsr_product *mig_product(const char *name)
{
        const struct tsr_product *p = tsr_catalog_product_by_name(name);

        if (!p || tsr_mig_full_profile(p) < 0) {
                fprintf(stderr, "%s: --mig-product \"%s\": %s (see src/core/products.def)\n", PROG,
                        name, p ? "has no MIG" : "no such product");
                return NULL;
        }
        return p;
}

/* The MIG variant of t on p: every seed, tessera's chain; its table into out. 0, or 1. */
static int run_mig(const struct options *o, struct trace_run *t, const struct tsr_product *p,
                   struct tsr_buf *out)
{
        struct tsr_mig_result *runs = calloc(o->n_seeds, sizeof(*runs));
        double *seconds = calloc(o->n_seeds, sizeof(*seconds)), total = 0;
        int status = 0;

        if (!runs || !seconds) {
                fprintf(stderr, "%s: out of memory\n", PROG);
                status = 1;
        }
        for (size_t k = 0; !status && k < o->n_seeds; k++) {
                struct tsr_diag diag;
                double t0 = now_s();

                tsr_diag_clear(&diag);
                if (tsr_mig_run(&t->setup, p, o->seeds[k], &runs[k], &diag)) {
                        fprintf(stderr, "%s: %s, MIG, seed %llu: %s\n", PROG, t->name,
                                (unsigned long long)o->seeds[k], diag.msg);
                        status = 1;
                        break;
                }
                seconds[k] = now_s() - t0;
                total += seconds[k];
        }
        if (!status) {
                fprintf(stderr, "%s: %s: MIG variant on %s done, %.2f s per seed\n", PROG, t->name,
                        p->name, total / (double)o->n_seeds);
                if (tsr_mig_report_table(out, t->name, &t->setup, p, runs, seconds, o->n_seeds))
                        status = 1;
        }
        free(runs);
        free(seconds);
        return status;
}

/* The fractional gpu_milli of pods[0..n) into a new array (*milli, *n_milli). 0 or 1. */
static int fractional_sizes(const struct tsr_trace_pod *pods, size_t n, unsigned **milli,
                            size_t *n_milli)
{
        *n_milli = 0;
        *milli = malloc((n ? n : 1) * sizeof(**milli));
        if (!*milli)
                return 1;
        for (size_t k = 0; k < n; k++)
                if (tsr_trace_pod_fractional(&pods[k]))
                        (*milli)[(*n_milli)++] = pods[k].gpu_milli;
        return 0;
}

/* o->mig_optimum small instances per seed drawn from milli[0..n); the lines into out. 0 or 1. */
static int mig_optimum_seeds(const struct options *o, const struct tsr_product *p, const char *name,
                             const unsigned *milli, size_t n, struct tsr_buf *out)
{
        struct tsr_mig_gap all = {0};
        int status = tsr_mig_gap_header(out) ? 1 : 0;

        for (size_t s = 0; !status && s < o->n_seeds; s++) {
                struct tsr_mig_gap g = {0};
                struct tsr_diag diag;
                struct tsr_rng rng;
                double t0 = now_s();
                char label[32];

                tsr_diag_clear(&diag);
                tsr_rng_seed(&rng, o->seeds[s]);
                for (size_t k = 0; !status && k < o->mig_optimum; k++) {
                        struct tsr_mig_small in;

                        if (tsr_mig_small_draw(p, milli, n, o->mig_tasks, &rng, &in) ||
                            tsr_mig_gap_add(&g, &in, &diag)) {
                                fprintf(stderr, "%s: %s, seed %llu, instance %zu: %s\n", PROG, name,
                                        (unsigned long long)o->seeds[s], k,
                                        diag.msg[0] ? diag.msg : "cannot draw it");
                                status = 1;
                        }
                }
                g.seconds = now_s() - t0;
                snprintf(label, sizeof(label), "seed %llu", (unsigned long long)o->seeds[s]);
                if (!status && tsr_mig_gap_report(out, label, &g, false))
                        status = 1;
                tsr_mig_gap_merge(&all, &g);
                fwrite(out->ptr, 1, out->len, stdout);
                fflush(stdout);
                tsr_buf_reset(out);
        }
        if (!status && (tsr_mig_gap_report(out, "all", &all, true) || tsr_buf_adds(out, "\n")))
                status = 1;
        return status;
}

/* Each pod list's fractional sizes, o->mig_optimum small instances per seed. 0, 1 or 2. */
static int run_mig_optimum(const struct options *o, const struct tsr_product *p)
{
        struct tsr_buf text = TSR_BUF_INIT, out = TSR_BUF_INIT;
        int status = 0;

        for (size_t i = 0; i < o->n_pods && !status; i++) {
                struct tsr_trace_pod *pods = NULL;
                unsigned *milli = NULL;
                size_t n_pods = 0, n = 0;
                struct tsr_diag diag;
                char name[128];

                tsr_diag_clear(&diag);
                tsr_buf_reset(&text);
                trace_name(o->pods[i], name, sizeof(name));
                if (load(o->pods[i], &text)) {
                        status = 2;
                } else if (tsr_trace_parse_pods(text.ptr, text.len, &pods, &n_pods, &diag)) {
                        fprintf(stderr, "%s:%u: %s\n", o->pods[i], diag.line, diag.msg);
                        status = 2;
                } else if (fractional_sizes(pods, n_pods, &milli, &n) || !n) {
                        fprintf(stderr, "%s: %s: %s\n", PROG, o->pods[i],
                                milli ? "no fractional task to draw from" : "out of memory");
                        status = milli ? 2 : 1;
                } else if (tsr_buf_addf(&out,
                                        "MIG optimum, pod list %s on %s: %zu instances per seed "
                                        "of 1-2 nodes x 1-2 GPUs, tasks drawn from its %zu "
                                        "fractional tasks until 130 %% of the slices or %zu "
                                        "tasks\n\n",
                                        name, p->name, o->mig_optimum, n, o->mig_tasks)) {
                        status = 1;
                } else {
                        status = mig_optimum_seeds(o, p, name, milli, n, &out);
                }
                fwrite(out.ptr, 1, out.len, stdout);
                tsr_buf_reset(&out);
                free(milli);
                free(pods);
        }
        tsr_buf_release(&text);
        tsr_buf_release(&out);
        return status;
}

/* Runs every policy and seed on t. 0, or 1 when a run failed. */
static int run_trace(const struct options *o, struct trace_run *t)
{
        size_t n = o->n_policies * o->n_seeds;

        t->runs = calloc(n, sizeof(*t->runs));
        t->seconds = calloc(n, sizeof(*t->seconds));
        if (!t->runs || !t->seconds) {
                fprintf(stderr, "%s: out of memory\n", PROG);
                return 1;
        }
        for (size_t p = 0; p < o->n_policies; p++) {
                struct tsr_replay_series *v = &t->series[p];

                *v = (struct tsr_replay_series){o->policies[p], o->seeds, &t->runs[p * o->n_seeds],
                                                &t->seconds[p * o->n_seeds], o->n_seeds};
                for (size_t k = 0; k < o->n_seeds; k++) {
                        struct tsr_diag diag;
                        double t0 = now_s();

                        tsr_diag_clear(&diag);
                        if (tsr_replay_run(&t->setup, o->policies[p], o->seeds[k],
                                           &t->runs[p * o->n_seeds + k], &diag)) {
                                fprintf(stderr, "%s: %s, %s, seed %llu: %s\n", PROG, t->name,
                                        tsr_policy_name(o->policies[p]),
                                        (unsigned long long)o->seeds[k], diag.msg);
                                return 1;
                        }
                        t->seconds[p * o->n_seeds + k] = now_s() - t0;
                }
                fprintf(stderr, "%s: %s: %s done, %.2f s per seed\n", PROG, t->name,
                        tsr_policy_name(o->policies[p]), t->seconds[p * o->n_seeds]);
        }
        return 0;
}

/* 1 when a policy's mean is more than o->check % from its published number. */
static int check_published(const struct options *o, const struct trace_run *t)
{
        int bad = 0;

        for (size_t p = 0; p < o->n_policies; p++) {
                const char *name = tsr_policy_name(t->series[p].policy);
                double pub = tsr_replay_published(t->name, name);
                double got = tsr_replay_mean_unallocated(&t->setup, &t->series[p]);

                if (pub < 0)
                        continue;
                if (got < pub * (1 - o->check / 100) || got > pub * (1 + o->check / 100)) {
                        printf("check: %s %s: %.1f unallocated GPUs, more than %g %% from the "
                               "published %.0f\n",
                               t->name, name, got, o->check, pub);
                        bad = 1;
                } else {
                        printf("check: %s %s: %.1f unallocated GPUs, within %g %% of the "
                               "published %.0f\n",
                               t->name, name, got, o->check, pub);
                }
        }
        return bad;
}

int cli_replay(int argc, char **argv)
{
        struct options o = {0};
        struct tsr_buf text = TSR_BUF_INIT, out = TSR_BUF_INIT;
        struct trace_run *t = NULL;
        struct tsr_replay_trace_report rep[PODS_MAX];
        struct tsr_trace_node *nodes = NULL;
        const struct tsr_product *mig = NULL;
        size_t n_nodes = 0;
        struct tsr_diag diag;
        int status = 0;

        if (parse_args(argc, argv, &o))
                return 2;
        if (o.mig_product || o.mig_optimum) {
                mig = mig_product(o.mig_product ? o.mig_product : MIG_DEFAULT_PRODUCT);
                if (!mig)
                        return 2;
                if (o.mig_optimum)
                        return run_mig_optimum(&o, mig);
        }
        tsr_diag_clear(&diag);
        if (load(o.nodes, &text))
                return 2;
        if (tsr_trace_parse_nodes(text.ptr, text.len, &nodes, &n_nodes, &diag)) {
                fprintf(stderr, "%s:%u: %s\n", o.nodes, diag.line, diag.msg);
                tsr_buf_release(&text);
                return 2;
        }
        if (!n_nodes) {
                fprintf(stderr, "%s: the node list is empty (a header and no rows)\n", o.nodes);
                free(nodes);
                tsr_buf_release(&text);
                return 2;
        }
        t = calloc(o.n_pods, sizeof(*t));
        if (!t) {
                status = 1;
                goto out;
        }
        for (size_t i = 0; i < o.n_pods && !status; i++) {
                tsr_buf_reset(&text);
                trace_name(o.pods[i], t[i].name, sizeof(t[i].name));
                if (load(o.pods[i], &text)) {
                        status = 2;
                } else if (tsr_trace_parse_pods(text.ptr, text.len, &t[i].pods, &t[i].n_pods,
                                                &diag)) {
                        fprintf(stderr, "%s:%u: %s\n", o.pods[i], diag.line, diag.msg);
                        status = 2;
                } else if (tsr_replay_setup_init(&t[i].setup, nodes, n_nodes, t[i].pods,
                                                 t[i].n_pods, o.tune, &diag)) {
                        fprintf(stderr, "%s: %s\n", PROG, diag.msg);
                        status = 2;
                } else {
                        t[i].have_setup = true;
                        t[i].setup.ties = o.ties;
                        t[i].setup.label_lag = o.label_lag;
                }
        }
        for (size_t i = 0; mig && i < o.n_pods && !status; i++) {
                status = run_mig(&o, &t[i], mig, &out);
                fwrite(out.ptr, 1, out.len, stdout);
                tsr_buf_reset(&out);
        }
        for (size_t i = 0; !mig && i < o.n_pods && !status; i++) {
                status = run_trace(&o, &t[i]);
                rep[i] = (struct tsr_replay_trace_report){t[i].name, &t[i].setup, t[i].series,
                                                          o.n_policies};
                if (!status && tsr_replay_report_table(&out, &rep[i]))
                        status = 1;
                fwrite(out.ptr, 1, out.len, stdout);
                tsr_buf_reset(&out);
                if (!status && o.check > 0 && check_published(&o, &t[i]))
                        status = 1;
        }
        if (!mig && (!status || status == 1)) {
                if (o.csv && !tsr_replay_report_csv(&out, rep, o.n_pods, 1) &&
                    write_out(o.csv, &out))
                        status = 1;
                tsr_buf_reset(&out);
                if (o.svg && !tsr_replay_report_svg(&out, rep, o.n_pods) && write_out(o.svg, &out))
                        status = 1;
        }
out:
        for (size_t i = 0; t && i < o.n_pods; i++) {
                if (t[i].have_setup)
                        tsr_replay_setup_release(&t[i].setup);
                free(t[i].pods);
                free(t[i].runs);
                free(t[i].seconds);
        }
        free(t);
        free(nodes);
        tsr_buf_release(&text);
        tsr_buf_release(&out);
        return status;
}
