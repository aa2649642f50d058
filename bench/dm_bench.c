/*
 * dm_bench.c - latency of `tessera device-manager`'s device plugins: Allocate per family over
 * the real gRPC unix-socket transport next to the same Allocate called in-process, and how long a
 * change of the node takes to reach an open ListAndWatch stream.
 *
 * One process wires what src/devicemanager/daemon.c wires, with the API server and the GPUs
 * replaced by memory: the fake GPU backend (8 x NVIDIA H100 80GB HBM3, GPUs 0-2 in MIG mode),
 * detection, a memory MIG marker store and its reclaimer, the agent, and one plugin per family,
 * each served by tsr_grpc_unix_server_start on its own socket in a temporary directory. The
 * node's Pods are a jansson array the bench keeps: the agent's pods callback returns a new array
 * of references to them (Pods are never edited in place: the record callback replaces the Pod
 * with a copy carrying the allocation annotation), as a watch cache would serve a snapshot.
 * The kubelet's side is a client in the same process: one ListAndWatch stream per family, each
 * read by its own thread, and Allocate calls made with tsr_grpc_unix_call (a new connection per
 * call).
 *
 *   Allocate   per family and iteration, a fresh Pending Pod asks for one token of the family; a
 *              random healthy token is chosen, and Allocate is timed twice, each time for its own
 *              Pod: through gRPC (request encoded beforehand, the call until the response bytes
 *              are in) and in-process (tsr_dm_agent_allocate alone), in alternating order. Each
 *              answer is checked (OK, and NVIDIA_VISIBLE_DEVICES: the card, the MIG device, the
 *              sidecar's view of the Pod's card). Then the Pod is deleted and the agent told; a
 *              partition's instance is reclaimed (untimed) so the MIG cards never fill.
 *              GetDevicePluginOptions, which does nothing, is timed over the same transport as
 *              the floor of a gRPC call.
 *   ListAndWatch  per update, an exclusive Allocate (in-process) takes a free card, whose ten
 *              shared tokens turn unhealthy; then its Pod is deleted and tsr_dm_agent_changed
 *              called, which makes them healthy again. Each is timed from the start of the change
 *              to the arrival, on the reader thread of the nvidia.com/gpu.shared stream, of the
 *              message that shows it.
 *
 * Output: plain text, every number measured in this run. Exit status 1 when any call failed or
 * any answer was not the expected one. Speed targets belong here, never in the unit tests.
 */
#include "bench_common.h"

#include "base/diag.h"
#include "base/err.h"
#include "codec/alloc_annotation.h"
#include "deviceplugin/v1beta1/api.pb-c.h"
#include "devicemanager/agent.h"
#include "devicemanager/plugin.h"
#include "grpc/unix_client.h"
#include "grpc/unix_server.h"
#include "mig/reclaim.h"
#include "nvml/detect.h"
#include "nvml/fake.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NODE            "bench-node"
#define FAKE_SPEC       "NVIDIA H100 80GB HBM3:8:11100000"
#define NAMESPACE       "bench"
#define CAPS_MAX        64
#define CALL_TIMEOUT_MS 5000
#define UPDATE_WAIT_MS  5000
#define METHOD(name)    "/v1beta1.DevicePlugin/" name
#define RES_EXCLUSIVE   "nvidia.com/gpu"
#define N_CASES_MAX     8
/* Half a card's units (TSR_UNITS_PER_ACCEL is 1,600,000), as a 50% memory slice folds to. */
#define SLICE_UNITS "800000"
/* 1g.10gb: 9984 of the product's 81920 MiB, in units. */
#define PARTITION_UNITS "195000"

/* ---- the node's Pods ------------------------------------------------------------------------ */

/* What the API server holds for the node. A Pod in items is never modified, only replaced. */
struct pods {
        pthread_mutex_t mu;
        json_t *items;
        unsigned long reads; /* calls of the agent's pods callback */
        unsigned next;       /* the next Pod's number */
};

/* A new array of references to the Pods (they are never modified: see pods_record). */
static json_t *pods_snapshot(struct pods *p)
{
        json_t *copy;

        pthread_mutex_lock(&p->mu);
        p->reads++;
        copy = json_copy(p->items);
        pthread_mutex_unlock(&p->mu);
        return copy;
}

static const char *meta(json_t *pod, const char *key)
{
        return json_string_value(json_object_get(json_object_get(pod, "metadata"), key));
}

static int pods_find(struct pods *p, const char *uid)
{
        size_t i;
        json_t *pod;

        json_array_foreach(p->items, i, pod)
        {
                const char *u = meta(pod, "uid");

                if (u && !strcmp(u, uid))
                        return (int)i;
        }
        return -1;
}

/* Sets the allocation annotation of Pod uid (ns/name checked) on a copy that replaces it. */
static int pods_record(struct pods *p, const char *ns, const char *name, const char *uid,
                       const char *json, struct tsr_diag *diag)
{
        json_t *copy = NULL, *md, *ann;
        int i, rc = 0;

        pthread_mutex_lock(&p->mu);
        i = pods_find(p, uid);
        if (i < 0 || strcmp(meta(json_array_get(p->items, (size_t)i), "namespace"), ns) ||
            strcmp(meta(json_array_get(p->items, (size_t)i), "name"), name)) {
                rc = tsr_diag_set(diag, TSR_ENOTFOUND, "pods \"%s\" not found", name);
                goto out;
        }
        copy = json_deep_copy(json_array_get(p->items, (size_t)i));
        md = json_object_get(copy, "metadata");
        ann = json_object_get(md, "annotations");
        if (!ann && md) {
                ann = json_object();
                json_object_set_new(md, "annotations", ann);
        }
        if (!ann || json_object_set_new(ann, TSR_ALLOC_ANNOTATION, json_string(json))) {
                json_decref(copy);
                rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        } else if (json_array_set_new(p->items, (size_t)i, copy)) { /* copy is released */
                rc = tsr_diag_set(diag, TSR_ENOMEM, "out of memory");
        }
out:
        pthread_mutex_unlock(&p->mu);
        return rc;
}

