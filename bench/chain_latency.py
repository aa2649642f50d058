#!/usr/bin/env python3
"""chain_latency.py TESSERA [--nodes N] [--pods P] [--concurrency C] - Pod create to Running
through the whole chain on the real control plane (tests/cluster/controlplane.py: etcd,
kube-apiserver, kube-scheduler, Kueue run with `tessera kueue-config`), with N nodes of four fake
H100s (`tessera device-manager --fake` behind the python fake kubelet) and one `tessera
controller`.

P queued Pods of one GPU each go through Kueue's quota (gate 2), the gpustack-node-devices check
(gate 3), TAS and kube-scheduler, and the device plugin's Allocate (gates 4 and 5), C at a time:
each Pod is deleted once Running, which frees its GPU for the next. Prints the create-to-Running
latency (p50, p90, p99, max, nearest rank), the controller's verdict counters, and the Pods whose
Workload was answered Retry before it ran (the slowest ones, with the controller's messages). The numbers
include the fake kubelet's status loop and Kueue's own scheduling cycle; the machine is named in
the output. Not a test: nothing here fails on a number.
"""
import argparse
import os
import platform
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "cluster"))

from controlplane import ROOT, ControlPlane, eventually  # noqa: E402
from controller_view import KQ_API, check_state, workload_of  # noqa: E402
from daemons import Controller, DeviceManager  # noqa: E402
from kubelet import KubeletNode  # noqa: E402
from percentile import rank  # noqa: E402

import glob  # noqa: E402

NS = "bench"
POOL = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"


