/*
 * test_dm_agent.c - devicemanager/agent.h on a node of eight fake H100 80GB HBM3 (GPUs 0-2 MIG
 * on, 3-7 off; nvml/fake.h, detected by nvml/detect.h) with a memory MIG marker store. The test
 * keeps the node's Pods (jansson, behind its own mutex): the pods callback answers a deep copy,
 * record writes the allocation annotation onto the Pod (uid checked), and the kubelet answers no
 * pod-resources, so the agent names each container by the oldest pending Pod. The fake backend is
 * reached through a vtable that holds a mutex across every call (a backend object is used by one
 * thread at a time), so the checker can read the GPUs while the agent carves and reclaims.
 *   allocate    an exclusive pair granted, recorded on the Pod, the subscriber told; a share on a
 *               card held exclusively (FailedPrecondition naming the mode; nothing reserved); a
 *               token of another node or of an unknown GPU (InvalidArgument); a partition carved
 *               on a MIG GPU, only its MIG device answered, its instance destroyed by the reclaim
 *               pass that ends the debounce after the Pod is deleted; no pending container
 *               (Running, already annotated, another count: FailedPrecondition);
 *   preferred   a slice steered to the card that fits its units (GPU 100,000 units short: the
 *               idle one), and the smallest waiting slice's units when pod-resources lists nobody;
 *   visibility  without pod-resources a sidecar is its own Pod's: served once, and only once its
 *               Pod's accelerator containers are (never the oldest pending Pod's);
 *   sidecar     a Pod whose main holds a 3g.40gb partition: its sshd is shown exactly that MIG
 *               UUID (not the GPU's); refused FailedPrecondition naming the case, shown nothing
 *               and not reserved (named again), when between main's Allocate and sshd's the
 *               marker is removed (served once it is back), names another GPU (of the node, or
 *               of another node), the driver no longer offers the profile, the GPU left MIG
 *               mode, the instance vanished, or it was recreated (same GI id, new MIG UUID);
 *   annotations one naming a GPU past the node's, two overlapping partitions, one that does not
 *               decode: left out of the ledger and logged once with the UID and the reason; the
 *               GPUs they name refused (naming the Pod), Unhealthy and skipped by the MIG carve;
 *               the rest of the node allocates; the Pod deleted, its GPU serves again; a
 *               restart's retried partition reuses its own instance on a held-back GPU;
 *   streams     the shared, sliced and visibility plugins served on unix sockets, a ListAndWatch
 *               stream open on each: an exclusive Allocate reads the Pods once and turns its
 *               card's shares and slices Unhealthy on the streams; the visibility list is never
 *               resent; a change that moves nothing sends nothing; the Pod deleted (one read for
 *               every plugin) heals them; a Pod deleted without a change notice shows after
 *               tsr_dm_plugin_refresh; an annotation that does not decode holds its card back
 *               (Unhealthy) and heals once removed; a new stream starts with the current list;
 *               after every step the device view equals tsr_dm_agent_devices' fresh lists;
 *               GetPreferredAllocation reads the Pods once;
 *   isolation   Allocate over gRPC through plugins with slice isolation: a slice (30 % of the
 *               units, cores-percentage 30) gets the interposer and /etc/ld.so.preload mounted
 *               read-only from the host directory, CUDA_DEVICE_MEMORY_LIMIT 24576m,
 *               CUDA_DEVICE_SM_LIMIT 30 and a budget file named by its Pod and container; env
 *               mode: LD_PRELOAD and the library only; off: nothing; a whole card, a share and a
 *               MIG partition: NVIDIA_VISIBLE_DEVICES alone;
 *   concurrent  WORKERS threads create Pods of random families (seeded per thread) and Allocate
 *               tokens of random cards, so claims collide; one thread deletes random granted Pods
 *               and runs reclaim and sync; one checker reads the ledger, every family's device
 *               list, the Pods and the GPUs while they run. Each annotation write takes 200 us and
 *               every 7th fails (sync retries it), so reservations carry the ledger for a while.
 *               Invariants, during the run and at the end: no card holds two modes, and no Pod
 *               one card twice; an exclusive card is one Pod's; at most TSR_SHARES_PER_ACCEL
 *               shares on a card; slices within the card's units and slots; partitions only on MIG
 *               cards, never overlapping, each MIG device one container's and live on its card at
 *               the recorded placement; no GPU instance on a card out of MIG mode, none
 *               overlapping; every Pod granted at most once, its annotation what the answer
 *               injected; every ledger entry passes tsr_ledger_check; every device list holds this
 *               node's tokens in order, partitioned ones only on MIG cards; every refusal is
 *               FailedPrecondition. At rest: nothing left to record, the ledger equals the one
 *               rebuilt from the Pods' annotations and the device lists are that ledger's; then
 *               with every Pod deleted the ledger is empty and TSR_MIG_RECLAIM_MAX_MISSES passes
 *               leave no instance and no marker, each carved instance destroyed once. Grants
 *               (of every family), refusals and failed writes are counted and must be > 0.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/diag.h"
#include "base/err.h"
#include "codec/alloc_annotation.h"
#include "core/geometry.h"
#include "core/tokens.h"
#include "deviceplugin/v1beta1/api.pb-c.h"
#include "devicemanager/agent.h"
#include "devicemanager/isolation.h"
#include "devicemanager/plugin.h"
#include "grpc/unix_client.h"
#include "grpc/unix_server.h"
#include "mig/marker_store.h"
#include "mig/reclaim.h"
#include "nvml/detect.h"
#include "nvml/fake.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#define GPUS              8
#define NS                "team-a"
#define WORKERS           6
#define ALLOCS_PER_WORKER 50
#define PODS_MAX          (WORKERS * ALLOCS_PER_WORKER + 16)
#define LIVE_MAX          3 /* granted Pods the deleter leaves */

/* The families the workers draw from. */
static const enum tsr_family families[] = {TSR_FAMILY_EXCLUSIVE, TSR_FAMILY_SHARED,
                                           TSR_FAMILY_SLICED, TSR_FAMILY_PARTITIONED};
#define FAMILIES (sizeof(families) / sizeof(families[0]))

/* H100 profiles the workers ask for, with their units (memory slices x 200,000). */
static const struct {
        const char *name;
        int64_t units;
} profiles[] = {{"1g.10gb", 200000}, {"2g.20gb", 400000}, {"3g.40gb", 800000}};

struct pod {
        char name[32];
        json_t *obj;                      /* NULL once deleted */
        enum tsr_family f;                /* what it requests */
        bool granted;                     /* an Allocate answered OK for it */
        char visible[TSR_DP_VISIBLE_MAX]; /* what that answer injected */
        bool unrecorded;                  /* the last annotation write failed (sync retries) */
};

struct node {
        struct tsr_fake_gpus *fake;
        pthread_mutex_t gpu_mu; /* held across every call on fake */
        struct tsr_mig_store *store;
        struct tsr_mig_reclaimer *reclaimer;
        struct tsr_accel_cap caps[GPUS];
        size_t n_caps;
        unsigned bound[GPUS], n_bound; /* cards out of MIG mode */
        unsigned mig[GPUS], n_mig;     /* cards in MIG mode */
        struct tsr_dm_agent *agent;
        struct tsr_dm_agent_opts opts; /* what agent was made with (a restart makes another) */
        atomic_uint kubelet_asked;
        bool kubelet_lists_nobody; /* pod-resources answers, listing no Pod (else it fails) */
        bool kubelet_lists_all;    /* pod-resources lists every live Pod, holding held_ids */
        char held_pod[32];         /* the Pod whose "main" the kubelet lists holding held_ids */
        const char *held_resource;
        const char *held_ids[2];
        size_t n_held_ids;
        /* the API server: each write takes record_lag_us; every record_fail_every-th fails */
        unsigned record_lag_us, record_fail_every;
        atomic_uint records, record_failures;
        atomic_uint pods_reads; /* calls of the pods callback */
        bool pods_unlisted;     /* the pods callback fails (the API server is unreachable) */
        pthread_mutex_t mu;     /* guards pods and n_pods */
        struct pod pods[PODS_MAX];
        size_t n_pods;
        pthread_mutex_t log_mu; /* guards the annotation log lines (a leaf lock) */
        char ann_logs[8][1024]; /* the agent's lines about annotations, the first 8 */
        unsigned n_ann_logs;
        pthread_mutex_t viol_mu; /* guards violations and first (a leaf lock) */
        unsigned violations;
        char first[512];
};

static struct node N;

/* ---- the fake backend behind gpu_mu -------------------------------------------------------- */

#define LOCKED(be, op, ...)                                                                        \
        do {                                                                                       \
                struct node *n_ = (be);                                                            \
                int rc_;                                                                           \
                pthread_mutex_lock(&n_->gpu_mu);                                                   \
                rc_ = tsr_fake_gpu_ops.op(n_->fake, __VA_ARGS__);                                  \
                pthread_mutex_unlock(&n_->gpu_mu);                                                 \
                return rc_;                                                                        \
        } while (0)

static int l_driver_version(void *be, char *out, size_t len)
{
        LOCKED(be, driver_version, out, len);
}

static int l_device_count(void *be, unsigned *out)
{
        LOCKED(be, device_count, out);
}

static int l_device_info(void *be, unsigned gpu, struct tsr_gpu_info *out)
{
        LOCKED(be, device_info, gpu, out);
}

static int l_profile_info(void *be, unsigned gpu, unsigned nvml_index,
                          struct tsr_gpu_profile_info *out)
{
        LOCKED(be, profile_info, gpu, nvml_index, out);
}

static int l_placements(void *be, unsigned gpu, unsigned gi_profile_id,
                        struct tsr_gpu_placement *out, size_t max, size_t *n)
{
        LOCKED(be, placements, gpu, gi_profile_id, out, max, n);
}

static int l_gi_create(void *be, unsigned gpu, unsigned gi_profile_id, unsigned start,
                       unsigned *gi_id)
{
        LOCKED(be, gi_create, gpu, gi_profile_id, start, gi_id);
}

static int l_ci_create(void *be, unsigned gpu, unsigned gi_id, unsigned *ci_id,
                       char uuid[TSR_GPU_UUID_MAX])
{
        LOCKED(be, ci_create, gpu, gi_id, ci_id, uuid);
}

static int l_ci_destroy(void *be, unsigned gpu, unsigned gi_id, unsigned ci_id)
{
        LOCKED(be, ci_destroy, gpu, gi_id, ci_id);
}

static int l_gi_destroy(void *be, unsigned gpu, unsigned gi_id)
{
        LOCKED(be, gi_destroy, gpu, gi_id);
}

static int l_gi_list(void *be, unsigned gpu, struct tsr_gpu_instance *out, size_t max, size_t *n)
{
        LOCKED(be, gi_list, gpu, out, max, n);
}

/* The fake's detail is valid until its next call: copied, under the lock, per thread. */
static const char *l_error_detail(void *be)
{
        static _Thread_local char detail[512];
        struct node *n = be;

        pthread_mutex_lock(&n->gpu_mu);
        snprintf(detail, sizeof(detail), "%s", tsr_fake_gpu_ops.error_detail(n->fake));
        pthread_mutex_unlock(&n->gpu_mu);
        return detail;
}

static const struct tsr_gpu_ops locked_ops = {
    l_driver_version, l_device_count, l_device_info, l_profile_info, l_placements,   l_gi_create,
    l_ci_create,      l_ci_destroy,   l_gi_destroy,  l_gi_list,      l_error_detail,
};

/* ---- the node's Pods ----------------------------------------------------------------------- */

static void violation(struct node *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records a broken invariant (any thread); the test thread fails on the first one. */
static void violation(struct node *n, const char *fmt, ...)
{
        va_list ap;

        pthread_mutex_lock(&n->viol_mu);
        if (!n->violations++) {
                va_start(ap, fmt);
                vsnprintf(n->first, sizeof(n->first), fmt, ap);
                va_end(ap);
        }
        pthread_mutex_unlock(&n->viol_mu);
}

/* Fails on the violations recorded so far (once: they are cleared). Only the test thread. */
static void assert_no_violation(struct node *n)
{
        unsigned k = n->violations;

        n->violations = 0;
        if (k)
                fail_msg("%u invariant violation(s), the first: %s", k, n->first);
}

/* The live Pod named name, or NULL. Under mu. */
static struct pod *find_pod(struct node *n, const char *name)
{
        for (size_t i = 0; i < n->n_pods; i++)
                if (n->pods[i].obj && !strcmp(n->pods[i].name, name))
                        return &n->pods[i];
        return NULL;
}

/* The live Pod an answer names ("team-a/<name>"), or NULL. Under mu. */
static struct pod *answered_pod(struct node *n, const struct tsr_dm_answer *a)
{
        return strncmp(a->pod, NS "/", sizeof(NS)) ? NULL : find_pod(n, a->pod + sizeof(NS));
}

/* Adds Pod name with container "main" limited to limits (taken), in phase. Any thread. */
static void add_pod(struct node *n, const char *name, enum tsr_family f, json_t *limits,
                    const char *phase)
{
        char uid[48], ts[48];
        struct pod *p;
        size_t k;

        pthread_mutex_lock(&n->mu);
        k = n->n_pods++;
        p = &n->pods[k];
        snprintf(p->name, sizeof(p->name), "%s", name);
        snprintf(uid, sizeof(uid), "uid-%s", name);
        snprintf(ts, sizeof(ts), "2025-01-01T%02zu:%02zu:%02zuZ", k / 3600, k / 60 % 60, k % 60);
        p->f = f;
        p->obj = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s}, s:{s:s, s:[{s:s, s:s, s:{s:o}}]}, "
                           "s:{s:s}}",
                           "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace",
                           NS, "uid", uid, "creationTimestamp", ts, "spec", "nodeName", "node-a",
                           "containers", "name", "main", "image", "x", "resources", "limits",
                           limits, "status", "phase", phase);
        pthread_mutex_unlock(&n->mu);
}

static void delete_pod(struct pod *p)
{
        if (!p)
                return;
        json_decref(p->obj);
        p->obj = NULL;
}

/* The limits of a Pod of family f: count cards, or one slice / partition of units. */
static json_t *limits_of(enum tsr_family f, unsigned count, const char *profile, int64_t units)
{
        char c[16], u[24], key[96];

        snprintf(c, sizeof(c), "%u", count);
        snprintf(u, sizeof(u), "%lld", (long long)units);
        switch (f) {
        case TSR_FAMILY_SHARED:
                return json_pack("{s:s}", "nvidia.com/gpu.shared", c);
        case TSR_FAMILY_SLICED:
                return json_pack("{s:s, s:s}", "nvidia.com/gpu.sliced", "1",
                                 "nvidia.com/gpu.sliced.units", u);
        case TSR_FAMILY_PARTITIONED:
                snprintf(key, sizeof(key), "nvidia.com/gpu.partitioned.mig-%s", profile);
                return json_pack("{s:s, s:s, s:s}", "nvidia.com/gpu.partitioned", "1", key, "1",
                                 "nvidia.com/gpu.partitioned.units", u);
        default:
                return json_pack("{s:s}", "nvidia.com/gpu", c);
        }
}

static json_t *pods_cb(void *ctx)
{
        struct node *n = ctx;
        json_t *arr = json_array();

        atomic_fetch_add(&n->pods_reads, 1);
        if (n->pods_unlisted) {
                json_decref(arr);
                return NULL;
        }
        pthread_mutex_lock(&n->mu);
        for (size_t i = 0; i < n->n_pods; i++)
                if (n->pods[i].obj)
                        json_array_append_new(arr, json_deep_copy(n->pods[i].obj));
        pthread_mutex_unlock(&n->mu);
        return arr;
}

static void nap(long us)
{
        struct timespec ts = {0, us * 1000};

        nanosleep(&ts, NULL);
}

