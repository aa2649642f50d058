/*
 * kvcache_launch.c - the launch-command parser of the KV-cache injection webhook
 * (kvcache_launch.h).
 */
#include "webhook/kvcache_launch.h"

#include "webhook/field_error.h"

#include <stdio.h>
#include <string.h>

/* The concatenated argv: command then args. */
struct argv {
        const char *const *command, *const *args;
        size_t n_command, n;
};

static const char *tok(const struct argv *a, size_t i)
{
        const char *s = i < a->n_command ? a->command[i] : a->args[i - a->n_command];

        return s ? s : "";
}

static const char *base_name(const char *s)
{
        const char *slash = strrchr(s, '/');

        return slash ? slash + 1 : s;
}

static bool ends_with(const char *s, const char *suffix)
{
        size_t n = strlen(s), m = strlen(suffix);

        return n >= m && !memcmp(s + n - m, suffix, m);
}

/* ---- launchers ---------------------------------------------------------------------------- */

enum opt_kind { OPT_FLAG, OPT_OPERAND, OPT_OPAQUE };

struct long_opt {
        const char *name; /* with the leading "--" */
        enum opt_kind kind;
};

struct launcher {
        const char *name;
        const char *operand_short; /* option letters whose operand is the rest or the next token */
        const char *opaque_short;  /* option letters whose operand is a whole command line */
        const struct long_opt *longs;
        size_t n_longs;
        unsigned positional; /* operands of its own between its options and the command */
        bool assignments;    /* NAME=VALUE tokens before the command (env) */
        bool dash_is_flag;   /* a lone "-" is an option (env: -i) */
};

/* GNU coreutils env(1), whose long options getopt_long also takes as unique prefixes. */
static const struct long_opt env_longs[] = {
    {"--argv0", OPT_OPERAND},       {"--block-signal", OPT_FLAG},
    {"--chdir", OPT_OPERAND},       {"--debug", OPT_FLAG},
    {"--default-signal", OPT_FLAG}, {"--ignore-environment", OPT_FLAG},
    {"--ignore-signal", OPT_FLAG},  {"--list-signal-handling", OPT_FLAG},
    {"--null", OPT_FLAG},           {"--split-string", OPT_OPAQUE},
    {"--unset", OPT_OPERAND},       {"--help", OPT_FLAG},
    {"--version", OPT_FLAG},
};

static const struct long_opt dumb_init_longs[] = {
    {"--rewrite", OPT_OPERAND}, {"--single-child", OPT_FLAG}, {"--verbose", OPT_FLAG},
    {"--version", OPT_FLAG},    {"--help", OPT_FLAG},
};

static const struct long_opt timeout_longs[] = {
    {"--signal", OPT_OPERAND},       {"--kill-after", OPT_OPERAND}, {"--foreground", OPT_FLAG},
    {"--preserve-status", OPT_FLAG}, {"--verbose", OPT_FLAG},       {"--help", OPT_FLAG},
    {"--version", OPT_FLAG},
};

#define LONGS(a) (a), sizeof(a) / sizeof((a)[0])

static const struct launcher launchers[] = {
    {"env", "uCa", "S", LONGS(env_longs), 0, true, true},
    {"tini", "pe", "", NULL, 0, 0, false, false},
    {"dumb-init", "r", "", LONGS(dumb_init_longs), 0, false, false},
    {"timeout", "sk", "", LONGS(timeout_longs), 1, false, false},
    {"busybox", "", "", NULL, 0, 0, false, false},
    {"toybox", "", "", NULL, 0, 0, false, false},
};

static const struct launcher *launcher_of(const char *prog)
{
        const char *b = base_name(prog);

        for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++)
                if (!strcmp(b, launchers[i].name))
                        return &launchers[i];
        return NULL;
}

/* getopt_long's reading of a long option token: exact name, else a unique prefix; else FLAG. */
static enum opt_kind long_kind(const struct launcher *l, const char *a, bool *joined)
{
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const struct long_opt *hit = NULL;
        size_t hits = 0;

        *joined = eq != NULL;
        for (size_t i = 0; i < l->n_longs; i++) {
                const char *name = l->longs[i].name;

                if (strlen(name) == len && !memcmp(name, a, len))
                        return l->longs[i].kind;
                if (len > 2 && !strncmp(name, a, len)) {
                        hit = &l->longs[i];
                        hits++;
                }
        }
        return hits == 1 ? hit->kind : OPT_FLAG;
}

enum strip { STRIP_PROGRAM, STRIP_EMPTY, STRIP_OPAQUE };

/*
 * Steps over the options and operands of launcher l at a->tok(i). Writes the index of the program
 * it execs into *next. Returns STRIP_EMPTY when none follows, STRIP_OPAQUE for a command line
 * hidden in one token.
 */
