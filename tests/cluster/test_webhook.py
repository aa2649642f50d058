#!/usr/bin/env python3
"""test_webhook.py TESSERA - `tessera webhook` behind the real kube-apiserver, for everything but
gate 1's Pod rules (test_gate1.py has those): registered by the chart's webhook configurations
rewritten to its URL with the control plane's CA as caBundle (daemons.register_webhooks), reading
the API server with the identity the chart gives it (the ServiceAccount
gpustack-worker-webhook, a bearer token here), and driven only by creating, updating and deleting
objects through the API server: with the real kubectl (cp.kubectl) and with python3-kubernetes
(Debian's; a client built by kubernetes.config.load_kube_config from the admin kubeconfig).
Kueue runs with its own Workload and Pod webhooks. What is checked is what a user sees: kubectl's
exit status and stderr, the ApiException's status and message, and the object the API server
stored; the webhook's log only where nothing else shows a webhook's part (which of two chained
webhooks acted, a request it was never sent).

Checked, in order:
  1. readiness against the real server: before its ServiceAccount may list InstanceTypes the
     webhook is alive but not ready (/readyz 503 naming instancetypes and quoting the API
     server's 403 whole), a kubectl apply through it fails as failurePolicy Fail makes it fail
     (failed calling webhook ... not ready: waiting for the first list of instancetypes: and the
     whole 403) and stores nothing; once the chart's RBAC is applied the first lists
     succeed and it is ready;
  2. InstanceType defaulting and validation: a kubectl apply stores the entrance label, the pool's
     schedule labels and generalGroup; an object the schema admits but the rules do not is refused
     with every broken rule in one 422; updates by kubectl patch, kubectl apply of an edited
     manifest and a server-side dry run are refused as the spec is immutable (the stored spec
     unchanged), displayName and inactive may change, a forged entrance label is stamped back, a
     kubectl replace of the original manifest is accepted with its defaults restored;
  3. the Workload fit pin (kueue.x-k8s.io/v1beta2 Workloads in a namespace with a
     gpustack-fnv64- LocalQueue of an operator-marked ClusterQueue with quota): a created
     Workload is stored pinned and Kueue reserves quota for it; Kueue's validating webhook judges
     the pinned object (a reserved key refused by vworkload.kb.io after tessera patched it); a
     Workload of another queue is never sent to tessera (the matchCondition); once the
     ClusterQueue loses the operator's mark (seen through the watch) Workloads pass unpinned, and
     are pinned again when it is back; on UPDATE (kubectl label) an unreserved Workload is pinned
     and a reserved one left alone, both accepted by Kueue's webhook;
  4. Settings from the gpustack.ai/v1 Setting CRD in gpustack-system: workload-fit-affinity
     "false" disables the pin, "true" restores it, and deleting it while "false" brings back the
     value the webhook started with (true);
  5. Instance rules (python3-kubernetes): an unoffered partition profile is refused with 422
     naming the offered set (a dry run alike, storing nothing); an offered one is stored with
     its defaults; a running Instance's image is immutable; the deletion guard: once its
     InstanceType is gone an Instance's updates are refused (and new Instances of it), but after
     its deletion began the finalizer's removal goes through and the Instance is gone;
  6. the KV-cache injection (python3-kubernetes): a labelled Pod is stored with the vLLM
     --kv-transfer-config flag, MOONCAKE_CONFIG_PATH, the projected client config and the
     injected record; a Pod naming its own domain is refused; on the stored Pod the record and
     the inject label cannot be changed (kubectl annotate / label), other labels can;
  7. graceful shutdown (--shutdown-delay 3s): after SIGTERM /readyz is 503 while requests through
     the API server are still answered; exit 0; then an InstanceType create fails (failurePolicy Fail) while a
     Workload is created unpinned (failurePolicy Ignore); the webhook's stderr holds only log
     lines;
  8. on a second API server serving all CRDs but the three KV-cache kinds: a webhook is ready all
     the same, also without the Setting API (404) and with the Setting API an aggregated
     APIService whose server is down (503); registered there, that last one defaults an
     InstanceType created with kubectl and exits 0; the three webhooks' stderr holds only log
     lines.

Prints TAP.
"""
import glob
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import chart  # noqa: E402
from controlplane import ROOT, ApiError, ControlPlane, eventually  # noqa: E402
from daemons import WebhookServer, register_webhooks  # noqa: E402
from names import entrance  # noqa: E402
from tap import Tap, on_control_plane  # noqa: E402

NS = "team-a"
SYSTEM_NS = "gpustack-system"
KQ = "kueue.x-k8s.io"
WG, WV = "worker.gpustack.ai", "v1alpha1"
GROUP = "nvidia-h100-80gb-hbm3"
H100 = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"
SA_USER = chart.user("webhook")
CRDS = os.path.join(ROOT, "deploy", "chart", "tessera", "files", "crds")
KV_CRDS = ("kvcachebackends", "kvcachepools", "kvcachepoolbindings")
MARK = "resource.gpustack.ai/type"
IT_MUTATE = "mutate.worker.gpustack.ai.v1alpha1.instancetype"


