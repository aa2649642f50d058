/*
 * fuzz_devices_object.c - bytes as a Devices object read back into capabilities (the
 * controller's view of a node). The reader fails closed (with a message); whatever it accepts
 * builds back into a Devices object that reads back to the same capabilities.
 */
#include "base/diag.h"
#include "codec/devices_object.h"
#include "core/ledger.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ACCELS_MAX 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct tsr_accel_cap first[ACCELS_MAX], second[ACCELS_MAX];
        struct tsr_accel_ledger ledger[ACCELS_MAX];
        struct tsr_diag diag;
        json_t *in, *again = NULL;
        size_t n, m;

        if (size > 65536)
                return 0;
        in = json_loadb((const char *)data, size, 0, NULL);
        if (!in)
                return 0;
        tsr_diag_clear(&diag);
        if (tsr_devices_object_capabilities(in, first, ACCELS_MAX, &n, &diag)) {
                if (diag.msg[0] == '\0')
                        abort();
                json_decref(in);
                return 0;
        }
        json_decref(in);
        for (size_t i = 0; i < n; i++)
                tsr_ledger_reset(&ledger[i]);
        if (tsr_devices_object_build("fuzz", first, ledger, n, &again, &diag) ||
            tsr_devices_object_capabilities(again, second, ACCELS_MAX, &m, &diag) || m != n ||
            (n && memcmp(first, second, n * sizeof(*first))))
                abort();
        json_decref(again);
        return 0;
}