/* One container: its name and its limits as key, value pairs (NULL-ended). */
struct ctr {
        const char *name;
        const char *limits[8];
};

/*
 * A new Pod "<prefix>-<seq>" (uid the same) bound to the node, in phase, with containers
 * c[0..n), as the API server returns it after the webhook's fold. NULL when out of memory.
 */
static json_t *pod_new(const char *prefix, unsigned seq, const char *phase, const struct ctr *c,
                       size_t n)
{
        char name[64];
        json_t *ctrs = json_array(), *pod;

        snprintf(name, sizeof(name), "%s-%06u", prefix, seq);
        for (size_t i = 0; ctrs && i < n; i++) {
                json_t *limits = json_object();

                for (size_t k = 0; limits && c[i].limits[k]; k += 2)
                        json_object_set_new(limits, c[i].limits[k],
                                            json_string(c[i].limits[k + 1]));
                if (!limits || json_array_append_new(
                                   ctrs, json_pack("{s:s, s:s, s:{s:o}}", "name", c[i].name,
                                                   "image", "x", "resources", "limits", limits)))
                        goto fail;
        }
        pod = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s}, s:{s:s, s:o}, s:{s:s}}", "apiVersion",
                        "v1", "kind", "Pod", "metadata", "name", name, "namespace", NAMESPACE,
                        "uid", name, "creationTimestamp", "2026-01-01T00:00:00Z", "spec",
                        "nodeName", NODE, "containers", ctrs, "status", "phase", phase);
        return pod;
fail:
        json_decref(ctrs);
        return NULL;
}

/* Adds pod (takes ownership). 0 or -1. */
static int pods_add(struct pods *p, json_t *pod)
{
        int rc;

        if (!pod)
                return -1;
        pthread_mutex_lock(&p->mu);
        rc = json_array_append_new(p->items, pod);
        pthread_mutex_unlock(&p->mu);
        return rc ? -1 : 0;
}

static void pods_remove(struct pods *p, const char *uid)
{
        int i;

        pthread_mutex_lock(&p->mu);
        i = pods_find(p, uid);
        if (i >= 0)
                json_array_remove(p->items, (size_t)i);
        pthread_mutex_unlock(&p->mu);
}

/* ---- the kubelet's ListAndWatch streams ---------------------------------------------------- */

/* One stream and the thread reading it; the fields under mu describe the last message. */
struct watch {
        struct tsr_grpc_unix_stream *s;
        pthread_t thread;
        bool started;
        pthread_mutex_t mu;
        pthread_cond_t cond; /* CLOCK_MONOTONIC */
        unsigned long seq;   /* messages received */
        uint64_t digest;     /* FNV-1a over every message's bytes, in order */
        int64_t at_ns;       /* when the last one was read off the stream */
        size_t n_devices, n_healthy;
        bool stop, ended, bad; /* bad: a message that does not decode */
        struct tsr_grpc_status end;
};

static void *watch_main(void *arg)
{
        struct watch *w = arg;
        struct tsr_buf msg;

        tsr_buf_init(&msg);
        for (;;) {
                struct tsr_grpc_status st = {0};
                V1beta1__ListAndWatchResponse *r;
                size_t healthy = 0;
                int64_t at;
                bool stop;
                int rc;

                pthread_mutex_lock(&w->mu);
                stop = w->stop;
                pthread_mutex_unlock(&w->mu);
                if (stop)
                        break;
                rc = tsr_grpc_unix_stream_next(w->s, 50, &msg, &st);
                if (rc == TSR_GRPC_UNIX_TIMEOUT)
                        continue;
                if (rc != TSR_GRPC_UNIX_MESSAGE) {
                        pthread_mutex_lock(&w->mu);
                        w->ended = true;
                        w->end = st;
                        if (rc != TSR_GRPC_UNIX_END)
                                tsr_grpc_status_set(&w->end, TSR_GRPC_INTERNAL, "%s",
                                                    tsr_strerror(rc));
                        pthread_cond_broadcast(&w->cond);
                        pthread_mutex_unlock(&w->mu);
                        break;
                }
                at = bench_now_ns();
                pthread_mutex_lock(&w->mu);
                for (size_t i = 0; i < msg.len; i++)
                        w->digest = (w->digest ^ (uint8_t)msg.ptr[i]) * UINT64_C(1099511628211);
                pthread_mutex_unlock(&w->mu);
                r = v1beta1__list_and_watch_response__unpack(NULL, msg.len,
                                                             (const uint8_t *)msg.ptr);
                for (size_t i = 0; r && i < r->n_devices; i++)
                        healthy += !strcmp(r->devices[i]->health, "Healthy");
                pthread_mutex_lock(&w->mu);
                w->seq++;
                w->at_ns = at;
                w->n_devices = r ? r->n_devices : 0;
                w->n_healthy = healthy;
                w->bad |= !r;
                pthread_cond_broadcast(&w->cond);
                pthread_mutex_unlock(&w->mu);
                if (r)
                        v1beta1__list_and_watch_response__free_unpacked(r, NULL);
        }
        tsr_buf_release(&msg);
        return NULL;
}

/*
 * Waits for a message after the seq-th whose healthy count is healthy (SIZE_MAX: any). Returns 0
 * with its arrival time in *at, or -1 with a line on stderr after UPDATE_WAIT_MS or when the
 * stream ended.
 */
static int watch_wait(struct watch *w, unsigned long seq, size_t healthy, int64_t *at)
{
        struct timespec until;
        int rc = 0;

        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += UPDATE_WAIT_MS / 1000;
        pthread_mutex_lock(&w->mu);
        while (!(w->seq > seq && (healthy == SIZE_MAX || w->n_healthy == healthy))) {
                if (w->ended || pthread_cond_timedwait(&w->cond, &w->mu, &until) == ETIMEDOUT) {
                        rc = -1;
                        break;
                }
        }
        if (!rc)
                *at = w->at_ns;
        else if (w->ended)
                fprintf(stderr, "bench: a ListAndWatch stream ended: %s %s\n",
                        tsr_grpc_code_name(w->end.code), w->end.msg);
        else
                fprintf(stderr,
                        "bench: no ListAndWatch message within %d ms (%lu so far, the last "
                        "with %zu of %zu tokens healthy)\n",
                        UPDATE_WAIT_MS, w->seq, w->n_healthy, w->n_devices);
        pthread_mutex_unlock(&w->mu);
        return rc;
}

