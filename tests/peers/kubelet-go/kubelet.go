// kubelet.go - the fake kubelet's state, its Registration server (with the synchronous dial-back and
// GetDevicePluginOptions), the ListAndWatch client of each registered plugin, the checkpoint file, and
// the kubelet restart. See doc.go for what is modelled.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const (
	checkpointName = "kubelet_internal_checkpoint"
	kubeletSocket  = "kubelet.sock"
	// pluginapi.KubeletPreStartContainerRPCTimeoutInSecs
	preStartTimeout = pluginapi.KubeletPreStartContainerRPCTimeoutInSecs * time.Second
)

// k8s.io/apimachinery validation.IsQualifiedName (the name part) and IsDNS1123Subdomain.
var (
	nameRE      = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	subdomainRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// isExtendedResourceName is v1helper.IsExtendedResourceName: it has a '/', no "kubernetes.io/"
// anywhere, does not start with "requests.", and "requests.<name>" is a qualified name (a DNS-1123
// subdomain prefix of at most 253 characters, a name of at most 63).
func isExtendedResourceName(name string) bool {
	if !strings.Contains(name, "/") || strings.Contains(name, "kubernetes.io/") ||
		strings.HasPrefix(name, "requests.") {
		return false
	}
	prefix, short, _ := strings.Cut("requests."+name, "/")
	if strings.Contains(short, "/") || short == "" || len(short) > 63 || !nameRE.MatchString(short) {
		return false
	}
	return len(prefix) <= 253 && subdomainRE.MatchString(prefix)
}

// device is one entry of the last ListAndWatch list, as RES.devices shows it.
type device struct {
	ID     string  `json:"id"`
	Health string  `json:"health"`
	NUMA   []int64 `json:"numa"`
}

// endpoint is one registered plugin: the kubelet's endpointImpl with its v1beta1 client.
type endpoint struct {
	resource string
	name     string // RegisterRequest.endpoint, relative to the plugin directory
	conn     *grpc.ClientConn
	client   pluginapi.DevicePluginClient
	options  *pluginapi.DevicePluginOptions // GetDevicePluginOptions' answer, not RegisterRequest.options
	cancel   context.CancelFunc             // the ListAndWatch stream's (guarded by kubelet.mu)
	stopped  bool                           // guarded by kubelet.mu
}

type resource struct {
	endpoint      *endpoint
	connected     bool // the ListAndWatch stream is alive
	registrations int
	updates       int
	devices       []device       // in the order of the last list
	index         map[string]int // id -> position in devices
}

type allocation struct {
	Namespace string   `json:"namespace"`
	Pod       string   `json:"pod"`
	Container string   `json:"container"`
	Resource  string   `json:"resource"`
	Devices   []string `json:"devices"`
	Published bool     `json:"published"`
}

type registerCall struct {
	Resource string `json:"resource"`
	Version  string `json:"version"`
	Endpoint string `json:"endpoint"`
	OK       bool   `json:"ok"`
	Code     string `json:"code"`
	Details  string `json:"details"`
}

type kubelet struct {
	pluginDir   string
	podresDir   string // "" without a pod-resources server
	dialTimeout time.Duration
	rateLimit   bool

	mu          sync.Mutex
	changed     chan struct{} // closed and replaced on every change (the waits select on it)
	resources   map[string]*resource
	order       []string // resource names in the order they first registered
	allocations []*allocation
	registers   []registerCall
	pods        []podSpec // set_pods content
	epoch       int       // bumped by each stop: streams of an old kubelet are ignored
	servers     []*grpc.Server

	allocMu sync.Mutex // the kubelet admits one pod at a time
}

func newKubelet(pluginDir, podresDir string, dialTimeout time.Duration, rateLimit bool) *kubelet {
	return &kubelet{pluginDir: pluginDir, podresDir: podresDir, dialTimeout: dialTimeout,
		rateLimit: rateLimit, changed: make(chan struct{}), resources: map[string]*resource{}}
}

func (k *kubelet) kubeletSocket() string { return filepath.Join(k.pluginDir, kubeletSocket) }

func (k *kubelet) podresSocket() string {
	if k.podresDir == "" {
		return ""
	}
	return filepath.Join(k.podresDir, kubeletSocket)
}

// notify wakes every wait; k.mu is held.
func (k *kubelet) notify() {
	close(k.changed)
	k.changed = make(chan struct{})
}

// ---- lifecycle ------------------------------------------------------------------------------------

func (k *kubelet) start(cleanupDelay time.Duration) error {
	if err := os.MkdirAll(k.pluginDir, 0o750); err != nil {
		return err
	}
	k.cleanupPluginDir(cleanupDelay)
	lis, err := net.Listen("unix", k.kubeletSocket())
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, registrationServer{k: k})
	servers := []*grpc.Server{srv}
	go func() { _ = srv.Serve(lis) }()
	if k.podresDir != "" {
		if err := os.MkdirAll(k.podresDir, 0o755); err != nil {
			srv.Stop()
			return err
		}
		_ = os.Remove(k.podresSocket())
		plis, err := net.Listen("unix", k.podresSocket())
		if err != nil {
			srv.Stop()
			return err
		}
		psrv := k.newPodResourcesServer()
		servers = append(servers, psrv)
		go func() { _ = psrv.Serve(plis) }()
	}
	k.mu.Lock()
	k.servers = servers
	k.writeCheckpointLocked()
	k.mu.Unlock()
	return nil
}