def denied(webhook):
    """How the API server words a webhook's denial to the user (spec §1.3, ToStatusErr)."""
    return 'admission webhook "%s" denied the request: ' % webhook


IT_VALIDATE = denied("validate.worker.gpustack.ai.v1alpha1.instancetype")
INST_VALIDATE = denied("validate.worker.gpustack.ai.v1alpha1.instance")
INST_MUTATE = denied("mutate.worker.gpustack.ai.v1alpha1.instance")
KV_MUTATE = denied("mutate.gpustack-worker-kvcache.core.v1.pod")
KV_VALIDATE = denied("validate.gpustack-worker-kvcache.core.v1.pod")
IMMUTABLE = 'InstanceType.worker.gpustack.ai "%s" is invalid: spec: Forbidden: is immutable ' \
            'except displayName and inactive' % H100




LQ = entrance(H100)


def manifest(name=H100, **spec):
    """An InstanceType as an admin writes it, upstream-shaped: no labels, no generalGroup."""
    s = {"displayName": "H100", "acceleratable": True, "acceleratorGroup": GROUP, "os": "linux",
         "arch": "amd64", "unitResources": {"cpu": "8", "ram": "64Gi"}, "localStorage": "100Gi"}
    s.update(spec)
    return {"apiVersion": WG + "/" + WV, "kind": "InstanceType", "metadata": {"name": name},
            "spec": s}


def view(capacity, once, remaining):
    return {"capacity": capacity, "onceMaxRequest": once, "remaining": remaining}


def it_status(name):
    """The status the controller writes: the four views and the computed detail."""
    return {"phase": "Active", "entrance": entrance(name),
            "accelerator": view(8, 8, 8), "acceleratorShared": view(80, 8, 80),
            "acceleratorSliced": view(800, 100, 800),
            "acceleratorPartitioned": dict(view(0, 0, 0), remainingProfiles=[]),
            "cpu": view(0, 0, 0),
            "detail": {"manufacturer": "nvidia", "product": "NVIDIA H100 80GB HBM3",
                       "memory": "81920Mi", "slicedDetail": {
                           "logical": {"coresPercentageOvercommit": True, "count": 128},
                           "physical": {"count": 7, "profiles": [
                               {"name": "1g.10gb", "count": 7, "memoryMib": 10240},
                               {"name": "3g.40gb", "count": 2, "memoryMib": 40960}]}}}}


def kubectl_json(cp, *args, stdin=None):
    r = cp.kubectl(*args, stdin=stdin)
    return r, (json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else None)


def get(cp, *args):
    return kubectl_json(cp, "get", "-o", "json", *args)[1]


def stray_lines(wh):
    """stderr lines that are not log lines: a sanitizer report, a stray print."""
    return [line for line in wh.lines if not line.startswith("time=")]


def error_message(e):
    """The message of a python3-kubernetes ApiException, as the API server's Status has it."""
    try:
        return json.loads(e.body).get("message", "")
    except (TypeError, ValueError):
        return str(e.body)


# ---- 1. readiness -------------------------------------------------------------------------------

# The API server's whole 403, as the webhook must pass it on (not cut mid-sentence).
FORBIDDEN = ('HTTP 403 Forbidden: instancetypes.worker.gpustack.ai is forbidden: User "%s" cannot '
             'list resource "instancetypes" in API group "worker.gpustack.ai" at the cluster scope'
             % SA_USER)


def check_readiness(t, cp, wh):
    def refused():  # the first list's answer, once it came (before it no cause is named)
        st, text = wh.probe("/readyz")
        return (st, text) if FORBIDDEN in text else None
    st, text = eventually(refused, 10) or wh.probe("/readyz")
    t.ok(st == 503 and text.startswith("waiting for the first list of instancetypes: ") and
         FORBIDDEN in text, "before its ServiceAccount may list InstanceTypes: /readyz 503 naming "
         "instancetypes and the API server's whole 403", text)
    t.ok(wh.probe("/healthz")[0] == 200, "alive (/healthz 200) while not ready")
    register_webhooks(cp, wh.port)
    r = cp.kubectl("apply", "-f", "-", stdin=json.dumps(manifest()))
    t.ok(r.returncode != 0 and
         ('failed calling webhook "%s"' % IT_MUTATE) in r.stderr and
         "not ready: waiting for the first list of instancetypes: " in r.stderr and
         FORBIDDEN in r.stderr,
         "kubectl apply through the unready webhook fails as failurePolicy Fail says, with the "
         "webhook's whole reason", r.stderr)
    t.ok(cp.kubectl("get", "instancetype", H100).returncode != 0, "and nothing was stored")
    for doc in chart.rbac_of("webhook"):
        cp.ensure(doc)
    t.ok(eventually(lambda: wh.probe("/readyz")[0] == 200, 30),
         "with the chart's RBAC the first lists succeed: ready", wh.probe("/readyz"))


# ---- 2. InstanceType ----------------------------------------------------------------------------

