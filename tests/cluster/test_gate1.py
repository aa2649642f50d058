#!/usr/bin/env python3
"""test_gate1.py TESSERA - gate 1 end to end: Pods created with the real kubectl through the real
kube-apiserver pass tessera's mutating and validating Pod webhooks (`tessera webhook`, registered
by the chart's webhook configurations rewritten to its URL) and Kueue's own Pod webhooks, in the
order a cluster runs them (mutating configurations by name: gpustack-worker-mutation, then
kueue-mutating-webhook-configuration; then the validating ones).

The InstanceTypes are upstream-shaped (tessera's CRDs, deploy/chart/tessera/files/crds/): no spec.memory, the
per-accelerator VRAM in status.detail.memory written through the status subresource, and they go
through tessera's InstanceType webhooks themselves on create.

Checked, in order: the CRDs and webhooks are installed and answer a dry run; the stored Pod of a
logical slice holds the folded .sliced.units (800000 for 50 % of an H100) in requests and limits
and the defaulted cores-percentage, and Kueue's label, finalizer and scheduling gate, and the
Workload Kueue made from it carries the folded units (tessera folded before Kueue read the Pod); a
partition folds by its profile's VRAM share; a two-card shared request gets the card-count pin;
a whole-GPU Pod is admitted against a type whose detail is not computed yet while a slice against it
is refused as retryable; each of the seven request rules reaches the kubectl user as the API
server reports a webhook's denial, with the upstream wording; a Pod without the queue label is
untouched; the webhook logged every review with its UID.

Prints TAP.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from controlplane import ROOT, eventually  # noqa: E402
from daemons import WebhookServer, register_webhooks  # noqa: E402
from names import entrance  # noqa: E402
from tap import Tap, on_control_plane  # noqa: E402

NS = "team-a"
KQ = "kueue.x-k8s.io"
GROUP = "nvidia-h100-80gb-hbm3"
H100 = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"
BARE = "gpustack--nvidia-a100-sxm4-80gb-linux-amd64"  # its detail is not computed yet
VALIDATE = 'admission webhook "validate.gpustack-worker.core.v1.pod" denied the request: '




def instancetype(name, group):
    return {"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "InstanceType",
            "metadata": {"name": name,
                         "labels": {"schedule.gpustack.ai/queue-entrance": entrance(name)}},
            "spec": {"acceleratable": True, "acceleratorGroup": group, "os": "linux",
                     "arch": "amd64", "unitResources": {"cpu": "12", "ram": "192Gi"},
                     "localStorage": "100Gi"}}


def view(capacity, once, remaining):
    return {"capacity": capacity, "onceMaxRequest": once, "remaining": remaining}


H100_STATUS = {
    "phase": "Active", "entrance": entrance(H100),
    "accelerator": view(8, 8, 8), "acceleratorShared": view(80, 8, 80),
    "acceleratorSliced": view(800, 100, 800),
    "acceleratorPartitioned": dict(view(0, 0, 0), remainingProfiles=[]),
    "cpu": view(0, 0, 0),
    "detail": {"manufacturer": "nvidia", "product": "NVIDIA H100 80GB HBM3", "memory": "81920Mi",
               "slicedDetail": {
                   "logical": {"coresPercentageOvercommit": True, "count": 128},
                   "physical": {"count": 7, "profiles": [
                       {"name": "1g.10gb", "count": 7, "memoryMib": 10240},
                       {"name": "3g.40gb", "count": 2, "memoryMib": 40960}]}}}}


def pod_yaml(name, containers, labels=None, init=None):
    labels = {KQ + "/queue-name": entrance(H100)} if labels is None else labels
    spec = {"containers": containers}
    if init:
        spec["initContainers"] = init
    return json.dumps({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": NS, "labels": labels},
                       "spec": spec})


def ctr(name, limits, **extra):
    c = {"name": name, "image": "vllm/vllm-openai:v0.8.5", "resources": {"limits": limits}}
    c.update(extra)
    return c


def apply(cp, text):
    return cp.kubectl("apply", "-f", "-", stdin=text)


def stored(cp, name):
    return cp.api("GET", "/api/v1/namespaces/%s/pods/%s" % (NS, name))


def res(p, i=0):
    return p["spec"]["containers"][i]["resources"]


def check_folds(t, cp):
    r = apply(cp, pod_yaml("slice", [ctr("main", {
        "nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-percentage": "50"})]))
    t.ok(r.returncode == 0 and r.stdout.strip() == "pod/slice created",
         "kubectl apply of a queued 50 % slice: pod/slice created", r.stdout + r.stderr)
    p = stored(cp, "slice")
    lim, req = res(p).get("limits", {}), res(p).get("requests", {})
    t.ok(lim.get("nvidia.com/gpu.sliced.units") == "800k" and
         req.get("nvidia.com/gpu.sliced.units") == "800k",
         "the stored Pod holds the folded 800000 units in requests and limits", res(p))
    t.ok(lim.get("nvidia.com/gpu.sliced.cores-percentage") == "100",
         "cores-percentage defaulted to 100", res(p))
    gates = [g["name"] for g in p["spec"].get("schedulingGates", [])]
    t.ok(KQ + "/admission" in gates and p["metadata"]["labels"].get(KQ + "/managed") == "true"
         and KQ + "/managed" in p["metadata"].get("finalizers", []),
         "and Kueue's webhook ran after it: its label, finalizer and admission gate",
         {"gates": gates, "metadata": p["metadata"]})

    def workload():
        for w in cp.api("GET", "/apis/%s/v1beta2/namespaces/%s/workloads" % (KQ, NS))["items"]:
            if any(o["name"] == "slice" for o in w["metadata"].get("ownerReferences", [])):
                return w
        return None
    w = eventually(workload, 30)
    wres = ((w or {}).get("spec", {}).get("podSets", [{}])[0].get("template", {}).get(
        "spec", {}).get("containers", [{}])[0].get("resources", {}))
    t.ok(wres.get("requests", {}).get("nvidia.com/gpu.sliced.units") == "800k",
         "Kueue's Workload reads the folded units: the fold ran before Kueue saw the Pod", w)

    r = apply(cp, pod_yaml("mig", [ctr("main", {
        "nvidia.com/gpu.partitioned": "1", "nvidia.com/gpu.partitioned.mig-3g.40gb": "1"})]))
    p = stored(cp, "mig") if r.returncode == 0 else {"spec": {"containers": [{}]}}
    t.ok(res(p).get("limits", {}).get("nvidia.com/gpu.partitioned.units") == "800k" and
         res(p).get("requests", {}).get("nvidia.com/gpu.partitioned.units") == "800k",
         "a 3g.40gb partition folds by its VRAM share: 800000 units", r.stderr or res(p))

    r = apply(cp, pod_yaml("shared", [ctr("main", {"nvidia.com/gpu.shared": "2"})]))
    p = stored(cp, "shared") if r.returncode == 0 else {"spec": {}}
    terms = (p["spec"].get("affinity", {}).get("nodeAffinity", {})
             .get("requiredDuringSchedulingIgnoredDuringExecution", {})
             .get("nodeSelectorTerms", []))
    want = {"key": "acceleratable.feature.gpustack.ai/%s.count" % GROUP, "operator": "Gt",
            "values": ["1"]}
    t.ok(len(terms) == 1 and want in terms[0].get("matchExpressions", []),
         "a two-card shared request is pinned to nodes with more than one such card",
         r.stderr or terms)

    bare = {KQ + "/queue-name": entrance(BARE)}
    r = apply(cp, pod_yaml("whole", [ctr("main", {"nvidia.com/gpu": "1"})], labels=bare))
    t.ok(r.returncode == 0, "a whole-GPU Pod is admitted against a type with no computed detail "
         "(no fold needs the VRAM)", r.stderr)
    r = apply(cp, pod_yaml("early-slice", [ctr("main", {
        "nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-percentage": "50"})],
        labels=bare))
    t.ok(r.returncode != 0 and "retry" in r.stderr and "not ready" in r.stderr,
         "a slice against it is refused as retryable until the detail is computed", r.stderr)

    r = apply(cp, pod_yaml("plain", [ctr("main", {"cpu": "1"})], labels={}))
    p = stored(cp, "plain") if r.returncode == 0 else {"metadata": {}, "spec": {}}
    t.ok(r.returncode == 0 and not p["spec"].get("schedulingGates") and
         "nvidia.com/gpu.sliced.units" not in json.dumps(p),
         "a Pod without the queue label is left alone by both", r.stderr)


# The seven rules (spec/upstream-behavior.md §2), each with the message upstream's docs give.
RULES = [
    ("rule 1: two families", [ctr("main", {
        "nvidia.com/gpu": "1", "nvidia.com/gpu.sliced": "1",
        "nvidia.com/gpu.sliced.memory-percentage": "50"})], None,
     "spec: Forbidden: a Pod may request only one accelerator family, found [exclusive sliced]"),
    ("rule 1: init and app containers", [ctr("main", {"nvidia.com/gpu": "1"})],
     [ctr("warm", {"nvidia.com/gpu": "1"})],
     "spec.initContainers: Forbidden: a Pod's accelerator requests must all sit in one container "
     "group; spec.initContainers must give up its request, because its devices are held for the "
     "Pod's whole life while the scheduler charges the Pod only once"),
    ("rule 2: a slice of two", [ctr("main", {
        "nvidia.com/gpu.sliced": "2", "nvidia.com/gpu.sliced.memory-percentage": "50"})], None,
     'spec.containers[0].resources.limits[nvidia.com/gpu.sliced]: Invalid value: "2": a logical '
     "slice request is always a single accelerator; multi-accelerator logical slicing is not "
     "supported yet"),
    ("rule 3: a partition of two", [ctr("main", {
        "nvidia.com/gpu.partitioned": "2", "nvidia.com/gpu.partitioned.mig-3g.40gb": "1"})], None,
     'spec.containers[0].resources.limits[nvidia.com/gpu.partitioned]: Invalid value: "2": a '
     "partition request is always a single accelerator; request one Pod per instance"),
    ("rule 4: two profiles", [ctr("main", {
        "nvidia.com/gpu.partitioned": "1", "nvidia.com/gpu.partitioned.mig-3g.40gb": "1",
        "nvidia.com/gpu.partitioned.mig-1g.10gb": "1"})], None,
     "spec: Forbidden: a Pod may request only one partition profile, found [1g.10gb 3g.40gb]"),
    ("rule 5: two instances of a profile", [ctr("main", {
        "nvidia.com/gpu.partitioned": "1", "nvidia.com/gpu.partitioned.mig-3g.40gb": "2"})], None,
     'spec.containers[0].resources.limits[nvidia.com/gpu.partitioned.mig-3g.40gb]: Invalid '
     'value: "2": a partition profile request must be exactly 1 instance'),
    ("rule 6: two slicing containers", [
        ctr("a", {"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-percentage": "30"}),
        ctr("b", {"nvidia.com/gpu.sliced": "1",
                  "nvidia.com/gpu.sliced.memory-percentage": "30"})], None,
     "spec: Forbidden: at most one container may request a slicing family, found 2"),
    ("rule 7: an accelerator on a native sidecar", [ctr("main", {"cpu": "1"})],
     [ctr("proxy", {"nvidia.com/gpu": "1"}, restartPolicy="Always")],
     "spec.initContainers[0].resources.limits: Forbidden: a restartable init container (a native "
     "sidecar) may not request an accelerator; move the request to an app container"),
]


def check_rules(t, cp):
    for i, (what, containers, init, message) in enumerate(RULES):
        name = "rule-%d" % i
        r = apply(cp, pod_yaml(name, containers, init=init))
        err = r.stderr.strip()
        t.ok(r.returncode != 0 and err.startswith("Error from server") and
             (VALIDATE in err) and message in err,
             "%s: kubectl shows the validating webhook's denial with the upstream wording" % what,
             err or r.stdout)
        if i == 0:
            t.note("kubectl printed: " + err)
        exists = cp.kubectl("get", "pod", "-n", NS, name)
        t.ok(exists.returncode != 0, "%s: nothing was stored" % what, exists.stdout)


def run(t, tessera, cp):
    crds = sorted(os.path.join(ROOT, "deploy", "chart", "tessera", "files", "crds", f)
                  for f in os.listdir(os.path.join(ROOT, "deploy", "chart", "tessera", "files", "crds")) if f.endswith(".yaml"))
    cp.apply_files(crds)
    cp.wait_established(["instancetypes.worker.gpustack.ai", "instances.worker.gpustack.ai",
                         "devices.worker.gpustack.ai", "kvcachepools.worker.gpustack.ai",
                         "kvcachebackends.worker.gpustack.ai",
                         "kvcachepoolbindings.worker.gpustack.ai", "settings.gpustack.ai"])
    cp.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    wh = WebhookServer(tessera, cp)
    try:
        wh.wait_ready()
        register_webhooks(cp, wh.port)
        for name, group in ((H100, GROUP), (BARE, "nvidia-a100-sxm4-80gb")):
            r = apply(cp, json.dumps(instancetype(name, group)))
            t.ok(r.returncode == 0, "InstanceType %s created through tessera's InstanceType "
                 "webhooks" % name, r.stderr)
        it = cp.api("GET", "/apis/worker.gpustack.ai/v1alpha1/instancetypes/" + H100)
        it["status"] = H100_STATUS
        cp.api("PUT", "/apis/worker.gpustack.ai/v1alpha1/instancetypes/%s/status" % H100, it)
        # The webhook's cache sees the status through its watch; a dry run of the slice shows it.
        folded = eventually(lambda: "800k" in cp.kubectl(
            "apply", "--dry-run=server", "-o", "json", "-f", "-", stdin=pod_yaml("probe", [
                ctr("main", {"nvidia.com/gpu.sliced": "1",
                             "nvidia.com/gpu.sliced.memory-percentage": "50"})])).stdout, 30)
        t.ok(folded, "a server-side dry run reaches the webhook and folds against the status")
        check_folds(t, cp)
        check_rules(t, cp)
        reviews = [line for line in wh.lines if "msg=review" in line]
        t.ok(reviews and all("uid=" in line for line in reviews),
             "the webhook logged each review with its UID (%d reviews)" % len(reviews),
             wh.log())
    finally:
        rc = wh.stop()
    t.ok(rc == 0, "tessera webhook exits 0 on SIGTERM", wh.log())


def main():
    tessera = sys.argv[1]
    t = Tap()
    on_control_plane(t, "gate1", lambda cp: run(t, tessera, cp), scheduler=False,
                     controller_manager=False)
    sys.exit(t.done())


if __name__ == "__main__":
    main()
