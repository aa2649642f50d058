/*
 * test_dm_kubelet_link.c - devicemanager/kubelet_link.h against a fake kubelet written here on
 * tessera's own unix-socket gRPC (grpc/unix_server.h, grpc/unix_client.h), with five fake plugins
 * (this file defines tsr_dm_plugin_table / _resource / _end_streams: each plugin answers
 * GetDevicePluginOptions only).
 *
 * The fake kubelet is the kubelet's device-manager side where it touches the directory:
 * Registration on <dir>/kubelet.sock, whose Register dials the plugin's socket back (retrying a
 * socket that is not there, as grpc-go's blocking dial does, for DIAL_MS: the kubelet's 10 s,
 * shortened) and calls GetDevicePluginOptions before it answers; a restart stops that server,
 * optionally leaves the old kubelet.sock behind (a kubelet killed: the file stays, nobody
 * listens), runs CleanupPluginDirectory (the names read at once, then every unix socket among
 * them unlinked one after the other, the checkpoint kept) and only then listens on a new
 * kubelet.sock, as server.go Start does.
 *
 * tsr_grpc_unix_server_start is wrapped (-Wl,--wrap): when a test arms it, every socket the link
 * serves while the cleanup runs hands the cleanup one step (the next name deleted, and after the
 * last the new kubelet listening) before the link goes on: the interleaving in which grpc-go's
 * fake kubelet caught the link (the cleanup deleting sockets the link had just served again, the
 * new kubelet.sock up before the link registered them). A step the link does not hand within
 * STEP_MS is taken by the cleanup itself, so a link that waits for the new kubelet.sock sees a
 * cleanup that is merely slow.
 *
 *   register_all        the kubelet up first: all five register, no failure
 *   restart_fast        a restart (cleanup at once): one restart of the servers, all register
 *                       again, no Register fails
 *   restart_slow        the old kubelet.sock left behind, the cleanup 100 ms per socket (ours
 *                       first, kubelet.sock last): one restart of the servers (not one per
 *                       deletion), no Register against the dead kubelet.sock, all register again
 *   restart_interleaved the cleanup stepped by the link's own serving (above): no Register
 *                       fails, all register again promptly, one restart
 *   deleted_on_reserve  after the new kubelet is up, a socket the link has just served again is
 *                       deleted before the link registers it: the link notices (same inode
 *                       check) and serves it again, no Register fails
 *   deleted_alone       one socket deleted while the kubelet runs on: after the wait for a new
 *                       kubelet.sock runs out the link serves and registers everything again
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/timespec.h"
#include "deviceplugin/v1beta1/api.pb-c.h"
#include "devicemanager/kubelet_link.h"
#include "devicemanager/plugin.h"
#include "grpc/unix_client.h"
#include "grpc/unix_server.h"
#include "support/clock.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define NPLUG   5
#define DIAL_MS 2000 /* the kubelet's dial-back deadline (10 s there) */
#define STEP_MS 300  /* the cleanup's pace when the link hands it no step */

static const char *const RESOURCES[NPLUG] = {"nvidia.com/gpu", "nvidia.com/gpu.shared",
                                             "nvidia.com/gpu.sliced", "nvidia.com/gpu.partitioned",
                                             "device.gpustack.ai/nvidia.visibility"};

/* ---- the fake plugins ------------------------------------------------------------------------ */

struct tsr_dm_plugin {
        const char *resource;
        struct tsr_grpc_method method;
        struct tsr_grpc_service_table table;
        atomic_int ended;
};

static int options(void *user, const uint8_t *req, size_t len, struct tsr_buf *resp,
                   struct tsr_grpc_status *st)
{
        (void)user;
        (void)req;
        (void)len;
        (void)resp; /* an empty DevicePluginOptions */
        (void)st;
        return 0;
}

const struct tsr_grpc_service_table *tsr_dm_plugin_table(const struct tsr_dm_plugin *p)
{
        return &p->table;
}

const char *tsr_dm_plugin_resource(const struct tsr_dm_plugin *p)
{
        return p->resource;
}

void tsr_dm_plugin_end_streams(struct tsr_dm_plugin *p)
{
        p->ended++;
}

/* ---- the fake kubelet ------------------------------------------------------------------------ */

static struct {
        char dir[128];
        char sock[200];
        struct tsr_grpc_unix_server *srv;
        pthread_mutex_t mu;
        pthread_cond_t cv;
        int regs[NPLUG]; /* successful Registers with the current kubelet */
        int fails;       /* failed Registers (all kubelets) */
} K = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static int plugin_index(const char *resource)
{
        for (int i = 0; i < NPLUG; i++)
                if (!strcmp(RESOURCES[i], resource))
                        return i;
        return -1;
}

