/*
 * device_manager_cmd.h - `tessera device-manager`: the node daemon (docs/device-manager.md).
 */
#ifndef TSR_CLI_DEVICE_MANAGER_CMD_H
#define TSR_CLI_DEVICE_MANAGER_CMD_H

/* Runs the subcommand (argv[0] is "device-manager"); returns the process exit status. */
int cli_device_manager(int argc, char **argv);

#endif
