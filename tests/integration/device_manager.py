#!/usr/bin/env python3
"""device_manager.py TESSERA FAKE_APISERVER GEN_CERTS PEERS_DIR [IMPL] - the real
`tessera device-manager` binary on a node of eight fake H100 80GB HBM3 (GPUs 0-2 MIG on, 3-7
off; --fake with its state in a file), driven by a fake kubelet (IMPL: "python", the default,
tests/peers/fake_kubelet.py on python3-grpcio; "node", tests/peers/grpc-js/kubelet.js on
@grpc/grpc-js; or "go", the tests/peers/kubelet-go binary on grpc-go and the kubelet's own
generated stubs, found through TSR_KUBELET_GO or tools/peers.sh) as the kubelet drives device plugins
(spec/kubernetes-contracts.md §2), with the fake API server (tests/peers/fake_apiserver.py)
holding the node's Pods.

Checked, in order: every family's plugin registers (exclusive, shared, sliced, partitioned,
visibility) and lists its tokens with their health; the node's Devices object (the upstream
shape) and fit labels are published through the API server; Allocate of every family through the
kubelet's preferred-allocation path, with the container named by pod-resources (the grpc-js
kubelet serves none: there the device manager names it by the node's pending Pods), the env the
container gets and the allocation annotation recorded on the Pod; health moving on
ListAndWatch when a card is taken in another mode; the refusals (a card held in another mode,
FailedPrecondition; a token of another node, InvalidArgument); the MIG partition carved with its
ownership marker on disk; a kubelet restart (sockets deleted) followed by re-registration; the
partition's Pod deleted, then its instance and marker reclaimed after the debounce; a device
manager restart (SIGTERM exits 0 and removes its sockets) that re-registers and reuses a live
partition's instance for the same container (without pod-resources: refuses to guess it,
FailedPrecondition); and nothing but log lines on stderr.

Prints TAP. Without node_modules for IMPL=node, or without an executable TSR_KUBELET_GO for
IMPL=go, every check is skipped.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

results = []
NODE = "node-a"
GROUP = "h100-80gb-hbm3"  # the product's groupId, as token IDs carry it
FAKE = "NVIDIA H100 80GB HBM3:8:11100000"
RES = {
    "exclusive": "nvidia.com/gpu",
    "shared": "nvidia.com/gpu.shared",
    "sliced": "nvidia.com/gpu.sliced",
    "partitioned": "nvidia.com/gpu.partitioned",
    "visibility": "device.gpustack.ai/nvidia.visibility",
}
ALLOC = "device.gpustack.ai/accelerator.allocated"


def ok(cond, name, detail=""):
    results.append(bool(cond))
    print("%s %d - %s" % ("ok" if cond else "not ok", len(results), name), flush=True)
    if not cond and detail:
        for line in str(detail).splitlines()[:40]:
            print("#   " + line, flush=True)
    return bool(cond)


class DeviceManager:
    def __init__(self, tessera, d, kubeconfig, pdir, podres):
        self.lines = []
        self.proc = subprocess.Popen(
            [tessera, "device-manager", "--node-name", NODE, "--plugin-dir", pdir,
             "--pod-resources-socket", os.path.join(podres, "kubelet.sock"),
             "--pods-dir", os.path.join(d, "pods"), "--fake", FAKE,
             "--fake-state", os.path.join(d, "gpus.json"), "--kubeconfig", kubeconfig,
             "--poll-interval", "200ms", "--reclaim-interval", "300ms", "--log-level", "debug"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode


def pod(name, limits, container="main"):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"nodeName": NODE, "containers": [
                {"name": container, "image": "x", "resources": {"limits": limits}}]}}


class Node:
    """The test's view of the node: the API server's Pods and the kubelet's pod-resources."""

    def __init__(self, api, kubelet, podres):
        self.api, self.kubelet, self.podres, self.pods = api, kubelet, podres, []

    def create(self, name, limits):
        p = self.api.create("/api/v1/namespaces/team-a/pods", pod(name, limits))
        self.pods.append(name)
        self.publish()
        return p

    def delete(self, name):
        self.api.request("DELETE", "/api/v1/namespaces/team-a/pods/" + name)
        self.pods.remove(name)
        self.kubelet.call("release", namespace="team-a", pod=name)
        self.publish()

    def publish(self):
        """The kubelet lists every Pod it runs in pod-resources. The grpc-js kubelet serves no
        pod-resources: the device manager then names the container by the node's Pods alone."""
        if not self.podres:
            return
        self.kubelet.call("set_pods", pods=[{"namespace": "team-a", "name": n,
                                             "containers": [{"name": "main"}]}
                                            for n in self.pods])

    def annotation(self, name):
        p = self.api.request("GET", "/api/v1/namespaces/team-a/pods/" + name)
        v = p["metadata"].get("annotations", {}).get(ALLOC)
        return json.loads(v) if v else None

    def allocate(self, family, name, **kw):
        return self.kubelet.call("allocate", resource=RES[family], namespace="team-a", pod=name,
                                 container="main", **kw)


