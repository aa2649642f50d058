/*
 * grpc_peer.c - tessera's gRPC stack as a peer for tests/integration/grpc_interop.py, which runs
 * it against python3-grpcio:
 *
 *   grpc_peer serve SOCKET N      a toy DevicePlugin: GetDevicePluginOptions, Allocate (echoes
 *                                 the device IDs as env DEVICES), ListAndWatch (the full list
 *                                 at once, then N-1 growing lists pushed from another thread
 *                                 every 20 ms). Prints "ready", one "closed WHY" line per ended
 *                                 stream, and "stopped" after stdin closes and the server stops.
 *   grpc_peer register SOCKET     calls Registration/Register; prints "status CODE MESSAGE".
 *   grpc_peer status SOCKET       calls DevicePlugin/GetDevicePluginOptions and prints its
 *                                 "status CODE MESSAGE" (the python side fails it on purpose).
 *   grpc_peer watch SOCKET N      reads N ListAndWatch messages, printing "devices ID,ID,...",
 *                                 then cancels; prints "status CODE" if the stream ends first.
 */
#include "base/diag.h"
#include "deviceplugin/v1beta1/api.pb-c.h"
#include "grpc/unix_client.h"
#include "grpc/unix_server.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct peer {
        pthread_mutex_t mu;
        pthread_t pusher;
        bool pushing;
        int updates;
};

static int device_list(struct tsr_buf *out, int n)
{
        V1beta1__ListAndWatchResponse resp;
        V1beta1__Device devs[16], *ptrs[16];
        char ids[16][16];

        v1beta1__list_and_watch_response__init(&resp);
        for (int i = 0; i < n && i < 16; i++) {
                v1beta1__device__init(&devs[i]);
                snprintf(ids[i], sizeof(ids[i]), "dev-%d", i);
                devs[i].id = ids[i];
                devs[i].health = (char *)(uintptr_t) "Healthy";
                ptrs[i] = &devs[i];
        }
        resp.n_devices = (size_t)(n < 16 ? n : 16);
        resp.devices = ptrs;
        if (out->cap)
                tsr_buf_reset(out);
        if (tsr_buf_pad(out, 0, v1beta1__list_and_watch_response__get_packed_size(&resp)))
                return -1;
        v1beta1__list_and_watch_response__pack(&resp, (uint8_t *)out->ptr);
        return 0;
}

static int options(void *user, const uint8_t *req, size_t len, struct tsr_buf *resp,
                   struct tsr_grpc_status *st)
{
        V1beta1__DevicePluginOptions o;

        (void)user, (void)req, (void)len, (void)st;
        v1beta1__device_plugin_options__init(&o);
        o.get_preferred_allocation_available = 1;
        if (tsr_buf_pad(resp, 0, v1beta1__device_plugin_options__get_packed_size(&o)))
                return -1;
        v1beta1__device_plugin_options__pack(&o, (uint8_t *)resp->ptr);
        return 0;
}

static int allocate(void *user, const uint8_t *req, size_t len, struct tsr_buf *resp,
                    struct tsr_grpc_status *st)
{
        V1beta1__AllocateRequest *r = v1beta1__allocate_request__unpack(NULL, len, req);
        V1beta1__AllocateResponse out;
        V1beta1__ContainerAllocateResponse car, *carp = &car;
        V1beta1__ContainerAllocateResponse__EnvsEntry env, *envp = &env;
        struct tsr_buf ids = TSR_BUF_INIT;

