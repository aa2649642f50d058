#!/usr/bin/env python3
"""test_controller.py TESSERA - `tessera controller` on a real control plane (etcd, kube-apiserver,
kube-scheduler, Kueue run with `tessera kueue-config`), tessera's CRDs, two nodes whose kubelet
part is tests/cluster/kubelet.py, each with `tessera device-manager --fake` (four H100s), and two
controller replicas campaigning for one Lease, authenticated as the Deployment's ServiceAccount
with only the Helm chart's RBAC (a TokenRequest token of its ServiceAccount).

Checked, in order: one replica leads and both report ready; the gpustack-node-devices
AdmissionCheck is applied and Active; each managed Node carries its feature labels and its
credits capacity; the chain is derived exactly (the hostname Topology, one ResourceFlavor for the
two four-GPU nodes with its nodeLabels, the pool's ClusterQueue with 2 x 4 x 1.6M credits and the
AdmissionCheck, the generic CPU pool, the entrance LocalQueues in team-a and not in the system
namespaces, a LocalQueue for a namespace created later); a queued Pod goes through the whole chain
(Kueue reserves quota, the check answers Ready, TAS and kube-scheduler place it, the device plugin
allocates it); unpinned 60 % slices (no webhook, so no fit pin) are packed by TAS onto one node:
three run there one per free GPU, and a fourth, which the credits and TAS let through, is answered
Retry with requeueAfterSeconds 30 and a message naming the node and what is short, re-placed there
and answered Retry every 30 s (the seed's unpinned loop), and runs once a slice frees; killing the leader hands the Lease to the standby, which answers
the next Workload; the metrics count the verdicts; a ClusterQueue deleted by hand comes back; the
controller's requests are all answered 2xx but the expected 404s and 409s. Prints TAP.
"""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from controlplane import ROOT, eventually  # noqa: E402
import chart  # noqa: E402
from controller_view import (CHECK, KQ, KQ_API, check_state, check_stopped,  # noqa: E402
                             condition, get, holder, lease)
from controller_view import workload_of as view_workload_of  # noqa: E402
from daemons import Controller, DeviceManager  # noqa: E402
from kubelet import KubeletNode  # noqa: E402
from tap import Tap, on_control_plane  # noqa: E402

CRDS = sorted(glob.glob(os.path.join(ROOT, "deploy", "chart", "tessera", "files", "crds", "*.yaml")))
NS = "team-a"
H100 = "NVIDIA H100 80GB HBM3:4:0000"
POOL = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"
FLAVOR = "gpustack--generic--nvidia-h100-80gb-hbm3-linux-amd64-4d"
AKEY = "acceleratable.feature.gpustack.ai/nvidia-h100-80gb-hbm3"


def pod(name, limits, queue):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {KQ + "/queue-name": queue}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.example/cuda:12",
                                     "resources": {"limits": limits}}]}}


def workload_of(cp, name):
    return view_workload_of(cp, NS, name)


def phase(cp, name):
    p = get(cp, "/api/v1/namespaces/%s/pods/%s" % (NS, name))
    return ((p or {}).get("status") or {}).get("phase")


