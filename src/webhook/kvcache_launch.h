/*
 * kvcache_launch.h - whether arguments appended to a container's args reach the declared inference
 * engine: the launch-command parser of the KV-cache injection webhook (kvcache.h;
 * seeds/admission.md "The KV cache injection webhook"; spec/upstream-behavior.md §11;
 * gpustack-operator docs/modules/kv-cache/injection.md "Refusals and fixes").
 *
 * Kubernetes runs command followed by args, so the parser reads their concatenation (a -c moved
 * from command into args is the same process). It then:
 *   1. refuses a container with neither command nor args (appending args would discard the image's
 *      CMD), and one with args but no command unless the author declared that the image ENTRYPOINT
 *      forwards them (kvcache.gpustack.ai/launch-args-forwarded: "true"; launchProgram is then "");
 *   2. strips transparent launcher prefixes, repeatedly, by each launcher's own option grammar:
 *        env        NAME=VALUE assignments; -u NAME, -C DIR, -a ARG (--unset, --chdir, --argv0,
 *                   separated or =joined, letters bundled as getopt bundles them); flags otherwise;
 *                   -S / --split-string (any spelling, bundled or joined) hides a command line in
 *                   one argument: refused unless forwarding is declared (launchProgram "")
 *        tini       -p SIGNAL, -e CODE; flags otherwise
 *        dumb-init  -r / --rewrite MAP; flags otherwise
 *        timeout    -s / --signal SIG, -k / --kill-after DUR, then its own DURATION operand
 *        busybox, toybox   the first operand is the applet, i.e. the program
 *      "--" ends a launcher's options. A launcher with nothing after it (command ["tini", "--"]
 *      with empty args) is refused: the appended flag would become the command it runs.
 *      gosu/chroot/su-exec and other launchers whose first operand is not the program are NOT in
 *      the table: they are refused as unrecognised unless forwarding is declared.
 *   3. reads the program left (launchProgram, as written):
 *        sh, bash, dash, ash, zsh, ksh with -c in any option bundle before the first operand:
 *            refused ALWAYS - appended arguments become $0, $1 and never reach the engine; the
 *            forwarding declaration does not exempt it. -o/-O (and bundles ending in them),
 *            +o/+O, --rcfile and --init-file consume the next token; the first operand is the
 *            script, judged like a program (below);
 *        a name ending in ".sh" (./run.sh, and sh /app/run.sh alike): refused unless forwarded;
 *        a suffix-less wrapper named "entrypoint" or "run": refused unless forwarded;
 *        the declared engine's entry point: "vllm" for the vLLM family, or a Python interpreter
 *            (python, python3, python3.N) running "-m sglang.launch_server" for SGLang (its -W,
 *            -X operands skipped, -msglang.launch_server joined accepted): admitted;
 *        the OTHER engine's entry point (vllm, "sglang", python -m sglang.* / -m vllm.*): refused
 *            ALWAYS - one engine's configuration would go to another program;
 *        anything else (an unknown launcher, script, python -c, another module): refused unless
 *            forwarding is declared.
 * The parser never reads past the tokens it is given and never allocates. launchArgsForwarded is
 * true exactly when the declaration is what admitted the launch.
 *
 * Ownership: struct tsr_kvcache_launch points into the argv it was resolved from (program, token),
 * valid while that argv is. Pure; safe from any thread.
 */
#ifndef TSR_WEBHOOK_KVCACHE_LAUNCH_H
#define TSR_WEBHOOK_KVCACHE_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>

enum tsr_kvcache_engine {
        TSR_KVCACHE_ENGINE_VLLM,   /* the vLLM family: vllm and vllm-ascend */
        TSR_KVCACHE_ENGINE_SGLANG, /* SGLang */
};

enum tsr_kvcache_launch_verdict {
        TSR_LAUNCH_ENGINE,         /* the declared engine's entry point: admitted */
        TSR_LAUNCH_FORWARDED,      /* not identified, admitted by the author's declaration */
        TSR_LAUNCH_NO_COMMAND,     /* neither command nor args */
        TSR_LAUNCH_ARGS_ONLY,      /* args without command, no declaration */
        TSR_LAUNCH_EMPTY_LAUNCHER, /* a launcher with nothing after it */
        TSR_LAUNCH_SHELL_COMMAND,  /* a shell's -c */
        TSR_LAUNCH_SPLIT_STRING,   /* env -S / --split-string, no declaration */
        TSR_LAUNCH_SCRIPT,         /* a .sh program or shell script, no declaration */
        TSR_LAUNCH_WRAPPER,        /* entrypoint / run, no declaration */
        TSR_LAUNCH_OTHER_ENGINE,   /* the other engine's entry point */
        TSR_LAUNCH_UNRECOGNISED,   /* anything else, no declaration */
};

struct tsr_kvcache_launch {
        enum tsr_kvcache_launch_verdict verdict;
        const char *program; /* launchProgram: the executable left, "" when none (borrowed) */
        const char *token;   /* the token the verdict is about: the launcher, the shell option,
                                the script; "" when none (borrowed) */
        bool forwarded;      /* launchArgsForwarded: the declaration admitted it */
};

/* True for the two admitting verdicts. */
bool tsr_kvcache_launch_admitted(const struct tsr_kvcache_launch *l);

/*
 * Resolves the launch of command[0..n_command) followed by args[0..n_args) for engine, with the
 * author's forwarding declaration. Tokens may be any bytes up to their NUL. Writes *out; never
 * fails.
 */
void tsr_kvcache_launch_resolve(const char *const *command, size_t n_command,
                                const char *const *args, size_t n_args,
                                enum tsr_kvcache_engine engine, bool forwarded_declared,
                                struct tsr_kvcache_launch *out);

/*
 * Writes the refusal message for a refused launch of container (for the webhook's verdict) into
 * out (len bytes, truncated, NUL-terminated) and returns out; "" for an admitted one.
 */
char *tsr_kvcache_launch_message(const struct tsr_kvcache_launch *l, const char *container,
                                 enum tsr_kvcache_engine engine, char *out, size_t len);

#endif
