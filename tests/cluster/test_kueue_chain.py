#!/usr/bin/env python3
"""test_kueue_chain.py TESSERA - tessera's Kueue Configuration and Kueue chain objects on the real
Kueue v0.17.0 (tests/cluster/controlplane.py: etcd, kube-apiserver, kube-scheduler, Kueue).

Checked, in order: the harness ran Kueue with what `tessera kueue-config -o json` prints, only the
harness's own fields added (each product field as printed; the namespace exclusions and feature
gates a superset), Kueue accepted it under its strict decoding (it is ready) and loaded its gates
(AssignQueueLabelsForPods off, TopologyAwareScheduling and TASBalancedPlacement on, in its log);
`tessera sim` over two nodes (4 x H100 with 16 cores, 8 cores CPU-only) prints the chain's
Topology, AdmissionCheck, ResourceFlavors, ClusterQueues and LocalQueues (codec/kueue_chain.h, the
builders `tessera controller` applies), and each is created on the real server, through Kueue's
webhooks, with no field pruned or changed, while upstream's lendingLimit 0 is refused on such a
queue; with the sim's Node labels (core/chain.h) on two real
Nodes and the AdmissionCheck marked Active as its controller would, both ClusterQueues turn
Active; a queued CPU Pod is admitted by TAS through the generic LocalQueue onto a flavor of its
pool; a queued GPU Pod reserves quota in the H100 flavor (1600k credits, the transformations),
TAS places it on the H100 node the flavor's nodeLabels select, and it waits for the
gpustack-node-devices check, which nothing here answers; a GPU Pod that also requests cpu does not
fit the credits-only queue, since v0.17.0 has no quotaCheckStrategy IgnoreUndeclared.

Prints TAP.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from controlplane import ApiError, eventually  # noqa: E402
from sim_json import sim_outputs  # noqa: E402
from tap import Tap, on_control_plane  # noqa: E402

KQ = "kueue.x-k8s.io"
NS = "team-a"
H100_POOL = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"
H100_FLAVOR = "gpustack--generic--nvidia-h100-80gb-hbm3-linux-amd64-4d"
GENERIC_POOL = "gpustack--generic-linux-amd64"
# The harness's own Configuration fields (controlplane.config_kueue), not the product's.
HARNESS_FIELDS = ("leaderElection", "internalCertManagement", "webhook", "metrics", "health")

SCENARIO = """cluster:
  nodes:
  - name: node-h100
    cpu: 16
    memory: 64Gi
    accelerators:
      model: NVIDIA H100 80GB HBM3
      count: 4
  - name: node-cpu
    cpu: 8
    memory: 16Gi
