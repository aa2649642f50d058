#!/usr/bin/env python3
"""check_fake_kubelet.py - checks the fake kubelets (fake_kubelet.py on python3-grpcio, grpc-js/kubelet.js on
@grpc/grpc-js, kubelet-go on grpc-go with the kubelet's generated stubs) against an independent toy device
plugin written here with python3-grpcio (a DevicePlugin server and its Register client), through the fakes'
JSON control protocol (spec §2.2, §2.3).

Each implementation runs the same sequence in a fresh directory: start-up cleanup, register with dial-back
(GetDevicePluginOptions answered while Register is still open), ListAndWatch capacity/allocatable, health
propagation, allocation with GetPreferredAllocation, a failing Allocate, exhaustion, PreStartContainer,
Register errors (bad version, bad names, options failure, plugin not serving: the 10 s dial), a dropped
ListAndWatch stream (unhealthy, no redial), re-registration, kubelet restart (sockets deleted, the plugin
registers again, allocations survive). The pod-resources checks run against the Python and Go fakes (the
node one has no pod-resources server; they are TAP "# SKIP" there). The node run is "# SKIP" when
tests/peers/grpc-js/node_modules or node is missing; the Go run is "# SKIP" when the tests/peers/kubelet-go binary is not built
(TSR_KUBELET_GO, else the one tools/peers.sh built).
"""

import json
import os
import queue
import shutil
import stat
import sys
import tempfile
import threading
import time
from concurrent import futures

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import grpc  # noqa: E402
from drivers import Kubelet, kubelet_go_binary  # noqa: E402
from protos import deviceplugin as dp, podresources as pr  # noqa: E402

GPU, BAR, BAD = "example.com/gpu", "example.com/bar", "example.com/broken"
PODRES_ONLY = "podres"

CHECKS = [
    ("startup", "start-up: kubelet.sock served, a stale plugin socket deleted, checkpoint and plain files kept"),
    ("register", "Register returns OK after GetDevicePluginOptions was answered inside it; ListAndWatch follows"),
    ("options", "the options used are GetDevicePluginOptions', not RegisterRequest.options"),
    ("list", "first ListAndWatch: capacity 4, allocatable 4, the plugin's ids and NUMA nodes"),
    ("health", "a device turning Unhealthy: capacity 4, allocatable 3"),
    ("preferred", "allocate 2: GetPreferredAllocation(available = healthy free, must_include [], size 2)"),
    ("allocate", "Allocate gets the preferred ids in one container request; the response comes back whole"),
    ("alloc-error", "a failing Allocate returns its code and details, and frees the ids again"),
    ("exclusion", "allocated ids are no longer offered as available"),
    ("exhausted", "asking for more than is free fails before any RPC reaches the plugin"),
    ("prestart", "pre_start_required: no GetPreferredAllocation, Allocate then PreStartContainer(same ids)"),
    ("pr-list", "pod-resources List: the allocation, one ContainerDevices per id, published after Allocate"),
    ("pr-during", "during Allocate the container is absent from List (publish after), present with 'before'"),
    ("pr-get", "pod-resources Get of a known pod, NOT_FOUND for an unknown one"),
    ("pr-alloc", "GetAllocatableResources lists every device of every resource, unhealthy ones too"),
    ("pr-pods", "pods set by the controller appear in List"),
    ("pr-limit", "a burst of List calls: 10 pass, then RESOURCE_EXHAUSTED 'rejected by rate limit'"),
    ("bad-version", "Register v1alpha: UNKNOWN 'not supported', the plugin is never dialled"),
    ("bad-name", "Register gpu, kubernetes.io/gpu, x.kubernetes.io/gpu: UNKNOWN 'invalid' each"),
    ("options-fail", "GetDevicePluginOptions failing fails Register (UNKNOWN), the resource is not registered"),
    ("not-serving", "Register with nothing at the endpoint fails with UNKNOWN after the 10 s dial"),
    ("stream-end", "ListAndWatch ending: capacity kept, allocatable 0, and no redial"),
    ("reregister", "the plugin registering again brings its devices back"),
    ("restart-clean", "kubelet restart: plugin sockets deleted, checkpoint kept, kubelet.sock recreated"),
    ("restart-rereg", "after the restart the plugin registers again and its devices are back"),
    ("restart-keep", "allocations survive the restart (checkpoint): still not available"),
]
PODRES_CHECKS = {k for k, _ in CHECKS if k.startswith("pr-")}
PODRES_IMPLS = {"python", "go"}     # the fakes with a pod-resources server