static int record_cb(void *ctx, const char *ns, const char *name, const char *uid, const char *json,
                     struct tsr_diag *diag)
{
        struct node *n = ctx;
        unsigned k = atomic_fetch_add(&n->records, 1) + 1;
        struct pod *p;
        json_t *md, *ann;

        if (n->record_lag_us)
                nap(n->record_lag_us);
        pthread_mutex_lock(&n->mu);
        p = strcmp(ns, NS) ? NULL : find_pod(n, name);
        md = p ? json_object_get(p->obj, "metadata") : NULL;
        if (!md || strcmp(json_string_value(json_object_get(md, "uid")), uid)) {
                pthread_mutex_unlock(&n->mu);
                return tsr_diag_set(diag, TSR_ENOTFOUND, "pods \"%s\" not found", name);
        }
        if (n->record_fail_every && k % n->record_fail_every == 0) {
                p->unrecorded = true;
                pthread_mutex_unlock(&n->mu);
                atomic_fetch_add(&n->record_failures, 1);
                return tsr_diag_set(diag, TSR_EIO, "the API server timed out");
        }
        p->unrecorded = false;
        ann = json_object_get(md, "annotations");
        if (!ann) {
                ann = json_object();
                json_object_set_new(md, "annotations", ann);
        }
        json_object_set_new(ann, TSR_ALLOC_ANNOTATION, json_string(json));
        pthread_mutex_unlock(&n->mu);
        return 0;
}

/*
 * The kubelet serves no pod-resources (the agent falls back to the pending Pods), or, with
 * kubelet_lists_nobody, answers a List that names no Pod yet.
 */
/* A view listing every live Pod (kubelet_lists_all): what the kubelet's pod-resources says. */
struct listed {
        struct tsr_dp_kubelet_view kv;
        const char *ns[PODS_MAX], *name[PODS_MAX];
        struct tsr_dp_held held;
};

static int kubelet_view_cb(void *ctx, struct tsr_dp_kubelet_view **kv)
{
        static struct tsr_dp_kubelet_view nobody;
        struct node *n = ctx;
        struct listed *l;

        atomic_fetch_add(&n->kubelet_asked, 1);
        if (n->kubelet_lists_all) {
                l = calloc(1, sizeof(*l));
                if (!l)
                        return TSR_ENOMEM;
                pthread_mutex_lock(&n->mu);
                for (size_t i = 0; i < n->n_pods; i++)
                        if (n->pods[i].obj) {
                                l->ns[l->kv.n_pods] = NS;
                                l->name[l->kv.n_pods++] = n->pods[i].name;
                        }
                pthread_mutex_unlock(&n->mu);
                l->held = (struct tsr_dp_held){NS,          n->held_pod,  "main", n->held_resource,
                                               n->held_ids, n->n_held_ids};
                l->kv.held = &l->held;
                l->kv.n_held = n->n_held_ids ? 1 : 0;
                l->kv.pod_ns = l->ns;
                l->kv.pod_name = l->name;
                *kv = &l->kv;
                return 0;
        }
        if (!n->kubelet_lists_nobody)
                return TSR_EIO;
        *kv = &nobody;
        return 0;
}

static void kubelet_view_free_cb(void *ctx, struct tsr_dp_kubelet_view *kv)
{
        struct node *n = ctx;

        if (n->kubelet_lists_all)
                free(kv); /* the struct listed it heads */
}

/* Keeps the agent's errors about allocation annotations (not the refusals quoting them). */
static void log_cb(void *ctx, const char *level, const char *msg)
{
        struct node *n = ctx;

        if (strcmp(level, "error") || !strstr(msg, "allocation annotation"))
                return;
        pthread_mutex_lock(&n->log_mu);
        if (n->n_ann_logs < 8)
                snprintf(n->ann_logs[n->n_ann_logs], sizeof(n->ann_logs[0]), "%s", msg);
        n->n_ann_logs++;
        pthread_mutex_unlock(&n->log_mu);
}

/* The allocation annotation of Pod p (NULL: none), or NULL. Under mu. */
static const char *annotation(const struct pod *p)
{
        return p ? json_string_value(json_object_get(
                       json_object_get(json_object_get(p->obj, "metadata"), "annotations"),
                       TSR_ALLOC_ANNOTATION))
                 : NULL;
}

/*
 * The decoded annotation of Pod p into alloc[0..max): its count (0 when absent), SIZE_MAX when
 * it does not decode. Under mu.
 */
static size_t annotation_of(const struct pod *p, struct tsr_container_allocation *alloc, size_t max)
{
        const char *v = annotation(p);
        size_t na = 0;

        if (v && tsr_alloc_annotation_decode(v, alloc, max, &na, NULL))
                return SIZE_MAX;
        return na;
}

/* ---- setup --------------------------------------------------------------------------------- */

static int setup(void **state)
{
        const bool mig_on[GPUS] = {true, true, true};
        struct tsr_mig_gpus gpus = {&locked_ops, &N};
        struct tsr_dm_agent_opts opts = {0};
        struct tsr_diag d;

        (void)state;
        memset(&N, 0, sizeof(N));
        pthread_mutex_init(&N.gpu_mu, NULL);
        pthread_mutex_init(&N.mu, NULL);
        pthread_mutex_init(&N.viol_mu, NULL);
        pthread_mutex_init(&N.log_mu, NULL);
        atomic_init(&N.kubelet_asked, 0);
        atomic_init(&N.records, 0);
        atomic_init(&N.record_failures, 0);
        atomic_init(&N.pods_reads, 0);
        tsr_diag_clear(&d);
        assert_int_equal(tsr_fake_gpus_new("node-a",
                                           tsr_catalog_product_by_name("NVIDIA H100 80GB HBM3"),
                                           GPUS, mig_on, &N.fake),
                         0);
        assert_int_equal(tsr_nvml_detect(&locked_ops, &N, N.caps, GPUS, &N.n_caps, NULL, NULL, &d),
                         0);
        assert_int_equal(N.n_caps, GPUS);
        for (unsigned g = 0; g < GPUS; g++) {
                if (N.caps[g].partitioned)
                        N.mig[N.n_mig++] = g;
                else
                        N.bound[N.n_bound++] = g;
        }
        assert_int_equal(N.n_mig, 3);
        assert_int_equal(tsr_mig_store_memory_new(&N.store), 0);
        assert_int_equal(tsr_mig_reclaimer_new(&gpus, N.store, NULL, NULL, &N.reclaimer), 0);
        opts.gpus = gpus;
        opts.store = N.store;
        opts.sliced_gate = true;
        opts.identify_by_kubelet = true;
        opts.pods = pods_cb;
        opts.kubelet_view = kubelet_view_cb;
        opts.kubelet_view_free = kubelet_view_free_cb;
        opts.record = record_cb;
        opts.log = log_cb;
        opts.ctx = &N;
        N.opts = opts;
        assert_int_equal(tsr_dm_agent_new(N.caps, N.n_caps, &opts, &N.agent, &d), 0);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        assert_no_violation(&N);
        tsr_dm_agent_free(N.agent);
        tsr_mig_reclaimer_free(N.reclaimer);
        tsr_mig_store_free(N.store);
        tsr_fake_gpus_free(N.fake);
        for (size_t i = 0; i < N.n_pods; i++)
                json_decref(N.pods[i].obj);
        pthread_mutex_destroy(&N.viol_mu);
        pthread_mutex_destroy(&N.log_mu);
        pthread_mutex_destroy(&N.mu);
        pthread_mutex_destroy(&N.gpu_mu);
        return 0;
}

/* Token k of family f on GPU g, into out (TSR_TOKEN_ID_MAX bytes). Any thread. */
static const char *token(char *out, enum tsr_family f, unsigned g, unsigned k)
{
        const struct tsr_dp_node *node = tsr_dm_agent_node(N.agent);

        if (tsr_token_format(out, node->group, N.caps[g].uuid, tsr_token_index(f, k)))
                violation(&N, "no token %u of GPU %u", k, g);
        return out;
}

/* Whether live Pod name carries an allocation annotation. */
static bool annotated(const char *name)
{
        bool has;

        pthread_mutex_lock(&N.mu);
        has = annotation(find_pod(&N, name)) != NULL;
        pthread_mutex_unlock(&N.mu);
        return has;
}

/* The live instances of GPU g (read directly: call only while no other thread runs). */
static size_t instances(unsigned g, struct tsr_gpu_instance *in)
{
        size_t k = 0;

        assert_int_equal(tsr_fake_gpu_ops.gi_list(N.fake, g, in, TSR_GPU_INSTANCES_MAX, &k), 0);
        return k;
}

static size_t markers(void)
{
        struct tsr_mig_marker_entry *e = NULL;
        size_t k = 0;

        assert_int_equal(tsr_mig_store_list(N.store, &e, &k, NULL), 0);
        free(e);
        return k;
}

/* The annotation of live Pod name (one container expected) into *out. */
static void recorded(const char *name, struct tsr_container_allocation *out)
{
        struct tsr_container_allocation *alloc = malloc(2 * sizeof(*alloc));
        size_t na;

        assert_non_null(alloc);
        pthread_mutex_lock(&N.mu);
        na = annotation_of(find_pod(&N, name), alloc, 2);
        pthread_mutex_unlock(&N.mu);
        if (na != 1)
                fail_msg("Pod %s records %zu container allocations, want 1", name, na);
        *out = alloc[0];
        free(alloc);
}

/* ---- allocate ------------------------------------------------------------------------------ */

/* How many times the agent read the Pods since the last call. */
static unsigned reads_since(void)
{
        static unsigned last;
        unsigned now = atomic_load(&N.pods_reads), d = now - last;

        last = now;
        return d;
}

static void count_change(void *ctx)
{
        ++*(unsigned *)ctx;
}

static void test_exclusive_pair(void **state)
{
        char t[2][TSR_TOKEN_ID_MAX], want[2 * TSR_UUID_MAX];
        const char *ids[2] = {token(t[0], TSR_FAMILY_EXCLUSIVE, N.bound[0], 0),
                              token(t[1], TSR_FAMILY_EXCLUSIVE, N.bound[1], 0)};
        struct tsr_accel_ledger ledger[GPUS];
        struct tsr_container_allocation *c = malloc(sizeof(*c));
        struct tsr_dp_device *list;
        struct tsr_dm_answer a;
        unsigned changes = 0;
        size_t n;

        (void)state;
        assert_non_null(c);
        assert_int_equal(tsr_dm_agent_subscribe(N.agent, count_change, &changes), 0);
        add_pod(&N, "ex", TSR_FAMILY_EXCLUSIVE, limits_of(TSR_FAMILY_EXCLUSIVE, 2, NULL, 0),
                "Pending");
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_EXCLUSIVE, ids, 2, &a);
        assert_int_equal(a.code, TSR_DM_OK);
        assert_int_equal(changes, 1); /* the device lists moved */
        snprintf(want, sizeof(want), "%s,%s", N.caps[N.bound[0]].uuid, N.caps[N.bound[1]].uuid);
        assert_string_equal(a.visible, want);
        assert_string_equal(a.pod, NS "/ex");
        assert_string_equal(a.container, "main");
        assert_true(atomic_load(&N.kubelet_asked) > 0); /* asked, then fell back */

        recorded("ex", c);
        assert_string_equal(c->container, "main");
        assert_int_equal(c->n, 2);
        for (unsigned k = 0; k < 2; k++) {
                assert_string_equal(c->accels[k].id, N.caps[N.bound[k]].uuid);
                assert_int_equal(c->accels[k].mode, TSR_MODE_EXCLUSIVE);
                assert_string_equal(c->device_ids[k], ids[k]);
        }
        assert_int_equal(tsr_dm_agent_sync(N.agent), 0);

        assert_int_equal(tsr_dm_agent_ledger(N.agent, ledger, NULL), 0);
        for (unsigned g = 0; g < GPUS; g++) {
                bool held = g == N.bound[0] || g == N.bound[1];

                assert_int_equal(ledger[g].mode, held ? TSR_MODE_EXCLUSIVE : TSR_MODE_NONE);
                assert_int_equal(ledger[g].remaining, held ? 0 : TSR_UNITS_PER_ACCEL);
        }
        /* the two cards' shares turn unhealthy (the exclusive tokens are the kubelet's to track) */
        assert_int_equal(tsr_dm_agent_devices(N.agent, TSR_FAMILY_SHARED, &list, &n), 0);
        assert_int_equal(n, N.n_bound * TSR_SHARES_PER_ACCEL);
        for (size_t k = 0; k < n; k++)
                assert_int_equal(list[k].healthy, k >= 2 * TSR_SHARES_PER_ACCEL);
        free(list);
        free(c);
}

/* ---- the plugins' ListAndWatch streams ----------------------------------------------------- */

#define LAW "/v1beta1.DevicePlugin/ListAndWatch"

struct served {
        struct tsr_dm_plugin *plugin;
        struct tsr_grpc_unix_server *server;
        struct tsr_grpc_unix_stream *stream;
        char socket[128];
};

static void serve(struct served *sv, const char *dir, enum tsr_family f)
{
        static const uint8_t empty[1];
        struct tsr_grpc_status st = {0};
        struct tsr_diag d;

        tsr_diag_clear(&d);
        snprintf(sv->socket, sizeof(sv->socket), "%s/%s.sock", dir, tsr_family_name(f));
        assert_int_equal(tsr_dm_plugin_new(N.agent, f, NULL, &sv->plugin), 0);
        assert_int_equal(tsr_grpc_unix_server_start(sv->socket, tsr_dm_plugin_table(sv->plugin),
                                                    sv->plugin, &sv->server, &d),
                         0);
        assert_int_equal(tsr_grpc_unix_stream_open(sv->socket, LAW, empty, 0, &sv->stream, &st), 0);
}

/*
 * The next ListAndWatch message of s within ms: 1 with its healthy and total counts, 0 when none
 * came.
 */
static int next_list(struct tsr_grpc_unix_stream *s, int ms, size_t *healthy, size_t *total)
{
        struct tsr_grpc_status st = {0};
        V1beta1__ListAndWatchResponse *r;
        struct tsr_buf msg;
        int rc;

        tsr_buf_init(&msg);
        rc = tsr_grpc_unix_stream_next(s, ms, &msg, &st);
        if (rc != TSR_GRPC_UNIX_MESSAGE) {
                tsr_buf_release(&msg);
                assert_int_equal(rc, TSR_GRPC_UNIX_TIMEOUT);
                return 0;
        }
        r = v1beta1__list_and_watch_response__unpack(NULL, msg.len, (const uint8_t *)msg.ptr);
        assert_non_null(r);
        *healthy = 0;
        *total = r->n_devices;
        for (size_t i = 0; i < r->n_devices; i++)
                *healthy += !strcmp(r->devices[i]->health, "Healthy");
        v1beta1__list_and_watch_response__free_unpacked(r, NULL);
        tsr_buf_release(&msg);
        return 1;
}

/* The next message of s must come, with healthy of total tokens healthy. */
static void expect_list(struct tsr_grpc_unix_stream *s, size_t healthy, size_t total)
{
        size_t h = 0, t = 0;

        assert_int_equal(next_list(s, 2000, &h, &t), 1);
        assert_int_equal(t, total);
        assert_int_equal(h, healthy);
}

/* No message on s for a while: the list was not resent. */
static void expect_quiet(struct tsr_grpc_unix_stream *s)
{
        size_t h, t;

        assert_int_equal(next_list(s, 100, &h, &t), 0);
}

/* Every family's device view is what a fresh snapshot lists (the view cannot go stale). */
static void expect_view_current(void)
{
        for (size_t i = 0; i < TSR_DP_FAMILIES; i++) {
                enum tsr_family f = tsr_dp_families[i];
                struct tsr_dp_shape view[GPUS], want[GPUS] = {{0}};
                struct tsr_dp_device *list = NULL;
                size_t n = 0;

                assert_int_equal(tsr_dm_agent_view_shape(N.agent, f, view), 0);
                assert_int_equal(tsr_dm_agent_devices(N.agent, f, &list, &n), 0);
                for (size_t k = 0; k < n; k++) {
                        want[list[k].accel].count++;
                        want[list[k].accel].healthy = list[k].healthy;
                }
                free(list);
                for (unsigned g = 0; g < GPUS; g++) {
                        assert_int_equal(view[g].count, want[g].count);
                        assert_int_equal(view[g].healthy, want[g].healthy);
                }
        }
}

