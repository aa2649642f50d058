/*
 * tls_store.c - certificate generations behind a mutex; the files are checked by stat() at most
 * once a second from the handshake path.
 */
#include "webhook/tls_store.h"

#include "base/diag.h"
#include "base/err.h"
#include "base/log.h"

#include <gnutls/x509.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define CHAIN_MAX 8

struct generation {
        gnutls_pcert_st chain[CHAIN_MAX];
        unsigned n;
        gnutls_privkey_t key;
        struct generation *older;
};

struct file_id {
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime;
};

struct tsr_tls_store {
        char *cert_file, *key_file;
        pthread_mutex_t lock;
        struct generation *current; /* newest first; older ones stay until free */
        unsigned generations;
        struct file_id cert_id, key_id;
        struct file_id refused_cert_id, refused_key_id; /* the last pair that failed to load */
        bool refused;
        time_t checked;
};

static struct tsr_tls_store *installed;
static pthread_mutex_t installed_lock = PTHREAD_MUTEX_INITIALIZER;

static int file_id(const char *path, struct file_id *out)
{
        struct stat st;

        if (stat(path, &st) != 0)
                return TSR_EIO;
        out->dev = st.st_dev;
        out->ino = st.st_ino;
        out->size = st.st_size;
        out->mtime = st.st_mtim;
        return 0;
}