/* What went wrong with the stream: NULL while every message decoded and it is still open. */
static const char *watch_fault(struct watch *w)
{
        const char *why;

        pthread_mutex_lock(&w->mu);
        why = w->ended ? "ended" : w->bad ? "sent a message that does not decode" : NULL;
        pthread_mutex_unlock(&w->mu);
        return why;
}

/* The number of messages so far and the last one's healthy count. */
static unsigned long watch_seq(struct watch *w, size_t *healthy)
{
        unsigned long seq;

        pthread_mutex_lock(&w->mu);
        seq = w->seq;
        if (healthy)
                *healthy = w->n_healthy;
        pthread_mutex_unlock(&w->mu);
        return seq;
}

/*
 * Waits until no stream has read a message for QUIET_MS (at most QUIET_MAX_MS): a reader of long
 * lists can trail the pushes, and the counts printed should be every message sent.
 */
#define QUIET_MS     200
#define QUIET_MAX_MS 5000

static void watches_quiet(struct watch *const *w, size_t n)
{
        const struct timespec step = {0, 10 * 1000000L};
        unsigned long last = ~0ul;
        int64_t since = bench_now_ns(), start = since;

        for (;;) {
                unsigned long sum = 0;
                int64_t now;

                for (size_t i = 0; i < n; i++)
                        sum += watch_seq(w[i], NULL);
                now = bench_now_ns();
                if (sum != last) {
                        last = sum;
                        since = now;
                }
                if (now - since >= QUIET_MS * 1000000LL || now - start >= QUIET_MAX_MS * 1000000LL)
                        return;
                nanosleep(&step, NULL);
        }
}

/* ---- the node ------------------------------------------------------------------------------ */

struct options {
        unsigned long iterations, updates, warmup, pods, seed;
};

/* One family's plugin, its server and the kubelet's stream on it. */
struct served {
        enum tsr_family f;
        struct tsr_dm_plugin *plugin;
        struct tsr_grpc_unix_server *server;
        char socket[300];
        struct watch watch;
};

struct bench {
        struct options opt;
        struct tsr_fake_gpus *fake;
        struct tsr_mig_store *store;
        struct tsr_mig_reclaimer *reclaimer;
        struct tsr_accel_cap caps[CAPS_MAX];
        size_t n_caps;
        struct tsr_dm_agent *agent;
        struct served srv[TSR_DP_FAMILIES];
        size_t n_srv;
        struct pods pods;
        char dir[256];
        uint64_t rng;
        pthread_mutex_t log_mu; /* guards the two below */
        unsigned long warnings; /* warn or error lines the agent and the reclaimer logged */
        char last_warning[512];
        unsigned long reads[N_CASES_MAX]; /* pods callback calls of the last in-process Allocate */
};

/* The next draw in [0, n) of a 64-bit LCG (Knuth's MMIX constants), high bits. */
static unsigned draw(struct bench *b, unsigned n)
{
        b->rng = b->rng * 6364136223846793005ull + 1442695040888963407ull;
        return (unsigned)((b->rng >> 33) % n);
}

/* The agent's callbacks; their context is the bench. */
static json_t *agent_pods(void *ctx)
{
        struct bench *b = ctx;

        return pods_snapshot(&b->pods);
}

static int agent_record(void *ctx, const char *ns, const char *name, const char *uid,
                        const char *json, struct tsr_diag *diag)
{
        struct bench *b = ctx;

        return pods_record(&b->pods, ns, name, uid, json, diag);
}

static void agent_log(void *ctx, const char *level, const char *msg)
{
        struct bench *b = ctx;

        if (!strcmp(level, "info"))
                return;
        pthread_mutex_lock(&b->log_mu);
        b->warnings++;
        snprintf(b->last_warning, sizeof(b->last_warning), "%s", msg);
        pthread_mutex_unlock(&b->log_mu);
}

static void mig_log(void *ctx, enum tsr_mig_log_level level, const char *msg)
{
        agent_log(ctx, level == TSR_MIG_LOG_INFO ? "info" : "warn", msg);
}

static struct served *plugin_of(struct bench *b, enum tsr_family f)
{
        for (size_t i = 0; i < b->n_srv; i++)
                if (b->srv[i].f == f)
                        return &b->srv[i];
        return NULL;
}

/*
 * A random healthy token of family f from the agent's current list into id (TSR_TOKEN_ID_MAX
 * bytes), its accelerator in *on. 0, or -1 with a line on stderr.
 */
static int pick_token(struct bench *b, enum tsr_family f, char *id, unsigned *on)
{
        struct tsr_dp_device *list = NULL;
        size_t n = 0, healthy = 0, k;
        int rc = tsr_dm_agent_devices(b->agent, f, &list, &n);

        for (size_t i = 0; !rc && i < n; i++)
                healthy += list[i].healthy;
        if (rc || !healthy) {
                fprintf(stderr, "bench: no healthy %s token (%s)\n", tsr_family_name(f),
                        rc ? tsr_strerror(rc) : "all taken");
                free(list);
                return -1;
        }
        k = draw(b, (unsigned)healthy);
        for (size_t i = 0; i < n; i++) {
                if (!list[i].healthy || k--)
                        continue;
                snprintf(id, TSR_TOKEN_ID_MAX, "%s", list[i].id);
                *on = list[i].accel;
                break;
        }
        free(list);
        return 0;
}

/* A free card: one whose exclusive token is healthy, drawn at random. */
static int pick_free_card(struct bench *b, char *id, unsigned *card)
{
        return pick_token(b, TSR_FAMILY_EXCLUSIVE, id, card);
}

/* ---- Allocate, both ways --------------------------------------------------------------------- */

