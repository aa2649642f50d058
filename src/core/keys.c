/*
 * keys.c - resource key composition and classification (upstream ResourceFamilyOf). The suffix
 * table is TSR_KEY_KIND_MAP; the longest matching suffix wins, so ".sliced.units" is never read as
 * ".sliced" plus garbage.
 */
#include "core/keys.h"

#include "base/err.h"

#include <string.h>

#define VISIBILITY_PREFIX "device.gpustack.ai/"
#define VISIBILITY_SUFFIX ".visibility"

struct kind_row {
        enum tsr_key_kind kind;
        const char *suffix;
        enum tsr_family family;
};

static const struct kind_row kinds[] = {
#define XX(E, suffix, fam) {TSR_KEY_##E, suffix, TSR_FAMILY_##fam},
    TSR_KEY_KIND_MAP(XX)
#undef XX
};

#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

enum tsr_family tsr_key_family(enum tsr_key_kind kind)
{
        if (kind == TSR_KEY_PARTITIONED_PROFILE)
                return TSR_FAMILY_PARTITIONED;
        if (kind == TSR_KEY_VISIBILITY)
                return TSR_FAMILY_VISIBILITY;
        for (size_t i = 0; i < NKINDS; i++)
                if (kinds[i].kind == kind)
                        return kinds[i].family;
        return TSR_FAMILY_NONE;
}

const char *tsr_family_name(enum tsr_family f)
{
        switch (f) {
        case TSR_FAMILY_EXCLUSIVE:
                return "exclusive";
        case TSR_FAMILY_SHARED:
                return "shared";
        case TSR_FAMILY_SLICED:
                return "sliced";
        case TSR_FAMILY_PARTITIONED:
                return "partitioned";
        case TSR_FAMILY_VISIBILITY:
                return "visibility";
        case TSR_FAMILY_NONE:
                break;
        }
        return "none";
}

static bool is_alnum(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool tsr_key_is_name_segment(const char *s, size_t len)
{
        if (len == 0 || len > 63)
                return false;
        if (!is_alnum(s[0]) || !is_alnum(s[len - 1]))
                return false;
        for (size_t i = 1; i + 1 < len; i++)
                if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
                        return false;
        return true;
}

static bool is_lower_alnum(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* Dot-separated labels, each [a-z0-9]([-a-z0-9]*[a-z0-9])?, 253 characters in all. */
static bool is_dns1123_subdomain(const char *s, size_t len)
{
        if (len == 0 || len > 253)
                return false;
        for (size_t i = 0; i < len; i++) {
                char c = s[i];
                bool lower = is_lower_alnum(c);

                if (!lower && c != '-' && c != '.')
                        return false;
                if ((i == 0 || i + 1 == len) && !lower)
                        return false;
                /* A label starts and ends alphanumeric: no "..", ".-" or "-." */
                if (c == '.' && (!is_lower_alnum(s[i - 1]) || !is_lower_alnum(s[i + 1])))
                        return false;
        }
        return true;
}

bool tsr_key_is_resource_name(const char *s)
{
        const char *slash = strchr(s, '/');

        if (!slash)
                return tsr_key_is_name_segment(s, strlen(s));
        if (strchr(slash + 1, '/'))
                return false;
        return is_dns1123_subdomain(s, (size_t)(slash - s)) &&
               tsr_key_is_name_segment(slash + 1, strlen(slash + 1));
}

static void classify_visibility(const char *name, struct tsr_key_class *out)
{
        size_t plen = strlen(VISIBILITY_PREFIX), slen = strlen(VISIBILITY_SUFFIX);
        size_t len = strlen(name);
        char key[64];

        if (len <= plen + slen || strncmp(name, VISIBILITY_PREFIX, plen) != 0 ||
            strcmp(name + len - slen, VISIBILITY_SUFFIX) != 0)
                return;
        if (len - plen - slen >= sizeof(key))
                return;
        memcpy(key, name + plen, len - plen - slen);
        key[len - plen - slen] = '\0';
        out->manufacturer = tsr_catalog_manufacturer_by_key(key);
        if (out->manufacturer)
                out->kind = TSR_KEY_VISIBILITY;
}

void tsr_key_classify(const char *name, struct tsr_key_class *out)
{
        out->kind = TSR_KEY_NONE;
        out->manufacturer = NULL;
        out->profile = NULL;
        out->profile_len = 0;

        for (int id = 0; id < TSR_MFR__COUNT; id++) {
                const struct tsr_manufacturer *m = tsr_catalog_manufacturer(id);
                size_t blen = strlen(m->base);
                const char *rest;

                if (strncmp(name, m->base, blen) != 0)
                        continue;
                rest = name + blen;
                for (size_t i = 0; i < NKINDS; i++) {
                        if (strcmp(rest, kinds[i].suffix) != 0)
                                continue;
                        if (kinds[i].family == TSR_FAMILY_PARTITIONED && !m->partition_kind)
                                return;
                        out->kind = kinds[i].kind;
                        out->manufacturer = m;
                        return;
                }
                if (m->partition_kind && strncmp(rest, ".partitioned.", 13) == 0) {
                        const char *p = rest + 13;
                        size_t klen = strlen(m->partition_kind);

                        /* A profile key must itself be a valid name: "+me" has no key. */
                        if (strncmp(p, m->partition_kind, klen) == 0 && p[klen] == '-' &&
                            p[klen + 1] != '\0' && tsr_key_is_resource_name(name)) {
                                out->kind = TSR_KEY_PARTITIONED_PROFILE;
                                out->manufacturer = m;
                                out->profile = p + klen + 1;
                                out->profile_len = strlen(out->profile);
                        }
                }
                return;
        }
        classify_visibility(name, out);
}

/*
 * Joins the n parts into out (cap bytes, NUL included). Returns the length, or -1 when they do
 * not fit. A key is composed on every fold and every request it is matched against: snprintf's
 * format parsing was a tenth of the Pod webhook's rule time.
 */
static int join(char *out, size_t cap, const char *const *parts, size_t n)
{
        size_t len = 0;

        for (size_t i = 0; i < n; i++) {
                size_t part = strlen(parts[i]);

                if (part >= cap - len)
                        return -1;
                memcpy(out + len, parts[i], part);
                len += part;
        }
        out[len] = '\0';
        return (int)len;
}

int tsr_key_format(char *out, const struct tsr_manufacturer *m, enum tsr_key_kind kind,
                   const char *profile)
{
        char tmp[TSR_KEY_MAX];
        int n = -1;

        if (kind == TSR_KEY_VISIBILITY) {
                const char *parts[] = {VISIBILITY_PREFIX, m->key, VISIBILITY_SUFFIX};

                n = join(tmp, sizeof(tmp), parts, 3);
        } else if (kind == TSR_KEY_PARTITIONED_PROFILE) {
                const char *parts[] = {m->base, ".partitioned.", m->partition_kind, "-", profile};

                if (!m->partition_kind || !profile)
                        return TSR_EINVAL;
                n = join(tmp, sizeof(tmp), parts, 5);
        } else {
                for (size_t i = 0; i < NKINDS; i++) {
                        const char *parts[] = {m->base, kinds[i].suffix};

                        if (kinds[i].kind != kind)
                                continue;
                        if (kinds[i].family == TSR_FAMILY_PARTITIONED && !m->partition_kind)
                                return TSR_EINVAL;
                        n = join(tmp, sizeof(tmp), parts, 2);
                }
        }
        if (n < 0 || !tsr_key_is_resource_name(tmp))
                return TSR_EINVAL;
        memcpy(out, tmp, (size_t)n + 1);
        return 0;
}
