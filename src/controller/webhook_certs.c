/*
 * webhook_certs.c - the "webhook-certs" reconciler: tessera's own webhook certificates when the
 * controller runs with --webhook-cert-secret (docs/controller.md, "Webhook certificates").
 *
 * The Secret (type kubernetes.io/tls) holds tls.crt (serving certificate, then the CA), tls.key,
 * ca.crt (the current CA, then the previous one while it has not expired) and ca.key (the current
 * CA's key, so the serving certificate can be renewed without a new CA). Each pass reads it
 * (uncached GET), keeps whatever is still good (a restart or a new leader never rotates),
 * replaces what is missing, malformed, mismatched or due for renewal (cert_issue.h), writes it
 * back guarded by its resourceVersion (create when missing; a 409 retries the key after its
 * backoff, and the next pass adopts what the other writer made), and then makes every
 * webhooks[].clientConfig.caBundle of the named Mutating/ValidatingWebhookConfigurations equal
 * to ca.crt. The key comes back at the earlier of the renewal times and a one-minute resync, so
 * a caBundle someone reset is patched again within a minute.
 *
 * Only the leader's worker runs it (controller.c): webhook replicas read the Secret through their
 * volume and never write, so any number of them is safe.
 */
#include "controller/controller_int.h"

#include "base/diag.h"
#include "base/err.h"
#include "base/log.h"
#include "controller/cert_issue.h"
#include "kube/client.h"

#include <gnutls/gnutls.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RESYNC_MS    60000u
#define BEGIN_CERT   "-----BEGIN CERTIFICATE-----"
#define ADMISSION_V1 "/apis/admissionregistration.k8s.io/v1/"

/* The Secret's four PEM strings (each NULL or a new string). */
struct material {
        char *crt, *key, *ca, *ca_key;
};

static void material_release(struct material *m)
{
        free(m->crt);
        free(m->key);
        free(m->ca);
        free(m->ca_key);
}

/* The base64 data[field] of secret as a new string; NULL when absent or not base64. */
static char *data_field(json_t *secret, const char *field)
{
        const char *b64 =
            json_string_value(json_object_get(json_object_get(secret, "data"), field));
        gnutls_datum_t in, out = {0};
        char *s;

        if (!b64 || !*b64)
                return NULL;
        in = (gnutls_datum_t){.data = (unsigned char *)(uintptr_t)b64,
                              .size = (unsigned)strlen(b64)};
        if (gnutls_base64_decode2(&in, &out) < 0)
                return NULL;
        s = malloc(out.size + 1u);
        if (s) {
                memcpy(s, out.data, out.size);
                s[out.size] = '\0';
        }
        gnutls_free(out.data);
        return s;
}

/* text base64-encoded as a new json string; NULL when out of memory. */
static json_t *b64_string(const char *text)
{
        gnutls_datum_t in = {.data = (unsigned char *)(uintptr_t)text,
                             .size = (unsigned)strlen(text)};
        gnutls_datum_t out = {0};
        json_t *s;

        if (gnutls_base64_encode2(&in, &out) < 0)
                return NULL;
        s = json_stringn((const char *)out.data, out.size);
        gnutls_free(out.data);
        return s;
}

/* The concatenation a then b (b may be NULL) as a new string. */
static char *concat(const char *a, const char *b)
{
        size_t al = strlen(a), bl = b ? strlen(b) : 0;
        char *s = malloc(al + bl + 1);

        if (!s)
                return NULL;
        memcpy(s, a, al);
        if (bl)
                memcpy(s + al, b, bl);
        s[al + bl] = '\0';
        return s;
}

/* The second certificate of a PEM bundle (the previous CA), or NULL. */
static const char *second_cert(const char *pem)
{
        const char *first = pem ? strstr(pem, BEGIN_CERT) : NULL;

        return first ? strstr(first + 1, BEGIN_CERT) : NULL;
}