class Tap:
    def __init__(self, impls):
        self.n = 0
        self.failed = 0
        print("1..%d" % (len(CHECKS) * len(impls)))
        sys.stdout.flush()

    def emit(self, good, text, directive=""):
        self.n += 1
        if not good:
            self.failed += 1
        print("%s %d - %s%s" % ("ok" if good else "not ok", self.n, text, directive))
        sys.stdout.flush()


class Run:
    """The checks of one implementation, reported in CHECKS order."""

    def __init__(self, tap, impl):
        self.tap, self.impl, self.i = tap, impl, 0

    def check(self, key, good, diag=None):
        name, text = CHECKS[self.i]
        assert name == key, "check order: expected %s, got %s" % (name, key)
        self.i += 1
        self.tap.emit(bool(good), "%s: %s" % (self.impl, text))
        if not good and diag is not None:
            for line in json.dumps(diag, indent=1, default=str).splitlines()[:40]:
                print("#   " + line)
        return good

    def skip(self, key, why):
        name, text = CHECKS[self.i]
        assert name == key
        self.i += 1
        self.tap.emit(True, "%s: %s" % (self.impl, text), " # SKIP " + why)

    def rest(self, good, why):
        while self.i < len(CHECKS):
            name, text = CHECKS[self.i]
            self.i += 1
            self.tap.emit(good, "%s: %s" % (self.impl, text), (" # SKIP " + why) if good else "")
            if not good:
                print("#   " + why)


# ---- the toy device plugin (independent of the fakes) ----------------------------------------------
def _unary(ch, path, req, resp):
    return ch.unary_unary(path, request_serializer=req.SerializeToString, response_deserializer=resp.FromString)


