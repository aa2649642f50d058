// Command fake-kubelet-go is the kubelet's device-manager side of the device-plugin contract on grpc-go
// and the kubelet's own generated stubs (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1 and
// .../podresources/v1), for testing tessera's device plugin (spec/kubernetes-contracts.md §2). It is the
// third fake kubelet, next to ../fake_kubelet.py (python3-grpcio) and ../grpc-js/kubelet.js
// (@grpc/grpc-js), and models what fake_kubelet.py models, on the gRPC stack the real kubelet runs:
//
//	Registration    <plugin_dir>/kubelet.sock serves /v1beta1.Registration/Register (§2.2). The handler
//	                checks the version (one of SupportedVersions, "v1beta1"), then that resource_name is an
//	                extended resource name (domain prefix, not *kubernetes.io/*), then SYNCHRONOUSLY dials
//	                <plugin_dir>/<endpoint> (authority "localhost", insecure, waiting for READY, 10 s) and
//	                calls GetDevicePluginOptions; any failure fails Register with a plain Go error, which
//	                grpc-go sends as UNKNOWN with the kubelet's message (for a failed GetDevicePluginOptions
//	                that message embeds grpc-go's own "rpc error: code = FailedPrecondition desc = ...").
//	                The options used later are GetDevicePluginOptions', not RegisterRequest.options.
//	ListAndWatch    started after Register returns; every message is the full list (capacity = all,
//	                allocatable = Healthy). When the stream ends or errors, the resource's devices all
//	                become unhealthy (capacity kept, allocatable 0) and it is never redialled (§2.2 item 7).
//	                A new Register for the same resource replaces the old endpoint (its stream is cancelled).
//	Allocation      allocate follows manager.go devicesToAllocate/allocateContainerResources without a
//	                topology manager: reused devices first; fail if fewer healthy unallocated devices than
//	                needed; GetPreferredAllocation (only when advertised) with available = healthy
//	                unallocated ∪ reused, must_include = reused, size = total; take preferred ∩ available,
//	                then fill from the rest (sorted); Allocate with ONE container request and no deadline;
//	                an empty container_responses is an error; on failure the ids are available again; then
//	                PreStartContainer (only when pre_start_required, 30 s deadline). The assignment is kept
//	                in <plugin_dir>/kubelet_internal_checkpoint (the kubelet's JSON shape, checksum 0).
//	PodResources    <podres_dir>/kubelet.sock serves /v1.PodResourcesLister/{List,GetAllocatableResources,
//	                Get} (§2.3) behind the kubelet's limiter (golang.org/x/time/rate, 100 qps, burst 10,
//	                RESOURCE_EXHAUSTED "rejected by rate limit"; --no-rate-limit turns it off). Content:
//	                the pods set_pods gave plus the allocations, one ContainerDevices per device id.
//	                GetAllocatableResources lists every device of every registered resource (unhealthy
//	                ones too). Get of an unknown pod is NOT_FOUND. An allocation appears only AFTER Allocate
//	                returns (publish "after", the default); "before" publishes before Allocate, which the
//	                real kubelet never does; "none" never publishes.
//	Restart         restart {cleanup_delay=0} = a kubelet restart: servers stop, ListAndWatch streams are
//	                cut, every unix socket in plugin_dir except kubelet_internal_checkpoint is deleted
//	                (CleanupPluginDirectory, also done at first start: the names are read at once, then
//	                the sockets are unlinked in turn, cleanup_delay seconds apart, a slow kubelet), and only
//	                then are kubelet.sock and the pod-resources socket recreated. Allocations and resource
//	                names survive (the checkpoint), with zero devices until each plugin registers again.
//
// What it does not model (as fake_kubelet.py): the topology manager, init-container reuse across the
// containers of a pod (pass reuse by hand), the 5 min endpointStopGracePeriod, the plugin-watcher path
// (§2.4), CPU/memory/dynamic resources in pod-resources, and pod admission (allocate is driven by the test).
//
// Usage:
//
//	fake-kubelet-go --plugin-dir D [--podres-dir P] [--dial-timeout SECONDS] [--no-rate-limit]
//
// It speaks the line-oriented JSON control protocol documented in fake_kubelet.py's docstring on
// stdin/stdout: it first prints {"event": "ready", "impl": "grpc-go", "kubelet_socket": ...,
// "podres_socket": ... | null}; each stdin line {"id": ANY, "cmd": NAME, ...args} gets one stdout line
// {"id": ANY, "ok": true, ...} or {"id": ANY, "ok": false, "error": TEXT, ...}. Commands run concurrently
// (each in its own goroutine; allocations are serialised among themselves); EOF on stdin stops the fake.
// Commands: state, wait_registered, wait_healthy, wait_update, wait_disconnected, allocate, release,
// set_pods, restart, quit. gRPC codes are the grpc.StatusCode names ("UNKNOWN", "NOT_FOUND", ...).
package main
