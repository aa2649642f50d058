/*
 * atomic_file.h - replacing a file's content so that a crash leaves the old content or the new,
 * never a mix: a temporary file beside it (mkstemp, so racing writers never share one), written
 * whole, given its mode, fsync'd, renamed over the path, then the directory fsync'd so the rename
 * itself survives. A failure at any step removes the temporary file and leaves the old content.
 * The one implementation of that sequence (MIG markers, the fake GPUs' state, the slice
 * interposer's install).
 */
#ifndef TSR_BASE_ATOMIC_FILE_H
#define TSR_BASE_ATOMIC_FILE_H

#include <stddef.h>

#include "base/diag.h"

/*
 * Writes data[0..len) as path's whole content with permission bits mode. Returns 0, TSR_ETOOBIG
 * (the path is too long) or TSR_EIO, with diag naming what (a caller's prefix such as "MIG
 * marker"), the file and the system's error.
 */
int tsr_atomic_write(const char *path, const void *data, size_t len, unsigned mode,
                     const char *what, struct tsr_diag *diag);

/* fsyncs directory dir, so that a rename or unlink in it survives a crash. 0, or -1 with errno. */
int tsr_fsync_dir(const char *dir);

#endif
