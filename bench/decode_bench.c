/*
 * decode_bench.c - the AdmissionReview decode, parser against parser. The same 3.6 KB Pod review
 * (pod_review.h) is decoded again and again by
 *   jansson          json_loadb: the whole tree, every value malloc'd (the webhook before
 *                    codec/json_pick.h)
 *   jansson+arena    the same under a JSON arena (codec/json_arena.h)
 *   json_pick        tsr_review_decode with the Pod fold's reads (tsr_webhook_pod_reads): the
 *                    whole text checked as jansson checks it, only the named values built
 *   json_pick+arena  the same under a JSON arena: what `tessera webhook` runs
 *   json-c           json_tokener_parse_ex: the whole tree (Debian's libjson-c)
 *   cJSON            cJSON_ParseWithLength: the whole tree (Debian's libcjson)
 * each followed by freeing what it built. Before any timing, each parser's tree is checked to
 * hold the Pod's queue label (request.object.metadata.labels["kueue.x-k8s.io/queue-name"]). The
 * rounds alternate the parsers; the output is the median over rounds of the time per decode and
 * its ratio to jansson's, all measured in this run.
 *
 * json-c and cJSON are called from decode_foreign.c: json-c's header declares json_object_get,
 * as jansson's does, so the two cannot share a file; json-c also exports it, under its own symbol
 * version, and meson links jansson first, so this file's calls bind to jansson, which the check
 * above confirms.
 * Speed targets belong here, never in the unit tests.
 */
#include "bench_common.h"
#include "decode_foreign.h"
#include "pod_review.h"

#include "base/diag.h"
#include "codec/admission_review.h"
#include "codec/json_arena.h"
#include "webhook/pod.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define QUEUE_LABEL "kueue.x-k8s.io/queue-name"
#define ROUNDS_MAX  100

enum parser { JANSSON, JANSSON_ARENA, PICK, PICK_ARENA, JSONC, CJSON, N_PARSERS };

static const char *const names[N_PARSERS] = {"jansson",         "jansson+arena", "json_pick",
                                             "json_pick+arena", "json-c",        "cJSON"};

/* The queue label of a Pod object in a jansson tree, or NULL. */
static const char *pod_queue(json_t *pod)
{
        return json_string_value(json_object_get(
            json_object_get(json_object_get(pod, "metadata"), "labels"), QUEUE_LABEL));
}

/*
 * Decodes text with jansson's json_loadb (JANSSON) or the picker (PICK) into *doc, the tree to
 * json_decref, and *pod, the Pod object inside it. Returns false when the text is refused.
 */
static bool decode_jansson(bool whole, const char *text, size_t n, json_t **doc, json_t **pod)
{
        struct tsr_review review;
        struct tsr_diag diag;
        json_error_t err;

        if (whole) {
                *doc = json_loadb(text, n, 0, &err);
                *pod = json_object_get(json_object_get(*doc, "request"), "object");
                return *doc != NULL;
        }
        tsr_diag_clear(&diag);
        if (tsr_review_decode(text, n, tsr_webhook_pod_reads, &review, doc, &diag))
                return false;
        *pod = review.object;
        return true;
}

/*
 * Decodes text once with parser p and frees what it built. With queue set, copies the queue label
 * it found into queue (size len, "" when none). Returns false when the parser refused the text, or
 * when an arena's end found values never freed.
 */
static bool decode_once(enum parser p, const char *text, size_t n, char *queue, size_t len)
{
        bool arena = p == JANSSON_ARENA || p == PICK_ARENA, ok;
        json_t *doc = NULL, *pod = NULL;

        if (p == JSONC)
                return bench_jsonc_decode(text, n, queue, len);
        if (p == CJSON)
                return bench_cjson_decode(text, n, queue, len);
        if (arena)
                tsr_json_arena_begin();
        ok = decode_jansson(p == JANSSON || p == JANSSON_ARENA, text, n, &doc, &pod);
        if (queue) {
                const char *q = ok ? pod_queue(pod) : NULL;

                snprintf(queue, len, "%s", q ? q : "");
        }
        json_decref(doc);
        if (arena && tsr_json_arena_end())
                ok = false;
        return ok;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return x < y ? -1 : x > y;
}