/* Sets (text) or removes (NULL) Pod name's allocation annotation. */
static void set_annotation(const char *name, const char *text)
{
        struct pod *p;
        json_t *md;

        pthread_mutex_lock(&N.mu);
        p = find_pod(&N, name);
        md = p ? json_object_get(p->obj, "metadata") : NULL;
        assert_non_null(md);
        if (text)
                json_object_set_new(md, "annotations",
                                    json_pack("{s:s}", TSR_ALLOC_ANNOTATION, text));
        else
                json_object_del(md, "annotations");
        pthread_mutex_unlock(&N.mu);
}

static void test_streams(void **state)
{
        enum { SH, SL, VIS, SERVED };
        const enum tsr_family fam[SERVED] = {TSR_FAMILY_SHARED, TSR_FAMILY_SLICED,
                                             TSR_FAMILY_VISIBILITY};
        const size_t shares = (size_t)N.n_bound * TSR_SHARES_PER_ACCEL;
        size_t slots = 0, per_card;
        struct served sv[SERVED];
        char dir[] = "/tmp/tsr-dm-agent.XXXXXX", tk[TSR_TOKEN_ID_MAX], bad[256];
        const char *ids[1] = {token(tk, TSR_FAMILY_EXCLUSIVE, N.bound[0], 0)};
        const char *avail[2];
        char av[2][TSR_TOKEN_ID_MAX];
        const char *chosen[1];
        struct tsr_grpc_unix_stream *late;
        struct tsr_grpc_status st = {0};
        struct tsr_dm_answer a;
        size_t n_chosen = 0;
        static const uint8_t empty[1];

        (void)state;
        for (unsigned k = 0; k < N.n_bound; k++)
                slots += N.caps[N.bound[k]].slice_slots;
        per_card = N.caps[N.bound[0]].slice_slots;
        assert_non_null(mkdtemp(dir));
        for (int i = 0; i < SERVED; i++)
                serve(&sv[i], dir, fam[i]);
        expect_list(sv[SH].stream, shares, shares);
        expect_list(sv[SL].stream, slots, slots);
        expect_list(sv[VIS].stream, GPUS * TSR_VISIBILITY_TOKENS_PER_ACCEL,
                    GPUS * TSR_VISIBILITY_TOKENS_PER_ACCEL);
        expect_view_current();

        /* an exclusive grant: one read of the Pods for the whole call, the lists move */
        add_pod(&N, "ex", TSR_FAMILY_EXCLUSIVE, limits_of(TSR_FAMILY_EXCLUSIVE, 1, NULL, 0),
                "Pending");
        reads_since();
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_EXCLUSIVE, ids, 1, &a);
        assert_int_equal(a.code, TSR_DM_OK);
        assert_int_equal(reads_since(), 1);
        assert_true(annotated("ex"));
        expect_list(sv[SH].stream, shares - TSR_SHARES_PER_ACCEL, shares);
        expect_list(sv[SL].stream, slots - per_card, slots);
        expect_quiet(sv[VIS].stream); /* unchanged: not resent */
        expect_view_current();

        /* nothing moved: nothing sent, one read for every plugin */
        reads_since();
        tsr_dm_agent_changed(N.agent);
        assert_int_equal(reads_since(), 1);
        expect_quiet(sv[SH].stream);
        expect_quiet(sv[SL].stream);

        /* the Pod deleted: healthy again */
        delete_pod(find_pod(&N, "ex"));
        tsr_dm_agent_changed(N.agent);
        assert_int_equal(reads_since(), 1);
        expect_list(sv[SH].stream, shares, shares);
        expect_list(sv[SL].stream, slots, slots);
        expect_view_current();

        /* taken again, then the Pod gone without a change notice: a refresh re-reads */
        add_pod(&N, "ex2", TSR_FAMILY_EXCLUSIVE, limits_of(TSR_FAMILY_EXCLUSIVE, 1, NULL, 0),
                "Pending");
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_EXCLUSIVE, ids, 1, &a);
        assert_int_equal(a.code, TSR_DM_OK);
        expect_list(sv[SH].stream, shares - TSR_SHARES_PER_ACCEL, shares);
        expect_list(sv[SL].stream, slots - per_card, slots);
        delete_pod(find_pod(&N, "ex2"));
        expect_quiet(sv[SH].stream);
        tsr_dm_plugin_refresh(sv[SH].plugin);
        expect_list(sv[SH].stream, shares, shares);
        expect_quiet(sv[SL].stream);   /* its plugin was not told */
        tsr_dm_agent_changed(N.agent); /* the sliced stream catches up; shared has it already */
        expect_list(sv[SL].stream, slots, slots);
        expect_quiet(sv[SH].stream);

        /* an annotation that does not decode holds its card back, until it is removed */
        add_pod(&N, "broken", TSR_FAMILY_EXCLUSIVE, limits_of(TSR_FAMILY_EXCLUSIVE, 1, NULL, 0),
                "Running");
        snprintf(bad, sizeof(bad), "not json %s", N.caps[N.bound[1]].uuid);
        set_annotation("broken", bad);
        tsr_dm_agent_changed(N.agent);
        expect_list(sv[SH].stream, shares - TSR_SHARES_PER_ACCEL, shares);
        expect_list(sv[SL].stream, slots - per_card, slots);
        expect_quiet(sv[VIS].stream); /* visibility tokens charge nothing */
        expect_view_current();
        set_annotation("broken", NULL);
        tsr_dm_agent_changed(N.agent);
        expect_list(sv[SH].stream, shares, shares);
        expect_view_current();

        /* GetPreferredAllocation reads the Pods once */
        add_pod(&N, "sl", TSR_FAMILY_SLICED, limits_of(TSR_FAMILY_SLICED, 1, NULL, 400000),
                "Pending");
        avail[0] = token(av[0], TSR_FAMILY_SLICED, N.bound[2], 0);
        avail[1] = token(av[1], TSR_FAMILY_SLICED, N.bound[3], 0);
        reads_since();
        assert_int_equal(tsr_dm_agent_preferred(N.agent, TSR_FAMILY_SLICED, avail, 2, NULL, 0, 1,
                                                chosen, &n_chosen),
                         0);
        assert_int_equal(reads_since(), 1);
        assert_int_equal(n_chosen, 1);

        /* a new stream starts with the current list */
        assert_int_equal(tsr_grpc_unix_stream_open(sv[SH].socket, LAW, empty, 0, &late, &st), 0);
        expect_list(late, shares, shares);
        expect_quiet(sv[SH].stream);
        tsr_grpc_unix_stream_close(late);

        for (int i = 0; i < SERVED; i++) {
                tsr_grpc_unix_stream_close(sv[i].stream);
                tsr_grpc_unix_server_stop(sv[i].server);
                tsr_dm_plugin_free(sv[i].plugin);
        }
        rmdir(dir);
}

/* ---- slice isolation through Allocate -------------------------------------------------------- */

#define ALLOCATE "/v1beta1.DevicePlugin/Allocate"
#define HOST_DIR "/host/tessera/vgpu"

/* Family f's plugin with isolation mode (host directory HOST_DIR) served at dir/name.sock. */
static void serve_isolated(struct served *sv, const char *dir, const char *name, enum tsr_family f,
                           enum tsr_dm_isolation_mode mode)
{
        struct tsr_dm_isolation iso = {.mode = mode, .host_dir = HOST_DIR};
        struct tsr_diag d;

        tsr_diag_clear(&d);
        snprintf(sv->socket, sizeof(sv->socket), "%s/%s.sock", dir, name);
        assert_int_equal(tsr_dm_plugin_new(N.agent, f, &iso, &sv->plugin), 0);
        assert_int_equal(tsr_grpc_unix_server_start(sv->socket, tsr_dm_plugin_table(sv->plugin),
                                                    sv->plugin, &sv->server, &d),
                         0);
        sv->stream = NULL;
}

/* Allocate of id for one container through sv's socket: the container's response (unpacked). */
static V1beta1__AllocateResponse *allocate_rpc(const struct served *sv, const char *id)
{
        V1beta1__ContainerAllocateRequest c = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT, *cp = &c;
        V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
        V1beta1__AllocateResponse *r;
        struct tsr_grpc_status st = {0};
        char *ids[1] = {(char *)(uintptr_t)id};
        struct tsr_buf out;
        uint8_t buf[1024];
        size_t len;

        c.n_devices_ids = 1;
        c.devices_ids = ids;
        req.n_container_requests = 1;
        req.container_requests = &cp;
        len = v1beta1__allocate_request__pack(&req, buf);
        tsr_buf_init(&out);
        assert_int_equal(tsr_grpc_unix_call(sv->socket, ALLOCATE, buf, len, 5000, &out, &st), 0);
        assert_int_equal(st.code, 0);
        r = v1beta1__allocate_response__unpack(NULL, out.len, (const uint8_t *)out.ptr);
        tsr_buf_release(&out);
        assert_non_null(r);
        assert_int_equal(r->n_container_responses, 1);
        return r;
}

/* The value of env key in r's container, or NULL. */
static const char *env_of(const V1beta1__AllocateResponse *r, const char *key)
{
        const V1beta1__ContainerAllocateResponse *c = r->container_responses[0];

        for (size_t i = 0; i < c->n_envs; i++)
                if (!strcmp(c->envs[i]->key, key))
                        return c->envs[i]->value;
        return NULL;
}

/* Checks r's container got exactly NVIDIA_VISIBLE_DEVICES=visible, no mount: no isolation. */
static void expect_bare(V1beta1__AllocateResponse *r, const char *visible_prefix)
{
        const V1beta1__ContainerAllocateResponse *c = r->container_responses[0];

        assert_int_equal(c->n_envs, 1);
        assert_non_null(env_of(r, "NVIDIA_VISIBLE_DEVICES"));
        assert_true(
            !strncmp(env_of(r, "NVIDIA_VISIBLE_DEVICES"), visible_prefix, strlen(visible_prefix)));
        assert_int_equal(c->n_mounts, 0);
        v1beta1__allocate_response__free_unpacked(r, NULL);
}

/* Checks mount k of r's container: host_path onto container_path, read-only. */
static void expect_mount(const V1beta1__AllocateResponse *r, size_t k, const char *host,
                         const char *container)
{
        const V1beta1__Mount *m = r->container_responses[0]->mounts[k];

        assert_string_equal(m->host_path, host);
        assert_string_equal(m->container_path, container);
        assert_true(m->read_only);
}

/*
 * The gRPC Allocate of every family through plugins with slice isolation: a logical slice (30 %
 * of an H100 80GB's units, cores-percentage 30) gets the library and /etc/ld.so.preload mounted
 * read-only from the host directory, its memory (24576m), its cores (30) and a budget file of its
 * own; in env mode LD_PRELOAD and the library only (a slice asking no cores: 100); with isolation
 * off nothing. A whole card, a share and a MIG partition get NVIDIA_VISIBLE_DEVICES alone.
 */
static void test_slice_isolation(void **state)
{
        enum { EX, SH, SL, MIG, SL_ENV, SL_OFF, SERVED };
        struct served sv[SERVED];
        char dir[] = "/tmp/tsr-dm-iso.XXXXXX", t[TSR_TOKEN_ID_MAX];
        const unsigned g = N.bound[2];
        V1beta1__AllocateResponse *r;
        struct tsr_dp_device *list;
        json_t *limits;
        size_t n;

        (void)state;
        assert_non_null(mkdtemp(dir));
        serve_isolated(&sv[EX], dir, "ex", TSR_FAMILY_EXCLUSIVE, TSR_DM_ISOLATION_PRELOAD);
        serve_isolated(&sv[SH], dir, "sh", TSR_FAMILY_SHARED, TSR_DM_ISOLATION_PRELOAD);
        serve_isolated(&sv[SL], dir, "sl", TSR_FAMILY_SLICED, TSR_DM_ISOLATION_PRELOAD);
        serve_isolated(&sv[MIG], dir, "mig", TSR_FAMILY_PARTITIONED, TSR_DM_ISOLATION_PRELOAD);
        serve_isolated(&sv[SL_ENV], dir, "sl-env", TSR_FAMILY_SLICED, TSR_DM_ISOLATION_ENV);
        serve_isolated(&sv[SL_OFF], dir, "sl-off", TSR_FAMILY_SLICED, TSR_DM_ISOLATION_OFF);

        limits = limits_of(TSR_FAMILY_SLICED, 1, NULL, 480000);
        json_object_set_new(limits, "nvidia.com/gpu.sliced.cores-percentage", json_string("30"));
        add_pod(&N, "sl", TSR_FAMILY_SLICED, limits, "Pending");
        r = allocate_rpc(&sv[SL], token(t, TSR_FAMILY_SLICED, g, 0));
        assert_string_equal(env_of(r, "NVIDIA_VISIBLE_DEVICES"), N.caps[g].uuid);
        assert_string_equal(env_of(r, "CUDA_DEVICE_MEMORY_LIMIT"), "24576m");
        assert_string_equal(env_of(r, "CUDA_DEVICE_SM_LIMIT"), "30");
        assert_string_equal(env_of(r, "CUDA_DEVICE_MEMORY_SHARED_CACHE"),
                            "/tmp/tessera-vgpu-uid-sl-main.cache");
        assert_null(env_of(r, "LD_PRELOAD"));
        assert_int_equal(r->container_responses[0]->n_envs, 4);
        assert_int_equal(r->container_responses[0]->n_mounts, 2);
        expect_mount(r, 0, HOST_DIR "/libtessera-vgpu.so",
                     "/usr/local/tessera/vgpu/libtessera-vgpu.so");
        expect_mount(r, 1, HOST_DIR "/ld.so.preload", "/etc/ld.so.preload");
        v1beta1__allocate_response__free_unpacked(r, NULL);

        add_pod(&N, "sl-env", TSR_FAMILY_SLICED, limits_of(TSR_FAMILY_SLICED, 1, NULL, 160000),
                "Pending");
        r = allocate_rpc(&sv[SL_ENV], token(t, TSR_FAMILY_SLICED, g, 1));
        assert_string_equal(env_of(r, "LD_PRELOAD"), "/usr/local/tessera/vgpu/libtessera-vgpu.so");
        assert_string_equal(env_of(r, "CUDA_DEVICE_MEMORY_LIMIT"), "8192m");
        assert_string_equal(env_of(r, "CUDA_DEVICE_SM_LIMIT"), "100");
        assert_string_equal(env_of(r, "CUDA_DEVICE_MEMORY_SHARED_CACHE"),
                            "/tmp/tessera-vgpu-uid-sl-env-main.cache");
        assert_int_equal(r->container_responses[0]->n_mounts, 1);
        expect_mount(r, 0, HOST_DIR "/libtessera-vgpu.so",
                     "/usr/local/tessera/vgpu/libtessera-vgpu.so");
        v1beta1__allocate_response__free_unpacked(r, NULL);

        add_pod(&N, "sl-off", TSR_FAMILY_SLICED, limits_of(TSR_FAMILY_SLICED, 1, NULL, 160000),
                "Pending");
        expect_bare(allocate_rpc(&sv[SL_OFF], token(t, TSR_FAMILY_SLICED, g, 2)), "GPU-");

        add_pod(&N, "ex", TSR_FAMILY_EXCLUSIVE, limits_of(TSR_FAMILY_EXCLUSIVE, 1, NULL, 0),
                "Pending");
        expect_bare(allocate_rpc(&sv[EX], token(t, TSR_FAMILY_EXCLUSIVE, N.bound[0], 0)), "GPU-");
        add_pod(&N, "sh", TSR_FAMILY_SHARED, limits_of(TSR_FAMILY_SHARED, 1, NULL, 0), "Pending");
        expect_bare(allocate_rpc(&sv[SH], token(t, TSR_FAMILY_SHARED, N.bound[1], 0)), "GPU-");
        add_pod(&N, "mig", TSR_FAMILY_PARTITIONED,
                limits_of(TSR_FAMILY_PARTITIONED, 1, "1g.10gb", 200000), "Pending");
        assert_int_equal(tsr_dm_agent_devices(N.agent, TSR_FAMILY_PARTITIONED, &list, &n), 0);
        assert_true(n > 0);
        r = allocate_rpc(&sv[MIG], list[0].id);
        free(list);
        expect_bare(r, "MIG-");

        for (int i = 0; i < SERVED; i++) {
                tsr_grpc_unix_server_stop(sv[i].server);
                tsr_dm_plugin_free(sv[i].plugin);
        }
        rmdir(dir);
}