/* What one Allocate answered: its status and NVIDIA_VISIBLE_DEVICES. */
struct outcome {
        int code;
        char message[TSR_GRPC_STATUS_MSG_MAX];
        char visible[TSR_DP_VISIBLE_MAX];
        int64_t ns;          /* the call alone */
        unsigned long reads; /* in-process: how often the agent read the Pods during the call */
};

static void allocate_direct(struct bench *b, enum tsr_family f, const char *id, struct outcome *out)
{
        struct tsr_dm_answer *a = malloc(sizeof(*a));
        const char *ids[1] = {id};
        int64_t t0;

        memset(out, 0, sizeof(*out));
        if (!a) {
                out->code = TSR_GRPC_RESOURCE_EXHAUSTED;
                snprintf(out->message, sizeof(out->message), "out of memory");
                return;
        }
        pthread_mutex_lock(&b->pods.mu);
        out->reads = b->pods.reads;
        pthread_mutex_unlock(&b->pods.mu);
        t0 = bench_now_ns();
        tsr_dm_agent_allocate(b->agent, f, ids, 1, a);
        out->ns = bench_now_ns() - t0;
        pthread_mutex_lock(&b->pods.mu);
        out->reads = b->pods.reads - out->reads;
        pthread_mutex_unlock(&b->pods.mu);
        out->code = (int)a->code;
        snprintf(out->message, sizeof(out->message), "%s", a->message);
        snprintf(out->visible, sizeof(out->visible), "%s", a->visible);
        free(a);
}

/* The AllocateRequest of one container for the one token id, encoded into out. 0 or -1. */
static int allocate_request(const char *id, struct tsr_buf *out)
{
        char token[TSR_TOKEN_ID_MAX], *ids[1] = {token};
        V1beta1__ContainerAllocateRequest c, *cp = &c;
        V1beta1__AllocateRequest r;
        size_t len;
        int rc;

        snprintf(token, sizeof(token), "%s", id);
        v1beta1__container_allocate_request__init(&c);
        c.n_devices_ids = 1;
        c.devices_ids = ids;
        v1beta1__allocate_request__init(&r);
        r.n_container_requests = 1;
        r.container_requests = &cp;
        len = v1beta1__allocate_request__get_packed_size(&r);
        tsr_buf_reset(out);
        rc = tsr_buf_pad(out, '\0', len);
        if (rc)
                return -1;
        v1beta1__allocate_request__pack(&r, (uint8_t *)out->ptr);
        return 0;
}

static void allocate_grpc(struct bench *b, enum tsr_family f, const char *id, struct outcome *out)
{
        struct tsr_buf req, resp;
        struct tsr_grpc_status st = {0};
        V1beta1__AllocateResponse *r = NULL;
        int64_t t0;
        int rc;

        memset(out, 0, sizeof(*out));
        tsr_buf_init(&req);
        tsr_buf_init(&resp);
        if (allocate_request(id, &req)) {
                out->code = TSR_GRPC_RESOURCE_EXHAUSTED;
                goto out;
        }
        t0 = bench_now_ns();
        rc = tsr_grpc_unix_call(plugin_of(b, f)->socket, METHOD("Allocate"),
                                (const uint8_t *)req.ptr, req.len, CALL_TIMEOUT_MS, &resp, &st);
        out->ns = bench_now_ns() - t0;
        if (rc)
                tsr_grpc_status_set(&st, TSR_GRPC_INTERNAL, "%s", tsr_strerror(rc));
        out->code = st.code;
        snprintf(out->message, sizeof(out->message), "%s", st.msg);
        if (st.code != TSR_GRPC_OK)
                goto out;
        r = v1beta1__allocate_response__unpack(NULL, resp.len, (const uint8_t *)resp.ptr);
        if (!r || r->n_container_responses != 1) {
                out->code = TSR_GRPC_INTERNAL;
                snprintf(out->message, sizeof(out->message),
                         "an AllocateResponse that does not "
                         "answer one container");
                goto out;
        }
        for (size_t i = 0; i < r->container_responses[0]->n_envs; i++)
                if (!strcmp(r->container_responses[0]->envs[i]->key, "NVIDIA_VISIBLE_DEVICES"))
                        snprintf(out->visible, sizeof(out->visible), "%s",
                                 r->container_responses[0]->envs[i]->value);
out:
        if (r)
                v1beta1__allocate_response__free_unpacked(r, NULL);
        tsr_buf_release(&req);
        tsr_buf_release(&resp);
}

/* GetDevicePluginOptions on the exclusive plugin: the cost of a gRPC call that does nothing. */
static int options_call(struct bench *b, int64_t *ns)
{
        static const uint8_t empty[1];
        struct tsr_buf resp;
        struct tsr_grpc_status st = {0};
        int64_t t0;
        int rc;

        tsr_buf_init(&resp);
        t0 = bench_now_ns();
        rc = tsr_grpc_unix_call(plugin_of(b, TSR_FAMILY_EXCLUSIVE)->socket,
                                METHOD("GetDevicePluginOptions"), empty, 0, CALL_TIMEOUT_MS, &resp,
                                &st);
        *ns = bench_now_ns() - t0;
        tsr_buf_release(&resp);
        if (rc || st.code != TSR_GRPC_OK) {
                fprintf(stderr, "bench: GetDevicePluginOptions: %s %s\n",
                        rc ? tsr_strerror(rc) : tsr_grpc_code_name(st.code), st.msg);
                return -1;
        }
        return 0;
}

/* ---- one sample per family ------------------------------------------------------------------ */

struct family_case {
        enum tsr_family f;
        const char *name;
        struct ctr ctr[2]; /* the Pod's containers; the last one is the one timed */
        size_t n_ctr;
};