/* The bundle for ca.crt: ca, then previous (the former first CA, may be NULL) while it has not
 * expired at now. A new string or NULL (out of memory). */
static char *ca_bundle(const char *ca, const char *previous, time_t now)
{
        struct tsr_cert_times t;
        struct tsr_diag diag;
        const char *end;
        char *prev = NULL, *out;

        tsr_diag_clear(&diag);
        if (previous && !tsr_cert_read_times(previous, &t, &diag) && now < t.not_after) {
                end = second_cert(previous); /* only one previous CA */
                prev = end ? strndup(previous, (size_t)(end - previous)) : strdup(previous);
                if (!prev)
                        return NULL;
        }
        out = concat(ca, prev);
        free(prev);
        return out;
}

static void log_replaced(struct tsr_controller *c, const char *what, const struct tsr_diag *why)
{
        tsr_log(TSR_LOG_WARN, "webhook certificate material replaced", "secret", c->cert_secret,
                "what", what, "reason", why->msg, NULL);
}

/*
 * Decides the material to hold at now from old (what the Secret has): keeps the CA and the
 * serving certificate while they are good, issues what is not. *changed says whether new
 * differs from old.
 */
static int decide(struct tsr_controller *c, const struct material *old, time_t now,
                  struct material *new, bool *changed, struct tsr_diag *diag)
{
        const char *const *dns = (const char *const *)c->cert_dns;
        struct tsr_cert_times t;
        struct tsr_diag why;
        char *leaf = NULL;
        bool ca_ok = false, leaf_ok = false;
        int rc = 0;

        memset(new, 0, sizeof(*new));
        tsr_diag_clear(&why);
        if (!old->ca || !old->ca_key)
                tsr_diag_set(&why, TSR_ENOTFOUND, "no CA");
        else if (!tsr_cert_check_ca(old->ca, old->ca_key, &why) &&
                 !tsr_cert_read_times(old->ca, &t, &why) && !tsr_cert_needs_renewal(&t, now))
                ca_ok = true;
        else if (!why.msg[0])
                tsr_diag_set(&why, TSR_EINVAL, "the CA is due for renewal");
        if (ca_ok) {
                new->ca_key = strdup(old->ca_key);
                new->ca = ca_bundle(old->ca, second_cert(old->ca), now);
                if (!new->ca_key || !new->ca)
                        rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        } else {
                char *ca_pem = NULL;

                if (old->ca || old->ca_key)
                        log_replaced(c, "ca", &why);
                rc = tsr_cert_issue_ca(c->cert_dns[2], now, c->cfg.cert_ca_validity_s, &ca_pem,
                                       &new->ca_key, diag);
                if (!rc) {
                        new->ca = ca_bundle(ca_pem, old->ca, now);
                        if (!new->ca)
                                rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                        atomic_fetch_add(&c->cert_rotations[1], 1);
                        tsr_log(TSR_LOG_INFO, "webhook CA issued", "secret", c->cert_secret, NULL);
                }
                free(ca_pem);
        }
        if (rc)
                return rc;
        tsr_diag_clear(&why);
        if (!old->crt || !old->key)
                tsr_diag_set(&why, TSR_ENOTFOUND, "no serving certificate");
        else if (!tsr_cert_check_serving(old->crt, old->key, new->ca, dns, CTL_CERT_DNS_N, now,
                                         &why) &&
                 !tsr_cert_read_times(old->crt, &t, &why) && !tsr_cert_needs_renewal(&t, now))
                leaf_ok = true;
        else if (!why.msg[0])
                tsr_diag_set(&why, TSR_EINVAL, "the serving certificate is due for renewal");
        if (leaf_ok) {
                new->crt = strdup(old->crt);
                new->key = strdup(old->key);
                if (!new->crt || !new->key)
                        rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        } else {
                if (old->crt && ca_ok)
                        log_replaced(c, "serving", &why);
                rc = tsr_cert_issue_serving(new->ca, new->ca_key, dns, CTL_CERT_DNS_N, now,
                                            c->cfg.cert_validity_s, &leaf, &new->key, diag);
                if (!rc) {
                        const char *end = second_cert(new->ca);
                        char *ca_only =
                            end ? strndup(new->ca, (size_t)(end - new->ca)) : strdup(new->ca);

                        new->crt = ca_only ? concat(leaf, ca_only) : NULL;
                        free(ca_only);
                        if (!new->crt)
                                rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                        atomic_fetch_add(&c->cert_rotations[0], 1);
                        tsr_log(TSR_LOG_INFO, "webhook serving certificate issued", "secret",
                                c->cert_secret, "service", c->cert_dns[2], NULL);
                }
                free(leaf);
        }
        if (rc)
                return rc;
        *changed = !old->crt || !old->key || !old->ca || !old->ca_key ||
                   strcmp(old->crt, new->crt) || strcmp(old->key, new->key) ||
                   strcmp(old->ca, new->ca) || strcmp(old->ca_key, new->ca_key);
        return 0;
}

