/*
 * fuzz_command_line.c - bytes as one runbook command line through the shell-style splitter
 * (quotes, escapes, one level of pipes) and every word through the Go-duration parser `sleep`
 * uses. Either may refuse; an accepted pipeline has 1..SIM_STAGES_MAX stages of at least one word.
 */
#include "base/diag.h"
#include "sim/argv.h"
#include "sim/commands.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct sim_pipeline p;
        struct tsr_diag diag;
        char *line;

        if (size > 4096)
                return 0;
        line = malloc(size + 1);
        if (!line)
                return 0;
        memcpy(line, data, size);
        line[size] = '\0';
        tsr_diag_clear(&diag);
        if (sim_pipeline_parse(line, &p, &diag) == 0) {
                if (p.n == 0 || p.n > SIM_STAGES_MAX)
                        abort();
                for (size_t s = 0; s < p.n; s++) {
                        if (p.stage[s].n == 0)
                                abort();
                        for (size_t w = 0; w < p.stage[s].n; w++) {
                                int64_t seconds;

                                if (sim_parse_duration(p.stage[s].v[w], &seconds) == 0 &&
                                    seconds < 0)
                                        abort();
                        }
                }
                sim_pipeline_release(&p);
        } else if (diag.msg[0] == '\0') {
                abort();
        }
        free(line);
        return 0;
}
