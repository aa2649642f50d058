#!/usr/bin/env python3
"""test_tas_fidelity.py TESSERA - the differential test of tessera's placement model against the
real Kueue v0.17.0 with Topology-Aware Scheduling (tests/cluster/controlplane.py).

For each of a few fixed seeds: a random cluster of tens of Nodes of mixed shapes (H100 and A100
nodes with 1, 2, 4 or 8 cards, CPU-only nodes; 8 to 64 cores) and hundreds of Pods (logical
slices, ownership shares, whole GPUs, CPU-only; some with a nodeSelector). The chain objects
(Topology, AdmissionCheck, ResourceFlavors, ClusterQueues, LocalQueues) and each Node's labels and
allocatable come from `tessera sim` over the same nodes, as the controller and the device manager
publish them, plus the credits capacity the controller writes (node_credits.c). The Pods are
submitted one at a time: each is left until its Workload holds a quota reservation (GPU Pods stop
there: nothing answers the gpustack-node-devices check, and a reservation is what TAS counts) or
is refused (then it is deleted, as the replay drops a pod that fits nowhere). The same objects go to
tas_model (core/tas.h behind Kueue v0.17.0's flavor assignment and TAS accounting), and every
Pod's node is compared (docs/internals/tas-fidelity.md says what the model reproduces).

Every disagreement fails the test and is listed (pod, its request, Kueue's node, the model's).
Prints TAP.
"""
import json
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from controlplane import ApiError, eventually  # noqa: E402
from sim_json import sim_outputs  # noqa: E402
from tap import Tap, on_control_plane  # noqa: E402

KQ = "kueue.x-k8s.io"
NS = "fidelity"
PRODUCTS = {"h100": ("NVIDIA H100 80GB HBM3", "nvidia"),
            "a100": ("NVIDIA A100-SXM4-80GB", "nvidia")}
CREDITS_PER_CARD = 1600000
SEEDS = (11,)  # the default run; TSR_FIDELITY_SEEDS=11,12,13 is the longer campaign
NODES = 24
STUCK_S = 5.0  # a Pending verdict that is not a flavor failure, left unretried this long
SETTLE_S = 1.0  # a refusal counts once it has stood unchanged this long (Kueue stopped retrying)
# Both are stretched by how long Kueue took to write its first verdict on the Pod: on a loaded
# machine (CI runs other suites beside this one) a retry takes as long as a first attempt.
PACE_SETTLE, PACE_STUCK = 2.0, 5.0
PODS = int(os.environ.get("TSR_FIDELITY_PODS", "160"))


def random_cluster(rng):
    """NODES nodes: (name, product key or None, cards, cores, memory GiB), names in random order."""
    names = ["n-%03d" % i for i in rng.sample(range(1000), NODES)]
    nodes = []
    for name in names:
        kind = rng.choice(["h100", "h100", "a100", "cpu"])
        cards = 0 if kind == "cpu" else rng.choice([1, 2, 2, 4, 4, 8])
        nodes.append((name, None if kind == "cpu" else kind, cards, rng.choice([8, 16, 32, 64]),
                      rng.choice([32, 64, 256])))
    return nodes


def scenario(nodes):
    lines = ["cluster:", "  nodes:"]
    for name, kind, cards, cores, mem in nodes:
        lines += ["  - name: %s" % name, "    cpu: %d" % cores, "    memory: %dGi" % mem]
        if kind:
            lines += ["    accelerators:", "      model: %s" % PRODUCTS[kind][0],
                      "      count: %d" % cards]
    lines += ["steps:", "- kubectl get topologies -o json", "- kubectl get admissionchecks -o json",
              "- kubectl get resourceflavors -o json", "- kubectl get clusterqueues -o json",
              "- kubectl -n %s get localqueues -o json" % NS]
    lines += ["- kubectl get node %s -o json" % n[0] for n in nodes]
    return "\n".join(lines) + "\n"