static const struct family_case cases[] = {
    {TSR_FAMILY_EXCLUSIVE, "exclusive", {{"main", {RES_EXCLUSIVE, "1"}}}, 1},
    {TSR_FAMILY_SHARED, "shared", {{"main", {"nvidia.com/gpu.shared", "1"}}}, 1},
    {TSR_FAMILY_SLICED,
     "sliced",
     {{"main", {"nvidia.com/gpu.sliced", "1", "nvidia.com/gpu.sliced.units", SLICE_UNITS}}},
     1},
    {TSR_FAMILY_PARTITIONED,
     "partitioned",
     {{"main",
       {"nvidia.com/gpu.partitioned", "1", "nvidia.com/gpu.partitioned.mig-1g.10gb", "1",
        "nvidia.com/gpu.partitioned.units", PARTITION_UNITS}}},
     1},
    /* a sidecar that sees the card its Pod's main container holds */
    {TSR_FAMILY_VISIBILITY,
     "visibility",
     {{"main", {RES_EXCLUSIVE, "1"}}, {"sidecar", {"device.gpustack.ai/nvidia.visibility", "1"}}},
     2},
};

#define N_CASES (sizeof(cases) / sizeof(cases[0]))
_Static_assert(N_CASES <= N_CASES_MAX, "N_CASES_MAX is too small");

/* The series measured, by index. */
enum {
        R_GRPC = 0,                /* + case: Allocate through gRPC */
        R_DIRECT = N_CASES_MAX,    /* + case: Allocate in-process */
        R_FLOOR = 2 * N_CASES_MAX, /* GetDevicePluginOptions */
        R_REFRESH,                 /* tsr_dm_agent_changed with nothing changed */
        R_TAKE,                    /* ListAndWatch: see update() */
        R_CALL,
        R_GIVE,
        R_COUNT
};

static void refused(const char *what, const char *family, const struct outcome *o)
{
        fprintf(stderr, "bench: %s Allocate of %s: %s %s\n", what, family,
                tsr_grpc_code_name(o->code), o->message);
}

/* Runs reclaim passes until the deleted Pod's partition is destroyed. 0 or -1. */
static int reclaim_partition(struct bench *b)
{
        for (int pass = 0; pass <= TSR_MIG_RECLAIM_MAX_MISSES + 1; pass++) {
                struct tsr_mig_pass_stats st = {0};
                struct tsr_diag d;

                tsr_diag_clear(&d);
                if (tsr_dm_agent_reclaim(b->agent, b->reclaimer, &st, &d)) {
                        fprintf(stderr, "bench: reclaim pass: %s\n", d.msg);
                        return -1;
                }
                if (st.destroyed)
                        return 0;
        }
        fprintf(stderr, "bench: a deleted Pod's MIG instance was not reclaimed\n");
        return -1;
}

/*
 * One Allocate of fc's family for a fresh Pod, through gRPC or in-process; its latency into s
 * (NULL: a warm-up). The Pod is deleted afterwards. 0, or -1 with a line on stderr.
 */
static int sample(struct bench *b, const struct family_case *fc, bool grpc, struct bench_series *s)
{
        const struct tsr_dp_node *node = tsr_dm_agent_node(b->agent);
        unsigned seq = b->pods.next++, card = 0;
        json_t *pod = pod_new("bench", seq, "Pending", fc->ctr, fc->n_ctr);
        char uid[64], id[TSR_TOKEN_ID_MAX], want[TSR_DP_VISIBLE_MAX] = "";
        struct outcome o;
        int rc = -1;

        snprintf(uid, sizeof(uid), "%s", pod ? meta(pod, "uid") : "");
        if (pods_add(&b->pods, pod)) {
                fprintf(stderr, "bench: out of memory\n");
                return -1;
        }
        if (fc->f == TSR_FAMILY_VISIBILITY) {
                /* the main container's card first, untimed: what the sidecar must see */
                if (pick_free_card(b, id, &card))
                        goto out;
                allocate_direct(b, TSR_FAMILY_EXCLUSIVE, id, &o);
                if (o.code != TSR_GRPC_OK) {
                        refused("the main container's", "exclusive", &o);
                        goto out;
                }
                snprintf(want, sizeof(want), "%s", node->caps[card].uuid);
        }
        if (pick_token(b, fc->f, id, &card))
                goto out;
        if (fc->f != TSR_FAMILY_VISIBILITY && fc->f != TSR_FAMILY_PARTITIONED)
                snprintf(want, sizeof(want), "%s", node->caps[card].uuid);
        if (grpc)
                allocate_grpc(b, fc->f, id, &o);
        else
                allocate_direct(b, fc->f, id, &o);
        if (o.code != TSR_GRPC_OK) {
                refused(grpc ? "gRPC" : "in-process", fc->name, &o);
                goto out;
        }
        if (fc->f == TSR_FAMILY_PARTITIONED ? strncmp(o.visible, "MIG-", 4) != 0
                                            : strcmp(o.visible, want) != 0) {
                fprintf(stderr, "bench: %s Allocate of %s exposed \"%s\", want \"%s\"\n",
                        grpc ? "gRPC" : "in-process", fc->name, o.visible,
                        fc->f == TSR_FAMILY_PARTITIONED ? "MIG-..." : want);
                goto out;
        }
        if (!grpc)
                b->reads[fc - cases] = o.reads;
        if (s && bench_series_add(s, o.ns)) {
                fprintf(stderr, "bench: out of memory\n");
                goto out;
        }
        rc = 0;
out:
        pods_remove(&b->pods, uid);
        tsr_dm_agent_changed(b->agent);
        if (!rc && fc->f == TSR_FAMILY_PARTITIONED)
                rc = reclaim_partition(b);
        return rc;
}

/* ---- ListAndWatch updates ----------------------------------------------------------------- */

/*
 * One update each way on the shared stream: an exclusive Allocate takes a free card (its
 * TSR_SHARES_PER_ACCEL shared tokens turn unhealthy), then its Pod is deleted (they recover).
 */
