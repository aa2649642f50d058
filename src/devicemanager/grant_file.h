/*
 * grant_file.h - the device manager's grant journal (codec/grant_journal.h) on disk: one file,
 * replaced whole, atomically and durably (base/atomic_file.h) on every change, and read back when
 * the device manager starts, so that a grant survives a crash of the process that made it. The
 * file is read as a regular file only (base/regular_file.h): anything else under its name, a
 * journal past TSR_GRANT_FILE_MAX bytes or one that does not decode is refused whole, naming the
 * path; a missing file is an empty journal. Stateless; the caller serialises writers (the agent
 * writes under its node lock).
 */
#ifndef TSR_DEVICEMANAGER_GRANT_FILE_H
#define TSR_DEVICEMANAGER_GRANT_FILE_H

#include <stddef.h>

#include "base/diag.h"
#include "codec/grant_journal.h"

#define TSR_GRANT_FILE_MAX (32u << 20)

/* Reads the journal at path into *out (a new array, free with free(); NULL when empty) and *n.
 * Returns 0, TSR_EPARSE (refused, see above), TSR_EIO or TSR_ENOMEM, with diag. */
int tsr_dm_grant_file_load(const char *path, struct tsr_grant **out, size_t *n,
                           struct tsr_diag *diag);

/* Replaces the journal at path by g[0..n). Returns 0, or TSR_EIO / TSR_ETOOBIG / TSR_ENOMEM with
 * diag; the old journal is then left whole. */
int tsr_dm_grant_file_save(const char *path, const struct tsr_grant *g, size_t n,
                           struct tsr_diag *diag);

#endif
