/*
 * plugin.c - the device-plugin service of one family.
 */
#include "devicemanager/plugin.h"

#include "base/err.h"
#include "deviceplugin/v1beta1/api.pb-c.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VISIBLE_ENV "NVIDIA_VISIBLE_DEVICES"

struct watch {
        struct tsr_grpc_stream *stream; /* our reference */
        struct tsr_dp_device *sent;     /* the last list pushed */
        size_t n_sent;
        struct tsr_dp_shape *sent_shape; /* its shape (n_accel) */
        bool any_sent;
};

struct tsr_dm_plugin {
        struct tsr_dm_agent *agent;
        enum tsr_family family;
        struct tsr_dm_isolation isolation; /* what a slice's container gets (read-only) */
        char resource[TSR_KEY_MAX];
        struct tsr_grpc_method methods[5];
        struct tsr_grpc_service_table table;
        size_t n_accel;
        struct tsr_dp_tokens tokens; /* the family's token IDs, formatted once (read-only) */
        pthread_mutex_t mu;          /* guards watches and everything below */
        struct watch *watches;
        size_t n_watches;
        /* the family's list as of the last view read, kept and rewritten in place */
        struct tsr_dp_device *list;
        size_t n_list, cap_list;
        struct tsr_dp_shape *shape, *next; /* list's shape (when have_list); scratch */
        bool have_list;
};

/* protobuf-c's output sink appending to a struct tsr_buf. */
struct buf_sink {
        ProtobufCBuffer base;
        struct tsr_buf *out;
        int rc;
};

static void sink_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
        struct buf_sink *s = (struct buf_sink *)b;

        if (!s->rc)
                s->rc = tsr_buf_add(s->out, data, len);
}

static int packed(const ProtobufCMessage *m, struct tsr_buf *out)
{
        struct buf_sink s = {{sink_append}, out, 0};

        protobuf_c_message_pack_to_buffer(m, &s.base);
        return s.rc;
}

static void set_status(struct tsr_grpc_status *st, int code, const char *msg)
{
        st->code = code;
        snprintf(st->msg, sizeof(st->msg), "%s", msg);
}

/* ---- GetDevicePluginOptions, PreStartContainer --------------------------------------------- */

static int options(void *user, const uint8_t *req, size_t len, struct tsr_buf *resp,
                   struct tsr_grpc_status *st)
{
        V1beta1__DevicePluginOptions o;

        (void)user;
        (void)req;
        (void)len;
        (void)st;
        v1beta1__device_plugin_options__init(&o);
        o.pre_start_required = 0;
        o.get_preferred_allocation_available = 1;
        return packed(&o.base, resp);
}

static int pre_start(void *user, const uint8_t *req, size_t len, struct tsr_buf *resp,
                     struct tsr_grpc_status *st)
{
        V1beta1__PreStartContainerRequest *in =
            v1beta1__pre_start_container_request__unpack(NULL, len, req);
        V1beta1__PreStartContainerResponse o;

        (void)user;
        if (!in) {
                set_status(st, TSR_DM_INVALID_ARGUMENT, "malformed PreStartContainerRequest");
                return 0;
        }
        v1beta1__pre_start_container_request__free_unpacked(in, NULL);
        v1beta1__pre_start_container_response__init(&o);
        return packed(&o.base, resp);
}

/* ---- ListAndWatch --------------------------------------------------------------------------- */

/* The ListAndWatchResponse of list[0..n) into out (protobuf-c wants writable strings). */
static int encode_list(struct tsr_dp_device *list, size_t n, struct tsr_buf *out)
{
        static char healthy[] = "Healthy", unhealthy[] = "Unhealthy";
        V1beta1__ListAndWatchResponse r;
        V1beta1__Device *devs = calloc(n ? n : 1, sizeof(*devs));
        V1beta1__Device **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
        int rc;

        if (!devs || !ptrs) {
                free(devs);
                free(ptrs);
                return TSR_ENOMEM;
        }
        v1beta1__list_and_watch_response__init(&r);
        for (size_t i = 0; i < n; i++) {
                v1beta1__device__init(&devs[i]);
                devs[i].id = list[i].id;
                devs[i].health = list[i].healthy ? healthy : unhealthy;
                ptrs[i] = &devs[i];
        }
        r.n_devices = n;
        r.devices = ptrs;
        rc = packed(&r.base, out);
        free(devs);
        free(ptrs);
        return rc;
}

