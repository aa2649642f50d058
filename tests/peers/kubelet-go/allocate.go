// allocate.go - the kubelet's device selection (manager.go devicesToAllocate without a topology
// manager), then Allocate and PreStartContainer, and release. See doc.go.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// allocArgs are the allocate command's arguments (absent ones take the protocol's defaults).
type allocArgs struct {
	Resource  *string   `json:"resource"`
	Size      *int      `json:"size"`
	DeviceIDs *[]string `json:"device_ids"`
	Reuse     []string  `json:"reuse"`
	Namespace *string   `json:"namespace"`
	Pod       *string   `json:"pod"`
	Container *string   `json:"container"`
	Publish   *string   `json:"publish"`
}

// rpcFailure is a failed allocation: the stage it failed in, the gRPC code name (nil when the kubelet
// failed it itself, before or without an RPC) and the details.
type rpcFailure struct {
	stage   string
	code    *string
	details string
}

func (f *rpcFailure) Error() string {
	code := "null"
	if f.code != nil {
		code = *f.code
	}
	return fmt.Sprintf("%s: %s: %s", f.stage, code, f.details)
}

func kubeletFailure(stage, format string, a ...any) *rpcFailure {
	return &rpcFailure{stage: stage, details: fmt.Sprintf(format, a...)}
}

func grpcFailure(stage string, err error, prefix string) *rpcFailure {
	s := status.Convert(err)
	code := codeName(s.Code())
	return &rpcFailure{stage: stage, code: &code, details: prefix + s.Message()}
}

type preferredRequest struct {
	Available   []string `json:"available"`
	MustInclude []string `json:"must_include"`
	Size        int      `json:"size"`
}

// allocOut is what an allocate reply carries whether it succeeds or not.
type allocOut struct {
	devices          []string
	preferredRequest *preferredRequest
	preferred        []string
	response         json.RawMessage
	preStart         bool
}

func (o *allocOut) reply(f *rpcFailure) map[string]any {
	m := map[string]any{"devices": o.devices, "preferred_request": o.preferredRequest,
		"preferred": o.preferred, "response": o.response, "pre_start": o.preStart, "ok": f == nil}
	if o.response == nil {
		m["response"] = nil
	}
	if f != nil {
		m["stage"], m["code"], m["details"], m["error"] = f.stage, f.code, f.details, f.Error()
	}
	return m
}

// allocate runs one allocation; the reply is the allocate reply less its id.
func (k *kubelet) allocate(a allocArgs) (map[string]any, error) {
	if a.Resource == nil {
		return nil, fmt.Errorf("allocate needs resource")
	}
	namespace, container, publish, pod := "default", "main", "after", ""
	if a.Namespace != nil {
		namespace = *a.Namespace
	}
	if a.Container != nil {
		container = *a.Container
	}
	if a.Publish != nil {
		publish = *a.Publish
	}
	if a.Pod != nil {
		pod = *a.Pod
	}
	if publish != "after" && publish != "before" && publish != "none" {
		return nil, fmt.Errorf("publish must be after, before or none")
	}
	reuse := a.Reuse
	if reuse == nil {
		reuse = []string{}
	}
	k.allocMu.Lock() // the kubelet admits one pod at a time
	defer k.allocMu.Unlock()
	out := &allocOut{}
	f := k.allocateOne(*a.Resource, a.Size, a.DeviceIDs, reuse, namespace, pod, container, publish, out)
	return out.reply(f), nil
}

func (k *kubelet) allocateOne(name string, size *int, deviceIDs *[]string, reuse []string,
	namespace, pod, container, publish string, out *allocOut) *rpcFailure {
	k.mu.Lock()
	if pod == "" {
		pod = fmt.Sprintf("pod-%d", len(k.allocations)+1)
	}
	res := k.resources[name]
	var ep *endpoint
	if res != nil {
		ep = res.endpoint
	}
	k.mu.Unlock()
	var chosen []string
	if deviceIDs != nil {
		chosen = append([]string{}, (*deviceIDs)...)
	} else {
		var f *rpcFailure
		if chosen, f = k.selectDevices(name, res, size, reuse, out); f != nil {
			return f
		}
	}
	if ep == nil {
		return kubeletFailure("select", "unknown Device Plugin %s", name)
	}
	record := &allocation{Namespace: namespace, Pod: pod, Container: container, Resource: name,
		Devices: chosen, Published: publish == "before"}
	k.mu.Lock() // devicesToAllocate counts them in allocatedDevices before the RPC
	k.allocations = append(k.allocations, record)
	k.notify()
	stopped := ep.stopped
	k.mu.Unlock()

	resp, f := k.callAllocate(ep, name, chosen, stopped)
	if f != nil {
		k.mu.Lock() // m.allocatedDevices = m.podDevices.devices(): the ids are free again
		for i, x := range k.allocations {
			if x == record {
				k.allocations = append(k.allocations[:i], k.allocations[i+1:]...)
				break
			}
		}
		k.notify()
		k.mu.Unlock()
		return f
	}
	out.devices = chosen
	b, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(resp.ContainerResponses[0])
	if err != nil {
		b = []byte("null")
	}
	out.response = b
	k.mu.Lock() // podDevices.insert: visible in pod-resources from now on
	record.Published = publish != "none"
	k.notify()
	k.writeCheckpointLocked()
	k.mu.Unlock()
	// GetDeviceRunContainerOptions -> callPreStartContainerIfNeeded
	if ep.options.GetPreStartRequired() {
		ctx, cancel := context.WithTimeout(context.Background(), preStartTimeout)
		_, err := ep.client.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIds: chosen})
		cancel()
		if err != nil {
			return grpcFailure("PreStartContainer", err, "")
		}
		out.preStart = true
	}
	return nil
}