class ToyPlugin:
    def __init__(self, plugin_dir, endpoint, resource, ndev, preferred=True, pre_start=False, podres=None):
        self.dir, self.endpoint, self.resource = plugin_dir, endpoint, resource
        self.devices = [dp.Device(ID="dev-%d" % i, health="Healthy",
                                  topology=dp.TopologyInfo(nodes=[dp.NUMANode(ID=i % 2)])) for i in range(ndev)]
        self.options = dp.DevicePluginOptions(get_preferred_allocation_available=preferred,
                                              pre_start_required=pre_start)
        self.podres = podres
        self.calls = []             # (method, request, monotonic time)
        self.lock = threading.Lock()
        self.streams = []
        self.fail_allocate = None   # (StatusCode, details)
        self.fail_options = False
        self.peek = None            # during Allocate: the List reply seen through pod-resources
        self.server = None
        self.watch = None

    @property
    def socket(self):
        return os.path.join(self.dir, self.endpoint)

    def _rec(self, method, req):
        with self.lock:
            self.calls.append((method, req, time.monotonic()))

    def names(self):
        with self.lock:
            return [c[0] for c in self.calls]

    def serve(self):
        h = {
            "GetDevicePluginOptions": grpc.unary_unary_rpc_method_handler(
                self._options, dp.Empty.FromString, dp.DevicePluginOptions.SerializeToString),
            "ListAndWatch": grpc.unary_stream_rpc_method_handler(
                self._law, dp.Empty.FromString, dp.ListAndWatchResponse.SerializeToString),
            "GetPreferredAllocation": grpc.unary_unary_rpc_method_handler(
                self._preferred, dp.PreferredAllocationRequest.FromString,
                dp.PreferredAllocationResponse.SerializeToString),
            "Allocate": grpc.unary_unary_rpc_method_handler(
                self._allocate, dp.AllocateRequest.FromString, dp.AllocateResponse.SerializeToString),
            "PreStartContainer": grpc.unary_unary_rpc_method_handler(
                self._prestart, dp.PreStartContainerRequest.FromString,
                dp.PreStartContainerResponse.SerializeToString),
        }
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("v1beta1.DevicePlugin", h)])
        self.server.add_insecure_port("unix:" + self.socket)
        self.server.start()

    def stop(self):
        if self.server:
            for q in list(self.streams):
                q.put(None)
            self.server.stop(0).wait()
            self.server = None

    def _options(self, req, ctx):
        self._rec("GetDevicePluginOptions", req)
        if self.fail_options:
            ctx.abort(grpc.StatusCode.FAILED_PRECONDITION, "toy options refused")
        return self.options

    def _law(self, req, ctx):
        self._rec("ListAndWatch", req)
        q = queue.Queue()
        self.streams.append(q)
        try:
            yield dp.ListAndWatchResponse(devices=self.devices)
            while ctx.is_active():
                try:
                    item = q.get(timeout=0.1)
                except queue.Empty:
                    continue
                if item is None:
                    return
                yield item
        finally:
            self.streams.remove(q)

    def set_health(self, dev_id, health):
        for d in self.devices:
            if d.ID == dev_id:
                d.health = health
        for q in list(self.streams):
            q.put(dp.ListAndWatchResponse(devices=self.devices))

    def _preferred(self, req, ctx):
        self._rec("GetPreferredAllocation", req)
        c = req.container_requests[0]
        pick = list(c.must_include_deviceIDs)
        for d in sorted(c.available_deviceIDs, reverse=True):     # the toy prefers the highest ids
            if len(pick) < c.allocation_size and d not in pick:
                pick.append(d)
        return dp.PreferredAllocationResponse(container_responses=[
            dp.ContainerPreferredAllocationResponse(deviceIDs=pick)])

    def _allocate(self, req, ctx):
        self._rec("Allocate", req)
        if self.podres:
            with grpc.insecure_channel("unix:" + self.podres) as ch:
                self.peek = _unary(ch, "/v1.PodResourcesLister/List", pr.ListPodResourcesRequest,
                                   pr.ListPodResourcesResponse)(pr.ListPodResourcesRequest())
        if self.fail_allocate:
            ctx.abort(*self.fail_allocate)
        ids = sorted(req.container_requests[0].devices_ids)
        return dp.AllocateResponse(container_responses=[dp.ContainerAllocateResponse(
            envs={"TOY_DEVICES": ",".join(ids)}, annotations={"toy": "1"},
            mounts=[dp.Mount(container_path="/toy", host_path="/tmp/toy", read_only=True)],
            devices=[dp.DeviceSpec(container_path="/dev/" + i, host_path="/dev/null", permissions="rw")
                     for i in ids],
            cdi_devices=[dp.CDIDevice(name="example.com/gpu=" + i) for i in ids])])

    def _prestart(self, req, ctx):
        self._rec("PreStartContainer", req)
        return dp.PreStartContainerResponse()

    def register(self, version="v1beta1", resource=None, endpoint=None, options=None):
        """Register on kubelet.sock; returns (code name, details, seconds, monotonic time of the reply)."""
        t0 = time.monotonic()
        with grpc.insecure_channel("unix:" + os.path.join(self.dir, "kubelet.sock")) as ch:
            try:
                _unary(ch, "/v1beta1.Registration/Register", dp.RegisterRequest, dp.Empty)(dp.RegisterRequest(
                    version=version, endpoint=endpoint or self.endpoint, resource_name=resource or self.resource,
                    options=options if options is not None else self.options), timeout=30)
                code, details = "OK", ""
            except grpc.RpcError as e:
                code, details = e.code().name, e.details()
        t1 = time.monotonic()
        return code, details, t1 - t0, t1

    def watch_for_restart(self):
        """What a plugin does (§2.2 item 8): when its socket disappears, serve again and re-register."""
        stop = threading.Event()

        def loop():
            while not stop.is_set():
                if self.server and not os.path.exists(self.socket):
                    self.stop()
                    time.sleep(0.05)
                    self.serve()
                    while not stop.is_set() and self.register()[0] != "OK":
                        time.sleep(0.2)
                time.sleep(0.05)
        threading.Thread(target=loop, daemon=True).start()
        self.watch = stop


