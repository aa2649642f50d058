/*
 * grant_file.c - see grant_file.h.
 */
#include "devicemanager/grant_file.h"

#include "base/atomic_file.h"
#include "base/err.h"
#include "base/regular_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int tsr_dm_grant_file_load(const char *path, struct tsr_grant **out, size_t *n,
                           struct tsr_diag *diag)
{
        char *buf = malloc(TSR_GRANT_FILE_MAX + 1);
        const char *kind = "";
        size_t len = 0;
        struct tsr_diag why;
        int rc = 0;

        *out = NULL;
        *n = 0;
        if (!buf)
                return tsr_diag_set(diag, TSR_ENOMEM, "grant journal: out of memory");
        switch (tsr_read_regular(path, buf, TSR_GRANT_FILE_MAX + 1, &len, &kind)) {
        case TSR_READ_GONE:
                break;
        case TSR_READ_NOT_FILE:
                rc = tsr_diag_set(diag, TSR_EPARSE, "grant journal %s is %s, not a regular file",
                                  path, kind);
                break;
        case TSR_READ_ERROR:
                rc = tsr_diag_set(diag, TSR_EIO, "grant journal %s: %s", path, strerror(errno));
                break;
        case TSR_READ_OK:
                if (len > TSR_GRANT_FILE_MAX) {
                        rc = tsr_diag_set(diag, TSR_EPARSE, "grant journal %s is over %u bytes",
                                          path, TSR_GRANT_FILE_MAX);
                        break;
                }
                tsr_diag_clear(&why);
                rc = tsr_grant_journal_decode(buf, len, out, n, &why);
                if (rc)
                        tsr_diag_set(diag, rc, "%s: %s", path, why.msg);
                break;
        }
        free(buf);
        return rc;
}

int tsr_dm_grant_file_save(const char *path, const struct tsr_grant *g, size_t n,
                           struct tsr_diag *diag)
{
        char *text = NULL;
        int rc = tsr_grant_journal_encode(g, n, &text);

        if (rc) {
                free(text);
                return rc == TSR_ETOOBIG
                           ? tsr_diag_set(diag, rc, "grant journal %s: more than %d grants", path,
                                          TSR_GRANT_JOURNAL_MAX)
                           : tsr_diag_set(diag, rc, "grant journal %s: out of memory", path);
        }
        rc = tsr_atomic_write(path, text, strlen(text), 0600, "grant journal", diag);
        free(text);
        return rc;
}
