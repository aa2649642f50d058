/*
 * fuzz_watch_stream.c - bytes as a watch response body. The first byte seeds the chunk sizes;
 * the rest is fed twice, whole and in chunks: both must end with the same code and deliver the
 * same events (type and serialized object), because the splitter may not depend on read
 * boundaries. Every delivered event must be well formed, and every refusal must say why. The
 * same bytes also go through the single-event decoder.
 */
#include "base/diag.h"
#include "base/err.h"
#include "kube/watch_stream.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct record {
        char *dumps[64];
        int types[64];
        size_t n;
};

static int keep(void *ctx, const struct tsr_kube_event *ev)
{
        struct record *r = ctx;

        if (!json_is_object(ev->object) || !ev->resource_version || !ev->name || !ev->ns ||
            !ev->reason || !ev->message || ev->code < 0 || ev->code > 999 ||
            (ev->type != TSR_KUBE_ERROR && ev->code != 0))
                abort();
        if (!strcmp(tsr_kube_event_type_name(ev->type), "?"))
                abort();
        if (r->n == 64)
                return 1; /* enough: stop both feeds at the same event */
        r->types[r->n] = ev->type;
        r->dumps[r->n] = json_dumps(ev->object, JSON_COMPACT | JSON_SORT_KEYS);
        if (!r->dumps[r->n])
                abort();
        r->n++;
        return 0;
}

static int run(const uint8_t *data, size_t size, unsigned seed, struct record *r)
{
        struct tsr_kube_watch_stream s;
        struct tsr_diag diag;
        size_t off = 0;
        int rc = 0;

        tsr_kube_watch_stream_init(&s, 4096);
        tsr_diag_clear(&diag);
        while (!rc && off < size) {
                size_t n = seed ? 1 + (seed + off * 7) % 13 : size;

                if (n > size - off)
                        n = size - off;
                rc = tsr_kube_watch_stream_feed(&s, data + off, n, keep, r, &diag);
                off += n;
        }
        if (!rc)
                rc = tsr_kube_watch_stream_finish(&s, &diag);
        if (rc < 0 && diag.msg[0] == '\0')
                abort();
        tsr_kube_watch_stream_release(&s);
        return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct record whole = {{0}, {0}, 0}, chunked = {{0}, {0}, 0};
        struct tsr_kube_event ev;
        struct tsr_diag diag;
        json_t *root;
        unsigned seed;
        int a, b;

        if (size < 1 || size > 65536)
                return 0;
        seed = data[0] | 1u;
        data++;
        size--;
        a = run(data, size, 0, &whole);
        b = run(data, size, seed, &chunked);
        if (a != b || whole.n != chunked.n)
                abort();
        for (size_t i = 0; i < whole.n; i++) {
                if (whole.types[i] != chunked.types[i] || strcmp(whole.dumps[i], chunked.dumps[i]))
                        abort();
                free(whole.dumps[i]);
                free(chunked.dumps[i]);
        }

        tsr_diag_clear(&diag);
        if (tsr_kube_event_decode((const char *)data, size, &root, &ev, &diag) == 0) {
                if (ev.object != json_object_get(root, "object"))
                        abort();
                json_decref(root);
        } else if (diag.msg[0] == '\0') {
                abort();
        }
        return 0;
}
