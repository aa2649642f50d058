/*
 * kvcache.h - the KV-cache injection webhook: a second mutating webhook on Pods, in the same
 * gpustack-worker-mutation configuration as gate 1 but outside the five gates
 * (seeds/admission.md "The KV cache injection webhook"; spec/upstream-behavior.md §11;
 * gpustack-operator docs/modules/kv-cache/injection.md). It reads no .sliced/.partitioned value,
 * writes none, and never touches resources.
 *
 * Trigger: the LABEL kvcache.gpustack.ai/inject: "true" (its objectSelector), on CREATE only. A Pod
 * without it, or any other operation, is allowed untouched.
 *
 * Annotations a Pod author sets (any other kvcache.gpustack.ai/ key is refused, so a typo is seen):
 *   kvcache.gpustack.ai/binding     required; a KVCachePoolBinding in the Pod's own namespace (no
 *                                   "/": there is no cross-namespace form)
 *   kvcache.gpustack.ai/engine      required; "vLLM" | "SGLang" (never guessed from the image)
 *   kvcache.gpustack.ai/manufacturer  "ascend", only with vLLM: renders vllm-ascend
 *   kvcache.gpustack.ai/role        "Prefill" | "Decode", or absent (a plain server: kv_both);
 *                                   read by the vLLM family only, ignored on SGLang; "Server" and
 *                                   anything else refused
 *   kvcache.gpustack.ai/container   which container; required when the Pod has more than one; an
 *                                   init container is refused
 *   kvcache.gpustack.ai/launch-args-forwarded  "true" declares that an unrecognised launcher,
 *                                   script, ENTRYPOINT or one-argument command line forwards
 *                                   appended arguments ("false" is the default; other values are
 *                                   refused); it never exempts a shell's -c (kvcache_launch.h)
 * Refused outright: kvcache.gpustack.ai/domain (the reuse domain comes from the Binding only), and
 * kvcache.gpustack.ai/client-config and kvcache.gpustack.ai/injected (the webhook's own record).
 *
 * The container is refused when it already carries a key this Pod's engine would be given or that
 * selects another configuration source: vLLM family env MOONCAKE_CONFIG_PATH and flag
 * --kv-transfer-config; SGLang flag --hicache-storage-backend, flag
 * --hicache-storage-backend-extra-config and env SGLANG_HICACHE_MOONCAKE_CONFIG_PATH; and, while
 * model-deployment-kv-cache-dtype-owned is on, --kv-cache-dtype. A flag is matched in every
 * spelling the engine's parser reads as it: "--flag" or "--flag=v", a unique prefix (vLLM
 * --kv-transfer-config from "--kv-t", --kv-cache-dtype from "--kv-cache-d" on both engines,
 * SGLang's extra-config from "--hicache-storage-backend-"; --hicache-storage-backend itself only
 * exactly, its prefixes being ambiguous with the extra-config flag) and, on the vLLM family, with
 * underscores for dashes and a dotted sub-key ("--kv_transfer_config.kv_role=..."). Both command
 * and args are scanned; env means `env` only (envFrom is invisible). On the vLLM family a Pod
 * volume named gpustack-kvcache-config, or a container mount of that name or at
 * /etc/gpustack/kvcache, is refused too. Then the launch must be shown to reach the engine
 * (kvcache_launch.h).
 *
 * Resolution (lookup, after every Pod-local check): the Binding (missing, or being deleted:
 * refused); its spec.poolRef.name pool (missing: refused); the pool's QuotaLedgerAvailable
 * condition (absent, Unknown, or False for a reason other than MultiTenancyDisabled: refused with
 * the controller's reason and message; False/MultiTenancyDisabled: injected with no tenant); the
 * pool's first spec.backends entry (none or missing: refused); status.clientEndpoint (empty:
 * refused); the transport: each managed member group's transport.protocol, else the backend's
 * spec.transport.protocol (default Auto), mapped Auto/TCP->tcp, RDMA->rdma, EFA->efa, CANN->ascend,
 * ROCM->hip, MUSA->musa, MACA->maca. vllm-ascend needs an "ascend" offer; vLLM and SGLang need the
 * pool to offer exactly one transport (a mixed pool is refused, naming every offer). The Binding's
 * spec.domain.dtype must be set while the dtype is owned.
 *
 * What is written (every refusal has run first: a Pod is injected whole or not at all):
 *   vLLM family (vehicle "file"): args += --kv-transfer-config
 *       {"kv_connector":"MooncakeStoreConnector"|"AscendStoreConnector","kv_role":
 *       "kv_both"|"kv_producer"|"kv_consumer"}; env MOONCAKE_CONFIG_PATH=
 *       /etc/gpustack/kvcache/mooncake.json; Pod volume gpustack-kvcache-config, a downwardAPI
 *       projection of metadata.annotations['kvcache.gpustack.ai/client-config'] to mooncake.json,
 *       mounted read-only at /etc/gpustack/kvcache; annotation kvcache.gpustack.ai/client-config =
 *       {"metadata_server":"P2PHANDSHAKE","master_server_address":<clientEndpoint>,"protocol":<p>,
 *       "device_name":"","mode":"standalone-store","global_segment_size":0,
 *       "local_buffer_size":134217728[,"tenant_id":<domain>]}
 *   SGLang (vehicle "environment"): args += --hicache-storage-backend mooncake; env
 *       [MOONCAKE_TENANT_ID=<domain>,] MOONCAKE_MASTER, MOONCAKE_TE_META_DATA_SERVER=P2PHANDSHAKE,
 *       MOONCAKE_PROTOCOL, MOONCAKE_DEVICE="", MOONCAKE_GLOBAL_SEGMENT_SIZE=0,
 *       MOONCAKE_LOCAL_HOSTNAME from fieldRef status.podIP; no volume, no mount
 *   both: args += --kv-cache-dtype <Binding dtype> (while owned); SGLang then
 *       --enable-hierarchical-cache unless its own command line names it; env MC_TE_METRIC=1 and
 *       MC_STORE_CLIENT_METRIC_BANDWIDTH=1 unless the container sets them; an injected variable
 *       the container already declares is overwritten in place (one entry per name).
 *   annotation kvcache.gpustack.ai/injected = {"binding","engine" ("vllm"|"vllm-ascend"|
 *       "sglang"),"vehicle","domain","tenantInjected","launchProgram","launchArgsForwarded"}
 *       (compact JSON, in that order; domain is the Binding's declared one, written even when the
 *       tenant is not - tenantInjected says whether a tenant reached the container).
 * Every refusal is 403 "Forbidden" with a message naming the key, the container or the object.
 *
 * tsr_webhook_kvcache_validate is the companion validating webhook on Pod UPDATE (failurePolicy
 * Ignore upstream): the label kvcache.gpustack.ai/inject and the annotations
 * kvcache.gpustack.ai/injected and kvcache.gpustack.ai/client-config may not be added, changed or
 * removed on an existing Pod, including one being deleted (the kubelet keeps reprojecting the file
 * through the termination grace period); every other edit, finalizers included, is allowed.
 *
 * Pure (handler.h). A Pod of the wrong shape (containers not an array, a container's env or args
 * not an array...) is TSR_EPARSE with diag; memory exhaustion TSR_ENOMEM.
 */
#ifndef TSR_WEBHOOK_KVCACHE_H
#define TSR_WEBHOOK_KVCACHE_H

#include "webhook/handler.h"

/*
 * The mutating handler (a tsr_webhook_handler): reads Bindings, pools and backends and the Setting
 * model-deployment-kv-cache-dtype-owned from lookup. A lookup without the KV-cache readers fails
 * a labelled Pod that passes every Pod-local check with TSR_EINVAL ("cannot read
 * KVCachePoolBindings"): the server answers 500 and the API server fails the Pod closed.
 */
int tsr_webhook_kvcache_mutate(const struct tsr_webhook_lookup *lookup,
                               const struct tsr_review *review, struct tsr_verdict *verdict,
                               struct tsr_diag *diag);

/* The validating handler on UPDATE (a tsr_webhook_handler). The lookup is not read. */
int tsr_webhook_kvcache_validate(const struct tsr_webhook_lookup *lookup,
                                 const struct tsr_review *review, struct tsr_verdict *verdict,
                                 struct tsr_diag *diag);

#endif