/* Register: dial the endpoint back (retrying a missing socket until DIAL_MS), then
 * GetDevicePluginOptions; only then answer. */
static int do_register(void *user, const uint8_t *req, size_t len, struct tsr_buf *resp,
                       struct tsr_grpc_status *st)
{
        V1beta1__RegisterRequest *in = v1beta1__register_request__unpack(NULL, len, req);
        char path[400];
        long deadline = now_ms() + DIAL_MS;
        struct tsr_grpc_status got = {0};
        int idx;

        (void)user;
        (void)resp;
        if (!in) {
                tsr_grpc_status_set(st, TSR_GRPC_INVALID_ARGUMENT, "malformed RegisterRequest");
                return 0;
        }
        idx = plugin_index(in->resource_name);
        snprintf(path, sizeof(path), "%s/%s", K.dir, in->endpoint);
        for (;;) {
                struct tsr_buf out;

                tsr_buf_init(&out);
                memset(&got, 0, sizeof(got));
                tsr_grpc_unix_call(path, "/v1beta1.DevicePlugin/GetDevicePluginOptions", NULL, 0,
                                   1000, &out, &got);
                tsr_buf_release(&out);
                if (got.code != TSR_GRPC_UNAVAILABLE || now_ms() >= deadline)
                        break;
                sleep_ms(20);
        }
        pthread_mutex_lock(&K.mu);
        if (got.code == 0 && idx >= 0)
                K.regs[idx]++;
        else
                K.fails++;
        pthread_cond_broadcast(&K.cv);
        pthread_mutex_unlock(&K.mu);
        if (got.code)
                tsr_grpc_status_set(st, TSR_GRPC_UNKNOWN,
                                    "failed to dial device plugin: context deadline exceeded");
        v1beta1__register_request__free_unpacked(in, NULL);
        return 0;
}

static const struct tsr_grpc_method REGISTER = {"/v1beta1.Registration/Register", do_register,
                                                NULL};
static const struct tsr_grpc_service_table KUBELET_TABLE = {&REGISTER, 1, NULL, 0};

/* The new kubelet listens on kubelet.sock; its Register counts start at 0. */
static int kubelet_listen(void)
{
        struct tsr_diag d;

        tsr_diag_clear(&d);
        pthread_mutex_lock(&K.mu);
        memset(K.regs, 0, sizeof(K.regs));
        pthread_mutex_unlock(&K.mu);
        return tsr_grpc_unix_server_start(K.sock, &KUBELET_TABLE, NULL, &K.srv, &d);
}

/* The old kubelet goes: its server stops (the socket removed), or with stale, it is killed: its
 * kubelet.sock stays behind, the same file, nobody listening (kept through a hard link outside
 * the directory while the server removes it). */
static void kubelet_exit(bool stale)
{
        char keep[300];

        snprintf(keep, sizeof(keep), "%s.old-kubelet", K.dir);
        if (stale)
                assert_int_equal(link(K.sock, keep), 0);
        tsr_grpc_unix_server_stop(K.srv);
        K.srv = NULL;
        if (stale)
                assert_int_equal(rename(keep, K.sock), 0);
}

/* True when every plugin registered with the current kubelet within timeout_ms. */
/* The wall-clock instant ms from now, for pthread_cond_timedwait. */
static void abs_deadline(struct timespec *t, long ms)
{
        clock_gettime(CLOCK_REALTIME, t);
        *t = tsr_timespec_add_ms(*t, ms);
}

static bool wait_all_registered(long timeout_ms)
{
        long deadline = now_ms() + timeout_ms;
        bool all = false;

        pthread_mutex_lock(&K.mu);
        for (;;) {
                struct timespec t;

                all = true;
                for (int i = 0; i < NPLUG; i++)
                        all &= K.regs[i] > 0;
                if (all || now_ms() >= deadline)
                        break;
                abs_deadline(&t, 20);
                pthread_cond_timedwait(&K.cv, &K.mu, &t);
        }
        pthread_mutex_unlock(&K.mu);
        return all;
}

static int fails(void)
{
        int f;

        pthread_mutex_lock(&K.mu);
        f = K.fails;
        pthread_mutex_unlock(&K.mu);
        return f;
}

/* ---- CleanupPluginDirectory, stepped ------------------------------------------------------- */