static bool same_id(const struct file_id *a, const struct file_id *b)
{
        return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
               a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

static void generation_free(struct generation *g)
{
        while (g) {
                struct generation *older = g->older;

                for (unsigned i = 0; i < g->n; i++)
                        gnutls_pcert_deinit(&g->chain[i]);
                if (g->key)
                        gnutls_privkey_deinit(g->key);
                free(g);
                g = older;
        }
}

/* Loads one cert/key pair into a new generation. */
static int load(const char *cert_file, const char *key_file, struct generation **out,
                struct tsr_diag *diag)
{
        struct generation *g = calloc(1, sizeof(*g));
        gnutls_datum_t cert = {NULL, 0}, key = {NULL, 0};
        gnutls_pubkey_t from_key = NULL;
        gnutls_datum_t a = {NULL, 0}, b = {NULL, 0};
        int err, rc = 0;

        if (!g)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        if ((err = gnutls_load_file(cert_file, &cert)) < 0) {
                rc = tsr_diag_set(diag, TSR_EIO, "cannot read certificate %s: %s", cert_file,
                                  gnutls_strerror(err));
                goto out;
        }
        if ((err = gnutls_load_file(key_file, &key)) < 0) {
                rc = tsr_diag_set(diag, TSR_EIO, "cannot read key %s: %s", key_file,
                                  gnutls_strerror(err));
                goto out;
        }
        g->n = CHAIN_MAX;
        if ((err = gnutls_pcert_list_import_x509_raw(g->chain, &g->n, &cert, GNUTLS_X509_FMT_PEM,
                                                     0)) < 0 ||
            g->n == 0) {
                g->n = 0;
                rc = tsr_diag_set(diag, TSR_EPARSE, "certificate %s: %s", cert_file,
                                  err < 0 ? gnutls_strerror(err) : "no certificate");
                goto out;
        }
        if ((err = gnutls_privkey_init(&g->key)) < 0 ||
            (err = gnutls_privkey_import_x509_raw(g->key, &key, GNUTLS_X509_FMT_PEM, NULL, 0)) <
                0) {
                rc = tsr_diag_set(diag, TSR_EPARSE, "key %s: %s", key_file, gnutls_strerror(err));
                goto out;
        }
        /* The key must be the leaf certificate's. */
        if (gnutls_pubkey_init(&from_key) < 0 ||
            gnutls_pubkey_import_privkey(from_key, g->key, 0, 0) < 0 ||
            gnutls_pubkey_export2(from_key, GNUTLS_X509_FMT_DER, &a) < 0 ||
            gnutls_pubkey_export2(g->chain[0].pubkey, GNUTLS_X509_FMT_DER, &b) < 0 ||
            a.size != b.size || memcmp(a.data, b.data, a.size) != 0)
                rc = tsr_diag_set(diag, TSR_EPARSE, "key %s does not match certificate %s",
                                  key_file, cert_file);
out:
        gnutls_free(a.data);
        gnutls_free(b.data);
        if (from_key)
                gnutls_pubkey_deinit(from_key);
        gnutls_free(cert.data);
        if (key.data)
                gnutls_memset(key.data, 0, key.size); /* the private key's PEM */
        gnutls_free(key.data);
        if (rc) {
                generation_free(g);
                return rc;
        }
        *out = g;
        return 0;
}

int tsr_tls_store_new(const char *cert_file, const char *key_file, struct tsr_tls_store **out,
                      struct tsr_diag *diag)
{
        struct tsr_tls_store *s = calloc(1, sizeof(*s));
        int rc;

        if (!s)
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        pthread_mutex_init(&s->lock, NULL);
        s->cert_file = strdup(cert_file);
        s->key_file = strdup(key_file);
        if (!s->cert_file || !s->key_file) {
                tsr_tls_store_free(s);
                return tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        }
        file_id(cert_file, &s->cert_id);
        file_id(key_file, &s->key_id);
        rc = load(cert_file, key_file, &s->current, diag);
        if (rc) {
                tsr_tls_store_free(s);
                return rc;
        }
        s->generations = 1;
        s->checked = time(NULL);
        *out = s;
        return 0;
}

void tsr_tls_store_free(struct tsr_tls_store *s)
{
        if (!s)
                return;
        pthread_mutex_lock(&installed_lock);
        if (installed == s)
                installed = NULL;
        pthread_mutex_unlock(&installed_lock);
        generation_free(s->current);
        free(s->cert_file);
        free(s->key_file);
        pthread_mutex_destroy(&s->lock);
        free(s);
}

/* With s->lock held. */
static int reload_locked(struct tsr_tls_store *s, struct tsr_diag *diag)
{
        struct file_id cert_id, key_id;
        struct generation *g;
        int rc;

        s->checked = time(NULL);
        if (file_id(s->cert_file, &cert_id) || file_id(s->key_file, &key_id))
                return tsr_diag_set(diag, TSR_EIO, "cannot stat %s or %s", s->cert_file,
                                    s->key_file);
        if (same_id(&cert_id, &s->cert_id) && same_id(&key_id, &s->key_id))
                return 0;
        /* A pair already refused is not read (and reported) again until a file changes. */
        if (s->refused && same_id(&cert_id, &s->refused_cert_id) &&
            same_id(&key_id, &s->refused_key_id))
                return 0;
        rc = load(s->cert_file, s->key_file, &g, diag);
        if (rc) {
                s->refused = true;
                s->refused_cert_id = cert_id;
                s->refused_key_id = key_id;
                return rc;
        }
        s->refused = false;
        g->older = s->current;
        s->current = g;
        s->generations++;
        s->cert_id = cert_id;
        s->key_id = key_id;
        return 1;
}

int tsr_tls_store_reload(struct tsr_tls_store *s, struct tsr_diag *diag)
{
        int rc;

        pthread_mutex_lock(&s->lock);
        rc = reload_locked(s, diag);
        pthread_mutex_unlock(&s->lock);
        return rc;
}

unsigned tsr_tls_store_generation(struct tsr_tls_store *s)
{
        unsigned n;

        pthread_mutex_lock(&s->lock);
        n = s->generations;
        pthread_mutex_unlock(&s->lock);
        return n;
}

int tsr_tls_store_install(struct tsr_tls_store *s)
{
        int rc = 0;

        pthread_mutex_lock(&installed_lock);
        if (installed && installed != s)
                rc = TSR_EINUSE;
        else
                installed = s;
        pthread_mutex_unlock(&installed_lock);
        return rc;
}

int tsr_tls_store_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_rdn, int nreqs,
                           const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                           gnutls_pcert_st **pcert, unsigned int *pcert_length,
                           gnutls_privkey_t *privkey)
{
        struct tsr_tls_store *s;
        struct tsr_diag diag;
        int rc;

        (void)session;
        (void)req_ca_rdn;
        (void)nreqs;
        (void)pk_algos;
        (void)pk_algos_length;
        /* Held throughout: tsr_tls_store_free cannot free s while a handshake reads it. */
        pthread_mutex_lock(&installed_lock);
        s = installed;
        if (!s) {
                pthread_mutex_unlock(&installed_lock);
                return -1;
        }
        pthread_mutex_lock(&s->lock);
        if (time(NULL) != s->checked) {
                tsr_diag_clear(&diag);
                rc = reload_locked(s, &diag);
                if (rc < 0) {
                        tsr_log(TSR_LOG_WARN,
                                "certificate reload refused, serving the previous one", "error",
                                diag.msg, NULL);
                } else if (rc > 0) {
                        char gen[16];

                        snprintf(gen, sizeof(gen), "%u", s->generations);
                        tsr_log(TSR_LOG_INFO, "certificate reloaded", "generation", gen, NULL);
                }
        }
        *pcert = s->current->chain;
        *pcert_length = s->current->n;
        *privkey = s->current->key;
        pthread_mutex_unlock(&s->lock);
        pthread_mutex_unlock(&installed_lock);
        return 0;
}
