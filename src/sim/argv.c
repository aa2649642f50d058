/*
 * argv.c - a small shell-word splitter for scenario commands.
 */
#include "sim/argv.h"

#include "base/buf.h"
#include "base/diag.h"
#include "base/err.h"

#include <stdlib.h>
#include <string.h>

void sim_pipeline_release(struct sim_pipeline *p)
{
        for (size_t s = 0; s < p->n; s++)
                for (size_t i = 0; i < p->stage[s].n; i++)
                        free(p->stage[s].v[i]);
        p->n = 0;
}

static int end_word(struct sim_pipeline *p, struct tsr_buf *w, int *in_word)
{
        struct sim_argv *a = &p->stage[p->n - 1];

        if (!*in_word)
                return 0;
        if (a->n >= SIM_ARGS_MAX)
                return TSR_ETOOBIG;
        a->v[a->n] = tsr_buf_detach(w);
        if (!a->v[a->n])
                return TSR_ENOMEM;
        a->n++;
        *in_word = 0;
        return 0;
}

int sim_pipeline_parse(const char *line, struct sim_pipeline *out, struct tsr_diag *diag)
{
        struct tsr_buf w = TSR_BUF_INIT;
        int in_word = 0, rc = 0;
        const char *s = line;

        memset(out, 0, sizeof(*out));
        out->n = 1;
        while (*s && !rc) {
                char c = *s++;

                if (c == ' ' || c == '\t') {
                        rc = end_word(out, &w, &in_word);
                } else if (c == '|') {
                        rc = end_word(out, &w, &in_word);
                        if (!rc && (out->stage[out->n - 1].n == 0 || out->n >= SIM_STAGES_MAX))
                                rc = TSR_EPARSE;
                        else if (!rc)
                                out->n++;
                } else if (c == '\'') {
                        const char *end = strchr(s, '\'');

                        if (!end) {
                                rc = TSR_EPARSE;
                                break;
                        }
                        rc = tsr_buf_add(&w, s, (size_t)(end - s));
                        s = end + 1;
                        in_word = 1;
                } else if (c == '"') {
                        while (*s && *s != '"' && !rc) {
                                if (*s == '\\' && (s[1] == '"' || s[1] == '\\' || s[1] == '$'))
                                        s++;
                                rc = tsr_buf_addch(&w, *s++);
                        }
                        if (*s != '"')
                                rc = TSR_EPARSE;
                        else
                                s++;
                        in_word = 1;
                } else if (c == '\\' && *s) {
                        rc = tsr_buf_addch(&w, *s++);
                        in_word = 1;
                } else {
                        rc = tsr_buf_addch(&w, c);
                        in_word = 1;
                }
        }
        if (!rc)
                rc = end_word(out, &w, &in_word);
        if (!rc && out->stage[out->n - 1].n == 0)
                rc = TSR_EPARSE;
        tsr_buf_release(&w);
        if (rc) {
                sim_pipeline_release(out);
                return tsr_diag_set(diag, rc, "cannot split the command line: %s",
                                    rc == TSR_EPARSE ? "unterminated quote or empty pipeline stage"
                                                     : tsr_strerror(rc));
        }
        return 0;
}