static struct {
        pthread_mutex_t mu;
        pthread_cond_t cv;
        bool armed;          /* the link's serving hands steps */
        int served, handled; /* serve events seen / steps taken for them */
        bool running;
        char names[16][256];
        int n, pos, listen_rc;
        pthread_t thread;
} C = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* Deletes the next name if it is a unix socket (whatever file is there now, as the kubelet does
 * by name); after the last, the new kubelet listens. C.mu held. */
static void cleanup_step(void)
{
        char path[400];
        struct stat sb;

        snprintf(path, sizeof(path), "%s/%s", K.dir, C.names[C.pos++]);
        if (!lstat(path, &sb) && S_ISSOCK(sb.st_mode))
                unlink(path);
        if (C.pos == C.n) {
                C.listen_rc = kubelet_listen();
                C.running = false;
        }
}

static void *cleanup_main(void *arg)
{
        (void)arg;
        pthread_mutex_lock(&C.mu);
        while (C.running) {
                struct timespec t;

                abs_deadline(&t, STEP_MS);
                while (C.running && C.served == C.handled &&
                       pthread_cond_timedwait(&C.cv, &C.mu, &t) != ETIMEDOUT)
                        ;
                if (!C.running)
                        break;
                if (C.served > C.handled)
                        C.handled++; /* a step handed by the link's serving */
                cleanup_step();
                pthread_cond_broadcast(&C.cv);
        }
        pthread_mutex_unlock(&C.mu);
        return NULL;
}

static int by_name_desc(const void *a, const void *b)
{
        return -strcmp(a, b);
}

/*
 * A kubelet restart: the old kubelet exits (stale: its kubelet.sock stays), the new one reads the
 * directory's names (ordered: ours before kubelet.sock), deletes the first at once and the rest
 * one per step (stepped: handed by the link's serving; else every pace_ms), then listens.
 * pace_ms 0: all at once. Returns once the new kubelet listens.
 */
static void kubelet_restart(bool stale, bool stepped, long pace_ms)
{
        DIR *d;
        struct dirent *de;

        kubelet_exit(stale);
        pthread_mutex_lock(&C.mu);
        C.n = C.pos = 0;
        C.served = C.handled = 0;
        assert_non_null(d = opendir(K.dir));
        while ((de = readdir(d)) && C.n < 16)
                if (de->d_name[0] != '.' && strcmp(de->d_name, "kubelet_internal_checkpoint"))
                        snprintf(C.names[C.n++], sizeof(C.names[0]), "%s", de->d_name);
        closedir(d);
        qsort(C.names, C.n, sizeof(C.names[0]), by_name_desc);
        assert_true(C.n > 1);
        C.running = true;
        C.armed = stepped;
        if (!stepped) {
                while (C.running) {
                        cleanup_step();
                        if (C.running && pace_ms) {
                                pthread_mutex_unlock(&C.mu);
                                sleep_ms(pace_ms);
                                pthread_mutex_lock(&C.mu);
                        }
                }
                pthread_mutex_unlock(&C.mu);
                assert_int_equal(C.listen_rc, 0);
                return;
        }
        cleanup_step(); /* the first deletion, at once */
        assert_int_equal(pthread_create(&C.thread, NULL, cleanup_main, NULL), 0);
        pthread_mutex_unlock(&C.mu);
        pthread_join(C.thread, NULL);
        pthread_mutex_lock(&C.mu);
        C.armed = false;
        pthread_mutex_unlock(&C.mu);
        assert_int_equal(C.listen_rc, 0);
}

/* A deletion armed for deleted_on_reserve (under C.mu): when the link serves plugin `when`,
 * plugin `victim`'s socket is unlinked (once). */
static struct {
        int when, victim;
        bool armed, fired;
} D = {-1, -1, false, false};

static char plugin_sock[NPLUG][400];

int __real_tsr_grpc_unix_server_start(const char *path, const struct tsr_grpc_service_table *table,
                                      void *user, struct tsr_grpc_unix_server **out,
                                      struct tsr_diag *diag);

int __wrap_tsr_grpc_unix_server_start(const char *path, const struct tsr_grpc_service_table *table,
                                      void *user, struct tsr_grpc_unix_server **out,
                                      struct tsr_diag *diag);

int __wrap_tsr_grpc_unix_server_start(const char *path, const struct tsr_grpc_service_table *table,
                                      void *user, struct tsr_grpc_unix_server **out,
                                      struct tsr_diag *diag)
{
        int rc = __real_tsr_grpc_unix_server_start(path, table, user, out, diag);