func (k *kubelet) stop() {
	k.mu.Lock()
	k.epoch++
	var eps []*endpoint
	for _, r := range k.resources {
		if r.endpoint != nil {
			eps = append(eps, r.endpoint)
		}
		r.endpoint, r.connected = nil, false
	}
	servers := k.servers
	k.servers = nil
	k.notify()
	k.mu.Unlock()
	for _, ep := range eps {
		k.closeEndpoint(ep)
	}
	for _, s := range servers {
		s.Stop()
	}
}

// restart is a kubelet restart (§2.2 item 8): the new process reads its checkpoint (allocations and
// resource names survive, devices are empty until each plugin registers again) and cleans the directory,
// cleanupDelay between two deletions (a slow kubelet), before it serves kubelet.sock again.
func (k *kubelet) restart(cleanupDelay time.Duration) error {
	k.stop()
	k.mu.Lock()
	for _, r := range k.resources {
		r.devices, r.index = nil, map[string]int{}
	}
	k.notify()
	k.mu.Unlock()
	return k.start(cleanupDelay)
}

// cleanupPluginDir is CleanupPluginDirectory: the names are read at once, then every unix socket among
// them but the checkpoint is unlinked in turn, delay apart; directories and plain files stay.
func (k *kubelet) cleanupPluginDir(delay time.Duration) {
	entries, err := os.ReadDir(k.pluginDir)
	if err != nil {
		return
	}
	removed := 0
	for _, e := range entries {
		if e.Name() == checkpointName {
			continue
		}
		p := filepath.Join(k.pluginDir, e.Name())
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSocket != 0 {
			if removed > 0 && delay > 0 {
				time.Sleep(delay)
			}
			_ = os.Remove(p)
			removed++
		}
	}
}

type checkpointEntry struct {
	PodUID        string              `json:"PodUID"`
	ContainerName string              `json:"ContainerName"`
	ResourceName  string              `json:"ResourceName"`
	DeviceIDs     map[string][]string `json:"DeviceIDs"`
	AllocResp     string              `json:"AllocResp"`
}

type checkpointFile struct {
	Data struct {
		PodDeviceEntries  []checkpointEntry   `json:"PodDeviceEntries"`
		RegisteredDevices map[string][]string `json:"RegisteredDevices"`
	} `json:"Data"`
	Checksum int `json:"Checksum"`
}

// writeCheckpointLocked writes <plugin_dir>/kubelet_internal_checkpoint (the kubelet's JSON shape,
// checksum 0) through a temporary file; k.mu is held, so writers do not share the temporary file.
func (k *kubelet) writeCheckpointLocked() {
	var c checkpointFile
	c.Data.PodDeviceEntries = []checkpointEntry{}
	for _, a := range k.allocations {
		c.Data.PodDeviceEntries = append(c.Data.PodDeviceEntries, checkpointEntry{
			PodUID: a.Namespace + "/" + a.Pod, ContainerName: a.Container, ResourceName: a.Resource,
			DeviceIDs: map[string][]string{"-1": a.Devices}})
	}
	c.Data.RegisteredDevices = map[string][]string{}
	for n, r := range k.resources {
		c.Data.RegisteredDevices[n] = healthyIDs(r)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return
	}
	p := filepath.Join(k.pluginDir, checkpointName)
	if os.WriteFile(p+".tmp", b, 0o644) == nil {
		_ = os.Rename(p+".tmp", p)
	}
}

func (k *kubelet) writeCheckpoint() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.writeCheckpointLocked()
}

// ---- Registration (§2.2) --------------------------------------------------------------------------

type registrationServer struct {
	pluginapi.UnimplementedRegistrationServer
	k *kubelet
}

func (s registrationServer) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	return s.k.register(req)
}