def check_instancetype(t, cp):
    r = cp.kubectl("apply", "-f", "-", stdin=json.dumps(manifest()))
    t.ok(r.returncode == 0 and "created" in r.stdout, "kubectl apply of an upstream-shaped "
         "InstanceType goes through tessera's InstanceType webhooks", r.stdout + r.stderr)
    it = get(cp, "instancetype", H100) or {"metadata": {}, "spec": {}}
    labels = it["metadata"].get("labels", {})
    t.ok(labels.get("schedule.gpustack.ai/queue-entrance") == LQ,
         "the stored InstanceType carries queue-entrance %s" % LQ, labels)
    t.ok(it["spec"].get("generalGroup") == "generic" and
         labels.get("acceleratable.feature.gpustack.ai/" + GROUP) == "true" and
         labels.get("feature.gpustack.ai/acceleratable") == "true" and
         labels.get("kubernetes.io/os") == "linux" and labels.get("kubernetes.io/arch") == "amd64",
         "and generalGroup generic and the pool's schedule labels", it)

    # The schema requires os and arch; the webhook's rules go further (non-empty, a Gi suffix).
    bad = manifest("bad", os="", arch="", unitResources={"cpu": "8", "ram": "64G"})
    r = cp.kubectl("apply", "-f", "-", stdin=json.dumps(bad))
    want = (IT_VALIDATE + 'InstanceType.worker.gpustack.ai "bad" is invalid: [spec.os: Required '
            'value: must be specified, spec.arch: Required value: must be specified, '
            'spec.unitResources.ram: Invalid value: "64G": must be a positive integer with a '
            'case-sensitive "Gi" suffix]')
    t.ok(r.returncode != 0 and want in r.stderr and "The request is invalid" in r.stderr,
         "an InstanceType the schema admits but the rules refuse: every broken rule in one 422",
         r.stderr)
    t.ok(cp.kubectl("get", "instancetype", "bad").returncode != 0, "and it was not stored")

    r = cp.kubectl("patch", "instancetype", H100, "--type", "merge",
                   "-p", json.dumps({"spec": {"acceleratorGroup": "nvidia-a100-80gb"}}))
    t.ok(r.returncode != 0 and IT_VALIDATE + IMMUTABLE in r.stderr,
         "kubectl patch of spec.acceleratorGroup: the spec is immutable", r.stderr)
    r = cp.kubectl("apply", "-f", "-", stdin=json.dumps(manifest(os="windows")))
    t.ok(r.returncode != 0 and IMMUTABLE in r.stderr,
         "kubectl apply of an edited manifest (spec.os) is refused alike", r.stderr)
    r = cp.kubectl("patch", "instancetype", H100, "--type", "merge", "--dry-run=server",
                   "-p", json.dumps({"spec": {"unitResources": {"cpu": "16"}}}))
    t.ok(r.returncode != 0 and IMMUTABLE in r.stderr,
         "a server-side dry run of a unitResources change is refused too", r.stderr)
    spec = (get(cp, "instancetype", H100) or {}).get("spec", {})
    t.ok(spec.get("acceleratorGroup") == GROUP and spec.get("os") == "linux" and
         spec.get("unitResources") == {"cpu": "8", "ram": "64Gi"},
         "and the stored spec is unchanged", spec)

    r = cp.kubectl("patch", "instancetype", H100, "--type", "merge",
                   "-p", json.dumps({"spec": {"displayName": "H100 80GB", "inactive": True}}))
    spec = (get(cp, "instancetype", H100) or {}).get("spec", {})
    t.ok(r.returncode == 0 and spec.get("displayName") == "H100 80GB" and
         spec.get("inactive") is True, "displayName and inactive may change", r.stderr or spec)
    r = cp.kubectl("label", "--overwrite", "instancetype", H100,
                   "schedule.gpustack.ai/queue-entrance=gpustack-fnv64-0000000000000000")
    labels = (get(cp, "instancetype", H100) or {}).get("metadata", {}).get("labels", {})
    t.ok(r.returncode == 0 and labels.get("schedule.gpustack.ai/queue-entrance") == LQ,
         "a forged queue-entrance label is stamped back on the UPDATE", r.stderr or labels)
    r = cp.kubectl("replace", "-f", "-", stdin=json.dumps(manifest()))
    it = get(cp, "instancetype", H100) or {"metadata": {}, "spec": {}}
    t.ok(r.returncode == 0 and it["spec"].get("generalGroup") == "generic" and
         "inactive" not in it["spec"] and
         it["metadata"].get("labels", {}).get("schedule.gpustack.ai/queue-entrance") == LQ,
         "kubectl replace of the original manifest: accepted, its defaults restored",
         r.stderr or it)

    # The controller's part: the status, through the status subresource (no webhook runs there).
    cp.merge_patch("/apis/%s/%s/instancetypes/%s/status" % (WG, WV, H100),
                   {"status": it_status(H100)})


# ---- 3. Workloads -------------------------------------------------------------------------------

