/*
 * config.c - the slice's environment, read into struct tsr_vgpu_config (contract in config.h).
 */
#include "vgpu/config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEMORY_LIMIT "CUDA_DEVICE_MEMORY_LIMIT"
#define SM_LIMIT     "CUDA_DEVICE_SM_LIMIT"
#define SHARED_CACHE "CUDA_DEVICE_MEMORY_SHARED_CACHE"
#define DISABLE      "CUDA_DISABLE_CONTROL"
#define POLICY       "GPU_CORE_UTILIZATION_POLICY"
#define LOG_LEVEL    "LIBCUDA_LOG_LEVEL"

/* A value of a variable NAME or NAME_<i> that applies to devices; index -1 is every device. */
struct scoped {
        const char *value;
        int index;
};

int tsr_vgpu_parse_size(const char *s, uint64_t *bytes)
{
        const char *p = s;
        uint64_t n = 0, mult = 1;

        if (!*p)
                return -1;
        for (; *p >= '0' && *p <= '9'; p++) {
                if (n > (UINT64_MAX - 9) / 10)
                        return -1;
                n = n * 10 + (uint64_t)(*p - '0');
        }
        if (p == s)
                return -1;
        switch (*p) {
        case '\0':
                break;
        case 'k':
        case 'K':
                mult = UINT64_C(1) << 10;
                break;
        case 'm':
        case 'M':
                mult = UINT64_C(1) << 20;
                break;
        case 'g':
        case 'G':
                mult = UINT64_C(1) << 30;
                break;
        case 't':
        case 'T':
                mult = UINT64_C(1) << 40;
                break;
        default:
                return -1;
        }
        if (*p) {
                p++;
                if (!strcmp(p, "i") || !strcmp(p, "iB") || !strcmp(p, "B"))
                        p += strlen(p);
                if (*p)
                        return -1;
        }
        if (n > UINT64_MAX / mult)
                return -1;
        *bytes = n * mult;
        return 0;
}

/* Whether entry is NAME=... or NAME_<i>=... for name; fills *out. */
static bool match_scoped(const char *entry, const char *name, struct scoped *out)
{
        size_t len = strlen(name);
        const char *p;
        long i = 0;

        if (strncmp(entry, name, len))
                return false;
        p = entry + len;
        if (*p == '=') {
                out->value = p + 1;
                out->index = -1;
                return true;
        }
        if (*p != '_' || p[1] < '0' || p[1] > '9')
                return false;
        for (p++; *p >= '0' && *p <= '9'; p++) {
                i = i * 10 + (*p - '0');
                if (i > 9999)
                        return false;
        }
        if (*p != '=')
                return false;
        out->value = p + 1;
        out->index = (int)i;
        return true;
}

static const char *plain(const char *entry, const char *name)
{
        size_t len = strlen(name);

        return !strncmp(entry, name, len) && entry[len] == '=' ? entry + len + 1 : NULL;
}

static int fail(char *err, size_t len, const char *name, int index, const char *value,
                const char *what)
{
        char full[64];

        if (index < 0)
                snprintf(full, sizeof(full), "%s", name);
        else
                snprintf(full, sizeof(full), "%s_%d", name, index);
        snprintf(err, len, "%s=%s: %s", full, value, what);
        return -1;
}

static int scoped_index_ok(const struct scoped *s, const char *name, char *err, size_t len)
{
        if (s->index >= TSR_VGPU_DEVICES_MAX) {
                char what[64];

                snprintf(what, sizeof(what), "device index past the last supported (%d)",
                         TSR_VGPU_DEVICES_MAX - 1);
                return fail(err, len, name, s->index, s->value, what);
        }
        return 0;
}

static int parse_percent(const char *s, unsigned *out)
{
        unsigned long v;
        char *end;

        if (*s < '0' || *s > '9')
                return -1;
        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno || *end || v > 100)
                return -1;
        *out = (unsigned)v;
        return 0;
}

static void defaults(struct tsr_vgpu_config *out)
{
        memset(out, 0, sizeof(*out));
        snprintf(out->cache_path, sizeof(out->cache_path), "%s", TSR_VGPU_DEFAULT_CACHE);
        out->log_level = 2;
}

/* Applies every device-scoped value: the unscoped ones first, then the _<i> overrides. */
static int apply_limits(const char *const *envp, struct tsr_vgpu_config *out, char *err, size_t len)
{
        for (int pass = 0; pass < 2; pass++) {
                for (const char *const *e = envp; *e; e++) {
                        struct scoped s;
                        uint64_t bytes;
                        unsigned pct;

                        if (match_scoped(*e, MEMORY_LIMIT, &s) && (s.index >= 0) == pass) {
                                if (scoped_index_ok(&s, MEMORY_LIMIT, err, len))
                                        return -1;
                                if (tsr_vgpu_parse_size(s.value, &bytes))
                                        return fail(err, len, MEMORY_LIMIT, s.index, s.value,
                                                    "not a size (bytes, or a number with k, m, "
                                                    "g or t)");
                                for (int d = 0; d < TSR_VGPU_DEVICES_MAX; d++)
                                        if (s.index < 0 || s.index == d)
                                                out->memory_limit[d] = bytes;
                        } else if (match_scoped(*e, SM_LIMIT, &s) && (s.index >= 0) == pass) {
                                if (scoped_index_ok(&s, SM_LIMIT, err, len))
                                        return -1;
                                if (parse_percent(s.value, &pct))
                                        return fail(err, len, SM_LIMIT, s.index, s.value,
                                                    "not a percentage from 0 to 100");
                                for (int d = 0; d < TSR_VGPU_DEVICES_MAX; d++)
                                        if (s.index < 0 || s.index == d)
                                                out->sm_limit[d] = pct == 100 ? 0 : pct;
                        }
                }
        }
        return 0;
}

int tsr_vgpu_config_parse(const char *const *envp, struct tsr_vgpu_config *out, char *err,
                          size_t len)
{
        defaults(out);
        for (const char *const *e = envp; *e; e++) {
                const char *v;

                if ((v = plain(*e, SHARED_CACHE))) {
                        if (*v != '/' || strlen(v) >= sizeof(out->cache_path))
                                return fail(err, len, SHARED_CACHE, -1, v,
                                            "not an absolute path shorter than 256 bytes");
                        snprintf(out->cache_path, sizeof(out->cache_path), "%s", v);
                } else if ((v = plain(*e, DISABLE))) {
                        out->disabled = !strcmp(v, "true") || !strcmp(v, "1");
                } else if ((v = plain(*e, POLICY))) {
                        if (strcmp(v, "default") && strcmp(v, "force") && strcmp(v, "disable"))
                                return fail(err, len, POLICY, -1, v,
                                            "not one of default, force, disable");
                        out->throttle_disabled = !strcmp(v, "disable");
                } else if ((v = plain(*e, LOG_LEVEL))) {
                        if (v[0] < '0' || v[0] > '4' || v[1])
                                return fail(err, len, LOG_LEVEL, -1, v, "not a level from 0 to 4");
                        out->log_level = v[0] - '0';
                }
        }
        return apply_limits(envp, out, err, len);
}
