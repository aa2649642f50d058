/*
 * options.c - option parsing shared by the long-running subcommands.
 */
#include "cli/options.h"

#include "base/log.h"
#include "kube/kubeconfig.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_parse_number(const char *text, long long min, long long max, long long *out)
{
        char *end;
        long long v;

        errno = 0;
        v = strtoll(text, &end, 10);
        if (errno || end == text || *end || v < min || v > max)
                return -1;
        *out = v;
        return 0;
}

/* A time unit: its suffix and how many of the caller's base units it is. */
struct unit {
        const char *suffix;
        unsigned long long scale;
};

/*
 * Parses a whole number followed by one of units' suffixes ("" for none) into *out, scaled to
 * the base unit; at most max. 0 or -1 (no leading digit, an unknown suffix, or past max).
 */
static int parse_scaled(const char *text, const struct unit *units, size_t n,
                        unsigned long long max, unsigned long long *out)
{
        char *end;
        unsigned long long v;

        errno = 0;
        if (*text < '0' || *text > '9')
                return -1;
        v = strtoull(text, &end, 10);
        if (errno)
                return -1;
        for (size_t i = 0; i < n; i++)
                if (!strcmp(end, units[i].suffix)) {
                        if (v > max / units[i].scale)
                                return -1;
                        *out = v * units[i].scale;
                        return 0;
                }
        return -1;
}

int cli_parse_duration(const char *text, unsigned *ms)
{
        static const struct unit units[] = {{"", 1000}, {"ms", 1}, {"s", 1000}, {"m", 60000}};
        unsigned long long v;

        if (parse_scaled(text, units, sizeof(units) / sizeof(units[0]), UINT_MAX, &v))
                return -1;
        *ms = (unsigned)v;
        return 0;
}

int cli_parse_lifetime(const char *text, unsigned long long *s)
{
        static const struct unit units[] = {{"", 1}, {"s", 1}, {"m", 60}, {"h", 3600}};
        unsigned long long v;

        if (parse_scaled(text, units, sizeof(units) / sizeof(units[0]), 1000ull * 365 * 86400,
                         &v) ||
            v < 60)
                return -1;
        *s = v;
        return 0;
}

int cli_parse_setting(const char *prog, struct tsr_settings *settings, const char *arg)
{
        const char *eq = strchr(arg, '=');
        char name[128];
        struct tsr_diag diag;
        int s;

        if (!eq || (size_t)(eq - arg) >= sizeof(name)) {
                fprintf(stderr, "%s: --setting takes NAME=VALUE, got \"%s\"\n", prog, arg);
                return -1;
        }
        memcpy(name, arg, (size_t)(eq - arg));
        name[eq - arg] = '\0';
        s = tsr_setting_find(name);
        if (s < 0) {
                fprintf(stderr, "%s: unknown setting \"%s\"\n", prog, name);
                return -1;
        }
        if (tsr_setting_parse((enum tsr_setting)s, eq + 1, &settings->value[s], &diag)) {
                fprintf(stderr, "%s: %s\n", prog, diag.msg);
                return -1;
        }
        return 0;
}

int cli_settings_from_env(const char *prog, struct tsr_settings *settings)
{
        tsr_settings_defaults(settings);
        for (int s = 0; s < TSR_N_SETTINGS; s++) {
                const char *v = getenv(tsr_setting_env((enum tsr_setting)s));
                struct tsr_diag diag;

                if (v && *v &&
                    tsr_setting_parse((enum tsr_setting)s, v, &settings->value[s], &diag)) {
                        fprintf(stderr, "%s: %s: %s\n", prog, tsr_setting_env((enum tsr_setting)s),
                                diag.msg);
                        return -1;
                }
        }
        return 0;
}

int cli_parse_log_level(const char *text)
{
        static const char *const names[] = {"debug", "info", "warn", "error"};

        for (int i = 0; i < 4; i++)
                if (!strcmp(text, names[i])) {
                        tsr_log_set_level((enum tsr_log_level)i);
                        return 0;
                }
        return -1;
}

int cli_getopt(const char *prog, int argc, char **argv, const struct option *opts, int help_opt,
               int (*apply)(void *ctx, int opt, const char *arg), void *ctx)
{
        int opt, rc;

        optind = 0; /* glibc: a full reset */
        while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                opt = opt == 'h' ? help_opt : opt;
                rc = apply(ctx, opt, optarg);
                if (rc == CLI_INVALID) {
                        for (const struct option *lo = opts; lo->name; lo++)
                                if (lo->val == opt)
                                        fprintf(stderr, "%s: invalid --%s \"%s\"\n", prog, lo->name,
                                                optarg);
                        return -1;
                }
                if (rc)
                        return rc;
        }
        if (optind < argc) {
                fprintf(stderr, "%s: unexpected argument \"%s\"\n", prog, argv[optind]);
                return -1;
        }
        return 0;
}

int cli_parse_log_format(const char *text)
{
        if (!strcmp(text, "logfmt") || !strcmp(text, "json")) {
                tsr_log_set_format(text[0] == 'j' ? TSR_LOG_JSON : TSR_LOG_LOGFMT);
                return 0;
        }
        return -1;
}

int cli_load_kube_config(const char *kubeconfig, const char *context, struct tsr_kube_config *cfg,
                         struct tsr_diag *diag)
{
        if (kubeconfig)
                return tsr_kube_kubeconfig_load(cfg, kubeconfig, context, diag);
        return tsr_kube_config_load(cfg, context, diag);
}

void cli_block_signals(sigset_t *set)
{
        sigemptyset(set);
        sigaddset(set, SIGTERM);
        sigaddset(set, SIGINT);
        pthread_sigmask(SIG_BLOCK, set, NULL);
        signal(SIGPIPE, SIG_IGN);
}
