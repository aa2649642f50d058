/*
 * devices.h - the device list a family's plugin streams to the kubelet (ListAndWatch): every
 * token of every accelerator, with its health, as core/tokens.h defines them.
 *
 * Order is accelerator index, then token index, so two lists of an unchanged node compare equal
 * element by element (the plugin sends an update only when the list changed). A list is a
 * function of its shape -- per accelerator, how many tokens and whether they are healthy (all of
 * an accelerator's tokens share its health) -- and of token IDs that never change for the node
 * view's life. tsr_dp_devices formats every ID anew (the slow, obvious reference); a plugin
 * formats them once into a struct tsr_dp_tokens and rewrites a reused list from shapes
 * (tsr_dp_devices_update), comparing shapes first. Ownership: tsr_dp_devices' array is the
 * caller's (free with free()); a struct tsr_dp_tokens owns its storage. Pure: a struct
 * tsr_dp_tokens is read-only after tsr_dp_tokens_init (any threads may read it at once); a list
 * being updated is the caller's to guard.
 */
#ifndef TSR_DEVICEPLUGIN_DEVICES_H
#define TSR_DEVICEPLUGIN_DEVICES_H

#include <stdbool.h>
#include <stddef.h>

#include "core/ledger.h"
#include "core/tokens.h"
#include "deviceplugin/node.h"

struct tsr_dp_device {
        char id[TSR_TOKEN_ID_MAX];
        unsigned accel; /* index of the accelerator the token belongs to */
        bool healthy;
};

/*
 * Lists family f's tokens on node given its ledger (index-aligned with node->caps) into a new
 * array *out of *n entries (NULL and 0 when there are none). Returns 0, or TSR_ENOMEM, or
 * TSR_EINVAL when a token ID cannot be formed (a UUID with ':').
 */
int tsr_dp_devices(const struct tsr_dp_node *node, const struct tsr_accel_ledger *ledger,
                   enum tsr_family f, struct tsr_dp_device **out, size_t *n);

/* True when a[0..na) and b[0..nb) are the same list (IDs and health, in order). */
bool tsr_dp_devices_equal(const struct tsr_dp_device *a, size_t na, const struct tsr_dp_device *b,
                          size_t nb);

/* One accelerator's part of a family's list: count tokens, all healthy or all not. */
struct tsr_dp_shape {
        unsigned count;
        bool healthy; /* false when count is 0, so equal shapes are equal lists */
};

/*
 * Family f's shape on node given its ledger into shape[0..node->n); an accelerator with held[i]
 * (held may be NULL) reads unhealthy.
 */
void tsr_dp_shape(const struct tsr_dp_node *node, const struct tsr_accel_ledger *ledger,
                  enum tsr_family f, const bool *held, struct tsr_dp_shape *shape);

/* True when shapes a[0..n) and b[0..n) are the same (and so are their lists). */
bool tsr_dp_shape_equal(const struct tsr_dp_shape *a, const struct tsr_dp_shape *b, size_t n);

/*
 * Family f's token IDs on a node, formatted once: the first tsr_tokens_max of every accelerator
 * (the IDs of accelerator i are ids[first[i]] .. ids[first[i + 1] - 1]), or fewer when an ID
 * cannot be formed (a UUID with ':', an ID past TSR_TOKEN_ID_MAX): then only those before it, and
 * a list that holds more of the accelerator's tokens fails, as tsr_dp_devices does.
 */
struct tsr_dp_tokens {
        enum tsr_family family;
        size_t n;      /* accelerators */
        size_t *first; /* n + 1 entries */
        char **ids;    /* first[n] entries, pointing into text */
        char *text;    /* the IDs, NUL-terminated, one after another */
};

/*
 * Formats family f's token IDs of node into *t (new storage: release with tsr_dp_tokens_release;
 * nothing of node is borrowed). Returns 0 or TSR_ENOMEM (*t then holds nothing; releasing it is
 * harmless).
 */
int tsr_dp_tokens_init(struct tsr_dp_tokens *t, const struct tsr_dp_node *node, enum tsr_family f);

void tsr_dp_tokens_release(struct tsr_dp_tokens *t);

/*
 * Makes (*list)[0..*n) the list of shape (t->n entries) with t's IDs -- the list tsr_dp_devices
 * gives for the ledger and held-back set shape came from, element for element. *list is reused:
 * grown with realloc to *cap entries when it must; when was (may be NULL) is the shape *list holds
 * now and has the same counts, only the health is rewritten. Returns 0, or TSR_ENOMEM or
 * TSR_EINVAL (a token of an accelerator whose IDs cannot be formed), *list then unchanged but
 * for its capacity.
 */
int tsr_dp_devices_update(const struct tsr_dp_tokens *t, const struct tsr_dp_shape *was,
                          const struct tsr_dp_shape *shape, struct tsr_dp_device **list, size_t *n,
                          size_t *cap);

#endif
