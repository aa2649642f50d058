#!/usr/bin/env python3
"""test_instances.py TESSERA - the Instance API on the real control plane: `tessera controller`
runs each Instance as a Pod of its own (src/controller/instance_reconciler.c over
codec/instance_pod.h) through every gate, and stops running Instances when their pool stops
admitting.

The cluster: kube-apiserver, kube-controller-manager (the garbage collector), kube-scheduler,
Kueue run with `tessera kueue-config`, tessera's CRDs and webhooks, one `tessera controller` with
only the chart's RBAC, the kubelet part (tests/cluster/kubelet.py) on node-h100 (128
CPUs, 2Ti, eight H100 80GB HBM3 under `tessera device-manager --fake`, GPUs 0 and 1 in MIG mode)
and node-cpu (4 CPUs, no GPU); a RuntimeClass nvidia.

  families  seven Instances, created with kubectl through the Instance webhook, each Ready with
            a Pod of its name owned by it (controller: true) on its pool's entrance LocalQueue:
            whole (2 GPUs, a port: the NodePort Service and status.ports), whole-ssh (1 GPU and
            the sshd sidecar), slice (50 % memory, 30 % cores), slice-ssh, part (3g.40gb),
            part-ssh (1g.10gb) and cpu (the generic pool). Each Pod asks for its family's keys
            and host limits sized from the unit preset with requests 0 where the queue covers
            nothing (cpu 800m per core on the CPU pool); the whole GPUs land on logical GPUs
            (2-7), the partitions on MIG ones (0-1). status.allocations equals the groups of
            the Pod's allocation annotation, status.nodeName and hostIPs the node's. An SSH
            sidecar is shown by the device manager exactly what `main` holds (the fake
            kubelet's record of Allocate's NVIDIA_VISIBLE_DEVICES): the same GPU for a whole
            GPU or a slice, the same MIG device (never a GPU-) for a partition.
  stop      spec.stop=true on whole: its Pod is deleted, phase Stopped; spec.stop=false: a new
            Pod (a new uid), Ready again.
  deleting  an Instance held by a finalizer of the test's and deleted reads phase Deleting and
            its Pod is deleted; cpu deleted outright: its Pod and Service go with it (the
            garbage collector, through the owner reference).
  drained   the H100 ClusterQueue set to HoldAndDrain by hand: every running H100 Instance gets
            spec.stop=true, an Event (reason Stopped) naming the queue, phase Stopped, no Pod.
            The chain puts the stop policy back (it derives the queue), which the suite notes.
  inactive  the H100 InstanceType set inactive (its queue on Hold): a new Instance gets a Pod
            that waits in Kueue (scheduling-gated, phase Starting) and is not stopped; active
            again, it runs.
  deleted   the H100 InstanceType deleted (its ClusterQueue held by a finalizer of the test's,
            so the teardown lasts): the running Instance is stopped, and an Instance
            created while the type tears down is stopped and never gets a Pod; once the
            test lets the queue go, the teardown completes, the controller authors the type
            again and the stopped Instances stay stopped.
Prints TAP.
"""
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from controlplane import ROOT, ApiError, eventually  # noqa: E402
import chart  # noqa: E402
from controller_view import KQ_API, check_stopped, condition, get  # noqa: E402
from daemons import Controller, DeviceManager, WebhookServer, register_webhooks  # noqa: E402
from kubelet import KubeletNode  # noqa: E402
from names import entrance  # noqa: E402
from tap import Tap, on_control_plane  # noqa: E402

CRDS = sorted(glob.glob(os.path.join(ROOT, "deploy", "chart", "tessera", "files", "crds", "*.yaml")))
API = "/apis/worker.gpustack.ai/v1alpha1"
NS = "default"
H100 = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"
CPU = "gpustack--generic-linux-amd64"
FAKE = "NVIDIA H100 80GB HBM3:8:11000000"
ALLOC = "device.gpustack.ai/accelerator.allocated"
LABEL = "worker.gpustack.ai/instance"
VIS = "device.gpustack.ai/nvidia.visibility"
CRD_ACCEL_FIELDS = ("id", "index", "mode", "allocated", "remaining", "allocatedSlices",
                    "allocatedProfiles", "remainingProfiles", "allocatedPhysicalProfile",
                    "allocatedPhysicalPlacements", "allocatedPhysicalID",
                    "allocatedLogicalPlacements")
