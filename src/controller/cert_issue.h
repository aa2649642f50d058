/*
 * cert_issue.h - the webhook's own certificates with GnuTLS, no I/O: a self-signed CA, a serving
 * certificate it signs for the webhook Service's DNS names, the check that existing material is
 * still good, and when to renew (docs/internals/controller.md, "Webhook certificates").
 *
 * Keys are ECDSA P-256, signatures SHA-256, serials 128 random bits (positive). The CA has
 * basicConstraints CA:TRUE and keyUsage keyCertSign + cRLSign; the serving certificate
 * basicConstraints CA:FALSE, keyUsage digitalSignature, extKeyUsage serverAuth and one DNS
 * subjectAltName per name. notBefore is five minutes before now (clock skew between replicas and
 * the API server; a tenth of the validity when that is shorter), notAfter now + validity. A
 * certificate is renewed once less than a third of its lifetime (notAfter - notBefore) is left.
 * Time is an argument: nothing here reads a clock.
 *
 * Ownership: every char ** out is a new NUL-terminated PEM string (free with free), written only
 * on success. Inputs are borrowed. Thread-safe (GnuTLS's own state is initialised on load).
 */
#ifndef TSR_CONTROLLER_CERT_ISSUE_H
#define TSR_CONTROLLER_CERT_ISSUE_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

struct tsr_diag;

/* A certificate's validity window. */
struct tsr_cert_times {
        time_t not_before, not_after;
};

/* A new CA named cn valid for validity_s seconds from now: *cert_pem and *key_pem. 0 or
 * TSR_ENOMEM / TSR_EIO (GnuTLS), with diag. */
int tsr_cert_issue_ca(const char *cn, time_t now, unsigned long long validity_s, char **cert_pem,
                      char **key_pem, struct tsr_diag *diag);

/* A new serving certificate for the n names dns (the first is its CN), signed by the CA
 * ca_pem / ca_key_pem, valid for validity_s seconds from now, never past the CA's notAfter.
 * 0, TSR_EPARSE (the CA does not parse), TSR_EINVAL (no names, or a key not the CA's), or
 * TSR_ENOMEM / TSR_EIO, with diag. */
int tsr_cert_issue_serving(const char *ca_pem, const char *ca_key_pem, const char *const *dns,
                           size_t n, time_t now, unsigned long long validity_s, char **cert_pem,
                           char **key_pem, struct tsr_diag *diag);

/* The validity window of the first certificate in pem. 0 or TSR_EPARSE, with diag. */
int tsr_cert_read_times(const char *pem, struct tsr_cert_times *out, struct tsr_diag *diag);

/* Whether a certificate of window t should be replaced at now: less than a third of its
 * lifetime left, expired, or not yet valid. */
bool tsr_cert_needs_renewal(const struct tsr_cert_times *t, time_t now);

/* When a certificate of window t falls due for renewal. */
time_t tsr_cert_renewal_time(const struct tsr_cert_times *t);

/* Whether the CA ca_pem (its first certificate) is one with key ca_key_pem and is a CA. 0, or
 * TSR_EPARSE / TSR_EINVAL with diag saying what is wrong. */
int tsr_cert_check_ca(const char *ca_pem, const char *ca_key_pem, struct tsr_diag *diag);

/* Whether the serving certificate (the first of cert_pem) has key key_pem, verifies against the
 * CA ca_pem (its first certificate; times checked against now, not the clock), and names every
 * one of the n names dns. 0, or TSR_EPARSE / TSR_EINVAL with diag saying what is wrong. */
int tsr_cert_check_serving(const char *cert_pem, const char *key_pem, const char *ca_pem,
                           const char *const *dns, size_t n, time_t now, struct tsr_diag *diag);

#endif
