/*
 * kubeconfig.h - a kubeconfig file (clientcmd's v1 Config, YAML or JSON, read with libyaml)
 * turned into a struct tsr_kube_config.
 *
 * The context is the one named, or current-context. From its cluster: server,
 * certificate-authority(-data), insecure-skip-tls-verify, tls-server-name. From its user: token,
 * tokenFile, client-certificate(-data), client-key(-data). A context's namespace (else
 * "default"). As in client-go, *-data wins over the file of the same kind, relative paths are
 * relative to the kubeconfig's directory, and a CA together with insecure-skip-tls-verify is an
 * error. Users that authenticate with exec plugins, auth providers or basic auth are refused with
 * a message saying so, never silently sent unauthenticated. Anchors and aliases, duplicate keys
 * and non-scalar keys are refused; unknown fields are ignored (clientcmd's own parse is lenient
 * about extensions and preferences).
 *
 * Ownership: parse borrows text and base_dir; both functions write *cfg only on success,
 * releasing what it held. No I/O in tsr_kube_kubeconfig_parse (files named in the kubeconfig
 * are not opened; the client opens them). Thread-safe (no shared state).
 */
#ifndef TSR_KUBE_KUBECONFIG_H
#define TSR_KUBE_KUBECONFIG_H

#include <stddef.h>

struct tsr_diag;
struct tsr_kube_config;

/* Deepest YAML nesting accepted (a kubeconfig needs 4). */
#define TSR_KUBE_KUBECONFIG_DEPTH_MAX 32

/*
 * Parses len bytes of kubeconfig text. base_dir (may be NULL: the current directory) resolves
 * relative paths; context may be NULL (current-context). Returns 0, or TSR_EPARSE (YAML syntax,
 * wrong shape; diag->line set), TSR_ENOTFOUND (no current-context; the context, its cluster or
 * its user is not in the file), TSR_EINVAL (no server, bad base64, a CA with
 * insecure-skip-tls-verify, an unsupported authentication method, a certificate without its key)
 * or TSR_ENOMEM, with diag naming what is missing or wrong.
 */
int tsr_kube_kubeconfig_parse(struct tsr_kube_config *cfg, const char *text, size_t len,
                              const char *base_dir, const char *context, struct tsr_diag *diag);

/*
 * Reads the kubeconfig file path and parses it with its directory as base_dir. Same returns,
 * plus those of reading a file (TSR_ENOTFOUND, TSR_EIO, TSR_ETOOBIG); messages start with path.
 */
int tsr_kube_kubeconfig_load(struct tsr_kube_config *cfg, const char *path, const char *context,
                             struct tsr_diag *diag);

#endif