def random_pods(rng, nodes, entrance):
    """PODS Pods in submission order, each (object, a short description)."""
    pods = []
    counts = sorted({n[2] for n in nodes if n[1]})
    for i in range(PODS):
        kind = rng.choice(["cpu", "cpu", "whole", "whole", "share", "slice", "slice"])
        product = rng.choice(sorted(k for k in entrance if k))
        if kind == "cpu":
            req = {"cpu": rng.choice(["500m", "1", "2", "4", "6"])}
            if rng.random() < 0.05:  # v0.17 refuses what the generic queue does not cover
                req["memory"] = rng.choice(["1Gi", "8Gi"])
            queue = entrance[None]
        else:
            base = "nvidia.com/gpu"
            if kind == "whole":
                req = {base: str(rng.choice([1, 1, 1, 2, 4, 8]))}
            elif kind == "share":
                req = {base + ".shared": "1"}
            else:
                req = {base + ".sliced": "1",
                       base + ".sliced.units": str(160000 * rng.choice([1, 2, 4, 5, 8]))}
            queue = entrance[product]
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "p-%03d" % i, "namespace": NS,
                            "labels": {KQ + "/queue-name": queue}},
               "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                        "containers": [{"name": "main", "image": "registry.example/app:1",
                                        "resources": {"requests": req, "limits": req}}]}}
        if kind != "cpu" and rng.random() < 0.15 and counts:
            key = "acceleratable.feature.gpustack.ai/%s.count" % (
                "nvidia-h100-80gb-hbm3" if product == "h100" else "nvidia-a100-sxm4-80gb")
            pod["spec"]["nodeSelector"] = {key: str(rng.choice(counts))}
        pods.append((pod, "%s %s%s" % (kind, json.dumps(req, sort_keys=True),
                                      " selector" if "nodeSelector" in pod["spec"] else "")))
    return pods


def condition(obj, kind):
    for c in (obj or {}).get("status", {}).get("conditions", []):
        if c["type"] == kind:
            return c
    return None


def workload_of(cp, pod_name):
    items = cp.api("GET", "/apis/%s/v1beta2/namespaces/%s/workloads" % (KQ, NS))["items"]
    for w in items:
        if any(r["kind"] == "Pod" and r["name"] == pod_name
               for r in w["metadata"].get("ownerReferences", [])):
            return w
    return None


def outcome(cp, pod_name, node_names, waited, refusal):
    """Kueue's decision for the Pod: ("node", NAME), ("none", message) or None (not yet).
    refusal: the caller's dict for this Pod, where the refusal message last seen and since when,
    and how long Kueue took to write its first verdict, are kept."""
    w = workload_of(cp, pod_name)
    c = condition(w, "QuotaReserved")
    if not c:
        return None  # Kueue has not looked at it yet: the caller's deadline decides
    if "pace" not in refusal:
        refusal["pace"] = waited()  # how long Kueue took to answer at all
    settle_s = max(SETTLE_S, PACE_SETTLE * refusal["pace"])
    stuck_s = max(STUCK_S, PACE_STUCK * refusal["pace"])
    if c["status"] == "True":
        psa = w["status"].get("admission", {}).get("podSetAssignments", [{}])[0]
        text = json.dumps(psa.get("topologyAssignment"))
        hit = [n for n in node_names if '"%s"' % n in text]
        return ("node", hit[0] if len(hit) == 1 else "?%s" % text)
    # a failed flavor assignment, or the scheduler's last check of the node TAS chose ("Workload
    # no longer fits after processing another workload": with one Pod pending at a time no other
    # Workload is involved; it is v0.17.0's transformed usage, docs/internals/tas-fidelity.md).
    # Neither is final at once: a Workload with flavors left untried goes straight back to the
    # queue (PendingFlavors) and the next attempt starts at the next flavor, so the verdict counts
    # only once it has stood unchanged for SETTLE_S, or once Kueue has kept refusing it, with
    # whatever reasons, for STUCK_S (a refused Workload is retried on every change in its queue,
    # and its message may alternate between the flavors' reasons).
    if c.get("reason") == "Pending" and c.get("message", "").startswith(
            ("couldn't assign", "Workload no longer fits")):
        if refusal.get("message") != c["message"]:
            refusal.update(message=c["message"], since=time.monotonic())
        settled = time.monotonic() - refusal["since"] > settle_s
        return ("none", c["message"]) if settled or waited() > stuck_s else None
    if c.get("reason") == "Pending" and waited() > stuck_s:
        return ("none", "stuck: " + c.get("message", ""))  # Kueue did not retry it
    return None