/*
 * Pushes p's list to w when it differs from what w last got: an equal shape is an equal list; a
 * shape that differs is compared list to list. msg: the list encoded, once (*encoded says so).
 * Under p->mu.
 */
static void push_if_changed(struct tsr_dm_plugin *p, struct watch *w, struct tsr_buf *msg,
                            bool *encoded)
{
        struct tsr_dp_device *keep;

        if (w->any_sent && tsr_dp_shape_equal(w->sent_shape, p->shape, p->n_accel))
                return;
        if (w->any_sent && tsr_dp_devices_equal(w->sent, w->n_sent, p->list, p->n_list)) {
                memcpy(w->sent_shape, p->shape, p->n_accel * sizeof(*p->shape));
                return;
        }
        if (!*encoded && encode_list(p->list, p->n_list, msg))
                return;
        *encoded = true;
        keep = malloc((p->n_list ? p->n_list : 1) * sizeof(*keep));
        if (!keep || tsr_grpc_stream_push(w->stream, (const uint8_t *)msg->ptr, msg->len)) {
                free(keep);
                return;
        }
        if (p->n_list) /* an empty family (no accelerator of it) has no list at all */
                memcpy(keep, p->list, p->n_list * sizeof(*keep));
        free(w->sent);
        w->sent = keep;
        w->n_sent = p->n_list;
        memcpy(w->sent_shape, p->shape, p->n_accel * sizeof(*p->shape));
        w->any_sent = true;
}

/*
 * Brings p's list to the agent's device view (rewritten only when its shape moved, from the IDs
 * formatted at creation) and pushes it to every stream that has not seen it. Reads no Pods.
 */
static void push_view(struct tsr_dm_plugin *p)
{
        struct tsr_buf msg;
        bool encoded = false;

        pthread_mutex_lock(&p->mu);
        if (tsr_dm_agent_view_shape(p->agent, p->family, p->next))
                goto out;
        if (!p->have_list || !tsr_dp_shape_equal(p->shape, p->next, p->n_accel)) {
                struct tsr_dp_shape *t = p->shape;

                if (tsr_dp_devices_update(&p->tokens, p->have_list ? p->shape : NULL, p->next,
                                          &p->list, &p->n_list, &p->cap_list))
                        goto out;
                p->shape = p->next;
                p->next = t;
                p->have_list = true;
        }
        tsr_buf_init(&msg);
        for (size_t i = 0; i < p->n_watches; i++)
                push_if_changed(p, &p->watches[i], &msg, &encoded);
        tsr_buf_release(&msg);
out:
        pthread_mutex_unlock(&p->mu);
}

void tsr_dm_plugin_refresh(struct tsr_dm_plugin *p)
{
        if (!tsr_dm_agent_refresh_view(p->agent))
                push_view(p);
}

static void on_agent_change(void *ctx)
{
        push_view(ctx);
}

static int list_and_watch(void *user, struct tsr_grpc_stream *stream, const uint8_t *req,
                          size_t len, struct tsr_grpc_status *st)
{
        struct tsr_dm_plugin *p = user;
        struct tsr_dp_shape *sent = malloc(p->n_accel * sizeof(*sent));
        struct watch *w;

        (void)req;
        (void)len;
        pthread_mutex_lock(&p->mu);
        w = sent ? realloc(p->watches, (p->n_watches + 1) * sizeof(*w)) : NULL;
        if (!w) {
                pthread_mutex_unlock(&p->mu);
                free(sent);
                set_status(st, TSR_DM_INTERNAL, "device manager: out of memory");
                return 0;
        }
        p->watches = w;
        tsr_grpc_stream_ref(stream);
        p->watches[p->n_watches++] = (struct watch){stream, NULL, 0, sent, false};
        pthread_mutex_unlock(&p->mu);
        tsr_dm_plugin_refresh(p);
        return 0;
}