func (k *kubelet) register(req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	fail := func(msg string) (*pluginapi.Empty, error) {
		k.mu.Lock()
		k.registers = append(k.registers, registerCall{Resource: req.ResourceName, Version: req.Version,
			Endpoint: req.Endpoint, Code: "UNKNOWN", Details: msg})
		k.notify()
		k.mu.Unlock()
		// A plain error from a grpc-go handler: status Unknown with its text, as the kubelet's.
		return nil, errors.New(msg)
	}
	supported := false
	for _, v := range pluginapi.SupportedVersions {
		supported = supported || v == req.Version
	}
	if !supported {
		return fail(fmt.Sprintf("requested API version %q is not supported by kubelet. Supported versions are %q",
			req.Version, pluginapi.SupportedVersions))
	}
	if !isExtendedResourceName(req.ResourceName) {
		return fail(fmt.Sprintf("the ResourceName %q is invalid", req.ResourceName))
	}
	// The kubelet's dial: authority "localhost", insecure, blocking until READY within the dial timeout.
	path := filepath.Join(k.pluginDir, req.Endpoint)
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"))
	if err != nil {
		return fail(fmt.Sprintf("failed to dial device plugin: %v", err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), k.dialTimeout)
	err = waitReady(ctx, conn)
	cancel()
	if err != nil {
		_ = conn.Close()
		return fail(fmt.Sprintf("failed to dial device plugin: %v", err))
	}
	// PluginConnected: GetDevicePluginOptions (no deadline) before Register returns. The text is the
	// kubelet's: grpc-go's "rpc error: code = ... desc = ..." of the plugin's status.
	client := pluginapi.NewDevicePluginClient(conn)
	options, err := client.GetDevicePluginOptions(context.Background(), &pluginapi.Empty{})
	if err != nil {
		_ = conn.Close()
		return fail(fmt.Sprintf("failed to get device plugin options: %v", err))
	}
	ep := &endpoint{resource: req.ResourceName, name: req.Endpoint, conn: conn, client: client, options: options}
	k.mu.Lock()
	res := k.resources[req.ResourceName]
	if res == nil {
		res = &resource{index: map[string]int{}}
		k.resources[req.ResourceName] = res
		k.order = append(k.order, req.ResourceName)
	}
	old := res.endpoint
	res.endpoint = ep
	res.registrations++
	res.connected = false
	epoch := k.epoch
	k.registers = append(k.registers, registerCall{Resource: req.ResourceName, Version: req.Version,
		Endpoint: req.Endpoint, OK: true, Code: "OK"})
	k.notify()
	k.mu.Unlock()
	if old != nil {
		k.closeEndpoint(old)
	}
	// connectClient: `go runClient(...)` once Connect succeeded.
	go k.listAndWatch(ep, epoch)
	return &pluginapi.Empty{}, nil
}

// waitReady connects conn and waits until it is READY (what grpc.WithBlock did) or ctx ends.
func waitReady(ctx context.Context, conn *grpc.ClientConn) error {
	conn.Connect()
	for {
		s := conn.GetState()
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.Idle:
			conn.Connect()
		case connectivity.Shutdown:
			return errors.New("grpc: the client connection is closing")
		}
		if !conn.WaitForStateChange(ctx, s) {
			return ctx.Err()
		}
	}
}

func (k *kubelet) closeEndpoint(ep *endpoint) {
	k.mu.Lock()
	ep.stopped = true
	cancel := ep.cancel
	k.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	_ = ep.conn.Close()
}

// current says whether ep of the kubelet of this epoch is still its resource's endpoint; k.mu is held.
func (k *kubelet) current(ep *endpoint, epoch int) bool {
	r := k.resources[ep.resource]
	return k.epoch == epoch && r != nil && r.endpoint == ep
}

func (k *kubelet) listAndWatch(ep *endpoint, epoch int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k.mu.Lock()
	ep.cancel = cancel
	stopped := ep.stopped
	k.mu.Unlock()
	if !stopped {
		stream, err := ep.client.ListAndWatch(ctx, &pluginapi.Empty{})
		if err == nil {
			k.mu.Lock()
			if k.current(ep, epoch) {
				k.resources[ep.resource].connected = true
				k.notify()
			}
			k.mu.Unlock()
			for {
				msg, err := stream.Recv()
				if err != nil {
					break
				}
				k.mu.Lock()
				if !k.current(ep, epoch) {
					k.mu.Unlock()
					break
				}
				// genericDeviceUpdateCallback: the message is the whole list.
				res := k.resources[ep.resource]
				res.devices, res.index = nil, map[string]int{}
				for _, d := range msg.GetDevices() {
					numa := []int64{}
					for _, n := range d.GetTopology().GetNodes() {
						numa = append(numa, n.GetID())
					}
					dev := device{ID: d.GetID(), Health: d.GetHealth(), NUMA: numa}
					if i, ok := res.index[dev.ID]; ok {
						res.devices[i] = dev
					} else {
						res.index[dev.ID] = len(res.devices)
						res.devices = append(res.devices, dev)
					}
				}
				res.updates++
				k.notify()
				k.writeCheckpointLocked()
				k.mu.Unlock()
			}
		}
	}
	k.mu.Lock()
	if k.current(ep, epoch) {
		// PluginDisconnected -> markResourceUnhealthy; the kubelet never redials.
		res := k.resources[ep.resource]
		res.connected = false
		ep.stopped = true
		for i := range res.devices {
			res.devices[i].Health = pluginapi.Unhealthy
		}
		k.notify()
	}
	k.mu.Unlock()
}