def stage_times(pod, wl):
    """{stage: whole seconds after the Pod's creation}: the Workload created, quota reserved, the
    check Ready, admitted (Kueue), the Pod scheduled (kube-scheduler) and Running (the kubelet
    part), from the objects' own timestamps."""
    def at(ts):
        return time.mktime(time.strptime(ts, "%Y-%m-%dT%H:%M:%SZ")) if ts else None

    t0 = at(pod["metadata"]["creationTimestamp"])
    out = {"Workload": at(wl["metadata"]["creationTimestamp"])}
    for c in wl.get("status", {}).get("conditions", []):
        if c["type"] in ("QuotaReserved", "Admitted") and c["status"] == "True":
            out[c["type"]] = at(c.get("lastTransitionTime"))
    for c in wl.get("status", {}).get("admissionChecks", []):
        if c.get("state") == "Ready":
            out["CheckReady"] = at(c.get("lastTransitionTime"))
    for c in pod.get("status", {}).get("conditions", []):
        if c["type"] == "PodScheduled" and c["status"] == "True":
            out["Scheduled"] = at(c.get("lastTransitionTime"))
        if c["type"] == "Ready" and c["status"] == "True":
            out["Running"] = at(c.get("lastTransitionTime"))
    return {k: int(v - t0) for k, v in out.items() if v is not None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tessera")
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--pods", type=int, default=40)
    ap.add_argument("--concurrency", type=int, default=4)
    a = ap.parse_args()
    os.environ.setdefault("TSR_TESSERA", os.path.abspath(a.tessera))
    os.environ.setdefault("TSR_SOURCE_ROOT", ROOT)

    cp = ControlPlane("bench-chain")
    nodes, dms, ctl = [], [], None
    try:
        cp.start()
        cp.install_crds(sorted(glob.glob(os.path.join(ROOT, "deploy", "chart", "tessera", "files", "crds", "*.yaml"))))
        cp.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        for i in range(a.nodes):
            n = KubeletNode(cp, "node-%d" % i).start()
            nodes.append(n)
            dms.append(DeviceManager(a.tessera, cp, n, "NVIDIA H100 80GB HBM3:4:0000",
                                     extra=("--log-level", "info")))
        for dm, n in zip(dms, nodes):
            dm.wait_registered(n, ["nvidia.com/gpu"])
        ctl = Controller(a.tessera, cp, "bench", extra=("--leader-elect", "false",
                                                        "--log-level", "info"))
        queue = eventually(lambda: next((q["metadata"]["name"] for q in cp.api(
            "GET", "%s/namespaces/%s/localqueues" % (KQ_API, NS))["items"]
            if q["spec"]["clusterQueue"] == POOL), None), 60)
        cq_ok = eventually(lambda: cp.api("GET", KQ_API + "/clusterqueues/" + POOL).get(
            "spec", {}).get("admissionChecksStrategy"), 60)
        credits = eventually(lambda: all(cp.api("GET", "/api/v1/nodes/" + n.name)["status"].get(
            "allocatable", {}).get("credits.gpustack.ai/nvidia") for n in nodes), 60)
        if not (queue and cq_ok and credits):
            raise RuntimeError("the chain did not come up:\n" + ctl.log())

        latencies, lock, errors, retried = [], threading.Lock(), [], []

        stages = {}  # pod name -> the seconds (API timestamps) each stage took after create

        def retry_count(name):
            """How often the Pod's Workload was answered Retry (Kueue's retryCount); records the
            Pod's stages from the Workload's and the Pod's own timestamps (1 s resolution)."""
            pod = cp.api("GET", "/api/v1/namespaces/%s/pods/%s" % (NS, name))
            w = workload_of(cp, NS, name)
            if not w:
                return 0
            stages[name] = stage_times(pod, w)
            return (check_state(w) or {}).get("retryCount", 0)
        todo = list(range(a.pods))

        def phase(name):
            p = cp.api("GET", "/api/v1/namespaces/%s/pods/%s" % (NS, name))
            return p.get("status", {}).get("phase")

        def worker():
            while True:
                with lock:
                    if not todo:
                        return
                    i = todo.pop(0)
                name = "p%d" % i
                t0 = time.monotonic()
                cp.create({"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": name, "namespace": NS,
                                        "labels": {"kueue.x-k8s.io/queue-name": queue}},
                           "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                                    "containers": [{"name": "main", "image": "bench:1",
                                                    "resources": {"limits": {
                                                        "nvidia.com/gpu": "1"}}}]}})
                if not eventually(lambda: phase(name) == "Running", 180, interval=0.02):
                    errors.append(name)
                    return
                took = time.monotonic() - t0
                with lock:
                    latencies.append(took)
                    retries = retry_count(name)
                    if retries:
                        retried.append((took, name, retries))
                cp.api("DELETE", "/api/v1/namespaces/%s/pods/%s" % (NS, name))
                eventually(lambda: not any(p["metadata"]["name"] == name for p in cp.api(
                    "GET", "/api/v1/namespaces/%s/pods" % NS)["items"]), 120, interval=0.05)

        start = time.monotonic()
        threads = [threading.Thread(target=worker) for _ in range(a.concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - start
        lat = sorted(latencies)
        print("machine: %s, %d CPUs, Python %s" % (platform.platform(), os.cpu_count(),
                                                    platform.python_version()))
        print("chain: %d nodes x 4 H100 (fake), %d Pods of 1 GPU, %d at a time, %.1f s" %
              (a.nodes, a.pods, a.concurrency, wall))
        if lat:
            print("create -> Running: p50 %.2f s  p90 %.2f s  p99 %.2f s  max %.2f s  (n=%d)" %
                  (rank(lat, 50), rank(lat, 90), rank(lat, 99), lat[-1], len(lat)))
        for line in ctl.probe("/metrics")[1].splitlines():
            if line.startswith("tessera_controller_verdicts_total") or \
                    line.startswith("tessera_controller_writes_total"):
                print(line)
        print("the slowest Pods' stages (s after the Pod's creationTimestamp):")
        for name, st in sorted(stages.items(), key=lambda kv: -kv[1].get("Running", 0))[:5]:
            print("  %s: %s" % (name, "  ".join("%s %d" % kv for kv in st.items())))
        print("Pods whose Workload was answered Retry first: %d" % len(retried))
        for took, name, n in sorted(retried, reverse=True)[:10]:
            print("  %s: %.2f s, retryCount %d" % (name, took, n))
        for line in ctl.lines:
            if "msg=verdict" in line and "state=Retry" in line:
                print("  retry: " + line[line.index("workload="):][:300])
        if errors:
            print("not Running within 180 s: %s" % ", ".join(errors))
            return 1
        return 0
    finally:
        if ctl:
            ctl.stop()
        for dm in dms:
            dm.stop()
        for n in nodes:
            n.stop()
        cp.stop()


if __name__ == "__main__":
    sys.exit(main())