/* A pending Pod name asking for one whole card, granted GPU g. */
static void grant_exclusive(const char *name, unsigned g)
{
        char t[TSR_TOKEN_ID_MAX];
        const char *ids[1] = {token(t, TSR_FAMILY_EXCLUSIVE, g, 0)};
        struct tsr_dm_answer a;

        add_pod(&N, name, TSR_FAMILY_EXCLUSIVE, limits_of(TSR_FAMILY_EXCLUSIVE, 1, NULL, 0),
                "Pending");
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_EXCLUSIVE, ids, 1, &a);
        assert_int_equal(a.code, TSR_DM_OK);
        assert_string_equal(a.visible, N.caps[g].uuid);
}

static void test_shared_on_exclusive_card(void **state)
{
        char s[TSR_TOKEN_ID_MAX];
        const char *sh[1] = {token(s, TSR_FAMILY_SHARED, N.bound[2], 3)};
        struct tsr_accel_ledger ledger[GPUS];
        struct tsr_dm_answer a;

        (void)state;
        grant_exclusive("ex", N.bound[2]);

        add_pod(&N, "sh", TSR_FAMILY_SHARED, limits_of(TSR_FAMILY_SHARED, 1, NULL, 0), "Pending");
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_SHARED, sh, 1, &a);
        assert_int_equal(a.code, TSR_DM_FAILED_PRECONDITION);
        assert_non_null(strstr(a.message, "held in Exclusive mode"));
        assert_string_equal(a.visible, "");
        assert_false(annotated("sh"));
        assert_int_equal(tsr_dm_agent_ledger(N.agent, ledger, NULL), 0);
        assert_int_equal(ledger[N.bound[2]].mode, TSR_MODE_EXCLUSIVE);
        assert_int_equal(ledger[N.bound[2]].allocated, TSR_UNITS_PER_ACCEL);

        /* the refusal reserved nothing: the same container takes a share of a free card */
        sh[0] = token(s, TSR_FAMILY_SHARED, N.bound[3], 3);
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_SHARED, sh, 1, &a);
        assert_int_equal(a.code, TSR_DM_OK);
        assert_string_equal(a.pod, NS "/sh");
        assert_string_equal(a.visible, N.caps[N.bound[3]].uuid);
}

static void test_foreign_token(void **state)
{
        char t[TSR_TOKEN_ID_MAX];
        const char *other[1] = {"other-group:GPU-x:0000"};
        const char *unknown[1] = {t};
        struct tsr_dm_answer a;

        (void)state;
        add_pod(&N, "ex", TSR_FAMILY_EXCLUSIVE, limits_of(TSR_FAMILY_EXCLUSIVE, 1, NULL, 0),
                "Pending");
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_EXCLUSIVE, other, 1, &a);
        assert_int_equal(a.code, TSR_DM_INVALID_ARGUMENT);
        assert_non_null(strstr(a.message, "other-group:GPU-x:0000"));
        assert_int_equal(
            tsr_token_format(t, tsr_dm_agent_node(N.agent)->group, "GPU-not-on-this-node", 0), 0);
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_EXCLUSIVE, unknown, 1, &a);
        assert_int_equal(a.code, TSR_DM_INVALID_ARGUMENT);
        assert_non_null(strstr(a.message, "GPU-not-on-this-node"));
        assert_false(annotated("ex"));
}

/* One request naming a device twice (the kubelet never does; a forged or broken client may) is
 * refused as a whole: no card granted twice, nothing recorded, nothing charged. */
static void test_duplicate_ids(void **state)
{
        char t[2][TSR_TOKEN_ID_MAX], s[2][TSR_TOKEN_ID_MAX];
        const char *twice[2] = {token(t[0], TSR_FAMILY_EXCLUSIVE, N.bound[0], 0),
                                token(t[1], TSR_FAMILY_EXCLUSIVE, N.bound[0], 0)};
        const char *share_twice[2] = {token(s[0], TSR_FAMILY_SHARED, N.bound[1], 2),
                                      token(s[1], TSR_FAMILY_SHARED, N.bound[1], 2)};
        struct tsr_accel_ledger ledger[GPUS];
        struct tsr_dm_answer a;

        (void)state;
        add_pod(&N, "dup", TSR_FAMILY_EXCLUSIVE, limits_of(TSR_FAMILY_EXCLUSIVE, 2, NULL, 0),
                "Pending");
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_EXCLUSIVE, twice, 2, &a);
        assert_int_equal(a.code, TSR_DM_INVALID_ARGUMENT);
        assert_string_equal(a.reason, "duplicate_device");
        assert_non_null(strstr(a.message, twice[0]));
        assert_string_equal(a.visible, "");
        add_pod(&N, "dup-share", TSR_FAMILY_SHARED, limits_of(TSR_FAMILY_SHARED, 2, NULL, 0),
                "Pending");
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_SHARED, share_twice, 2, &a);
        assert_int_equal(a.code, TSR_DM_INVALID_ARGUMENT);
        assert_false(annotated("dup"));
        assert_false(annotated("dup-share"));
        assert_int_equal(tsr_dm_agent_ledger(N.agent, ledger, NULL), 0);
        for (unsigned g = 0; g < GPUS; g++)
                assert_int_equal(ledger[g].remaining, TSR_UNITS_PER_ACCEL);

        /* the same Pod with two distinct cards is granted both */
        twice[1] = token(t[1], TSR_FAMILY_EXCLUSIVE, N.bound[1], 0);
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_EXCLUSIVE, twice, 2, &a);
        assert_int_equal(a.code, TSR_DM_OK);
        assert_int_equal(tsr_dm_agent_ledger(N.agent, ledger, NULL), 0);
        assert_int_equal(ledger[N.bound[0]].allocated, TSR_UNITS_PER_ACCEL);
        assert_int_equal(ledger[N.bound[1]].allocated, TSR_UNITS_PER_ACCEL);
}

static void test_partition_carved_and_reclaimed(void **state)
{
        struct tsr_container_allocation *c = malloc(sizeof(*c));
        struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];
        struct tsr_mig_pass_stats st;
        struct tsr_dp_device *list;
        struct tsr_dm_answer a;
        const char *ids[1];
        size_t n;

        (void)state;
        assert_non_null(c);
        add_pod(&N, "mig", TSR_FAMILY_PARTITIONED,
                limits_of(TSR_FAMILY_PARTITIONED, 1, "3g.40gb", 800000), "Pending");
        assert_int_equal(tsr_dm_agent_devices(N.agent, TSR_FAMILY_PARTITIONED, &list, &n), 0);
        assert_true(n > 0);
        ids[0] = list[0].id;
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_PARTITIONED, ids, 1, &a);
        free(list);
        assert_int_equal(a.code, TSR_DM_OK);
        assert_true(!strncmp(a.visible, "MIG-", 4));
        assert_null(strchr(a.visible, ','));

        assert_int_equal(instances(N.mig[0], in), 1);
        assert_int_equal(in[0].start, 0);
        assert_string_equal(in[0].mig_uuid, a.visible);
        assert_int_equal(markers(), 1);
        recorded("mig", c);
        assert_int_equal(c->n, 1);
        assert_int_equal(c->accels[0].mode, TSR_MODE_PARTITIONED);
        assert_string_equal(c->accels[0].id, N.caps[N.mig[0]].uuid);
        assert_string_equal(c->accels[0].profile, "3g.40gb");
        assert_string_equal(c->accels[0].physical_id, a.visible);
        free(c);

        /* the Pod lives: passes keep its instance */
        for (int i = 0; i < TSR_MIG_RECLAIM_MAX_MISSES + 1; i++) {
                assert_int_equal(tsr_dm_agent_reclaim(N.agent, N.reclaimer, &st, NULL), 0);
                assert_int_equal(st.destroyed, 0);
        }
        pthread_mutex_lock(&N.mu);
        delete_pod(find_pod(&N, "mig"));
        pthread_mutex_unlock(&N.mu);
        for (int i = 1; i < TSR_MIG_RECLAIM_MAX_MISSES; i++) {
                assert_int_equal(tsr_dm_agent_reclaim(N.agent, N.reclaimer, &st, NULL), 0);
                assert_int_equal(st.destroyed, 0);
        }
        assert_int_equal(instances(N.mig[0], in), 1);
        assert_int_equal(tsr_dm_agent_reclaim(N.agent, N.reclaimer, &st, NULL), 0);
        assert_int_equal(st.destroyed, 1);
        assert_int_equal(st.markers_removed, 1);
        assert_int_equal(instances(N.mig[0], in), 0);
        assert_int_equal(markers(), 0);
}

static void test_no_pending_container(void **state)
{
        char t[TSR_TOKEN_ID_MAX];
        const char *ids[1] = {token(t, TSR_FAMILY_EXCLUSIVE, N.bound[1], 0)};
        struct tsr_accel_ledger ledger[GPUS];
        struct tsr_dm_answer a;

        (void)state;
        grant_exclusive("done", N.bound[0]); /* now annotated: never chosen again */
        add_pod(&N, "running", TSR_FAMILY_EXCLUSIVE, limits_of(TSR_FAMILY_EXCLUSIVE, 1, NULL, 0),
                "Running");
        add_pod(&N, "two", TSR_FAMILY_EXCLUSIVE, limits_of(TSR_FAMILY_EXCLUSIVE, 2, NULL, 0),
                "Pending");
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_EXCLUSIVE, ids, 1, &a);
        assert_int_equal(a.code, TSR_DM_FAILED_PRECONDITION);
        assert_non_null(strstr(a.message, "no pending container"));
        assert_string_equal(a.pod, "");
        assert_int_equal(tsr_dm_agent_ledger(N.agent, ledger, NULL), 0);
        assert_int_equal(ledger[N.bound[1]].mode, TSR_MODE_NONE);
}

/* A pending Pod name asking for a slice of units, granted slice token k of GPU g. */
static void grant_slice(const char *name, unsigned g, unsigned k, int64_t units)
{
        char t[TSR_TOKEN_ID_MAX];
        const char *ids[1] = {token(t, TSR_FAMILY_SLICED, g, k)};
        struct tsr_dm_answer a;

        add_pod(&N, name, TSR_FAMILY_SLICED, limits_of(TSR_FAMILY_SLICED, 1, NULL, units),
                "Pending");
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_SLICED, ids, 1, &a);
        assert_int_equal(a.code, TSR_DM_OK);
        assert_string_equal(a.visible, N.caps[g].uuid);
}

/* The preferred slice token among avail[0..n) for the next slice container. */
static const char *preferred_slice(const char *const *avail, size_t n)
{
        const char *out[1] = {NULL};
        size_t k = 0;

        assert_int_equal(
            tsr_dm_agent_preferred(N.agent, TSR_FAMILY_SLICED, avail, n, NULL, 0, 1, out, &k), 0);
        assert_int_equal(k, 1);
        return out[0];
}

static void test_preferred_slice_fits(void **state)
{
        char t[2][TSR_TOKEN_ID_MAX];
        const char *avail[2] = {token(t[0], TSR_FAMILY_SLICED, N.bound[0], 2),
                                token(t[1], TSR_FAMILY_SLICED, N.bound[1], 0)};
        const char *ids[1];
        struct tsr_dm_answer a;

        (void)state;
        /* GPU bound[0] keeps 100,000 units; bound[1] is idle */
        grant_slice("s1", N.bound[0], 0, 800000);
        grant_slice("s2", N.bound[0], 1, 700000);
        /* nothing pending: the most-occupied card with a free slot (the fallback) */
        assert_string_equal(preferred_slice(avail, 2), avail[0]);

        /* an 800,000-unit slice pending: the card that fits, and Allocate takes it */
        add_pod(&N, "big", TSR_FAMILY_SLICED, limits_of(TSR_FAMILY_SLICED, 1, NULL, 800000),
                "Pending");
        ids[0] = preferred_slice(avail, 2);
        assert_string_equal(ids[0], avail[1]);
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_SLICED, ids, 1, &a);
        assert_int_equal(a.code, TSR_DM_OK);
        assert_string_equal(a.pod, NS "/big");
        assert_string_equal(a.visible, N.caps[N.bound[1]].uuid);

        /* a 100,000-unit slice still packs onto the fullest card */
        add_pod(&N, "small", TSR_FAMILY_SLICED, limits_of(TSR_FAMILY_SLICED, 1, NULL, 100000),
                "Pending");
        assert_string_equal(preferred_slice(avail, 2), avail[0]);
}

/*
 * No container identified (pod-resources lists no Pod yet): the hint still fits the smallest
 * pending slice; with none pending it is the most-occupied card with a free slot.
 */
static void test_preferred_slice_unidentified(void **state)
{
        char t[2][TSR_TOKEN_ID_MAX];
        const char *avail[2] = {token(t[0], TSR_FAMILY_SLICED, N.bound[0], 2),
                                token(t[1], TSR_FAMILY_SLICED, N.bound[1], 0)};

        (void)state;
        grant_slice("s1", N.bound[0], 0, 800000);
        grant_slice("s2", N.bound[0], 1, 700000);
        N.kubelet_lists_nobody = true;
        add_pod(&N, "big", TSR_FAMILY_SLICED, limits_of(TSR_FAMILY_SLICED, 1, NULL, 900000),
                "Pending");
        add_pod(&N, "mid", TSR_FAMILY_SLICED, limits_of(TSR_FAMILY_SLICED, 1, NULL, 400000),
                "Pending");
        assert_string_equal(preferred_slice(avail, 2), avail[1]);
        pthread_mutex_lock(&N.mu);
        delete_pod(find_pod(&N, "big"));
        delete_pod(find_pod(&N, "mid"));
        pthread_mutex_unlock(&N.mu);
        add_pod(&N, "tiny", TSR_FAMILY_SLICED, limits_of(TSR_FAMILY_SLICED, 1, NULL, 50000),
                "Pending");
        assert_string_equal(preferred_slice(avail, 2), avail[0]);
}

/* Adds container name limited to limits (taken) to live Pod pod. */
static void add_container(const char *pod, const char *name, json_t *limits)
{
        struct pod *p;
        int rc;

        pthread_mutex_lock(&N.mu);
        p = find_pod(&N, pod);
        rc = json_array_append_new(
            json_object_get(json_object_get(p ? p->obj : NULL, "spec"), "containers"),
            json_pack("{s:s, s:s, s:{s:o}}", "name", name, "image", "x", "resources", "limits",
                      limits));
        pthread_mutex_unlock(&N.mu);
        assert_int_equal(rc, 0);
}

/* A pending Pod name: "main" asking for cards whole cards, "sshd" for one visibility token. */
static void add_sidecar_pod(const char *name, unsigned cards)
{
        add_pod(&N, name, TSR_FAMILY_EXCLUSIVE, limits_of(TSR_FAMILY_EXCLUSIVE, cards, NULL, 0),
                "Pending");
        add_container(name, "sshd",
                      json_pack("{s:s}", "device.gpustack.ai/nvidia.visibility", "1"));
}

