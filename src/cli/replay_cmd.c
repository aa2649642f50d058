/*
 * replay_cmd.c - `tessera replay`: options, loading, the runs, the reports.
 */
#include "cli/replay_cmd.h"

#include "base/buf.h"
#include "base/err.h"
#include "cli/options.h"
#include "cli/read_file.h"
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

static void usage(FILE *f)
{
        fputs("usage: tessera replay --nodes NODES.csv --pods PODS.csv [--pods PODS.csv ...]\n"
              "                      [--policy NAME[,NAME...]] [--seeds 42-51] [--tune 1.3]\n"
              "                      [--ties first|random] [--csv FILE] [--svg FILE]\n"
              "                      [--check-published PCT]\n\n"
              "Replays each pod list on the node list under the FGD (ATC'23) protocol: pods\n"
              "shuffled per seed, tuned to TUNE x the GPU capacity, placed one at a time, a pod\n"
              "that fits nowhere dropped, none leaving. Prints per pod list the GPU allocation\n"
              "and unallocated GPUs at 100 % arrived (mean +- SD over the seeds), beside the\n"
              "FGD artifact's published number, and the curve from 80 to 130 %.\n\n"
              "  --policy   Random, DotProd, GpuClustering, GpuPacking, BestFit, FGD, tessera,\n"
              "             tessera-tiered, or all (the default)\n"
              "  --seeds    a range A-B or a list A,B,C (default 42-51, the protocol's)\n"
              "  --ties     how the scheduler framework breaks equal top scores: first (the run's\n"
              "             node order, a random permutation per seed: the default, as the\n"
              "             artifact behaves) or random (upstream selectHost)\n"
              "  --csv      every seed's curve, one row per arrival point\n"
              "  --svg      unallocated GPU % against arrived workload, one line per policy\n"
              "  --check-published PCT  exit 1 when a policy with a published number is more\n"
              "             than PCT % away from it\n",
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
        const char *nodes, *pods[PODS_MAX], *csv, *svg;
        size_t n_pods, n_seeds, n_policies;
        uint64_t seeds[SEEDS_MAX];
        enum tsr_policy_id policies[TSR_POLICY_COUNT];
        double tune, check;
        enum tsr_ties ties;
};

static int parse_args(int argc, char **argv, struct options *o)
{
        o->tune = 1.3;
        o->ties = TSR_TIES_FIRST;
        o->check = -1;
        o->n_seeds = 10;
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
        if (!o->nodes || !o->n_pods) {
                fprintf(stderr, "%s: --nodes and at least one --pods are required (see --help)\n",
                        PROG);
                return -1;
        }
        return 0;
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
        size_t n_nodes = 0;
        struct tsr_diag diag;
        int status = 0;

        if (parse_args(argc, argv, &o))
                return 2;
        tsr_diag_clear(&diag);
        if (load(o.nodes, &text))
                return 2;
        if (tsr_trace_parse_nodes(text.ptr, text.len, &nodes, &n_nodes, &diag)) {
                fprintf(stderr, "%s:%u: %s\n", o.nodes, diag.line, diag.msg);
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
                        fprintf(stderr, "%s: %s: %s\n", PROG, o.pods[i], diag.msg);
                        status = 2;
                } else {
                        t[i].have_setup = true;
                        t[i].setup.ties = o.ties;
                }
        }
        for (size_t i = 0; i < o.n_pods && !status; i++) {
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
        if (!status || status == 1) {
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
