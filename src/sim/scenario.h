/*
 * scenario.h - `tessera sim FILE`: the scenario format of SCENARIOS.md, loaded and run.
 *
 * Each step prints "$ " and its command, then what the tool prints, then a blank line. A
 * malformed file, an unknown model or command stops the run with "FILE:LINE: message" and
 * status 2; an admission denial is output and the run goes on. Deterministic: no wall clock,
 * no randomness.
 */
#ifndef TSR_SIM_SCENARIO_H
#define TSR_SIM_SCENARIO_H

#include <stddef.h>

struct tsr_buf;
struct tsr_diag;

/*
 * Runs the scenario text (len bytes) named file, appending the transcript to out. Returns 0
 * when every step ran, or an error with diag->line and diag->msg set (the transcript up to the
 * failing step stays in out).
 */
int sim_scenario_run(const char *file, const char *text, size_t len, struct tsr_buf *out,
                     struct tsr_diag *diag);

#endif