def workload(name, queue=LQ, active=None, extra_requests=None):
    req = {"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.units": "800000"}
    req.update(extra_requests or {})
    spec = {"queueName": queue, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
        "containers": [{"name": "main", "image": "vllm/vllm-openai:v0.8.5", "resources": {
            "requests": req, "limits": {"nvidia.com/gpu.sliced": "1",
                                        "nvidia.com/gpu.sliced.units": "800000"}}}]}}}]}
    if active is not None:
        spec["active"] = active
    return {"apiVersion": KQ + "/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": NS}, "spec": spec}


PIN = {"key": "sliced-max-free-units.fit.gpustack.ai/" + GROUP, "operator": "Gt",
       "values": ["799999"]}


def pinned(wl):
    """Whether Workload wl (as stored) carries the fit pin in its PodSet."""
    terms = (wl["spec"]["podSets"][0]["template"]["spec"].get("affinity", {})
             .get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", {})
             .get("nodeSelectorTerms", []))
    return any(PIN in term.get("matchExpressions", []) for term in terms)


def dry_run_pinned(cp):
    """A server-side dry-run create: True/False as the API server would store it, or None."""
    r, wl = kubectl_json(cp, "create", "--dry-run=server", "-o", "json", "-f", "-",
                         stdin=json.dumps(workload("probe")))
    return None if wl is None else pinned(wl)


def reserved(cp, name):
    wl = get(cp, "workload", "-n", NS, name) or {}
    return any(c["type"] == "QuotaReserved" and c["status"] == "True"
               for c in wl.get("status", {}).get("conditions", []))


def set_mark(cp, on):
    arg = MARK + "=instancetypes" if on else MARK + "-"
    cp.kubectl("label", "--overwrite", "clusterqueue", H100, arg, check=True)


def check_workload(t, cp, wh):
    cp.ensure({"apiVersion": KQ + "/v1beta2", "kind": "ResourceFlavor",
               "metadata": {"name": "h100-flavor"}, "spec": {}})
    r = cp.kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": KQ + "/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": H100, "labels": {MARK: "instancetypes"}},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["credits.gpustack.ai/nvidia", "nvidia.com/gpu.sliced"],
            "flavors": [{"name": "h100-flavor", "resources": [
                {"name": "credits.gpustack.ai/nvidia", "nominalQuota": "12800000"},
                {"name": "nvidia.com/gpu.sliced", "nominalQuota": "100"}]}]}]}}))
    r2 = cp.kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": KQ + "/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": LQ, "namespace": NS}, "spec": {"clusterQueue": H100}}))
    t.ok(r.returncode == 0 and r2.returncode == 0,
         "an operator-marked ClusterQueue %s with quota and its LocalQueue %s" % (H100, LQ),
         r.stderr + r2.stderr)

    t.ok(eventually(lambda: dry_run_pinned(cp) is True, 30),
         "the queues reach the webhook through its watch (a dry run is pinned)")
    r, wl = kubectl_json(cp, "create", "-o", "json", "-f", "-",
                         stdin=json.dumps(workload("wl-pinned")))
    t.ok(wl is not None and pinned(wl), "a Workload created through the API server is stored "
         "with the fit pin: %s Gt 799999" % PIN["key"], r.stderr or wl)
    t.ok(eventually(lambda: reserved(cp, "wl-pinned"), 30),
         "and Kueue reserves quota for the pinned Workload",
         get(cp, "workload", "-n", NS, "wl-pinned"))

    r = cp.kubectl("create", "-f", "-", stdin=json.dumps(
        workload("wl-reserved-key", extra_requests={"pods": "1"})))
    patched = wh.find("name=wl-reserved-key http=200 allowed=true")
    t.ok(r.returncode != 0 and denied("vworkload.kb.io") in r.stderr
         and "the key is reserved for internal kueue use" in r.stderr and patched and
         "patched=true" in patched,
         "Kueue's validating webhook judges the Workload tessera pinned (vworkload.kb.io refuses "
         "a reserved key after tessera patched it)", r.stderr + "\n" + str(patched))
    r = cp.kubectl("create", "-f", "-", stdin=json.dumps(workload("wl-other", queue="plain")))
    t.ok(r.returncode == 0 and not pinned(get(cp, "workload", "-n", NS, "wl-other")) and
         wh.find("name=wl-pinned ") and not wh.find("name=wl-other "),
         "a Workload of a queue without the gpustack-fnv64- prefix is never sent to tessera "
         "(the matchCondition)", r.stderr)

    set_mark(cp, False)
    t.ok(eventually(lambda: dry_run_pinned(cp) is False, 30),
         "once the ClusterQueue loses the operator's mark (a watch event): Workloads pass "
         "unpinned")
    held = cp.kubectl("create", "-f", "-", stdin=json.dumps(workload("wl-held", active=False)))
    res = cp.kubectl("create", "-f", "-", stdin=json.dumps(workload("wl-reserved")))
    t.ok(held.returncode == 0 and res.returncode == 0 and
         eventually(lambda: reserved(cp, "wl-reserved"), 30) and
         not pinned(get(cp, "workload", "-n", NS, "wl-held")),
         "meanwhile an inactive Workload and one Kueue reserves quota for are stored unpinned",
         held.stderr + res.stderr)
    set_mark(cp, True)
    t.ok(eventually(lambda: dry_run_pinned(cp) is True, 30), "and pinned again once it is back")

    r = cp.kubectl("label", "workload", "-n", NS, "wl-held", "touched=yes")
    wl = get(cp, "workload", "-n", NS, "wl-held") or {}
    t.ok(r.returncode == 0 and pinned(wl) and
         wl["metadata"].get("labels", {}).get("touched") == "yes",
         "an UPDATE (kubectl label) of the unreserved Workload pins it, and Kueue's webhook "
         "accepts the new PodSets", r.stderr or wl)
    r = cp.kubectl("label", "workload", "-n", NS, "wl-reserved", "touched=yes")
    wl = get(cp, "workload", "-n", NS, "wl-reserved") or {}
    t.ok(r.returncode == 0 and not pinned(wl) and
         wl["metadata"].get("labels", {}).get("touched") == "yes",
         "an UPDATE of the reserved one leaves its PodSets alone (Kueue would refuse a change): "
         "the label stored, no pin", r.stderr or wl)