/* Writes m into secret (borrowed, modified; NULL: create a new one). */
static int write_secret(struct tsr_controller *c, json_t *secret, const struct material *m,
                        struct tsr_diag *diag)
{
        char path[600];
        json_t *obj = secret, *data = json_object();
        char *body;
        int rc;

        if (!obj) {
                obj = json_pack("{s:s, s:s, s:{s:s, s:s}, s:s}", "apiVersion", "v1", "kind",
                                "Secret", "metadata", "name", c->cert_name, "namespace", c->cert_ns,
                                "type", "kubernetes.io/tls");
                if (obj)
                        json_object_set_new(
                            json_object_get(obj, "metadata"), "labels",
                            json_pack("{s:s}", "app.kubernetes.io/managed-by", CTL_MANAGER));
        } else {
                json_incref(obj);
        }
        if (!obj || !data || json_object_set_new(data, "tls.crt", b64_string(m->crt)) ||
            json_object_set_new(data, "tls.key", b64_string(m->key)) ||
            json_object_set_new(data, "ca.crt", b64_string(m->ca)) ||
            json_object_set_new(data, "ca.key", b64_string(m->ca_key)) ||
            json_object_set(obj, "data", data) || !(body = json_dumps(obj, JSON_COMPACT))) {
                json_decref(data);
                json_decref(obj);
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        }
        json_decref(data);
        if (secret)
                snprintf(path, sizeof(path), "/api/v1/namespaces/%s/secrets/%s", c->cert_ns,
                         c->cert_name);
        else
                snprintf(path, sizeof(path), "/api/v1/namespaces/%s/secrets", c->cert_ns);
        rc =
            tsr_kube_client_request(c->cfg.client, secret ? "PUT" : "POST", path,
                                    "application/json", body, strlen(body), NULL, NULL, NULL, diag);
        free(body);
        json_decref(obj);
        return rc;
}

/* Makes every webhooks[].clientConfig.caBundle of the configurations named name equal to b64. */
static int patch_bundles(struct tsr_controller *c, const char *name, json_t *b64,
                         struct tsr_diag *diag)
{
        static const char *const kinds[] = {"mutatingwebhookconfigurations",
                                            "validatingwebhookconfigurations"};
        bool found = false;

        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
                char path[600];
                json_t *obj = NULL, *ops, *hook;
                size_t i;
                int rc;

