/*
 * fuzz_mig_marker.c - bytes as a MIG ownership marker file named for card "GPU-fuzz". The decoder
 * fails closed (with a message); whatever it accepts encodes and decodes back to the same marker.
 */
#include "base/diag.h"
#include "codec/mig_marker.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct tsr_mig_marker first, second;
        struct tsr_diag diag;
        char *again = NULL;

        if (size > 65536)
                return 0;
        tsr_diag_clear(&diag);
        if (tsr_mig_marker_decode((const char *)data, size, "GPU-fuzz", &first, &diag)) {
                if (diag.msg[0] == '\0')
                        abort();
                return 0;
        }
        if (strcmp(first.card, "GPU-fuzz") || !first.pod_uid[0] || !first.profile[0] ||
            !first.mig_uuid[0] || tsr_mig_marker_encode(&first, &again))
                abort();
        if (tsr_mig_marker_decode(again, strlen(again), "GPU-fuzz", &second, &diag) ||
            memcmp(&first, &second, sizeof(first)))
                abort();
        free(again);
        return 0;
}