        (void)user;
        if (!r || r->n_container_requests != 1) {
                tsr_grpc_status_set(st, TSR_GRPC_INVALID_ARGUMENT, "want one container request");
                if (r)
                        v1beta1__allocate_request__free_unpacked(r, NULL);
                return 0;
        }
        for (size_t i = 0; i < r->container_requests[0]->n_devices_ids; i++)
                tsr_buf_addf(&ids, "%s%s", i ? "," : "", r->container_requests[0]->devices_ids[i]);
        v1beta1__allocate_response__init(&out);
        v1beta1__container_allocate_response__init(&car);
        v1beta1__container_allocate_response__envs_entry__init(&env);
        env.key = (char *)(uintptr_t) "DEVICES";
        env.value = ids.ptr;
        car.n_envs = 1;
        car.envs = &envp;
        out.n_container_responses = 1;
        out.container_responses = &carp;
        if (!tsr_buf_pad(resp, 0, v1beta1__allocate_response__get_packed_size(&out)))
                v1beta1__allocate_response__pack(&out, (uint8_t *)resp->ptr);
        tsr_buf_release(&ids);
        v1beta1__allocate_request__free_unpacked(r, NULL);
        return 0;
}

struct push_job {
        struct tsr_grpc_stream *stream;
        int updates;
};

static void *push_main(void *arg)
{
        struct push_job *job = arg;
        struct tsr_buf b = TSR_BUF_INIT;
        struct timespec ts = {0, 20 * 1000 * 1000};

        for (int i = 2; i <= job->updates; i++) {
                nanosleep(&ts, NULL);
                if (device_list(&b, i) ||
                    tsr_grpc_stream_push(job->stream, (uint8_t *)b.ptr, b.len))
                        break;
        }
        tsr_grpc_stream_unref(job->stream);
        tsr_buf_release(&b);
        free(job);
        return NULL;
}

static int list_and_watch(void *user, struct tsr_grpc_stream *stream, const uint8_t *req,
                          size_t len, struct tsr_grpc_status *st)
{
        struct peer *p = user;
        struct tsr_buf b = TSR_BUF_INIT;
        struct push_job *job;
        int rc;

        (void)req, (void)len, (void)st;
        rc = device_list(&b, 1) ? -1 : tsr_grpc_stream_push(stream, (uint8_t *)b.ptr, b.len);
        tsr_buf_release(&b);
        if (rc)
                return rc;
        pthread_mutex_lock(&p->mu);
        if (p->pushing) {
                pthread_mutex_unlock(&p->mu);
                return 0; /* one pusher at a time: later watchers get the first list only */
        }
        job = malloc(sizeof(*job));
        if (!job) {
                pthread_mutex_unlock(&p->mu);
                return -1;
        }
        job->stream = stream;
        job->updates = p->updates;
        tsr_grpc_stream_ref(stream);
        p->pushing = pthread_create(&p->pusher, NULL, push_main, job) == 0;
        if (!p->pushing) {
                tsr_grpc_stream_unref(stream);
                free(job);
        }
        pthread_mutex_unlock(&p->mu);
        return 0;
}

static void closed(void *user, struct tsr_grpc_stream *stream, enum tsr_grpc_stream_end why)
{
        static const char *const names[] = {"finished", "cancelled", "shutdown", "conn_lost"};

        (void)user, (void)stream;
        printf("closed %s\n", names[why]);
        fflush(stdout);
}

static int serve(const char *sock, int updates)
{
        static const struct tsr_grpc_method methods[] = {
            {"/v1beta1.DevicePlugin/GetDevicePluginOptions", options, NULL},
            {"/v1beta1.DevicePlugin/Allocate", allocate, NULL},
            {"/v1beta1.DevicePlugin/ListAndWatch", NULL, list_and_watch},
        };
        static const struct tsr_grpc_service_table table = {methods, 3, closed, 0};
        struct peer p = {PTHREAD_MUTEX_INITIALIZER, 0, false, updates};
        struct tsr_grpc_unix_server *s;
        struct tsr_diag diag;
        char line[64];

        if (tsr_grpc_unix_server_start(sock, &table, &p, &s, &diag)) {
                fprintf(stderr, "grpc_peer: %s\n", diag.msg);
                return 1;
        }
        printf("ready\n");
        fflush(stdout);
        while (fgets(line, sizeof(line), stdin))
                ;
        tsr_grpc_unix_server_stop(s);
        if (p.pushing)
                pthread_join(p.pusher, NULL);
        printf("stopped\n");
        return 0;
}

