/*
 * tls_store.h - the webhook's serving certificate, reloaded when its files change.
 *
 * The certificate chain and key are read from PEM files (a Kubernetes Secret mounted as a volume,
 * which the kubelet swaps atomically when cert-manager renews it). Every TLS handshake asks the
 * store for the current pair through a GnuTLS retrieve callback; at most once a second that call
 * checks the files (inode, size, modification time) and loads a changed pair. A pair that fails to
 * load -- a half-written file, a key that does not match -- is refused with one log line (it is not
 * tried again until a file changes) and the previous pair keeps serving. Every loaded generation
 * lives until the store is freed, so a handshake in flight never sees its certificate freed.
 *
 * GnuTLS's retrieve callback carries no user pointer, so one store per process is the callback's
 * (tsr_tls_store_install): one TLS server per process. Freeing the installed store uninstalls it
 * and waits for a retrieve callback reading it to return; GnuTLS goes on using what the callback
 * returned for the rest of that handshake, so free the store only after the TLS listener has
 * stopped (server.c does). The store itself is thread-safe.
 * Ownership: tsr_tls_store_new returns a new store (free with tsr_tls_store_free).
 */
#ifndef TSR_WEBHOOK_TLS_STORE_H
#define TSR_WEBHOOK_TLS_STORE_H

#include <gnutls/abstract.h>
#include <stdbool.h>

struct tsr_diag;
struct tsr_tls_store;

/*
 * Loads cert_file (a PEM chain, leaf first) and key_file (a PEM private key). Returns 0 and *out,
 * or TSR_EIO / TSR_EPARSE with diag naming the file and what GnuTLS said.
 */
int tsr_tls_store_new(const char *cert_file, const char *key_file, struct tsr_tls_store **out,
                      struct tsr_diag *diag);

void tsr_tls_store_free(struct tsr_tls_store *s);

/*
 * Checks the files now and loads a changed pair. Returns 1 when a new pair was loaded, 0 when
 * nothing changed, or a negative error (the old pair stays) with diag.
 */
int tsr_tls_store_reload(struct tsr_tls_store *s, struct tsr_diag *diag);

/* How many pairs have been loaded (1 after tsr_tls_store_new). */
unsigned tsr_tls_store_generation(struct tsr_tls_store *s);

/*
 * Makes s the store the retrieve callback serves. Returns 0, or TSR_EINUSE when another store is
 * installed (free that one first).
 */
int tsr_tls_store_install(struct tsr_tls_store *s);

/* The GnuTLS retrieve callback (gnutls_certificate_set_retrieve_function2). */
gnutls_certificate_retrieve_function2 tsr_tls_store_retrieve;

#endif
