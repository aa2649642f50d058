#!/usr/bin/env python3
"""fake_kubelet.py - the kubelet's device-manager side of the device-plugin contract, on python3-grpcio,
for testing tessera's device plugin (spec/kubernetes-contracts.md §2).

What it models (section numbers are the spec's):
  Registration    `<plugin_dir>/kubelet.sock` serves /v1beta1.Registration/Register (§2.2). The handler
                  checks version == "v1beta1", then that resource_name is an extended resource name
                  (domain prefix, not *kubernetes.io/*), then SYNCHRONOUSLY dials `<plugin_dir>/<endpoint>`
                  (authority "localhost", insecure, wait-for-ready, 10 s) and calls GetDevicePluginOptions;
                  any failure fails Register with UNKNOWN and the kubelet's message (a plain Go error
                  returned by a grpc-go handler). The options used later are the ones GetDevicePluginOptions
                  returned, not RegisterRequest.options, as in manager.go PluginConnected.
  ListAndWatch    started after Register returns; every message is the full list (capacity = all,
                  allocatable = Healthy). When the stream ends or errors, the resource's devices all become
                  unhealthy (capacity kept, allocatable 0) and it is never redialled (§2.2 item 7). A new
                  Register for the same resource replaces the old endpoint (its stream is cancelled).
  Allocation      `allocate` follows manager.go devicesToAllocate/allocateContainerResources without a
                  topology manager: reused devices first; fail if fewer healthy unallocated devices than
                  needed; GetPreferredAllocation (only when advertised) with available = healthy unallocated
                  ∪ reused, must_include = reused, size = total; take preferred ∩ available, then fill from
                  the rest (sorted); Allocate with ONE container request and no deadline; an empty
                  container_responses is an error; on failure the ids are available again; then
                  PreStartContainer (only when pre_start_required, 30 s deadline) as the kubelet does before
                  the container starts. The assignment is kept in the fake's checkpoint
                  (`<plugin_dir>/kubelet_internal_checkpoint`, same JSON shape as the kubelet's, checksum 0).
  PodResources    `<podres_dir>/kubelet.sock` serves /v1.PodResourcesLister/{List,GetAllocatableResources,
                  Get} (§2.3) with the kubelet's limiter (100 qps, burst 10, RESOURCE_EXHAUSTED "rejected by
                  rate limit"; --no-rate-limit turns it off). Content: the pods the controller sets plus the
                  allocations, one ContainerDevices per device id as the kubelet emits them.
                  GetAllocatableResources lists every device of every registered resource (the kubelet's
                  allDevices, which includes unhealthy ones). Get of an unknown pod is NOT_FOUND.
                  The kubelet inserts an allocation into podDevices (what pod-resources reads) only AFTER
                  Allocate returns (manager.go allocateContainerResources), so during Allocate a plugin does
                  NOT see its container in List. publish="after" (default) models that; "before" publishes
                  before Allocate, which the real kubelet never does; "none" does not publish.
  Restart         `restart` = a kubelet restart: servers stop, ListAndWatch streams are cut, every unix socket
                  in plugin_dir except kubelet_internal_checkpoint is deleted (CleanupPluginDirectory, also
                  done at first start: the names are read at once, then each socket among them is unlinked
                  in turn, cleanup_delay seconds apart when the restart asks for it, a slow kubelet), and only
                  then are kubelet.sock and the pod-resources socket recreated. From the checkpoint the new
                  kubelet keeps allocations and the resource names, with zero devices until each plugin
                  registers again.
What it does not model: the topology manager (no NUMA alignment), init-container reuse across containers of
one pod (pass `reuse` by hand), the 5 min endpointStopGracePeriod (a disconnected resource keeps its
capacity until the next registration or restart), the plugin-watcher path (§2.4), CPU/memory/dynamic
resources in pod-resources, and pod admission (allocate is driven by the test, not by pods).

Use as a module:
    k = FakeKubelet(plugin_dir, podres_dir); k.start(); k.wait_registered("example.com/gpu"); ...
or as a process: fake_kubelet.py --plugin-dir D [--podres-dir P] [--dial-timeout S] [--no-rate-limit]
with a line-oriented JSON control protocol (the same one tests/peers/grpc-js/kubelet.js speaks):
  at start it prints  {"event": "ready", "impl": "python-grpcio", "kubelet_socket": ..., "podres_socket": ...}
  each stdin line is  {"id": ANY, "cmd": NAME, ...args}; each reply is one stdout line
                      {"id": ANY, "ok": true, ...} or {"id": ANY, "ok": false, "error": TEXT, ...}.
  Commands run concurrently (a wait does not block an allocate); EOF on stdin stops the fake.
  state                             {"resources": {NAME: RES}, "allocations": [ALLOC], "registers": [REG]}
  wait_registered {resource, count=1, timeout=10}   until `count` successful Registers of it   -> {resource: RES}
  wait_healthy    {resource, n, timeout=10}         until allocatable == n                     -> {resource: RES}
  wait_update     {resource, after, timeout=10}     until updates > after (RES.updates)         -> {resource: RES}
  wait_disconnected {resource, timeout=10}          until its ListAndWatch stream has ended     -> {resource: RES}
  allocate {resource, size | device_ids, reuse=[], namespace="default", pod, container="main",
            publish="after"|"before"|"none", concurrent=false}
      (concurrent: not behind the admission lock, so Allocates of different resources reach the
       plugin at once, which the real kubelet, admitting one pod at a time, never does; two of one
       resource at once may select the same device, so a caller keeps those apart)
      -> ok: {devices, preferred_request: {available, must_include, size} | null, preferred: [..] | null,
              response: {envs, mounts, devices, annotations, cdi_devices}, pre_start: bool}
      -> not ok: {stage: "select"|"GetPreferredAllocation"|"Allocate"|"PreStartContainer", code, details}
         (device_ids skips the kubelet's selection and sends exactly those ids: a test shortcut)
  release {namespace, pod}          the pod is gone: its devices are free again and leave pod-resources
  set_pods {pods: [{namespace, name, containers: [{name, devices: {RESOURCE: [ids]}}]}]}
  restart {cleanup_delay=0}         a kubelet restart (see above); cleanup_delay: seconds between two deletions
  quit {}                           replies, then exits
  RES = {registered, connected, registrations, updates, endpoint, options: {pre_start_required,
         get_preferred_allocation_available}, devices: [{id, health, numa: [..]}], healthy, unhealthy,
         capacity, allocatable, allocated}
  REG = {resource, version, endpoint, ok, code, details}  (every Register call, in order)
  ALLOC = {namespace, pod, container, resource, devices, published}
  gRPC codes are the grpc.StatusCode names ("UNKNOWN", "NOT_FOUND", ...).
"""

