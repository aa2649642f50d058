"""kubelet.py - the kubelet's part on a node of the test control plane (spec/real-control-plane.md §7),
since no real kubelet runs here: a fake kubelet process (tests/peers/fake_kubelet.py on python3-grpcio,
tests/peers/grpc-js/kubelet.js on @grpc/grpc-js, or the grpc-go one built by tools/peers.sh) serves
the node's device-plugin Registration and pod-resources sockets, and this module does what the
kubelet's node status and pod workers do through the API server:

  * node status: every device-plugin resource's capacity (all devices) and allocatable (healthy
    ones) from ListAndWatch, and, as the kubelet does for any other extended resource in capacity
    (the counting keys the device manager publishes), allocatable = capacity; a key that leaves
    capacity leaves allocatable. Written by merge patch on nodes/<name>/status, only on change.
  * pods: a Pod bound to the node (spec.nodeName, by kube-scheduler or by the test) is admitted the
    way the kubelet admits it: for each container in order (init containers first), every resource
    it asks for that a device plugin registered is allocated through the fake kubelet (preferred
    allocation, Allocate, PreStartContainer), and the pod-resources server lists it. All granted:
    status Running with every container running and Ready. One refused: status Failed, reason
    UnexpectedAdmissionError, the plugin's message, as the kubelet fails it.
  * deletion: a Pod with a deletionTimestamp has its devices released (it leaves pod-resources),
    its containers reported terminated (exit code 137, phase Failed) and is deleted with
    gracePeriodSeconds 0, as the kubelet's status manager does once its containers are gone.

What it does not model: containers (nothing runs; a Pod stays Running until deleted), restarts,
probes, the topology manager, eviction, and node leases (no node-lifecycle controller runs).

    node = KubeletNode(cp, "node-a", impl="python"); node.start(); ...; node.stop()
With pods=False the pod workers do not run (node status still does): the test allocates through
node.call("allocate", ...) itself, as tests/cluster/test_device_manager.py does.
node.dir holds dp/ (the device-plugin dir for `tessera device-manager --plugin-dir`),
pr/kubelet.sock (pod-resources) and pods/ (the kubelet's pods directory).
"""

import json
import os
import sys
import threading
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = os.path.join(HERE, "..", "peers")
sys.path.insert(0, PEERS)

from drivers import Kubelet, kubelet_go_binary  # noqa: E402

from controlplane import ApiError  # noqa: E402

ALLOC_FAILED = "UnexpectedAdmissionError"


def kubelet_argv(impl, plugin_dir, podres_dir):
    """The command line of a fake kubelet on one gRPC stack: python, node or go."""
    if impl == "python":
        return ["/usr/bin/python3", os.path.join(PEERS, "fake_kubelet.py"), "--plugin-dir",
                plugin_dir, "--podres-dir", podres_dir, "--no-rate-limit"]
    if impl == "node":
        return ["node", os.path.join(PEERS, "grpc-js", "kubelet.js"), "--plugin-dir", plugin_dir]
    if impl == "go":
        binary = kubelet_go_binary()
        if not binary:
            raise RuntimeError("the grpc-go fake kubelet is not built: run tools/peers.sh build")
        return [binary, "--plugin-dir", plugin_dir, "--podres-dir", podres_dir, "--no-rate-limit"]
    raise ValueError("unknown fake kubelet %r" % impl)


def _quantity_count(v):
    """A device resource's request as the kubelet reads it: a whole number."""
    return int(str(v))


