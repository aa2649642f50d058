/*
 * kueue_config_cmd.h - `tessera kueue-config` (kueue_config_cmd.c): prints the Kueue
 * Configuration the chain needs (codec/kueue_config.h) as YAML or JSON.
 */
#ifndef TSR_CLI_KUEUE_CONFIG_CMD_H
#define TSR_CLI_KUEUE_CONFIG_CMD_H

/* Runs `tessera kueue-config` with argv[0] == "kueue-config". Returns the exit status. */
int cli_kueue_config(int argc, char **argv);

#endif