import argparse
import json
import os
import re
import stat
import sys
import threading
import time
from concurrent import futures

import grpc
from google.protobuf import json_format

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from protos import deviceplugin as dp, podresources as pr  # noqa: E402

VERSION = "v1beta1"                     # constants.go SupportedVersions
CHECKPOINT = "kubelet_internal_checkpoint"
KUBELET_SOCKET = "kubelet.sock"
PRE_START_TIMEOUT = 30                  # KubeletPreStartContainerRPCTimeoutInSecs

# k8s.io/apimachinery validation.IsQualifiedName
_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def is_extended_resource_name(name):
    """v1helper.IsExtendedResourceName: has a '/', no "kubernetes.io/" anywhere, not "requests.*",
    and "requests.<name>" is a qualified name (DNS-1123 subdomain prefix, <=63-char name)."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    prefix, _, short = ("requests." + name).partition("/")
    if "/" in short or not short or len(short) > 63 or not _NAME_RE.match(short):
        return False
    return len(prefix) <= 253 and bool(_DNS1123_SUBDOMAIN_RE.match(prefix))


def _unary(channel, path, req_cls, resp_cls):
    return channel.unary_unary(path, request_serializer=req_cls.SerializeToString,
                               response_deserializer=resp_cls.FromString)


class _RpcFailure(Exception):
    def __init__(self, stage, code, details):
        super().__init__("%s: %s: %s" % (stage, code, details))
        self.stage, self.code, self.details = stage, code, details


class _Endpoint:
    """One registered plugin (the kubelet's endpointImpl + its v1beta1 client)."""

    def __init__(self, resource, endpoint, channel, options):
        self.resource, self.endpoint, self.channel, self.options = resource, endpoint, channel, options
        self.stream = None
        self.stopped = False


class _Resource:
    def __init__(self):
        self.endpoint = None        # _Endpoint or None
        self.connected = False      # ListAndWatch stream alive
        self.registrations = 0
        self.updates = 0
        self.devices = {}           # id -> {"id","health","numa"}; insertion order of the last list


class _RateLimiter:
    """golang.org/x/time/rate with the pod-resources limits: 100 tokens/s, burst 10."""

    def __init__(self, qps=100.0, burst=10):
        self.qps, self.burst, self.tokens, self.at = qps, burst, float(burst), time.monotonic()
        self.lock = threading.Lock()

    def allow(self):
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.qps)
            self.at = now
            if self.tokens >= 1:
                self.tokens -= 1
                return True
            return False