static enum strip strip_launcher(const struct argv *a, size_t i, const struct launcher *l,
                                 size_t *next)
{
        size_t j = i + 1;

        while (j < a->n) {
                const char *t = tok(a, j);

                if (!strcmp(t, "--")) {
                        j++;
                        break;
                }
                if (l->assignments && t[0] != '-' && t[0] != '/' && t[0] != '=' && strchr(t, '=')) {
                        j++;
                        continue;
                }
                if (t[0] != '-' || (!t[1] && !l->dash_is_flag))
                        break;
                if (!t[1]) {
                        j++;
                        continue;
                }
                if (t[1] == '-') {
                        bool joined;
                        enum opt_kind k = long_kind(l, t, &joined);

                        if (k == OPT_OPAQUE)
                                return STRIP_OPAQUE;
                        j += (k == OPT_OPERAND && !joined) ? 2 : 1;
                        continue;
                }
                /* A short bundle, read letter by letter as getopt reads it. */
                j++;
                for (const char *c = t + 1; *c; c++) {
                        if (strchr(l->opaque_short, *c))
                                return STRIP_OPAQUE;
                        if (strchr(l->operand_short, *c)) {
                                if (!c[1])
                                        j++; /* the operand is the next token */
                                break;
                        }
                }
        }
        j += l->positional;
        if (j >= a->n)
                return STRIP_EMPTY;
        *next = j;
        return STRIP_PROGRAM;
}

/* ---- programs ----------------------------------------------------------------------------- */

static bool is_shell(const char *b)
{
        static const char *const shells[] = {"sh", "bash", "dash", "ash", "zsh", "ksh"};

        for (size_t i = 0; i < sizeof(shells) / sizeof(shells[0]); i++)
                if (!strcmp(b, shells[i]))
                        return true;
        return false;
}

/* python, python3, python3.N */
static bool is_python(const char *b)
{
        if (!strcmp(b, "python") || !strcmp(b, "python3"))
                return true;
        if (strncmp(b, "python3.", 8) || !b[8])
                return false;
        for (const char *c = b + 8; *c; c++)
                if (*c < '0' || *c > '9')
                        return false;
        return true;
}

static bool module_of(const char *m, const char *pkg)
{
        size_t n = strlen(pkg);

        return !strncmp(m, pkg, n) && (m[n] == '\0' || m[n] == '.');
}

/* Sets the verdict, applying the declaration where it may admit. */
static void settle(struct tsr_kvcache_launch *out, enum tsr_kvcache_launch_verdict v,
                   const char *program, const char *token, bool forwardable, bool declared)
{
        out->program = program;
        out->token = token;
        out->forwarded = false;
        if (forwardable && declared) {
                out->verdict = TSR_LAUNCH_FORWARDED;
                out->forwarded = true;
        } else {
                out->verdict = v;
        }
}

/* A shell at a->tok(p): its -c, or its command file. */
static void judge_shell(const struct argv *a, size_t p, bool declared,
                        struct tsr_kvcache_launch *out)
{
        const char *shell = tok(a, p);

        for (size_t j = p + 1; j < a->n; j++) {
                const char *t = tok(a, j);
                const char *script = NULL;

                if (!strcmp(t, "--")) {
                        if (j + 1 >= a->n)
                                break;
                        script = tok(a, j + 1);
                } else if (!t[0] || !t[1] || (t[0] != '-' && t[0] != '+')) {
                        script = t;
                }
                if (script) {
                        if (ends_with(base_name(script), ".sh"))
                                settle(out, TSR_LAUNCH_SCRIPT, shell, script, true, declared);
                        else
                                settle(out, TSR_LAUNCH_UNRECOGNISED, shell, script, true, declared);
                        return;
                }
                if (t[0] == '-' && t[1] != '-' && strchr(t + 1, 'c')) {
                        settle(out, TSR_LAUNCH_SHELL_COMMAND, shell, t, false, declared);
                        return;
                }
                if (t[0] == '-' && t[1] == '-') {
                        if (!strcmp(t, "--rcfile") || !strcmp(t, "--init-file"))
                                j++;
                        continue;
                }
                if (ends_with(t, "o") || ends_with(t, "O"))
                        j++; /* -o NAME, -euo NAME, +O NAME */
        }
        /* A shell reading its commands from stdin. */
        settle(out, TSR_LAUNCH_UNRECOGNISED, shell, shell, true, declared);
}

