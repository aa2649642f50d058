/*
 * fuzz_kvcache_launch.c - bytes as a container's launch for the KV-cache injection webhook's
 * parser (webhook/kvcache_launch.h).
 *
 * Input: byte 0 selects the engine (bit 0: SGLang) and the forwarding declaration (bit 1); byte 1
 * is how many of the tokens are command (modulo their count + 1); the rest is the tokens, split on
 * '\n' (a corpus file reads "02tini\n--\nvllm\nserve": vLLM, no declaration, command
 * [tini, --], args [vllm, serve]).
 *
 * Whatever the parser answers must hold together: the same verdict twice; admitted exactly for the
 * two admitting verdicts, with a message exactly when refused; launchArgsForwarded exactly for the
 * forwarded verdict and only when declared; the declaration admits every forwardable refusal and
 * never turns an admission into a refusal or changes its program; launchProgram and the token are
 * "" or point into the input's tokens.
 */
#include "webhook/kvcache_launch.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TOKENS_MAX 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char buf[65536 + 1];
static const char *tok[TOKENS_MAX];

/* s is "" or lies inside one of the n tokens. */
static bool from_input(const char *s, size_t n)
{
        if (!*s)
                return true;
        for (size_t i = 0; i < n; i++)
                if (s >= tok[i] && s <= tok[i] + strlen(tok[i]))
                        return true;
        return false;
}

static bool forwardable(enum tsr_kvcache_launch_verdict v)
{
        return v == TSR_LAUNCH_ARGS_ONLY || v == TSR_LAUNCH_SPLIT_STRING ||
               v == TSR_LAUNCH_SCRIPT || v == TSR_LAUNCH_WRAPPER || v == TSR_LAUNCH_UNRECOGNISED;
}

static void check(const struct tsr_kvcache_launch *l, bool declared, size_t n,
                  enum tsr_kvcache_engine engine)
{
        char msg[4096];
        bool admitted = l->verdict == TSR_LAUNCH_ENGINE || l->verdict == TSR_LAUNCH_FORWARDED;

        if (tsr_kvcache_launch_admitted(l) != admitted)
                abort();
        if (l->forwarded != (l->verdict == TSR_LAUNCH_FORWARDED) || (l->forwarded && !declared))
                abort();
        if (declared && forwardable(l->verdict))
                abort();
        if (!l->program || !l->token || !from_input(l->program, n) || !from_input(l->token, n))
                abort();
        tsr_kvcache_launch_message(l, "c", engine, msg, sizeof(msg));
        if ((msg[0] == '\0') != admitted)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct tsr_kvcache_launch a, b, fwd;
        enum tsr_kvcache_engine engine;
        bool declared;
        size_t n = 0, n_command;

        if (size < 2 || size - 2 >= sizeof(buf))
                return 0;
        engine = (data[0] & 1) ? TSR_KVCACHE_ENGINE_SGLANG : TSR_KVCACHE_ENGINE_VLLM;
        declared = (data[0] & 2) != 0;
        memcpy(buf, data + 2, size - 2);
        buf[size - 2] = '\0';
        if (size > 2) {
                char *p = buf;

                while (n < TOKENS_MAX) {
                        char *nl = memchr(p, '\n', (size_t)(buf + size - 2 - p));

                        tok[n++] = p;
                        if (!nl)
                                break;
                        *nl = '\0';
                        p = nl + 1;
                }
        }
        n_command = (data[1] >= '0' && data[1] <= '9') ? (size_t)(data[1] - '0') : data[1];
        n_command %= n + 1;

        tsr_kvcache_launch_resolve(tok, n_command, tok + n_command, n - n_command, engine, declared,
                                   &a);
        tsr_kvcache_launch_resolve(tok, n_command, tok + n_command, n - n_command, engine, declared,
                                   &b);
        if (a.verdict != b.verdict || a.program != b.program || a.token != b.token ||
            a.forwarded != b.forwarded)
                abort();
        check(&a, declared, n, engine);
        if (!declared) {
                tsr_kvcache_launch_resolve(tok, n_command, tok + n_command, n - n_command, engine,
                                           true, &fwd);
                check(&fwd, true, n, engine);
                if (tsr_kvcache_launch_admitted(&a) &&
                    (!tsr_kvcache_launch_admitted(&fwd) || fwd.program != a.program))
                        abort();
                if (forwardable(a.verdict) && fwd.verdict != TSR_LAUNCH_FORWARDED)
                        abort();
        }
        return 0;
}
