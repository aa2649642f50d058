#!/usr/bin/env python3
"""test_admission.py TESSERA - the admission seed's gate-2/3 cases end to end on the real control
plane, every gate in the loop: Pods created with the real kubectl pass `tessera webhook` (the
fold, the card-count pin, the Workload fit pin) and Kueue's webhooks; Kueue (run with
`tessera kueue-config`) reserves credits and places by TAS; two `tessera controller` replicas
(the Deployment's RBAC only) derive the chain and answer the gpustack-node-devices check;
kube-scheduler binds; the kubelet part (tests/cluster/kubelet.py) allocates through
`tessera device-manager --fake`, which records each grant and publishes the ledger, the counting
keys and the fit labels.

Two nodes, two pools: node-a, eight H100s (12.8M credits), and node-m, two A100 80GB with MIG on.
The controller authors both pools' InstanceTypes and writes their status (the fold's divisor
and the offered profiles the webhook reads).

The cases, each as the simulator's goldens show it (examples/admission-*.yaml):
  credits       eight 50 % slices pack GPUs 0-3 two to a card and leave 4-7 whole; a five-GPU
                request waits on credits (Kueue's "insufficient unused quota" message, 1600k more
                needed) and a four-GPU one runs on GPUs 4-7 (admission-credits);
  exclusive     eight 60 % slices take a GPU each; a three-GPU exclusive request is held while no
                GPU is whole, and runs on the three GPUs that free when three slices are deleted;
  pinned        with every GPU busy, a 60 % slice pinned by the Workload webhook
                (sliced-max-free-units Gt 959999) waits on "excluded: affinity" holding no quota,
                and runs on the GPU a deleted slice frees (admission-slice-pairs);
  inflight      one GPU whole and one at 640000 free units: two 60 % slices applied together fit
                TAS's totals and the pin, so Kueue reserves both; the check judges the second with
                the first counted as inflight and holds it (Retry), so exactly one runs and no Pod
                is refused by Allocate;
  leader        the leader is killed right after six Pods are applied: the standby takes the Lease
                and every one of them gets its verdict and runs, none twice on one GPU;
  pairs         two 30 % slices applied together share one GPU, two 60 % slices do not
                (admission-slice-pairs);
  partition     a 3g.40gb Pod on the MIG pool is folded, admitted, answered Ready, and carved by
                the device manager: the allocation record names the instance it placed.
The unpinned Retry loop (re-placed every 30 s until capacity frees) is test_controller.py's.
Prints TAP.
"""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from controlplane import ROOT, eventually  # noqa: E402
import chart  # noqa: E402
from controller_view import (KQ, KQ_API, check_state, check_stopped, condition, get,  # noqa: E402
                             holder, lease)
from controller_view import workload_of as view_workload_of  # noqa: E402
from daemons import Controller, DeviceManager, WebhookServer, register_webhooks  # noqa: E402
from kubelet import KubeletNode  # noqa: E402
from names import entrance  # noqa: E402
from tap import Tap, on_control_plane  # noqa: E402

CRDS = sorted(glob.glob(os.path.join(ROOT, "deploy", "chart", "tessera", "files", "crds", "*.yaml")))
IT_API = "/apis/worker.gpustack.ai/v1alpha1"
NS = "team-a"
ALLOC = "device.gpustack.ai/accelerator.allocated"
H100 = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"
A100 = "gpustack--nvidia-a100-sxm4-80gb-linux-amd64"
MODE_EXCLUSIVE, MODE_SLICED, MODE_PARTITIONED = 1, 3, 4


def ctr(limits):
    return {"name": "main", "image": "vllm/vllm-openai:v0.8.5", "resources": {"limits": limits}}


def slice_of(percent):
    return {"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-percentage": str(percent)}


def whole(n):
    return {"nvidia.com/gpu": str(n)}


def pod_doc(name, limits, pool=H100):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS,
                         "labels": {KQ + "/queue-name": entrance(pool)}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "containers": [ctr(limits)]}}


def apply(cp, *docs):
    """kubectl apply of docs in one stream, as a user pastes a manifest; the CompletedProcess."""
    return cp.kubectl("apply", "-f", "-", stdin="\n---\n".join(json.dumps(d) for d in docs))


def get_pod(cp, name):
    return get(cp, "/api/v1/namespaces/%s/pods/%s" % (NS, name)) or {}


