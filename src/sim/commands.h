/*
 * commands.h - the runbook commands SCENARIOS.md lists: kubectl against the virtual API server,
 * nvidia-smi on a node, sleep on the virtual clock, and `| jq` after any of them.
 */
#ifndef TSR_SIM_COMMANDS_H
#define TSR_SIM_COMMANDS_H

#include <stdint.h>

#include "sim/cluster.h"

struct tsr_buf;
struct tsr_diag;

/*
 * Runs line (on node `on`, or from the admin workstation when on is NULL) with standard input
 * stdin_text (may be NULL), appending what the tool prints to out. stdin_line is the scenario
 * line its stdin starts at, for diagnostics. Returns 0 when the command ran (a denial or a
 * NotFound is output), or an error with diag set for an unknown command or malformed input.
 */
int sim_command_run(struct tsr_cluster *c, const char *on, const char *line, const char *stdin_text,
                    unsigned stdin_line, struct tsr_buf *out, struct tsr_diag *diag);

/* The longest `sleep` a scenario may take: 30 days of virtual time. */
#define SIM_SLEEP_MAX_SECONDS INT64_C(2592000)

/*
 * Parses a Go duration ("90s", "2m", "1h30m"; "500ms" rounds up to 1 s) into *seconds. Returns 0,
 * TSR_EPARSE for a malformed one, or TSR_ERANGE above SIM_SLEEP_MAX_SECONDS.
 */
int sim_parse_duration(const char *s, int64_t *seconds);

#endif