static int update(struct bench *b, struct bench_series *r)
{
        static const struct ctr main_ctr = {"main", {RES_EXCLUSIVE, "1"}};
        struct watch *w = &plugin_of(b, TSR_FAMILY_SHARED)->watch;
        unsigned seq = b->pods.next++, card;
        json_t *pod = pod_new("update", seq, "Pending", &main_ctr, 1);
        char uid[64], id[TSR_TOKEN_ID_MAX];
        struct outcome o;
        unsigned long before;
        size_t healthy;
        int64_t t0, at;

        snprintf(uid, sizeof(uid), "%s", pod ? meta(pod, "uid") : "");
        if (pods_add(&b->pods, pod) || pick_free_card(b, id, &card))
                goto out;
        before = watch_seq(w, &healthy);
        t0 = bench_now_ns();
        allocate_direct(b, TSR_FAMILY_EXCLUSIVE, id, &o);
        if (o.code != TSR_GRPC_OK) {
                refused("in-process", "exclusive", &o);
                goto out;
        }
        if (watch_wait(w, before, healthy - TSR_SHARES_PER_ACCEL, &at))
                goto out;
        if (bench_series_add(&r[R_TAKE], at - t0) || bench_series_add(&r[R_CALL], o.ns))
                goto out;
        before = watch_seq(w, NULL);
        t0 = bench_now_ns();
        pods_remove(&b->pods, uid);
        tsr_dm_agent_changed(b->agent);
        if (watch_wait(w, before, healthy, &at))
                goto out;
        return bench_series_add(&r[R_GIVE], at - t0);
out:
        pods_remove(&b->pods, uid);
        tsr_dm_agent_changed(b->agent);
        return -1;
}

/* ---- set up and tear down ------------------------------------------------------------------- */

static int start_node(struct bench *b)
{
        struct tsr_dm_agent_opts ao = {0};
        struct tsr_diag d;
        const char *tmp = getenv("TMPDIR");
        int rc;

        tsr_diag_clear(&d);
        rc = tsr_fake_gpus_from_spec(NODE, FAKE_SPEC, &b->fake, &d);
        if (!rc)
                rc = tsr_nvml_detect(&tsr_fake_gpu_ops, b->fake, b->caps, CAPS_MAX, &b->n_caps,
                                     NULL, NULL, &d);
        if (rc) {
                fprintf(stderr, "bench: the fake GPUs: %s\n", d.msg);
                return -1;
        }
        ao.gpus = (struct tsr_mig_gpus){&tsr_fake_gpu_ops, b->fake};
        if (tsr_mig_store_memory_new(&b->store) ||
            tsr_mig_reclaimer_new(&ao.gpus, b->store, mig_log, b, &b->reclaimer)) {
                fprintf(stderr, "bench: out of memory\n");
                return -1;
        }
        ao.store = b->store;
        ao.sliced_gate = true;
        ao.identify_by_kubelet = false; /* no pod-resources: the node's pending Pods name it */
        ao.release_terminated = true;
        ao.pods = agent_pods;
        ao.record = agent_record;
        ao.log = agent_log;
        ao.ctx = b;
        rc = tsr_dm_agent_new(b->caps, b->n_caps, &ao, &b->agent, &d);
        if (rc) {
                fprintf(stderr, "bench: the agent: %s\n", d.msg);
                return -1;
        }
        snprintf(b->dir, sizeof(b->dir), "%s/tessera-dm-bench.XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(b->dir)) {
                fprintf(stderr, "bench: mkdtemp %s: %s\n", b->dir, strerror(errno));
                b->dir[0] = '\0';
                return -1;
        }
        for (size_t i = 0; i < TSR_DP_FAMILIES; i++) {
                struct served *sv = &b->srv[b->n_srv];

                rc = tsr_dm_plugin_new(b->agent, tsr_dp_families[i], NULL, &sv->plugin);
                if (rc == TSR_EINVAL)
                        continue;
                if (rc) {
                        fprintf(stderr, "bench: out of memory\n");
                        return -1;
                }
                sv->f = tsr_dp_families[i];
                b->n_srv++;
                snprintf(sv->socket, sizeof(sv->socket), "%s/%s.sock", b->dir,
                         tsr_family_name(sv->f));
                rc = tsr_grpc_unix_server_start(sv->socket, tsr_dm_plugin_table(sv->plugin),
                                                sv->plugin, &sv->server, &d);
                if (rc) {
                        fprintf(stderr, "bench: serving %s: %s\n", sv->socket, d.msg);
                        return -1;
                }
        }
        return 0;
}

static int open_watches(struct bench *b)
{
        static const uint8_t empty[1];

        for (size_t i = 0; i < b->n_srv; i++) {
                struct watch *w = &b->srv[i].watch;
                struct tsr_grpc_status st = {0};

                if (tsr_grpc_unix_stream_open(b->srv[i].socket, METHOD("ListAndWatch"), empty, 0,
                                              &w->s, &st)) {
                        fprintf(stderr, "bench: ListAndWatch on %s: %s\n", b->srv[i].socket,
                                st.msg);
                        return -1;
                }
                if (pthread_create(&w->thread, NULL, watch_main, w)) {
                        fprintf(stderr, "bench: cannot start a thread\n");
                        return -1;
                }
                w->started = true;
        }
        for (size_t i = 0; i < b->n_srv; i++) {
                int64_t at;

                if (watch_wait(&b->srv[i].watch, 0, SIZE_MAX, &at))
                        return -1;
        }
        return 0;
}

static void stop_node(struct bench *b)
{
        for (size_t i = 0; i < b->n_srv; i++) {
                struct watch *w = &b->srv[i].watch;

                pthread_mutex_lock(&w->mu);
                w->stop = true;
                pthread_mutex_unlock(&w->mu);
                if (w->started)
                        pthread_join(w->thread, NULL);
                tsr_grpc_unix_stream_close(w->s);
        }
        for (size_t i = 0; i < b->n_srv; i++)
                tsr_grpc_unix_server_stop(b->srv[i].server);
        for (size_t i = 0; i < b->n_srv; i++)
                tsr_dm_plugin_free(b->srv[i].plugin);
        tsr_dm_agent_free(b->agent);
        tsr_mig_reclaimer_free(b->reclaimer);
        tsr_mig_store_free(b->store);
        tsr_fake_gpus_free(b->fake);
        if (b->dir[0] && rmdir(b->dir))
                fprintf(stderr, "bench: rmdir %s: %s\n", b->dir, strerror(errno));
}

