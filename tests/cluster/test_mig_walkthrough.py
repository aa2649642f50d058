#!/usr/bin/env python3
"""test_mig_walkthrough.py TESSERA - the MIG seed's walkthrough ("three MIG
configurations on one node", examples/h100-mig-walkthrough.yaml) replayed on the real control
plane, and what the real kubectl prints compared with the simulator's transcript of it,
tests/golden/h100-mig-walkthrough.out.

The cluster is the example's: node-h100 (128 CPUs, 2Ti, eight H100 80GB HBM3 with MIG off, the
fake NVML backend under `tessera device-manager --fake`) and node-cpu (4 CPUs, 16Gi, no GPU), with
tessera's CRDs, `tessera webhook` registered, one `tessera controller` (the Deployment's RBAC
only), Kueue, kube-scheduler and the kubelet part (tests/cluster/kubelet.py). node-cpu runs no
device manager (there is no GPU to detect); the controller manages it as a CPU-only node of the
generic pool, so the generic row counts both nodes' CPUs (128/132). The controller authors both
InstanceTypes and writes their status; nothing here writes either.

The steps, as the example takes them:
  1    every GPU MIG off;
  2.2  MIG on for all eight: the device manager is stopped, its --fake-state file
       (node.dir/gpus.json) edited as Hopper's `nvidia-smi -mig 1` leaves a GPU (mig on, nothing
       pending: no reset), and a new one started with the same arguments (the state file, when
       present, is what it loads; --fake's MODES only seed a missing file). It must register
       every resource again before anything is read;
  2.4  the example's `mig-demo` Pod (one 3g.40gb) applied with kubectl, Running; afterwards
       deleted, and the suite waits until the reclaimer has destroyed its instance;
  3    MIG off on GPUs 3-7 (the same stop, edit, start);
  3.1  the example's mixed-partition then mixed-logical Pods, both Running, on GPUs of the two
       populations;
  4    both deleted, their instances reclaimed, MIG off on GPUs 0-2.
At each compared step two things are checked against the golden, both waited for (up to 60 s):
  rows  the golden's `kubectl get instancetypes [NAME]` of that step, run as written with the real
        kubectl: its stdout must equal the golden's output exactly (the CRD's printer columns,
        kubectl's padding, which the simulator's tables follow; a mismatch that is only padding
        is noted as such). When the cluster holds no InstanceType at all the wait is 15 s, not 60;
  keys  the golden's `kubectl get node node-h100 -o json | jq '.status.allocatable |
        with_entries(select(.key|test(RE)))'`: the JSON the golden printed for it, as a dict,
        against the Node's status.allocatable (read with the real kubectl) filtered by the same
        RE (a search, as jq's test is).
The golden is parsed by its `$ <command>` lines (a command's output runs to the next one); the
steps are cut at the commands that change the node (the MIG flips, the Pods applied and
deleted), and each step's expected values are the first of each kind inside it. Nothing the
golden says is copied here. Step 4 also checks that the keys read step 1's again.

Prints TAP.
"""
import glob
import json
import os
import re
import shlex
import sys
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from controlplane import ROOT, eventually  # noqa: E402
import chart  # noqa: E402
from controller_view import KQ, KQ_API, check_stopped, condition, get  # noqa: E402
from daemons import Controller, DeviceManager, WebhookServer, register_webhooks  # noqa: E402
from kubelet import KubeletNode  # noqa: E402
from names import entrance  # noqa: E402
from tap import Tap, on_control_plane  # noqa: E402

CRDS = sorted(glob.glob(os.path.join(ROOT, "deploy", "chart", "tessera", "files", "crds", "*.yaml")))
GOLDEN = os.path.join(ROOT, "tests", "golden", "h100-mig-walkthrough.out")
EXAMPLE = os.path.join(ROOT, "examples", "h100-mig-walkthrough.yaml")
IT_API = "/apis/worker.gpustack.ai/v1alpha1"
NS = "default"
NODE = "node-h100"
H100 = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"
FAKE = "NVIDIA H100 80GB HBM3:8:00000000"
ALLOC = "device.gpustack.ai/accelerator.allocated"
WAIT = 60

# Where the golden moves from one step to the next: a needle in a command line or its output,
# each looked for only after the one before it was found.
BOUNDARIES = [
    ("2.2", "nvidia-smi -mig 1"),
    ("2.4", "pod/mig-demo created"),
    ("2.4 deleted", "kubectl delete pod mig-demo"),
    ("3", "nvidia-smi -i 3 -mig 0"),
    ("3.1", "pod/mixed-partition created"),
    ("4", "kubectl delete pod mixed-partition"),
]
ROWS = re.compile(r"^kubectl get instancetypes( [a-z0-9.-]+)?$")
KEYS = re.compile(r"^kubectl get node (\S+) -o json \| jq .*test\(\"((?:[^\"\\]|\\.)*)\"\)")