# ---- 4. Settings --------------------------------------------------------------------------------

def setting(name, value):
    return json.dumps({"apiVersion": "gpustack.ai/v1", "kind": "Setting",
                       "metadata": {"name": name, "namespace": SYSTEM_NS},
                       "spec": {"value": value}})


def check_settings(t, cp):
    r = cp.kubectl("apply", "-f", "-", stdin=setting("workload-fit-affinity", "false"))
    t.ok(r.returncode == 0 and eventually(lambda: dry_run_pinned(cp) is False, 30),
         "Setting workload-fit-affinity=false (kubectl apply in %s): Workloads pass unpinned"
         % SYSTEM_NS, r.stderr)
    r = cp.kubectl("apply", "-f", "-", stdin=setting("workload-fit-affinity", "true"))
    t.ok(r.returncode == 0 and eventually(lambda: dry_run_pinned(cp) is True, 30),
         "and true pins them again", r.stderr)
    cp.kubectl("apply", "-f", "-", stdin=setting("workload-fit-affinity", "false"))
    eventually(lambda: dry_run_pinned(cp) is False, 30)
    r = cp.kubectl("delete", "setting", "-n", SYSTEM_NS, "workload-fit-affinity")
    t.ok(r.returncode == 0 and eventually(lambda: dry_run_pinned(cp) is True, 30),
         "deleting the Setting brings back the value the webhook started with (true)", r.stderr)


# ---- 5. Instances -------------------------------------------------------------------------------

def instance(name, type_, profile=None, finalizers=None):
    res = {"accelerator": "1"}
    if profile:
        res["acceleratorPartitionedProfile"] = profile
    meta = {"name": name, "namespace": NS}
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": WG + "/" + WV, "kind": "Instance", "metadata": meta,
            "spec": {"type": type_, "image": "ubuntu:24.04", "resources": res,
                     "volume": {"ephemeral": {"capacity": "10Gi"}}}}