/* ---- options and output --------------------------------------------------------------------- */

/* The numeric options: name, range, default, and where the value goes. */
struct knob {
        const char *name, *help;
        unsigned long min, max, def;
        size_t off; /* in struct options */
};

static const struct knob knobs[] = {
    {"iterations", "timed Allocates per family and path", 1, 1000000, 300,
     offsetof(struct options, iterations)},
    {"updates", "ListAndWatch updates each way", 1, 1000000, 1000,
     offsetof(struct options, updates)},
    {"warmup", "untimed Allocates per family and path first", 0, 1000000, 10,
     offsetof(struct options, warmup)},
    {"pods", "other Pods on the node: Running, no accelerator", 0, 5000, 16,
     offsetof(struct options, pods)},
    {"seed", "seed of the token choices", 0, ULONG_MAX, 1, offsetof(struct options, seed)},
};

#define N_KNOBS (sizeof(knobs) / sizeof(knobs[0]))

static void usage(FILE *f)
{
        fprintf(f, "usage: bench_dm [options]\n");
        for (size_t i = 0; i < N_KNOBS; i++) {
                char flag[32];

                snprintf(flag, sizeof(flag), "--%s N", knobs[i].name);
                fprintf(f, "  %-16s %s (default %lu)\n", flag, knobs[i].help, knobs[i].def);
        }
        fprintf(f, "bench/run_dm.sh builds and runs this.\n");
}

static unsigned long *knob_at(struct options *o, const struct knob *k)
{
        return (unsigned long *)((char *)o + k->off);
}

