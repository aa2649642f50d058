/*
 * trace.c - the trace CSVs: header-driven columns, strict numbers, one error per bad line.
 */
#include "replay/trace.h"

#include "base/err.h"

#include <stdlib.h>
#include <string.h>

#define FIELDS_MAX 32

/* One line split into fields, pointing into a copy the caller owns. */
struct line {
        char *field[FIELDS_MAX];
        size_t n;
};

/* The next line of text from *pos into buf (NUL-terminated, CR stripped) and its length in
 * *got; false at the end. */
static bool next_line(const char *text, size_t len, size_t *pos, char *buf, size_t cap, size_t *got,
                      bool *too_long)
{
        size_t start = *pos, end;

        if (start >= len)
                return false;
        end = start;
        while (end < len && text[end] != '\n')
                end++;
        *pos = end < len ? end + 1 : end;
        if (end > start && text[end - 1] == '\r')
                end--;
        *too_long = end - start >= cap;
        if (*too_long)
                return true;
        memcpy(buf, text + start, end - start);
        buf[end - start] = '\0';
        *got = end - start;
        return true;
}

/* Splits buf at commas. Returns false when it has more than FIELDS_MAX fields. */
static bool split(char *buf, struct line *l)
{
        l->n = 0;
        for (char *p = buf;;) {
                char *comma = strchr(p, ',');

                if (l->n == FIELDS_MAX)
                        return false;
                l->field[l->n++] = p;
                if (!comma)
                        return true;
                *comma = '\0';
                p = comma + 1;
        }
}

static bool blank(const char *s)
{
        for (; *s; s++)
                if (*s != ' ' && *s != '\t')
                        return false;
        return true;
}

/* The column of each wanted header name (-1: absent) from the header line. */
static int header(char *buf, const char *const *want, size_t n_want, int *col, unsigned lineno,
                  struct tsr_diag *diag)
{
        struct line l;

        if (!split(buf, &l))
                return tsr_diag_set_at(diag, TSR_EPARSE, lineno, "more than %d columns",
                                       FIELDS_MAX);
        for (size_t w = 0; w < n_want; w++) {
                col[w] = -1;
                for (size_t i = 0; i < l.n; i++)
                        if (!strcmp(l.field[i], want[w]))
                                col[w] = (int)i;
        }
        return 0;
}

static int parse_int(const char *s, int64_t max, int64_t *out, const char *what, unsigned lineno,
                     struct tsr_diag *diag)
{
        int64_t v = 0;

        if (!*s)
                return tsr_diag_set_at(diag, TSR_EPARSE, lineno, "%s is empty", what);
        for (const char *p = s; *p; p++) {
                if (*p < '0' || *p > '9')
                        return tsr_diag_set_at(diag, TSR_EPARSE, lineno,
                                               "%s \"%s\" is not a non-negative whole number", what,
                                               s);
                if (v > (max - (*p - '0')) / 10)
                        return tsr_diag_set_at(diag, TSR_EPARSE, lineno,
                                               "%s %s is larger than %lld", what, s,
                                               (long long)max);
                v = v * 10 + (*p - '0');
        }
        *out = v;
        return 0;
}

static int copy_text(char *dst, size_t cap, const char *s, const char *what, unsigned lineno,
                     struct tsr_diag *diag)
{
        if (strchr(s, '"'))
                return tsr_diag_set_at(diag, TSR_EPARSE, lineno,
                                       "%s: quoted fields are not supported", what);
        if (strlen(s) >= cap)
                return tsr_diag_set_at(diag, TSR_EPARSE, lineno, "%s is longer than %zu bytes",
                                       what, cap - 1);
        strcpy(dst, s);
        return 0;
}

/* Grows *arr (elements of size) to hold at least need; 0 or TSR_ENOMEM. */
static int reserve(void **arr, size_t *cap, size_t need, size_t size)
{
        void *p;
        size_t want = *cap ? *cap : 256;

        if (need <= *cap)
                return 0;
        while (want < need)
                want *= 2;
        p = realloc(*arr, want * size);
        if (!p)
                return TSR_ENOMEM;
        *arr = p;
        *cap = want;
        return 0;
}

enum { N_SN, N_CPU, N_MEM, N_GPU, N_MODEL, N_COLS };
static const char *const node_cols[N_COLS] = {"sn", "cpu_milli", "memory_mib", "gpu", "model"};

enum { P_NAME, P_CPU, P_MEM, P_NUM, P_MILLI, P_SPEC, P_COLS };
static const char *const pod_cols[P_COLS] = {"name",    "cpu_milli", "memory_mib",
                                             "num_gpu", "gpu_milli", "gpu_spec"};

