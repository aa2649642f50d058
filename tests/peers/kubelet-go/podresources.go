// podresources.go - the pod-resources server (/v1.PodResourcesLister List, GetAllocatableResources,
// Get; spec §2.3) behind the kubelet's rate limiter, and the set_pods content it serves. See doc.go.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// The kubelet's pod-resources limits: 100 requests/s, burst 10.
const (
	podresQPS   = 100
	podresBurst = 10
)

// podSpec is one pod of set_pods: {namespace="default", name, containers: [{name, devices: {RES: [ids]}}]}.
type podSpec struct {
	Namespace  string          `json:"namespace"`
	Name       string          `json:"name"`
	Containers []containerSpec `json:"containers"`
}

type containerSpec struct {
	Name    string
	Devices []resourceIDs // in the order of the JSON object's keys
}

type resourceIDs struct {
	Resource string
	IDs      []string
}

func (c *containerSpec) UnmarshalJSON(b []byte) error {
	var raw struct {
		Name    *string         `json:"name"`
		Devices json.RawMessage `json:"devices"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw.Name == nil {
		return fmt.Errorf("a container needs a name")
	}
	c.Name = *raw.Name
	if len(raw.Devices) == 0 || string(raw.Devices) == "null" {
		return nil
	}
	// An object, read key by key to keep its order.
	dec := json.NewDecoder(bytes.NewReader(raw.Devices))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("devices must be an object of resource name -> ids")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		var ids []string
		if err := dec.Decode(&ids); err != nil {
			return err
		}
		c.Devices = append(c.Devices, resourceIDs{Resource: t.(string), IDs: ids})
	}
	return nil
}

func parsePods(b json.RawMessage) ([]podSpec, error) {
	var pods []podSpec
	if err := json.Unmarshal(b, &pods); err != nil {
		return nil, err
	}
	for i := range pods {
		if pods[i].Name == "" {
			return nil, fmt.Errorf("pod %d has no name", i)
		}
	}
	// namespace defaults to "default" only when absent
	var raw []map[string]json.RawMessage
	_ = json.Unmarshal(b, &raw)
	for i := range pods {
		if _, ok := raw[i]["namespace"]; !ok {
			pods[i].Namespace = "default"
		}
	}
	return pods, nil
}

func (k *kubelet) setPods(pods []podSpec) {
	k.mu.Lock()
	k.pods = pods
	k.mu.Unlock()
}

func (k *kubelet) newPodResourcesServer() *grpc.Server {
	var opts []grpc.ServerOption
	if k.rateLimit { // a fresh limiter for each kubelet process
		limiter := rate.NewLimiter(rate.Limit(podresQPS), podresBurst)
		opts = append(opts, grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo,
			handler grpc.UnaryHandler) (any, error) {
			if !limiter.Allow() {
				return nil, status.Error(codes.ResourceExhausted, "rejected by rate limit")
			}
			return handler(ctx, req)
		}))
	}
	s := grpc.NewServer(opts...)
	podresourcesapi.RegisterPodResourcesListerServer(s, podResourcesServer{k: k})
	return s
}

type podResourcesServer struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	k *kubelet
}

// topologyLocked is the NUMA nodes of a device as its plugin listed them (nil for none); k.mu is held.
func (k *kubelet) topologyLocked(name, id string) *podresourcesapi.TopologyInfo {
	r := k.resources[name]
	if r == nil {
		return nil
	}
	i, ok := r.index[id]
	if !ok || len(r.devices[i].NUMA) == 0 {
		return nil
	}
	t := &podresourcesapi.TopologyInfo{}
	for _, n := range r.devices[i].NUMA {
		t.Nodes = append(t.Nodes, &podresourcesapi.NUMANode{ID: n})
	}
	return t
}

type podKey struct{ namespace, name string }

// podMessages is what pod-resources shows: the pods set_pods gave, then the published allocations, merged
// by pod and container, one ContainerDevices per device id as the kubelet emits them.
func (k *kubelet) podMessages() ([]podKey, map[podKey]*podresourcesapi.PodResources) {
	k.mu.Lock()
	defer k.mu.Unlock()
	type containerDevs struct {
		name string
		devs [][2]string // (resource, id)
	}
	var keys []podKey
	pods := map[podKey][]*containerDevs{}
	ensurePod := func(key podKey) {
		if _, ok := pods[key]; !ok {
			keys = append(keys, key)
			pods[key] = []*containerDevs{}
		}
	}
	containerOf := func(key podKey, name string) *containerDevs {
		ensurePod(key)
		for _, c := range pods[key] {
			if c.name == name {
				return c
			}
		}
		c := &containerDevs{name: name}
		pods[key] = append(pods[key], c)
		return c
	}
	for _, p := range k.pods {
		key := podKey{p.Namespace, p.Name}
		ensurePod(key)
		for _, c := range p.Containers {
			cd := containerOf(key, c.Name)
			for _, rd := range c.Devices {
				for _, id := range rd.IDs {
					cd.devs = append(cd.devs, [2]string{rd.Resource, id})
				}
			}
		}
	}
	for _, a := range k.allocations {
		if a.Published {
			cd := containerOf(podKey{a.Namespace, a.Pod}, a.Container)
			for _, id := range a.Devices {
				cd.devs = append(cd.devs, [2]string{a.Resource, id})
			}
		}
	}
	out := map[podKey]*podresourcesapi.PodResources{}
	for _, key := range keys {
		p := &podresourcesapi.PodResources{Name: key.name, Namespace: key.namespace}
		for _, c := range pods[key] {
			cr := &podresourcesapi.ContainerResources{Name: c.name}
			for _, d := range c.devs {
				cr.Devices = append(cr.Devices, &podresourcesapi.ContainerDevices{ResourceName: d[0],
					DeviceIds: []string{d[1]}, Topology: k.topologyLocked(d[0], d[1])})
			}
			p.Containers = append(p.Containers, cr)
		}
		out[key] = p
	}
	return keys, out
}

func (s podResourcesServer) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	keys, pods := s.k.podMessages()
	resp := &podresourcesapi.ListPodResourcesResponse{}
	for _, key := range keys {
		resp.PodResources = append(resp.PodResources, pods[key])
	}
	return resp, nil
}

func (s podResourcesServer) Get(_ context.Context, req *podresourcesapi.GetPodResourcesRequest) (*podresourcesapi.GetPodResourcesResponse, error) {
	_, pods := s.k.podMessages()
	p, ok := pods[podKey{req.PodNamespace, req.PodName}]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "pod %s in namespace %s not found", req.PodName, req.PodNamespace)
	}
	return &podresourcesapi.GetPodResourcesResponse{PodResources: p}, nil
}

// GetAllocatableResources lists every device of every registered resource: the kubelet's allDevices,
// unhealthy ones included.
func (s podResourcesServer) GetAllocatableResources(context.Context, *podresourcesapi.AllocatableResourcesRequest) (*podresourcesapi.AllocatableResourcesResponse, error) {
	k := s.k
	k.mu.Lock()
	defer k.mu.Unlock()
	resp := &podresourcesapi.AllocatableResourcesResponse{}
	for _, n := range k.order {
		for _, d := range k.resources[n].devices {
			resp.Devices = append(resp.Devices, &podresourcesapi.ContainerDevices{ResourceName: n,
				DeviceIds: []string{d.ID}, Topology: k.topologyLocked(n, d.ID)})
		}
	}
	return resp, nil
}