static int do_status(const char *sock)
{
        struct tsr_grpc_status st;
        struct tsr_buf resp = TSR_BUF_INIT;

        if (tsr_grpc_unix_call(sock, "/v1beta1.DevicePlugin/GetDevicePluginOptions", NULL, 0, 5000,
                               &resp, &st))
                return 1;
        printf("status %d %s\n", st.code, st.msg);
        tsr_buf_release(&resp);
        return 0;
}

static int do_register(const char *sock)
{
        V1beta1__RegisterRequest r;
        V1beta1__DevicePluginOptions o;
        struct tsr_grpc_status st;
        struct tsr_buf req = TSR_BUF_INIT, resp = TSR_BUF_INIT;

        v1beta1__register_request__init(&r);
        v1beta1__device_plugin_options__init(&o);
        o.get_preferred_allocation_available = 1;
        r.version = (char *)(uintptr_t) "v1beta1";
        r.endpoint = (char *)(uintptr_t) "tessera-gpu.sock";
        r.resource_name = (char *)(uintptr_t) "tessera.io/gpu";
        r.options = &o;
        if (tsr_buf_pad(&req, 0, v1beta1__register_request__get_packed_size(&r)))
                return 1;
        v1beta1__register_request__pack(&r, (uint8_t *)req.ptr);
        if (tsr_grpc_unix_call(sock, "/v1beta1.Registration/Register", (uint8_t *)req.ptr, req.len,
                               5000, &resp, &st))
                return 1;
        printf("status %d %s\n", st.code, st.msg);
        tsr_buf_release(&req);
        tsr_buf_release(&resp);
        return 0;
}

static int watch(const char *sock, int n)
{
        struct tsr_grpc_unix_stream *s;
        struct tsr_grpc_status st;
        struct tsr_buf msg = TSR_BUF_INIT;

        if (tsr_grpc_unix_stream_open(sock, "/v1beta1.DevicePlugin/ListAndWatch", NULL, 0, &s,
                                      &st)) {
                printf("status %d %s\n", st.code, st.msg);
                return 0;
        }
        for (int i = 0; i < n; i++) {
                int rc = tsr_grpc_unix_stream_next(s, 5000, &msg, &st);
                V1beta1__ListAndWatchResponse *r;

                if (rc == TSR_GRPC_UNIX_END) {
                        printf("status %d %s\n", st.code, st.msg);
                        break;
                }
                if (rc != TSR_GRPC_UNIX_MESSAGE) {
                        printf("next failed %d\n", rc);
                        break;
                }
                r = v1beta1__list_and_watch_response__unpack(NULL, msg.len, (uint8_t *)msg.ptr);
                if (!r) {
                        printf("undecodable\n");
                        break;
                }
                printf("devices ");
                for (size_t j = 0; j < r->n_devices; j++)
                        printf("%s%s", j ? "," : "", r->devices[j]->id);
                printf("\n");
                v1beta1__list_and_watch_response__free_unpacked(r, NULL);
        }
        tsr_grpc_unix_stream_close(s);
        tsr_buf_release(&msg);
        return 0;
}

int main(int argc, char **argv)
{
        if (argc == 4 && !strcmp(argv[1], "serve"))
                return serve(argv[2], atoi(argv[3]));
        if (argc == 3 && !strcmp(argv[1], "register"))
                return do_register(argv[2]);
        if (argc == 3 && !strcmp(argv[1], "status"))
                return do_status(argv[2]);
        if (argc == 4 && !strcmp(argv[1], "watch"))
                return watch(argv[2], atoi(argv[3]));
        fprintf(stderr,
                "usage: grpc_peer serve SOCKET N | register|status SOCKET | watch SOCKET N\n");
        return 2;
}