/* The reader both lists share: header, then one callback per data line. */
struct reader {
        const char *const *cols;
        size_t n_cols, n_required;
        int col[FIELDS_MAX];
        int (*row)(void *ctx, const struct reader *r, char **fields, unsigned lineno,
                   struct tsr_diag *diag);
        void *ctx;
};

static int read_csv(const char *text, size_t len, struct reader *r, struct tsr_diag *diag)
{
        char buf[4096];
        size_t pos = 0;
        unsigned lineno = 0;
        bool have_header = false, too_long;
        size_t got = 0;
        int rc;

        while (next_line(text, len, &pos, buf, sizeof(buf), &got, &too_long)) {
                struct line l;
                char *fields[FIELDS_MAX];

                lineno++;
                if (too_long)
                        return tsr_diag_set_at(diag, TSR_EPARSE, lineno,
                                               "line longer than %zu bytes", sizeof(buf) - 1);
                if (strlen(buf) != got)
                        return tsr_diag_set_at(diag, TSR_EPARSE, lineno, "a NUL byte in the line");
                if (blank(buf))
                        continue;
                if (!have_header) {
                        rc = header(buf, r->cols, r->n_cols, r->col, lineno, diag);
                        if (rc)
                                return rc;
                        for (size_t w = 0; w < r->n_required; w++)
                                if (r->col[w] < 0)
                                        return tsr_diag_set_at(diag, TSR_EPARSE, lineno,
                                                               "the header has no column \"%s\"",
                                                               r->cols[w]);
                        have_header = true;
                        continue;
                }
                if (!split(buf, &l))
                        return tsr_diag_set_at(diag, TSR_EPARSE, lineno, "more than %d fields",
                                               FIELDS_MAX);
                for (size_t w = 0; w < r->n_cols; w++) {
                        if (r->col[w] >= 0 && (size_t)r->col[w] >= l.n)
                                return tsr_diag_set_at(diag, TSR_EPARSE, lineno,
                                                       "%zu fields, no \"%s\" (column %d)", l.n,
                                                       r->cols[w], r->col[w] + 1);
                        fields[w] = r->col[w] >= 0 ? l.field[r->col[w]] : (char *)"";
                }
                rc = r->row(r->ctx, r, fields, lineno, diag);
                if (rc)
                        return rc;
        }
        if (!have_header)
                return tsr_diag_set_at(diag, TSR_EPARSE, lineno ? lineno : 1,
                                       "no header line (%s,...)", r->cols[0]);
        return 0;
}

struct node_list {
        struct tsr_trace_node *v;
        size_t n, cap;
};

static int node_row(void *ctx, const struct reader *r, char **f, unsigned lineno,
                    struct tsr_diag *diag)
{
        struct node_list *nl = ctx;
        struct tsr_trace_node nd = {0};
        int64_t gpus;
        int rc;

        (void)r;
        rc = copy_text(nd.name, sizeof(nd.name), f[N_SN], "sn", lineno, diag);
        if (!rc)
                rc = parse_int(f[N_CPU], INT64_MAX / 4, &nd.cpu_milli, "cpu_milli", lineno, diag);
        if (!rc)
                rc = parse_int(f[N_MEM], INT64_MAX / 4, &nd.memory_mib, "memory_mib", lineno, diag);
        if (!rc)
                rc = parse_int(f[N_GPU], TSR_TRACE_GPUS_MAX, &gpus, "gpu", lineno, diag);
        if (!rc)
                rc = copy_text(nd.model, sizeof(nd.model), f[N_MODEL], "model", lineno, diag);
        if (rc)
                return rc;
        if (!nd.name[0])
                return tsr_diag_set_at(diag, TSR_EPARSE, lineno, "sn is empty");
        nd.gpus = (unsigned)gpus;
        if (nd.gpus && !nd.model[0])
                return tsr_diag_set_at(diag, TSR_EPARSE, lineno, "node %s has %u GPUs and no model",
                                       nd.name, nd.gpus);
        if (reserve((void **)&nl->v, &nl->cap, nl->n + 1, sizeof(*nl->v)))
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        nl->v[nl->n++] = nd;
        return 0;
}

struct pod_list {
        struct tsr_trace_pod *v;
        size_t n, cap;
};

static int pod_row(void *ctx, const struct reader *r, char **f, unsigned lineno,
                   struct tsr_diag *diag)
{
        struct pod_list *pl = ctx;
        struct tsr_trace_pod p = {0};
        int64_t num, milli;
        int rc;

