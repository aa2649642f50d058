/*
 * isolation.c - the slice interposer installed on the host and injected into a slice's container.
 */
#include "devicemanager/isolation.h"

#include "base/atomic_file.h"
#include "base/err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A library past this is not one (the interposer is well under a MiB). */
#define LIBRARY_MAX (256u << 20)

static const char *const mode_names[] = {"preload", "env", "off"};

int tsr_dm_isolation_parse_mode(const char *s, enum tsr_dm_isolation_mode *out)
{
        for (size_t i = 0; i < sizeof(mode_names) / sizeof(mode_names[0]); i++)
                if (!strcmp(s, mode_names[i])) {
                        *out = (enum tsr_dm_isolation_mode)i;
                        return 0;
                }
        return TSR_EINVAL;
}

const char *tsr_dm_isolation_mode_name(enum tsr_dm_isolation_mode mode)
{
        return mode_names[mode];
}

/* ---- install -------------------------------------------------------------------------------- */

/*
 * Reads the regular file path whole into *out (malloc'd, *len bytes). Returns 0, TSR_ENOTFOUND
 * (it does not exist), TSR_EINVAL (not a regular file, or too large), TSR_EIO or TSR_ENOMEM;
 * *err holds the errno for a message (0 when none applies).
 */
static int read_whole(const char *path, char **out, size_t *len, int *err)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        size_t got = 0;
        char *buf;

        *out = NULL;
        *len = 0;
        *err = 0;
        if (fd < 0) {
                *err = errno;
                return errno == ENOENT ? TSR_ENOTFOUND : TSR_EIO;
        }
        if (fstat(fd, &st)) {
                *err = errno;
                close(fd);
                return TSR_EIO;
        }
        if (!S_ISREG(st.st_mode) || (unsigned long long)st.st_size > LIBRARY_MAX) {
                close(fd);
                return TSR_EINVAL;
        }
        buf = malloc((size_t)st.st_size + 1);
        if (!buf) {
                close(fd);
                return TSR_ENOMEM;
        }
        while (got < (size_t)st.st_size) {
                ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);

                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0) {
                        *err = r < 0 ? errno : 0;
                        close(fd);
                        free(buf);
                        return TSR_EIO;
                }
                got += (size_t)r;
        }
        close(fd);
        *out = buf;
        *len = got;
        return 0;
}

/* Whether the file path holds exactly data[0..len). */
static bool holds(const char *path, const char *data, size_t len)
{
        char *have;
        size_t n;
        int err;
        bool same;

        if (read_whole(path, &have, &n, &err))
                return false;
        same = n == len && !memcmp(have, data, len);
        free(have);
        return same;
}

/*
 * Writes data[0..len) to dir/name atomically (base/atomic_file.h), mode 0644, unless it holds
 * that already (*written counts a write). Returns 0, or TSR_EIO / TSR_ETOOBIG with diag naming the
 * file.
 */
static int put(const char *dir, const char *name, const char *data, size_t len, unsigned *written,
               struct tsr_diag *diag)
{
        char path[TSR_DM_ISOLATION_PATH_MAX + 64];
        int rc;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        if (holds(path, data, len))
                return 0;
        rc = tsr_atomic_write(path, data, len, 0644, "slice isolation", diag);
        if (rc)
                return rc;
        (*written)++;
        return 0;
}

int tsr_dm_isolation_install(const char *library, const char *dir, unsigned *written,
                             struct tsr_diag *diag)
{
        static const char preload[] = TSR_DM_VGPU_CONTAINER_LIBRARY "\n";
        char *lib;
        size_t len;
        int rc, err;

