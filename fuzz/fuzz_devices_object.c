/*
 * fuzz_devices_object.c - bytes as a Devices object read back into capabilities and then the
 * ledger (the controller's view of a node). Both readers fail closed (with a message); whatever
 * they accept builds back into a Devices object that reads back to the same capabilities, and
 * (when the accelerator indexes are distinct, as a device manager writes them) to a ledger that
 * passes tsr_ledger_check, has the same figures and builds the same object again.
 */
#include "base/diag.h"
#include "codec/devices_object.h"
#include "core/ledger.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ACCELS_MAX 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool distinct_indexes(const struct tsr_accel_cap *caps, size_t n)
{
        for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < i; j++)
                        if (caps[i].index == caps[j].index)
                                return false;
        return true;
}

/* The ledger of again reads back to one with ledger's figures, which builds again the same. */
static void ledger_round_trip(const struct tsr_accel_cap *caps, size_t n,
                              const struct tsr_accel_ledger *ledger, json_t *again)
{
        struct tsr_accel_ledger back[ACCELS_MAX];
        json_t *third = NULL;

        if (tsr_devices_object_ledger(again, caps, n, back, NULL))
                abort();
        for (size_t i = 0; i < n; i++) {
                const struct tsr_accel_ledger *a = &ledger[i], *b = &back[i];

                if (a->mode != b->mode || a->allocated != b->allocated ||
                    a->remaining != b->remaining || a->allocated_slices != b->allocated_slices ||
                    a->live.n != b->live.n ||
                    (caps[i].partitioned && tsr_geometry_occupied(caps[i].product, &a->live) !=
                                                tsr_geometry_occupied(caps[i].product, &b->live)))
                        abort();
                for (unsigned p = 0; caps[i].partitioned && p < caps[i].product->n_profiles; p++)
                        if (tsr_geometry_live_count(&a->live, p) !=
                            tsr_geometry_live_count(&b->live, p))
                                abort();
        }
        if (tsr_devices_object_build("fuzz", caps, back, n, &third, NULL) ||
            !json_equal(json_object_get(third, "status"), json_object_get(again, "status")))
                abort();
        json_decref(third);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct tsr_accel_cap first[ACCELS_MAX], second[ACCELS_MAX];
        struct tsr_accel_ledger ledger[ACCELS_MAX];
        struct tsr_diag diag;
        json_t *in, *again = NULL;
        bool read;
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
        tsr_diag_clear(&diag);
        read = tsr_devices_object_ledger(in, first, n, ledger, &diag) == 0;
        json_decref(in);
        if (!read && diag.msg[0] == '\0')
                abort();
        for (size_t i = 0; i < n; i++) {
                if (!read)
                        tsr_ledger_reset(&ledger[i]);
                else if (tsr_ledger_check(&first[i], &ledger[i], NULL))
                        abort();
        }
        if (tsr_devices_object_build("fuzz", first, ledger, n, &again, &diag) ||
            tsr_devices_object_capabilities(again, second, ACCELS_MAX, &m, &diag) || m != n ||
            (n && memcmp(first, second, n * sizeof(*first))))
                abort();
        if (distinct_indexes(first, n))
                ledger_round_trip(first, n, ledger, again);
        json_decref(again);
        return 0;
}