def check_instance(t, cp, k8s):
    from kubernetes.client.rest import ApiException

    api = k8s.CustomObjectsApi()

    def create(obj, **kw):
        try:
            return api.create_namespaced_custom_object(WG, WV, NS, "instances", obj, **kw), None
        except ApiException as e:
            return None, e

    offered = ('Instance.worker.gpustack.ai "dev" is invalid: '
               'spec.resources.acceleratorPartitionedProfile: Invalid value: "2g.20gb": instance '
               'type %s does not offer this partition profile; offered: [1g.10gb 3g.40gb]' % H100)

    def refused_unoffered(**kw):
        _, e = create(instance("dev", H100, "2g.20gb"), **kw)
        return e if e is not None and offered in error_message(e) else None

    e = eventually(lambda: refused_unoffered(dry_run="All"), 30)  # the status reaches the cache
    t.ok(e is not None and e.status == 422 and error_message(e).startswith(INST_VALIDATE),
         "a dry-run create of an Instance with an unoffered profile: 422 naming the offered set",
         e and error_message(e))
    e = refused_unoffered()
    t.ok(e is not None and e.status == 422, "the create itself alike: %s" % (
        e and error_message(e)), e)
    t.ok(not api.list_namespaced_custom_object(WG, WV, NS, "instances")["items"],
         "and nothing was stored")
    got, e = create(instance("dev", H100, "3g.40gb"))
    spec = (got or {}).get("spec", {})
    t.ok(e is None and spec.get("imagePullPolicy") == "IfNotPresent" and
         spec.get("volumeMount") == "/workspace" and
         spec.get("resources", {}).get("localStorage") == "15Gi" and
         spec.get("resources", {}).get("cpu") == "4" and
         spec.get("resources", {}).get("ram") == "32Gi",
         "an offered profile is admitted and stored with its defaults (the host share sized by "
         "the profile's VRAM)", e and error_message(e) or spec)
    try:
        api.patch_namespaced_custom_object(WG, WV, NS, "instances", "dev",
                                           {"spec": {"image": "ubuntu:25.04"}})
        e = None
    except ApiException as x:
        e = x
    t.ok(e is not None and e.status == 422 and INST_VALIDATE + (
        'Instance.worker.gpustack.ai "dev" is invalid: spec.image: Forbidden: image is '
        'immutable') in error_message(e),
         "a running Instance's image is immutable (the UPDATE's oldObject read)",
         e and error_message(e))

    # The deletion guard: an Instance whose InstanceType is gone, being deleted.
    r = cp.kubectl("apply", "-f", "-", stdin=json.dumps(manifest("doomed")))
    cp.merge_patch("/apis/%s/%s/instancetypes/doomed/status" % (WG, WV),
                   {"status": it_status("doomed")})
    got = eventually(lambda: create(instance("dev-doomed", "doomed", "3g.40gb",
                                             ["worker.gpustack.ai/instance"]))[0], 30)
    t.ok(r.returncode == 0 and got, "an Instance of InstanceType doomed, with a finalizer",
         r.stderr)
    api.delete_cluster_custom_object(WG, WV, "instancetypes", "doomed")
    gone = 'spec.type: Not found: "doomed"'

    def refused_update():
        try:
            api.patch_namespaced_custom_object(WG, WV, NS, "instances", "dev-doomed",
                                               {"metadata": {"labels": {"touched": "yes"}}})
            return None
        except ApiException as x:
            return x if gone in error_message(x) else None
    e = eventually(refused_update, 30)
    t.ok(e is not None and e.status == 403 and error_message(e) == INST_MUTATE + gone,
         "once its InstanceType is gone, an update of the Instance is refused: " +
         (error_message(e) if e else ""), e)
    _, e = create(instance("dev-late", "doomed", "3g.40gb"))
    t.ok(e is not None and e.status == 403 and error_message(e) == INST_MUTATE + gone,
         "and so is a new Instance of it", e and error_message(e))
    api.delete_namespaced_custom_object(WG, WV, NS, "instances", "dev-doomed")
    obj = api.get_namespaced_custom_object(WG, WV, NS, "instances", "dev-doomed")
    t.ok(obj["metadata"].get("deletionTimestamp"), "a delete marks it (the finalizer holds it)")
    try:
        api.patch_namespaced_custom_object(WG, WV, NS, "instances", "dev-doomed",
                                           {"metadata": {"finalizers": None}})
        e = None
    except ApiException as x:
        e = x
    t.ok(e is None, "the deletion guard: being deleted, its finalizer's removal goes through "
         "though its type is gone", e and error_message(e))

    def absent():
        try:
            api.get_namespaced_custom_object(WG, WV, NS, "instances", "dev-doomed")
            return False
        except ApiException as x:
            return x.status == 404
    t.ok(eventually(absent, 10), "and the Instance is gone")


# ---- 6. KV cache --------------------------------------------------------------------------------

def kv_pod(name, **annotations):
    ann = {"kvcache.gpustack.ai/binding": "chat", "kvcache.gpustack.ai/engine": "vLLM"}
    ann.update(annotations)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS,
                         "labels": {"kvcache.gpustack.ai/inject": "true"}, "annotations": ann},
            "spec": {"containers": [{"name": "server", "image": "vllm/vllm-openai:v0.8.5",
                                     "command": ["vllm"], "args": ["serve", "m"]}]}}


