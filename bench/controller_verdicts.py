#!/usr/bin/env python3
"""controller_verdicts.py TESSERA [--nodes N] [--workloads W] [--unpinned] - the verdicts per
second of `tessera controller` (the gpustack-node-devices AdmissionCheck, gate 3) on a large
pool, on the real kube-apiserver of the cluster tests (tests/cluster/controlplane.py) with
tessera's CRDs and Kueue's CRDs installed but no Kueue running: the bench plays Kueue.

  1. One real `tessera device-manager --fake "NVIDIA H100 80GB HBM3:8:off"` runs on a template
     node behind the python fake kubelet (tests/cluster/kubelet.py); the bench keeps what it
     published (the Node's labels and capacity keys, the Devices object) and the allocation
     annotations it recorded on three Pods bound there (4 GPUs, 3 GPUs, one 50 % slice). Then
     the template is removed.
  2. The pool: N Nodes named gpu-NNNN, each a copy of the template (its own GPU UUIDs), with
     Pods bound to it carrying copies of those annotations: even nodes hold 4 GPUs, every tenth
     node (i % 10 == 9) 7 GPUs and half of the eighth, the rest nothing.
  3. `tessera controller --leader-elect=false` starts; the bench waits until the AdmissionCheck
     is Active, the pool's ClusterQueue carries all N x 8 GPUs of credits and the check, and
     the controller's work queue is empty.
  4. W Workloads are created as Kueue's pod integration writes them (kueue.x-k8s.io/v1beta2,
     one PodSet "main" of one Pod, its template), not yet reserved; a rotation of one-GPU,
     50 % and 60 % slice requests, two per node in a seeded shuffle of the nodes.
  5. The window: W writers' status writes (merge patches of the status subresource) reserve
     them as Kueue does after TAS placed them: QuotaReserved=True, status.admission with the
     pool's ClusterQueue, the flavor, the credits and (pinned) the compact hostname-level
     topologyAssignment naming the node (--unpinned: no topologyAssignment, so the controller
     judges the whole pool), and status.admissionChecks with the check Pending. A watch sees
     each reservation and each verdict (state Ready or Retry). Unless --no-react, the bench
     then does what Kueue does with a verdict: Ready -> Admitted=True; Retry -> evicted
     (Evicted=True, QuotaReserved=False, admission removed), so neither is judged again.

Prints the machine, the pool, verdicts/s from the first reservation seen to the last verdict
seen, the per-Workload latency (reservation seen -> verdict seen, nearest-rank p50/p90/p99/max),
the CPU seconds the controller, kube-apiserver, etcd and the bench spent in the window, the
controller's own counters (/metrics deltas) and the API requests the API server counted in the
window (apiserver_request_total deltas), split into the bench's and the others' (the
controller's: nothing else talks to this API server). --perf also samples the controller with
`perf record` during the window and prints its hottest symbols. Not a test: nothing here fails
on a number; the exit status is 1 only when the run could not be made (or timed out).
"""
import argparse
import glob
import hashlib
import http.client
import json
import os
import platform
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "cluster"))

from controlplane import ROOT, ApiError, ControlPlane, eventually  # noqa: E402
from controller_view import CHECK, KQ_API, check_state, condition  # noqa: E402
from daemons import Controller, DeviceManager  # noqa: E402
from kubelet import KubeletNode  # noqa: E402
from percentile import rank  # noqa: E402

NS = "bench"           # the Workloads
BG_NS = "bench-bg"     # the Pods already running on the pool
DEVICES_API = "/apis/worker.gpustack.ai/v1alpha1/devices"
POOL = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"
CREDITS = "credits.gpustack.ai/nvidia"
ALLOC = "device.gpustack.ai/accelerator.allocated"
HOSTNAME = "kubernetes.io/hostname"
GPUS = 8
UNITS = 1600000  # credits per GPU
TEMPLATE = "tpl"
FAKE = "NVIDIA H100 80GB HBM3:%d:off" % GPUS

# The template's Pods (what the device manager allocates on it), and who gets their copies.
TEMPLATE_PODS = {
    "a": {"nvidia.com/gpu": "4"},
    "b": {"nvidia.com/gpu": "3"},
    "s": {"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.units": "800000"},
}