static void stream_closed(void *user, struct tsr_grpc_stream *stream, enum tsr_grpc_stream_end why)
{
        struct tsr_dm_plugin *p = user;

        (void)why;
        pthread_mutex_lock(&p->mu);
        for (size_t i = 0; i < p->n_watches; i++) {
                if (p->watches[i].stream != stream)
                        continue;
                free(p->watches[i].sent);
                free(p->watches[i].sent_shape);
                tsr_grpc_stream_unref(stream);
                p->watches[i] = p->watches[--p->n_watches];
                break;
        }
        pthread_mutex_unlock(&p->mu);
}

void tsr_dm_plugin_end_streams(struct tsr_dm_plugin *p)
{
        static const struct tsr_grpc_status ok = {0};

        pthread_mutex_lock(&p->mu);
        for (size_t i = 0; i < p->n_watches; i++)
                tsr_grpc_stream_finish(p->watches[i].stream, &ok);
        pthread_mutex_unlock(&p->mu);
}

/* ---- GetPreferredAllocation ---------------------------------------------------------------- */

static int preferred(void *user, const uint8_t *req, size_t len, struct tsr_buf *resp,
                     struct tsr_grpc_status *st)
{
        struct tsr_dm_plugin *p = user;
        V1beta1__PreferredAllocationRequest *in =
            v1beta1__preferred_allocation_request__unpack(NULL, len, req);
        V1beta1__PreferredAllocationResponse out;
        V1beta1__ContainerPreferredAllocationResponse *cr = NULL, **crp = NULL;
        const char **chosen = NULL;
        size_t n_in;
        int rc = 0;

        if (!in) {
                set_status(st, TSR_DM_INVALID_ARGUMENT, "malformed PreferredAllocationRequest");
                return 0;
        }
        n_in = in->n_container_requests;
        v1beta1__preferred_allocation_response__init(&out);
        cr = calloc(n_in ? n_in : 1, sizeof(*cr));
        crp = calloc(n_in ? n_in : 1, sizeof(*crp));
        for (size_t i = 0; cr && crp && i < n_in && !rc; i++) {
                V1beta1__ContainerPreferredAllocationRequest *c = in->container_requests[i];
                size_t size = c->allocation_size > 0 ? (size_t)c->allocation_size : 0, n = 0;

                v1beta1__container_preferred_allocation_response__init(&cr[i]);
                crp[i] = &cr[i];
                free(chosen);
                chosen = calloc(size ? size : 1, sizeof(*chosen));
                if (!chosen) {
                        rc = TSR_ENOMEM;
                        break;
                }
                rc = tsr_dm_agent_preferred(
                    p->agent, p->family, (const char *const *)c->available_deviceids,
                    c->n_available_deviceids, (const char *const *)c->must_include_deviceids,
                    c->n_must_include_deviceids, (unsigned)size, chosen, &n);
                /* the answer's strings point into the request, which outlives the packing */
                cr[i].deviceids = calloc(n ? n : 1, sizeof(char *));
                if (!cr[i].deviceids) {
                        rc = TSR_ENOMEM;
                        break;
                }
                for (size_t k = 0; k < n; k++)
                        for (size_t j = 0;
                             j < c->n_available_deviceids + c->n_must_include_deviceids; j++) {
                                char *cand =
                                    j < c->n_available_deviceids
                                        ? c->available_deviceids[j]
                                        : c->must_include_deviceids[j - c->n_available_deviceids];

                                if (cand == chosen[k]) {
                                        cr[i].deviceids[cr[i].n_deviceids++] = cand;
                                        break;
                                }
                        }
        }
        if (!cr || !crp)
                rc = TSR_ENOMEM;
        if (rc == TSR_EIO) {
                set_status(st, TSR_DM_UNAVAILABLE,
                           "the Pods bound to this node could not be listed from the API server, "
                           "so the container asking cannot be named; no preference is given on a "
                           "guess");
                rc = 0;
        } else if (!rc) {
                out.n_container_responses = n_in;
                out.container_responses = crp;
                rc = packed(&out.base, resp);
        }
        for (size_t i = 0; cr && i < n_in; i++)
                free(cr[i].deviceids);
        free(cr);
        free(crp);
        free(chosen);
        v1beta1__preferred_allocation_request__free_unpacked(in, NULL);
        return rc;
}

