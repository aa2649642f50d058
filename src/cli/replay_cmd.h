/*
 * replay_cmd.h - `tessera replay`: a GPU cluster trace replayed under the FGD protocol
 * (spec/fgd-benchmark-protocol.md), every chosen policy on every pod list for every seed, with
 * the table on stdout and optionally a CSV and an SVG plot.
 */
#ifndef TSR_CLI_REPLAY_CMD_H
#define TSR_CLI_REPLAY_CMD_H

/* argv[0] is "replay". Exit status: 0, 1 (a --check-published bound failed, or a run failed),
 * 2 (usage or malformed input). */
int cli_replay(int argc, char **argv);

#endif