def env(reply):
    return (reply.get("response") or {}).get("envs", {}).get("NVIDIA_VISIBLE_DEVICES", "")


def resource(kubelet, family):
    return kubelet.call("state")["resources"].get(RES[family], {})


def gpu_state(d):
    with open(os.path.join(d, "gpus.json")) as f:
        return json.load(f)


def markers(d):
    found = []
    for root, _, files in os.walk(os.path.join(d, "pods")):
        found += [os.path.join(root, f) for f in files if f.startswith("nvidia-mig-")]
    return found


def check_registration(kubelet):
    for fam, name in RES.items():
        r = kubelet.call("wait_registered", resource=name, timeout=15)
        ok(r.get("ok"), "%s registers %s with the kubelet" % (fam, name), r)
    want = {"exclusive": (5, 5), "shared": (50, 50), "sliced": (5 * 128, 5 * 128),
            "partitioned": (21, 21), "visibility": (8 * 512, 8 * 512)}
    for fam, (cap, alloc) in want.items():
        kubelet.call("wait_healthy", resource=RES[fam], n=alloc, timeout=15)
        r = kubelet.call("state")["resources"].get(RES[fam], {})
        ok(r.get("capacity") == cap and r.get("allocatable") == alloc,
           "%s lists %d tokens, %d healthy" % (fam, cap, alloc),
           {k: r.get(k) for k in ("capacity", "allocatable")})
    st = kubelet.call("state")["resources"]
    ids = [dev["id"] for dev in st[RES["shared"]]["devices"]]
    ok(all(i.startswith(GROUP + ":GPU-") for i in ids) and ids[1].endswith(":160000"),
       "token IDs are <group>:<GPU UUID>:<index>, shares stepping by 160000", ids[:3])
    opts = st[RES["exclusive"]].get("options", {})
    ok(opts.get("get_preferred_allocation_available") and not opts.get("pre_start_required"),
       "options: preferred allocation available, no pre-start hook", opts)


