/*
 * preferred.h - GetPreferredAllocation: which of the available tokens the kubelet should take,
 * in core/alloc.h's packing order. Advisory: the kubelet may take others, and Allocate decides.
 *
 * Accelerator-bound families (exclusive, shared, sliced): the must-include tokens first, then
 * tokens of the accelerators the packing order picks among those with an available token
 * (exclusive: free whole cards; shared: the most-occupied cards that can grant a share, one token
 * each, distinct cards; sliced: the most-occupied card that still fits slice_units and has a
 * slot). Fungible families (partitioned, visibility): the must-include tokens, then the first
 * available ones. When the packing order cannot fill the request (or an ID is malformed) the
 * answer falls back to must-include then available order, so the kubelet always gets `size`
 * distinct tokens it offered when it offered that many. Pure.
 */
#ifndef TSR_DEVICEPLUGIN_PREFERRED_H
#define TSR_DEVICEPLUGIN_PREFERRED_H

#include <stddef.h>
#include <stdint.h>

#include "core/ledger.h"
#include "deviceplugin/node.h"

/*
 * Chooses size tokens for one container request of family f. available and must (the kubelet's
 * lists) are borrowed; out receives up to size pointers into available/must, *n_out their number.
 * slice_units is the slice's units (the device manager's choice when it cannot name the
 * container: devicemanager/agent.h), or 0: any free slot fits.
 * Returns 0, or TSR_ENOMEM.
 */
int tsr_dp_preferred(const struct tsr_dp_node *node, const struct tsr_accel_ledger *ledger,
                     enum tsr_family f, const char *const *available, size_t n_avail,
                     const char *const *must, size_t n_must, unsigned size, int64_t slice_units,
                     const char **out, size_t *n_out);

#endif