# The Workloads' requests, in rotation: (name, container limits, credits of one Pod).
REQUESTS = [
    ("one GPU", {"nvidia.com/gpu": "1"}, UNITS),
    ("50 % slice", {"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.units": "800000"},
     800000),
    ("60 % slice", {"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.units": "960000"},
     960000),
]


def node_pods(i):
    """The template Pods whose copies node i holds: 4 GPUs on even nodes, 7.5 on every tenth."""
    if i % 10 == 9:
        return ["a", "b", "s"]
    if i % 2 == 0:
        return ["a"]
    return []


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Client:
    """Keep-alive HTTPS to the API server as the admin, one connection per thread. cp.api opens
    a TLS connection per call; at the rates of the window that handshake would cost the API
    server more CPU than the calls, taken from the controller on a small machine. Counts its
    calls by (verb, resource) while counting is on."""

    def __init__(self, cp):
        self.cp = cp
        self.local = threading.local()
        self.lock = threading.Lock()
        self.counting = False
        self.counts = {}

    def call(self, method, path, body=None, content_type="application/json", label=None):
        data = json.dumps(body) if body is not None else None
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        for attempt in range(3):
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = self.local.conn = http.client.HTTPSConnection(
                    "127.0.0.1", self.cp.port, context=self.cp.ssl, timeout=60)
            try:
                conn.request(method, path, body=data, headers=headers)
                r = conn.getresponse()
                text = r.read().decode()
            except (http.client.HTTPException, OSError):
                conn.close()
                self.local.conn = None
                if attempt == 2:
                    raise
                continue
            if self.counting and label:
                with self.lock:
                    self.counts[label] = self.counts.get(label, 0) + 1
            if r.status >= 300:
                try:
                    decoded = json.loads(text)
                except ValueError:
                    decoded = text
                raise ApiError(r.status, decoded, method, path)
            return json.loads(text) if text else None
        return None


def gpu_uuid(node, index):
    """A per-node GPU UUID in the driver's shape, stable for a node name and index."""
    return "GPU-" + str(uuid.UUID(bytes=hashlib.sha1(("%s/%d" % (node, index)).encode())
                                  .digest()[:16]))


def capture_template(tessera, cp, api):
    """What one real device manager publishes for an idle node of eight fake H100s, and the
    annotations it records for TEMPLATE_PODS. Returns (labels, capacity, devices, uuids, pods),
    pods: key -> (containers, annotation text)."""
    kn = KubeletNode(cp, TEMPLATE).start()
    dm = DeviceManager(tessera, cp, kn, FAKE, extra=("--log-level", "info"))
    try:
        dm.wait_registered(kn, ["nvidia.com/gpu"])

        def published():
            node = cp.api("GET", "/api/v1/nodes/" + TEMPLATE)
            dev = cp.api("GET", DEVICES_API + "/" + TEMPLATE)
            cap = node["status"].get("capacity", {})
            accels = [a for g in dev.get("spec", {}).get("groups", [])
                      for a in g.get("accelerators", [])]
            ok = cap.get("nvidia.com/gpu") == str(GPUS) and len(accels) == GPUS and \
                any(k.startswith("sliced-max-free-units.") for k in node["metadata"]["labels"])
            return ok and (node, dev, accels)
        got = eventually(published, 60)
        if not got:
            raise RuntimeError("the device manager did not publish the template node:\n" +
                               dm.log())
        time.sleep(1.0)  # let the kubelet part's status loop settle, then read once more
        node, dev, accels = published()
        labels = {k: v for k, v in node["metadata"]["labels"].items() if k != HOSTNAME}
        capacity = dict(node["status"]["capacity"])
        devices = {"apiVersion": dev["apiVersion"], "kind": dev["kind"], "spec": dev["spec"],
                   "status": dev.get("status", {})}
        uuids = {a["index"]: a["id"] for a in accels}
        pods = {}
        for key, limits in TEMPLATE_PODS.items():
            name = "%s-%s" % (TEMPLATE, key)
            containers = [{"name": "main", "image": "registry.example/cuda:12",
                           "resources": {"limits": limits}}]
            api.call("POST", "/api/v1/namespaces/%s/pods" % BG_NS, {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": BG_NS},
                "spec": {"nodeName": TEMPLATE, "restartPolicy": "Never",
                         "terminationGracePeriodSeconds": 0, "containers": containers}})
            ann = eventually(lambda: cp.api("GET", "/api/v1/namespaces/%s/pods/%s" % (
                BG_NS, name))["metadata"].get("annotations", {}).get(ALLOC), 60)
            if not ann:
                raise RuntimeError("the device manager did not record %s's allocation:\n%s" %
                                   (name, dm.log()))
            pods[key] = (containers, ann)
        return labels, capacity, devices, uuids, pods
    finally:
        dm.stop()
        kn.stop()
        for key in TEMPLATE_PODS:
            try:
                api.call("DELETE", "/api/v1/namespaces/%s/pods/%s-%s?gracePeriodSeconds=0" % (
                    BG_NS, TEMPLATE, key))
            except ApiError:
                pass
        for path in (DEVICES_API + "/" + TEMPLATE, "/api/v1/nodes/" + TEMPLATE):
            try:
                api.call("DELETE", path)
            except ApiError:
                pass


