"""chart.py - tessera's Helm chart (deploy/chart/tessera) as the tests see it, written once:
rendered with the pinned helm (tools/peers.sh) for a value set, and tessera's identities made from
it on a test control plane.

identity(cp, component) applies the chart's ServiceAccount of that component and the RBAC bound
to it -- nothing else of the chart -- and mints the ServiceAccount a token through TokenRequest
(the API server's own service-account tokens, as the kubelet projects them into a Pod). So a
process started with that kubeconfig has exactly the chart's permissions: a verb the chart misses
fails the suite that needs it.
"""
import os
import subprocess

import yaml

from controlplane import ROOT, peers_bin

CHART = os.path.join(ROOT, "deploy", "chart", "tessera")
NAMESPACE = "gpustack-system"
RELEASE = "tessera"

# The ServiceAccount each component runs as (the upstream operator's names).
SERVICE_ACCOUNTS = {
    "webhook": "gpustack-worker-webhook",
    "controller": "gpustack-worker-controller",
    "device-manager": "gpustack-operator-device-manager-nvidia",
}

_rendered = {}


def helm(major=4):
    """The pinned helm of that major release (tools/peers.sh builds v4 as helm, v3 as helm3)."""
    return os.path.join(peers_bin(), "helm" if major == 4 else "helm%d" % major)


def template(*args, namespace=NAMESPACE):
    """The text `helm template` prints for the chart with args (--set ..., --api-versions ...),
    or raises CalledProcessError with helm's stderr."""
    r = subprocess.run([helm(), "template", RELEASE, CHART, "--namespace", namespace] + list(args),
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise subprocess.CalledProcessError(r.returncode, r.args, r.stdout, r.stderr)
    return r.stdout


def render(*args, namespace=NAMESPACE):
    """The chart's objects for args, parsed (cached per args)."""
    key = (namespace,) + args
    if key not in _rendered:
        _rendered[key] = [d for d in yaml.safe_load_all(template(*args, namespace=namespace))
                          if d]
    return _rendered[key]


def user(component):
    """The API server's user name for a component's ServiceAccount."""
    return "system:serviceaccount:%s:%s" % (NAMESPACE, SERVICE_ACCOUNTS[component])


def rbac_of(component, docs=None):
    """The component's ServiceAccount, the (Cluster)RoleBindings naming it and their roles."""
    docs = docs if docs is not None else render()
    sa = SERVICE_ACCOUNTS[component]
    out = [d for d in docs if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == sa]
    for b in docs:
        if b["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == sa
                   for s in b.get("subjects", [])):
            continue
        role_kind = b["roleRef"]["kind"]
        out += [r for r in docs if r["kind"] == role_kind and
                r["metadata"]["name"] == b["roleRef"]["name"] and
                r["metadata"].get("namespace") == b["metadata"].get("namespace")]
        out.append(b)
    return out


def token(cp, component, rbac=True, expiration=86400):
    """A TokenRequest token for component's ServiceAccount, after applying the chart's
    ServiceAccount and (with rbac) the RBAC bound to it."""
    for d in rbac_of(component):
        if rbac or d["kind"] == "ServiceAccount":
            cp.ensure(d)
    sa = SERVICE_ACCOUNTS[component]
    tr = cp.api("POST", "/api/v1/namespaces/%s/serviceaccounts/%s/token" % (NAMESPACE, sa),
                {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                 "spec": {"expirationSeconds": expiration}})
    return tr["status"]["token"]


def identity(cp, component):
    """A kubeconfig for component's ServiceAccount (token()). Returns the kubeconfig's path."""
    return cp.write_kubeconfig("%s.kubeconfig" % component, token=token(cp, component))


def webhook_configurations():
    """The chart's Mutating and ValidatingWebhookConfiguration, as rendered by default."""
    return [d for d in render() if d["kind"] in ("MutatingWebhookConfiguration",
                                                  "ValidatingWebhookConfiguration")]
