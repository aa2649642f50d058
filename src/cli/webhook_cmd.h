/*
 * webhook_cmd.h - the `tessera webhook` subcommand (webhook_cmd.c).
 */
#ifndef TSR_CLI_WEBHOOK_CMD_H
#define TSR_CLI_WEBHOOK_CMD_H

/* Runs `tessera webhook` with argv[0] == "webhook". Returns the exit status. */
int cli_webhook(int argc, char **argv);

#endif
