/*
 * config.c - the config's lifecycle, the in-cluster loader and client-go's choice between it and
 * a kubeconfig; also the small file reader every loader shares.
 */
#include "kube/config.h"

#include "base/diag.h"
#include "base/err.h"
#include "kube/kube_int.h"
#include "kube/kubeconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- shared helpers ----------------------------------------------------------------------- */

char *tsr__kube_strndup(const char *s, size_t len)
{
        char *p = malloc(len + 1);

        if (!p)
                return NULL;
        memcpy(p, s, len);
        p[len] = '\0';
        return p;
}

int tsr__kube_read_file(const char *path, size_t max, char **out, size_t *len,
                        struct tsr_diag *diag)
{
        size_t n = 0, cap = 4096;
        char *p;
        int fd;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return tsr_diag_set(diag, errno == ENOENT ? TSR_ENOTFOUND : TSR_EIO, "%s: %s", path,
                                    strerror(errno));
        p = malloc(cap);
        if (!p) {
                close(fd);
                return tsr_diag_set(diag, TSR_ENOMEM, "%s: out of memory", path);
        }
        for (;;) {
                ssize_t r;

                if (n + 1 >= cap) {
                        char *q;

                        if (cap > max) {
                                free(p);
                                close(fd);
                                return tsr_diag_set(diag, TSR_ETOOBIG, "%s: larger than %zu bytes",
                                                    path, max);
                        }
                        q = realloc(p, cap * 2);
                        if (!q) {
                                free(p);
                                close(fd);
                                return tsr_diag_set(diag, TSR_ENOMEM, "%s: out of memory", path);
                        }
                        p = q;
                        cap *= 2;
                }
                r = read(fd, p + n, cap - n - 1);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0) {
                        int e = errno;

                        free(p);
                        close(fd);
                        return tsr_diag_set(diag, TSR_EIO, "%s: %s", path, strerror(e));
                }
                if (r == 0)
                        break;
                n += (size_t)r;
        }
        close(fd);
        if (n > max) {
                free(p);
                return tsr_diag_set(diag, TSR_ETOOBIG, "%s: larger than %zu bytes", path, max);
        }
        p[n] = '\0';
        *out = p;
        if (len)
                *len = n;
        return 0;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

void tsr_kube_config_init(struct tsr_kube_config *cfg)
{
        memset(cfg, 0, sizeof(*cfg));
}

void tsr_kube_config_release(struct tsr_kube_config *cfg)
{
        if (!cfg)
                return;
        free(cfg->server);
        free(cfg->ca_file);
        free(cfg->ca_pem);
        free(cfg->cert_file);
        free(cfg->cert_pem);
        free(cfg->key_file);
        if (cfg->key_pem) {
                memset(cfg->key_pem, 0, cfg->key_pem_len);
                free(cfg->key_pem);
        }
        if (cfg->token) {
                memset(cfg->token, 0, strlen(cfg->token));
                free(cfg->token);
        }
        free(cfg->token_file);
        free(cfg->ns);
        free(cfg->tls_server_name);
        tsr_kube_config_init(cfg);
}

static int dup_str(char **dst, const char *src)
{
        *dst = NULL;
        if (!src)
                return 0;
        *dst = strdup(src);
        return *dst ? 0 : TSR_ENOMEM;
}

static int dup_mem(char **dst, const char *src, size_t len)
{
        *dst = NULL;
        if (!src)
                return 0;
        *dst = tsr__kube_strndup(src, len);
        return *dst ? 0 : TSR_ENOMEM;
}

int tsr_kube_config_copy(struct tsr_kube_config *dst, const struct tsr_kube_config *src)
{
        struct tsr_kube_config c;
        int rc = 0;

        tsr_kube_config_init(&c);
        rc = rc ? rc : dup_str(&c.server, src->server);
        rc = rc ? rc : dup_str(&c.ca_file, src->ca_file);
        rc = rc ? rc : dup_mem(&c.ca_pem, src->ca_pem, src->ca_pem_len);
        rc = rc ? rc : dup_str(&c.cert_file, src->cert_file);
        rc = rc ? rc : dup_mem(&c.cert_pem, src->cert_pem, src->cert_pem_len);
        rc = rc ? rc : dup_str(&c.key_file, src->key_file);
        rc = rc ? rc : dup_mem(&c.key_pem, src->key_pem, src->key_pem_len);
        rc = rc ? rc : dup_str(&c.token, src->token);
        rc = rc ? rc : dup_str(&c.token_file, src->token_file);
        rc = rc ? rc : dup_str(&c.ns, src->ns);
        rc = rc ? rc : dup_str(&c.tls_server_name, src->tls_server_name);
        if (rc) {
                tsr_kube_config_release(&c);
                return rc;
        }
        c.ca_pem_len = src->ca_pem ? src->ca_pem_len : 0;
        c.cert_pem_len = src->cert_pem ? src->cert_pem_len : 0;
        c.key_pem_len = src->key_pem ? src->key_pem_len : 0;
        c.insecure_skip_tls_verify = src->insecure_skip_tls_verify;
        tsr_kube_config_release(dst);
        *dst = c;
        return 0;
}

