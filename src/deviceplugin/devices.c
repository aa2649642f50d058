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

void tsr_dp_shape(const struct tsr_dp_node *node, const struct tsr_accel_ledger *ledger,
                  enum tsr_family f, const bool *held, struct tsr_dp_shape *shape)
{
        for (size_t i = 0; i < node->n; i++) {
                unsigned healthy, count = tsr_tokens_count(f, &node->caps[i], &ledger[i], &healthy);

                shape[i].count = count;
                shape[i].healthy = count && healthy == count && !(held && held[i]);
        }
}

bool tsr_dp_shape_equal(const struct tsr_dp_shape *a, const struct tsr_dp_shape *b, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (a[i].count != b[i].count || a[i].healthy != b[i].healthy)
                        return false;
        return true;
}

int tsr_dp_tokens_init(struct tsr_dp_tokens *t, const struct tsr_dp_node *node, enum tsr_family f)
{
        size_t total = 0, len = 0, cap = 0, k = 0;
        size_t *at = NULL;
        char *text = NULL, id[TSR_TOKEN_ID_MAX];

        memset(t, 0, sizeof(*t));
        for (size_t i = 0; i < node->n; i++)
                total += tsr_tokens_max(f, &node->caps[i]);
        t->first = malloc((node->n + 1) * sizeof(*t->first));
        at = malloc((total ? total : 1) * sizeof(*at));
        if (!t->first || !at)
                goto nomem;
        for (size_t i = 0; i < node->n; i++) {
                unsigned max = tsr_tokens_max(f, &node->caps[i]);

                t->first[i] = k;
                for (unsigned x = 0; x < max; x++, k++) {
                        size_t l;

                        /* an ID that cannot be formed ends the accelerator's: later ones are longer
                         */
                        if (tsr_token_format(id, node->group, node->caps[i].uuid,
                                             tsr_token_index(f, x)))
                                break;
                        l = strlen(id) + 1;
                        if (len + l > cap) {
                                size_t c = cap ? 2 * cap : 4096;
                                char *p;

                                while (c < len + l)
                                        c *= 2;
                                if (!(p = realloc(text, c)))
                                        goto nomem;
                                text = p;
                                cap = c;
                        }
                        memcpy(text + len, id, l);
                        at[k] = len;
                        len += l;
                }
        }
        t->first[node->n] = k;
        t->ids = malloc((k ? k : 1) * sizeof(*t->ids));
        if (!t->ids)
                goto nomem;
        for (size_t x = 0; x < k; x++)
                t->ids[x] = text + at[x];
        t->family = f;
        t->n = node->n;
        t->text = text;
        free(at);
        return 0;
nomem:
        free(at);
        free(text);
        free(t->first);
        free(t->ids);
        memset(t, 0, sizeof(*t));
        return TSR_ENOMEM;
}

void tsr_dp_tokens_release(struct tsr_dp_tokens *t)
{
        free(t->first);
        free(t->ids);
        free(t->text);
        memset(t, 0, sizeof(*t));
}

int tsr_dp_devices_update(const struct tsr_dp_tokens *t, const struct tsr_dp_shape *was,
                          const struct tsr_dp_shape *shape, struct tsr_dp_device **list, size_t *n,
                          size_t *cap)
{
        size_t total = 0, k = 0;
        bool same = was != NULL;

        for (size_t i = 0; i < t->n; i++) {
                if (shape[i].count > t->first[i + 1] - t->first[i])
                        return TSR_EINVAL;
                total += shape[i].count;
                same = same && was[i].count == shape[i].count;
        }
        if (same) { /* the same tokens: only their health can have moved */
                for (size_t i = 0; i < t->n; k += shape[i].count, i++)
                        for (unsigned x = 0;
                             was[i].healthy != shape[i].healthy && x < shape[i].count; x++)
                                (*list)[k + x].healthy = shape[i].healthy;
                return 0;
        }
        if (total > *cap) {
                struct tsr_dp_device *p = realloc(*list, total * sizeof(*p));

                if (!p)
                        return TSR_ENOMEM;
                *list = p;
                *cap = total;
        }
        for (size_t i = 0; i < t->n; i++)
                for (unsigned x = 0; x < shape[i].count; x++, k++) {
                        const char *id = t->ids[t->first[i] + x];

                        memcpy((*list)[k].id, id, strlen(id) + 1);
                        (*list)[k].accel = (unsigned)i;
                        (*list)[k].healthy = shape[i].healthy;
                }
        *n = total;
        return 0;
}