def make_pool(cp, api, n_nodes, template, writers):
    """N Nodes gpu-NNNN, each with a copy of the template's Devices (its own UUIDs) and the Pods
    node_pods names. Returns (node names, Pods made, GPUs held)."""
    labels, capacity, devices, uuids, pods = template
    dev_text = json.dumps(devices)
    names = ["gpu-%04d" % i for i in range(n_nodes)]

    def remap(text, node):
        for index, old in uuids.items():
            text = text.replace(old, gpu_uuid(node, index))
        return text

    def one(i):
        node = names[i]
        cp.create_node(node, labels=labels, capacity=capacity)
        dev = json.loads(remap(dev_text, node))
        dev["metadata"] = {"name": node}
        api.call("POST", DEVICES_API, dev)
        api.call("PATCH", DEVICES_API + "/" + node + "/status", {"status": dev["status"]},
                 "application/merge-patch+json")
        for key in node_pods(i):
            containers, ann = pods[key]
            api.call("POST", "/api/v1/namespaces/%s/pods" % BG_NS, {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "%s-%s" % (node, key), "namespace": BG_NS,
                             "annotations": {ALLOC: remap(ann, node)}},
                "spec": {"nodeName": node, "restartPolicy": "Never",
                         "terminationGracePeriodSeconds": 0, "containers": containers}})

    with ThreadPoolExecutor(writers) as ex:
        list(ex.map(one, range(n_nodes)))
    n_pods = sum(len(node_pods(i)) for i in range(n_nodes))
    held = sum({"a": 4, "b": 3, "s": 0.5}[k] for i in range(n_nodes) for k in node_pods(i))
    return names, n_pods, held


def workload(name, queue_name, limits):
    """A Workload as Kueue's pod integration makes it for one Pod."""
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"queueName": queue_name, "active": True, "podSets": [{
                "name": "main", "count": 1,
                "template": {"metadata": {"labels": {"app": "bench"}},
                             "spec": {"restartPolicy": "Never",
                                      "terminationGracePeriodSeconds": 0,
                                      "containers": [{"name": "main",
                                                      "image": "registry.example/cuda:12",
                                                      "resources": {"limits": limits,
                                                                    "requests": limits}}]}}}]}}


def reservation(flavor, credits, node):
    """Kueue's status writes when it reserves quota (TAS placed the Pod on node; None:
    unpinned, no topologyAssignment)."""
    psa = {"name": "main", "count": 1, "flavors": {CREDITS: flavor},
           "resourceUsage": {CREDITS: str(credits)}}
    if node:
        psa["topologyAssignment"] = {"levels": [HOSTNAME], "slices": [{
            "domainCount": 1, "valuesPerLevel": [{"individual": {"roots": [node]}}],
            "podCounts": {"universal": 1}}]}
    now = now_rfc3339()
    return {"status": {
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                        "message": "Quota reserved in ClusterQueue " + POOL,
                        "lastTransitionTime": now}],
        "admission": {"clusterQueue": POOL, "podSetAssignments": [psa]},
        "admissionChecks": [{"name": CHECK, "state": "Pending", "message": "",
                             "lastTransitionTime": now}]}}


def reaction(obj, state):
    """What Kueue writes once the check has answered: Ready admits, Retry evicts."""
    now = now_rfc3339()
    reserved = condition(obj, "QuotaReserved")
    if state == "Ready":
        return {"status": {"conditions": [reserved, {
            "type": "Admitted", "status": "True", "reason": "Admitted",
            "message": "The workload is admitted", "lastTransitionTime": now}]}}
    return {"status": {"admission": None, "conditions": [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending",
         "message": "The workload is evicted", "lastTransitionTime": now},
        {"type": "Evicted", "status": "True", "reason": "AdmissionCheck",
         "message": "At least one admission check is false", "lastTransitionTime": now}]}}