def check_published(api):
    """The daemon writes its node's Devices object and fit labels through the API server."""
    def devices():
        obj = api.request("GET", "/apis/worker.gpustack.ai/v1alpha1/devices/" + NODE)
        return obj if obj.get("status") and (obj.get("spec") or {}).get("groups") else None

    dev = eventually_value(devices)
    ok(dev and len(dev["spec"]["groups"][0]["accelerators"]) == 8,
       "the Devices object of the node is created: 8 accelerators, a status ledger", dev)
    accs = dev["spec"]["groups"][0]["accelerators"] if dev else []
    ok([sorted(a["status"]) for a in accs] == [["physicalSliced", "unhealthy"]] * 3
       + [["logicalSliced", "unhealthy"]] * 5
       and accs[0]["topology"]["pciBusId"] == "00000000:8D:00.0"
       and [p["placements"] for p in accs[0]["status"]["physicalSliced"]["profiles"]
            if p["name"] == "7g.80gb"] == [[{"start": 0, "length": 8}]]
       and "physical" in dev["spec"]["groups"][0]["acceleratorSlicedDetail"],
       "its spec has the upstream shape: GPUs 0-2 physicalSliced, 3-7 logicalSliced, the "
       "driver's bus ids", accs[:1])
    labels = eventually_value(lambda: {k: v for k, v in api.request(
        "GET", "/api/v1/nodes/" + NODE)["metadata"].get("labels", {}).items()
        if ".fit.gpustack.ai/" in k})
    ok(labels.get("sliced-max-free-units.fit.gpustack.ai/nvidia-" + GROUP) == "1600000",
       "the node's fit labels are published (a free card: 1600000 units)", labels)


def check_allocate(node, kubelet):
    """Returns the UUIDs of the exclusive pair and the MIG Pod's reply."""
    node.create("ex", {"nvidia.com/gpu": "2"})
    r = node.allocate("exclusive", "ex", size=2)
    uuids = env(r).split(",")
    ok(r.get("ok") and len(uuids) == 2 and r.get("preferred") == r.get("devices"),
       "exclusive: 2 whole GPUs, the kubelet takes the plugin's preferred tokens", r)
    ann = node.api and eventually_value(lambda: node.annotation("ex"))
    ok(ann and [a["mode"] for a in ann["main"]["devices"]["groups"][0]["accelerators"]] == [1, 1]
       and sorted(a["id"] for a in ann["main"]["devices"]["groups"][0]["accelerators"])
       == sorted(uuids), "the allocation annotation is recorded on the Pod", ann)
    ok(eventually_value(lambda: node.api.request("GET", "/api/v1/nodes/" + NODE)["metadata"][
        "labels"].get("shared-free-cards.fit.gpustack.ai/nvidia-" + GROUP) == "3"),
       "the grant is published: shared-free-cards drops from 5 to 3",
       node.api.request("GET", "/api/v1/nodes/" + NODE)["metadata"].get("labels"))
    ok(eventually_value(lambda: resource(kubelet, "shared").get("allocatable") == 30),
       "ListAndWatch: the two cards' shared tokens turn unhealthy (30 of 50 healthy)",
       resource(kubelet, "shared").get("allocatable"))

    node.create("sh", {"nvidia.com/gpu.shared": "2"})
    r = node.allocate("shared", "sh", size=2)
    sh = env(r).split(",")
    ok(r.get("ok") and len(set(sh)) == 2 and not set(sh) & set(uuids),
       "shared: one share on each of 2 distinct free cards", r)

    node.create("sl", {"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.units": "800000"})
    r = node.allocate("sliced", "sl", size=1)
    ok(r.get("ok") and env(r) and env(r) not in uuids + sh,
       "sliced: 800000 units on the one card still free", r)

    node.create("mig", {"nvidia.com/gpu.partitioned": "1",
                        "nvidia.com/gpu.partitioned.mig-3g.40gb": "1",
                        "nvidia.com/gpu.partitioned.units": "800000"})
    mig = node.allocate("partitioned", "mig", size=1)
    ok(mig.get("ok") and env(mig).startswith("MIG-"),
       "partitioned: only the MIG device is injected", mig)
    gi = [i for i in gpu_state(node.d)["gpus"][0]["instances"]]
    ok(len(gi) == 1 and gi[0].get("start") == 0, "the 3g.40gb instance is carved at start 0 of "
       "GPU 0", gi)
    ok(len(markers(node.d)) == 1, "its ownership marker is on disk", markers(node.d))
    ann = eventually_value(lambda: node.annotation("mig"))
    acc = ann and ann["main"]["devices"]["groups"][0]["accelerators"][0]
    ok(acc and acc.get("allocatedPhysicalProfile") == "3g.40gb"
       and acc.get("allocatedPhysicalID") == env(mig), "the annotation records the placement "
       "and the MIG device", acc)
    ok(eventually_value(lambda: resource(kubelet, "partitioned").get("capacity") == 18),
       "ListAndWatch: the partitioned pool shrinks to 18 (1 live + 3 free on GPU 0, 7 + 7)",
       resource(kubelet, "partitioned").get("capacity"))

    node.create("vis", {"device.gpustack.ai/nvidia.visibility": "1"})
    r = node.allocate("visibility", "vis", size=1)
    ok(r.get("ok") and env(r) == "void", "visibility: a Pod holding no card sees none", r)

    node.create("refused", {"nvidia.com/gpu": "1"})
    shared_token = "%s:%s:0000" % (GROUP, sh[0])
    r = node.allocate("exclusive", "refused", device_ids=[shared_token])
    ok(not r.get("ok") and r.get("code") == "FAILED_PRECONDITION"
       and "held in Shared mode" in r.get("details", ""),
       "a card held in shared mode refuses an exclusive claim (FailedPrecondition)", r)
    r = node.allocate("exclusive", "refused", device_ids=["other-group:GPU-x:0000"])
    ok(not r.get("ok") and r.get("code") == "INVALID_ARGUMENT",
       "a token that is not this node's is InvalidArgument", r)
    node.delete("refused")
    return mig