class FakeKubelet:
    def __init__(self, plugin_dir, podres_dir=None, dial_timeout=10.0, rate_limit=True):
        self.plugin_dir = os.path.abspath(plugin_dir)
        self.podres_dir = os.path.abspath(podres_dir) if podres_dir else None
        self.dial_timeout = dial_timeout
        self.rate_limit = rate_limit
        self.cond = threading.Condition()
        self.alloc_lock = threading.Lock()
        self.resources = {}         # name -> _Resource
        self.allocations = []       # the checkpoint's pod devices: dicts as ALLOC in the docstring
        self.registers = []
        self.pods = []              # set_pods content
        self.server = self.podres_server = None
        self.limiter = None
        self.epoch = 0              # bumped by each restart: streams of an old kubelet are ignored

    # ---- lifecycle -------------------------------------------------------------------------------
    @property
    def kubelet_socket(self):
        return os.path.join(self.plugin_dir, KUBELET_SOCKET)

    @property
    def podres_socket(self):
        return os.path.join(self.podres_dir, KUBELET_SOCKET) if self.podres_dir else None

    def start(self, cleanup_delay=0.0):
        os.makedirs(self.plugin_dir, mode=0o750, exist_ok=True)
        self._cleanup_plugin_dir(cleanup_delay)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("v1beta1.Registration", {
            "Register": grpc.unary_unary_rpc_method_handler(
                self._register, request_deserializer=dp.RegisterRequest.FromString,
                response_serializer=dp.Empty.SerializeToString)})])
        self.server.add_insecure_port("unix:" + self.kubelet_socket)
        self.server.start()
        if self.podres_dir:
            os.makedirs(self.podres_dir, exist_ok=True)
            if os.path.exists(self.podres_socket):
                os.unlink(self.podres_socket)
            self.limiter = _RateLimiter() if self.rate_limit else None
            self.podres_server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
            h = {}
            for name, req, resp, fn in (
                    ("List", pr.ListPodResourcesRequest, pr.ListPodResourcesResponse, self._pr_list),
                    ("GetAllocatableResources", pr.AllocatableResourcesRequest,
                     pr.AllocatableResourcesResponse, self._pr_allocatable),
                    ("Get", pr.GetPodResourcesRequest, pr.GetPodResourcesResponse, self._pr_get)):
                h[name] = grpc.unary_unary_rpc_method_handler(
                    self._limited(fn), request_deserializer=req.FromString,
                    response_serializer=resp.SerializeToString)
            self.podres_server.add_generic_rpc_handlers(
                [grpc.method_handlers_generic_handler("v1.PodResourcesLister", h)])
            self.podres_server.add_insecure_port("unix:" + self.podres_socket)
            self.podres_server.start()
        self._write_checkpoint()

    def stop(self):
        with self.cond:
            self.epoch += 1
            endpoints = [r.endpoint for r in self.resources.values() if r.endpoint]
            for r in self.resources.values():
                r.endpoint, r.connected = None, False
            self.cond.notify_all()
        for e in endpoints:
            self._close_endpoint(e)
        for s in (self.server, self.podres_server):
            if s:
                s.stop(None).wait()
        self.server = self.podres_server = None

    def restart(self, cleanup_delay=0.0):
        """A kubelet restart (§2.2 item 8): the new process reads its checkpoint (allocations and resource
        names survive, devices are empty until each plugin registers again) and cleans the directory
        (cleanup_delay seconds between two deletions) before it listens again."""
        self.stop()
        with self.cond:
            for r in self.resources.values():
                r.devices = {}
            self.cond.notify_all()
        self.start(cleanup_delay)

    def _cleanup_plugin_dir(self, delay=0.0):
        # CleanupPluginDirectory: the names read at once (Readdirnames), then every unix socket among
        # them but the checkpoint goes, one after the other, whatever file the name holds by then;
        # directories stay.
        first = True
        for name in os.listdir(self.plugin_dir):
            path = os.path.join(self.plugin_dir, name)
            if name == CHECKPOINT:
                continue
            if delay and not first:
                time.sleep(delay)
            try:
                if stat.S_ISSOCK(os.lstat(path).st_mode):
                    os.unlink(path)
                    first = False
            except FileNotFoundError:
                pass

    def _write_checkpoint(self):
        with self.cond:
            entries = [{"PodUID": a["namespace"] + "/" + a["pod"], "ContainerName": a["container"],
                        "ResourceName": a["resource"], "DeviceIDs": {"-1": a["devices"]}, "AllocResp": ""}
                       for a in self.allocations]
            reg = {n: [d for d, v in r.devices.items() if v["health"] == "Healthy"]
                   for n, r in self.resources.items()}
            # Under the (reentrant) lock: a ListAndWatch thread and an Allocate may write at once,
            # and they share the temporary file.
            path = os.path.join(self.plugin_dir, CHECKPOINT)
            with open(path + ".tmp", "w") as f:
                json.dump({"Data": {"PodDeviceEntries": entries, "RegisteredDevices": reg},
                           "Checksum": 0}, f)
            os.replace(path + ".tmp", path)

    # ---- Registration (§2.2) ---------------------------------------------------------------------
    def _register(self, req, context):
        def fail(msg):
            with self.cond:
                self.registers.append({"resource": req.resource_name, "version": req.version,
                                       "endpoint": req.endpoint, "ok": False, "code": "UNKNOWN",
                                       "details": msg})
                self.cond.notify_all()
            # grpc-go turns the plain error the kubelet returns into status Unknown (2) + its text.
            context.abort(grpc.StatusCode.UNKNOWN, msg)

        if req.version != VERSION:      # server.go errUnsupportedVersion
            fail('requested API version "%s" is not supported by kubelet. Supported versions are ["%s"]'
                 % (req.version, VERSION))
        if not is_extended_resource_name(req.resource_name):    # errInvalidResourceName
            fail('the ResourceName "%s" is invalid' % req.resource_name)
        # client.go dial: WithAuthority("localhost"), insecure, WithBlock, 10 s timeout.
        path = os.path.join(self.plugin_dir, req.endpoint)
        channel = grpc.insecure_channel("unix:" + path, options=[("grpc.default_authority", "localhost")])
        try:
            grpc.channel_ready_future(channel).result(timeout=self.dial_timeout)
        except grpc.FutureTimeoutError:
            channel.close()
            fail("failed to dial device plugin: context deadline exceeded")
        # manager.go PluginConnected: GetDevicePluginOptions (no deadline) before Register returns.
        try:
            options = _unary(channel, "/v1beta1.DevicePlugin/GetDevicePluginOptions", dp.Empty,
                             dp.DevicePluginOptions)(dp.Empty())
        except grpc.RpcError as e:
            channel.close()
            fail("failed to get device plugin options: rpc error: code = %s desc = %s"
                 % (_code(e), e.details()))
        ep = _Endpoint(req.resource_name, req.endpoint, channel, options)
        with self.cond:
            res = self.resources.setdefault(req.resource_name, _Resource())
            old, res.endpoint = res.endpoint, ep
            res.registrations += 1
            res.connected = False
            epoch = self.epoch
            self.registers.append({"resource": req.resource_name, "version": req.version,
                                   "endpoint": req.endpoint, "ok": True, "code": "OK", "details": ""})
            self.cond.notify_all()
        if old:
            self._close_endpoint(old)
        # server.go connectClient: `go s.runClient(...)` once Connect succeeded.
        threading.Thread(target=self._list_and_watch, args=(ep, epoch), daemon=True).start()
        return dp.Empty()

    def _close_endpoint(self, ep):
        ep.stopped = True
        if ep.stream is not None:
            ep.stream.cancel()
        ep.channel.close()

    def _list_and_watch(self, ep, epoch):
        call = None
        try:
            call = ep.channel.unary_stream("/v1beta1.DevicePlugin/ListAndWatch",
                                           request_serializer=dp.Empty.SerializeToString,
                                           response_deserializer=dp.ListAndWatchResponse.FromString)(dp.Empty())
            ep.stream = call
            if ep.stopped:
                call.cancel()
            with self.cond:
                if self.epoch == epoch and self.resources[ep.resource].endpoint is ep:
                    self.resources[ep.resource].connected = True
                    self.cond.notify_all()
            for msg in call:
                with self.cond:
                    res = self.resources[ep.resource]
                    if self.epoch != epoch or res.endpoint is not ep:
                        break
                    # genericDeviceUpdateCallback: the message is the whole list.
                    res.devices = {d.ID: {"id": d.ID, "health": d.health,
                                          "numa": [n.ID for n in d.topology.nodes]} for d in msg.devices}
                    res.updates += 1
                    self.cond.notify_all()
                self._write_checkpoint()
        except (grpc.RpcError, ValueError):
            pass
        with self.cond:
            res = self.resources[ep.resource]
            if self.epoch == epoch and res.endpoint is ep:
                # PluginDisconnected -> markResourceUnhealthy; the kubelet never redials.
                res.connected = False
                ep.stopped = True
                for d in res.devices.values():
                    d["health"] = "Unhealthy"
                self.cond.notify_all()

    # ---- state -----------------------------------------------------------------------------------
    def _allocated(self, resource):
        return {d for a in self.allocations if a["resource"] == resource for d in a["devices"]}

    def _res_state(self, name):
        r = self.resources.get(name)
        if r is None:
            return None
        healthy = [d for d, v in r.devices.items() if v["health"] == "Healthy"]
        opts = r.endpoint.options if r.endpoint else None
        return {"registered": bool(r.endpoint and not r.endpoint.stopped), "connected": r.connected,
                "registrations": r.registrations, "updates": r.updates,
                "endpoint": r.endpoint.endpoint if r.endpoint else None,
                "options": {"pre_start_required": opts.pre_start_required,
                            "get_preferred_allocation_available": opts.get_preferred_allocation_available}
                if opts else None,
                "devices": [dict(v) for v in r.devices.values()], "healthy": healthy,
                "unhealthy": [d for d in r.devices if d not in healthy],
                "capacity": len(r.devices), "allocatable": len(healthy),
                "allocated": sorted(self._allocated(name))}

    def state(self):
        with self.cond:
            return {"resources": {n: self._res_state(n) for n in self.resources},
                    "allocations": [dict(a) for a in self.allocations],
                    "registers": [dict(r) for r in self.registers]}

    def _wait(self, resource, pred, timeout, what):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                st = self._res_state(resource)
                if st is not None and pred(st):
                    return st
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("timed out after %gs waiting for %s of %s (now %s)"
                                       % (timeout, what, resource, json.dumps(st)))
                self.cond.wait(left)

    def wait_registered(self, resource, count=1, timeout=10):
        return self._wait(resource, lambda s: s["registrations"] >= count, timeout, "registration %d" % count)

    def wait_healthy(self, resource, n, timeout=10):
        return self._wait(resource, lambda s: s["allocatable"] == n, timeout, "%d healthy devices" % n)

    def wait_update(self, resource, after, timeout=10):
        return self._wait(resource, lambda s: s["updates"] > after, timeout, "update > %d" % after)

    def wait_disconnected(self, resource, timeout=10):
        return self._wait(resource, lambda s: not s["registered"] and s["registrations"] > 0, timeout,
                          "the end of ListAndWatch")

    # ---- allocation (§2.2 item 6) ----------------------------------------------------------------
    def allocate(self, resource, size=None, device_ids=None, reuse=(), namespace="default", pod=None,
                 container="main", publish="after", concurrent=False):
        if publish not in ("after", "before", "none"):
            raise ValueError("publish must be after, before or none")
        if concurrent:              # several admissions at once: a plugin must not rely on one
            return self._allocate(resource, size, device_ids, list(reuse), namespace, pod, container, publish)
        with self.alloc_lock:       # the kubelet admits one pod at a time
            return self._allocate(resource, size, device_ids, list(reuse), namespace, pod, container, publish)

    def _allocate(self, resource, size, device_ids, reuse, namespace, pod, container, publish):
        out = {"devices": None, "preferred_request": None, "preferred": None, "response": None,
               "pre_start": False}
        try:
            with self.cond:
                pod = pod or "pod-%d" % (len(self.allocations) + 1)
                res = self.resources.get(resource)
                ep = res.endpoint if res else None
            chosen = list(device_ids) if device_ids is not None else self._select(resource, res, size, reuse, out)
            if ep is None:
                raise _RpcFailure("select", None, "unknown Device Plugin %s" % resource)
            record = {"namespace": namespace, "pod": pod, "container": container, "resource": resource,
                      "devices": chosen, "published": publish == "before"}
            with self.cond:     # devicesToAllocate counts them in allocatedDevices before the RPC
                self.allocations.append(record)
                self.cond.notify_all()
        except _RpcFailure as f:
            return dict(out, ok=False, stage=f.stage, code=f.code, details=f.details, error=str(f))
        try:
            if ep.stopped:
                raise _RpcFailure("Allocate", None, "endpoint stopped for %s" % resource)
            req = dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=chosen)])
            try:
                resp = _unary(ep.channel, "/v1beta1.DevicePlugin/Allocate", dp.AllocateRequest,
                              dp.AllocateResponse)(req)
            except grpc.RpcError as e:
                raise _RpcFailure("Allocate", _code(e), e.details())
            if len(resp.container_responses) == 0:
                raise _RpcFailure("Allocate", None, "no containers return in allocation response %s" % resp)
        except _RpcFailure as f:
            with self.cond:     # m.allocatedDevices = m.podDevices.devices(): the ids are free again
                self.allocations.remove(record)
                self.cond.notify_all()
            return dict(out, ok=False, stage=f.stage, code=f.code, details=f.details, error=str(f))
        cr = resp.container_responses[0]
        out["devices"] = chosen
        out["response"] = json_format.MessageToDict(cr, preserving_proto_field_name=True,
                                                    including_default_value_fields=True)
        for k in ("envs", "annotations"):
            out["response"].setdefault(k, {})
        with self.cond:     # podDevices.insert: visible in pod-resources from now on
            record["published"] = publish != "none"
            self.cond.notify_all()
        self._write_checkpoint()
        # GetDeviceRunContainerOptions -> callPreStartContainerIfNeeded
        if ep.options.pre_start_required:
            try:
                _unary(ep.channel, "/v1beta1.DevicePlugin/PreStartContainer", dp.PreStartContainerRequest,
                       dp.PreStartContainerResponse)(dp.PreStartContainerRequest(devices_ids=chosen),
                                                     timeout=PRE_START_TIMEOUT)
                out["pre_start"] = True
            except grpc.RpcError as e:
                f = _RpcFailure("PreStartContainer", _code(e), e.details())
                return dict(out, ok=False, stage=f.stage, code=f.code, details=f.details, error=str(f))
        return dict(out, ok=True)

    def _select(self, resource, res, size, reuse, out):
        """manager.go devicesToAllocate with no topology hint (everything is 'noAffinity').
        The kubelet drops m.mutex around the GetPreferredAllocation call; so does this."""
        with self.cond:
            return self._select_locked(resource, res, size, reuse, out)

    def _select_locked(self, resource, res, size, reuse, out):
        if res is None:
            raise _RpcFailure("select", None, "cannot allocate unregistered device %s" % resource)
        healthy = [d for d, v in res.devices.items() if v["health"] == "Healthy"]
        if not healthy:
            raise _RpcFailure("select", None,
                              "no healthy devices present; cannot allocate unhealthy devices %s" % resource)
        if size is None:
            raise _RpcFailure("select", None, "allocate needs size or device_ids")
        allocated = []

        def take(devs):
            for d in devs:
                if len(allocated) == size:
                    break
                if d not in allocated:
                    allocated.append(d)
            return len(allocated) == size

        if take(reuse):
            return allocated
        in_use = self._allocated(resource)
        available = sorted(d for d in healthy if d not in in_use and d not in allocated)
        if len(available) < size - len(allocated):
            raise _RpcFailure("select", None, "requested number of devices unavailable for %s. Requested: %d, "
                              "Available: %d" % (resource, size - len(allocated), len(available)))
        ep = res.endpoint
        if ep is not None and ep.options.get_preferred_allocation_available:
            if ep.stopped:
                raise _RpcFailure("GetPreferredAllocation", None, "endpoint stopped for %s" % resource)
            req = {"available": sorted(set(available) | set(allocated)), "must_include": list(allocated),
                   "size": size}
            out["preferred_request"] = req
            self.cond.release()
            try:
                resp = _unary(ep.channel, "/v1beta1.DevicePlugin/GetPreferredAllocation",
                              dp.PreferredAllocationRequest, dp.PreferredAllocationResponse)(
                    dp.PreferredAllocationRequest(container_requests=[dp.ContainerPreferredAllocationRequest(
                        available_deviceIDs=req["available"], must_include_deviceIDs=req["must_include"],
                        allocation_size=size)]))
            except grpc.RpcError as e:
                raise _RpcFailure("GetPreferredAllocation", _code(e),
                                  "device plugin GetPreferredAllocation rpc failed with err: %s" % e.details())
            finally:
                self.cond.acquire()
            if resp.container_responses:
                out["preferred"] = list(resp.container_responses[0].deviceIDs)
                if take([d for d in out["preferred"] if d in available]):
                    return allocated
        if take(available):
            return allocated
        raise _RpcFailure("select", None, "unexpectedly allocated less resources than required")

    def release(self, namespace, pod):
        with self.cond:
            self.allocations = [a for a in self.allocations if (a["namespace"], a["pod"]) != (namespace, pod)]
            self.cond.notify_all()
        self._write_checkpoint()

    # ---- PodResources (§2.3) ---------------------------------------------------------------------
    def set_pods(self, pods):
        with self.cond:
            self.pods = json.loads(json.dumps(pods))

    def _limited(self, fn):
        def handler(req, context):
            if self.limiter is not None and not self.limiter.allow():
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "rejected by rate limit")
            return fn(req, context)
        return handler

    def _numa(self, resource, dev):
        r = self.resources.get(resource)
        numa = r.devices.get(dev, {}).get("numa", []) if r else []
        return pr.TopologyInfo(nodes=[pr.NUMANode(ID=n) for n in numa]) if numa else None

    def _pod_messages(self):
        pods = {}       # (ns, name) -> {container: [(resource, id)]}
        with self.cond:
            for p in self.pods:
                cs = pods.setdefault((p.get("namespace", "default"), p["name"]), {})
                for c in p.get("containers", []):
                    lst = cs.setdefault(c["name"], [])
                    for resource, ids in c.get("devices", {}).items():
                        lst.extend((resource, d) for d in ids)
            for a in self.allocations:
                if a["published"]:
                    cs = pods.setdefault((a["namespace"], a["pod"]), {})
                    cs.setdefault(a["container"], []).extend((a["resource"], d) for d in a["devices"])
            out = {}
            for (ns, name), cs in pods.items():
                out[(ns, name)] = pr.PodResources(name=name, namespace=ns, containers=[
                    pr.ContainerResources(name=c, devices=[
                        pr.ContainerDevices(resource_name=r, device_ids=[d], topology=self._numa(r, d))
                        for r, d in devs]) for c, devs in cs.items()])
        return out

    def _pr_list(self, req, context):
        return pr.ListPodResourcesResponse(pod_resources=list(self._pod_messages().values()))

    def _pr_get(self, req, context):
        p = self._pod_messages().get((req.pod_namespace, req.pod_name))
        if p is None:
            context.abort(grpc.StatusCode.NOT_FOUND, "pod %s in namespace %s not found"
                          % (req.pod_name, req.pod_namespace))
        return pr.GetPodResourcesResponse(pod_resources=p)

    def _pr_allocatable(self, req, context):
        with self.cond:
            devs = [pr.ContainerDevices(resource_name=n, device_ids=[d], topology=self._numa(n, d))
                    for n, r in self.resources.items() for d in r.devices]
        return pr.AllocatableResourcesResponse(devices=devs)