/* Allocate of exclusive GPUs bound[b0], bound[b0 + 1], ... (cards of them) names Pod pod. */
static void expect_exclusive(unsigned b0, unsigned cards, const char *pod)
{
        char t[2][TSR_TOKEN_ID_MAX];
        const char *ids[2];
        struct tsr_dm_answer a;

        for (unsigned k = 0; k < cards; k++)
                ids[k] = token(t[k], TSR_FAMILY_EXCLUSIVE, N.bound[b0 + k], 0);
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_EXCLUSIVE, ids, cards, &a);
        if (a.code != TSR_DM_OK)
                fail_msg("exclusive Allocate refused: %s", a.message);
        assert_string_equal(a.pod, pod);
}

/* Allocate of visibility token k names pod's sidecar with visible, or (pod NULL) is refused. */
static void expect_visibility(unsigned k, const char *pod, const char *sidecar, const char *visible)
{
        char t[TSR_TOKEN_ID_MAX];
        const char *ids[1] = {token(t, TSR_FAMILY_VISIBILITY, N.bound[4], k)};
        struct tsr_dm_answer a;

        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_VISIBILITY, ids, 1, &a);
        if (!pod) {
                if (a.code != TSR_DM_FAILED_PRECONDITION)
                        fail_msg("visibility Allocate named %s/%s (%s), want a refusal", a.pod,
                                 a.container, a.visible);
                return;
        }
        if (a.code != TSR_DM_OK)
                fail_msg("visibility Allocate refused: %s", a.message);
        assert_string_equal(a.pod, pod);
        assert_string_equal(a.container, sidecar);
        assert_string_equal(a.visible, visible);
}

/*
 * Without pod-resources a visibility sidecar is named in its own Pod: one served is not named
 * again (reserved like any grant), and a Pod whose accelerator containers still wait is skipped,
 * so a second Pod's sidecar never gets the oldest pending Pod's GPUs.
 */
static void test_visibility_own_pod(void **state)
{
        char two[2 * TSR_UUID_MAX];

        (void)state;
        /* a, then b, admitted one after the other */
        add_sidecar_pod("a", 1);
        add_sidecar_pod("b", 1);
        expect_exclusive(0, 1, NS "/a");
        expect_visibility(0, NS "/a", "sshd", N.caps[N.bound[0]].uuid);
        expect_exclusive(1, 1, NS "/b");
        expect_visibility(1, NS "/b", "sshd", N.caps[N.bound[1]].uuid);
        expect_visibility(2, NULL, NULL, ""); /* every sidecar served */

        /* "waiting" is older than c but not admitted: c's sidecar is c's, then waiting's */
        add_sidecar_pod("waiting", 2);
        add_sidecar_pod("c", 1);
        expect_exclusive(2, 1, NS "/c");
        expect_visibility(3, NS "/c", "sshd", N.caps[N.bound[2]].uuid);
        expect_visibility(4, NULL, NULL, "");
        expect_exclusive(3, 2, NS "/waiting");
        snprintf(two, sizeof(two), "%s,%s", N.caps[N.bound[3]].uuid, N.caps[N.bound[4]].uuid);
        expect_visibility(5, NS "/waiting", "sshd", two);

        /* a Pod with nothing but a sidecar holds nothing: void */
        add_pod(&N, "vis", TSR_FAMILY_NONE,
                json_pack("{s:s}", "device.gpustack.ai/nvidia.visibility", "1"), "Pending");
        expect_visibility(6, NS "/vis", "main", "void");
        assert_int_equal(tsr_dm_agent_sync(N.agent), 0); /* nothing to record for a sidecar */
}

/* ---- a partition's visibility sidecar ------------------------------------------------------ */

/* The marker of Pod name's container main into *e (it must be the only one of that Pod). */
static void own_marker(const char *name, struct tsr_mig_marker_entry *e)
{
        struct tsr_mig_marker_entry *all = NULL;
        char uid[48];
        size_t n = 0, found = 0;

        snprintf(uid, sizeof(uid), "uid-%s", name);
        assert_int_equal(tsr_mig_store_list(N.store, &all, &n, NULL), 0);
        for (size_t i = 0; i < n; i++)
                if (!strcmp(all[i].pod_uid, uid) && !strcmp(all[i].container, "main")) {
                        *e = all[i];
                        found++;
                }
        free(all);
        assert_int_equal(found, 1);
        assert_false(e->corrupt);
}

/*
 * A pending Pod name whose "main" asks for a 3g.40gb partition and "sshd" for one visibility
 * token; main's Allocate carves it on the first MIG GPU. Its marker into *e.
 */
static void partition_with_sidecar(const char *name, struct tsr_mig_marker_entry *e)
{
        struct tsr_dp_device *list;
        struct tsr_dm_answer a;
        const char *ids[1];
        size_t n;

        add_pod(&N, name, TSR_FAMILY_PARTITIONED,
                limits_of(TSR_FAMILY_PARTITIONED, 1, "3g.40gb", 800000), "Pending");
        add_container(name, "sshd",
                      json_pack("{s:s}", "device.gpustack.ai/nvidia.visibility", "1"));
        assert_int_equal(tsr_dm_agent_devices(N.agent, TSR_FAMILY_PARTITIONED, &list, &n), 0);
        assert_true(n > 0);
        ids[0] = list[0].id;
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_PARTITIONED, ids, 1, &a);
        free(list);
        if (a.code != TSR_DM_OK)
                fail_msg("partition Allocate refused: %s", a.message);
        assert_string_equal(a.container, "main");
        own_marker(name, e);
        assert_string_equal(e->m.mig_uuid, a.visible);
        assert_string_equal(e->m.card, N.caps[N.mig[0]].uuid);
        assert_string_equal(e->m.profile, "3g.40gb");
}

/* The sidecar's Allocate of visibility token k into *a. */
static void sidecar(unsigned k, struct tsr_dm_answer *a)
{
        char t[TSR_TOKEN_ID_MAX];
        const char *ids[1] = {token(t, TSR_FAMILY_VISIBILITY, N.mig[1], k)};

        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_VISIBILITY, ids, 1, a);
}

/*
 * Pod name's sidecar is refused FailedPrecondition with why in the message, shown nothing; the
 * refusal reserved nothing, so the same sidecar is named (and refused) again.
 */
static void expect_sidecar_refused(const char *name, const char *why)
{
        char pod[64];
        struct tsr_dm_answer a;

        snprintf(pod, sizeof(pod), NS "/%s", name);
        for (unsigned k = 0; k < 2; k++) {
                sidecar(k, &a);
                if (a.code != TSR_DM_FAILED_PRECONDITION || !strstr(a.message, why))
                        fail_msg("sidecar Allocate: code %d \"%s\" (shown \"%s\"); want "
                                 "FailedPrecondition naming \"%s\"",
                                 (int)a.code, a.message, a.visible, why);
                assert_string_equal(a.pod, pod);
                assert_string_equal(a.container, "sshd");
                assert_string_equal(a.visible, ""); /* nothing exposed: no GPU, no MIG device */
                assert_non_null(strstr(a.message, "the parent GPU is never shown"));
        }
}

/* The sidecar of a Pod whose main holds a partition is shown exactly that MIG device. */
static void test_visibility_partition_grant(void **state)
{
        struct tsr_mig_marker_entry e;
        struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];
        struct tsr_dm_answer a;

        (void)state;
        partition_with_sidecar("p", &e);
        sidecar(0, &a);
        if (a.code != TSR_DM_OK)
                fail_msg("sidecar Allocate refused: %s", a.message);
        assert_string_equal(a.pod, NS "/p");
        assert_string_equal(a.container, "sshd");
        assert_string_equal(a.visible, e.m.mig_uuid); /* exactly the MIG device */
        assert_null(strstr(a.visible, "GPU-"));       /* never the parent GPU */
        assert_int_equal(instances(N.mig[0], in), 1);
        assert_string_equal(in[0].mig_uuid, a.visible);
        assert_int_equal(tsr_dm_agent_sync(N.agent), 0); /* nothing to record for a sidecar */
        sidecar(1, &a);                                  /* served: not named again */
        assert_int_equal(a.code, TSR_DM_FAILED_PRECONDITION);
}

/* No marker: refused; once the marker is back, the same sidecar is served. */
static void test_visibility_partition_no_marker(void **state)
{
        struct tsr_mig_marker_entry e;
        struct tsr_dm_answer a;

        (void)state;
        partition_with_sidecar("p", &e);
        assert_int_equal(tsr_mig_store_remove(N.store, e.path, NULL), 0);
        expect_sidecar_refused("p", "container main on GPU " /* the card */);
        expect_sidecar_refused("p", "is missing");
        assert_int_equal(tsr_mig_store_put(N.store, &e.m, NULL), 0);
        sidecar(2, &a);
        if (a.code != TSR_DM_OK)
                fail_msg("sidecar Allocate refused: %s", a.message);
        assert_string_equal(a.visible, e.m.mig_uuid);
}

/* The container's marker on another GPU of the node, or on a GPU of another node: refused. */
static void test_visibility_partition_foreign_gpu(void **state)
{
        struct tsr_mig_marker_entry e;
        struct tsr_mig_marker m;
        char why[256];

        (void)state;
        partition_with_sidecar("p", &e);
        assert_int_equal(tsr_mig_store_remove(N.store, e.path, NULL), 0);
        m = e.m;
        snprintf(m.card, sizeof(m.card), "%s", N.caps[N.mig[1]].uuid);
        assert_int_equal(tsr_mig_store_put(N.store, &m, NULL), 0);
        snprintf(why, sizeof(why), "names GPU %s, not GPU %s its allocation records",
                 N.caps[N.mig[1]].uuid, N.caps[N.mig[0]].uuid);
        expect_sidecar_refused("p", why);

        own_marker("p", &e);
        assert_int_equal(tsr_mig_store_remove(N.store, e.path, NULL), 0);
        snprintf(m.card, sizeof(m.card), "GPU-of-another-node");
        assert_int_equal(tsr_mig_store_put(N.store, &m, NULL), 0);
        expect_sidecar_refused("p", "names GPU GPU-of-another-node, not GPU");
}

/* The driver no longer offers the recorded profile (the instance still live): refused. */
static void test_visibility_partition_unoffered_profile(void **state)
{
        const struct tsr_mig_profile *mp = tsr_product_profile(N.caps[N.mig[0]].product, "3g.40gb");
        struct tsr_mig_marker_entry e;
        char why[256];

        (void)state;
        assert_non_null(mp);
        partition_with_sidecar("p", &e);
        pthread_mutex_lock(&N.gpu_mu);
        assert_int_equal(tsr_fake_gpus_set_driver_starts(N.fake, mp->gi_profile_id, 0), 0);
        pthread_mutex_unlock(&N.gpu_mu);
        snprintf(why, sizeof(why), "records profile 3g.40gb, which GPU %s no longer offers",
                 N.caps[N.mig[0]].uuid);
        expect_sidecar_refused("p", why);
}

/* The GPU left MIG mode (its instances gone first, as the driver requires): refused. */
static void test_visibility_partition_mig_off(void **state)
{
        struct tsr_mig_marker_entry e;

        (void)state;
        partition_with_sidecar("p", &e);
        pthread_mutex_lock(&N.gpu_mu);
        assert_int_equal(tsr_fake_gpus_vanish(N.fake, N.mig[0], e.m.gi_id), 0);
        assert_int_equal(tsr_fake_gpus_set_mig_mode(N.fake, N.mig[0], false), 0);
        pthread_mutex_unlock(&N.gpu_mu);
        expect_sidecar_refused("p", "no longer offers (MIG mode is off)");
}

/* The recorded GPU instance is gone: refused. */
static void test_visibility_partition_instance_gone(void **state)
{
        struct tsr_mig_marker_entry e;
        char why[512];

        (void)state;
        partition_with_sidecar("p", &e);
        pthread_mutex_lock(&N.gpu_mu);
        assert_int_equal(tsr_fake_gpus_vanish(N.fake, N.mig[0], e.m.gi_id), 0);
        pthread_mutex_unlock(&N.gpu_mu);
        snprintf(why, sizeof(why),
                 "the MIG instance %s (GPU instance %u on %s) recorded for pod "
                 "uid-p container main is gone",
                 e.m.mig_uuid, e.m.gi_id, e.m.card);
        expect_sidecar_refused("p", why);
}

/*
 * The recorded GPU instance destroyed and another made in its place: the same GI id (ids are
 * reassigned), another MIG UUID. Refused; the new instance is not shown either.
 */
static void test_visibility_partition_recreated(void **state)
{
        const struct tsr_mig_profile *mp = tsr_product_profile(N.caps[N.mig[0]].product, "3g.40gb");
        struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];
        struct tsr_mig_marker_entry e;
        unsigned gi = 0;
        char why[256];

        (void)state;
        assert_non_null(mp);
        partition_with_sidecar("p", &e);
        pthread_mutex_lock(&N.gpu_mu);
        assert_int_equal(tsr_fake_gpus_vanish(N.fake, N.mig[0], e.m.gi_id), 0);
        assert_int_equal(
            tsr_fake_gpus_carve(N.fake, N.mig[0], mp->gi_profile_id, e.m.start, true, &gi), 0);
        pthread_mutex_unlock(&N.gpu_mu);
        assert_int_equal(gi, e.m.gi_id);
        assert_int_equal(instances(N.mig[0], in), 1);
        assert_string_not_equal(in[0].mig_uuid, e.m.mig_uuid);
        snprintf(why, sizeof(why), "was recreated: GPU instance %u now carries %s", gi,
                 in[0].mig_uuid);
        expect_sidecar_refused("p", why);
}

/* ---- annotations the ledger cannot charge -------------------------------------------------- */

/* Allocate of token k of family f on GPU g into *a. */
static void allocate_one(enum tsr_family f, unsigned g, unsigned k, struct tsr_dm_answer *a)
{
        char t[TSR_TOKEN_ID_MAX];
        const char *ids[1] = {token(t, f, g, k)};

        tsr_dm_agent_allocate(N.agent, f, ids, 1, a);
}

/* A Running Pod name whose annotation is value (as written by someone else). */
static void add_annotated_pod(const char *name, const char *value)
{
        struct pod *p;

        add_pod(&N, name, TSR_FAMILY_EXCLUSIVE, limits_of(TSR_FAMILY_EXCLUSIVE, 1, NULL, 0),
                "Running");
        pthread_mutex_lock(&N.mu);
        p = find_pod(&N, name);
        json_object_set_new(json_object_get(p ? p->obj : NULL, "metadata"), "annotations",
                            json_pack("{s:s}", TSR_ALLOC_ANNOTATION, value));
        pthread_mutex_unlock(&N.mu);
}

/* The annotation of container "main" holding accels[0..n) (encoded; free with free()). */
static char *annotation_value(const struct tsr_accel_allocation *accels, size_t n)
{
        struct tsr_container_allocation *c = calloc(1, sizeof(*c));
        char *json = NULL;

        assert_non_null(c);
        snprintf(c->container, sizeof(c->container), "main");
        snprintf(c->group_id, sizeof(c->group_id), "%.*s", (int)sizeof(c->group_id) - 1,
                 tsr_dm_agent_node(N.agent)->group);
        snprintf(c->manufacturer, sizeof(c->manufacturer), "nvidia");
        c->n = n;
        memcpy(c->accels, accels, n * sizeof(*accels));
        assert_int_equal(tsr_alloc_annotation_encode(c, 1, &json), 0);
        free(c);
        return json;
}

static struct tsr_accel_allocation whole(unsigned g)
{
        struct tsr_accel_allocation aa = {
            .index = g, .mode = TSR_MODE_EXCLUSIVE, .allocated = TSR_UNITS_PER_ACCEL};

        snprintf(aa.id, sizeof(aa.id), "%s", g < GPUS ? N.caps[g].uuid : "GPU-gone");
        return aa;
}

