/*
 * fuzz_scenario.c - bytes as a scenario file through the whole simulator: YAML parsing, cluster
 * declaration, command splitting, every command and the jq stage. A run may fail with a
 * diagnostic; it must never crash, leak or read out of bounds, and a failure must carry a line.
 */
#include "base/buf.h"
#include "base/diag.h"
#include "sim/scenario.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct tsr_buf out = TSR_BUF_INIT;
        struct tsr_diag diag;
        int rc;

        if (size > 65536)
                return 0;
        rc = sim_scenario_run("fuzz.yaml", (const char *)data, size, &out, &diag);
        if (rc && diag.msg[0] == '\0')
                abort();
        tsr_buf_release(&out);
        return 0;
}