# ---- the golden and the example ------------------------------------------------------------------

def transcript(path=GOLDEN):
    """[(command, output)] of a golden transcript: each `$ ` line and the lines up to the next
    one, trailing blank lines dropped."""
    out = []
    with open(path) as f:
        for line in f.read().splitlines():
            if line.startswith("$ "):
                out.append((line[2:], []))
            elif out:
                out[-1][1].append(line)
    for _, lines in out:
        while lines and not lines[-1].strip():
            lines.pop()
    return [(cmd, "\n".join(lines)) for cmd, lines in out]


def steps(commands):
    """{step: {"rows": (command, output), "keys": (regex, dict)}}: the first rows command and the
    first node-keys command of each step (either may be absent)."""
    out, step, bounds = {"1": {}}, "1", list(BOUNDARIES)
    for cmd, output in commands:
        if bounds and bounds[0][1] in cmd + "\n" + output:
            step = bounds.pop(0)[0]
            out[step] = {}
        if ROWS.match(cmd):
            out[step].setdefault("rows", (cmd, output))
        m = KEYS.match(cmd)
        if m and m.group(1) == NODE:
            out[step].setdefault("keys", (json.loads('"%s"' % m.group(2)), json.loads(output)))
    return out


def example_pods(path=EXAMPLE):
    """{pod name: the manifest text the example applies for it}."""
    with open(path) as f:
        scenario = yaml.safe_load(f)
    out = {}
    for s in scenario["steps"]:
        if isinstance(s, dict) and s.get("run") == "kubectl apply -f -":
            doc = yaml.safe_load(s["stdin"])
            if doc.get("kind") == "Pod":
                out[doc["metadata"]["name"]] = s["stdin"]
    return out


# ---- what the cluster shows ------------------------------------------------------------------------

def wait_for(pred, timeout, interval=0.5):
    """Calls pred() (-> (ok, detail)) until ok or timeout seconds; the last (ok, detail)."""
    deadline = time.monotonic() + timeout
    while True:
        ok, detail = pred()
        if ok or time.monotonic() >= deadline:
            return ok, detail
        time.sleep(interval)


def node_keys(cp, regex):
    r = cp.kubectl("get", "node", NODE, "-o", "json")
    if r.returncode:
        return {"kubectl": r.stderr}
    alloc = (json.loads(r.stdout).get("status") or {}).get("allocatable", {})
    return {k: v for k, v in alloc.items() if re.search(regex, k)}


def split_rows(text):
    return [line.split() for line in text.splitlines()]


def any_instancetype(cp):
    return bool((get(cp, IT_API + "/instancetypes") or {}).get("items"))


def compare(t, cp, step, want, ran=True):
    """The step's rows and keys against the golden's, each waited for (the keys 10 s when the
    step's Pods did not run: they cannot match then)."""
    if "keys" in want:
        regex, keys = want["keys"]
        ok, got = wait_for(lambda: (node_keys(cp, regex) == keys, node_keys(cp, regex)),
                           WAIT if ran else 10)
        t.ok(ok, "step %s: node-h100's allocatable matching /%s/ is the golden's" % (step, regex),
             "want: %s\ngot:  %s" % (json.dumps(keys, sort_keys=True),
                                     json.dumps(got, sort_keys=True)))
    if "rows" in want:
        cmd, rows = want["rows"]

        def table():
            r = cp.kubectl(*shlex.split(cmd)[1:])
            got = r.stdout.rstrip("\n") + (("\n[stderr] " + r.stderr.strip())
                                           if r.stderr.strip() else "")
            return r.stdout.rstrip("\n") == rows, got
        ok, got = wait_for(table, WAIT if any_instancetype(cp) else 15)
        t.ok(ok, "step %s: `%s` prints the golden's rows" % (step, cmd),
             "want:\n%s\ngot:\n%s" % (rows, got))
        if not ok and split_rows(got) == split_rows(rows):
            t.note("step %s: the rows match when split on whitespace (only padding differs)" %
                   step)


def pod(cp, name):
    return get(cp, "/api/v1/namespaces/%s/pods/%s" % (NS, name)) or {}


def phase(cp, name):
    return (pod(cp, name).get("status") or {}).get("phase")


def grants(cp, name):
    """[(index, allocatedPhysicalProfile or None)] of the Pod's allocation record."""
    ann = (pod(cp, name).get("metadata") or {}).get("annotations", {}).get(ALLOC)
    return [(a.get("index"), a.get("allocatedPhysicalProfile"))
            for c in json.loads(ann or "{}").values()
            for g in c.get("devices", {}).get("groups", []) for a in g.get("accelerators", [])]