def check_kvcache(t, cp, k8s):
    from kubernetes.client.rest import ApiException

    api = k8s.CustomObjectsApi()
    core = k8s.CoreV1Api()
    api.create_cluster_custom_object(WG, WV, "kvcachebackends", {
        "apiVersion": WG + "/" + WV, "kind": "KVCacheBackend", "metadata": {"name": "be-tcp"},
        "spec": {"transport": {"protocol": "TCP"}, "connection": {"external": {"endpoints": [
            {"name": "Client", "address": "mooncake.example:50051"}]}}}})
    api.create_cluster_custom_object(WG, WV, "kvcachepools", {
        "apiVersion": WG + "/" + WV, "kind": "KVCachePool", "metadata": {"name": "pool-a"},
        "spec": {"backends": ["be-tcp"], "quota": {"total": "64Gi"}}})
    api.patch_cluster_custom_object_status(WG, WV, "kvcachepools", "pool-a", {"status": {
        "clientEndpoint": "pool-a.gpustack-system:50051",
        "conditions": [{"type": "QuotaLedgerAvailable", "status": "True", "reason": "Ready",
                        "message": "", "lastTransitionTime": "2026-12-01T00:00:00Z"}]}})
    api.create_namespaced_custom_object(WG, WV, NS, "kvcachepoolbindings", {
        "apiVersion": WG + "/" + WV, "kind": "KVCachePoolBinding",
        "metadata": {"name": "chat", "namespace": NS},
        "spec": {"poolRef": {"name": "pool-a"},
                 "domain": {"name": "team-a-chat", "blockSize": 16, "dtype": "fp8"},
                 "quota": {"ceiling": "8Gi"}}})

    def injected():
        try:
            core.create_namespaced_pod(NS, kv_pod("chat-0"), dry_run="All")
        except ApiException:
            return False  # the objects have not reached the cache yet
        return True
    eventually(injected, 30)
    try:
        p = k8s.ApiClient().sanitize_for_serialization(
            core.create_namespaced_pod(NS, kv_pod("chat-0")))
        err = None
    except ApiException as e:
        p, err = {"metadata": {}, "spec": {"containers": [{}]}}, error_message(e)
    c = p["spec"]["containers"][0]
    ann = p["metadata"].get("annotations", {})
    args = c.get("args", [])
    flag = args[args.index("--kv-transfer-config") + 1] if "--kv-transfer-config" in args else None
    t.ok(err is None and args[:2] == ["serve", "m"] and flag and
         json.loads(flag).get("kv_connector") == "MooncakeStoreConnector",
         "KV-cache injection: the stored Pod's vLLM gets --kv-transfer-config", err or c)
    try:
        record = json.loads(ann.get("kvcache.gpustack.ai/injected", "null")) or {}
    except ValueError:
        record = {}
    t.ok(record.get("binding") == "chat" and record.get("engine") == "vllm" and
         record.get("domain") == "team-a-chat",
         "and the injected record names the Binding, the engine and the domain", ann)
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in p["spec"].get("volumes", [])}
    cfg = json.loads(ann.get("kvcache.gpustack.ai/client-config", "{}"))
    t.ok(env.get("MOONCAKE_CONFIG_PATH") == "/etc/gpustack/kvcache/mooncake.json" and
         mounts.get("/etc/gpustack/kvcache") == "gpustack-kvcache-config" and
         "downwardAPI" in vols.get("gpustack-kvcache-config", {}) and
         cfg.get("master_server_address") == "pool-a.gpustack-system:50051",
         "MOONCAKE_CONFIG_PATH points at the client config the API server projects",
         {"env": env, "mounts": mounts, "volumes": vols, "config": cfg})

    try:
        core.create_namespaced_pod(NS, kv_pod("chat-1", **{"kvcache.gpustack.ai/domain": "x"}))
        e = None
    except ApiException as x:
        e = x
    t.ok(e is not None and e.status == 403 and error_message(e).startswith(
        KV_MUTATE + 'annotation "kvcache.gpustack.ai/domain" is not accepted'),
         "a Pod naming its own domain is refused", e and error_message(e))

    r = cp.kubectl("annotate", "--overwrite", "pod", "-n", NS, "chat-0",
                   "kvcache.gpustack.ai/injected=forged")
    t.ok(r.returncode != 0 and KV_VALIDATE + 'annotation "kvcache.gpustack.ai/injected" may not '
         'be added, changed or removed on an existing Pod' in r.stderr,
         "kubectl annotate of the stored Pod's record is refused", r.stderr)
    r = cp.kubectl("label", "pod", "-n", NS, "chat-0", "kvcache.gpustack.ai/inject-")
    t.ok(r.returncode != 0 and KV_VALIDATE + 'label "kvcache.gpustack.ai/inject" may not be '
         'added, changed or removed on an existing Pod' in r.stderr,
         "and so is removing its inject label (the objectSelector matched the old Pod)", r.stderr)
    r = cp.kubectl("label", "pod", "-n", NS, "chat-0", "team=chat")
    t.ok(r.returncode == 0, "while another label may be added", r.stderr)


# ---- 7. shutdown --------------------------------------------------------------------------------

def check_shutdown(t, cp, wh):
    t0 = time.monotonic()
    wh.signal(signal.SIGTERM)
    t.ok(eventually(lambda: wh.probe("/readyz")[0] == 503, 2),
         "after SIGTERM: /readyz 503 while draining")
    r = cp.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                   stdin=json.dumps(manifest("late")))
    t.ok(r.returncode == 0 and entrance("late") in r.stdout,
         "requests through the API server are still answered during the shutdown delay",
         r.stderr)
    try:
        rc = wh.proc.wait(timeout=15)
    except Exception:  # noqa: BLE001 - reported below
        rc = None
    t.ok(rc == 0 and wh.find("msg=stopped"), "tessera webhook exits 0 after the drain",
         "rc=%s\n%s" % (rc, wh.log()))
    t.note("SIGTERM to exit: %.1f s (delay 3 s, grace 5 s)" % (time.monotonic() - t0))
    r = cp.kubectl("apply", "-f", "-", stdin=json.dumps(manifest("after")))
    t.ok(r.returncode != 0 and ('failed calling webhook "%s"' % IT_MUTATE) in r.stderr,
         "with the webhook gone an InstanceType create fails (failurePolicy Fail)", r.stderr)
    r, wl = kubectl_json(cp, "create", "-o", "json", "-f", "-",
                         stdin=json.dumps(workload("wl-unpinned")))
    t.ok(wl is not None and not pinned(wl),
         "while a Workload is created unpinned (the fit pin's failurePolicy Ignore)", r.stderr)
    stray = stray_lines(wh)
    t.ok(not stray, "the webhook's stderr holds only log lines", "\n".join(stray[:40]))