def eventually_value(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            v = pred()
        except Exception:  # noqa: BLE001 - not yet
            v = None
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.05)


def wait_listed(kubelet, family):
    """After a registration the kubelet knows no device until the plugin's first ListAndWatch."""
    eventually_value(lambda: resource(kubelet, family).get("allocatable"), timeout=15)


def check_kubelet_restart(kubelet):
    before = {n: resource(kubelet, f).get("registrations", 0) for f, n in RES.items()}
    r = kubelet.call("restart")
    ok(r.get("ok"), "the kubelet restarts (every socket in the plugin directory deleted)", r)
    for fam, name in RES.items():
        r = kubelet.call("wait_registered", resource=name, count=before[name] + 1, timeout=15)
        ok(r.get("ok"), "%s registers again after the kubelet restart" % fam, r)


def check_reclaim(node, d):
    node.delete("mig")
    ok(eventually_value(lambda: not gpu_state(d)["gpus"][0]["instances"], timeout=15),
       "the deleted Pod's MIG instance is destroyed after the debounce",
       gpu_state(d)["gpus"][0]["instances"])
    ok(eventually_value(lambda: not markers(d), timeout=5), "and its marker removed", markers(d))


def main():
    tessera, fake_script, gen_certs, peers = sys.argv[1:5]
    impl = sys.argv[5] if len(sys.argv) > 5 else "python"
    sys.path.insert(0, peers)
    from drivers import ApiServer, Kubelet, kubelet_go_binary, write_kubeconfig  # noqa: E402
    if impl == "node" and not os.path.isdir(os.path.join(peers, "grpc-js", "node_modules")):
        print("1..0 # SKIP tests/peers/grpc-js/node_modules is missing (npm ci)")
        return 0
    go_bin = kubelet_go_binary()
    if impl == "go" and not (go_bin and os.path.isfile(go_bin) and os.access(go_bin, os.X_OK)):
        print("1..0 # SKIP the grpc-go fake kubelet is not built (tools/peers.sh build; or set "
              "TSR_KUBELET_GO)")
        return 0
    if impl not in ("python", "node", "go"):
        print("1..1\nnot ok 1 - a known fake kubelet: %r is none of python, node, go" % impl)
        return 1
    d = tempfile.mkdtemp(prefix="tsr-dm-")
    api = kubelet = dm = None
    try:
        pdir, podres = os.path.join(d, "device-plugins"), os.path.join(d, "pod-resources")
        os.makedirs(pdir)
        os.makedirs(os.path.join(d, "pods"))
        subprocess.run(["sh", gen_certs, d], check=True, stdout=subprocess.DEVNULL)
        api = ApiServer(fake_script, d)
        kc = os.path.join(d, "kubeconfig")
        write_kubeconfig(kc, api.port, os.path.join(d, "ca.crt"))
        argv = {
            "python": [sys.executable, os.path.join(peers, "fake_kubelet.py"), "--plugin-dir", pdir,
                       "--podres-dir", podres, "--no-rate-limit"],
            "node": ["node", os.path.join(peers, "grpc-js", "kubelet.js"), "--plugin-dir", pdir],
            "go": [go_bin, "--plugin-dir", pdir, "--podres-dir", podres, "--no-rate-limit"],
        }[impl]
        kubelet = Kubelet(argv)
        api.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                     "metadata": {"name": NODE, "labels": {}}})
        dm = DeviceManager(tessera, d, kc, pdir, podres)
        node = Node(api, kubelet, impl in ("python", "go"))  # the fakes serving pod-resources
        node.d = d
        check_registration(kubelet)
        check_published(api)
        mig = check_allocate(node, kubelet)
        failed = [ln for ln in dm.lines if "publishing the node's keys" in ln]
        ok(not failed, "publishing never failed (or healed) against a healthy API server", failed)
        check_kubelet_restart(kubelet)
        check_reclaim(node, d)

        node.create("mig2", {"nvidia.com/gpu.partitioned": "1",
                             "nvidia.com/gpu.partitioned.mig-1g.10gb": "1",
                             "nvidia.com/gpu.partitioned.units": "200000"})
        wait_listed(kubelet, "partitioned")
        first = node.allocate("partitioned", "mig2", size=1)
        ok(first.get("ok") and env(first).startswith("MIG-"), "a second partition is carved",
           first)
        eventually_value(lambda: node.annotation("mig2"))
        rc = dm.stop()
        socks = [f for f in os.listdir(pdir) if f.startswith("tessera-")]
        ok(rc == 0 and not socks, "SIGTERM: exit 0 and the plugin sockets removed",
           {"rc": rc, "left": socks})
        regs = {n: resource(kubelet, f).get("registrations", 0) for f, n in RES.items()}
        dm = DeviceManager(tessera, d, kc, pdir, podres)
        for fam, name in RES.items():
            r = kubelet.call("wait_registered", resource=name, count=regs[name] + 1, timeout=15)
            ok(r.get("ok"), "%s registers again after a device manager restart" % fam, r)
        wait_listed(kubelet, "partitioned")
        again = node.allocate("partitioned", "mig2", device_ids=first.get("devices"))
        if node.podres:
            ok(again.get("ok") and env(again) == env(first),
               "after the restart the same container's Allocate reuses its live instance",
               {"first": env(first), "again": again})
        else:
            ok(not again.get("ok") and again.get("code") == "FAILED_PRECONDITION"
               and "no pending container" in again.get("details", ""),
               "without pod-resources an already allocated container cannot be named again: "
               "FailedPrecondition", again)
        ok(len(gpu_state(d)["gpus"][0]["instances"]) == 1, "no second instance was carved",
           gpu_state(d)["gpus"][0]["instances"])
        del mig
        rc = dm.stop()
        bad = [ln for ln in dm.lines if not ln.startswith("time=")]
        ok(rc == 0 and not bad, "the device manager's stderr holds only log lines", bad[:20])
        dm = None
    except Exception:  # noqa: BLE001 - any failure is one failed TAP line with its traceback
        ok(False, "the run completed", traceback.format_exc())
    finally:
        if dm:
            dm.stop()
            print("# device manager log tail:\n#   " + "\n#   ".join(dm.lines[-40:]))
        if kubelet:
            kubelet.close()
        if api:
            api.stop()
        shutil.rmtree(d, ignore_errors=True)
    print("1..%d" % len(results))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
