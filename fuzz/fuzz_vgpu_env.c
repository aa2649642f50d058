/*
 * fuzz_vgpu_env.c - libFuzzer target for vgpu/config (the slice's environment). The input is split
 * at newlines into "NAME=value" entries (at most 64). Either the parse fails with a non-empty
 * message that names one of the contract's variables, or it succeeds and every field is within
 * its documented range: SM limits in [0,99] (100 reads as no throttling), a log level in [0,4], an
 * absolute cache path that fits. A size that parses must print back (as bytes) and parse to the
 * same value. Any violation abort()s, so the fuzzer and the corpus replay both flag it.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vgpu/config.h"

#define ENTRIES_MAX 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_parsed(const struct tsr_vgpu_config *c)
{
        if (c->log_level < 0 || c->log_level > 4 || c->cache_path[0] != '/' ||
            !memchr(c->cache_path, '\0', sizeof(c->cache_path)))
                abort();
        for (int d = 0; d < TSR_VGPU_DEVICES_MAX; d++)
                if (c->sm_limit[d] > 99)
                        abort();
}

static void check_sizes(const char *const *envp)
{
        for (const char *const *e = envp; *e; e++) {
                const char *eq = strchr(*e, '=');
                uint64_t bytes, again;
                char text[32];

                if (!eq || tsr_vgpu_parse_size(eq + 1, &bytes))
                        continue;
                snprintf(text, sizeof(text), "%" PRIu64, bytes);
                if (tsr_vgpu_parse_size(text, &again) || again != bytes)
                        abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *text = malloc(size + 1), *line, *save = NULL;
        const char *envp[ENTRIES_MAX + 1];
        struct tsr_vgpu_config c;
        char err[512];
        size_t n = 0;

        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = '\0';
        for (line = strtok_r(text, "\n", &save); line && n < ENTRIES_MAX;
             line = strtok_r(NULL, "\n", &save))
                envp[n++] = line;
        envp[n] = NULL;
        err[0] = '\0';
        if (tsr_vgpu_config_parse(envp, &c, err, sizeof(err))) {
                if (!err[0] || (!strstr(err, "CUDA_") && !strstr(err, "GPU_CORE_") &&
                                !strstr(err, "LIBCUDA_")))
                        abort();
        } else {
                check_parsed(&c);
        }
        check_sizes(envp);
        free(text);
        return 0;
}