def why_not_running(cp, name):
    w = next((w for w in (get(cp, "%s/namespaces/%s/workloads" % (KQ_API, NS)) or {}).get(
        "items", []) if any(r.get("name") == name for r in w["metadata"].get(
            "ownerReferences", []))), None)
    return {"pod": pod(cp, name).get("status"), "workload": (w or {}).get("status")}


def state_file(node):
    return os.path.join(node.dir, "gpus.json")


def instances(node):
    """The live MIG instances of the fake GPUs, from the device manager's --fake-state file."""
    with open(state_file(node)) as f:
        return [gi for gpu in json.load(f).get("gpus", []) for gi in gpu.get("instances", [])]


def apply_pod(t, cp, manifests, name):
    r = cp.kubectl("apply", "-f", "-", stdin=manifests[name])
    applied = t.ok(r.returncode == 0 and ("pod/%s created" % name) in r.stdout,
                   "%s applied with kubectl through the webhooks" % name, r.stdout + r.stderr)
    ran = applied and eventually(lambda: phase(cp, name) == "Running", 120)
    t.ok(ran, "%s is admitted by Kueue and the check, placed and Running" % name,
         why_not_running(cp, name))
    return ran


def delete_and_reclaim(t, cp, node, names, label):
    names = [n for n in names if pod(cp, n)]
    if not names:
        t.skip("%s: the Pods deleted with kubectl" % label, "none was created")
        return
    r = cp.kubectl("delete", "pod", *names, "--wait=false")
    gone = eventually(lambda: not any(pod(cp, n) for n in names), 60)
    t.ok(r.returncode == 0 and gone, "%s: deleted with kubectl and gone" % label,
         r.stdout + r.stderr)
    t.ok(eventually(lambda: not instances(node), WAIT),
         "%s: the reclaimer destroys the instance, the GPUs hold none" % label, instances(node))


# ---- the device manager and the MIG flips --------------------------------------------------------

class Devices:
    """The device manager of node-h100, restarted around edits of its state file."""

    def __init__(self, tessera, cp, node):
        self.tessera, self.cp, self.node = tessera, cp, node
        self.kubeconfig = chart.identity(cp, "device-manager")
        self.all = [DeviceManager(tessera, cp, node, FAKE, kubeconfig=self.kubeconfig)]

    @property
    def dm(self):
        return self.all[-1]

    def registrations(self):
        state = self.node.call("state", wait=10)
        return {res: r.get("registrations", 0) for res, r in state.get("resources", {}).items()
                if r.get("registered")}

    def flip(self, gpus, on):
        """Stops the device manager, sets MIG on or off (nothing pending, as Hopper does) for
        gpus in its state file, starts a new one with the same arguments and waits for every
        resource the old one had registered to register again. Returns (exit status, failures)."""
        before = self.registrations()
        rc = self.dm.stop()
        path = state_file(self.node)
        with open(path) as f:
            state = json.load(f)
        for i in gpus:
            state["gpus"][i]["mig"] = state["gpus"][i]["pending"] = on
        with open(path + ".tmp", "w") as f:
            json.dump(state, f)
        os.replace(path + ".tmp", path)
        self.all.append(DeviceManager(self.tessera, self.cp, self.node, FAKE,
                                      kubeconfig=self.kubeconfig))
        failed = {}
        for res, n in before.items():
            r = self.node.call("wait_registered", resource=res, count=n + 1, timeout=30)
            if not r.get("ok"):
                failed[res] = r
        return rc, failed

    def modes(self):
        with open(state_file(self.node)) as f:
            return [(g["mig"], g["pending"]) for g in json.load(f)["gpus"]]


def flip(t, devices, gpus, on, label):
    gpus = list(gpus)
    want = [(on, on) if i in gpus else m for i, m in enumerate(devices.modes())]
    rc, failed = devices.flip(gpus, on)
    t.ok(rc == 0 and not failed and devices.dm.alive() and devices.modes() == want,
         "%s: MIG %s on GPUs %s (state file edited with the device manager stopped); the new "
         "device manager keeps those modes and registers every resource again" %
         (label, "on" if on else "off", ",".join(map(str, gpus))),
         {"exit": rc, "not registered": failed, "modes": devices.modes(), "log": devices.dm.log()})


# ---- the suite -------------------------------------------------------------------------------------

