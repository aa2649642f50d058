#!/usr/bin/env python3
"""check_deploy.py TESSERA DEPLOY_DIR - deploy/ agrees with the binary and with Kubernetes.

Every object in deploy/*.yaml is deserialized by python3-kubernetes into its typed model (required
fields enforced by the client's own validation). The webhook configurations list exactly the
routes `tessera webhook --list-routes` serves, mutating ones in the binary's order, each with the
selection upstream registers (spec/upstream-behavior.md §2, §6, §10, §11; kubernetes-contracts
§1.4): admissionReviewVersions [v1], sideEffects None, timeoutSeconds 10, matchPolicy
Equivalent, failurePolicy Fail except the Workload pin (Ignore), the Pod objectSelectors and the
Workload matchCondition. gpustack-worker-mutation sorts before Kueue's configuration; the
clientConfig Service exists, its port reaches the container's webhook port, the serving
certificate names <svc>.<ns>.svc, and the ClusterRole lets the cache list and watch every kind
it reads. Prints TAP.
"""

import glob
import json
import os
import subprocess
import sys

import yaml
from kubernetes import client

results = []


def ok(cond, name, detail=""):
    results.append(bool(cond))
    print("%s %d - %s" % ("ok" if cond else "not ok", len(results), name))
    if not cond and detail:
        print("#   %s" % detail)


class Response:
    def __init__(self, obj):
        self.data = json.dumps(obj)


MODELS = {
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"):
        "V1MutatingWebhookConfiguration",
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"):
        "V1ValidatingWebhookConfiguration",
    ("v1", "Namespace"): "V1Namespace",
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("v1", "Service"): "V1Service",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "V1ClusterRole",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "V1ClusterRoleBinding",
    ("apps/v1", "Deployment"): "V1Deployment",
    ("policy/v1", "PodDisruptionBudget"): "V1PodDisruptionBudget",
}

# What the webhook's cache lists and watches (src/kube/cache.c).
WATCHED = {("worker.gpustack.ai", "instancetypes"), ("worker.gpustack.ai", "kvcachepoolbindings"),
           ("worker.gpustack.ai", "kvcachepools"), ("worker.gpustack.ai", "kvcachebackends"),
           ("kueue.x-k8s.io", "localqueues"), ("kueue.x-k8s.io", "clusterqueues"),
           ("gpustack.ai", "settings")}


def main():
    tessera, deploy = sys.argv[1:3]
    docs = []
    for path in sorted(glob.glob(os.path.join(deploy, "*.yaml"))):
        with open(path) as f:
            docs += [(os.path.basename(path), d) for d in yaml.safe_load_all(f) if d]
    api = client.ApiClient()
    for name, d in docs:
        model = MODELS.get((d["apiVersion"], d["kind"]))
        if model is None:  # cert-manager's kinds: no model in the Kubernetes client
            ok(d["apiVersion"] == "cert-manager.io/v1", "%s: %s is a cert-manager object" %
               (name, d["kind"]))
            continue
        try:
            api.deserialize(Response(d), model)
            ok(True, "%s: %s/%s deserializes as %s" % (name, d["kind"],
                                                       d["metadata"]["name"], model))
        except (ValueError, TypeError) as e:
            ok(False, "%s: %s/%s deserializes as %s" % (name, d["kind"],
                                                        d["metadata"]["name"], model), e)

    by_kind = {}
    for _, d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    routes = [line.split("\t") for line in subprocess.run(
        [tessera, "webhook", "--list-routes"], check=True, capture_output=True,
        text=True).stdout.splitlines()]
    mutating = by_kind["MutatingWebhookConfiguration"][0]
    validating = by_kind["ValidatingWebhookConfiguration"][0]
    ok(mutating["metadata"]["name"] == "gpustack-worker-mutation" and
       mutating["metadata"]["name"].encode() < b"kueue-mutating-webhook-configuration",
       "gpustack-worker-mutation sorts before Kueue's mutating configuration")
    for cfg, kind in ((mutating, "mutating"), (validating, "validating")):
        want = [(r[1], r[2]) for r in routes if r[0] == kind]
        got = [(w["clientConfig"]["service"]["path"], w["name"]) for w in cfg["webhooks"]]
        ok(got == want, "%s webhooks = the binary's %s routes, in order" % (kind, kind),
           "deploy %s, binary %s" % (got, want))

    services = {(s["metadata"]["namespace"], s["metadata"]["name"]): s
                for s in by_kind["Service"]}
    pod_spec = by_kind["Deployment"][0]["spec"]["template"]["spec"]
    container = pod_spec["containers"][0]
    mounted = {v["secret"]["secretName"] for v in pod_spec.get("volumes", []) if "secret" in v}
    serving = [c for c in by_kind["Certificate"] if c["spec"]["secretName"] in mounted]
    cert_names = set(serving[0]["spec"].get("dnsNames", [])) if len(serving) == 1 else set()
    ok(len(serving) == 1 and all(
        cfg["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] ==
        "%s/%s" % (serving[0]["metadata"]["namespace"], serving[0]["metadata"]["name"])
        for cfg in (mutating, validating)),
       "the mounted serving certificate is the one whose CA the configurations trust")
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for cfg in (mutating, validating):
        for w in cfg["webhooks"]:
            svc = w["clientConfig"]["service"]
            s = services.get((svc["namespace"], svc["name"]))
            target = next((p["targetPort"] for p in (s or {}).get("spec", {}).get("ports", [])
                           if p["port"] == svc.get("port", 443)), None)
            common = (w.get("admissionReviewVersions") == ["v1"] and
                      w.get("sideEffects") == "None" and w.get("timeoutSeconds") == 10 and
                      w.get("matchPolicy") == "Equivalent")
            fp = "Ignore" if "workload" in w["name"] else "Fail"
            sel = w.get("objectSelector", {}).get("matchExpressions", [])
            if ".core.v1.pod" in w["name"] and "kvcache" not in w["name"]:
                sel_ok = sel == [{"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}]
            elif "kvcache" in w["name"]:
                sel_ok = sel == [{"key": "kvcache.gpustack.ai/inject", "operator": "In",
                                  "values": ["true"]}]
            else:
                sel_ok = not sel
            cond_ok = ("workload" not in w["name"] or w.get("matchConditions") == [{
                "name": "gpustack-local-queue",
                "expression": "has(object.spec.queueName) && "
                              "object.spec.queueName.startsWith('gpustack-fnv64-')"}])
            ok(common and w.get("failurePolicy") == fp and sel_ok and cond_ok,
               "%s: versions, sideEffects, timeout, matchPolicy, failurePolicy %s, selectors"
               % (w["name"], fp), w)
            ok(s is not None and ports.get(target) == 9443 and
               "%s.%s.svc" % (svc["name"], svc["namespace"]) in cert_names,
               "%s: its Service reaches the webhook port, the certificate names it" % w["name"])

    allowed = set()
    for rule in by_kind["ClusterRole"][0]["rules"]:
        if {"list", "watch"} <= set(rule["verbs"]):
            allowed |= {(g, r) for g in rule["apiGroups"] for r in rule["resources"]}
    ok(WATCHED <= allowed, "the ClusterRole lets the cache list and watch what it reads",
       WATCHED - allowed)
    print("1..%d" % len(results))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
