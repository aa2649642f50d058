/*
 * kube_int.h - helpers the files of src/kube/ share and nothing outside it uses.
 *
 * Ownership: as each comment says; every function is safe from any thread.
 */
#ifndef TSR_KUBE_KUBE_INT_H
#define TSR_KUBE_KUBE_INT_H

#include <stddef.h>

struct tsr_diag;

/* Default ceiling on a file the loaders read (a kubeconfig, a token, a CA bundle). */
#define TSR__KUBE_FILE_MAX ((size_t)4 << 20)

/*
 * Reads the whole file path (at most max bytes) into *out: a new NUL-terminated string (free
 * with free()), *len bytes without the NUL (len may be NULL). Returns 0, or TSR_ENOTFOUND (no
 * such file), TSR_EIO (cannot open or read), TSR_ETOOBIG (over max) or TSR_ENOMEM, with diag
 * naming path. *out is written only on success.
 */
int tsr__kube_read_file(const char *path, size_t max, char **out, size_t *len,
                        struct tsr_diag *diag);

/* A copy of len bytes of s, NUL-terminated (free with free()), or NULL when out of memory. */
char *tsr__kube_strndup(const char *s, size_t len);

#endif
