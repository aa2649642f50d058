/*
 * jq_pipe.h - `... | jq [-c] [-r] FILTER`: runs a jq program (libjq, the real jq) over the JSON a
 * command printed, formatting results as the jq CLI does (2-space pretty print by default), in a
 * child process under a budget of time, memory and output (jq_pipe.c says why).
 */
#ifndef TSR_SIM_JQ_PIPE_H
#define TSR_SIM_JQ_PIPE_H

#include "sim/argv.h"

#include <stddef.h>

struct tsr_buf;
struct tsr_diag;

/* What one jq program may take before it is stopped (sim_jq_run's answer is then an error that
 * names the budget). */
struct sim_jq_budget {
        unsigned seconds;      /* wall time */
        size_t resident_bytes; /* the resident memory of the process running it */
        size_t output_bytes;   /* what it prints */
};

/* 5 s, 512 MiB resident, 64 MiB printed. */
extern const struct sim_jq_budget sim_jq_default_budget;

/*
 * Runs the jq invocation args (args->v[0] == "jq") over input, appending its output to out.
 * Returns 0, or TSR_EPARSE for a bad option, a filter that does not compile or input that is not
 * JSON (diag says which), or TSR_EINVAL when the filter fails at run time.
 */
int sim_jq_run(const struct sim_argv *args, const char *input, struct tsr_buf *out,
               struct tsr_diag *diag);

/* sim_jq_run under budget instead of sim_jq_default_budget. A program past it, or one that
 * crashes libjq (a SIGABRT on recursion without end), returns TSR_EINVAL and out unchanged. */
int sim_jq_run_within(const struct sim_argv *args, const char *input,
                      const struct sim_jq_budget *budget, struct tsr_buf *out,
                      struct tsr_diag *diag);

#endif
