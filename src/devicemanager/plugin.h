/*
 * plugin.h - one family's device plugin as a gRPC service (kubelet device-plugin API v1beta1,
 * spec/kubernetes-contracts.md §2): GetDevicePluginOptions, ListAndWatch, GetPreferredAllocation,
 * Allocate and PreStartContainer over the node's agent.
 *
 * ListAndWatch sends the family's full device list at once, then again whenever the agent reports
 * a change that moved it (health or pool size); an unchanged list is not resent. The token IDs
 * are formatted once, at tsr_dm_plugin_new (deviceplugin/devices.h); on a change the plugin reads
 * the agent's device view (no Pods read: tsr_dm_agent_view_shape), rewrites its one kept list only
 * when the family's shape moved (in place when only health did), and encodes it once for every
 * stream whose last list differs. Allocate answers
 * every container request of the call or fails the whole call with the first refusal's status
 * (FailedPrecondition for a refusal, InvalidArgument for a token that is not this node's);
 * a granted container gets NVIDIA_VISIBLE_DEVICES (the cards, or only the MIG device of a
 * partition), and a logical slice's container also what its isolation injects, read-only mounts
 * and the environment that caps it (devicemanager/isolation.h; nothing for the other families or
 * with isolation off). Options: preferred allocation available, no pre-start hook
 * (PreStartContainer still answers, empty).
 *
 * Threads: the service table's handlers run on the transport's connection threads; the agent's
 * change notifications arrive on any thread; the plugin's stream list, its kept list and shape
 * have their own mutex, held while it asks the agent for the view (the agent never calls the
 * plugin with its own lock held). The formatted IDs are read-only after creation.
 * Ownership: tsr_dm_plugin_new subscribes to the agent (borrowed; it must outlive the plugin and
 * stop notifying before tsr_dm_plugin_free: free the plugin after the agent stops changing).
 */
#ifndef TSR_DEVICEMANAGER_PLUGIN_H
#define TSR_DEVICEMANAGER_PLUGIN_H

#include "core/keys.h"
#include "devicemanager/agent.h"
#include "devicemanager/isolation.h"
#include "grpc/server.h"

struct tsr_dm_plugin;

/* Creates family f's plugin over agent, its slices isolated as iso says (copied; NULL: off).
 * Returns 0 and *out, TSR_EINVAL (a family the node's manufacturer does not serve) or
 * TSR_ENOMEM. */
int tsr_dm_plugin_new(struct tsr_dm_agent *agent, enum tsr_family f,
                      const struct tsr_dm_isolation *iso, struct tsr_dm_plugin **out);

void tsr_dm_plugin_free(struct tsr_dm_plugin *p);

/* The gRPC service table; its handlers' user pointer is the plugin. */
const struct tsr_grpc_service_table *tsr_dm_plugin_table(const struct tsr_dm_plugin *p);

/* The extended resource the plugin registers ("nvidia.com/gpu.shared"). */
const char *tsr_dm_plugin_resource(const struct tsr_dm_plugin *p);

/* The family it serves. */
enum tsr_family tsr_dm_plugin_family(const struct tsr_dm_plugin *p);

/*
 * Takes a new device view (tsr_dm_agent_refresh_view: one read of the Pods) and pushes the list to
 * every open ListAndWatch stream that has not seen it. A new stream starts with it.
 */
void tsr_dm_plugin_refresh(struct tsr_dm_plugin *p);

/* Ends every open ListAndWatch stream with status OK (shutdown, re-registration). */
void tsr_dm_plugin_end_streams(struct tsr_dm_plugin *p);

#endif
