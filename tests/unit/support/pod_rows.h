/*
 * pod_rows.h - builds a struct tsr_pod_req from compact container rows, for the unit tests.
 *
 * A container row gives its group and two resource lists, limits and requests: "key=value" words
 * separated by single spaces, NULL or "" for none. Every value is parsed with tsr_quantity_parse
 * into a struct tsr_res_item whose key and text are the word's two halves. A word without '=',
 * more than TSR_RES_MAX words, a value that is not a quantity, or a list of list_max characters
 * or more fails the running cmocka test with a message that starts with the row's name (what).
 *
 * Ownership: the caller owns the struct pod_rows and nothing here allocates (make it static: a
 * tsr_pod_req is large). The pod it builds lives inside it, and the pod's items borrow their key
 * and text from its text buffers, so a built pod stays valid until the next pod_rows_begin or
 * pod_rows_build on the same struct pod_rows; there is nothing to free. The row strings are only
 * read (copied into the buffers), never kept.
 */
#ifndef TSR_TEST_SUPPORT_POD_ROWS_H
#define TSR_TEST_SUPPORT_POD_ROWS_H

#include <stddef.h>

#include "core/request.h"

/* Room for one list, NUL included; a test's own list_max may be smaller, never larger. */
#define POD_ROWS_LIST_MAX 512

/* One container of a row whose containers need no name of their own. */
struct pod_row {
        enum tsr_container_group group;
        const char *limits;   /* "key=value ..."; NULL: none */
        const char *requests; /* "key=value ..."; NULL: none */
};

/* How pod_rows_build numbers its containers (tsr_container_req.index). */
enum pod_rows_index {
        POD_ROWS_INDEX_POSITION, /* the container's position in the row */
        POD_ROWS_INDEX_IN_GROUP, /* from 0 among app containers, and from 0 among the rest */
};

struct pod_rows {
        struct tsr_pod_req pod; /* what was built */
        size_t list_max;        /* a list this long or longer fails the test */
        char text[TSR_CONTAINERS_MAX][2][POD_ROWS_LIST_MAX]; /* what pod's items borrow */
};

/* Empties b->pod; lists added from now on must be shorter than list_max characters. */
void pod_rows_begin(struct pod_rows *b, size_t list_max);

/* Appends one container to b->pod and returns it; what names the row in failure messages. */
struct tsr_container_req *pod_rows_add(struct pod_rows *b, const char *what, const char *name,
                                       enum tsr_container_group group, unsigned index,
                                       const char *limits, const char *requests);

/*
 * Builds b->pod from rows[0..n), up to the first row with neither list: every container named
 * "c", numbered as index says. Returns &b->pod.
 */
const struct tsr_pod_req *pod_rows_build(struct pod_rows *b, size_t list_max, const char *what,
                                         const struct pod_row *rows, size_t n,
                                         enum pod_rows_index index);

#endif
