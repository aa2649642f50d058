#!/usr/bin/env python3
"""test_instancetype_lifecycle.py TESSERA - the InstanceTypes `tessera controller` authors, through
their life on the real control plane (kube-apiserver, Kueue run with `tessera kueue-config`,
kube-scheduler, tessera's CRDs and webhooks, one controller with only the chart's RBAC, the
kubelet part and `tessera device-manager --fake` on node-a: two H100 80GB, MIG off).

  authored    each pool's InstanceType exists, named as upstream, with the unit preset, the
              entrance label and the teardown finalizer, its status Active, its printable cells
              the CRD's columns print ("2/2 2/20 100/200 0/0" for two idle H100s);
  create-only an administrator's displayName stays: the controller never edits the spec;
  watch       `kubectl get instancetypes NAME -w` (the real kubectl, streaming) shows the
              accelerator cell move as a 50 % slice Pod allocates ("2/2 2/20 100/200" to
              "1/1 1/10 100/150") and back when it is deleted;
  inactive    `inactive: true` sets the ClusterQueue's stopPolicy to Hold and the phase to
              Inactive; a Pod applied meanwhile is not admitted; `inactive: false` sets both back
              and the Pod runs;
  draining    the device manager stopped and node-a's Devices object deleted: node-a is managed
              CPU-only, no node derives the H100 pool, its ClusterQueue is drained
              (HoldAndDrain) and deleted, and the InstanceType reads every view 0 with phase
              Draining, then Pending ("no managed node serves this pool"); the device manager
              restarted brings the queue and the Active status back;
  deleted     `kubectl delete instancetype`: the finalizer's teardown drains and deletes the
              queue (it comes back with a new uid), then the deletion completes; the pool's
              nodes still derive it, so the controller authors a fresh one (a new uid).
Prints TAP.
"""
import glob
import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from controlplane import ROOT, eventually  # noqa: E402
import chart  # noqa: E402
from controller_view import KQ, KQ_API, check_stopped, get  # noqa: E402
from daemons import Controller, DeviceManager, WebhookServer, register_webhooks  # noqa: E402
from kubelet import KubeletNode  # noqa: E402
from names import entrance  # noqa: E402
from tap import Tap, on_control_plane  # noqa: E402

CRDS = sorted(glob.glob(os.path.join(ROOT, "deploy", "chart", "tessera", "files", "crds", "*.yaml")))
IT_API = "/apis/worker.gpustack.ai/v1alpha1"
H100 = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"
GENERIC = "gpustack--generic-linux-amd64"
FINALIZER = "worker.gpustack.ai/instancetype-teardown"
NS = "team-a"
FAKE = "NVIDIA H100 80GB HBM3:2:00"


def it(cp, name=H100):
    return get(cp, IT_API + "/instancetypes/" + name) or {}


def status(cp, name=H100):
    return it(cp, name).get("status") or {}


def cq(cp, name=H100):
    return get(cp, KQ_API + "/clusterqueues/" + name)


def slice_pod(name):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS,
                         "labels": {KQ + "/queue-name": entrance(H100)}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "x", "resources": {"limits": {
                         "nvidia.com/gpu.sliced": "1",
                         "nvidia.com/gpu.sliced.memory-percentage": "50"}}}]}}


def pod_phase(cp, name):
    return ((get(cp, "/api/v1/namespaces/%s/pods/%s" % (NS, name)) or {}).get("status") or
            {}).get("phase")


def delete_pod(cp, name):
    cp.kubectl("delete", "pod", "-n", NS, name, "--wait=false")
    return eventually(lambda: get(cp, "/api/v1/namespaces/%s/pods/%s" % (NS, name)) is None, 60)


