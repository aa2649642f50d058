/*
 * atomic_file.c - write, sync, rename, sync the directory (atomic_file.h).
 */
#include "base/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"

/* dir receives path's directory ("." for a bare name); false when it does not fit. */
static bool directory_of(const char *path, char *dir, size_t len)
{
        const char *slash = strrchr(path, '/');

        if (!slash)
                return (size_t)snprintf(dir, len, ".") < len;
        return (size_t)snprintf(dir, len, "%.*s", slash == path ? 1 : (int)(slash - path), path) <
               len;
}

int tsr_fsync_dir(const char *dir)
{
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int rc;

        if (fd < 0)
                return -1;
        rc = fsync(fd);
        close(fd);
        return rc;
}

static int write_whole(int fd, const char *data, size_t len)
{
        size_t off = 0;

        while (off < len) {
                ssize_t w = write(fd, data + off, len - off);

                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return -1;
                if (w == 0) {
                        errno = EIO;
                        return -1;
                }
                off += (size_t)w;
        }
        return 0;
}

int tsr_atomic_write(const char *path, const void *data, size_t len, unsigned mode,
                     const char *what, struct tsr_diag *diag)
{
        const char *base = strrchr(path, '/');
        char dir[PATH_MAX], tmp[PATH_MAX];
        int fd, err = 0;

        base = base ? base + 1 : path;
        if (!directory_of(path, dir, sizeof(dir)) ||
            (size_t)snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, base) >= sizeof(tmp))
                return tsr_diag_set(diag, TSR_ETOOBIG, "%s: %s: path too long", what, path);
        fd = mkstemp(tmp);
        if (fd < 0)
                return tsr_diag_set(diag, TSR_EIO, "%s: cannot write %s: %s", what, tmp,
                                    strerror(errno));
        if (write_whole(fd, data, len) || fchmod(fd, (mode_t)mode) || fsync(fd))
                err = errno;
        if (close(fd) && !err)
                err = errno;
        if (!err && rename(tmp, path))
                err = errno;
        if (err) {
                unlink(tmp);
                return tsr_diag_set(diag, TSR_EIO, "%s: cannot write %s: %s", what, path,
                                    strerror(err));
        }
        if (tsr_fsync_dir(dir))
                return tsr_diag_set(diag, TSR_EIO, "%s: cannot sync %s: %s", what, dir,
                                    strerror(errno));
        return 0;
}