WAIT = 120

# name: (type, spec.resources, extra spec)
FAMILIES = {
    "whole": (H100, {"accelerator": "2"}, {"ports": [{"port": 8080}]}),
    "whole-ssh": (H100, {"accelerator": "1"}, {"sshPublicKey": {"name": "keys"}}),
    "slice": (H100, {"accelerator": "1", "acceleratorSlicedMemoryPercentage": 50,
                     "acceleratorSlicedCoresPercentage": 30}, {}),
    "slice-ssh": (H100, {"accelerator": "1", "acceleratorSlicedMemoryPercentage": 25},
                  {"sshPublicKey": {"name": "keys"}}),
    "part": (H100, {"accelerator": "1", "acceleratorPartitionedProfile": "3g.40gb"}, {}),
    "part-ssh": (H100, {"accelerator": "1", "acceleratorPartitionedProfile": "1g.10gb"},
                 {"sshPublicKey": {"name": "keys"}}),
    "cpu": (CPU, {"cpu": "1"}, {}),
}
# The Pod's accelerator keys (limits = requests) and host limits per family, from the unit preset
# (H100: 12 cores, 192Gi per GPU; generic: 1 core, 2Gi) as the Instance webhook sizes it.
WANT_LIMITS = {
    "whole": {"nvidia.com/gpu": "2", "cpu": "24", "memory": "384Gi"},
    "whole-ssh": {"nvidia.com/gpu": "1", "cpu": "12", "memory": "192Gi"},
    "slice": {"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-percentage": "50",
              "nvidia.com/gpu.sliced.cores-percentage": "30", "cpu": "6", "memory": "96Gi"},
    "part": {"nvidia.com/gpu.partitioned": "1", "nvidia.com/gpu.partitioned.mig-3g.40gb": "1"},
    "part-ssh": {"nvidia.com/gpu.partitioned": "1",
                 "nvidia.com/gpu.partitioned.mig-1g.10gb": "1"},
    "cpu": {"cpu": "1", "memory": "2Gi"},
}


def instance(name, type_, resources, extra=None):
    spec = {"type": type_, "image": "ubuntu:24.04", "command": ["sleep", "86400"],
            "resources": dict(resources), "volume": {"ephemeral": {"capacity": "1Gi"}}}
    spec.update(extra or {})
    return {"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Instance",
            "metadata": {"name": name, "namespace": NS}, "spec": spec}


def inst(cp, name):
    return get(cp, "%s/namespaces/%s/instances/%s" % (API, NS, name)) or {}


def phase(cp, name):
    return (inst(cp, name).get("status") or {}).get("phase")


def pod(cp, name):
    return get(cp, "/api/v1/namespaces/%s/pods/%s" % (NS, name)) or {}


def service(cp, name):
    return get(cp, "/api/v1/namespaces/%s/services/%s" % (NS, name)) or {}


def create(t, cp, name):
    type_, res, extra = FAMILIES[name]
    r = cp.kubectl("apply", "-f", "-", stdin=json.dumps(instance(name, type_, res, extra)))
    return t.ok(r.returncode == 0 and "instance.worker.gpustack.ai/%s created" % name in r.stdout,
                "%s created with kubectl through the Instance webhooks" % name,
                r.stdout + r.stderr)


def patch_instance(cp, name, spec):
    return cp.merge_patch("%s/namespaces/%s/instances/%s" % (API, NS, name), {"spec": spec})