steps:
- kubectl get topologies -o json
- kubectl get admissionchecks -o json
- kubectl get resourceflavors -o json
- kubectl get clusterqueues -o json
- kubectl -n %s get localqueues -o json
- kubectl get node node-h100 -o json
- kubectl get node node-cpu -o json
""" % NS


def missing(sent, stored, path=""):
    """Where stored lacks or changed what sent holds (a field pruned or rewritten), or []."""
    if isinstance(sent, dict):
        if not isinstance(stored, dict):
            return [path or "."]
        out = []
        for k, v in sent.items():
            out += missing(v, stored.get(k), "%s.%s" % (path, k)) if k in stored else [
                "%s.%s" % (path, k)]
        return out
    if isinstance(sent, list):
        if not isinstance(stored, list) or len(stored) != len(sent):
            return [path]
        return [m for i, v in enumerate(sent) for m in missing(v, stored[i], "%s[%d]" % (path, i))]
    return [] if sent == stored else ["%s: %r != %r" % (path, sent, stored)]


def condition(obj, kind):
    for c in obj.get("status", {}).get("conditions", []):
        if c["type"] == kind:
            return c
    return None


def pod(name, queue, requests):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS,
                         "labels": {KQ + "/queue-name": queue}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.example/cuda:12",
                                     "resources": {"requests": requests, "limits": requests}}]}}


def workload_of(cp, name):
    for w in cp.api("GET", "/apis/%s/v1beta2/namespaces/%s/workloads" % (KQ, NS))["items"]:
        if any(r["kind"] == "Pod" and r["name"] == name
               for r in w["metadata"].get("ownerReferences", [])):
            return w
    return None


def check_config(t, cp):
    product = cp.product_config_kueue()
    with open(os.path.join(cp.dir, "kueue-config.yaml")) as f:
        ran = json.load(f)
    same = [k for k in product if k not in ("namespace", "featureGates",
                                            "managedJobsNamespaceSelector")]
    t.ok(all(ran.get(k) == product[k] for k in same) and
         set(ran) - set(product) == set(HARNESS_FIELDS) and
         all(ran["featureGates"].get(g) == v for g, v in product["featureGates"].items()) and
         set(product["managedJobsNamespaceSelector"]["matchExpressions"][0]["values"]) <=
         set(ran["managedJobsNamespaceSelector"]["matchExpressions"][0]["values"]),
         "Kueue runs with `tessera kueue-config`'s Configuration plus only the harness's fields",
         {"ran": ran, "product": product})
    t.ok(len(product["resources"]["transformations"]) == 42 and
         product["apiVersion"] == "config.kueue.x-k8s.io/v1beta2",
         "the Configuration is config.kueue.x-k8s.io/v1beta2 with all 42 transformations "
         "(the zero-cost counts included)",
         product)
    with open(cp.procs["kueue"].log_path) as f:
        gates = next((line for line in f if "Loaded feature gates" in line), "")
    t.ok(all(('"%s":%s' % (g, v)).replace(" ", "") in gates.replace(" ", "") for g, v in (
        ("AssignQueueLabelsForPods", "false"), ("TopologyAwareScheduling", "true"),
        ("TASBalancedPlacement", "true"))),
         "Kueue v0.17.0 accepted it (strict decoding) and loaded its feature gates", gates)


def apply_chain(t, cp, outputs):
    topologies, checks, flavors, queues, locals_ = outputs[:5]
    objects = (topologies["items"] + checks["items"] + flavors["items"] + queues["items"] +
               locals_["items"])
    kinds = sorted({o["kind"] for o in objects})
    t.ok(kinds == ["AdmissionCheck", "ClusterQueue", "LocalQueue", "ResourceFlavor", "Topology"]
         and len(flavors["items"]) == 3 and len(queues["items"]) == 2,
         "the simulator prints the chain: a Topology, the check, 3 flavors, 2 queues, 2 entrances",
         [o["metadata"]["name"] for o in objects])
    problems = {}
    for obj in objects:
        name = "%s %s" % (obj["kind"], obj["metadata"]["name"])
        try:
            stored = cp.create(obj)
        except ApiError as e:
            problems[name] = str(e)
            continue
        lost = missing({k: obj[k] for k in ("metadata", "spec")}, stored)
        if lost:
            problems[name] = lost
    t.ok(not problems, "Kueue v0.17.0 takes every chain object as built, nothing pruned", problems)

    # why the queues carry no lendingLimit: upstream's Go sets 0, Kueue v0.17.0 refuses it
    upstream = json.loads(json.dumps(queues["items"][1]))
    upstream["metadata"]["name"] = "upstream-lending-limit"
    for group in upstream["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for r in flavor["resources"]:
                r["lendingLimit"] = "0"
    try:
        cp.api("POST", "/apis/%s/v1beta2/clusterqueues?dryRun=All" % KQ, upstream)
        refusal = None
    except ApiError as e:
        refusal = e
    t.ok(refusal is not None and "must be nil when cohort is empty" in str(refusal),
         "Kueue v0.17.0 refuses upstream's lendingLimit 0 on a queue without a cohort",
         refusal)


def run(t, tessera, cp):
    check_config(t, cp)
    outputs = sim_outputs(tessera, SCENARIO)
    cp.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    apply_chain(t, cp, outputs)

    # the Nodes as the controller labels them (the sim's labels), the H100 one with credits on
    # its capacity, which Kueue v0.17's TAS reads (test_chain.py)
    for node, extra in ((outputs[5], {"nvidia.com/gpu": "4",
                                      "credits.gpustack.ai/nvidia": "6400000"}),
                        (outputs[6], {})):
        cp.create_node(node["metadata"]["name"], labels=node["metadata"]["labels"],
                       capacity=dict({"cpu": node["status"]["capacity"]["cpu"]}, **extra))
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    cp.merge_patch("/apis/%s/v1beta2/admissionchecks/gpustack-node-devices/status" % KQ, {
        "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Active",
                                   "message": "the check is served", "lastTransitionTime": now,
                                   "observedGeneration": 1}]}})

    def active(name):
        cq = cp.api("GET", "/apis/%s/v1beta2/clusterqueues/%s" % (KQ, name))
        c = condition(cq, "Active")
        return c if c and c["status"] == "True" else None
    ok = eventually(lambda: active(GENERIC_POOL) and active(H100_POOL), 60)
    t.ok(ok, "both derived ClusterQueues are Active (flavors, Topology and the check resolved)",
         {q: cp.api("GET", "/apis/%s/v1beta2/clusterqueues/%s" % (KQ, q)).get("status")
          for q in (GENERIC_POOL, H100_POOL)})

    lq = {q["spec"]["clusterQueue"]: q["metadata"]["name"] for q in outputs[4]["items"]}
    cp.create(pod("cpu-1", lq[GENERIC_POOL], {"cpu": "1"}))
    wl = eventually(lambda: (lambda w: w if w and condition(w, "Admitted") and
                             condition(w, "Admitted")["status"] == "True" else None)(
        workload_of(cp, "cpu-1")), 90)
    psa = (wl or {}).get("status", {}).get("admission", {}).get("podSetAssignments", [{}])[0]
    t.ok(wl and psa.get("flavors", {}).get("cpu", "").startswith(GENERIC_POOL + "-") and
         psa.get("topologyAssignment"),
         "a queued CPU Pod is admitted by TAS through the generic entrance onto a flavor of its "
         "pool", workload_of(cp, "cpu-1"))

    cp.create(pod("gpu-1", lq[H100_POOL], {"nvidia.com/gpu": "1"}))

    def reserved():
        # Kueue writes the reservation and the check's Pending entry in two updates: wait for
        # both, or a loaded machine reads the Workload between them.
        w = workload_of(cp, "gpu-1")
        c = condition(w or {}, "QuotaReserved")
        listed = any(a.get("name") == "gpustack-node-devices" for a in (w or {}).get(
            "status", {}).get("admissionChecks", []))
        return w if c and c["status"] == "True" and listed else None
    wl = eventually(reserved, 90)
    status = (wl or {}).get("status", {})
    psa = status.get("admission", {}).get("podSetAssignments", [{}])[0]
    checks = {c["name"]: c["state"] for c in status.get("admissionChecks", [])}
    admitted = (condition(wl or {}, "Admitted") or {}).get("status") == "True"
    t.ok(wl and psa.get("flavors", {}).get("credits.gpustack.ai/nvidia") == H100_FLAVOR and
         psa.get("resourceUsage", {}).get("credits.gpustack.ai/nvidia") in ("1600000", "1600k")
         and "node-h100" in json.dumps(psa.get("topologyAssignment")) and
         checks.get("gpustack-node-devices") == "Pending" and not admitted,
         "a queued GPU Pod reserves 1600k credits in the H100 flavor, TAS puts it on the H100 "
         "node, and it waits for the gpustack-node-devices check", workload_of(cp, "gpu-1"))

    # v0.17.0 has no resources.quotaCheckStrategy: a resource the queue does not cover still
    # counts (docs/kueue-config.md)
    cp.create(pod("gpu-cpu", lq[H100_POOL], {"nvidia.com/gpu": "1", "cpu": "1"}))

    def refused():
        c = condition(workload_of(cp, "gpu-cpu") or {}, "QuotaReserved")
        return c if c and c["status"] == "False" and "cpu" in c.get("message", "") else None
    t.ok(eventually(refused, 60),
         "without quotaCheckStrategy IgnoreUndeclared (not in v0.17.0), a GPU Pod that also asks "
         "for cpu does not fit the credits-only queue", workload_of(cp, "gpu-cpu"))


def main():
    tessera = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TSR_TESSERA")
    t = Tap()
    on_control_plane(t, "kueue-chain", lambda cp: run(t, tessera, cp))
    sys.exit(t.done())


if __name__ == "__main__":
    main()