static struct tsr_accel_allocation partition(unsigned g, const char *profile, unsigned start,
                                             unsigned length, int64_t units)
{
        struct tsr_accel_allocation aa = {.index = g,
                                          .mode = TSR_MODE_PARTITIONED,
                                          .allocated = units,
                                          .start = start,
                                          .length = length};

        snprintf(aa.id, sizeof(aa.id), "%s", N.caps[g].uuid);
        snprintf(aa.profile, sizeof(aa.profile), "%s", profile);
        snprintf(aa.physical_id, sizeof(aa.physical_id), "MIG-%s-%u", profile, start);
        return aa;
}

/* The exclusive token of GPU g's health in the device list now. */
static bool exclusive_healthy(unsigned g)
{
        struct tsr_dp_device *list;
        size_t n;
        bool healthy = false;

        assert_int_equal(tsr_dm_agent_devices(N.agent, TSR_FAMILY_EXCLUSIVE, &list, &n), 0);
        for (size_t k = 0; k < n; k++)
                if (list[k].accel == g)
                        healthy = list[k].healthy;
        free(list);
        return healthy;
}

/* How many annotation lines were logged, and whether every one names fragment... */
static unsigned ann_logs(void)
{
        unsigned k;

        pthread_mutex_lock(&N.log_mu);
        k = N.n_ann_logs;
        pthread_mutex_unlock(&N.log_mu);
        return k;
}

static void expect_log(unsigned i, const char *a, const char *b)
{
        pthread_mutex_lock(&N.log_mu);
        if (i >= N.n_ann_logs || i >= 8 || !strstr(N.ann_logs[i], a) || !strstr(N.ann_logs[i], b))
                fail_msg("log line %u of %u is \"%s\", want %s and %s", i, N.n_ann_logs,
                         i < N.n_ann_logs && i < 8 ? N.ann_logs[i] : "", a, b);
        pthread_mutex_unlock(&N.log_mu);
}

/*
 * An annotation naming a GPU past the node's: that Pod's records are left out of the ledger and
 * logged once with its UID and the reason; the node keeps allocating, except on the GPUs that
 * annotation names, whose tokens read unhealthy; with the Pod gone they serve again.
 */
static void test_annotation_past_the_gpus(void **state)
{
        const struct tsr_accel_allocation bad[2] = {whole(N.bound[0]), whole(GPUS + 1)};
        char *v = annotation_value(bad, 2);
        struct tsr_accel_ledger ledger[GPUS];
        struct tsr_diag d;
        struct tsr_dm_answer a;

        (void)state;
        grant_exclusive("good", N.bound[1]);
        add_annotated_pod("bad", v);
        free(v);
        tsr_diag_clear(&d);
        assert_int_equal(tsr_dm_agent_ledger(N.agent, ledger, &d), 0);
        assert_int_equal(ledger[N.bound[1]].mode, TSR_MODE_EXCLUSIVE); /* good still charges */
        assert_int_equal(ledger[N.bound[0]].mode, TSR_MODE_NONE);      /* bad's left out */
        assert_int_equal(ann_logs(), 1);
        expect_log(0, "uid-bad", "names accelerator 9");

        /* the GPU bad names takes no grant; another does, and the lists keep moving */
        assert_false(exclusive_healthy(N.bound[0]));
        assert_true(exclusive_healthy(N.bound[2]));
        add_pod(&N, "next", TSR_FAMILY_EXCLUSIVE, limits_of(TSR_FAMILY_EXCLUSIVE, 1, NULL, 0),
                "Pending");
        allocate_one(TSR_FAMILY_EXCLUSIVE, N.bound[0], 0, &a);
        assert_int_equal(a.code, TSR_DM_FAILED_PRECONDITION);
        assert_non_null(strstr(a.message, "uid-bad"));
        assert_non_null(strstr(a.message, N.caps[N.bound[0]].uuid));
        allocate_one(TSR_FAMILY_SHARED, N.bound[0], 0, &a);
        assert_int_equal(a.code, TSR_DM_FAILED_PRECONDITION);
        allocate_one(TSR_FAMILY_EXCLUSIVE, N.bound[2], 0, &a);
        assert_int_equal(a.code, TSR_DM_OK);
        assert_string_equal(a.pod, NS "/next");
        assert_int_equal(ann_logs(), 1); /* once per Pod, however often the ledger is built */

        /* bad deleted: its GPU serves again */
        pthread_mutex_lock(&N.mu);
        delete_pod(find_pod(&N, "bad"));
        pthread_mutex_unlock(&N.mu);
        assert_true(exclusive_healthy(N.bound[0]));
        grant_exclusive("after", N.bound[0]);
        assert_int_equal(ann_logs(), 1);
}

/*
 * Two annotations on overlapping placements: the later is left out and logged; its GPU takes no
 * new partition (the next one goes to another MIG GPU), and a third bad Pod is logged on its own.
 */
static void test_annotation_overlapping(void **state)
{
        const struct tsr_accel_allocation first[1] = {partition(N.mig[0], "3g.40gb", 0, 4, 800000)};
        const struct tsr_accel_allocation second[1] = {
            partition(N.mig[0], "1g.10gb", 2, 1, 200000)};
        char *v1 = annotation_value(first, 1), *v2 = annotation_value(second, 1);
        struct tsr_accel_ledger ledger[GPUS];
        struct tsr_dp_device *list;
        struct tsr_dm_answer a;
        const char *ids[1];
        size_t n;

        (void)state;
        add_annotated_pod("first", v1);
        add_annotated_pod("second", v2);
        free(v1);
        free(v2);
        assert_int_equal(tsr_dm_agent_ledger(N.agent, ledger, NULL), 0);
        assert_int_equal(ledger[N.mig[0]].live.n, 1);
        assert_int_equal(ledger[N.mig[0]].allocated, 800000);
        assert_int_equal(ann_logs(), 1);
        expect_log(0, "uid-second", "cannot hold the recorded partition at slice 2");

        /* the fullest MIG GPU would be mig[0]; it is claimed beyond its ledger, so mig[1] */
        add_pod(&N, "mig", TSR_FAMILY_PARTITIONED,
                limits_of(TSR_FAMILY_PARTITIONED, 1, "1g.10gb", 200000), "Pending");
        assert_int_equal(tsr_dm_agent_devices(N.agent, TSR_FAMILY_PARTITIONED, &list, &n), 0);
        for (size_t k = 0; k < n; k++)
                assert_int_equal(list[k].healthy, list[k].accel != N.mig[0]);
        ids[0] = list[n - 1].id;
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_PARTITIONED, ids, 1, &a);
        free(list);
        assert_int_equal(a.code, TSR_DM_OK);
        {
                struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];

                assert_int_equal(instances(N.mig[0], in), 0);
                assert_int_equal(instances(N.mig[1], in), 1);
        }

        /* an annotation that does not decode: logged, and the GPU it names is held back */
        char garbled[256];

        snprintf(garbled, sizeof(garbled), "{\"main\": {\"devices\": \"%s\"",
                 N.caps[N.bound[3]].uuid);
        add_annotated_pod("garbled", garbled);
        assert_false(exclusive_healthy(N.bound[3]));
        assert_true(exclusive_healthy(N.bound[4]));
        assert_int_equal(ann_logs(), 2);
        expect_log(1, "uid-garbled", "does not decode");
}

/*
 * A held-back MIG GPU still gives a container its own instance: a partition carved, its
 * annotation never written, the device manager restarted (the reservation forgotten), then a bad
 * annotation naming that GPU: the retried Allocate reuses the instance there.
 */
static void test_annotation_held_back_reuse(void **state)
{
        const struct tsr_accel_allocation bad[1] = {whole(GPUS + 2)};
        struct tsr_accel_allocation named;
        struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];
        struct tsr_dm_answer a, again;
        char *v;

        (void)state;
        N.record_fail_every = 1; /* every annotation write fails */
        add_pod(&N, "mig", TSR_FAMILY_PARTITIONED,
                limits_of(TSR_FAMILY_PARTITIONED, 1, "3g.40gb", 800000), "Pending");
        allocate_one(TSR_FAMILY_PARTITIONED, N.mig[0], 0, &a);
        assert_int_equal(a.code, TSR_DM_OK);
        assert_int_equal(instances(N.mig[0], in), 1);
        assert_false(annotated("mig"));
        tsr_dm_agent_free(N.agent);
        assert_int_equal(tsr_dm_agent_new(N.caps, N.n_caps, &N.opts, &N.agent, NULL), 0);
        N.record_fail_every = 0;

        named = whole(N.mig[0]);
        named.index = GPUS + 2; /* by UUID only */
        v = annotation_value((const struct tsr_accel_allocation[]){bad[0], named}, 2);
        add_annotated_pod("bad", v);
        free(v);
        allocate_one(TSR_FAMILY_PARTITIONED, N.mig[1], 0, &again);
        assert_int_equal(again.code, TSR_DM_OK);
        assert_string_equal(again.pod, NS "/mig");
        assert_string_equal(again.visible, a.visible);
        assert_int_equal(instances(N.mig[0], in), 1);
        assert_int_equal(instances(N.mig[1], in), 0);
        assert_true(annotated("mig"));
        expect_log(0, "uid-bad", "names accelerator 10");
        /* a new container's instance is not carved on the held-back GPU, the fullest one */
        add_pod(&N, "next", TSR_FAMILY_PARTITIONED,
                limits_of(TSR_FAMILY_PARTITIONED, 1, "3g.40gb", 800000), "Pending");
        allocate_one(TSR_FAMILY_PARTITIONED, N.mig[0], 1, &a);
        assert_int_equal(a.code, TSR_DM_OK);
        assert_string_equal(a.pod, NS "/next");
        assert_int_equal(instances(N.mig[0], in), 1);
        assert_int_equal(instances(N.mig[1], in), 1);
}

/* ---- the grant journal and retried Allocates ----------------------------------------------- */

static char journal_dir[64];
static char journal_path[96];

/* A fresh journal path in a new temporary directory (the agent is made anew over it). */
static void use_journal(void)
{
        struct tsr_diag d;

        snprintf(journal_dir, sizeof(journal_dir), "/tmp/tsr-grants-XXXXXX");
        assert_non_null(mkdtemp(journal_dir));
        snprintf(journal_path, sizeof(journal_path), "%s/.tessera-grants.json", journal_dir);
        N.opts.grants_path = journal_path;
        tsr_dm_agent_free(N.agent);
        tsr_diag_clear(&d);
        assert_int_equal(tsr_dm_agent_new(N.caps, N.n_caps, &N.opts, &N.agent, &d), 0);
}

static void drop_journal(void)
{
        char cmd[160];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", journal_dir);
        assert_int_equal(system(cmd), 0);
}

/* How many grants the journal on disk holds (-1: no file). */
static int journaled(void)
{
        FILE *f = fopen(journal_path, "r");
        json_t *doc;
        int n;

        if (!f)
                return -1;
        doc = json_loadf(f, 0, NULL);
        fclose(f);
        assert_non_null(doc);
        n = (int)json_array_size(json_object_get(doc, "grants"));
        json_decref(doc);
        return n;
}

/* The process dies (kill -9: nothing is cleaned up) and a new one starts over the same state. */
static void crash_and_restart(void)
{
        struct tsr_diag d;

        tsr_dm_agent_free(N.agent);
        tsr_diag_clear(&d);
        assert_int_equal(tsr_dm_agent_new(N.caps, N.n_caps, &N.opts, &N.agent, &d), 0);
}

static void test_journal_survives_crash(void **state)
{
        char t[TSR_TOKEN_ID_MAX];
        const char *ids[1] = {token(t, TSR_FAMILY_EXCLUSIVE, N.bound[0], 0)};
        struct tsr_accel_ledger ledger[GPUS];
        struct tsr_dm_answer a;

        (void)state;
        use_journal();
        assert_int_equal(journaled(), -1);
        N.record_fail_every = 1; /* the annotation PATCH fails (the API server answers 500) */
        grant_exclusive("first", N.bound[0]);
        assert_false(annotated("first"));
        assert_int_equal(journaled(), 1);
        crash_and_restart();

        /* the grant is still charged: the card is not handed to the next Pod */
        assert_int_equal(tsr_dm_agent_ledger(N.agent, ledger, NULL), 0);
        assert_int_equal(ledger[N.bound[0]].mode, TSR_MODE_EXCLUSIVE);
        add_pod(&N, "second", TSR_FAMILY_EXCLUSIVE, limits_of(TSR_FAMILY_EXCLUSIVE, 1, NULL, 0),
                "Pending");
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_EXCLUSIVE, ids, 1, &a);
        assert_int_equal(a.code, TSR_DM_FAILED_PRECONDITION);
        assert_string_equal(a.reason, "no_capacity");
        assert_string_equal(a.pod, NS "/second");
        pthread_mutex_lock(&N.mu);
        delete_pod(find_pod(&N, "second")); /* the kubelet failed it */
        pthread_mutex_unlock(&N.mu);

        /* the API server heals: sync records the restored grant, then settles it */
        N.record_fail_every = 0;
        assert_int_equal(tsr_dm_agent_sync(N.agent), 0);
        assert_true(annotated("first"));
        assert_int_equal(tsr_dm_agent_sync(N.agent), 0);
        assert_int_equal(journaled(), 0);
        crash_and_restart(); /* nothing restored now: the annotation carries the grant */
        assert_int_equal(tsr_dm_agent_ledger(N.agent, ledger, NULL), 0);
        assert_int_equal(ledger[N.bound[0]].mode, TSR_MODE_EXCLUSIVE);
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_EXCLUSIVE, ids, 1, &a);
        assert_int_equal(a.code, TSR_DM_FAILED_PRECONDITION);

        /* the Pod gone while the journal still holds its grant: settled at the first list */
        N.record_fail_every = 1;
        grant_exclusive("third", N.bound[1]);
        assert_int_equal(journaled(), 1);
        pthread_mutex_lock(&N.mu);
        delete_pod(find_pod(&N, "third"));
        pthread_mutex_unlock(&N.mu);
        crash_and_restart();
        assert_int_equal(tsr_dm_agent_ledger(N.agent, ledger, NULL), 0);
        assert_int_equal(ledger[N.bound[1]].mode, TSR_MODE_NONE);
        assert_int_equal(journaled(), 0);
        drop_journal();
}

static void test_journal_unwritable(void **state)
{
        struct tsr_accel_ledger ledger[GPUS];
        char t[TSR_TOKEN_ID_MAX];
        const char *ids[1] = {token(t, TSR_FAMILY_EXCLUSIVE, N.bound[0], 0)};
        struct tsr_dm_answer a;

        (void)state;
        N.opts.grants_path = "/nonexistent-tsr-dir/.tessera-grants.json";
        crash_and_restart(); /* a missing journal is an empty one */
        add_pod(&N, "p", TSR_FAMILY_EXCLUSIVE, limits_of(TSR_FAMILY_EXCLUSIVE, 1, NULL, 0),
                "Pending");
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_EXCLUSIVE, ids, 1, &a);
        assert_int_equal(a.code, TSR_DM_INTERNAL);
        assert_string_equal(a.reason, "journal");
        assert_non_null(strstr(a.message, "cannot be made durable"));
        assert_non_null(strstr(a.message, "/nonexistent-tsr-dir/"));
        assert_false(annotated("p"));
        assert_int_equal(tsr_dm_agent_ledger(N.agent, ledger, NULL), 0);
        assert_int_equal(ledger[N.bound[0]].mode, TSR_MODE_NONE);
        assert_int_equal(tsr_dm_agent_sync(N.agent), 0); /* nothing reserved to record */
}