// ---- state ----------------------------------------------------------------------------------------

func healthyIDs(r *resource) []string {
	ids := []string{}
	for _, d := range r.devices {
		if d.Health == pluginapi.Healthy {
			ids = append(ids, d.ID)
		}
	}
	return ids
}

// allocatedLocked is the set of ids of resource held by allocations; k.mu is held.
func (k *kubelet) allocatedLocked(name string) map[string]bool {
	in := map[string]bool{}
	for _, a := range k.allocations {
		if a.Resource == name {
			for _, d := range a.Devices {
				in[d] = true
			}
		}
	}
	return in
}

type optionsState struct {
	PreStartRequired                bool `json:"pre_start_required"`
	GetPreferredAllocationAvailable bool `json:"get_preferred_allocation_available"`
}

// resState is RES of the control protocol.
type resState struct {
	Registered    bool          `json:"registered"`
	Connected     bool          `json:"connected"`
	Registrations int           `json:"registrations"`
	Updates       int           `json:"updates"`
	Endpoint      *string       `json:"endpoint"`
	Options       *optionsState `json:"options"`
	Devices       []device      `json:"devices"`
	Healthy       []string      `json:"healthy"`
	Unhealthy     []string      `json:"unhealthy"`
	Capacity      int           `json:"capacity"`
	Allocatable   int           `json:"allocatable"`
	Allocated     []string      `json:"allocated"`
}

// resStateLocked is a copy of a resource's state, nil when it never registered; k.mu is held.
func (k *kubelet) resStateLocked(name string) *resState {
	r := k.resources[name]
	if r == nil {
		return nil
	}
	st := &resState{Connected: r.connected, Registrations: r.registrations, Updates: r.updates,
		Devices: []device{}, Healthy: healthyIDs(r), Unhealthy: []string{}, Allocated: []string{}}
	if ep := r.endpoint; ep != nil {
		st.Registered = !ep.stopped
		name := ep.name
		st.Endpoint = &name
		st.Options = &optionsState{PreStartRequired: ep.options.GetPreStartRequired(),
			GetPreferredAllocationAvailable: ep.options.GetGetPreferredAllocationAvailable()}
	}
	for _, d := range r.devices {
		st.Devices = append(st.Devices, device{ID: d.ID, Health: d.Health, NUMA: append([]int64{}, d.NUMA...)})
		if d.Health != pluginapi.Healthy {
			st.Unhealthy = append(st.Unhealthy, d.ID)
		}
	}
	st.Capacity, st.Allocatable = len(r.devices), len(st.Healthy)
	for d := range k.allocatedLocked(name) {
		st.Allocated = append(st.Allocated, d)
	}
	sort.Strings(st.Allocated)
	return st
}

func (k *kubelet) state() map[string]any {
	k.mu.Lock()
	defer k.mu.Unlock()
	resources := map[string]*resState{}
	for n := range k.resources {
		resources[n] = k.resStateLocked(n)
	}
	allocations := []allocation{}
	for _, a := range k.allocations {
		c := *a
		c.Devices = append([]string{}, a.Devices...)
		allocations = append(allocations, c)
	}
	registers := append([]registerCall{}, k.registers...)
	return map[string]any{"resources": resources, "allocations": allocations, "registers": registers}
}

// timeoutError is a wait that ran out of time.
type timeoutError struct{ msg string }

func (e timeoutError) Error() string { return e.msg }

// wait returns the resource's state once pred holds of it, or a timeoutError after timeout seconds.
func (k *kubelet) wait(name string, pred func(*resState) bool, timeout float64, what string) (*resState, error) {
	deadline := time.Now().Add(time.Duration(timeout * float64(time.Second)))
	for {
		k.mu.Lock()
		st := k.resStateLocked(name)
		changed := k.changed
		k.mu.Unlock()
		if st != nil && pred(st) {
			return st, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			now, _ := json.Marshal(st)
			return nil, timeoutError{fmt.Sprintf("timed out after %gs waiting for %s of %s (now %s)",
				timeout, what, name, now)}
		}
		t := time.NewTimer(left)
		select {
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}