def run(t, tessera, cp):
    golden = steps(transcript())
    t.ok(all(golden.get(s, {}).get("rows") for s in ("1", "2.2", "2.4", "3", "3.1", "4")) and
         all(golden.get(s, {}).get("keys") for s in ("1", "2.2", "2.4", "3", "3.1")),
         "the golden holds the rows of steps 1, 2.2, 2.4, 3, 3.1, 4 and the keys of 1-3.1",
         json.dumps(golden, indent=1)[:3000])
    manifests = example_pods()
    queues = {n: yaml.safe_load(m)["metadata"]["labels"].get(KQ + "/queue-name")
              for n, m in manifests.items()}
    t.ok(set(manifests) == {"mig-demo", "mixed-partition", "mixed-logical"} and
         set(queues.values()) == {entrance(H100)},
         "the example's three Pods queue on the H100 pool's entrance LocalQueue", queues)

    cp.install_crds(CRDS)
    cp.ensure({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
               "metadata": {"name": "nvidia"}, "handler": "nvidia"})
    kc = chart.identity(cp, "controller")
    wh = WebhookServer(tessera, cp, kubeconfig=chart.identity(cp, "webhook"))
    nodes, devices, ctl, rcs = [], None, None, []
    try:
        wh.wait_ready()
        register_webhooks(cp, wh.port)
        nodes = [KubeletNode(cp, NODE, capacity={"cpu": "128", "memory": "2Ti"}).start(),
                 KubeletNode(cp, "node-cpu", capacity={"cpu": "4", "memory": "16Gi"}).start()]
        h100 = nodes[0]
        devices = Devices(tessera, cp, h100)
        devices.dm.wait_registered(h100, ["nvidia.com/gpu", "nvidia.com/gpu.sliced"])
        ctl = Controller(tessera, cp, "controller-a", kubeconfig=kc)
        ctl.wait_ready()
        cq = lambda: get(cp, KQ_API + "/clusterqueues/" + H100) or {}  # noqa: E731
        t.ok(eventually(lambda: (condition(cq(), "Active") or {}).get("status") == "True" and
                        get(cp, "%s/namespaces/%s/localqueues/%s" % (KQ_API, NS, entrance(H100))),
                        90),
             "the controller derives the H100 pool's ClusterQueue, Active, and its entrance "
             "LocalQueue in default", cq())

        compare(t, cp, "1", golden.get("1", {}))

        flip(t, devices, range(8), True, "step 2.1")
        compare(t, cp, "2.2", golden.get("2.2", {}))

        ran = apply_pod(t, cp, manifests, "mig-demo")
        if ran:
            g = grants(cp, "mig-demo")
            t.ok(len(g) == 1 and g[0][1] == "3g.40gb" and len(instances(h100)) == 1,
                 "step 2.3: the device manager carved one 3g.40gb instance for it",
                 {"record": g, "instances": instances(h100)})
        compare(t, cp, "2.4", golden.get("2.4", {}), ran)
        delete_and_reclaim(t, cp, h100, ["mig-demo"], "step 2.4")

        flip(t, devices, [3, 4, 5, 6, 7], False, "step 3")
        compare(t, cp, "3", golden.get("3", {}))

        ran = apply_pod(t, cp, manifests, "mixed-partition")
        ran = apply_pod(t, cp, manifests, "mixed-logical") and ran
        part, logical = grants(cp, "mixed-partition"), grants(cp, "mixed-logical")
        t.ok(len(part) == 1 and part[0][0] in (0, 1, 2) and part[0][1] == "3g.40gb" and
             len(logical) == 1 and logical[0][0] in (3, 4, 5, 6, 7) and not logical[0][1],
             "step 3.1: the partition lands on a MIG GPU (0-2), the slice on a logical one (3-7)",
             {"mixed-partition": part, "mixed-logical": logical})
        compare(t, cp, "3.1", golden.get("3.1", {}), ran)
        delete_and_reclaim(t, cp, h100, ["mixed-partition", "mixed-logical"], "step 4")

        flip(t, devices, [0, 1, 2], False, "step 4")
        compare(t, cp, "4", dict(golden.get("4", {}), keys=golden.get("1", {}).get("keys")))
        t.ok(not any(n.errors for n in nodes), "the kubelet parts logged no error",
             [e for n in nodes for e in n.errors])
    finally:
        if ctl and ctl.alive():
            rcs.append(ctl.stop())
        for dm in (devices.all if devices else []):
            dm.stop()
        for n in nodes:
            n.stop()
        wh.stop()
    if ctl:
        check_stopped(t, [ctl], rcs)
    if t.failed() and devices:
        t.note("---- device manager ----\n%s" % devices.dm.log(30))


def main():
    tessera = sys.argv[1]
    t = Tap()
    on_control_plane(t, "mig_walkthrough", lambda cp: run(t, tessera, cp))
    sys.exit(t.done())


if __name__ == "__main__":
    main()
