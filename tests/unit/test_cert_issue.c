/*
 * test_cert_issue.c - cmocka suite for controller/cert_issue: a CA and a serving certificate it
 * signs verify as a chain with GnuTLS's own gnutls_x509_crt_list_verify; the CA is a CA
 * (basicConstraints, keyCertSign), the serving certificate is not and carries serverAuth and
 * every DNS name; the validity windows are the ones asked for (and a serving certificate never
 * outlives its CA); the renewal decision turns at two thirds of the lifetime; the checks refuse
 * a key that is not the certificate's, a certificate of another CA, a missing name, garbage,
 * and a certificate outside its validity.
 *
 * Invariants: the clock is a fixed NOW passed in; nothing here reads a file or the network.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "controller/cert_issue.h"

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdlib.h>
#include <string.h>

#define NOW  ((time_t)1796000000) /* 2026-11-30 */
#define DAY  86400ull
#define SKEW 300

static const char *const dns[] = {"tessera-webhook", "tessera-webhook.gpustack-system",
                                  "tessera-webhook.gpustack-system.svc",
                                  "tessera-webhook.gpustack-system.svc.cluster.local"};

struct pair {
        char *ca, *ca_key, *crt, *key;
};

static void issue(struct pair *p, unsigned long long ca_days, unsigned long long days)
{
        struct tsr_diag diag;

        tsr_diag_clear(&diag);
        assert_int_equal(
            tsr_cert_issue_ca("tessera-webhook-ca", NOW, ca_days * DAY, &p->ca, &p->ca_key, &diag),
            0);
        assert_int_equal(tsr_cert_issue_serving(p->ca, p->ca_key, dns, 4, NOW, days * DAY, &p->crt,
                                                &p->key, &diag),
                         0);
}

static void release(struct pair *p)
{
        free(p->ca);
        free(p->ca_key);
        free(p->crt);
        free(p->key);
}

static gnutls_x509_crt_t load(const char *pem)
{
        gnutls_x509_crt_t crt;
        gnutls_datum_t d = {.data = (unsigned char *)(uintptr_t)pem, .size = (unsigned)strlen(pem)};

        assert_int_equal(gnutls_x509_crt_init(&crt), 0);
        assert_int_equal(gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_PEM), 0);
        return crt;
}

static void test_chain_verifies(void **state)
{
        struct pair p = {0};
        gnutls_x509_crt_t leaf, ca;
        unsigned status = 99, crit, is_ca = 9, usage = 0;
        int pathlen;
        char oid[128];
        size_t oid_len = sizeof(oid);

        (void)state;
        issue(&p, 3650, 365);
        leaf = load(p.crt);
        ca = load(p.ca);
        assert_int_equal(gnutls_x509_crt_list_verify(&leaf, 1, &ca, 1, NULL, 0,
                                                     GNUTLS_VERIFY_DISABLE_TIME_CHECKS, &status),
                         0);
        assert_int_equal(status, 0);
        /* the CA: a CA that signs certificates */
        assert_true(gnutls_x509_crt_get_basic_constraints(ca, &crit, &is_ca, &pathlen) >= 0);
        assert_int_equal(is_ca, 1);
        assert_true(gnutls_x509_crt_get_key_usage(ca, &usage, &crit) >= 0);
        assert_true(usage & GNUTLS_KEY_KEY_CERT_SIGN);
        /* the serving certificate: not a CA, serverAuth, every name */
        assert_true(gnutls_x509_crt_get_basic_constraints(leaf, &crit, &is_ca, &pathlen) >= 0);
        assert_int_equal(is_ca, 0);
        assert_int_equal(gnutls_x509_crt_get_key_purpose_oid(leaf, 0, oid, &oid_len, NULL), 0);
        assert_string_equal(oid, GNUTLS_KP_TLS_WWW_SERVER);
        for (size_t i = 0; i < 4; i++)
                assert_true(gnutls_x509_crt_check_hostname(leaf, dns[i]));
        assert_false(gnutls_x509_crt_check_hostname(leaf, "other.gpustack-system.svc"));
        assert_int_equal(gnutls_x509_crt_get_pk_algorithm(leaf, NULL), GNUTLS_PK_ECDSA);
        /* another CA does not verify it */
        {
                struct pair q = {0};
                gnutls_x509_crt_t other;

                issue(&q, 3650, 365);
                other = load(q.ca);
                assert_int_equal(gnutls_x509_crt_list_verify(&leaf, 1, &other, 1, NULL, 0,
                                                             GNUTLS_VERIFY_DISABLE_TIME_CHECKS,
                                                             &status),
                                 0);
                assert_int_not_equal(status, 0);
                gnutls_x509_crt_deinit(other);
                release(&q);
        }
        gnutls_x509_crt_deinit(leaf);
        gnutls_x509_crt_deinit(ca);
        release(&p);
}

