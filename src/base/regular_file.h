/*
 * regular_file.h - reading a small file that must be a regular file, the way a daemon reads state
 * other parties can write (MIG ownership markers, the device manager's grant journal): opened
 * non-blocking and without following a symbolic link, so a FIFO, a device, a directory or a link
 * put under the expected name is reported as such, never a hang and never a read of another file.
 * At most max bytes are read; a file of max bytes or more reads as exactly max (the caller that
 * needs the whole file passes one byte more than it accepts and refuses a full buffer).
 * Stateless; thread-safe.
 */
#ifndef TSR_BASE_REGULAR_FILE_H
#define TSR_BASE_REGULAR_FILE_H

#include <stddef.h>

enum tsr_read_result {
        TSR_READ_OK,
        TSR_READ_GONE,     /* no such file */
        TSR_READ_NOT_FILE, /* *kind names what it is instead */
        TSR_READ_ERROR,    /* errno says why */
};

/*
 * Reads at most max bytes of path into buf, *len set to how many. *kind (a static string) names
 * what a TSR_READ_NOT_FILE is: "a symbolic link", "a directory", "a FIFO", "a socket" or "not a
 * regular file".
 */
enum tsr_read_result tsr_read_regular(const char *path, char *buf, size_t max, size_t *len,
                                      const char **kind);

#endif