def merged_groups(p):
    """The annotation's groups merged by id in container order, CRD fields only (what
    status.allocations must equal)."""
    ann = json.loads(((p.get("metadata") or {}).get("annotations") or {}).get(ALLOC) or "{}")
    out = []
    for c in ann.values():
        for g in c.get("devices", {}).get("groups", []):
            mine = next((x for x in out if x["id"] == g["id"]), None)
            if mine is None:
                mine = {"id": g["id"], "manufacturer": g["manufacturer"], "accelerators": []}
                out.append(mine)
            for a in g.get("accelerators", []):
                if not any(x["id"] == a["id"] for x in mine["accelerators"]):
                    mine["accelerators"].append({k: v for k, v in a.items()
                                                 if k in CRD_ACCEL_FIELDS})
    return out


def why(cp, name):
    p = pod(cp, name)
    return {"instance": inst(cp, name).get("status"), "pod": {
        "labels": p.get("metadata", {}).get("labels"), "status": p.get("status"),
        "gates": p.get("spec", {}).get("schedulingGates")}}


def events_of(cp, name, reason):
    items = cp.api("GET", "/api/v1/namespaces/%s/events?fieldSelector=involvedObject.name=%s" %
                   (NS, name))["items"]
    return [e for e in items if e.get("reason") == reason and
            e.get("involvedObject", {}).get("kind") == "Instance"]


def device_env(reply):
    return ((reply or {}).get("response") or {}).get("envs", {}).get("NVIDIA_VISIBLE_DEVICES", "")


# ---- the checks --------------------------------------------------------------------------------

def check_family(t, cp, h100, name, its):
    type_, res, extra = FAMILIES[name]
    i, p = inst(cp, name), pod(cp, name)
    meta, st = p.get("metadata", {}), i.get("status") or {}
    refs = meta.get("ownerReferences", [])
    t.ok(len(refs) == 1 and refs[0].get("kind") == "Instance" and refs[0].get("controller") and
         refs[0].get("uid") == i["metadata"]["uid"] and
         meta.get("labels", {}).get("kueue.x-k8s.io/queue-name") ==
         its[type_]["status"]["entrance"] == entrance(type_) and
         meta.get("labels", {}).get(LABEL) == i["metadata"]["uid"],
         "%s: its Pod is owned by it (controller) and queued on the %s entrance" % (name, type_),
         {"refs": refs, "labels": meta.get("labels")})
    main = p["spec"]["containers"][0]
    lim, req = main["resources"].get("limits", {}), main["resources"].get("requests", {})
    want = WANT_LIMITS.get(name)
    if want:
        got = {k: lim.get(k) for k in want}
        t.ok(got == want, "%s: main's limits hold the family's keys and the sized host limits"
             % name, {"want": want, "limits": lim})
    accel = {k: v for k, v in lim.items() if "/" in k}
    t.ok(all(req.get(k) == v for k, v in accel.items() if not k.endswith(".units")) and
         req.get("memory") == "0" and
         req.get("cpu") == ("800m" if type_ == CPU else "0"),
         "%s: accelerator requests equal the limits; host requests are 0 where the queue covers "
         "nothing (cpu %s)" % (name, "800m per core" if type_ == CPU else "0"), main["resources"])
    t.ok(st.get("phase") == "Ready" and "phaseMessage" not in st,
         "%s: Ready with no phaseMessage (its live Pod still holds all the controller builds, "
         "after every webhook and Kueue have changed it)" % name, st)
    ssh = "sshPublicKey" in extra
    names = [c["name"] for c in p["spec"]["containers"]]
    t.ok(names == (["main", "sshd"] if ssh else ["main"]) and
         bool(p["spec"].get("shareProcessNamespace")) == ssh,
         "%s: containers %s, shareProcessNamespace %s" % (name, names, ssh), p["spec"])
    t.ok(st.get("nodeName") == p["spec"].get("nodeName") and
         st.get("nodeName") in (("node-h100",) if type_ == H100 else ("node-h100", "node-cpu")) and
         st.get("hostIPs") == [{"ip": "127.0.0.1"}] and st.get("podIPs") == [{"ip": "10.1.0.1"}],
         "%s: status.nodeName, hostIPs and podIPs are the Pod's node's and the Pod's" % name, st)
    if type_ == CPU:
        t.ok(not st.get("allocations") and not accel,
             "%s: no accelerator asked for, none allocated" % name, st)
        return
    groups = merged_groups(p)
    t.ok(groups and st.get("allocations") == groups,
         "%s: status.allocations equals the groups of the Pod's allocation annotation" % name,
         {"status": st.get("allocations"), "annotation": groups})
    accels = [a for g in groups for a in g["accelerators"]]
    if "acceleratorPartitionedProfile" in res:
        ok_place = len(accels) == 1 and accels[0]["index"] in (0, 1) and \
            accels[0].get("allocatedPhysicalProfile") == res["acceleratorPartitionedProfile"] and \
            accels[0].get("allocatedPhysicalID", "").startswith("MIG-")
    else:
        n = int(res.get("accelerator", "1"))
        ok_place = len(accels) == n and all(a["index"] >= 2 for a in accels)
    t.ok(ok_place, "%s: placed on %s" % (name, "a MIG GPU (0-1), its instance recorded"
                                         if "acceleratorPartitionedProfile" in res
                                         else "logical GPUs (2-7)"), accels)
    if ssh:
        rec = h100.admission(NS, name) or {}
        by = {}
        for a in rec.get("allocations", []):
            by.setdefault(a.get("container"), []).append(a)
        mains = [a for a in by.get("main", []) if a.get("ok") and device_env(a)]
        sshd = [a for a in by.get("sshd", []) if a.get("resource") == VIS]
        main_env = device_env(mains[0]) if mains else None
        part = "acceleratorPartitionedProfile" in res
        t.ok(len(mains) == 1 and len(sshd) == 1 and sshd[0].get("ok") and
             device_env(sshd[0]) == main_env and
             (main_env.startswith("MIG-") and "GPU-" not in device_env(sshd[0]) if part
              else main_env.startswith("GPU-")),
             "%s: the sshd sidecar is shown exactly main's device (%s)" %
             (name, "its MIG device, not the GPU" if part else "the same GPU"),
             {"main": mains, "sshd": sshd})


