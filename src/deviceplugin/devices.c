/*
 * devices.c - ListAndWatch device lists.
 */
#include "deviceplugin/devices.h"

#include "base/err.h"

#include <stdlib.h>
#include <string.h>

int tsr_dp_devices(const struct tsr_dp_node *node, const struct tsr_accel_ledger *ledger,
                   enum tsr_family f, struct tsr_dp_device **out, size_t *n)
{
        struct tsr_dp_device *list;
        size_t total = 0, k = 0;

        *out = NULL;
        *n = 0;
        for (size_t i = 0; i < node->n; i++)
                total += tsr_tokens_count(f, &node->caps[i], &ledger[i], NULL);
        if (total == 0)
                return 0;
        list = calloc(total, sizeof(*list));
        if (!list)
                return TSR_ENOMEM;
        for (size_t i = 0; i < node->n; i++) {
                unsigned healthy, count = tsr_tokens_count(f, &node->caps[i], &ledger[i], &healthy);

                for (unsigned t = 0; t < count; t++, k++) {
                        int rc = tsr_token_format(list[k].id, node->group, node->caps[i].uuid,
                                                  tsr_token_index(f, t));

                        if (rc) {
                                free(list);
                                return rc;
                        }
                        list[k].accel = (unsigned)i;
                        list[k].healthy = healthy == count;
                }
        }
        *out = list;
        *n = total;
        return 0;
}

bool tsr_dp_devices_equal(const struct tsr_dp_device *a, size_t na, const struct tsr_dp_device *b,
                          size_t nb)
{
        if (na != nb)
                return false;
        for (size_t i = 0; i < na; i++)
                if (a[i].healthy != b[i].healthy || strcmp(a[i].id, b[i].id))
                        return false;
        return true;
}
