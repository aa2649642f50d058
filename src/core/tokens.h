/*
 * tokens.h - the device-plugin tokens one accelerator advertises for a family, and their IDs.
 *
 * Per accelerator (spec/upstream-behavior.md §4): exclusive 1 token, shared 10 (indices step by
 * 160,000: 0000, 160000, ..., 1440000), sliced one per slice slot, visibility 512 (every
 * accelerator), partitioned the instances it holds plus the largest free count of any offered
 * profile. Unpartitioned accelerators serve exclusive, shared and sliced; partitioned ones serve
 * partitioned only. A token of an accelerator held in another mode stays advertised but is
 * unhealthy. A token ID is "<group>:<device>:<index>" with the index zero-padded to at least 4
 * digits; group and device never contain ':'. The node's device-plugin pool keys are the sums of
 * these counts (core/node_keys.h). Pure; thread-safe.
 */
#ifndef TSR_CORE_TOKENS_H
#define TSR_CORE_TOKENS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/capability.h"
#include "core/keys.h"
#include "core/ledger.h"

/* The longest token ID we compose or accept. */
#define TSR_TOKEN_ID_MAX 256

/*
 * Returns how many tokens of family f accelerator cap advertises given its ledger entry l, and
 * sets *healthy (may be NULL) to how many of them are healthy. A family the accelerator's
 * population does not serve (or TSR_FAMILY_NONE) advertises 0.
 */
unsigned tsr_tokens_count(enum tsr_family f, const struct tsr_accel_cap *cap,
                          const struct tsr_accel_ledger *l, unsigned *healthy);

/*
 * The most tokens family f can advertise on cap, whatever its ledger entry: what
 * tsr_tokens_count returns for every family but partitioned, whose count (live instances plus the
 * largest free count) moves with the ledger; for it, 2 x TSR_MIG_AXIS_MAX on a partitioned
 * accelerator (at most that many live instances, at most that many free placements), else 0.
 * The first tsr_tokens_max IDs of an accelerator are all it can ever name (deviceplugin/devices.h
 * formats them once).
 */
unsigned tsr_tokens_max(enum tsr_family f, const struct tsr_accel_cap *cap);

/* The index of the k-th token (from 0) of family f: k * 160,000 for shared, else k. */
unsigned tsr_token_index(enum tsr_family f, unsigned k);

/*
 * Writes the token ID "<group>:<device>:<index>" into out (TSR_TOKEN_ID_MAX bytes). Returns 0, or
 * TSR_EINVAL when group or device is empty or contains ':', or the ID would not fit.
 */
int tsr_token_format(char *out, const char *group, const char *device, unsigned index);

/*
 * Splits a token ID into its device (copied into device, TSR_UUID_MAX bytes) and index; the
 * group is checked against group when it is not NULL. Returns 0, or TSR_EPARSE when id is not
 * "<group>:<device>:<digits>" (or names another group).
 */
int tsr_token_parse(const char *id, const char *group, char *device, unsigned *index);

#endif