class Watch(threading.Thread):
    """Watches the bench's Workloads from resourceVersion rv and calls on_obj(obj, t) with the
    monotonic time each change was read."""

    def __init__(self, cp, rv, on_obj):
        super().__init__(daemon=True)
        self.cp, self.rv, self.on_obj = cp, rv, on_obj
        self.errors = []

    def run(self):
        while True:
            path = "%s/namespaces/%s/workloads?watch=1&allowWatchBookmarks=true&" \
                   "resourceVersion=%s&timeoutSeconds=3600" % (KQ_API, NS, self.rv)
            req = urllib.request.Request(self.cp.url + path, headers={"Accept":
                                                                      "application/json"})
            try:
                with urllib.request.urlopen(req, context=self.cp.ssl, timeout=None) as r:
                    for line in r:
                        t = time.monotonic()
                        line = line.strip()
                        if not line:
                            continue
                        ev = json.loads(line)
                        obj = ev.get("object") or {}
                        if ev.get("type") == "ERROR":
                            self.errors.append(obj.get("message"))
                            lst = self.cp.api("GET", "%s/namespaces/%s/workloads" % (KQ_API, NS))
                            self.rv = lst["metadata"]["resourceVersion"]
                            for item in lst["items"]:
                                self.on_obj(item, time.monotonic())
                            break
                        self.rv = obj.get("metadata", {}).get("resourceVersion", self.rv)
                        if ev.get("type") in ("ADDED", "MODIFIED"):
                            self.on_obj(obj, t)
            except Exception as e:  # noqa: BLE001 - the API server went away, or a hiccup
                self.errors.append(str(e))
                time.sleep(0.2)


METRIC = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)')