def check_port(t, cp):
    svc, st = service(cp, "whole"), inst(cp, "whole").get("status") or {}
    ports = svc.get("spec", {}).get("ports", [])
    t.ok(svc.get("spec", {}).get("type") == "NodePort" and
         svc["spec"].get("selector") == {LABEL: inst(cp, "whole")["metadata"]["uid"]} and
         len(ports) == 1 and ports[0].get("port") == 8080 and ports[0].get("nodePort") and
         st.get("ports") == [{"port": 8080, "protocol": "TCP",
                              "nodePort": ports[0].get("nodePort")}],
         "whole: a NodePort Service selects its Pod; status.ports carries the node port",
         {"service": svc.get("spec"), "status.ports": st.get("ports")})
    t.ok(not service(cp, "slice"), "slice (no ports) has no Service", service(cp, "slice"))


def wait_stopped(cp, name):
    return eventually(lambda: phase(cp, name) == "Stopped" and not pod(cp, name), WAIT)


def case_stop_start(t, cp):
    uid = pod(cp, "whole")["metadata"]["uid"]
    patch_instance(cp, "whole", {"stop": True})
    t.ok(wait_stopped(cp, "whole") and inst(cp, "whole")["status"] == {"phase": "Stopped"},
         "whole: spec.stop=true deletes its Pod, status {phase: Stopped}", why(cp, "whole"))
    patch_instance(cp, "whole", {"stop": False})
    t.ok(eventually(lambda: phase(cp, "whole") == "Ready" and
                    pod(cp, "whole")["metadata"]["uid"] != uid, WAIT),
         "whole: spec.stop=false makes a new Pod, Ready again", why(cp, "whole"))


