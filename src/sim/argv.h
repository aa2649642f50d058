/*
 * argv.h - splitting a runbook command line the way a POSIX shell would for the simple forms
 * runbooks use: words separated by blanks, '...' literal, "..." with backslash escapes, and one
 * top-level '|' splitting a pipeline. Pure; the result owns its strings.
 */
#ifndef TSR_SIM_ARGV_H
#define TSR_SIM_ARGV_H

#include <stddef.h>

struct tsr_diag;

#define SIM_ARGS_MAX   64
#define SIM_STAGES_MAX 4

struct sim_argv {
        size_t n;
        char *v[SIM_ARGS_MAX];
};

struct sim_pipeline {
        size_t n;
        struct sim_argv stage[SIM_STAGES_MAX];
};

/* Splits line into *out. Returns 0, or TSR_EPARSE (unterminated quote, empty stage, too many). */
int sim_pipeline_parse(const char *line, struct sim_pipeline *out, struct tsr_diag *diag);

void sim_pipeline_release(struct sim_pipeline *p);

#endif