/* A Python interpreter at a->tok(p): the module it runs, if any. */
static void judge_python(const struct argv *a, size_t p, enum tsr_kvcache_engine engine,
                         bool declared, struct tsr_kvcache_launch *out)
{
        const char *py = tok(a, p), *module = NULL;

        for (size_t j = p + 1; j < a->n; j++) {
                const char *t = tok(a, j);
                bool stop = false;

                if (t[0] == '-' && t[1] == '-' && t[2])
                        continue; /* a --long option: a flag */
                if (t[0] != '-' || !t[1] || t[1] == '-')
                        break; /* the script, "-" (stdin) or "--" */
                for (const char *c = t + 1; *c && !stop; c++) {
                        if (*c == 'c') {
                                settle(out, TSR_LAUNCH_UNRECOGNISED, py, t, true, declared);
                                return;
                        }
                        if (*c == 'm') {
                                if (c[1])
                                        module = c + 1;
                                else if (j + 1 < a->n)
                                        module = tok(a, ++j);
                                stop = true;
                        } else if (*c == 'W' || *c == 'X') {
                                if (!c[1])
                                        j++;
                                break;
                        }
                }
                if (stop)
                        break;
        }
        if (module && !strcmp(module, "sglang.launch_server") &&
            engine == TSR_KVCACHE_ENGINE_SGLANG) {
                settle(out, TSR_LAUNCH_ENGINE, py, module, false, declared);
                return;
        }
        if (module && ((engine == TSR_KVCACHE_ENGINE_VLLM && module_of(module, "sglang")) ||
                       (engine == TSR_KVCACHE_ENGINE_SGLANG && module_of(module, "vllm")))) {
                settle(out, TSR_LAUNCH_OTHER_ENGINE, py, module, false, declared);
                return;
        }
        settle(out, TSR_LAUNCH_UNRECOGNISED, py, module ? module : py, true, declared);
}

bool tsr_kvcache_launch_admitted(const struct tsr_kvcache_launch *l)
{
        return l->verdict == TSR_LAUNCH_ENGINE || l->verdict == TSR_LAUNCH_FORWARDED;
}

void tsr_kvcache_launch_resolve(const char *const *command, size_t n_command,
                                const char *const *args, size_t n_args,
                                enum tsr_kvcache_engine engine, bool forwarded_declared,
                                struct tsr_kvcache_launch *out)
{
        struct argv a = {command, args, n_command, n_command + n_args};
        const struct launcher *l;
        const char *prog, *b;
        size_t p = 0;

        if (!a.n) {
                settle(out, TSR_LAUNCH_NO_COMMAND, "", "", false, forwarded_declared);
                return;
        }
        if (!n_command) {
                settle(out, TSR_LAUNCH_ARGS_ONLY, "", "", true, forwarded_declared);
                return;
        }
        while ((l = launcher_of(tok(&a, p)))) {
                const char *launcher = tok(&a, p);

                switch (strip_launcher(&a, p, l, &p)) {
                case STRIP_OPAQUE:
                        settle(out, TSR_LAUNCH_SPLIT_STRING, "", launcher, true,
                               forwarded_declared);
                        return;
                case STRIP_EMPTY:
                        settle(out, TSR_LAUNCH_EMPTY_LAUNCHER, "", launcher, false,
                               forwarded_declared);
                        return;
                case STRIP_PROGRAM:
                        break;
                }
        }
        prog = tok(&a, p);
        b = base_name(prog);
        if (is_shell(b)) {
                judge_shell(&a, p, forwarded_declared, out);
        } else if (is_python(b)) {
                judge_python(&a, p, engine, forwarded_declared, out);
        } else if (!strcmp(b, "vllm")) {
                settle(out,
                       engine == TSR_KVCACHE_ENGINE_VLLM ? TSR_LAUNCH_ENGINE
                                                         : TSR_LAUNCH_OTHER_ENGINE,
                       prog, prog, false, forwarded_declared);
        } else if (!strcmp(b, "sglang") && engine == TSR_KVCACHE_ENGINE_VLLM) {
                settle(out, TSR_LAUNCH_OTHER_ENGINE, prog, prog, false, forwarded_declared);
        } else if (ends_with(b, ".sh")) {
                settle(out, TSR_LAUNCH_SCRIPT, prog, prog, true, forwarded_declared);
        } else if (!strcmp(b, "entrypoint") || !strcmp(b, "run")) {
                settle(out, TSR_LAUNCH_WRAPPER, prog, prog, true, forwarded_declared);
        } else {
                settle(out, TSR_LAUNCH_UNRECOGNISED, prog, prog, true, forwarded_declared);
        }
}

static const char *engine_name(enum tsr_kvcache_engine e)
{
        return e == TSR_KVCACHE_ENGINE_VLLM ? "vLLM" : "SGLang";
}

static const char *entry_point(enum tsr_kvcache_engine e)
{
        return e == TSR_KVCACHE_ENGINE_VLLM ? "vllm" : "python3 -m sglang.launch_server";
}

