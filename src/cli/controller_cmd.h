/*
 * controller_cmd.h - `tessera controller`: gates 2 and 3 on a cluster (docs/controller.md).
 */
#ifndef TSR_CLI_CONTROLLER_CMD_H
#define TSR_CLI_CONTROLLER_CMD_H

/* Runs the subcommand (argv[0] is "controller"); returns the process exit status. */
int cli_controller(int argc, char **argv);

#endif