        (void)r;
        rc = copy_text(p.name, sizeof(p.name), f[P_NAME], "name", lineno, diag);
        if (!rc)
                rc = parse_int(f[P_CPU], INT64_MAX / 4, &p.cpu_milli, "cpu_milli", lineno, diag);
        if (!rc)
                rc = parse_int(f[P_MEM], INT64_MAX / 4, &p.memory_mib, "memory_mib", lineno, diag);
        if (!rc)
                rc = parse_int(f[P_NUM], TSR_TRACE_GPUS_MAX, &num, "num_gpu", lineno, diag);
        if (!rc)
                rc = parse_int(f[P_MILLI], TSR_TRACE_MILLI, &milli, "gpu_milli", lineno, diag);
        if (!rc)
                rc = copy_text(p.gpu_spec, sizeof(p.gpu_spec), f[P_SPEC], "gpu_spec", lineno, diag);
        if (rc)
                return rc;
        p.num_gpu = (unsigned)num;
        p.gpu_milli = (unsigned)milli;
        if (p.num_gpu == 0 && p.gpu_milli)
                return tsr_diag_set_at(diag, TSR_EPARSE, lineno,
                                       "pod %s asks for no GPU but gpu_milli %u", p.name,
                                       p.gpu_milli);
        if (p.num_gpu && !p.gpu_milli)
                return tsr_diag_set_at(diag, TSR_EPARSE, lineno,
                                       "pod %s asks for %u GPU(s) with gpu_milli 0", p.name,
                                       p.num_gpu);
        if (p.num_gpu > 1 && p.gpu_milli != TSR_TRACE_MILLI)
                return tsr_diag_set_at(diag, TSR_EPARSE, lineno,
                                       "pod %s asks for %u GPUs with gpu_milli %u: a multi-GPU "
                                       "task takes whole GPUs (1000)",
                                       p.name, p.num_gpu, p.gpu_milli);
        if (reserve((void **)&pl->v, &pl->cap, pl->n + 1, sizeof(*pl->v)))
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        pl->v[pl->n++] = p;
        return 0;
}

int tsr_trace_parse_nodes(const char *text, size_t len, struct tsr_trace_node **out, size_t *n,
                          struct tsr_diag *diag)
{
        struct node_list nl = {0};
        struct reader r = {node_cols, N_COLS, N_COLS, {0}, node_row, &nl};
        int rc = read_csv(text, len, &r, diag);

        if (rc) {
                free(nl.v);
                return rc;
        }
        *out = nl.v;
        *n = nl.n;
        return 0;
}

int tsr_trace_parse_pods(const char *text, size_t len, struct tsr_trace_pod **out, size_t *n,
                         struct tsr_diag *diag)
{
        struct pod_list pl = {0};
        struct reader r = {pod_cols, P_COLS, P_SPEC, {0}, pod_row, &pl};
        int rc = read_csv(text, len, &r, diag);

        if (rc) {
                free(pl.v);
                return rc;
        }
        *out = pl.v;
        *n = pl.n;
        return 0;
}

bool tsr_trace_spec_accepts(const char *spec, const char *model)
{
        size_t m = strlen(model);

        if (!*spec)
                return true;
        for (const char *p = spec;;) {
                const char *bar = strchr(p, '|');
                size_t k = bar ? (size_t)(bar - p) : strlen(p);

                if (k == m && !memcmp(p, model, m))
                        return true;
                if (!bar)
                        return false;
                p = bar + 1;
        }
}

static int node_ptr_by_name(const void *a, const void *b)
{
        return strcmp((*(const struct tsr_trace_node *const *)a)->name,
                      (*(const struct tsr_trace_node *const *)b)->name);
}

int tsr_trace_nodes_by_name(const struct tsr_trace_node *nodes, size_t n, size_t *order)
{
        const struct tsr_trace_node **v = malloc((n ? n : 1) * sizeof(*v));

        if (!v)
                return TSR_ENOMEM;
        for (size_t i = 0; i < n; i++)
                v[i] = nodes + i;
        qsort(v, n, sizeof(*v), node_ptr_by_name);
        for (size_t i = 0; i < n; i++)
                order[i] = (size_t)(v[i] - nodes);
        free(v);
        return 0;
}

bool tsr_trace_pod_fractional(const struct tsr_trace_pod *p)
{
        return p->num_gpu == 1 && p->gpu_milli < TSR_TRACE_MILLI;
}
