/*
 * cert_issue.c - the webhook's CA and serving certificate with GnuTLS (cert_issue.h).
 *
 * Every GnuTLS object is made and released within one call; nothing outlives it but the PEM
 * strings handed back.
 */
#include "controller/cert_issue.h"

#include "base/diag.h"
#include "base/err.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* notBefore is this far back (a tenth of short lifetimes, so that tests' minutes still renew at
 * two thirds of what they asked for). */
static time_t skew(unsigned long long validity_s)
{
        return validity_s / 10 < 300 ? (time_t)(validity_s / 10) : 300;
}

static int gnutls_fail(struct tsr_diag *diag, const char *what, int g)
{
        return tsr_diag_set(diag, g == GNUTLS_E_MEMORY_ERROR ? TSR_ENOMEM : TSR_EIO, "%s: %s", what,
                            gnutls_strerror(g));
}

static gnutls_datum_t datum(const char *pem)
{
        return (gnutls_datum_t){.data = (unsigned char *)(uintptr_t)pem,
                                .size = (unsigned)strlen(pem)};
}

/* d (gnutls-allocated, freed here) as a new NUL-terminated string in *out. */
static int take_datum(gnutls_datum_t *d, char **out, struct tsr_diag *diag)
{
        char *s = malloc(d->size + 1u);

        if (s) {
                memcpy(s, d->data, d->size);
                s[d->size] = '\0';
        }
        gnutls_free(d->data);
        if (!s)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        *out = s;
        return 0;
}

static int new_key(gnutls_x509_privkey_t *key, struct tsr_diag *diag)
{
        int g = gnutls_x509_privkey_init(key);

        if (g < 0)
                return gnutls_fail(diag, "certificate key", g);
        g = gnutls_x509_privkey_generate(*key, GNUTLS_PK_ECDSA,
                                         GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
        if (g < 0) {
                gnutls_x509_privkey_deinit(*key);
                return gnutls_fail(diag, "certificate key", g);
        }
        return 0;
}

/* The fields both certificates share: version, subject CN, key, random positive serial,
 * validity, subject key identifier. */
static int set_common(gnutls_x509_crt_t crt, gnutls_x509_privkey_t key, const char *cn,
                      time_t not_before, time_t not_after, struct tsr_diag *diag)
{
        unsigned char serial[16], id[64];
        size_t id_len = sizeof(id);
        int g = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof(serial));

        serial[0] = (unsigned char)((serial[0] & 0x7f) | 0x40); /* positive, 16 bytes */
        if (g >= 0)
                g = gnutls_x509_crt_set_version(crt, 3);
        if (g >= 0)
                g = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn,
                                                  (unsigned)strlen(cn));
        if (g >= 0)
                g = gnutls_x509_crt_set_key(crt, key);
        if (g >= 0)
                g = gnutls_x509_crt_set_serial(crt, serial, sizeof(serial));
        if (g >= 0)
                g = gnutls_x509_crt_set_activation_time(crt, not_before);
        if (g >= 0)
                g = gnutls_x509_crt_set_expiration_time(crt, not_after);
        if (g >= 0)
                g = gnutls_x509_crt_get_key_id(crt, 0, id, &id_len);
        if (g >= 0)
                g = gnutls_x509_crt_set_subject_key_id(crt, id, id_len);
        return g < 0 ? gnutls_fail(diag, "certificate", g) : 0;
}

/* Signs crt with issuer / issuer_key and exports it and key as PEM. */
static int sign_export(gnutls_x509_crt_t crt, gnutls_x509_crt_t issuer,
                       gnutls_x509_privkey_t issuer_key, gnutls_x509_privkey_t key, char **cert_pem,
                       char **key_pem, struct tsr_diag *diag)
{
        gnutls_datum_t c = {0}, k = {0};
        char *cs = NULL;
        int g = gnutls_x509_crt_sign2(crt, issuer, issuer_key, GNUTLS_DIG_SHA256, 0);
        int rc;

        if (g >= 0)
                g = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &c);
        if (g >= 0 && (g = gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &k)) < 0)
                gnutls_free(c.data);
        if (g < 0)
                return gnutls_fail(diag, "certificate signing", g);
        rc = take_datum(&c, &cs, diag);
        if (rc) {
                gnutls_free(k.data);
                return rc;
        }
        rc = take_datum(&k, key_pem, diag);
        if (rc) {
                free(cs);
                return rc;
        }
        *cert_pem = cs;
        return 0;
}