class Watch:
    """`kubectl get instancetypes NAME -w` running in the background; .lines its output."""

    def __init__(self, cp, name):
        self.proc = subprocess.Popen(
            [os.path.join(cp.bin, "kubectl"), "--kubeconfig", cp.kubeconfig, "get",
             "instancetypes", name, "-w"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def saw(self, text):
        return any(text in line for line in self.lines)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def case_authored(t, cp):
    t.ok(eventually(lambda: status(cp).get("phase") == "Active" and
                    status(cp, GENERIC).get("phase") == "Active", 90),
         "authored: both pools' InstanceTypes exist and read Active",
         {"h100": it(cp), "generic": it(cp, GENERIC)})
    obj = it(cp)
    spec = obj.get("spec", {})
    t.ok(spec.get("unitResources") == {"cpu": "12", "ram": "192Gi"} and
         spec.get("localStorage") == "100Gi" and
         spec.get("acceleratorGroup") == "nvidia-h100-80gb-hbm3" and
         obj["metadata"].get("labels", {}).get("schedule.gpustack.ai/queue-entrance") ==
         entrance(H100) and FINALIZER in obj["metadata"].get("finalizers", []),
         "authored: the unit preset, the entrance label and the teardown finalizer", obj)
    r = cp.kubectl("get", "instancetypes", H100, "-o", "wide")
    t.ok(r.returncode == 0 and "2/2 2/20 100/200 0/0" in r.stdout and "PARTITIONS" in r.stdout,
         "authored: kubectl's columns print the status the controller wrote", r.stdout + r.stderr)


def case_create_only(t, cp):
    cp.api("PATCH", IT_API + "/instancetypes/" + H100, {"spec": {"displayName": "H100 pool"}},
           content_type="application/merge-patch+json")
    time.sleep(3)
    t.ok(it(cp).get("spec", {}).get("displayName") == "H100 pool",
         "create-only: an administrator's displayName stays", it(cp).get("spec"))


def case_watch(t, cp):
    w = Watch(cp, H100)
    try:
        t.ok(eventually(lambda: w.saw("2/2 2/20 100/200"), 20),
             "watch: kubectl get -w prints the idle pool", w.lines)
        cp.kubectl("apply", "-f", "-", stdin=json.dumps(slice_pod("half")))
        ran = eventually(lambda: pod_phase(cp, "half") == "Running", 120)
        t.ok(ran and eventually(lambda: w.saw("1/1 1/10 100/150"), 30),
             "watch: a 50 % slice allocating moves the row to 1/1 1/10 100/150", w.lines)
        n = len(w.lines)
        delete_pod(cp, "half")
        t.ok(eventually(lambda: any("2/2 2/20 100/200" in line for line in w.lines[n:]), 30),
             "watch: deleting it moves the row back to 2/2 2/20 100/200", w.lines)
    finally:
        w.stop()


def case_inactive(t, cp):
    cp.api("PATCH", IT_API + "/instancetypes/" + H100, {"spec": {"inactive": True}},
           content_type="application/merge-patch+json")
    t.ok(eventually(lambda: (cq(cp) or {}).get("spec", {}).get("stopPolicy") == "Hold" and
                    status(cp).get("phase") == "Inactive", 30),
         "inactive: the ClusterQueue's stopPolicy is Hold and the phase Inactive",
         {"cq": (cq(cp) or {}).get("spec"), "status": status(cp).get("phase")})
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(slice_pod("held")))
    time.sleep(8)
    t.ok(pod_phase(cp, "held") == "Pending",
         "inactive: a Pod applied to the pool is not admitted", pod_phase(cp, "held"))
    cp.api("PATCH", IT_API + "/instancetypes/" + H100, {"spec": {"inactive": False}},
           content_type="application/merge-patch+json")
    t.ok(eventually(lambda: (cq(cp) or {}).get("spec", {}).get("stopPolicy") in (None, "None")
                    and status(cp).get("phase") == "Active", 30) and
         eventually(lambda: pod_phase(cp, "held") == "Running", 120),
         "inactive: false sets both back and the Pod runs",
         {"cq": (cq(cp) or {}).get("spec"), "pod": pod_phase(cp, "held")})
    delete_pod(cp, "held")


def case_draining(t, tessera, cp, node, dm):
    dm.stop()
    cp.api("DELETE", IT_API + "/devices/node-a")
    drained = eventually(lambda: status(cp).get("phase") in ("Draining", "Pending") and
                         status(cp), 60)
    t.ok(drained and (drained.get("printable") or {}).get("accelerator") == "0/0 0/0 0/0 0/0",
         "draining: with node-a CPU-only the pool's InstanceType reads every view 0 "
         "(Draining while its queue drains)", status(cp))
    t.ok(eventually(lambda: cq(cp) is None and status(cp).get("phase") == "Pending" and
                    status(cp).get("phaseMessage") == "no managed node serves this pool", 90),
         "draining: the queue is deleted; the phase reads Pending, no managed node serves it",
         {"cq": cq(cp), "status": status(cp)})
    t.ok(status(cp, GENERIC).get("phase") == "Active",
         "draining: node-a still serves the generic pool", status(cp, GENERIC))
    dm = DeviceManager(tessera, cp, node, FAKE, kubeconfig=chart.identity(cp, "device-manager"))
    dm.wait_registered(node, ["nvidia.com/gpu"])
    t.ok(eventually(lambda: cq(cp) is not None and status(cp).get("phase") == "Active" and
                    (status(cp).get("printable") or {}).get("accelerator") ==
                    "2/2 2/20 100/200 0/0", 90),
         "draining: the device manager back, the queue and the Active status return", status(cp))
    return dm


def case_deleted(t, cp, ctl):
    uid, queue_uid = it(cp)["metadata"]["uid"], cq(cp)["metadata"]["uid"]
    r = cp.kubectl("delete", "instancetype", H100, "--wait=false")
    t.ok(r.returncode == 0, "deleted: kubectl delete accepted", r.stderr)
    # The queue reserves nothing here, so the teardown may finish before a Deleting status is
    # ever written: what is checked is what it did.
    t.ok(eventually(lambda: it(cp).get("metadata", {}).get("uid") not in (None, uid), 90) and
         ctl.find('msg="InstanceType torn down" name=' + H100),
         "deleted: the finalizer's teardown ran and the deletion completed; the pool's nodes "
         "still derive it, so the controller authors a fresh one", it(cp).get("metadata"))
    t.ok(eventually(lambda: (cq(cp) or {}).get("metadata", {}).get("uid") not in
                    (None, queue_uid) and status(cp).get("phase") == "Active", 90),
         "deleted: its queue was deleted and made again (a new uid), and it reads Active",
         {"cq": (cq(cp) or {}).get("metadata"), "status": status(cp)})


def run(t, tessera, cp):
    cp.install_crds(CRDS)
    cp.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    kc = chart.identity(cp, "controller")
    wh = WebhookServer(tessera, cp, kubeconfig=chart.identity(cp, "webhook"))
    dm_kc = chart.identity(cp, "device-manager")
    node, dm, ctl, rcs = None, None, None, []
    try:
        wh.wait_ready()
        register_webhooks(cp, wh.port)
        node = KubeletNode(cp, "node-a").start()
        dm = DeviceManager(tessera, cp, node, FAKE, kubeconfig=dm_kc)
        dm.wait_registered(node, ["nvidia.com/gpu", "nvidia.com/gpu.sliced"])
        ctl = Controller(tessera, cp, "controller-a", kubeconfig=kc)
        ctl.wait_ready()
        case_authored(t, cp)
        case_create_only(t, cp)
        case_watch(t, cp)
        case_inactive(t, cp)
        dm = case_draining(t, tessera, cp, node, dm)
        case_deleted(t, cp, ctl)
        t.ok(not node.errors, "the kubelet part logged no error", node.errors)
    finally:
        if ctl and ctl.alive():
            rcs.append(ctl.stop())
        if dm:
            dm.stop()
        if node:
            node.stop()
        wh.stop()
    check_stopped(t, [ctl] if ctl else [], rcs)


def main():
    tessera = sys.argv[1]
    t = Tap()
    on_control_plane(t, "instancetype_lifecycle", lambda cp: run(t, tessera, cp))
    sys.exit(t.done())


if __name__ == "__main__":
    main()
