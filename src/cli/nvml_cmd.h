/*
 * nvml_cmd.h - the `tessera nvml` subcommand (nvml_cmd.c): `tessera nvml probe`, a read-only look
 * at what the GPU backend sees.
 */
#ifndef TSR_CLI_NVML_CMD_H
#define TSR_CLI_NVML_CMD_H

/* Runs `tessera nvml` with argv[0] == "nvml". Returns the exit status. */
int cli_nvml(int argc, char **argv);

#endif