/* ---- Allocate ------------------------------------------------------------------------------ */

/* One container's response: NVIDIA_VISIBLE_DEVICES, then what its isolation injects. */
struct container_out {
        struct tsr_dm_answer answer;
        struct tsr_dm_injection inj;
        V1beta1__ContainerAllocateResponse cr;
        V1beta1__ContainerAllocateResponse__EnvsEntry env[1 + TSR_DM_INJECT_ENVS_MAX];
        V1beta1__ContainerAllocateResponse__EnvsEntry *envp[1 + TSR_DM_INJECT_ENVS_MAX];
        V1beta1__Mount mount[TSR_DM_INJECT_MOUNTS_MAX];
        V1beta1__Mount *mountp[TSR_DM_INJECT_MOUNTS_MAX];
};

/* Fills o->cr from o->answer (granted) and o->inj; the strings stay o's. */
static void container_response(struct container_out *o)
{
        static char visible_key[] = VISIBLE_ENV;
        size_t n = 0;

        v1beta1__container_allocate_response__init(&o->cr);
        v1beta1__container_allocate_response__envs_entry__init(&o->env[n]);
        o->env[n].key = visible_key;
        o->env[n].value = o->answer.visible;
        o->envp[n] = &o->env[n];
        n++;
        for (size_t k = 0; k < o->inj.n_envs; k++, n++) {
                v1beta1__container_allocate_response__envs_entry__init(&o->env[n]);
                o->env[n].key = o->inj.envs[k].key;
                o->env[n].value = o->inj.envs[k].value;
                o->envp[n] = &o->env[n];
        }
        o->cr.n_envs = n;
        o->cr.envs = o->envp;
        for (size_t k = 0; k < o->inj.n_mounts; k++) {
                v1beta1__mount__init(&o->mount[k]);
                o->mount[k].container_path = o->inj.mounts[k].container_path;
                o->mount[k].host_path = o->inj.mounts[k].host_path;
                o->mount[k].read_only = 1;
                o->mountp[k] = &o->mount[k];
        }
        o->cr.n_mounts = o->inj.n_mounts;
        o->cr.mounts = o->inj.n_mounts ? o->mountp : NULL;
}

static int allocate(void *user, const uint8_t *req, size_t len, struct tsr_buf *resp,
                    struct tsr_grpc_status *st)
{
        struct tsr_dm_plugin *p = user;
        V1beta1__AllocateRequest *in = v1beta1__allocate_request__unpack(NULL, len, req);
        V1beta1__AllocateResponse out;
        V1beta1__ContainerAllocateResponse **crp = NULL;
        struct container_out *co = NULL;
        size_t n_in;
        int rc = 0;

