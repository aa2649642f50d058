/*
 * jq_pipe.h - `... | jq [-c] [-r] FILTER`: runs a jq program (libjq, the real jq) over the JSON a
 * command printed, formatting results as the jq CLI does (2-space pretty print by default).
 */
#ifndef TSR_SIM_JQ_PIPE_H
#define TSR_SIM_JQ_PIPE_H

#include "sim/argv.h"

struct tsr_buf;
struct tsr_diag;

/*
 * Runs the jq invocation args (args->v[0] == "jq") over input, appending its output to out.
 * Returns 0, or TSR_EPARSE for a bad option, a filter that does not compile or input that is not
 * JSON (diag says which), or TSR_EINVAL when the filter fails at run time.
 */
int sim_jq_run(const struct sim_argv *args, const char *input, struct tsr_buf *out,
               struct tsr_diag *diag);

#endif