def phase(cp, name):
    return (get_pod(cp, name).get("status") or {}).get("phase")


def running(cp, names):
    return all(phase(cp, n) == "Running" for n in names)


def workload_of(cp, name):
    return view_workload_of(cp, NS, name)


def grants(cp, name):
    """[(index, mode, allocated)] of the Pod's allocation record, or None before it has one."""
    ann = (get_pod(cp, name).get("metadata") or {}).get("annotations", {}).get(ALLOC)
    if not ann:
        return None
    out = []
    for ctr_rec in json.loads(ann).values():
        for group in ctr_rec.get("devices", {}).get("groups", []):
            for acc in group.get("accelerators", []):
                out.append((acc.get("index"), acc.get("mode"), acc.get("allocated")))
    return out


def indexes(cp, name):
    return sorted(g[0] for g in grants(cp, name) or [])


def ledger(cp, node):
    """{index: (mode, remaining, allocatedSlices)} from the node's Devices object."""
    dev = get(cp, IT_API + "/devices/" + node) or {}
    out = {}
    for group in (dev.get("status") or {}).get("groups", []):
        for acc in group.get("accelerators", []):
            out[acc["index"]] = (acc.get("mode", 0), acc.get("remaining"),
                                 acc.get("allocatedSlices", 0))
    return out


def delete_pods(cp, names, timeout=120):
    for n in names:
        try:
            cp.api("DELETE", "/api/v1/namespaces/%s/pods/%s" % (NS, n))
        except Exception:  # noqa: BLE001 - gone already
            pass
    return eventually(lambda: not any(get(cp, "/api/v1/namespaces/%s/pods/%s" % (NS, n))
                                      for n in names), timeout)


def settle(cp, timeout=120):
    """Waits until team-a holds no Pod and no Workload reserves quota: the next case starts from
    an empty pool."""
    def empty():
        pods = cp.api("GET", "/api/v1/namespaces/%s/pods" % NS)["items"]
        wls = cp.api("GET", "%s/namespaces/%s/workloads" % (KQ_API, NS))["items"]
        return not pods and not any((condition(w, "QuotaReserved") or {}).get("status") == "True"
                                    for w in wls)
    return eventually(empty, timeout)


def failures(cp):
    """Pods the kubelet part failed (Allocate refused them), by name."""
    return [p["metadata"]["name"] for p in cp.api(
        "GET", "/api/v1/namespaces/%s/pods" % NS)["items"]
        if (p.get("status") or {}).get("phase") == "Failed"]


def case_credits(t, cp):
    halves = ["half-%d" % i for i in range(1, 9)]
    r = apply(cp, *[pod_doc(n, slice_of(50)) for n in halves])
    t.ok(r.returncode == 0, "credits: eight 50 % slices applied through the webhooks", r.stderr)
    ran = eventually(lambda: running(cp, halves), 180)
    t.ok(ran, "credits: all eight run", {n: phase(cp, n) for n in halves})
    want = {i: (MODE_SLICED, 0, 2) for i in range(4)}
    want.update({i: (0, 1600000, 0) for i in range(4, 8)})
    t.ok(eventually(lambda: ledger(cp, "node-a") == want, 30),
         "credits: the ledger packs them two to a GPU on 0-3 and leaves 4-7 whole, as the "
         "simulator's golden shows", ledger(cp, "node-a"))
    apply(cp, pod_doc("train-5", whole(5)))
    msg = eventually(lambda: (condition(workload_of(cp, "train-5"), "QuotaReserved") or {}).get(
        "message", "") if "insufficient unused quota" in (condition(workload_of(
            cp, "train-5"), "QuotaReserved") or {}).get("message", "") else None, 60)
    t.ok(msg and "credits.gpustack.ai/nvidia" in msg and "1600k more needed" in msg,
         "credits: a five-GPU request waits on credits, 1600k more needed", msg or
         workload_of(cp, "train-5"))
    apply(cp, pod_doc("train-4", whole(4)))
    ran = eventually(lambda: running(cp, ["train-4"]), 120)
    t.ok(ran and indexes(cp, "train-4") == [4, 5, 6, 7] and
         all(g[1] == MODE_EXCLUSIVE for g in grants(cp, "train-4")),
         "credits: a four-GPU request runs on GPUs 4-7", grants(cp, "train-4"))
    t.ok(phase(cp, "train-5") == "Pending" and
         (check_state(workload_of(cp, "train-5")) or {}).get("state") != "Ready",
         "credits: the five-GPU request still waits", workload_of(cp, "train-5"))
    t.ok(not failures(cp), "credits: Allocate refused nothing", failures(cp))
    t.ok(delete_pods(cp, halves + ["train-4", "train-5"]) and settle(cp),
         "credits: everything deleted and released")


