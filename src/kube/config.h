/*
 * config.h - where the API server is and how to authenticate to it: the in-cluster service
 * account (spec/kubernetes-contracts.md §4.1), a kubeconfig file (kubeconfig.h), or the
 * client-go order of the two (tsr_kube_config_load).
 *
 * A config is plain data: strings and PEM bytes, no handles. The bearer token is either fixed
 * (token) or a file the client re-reads on every request (token_file), because bound service
 * account tokens rotate; when both are set the file wins and the fixed token is the fallback
 * while the file cannot be read.
 *
 * Ownership: a config owns every string in it (tsr_kube_config_release frees them); loaders
 * write *cfg only on success, after releasing what it held. Not thread-safe; a client copies it.
 */
#ifndef TSR_KUBE_CONFIG_H
#define TSR_KUBE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

struct tsr_diag;

/* The service account directory a Pod sees. */
#define TSR_KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

struct tsr_kube_config {
        char *server;          /* "https://host:port", no trailing slash */
        char *ca_file;         /* PEM CA bundle file, or NULL */
        char *ca_pem;          /* PEM CA bundle bytes (certificate-authority-data), or NULL */
        size_t ca_pem_len;     /* bytes in ca_pem */
        char *cert_file;       /* PEM client certificate file, or NULL */
        char *cert_pem;        /* PEM client certificate bytes, or NULL */
        size_t cert_pem_len;   /* bytes in cert_pem */
        char *key_file;        /* PEM client key file, or NULL */
        char *key_pem;         /* PEM client key bytes, or NULL */
        size_t key_pem_len;    /* bytes in key_pem */
        char *token;           /* a fixed bearer token, or NULL */
        char *token_file;      /* a file holding the bearer token, re-read per request, or NULL */
        char *ns;              /* the default namespace, never NULL once loaded ("default") */
        char *tls_server_name; /* the name to verify the server certificate against, or NULL */
        bool insecure_skip_tls_verify;
};

/* Initialises cfg as empty (every pointer NULL). Cannot fail. */
void tsr_kube_config_init(struct tsr_kube_config *cfg);

/* Frees everything cfg holds and re-initialises it empty. cfg may be NULL. */
void tsr_kube_config_release(struct tsr_kube_config *cfg);

/*
 * Copies src into *dst (a deep copy; dst's old contents are released on success). Returns 0 or
 * TSR_ENOMEM.
 */
int tsr_kube_config_copy(struct tsr_kube_config *dst, const struct tsr_kube_config *src);

/*
 * The in-cluster config: server from KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (an
 * IPv6 host is bracketed), token_file, CA and namespace from sa_dir (NULL: TSR_KUBE_SA_DIR; a
 * test passes its own). The token file must be readable now; a missing namespace file means
 * "default". Returns 0, TSR_ENOTFOUND (not in a cluster: a variable is unset or empty; or a
 * file is missing), TSR_EIO (a file cannot be read) or TSR_ENOMEM, with diag naming the
 * variable or path.
 */
int tsr_kube_config_in_cluster(struct tsr_kube_config *cfg, const char *sa_dir,
                               struct tsr_diag *diag);

/*
 * client-go's order: in-cluster when KUBERNETES_SERVICE_HOST is set, else the first file named
 * by $KUBECONFIG (a colon-separated list; the first entry that exists), else ~/.kube/config.
 * context may be NULL (the file's current-context). Same returns as the two loaders.
 */
int tsr_kube_config_load(struct tsr_kube_config *cfg, const char *context, struct tsr_diag *diag);

#endif