# ---- 8. an API server without the KV-cache kinds ------------------------------------------------

def check_unserved(t, tessera):
    cp = ControlPlane("webhook-unserved", kueue=False, scheduler=False, controller_manager=False)
    failed = True
    hooks = []
    try:
        cp.start()
        kueue_crds = os.path.join(cp.kueue_share(), "crds")
        ours = [f for f in sorted(glob.glob(os.path.join(CRDS, "*.yaml")))
                if not any(k in os.path.basename(f) for k in KV_CRDS)]
        names = cp.install_crds([kueue_crds] + ours)
        t.ok(not any(n.split(".")[0] in KV_CRDS for n in names) and
             "settings.gpustack.ai" in names and "workloads.kueue.x-k8s.io" in names,
             "a second API server with Kueue's and tessera's CRDs but the three KV-cache kinds "
             "(%d CRDs)" % len(names), names)
        wh = WebhookServer(tessera, cp)
        hooks.append(wh)
        t.ok(eventually(lambda: wh.probe("/readyz")[0] == 200, 30),
             "a webhook against it is ready all the same", wh.probe("/readyz"))
        wh.stop()
        cp.api("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
               "settings.gpustack.ai")

        def settings_gone():
            try:
                cp.api("GET", "/apis/gpustack.ai/v1")
            except ApiError as e:
                return e.status == 404
            return False
        eventually(settings_gone, 20)
        wh = WebhookServer(tessera, cp)
        hooks.append(wh)
        t.ok(eventually(lambda: wh.probe("/readyz")[0] == 200, 30),
             "and without the Setting API either (404)", wh.probe("/readyz"))
        wh.stop()
        # An aggregated Setting API (upstream's shape) whose server is down: 503s.
        cp.create({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                   "metadata": {"name": "v1.gpustack.ai"},
                   "spec": {"group": "gpustack.ai", "version": "v1",
                            "groupPriorityMinimum": 1000, "versionPriority": 15,
                            "insecureSkipTLSVerify": True,
                            "service": {"namespace": SYSTEM_NS, "name": "gpustack-operator",
                                        "port": 443}}})

        def unavailable():
            try:
                cp.api("GET", "/apis/gpustack.ai/v1/namespaces/%s/settings" % SYSTEM_NS)
            except ApiError as e:
                return e.status == 503
            return False
        t.ok(eventually(unavailable, 20), "the Setting API, aggregated, answers 503")
        wh = WebhookServer(tessera, cp)
        hooks.append(wh)
        t.ok(eventually(lambda: wh.probe("/readyz")[0] == 200, 30),
             "a webhook whose Setting API answers 503 is ready all the same",
             wh.probe("/readyz"))
        register_webhooks(cp, wh.port)
        r = cp.kubectl("apply", "-f", "-", stdin=json.dumps(manifest()))
        it = get(cp, "instancetype", H100) or {"metadata": {}}
        t.ok(r.returncode == 0 and
             it["metadata"].get("labels", {}).get("schedule.gpustack.ai/queue-entrance") == LQ,
             "registered there, it defaults an InstanceType created with kubectl", r.stderr)
        rc = wh.stop()
        t.ok(rc == 0, "and exits 0", wh.log())
        stray = [line for w in hooks for line in stray_lines(w)]
        t.ok(not stray, "their stderr holds only log lines", "\n".join(stray[:40]))
        failed = t.failed()
    finally:
        for w in hooks:
            w.stop()
        cp.stop(failed=failed)


def run(t, tessera, cp):
    try:
        import kubernetes
    except ImportError:
        raise RuntimeError("python3-kubernetes is missing: run tools/setup.sh") from None

    cp.install_crds([CRDS])
    cp.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    kubernetes.config.load_kube_config(config_file=cp.kubeconfig)
    sa_kubeconfig = cp.write_kubeconfig("webhook-sa.kubeconfig",
                                       token=chart.token(cp, "webhook", rbac=False))
    wh = WebhookServer(tessera, cp, kubeconfig=sa_kubeconfig,
                       extra=["--shutdown-delay", "3s", "--shutdown-grace", "5s"])
    try:
        check_readiness(t, cp, wh)
        check_instancetype(t, cp)
        check_workload(t, cp, wh)
        check_settings(t, cp)
        check_instance(t, cp, kubernetes.client)
        check_kvcache(t, cp, kubernetes.client)
        check_shutdown(t, cp, wh)
    finally:
        if wh.alive():
            t.note("webhook log tail:\n" + wh.log())
        wh.stop()


def main():
    tessera = sys.argv[1]
    t = Tap()
    on_control_plane(t, "webhook", lambda cp: run(t, tessera, cp), scheduler=False,
                     controller_manager=False)
    try:
        check_unserved(t, tessera)
    except Exception:  # noqa: BLE001 - reported as a failed check
        t.crash("webhook-unserved")
    sys.exit(t.done())


if __name__ == "__main__":
    main()