def metrics(text, prefix):
    """{(name, labels): value} of the samples whose name starts with prefix."""
    out = {}
    for line in text.splitlines():
        m = METRIC.match(line)
        if m and m.group(1).startswith(prefix):
            out[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return out


def apiserver_requests(cp):
    """{(verb, resource[/subresource]): count} from apiserver_request_total."""
    out = {}
    for (name, labels), v in metrics(cp.api("GET", "/metrics", raw=True),
                                     "apiserver_request_total").items():
        if name != "apiserver_request_total":
            continue
        lab = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        res = lab.get("resource", "") + ("/" + lab["subresource"] if lab.get("subresource")
                                         else "")
        key = (lab.get("verb", ""), res)
        out[key] = out.get(key, 0) + v
    return out


def cpu_seconds(pid):
    """User + system CPU seconds of process pid (all its threads)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def progress(text):
    sys.stderr.write("[%s] %s\n" % (time.strftime("%H:%M:%S"), text))
    sys.stderr.flush()


def wait_idle(ctl, timeout):
    """Waits until the controller's work queue has been empty for three looks in a row."""
    deadline, quiet = time.monotonic() + timeout, 0
    while time.monotonic() < deadline:
        m = metrics(ctl.probe("/metrics")[1], "tessera_controller_queue_depth")
        quiet = quiet + 1 if m.get(("tessera_controller_queue_depth", "")) == 0 else 0
        if quiet >= 3:
            return True
        time.sleep(0.5)
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tessera")
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--workloads", type=int, default=1000)
    ap.add_argument("--unpinned", action="store_true",
                    help="no topologyAssignment: each Workload is judged against the whole pool")
    ap.add_argument("--no-react", action="store_true",
                    help="leave verdicts standing (no Admitted, no eviction), as if Kueue were "
                         "stopped: every Ready Workload stays judgeable")
    ap.add_argument("--writers", type=int, default=4,
                    help="threads writing the pool, the Workloads and the reservations")
    ap.add_argument("--in-flight", type=int, default=0, metavar="K",
                    help="at most K Workloads reserved and not yet answered at a time (0: all "
                         "at once, the default); 1 measures one verdict on an idle controller")
    ap.add_argument("--timeout", type=float, default=900,
                    help="seconds the window may last before the bench gives up")
    ap.add_argument("--setup-timeout", type=float, default=1800,
                    help="seconds the controller may take to derive the chain, and to go idle")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--perf", metavar="FILE",
                    help="perf record the controller during the window into FILE and print "
                         "its hottest symbols")
    a = ap.parse_args()
    tessera = os.path.abspath(a.tessera)
    os.environ.setdefault("TSR_TESSERA", tessera)
    os.environ.setdefault("TSR_SOURCE_ROOT", ROOT)

    cp = ControlPlane("bench-verdicts", kueue=False, scheduler=False, controller_manager=False)
    ctl, perf = None, None
    try:
        t0 = time.monotonic()
        cp.start()
        cp.install_crds([os.path.join(cp.kueue_share(), "crds")])
        cp.install_crds(sorted(glob.glob(os.path.join(ROOT, "deploy", "chart", "tessera", "files", "crds", "*.yaml"))))
        for ns in (NS, BG_NS):
            cp.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        api = Client(cp)
        t_cp = time.monotonic() - t0

        t = time.monotonic()
        template = capture_template(tessera, cp, api)
        t_template = time.monotonic() - t
        progress("template captured; making the pool of %d nodes" % a.nodes)
        t = time.monotonic()
        names, n_pods, held = make_pool(cp, api, a.nodes, template, a.writers)
        t_pool = time.monotonic() - t
        progress("pool made; starting the controller")

        t = time.monotonic()
        ctl = Controller(tessera, cp, "bench", extra=("--leader-elect", "false",
                                                      "--log-level", "info"))

        def active():
            ac = cp.api("GET", KQ_API + "/admissionchecks/" + CHECK)
            return (condition(ac, "Active") or {}).get("status") == "True"
        t_active = eventually(active, a.setup_timeout, 0.5) and time.monotonic() - t
        quota = str(a.nodes * GPUS * UNITS)

        def chain():
            cq = cp.api("GET", KQ_API + "/clusterqueues/" + POOL)
            fl = cq["spec"]["resourceGroups"][0]["flavors"][0]
            q = fl["resources"][0]["nominalQuota"]
            q = str(int(q[:-1]) * {"k": 1000, "M": 1000000, "G": 10 ** 9}[q[-1]]) \
                if q[-1] in "kMG" else q
            ok = q == quota and cq["spec"].get("admissionChecksStrategy")
            return ok and fl["name"]
        flavor = eventually(chain, a.setup_timeout, 0.5)
        t_chain = flavor and time.monotonic() - t
        lq = eventually(lambda: next((q["metadata"]["name"] for q in cp.api(
            "GET", "%s/namespaces/%s/localqueues" % (KQ_API, NS))["items"]
            if q["spec"]["clusterQueue"] == POOL), None), 60)
        if not (t_active and flavor and lq):
            raise RuntimeError("the chain did not come up (AdmissionCheck Active: %s, ClusterQueue "
                               "with %s credits: %s, LocalQueue: %s):\n%s" % (
                                   bool(t_active), quota, flavor, lq, ctl.log()))
        progress("chain derived; waiting for the controller's queue to drain")
        idle = wait_idle(ctl, a.setup_timeout)
        t_idle = time.monotonic() - t
        progress("controller idle; creating %d Workloads" % a.workloads)

        # The Workloads, not reserved yet: two per node in a seeded shuffle of the nodes.
        rnd = random.Random(a.seed)
        order = list(range(a.nodes))
        rnd.shuffle(order)
        plan = []
        for j in range(a.workloads):
            kind, limits, credits = REQUESTS[j % len(REQUESTS)]
            plan.append(("wl-%05d" % j, kind, limits, credits, names[order[j % a.nodes]]))
        t = time.monotonic()
        with ThreadPoolExecutor(a.writers) as ex:
            list(ex.map(lambda p: api.call("POST", "%s/namespaces/%s/workloads" % (KQ_API, NS),
                                           workload(p[0], lq, p[2])), plan))
        t_create = time.monotonic() - t
        idle = wait_idle(ctl, a.setup_timeout) and idle
        progress("Workloads created; the window starts")

        # The window.
        lock = threading.Lock()
        seen_reserved, seen_verdict, final = {}, {}, {}
        reactions = queue.Queue()
        all_done = threading.Event()
        slots = threading.Semaphore(a.in_flight) if a.in_flight > 0 else None

        def on_obj(obj, t):
            name = obj["metadata"]["name"]
            c = check_state(obj)
            state = (c or {}).get("state")
            with lock:
                if (condition(obj, "QuotaReserved") or {}).get("status") == "True" and \
                        name not in seen_reserved:
                    seen_reserved[name] = t
                if state in ("Ready", "Retry"):
                    final[name] = state
                    if name not in seen_verdict:
                        seen_verdict[name] = (t, state)
                        if slots:
                            slots.release()
                        if not a.no_react:
                            reactions.put((name, obj, state))
                        if len(seen_verdict) == len(plan):
                            all_done.set()

        lst = cp.api("GET", "%s/namespaces/%s/workloads" % (KQ_API, NS))
        watch = Watch(cp, lst["metadata"]["resourceVersion"], on_obj)
        watch.start()

        def reactor():
            while True:
                item = reactions.get()
                if item is None:
                    return
                name, obj, state = item
                try:
                    api.call("PATCH", "%s/namespaces/%s/workloads/%s/status" % (KQ_API, NS, name),
                             reaction(obj, state), "application/merge-patch+json",
                             label=("PATCH", "workloads/status"))
                except ApiError as e:
                    sys.stderr.write("reaction on %s: %s\n" % (name, e))
        reactors = [threading.Thread(target=reactor, daemon=True) for _ in range(2)]
        for r in reactors:
            r.start()

        pids = {"controller": ctl.proc.pid, "kube-apiserver": cp.procs["kube-apiserver"].proc.pid,
                "etcd": cp.procs["etcd"].proc.pid}
        cpu0 = {k: cpu_seconds(p) for k, p in pids.items()}
        bench0 = os.times()
        req0 = apiserver_requests(cp)
        ctl0 = metrics(ctl.probe("/metrics")[1], "tessera_controller_")
        load0 = os.getloadavg()
        if a.perf:
            perf = subprocess.Popen(["perf", "record", "-F", "199", "--call-graph", "dwarf",
                                     "-p", str(pids["controller"]), "-o", a.perf],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        api.counting = True
        w0 = time.monotonic()
        written = {}

        def reserve(p):
            name, _kind, _limits, credits, node = p
            if slots and not slots.acquire(timeout=max(0.0, a.timeout - (time.monotonic() - w0))):
                return
            api.call("PATCH", "%s/namespaces/%s/workloads/%s/status" % (KQ_API, NS, name),
                     reservation(flavor, credits, None if a.unpinned else node),
                     "application/merge-patch+json", label=("PATCH", "workloads/status"))
            written[name] = time.monotonic()
        with ThreadPoolExecutor(a.writers) as ex:
            list(ex.map(reserve, plan))
        w1 = time.monotonic()
        progress("reservations written; waiting for the verdicts")
        done = all_done.wait(max(1.0, a.timeout - (w1 - w0)))
        w2 = time.monotonic()
        for _ in reactors:
            reactions.put(None)
        for r in reactors:
            r.join(30)
        api.counting = False
        if perf:
            perf.send_signal(signal.SIGINT)
            perf.wait(60)
        cpu1 = {k: cpu_seconds(p) for k, p in pids.items()}
        bench1 = os.times()
        req1 = apiserver_requests(cp)
        ctl1 = metrics(ctl.probe("/metrics")[1], "tessera_controller_")
        load1 = os.getloadavg()

        # The report.
        with lock:
            verdicts = dict(seen_verdict)
            reserved = dict(seen_reserved)
            states = dict(final)
        first = min(reserved.values()) if reserved else w0
        last = max(t for t, _s in verdicts.values()) if verdicts else w2
        span = last - first
        lat = sorted(t - reserved.get(n, written.get(n, first)) for n, (t, _s) in
                     verdicts.items())
        counts = {}
        for s in states.values():
            counts[s] = counts.get(s, 0) + 1
        mix = {}
        for p in plan:
            mix[p[1]] = mix.get(p[1], 0) + 1

        print("machine: %s, %d CPUs, %s, Python %s; load average %.2f before, %.2f after" % (
            cpu_model(), os.cpu_count(), platform.platform(), platform.python_version(),
            load0[0], load1[0]))
        print("pool: %d Nodes x %d H100 (fake) = %d GPUs; %d Pods bound, holding %.1f GPUs "
              "(%d nodes with 4, %d with 7.5)" % (
                  a.nodes, GPUS, a.nodes * GPUS, n_pods, held,
                  sum(1 for i in range(a.nodes) if node_pods(i) == ["a"]),
                  sum(1 for i in range(a.nodes) if len(node_pods(i)) == 3)))
        print("setup: control plane %.1f s, template device manager %.1f s, pool %.1f s; "
              "controller: AdmissionCheck Active %.1f s, chain with the whole pool %.1f s, "
              "queue %s %.1f s after start" % (t_cp, t_template, t_pool, t_active, t_chain,
                                                "idle" if idle else "STILL BUSY", t_idle))
        print("workloads: %d %s (%s), created in %.1f s; reservations written in %.1f s "
              "(%d writers)%s" % (
                  len(plan), "unpinned" if a.unpinned else "pinned to one node each",
                  ", ".join("%d %s" % (v, k) for k, v in mix.items()), t_create, w1 - w0,
                  a.writers, "" if not a.no_react else "; no Kueue reaction") +
              ("; at most %d in flight" % a.in_flight if a.in_flight > 0 else ""))
        print()
        print("%-44s %s" % ("verdicts seen", "%d of %d (%s)%s" % (
            len(verdicts), len(plan), ", ".join("%s %d" % kv for kv in sorted(counts.items())),
            "" if done else "  -- TIMED OUT after %.0f s" % (w2 - w0))))
        print("%-44s %.2f s" % ("first reservation seen -> last verdict seen", span))
        print("%-44s %.1f" % ("verdicts/s", len(verdicts) / span if span > 0 else 0))
        if lat:
            print("%-44s p50 %.3f s  p90 %.3f s  p99 %.3f s  max %.3f s" % (
                "reservation seen -> verdict seen", rank(lat, 50), rank(lat, 90), rank(lat, 99),
                lat[-1]))
        print("%-44s %s  (window %.1f s)" % ("CPU seconds in the window", ", ".join(
            "%s %.1f" % (k, cpu1[k] - cpu0[k]) for k in pids) + ", bench %.1f" % (
            (bench1.user + bench1.system) - (bench0.user + bench0.system)), w2 - w0))
        print()
        print("controller /metrics, deltas over the window:")
        for key in sorted(ctl1):
            d = ctl1[key] - ctl0.get(key, 0)
            if d and key[0] not in ("tessera_controller_queue_depth",
                                    "tessera_controller_leader"):
                print("  %-70s %8d" % (key[0] + key[1], d))
        print()
        print("API requests in the window (apiserver_request_total deltas):")
        print("  %-8s %-28s %8s %8s %8s" % ("verb", "resource", "all", "bench", "others"))
        total, rest, rest_rows = 0, 0, 0
        for key in sorted(req1, key=lambda k: -(req1[k] - req0.get(k, 0))):
            d = int(req1[key] - req0.get(key, 0))
            if d <= 0:
                continue
            mine = api.counts.get(key, 0)
            total += d - mine
            if d < max(5, len(plan) // 20):  # the API server's own watches and leases
                rest, rest_rows = rest + d - mine, rest_rows + 1
                continue
            print("  %-8s %-28s %8d %8d %8d" % (key[0], key[1], d, mine, d - mine))
        if rest_rows:
            print("  %-37s %8s %8s %8d" % ("(%d smaller rows)" % rest_rows, "", "", rest))
        print("  others per verdict: %.1f" % (total / len(verdicts) if verdicts else 0))
        if watch.errors:
            print("watch errors: %s" % watch.errors[:3])
        warn = [line for line in ctl.lines if "level=warn" in line or "level=error" in line]
        print("controller log: %d warnings or errors%s" % (len(warn), (": " + warn[0][:300])
                                                            if warn else ""))
        if perf:
            for title, flags, limit in (
                    ("self time", ["--no-children"], "1.5"),
                    ("inclusive time (the symbol and what it calls)", ["--children"], "4")):
                r = subprocess.run(["perf", "report", "-i", a.perf, "--stdio", *flags,
                                    "--sort", "symbol", "--percent-limit", limit, "-g", "none"],
                                   capture_output=True, text=True)
                print()
                print("perf: the controller's CPU in the window, %s:" % title)
                for line in r.stdout.splitlines():  # unresolved addresses left out
                    if line.strip() and not line.startswith("#") and " 0x" not in line:
                        print("  " + line.strip())
        return 0 if done else 1
    finally:
        if perf and perf.poll() is None:
            perf.kill()
        if ctl:
            ctl.stop()
        cp.stop()


if __name__ == "__main__":
    sys.exit(main())