static int parse_uint(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
        char *end;

        errno = 0;
        *out = strtoul(s, &end, 10);
        return errno || end == s || *end || *out < min || *out > max ? -1 : 0;
}

static void usage(FILE *f)
{
        fprintf(f, "usage: bench_decode [--iterations N] [--rounds N]\n"
                   "  --iterations N  decodes per parser per round (default 20000)\n"
                   "  --rounds N      rounds, the parsers alternating (default 5, at most 100)\n"
                   "bench/run_decode.sh builds and runs this.\n");
}

int main(int argc, char **argv)
{
        static const struct option longs[] = {{"iterations", required_argument, NULL, 'i'},
                                              {"rounds", required_argument, NULL, 'r'},
                                              {"help", no_argument, NULL, 'h'},
                                              {NULL, 0, NULL, 0}};
        unsigned long iterations = 20000, rounds = 5;
        double ns[N_PARSERS][ROUNDS_MAX], median[N_PARSERS];
        char model[128], queue[64];
        size_t len = 0;
        char *text;
        int opt;

        while ((opt = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
                if (opt == 'i' && !parse_uint(optarg, 1, 100000000, &iterations))
                        continue;
                if (opt == 'r' && !parse_uint(optarg, 1, ROUNDS_MAX, &rounds))
                        continue;
                usage(opt == 'h' ? stdout : stderr);
                return opt == 'h' ? 0 : 2;
        }
        if (optind < argc) {
                usage(stderr);
                return 2;
        }
        text = bench_pod_review(&len); /* before the install: malloc'd, freed with free() */
        if (!text || bench_foreign_init()) {
                fprintf(stderr, "bench: out of memory\n");
                return 1;
        }
        tsr_json_arena_install();
        for (int p = 0; p < N_PARSERS; p++) {
                if (!decode_once((enum parser)p, text, len, queue, sizeof(queue)) ||
                    strcmp(queue, BENCH_POD_QUEUE)) {
                        fprintf(stderr,
                                "bench: %s: the review's queue label reads \"%s\", want %s\n",
                                names[p], queue, BENCH_POD_QUEUE);
                        return 1;
                }
        }
        bench_cpu_model(model, sizeof(model));
        printf("machine:    %ld CPUs online (%s), 1-minute load average %.2f before the run\n",
               sysconf(_SC_NPROCESSORS_ONLN), model, bench_load_average());
        printf("parsers:    jansson %s, %s; json_pick with the Pod fold's reads\n", JANSSON_VERSION,
               bench_foreign_versions());
        printf("input:      the Pod AdmissionReview of bench_webhook, %zu bytes; %lu decodes per "
               "parser per round, %lu rounds, the parsers alternating; each checked to find the "
               "queue label first\n\n",
               len, iterations, rounds);
        for (unsigned long r = 0; r < rounds; r++)
                for (int p = 0; p < N_PARSERS; p++) {
                        int64_t t0 = bench_now_ns();

                        for (unsigned long i = 0; i < iterations; i++)
                                if (!decode_once((enum parser)p, text, len, NULL, 0)) {
                                        fprintf(stderr, "bench: %s refused the review\n", names[p]);
                                        return 1;
                                }
                        ns[p][r] = (double)(bench_now_ns() - t0) / (double)iterations;
                }
        printf("%-16s %10s %10s %10s %8s %11s   (ns per decode: median, least and most "
               "round)\n",
               "parser", "ns/decode", "min", "max", "MB/s", "vs jansson");
        for (int p = 0; p < N_PARSERS; p++) {
                double sorted[ROUNDS_MAX];

                memcpy(sorted, ns[p], rounds * sizeof(double));
                qsort(sorted, rounds, sizeof(double), cmp_double);
                median[p] = sorted[rounds / 2];
                printf("%-16s %10.0f %10.0f %10.0f %8.0f %11.2f\n", names[p], median[p], sorted[0],
                       sorted[rounds - 1], (double)len / median[p] * 1e3,
                       median[JANSSON] / median[p]);
        }
        printf("\nload:       1-minute load average %.2f after the run\n", bench_load_average());
        bench_foreign_release();
        free(text);
        return 0;
}