def case_exclusive_and_pinned(t, cp):
    slices = ["s%d" % i for i in range(1, 9)]
    apply(cp, *[pod_doc(n, slice_of(60)) for n in slices])
    ran = eventually(lambda: running(cp, slices), 180)
    spread = sorted(i for n in slices for i in indexes(cp, n))
    t.ok(ran and spread == list(range(8)),
         "exclusive: eight 60 % slices run, one per GPU (two never share)",
         {n: grants(cp, n) for n in slices})
    apply(cp, pod_doc("ex-3", whole(3)))
    held = not eventually(lambda: running(cp, ["ex-3"]), 20)
    msg = (condition(workload_of(cp, "ex-3"), "QuotaReserved") or {}).get("message") or ""
    t.ok(held and not grants(cp, "ex-3") and 'excluded: resource "nvidia.com/gpu"' in msg,
         "exclusive: a three-GPU request is held while no GPU is whole: TAS finds no node with "
         "three free GPUs, as the simulator's admission-exclusive-held golden says",
         {"pod": phase(cp, "ex-3"), "workload": (workload_of(cp, "ex-3") or {}).get("status")})
    t.note("exclusive: the held Workload reads: %s" % json.dumps(
        [(c.get("type"), c.get("status"), c.get("message")) for c in
         ((workload_of(cp, "ex-3") or {}).get("status") or {}).get("conditions", [])] +
        [check_state(workload_of(cp, "ex-3"))]))
    freed = sorted(i for n in slices[:3] for i in indexes(cp, n))
    delete_pods(cp, slices[:3])
    ran = eventually(lambda: running(cp, ["ex-3"]), 180)
    t.ok(ran and indexes(cp, "ex-3") == freed and
         all(g[1] == MODE_EXCLUSIVE for g in grants(cp, "ex-3")),
         "exclusive: it runs on the three GPUs the deleted slices freed",
         {"freed": freed, "ex-3": grants(cp, "ex-3"), "phase": phase(cp, "ex-3")})

    # Every GPU busy: five 60 % slices and the exclusive three. A ninth slice fits the credits
    # (9.6M + 960k of 12.8M) but the node's fit label reads 640000.
    fit = "sliced-max-free-units.fit.gpustack.ai/nvidia-h100-80gb-hbm3"
    t.ok(eventually(lambda: (get(cp, "/api/v1/nodes/node-a")["metadata"]["labels"].get(fit) ==
                             "640000"), 30),
         "pinned: node-a's fit label follows the ledger (640000 free units at most)",
         get(cp, "/api/v1/nodes/node-a")["metadata"]["labels"])
    apply(cp, pod_doc("s9", slice_of(60)))
    w = eventually(lambda: workload_of(cp, "s9"), 30)
    terms = (((w or {}).get("spec", {}).get("podSets", [{}])[0].get("template", {}).get(
        "spec", {}).get("affinity") or {}).get("nodeAffinity", {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", []))
    t.ok(terms and {"key": fit, "operator": "Gt", "values": ["959999"]} in
         terms[0].get("matchExpressions", []),
         "pinned: the Workload webhook pins the slice to sliced-max-free-units Gt 959999", w)
    msg = eventually(lambda: (condition(workload_of(cp, "s9"), "QuotaReserved") or {}).get(
        "message") if "excluded: affinity" in ((condition(workload_of(cp, "s9"),
                                                          "QuotaReserved") or {}).get(
            "message") or "") else None, 60)
    t.ok(msg and (condition(workload_of(cp, "s9"), "QuotaReserved") or {}).get("status") ==
         "False" and (check_state(workload_of(cp, "s9")) or {}).get("state") != "Retry",
         "pinned: TAS skips the fragmented node: pending on excluded: affinity, no quota held, "
         "no Retry", msg or workload_of(cp, "s9"))
    t.note("pinned: Kueue says: %s" % msg)
    gone = indexes(cp, "s4")
    delete_pods(cp, ["s4"])
    ran = eventually(lambda: running(cp, ["s9"]), 180)
    t.ok(ran and indexes(cp, "s9") == gone,
         "pinned: it runs on the GPU a deleted slice frees", {"freed": gone,
                                                              "s9": grants(cp, "s9")})
    t.ok(not failures(cp), "exclusive, pinned: Allocate refused nothing", failures(cp))
    t.ok(delete_pods(cp, slices[3:] + ["ex-3", "s9"]) and settle(cp),
         "exclusive, pinned: everything deleted and released")


def case_inflight(t, cp):
    apply(cp, pod_doc("ex-6", whole(6)), pod_doc("base", slice_of(60)))
    t.ok(eventually(lambda: running(cp, ["ex-6", "base"]), 180),
         "inflight: six whole GPUs and one 60 % slice run", {n: grants(cp, n) for n in
                                                             ("ex-6", "base")})
    # GPU free: one whole (1.6M), one at 640000. Two 60 % slices together: TAS's credits
    # (2.24M free on the node) and the pin (1.6M free on one card) let both through.
    apply(cp, pod_doc("d1", slice_of(60)), pod_doc("d2", slice_of(60)))

    def settled():
        states = {n: (check_state(workload_of(cp, n)) or {}).get("state") for n in ("d1", "d2")}
        return states if running(cp, ["d1"]) ^ running(cp, ["d2"]) else None
    one = eventually(settled, 180)
    winner = "d1" if one and running(cp, ["d1"]) else "d2"
    loser = "d2" if winner == "d1" else "d1"
    stay = not eventually(lambda: running(cp, [loser]) or phase(cp, loser) == "Failed", 40)
    lw = workload_of(cp, loser)
    retried = (check_state(lw) or {}).get("retryCount", 0) >= 1 or \
        (check_state(lw) or {}).get("state") == "Retry" or \
        "excluded: affinity" in ((condition(lw, "QuotaReserved") or {}).get("message") or "")
    t.ok(one and stay and retried,
         "inflight: exactly one of two slices judged in one window runs; the other is held "
         "(Retry, or excluded by the refreshed pin), never sent to Allocate",
         {"winner": winner, "loser": (lw or {}).get("status"), "phases": {
             n: phase(cp, n) for n in ("d1", "d2")}})
    t.note("inflight: the held slice's check: %s" % json.dumps(check_state(lw)))
    t.ok(not failures(cp), "inflight: no Pod was refused by Allocate (no GPU booked twice)",
         failures(cp))
    t.ok(delete_pods(cp, ["ex-6", "base", "d1", "d2"]) and settle(cp),
         "inflight: everything deleted and released")


def case_leader(t, cp, ctls):
    leader = next(c for c in ctls if c.identity == holder(cp))
    standby = next(c for c in ctls if c is not leader)
    names = ["l-ex-1", "l-ex-2", "l-s30-1", "l-s30-2", "l-s50-1", "l-s60-1"]
    limits = [whole(1), whole(2), slice_of(30), slice_of(30), slice_of(50), slice_of(60)]
    apply(cp, *[pod_doc(n, lim) for n, lim in zip(names, limits)])
    leader.kill()
    leader.proc.wait()
    t.ok(eventually(lambda: holder(cp) == standby.identity, 30),
         "leader: killed right after six Pods are applied; the standby takes the Lease",
         lease(cp))
    ran = eventually(lambda: running(cp, names), 180)
    wls = {n: (workload_of(cp, n) or {}).get("metadata", {}).get("name") for n in names}
    by = {n: [c.identity for c in (leader, standby)
              if w and c.find("msg=verdict workload=%s/%s " % (NS, w))] for n, w in wls.items()}
    pending = [n for n in names if by[n] == [standby.identity]]
    # A verdict the old leader wrote just before SIGKILL may never have reached its log.
    t.ok(ran and all((check_state(workload_of(cp, n)) or {}).get("state") == "Ready"
                     for n in names) and pending and
         not any(len(by[n]) > 1 for n in names),
         "leader: every Workload gets its verdict once and runs; those still pending when the "
         "leader died (%d of %d) from the new leader" % (len(pending), len(names)),
         {"verdicts logged by": by,
          "pods": {n: (phase(cp, n), check_state(workload_of(cp, n))) for n in names}})
    per_gpu = {}
    for n in names:
        for idx, mode, allocated in grants(cp, n) or []:
            per_gpu.setdefault(idx, []).append((mode, allocated or 1600000))
    sound = all(len(v) == 1 or (all(m == MODE_SLICED for m, _ in v) and
                                sum(a for _, a in v) <= 1600000) for v in per_gpu.values())
    t.ok(sound and not failures(cp), "leader: no GPU granted twice or past its units",
         per_gpu)
    t.ok(delete_pods(cp, names) and settle(cp), "leader: everything deleted and released")
    return standby


def case_pairs(t, cp):
    apply(cp, pod_doc("small-1", slice_of(30)), pod_doc("small-2", slice_of(30)))
    ran = eventually(lambda: running(cp, ["small-1", "small-2"]), 180)
    t.ok(ran and indexes(cp, "small-1") == indexes(cp, "small-2") and
         len(indexes(cp, "small-1")) == 1,
         "pairs: two 30 % slices applied together share one GPU",
         {n: grants(cp, n) for n in ("small-1", "small-2")})
    acc = indexes(cp, "small-1")
    t.ok(acc and eventually(lambda: ledger(cp, "node-a").get(acc[0]) ==
                            (MODE_SLICED, 1600000 - 2 * 480000, 2), 30),
         "pairs: the ledger charges both to that GPU (two slices, 640000 left)",
         ledger(cp, "node-a"))
    delete_pods(cp, ["small-1", "small-2"])
    apply(cp, pod_doc("big-1", slice_of(60)), pod_doc("big-2", slice_of(60)))
    ran = eventually(lambda: running(cp, ["big-1", "big-2"]), 180)
    t.ok(ran and len(set(indexes(cp, "big-1") + indexes(cp, "big-2"))) == 2,
         "pairs: two 60 % slices applied together never share one",
         {n: grants(cp, n) for n in ("big-1", "big-2")})
    t.ok(delete_pods(cp, ["big-1", "big-2"]) and settle(cp), "pairs: deleted and released")


def case_partition(t, cp, node_m):
    doc = pod_doc("mig-3g", {"nvidia.com/gpu.partitioned": "1",
                             "nvidia.com/gpu.partitioned.mig-3g.40gb": "1"}, pool=A100)
    r = apply(cp, doc)
    t.ok(r.returncode == 0, "partition: a 3g.40gb Pod applied to the MIG pool", r.stderr)
    stored = get_pod(cp, "mig-3g")
    lim = stored.get("spec", {}).get("containers", [{}])[0].get("resources", {}).get("limits", {})
    t.ok(lim.get("nvidia.com/gpu.partitioned.units") == "800k",
         "partition: the webhook folds it by its VRAM share (800000 units)", lim)
    ran = eventually(lambda: running(cp, ["mig-3g"]), 180)
    w = workload_of(cp, "mig-3g")
    t.ok(ran and (check_state(w) or {}).get("state") == "Ready" and
         get_pod(cp, "mig-3g")["spec"].get("nodeName") == "node-m",
         "partition: Kueue admits it, the check answers Ready, it runs on node-m",
         {"pod": phase(cp, "mig-3g"), "workload": (w or {}).get("status")})
    ann = json.loads((get_pod(cp, "mig-3g")["metadata"].get("annotations") or {}).get(
        ALLOC) or "{}")
    accs = [a for c in ann.values() for g in c.get("devices", {}).get("groups", [])
            for a in g.get("accelerators", [])]
    t.ok(len(accs) == 1 and accs[0].get("mode") == MODE_PARTITIONED and
         str(accs[0].get("allocatedPhysicalID", "")).startswith("MIG-"),
         "partition: the device manager carved the instance and recorded it", ann)
    carved = instances(node_m)
    t.ok(len(carved) == 1 and carved[0]["slices"] == 3 and accs and
         [ci["uuid"] for ci in carved[0]["cis"]] == [accs[0].get("allocatedPhysicalID")],
         "partition: the fake GPUs hold exactly one live 3-slice instance, the one recorded",
         {"instances": carved, "record": accs})
    t.ok(delete_pods(cp, ["mig-3g"]) and settle(cp), "partition: deleted and released")
    t.ok(eventually(lambda: not instances(node_m), 30),
         "partition: the device manager reclaims the instance once its Pod is gone",
         instances(node_m))


def instances(node):
    """The live MIG instances of the node's fake GPUs (its --fake-state file)."""
    with open(os.path.join(node.dir, "gpus.json")) as f:
        return [gi for gpu in json.load(f).get("gpus", []) for gi in gpu.get("instances", [])]


def run(t, tessera, cp):
    cp.install_crds(CRDS)
    cp.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    kc = chart.identity(cp, "controller")
    wh = WebhookServer(tessera, cp, kubeconfig=chart.identity(cp, "webhook"))
    dm_kc = chart.identity(cp, "device-manager")
    nodes, dms, ctls = [], [], []
    try:
        wh.wait_ready()
        register_webhooks(cp, wh.port)
        nodes = [KubeletNode(cp, "node-a").start(), KubeletNode(cp, "node-m").start()]
        dms = [DeviceManager(tessera, cp, nodes[0], "NVIDIA H100 80GB HBM3:8:00000000",
                             kubeconfig=dm_kc),
               DeviceManager(tessera, cp, nodes[1], "NVIDIA A100-SXM4-80GB:2:mig",
                             kubeconfig=dm_kc)]
        dms[0].wait_registered(nodes[0], ["nvidia.com/gpu", "nvidia.com/gpu.sliced"])
        dms[1].wait_registered(nodes[1], ["nvidia.com/gpu.partitioned"])
        ctls = [Controller(tessera, cp, "controller-a", kubeconfig=kc),
                Controller(tessera, cp, "controller-b", kubeconfig=kc)]
        for c in ctls:
            c.wait_ready()

        def queue_ready(pool):
            cq = get(cp, KQ_API + "/clusterqueues/" + pool) or {}
            return (cq.get("spec", {}).get("admissionChecksStrategy") and
                    (condition(cq, "Active") or {}).get("status") == "True" and
                    get(cp, "%s/namespaces/%s/localqueues/%s" % (KQ_API, NS, entrance(pool))))
        t.ok(eventually(lambda: queue_ready(H100) and queue_ready(A100), 90),
             "the controller derives both pools' queues, Active, with the check referenced",
             [get(cp, KQ_API + "/clusterqueues/" + p) for p in (H100, A100)])
        def authored(pool):
            it = get(cp, IT_API + "/instancetypes/" + pool) or {}
            return (it.get("status") or {}).get("phase") == "Active" and it
        t.ok(eventually(lambda: authored(H100) and authored(A100), 60),
             "the controller authors both pools' InstanceTypes and reports them Active",
             [get(cp, IT_API + "/instancetypes/" + p) for p in (H100, A100)])
        # The webhook folds against the status; a dry run shows it took the InstanceType in.
        t.ok(eventually(lambda: "800k" in cp.kubectl(
            "apply", "--dry-run=server", "-o", "json", "-f", "-",
            stdin=json.dumps(pod_doc("probe", slice_of(50)))).stdout, 30),
            "the webhook folds against the InstanceType's status")

        case_credits(t, cp)
        case_exclusive_and_pinned(t, cp)
        case_inflight(t, cp)
        case_pairs(t, cp)
        case_partition(t, cp, nodes[1])
        live = case_leader(t, cp, ctls)
        metrics = live.probe("/metrics")[1]
        t.ok("tessera_controller_leader 1" in metrics and
             'tessera_controller_verdicts_total{state="Ready"} 0' not in metrics,
             "the new leader's metrics count its verdicts", metrics[:1500])
        t.ok(not any(n.errors for n in nodes), "the kubelet parts logged no error",
             [e for n in nodes for e in n.errors])
    finally:
        rcs = [c.stop() for c in ctls if c.alive()]
        for dm in dms:
            dm.stop()
        for n in nodes:
            n.stop()
        wh.stop()
    check_stopped(t, ctls, rcs)
    if t.failed():
        for d in dms:
            t.note("---- device manager ----\n%s" % d.log(30))


def main():
    tessera = sys.argv[1]
    t = Tap()
    on_control_plane(t, "admission", lambda cp: run(t, tessera, cp))
    sys.exit(t.done())


if __name__ == "__main__":
    main()