def drop(cp, pod_name):
    """Deletes the Pod and its Workload (no garbage collector runs here), and waits for both."""
    w = workload_of(cp, pod_name)
    cp.api("DELETE", "/api/v1/namespaces/%s/pods/%s" % (NS, pod_name))
    if w:
        cp.merge_patch("/apis/%s/v1beta2/namespaces/%s/workloads/%s" % (
            KQ, NS, w["metadata"]["name"]), {"metadata": {"finalizers": None}})
        try:
            cp.api("DELETE", "/apis/%s/v1beta2/namespaces/%s/workloads/%s" % (
                KQ, NS, w["metadata"]["name"]))
        except ApiError as e:
            if e.status != 404:
                raise
    eventually(lambda: workload_of(cp, pod_name) is None, 60)


def run_seed(t, tessera, cp, seed):
    rng = random.Random(seed)
    nodes = random_cluster(rng)
    outputs = sim_outputs(tessera, scenario(nodes))
    topologies, checks, flavors, queues, locals_ = outputs[:5]
    node_objs = outputs[5:]
    chain = (topologies["items"] + checks["items"] + flavors["items"] + queues["items"] +
             locals_["items"])
    for obj in chain:
        cp.ensure(obj)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    cp.merge_patch("/apis/%s/v1beta2/admissionchecks/gpustack-node-devices/status" % KQ, {
        "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Active",
                                   "message": "the check is served", "lastTransitionTime": now,
                                   "observedGeneration": 1}]}})
    sent_nodes = []
    for (name, kind, cards, _cores, _mem), obj in zip(nodes, node_objs):
        alloc = dict(obj["status"]["allocatable"])
        if kind:
            alloc["credits.gpustack.ai/%s" % PRODUCTS[kind][1]] = str(cards * CREDITS_PER_CARD)
        labels = {k: v for k, v in obj["metadata"]["labels"].items()
                  if not k.startswith("kubernetes.io/")}
        stored = cp.create_node(name, labels=labels, capacity=alloc)
        sent_nodes.append({"metadata": {"name": name, "labels": stored["metadata"]["labels"]},
                           "status": {"allocatable": stored["status"]["allocatable"]}})

    def active(q):
        c = condition(cp.api("GET", "/apis/%s/v1beta2/clusterqueues/%s" % (KQ, q)), "Active")
        return c and c["status"] == "True"
    names = [q["metadata"]["name"] for q in queues["items"]]
    t.ok(eventually(lambda: all(active(q) for q in names), 90),
         "seed %d: %d nodes, the derived ClusterQueues %s Active" % (seed, len(nodes), names),
         names)
    entrance = {}
    for lq in locals_["items"]:
        cq = lq["spec"]["clusterQueue"]
        key = next((k for k, (model, _m) in PRODUCTS.items()
                    if cq == "gpustack--%s-linux-amd64" % model.lower().replace(" ", "-")), None)
        entrance[None if "generic" in cq else key] = lq["metadata"]["name"]
    pods = random_pods(rng, nodes, entrance)
    node_names = [n[0] for n in nodes]
    kueue, why = {}, {}
    started = time.monotonic()
    for pod, _desc in pods:
        name = pod["metadata"]["name"]
        cp.create(pod)
        t0 = time.monotonic()
        refusal = {}
        got = eventually(lambda: outcome(cp, name, node_names, lambda: time.monotonic() - t0,
                                         refusal),
                         60)
        if os.environ.get("TSR_FIDELITY_DEBUG"):
            t.note("%s %s -> %s (%.1f s)" % (name, _desc, got, time.monotonic() - started))
            if not got:
                t.note(json.dumps(workload_of(cp, name), indent=1)[:3000])
        if not got:  # reported as a difference; dropped so that it does not hold a queue
            kueue[name] = "timeout"
            drop(cp, name)
            continue
        kueue[name] = got[1] if got[0] == "node" else None
        why[name] = got[1]
        if got[0] == "none":
            drop(cp, name)
    t.note("seed %d: %d Pods through Kueue in %.1f s" % (seed, len(pods),
                                                           time.monotonic() - started))
    model_in = {"config": cp.product_config_kueue(), "nodes": sent_nodes,
                "flavors": flavors["items"], "clusterQueues": queues["items"],
                "localQueues": locals_["items"], "pods": [p for p, _ in pods]}
    if os.environ.get("TSR_FIDELITY_DEBUG"):
        with open("/tmp/tsr-tas-fidelity-model-%d.json" % seed, "w") as f:
            json.dump(model_in, f)
    r = subprocess.run([os.environ["TSR_TAS_MODEL"]], input=json.dumps(model_in),
                       capture_output=True, text=True, timeout=60)
    model = json.loads(r.stdout)["placements"] if r.returncode == 0 else {}
    t.ok(r.returncode == 0, "seed %d: tas_model read the same objects" % seed, r.stderr)
    differ = ["%s (%s): kueue %s, model %s" % (p["metadata"]["name"], desc,
                                               why.get(p["metadata"]["name"]),
                                               model.get(p["metadata"]["name"]))
              for p, desc in pods
              if kueue.get(p["metadata"]["name"]) != model.get(p["metadata"]["name"], "absent")]
    placed = sum(1 for v in kueue.values() if v and v != "timeout")
    refused = sum(1 for v in kueue.values() if v is None)
    t.ok(placed >= len(pods) // 3 and refused >= 1,
         "seed %d: Kueue placed %d Pods and refused %d (both outcomes exercised)" %
         (seed, placed, refused), kueue)
    t.ok(not differ, "seed %d: the model puts every one of the %d Pods where Kueue's TAS does "
         "(%d differ)" % (seed, len(pods), len(differ)), "\n".join(differ[:40]))
    # the next seed starts from an empty cluster
    for pod, _desc in pods:
        if kueue.get(pod["metadata"]["name"]):
            drop(cp, pod["metadata"]["name"])
    for n in node_names:
        cp.api("DELETE", "/api/v1/nodes/%s" % n)
    for obj in reversed(chain):
        try:
            cp.api("DELETE", cp.object_path(obj))
        except ApiError as e:
            if e.status != 404:
                raise

    def gone(obj):
        try:
            cp.api("GET", cp.object_path(obj))
        except ApiError as e:
            if e.status == 404:
                return True
            raise
        return False
    # Kueue lifts its finalizers once nothing uses a flavor or queue: the next seed recreates them
    t.ok(eventually(lambda: all(gone(obj) for obj in chain), 60),
         "seed %d: the chain objects are gone before the next seed" % seed)


def run(t, tessera, cp):
    cp.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    seeds = [int(s) for s in os.environ.get("TSR_FIDELITY_SEEDS", "").split(",") if s] or SEEDS
    for seed in seeds:
        run_seed(t, tessera, cp, seed)


def main():
    tessera = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TSR_TESSERA")
    t = Tap()
    on_control_plane(t, "tas-fidelity", lambda cp: run(t, tessera, cp), scheduler=False,
                     controller_manager=False)
    sys.exit(t.done())


if __name__ == "__main__":
    main()