def _code(err):
    try:
        return err.code().name
    except Exception:
        return "UNKNOWN"


# ---- the process and its control protocol --------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plugin-dir", required=True)
    ap.add_argument("--podres-dir")
    ap.add_argument("--dial-timeout", type=float, default=10.0)
    ap.add_argument("--no-rate-limit", action="store_true")
    args = ap.parse_args()
    k = FakeKubelet(args.plugin_dir, args.podres_dir, args.dial_timeout, not args.no_rate_limit)
    k.start()
    out_lock = threading.Lock()

    def emit(obj):
        with out_lock:
            sys.stdout.write(json.dumps(obj) + "\n")
            sys.stdout.flush()

    emit({"event": "ready", "impl": "python-grpcio", "kubelet_socket": k.kubelet_socket,
          "podres_socket": k.podres_socket})
    done = threading.Event()

    def handle(msg):
        rid, cmd = msg.get("id"), msg.get("cmd")
        a = {x: y for x, y in msg.items() if x not in ("id", "cmd")}
        timeout = a.pop("timeout", 10)
        try:
            if cmd == "state":
                reply = k.state()
            elif cmd == "wait_registered":
                reply = {"resource": k.wait_registered(a["resource"], a.get("count", 1), timeout)}
            elif cmd == "wait_healthy":
                reply = {"resource": k.wait_healthy(a["resource"], a["n"], timeout)}
            elif cmd == "wait_update":
                reply = {"resource": k.wait_update(a["resource"], a.get("after", 0), timeout)}
            elif cmd == "wait_disconnected":
                reply = {"resource": k.wait_disconnected(a["resource"], timeout)}
            elif cmd == "allocate":
                reply = k.allocate(**a)
                emit(dict(reply, id=rid))
                return
            elif cmd == "release":
                k.release(a["namespace"], a["pod"])
                reply = {}
            elif cmd == "set_pods":
                k.set_pods(a["pods"])
                reply = {}
            elif cmd == "restart":
                k.restart(float(a.get("cleanup_delay", 0)))
                reply = {}
            elif cmd == "quit":
                emit({"id": rid, "ok": True})
                done.set()
                return
            else:
                raise ValueError("unknown command %r" % cmd)
            emit(dict(reply, id=rid, ok=True))
        except Exception as e:      # noqa: BLE001 - every failure is a reply
            emit({"id": rid, "ok": False, "error": "%s: %s" % (type(e).__name__, e)})

    def reader():
        for line in sys.stdin:
            if line.strip():
                try:
                    msg = json.loads(line)
                except ValueError as e:
                    emit({"id": None, "ok": False, "error": "bad JSON: %s" % e})
                    continue
                threading.Thread(target=handle, args=(msg,), daemon=True).start()
        done.set()

    threading.Thread(target=reader, daemon=True).start()
    done.wait()
    k.stop()


if __name__ == "__main__":
    main()