        if (!in) {
                set_status(st, TSR_DM_INVALID_ARGUMENT, "malformed AllocateRequest");
                return 0;
        }
        n_in = in->n_container_requests;
        co = calloc(n_in ? n_in : 1, sizeof(*co));
        crp = calloc(n_in ? n_in : 1, sizeof(*crp));
        if (!co || !crp) {
                rc = TSR_ENOMEM;
                goto out;
        }
        v1beta1__allocate_response__init(&out);
        for (size_t i = 0; i < n_in; i++) {
                V1beta1__ContainerAllocateRequest *c = in->container_requests[i];
                struct tsr_dm_answer *a = &co[i].answer;

                tsr_dm_agent_allocate(p->agent, p->family, (const char *const *)c->devices_ids,
                                      c->n_devices_ids, a);
                if (a->code != TSR_DM_OK) {
                        set_status(st, (int)a->code, a->message);
                        goto out;
                }
                tsr_dm_isolation_inject(&p->isolation, a, &co[i].inj);
                container_response(&co[i]);
                crp[i] = &co[i].cr;
        }
        out.n_container_responses = n_in;
        out.container_responses = crp;
        rc = packed(&out.base, resp);
out:
        free(co);
        free(crp);
        v1beta1__allocate_request__free_unpacked(in, NULL);
        return rc;
}

/* ---- the plugin ----------------------------------------------------------------------------- */

int tsr_dm_plugin_new(struct tsr_dm_agent *agent, enum tsr_family f,
                      const struct tsr_dm_isolation *iso, struct tsr_dm_plugin **out)
{
        struct tsr_dm_plugin *p = calloc(1, sizeof(*p));
        int rc;

        if (!p)
                return TSR_ENOMEM;
        p->isolation.mode = TSR_DM_ISOLATION_OFF;
        if (iso)
                p->isolation = *iso;
        rc = tsr_dp_resource_name(tsr_dm_agent_node(agent), f, p->resource);
        if (rc) {
                free(p);
                return rc;
        }
        p->agent = agent;
        p->family = f;
        p->n_accel = tsr_dm_agent_node(agent)->n;
        p->shape = malloc(p->n_accel * sizeof(*p->shape));
        p->next = malloc(p->n_accel * sizeof(*p->next));
        if (!p->shape || !p->next || tsr_dp_tokens_init(&p->tokens, tsr_dm_agent_node(agent), f)) {
                free(p->shape);
                free(p->next);
                free(p);
                return TSR_ENOMEM;
        }
        p->methods[0] =
            (struct tsr_grpc_method){"/v1beta1.DevicePlugin/GetDevicePluginOptions", options, NULL};
        p->methods[1] =
            (struct tsr_grpc_method){"/v1beta1.DevicePlugin/ListAndWatch", NULL, list_and_watch};
        p->methods[2] = (struct tsr_grpc_method){"/v1beta1.DevicePlugin/GetPreferredAllocation",
                                                 preferred, NULL};
        p->methods[3] = (struct tsr_grpc_method){"/v1beta1.DevicePlugin/Allocate", allocate, NULL};
        p->methods[4] =
            (struct tsr_grpc_method){"/v1beta1.DevicePlugin/PreStartContainer", pre_start, NULL};
        p->table = (struct tsr_grpc_service_table){p->methods, 5, stream_closed, 0};
        pthread_mutex_init(&p->mu, NULL);
        rc = tsr_dm_agent_subscribe(agent, on_agent_change, p);
        if (rc) {
                pthread_mutex_destroy(&p->mu);
                tsr_dp_tokens_release(&p->tokens);
                free(p->shape);
                free(p->next);
                free(p);
                return rc;
        }
        *out = p;
        return 0;
}

void tsr_dm_plugin_free(struct tsr_dm_plugin *p)
{
        if (!p)
                return;
        for (size_t i = 0; i < p->n_watches; i++) {
                free(p->watches[i].sent);
                free(p->watches[i].sent_shape);
                tsr_grpc_stream_unref(p->watches[i].stream);
        }
        free(p->watches);
        pthread_mutex_destroy(&p->mu);
        tsr_dp_tokens_release(&p->tokens);
        free(p->list);
        free(p->shape);
        free(p->next);
        free(p);
}

const struct tsr_grpc_service_table *tsr_dm_plugin_table(const struct tsr_dm_plugin *p)
{
        return &p->table;
}

const char *tsr_dm_plugin_resource(const struct tsr_dm_plugin *p)
{
        return p->resource;
}

enum tsr_family tsr_dm_plugin_family(const struct tsr_dm_plugin *p)
{
        return p->family;
}