int tsr_cert_issue_ca(const char *cn, time_t now, unsigned long long validity_s, char **cert_pem,
                      char **key_pem, struct tsr_diag *diag)
{
        gnutls_x509_privkey_t key;
        gnutls_x509_crt_t crt;
        int g, rc = new_key(&key, diag);

        if (rc)
                return rc;
        g = gnutls_x509_crt_init(&crt);
        if (g < 0) {
                gnutls_x509_privkey_deinit(key);
                return gnutls_fail(diag, "certificate", g);
        }
        rc = set_common(crt, key, cn, now - skew(validity_s), now + (time_t)validity_s, diag);
        if (!rc && ((g = gnutls_x509_crt_set_basic_constraints(crt, 1, -1)) < 0 ||
                    (g = gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_KEY_CERT_SIGN |
                                                                GNUTLS_KEY_CRL_SIGN)) < 0))
                rc = gnutls_fail(diag, "CA certificate", g);
        if (!rc)
                rc = sign_export(crt, crt, key, key, cert_pem, key_pem, diag);
        gnutls_x509_crt_deinit(crt);
        gnutls_x509_privkey_deinit(key);
        return rc;
}

/* Imports the first certificate of pem into a new *crt. */
static int import_crt(const char *pem, const char *what, gnutls_x509_crt_t *crt,
                      struct tsr_diag *diag)
{
        gnutls_datum_t d = datum(pem);
        int g = gnutls_x509_crt_init(crt);

        if (g < 0)
                return gnutls_fail(diag, what, g);
        g = gnutls_x509_crt_import(*crt, &d, GNUTLS_X509_FMT_PEM);
        if (g < 0) {
                gnutls_x509_crt_deinit(*crt);
                return tsr_diag_set(diag, TSR_EPARSE, "%s: %s", what, gnutls_strerror(g));
        }
        return 0;
}

static int import_key(const char *pem, const char *what, gnutls_x509_privkey_t *key,
                      struct tsr_diag *diag)
{
        gnutls_datum_t d = datum(pem);
        int g = gnutls_x509_privkey_init(key);

        if (g < 0)
                return gnutls_fail(diag, what, g);
        g = gnutls_x509_privkey_import(*key, &d, GNUTLS_X509_FMT_PEM);
        if (g < 0) {
                gnutls_x509_privkey_deinit(*key);
                return tsr_diag_set(diag, TSR_EPARSE, "%s: %s", what, gnutls_strerror(g));
        }
        return 0;
}

/* Whether key is crt's key: TSR_EINVAL with diag naming what when not. */
static int key_matches(gnutls_x509_crt_t crt, gnutls_x509_privkey_t key, const char *what,
                       struct tsr_diag *diag)
{
        unsigned char a[64], b[64];
        size_t al = sizeof(a), bl = sizeof(b);

        if (gnutls_x509_crt_get_key_id(crt, 0, a, &al) < 0 ||
            gnutls_x509_privkey_get_key_id(key, 0, b, &bl) < 0 || al != bl || memcmp(a, b, al))
                return tsr_diag_set(diag, TSR_EINVAL, "%s: the key is not the certificate's", what);
        return 0;
}

int tsr_cert_issue_serving(const char *ca_pem, const char *ca_key_pem, const char *const *dns,
                           size_t n, time_t now, unsigned long long validity_s, char **cert_pem,
                           char **key_pem, struct tsr_diag *diag)
{
        gnutls_x509_crt_t ca, crt = NULL;
        gnutls_x509_privkey_t ca_key, key = NULL;
        unsigned char id[64];
        size_t id_len = sizeof(id);
        time_t not_after = now + (time_t)validity_s, ca_not_after;
        int g = 0, rc;

        if (!n)
                return tsr_diag_set(diag, TSR_EINVAL, "serving certificate: no DNS names");
        rc = import_crt(ca_pem, "CA certificate", &ca, diag);
        if (rc)
                return rc;
        rc = import_key(ca_key_pem, "CA key", &ca_key, diag);
        if (rc) {
                gnutls_x509_crt_deinit(ca);
                return rc;
        }
        rc = key_matches(ca, ca_key, "CA", diag);
        if (!rc)
                rc = new_key(&key, diag);
        if (!rc && (g = gnutls_x509_crt_init(&crt)) < 0)
                rc = gnutls_fail(diag, "certificate", g);
        ca_not_after = gnutls_x509_crt_get_expiration_time(ca);
        if (ca_not_after != (time_t)-1 && ca_not_after < not_after)
                not_after = ca_not_after;
        if (!rc)
                rc = set_common(crt, key, dns[0], now - skew(validity_s), not_after, diag);
        if (!rc) {
                g = gnutls_x509_crt_set_basic_constraints(crt, 0, -1);
                if (g >= 0)
                        g = gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE);
                if (g >= 0)
                        g = gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0);
                for (size_t i = 0; g >= 0 && i < n; i++)
                        g = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, dns[i],
                                                                 (unsigned)strlen(dns[i]),
                                                                 GNUTLS_FSAN_APPEND);
                if (g >= 0)
                        g = gnutls_x509_crt_get_subject_key_id(ca, id, &id_len, NULL);
                if (g >= 0)
                        g = gnutls_x509_crt_set_authority_key_id(crt, id, id_len);
                if (g < 0)
                        rc = gnutls_fail(diag, "serving certificate", g);
        }
        if (!rc)
                rc = sign_export(crt, ca, ca_key, key, cert_pem, key_pem, diag);
        if (crt)
                gnutls_x509_crt_deinit(crt);
        if (key)
                gnutls_x509_privkey_deinit(key);
        gnutls_x509_privkey_deinit(ca_key);
        gnutls_x509_crt_deinit(ca);
        return rc;
}