def case_deleting(t, cp):
    obj = instance("held-del", H100, {"accelerator": "1"})
    obj["metadata"]["finalizers"] = ["tests.tessera/hold"]
    cp.create(obj)
    t.ok(eventually(lambda: phase(cp, "held-del") == "Ready", WAIT),
         "held-del (a finalizer of the test's) Ready", why(cp, "held-del"))
    cp.api("DELETE", "%s/namespaces/%s/instances/held-del" % (API, NS))
    t.ok(eventually(lambda: phase(cp, "held-del") == "Deleting" and not pod(cp, "held-del"),
                    WAIT),
         "held-del deleted: phase Deleting, its Pod deleted", why(cp, "held-del"))
    cp.api("PATCH", "%s/namespaces/%s/instances/held-del" % (API, NS),
           [{"op": "remove", "path": "/metadata/finalizers"}],
           content_type="application/json-patch+json")
    t.ok(eventually(lambda: not inst(cp, "held-del"), 30), "the finalizer removed, it is gone")
    r = cp.kubectl("delete", "instance", "cpu", "--wait=false")
    t.ok(r.returncode == 0 and eventually(lambda: not pod(cp, "cpu") and not inst(cp, "cpu"), 60),
         "cpu deleted with kubectl: its Pod goes with it (the garbage collector)",
         r.stdout + r.stderr + json.dumps(why(cp, "cpu")))
    svc_owner = instance("svc-del", CPU, {"cpu": "1"}, {"ports": [{"port": 22}]})
    cp.create(svc_owner)
    has = eventually(lambda: service(cp, "svc-del") and pod(cp, "svc-del"), WAIT)
    cp.kubectl("delete", "instance", "svc-del", "--wait=false")
    t.ok(has and eventually(lambda: not service(cp, "svc-del") and not pod(cp, "svc-del"), 60),
         "svc-del (a port) deleted: its Service and Pod go with it",
         {"service": service(cp, "svc-del"), "pod": pod(cp, "svc-del").get("metadata")})


def h100_running(cp):
    items = cp.api("GET", "%s/namespaces/%s/instances" % (API, NS))["items"]
    return [i["metadata"]["name"] for i in items if i["spec"]["type"] == H100 and
            not i["spec"].get("stop")]


def case_drained(t, cp, ctl):
    running = h100_running(cp)
    t.ok(running and all(phase(cp, n) == "Ready" for n in running),
         "before: %d H100 Instances Ready" % len(running), {n: phase(cp, n) for n in running})
    cq_path = KQ_API + "/clusterqueues/" + H100
    cp.merge_patch(cq_path, {"spec": {"stopPolicy": "HoldAndDrain"}})
    stopped = eventually(lambda: all(inst(cp, n)["spec"].get("stop") for n in running) and
                         all(wait_stopped(cp, n) for n in running), WAIT)
    t.ok(stopped, "the H100 ClusterQueue set to HoldAndDrain by hand: every running H100 "
         "Instance gets spec.stop=true, phase Stopped, no Pod",
         {n: why(cp, n) for n in running})
    evs = {n: events_of(cp, n, "Stopped") for n in running}
    t.ok(all(any("HoldAndDrain" in e.get("message", "") and H100 in e.get("message", "")
                 for e in evs[n]) for n in running),
         "each got an Event (reason Stopped) naming its ClusterQueue and HoldAndDrain",
         {n: [e.get("message") for e in evs[n]] for n in running})
    back = eventually(lambda: (get(cp, cq_path) or {}).get("spec", {}).get("stopPolicy") ==
                      "None", 30)
    t.ok(back, "the chain puts the derived stop policy (None) back on the queue it derives",
         (get(cp, cq_path) or {}).get("spec"))
    t.ok(inst(cp, "cpu-2").get("status", {}).get("phase") == "Ready" and
         not inst(cp, "cpu-2")["spec"].get("stop"),
         "the CPU pool's Instance is untouched", why(cp, "cpu-2"))
    return running