                snprintf(path, sizeof(path), ADMISSION_V1 "%s/%s", kinds[k], name);
                rc = tsr_kube_client_get(c->cfg.client, path, &obj, NULL, diag);
                if (rc == TSR_ENOTFOUND)
                        continue;
                if (rc)
                        return rc;
                found = true;
                ops = json_array();
                json_array_foreach(json_object_get(obj, "webhooks"), i, hook)
                {
                        char at[64];

                        if (json_equal(
                                json_object_get(json_object_get(hook, "clientConfig"), "caBundle"),
                                b64))
                                continue;
                        snprintf(at, sizeof(at), "/webhooks/%zu/name", i);
                        json_array_append_new(ops,
                                              json_pack("{s:s, s:s, s:O}", "op", "test", "path", at,
                                                        "value", json_object_get(hook, "name")));
                        snprintf(at, sizeof(at), "/webhooks/%zu/clientConfig/caBundle", i);
                        json_array_append_new(ops, json_pack("{s:s, s:s, s:O}", "op", "add", "path",
                                                             at, "value", b64));
                }
                json_decref(obj);
                if (!ops)
                        return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
                rc = json_array_size(ops)
                         ? tsr_kube_client_patch(c->cfg.client, path, TSR_KUBE_PATCH_JSON, ops,
                                                 NULL, NULL, NULL, diag)
                         : 0;
                if (!rc && json_array_size(ops)) {
                        atomic_fetch_add(&c->cert_bundle_patches, 1);
                        tsr_log(TSR_LOG_INFO, "webhook caBundle patched", "configuration", name,
                                "resource", kinds[k], NULL);
                }
                json_decref(ops);
                if (rc)
                        return rc;
        }
        if (!found)
                tsr_log(TSR_LOG_WARN, "webhook configuration not found", "configuration", name,
                        NULL);
        return 0;
}

int ctl_webhook_certs_reconcile(struct tsr_controller *c, unsigned *requeue_ms)
{
        struct material old = {0}, new = {0};
        struct tsr_cert_times leaf_t, ca_t;
        struct tsr_diag diag;
        char path[600], names[sizeof(c->cert_configurations)];
        json_t *secret = NULL, *b64 = NULL;
        time_t now = time(NULL), due;
        bool changed = false;
        int rc;

        tsr_diag_clear(&diag);
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/secrets/%s", c->cert_ns, c->cert_name);
        rc = tsr_kube_client_get(c->cfg.client, path, &secret, NULL, &diag);
        if (rc == TSR_ENOTFOUND)
                rc = 0;
        if (!rc && secret) {
                old.crt = data_field(secret, "tls.crt");
                old.key = data_field(secret, "tls.key");
                old.ca = data_field(secret, "ca.crt");
                old.ca_key = data_field(secret, "ca.key");
        }
        if (!rc)
                rc = decide(c, &old, now, &new, &changed, &diag);
        if (!rc && changed)
                rc = write_secret(c, secret, &new, &diag);
        if (!rc && !(b64 = b64_string(new.ca)))
                rc = tsr_diag_set(&diag, TSR_ENOMEM, "out of memory");
        snprintf(names, sizeof(names), "%s", c->cert_configurations);
        for (char *save = NULL, *n = strtok_r(names, ",", &save); !rc && n;
             n = strtok_r(NULL, ",", &save))
                rc = patch_bundles(c, n, b64, &diag);
        if (!rc && !tsr_cert_read_times(new.crt, &leaf_t, &diag) &&
            !tsr_cert_read_times(new.ca, &ca_t, &diag)) {
                atomic_store(&c->cert_not_after[0], (long long)leaf_t.not_after);
                atomic_store(&c->cert_not_after[1], (long long)ca_t.not_after);
                due = tsr_cert_renewal_time(&leaf_t);
                if (tsr_cert_renewal_time(&ca_t) < due)
                        due = tsr_cert_renewal_time(&ca_t);
                *requeue_ms = due - now < (time_t)(RESYNC_MS / 1000)
                                  ? (unsigned)(due > now ? due - now : 1) * 1000u
                                  : RESYNC_MS;
        }
        if (rc)
                tsr_log(TSR_LOG_WARN, "webhook certificates not reconciled", "secret",
                        c->cert_secret, "error", diag.msg[0] ? diag.msg : tsr_strerror(rc), NULL);
        json_decref(b64);
        json_decref(secret);
        material_release(&old);
        material_release(&new);
        return rc;
}