class KubeletNode:
    def __init__(self, cp, name, impl="python", labels=None, capacity=None, create=True,
                 pods=True):
        self.cp, self.name, self.impl = cp, name, impl
        self.pods = pods  # False: no pod workers (no admission, no deletion); node status only
        # Short names: a unix socket's path must fit in 108 bytes.
        self.dir = os.path.join(cp.dir, "n", name)
        self.plugin_dir = os.path.join(self.dir, "dp")
        self.podres_dir = os.path.join(self.dir, "pr")
        self.pods_dir = os.path.join(self.dir, "pods")
        for d in (self.plugin_dir, self.podres_dir, self.pods_dir):
            os.makedirs(d, exist_ok=True)
        self.podres_socket = os.path.join(self.podres_dir, "kubelet.sock") if impl != "node" else ""
        self.labels, self.capacity, self.create = labels, capacity, create
        self.kubelet = None
        self.lock = threading.Lock()
        self.admitted = {}  # pod uid -> {"pod": ns/name, "ok": bool, "allocations": [...]}
        self.running = {}   # pod uid -> (namespace, name, [container names]) listed in pod-resources
        self.errors = []
        self.stopping = threading.Event()
        self.threads = []

    # ---- lifecycle -----------------------------------------------------------------------------

    def start(self):
        if self.create:
            self.cp.create_node(self.name, labels=self.labels, capacity=self.capacity)
        self.kubelet = Kubelet(kubelet_argv(self.impl, self.plugin_dir, self.podres_dir))
        if not self.kubelet.ready:
            raise RuntimeError("the %s fake kubelet of %s did not start" % (self.impl, self.name))
        for target in (self._status_loop,) + ((self._pod_loop,) if self.pods else ()):
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def stop(self):
        self.stopping.set()
        if self.kubelet:
            self.kubelet.close()
        for t in self.threads:
            t.join(5)

    def call(self, cmd, **args):
        return self.kubelet.call(cmd, **args)

    # ---- node status ---------------------------------------------------------------------------

    def _status_loop(self):
        last = None
        while not self.stopping.wait(0.2):
            try:
                state = self.kubelet.call("state", wait=5)
                if not state.get("ok", True) and "resources" not in state:
                    continue
                node = self.cp.api("GET", "/api/v1/nodes/" + self.name)
                patch = self._status_patch(node, state.get("resources", {}))
                if patch and patch != last:
                    self.cp.merge_patch("/api/v1/nodes/%s/status" % self.name, patch)
                    last = patch
            except Exception as e:  # noqa: BLE001 - recorded; the loop keeps the node going
                self._error("node status: %s" % e)

    def _status_patch(self, node, resources):
        status = node.get("status", {})
        cap, alloc = status.get("capacity", {}), status.get("allocatable", {})
        want_cap, want_alloc = {}, {}
        for res, r in resources.items():
            if not r.get("registered"):
                continue
            want_cap[res] = str(r.get("capacity", 0))
            want_alloc[res] = str(r.get("allocatable", 0))
        for k, v in cap.items():
            if k not in want_cap and "/" in k and not k.startswith("kubernetes.io/"):
                want_alloc[k] = v  # an extended resource no plugin owns: allocatable follows
        patch_cap = {k: v for k, v in want_cap.items() if cap.get(k) != v}
        patch_alloc = {k: v for k, v in want_alloc.items() if alloc.get(k) != v}
        for k in alloc:
            if "/" in k and not k.startswith("kubernetes.io/") and k not in want_alloc \
                    and k not in cap:
                patch_alloc[k] = None
        if not patch_cap and not patch_alloc:
            return None
        out = {"status": {}}
        if patch_cap:
            out["status"]["capacity"] = patch_cap
        if patch_alloc:
            out["status"]["allocatable"] = patch_alloc
        return out

    # ---- pods ----------------------------------------------------------------------------------

    def _pod_loop(self):
        rv = None
        selector = urllib.parse.quote("spec.nodeName=" + self.name)
        while not self.stopping.is_set():
            try:
                if rv is None:
                    lst = self.cp.api("GET", "/api/v1/pods?fieldSelector=" + selector)
                    rv = lst["metadata"]["resourceVersion"]
                    for p in lst["items"]:
                        self._handle(p)
                path = ("/api/v1/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=30"
                        "&fieldSelector=%s&resourceVersion=%s" % (selector, rv))
                for ev in self._watch(path):
                    if self.stopping.is_set():
                        return
                    obj = ev["object"]
                    if ev["type"] == "ERROR":
                        rv = None
                        break
                    rv = obj["metadata"]["resourceVersion"]
                    if ev["type"] == "DELETED":
                        self._forget(obj)
                    elif ev["type"] in ("ADDED", "MODIFIED"):
                        self._handle(obj)
            except Exception as e:  # noqa: BLE001 - relist after any failure
                if not self.stopping.is_set():
                    self._error("pods: %s" % e)
                    rv = None
                    time.sleep(0.3)

    def _watch(self, path):
        req = urllib.request.Request(self.cp.url + path, headers={"Accept": "application/json"})
        with urllib.request.urlopen(req, context=self.cp.ssl, timeout=60) as r:
            for line in r:
                if self.stopping.is_set():
                    return
                line = line.strip()
                if line:
                    yield json.loads(line)

    def _handle(self, pod):
        meta = pod["metadata"]
        uid = meta["uid"]
        if meta.get("deletionTimestamp"):
            self._terminate(pod)
            return
        if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            return
        with self.lock:
            if uid in self.admitted:
                return
            self.admitted[uid] = {"pod": "%s/%s" % (meta["namespace"], meta["name"]),
                                  "ok": None, "allocations": []}
        self._admit(pod)

    def _device_resources(self):
        """Every resource a device plugin ever registered: the kubelet keeps managing a resource
        whose plugin went away (its devices turn unhealthy), so a Pod asking for it then fails
        admission instead of starting without its devices."""
        state = self.kubelet.call("state", wait=10)
        return {res for res, r in state.get("resources", {}).items()
                if r.get("registered") or r.get("registrations")}

    def _admit(self, pod):
        meta, spec = pod["metadata"], pod["spec"]
        uid, ns, name = meta["uid"], meta["namespace"], meta["name"]
        plugins = self._device_resources()
        containers = [(c, True) for c in spec.get("initContainers", [])] + \
                     [(c, False) for c in spec.get("containers", [])]
        record = self.admitted[uid]
        # pod-resources lists the Pod's containers as the kubelet's pod workers start them.
        self.running[uid] = (ns, name, [c["name"] for c, _ in containers])
        self._publish()
        failure = None
        for c, _init in containers:
            res = c.get("resources", {})
            asks = dict(res.get("limits", {}))
            asks.update(res.get("requests", {}))
            for key in sorted(asks):
                if key not in plugins:
                    continue
                n = _quantity_count(asks[key])
                if n <= 0:
                    continue
                r = self.kubelet.call("allocate", wait=60, resource=key, size=n, namespace=ns,
                                      pod=name, container=c["name"])
                record["allocations"].append(dict(r, resource=key, container=c["name"]))
                if not r.get("ok"):
                    failure = "Allocate failed due to %s, which is unexpected" % (
                        r.get("details") or r.get("error"))
                    break
            if failure:
                break
        record["ok"] = failure is None
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if failure:
            self.running.pop(uid, None)
            self.kubelet.call("release", namespace=ns, pod=name)
            self._publish()
            status = {"phase": "Failed", "reason": ALLOC_FAILED, "message": failure}
        else:
            status = {
                "phase": "Running", "startTime": now, "hostIP": "127.0.0.1", "podIP": "10.1.0.1",
                "conditions": [{"type": t, "status": "True", "lastTransitionTime": now}
                               for t in ("PodScheduled", "Initialized", "ContainersReady",
                                         "Ready")],
                "containerStatuses": [{
                    "name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True,
                    "restartCount": 0, "started": True,
                    "state": {"running": {"startedAt": now}}} for c in spec.get("containers", [])]}
        try:
            self.cp.merge_patch("/api/v1/namespaces/%s/pods/%s/status" % (ns, name),
                                {"status": status})
        except ApiError as e:
            if e.status != 404:
                self._error("pod %s/%s status: %s" % (ns, name, e))

    def _publish(self):
        if not self.podres_socket:
            return
        pods = [{"namespace": ns, "name": name, "containers": [{"name": c} for c in cs]}
                for ns, name, cs in self.running.values()]
        self.kubelet.call("set_pods", pods=pods)

    def _terminate(self, pod):
        meta = pod["metadata"]
        uid, ns, name = meta["uid"], meta["namespace"], meta["name"]
        self._release(uid, ns, name)
        status = pod.get("status", {})
        if status.get("phase") not in ("Succeeded", "Failed"):
            # The containers are stopped: the status manager reports them terminated (a
            # container killed by the grace-period signal exits 137) before the final delete.
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            terminated = {"phase": "Failed", "conditions": [
                {"type": t, "status": "False", "lastTransitionTime": now}
                for t in ("ContainersReady", "Ready")],
                "containerStatuses": [{
                    "name": c["name"], "image": c.get("image", ""), "imageID": "",
                    "ready": False, "restartCount": 0, "started": False,
                    "state": {"terminated": {"exitCode": 137, "reason": "Error",
                                             "startedAt": now, "finishedAt": now}}}
                    for c in pod["spec"].get("containers", [])]}
            try:
                self.cp.merge_patch("/api/v1/namespaces/%s/pods/%s/status" % (ns, name),
                                    {"status": terminated})
            except ApiError as e:
                if e.status != 404:
                    self._error("pod %s/%s status: %s" % (ns, name, e))
        try:
            self.cp.api("DELETE", "/api/v1/namespaces/%s/pods/%s" % (ns, name),
                        {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0,
                         "preconditions": {"uid": uid}})
        except ApiError as e:
            if e.status not in (404, 409):
                self._error("delete %s/%s: %s" % (ns, name, e))

    def _forget(self, pod):
        meta = pod["metadata"]
        self._release(meta["uid"], meta["namespace"], meta["name"])

    def _release(self, uid, ns, name):
        with self.lock:
            known = self.running.pop(uid, None) is not None or uid in self.admitted
        if known:
            self.kubelet.call("release", namespace=ns, pod=name)
            self._publish()

    def _error(self, text):
        with self.lock:
            self.errors.append(text)

    # ---- what tests read -----------------------------------------------------------------------

    def admission(self, namespace, name):
        """The record of the Pod's admission on this node ({"ok", "allocations"}), or None."""
        with self.lock:
            for r in self.admitted.values():
                if r["pod"] == "%s/%s" % (namespace, name) and r["ok"] is not None:
                    return r
        return None
