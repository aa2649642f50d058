/*
 * instancetype.c - InstanceType naming and presets.
 */
#include "core/instancetype.h"

#include "base/err.h"
#include "base/fnv.h"

#include <stdio.h>
#include <string.h>

static char lower(char c)
{
        return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/*
 * Writes the group id of p into out, or only measures it when out is NULL. Returns its length
 * (without the NUL).
 */
static size_t group_id_put(const struct tsr_product *p, char *out)
{
        const char *mfr = tsr_catalog_manufacturer(p->manufacturer)->key;
        const char *s = p->name;
        size_t o = 0;

        while (*s) {
                char word[128];
                size_t w = 0;

                while (*s == ' ')
                        s++;
                while (*s && *s != ' ' && w + 1 < sizeof(word))
                        word[w++] = lower(*s++);
                word[w] = '\0';
                if (w == 0 || strcmp(word, mfr) == 0 || strcmp(word, "tesla") == 0)
                        continue;
                if (o && out)
                        out[o] = '-';
                o += o ? 1 : 0;
                if (out)
                        memcpy(out + o, word, w);
                o += w;
        }
        if (out)
                out[o] = '\0';
        return o;
}

int tsr_instancetype_group_id(const struct tsr_product *p, char *out, size_t len)
{
        if (group_id_put(p, NULL) + 1 > len)
                return TSR_ETOOBIG;
        group_id_put(p, out);
        return 0;
}

int tsr_instancetype_accel_key(const struct tsr_product *p, char *out, size_t len)
{
        const char *mfr = tsr_catalog_manufacturer(p->manufacturer)->key;
        char group[TSR_NAME_MAX];
        int n, rc = tsr_instancetype_group_id(p, group, sizeof(group));

        if (rc)
                return rc;
        n = snprintf(NULL, 0, "%s-%s", mfr, group);
        if (n < 0 || (size_t)n >= len)
                return TSR_ETOOBIG;
        snprintf(out, len, "%s-%s", mfr, group);
        return 0;
}

int tsr_instancetype_name(const struct tsr_product *p, const char *os, const char *arch, char *out,
                          size_t len)
{
        char key[TSR_NAME_MAX] = "generic";
        int n;

        if (p) {
                int rc = tsr_instancetype_accel_key(p, key, sizeof(key));

                if (rc)
                        return rc;
        }
        n = snprintf(NULL, 0, "gpustack--%s-%s-%s", key, os, arch);
        if (n < 0 || (size_t)n >= len)
                return TSR_ETOOBIG;
        snprintf(out, len, "gpustack--%s-%s-%s", key, os, arch);
        return 0;
}

void tsr_instancetype_entrance(const char *cq, char *out)
{
        snprintf(out, TSR_ENTRANCE_LEN + 1, "gpustack-fnv64-%016llx",
                 (unsigned long long)tsr_fnv1a64_str(cq));
}

struct tsr_unit_spec tsr_instancetype_unit(const struct tsr_product *p)
{
        struct tsr_unit_spec u = {1, 2, 100};

        if (p) {
                u.cpu = p->unit_cpu;
                u.ram_gib = p->unit_ram_gib;
        }
        return u;
}