static void test_journal_refused(void **state)
{
        struct tsr_dm_agent *other = NULL;
        struct tsr_diag d;
        FILE *f;

        (void)state;
        use_journal();
        f = fopen(journal_path, "w");
        assert_non_null(f);
        fputs("{\"kind\":\"tessera.device-manager.grants\",\"version\":1,\"grants\":[{}]}", f);
        fclose(f);
        tsr_diag_clear(&d);
        assert_int_equal(tsr_dm_agent_new(N.caps, N.n_caps, &N.opts, &other, &d), TSR_EPARSE);
        assert_null(other);
        assert_non_null(strstr(d.msg, journal_path));
        assert_non_null(strstr(d.msg, "grant 0: \"podUID\""));
        /* a FIFO under the journal's name is refused, never waited on */
        assert_int_equal(unlink(journal_path), 0);
        assert_int_equal(mkfifo(journal_path, 0600), 0);
        tsr_diag_clear(&d);
        assert_int_equal(tsr_dm_agent_new(N.caps, N.n_caps, &N.opts, &other, &d), TSR_EPARSE);
        assert_non_null(strstr(d.msg, "a FIFO"));
        drop_journal();
}

static void test_retry_served_again(void **state)
{
        char t[2][TSR_TOKEN_ID_MAX];
        const char *ids[1] = {token(t[0], TSR_FAMILY_EXCLUSIVE, N.bound[0], 0)};
        const char *other[1] = {token(t[1], TSR_FAMILY_EXCLUSIVE, N.bound[1], 0)};
        struct tsr_accel_ledger ledger[GPUS];
        const char *avail[3], *pref[1];
        struct tsr_dm_answer a;
        size_t n = 0;

        (void)state;
        N.kubelet_lists_all = true;
        grant_exclusive("lost", N.bound[0]);
        assert_true(annotated("lost"));
        crash_and_restart(); /* the answer never reached the kubelet */

        /* the kubelet prepares the retry: offered exactly what was granted */
        avail[0] = other[0];
        avail[1] = ids[0];
        avail[2] = token(t[1], TSR_FAMILY_EXCLUSIVE, N.bound[2], 0);
        assert_int_equal(
            tsr_dm_agent_preferred(N.agent, TSR_FAMILY_EXCLUSIVE, avail, 3, NULL, 0, 1, pref, &n),
            0);
        assert_int_equal(n, 1);
        assert_string_equal(pref[0], ids[0]);
        /* and asks again: served from the grant, nothing charged anew */
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_EXCLUSIVE, ids, 1, &a);
        assert_int_equal(a.code, TSR_DM_OK);
        assert_string_equal(a.pod, NS "/lost");
        assert_string_equal(a.visible, N.caps[N.bound[0]].uuid);
        assert_int_equal(tsr_dm_agent_ledger(N.agent, ledger, NULL), 0);
        assert_int_equal(ledger[N.bound[0]].allocated, TSR_UNITS_PER_ACCEL);
        /* other IDs, the kubelet still listing it waiting: that container asking again for
         * other devices, refused, nothing granted */
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_EXCLUSIVE, other, 1, &a);
        assert_int_equal(a.code, TSR_DM_FAILED_PRECONDITION);
        assert_string_equal(a.reason, "retry_mismatch");
        /* once the kubelet lists the container holding its device, it is no retry */
        snprintf(N.held_pod, sizeof(N.held_pod), "lost");
        N.held_resource = "nvidia.com/gpu";
        N.held_ids[0] = ids[0];
        N.n_held_ids = 1;
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_EXCLUSIVE, (const char *const[]){avail[2]}, 1,
                              &a);
        assert_int_equal(a.code, TSR_DM_FAILED_PRECONDITION);
        assert_int_equal(tsr_dm_agent_ledger(N.agent, ledger, NULL), 0);
        assert_int_equal(ledger[N.bound[2]].mode, TSR_MODE_NONE);
}

/*
 * A container whose answer a crash lost, asked again for other devices while a younger one waits:
 * the kubelet admits oldest first, so the Allocate is the granted container's. Naming the younger
 * one would grant it devices the kubelet gives the older: refused, nothing granted, and the
 * younger one is served once the older has its answer. A preference with the Pods unknown cannot
 * name the retried container: nothing is offered.
 */
static void test_retry_other_ids(void **state)
{
        char t[3][TSR_TOKEN_ID_MAX];
        const char *ids[1] = {token(t[0], TSR_FAMILY_EXCLUSIVE, N.bound[0], 0)};
        const char *other[1] = {token(t[1], TSR_FAMILY_EXCLUSIVE, N.bound[1], 0)};
        const char *avail[2] = {other[0], ids[0]}, *pref[1];
        struct tsr_accel_ledger ledger[GPUS];
        struct tsr_dm_answer a;
        size_t n = 0;

        (void)state;
        use_journal();
        N.kubelet_lists_all = true;
        add_pod(&N, "lost", TSR_FAMILY_EXCLUSIVE, limits_of(TSR_FAMILY_EXCLUSIVE, 1, NULL, 0),
                "Pending");
        N.record_fail_every = 1; /* the answer and the annotation both lost: the journal has it */
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_EXCLUSIVE, ids, 1, &a);
        assert_int_equal(a.code, TSR_DM_OK);
        crash_and_restart();
        add_pod(&N, "young", TSR_FAMILY_EXCLUSIVE, limits_of(TSR_FAMILY_EXCLUSIVE, 1, NULL, 0),
                "Pending");

        N.pods_unlisted = true;
        assert_int_equal(
            tsr_dm_agent_preferred(N.agent, TSR_FAMILY_EXCLUSIVE, avail, 2, NULL, 0, 1, pref, &n),
            TSR_EIO);
        N.pods_unlisted = false;

        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_EXCLUSIVE, other, 1, &a);
        assert_int_equal(a.code, TSR_DM_FAILED_PRECONDITION);
        assert_string_equal(a.reason, "retry_mismatch");
        assert_string_equal(a.pod, NS "/lost");
        assert_non_null(strstr(a.message, ids[0]));
        assert_int_equal(tsr_dm_agent_ledger(N.agent, ledger, NULL), 0);
        assert_int_equal(ledger[N.bound[1]].mode, TSR_MODE_NONE);
        assert_false(annotated("young"));

        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_EXCLUSIVE, ids, 1, &a);
        assert_int_equal(a.code, TSR_DM_OK);
        assert_string_equal(a.pod, NS "/lost");
        snprintf(N.held_pod, sizeof(N.held_pod), "lost");
        N.held_resource = "nvidia.com/gpu";
        N.held_ids[0] = ids[0];
        N.n_held_ids = 1;
        N.record_fail_every = 0;
        tsr_dm_agent_allocate(N.agent, TSR_FAMILY_EXCLUSIVE, other, 1, &a);
        assert_int_equal(a.code, TSR_DM_OK);
        assert_string_equal(a.pod, NS "/young");
        assert_int_equal(tsr_dm_agent_sync(N.agent), 0);
        assert_true(annotated("lost"));
        assert_true(annotated("young"));
        drop_journal();
}

static void test_retry_partition(void **state)
{
        struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];
        struct tsr_dm_answer a, again;

        (void)state;
        use_journal();
        N.kubelet_lists_all = true;
        N.record_fail_every = 1; /* not even recorded: the journal alone carries it */
        add_pod(&N, "mig", TSR_FAMILY_PARTITIONED,
                limits_of(TSR_FAMILY_PARTITIONED, 1, "3g.40gb", 800000), "Pending");
        allocate_one(TSR_FAMILY_PARTITIONED, N.mig[0], 0, &a);
        assert_int_equal(a.code, TSR_DM_OK);
        assert_false(annotated("mig"));
        crash_and_restart();
        /* another partition token is not that grant's: the container asked again for other
         * devices is refused, nothing carved */
        allocate_one(TSR_FAMILY_PARTITIONED, N.mig[1], 3, &again);
        assert_int_equal(again.code, TSR_DM_FAILED_PRECONDITION);
        assert_string_equal(again.reason, "retry_mismatch");
        /* the same token: the same instance, served again */
        allocate_one(TSR_FAMILY_PARTITIONED, N.mig[0], 0, &again);
        assert_int_equal(again.code, TSR_DM_OK);
        assert_string_equal(again.pod, NS "/mig");
        assert_string_equal(again.visible, a.visible);
        assert_int_equal(instances(N.mig[0], in), 1);
        assert_int_equal(instances(N.mig[1], in), 0);
        assert_int_equal(markers(), 1);
        N.record_fail_every = 0;
        assert_int_equal(tsr_dm_agent_sync(N.agent), 0);
        assert_true(annotated("mig"));
        drop_journal();
}

/* ---- concurrent ---------------------------------------------------------------------------- */

/* xorshift64*: one deterministic sequence per thread. */
static unsigned draw(uint64_t *s, unsigned n)
{
        *s ^= *s >> 12;
        *s ^= *s << 25;
        *s ^= *s >> 27;
        return (unsigned)((*s * UINT64_C(0x2545F4914F6CDD1D)) >> 33) % n;
}

struct worker {
        pthread_t th;
        unsigned id;
        uint64_t rng;
        unsigned grants[FAMILIES], refusals[FAMILIES];
};

/* Notes the grant a of family f: its Pod granted once, with what was injected. */
static void note_grant(struct node *n, const struct tsr_dm_answer *a, enum tsr_family f)
{
        struct pod *p;

        pthread_mutex_lock(&n->mu);
        p = answered_pod(n, a);
        if (p && p->f != f)
                violation(n, "Pod %s of family %s granted as %s", p->name, tsr_family_name(p->f),
                          tsr_family_name(f));
        else if (p && p->granted)
                violation(n, "Pod %s granted twice (%s then %s)", p->name, p->visible, a->visible);
        else if (p) {
                p->granted = true;
                snprintf(p->visible, sizeof(p->visible), "%s", a->visible);
        }
        pthread_mutex_unlock(&n->mu);
}

static void *worker_main(void *arg)
{
        struct worker *w = arg;

        for (unsigned i = 0; i < ALLOCS_PER_WORKER; i++) {
                unsigned fam = draw(&w->rng, FAMILIES), count = 1, c0, c1, prof, share;
                enum tsr_family f = families[fam];
                char name[32], t[2][TSR_TOKEN_ID_MAX];
                const char *ids[2] = {t[0], t[1]};
                struct tsr_dm_answer a;
                struct pod *p;

                snprintf(name, sizeof(name), "w%u-%03u", w->id, i);
                /* two distinct cards out of MIG mode, or one MIG card */
                c0 = draw(&w->rng, N.n_bound);
                c1 = (c0 + 1 + draw(&w->rng, N.n_bound - 1)) % N.n_bound;
                switch (f) {
                case TSR_FAMILY_EXCLUSIVE:
                case TSR_FAMILY_SHARED:
                        count = 1 + draw(&w->rng, 2);
                        share = f == TSR_FAMILY_SHARED ? TSR_SHARES_PER_ACCEL : 1;
                        token(t[0], f, N.bound[c0], draw(&w->rng, share));
                        token(t[1], f, N.bound[c1], draw(&w->rng, share));
                        add_pod(&N, name, f, limits_of(f, count, NULL, 0), "Pending");
                        break;
                case TSR_FAMILY_SLICED:
                        token(t[0], f, N.bound[c0], draw(&w->rng, N.caps[N.bound[c0]].slice_slots));
                        add_pod(&N, name, f,
                                limits_of(f, 1, NULL, 200000 * (int64_t)(1 + draw(&w->rng, 4))),
                                "Pending");
                        break;
                default:
                        prof = draw(&w->rng, sizeof(profiles) / sizeof(profiles[0]));
                        token(t[0], f, N.mig[draw(&w->rng, N.n_mig)], draw(&w->rng, 7));
                        add_pod(&N, name, f,
                                limits_of(f, 1, profiles[prof].name, profiles[prof].units),
                                "Pending");
                }
                tsr_dm_agent_allocate(N.agent, f, ids, count, &a);
                if (a.code == TSR_DM_OK) {
                        note_grant(&N, &a, f);
                        w->grants[fam]++;
                } else {
                        if (a.code != TSR_DM_FAILED_PRECONDITION)
                                violation(&N, "%s Allocate refused with code %d: %s",
                                          tsr_family_name(f), a.code, a.message);
                        w->refusals[fam]++;
                }
                /* a Pod that got nothing goes away (another call may be granting it now) */
                pthread_mutex_lock(&N.mu);
                p = find_pod(&N, name);
                if (p && !p->granted)
                        delete_pod(p);
                pthread_mutex_unlock(&N.mu);
                nap(100); /* the deleter keeps up: cards come free for every family */
        }
        return NULL;
}

struct sweeper {
        pthread_t th;
        atomic_bool *done;
        uint64_t rng;
        unsigned deleted, passes, destroyed;
};

/*
 * Deletes random granted Pods until at most LIVE_MAX are left (cards keep coming free, so every
 * family is granted now and then), then one reclaim pass and a sync; until done.
 */
static void *deleter_main(void *arg)
{
        struct sweeper *s = arg;

        while (!atomic_load(s->done)) {
                struct tsr_mig_pass_stats st = {0};
                struct tsr_diag d;
                size_t live = 0;

                pthread_mutex_lock(&N.mu);
                for (size_t i = 0; i < N.n_pods; i++)
                        live += N.pods[i].obj && N.pods[i].granted;
                for (; live > LIVE_MAX; live--) {
                        size_t k = draw(&s->rng, (unsigned)live);

                        for (size_t i = 0; i < N.n_pods; i++)
                                if (N.pods[i].obj && N.pods[i].granted && k-- == 0) {
                                        delete_pod(&N.pods[i]);
                                        s->deleted++;
                                        break;
                                }
                }
                pthread_mutex_unlock(&N.mu);
                tsr_diag_clear(&d);
                if (tsr_dm_agent_reclaim(N.agent, N.reclaimer, &st, &d))
                        violation(&N, "a reclaim pass failed: %s", d.msg);
                s->passes++;
                s->destroyed += st.destroyed;
                tsr_dm_agent_sync(N.agent);
                nap(100);
        }
        return NULL;
}

/* Per card: what the live Pods' annotations hold. */
struct use {
        unsigned modes; /* bit m: some entry in mode m */
        unsigned exclusive, shared, sliced;
        int64_t sliced_units;
        uint32_t span; /* partitions' memory slices */
};

/* The annotation entry a of a live Pod: charged to use[], checked against the card. */
static void book(struct node *n, const struct pod *p, const struct tsr_accel_allocation *aa,
                 struct use *use)
{
        const struct tsr_accel_cap *cap = &n->caps[aa->index];
        struct use *u = &use[aa->index];
        uint32_t span;

        u->modes |= 1u << aa->mode;
        switch (aa->mode) {
        case TSR_MODE_EXCLUSIVE:
                u->exclusive++;
                break;
        case TSR_MODE_SHARED:
                u->shared++;
                break;
        case TSR_MODE_SLICED:
                u->sliced++;
                u->sliced_units += aa->allocated;
                break;
        case TSR_MODE_PARTITIONED:
                span = tsr_geometry_span(aa->start, aa->length);
                if (!cap->partitioned)
                        violation(n, "Pod %s holds a partition of card %u out of MIG mode", p->name,
                                  aa->index);
                if (u->span & span)
                        violation(n, "Pod %s's partition %u+%u on card %u overlaps another",
                                  p->name, aa->start, aa->length, aa->index);
                u->span |= span;
                return;
        default:
                violation(n, "Pod %s holds card %u in mode %d", p->name, aa->index, aa->mode);
                return;
        }
        if (cap->partitioned)
                violation(n, "Pod %s holds MIG card %u in %s mode", p->name, aa->index,
                          tsr_mode_name(aa->mode));
}

static void check_cards(struct node *n, const struct use *use)
{
        for (unsigned g = 0; g < n->n_caps; g++) {
                const struct use *u = &use[g];

                if (__builtin_popcount(u->modes) > 1)
                        violation(n, "card %u held in two modes (mask %#x)", g, u->modes);
                if (u->exclusive > 1)
                        violation(n, "card %u held exclusively by %u Pods", g, u->exclusive);
                if (u->shared > TSR_SHARES_PER_ACCEL)
                        violation(n, "card %u holds %u shares", g, u->shared);
                if (u->sliced > n->caps[g].slice_slots || u->sliced_units > TSR_UNITS_PER_ACCEL)
                        violation(n, "card %u holds %u slices of %lld units", g, u->sliced,
                                  (long long)u->sliced_units);
        }
}

