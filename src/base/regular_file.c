/*
 * regular_file.c - see regular_file.h.
 */
#include "base/regular_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

enum tsr_read_result tsr_read_regular(const char *path, char *buf, size_t max, size_t *len,
                                      const char **kind)
{
        int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
        size_t got = 0;
        struct stat st;

        if (fd < 0 && errno == ELOOP) {
                *kind = "a symbolic link";
                return TSR_READ_NOT_FILE;
        }
        if (fd < 0)
                return errno == ENOENT ? TSR_READ_GONE : TSR_READ_ERROR;
        if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
                *kind = S_ISDIR(st.st_mode)    ? "a directory"
                        : S_ISFIFO(st.st_mode) ? "a FIFO"
                        : S_ISSOCK(st.st_mode) ? "a socket"
                                               : "not a regular file";
                close(fd);
                return TSR_READ_NOT_FILE;
        }
        while (got < max) {
                ssize_t r = read(fd, buf + got, max - got);

                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0) {
                        int e = errno;

                        close(fd);
                        errno = e;
                        return TSR_READ_ERROR;
                }
                if (r == 0)
                        break;
                got += (size_t)r;
        }
        close(fd);
        *len = got;
        return TSR_READ_OK;
}