def case_inactive(t, cp):
    it_path = API + "/instancetypes/" + H100
    cq_path = KQ_API + "/clusterqueues/" + H100
    cp.merge_patch(it_path, {"spec": {"inactive": True}})
    t.ok(eventually(lambda: (get(cp, cq_path) or {}).get("spec", {}).get("stopPolicy") == "Hold",
                    30), "the H100 InstanceType inactive: its ClusterQueue is on Hold",
         (get(cp, cq_path) or {}).get("spec"))
    cp.create(instance("waits", H100, {"accelerator": "1"}))
    gated = eventually(lambda: pod(cp, "waits").get("spec", {}).get("schedulingGates") and
                       phase(cp, "waits") == "Starting", 60)
    time.sleep(8)
    p, i = pod(cp, "waits"), inst(cp, "waits")
    t.ok(gated and p.get("spec", {}).get("schedulingGates") and
         p.get("status", {}).get("phase") == "Pending" and not i["spec"].get("stop") and
         i["status"].get("phase") == "Starting" and
         "waiting for admission by Kueue" in i["status"].get("phaseMessage", ""),
         "a new Instance of the inactive type gets a Pod that waits in Kueue (gated, Starting, "
         "not stopped) 8 s on", why(cp, "waits"))
    cp.merge_patch(it_path, {"spec": {"inactive": False}})
    t.ok(eventually(lambda: phase(cp, "waits") == "Ready", WAIT),
         "active again: it runs", why(cp, "waits"))


HOLD = "tests.tessera/hold"


def case_deleted(t, cp, ctl):
    it_path = API + "/instancetypes/" + H100
    cq_path = KQ_API + "/clusterqueues/" + H100
    uid = (get(cp, it_path) or {}).get("metadata", {}).get("uid")
    # The teardown ends once the type's ClusterQueue is gone: a finalizer of the test's holds
    # the queue, so "late" below is created while the type still tears down, however fast the
    # controller drains (a CI run once saw it finish in 1.2 s, before the create).
    cp.api("PATCH", cq_path, [{"op": "add", "path": "/metadata/finalizers/-", "value": HOLD}],
           content_type="application/json-patch+json")
    r = cp.kubectl("delete", "instancetype", H100, "--wait=false")
    t.ok(r.returncode == 0 and eventually(
        lambda: (get(cp, it_path) or {}).get("metadata", {}).get("deletionTimestamp"), 10),
         "the H100 InstanceType deleted with kubectl: it tears down (finalizer)", r.stdout + r.stderr)
    late_ok = True
    try:
        cp.create(instance("late", H100, {"accelerator": "1"}))
    except ApiError as e:
        late_ok = False
        t.ok(False, "an Instance created while the type tears down is admitted by the webhook",
             str(e))
    t.ok(eventually(lambda: inst(cp, "waits")["spec"].get("stop") and wait_stopped(cp, "waits"),
                    WAIT),
         "its running Instance (waits) gets spec.stop=true and stops", why(cp, "waits"))
    msgs = [e.get("message", "") for e in events_of(cp, "waits", "Stopped")]
    t.ok(any(H100 in m and ("being deleted" in m or "HoldAndDrain" in m) for m in msgs),
         "its Event says why (the type being deleted, or its queue draining)", msgs)
    if late_ok:
        stopped = eventually(lambda: inst(cp, "late")["spec"].get("stop") and
                             phase(cp, "late") == "Stopped", WAIT)
        created = ctl.find('msg="Instance Pod created" namespace=default name=late ')
        t.ok(stopped and not pod(cp, "late") and not created,
             "an Instance created while its type tears down is stopped, never given a Pod",
             {"late": why(cp, "late"), "log": created})
        msgs = [e.get("message", "") for e in events_of(cp, "late", "Stopped")]
        t.ok(any(H100 in m for m in msgs), "late's Event names its type or queue", msgs)
    held = get(cp, it_path) or {}
    t.ok(held.get("metadata", {}).get("uid") == uid and
         held["metadata"].get("deletionTimestamp"),
         "while its ClusterQueue is held, the type still tears down (same uid)",
         held.get("metadata"))
    cq = get(cp, cq_path) or {"metadata": {}}
    cp.api("PATCH", cq_path, [{"op": "remove", "path": "/metadata/finalizers/%d" %
                               cq["metadata"].get("finalizers", []).index(HOLD)}],
           content_type="application/json-patch+json")
    again = eventually(lambda: (get(cp, it_path) or {}).get("metadata", {}).get("uid")
                       not in (None, uid), 90)
    t.ok(again, "the teardown completes and the controller authors the InstanceType again",
         get(cp, it_path))
    time.sleep(3)
    t.ok(all(inst(cp, n)["spec"].get("stop") and phase(cp, n) == "Stopped" and not pod(cp, n)
             for n in ("waits", "late") if inst(cp, n)),
         "the stopped Instances stay stopped", {n: why(cp, n) for n in ("waits", "late")})