static void test_validity_and_serials(void **state)
{
        struct pair p = {0}, q = {0};
        struct tsr_cert_times t;
        struct tsr_diag diag;
        unsigned char a[40], b[40];
        size_t al = sizeof(a), bl = sizeof(b);
        gnutls_x509_crt_t x, y;

        (void)state;
        tsr_diag_clear(&diag);
        issue(&p, 3650, 365);
        assert_int_equal(tsr_cert_read_times(p.crt, &t, &diag), 0);
        assert_int_equal(t.not_before, NOW - SKEW);
        assert_int_equal(t.not_after, NOW + (time_t)(365 * DAY));
        assert_int_equal(tsr_cert_read_times(p.ca, &t, &diag), 0);
        assert_int_equal(t.not_after, NOW + (time_t)(3650 * DAY));
        /* a serving certificate never outlives its CA */
        issue(&q, 10, 365);
        assert_int_equal(tsr_cert_read_times(q.crt, &t, &diag), 0);
        assert_int_equal(t.not_after, NOW + (time_t)(10 * DAY));
        /* a short lifetime is backdated a tenth of it, so it renews at two thirds of it */
        {
                char *crt = NULL, *key = NULL;

                assert_int_equal(
                    tsr_cert_issue_serving(q.ca, q.ca_key, dns, 4, NOW, 90, &crt, &key, &diag), 0);
                assert_int_equal(tsr_cert_read_times(crt, &t, &diag), 0);
                assert_int_equal(t.not_before, NOW - 9);
                assert_int_equal(t.not_after, NOW + 90);
                assert_false(tsr_cert_needs_renewal(&t, NOW + 56));
                assert_true(tsr_cert_needs_renewal(&t, NOW + 57));
                free(crt);
                free(key);
        }
        /* serials are random */
        x = load(p.crt);
        y = load(q.crt);
        assert_int_equal(gnutls_x509_crt_get_serial(x, a, &al), 0);
        assert_int_equal(gnutls_x509_crt_get_serial(y, b, &bl), 0);
        assert_int_equal(al, 16);
        assert_true(al != bl || memcmp(a, b, al));
        gnutls_x509_crt_deinit(x);
        gnutls_x509_crt_deinit(y);
        release(&p);
        release(&q);
}

static void test_renewal_decision(void **state)
{
        struct tsr_cert_times t = {.not_before = 1000, .not_after = 1000 + 300};

        (void)state;
        assert_int_equal(tsr_cert_renewal_time(&t), 1200);
        assert_true(tsr_cert_needs_renewal(&t, 999)); /* not yet valid */
        assert_false(tsr_cert_needs_renewal(&t, 1000));
        assert_false(tsr_cert_needs_renewal(&t, 1199));
        assert_true(tsr_cert_needs_renewal(&t, 1200)); /* a third left */
        assert_true(tsr_cert_needs_renewal(&t, 1400)); /* expired */
}

static void test_checks(void **state)
{
        struct pair p = {0}, q = {0};
        struct tsr_diag diag;

        (void)state;
        tsr_diag_clear(&diag);
        issue(&p, 3650, 365);
        issue(&q, 3650, 365);
        assert_int_equal(tsr_cert_check_ca(p.ca, p.ca_key, &diag), 0);
        assert_int_equal(tsr_cert_check_serving(p.crt, p.key, p.ca, dns, 4, NOW, &diag), 0);
        /* a key that is not the certificate's */
        assert_int_equal(tsr_cert_check_ca(p.ca, q.ca_key, &diag), TSR_EINVAL);
        assert_int_equal(tsr_cert_check_serving(p.crt, q.key, p.ca, dns, 4, NOW, &diag),
                         TSR_EINVAL);
        /* the serving certificate is not a CA */
        assert_int_equal(tsr_cert_check_ca(p.crt, p.key, &diag), TSR_EINVAL);
        /* another CA */
        assert_int_equal(tsr_cert_check_serving(p.crt, p.key, q.ca, dns, 4, NOW, &diag),
                         TSR_EINVAL);
        /* a name it does not carry */
        {
                const char *const other[] = {"tessera-webhook.elsewhere.svc"};

                assert_int_equal(tsr_cert_check_serving(p.crt, p.key, p.ca, other, 1, NOW, &diag),
                                 TSR_EINVAL);
        }
        /* outside its validity */
        assert_int_equal(
            tsr_cert_check_serving(p.crt, p.key, p.ca, dns, 4, NOW + (time_t)(366 * DAY), &diag),
            TSR_EINVAL);
        /* garbage */
        assert_int_equal(tsr_cert_check_ca("not a certificate", p.ca_key, &diag), TSR_EPARSE);
        assert_int_equal(tsr_cert_check_serving(p.crt, "garbage", p.ca, dns, 4, NOW, &diag),
                         TSR_EPARSE);
        {
                struct tsr_cert_times t;
                char *crt = NULL, *key = NULL;

                assert_int_equal(tsr_cert_read_times("", &t, &diag), TSR_EPARSE);
                /* signing with a key that is not the CA's is refused */
                assert_int_equal(
                    tsr_cert_issue_serving(p.ca, q.ca_key, dns, 4, NOW, DAY, &crt, &key, &diag),
                    TSR_EINVAL);
                assert_null(crt);
        }
        release(&p);
        release(&q);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_chain_verifies),
            cmocka_unit_test(test_validity_and_serials),
            cmocka_unit_test(test_renewal_decision),
            cmocka_unit_test(test_checks),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