/* ---- in-cluster --------------------------------------------------------------------------- */

static void trim(char *s)
{
        size_t n = strlen(s);

        while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
                s[--n] = '\0';
}

static int path_join(char **out, const char *dir, const char *name)
{
        size_t n = strlen(dir) + strlen(name) + 2;

        *out = malloc(n);
        if (!*out)
                return TSR_ENOMEM;
        snprintf(*out, n, "%s/%s", dir, name);
        return 0;
}

int tsr_kube_config_in_cluster(struct tsr_kube_config *cfg, const char *sa_dir,
                               struct tsr_diag *diag)
{
        const char *host = getenv("KUBERNETES_SERVICE_HOST");
        const char *port = getenv("KUBERNETES_SERVICE_PORT");
        struct tsr_kube_config c;
        char *token = NULL, *ns = NULL;
        size_t n;
        int rc;

        if (!host || !*host || !port || !*port)
                return tsr_diag_set(diag, TSR_ENOTFOUND,
                                    "unable to load in-cluster configuration, "
                                    "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be "
                                    "defined");
        if (!sa_dir)
                sa_dir = TSR_KUBE_SA_DIR;
        tsr_kube_config_init(&c);
        n = strlen(host) + strlen(port) + 16;
        c.server = malloc(n);
        if (!c.server)
                goto nomem;
        if (strchr(host, ':'))
                snprintf(c.server, n, "https://[%s]:%s", host, port);
        else
                snprintf(c.server, n, "https://%s:%s", host, port);
        if (path_join(&c.token_file, sa_dir, "token") || path_join(&c.ca_file, sa_dir, "ca.crt"))
                goto nomem;

        /* The token must be readable now (client-go fails the same way); it is re-read later. */
        rc = tsr__kube_read_file(c.token_file, 64 << 10, &token, NULL, diag);
        if (rc)
                goto fail;
        trim(token);
        if (!*token) {
                rc = tsr_diag_set(diag, TSR_EINVAL, "in-cluster token file %s is empty",
                                  c.token_file);
                goto fail;
        }
        memset(token, 0, strlen(token));
        free(token);
        token = NULL;
        if (access(c.ca_file, R_OK) != 0) {
                rc = tsr_diag_set(diag, errno == ENOENT ? TSR_ENOTFOUND : TSR_EIO,
                                  "in-cluster CA %s: %s", c.ca_file, strerror(errno));
                goto fail;
        }

        {
                char *ns_path;

                if (path_join(&ns_path, sa_dir, "namespace"))
                        goto nomem;
                rc = tsr__kube_read_file(ns_path, 4096, &ns, NULL, NULL);
                free(ns_path);
                if (rc == TSR_ENOMEM)
                        goto nomem;
                if (rc == 0)
                        trim(ns);
                if (rc || !*ns) {
                        free(ns);
                        ns = strdup("default");
                        if (!ns)
                                goto nomem;
                }
                c.ns = ns;
        }
        tsr_kube_config_release(cfg);
        *cfg = c;
        return 0;

nomem:
        rc = tsr_diag_set(diag, TSR_ENOMEM, "in-cluster configuration: out of memory");
fail:
        free(token);
        tsr_kube_config_release(&c);
        return rc;
}

/* ---- client-go's order -------------------------------------------------------------------- */

int tsr_kube_config_load(struct tsr_kube_config *cfg, const char *context, struct tsr_diag *diag)
{
        const char *host = getenv("KUBERNETES_SERVICE_HOST");
        const char *list = getenv("KUBECONFIG");
        const char *home = getenv("HOME");
        char path[4096];

        if (host && *host)
                return tsr_kube_config_in_cluster(cfg, NULL, diag);
        if (list && *list) {
                const char *p = list;

                while (*p) {
                        size_t n = strcspn(p, ":");

                        if (n > 0 && n < sizeof(path)) {
                                memcpy(path, p, n);
                                path[n] = '\0';
                                if (access(path, F_OK) == 0)
                                        return tsr_kube_kubeconfig_load(cfg, path, context, diag);
                        }
                        p += n;
                        if (*p == ':')
                                p++;
                }
                return tsr_diag_set(diag, TSR_ENOTFOUND,
                                    "no file named by KUBECONFIG=%.256s exists", list);
        }
        if (!home || !*home)
                return tsr_diag_set(
                    diag, TSR_ENOTFOUND,
                    "no configuration: not in a cluster, KUBECONFIG and HOME unset");
        snprintf(path, sizeof(path), "%s/.kube/config", home);
        if (access(path, F_OK) != 0)
                return tsr_diag_set(diag, TSR_ENOTFOUND,
                                    "no configuration: not in a cluster (KUBERNETES_SERVICE_HOST "
                                    "unset), KUBECONFIG unset and %s does not exist",
                                    path);
        return tsr_kube_kubeconfig_load(cfg, path, context, diag);
}