        *written = 0;
        rc = read_whole(library, &lib, &len, &err);
        if (rc == TSR_ENOMEM)
                return tsr_diag_set(diag, rc, "slice isolation: out of memory");
        if (rc || !len) {
                free(lib);
                return tsr_diag_set(
                    diag, rc ? rc : TSR_EINVAL,
                    "slice isolation: the interposer library %s %s%s (--vgpu-library names it; "
                    "--slice-isolation=off serves slices without it)",
                    library,
                    rc == TSR_ENOTFOUND ? "does not exist"
                    : rc == TSR_EINVAL  ? "is not a regular file under 256 MiB"
                    : rc                ? "cannot be read: "
                                        : "is empty",
                    rc == TSR_EIO && err ? strerror(err) : "");
        }
        if (mkdir(dir, 0755) && errno != EEXIST) {
                rc = tsr_diag_set(diag, TSR_EIO,
                                  "slice isolation: cannot create the install directory %s: %s",
                                  dir, strerror(errno));
                free(lib);
                return rc;
        }
        rc = put(dir, TSR_DM_VGPU_LIBRARY_NAME, lib, len, written, diag);
        free(lib);
        if (!rc)
                rc =
                    put(dir, TSR_DM_VGPU_PRELOAD_NAME, preload, sizeof(preload) - 1, written, diag);
        return rc;
}

/* ---- inject --------------------------------------------------------------------------------- */

static void add_env(struct tsr_dm_injection *out, const char *key, const char *value)
{
        struct tsr_dm_env *e = &out->envs[out->n_envs++];

        snprintf(e->key, sizeof(e->key), "%s", key);
        snprintf(e->value, sizeof(e->value), "%s", value);
}

static void add_mount(struct tsr_dm_injection *out, const char *container_path, const char *dir,
                      const char *name)
{
        struct tsr_dm_mount *m = &out->mounts[out->n_mounts++];

        snprintf(m->container_path, sizeof(m->container_path), "%s", container_path);
        snprintf(m->host_path, sizeof(m->host_path), "%s/%s", dir, name);
}

/* s with every byte but [A-Za-z0-9._-] made '_' appended to out (a file name's part). */
static void append_safe(char *out, size_t len, const char *s)
{
        size_t n = strlen(out);

        for (; *s && n + 1 < len; s++)
                out[n++] = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                                   (*s >= '0' && *s <= '9') || *s == '.' || *s == '-' || *s == '_'
                               ? *s
                               : '_';
        out[n] = '\0';
}

void tsr_dm_isolation_inject(const struct tsr_dm_isolation *iso, const struct tsr_dm_answer *ans,
                             struct tsr_dm_injection *out)
{
        char v[TSR_DM_INJECT_ENV_VALUE_MAX];

        memset(out, 0, sizeof(*out));
        if (!iso || iso->mode == TSR_DM_ISOLATION_OFF || ans->code != TSR_DM_OK ||
            !ans->slice.granted)
                return;
        add_mount(out, TSR_DM_VGPU_CONTAINER_LIBRARY, iso->host_dir, TSR_DM_VGPU_LIBRARY_NAME);
        if (iso->mode == TSR_DM_ISOLATION_PRELOAD)
                add_mount(out, TSR_DM_VGPU_CONTAINER_PRELOAD, iso->host_dir,
                          TSR_DM_VGPU_PRELOAD_NAME);
        else
                add_env(out, "LD_PRELOAD", TSR_DM_VGPU_CONTAINER_LIBRARY);
        snprintf(v, sizeof(v), "%llum", (unsigned long long)ans->slice.memory_mib);
        add_env(out, "CUDA_DEVICE_MEMORY_LIMIT", v);
        snprintf(v, sizeof(v), "%u", ans->slice.cores);
        add_env(out, "CUDA_DEVICE_SM_LIMIT", v);
        snprintf(v, sizeof(v), "%s", TSR_DM_VGPU_CACHE_PREFIX);
        append_safe(v, sizeof(v) - 6, ans->slice.uid);
        append_safe(v, sizeof(v) - 6, "-");
        append_safe(v, sizeof(v) - 6, ans->container);
        strcat(v, ".cache");
        add_env(out, "CUDA_DEVICE_MEMORY_SHARED_CACHE", v);
}