/* The live partition entries' instances on the GPUs. Under mu, takes gpu_mu. */
static void check_gpus(struct node *n, const struct tsr_accel_allocation *const *parts,
                       size_t n_parts)
{
        struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];

        pthread_mutex_lock(&n->gpu_mu);
        for (unsigned g = 0; g < n->n_caps; g++) {
                size_t k = 0;
                uint32_t seen = 0;

                if (tsr_fake_gpu_ops.gi_list(n->fake, g, in, TSR_GPU_INSTANCES_MAX, &k))
                        violation(n, "GPU %u cannot be listed", g);
                if (k && !n->caps[g].partitioned)
                        violation(n, "GPU %u is out of MIG mode but holds %zu instances", g, k);
                for (size_t x = 0; x < k; x++) {
                        uint32_t span = tsr_geometry_span(in[x].start, in[x].size);

                        if (seen & span)
                                violation(n, "GPU %u: instance %u at %u overlaps another", g,
                                          in[x].gi_id, in[x].start);
                        seen |= span;
                }
                for (size_t i = 0; i < n_parts; i++) {
                        bool live = false;

                        for (size_t x = 0; x < k && parts[i]->index == g; x++)
                                live |= !strcmp(in[x].mig_uuid, parts[i]->physical_id) &&
                                        in[x].start == parts[i]->start &&
                                        in[x].size == parts[i]->length;
                        if (parts[i]->index == g && !live)
                                violation(n, "GPU %u: granted MIG device %s is not live at %u", g,
                                          parts[i]->physical_id, parts[i]->start);
                }
        }
        pthread_mutex_unlock(&n->gpu_mu);
}

/* One Pod's annotation (na entries) against what its grant answered. */
static void check_pod(struct node *n, const struct pod *p,
                      const struct tsr_container_allocation *alloc, size_t na)
{
        char injected[TSR_DP_VISIBLE_MAX] = "";

        if (na == SIZE_MAX || na > 1 || (na == 1 && strcmp(alloc[0].container, "main"))) {
                violation(n, "Pod %s's annotation is not one entry for container main", p->name);
                return;
        }
        if (!p->granted)
                return; /* recorded before the grant is noted, or refused */
        if (na == 0) {
                if (!p->unrecorded) /* else sync retries the write */
                        violation(n, "Pod %s was granted but its annotation is missing", p->name);
                return;
        }
        for (size_t x = 0; x < alloc[0].n; x++) {
                const struct tsr_accel_allocation *aa = &alloc[0].accels[x];

                snprintf(injected + strlen(injected), sizeof(injected) - strlen(injected), "%s%s",
                         x ? "," : "", aa->mode == TSR_MODE_PARTITIONED ? aa->physical_id : aa->id);
        }
        if (strcmp(injected, p->visible))
                violation(n, "Pod %s was answered %s but records %s", p->name, p->visible,
                          injected);
}

/*
 * The invariants over the live Pods' annotations and the GPUs, as of one moment (under mu, so no
 * Pod changes, and the GPUs under gpu_mu). With ledger (quiescent): also the ledger rebuilt from
 * those annotations equals it.
 */
static void check_pods(struct node *n, const struct tsr_accel_ledger *ledger)
{
        /* a Pod's annotation decodes into alloc[n_alloc..n_alloc + 2) */
        struct tsr_container_allocation *alloc = malloc((PODS_MAX + 1) * sizeof(*alloc));
        const struct tsr_accel_allocation **parts =
            malloc(PODS_MAX * TSR_ALLOC_ACCELS_MAX * sizeof(*parts));
        struct tsr_alloc_record *recs = malloc(PODS_MAX * TSR_ALLOC_ACCELS_MAX * sizeof(*recs));
        struct tsr_accel_ledger rebuilt[GPUS];
        struct use use[GPUS] = {0};
        size_t n_alloc = 0, n_parts = 0, nrec = 0;

        if (!alloc || !parts || !recs) {
                violation(n, "out of memory");
                goto out;
        }
        pthread_mutex_lock(&n->mu);
        for (size_t i = 0; i < n->n_pods; i++) {
                struct pod *p = &n->pods[i];
                size_t na;

                if (!p->obj)
                        continue;
                na = annotation_of(p, &alloc[n_alloc], 2);
                check_pod(n, p, &alloc[n_alloc], na);
                if (na != 1 || strcmp(alloc[n_alloc].container, "main"))
                        continue;
                for (size_t x = 0; x < alloc[n_alloc].n; x++) {
                        const struct tsr_accel_allocation *aa = &alloc[n_alloc].accels[x];

                        if (aa->index >= n->n_caps || strcmp(aa->id, n->caps[aa->index].uuid)) {
                                violation(n, "Pod %s names card %u as %s", p->name, aa->index,
                                          aa->id);
                                continue;
                        }
                        for (size_t y = 0; y < x; y++)
                                if (alloc[n_alloc].accels[y].index == aa->index)
                                        violation(n, "Pod %s holds card %u twice", p->name,
                                                  aa->index);
                        book(n, p, aa, use);
                        if (aa->mode != TSR_MODE_PARTITIONED)
                                continue;
                        for (size_t k = 0; k < n_parts; k++)
                                if (!strcmp(parts[k]->physical_id, aa->physical_id))
                                        violation(n, "MIG device %s granted twice (Pod %s)",
                                                  aa->physical_id, p->name);
                        parts[n_parts++] = aa;
                }
                if (tsr_alloc_annotation_records(&alloc[n_alloc], 1, n->caps[0].product, false,
                                                 recs, PODS_MAX * TSR_ALLOC_ACCELS_MAX, &nrec))
                        violation(n, "Pod %s's annotation cannot be charged", p->name);
                n_alloc++;
        }
        check_cards(n, use);
        check_gpus(n, parts, n_parts);
        pthread_mutex_unlock(&n->mu);
        if (!ledger)
                goto out;
        if (tsr_ledger_build(n->caps, n->n_caps, recs, nrec, rebuilt, NULL))
                violation(n, "the annotations do not build a ledger");
        for (unsigned g = 0; g < n->n_caps; g++)
                if (rebuilt[g].mode != ledger[g].mode ||
                    rebuilt[g].allocated != ledger[g].allocated ||
                    rebuilt[g].allocated_slices != ledger[g].allocated_slices ||
                    rebuilt[g].live.n != ledger[g].live.n)
                        violation(n,
                                  "card %u: the ledger (%s, %lld) is not the annotations' (%s, "
                                  "%lld)",
                                  g, tsr_mode_name(ledger[g].mode), (long long)ledger[g].allocated,
                                  tsr_mode_name(rebuilt[g].mode), (long long)rebuilt[g].allocated);
out:
        free(alloc);
        free(parts);
        free(recs);
}

/*
 * Every family's device list: tokens of this node's cards in order, partitioned tokens only on
 * MIG cards and bound ones only off them. With ledger (quiescent): the lists are that ledger's.
 */
static void check_devices(struct node *n, const struct tsr_accel_ledger *ledger)
{
        const struct tsr_dp_node *node = tsr_dm_agent_node(n->agent);

        for (size_t i = 0; i < TSR_DP_FAMILIES; i++) {
                enum tsr_family f = tsr_dp_families[i];
                struct tsr_dp_device *list = NULL, *want = NULL;
                size_t k = 0, m = 0;

                if (tsr_dm_agent_devices(n->agent, f, &list, &k)) {
                        violation(n, "the %s device list failed", tsr_family_name(f));
                        continue;
                }
                for (size_t x = 0; x < k; x++) {
                        char dev[TSR_UUID_MAX];
                        unsigned idx, a = list[x].accel;

                        if (a >= n->n_caps || tsr_token_parse(list[x].id, node->group, dev, &idx) ||
                            strcmp(dev, n->caps[a].uuid) || (x && a < list[x - 1].accel) ||
                            (f != TSR_FAMILY_VISIBILITY &&
                             n->caps[a].partitioned != (f == TSR_FAMILY_PARTITIONED))) {
                                violation(n, "%s token %s of card %u is out of place",
                                          tsr_family_name(f), list[x].id, a);
                                break;
                        }
                }
                if (ledger && (tsr_dp_devices(node, ledger, f, &want, &m) ||
                               !tsr_dp_devices_equal(list, k, want, m)))
                        violation(n, "the %s device list is not the ledger's", tsr_family_name(f));
                free(list);
                free(want);
        }
}

/* Every invariant once; with quiescent, also the cross-checks that need the node at rest. */
static void check_node(struct node *n, bool quiescent)
{
        struct tsr_accel_ledger ledger[GPUS];
        struct tsr_diag d;

        tsr_diag_clear(&d);
        if (tsr_dm_agent_ledger(n->agent, ledger, &d)) {
                violation(n, "the ledger cannot be built: %s", d.msg);
                return;
        }
        for (unsigned g = 0; g < n->n_caps; g++)
                if (tsr_ledger_check(&n->caps[g], &ledger[g], &d))
                        violation(n, "%s", d.msg);
        check_devices(n, quiescent ? ledger : NULL);
        check_pods(n, quiescent ? ledger : NULL);
}

static void *checker_main(void *arg)
{
        struct sweeper *s = arg;

        do {
                check_node(&N, false);
                s->passes++;
                nap(100);
        } while (!atomic_load(s->done));
        return NULL;
}

static void test_concurrent_allocate(void **state)
{
        struct worker w[WORKERS];
        struct sweeper deleter = {0}, checker = {0};
        struct tsr_accel_ledger ledger[GPUS];
        struct tsr_gpu_instance in[TSR_GPU_INSTANCES_MAX];
        unsigned grants[FAMILIES] = {0}, refusals[FAMILIES] = {0}, total_g = 0, total_r = 0;
        unsigned destroyed;
        atomic_bool done;
        struct timespec t0, t1;

        (void)state;
        N.record_lag_us = 200;
        N.record_fail_every = 7;
        atomic_init(&done, false);
        deleter.done = checker.done = &done;
        deleter.rng = UINT64_C(0xde1e7e);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        assert_int_equal(pthread_create(&deleter.th, NULL, deleter_main, &deleter), 0);
        assert_int_equal(pthread_create(&checker.th, NULL, checker_main, &checker), 0);
        for (unsigned i = 0; i < WORKERS; i++) {
                memset(&w[i], 0, sizeof(w[i]));
                w[i].id = i;
                w[i].rng = UINT64_C(0x9e3779b97f4a7c15) * (i + 1);
                assert_int_equal(pthread_create(&w[i].th, NULL, worker_main, &w[i]), 0);
        }
        for (unsigned i = 0; i < WORKERS; i++) {
                pthread_join(w[i].th, NULL);
                for (unsigned f = 0; f < FAMILIES; f++) {
                        grants[f] += w[i].grants[f];
                        refusals[f] += w[i].refusals[f];
                }
        }
        atomic_store(&done, true);
        pthread_join(deleter.th, NULL);
        pthread_join(checker.th, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        for (unsigned f = 0; f < FAMILIES; f++) {
                print_message("# %-11s granted %3u refused %3u\n", tsr_family_name(families[f]),
                              grants[f], refusals[f]);
                total_g += grants[f];
                total_r += refusals[f];
        }
        print_message("# %u Allocates, %u granted, %u refused; %u records (%u failed), %u deleted, "
                      "%u reclaim passes, %u checks, %.2f s\n",
                      total_g + total_r, total_g, total_r, atomic_load(&N.records),
                      atomic_load(&N.record_failures), deleter.deleted, deleter.passes,
                      checker.passes,
                      (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
        assert_no_violation(&N);
        assert_int_equal(total_g + total_r, WORKERS * ALLOCS_PER_WORKER);
        assert_true(total_g > 0);
        assert_true(total_r > 0);
        assert_true(atomic_load(&N.record_failures) > 0);
        assert_true(checker.passes > 0);
        for (unsigned f = 0; f < FAMILIES; f++)
                assert_true(grants[f] > 0);

        /* at rest: nothing left to record, and the ledger and lists are the annotations' */
        assert_int_equal(tsr_dm_agent_sync(N.agent), 0);
        check_node(&N, true);
        assert_no_violation(&N);

        /* every Pod deleted: the ledger empties and the debounce reclaims every instance */
        pthread_mutex_lock(&N.mu);
        for (size_t i = 0; i < N.n_pods; i++)
                delete_pod(&N.pods[i]);
        pthread_mutex_unlock(&N.mu);
        assert_int_equal(tsr_dm_agent_ledger(N.agent, ledger, NULL), 0);
        for (unsigned g = 0; g < GPUS; g++) {
                assert_int_equal(ledger[g].mode, TSR_MODE_NONE);
                assert_int_equal(ledger[g].allocated, 0);
        }
        destroyed = deleter.destroyed;
        for (int i = 0; i < TSR_MIG_RECLAIM_MAX_MISSES; i++) {
                struct tsr_mig_pass_stats st;

                assert_int_equal(tsr_dm_agent_reclaim(N.agent, N.reclaimer, &st, NULL), 0);
                destroyed += st.destroyed;
        }
        for (unsigned g = 0; g < GPUS; g++)
                assert_int_equal(instances(g, in), 0);
        assert_int_equal(markers(), 0);
        assert_int_equal(destroyed, grants[3]); /* each granted partition carved one instance */
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_exclusive_pair, setup, teardown),
            cmocka_unit_test_setup_teardown(test_shared_on_exclusive_card, setup, teardown),
            cmocka_unit_test_setup_teardown(test_foreign_token, setup, teardown),
            cmocka_unit_test_setup_teardown(test_duplicate_ids, setup, teardown),
            cmocka_unit_test_setup_teardown(test_partition_carved_and_reclaimed, setup, teardown),
            cmocka_unit_test_setup_teardown(test_no_pending_container, setup, teardown),
            cmocka_unit_test_setup_teardown(test_preferred_slice_fits, setup, teardown),
            cmocka_unit_test_setup_teardown(test_preferred_slice_unidentified, setup, teardown),
            cmocka_unit_test_setup_teardown(test_visibility_own_pod, setup, teardown),
            cmocka_unit_test_setup_teardown(test_visibility_partition_grant, setup, teardown),
            cmocka_unit_test_setup_teardown(test_visibility_partition_no_marker, setup, teardown),
            cmocka_unit_test_setup_teardown(test_visibility_partition_foreign_gpu, setup, teardown),
            cmocka_unit_test_setup_teardown(test_visibility_partition_unoffered_profile, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_visibility_partition_mig_off, setup, teardown),
            cmocka_unit_test_setup_teardown(test_visibility_partition_instance_gone, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_visibility_partition_recreated, setup, teardown),
            cmocka_unit_test_setup_teardown(test_annotation_past_the_gpus, setup, teardown),
            cmocka_unit_test_setup_teardown(test_annotation_overlapping, setup, teardown),
            cmocka_unit_test_setup_teardown(test_annotation_held_back_reuse, setup, teardown),
            cmocka_unit_test_setup_teardown(test_journal_survives_crash, setup, teardown),
            cmocka_unit_test_setup_teardown(test_journal_unwritable, setup, teardown),
            cmocka_unit_test_setup_teardown(test_journal_refused, setup, teardown),
            cmocka_unit_test_setup_teardown(test_retry_served_again, setup, teardown),
            cmocka_unit_test_setup_teardown(test_retry_other_ids, setup, teardown),
            cmocka_unit_test_setup_teardown(test_retry_partition, setup, teardown),
            cmocka_unit_test_setup_teardown(test_streams, setup, teardown),
            cmocka_unit_test_setup_teardown(test_slice_isolation, setup, teardown),
            cmocka_unit_test_setup_teardown(test_concurrent_allocate, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