def run(t, tessera, cp):
    cp.install_crds(CRDS)
    cp.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    kc = chart.identity(cp, "controller")
    nodes = [KubeletNode(cp, n).start() for n in ("node-a", "node-b")]
    dm_kc = chart.identity(cp, "device-manager")
    dms = [DeviceManager(tessera, cp, n, H100, kubeconfig=dm_kc) for n in nodes]
    ctls = []
    try:
        for dm, n in zip(dms, nodes):
            dm.wait_registered(n, ["nvidia.com/gpu"])
        ctls = [Controller(tessera, cp, "controller-a", kubeconfig=kc),
                Controller(tessera, cp, "controller-b", kubeconfig=kc)]
        lead = eventually(lambda: holder(cp) in ("controller-a", "controller-b") and holder(cp),
                          30)
        t.ok(lead, "one replica holds the Lease", lease(cp))
        for c in ctls:
            c.wait_ready()
        t.ok(all(c.probe("/readyz")[0] == 200 and c.probe("/healthz")[0] == 200 for c in ctls),
             "both replicas are healthy and ready (the standby's caches are listed too)")
        leader = next(c for c in ctls if c.identity == lead)
        standby = next(c for c in ctls if c.identity != lead)
        metrics = leader.probe("/metrics")[1]
        t.ok("tessera_controller_leader 1" in metrics and
             "tessera_controller_leader 0" in standby.probe("/metrics")[1],
             "the metrics say which replica leads", metrics[:400])

        ac = eventually(lambda: (condition(get(cp, KQ_API + "/admissionchecks/" + CHECK),
                                           "Active") or {}).get("status") == "True" and
                        get(cp, KQ_API + "/admissionchecks/" + CHECK), 30)
        t.ok(ac and ac["spec"]["controllerName"] == "worker.gpustack.ai/node-devices",
             "the gpustack-node-devices AdmissionCheck is applied and Active",
             get(cp, KQ_API + "/admissionchecks/" + CHECK))

        def labels(name):
            return ((get(cp, "/api/v1/nodes/" + name) or {}).get("metadata") or {}).get(
                "labels", {})
        want = {"gpustack.ai/managed": "true", AKEY: "true", AKEY + ".count": "4",
                "general.feature.gpustack.ai/generic": "true"}
        labelled = eventually(lambda: all(all(labels(n.name).get(k) == v for k, v in
                                              want.items()) for n in nodes), 30)
        t.ok(labelled and all(labels(n.name).get("topology.gpustack.ai/profile", "").startswith(
            "fnv64-") for n in nodes), "each managed Node carries its feature labels",
            {n.name: labels(n.name) for n in nodes})

        def credits(name):
            return (((get(cp, "/api/v1/nodes/" + name) or {}).get("status") or {}).get(
                "allocatable") or {}).get("credits.gpustack.ai/nvidia")
        t.ok(eventually(lambda: all(credits(n.name) == "6400k" for n in nodes), 30),
             "each Node's allocatable carries its credits (4 x 1.6M), for Kueue v0.17's TAS",
             {n.name: credits(n.name) for n in nodes})

        topo = eventually(lambda: [x for x in cp.api("GET", KQ_API + "/topologies")["items"]
                                   if x["metadata"]["name"].startswith("gpustack-fnv64-")], 30)
        t.ok(topo and len(topo) == 1 and topo[0]["spec"]["levels"] ==
             [{"nodeLabel": "kubernetes.io/hostname"}],
             "one Topology, at hostname level", topo)
        rf = eventually(lambda: get(cp, KQ_API + "/resourceflavors/" + FLAVOR), 30)
        t.ok(rf and rf["spec"]["nodeLabels"].get(AKEY + ".count") == "4" and
             rf["spec"]["nodeLabels"].get("gpustack.ai/managed") == "true" and
             rf["spec"].get("topologyName") == topo[0]["metadata"]["name"] and
             rf["metadata"]["labels"].get(AKEY + ".capacity") == "8",
             "one ResourceFlavor for the two four-GPU nodes, selecting them by their labels",
             rf)
        cq = eventually(lambda: (get(cp, KQ_API + "/clusterqueues/" + POOL) or {}).get(
            "spec", {}).get("admissionChecksStrategy") and get(cp, KQ_API + "/clusterqueues/" +
                                                               POOL), 30)
        groups = ((cq or {}).get("spec") or {}).get("resourceGroups", [])
        t.ok(cq and groups and groups[0]["coveredResources"] == ["credits.gpustack.ai/nvidia"] and
             groups[0]["flavors"][0]["name"] == FLAVOR and
             groups[0]["flavors"][0]["resources"][0]["nominalQuota"] in ("12800k", "12800000") and
             cq["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["name"] == CHECK,
             "the pool's ClusterQueue: credits only, 2 x 4 x 1.6M, the check referenced once "
             "Active", cq)
        generic = eventually(lambda: get(cp, KQ_API + "/clusterqueues/gpustack--generic-linux-"
                                                      "amd64"), 30)
        t.ok(generic and generic["spec"]["resourceGroups"][0]["coveredResources"] == ["cpu"] and
             not generic["spec"].get("admissionChecksStrategy"),
             "the generic CPU pool's ClusterQueue covers cpu, with no check", generic)
        lqs = eventually(lambda: [q for q in cp.api("GET", KQ_API + "/localqueues")["items"]
                                  if q["spec"]["clusterQueue"] == POOL], 30)
        spaces = sorted(q["metadata"]["namespace"] for q in lqs or [])
        t.ok(NS in spaces and "default" in spaces and "kube-system" not in spaces and
             "gpustack-system" not in spaces and
             all(q["metadata"]["name"].startswith("gpustack-fnv64-") and
                 len(q["metadata"]["name"]) == 31 for q in lqs),
             "the pool's entrance LocalQueue is in every namespace but the system ones", spaces)
        queue = next(q["metadata"]["name"] for q in lqs if q["metadata"]["namespace"] == NS)
        cp.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}})
        t.ok(eventually(lambda: get(cp, "%s/namespaces/team-b/localqueues/%s" %
                                    (KQ_API, queue)), 30),
             "a namespace created later gets its LocalQueue")

        # Gate 2 + 3 through the whole chain.
        cp.create(pod("one", {"nvidia.com/gpu": "1"}, queue))
        ready = eventually(lambda: (check_state(workload_of(cp, "one")) or {}).get(
            "state") == "Ready", 60)
        t.ok(ready, "the check answers Ready for a one-GPU Workload",
             workload_of(cp, "one"))
        ran = eventually(lambda: phase(cp, "one") == "Running", 120)
        t.ok(ran, "Kueue admits it, kube-scheduler binds it, the device plugin allocates it",
             {"pod": get(cp, "/api/v1/namespaces/%s/pods/one" % NS), "wl": workload_of(cp, "one")})

        # Unpinned slices (no webhook here, so no fit pin): TAS packs them onto node-a, whose
        # credits still have room. Three 60 % slices take its three free GPUs one each (two
        # never share one); a fourth fits the credits but no GPU, so the check answers Retry
        # naming node-a, and Kueue re-places it there every 30 s (the seed's unpinned loop)
        # until a slice frees.
        slice60 = {"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.units": "960000"}
        for i in range(1, 4):
            cp.create(pod("s%d" % i, slice60, queue))
        ran = eventually(lambda: all(phase(cp, "s%d" % i) == "Running" for i in range(1, 4)), 120)
        on = {get(cp, "/api/v1/namespaces/%s/pods/s%d" % (NS, i))["spec"].get("nodeName")
              for i in range(1, 4)}
        t.ok(ran and on == {"node-a"},
             "three 60 % slices are answered Ready and run on node-a's three free GPUs",
             {"s%d" % i: check_state(workload_of(cp, "s%d" % i)) for i in range(1, 4)})
        cp.create(pod("s4", slice60, queue))
        retry = eventually(lambda: (check_state(workload_of(cp, "s4")) or {}).get(
            "requeueAfterSeconds") == 30 and check_state(workload_of(cp, "s4")).get(
            "message", "").startswith("node") and check_state(workload_of(cp, "s4")), 90)
        msg = (retry or {}).get("message", "")
        t.ok(retry and 'node "node-a"' in msg and "960000" in msg,
             "a fourth is answered Retry, requeueAfterSeconds 30, naming the node and what is "
             "short", check_state(workload_of(cp, "s4")))
        looped = eventually(lambda: (check_state(workload_of(cp, "s4")) or {}).get(
            "retryCount", 0) >= 2, 100)
        t.ok(looped and phase(cp, "s4") != "Running",
             "unpinned, it is re-placed and answered Retry again every 30 s, and never runs",
             check_state(workload_of(cp, "s4")))
        cp.api("DELETE", "/api/v1/namespaces/%s/pods/s1" % NS)
        t.ok(eventually(lambda: phase(cp, "s4") == "Running", 120),
             "once a slice frees, the next placement is answered Ready and it runs",
             {"wl": check_state(workload_of(cp, "s4")), "pod": phase(cp, "s4")})

        # Killing the leader hands the Lease over; the standby judges the next Workload.
        leader.kill()
        leader.proc.wait()
        took = eventually(lambda: holder(cp) == standby.identity, 30)
        t.ok(took, "the standby takes the Lease once the leader is killed", lease(cp))
        for i in range(2, 5):
            cp.api("DELETE", "/api/v1/namespaces/%s/pods/s%d" % (NS, i))
        t.ok(eventually(lambda: not any(phase(cp, "s%d" % i) for i in range(1, 5)), 120),
             "the slices are deleted and released")
        cp.create(pod("two", {"nvidia.com/gpu": "2"}, queue))
        t.ok(eventually(lambda: (check_state(workload_of(cp, "two")) or {}).get(
            "state") == "Ready", 60) and eventually(lambda: phase(cp, "two") == "Running", 120),
            "the new leader answers the next Workload, which runs", workload_of(cp, "two"))
        metrics = standby.probe("/metrics")[1]
        t.ok('tessera_controller_verdicts_total{state="Ready"} 0' not in metrics and
             "tessera_controller_leader 1" in metrics,
             "the new leader's metrics count its verdicts", metrics)

        cp.api("DELETE", KQ_API + "/clusterqueues/gpustack--generic-linux-amd64")
        t.ok(eventually(lambda: get(cp, KQ_API + "/clusterqueues/gpustack--generic-linux-amd64")
                        and not get(cp, KQ_API + "/clusterqueues/gpustack--generic-linux-amd64")[
                            "metadata"].get("deletionTimestamp"), 60),
             "a ClusterQueue deleted by hand comes back")
        t.ok(not any(n.errors for n in nodes), "the kubelet parts logged no error",
             [e for n in nodes for e in n.errors])
    finally:
        rcs = [c.stop() for c in ctls if c.alive()]
        for dm in dms:
            dm.stop()
        for n in nodes:
            n.stop()
    check_stopped(t, ctls, rcs, last=80)
    if t.failed():
        t.note(json.dumps(get(cp, KQ_API + "/clusterqueues/" + POOL), indent=1)[:3000])


def main():
    tessera = sys.argv[1]
    t = Tap()
    on_control_plane(t, "controller", lambda cp: run(t, tessera, cp))
    sys.exit(t.done())


if __name__ == "__main__":
    main()
