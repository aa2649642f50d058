#!/usr/bin/env python3
"""test_chain.py TESSERA - the harness's own end-to-end run: a real control plane (etcd,
kube-apiserver, kube-scheduler, Kueue), one node whose kubelet part is tests/cluster/kubelet.py over
the python3-grpcio fake kubelet, and the real `tessera device-manager` with four fake H100s.

Checked, in order: the device plugins register and the node's allocatable follows (the plugins'
tokens, and the counting keys the device manager publishes on capacity); a plain Pod asking for
two GPUs is bound by kube-scheduler, allocated through the device plugin, recorded in its
allocation annotation and reported Running; then Kueue's pod integration over hand-made queue
objects (a ResourceFlavor with a hostname Topology, a ClusterQueue with a credits quota of two
GPUs, a LocalQueue): a queue-labelled Pod gets Kueue's label, finalizer and scheduling gates, its
Workload asks for credits (`tessera kueue-config`'s transformations); Kueue v0.17 TAS does not admit
it while the node advertises no credits (its TAS fit uses the transformed requests), and once the
node's capacity carries credits.gpustack.ai/nvidia (4 x 1600000) TAS admits it onto the node
and kube-scheduler binds it; a second Pod that would exceed the quota waits, gated, until the first
is deleted (the kubelet part releases its devices and deletes it). The kubelet part logged no error
and the device manager exits 0 on SIGTERM.

Prints TAP.
"""
import sys
import os

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from controlplane import eventually  # noqa: E402
from daemons import DeviceManager  # noqa: E402
from kubelet import KubeletNode  # noqa: E402
from tap import Tap, on_control_plane  # noqa: E402

ALLOC = "device.gpustack.ai/accelerator.allocated"
NS = "team-a"
KQ = "kueue.x-k8s.io"


def pod(name, limits, labels=None):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": labels or {}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.example/cuda:12",
                                     "resources": {"limits": limits}}]}}


def get_pod(cp, name):
    return cp.api("GET", "/api/v1/namespaces/%s/pods/%s" % (NS, name))


def phase(cp, name):
    return get_pod(cp, name).get("status", {}).get("phase")


def workload_of(cp, name):
    for w in cp.api("GET", "/apis/%s/v1beta2/namespaces/%s/workloads" % (KQ, NS))["items"]:
        for ref in w["metadata"].get("ownerReferences", []):
            if ref["kind"] == "Pod" and ref["name"] == name:
                return w
    return None