#define FORWARD_HINT "kvcache.gpustack.ai/launch-args-forwarded: \"true\""

char *tsr_kvcache_launch_message(const struct tsr_kvcache_launch *l, const char *container,
                                 enum tsr_kvcache_engine engine, char *out, size_t len)
{
        char c[320], t[320], p[320];
        enum tsr_kvcache_engine other =
            engine == TSR_KVCACHE_ENGINE_VLLM ? TSR_KVCACHE_ENGINE_SGLANG : TSR_KVCACHE_ENGINE_VLLM;

        tsr_go_quote(container, c, sizeof(c));
        tsr_go_quote(l->token, t, sizeof(t));
        tsr_go_quote(base_name(l->program), p, sizeof(p));
        switch (l->verdict) {
        case TSR_LAUNCH_ENGINE:
        case TSR_LAUNCH_FORWARDED:
                snprintf(out, len, "%s", "");
                break;
        case TSR_LAUNCH_NO_COMMAND:
                snprintf(out, len,
                         "container %s declares neither command nor args, so it runs the image's "
                         "own ENTRYPOINT and CMD, and appending to args would make Kubernetes read "
                         "args as the whole command line and discard the image's CMD. Put the "
                         "engine executable in command and the image's launch arguments in args",
                         c);
                break;
        case TSR_LAUNCH_ARGS_ONLY:
                snprintf(out, len,
                         "container %s declares args but no command, so it runs the image "
                         "ENTRYPOINT, which admission cannot inspect: nothing shows that appended "
                         "arguments reach the engine. Put the engine executable in command, or "
                         "declare " FORWARD_HINT " only when the image ENTRYPOINT forwards them",
                         c);
                break;
        case TSR_LAUNCH_EMPTY_LAUNCHER:
                snprintf(out, len,
                         "container %s runs the launcher %s with nothing after it, so it names no "
                         "program at all and the appended connector flag would become the command "
                         "that launcher executes. Put the engine executable and its arguments "
                         "after the launcher, or in command and args directly",
                         c, t);
                break;
        case TSR_LAUNCH_SHELL_COMMAND:
                snprintf(out, len,
                         "container %s runs %s through a shell's %s, and anything this webhook "
                         "appends to args would become the shell's positional parameters ($0, $1) "
                         "rather than reaching the engine. The Pod would start, record itself as "
                         "injected, and never enable the connector. Launch the engine directly - "
                         "put its executable in command and its arguments in args - or add the "
                         "connector flag to the script yourself",
                         c, p, t);
                break;
        case TSR_LAUNCH_SPLIT_STRING:
                snprintf(out, len,
                         "container %s hides its command line inside a single argument of %s, so "
                         "this webhook cannot tell what would run or whether appending to args "
                         "would reach it. Launch the engine directly - put its executable in "
                         "command and its arguments in args - add the connector flag inside that "
                         "argument yourself, or declare " FORWARD_HINT
                         " if that command line forwards appended arguments",
                         c, t);
                break;
        case TSR_LAUNCH_SCRIPT:
                snprintf(out, len,
                         "container %s runs the script %s, and whether anything this webhook "
                         "appends to args reaches the engine depends on whether that script "
                         "forwards its arguments - which admission cannot read, because it is "
                         "inside the image. Launch the engine directly - put its executable in "
                         "command and its arguments in args - add the connector flag inside the "
                         "script yourself, or declare " FORWARD_HINT " if the script forwards them",
                         c, t);
                break;
        case TSR_LAUNCH_WRAPPER:
                snprintf(out, len,
                         "container %s runs the wrapper %s, and whether it forwards appended "
                         "arguments to the engine is inside the image, which admission cannot "
                         "read. Launch the engine directly, or declare " FORWARD_HINT
                         " if the wrapper forwards them",
                         c, t);
                break;
        case TSR_LAUNCH_OTHER_ENGINE:
                snprintf(out, len,
                         "container %s launches %s, the entry point of %s, but annotation "
                         "\"kvcache.gpustack.ai/engine\" declares %s: this webhook would inject "
                         "one engine's configuration into another program. Launch the engine the "
                         "annotation names (%s), or correct the annotation",
                         c, t, engine_name(other), engine_name(engine), entry_point(engine));
                break;
        case TSR_LAUNCH_UNRECOGNISED:
                snprintf(out, len,
                         "container %s launches %s, which is neither the %s entry point (%s) nor "
                         "a launcher this webhook can see through, so it cannot show that appended "
                         "arguments reach the engine. Launch the engine directly, or "
                         "declare " FORWARD_HINT
                         " only if it forwards appended arguments to the engine",
                         c, t, engine_name(engine), entry_point(engine));
                break;
        }
        return out;
}