// callAllocate sends ONE container request with no deadline; an empty container_responses is an error.
func (k *kubelet) callAllocate(ep *endpoint, name string, ids []string, stopped bool) (*pluginapi.AllocateResponse, *rpcFailure) {
	if stopped {
		return nil, kubeletFailure("Allocate", "endpoint stopped for %s", name)
	}
	resp, err := ep.client.Allocate(context.Background(), &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
	if err != nil {
		return nil, grpcFailure("Allocate", err, "")
	}
	if len(resp.ContainerResponses) == 0 {
		return nil, kubeletFailure("Allocate", "no containers return in allocation response %v", resp)
	}
	return resp, nil
}

// selectDevices is devicesToAllocate with no topology hint (every device is "noAffinity"): reused
// devices first, then GetPreferredAllocation when advertised, then the rest in sorted order. The kubelet
// drops its mutex around the GetPreferredAllocation call; so does this.
func (k *kubelet) selectDevices(name string, res *resource, size *int, reuse []string, out *allocOut) ([]string, *rpcFailure) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if res == nil {
		return nil, kubeletFailure("select", "cannot allocate unregistered device %s", name)
	}
	healthy := healthyIDs(res)
	if len(healthy) == 0 {
		return nil, kubeletFailure("select", "no healthy devices present; cannot allocate unhealthy devices %s", name)
	}
	if size == nil {
		return nil, kubeletFailure("select", "allocate needs size or device_ids")
	}
	n := *size
	allocated := []string{}
	has := func(list []string, d string) bool {
		for _, x := range list {
			if x == d {
				return true
			}
		}
		return false
	}
	take := func(devs []string) bool {
		for _, d := range devs {
			if len(allocated) == n {
				break
			}
			if !has(allocated, d) {
				allocated = append(allocated, d)
			}
		}
		return len(allocated) == n
	}
	if take(reuse) {
		return allocated, nil
	}
	inUse := k.allocatedLocked(name)
	available := []string{}
	for _, d := range healthy {
		if !inUse[d] && !has(allocated, d) {
			available = append(available, d)
		}
	}
	sort.Strings(available)
	if len(available) < n-len(allocated) {
		return nil, kubeletFailure("select", "requested number of devices unavailable for %s. Requested: %d, Available: %d",
			name, n-len(allocated), len(available))
	}
	ep := res.endpoint
	if ep != nil && ep.options.GetGetPreferredAllocationAvailable() {
		if ep.stopped {
			return nil, kubeletFailure("GetPreferredAllocation", "endpoint stopped for %s", name)
		}
		union := append(append([]string{}, available...), allocated...)
		sort.Strings(union)
		req := &preferredRequest{Available: dedup(union), MustInclude: append([]string{}, allocated...), Size: n}
		out.preferredRequest = req
		k.mu.Unlock()
		resp, err := ep.client.GetPreferredAllocation(context.Background(), &pluginapi.PreferredAllocationRequest{
			ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
				AvailableDeviceIDs: req.Available, MustIncludeDeviceIDs: req.MustInclude, AllocationSize: int32(n)}}})
		k.mu.Lock()
		if err != nil {
			return nil, grpcFailure("GetPreferredAllocation", err, "device plugin GetPreferredAllocation rpc failed with err: ")
		}
		if len(resp.ContainerResponses) > 0 {
			out.preferred = append([]string{}, resp.ContainerResponses[0].DeviceIDs...)
			pick := []string{}
			for _, d := range out.preferred {
				if has(available, d) {
					pick = append(pick, d)
				}
			}
			if take(pick) {
				return allocated, nil
			}
		}
	}
	if take(available) {
		return allocated, nil
	}
	return nil, kubeletFailure("select", "unexpectedly allocated less resources than required")
}

// dedup drops repeats from a sorted list.
func dedup(sorted []string) []string {
	out := []string{}
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// release: the pod is gone; its devices are free again and it leaves pod-resources.
func (k *kubelet) release(namespace, pod string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	kept := []*allocation{}
	for _, a := range k.allocations {
		if a.Namespace != namespace || a.Pod != pod {
			kept = append(kept, a)
		}
	}
	k.allocations = kept
	k.notify()
	k.writeCheckpointLocked()
}