# ---- driving a fake through its control protocol ---------------------------------------------------
def _podres(sock, method, req, resp_cls, req_obj):
    with grpc.insecure_channel("unix:" + sock) as ch:
        try:
            return "OK", _unary(ch, "/v1.PodResourcesLister/" + method, req, resp_cls)(req_obj)
        except grpc.RpcError as e:
            return e.code().name, e.details()


def run_impl(tap, impl, argv_for):
    r = Run(tap, impl)
    tmp = tempfile.mkdtemp(prefix="tsr-kubelet-")
    pdir, podres_dir = os.path.join(tmp, "device-plugins"), os.path.join(tmp, "pod-resources")
    os.makedirs(pdir)
    # what an earlier kubelet left: a stale plugin socket, its checkpoint, a plain file
    import socket as so
    stale = so.socket(so.AF_UNIX)
    stale.bind(os.path.join(pdir, "stale.sock"))
    stale.close()
    for name in ("kubelet_internal_checkpoint", "notes.txt"):
        with open(os.path.join(pdir, name), "w") as f:
            f.write("{}")
    fake = Kubelet(argv_for(pdir, podres_dir))
    plugins = []
    try:
        _sequence(r, fake, pdir, podres_dir, plugins, impl in PODRES_IMPLS)
    except Exception as e:  # noqa: BLE001 - the remaining checks fail with the reason
        r.rest(False, "aborted: %s: %s" % (type(e).__name__, e))
    finally:
        for p in plugins:
            if p.watch:
                p.watch.set()
            p.stop()
        fake.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _sequence(r, fake, pdir, podres_dir, plugins, has_podres):
    ksock = os.path.join(pdir, "kubelet.sock")
    r.check("startup", fake.ready.get("event") == "ready" and os.path.exists(ksock)
            and stat.S_ISSOCK(os.stat(ksock).st_mode) and not os.path.exists(os.path.join(pdir, "stale.sock"))
            and os.path.exists(os.path.join(pdir, "kubelet_internal_checkpoint"))
            and os.path.exists(os.path.join(pdir, "notes.txt")), fake.ready)

    gpu = ToyPlugin(pdir, "gpu.sock", GPU, 4, podres=os.path.join(podres_dir, "kubelet.sock")
                    if has_podres else None)
    plugins.append(gpu)
    gpu.serve()
    # RegisterRequest.options say "no preferred allocation"; GetDevicePluginOptions says yes.
    code, details, _, t_reply = gpu.register(options=dp.DevicePluginOptions())
    st = fake.call("wait_registered", resource=GPU)
    time.sleep(0.2)
    calls = list(gpu.calls)
    t_opt = [c[2] for c in calls if c[0] == "GetDevicePluginOptions"]
    r.check("register", code == "OK" and st["ok"] and [c[0] for c in calls][:2] == [
        "GetDevicePluginOptions", "ListAndWatch"] and t_opt and t_opt[0] < t_reply,
        {"code": code, "details": details, "calls": [c[0] for c in calls], "state": st})
    st = fake.call("wait_healthy", resource=GPU, n=4)
    res = st.get("resource") or {}
    r.check("options", (res.get("options") or {}).get("get_preferred_allocation_available") is True, st)
    r.check("list", st["ok"] and res["capacity"] == 4 and res["allocatable"] == 4
            and sorted(d["id"] for d in res["devices"]) == ["dev-0", "dev-1", "dev-2", "dev-3"]
            and {d["id"]: d["numa"] for d in res["devices"]}.get("dev-1") == [1], st)

    gpu.set_health("dev-1", "Unhealthy")
    st = fake.call("wait_update", resource=GPU, after=res["updates"])
    res = st.get("resource") or {}
    r.check("health", st["ok"] and res["capacity"] == 4 and res["allocatable"] == 3
            and res["unhealthy"] == ["dev-1"], st)

    a = fake.call("allocate", resource=GPU, size=2, namespace="ns1", pod="p1", container="c1")
    pref = [c[1] for c in gpu.calls if c[0] == "GetPreferredAllocation"]
    preq = pref[0].container_requests[0] if pref else None
    r.check("preferred", a.get("ok") and len(pref) == 1 and len(pref[0].container_requests) == 1
            and sorted(preq.available_deviceIDs) == ["dev-0", "dev-2", "dev-3"]
            and list(preq.must_include_deviceIDs) == [] and preq.allocation_size == 2
            and a.get("preferred") == ["dev-3", "dev-2"], {"reply": a, "requests": [str(p) for p in pref]})
    allocs = [c[1] for c in gpu.calls if c[0] == "Allocate"]
    resp = a.get("response") or {}
    r.check("allocate", len(allocs) == 1 and len(allocs[0].container_requests) == 1
            and sorted(allocs[0].container_requests[0].devices_ids) == ["dev-2", "dev-3"]
            and sorted(a.get("devices") or []) == ["dev-2", "dev-3"]
            and resp.get("envs") == {"TOY_DEVICES": "dev-2,dev-3"} and resp.get("annotations") == {"toy": "1"}
            and resp.get("mounts") == [{"container_path": "/toy", "host_path": "/tmp/toy", "read_only": True}]
            and [d.get("container_path") for d in resp.get("devices", [])] == ["/dev/dev-2", "/dev/dev-3"]
            and resp.get("cdi_devices") == [{"name": "example.com/gpu=dev-2"}, {"name": "example.com/gpu=dev-3"}],
            {"reply": a, "requests": [str(x) for x in allocs]})
    peek_after = gpu.peek

    gpu.fail_allocate = (grpc.StatusCode.INTERNAL, "toy allocate refused")
    a = fake.call("allocate", resource=GPU, size=1, namespace="ns1", pod="p2", container="c1")
    gpu.fail_allocate = None
    st = fake.call("state")
    r.check("alloc-error", not a.get("ok") and a.get("stage") == "Allocate" and a.get("code") == "INTERNAL"
            and a.get("details") == "toy allocate refused"
            and st["resources"][GPU]["allocated"] == ["dev-2", "dev-3"], {"reply": a, "state": st})

    n_pref = len([1 for c in gpu.calls if c[0] == "GetPreferredAllocation"])
    a = fake.call("allocate", resource=GPU, size=1, namespace="ns1", pod="p3", container="c1",
                  publish="before")
    pref = [c[1] for c in gpu.calls if c[0] == "GetPreferredAllocation"][n_pref:]
    r.check("exclusion", a.get("ok") and len(pref) == 1
            and list(pref[0].container_requests[0].available_deviceIDs) == ["dev-0"]
            and a.get("devices") == ["dev-0"], {"reply": a, "requests": [str(p) for p in pref]})
    peek_before = gpu.peek

    n_calls = len(gpu.calls)
    a = fake.call("allocate", resource=GPU, size=1, namespace="ns1", pod="p4", container="c1")
    r.check("exhausted", not a.get("ok") and "requested number of devices unavailable" in a.get("details", "")
            and len(gpu.calls) == n_calls, a)

    bar = ToyPlugin(pdir, "bar.sock", BAR, 2, preferred=False, pre_start=True)
    plugins.append(bar)
    bar.serve()
    code = bar.register()[0]
    fake.call("wait_healthy", resource=BAR, n=2)
    a = fake.call("allocate", resource=BAR, size=1, namespace="ns2", pod="b1", container="c1")
    names = [n for n in bar.names() if n not in ("GetDevicePluginOptions", "ListAndWatch")]
    ps = [c[1] for c in bar.calls if c[0] == "PreStartContainer"]
    r.check("prestart", code == "OK" and a.get("ok") and a.get("pre_start") is True
            and names == ["Allocate", "PreStartContainer"] and ps
            and list(ps[0].devices_ids) == a.get("devices"), {"reply": a, "calls": names})

    if has_podres:
        psock = os.path.join(podres_dir, "kubelet.sock")
        code, lst = _podres(psock, "List", pr.ListPodResourcesRequest, pr.ListPodResourcesResponse,
                            pr.ListPodResourcesRequest())
        pods = {(p.namespace, p.name): p for p in lst.pod_resources} if code == "OK" else {}
        p1 = pods.get(("ns1", "p1"))
        r.check("pr-list", p1 is not None and [c.name for c in p1.containers] == ["c1"]
                and sorted((d.resource_name, tuple(d.device_ids), tuple(n.ID for n in d.topology.nodes))
                           for d in p1.containers[0].devices) == [(GPU, ("dev-2",), (0,)), (GPU, ("dev-3",), (1,))]
                and ("ns1", "p2") not in pods, str(lst))
        seen = [{(p.namespace, p.name) for p in pk.pod_resources} if pk else None for pk in (peek_after, peek_before)]
        r.check("pr-during", seen[0] is not None and ("ns1", "p1") not in seen[0] and ("ns1", "p3") in seen[1],
                [sorted(s) if s is not None else None for s in seen])
        time.sleep(0.2)     # refill the limiter's burst
        code, got = _podres(psock, "Get", pr.GetPodResourcesRequest, pr.GetPodResourcesResponse,
                            pr.GetPodResourcesRequest(pod_name="p3", pod_namespace="ns1"))
        code2, det2 = _podres(psock, "Get", pr.GetPodResourcesRequest, pr.GetPodResourcesResponse,
                              pr.GetPodResourcesRequest(pod_name="nope", pod_namespace="ns1"))
        r.check("pr-get", code == "OK" and got.pod_resources.name == "p3"
                and [tuple(d.device_ids) for d in got.pod_resources.containers[0].devices] == [("dev-0",)]
                and code2 == "NOT_FOUND", [code, str(got), code2, str(det2)])
        code, al = _podres(psock, "GetAllocatableResources", pr.AllocatableResourcesRequest,
                           pr.AllocatableResourcesResponse, pr.AllocatableResourcesRequest())
        ids = sorted((d.resource_name, d.device_ids[0]) for d in al.devices) if code == "OK" else None
        r.check("pr-alloc", ids == sorted([(GPU, "dev-%d" % i) for i in range(4)] + [(BAR, "dev-0"), (BAR, "dev-1")])
                and all(len(d.device_ids) == 1 for d in al.devices), [code, str(al)])
        sp = fake.call("set_pods", pods=[{"namespace": "ctl", "name": "w", "containers": [
            {"name": "c", "devices": {"example.com/other": ["o1", "o2"]}}]}])
        code, lst = _podres(psock, "List", pr.ListPodResourcesRequest, pr.ListPodResourcesResponse,
                            pr.ListPodResourcesRequest())
        w = [p for p in lst.pod_resources if (p.namespace, p.name) == ("ctl", "w")] if code == "OK" else []
        r.check("pr-pods", sp.get("ok") and len(w) == 1 and sorted(
            d.device_ids[0] for d in w[0].containers[0].devices) == ["o1", "o2"] and ("ns1", "p1") in {
            (p.namespace, p.name) for p in lst.pod_resources}, [sp, code, str(lst)])
        time.sleep(0.2)
        codes = []
        with grpc.insecure_channel("unix:" + psock) as ch:
            f = _unary(ch, "/v1.PodResourcesLister/List", pr.ListPodResourcesRequest, pr.ListPodResourcesResponse)
            for _ in range(30):
                try:
                    f(pr.ListPodResourcesRequest())
                    codes.append("OK")
                except grpc.RpcError as e:
                    codes.append((e.code().name, e.details()))
        r.check("pr-limit", codes[:10] == ["OK"] * 10
                and ("RESOURCE_EXHAUSTED", "rejected by rate limit") in codes[10:], codes)
    else:
        for k in ("pr-list", "pr-during", "pr-get", "pr-alloc", "pr-pods", "pr-limit"):
            r.skip(k, "no pod-resources server in this implementation")

    probe = ToyPlugin(pdir, "probe.sock", "example.com/probe", 1)
    plugins.append(probe)
    probe.serve()
    code, details, _, _ = probe.register(version="v1alpha")
    r.check("bad-version", code == "UNKNOWN" and "not supported" in details and probe.calls == [],
            [code, details, probe.names()])
    got = [probe.register(resource=n)[:2] for n in ("gpu", "kubernetes.io/gpu", "x.kubernetes.io/gpu")]
    r.check("bad-name", all(c == "UNKNOWN" and "invalid" in d for c, d in got) and probe.calls == [],
            [got, probe.names()])

    broken = ToyPlugin(pdir, "broken.sock", BAD, 1)
    plugins.append(broken)
    broken.fail_options = True
    broken.serve()
    code, details, _, _ = broken.register()
    st = fake.call("state")
    bres = st["resources"].get(BAD)
    r.check("options-fail", code == "UNKNOWN" and "toy options refused" in details
            and (bres is None or not bres["registered"]) and "ListAndWatch" not in broken.names(),
            [code, details, bres])

    code, details, secs, _ = probe.register(endpoint="nobody.sock")
    r.check("not-serving", code == "UNKNOWN" and 9.0 <= secs <= 15.0, [code, details, secs])

    n_calls = len(bar.calls)
    bar.stop()
    st = fake.call("wait_disconnected", resource=BAR)
    bar.serve()     # serving again: a kubelet that redialled would reach it
    time.sleep(1.5)
    st2 = fake.call("state")
    b = st2["resources"].get(BAR) or {}
    r.check("stream-end", st.get("ok") and b.get("capacity") == 2 and b.get("allocatable") == 0
            and not b.get("registered") and len(bar.calls) == n_calls, [st, b, bar.names()[n_calls:]])
    code = bar.register()[0]
    st = fake.call("wait_healthy", resource=BAR, n=2)
    r.check("reregister", code == "OK" and st.get("ok") and st["resource"]["registrations"] == 2
            and st["resource"]["capacity"] == 2, st)

    gpu.watch_for_restart()
    regs = fake.call("state")["resources"][GPU]["registrations"]
    rs = fake.call("restart")
    time.sleep(0.1)
    r.check("restart-clean", rs.get("ok") and os.path.exists(ksock)
            and os.path.exists(os.path.join(pdir, "kubelet_internal_checkpoint"))
            and not os.path.exists(bar.socket) and not os.path.exists(probe.socket)
            and not os.path.exists(broken.socket), [rs, sorted(os.listdir(pdir))])
    st = fake.call("wait_registered", resource=GPU, count=regs + 1, timeout=15)
    st2 = fake.call("wait_healthy", resource=GPU, n=3)
    r.check("restart-rereg", st.get("ok") and st2.get("ok") and st2["resource"]["capacity"] == 4, [st, st2])
    n_pref = len([1 for c in gpu.calls if c[0] == "GetPreferredAllocation"])
    a = fake.call("allocate", resource=GPU, size=1, namespace="ns1", pod="p5", container="c1")
    pref = [c[1] for c in gpu.calls if c[0] == "GetPreferredAllocation"][n_pref:]
    st = fake.call("state")
    r.check("restart-keep", not a.get("ok") and "unavailable" in a.get("details", "")
            and pref == [] and st["resources"][GPU]["allocated"] == ["dev-0", "dev-2", "dev-3"],
            [a, st["allocations"]])


