#!/usr/bin/env python3
"""test_chart.py TESSERA - the Helm chart (deploy/chart/tessera) with the pinned helm v4 and v3,
against a real kube-apiserver (no Kueue manager: its CRDs only, no scheduler).

Checked:
  * `helm lint --strict` passes with both majors, and helm v3 renders every value set as v4 does; the chart's version and appVersion are the binary's release
    (`tessera --version`), and so is the image tag the Pods name by default;
  * the values schema refuses a bad value naming it (log.format, deviceManager.sliceIsolation.mode),
    and certificates.provider=tessera without the controller is refused with the reason;
  * the device manager's slice interposer directory: a DirectoryOrCreate hostPath (default
    /usr/local/tessera/vgpu, or sliceIsolation.hostDir) mounted writable at the same path and
    named by --vgpu-dir and --vgpu-host-dir, the mode passed as --slice-isolation; none with mode
    off (the nvidia-only value set runs with it off);
  * four value sets render (`helm template`): the defaults (tessera's own certificates), with
    cert-manager (its API served, so provider auto picks it), NVIDIA's device manager only, and
    everything off but the webhook -- each with the objects it should have and none it should
    not; every rendered object is accepted by the API server (`kubectl apply --server-side
    --dry-run=server`), and the defaults are then applied for real and read back;
  * the CRDs the chart renders are the files in files/crds/ (labels and the keep annotation
    aside: no number turned into a float by the template);
  * the ConfigMap gpustack-kueue-manager-config holds exactly what `tessera kueue-config
    --namespace NS` prints, for two release namespaces;
  * the RuntimeClass is made unless the cluster has one of that name the release does not own:
    the release's own is kept on upgrade, a foreign one is left alone by a new install;
  * with cert-manager the webhook configurations carry the CA injector's annotation naming the
    serving Certificate; with tessera's certificates the controller gets the flags naming the
    mounted Secret, the webhook Service and both configurations.

cert-manager's and the Prometheus Operator's CRDs are not available here: the test serves
stand-ins for their kinds (any field accepted), so for those objects the dry run checks the kind,
the namespace and the metadata, not their spec.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import yaml  # noqa: E402

import chart  # noqa: E402
from tap import Tap, on_control_plane  # noqa: E402

t = Tap()

CERT_MANAGER = ["--api-versions", "cert-manager.io/v1"]
VALUE_SETS = {
    "defaults": [],
    "cert-manager": CERT_MANAGER + ["--set", "metrics.serviceMonitor.enabled=true"],
    "nvidia-only": ["--set", "webhook.enabled=false", "--set", "controller.enabled=false",
                    "--set", "kueue.admissionCheck.create=false",
                    "--set", "kueue.managerConfig.create=false",
                    "--set", "deviceManager.sliceIsolation.mode=off"],
    "webhook-only": ["--set", "certificates.provider=cert-manager",
                     "--set", "controller.enabled=false", "--set", "deviceManager.enabled=false",
                     "--set", "crds.install=false", "--set", "kueue.admissionCheck.create=false",
                     "--set", "kueue.managerConfig.create=false"],
}
# The kinds each value set renders (count per kind).
WANT = {
    "defaults": {"CustomResourceDefinition": 7, "ServiceAccount": 3, "ClusterRole": 3,
                 "ClusterRoleBinding": 3, "Role": 1, "RoleBinding": 1, "Service": 3,
                 "Deployment": 2, "DaemonSet": 1, "PodDisruptionBudget": 1,
                 "RuntimeClass": 1, "MutatingWebhookConfiguration": 1,
                 "ValidatingWebhookConfiguration": 1, "AdmissionCheck": 1, "ConfigMap": 1},
    "nvidia-only": {"CustomResourceDefinition": 7, "ServiceAccount": 1, "ClusterRole": 1,
                    "ClusterRoleBinding": 1, "Service": 1, "DaemonSet": 1, "RuntimeClass": 1},
    "webhook-only": {"ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1,
                     "Service": 1, "Deployment": 1, "PodDisruptionBudget": 1, "Issuer": 2,
                     "Certificate": 2, "MutatingWebhookConfiguration": 1,
                     "ValidatingWebhookConfiguration": 1},
}
WANT["cert-manager"] = dict(WANT["defaults"], Issuer=2, Certificate=2, ServiceMonitor=3)


def kinds(docs):
    out = {}
    for d in docs:
        out[d["kind"]] = out.get(d["kind"], 0) + 1
    return out


def helm(*args, major=4):
    return subprocess.run([chart.helm(major)] + list(args), capture_output=True, text=True,
                          timeout=120)


def check_static(tessera):
    for major in (4, 3):
        r = helm("lint", "--strict", chart.CHART, major=major)
        t.ok(r.returncode == 0 and "0 chart(s) failed" in r.stdout,
             "helm v%d: lint --strict passes" % major, r.stdout + r.stderr)
    with open(os.path.join(chart.CHART, "Chart.yaml")) as f:
        meta = yaml.safe_load(f)
    version = subprocess.run([tessera, "--version"], capture_output=True, text=True,
                             check=True).stdout.split()[1]
    t.ok(meta["version"] == version and meta["appVersion"] == version,
         "Chart.yaml's version and appVersion are the binary's release %s" % version, meta)
    images = {c["image"] for d in chart.render() if d["kind"] in ("Deployment", "DaemonSet")
              for c in d["spec"]["template"]["spec"]["containers"]}
    t.ok(images == {"tessera:" + version}, "every Pod runs tessera:<appVersion> by default",
         images)
    r = helm("template", "x", chart.CHART, "--set", "log.format=xml")
    t.ok(r.returncode != 0 and "/log/format" in r.stderr and "json" in r.stderr,
         "the values schema refuses log.format=xml, naming it and the choices", r.stderr)
    r = helm("template", "x", chart.CHART, "--set", "deviceManager.sliceIsolation.mode=on")
    t.ok(r.returncode != 0 and "/deviceManager/sliceIsolation/mode" in r.stderr and
         "preload" in r.stderr and "off" in r.stderr,
         "the values schema refuses deviceManager.sliceIsolation.mode=on, naming it and the "
         "choices", r.stderr)
    check_slice_isolation()
    r = helm("template", "x", chart.CHART, "--set", "controller.enabled=false")
    t.ok(r.returncode != 0 and "certificates.provider=tessera" in r.stderr and
         "controller.enabled" in r.stderr,
         "tessera's own certificates without the controller are refused with the reason",
         r.stderr)
    r = helm("template", "x", chart.CHART, "--set", "image.registry=reg.example:5000",
             "--set", "image.digest=sha256:" + "a" * 64)
    t.ok(r.returncode == 0 and ("image: reg.example:5000/tessera@sha256:" + "a" * 64) in r.stdout,
         "image.registry and image.digest make the Pods' image reference", r.stderr)

    crds = {d["metadata"]["name"]: d for d in chart.render()
            if d["kind"] == "CustomResourceDefinition"}
    same = []
    for name in sorted(os.listdir(os.path.join(chart.CHART, "files", "crds"))):
        if not name.endswith(".yaml"):
            continue
        with open(os.path.join(chart.CHART, "files", "crds", name)) as f:
            want = yaml.safe_load(f)
        got = json.loads(json.dumps(crds.get(want["metadata"]["name"], {})))
        meta = got.get("metadata", {})
        kept = meta.pop("annotations", {}).get("helm.sh/resource-policy") == "keep"
        labelled = meta.pop("labels", {}).get("app.kubernetes.io/part-of") == "tessera"
        same.append((name, got == want and kept and labelled))
    t.ok(len(same) == 7 and all(s for _, s in same),
         "the 7 CRDs rendered are files/crds/ unchanged, labelled and kept on uninstall", same)

    for ns in ("gpustack-system", "tessera-test"):
        cm = next((d for d in chart.render(namespace=ns)
                   if d["kind"] == "ConfigMap" and
                   d["metadata"]["name"] == "gpustack-kueue-manager-config"), None)
        want = subprocess.run([tessera, "kueue-config", "--namespace", ns], capture_output=True,
                              text=True, check=True).stdout
        got = ((cm or {}).get("data") or {}).get("controller_manager_config.yaml")
        t.ok(got == want, "namespace %s: the chart's Kueue Configuration is exactly `tessera "
             "kueue-config --namespace %s`" % (ns, ns), {"chart": got, "generator": want})


def device_manager(*args):
    """The NVIDIA device manager's Pod spec and container as the chart renders them with args."""
    ds = next(d for d in chart.render(*args) if d["kind"] == "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    return spec, spec["containers"][0]


def check_slice_isolation():
    """By default the device manager installs the slice interposer into the hostPath
    /usr/local/tessera/vgpu (DirectoryOrCreate), mounted writable at the same path, and the
    flags name it as both its own and the host's directory; another hostDir moves all three;
    mode env is passed on; mode off passes --slice-isolation=off and mounts nothing."""
    for args, mode, d in (((), "preload", "/usr/local/tessera/vgpu"),
                          (("--set", "deviceManager.sliceIsolation.mode=env", "--set",
                            "deviceManager.sliceIsolation.hostDir=/opt/tessera/vgpu"), "env",
                           "/opt/tessera/vgpu")):
        spec, c = device_manager(*args)
        vol = [v for v in spec["volumes"] if v["name"] == "vgpu"]
        mnt = [m for m in c["volumeMounts"] if m["name"] == "vgpu"]
        t.ok(vol == [{"name": "vgpu", "hostPath": {"path": d, "type": "DirectoryOrCreate"}}]
             and mnt == [{"name": "vgpu", "mountPath": d}]
             and {"--slice-isolation=" + mode, "--vgpu-dir=" + d, "--vgpu-host-dir=" + d}
             <= set(c["args"]),
             "sliceIsolation %s, hostDir %s: the hostPath mounted writable at the same path, "
             "--slice-isolation, --vgpu-dir and --vgpu-host-dir name them" % (mode, d),
             {"volumes": vol, "mounts": mnt, "args": c["args"]})
    spec, c = device_manager("--set", "deviceManager.sliceIsolation.mode=off")
    t.ok("--slice-isolation=off" in c["args"]
         and not any(a.startswith("--vgpu-") for a in c["args"])
         and not any(v["name"] == "vgpu" for v in spec["volumes"])
         and not any(m["name"] == "vgpu" for m in c["volumeMounts"]),
         "sliceIsolation.mode=off: --slice-isolation=off and no interposer directory",
         {"args": c["args"], "volumes": spec["volumes"]})


def check_value_sets():
    for name, args in VALUE_SETS.items():
        try:
            docs = chart.render(*args)
        except subprocess.CalledProcessError as e:
            t.ok(False, "%s: helm template renders" % name, e.stderr)
            continue
        t.ok(kinds(docs) == WANT[name], "%s: renders %s" % (name, ", ".join(
            "%d %s" % (n, k) for k, n in sorted(WANT[name].items()))), kinds(docs))
        r = helm("template", chart.RELEASE, chart.CHART, "--namespace", chart.NAMESPACE, *args,
                 major=3)
        v3 = [d for d in yaml.safe_load_all(r.stdout) if d] if r.returncode == 0 else None
        key = lambda d: (d["kind"], d["metadata"]["name"])  # noqa: E731 - the objects' order
        t.ok(v3 is not None and sorted(v3, key=key) == sorted(docs, key=key),
             "%s: helm v3 renders the same objects" % name, r.stderr)
    cm = chart.render(*VALUE_SETS["cert-manager"])
    cfgs = [d for d in cm if d["kind"].endswith("WebhookConfiguration")]
    serving = [d for d in cm if d["kind"] == "Certificate" and
               d["spec"].get("secretName") == "gpustack-worker-webhook-tls"]
    t.ok(len(serving) == 1 and all(
        d["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from") ==
        "gpustack-system/" + serving[0]["metadata"]["name"] for d in cfgs) and
        serving[0]["spec"]["dnsNames"][0] == "gpustack-worker-webhook.gpustack-system.svc",
        "cert-manager: the configurations' CA is injected from the mounted serving Certificate "
        "for gpustack-worker-webhook.gpustack-system.svc", [serving, cfgs[0]["metadata"]])
    ctl = next(d for d in cm if d["kind"] == "Deployment" and
               d["metadata"]["name"] == "gpustack-worker-controller")
    args = ctl["spec"]["template"]["spec"]["containers"][0]["args"]
    t.ok(not any(a.startswith("--webhook-cert") for a in args),
         "cert-manager: the controller issues no certificate", args)
    docs = chart.render()
    ctl = next(d for d in docs if d["kind"] == "Deployment" and
               d["metadata"]["name"] == "gpustack-worker-controller")
    args = ctl["spec"]["template"]["spec"]["containers"][0]["args"]
    t.ok("--webhook-cert-secret=gpustack-system/gpustack-worker-webhook-tls" in args and
         "--webhook-service=gpustack-system/gpustack-worker-webhook" in args and
         "--webhook-configurations=gpustack-worker-mutation,gpustack-worker-validation" in args
         and not any(d["kind"] in ("Certificate", "Issuer") for d in docs) and
         not any(d["metadata"].get("annotations") for d in docs
                 if d["kind"].endswith("WebhookConfiguration")),
         "defaults: tessera's certificates: the controller is told the Secret, the Service and "
         "both configurations; no cert-manager object or annotation", args)


# Stand-ins for cert-manager's and the Prometheus Operator's kinds (their CRDs are not here).
def stand_in(group, kind, plural):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "%s.%s" % (plural, group)},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"kind": kind, "plural": plural, "listKind": kind + "List",
                               "singular": kind.lower()},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]}}


