/*
 * fuzz_alloc_annotation.c - bytes as the `device.gpustack.ai/accelerator.allocated` annotation
 * value. The decoder may refuse (with a message); whatever it accepts must encode and decode
 * back to the same records, so no field is dropped or invented on the way through.
 */
#include "base/diag.h"
#include "codec/alloc_annotation.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct tsr_container_allocation first[TSR_ALLOC_CONTAINERS_MAX];
static struct tsr_container_allocation second[TSR_ALLOC_CONTAINERS_MAX];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct tsr_diag diag;
        char *text, *again = NULL;
        size_t n = 0, m = 0;
        int rc;

        if (size > 65536)
                return 0;
        text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = '\0';
        tsr_diag_clear(&diag);
        rc = tsr_alloc_annotation_decode(text, first, TSR_ALLOC_CONTAINERS_MAX, &n, &diag);
        free(text);
        if (rc) {
                if (diag.msg[0] == '\0')
                        abort();
                return 0;
        }
        if (tsr_alloc_annotation_encode(first, n, &again))
                abort();
        if (tsr_alloc_annotation_decode(again, second, TSR_ALLOC_CONTAINERS_MAX, &m, &diag) ||
            m != n)
                abort();
        for (size_t i = 0; i < n; i++) {
                size_t k;

                for (k = 0; k < m; k++)
                        if (!strcmp(first[i].container, second[k].container))
                                break;
                if (k == m || first[i].n != second[k].n ||
                    first[i].n_device_ids != second[k].n_device_ids ||
                    strcmp(first[i].group_id, second[k].group_id) ||
                    strcmp(first[i].manufacturer, second[k].manufacturer))
                        abort();
                for (size_t a = 0; a < first[i].n; a++) {
                        const struct tsr_accel_allocation *x = &first[i].accels[a];
                        const struct tsr_accel_allocation *y = &second[k].accels[a];

                        if (strcmp(x->id, y->id) || x->index != y->index || x->mode != y->mode ||
                            x->allocated != y->allocated || strcmp(x->profile, y->profile) ||
                            x->start != y->start || x->length != y->length ||
                            strcmp(x->physical_id, y->physical_id))
                                abort();
                }
        }
        free(again);
        return 0;
}
