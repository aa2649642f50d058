/*
 * tokens.c - device-plugin token counts, health and IDs.
 */
#include "core/tokens.h"

#include "base/err.h"
#include "core/geometry.h"

#include <stdio.h>
#include <string.h>

unsigned tsr_tokens_count(enum tsr_family f, const struct tsr_accel_cap *cap,
                          const struct tsr_accel_ledger *l, unsigned *healthy)
{
        unsigned total = 0;
        bool ok = true;

        switch (f) {
        case TSR_FAMILY_EXCLUSIVE:
        case TSR_FAMILY_SHARED:
        case TSR_FAMILY_SLICED:
                if (cap->partitioned)
                        break;
                total = f == TSR_FAMILY_EXCLUSIVE ? 1
                        : f == TSR_FAMILY_SHARED  ? TSR_SHARES_PER_ACCEL
                                                  : cap->slice_slots;
                ok = l->mode == TSR_MODE_NONE || l->mode == tsr_mode_of_family(f);
                break;
        case TSR_FAMILY_PARTITIONED:
                if (cap->partitioned)
                        total = l->live.n +
                                tsr_geometry_largest_free(cap->product, cap->offered, &l->live);
                break;
        case TSR_FAMILY_VISIBILITY:
                total = TSR_VISIBILITY_TOKENS_PER_ACCEL;
                break;
        default:
                break;
        }
        if (healthy)
                *healthy = ok ? total : 0;
        return total;
}

unsigned tsr_tokens_max(enum tsr_family f, const struct tsr_accel_cap *cap)
{
        static const struct tsr_accel_ledger idle = {.mode = TSR_MODE_NONE};

        if (f == TSR_FAMILY_PARTITIONED)
                return cap->partitioned ? 2 * TSR_MIG_AXIS_MAX : 0;
        return tsr_tokens_count(f, cap, &idle, NULL);
}

unsigned tsr_token_index(enum tsr_family f, unsigned k)
{
        return f == TSR_FAMILY_SHARED ? k * (unsigned)TSR_UNITS_PER_SHARE : k;
}

static bool valid_part(const char *s)
{
        return s && *s && !strchr(s, ':');
}

int tsr_token_format(char *out, const char *group, const char *device, unsigned index)
{
        int k;

        if (!valid_part(group) || !valid_part(device))
                return TSR_EINVAL;
        k = snprintf(out, TSR_TOKEN_ID_MAX, "%s:%s:%04u", group, device, index);
        return k > 0 && k < TSR_TOKEN_ID_MAX ? 0 : TSR_EINVAL;
}

int tsr_token_parse(const char *id, const char *group, char *device, unsigned *index)
{
        const char *a = strchr(id, ':'), *b = strrchr(id, ':'), *d;
        unsigned long v = 0;

        if (!a || a == id || b - a < 2 || b - a - 1 >= TSR_UUID_MAX || !b[1])
                return TSR_EPARSE;
        if (group && (strlen(group) != (size_t)(a - id) || strncmp(id, group, (size_t)(a - id))))
                return TSR_EPARSE;
        for (d = b + 1; *d; d++) {
                if (*d < '0' || *d > '9' || v > 100000000ul)
                        return TSR_EPARSE;
                v = v * 10 + (unsigned long)(*d - '0');
        }
        memcpy(device, a + 1, (size_t)(b - a - 1));
        device[b - a - 1] = '\0';
        *index = (unsigned)v;
        return 0;
}