def check_on_server(cp):
    cp.install_crds([os.path.join(cp.kueue_share(), "crds")])
    for d in (stand_in("cert-manager.io", "Issuer", "issuers"),
              stand_in("cert-manager.io", "Certificate", "certificates"),
              stand_in("monitoring.coreos.com", "ServiceMonitor", "servicemonitors")):
        cp.ensure(d)
    cp.wait_established(["issuers.cert-manager.io", "certificates.cert-manager.io",
                         "servicemonitors.monitoring.coreos.com"])
    for name, args in VALUE_SETS.items():
        text = chart.template(*args)
        r = cp.kubectl("apply", "--server-side", "--field-manager", "helm", "--dry-run=server",
                       "-f", "-", stdin=text)
        n = len([d for d in yaml.safe_load_all(text) if d])
        t.ok(r.returncode == 0 and r.stdout.count("(server dry run)") == n,
             "%s: the API server accepts all %d rendered objects (server-side dry run)" %
             (name, n), r.stdout[-2000:] + r.stderr[-3000:])

    install_upgrade_uninstall(cp)


def install_upgrade_uninstall(cp):
    def helm_cp(*args, major=4):
        return helm(*args, "--namespace", chart.NAMESPACE, "--kubeconfig", cp.kubeconfig,
                    major=major)

    def runtime_class():
        r = cp.kubectl("get", "runtimeclass", "nvidia", "-o", "json")
        return json.loads(r.stdout) if r.returncode == 0 else None

    r = helm_cp("install", chart.RELEASE, chart.CHART)
    t.ok(r.returncode == 0 and "STATUS: deployed" in r.stdout and "What to check next" in r.stdout,
         "helm install with the defaults: deployed, NOTES say what to check next",
         r.stdout[-1500:] + r.stderr[-3000:])
    manifest = helm_cp("get", "manifest", chart.RELEASE).stdout
    missing = []
    for d in yaml.safe_load_all(manifest):
        if not d:
            continue
        group = d["apiVersion"].split("/")[0] if "/" in d["apiVersion"] else ""
        res = d["kind"].lower() + ("." + group if group else "")
        if cp.kubectl("get", res, d["metadata"]["name"], "-n", chart.NAMESPACE).returncode != 0:
            missing.append("%s/%s" % (d["kind"], d["metadata"]["name"]))
    t.ok(manifest and not missing, "every object of the release reads back", missing)
    t.ok(runtime_class() is not None, "no RuntimeClass nvidia before: the release made one")

    r = helm_cp("upgrade", chart.RELEASE, chart.CHART, "--set", "webhook.replicas=3")
    dep = json.loads(cp.kubectl("get", "deployment", "gpustack-worker-webhook", "-n",
                                chart.NAMESPACE, "-o", "json").stdout or "{}")
    t.ok(r.returncode == 0 and dep.get("spec", {}).get("replicas") == 3 and
         runtime_class() is not None,
         "helm upgrade --set webhook.replicas=3: 3 replicas, its own RuntimeClass kept",
         r.stderr[-3000:])

    r = helm_cp("uninstall", chart.RELEASE)
    crds = cp.kubectl("get", "crd", "instancetypes.worker.gpustack.ai")
    gone = cp.kubectl("get", "deployment", "gpustack-worker-webhook", "-n", chart.NAMESPACE)
    t.ok(r.returncode == 0 and crds.returncode == 0 and gone.returncode != 0 and
         runtime_class() is None,
         "helm uninstall: the CRDs stay (and so every InstanceType), the rest is gone",
         r.stderr[-3000:])

    cp.ensure({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
               "metadata": {"name": "nvidia", "labels": {"owner": "gpu-operator"}},
               "handler": "nvidia"})
    r = helm_cp("install", chart.RELEASE, chart.CHART, major=3)
    rc = runtime_class() or {}
    t.ok(r.returncode == 0 and rc.get("metadata", {}).get("labels") == {"owner": "gpu-operator"}
         and "meta.helm.sh/release-name" not in rc["metadata"].get("annotations", {}),
         "helm v3 install over the kept CRDs with a RuntimeClass nvidia already there (the GPU "
         "Operator's): succeeds and leaves it alone", r.stderr[-3000:])
    r = helm_cp("upgrade", chart.RELEASE, chart.CHART, "--set", "controller.replicas=1", major=3)
    dep = json.loads(cp.kubectl("get", "deployment", "gpustack-worker-controller", "-n",
                                chart.NAMESPACE, "-o", "json").stdout or "{}")
    t.ok(r.returncode == 0 and dep.get("spec", {}).get("replicas") == 1,
         "helm v3 upgrade --set controller.replicas=1: 1 replica", r.stderr[-3000:])
    r = helm_cp("uninstall", chart.RELEASE, major=3)
    t.ok(r.returncode == 0 and runtime_class() is not None and
         cp.kubectl("get", "crd", "instancetypes.worker.gpustack.ai").returncode == 0,
         "helm v3 uninstall: the CRDs and the foreign RuntimeClass stay", r.stderr[-3000:])


def main():
    tessera = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.environ["TSR_TESSERA"])
    try:
        check_static(tessera)
        check_value_sets()
    except Exception:  # noqa: BLE001 - reported as a failed check
        t.crash("chart")
    on_control_plane(t, "chart", check_on_server, kueue=False, scheduler=False,
                     controller_manager=False)
    sys.exit(t.done())


if __name__ == "__main__":
    main()
