/*
 * pod_rows.c - compact container rows to struct tsr_pod_req; see pod_rows.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/diag.h"
#include "base/quantity.h"

#include "pod_rows.h"

#include <string.h>

/* Splits list into items, in place in buf; every value must parse as a quantity. */
static size_t parse_list(const char *what, const char *list, size_t list_max, char *buf,
                         struct tsr_res_item *items)
{
        size_t n = 0;
        char *p = buf;

        if (!list || !*list)
                return 0;
        if (strlen(list) >= list_max)
                fail_msg("%s: list \"%s\" is too long for the test", what, list);
        memcpy(buf, list, strlen(list) + 1);
        while (*p) {
                char *end = strchr(p, ' ');
                char *eq;
                struct tsr_diag d;

                if (end)
                        *end = '\0';
                eq = strchr(p, '=');
                if (!eq || n >= TSR_RES_MAX)
                        fail_msg("%s: bad resource word \"%s\"", what, p);
                *eq = '\0';
                items[n].key = p;
                items[n].text = eq + 1;
                tsr_diag_clear(&d);
                if (tsr_quantity_parse(eq + 1, &items[n].q, &d) != 0)
                        fail_msg("%s: \"%s\" is not a quantity: %s", what, eq + 1, d.msg);
                n++;
                if (!end)
                        break;
                p = end + 1;
        }
        return n;
}

void pod_rows_begin(struct pod_rows *b, size_t list_max)
{
        if (list_max > POD_ROWS_LIST_MAX)
                fail_msg("pod_rows: list_max %zu is over %d", list_max, POD_ROWS_LIST_MAX);
        memset(&b->pod, 0, sizeof(b->pod));
        b->list_max = list_max;
}

struct tsr_container_req *pod_rows_add(struct pod_rows *b, const char *what, const char *name,
                                       enum tsr_container_group group, unsigned index,
                                       const char *limits, const char *requests)
{
        size_t i = b->pod.n;
        struct tsr_container_req *c;

        if (i >= TSR_CONTAINERS_MAX)
                fail_msg("%s: too many containers for the test", what);
        c = &b->pod.c[b->pod.n++];
        c->name = name;
        c->group = group;
        c->index = index;
        c->n_limits = parse_list(what, limits, b->list_max, b->text[i][0], c->limits);
        c->n_requests = parse_list(what, requests, b->list_max, b->text[i][1], c->requests);
        return c;
}

const struct tsr_pod_req *pod_rows_build(struct pod_rows *b, size_t list_max, const char *what,
                                         const struct pod_row *rows, size_t n,
                                         enum pod_rows_index index)
{
        unsigned per_group[2] = {0, 0};

        pod_rows_begin(b, list_max);
        for (size_t i = 0; i < n && (rows[i].limits || rows[i].requests); i++) {
                unsigned at = (unsigned)i;

                if (index == POD_ROWS_INDEX_IN_GROUP)
                        at = per_group[rows[i].group == TSR_CG_APP ? 0 : 1]++;
                pod_rows_add(b, what, "c", rows[i].group, at, rows[i].limits, rows[i].requests);
        }
        return &b->pod;
}