def run(t, tessera, cp):
    cp.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    node = KubeletNode(cp, "node-a", labels={"tessera.test/pool": "a"}).start()
    dm = DeviceManager(tessera, cp, node, "NVIDIA H100 80GB HBM3:4:0000")
    try:
        dm.wait_registered(node, ["nvidia.com/gpu", "nvidia.com/gpu.shared",
                                  "nvidia.com/gpu.sliced"])

        def allocatable():
            return cp.api("GET", "/api/v1/nodes/node-a")["status"].get("allocatable", {})
        # the three plugins' ListAndWatch reach the kubelet one by one: wait for all of them
        want = {"nvidia.com/gpu": "4", "nvidia.com/gpu.shared": "40", "nvidia.com/gpu.sliced": "512"}

        def complete():
            a = allocatable()
            return a if all(a.get(k) == v for k, v in want.items()) and \
                a.get("nvidia.com/gpu.sliced.units") else None
        alloc = eventually(complete, 60)
        t.ok(alloc and alloc.get("nvidia.com/gpu.shared") == "40" and
             alloc.get("nvidia.com/gpu.sliced") == "512",
             "the plugins' tokens reach the node's allocatable (4 GPUs, 40 shares, 512 slices)",
             alloc or allocatable())
        t.ok(alloc and alloc.get("nvidia.com/gpu.sliced.units") == "6400k",
             "the device manager's counting keys on capacity are allocatable too (6400k units)",
             alloc)

        # gate 4 and 5 without Kueue: kube-scheduler binds, the device plugin allocates.
        cp.create(pod("plain", {"nvidia.com/gpu": "2"}))
        ran = eventually(lambda: phase(cp, "plain") == "Running", 120)
        p = get_pod(cp, "plain")
        t.ok(ran and p["spec"].get("nodeName") == "node-a",
             "a Pod asking for 2 GPUs is bound by kube-scheduler and reported Running",
             p.get("status"))
        rec = node.admission(NS, "plain")
        t.ok(rec and rec["ok"] and len(rec["allocations"]) == 1 and
             len(rec["allocations"][0]["devices"]) == 2,
             "the kubelet part allocated two devices through the device plugin", rec)
        ann = eventually(lambda: get_pod(cp, "plain")["metadata"].get("annotations", {}).get(ALLOC))
        t.ok(ann and '"mode":1' in ann.replace(" ", ""),
             "the grant is recorded in the Pod's allocation annotation (exclusive)", ann)

        # Kueue's pod integration on hand-made queue objects.
        cp.create({"apiVersion": KQ + "/v1beta2", "kind": "Topology",
                   "metadata": {"name": "hostname"},
                   "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}})
        cp.create({"apiVersion": KQ + "/v1beta2", "kind": "ResourceFlavor",
                   "metadata": {"name": "pool-a"},
                   "spec": {"nodeLabels": {"tessera.test/pool": "a"}, "topologyName": "hostname"}})
        cp.create({"apiVersion": KQ + "/v1beta2", "kind": "ClusterQueue",
                   "metadata": {"name": "cq"},
                   "spec": {"namespaceSelector": {}, "resourceGroups": [{
                       "coveredResources": ["credits.gpustack.ai/nvidia"],
                       "flavors": [{"name": "pool-a", "resources": [{
                           "name": "credits.gpustack.ai/nvidia", "nominalQuota": "3200000"}]}]}]}})
        cp.create({"apiVersion": KQ + "/v1beta2", "kind": "LocalQueue",
                   "metadata": {"name": "lq", "namespace": NS}, "spec": {"clusterQueue": "cq"}})
        active = eventually(lambda: any(
            c["type"] == "Active" and c["status"] == "True" for c in cp.api(
                "GET", "/apis/%s/v1beta2/clusterqueues/cq" % KQ).get("status", {}).get(
                "conditions", [])), 60)
        t.ok(active, "the ClusterQueue is Active")

        stored = cp.create(pod("q1", {"nvidia.com/gpu": "1"}, {KQ + "/queue-name": "lq"}))
        gates = [g["name"] for g in stored["spec"].get("schedulingGates", [])]
        t.ok(KQ + "/admission" in gates and stored["metadata"]["labels"].get(KQ + "/managed") ==
             "true" and KQ + "/managed" in stored["metadata"].get("finalizers", []),
             "Kueue's webhook gives a queued Pod its label, finalizer and admission gate",
             stored["metadata"], )
        wl = eventually(lambda: workload_of(cp, "q1"), 60)
        reqs = (wl or {}).get("status", {}).get("resourceRequests", [{}])
        t.ok(wl is not None, "Kueue made a Workload for the Pod", wl)
        # Kueue v0.17.0 checks a TAS fit with the Workload's quota requests, after
        # resources.transformations (flavorassigner ComputeTASNetUsage sums psa.Requests), against
        # each node's allocatable: a node without the credits resource never fits.
        stuck = eventually(lambda: any(
            c["type"] == "QuotaReserved" and c["status"] == "False" for c in (
                workload_of(cp, "q1") or {}).get("status", {}).get("conditions", [])), 60)
        admitted_early = eventually(lambda: phase(cp, "q1") == "Running", 5)
        t.ok(stuck and not admitted_early,
             "Kueue v0.17 TAS judges the credits request against the node: without credits in its "
             "allocatable the Workload reserves no quota", workload_of(cp, "q1"))
        cp.merge_patch("/api/v1/nodes/node-a/status",
                       {"status": {"capacity": {"credits.gpustack.ai/nvidia": "6400000"}}})
        ran = eventually(lambda: phase(cp, "q1") == "Running", 120)
        p = get_pod(cp, "q1")
        t.ok(ran and not p["spec"].get("schedulingGates") and p["spec"].get("nodeName") == "node-a",
             "TAS admits it, the gates go, kube-scheduler binds it, the kubelet runs it",
             {"spec": {k: p["spec"].get(k) for k in ("schedulingGates", "nodeSelector",
                                                        "nodeName")},
              "status": p.get("status", {}).get("phase"), "workload": workload_of(cp, "q1")})
        wl = workload_of(cp, "q1")
        usage = wl["status"].get("admission", {}).get("podSetAssignments", [{}])[0] if wl else {}
        t.ok(usage.get("resourceUsage", {}).get("credits.gpustack.ai/nvidia") in
             ("1600000", "1600k"),
             "the Workload is charged 1600k credits for one GPU (resources.transformations)",
             {"assignment": usage, "requests": reqs})
        t.ok(usage.get("topologyAssignment") is not None,
             "the admission carries a topology assignment (TAS)", usage)

        cp.create(pod("q2", {"nvidia.com/gpu": "2"}, {KQ + "/queue-name": "lq"}))
        wl2 = eventually(lambda: workload_of(cp, "q2"), 60)
        held = eventually(lambda: any(c["type"] == "QuotaReserved" and c["status"] == "False"
                                      for c in (workload_of(cp, "q2") or {}).get(
                                          "status", {}).get("conditions", [])), 60)
        t.ok(wl2 and held and get_pod(cp, "q2")["spec"].get("schedulingGates"),
             "a second Pod past the two-GPU quota waits, gated, with no quota reserved",
             workload_of(cp, "q2"))
        cp.api("DELETE", "/api/v1/namespaces/%s/pods/q1" % NS)
        gone = eventually(lambda: not any(p["metadata"]["name"] == "q1" for p in cp.api(
            "GET", "/api/v1/namespaces/%s/pods" % NS)["items"]), 120)
        t.ok(gone, "a deleted Pod is released by the kubelet part and leaves the API server")
        ran = eventually(lambda: phase(cp, "q2") == "Running", 150)
        t.ok(ran, "the waiting Pod is admitted once the quota frees and runs",
             {"pod": get_pod(cp, "q2").get("status"), "workload": workload_of(cp, "q2")})
        t.ok(not node.errors, "the kubelet part logged no error", "\n".join(node.errors))
    finally:
        rc = dm.stop()
        node.stop()
    t.ok(rc == 0, "the device manager exits 0 on SIGTERM", dm.log())


def main():
    tessera = sys.argv[1]
    t = Tap()
    on_control_plane(t, "chain", lambda cp: run(t, tessera, cp))
    sys.exit(t.done())


if __name__ == "__main__":
    main()
