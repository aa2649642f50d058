/*
 * fuzz_kubeconfig.c - bytes as a kubeconfig file. The reader may refuse (with a message); what it
 * accepts must be a usable config: an http(s) server, a namespace, PEM data with its length, a
 * client certificate only with its key,
 * and relative paths made absolute under the base directory. A second parse of the same bytes
 * with a named context must not crash either, and a failed parse must leave the config as it was.
 */
#include "base/diag.h"
#include "kube/config.h"
#include "kube/kubeconfig.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct tsr_kube_config *c)
{
        const char *paths[] = {c->ca_file, c->cert_file, c->key_file, c->token_file};

        if (!c->server || (strncmp(c->server, "https://", 8) && strncmp(c->server, "http://", 7)))
                abort();
        if (!c->ns || !*c->ns)
                abort();
        if ((!c->ca_pem && c->ca_pem_len) || (!c->cert_pem && c->cert_pem_len) ||
            (!c->key_pem && c->key_pem_len))
                abort();
        if (!(c->cert_pem || c->cert_file) != !(c->key_pem || c->key_file))
                abort();
        for (size_t i = 0; i < 4; i++)
                if (paths[i] && paths[i][0] != '/')
                        abort();
        if (c->insecure_skip_tls_verify && (c->ca_file || c->ca_pem))
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const char *const contexts[] = {NULL, "c", "dev"};
        struct tsr_kube_config cfg;
        struct tsr_diag diag;

        if (size > 65536)
                return 0;
        for (size_t i = 0; i < 3; i++) {
                tsr_kube_config_init(&cfg);
                tsr_diag_clear(&diag);
                if (tsr_kube_kubeconfig_parse(&cfg, (const char *)data, size, "/base", contexts[i],
                                              &diag) == 0) {
                        check(&cfg);
                } else {
                        if (diag.msg[0] == '\0' || cfg.server)
                                abort();
                }
                tsr_kube_config_release(&cfg);
        }
        return 0;
}