        if (rc || table == &KUBELET_TABLE)
                return rc;
        pthread_mutex_lock(&C.mu);
        if (C.armed && C.running) {
                struct timespec t;
                int want = ++C.served;

                pthread_cond_broadcast(&C.cv);
                abs_deadline(&t, 2000);
                while (C.running && C.handled < want &&
                       pthread_cond_timedwait(&C.cv, &C.mu, &t) != ETIMEDOUT)
                        ;
        }
        if (D.armed && !D.fired && !strcmp(path, plugin_sock[D.when])) {
                D.fired = true;
                unlink(plugin_sock[D.victim]);
        }
        pthread_mutex_unlock(&C.mu);
        return rc;
}

/* ---- the link under test --------------------------------------------------------------------- */

static struct tsr_dm_plugin plugins[NPLUG];
static struct tsr_dm_plugin *plugin_ptrs[NPLUG];
static char log_text[1 << 16];
static size_t log_len;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static void log_line(void *ctx, const char *level, const char *msg)
{
        (void)ctx;
        pthread_mutex_lock(&log_mu);
        if (log_len < sizeof(log_text) - 600)
                log_len += (size_t)snprintf(log_text + log_len, sizeof(log_text) - log_len,
                                            "# %ld %s: %s\n", now_ms() % 100000, level, msg);
        pthread_mutex_unlock(&log_mu);
}

static void print_log_on_failure(bool ok)
{
        if (!ok) {
                pthread_mutex_lock(&log_mu);
                fputs(log_text, stderr);
                pthread_mutex_unlock(&log_mu);
        }
}

static struct tsr_dm_link *cur_link; /* stopped by teardown when a test failed first */

static struct tsr_dm_link *link_up(void)
{
        struct tsr_dm_link_opts o = {K.dir, "tessera", log_line, NULL};
        struct tsr_diag d;

        tsr_diag_clear(&d);
        assert_int_equal(tsr_dm_link_start(plugin_ptrs, NPLUG, &o, &cur_link, &d), 0);
        return cur_link;
}

static void link_down(void)
{
        tsr_dm_link_stop(cur_link);
        cur_link = NULL;
}

static int setup(void **state)
{
        (void)state;
        snprintf(K.dir, sizeof(K.dir), "/tmp/tsr-link-XXXXXX");
        assert_non_null(mkdtemp(K.dir));
        snprintf(K.sock, sizeof(K.sock), "%s/kubelet.sock", K.dir);
        K.fails = 0;
        log_len = 0;
        log_text[0] = 0;
        D.armed = D.fired = false;
        for (int i = 0; i < NPLUG; i++) {
                struct tsr_dm_plugin *p = &plugins[i];
                char name[256], *c;

                p->resource = RESOURCES[i];
                p->method = (struct tsr_grpc_method){"/v1beta1.DevicePlugin/GetDevicePluginOptions",
                                                     options, NULL};
                p->table = (struct tsr_grpc_service_table){&p->method, 1, NULL, 0};
                p->ended = 0;
                plugin_ptrs[i] = p;
                snprintf(name, sizeof(name), "tessera-%s.sock", RESOURCES[i]);
                for (c = name; *c; c++)
                        if (*c == '/')
                                *c = '_';
                snprintf(plugin_sock[i], sizeof(plugin_sock[i]), "%s/%s", K.dir, name);
        }
        /* a checkpoint, which the cleanup keeps */
        {
                char path[300];
                FILE *f;

                snprintf(path, sizeof(path), "%s/kubelet_internal_checkpoint", K.dir);
                assert_non_null(f = fopen(path, "w"));
                fputs("{}", f);
                fclose(f);
        }
        assert_int_equal(kubelet_listen(), 0);
        return 0;
}

static int teardown(void **state)
{
        char cmd[300];

        (void)state;
        link_down();
        tsr_grpc_unix_server_stop(K.srv);
        K.srv = NULL;
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", K.dir);
        if (system(cmd))
                fprintf(stderr, "# could not remove %s\n", K.dir);
        return 0;
}

static void stats(struct tsr_dm_link *l, struct tsr_dm_link_stats *s)
{
        tsr_dm_link_stats(l, s);
}

/* Waits for the link's own view (stats.registered) too: the fake counts a Register before the
 * link has its answer. */