# ---- the suite -------------------------------------------------------------------------------

def run(t, tessera, cp):
    cp.install_crds(CRDS)
    cp.ensure({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
               "metadata": {"name": "nvidia"}, "handler": "nvidia"})
    kc = chart.identity(cp, "controller")
    wh = WebhookServer(tessera, cp, kubeconfig=chart.identity(cp, "webhook"))
    nodes, dm, ctl, rcs = [], None, None, []
    try:
        wh.wait_ready()
        register_webhooks(cp, wh.port)
        nodes = [KubeletNode(cp, "node-h100", capacity={"cpu": "128", "memory": "2Ti"}).start(),
                 KubeletNode(cp, "node-cpu", capacity={"cpu": "4", "memory": "16Gi"}).start()]
        h100 = nodes[0]
        dm = DeviceManager(tessera, cp, h100, FAKE,
                           kubeconfig=chart.identity(cp, "device-manager"))
        dm.wait_registered(h100, ["nvidia.com/gpu", "nvidia.com/gpu.sliced",
                                  "nvidia.com/gpu.partitioned", VIS])
        ctl = Controller(tessera, cp, "controller-a", kubeconfig=kc)
        ctl.wait_ready()
        its = {}

        def pools_ready():
            for name in (H100, CPU):
                it = get(cp, API + "/instancetypes/" + name) or {}
                cq = get(cp, KQ_API + "/clusterqueues/" + name) or {}
                lq = get(cp, "%s/namespaces/%s/localqueues/%s" % (KQ_API, NS, entrance(name)))
                det = (it.get("status") or {}).get("detail") or {}
                if not ((it.get("status") or {}).get("entrance") and lq and
                        (condition(cq, "Active") or {}).get("status") == "True" and
                        (name == CPU or det.get("slicedDetail", {}).get("physical", {}).get(
                            "profiles"))):
                    return False
                its[name] = it
            return True
        t.ok(eventually(pools_ready, 90),
             "the controller derives both pools: InstanceTypes with status, queues Active, "
             "entrances in default", {n: get(cp, API + "/instancetypes/" + n) for n in (H100, CPU)})

        t0 = time.monotonic()
        created = [n for n in FAMILIES if create(t, cp, n)]
        ready = eventually(lambda: all(phase(cp, n) == "Ready" for n in created), 240)
        t.note("%d Instances Ready in %.1f s" % (len(created), time.monotonic() - t0))
        t.ok(ready and len(created) == len(FAMILIES), "every family's Instance is Ready",
             {n: why(cp, n) for n in created if phase(cp, n) != "Ready"})
        for n in created:
            if phase(cp, n) == "Ready":
                check_family(t, cp, h100, n, its)
        check_port(t, cp)

        case_stop_start(t, cp)
        case_deleting(t, cp)
        cp.create(instance("cpu-2", CPU, {"cpu": "1"}))
        t.ok(eventually(lambda: phase(cp, "cpu-2") == "Ready", WAIT), "cpu-2 Ready",
             why(cp, "cpu-2"))
        case_drained(t, cp, ctl)
        case_inactive(t, cp)
        case_deleted(t, cp, ctl)
        t.ok(not any(n.errors for n in nodes), "the kubelet parts logged no error",
             [e for n in nodes for e in n.errors])
    finally:
        if ctl and ctl.alive():
            rcs.append(ctl.stop())
        if dm:
            dm.stop()
        for n in nodes:
            n.stop()
        wh.stop()
    if ctl:
        check_stopped(t, [ctl], rcs, last=120)
    if t.failed() and dm:
        t.note("---- device manager ----\n%s" % dm.log(30))


def main():
    tessera = sys.argv[1]
    t = Tap()
    on_control_plane(t, "instances", lambda cp: run(t, tessera, cp))
    sys.exit(t.done())


if __name__ == "__main__":
    main()
