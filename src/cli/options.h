/*
 * options.h - what the long-running subcommands (`tessera webhook`, `tessera device-manager`)
 * parse alike: numbers, durations, Settings (GPUSTACK_* variables, then --setting NAME=VALUE),
 * the log level, the API server configuration, and the signals that end them.
 *
 * Every parser reports its fault on stderr prefixed with prog ("tessera webhook") and returns -1;
 * nothing is half-applied: a value is written only when it parsed. Not thread-safe (startup only).
 */
#ifndef TSR_CLI_OPTIONS_H
#define TSR_CLI_OPTIONS_H

#include <signal.h>

#include "base/diag.h"
#include "core/settings.h"
#include "kube/config.h"

struct option;

/* What a subcommand's option callback returns for a value it refuses: cli_getopt reports it. */
#define CLI_INVALID 2

/*
 * The long-running subcommands' flag loop: getopt_long over argv (argv[0] the subcommand) with
 * opts, -h meaning help_opt, calling apply(ctx, opt, optarg) for each flag (an unknown one arrives
 * as '?'). apply returns 0 (taken), 1 (stop: --help was shown), -1 (its own message printed) or
 * CLI_INVALID, reported here as `prog: invalid --name "value"`. A positional argument is refused.
 * Returns 0, 1 or -1.
 */
int cli_getopt(const char *prog, int argc, char **argv, const struct option *opts, int help_opt,
               int (*apply)(void *ctx, int opt, const char *arg), void *ctx);

/* Parses a decimal integer within [min, max] into *out; 0 or -1 (no message). */
int cli_parse_number(const char *text, long long min, long long max, long long *out);

/* Parses "250ms", "2s", "1m" or a bare number of seconds into milliseconds; 0 or -1. */
int cli_parse_duration(const char *text, unsigned *ms);

/* Parses a lifetime ("90s", "30m", "8760h" or a bare number of seconds) into seconds: at least a
 * minute, at most 1000 years. 0 or -1. */
int cli_parse_lifetime(const char *text, unsigned long long *s);

/* Seeds settings with the defaults, then their GPUSTACK_* variables. 0 or -1. */
int cli_settings_from_env(const char *prog, struct tsr_settings *settings);

/* Applies one --setting NAME=VALUE. 0 or -1. */
int cli_parse_setting(const char *prog, struct tsr_settings *settings, const char *arg);

/* Sets the log level from "debug", "info", "warn" or "error"; 0 or -1 (no message). */
int cli_parse_log_level(const char *text);

/* Sets the log format from "logfmt" or "json"; 0 or -1 (no message). */
int cli_parse_log_format(const char *text);
/* Loads the API server configuration: kubeconfig when given, else in-cluster, $KUBECONFIG,
 * ~/.kube/config. 0 or an error with diag. */
int cli_load_kube_config(const char *kubeconfig, const char *context, struct tsr_kube_config *cfg,
                         struct tsr_diag *diag);

/* Blocks SIGTERM and SIGINT (into set, for sigwait) and ignores SIGPIPE. */
void cli_block_signals(sigset_t *set);

#endif