static bool link_registered(struct tsr_dm_link *l, long timeout_ms)
{
        long deadline = now_ms() + timeout_ms;
        struct tsr_dm_link_stats s;

        for (;;) {
                stats(l, &s);
                if (s.registered || now_ms() >= deadline)
                        return s.registered;
                sleep_ms(10);
        }
}

static void test_register_all(void **state)
{
        struct tsr_dm_link *l = link_up();
        struct tsr_dm_link_stats s;
        bool ok;

        (void)state;
        ok = wait_all_registered(3000) && link_registered(l, 1000);
        stats(l, &s);
        print_log_on_failure(ok && fails() == 0);
        assert_true(ok);
        assert_int_equal(fails(), 0);
        assert_int_equal(s.registrations, NPLUG);
        assert_int_equal(s.failures, 0);
        assert_int_equal(s.restarts, 0);
        link_down();
        for (int i = 0; i < NPLUG; i++)
                assert_int_equal(access(plugin_sock[i], F_OK), -1); /* removed on stop */
}

/* One restart of the given kind; checks what every kind must hold. within_ms: from the new
 * kubelet listening to every plugin registered with it. */
static void restart_case(bool stale, bool stepped, long pace_ms, long within_ms, int delete_when,
                         int delete_victim)
{
        struct tsr_dm_link *l = link_up();
        struct tsr_dm_link_stats before, after;
        long t0;
        bool ok;

        assert_true(wait_all_registered(3000) && link_registered(l, 1000));
        stats(l, &before);
        if (delete_when >= 0) {
                pthread_mutex_lock(&C.mu);
                D.when = delete_when;
                D.victim = delete_victim;
                D.armed = true;
                pthread_mutex_unlock(&C.mu);
        }
        kubelet_restart(stale, stepped, pace_ms);
        t0 = now_ms();
        ok = wait_all_registered(within_ms) && link_registered(l, 1000);
        stats(l, &after);
        fprintf(stderr,
                "# registered again %ld ms after the new kubelet listened; restarts %lu, "
                "failed Registers %lu (kubelet: %d)\n",
                now_ms() - t0, after.restarts - before.restarts, after.failures - before.failures,
                fails());
        print_log_on_failure(ok && fails() == 0 && after.failures == before.failures &&
                             after.restarts == before.restarts + 1);
        assert_true(ok);
        assert_int_equal(fails(), 0);
        assert_int_equal(after.failures, before.failures);
        assert_int_equal(after.restarts, before.restarts + 1);
        for (int i = 0; i < NPLUG; i++)
                assert_true(plugins[i].ended >= 1); /* the old kubelet's streams ended */
        link_down();
}

static void test_restart_fast(void **state)
{
        (void)state;
        restart_case(false, false, 0, 3000, -1, -1);
}

static void test_restart_slow(void **state)
{
        (void)state;
        restart_case(true, false, 100, 3000, -1, -1);
}

static void test_restart_interleaved(void **state)
{
        (void)state;
        restart_case(false, true, 0, 3000, -1, -1);
}

static void test_deleted_on_reserve(void **state)
{
        (void)state;
        /* serving plugin 3 again, plugin 1 (served again already) is deleted */
        restart_case(false, false, 0, 3000, 3, 1);
        pthread_mutex_lock(&C.mu);
        assert_true(D.fired);
        pthread_mutex_unlock(&C.mu);
}

static void test_deleted_alone(void **state)
{
        struct tsr_dm_link *l = link_up();
        struct tsr_dm_link_stats before, after;
        bool ok;

        (void)state;
        assert_true(wait_all_registered(3000) && link_registered(l, 1000));
        stats(l, &before);
        pthread_mutex_lock(&K.mu);
        memset(K.regs, 0, sizeof(K.regs));
        pthread_mutex_unlock(&K.mu);
        unlink(plugin_sock[2]);
        ok = wait_all_registered(8000) && link_registered(l, 1000);
        stats(l, &after);
        print_log_on_failure(ok);
        assert_true(ok);
        assert_int_equal(fails(), 0);
        assert_int_equal(after.restarts, before.restarts + 1);
        assert_int_equal(access(plugin_sock[2], F_OK), 0);
        link_down();
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_register_all, setup, teardown),
            cmocka_unit_test_setup_teardown(test_restart_fast, setup, teardown),
            cmocka_unit_test_setup_teardown(test_restart_slow, setup, teardown),
            cmocka_unit_test_setup_teardown(test_restart_interleaved, setup, teardown),
            cmocka_unit_test_setup_teardown(test_deleted_on_reserve, setup, teardown),
            cmocka_unit_test_setup_teardown(test_deleted_alone, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