def main():
    node_dir = os.path.join(HERE, "grpc-js")
    node = shutil.which("node")
    impls = [("python", lambda d, p: [sys.executable, os.path.join(HERE, "fake_kubelet.py"),
                                       "--plugin-dir", d, "--podres-dir", p])]
    impls.append(("node", lambda d, p: [node, os.path.join(node_dir, "kubelet.js"), "--plugin-dir", d]))
    go_bin = kubelet_go_binary()
    impls.append(("go", lambda d, p: [go_bin, "--plugin-dir", d, "--podres-dir", p]))
    tap = Tap(impls)
    for name, argv_for in impls:
        if name == "node" and (not node or not os.path.isdir(os.path.join(node_dir, "node_modules"))):
            Run(tap, name).rest(True, "node or tests/peers/grpc-js/node_modules missing "
                                      "(npm ci --prefix tests/peers/grpc-js)")
            continue
        if name == "go" and not (go_bin and os.path.isfile(go_bin) and os.access(go_bin, os.X_OK)):
            Run(tap, name).rest(True, "the grpc-go fake kubelet is not built "
                                      "(tools/peers.sh build; or set TSR_KUBELET_GO)")
            continue
        run_impl(tap, name, argv_for)
    sys.exit(1 if tap.failed else 0)


if __name__ == "__main__":
    main()