int tsr_cert_read_times(const char *pem, struct tsr_cert_times *out, struct tsr_diag *diag)
{
        gnutls_x509_crt_t crt;
        int rc = import_crt(pem, "certificate", &crt, diag);
        struct tsr_cert_times t;

        if (rc)
                return rc;
        t.not_before = gnutls_x509_crt_get_activation_time(crt);
        t.not_after = gnutls_x509_crt_get_expiration_time(crt);
        gnutls_x509_crt_deinit(crt);
        if (t.not_before == (time_t)-1 || t.not_after == (time_t)-1 || t.not_after <= t.not_before)
                return tsr_diag_set(diag, TSR_EPARSE, "certificate: no valid validity window");
        *out = t;
        return 0;
}

time_t tsr_cert_renewal_time(const struct tsr_cert_times *t)
{
        return t->not_after - (t->not_after - t->not_before) / 3;
}

bool tsr_cert_needs_renewal(const struct tsr_cert_times *t, time_t now)
{
        return now < t->not_before || now >= tsr_cert_renewal_time(t);
}

int tsr_cert_check_ca(const char *ca_pem, const char *ca_key_pem, struct tsr_diag *diag)
{
        gnutls_x509_crt_t ca;
        gnutls_x509_privkey_t key;
        unsigned critical, ca_flag = 0;
        int pathlen;
        int rc = import_crt(ca_pem, "CA certificate", &ca, diag);

        if (rc)
                return rc;
        rc = import_key(ca_key_pem, "CA key", &key, diag);
        if (rc) {
                gnutls_x509_crt_deinit(ca);
                return rc;
        }
        if (gnutls_x509_crt_get_basic_constraints(ca, &critical, &ca_flag, &pathlen) < 0 ||
            !ca_flag)
                rc = tsr_diag_set(diag, TSR_EINVAL, "CA certificate: not a CA");
        if (!rc)
                rc = key_matches(ca, key, "CA", diag);
        gnutls_x509_privkey_deinit(key);
        gnutls_x509_crt_deinit(ca);
        return rc;
}

int tsr_cert_check_serving(const char *cert_pem, const char *key_pem, const char *ca_pem,
                           const char *const *dns, size_t n, time_t now, struct tsr_diag *diag)
{
        gnutls_x509_crt_t crt, ca;
        gnutls_x509_privkey_t key;
        unsigned status = 0;
        int g, rc = import_crt(cert_pem, "serving certificate", &crt, diag);

        if (rc)
                return rc;
        rc = import_crt(ca_pem, "CA certificate", &ca, diag);
        if (rc) {
                gnutls_x509_crt_deinit(crt);
                return rc;
        }
        rc = import_key(key_pem, "serving key", &key, diag);
        if (!rc) {
                rc = key_matches(crt, key, "serving certificate", diag);
                gnutls_x509_privkey_deinit(key);
        }
        if (!rc) {
                g = gnutls_x509_crt_list_verify(&crt, 1, &ca, 1, NULL, 0,
                                                GNUTLS_VERIFY_DISABLE_TIME_CHECKS, &status);
                if (g < 0 || status)
                        rc = tsr_diag_set(diag, TSR_EINVAL,
                                          "serving certificate: not signed by the CA (%s)",
                                          g < 0 ? gnutls_strerror(g) : "verification failed");
        }
        if (!rc && (now < gnutls_x509_crt_get_activation_time(crt) ||
                    now >= gnutls_x509_crt_get_expiration_time(crt)))
                rc = tsr_diag_set(diag, TSR_EINVAL, "serving certificate: outside its validity");
        for (size_t i = 0; !rc && i < n; i++)
                if (!gnutls_x509_crt_check_hostname(crt, dns[i]))
                        rc = tsr_diag_set(diag, TSR_EINVAL, "serving certificate: does not name %s",
                                          dns[i]);
        gnutls_x509_crt_deinit(ca);
        gnutls_x509_crt_deinit(crt);
        return rc;
}