static int parse_options(int argc, char **argv, struct options *o)
{
        struct option longs[N_KNOBS + 2] = {{0}};
        int opt;

        for (size_t i = 0; i < N_KNOBS; i++) {
                longs[i] = (struct option){knobs[i].name, required_argument, NULL, (int)i};
                *knob_at(o, &knobs[i]) = knobs[i].def;
        }
        longs[N_KNOBS] = (struct option){"help", no_argument, NULL, 'h'};
        while ((opt = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
                const struct knob *k = opt >= 0 && (size_t)opt < N_KNOBS ? &knobs[opt] : NULL;
                char *end;
                unsigned long v;

                if (opt == 'h') {
                        usage(stdout);
                        exit(0);
                }
                if (!k) {
                        usage(stderr);
                        return -1;
                }
                errno = 0;
                v = strtoul(optarg, &end, 10);
                if (errno || end == optarg || *end || *optarg == '-' || v < k->min || v > k->max) {
                        fprintf(stderr, "bench: --%s must be within %lu..%lu\n", k->name, k->min,
                                k->max);
                        return -1;
                }
                *knob_at(o, k) = v;
        }
        if (optind != argc) {
                usage(stderr);
                return -1;
        }
        return 0;
}

/* "     n      p50      p99      max" of a series, sorting it. */
static void print_series(struct bench_series *s)
{
        bench_series_sort(s);
        printf(" %7zu %8.1f %8.1f %8.1f", s->n, bench_series_pct_us(s, 0.50),
               bench_series_pct_us(s, 0.99), s->n ? (double)s->ns[s->n - 1] / 1e3 : 0.0);
}

static void print_allocate(const struct bench *b, struct bench_series *r)
{
        printf("\nAllocate latency, microseconds (one container, one token; a fresh Pod each)\n"
               "%-12s | %-33s | %-33s | gRPC/in-process | Pods\n"
               "%-12s | %7s %8s %8s %8s | %7s %8s %8s %8s | %5s %9s | reads\n",
               "", "gRPC: tsr_grpc_unix_call", "in-process: tsr_dm_agent_allocate", "family", "n",
               "p50", "p99", "max", "n", "p50", "p99", "max", "p50", "p50 +us");
        for (size_t c = 0; c < N_CASES; c++) {
                double g, d;

                printf("%-12s |", cases[c].name);
                print_series(&r[R_GRPC + c]);
                printf(" |");
                print_series(&r[R_DIRECT + c]);
                g = bench_series_pct_us(&r[R_GRPC + c], 0.50);
                d = bench_series_pct_us(&r[R_DIRECT + c], 0.50);
                printf(" | %5.2f %9.1f | %5lu\n", d > 0 ? g / d : 0.0, g - d, b->reads[c]);
        }
        printf("%-12s |", "(floor)");
        print_series(&r[R_FLOOR]);
        printf(" | GetDevicePluginOptions over the same transport: a call that does nothing\n");
        printf("%-12s | %-33s |", "(refresh)", "");
        print_series(&r[R_REFRESH]);
        printf(" | tsr_dm_agent_changed, nothing changed: what a reserving Allocate pays "
               "at its end\n");
}

static void print_updates(struct bench_series *r)
{
        printf("\nListAndWatch update latency, microseconds: from the start of the change to the "
               "message read off\nthe nvidia.com/gpu.shared stream by the client\n"
               "%-52s | %7s %8s %8s %8s\n",
               "change", "n", "p50", "p99", "max");
        printf("%-52s |", "exclusive Allocate: 10 shared tokens unhealthy");
        print_series(&r[R_TAKE]);
        printf("\n%-52s |", "  that Allocate call, start to return");
        print_series(&r[R_CALL]);
        printf("\n%-52s |", "Pod deleted, tsr_dm_agent_changed: healthy again");
        print_series(&r[R_GIVE]);
        printf("\n");
}

/* ---- main ----------------------------------------------------------------------------------- */

/* Adds the other Pods: Running, no accelerator (the node's DaemonSets and CPU workloads). */
static int add_background(struct bench *b)
{
        static const struct ctr ctr = {"agent", {"cpu", "100m", "memory", "128Mi"}};

        for (unsigned long i = 0; i < b->opt.pods; i++)
                if (pods_add(&b->pods, pod_new("system", (unsigned)i, "Running", &ctr, 1))) {
                        fprintf(stderr, "bench: out of memory\n");
                        return -1;
                }
        return 0;
}

static int run(struct bench *b)
{
        struct bench_series r[R_COUNT];
        char model[128];
        int64_t started;
        int rc = -1;

        for (size_t i = 0; i < R_COUNT; i++)
                bench_series_init(&r[i]);
        bench_cpu_model(model, sizeof(model));
        printf("machine:    %ld CPUs online (%s), 1-minute load average %.2f before the run\n",
               sysconf(_SC_NPROCESSORS_ONLN), model, bench_load_average());
        if (start_node(b) || open_watches(b) || add_background(b))
                goto out;
        printf("node:       %zu x %s (fake NVML \"%s\"), memory MIG markers, %lu other Pods\n",
               b->n_caps, tsr_fake_gpus_product(b->fake)->name, FAKE_SPEC, b->opt.pods);
        printf("served:     %zu plugins on unix sockets under %s, a ListAndWatch stream open on "
               "each;\n            first lists (healthy/tokens):",
               b->n_srv, b->dir);
        for (size_t i = 0; i < b->n_srv; i++) {
                struct watch *w = &b->srv[i].watch;

                pthread_mutex_lock(&w->mu);
                printf("%s %s %zu/%zu", i ? "," : "", tsr_family_name(b->srv[i].f), w->n_healthy,
                       w->n_devices);
                pthread_mutex_unlock(&w->mu);
        }
        printf("\n");
        for (unsigned long i = 0; i < b->opt.warmup; i++)
                for (size_t c = 0; c < N_CASES; c++)
                        if (sample(b, &cases[c], true, NULL) || sample(b, &cases[c], false, NULL))
                                goto out;
        started = bench_now_ns();
        for (unsigned long i = 0; i < b->opt.iterations; i++) {
                int64_t ns;

                for (size_t c = 0; c < N_CASES; c++) {
                        bool grpc_first = (i + c) % 2 == 0;

                        if (sample(b, &cases[c], grpc_first,
                                   &r[(grpc_first ? R_GRPC : R_DIRECT) + c]) ||
                            sample(b, &cases[c], !grpc_first,
                                   &r[(grpc_first ? R_DIRECT : R_GRPC) + c]))
                                goto out;
                }
                if (options_call(b, &ns) || bench_series_add(&r[R_FLOOR], ns))
                        goto out;
                ns = bench_now_ns();
                tsr_dm_agent_changed(b->agent);
                if (bench_series_add(&r[R_REFRESH], bench_now_ns() - ns))
                        goto out;
        }
        printf("allocate:   %lu per family and path in %.1f s, seed %lu\n", b->opt.iterations,
               (double)(bench_now_ns() - started) / 1e9, b->opt.seed);
        started = bench_now_ns();
        for (unsigned long i = 0; i < b->opt.updates; i++)
                if (update(b, r))
                        goto out;
        printf("updates:    %lu each way in %.1f s\n", b->opt.updates,
               (double)(bench_now_ns() - started) / 1e9);
        {
                struct watch *ws[TSR_DP_FAMILIES];

                for (size_t i = 0; i < b->n_srv; i++)
                        ws[i] = &b->srv[i].watch;
                watches_quiet(ws, b->n_srv);
        }
        printf("streams:    messages received (once every reader is idle):");
        for (size_t i = 0; i < b->n_srv; i++)
                printf("%s %s %lu", i ? "," : "", tsr_family_name(b->srv[i].f),
                       watch_seq(&b->srv[i].watch, NULL));
        printf("\n            their bytes (FNV-1a, in order):");
        for (size_t i = 0; i < b->n_srv; i++) {
                pthread_mutex_lock(&b->srv[i].watch.mu);
                printf("%s %s %016llx", i ? "," : "", tsr_family_name(b->srv[i].f),
                       (unsigned long long)b->srv[i].watch.digest);
                pthread_mutex_unlock(&b->srv[i].watch.mu);
        }
        printf("\n");
        for (size_t i = 0; i < b->n_srv; i++) {
                const char *why = watch_fault(&b->srv[i].watch);

                if (why) {
                        fprintf(stderr, "bench: the %s ListAndWatch stream %s\n",
                                tsr_family_name(b->srv[i].f), why);
                        goto out;
                }
        }
        print_allocate(b, r);
        print_updates(r);
        rc = 0;
out:
        pthread_mutex_lock(&b->log_mu);
        printf("\nload:       1-minute load average %.2f after the run; the agent logged %lu "
               "warning(s)%s%s\n",
               bench_load_average(), b->warnings, b->warnings ? ", the last: " : "",
               b->warnings ? b->last_warning : "");
        pthread_mutex_unlock(&b->log_mu);
        for (size_t i = 0; i < R_COUNT; i++)
                bench_series_release(&r[i]);
        return rc;
}

int main(int argc, char **argv)
{
        struct bench *b = calloc(1, sizeof(*b));
        pthread_condattr_t ca;
        int rc;

        if (!b) {
                fprintf(stderr, "bench: out of memory\n");
                return 1;
        }
        if (parse_options(argc, argv, &b->opt)) {
                free(b);
                return 2;
        }
        b->rng = b->opt.seed;
        pthread_mutex_init(&b->pods.mu, NULL);
        pthread_mutex_init(&b->log_mu, NULL);
        b->pods.items = json_array();
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        for (size_t i = 0; i < TSR_DP_FAMILIES; i++) {
                pthread_mutex_init(&b->srv[i].watch.mu, NULL);
                pthread_cond_init(&b->srv[i].watch.cond, &ca);
                b->srv[i].watch.digest = UINT64_C(14695981039346656037);
        }
        pthread_condattr_destroy(&ca);
        rc = b->pods.items ? run(b) : -1;
        stop_node(b);
        for (size_t i = 0; i < TSR_DP_FAMILIES; i++) {
                pthread_mutex_destroy(&b->srv[i].watch.mu);
                pthread_cond_destroy(&b->srv[i].watch.cond);
        }
        json_decref(b->pods.items);
        pthread_mutex_destroy(&b->pods.mu);
        pthread_mutex_destroy(&b->log_mu);
        free(b);
        return rc ? 1 : 0;
}
