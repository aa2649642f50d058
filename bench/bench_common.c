/*
 * bench_common.c - the clock, latency series and machine description of the benchmarks.
 */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t bench_now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * BENCH_NS_PER_SECOND + ts.tv_nsec;
}

void bench_series_init(struct bench_series *s)
{
        memset(s, 0, sizeof(*s));
}

void bench_series_release(struct bench_series *s)
{
        free(s->ns);
        bench_series_init(s);
}

int bench_series_add(struct bench_series *s, int64_t ns)
{
        if (s->n == s->cap) {
                size_t cap = s->cap ? s->cap * 2 : 256;
                int64_t *grown;

                if (s->cap >= BENCH_SERIES_MAX)
                        return -1;
                if (cap > BENCH_SERIES_MAX)
                        cap = BENCH_SERIES_MAX;
                grown = realloc(s->ns, cap * sizeof(*grown));
                if (!grown)
                        return -1;
                s->ns = grown;
                s->cap = cap;
        }
        s->ns[s->n++] = ns;
        return 0;
}

static int cmp_i64(const void *a, const void *b)
{
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

        return (x > y) - (x < y);
}

void bench_series_sort(struct bench_series *s)
{
        if (s->n)
                qsort(s->ns, s->n, sizeof(*s->ns), cmp_i64);
}

double bench_series_pct_us(const struct bench_series *s, double q)
{
        size_t rank;

        if (!s->n)
                return 0;
        rank = (size_t)(q * (double)s->n + 0.999999);
        if (rank < 1)
                rank = 1;
        if (rank > s->n)
                rank = s->n;
        return (double)s->ns[rank - 1] / 1e3;
}

void bench_cpu_model(char *out, size_t len)
{
        FILE *f = fopen("/proc/cpuinfo", "r");
        char line[256];

        snprintf(out, len, "?");
        while (f && fgets(line, sizeof(line), f)) {
                char *colon = strchr(line, ':');

                if (!strncmp(line, "model name", 10) && colon) {
                        colon += strspn(colon + 1, " \t") + 1;
                        colon[strcspn(colon, "\n")] = '\0';
                        snprintf(out, len, "%s", colon);
                        break;
                }
        }
        if (f)
                fclose(f);
}

double bench_load_average(void)
{
        FILE *f = fopen("/proc/loadavg", "r");
        double v = -1;

        if (f) {
                if (fscanf(f, "%lf", &v) != 1)
                        v = -1;
                fclose(f);
        }
        return v;
}
