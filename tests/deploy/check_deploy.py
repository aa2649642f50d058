#!/usr/bin/env python3
"""check_deploy.py TESSERA SOURCE_DIR - the Helm chart (deploy/chart/tessera, rendered by the
pinned helm with cert-manager's API served) agrees with the binary, the source and Kubernetes.

Every object it renders is deserialized by python3-kubernetes into its typed model (required
fields enforced by the client's own validation). The webhook configurations list exactly the
routes `tessera webhook --list-routes` serves, mutating ones in the binary's order, each with the
selection upstream registers (spec/upstream-behavior.md §2, §6, §10, §11; kubernetes-contracts
§1.4): admissionReviewVersions [v1], sideEffects None, timeoutSeconds 10, matchPolicy
Equivalent, failurePolicy Fail except the Workload pin (Ignore), the Pod objectSelectors and the
Workload matchCondition. gpustack-worker-mutation sorts before Kueue's configuration; the
clientConfig Service exists, its port reaches the container's webhook port, the serving
certificate names <svc>.<ns>.svc, and the ClusterRole lets the cache list and watch every kind
it reads.

The NVIDIA device manager's DaemonSet is checked the same way: its name is the
one the simulator's runbooks restart; its args and GPUSTACK_* variables are ones
`tessera device-manager` accepts (the binary parses them); NODE_NAME comes from the downward API
into --node-name; the kubelet's device-plugin directory, pod-resources socket and pods directory
the flags name are hostPath mounts of those very paths (writable where the binary writes), and so
is the slice interposer's install directory (--vgpu-host-dir naming it; none with
sliceIsolation.mode off; the image carrying the library --vgpu-library reads); the
container gets CAP_SYS_ADMIN (or is privileged) and the NVIDIA runtime's driver and MIG devices;
it is placed on NVIDIA nodes and tolerates every taint. Its ClusterRole grants exactly the calls
src/devicemanager/ makes (every tsr_kube_client_* call there is in CALLS, so a new call fails
here until the role and the table say what it needs).

The controller's Deployment: two replicas, args `tessera controller` accepts,
its Lease identity and namespace from the downward API, probes on its probe port; its ClusterRole
grants exactly what src/controller/ calls (CONTROLLER_CALLS, checked against the source like
CALLS) plus list and watch of what its caches read, and its Role in gpustack-system exactly the
Lease calls.

The binaries' args are parsed by the binaries themselves: `tessera <args> --help` exits 0 only
when every flag before --help is known and its value valid. Prints TAP.
"""

import glob
import json
import os
import re
import subprocess
import sys

from kubernetes import client

results = []


def ok(cond, name, detail=""):
    results.append(bool(cond))
    print("%s %d - %s" % ("ok" if cond else "not ok", len(results), name))
    if not cond and detail:
        print("#   %s" % (detail,))


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
    ("rbac.authorization.k8s.io/v1", "Role"): "V1Role",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "V1RoleBinding",
    ("apps/v1", "Deployment"): "V1Deployment",
    ("apps/v1", "DaemonSet"): "V1DaemonSet",
    ("policy/v1", "PodDisruptionBudget"): "V1PodDisruptionBudget",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("node.k8s.io/v1", "RuntimeClass"): "V1RuntimeClass",
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): "V1CustomResourceDefinition",
}

# What the webhook's cache lists and watches (src/kube/cache.c).
WATCHED = {("worker.gpustack.ai", "instancetypes"), ("worker.gpustack.ai", "kvcachepoolbindings"),
           ("worker.gpustack.ai", "kvcachepools"), ("worker.gpustack.ai", "kvcachebackends"),
           ("kueue.x-k8s.io", "localqueues"), ("kueue.x-k8s.io", "clusterqueues"),
           ("gpustack.ai", "settings")}

# What the device manager asks of the API server, by (source file, kube client call): the
# (apiGroup, resource, verb) each needs. The table is checked against the calls in the source.
CALLS = {
    # pods_now: GET /api/v1/pods?fieldSelector=spec.nodeName=<node> (all namespaces)
    ("daemon.c", "list_all"): {("", "pods", "list")},
    # record: merge PATCH /api/v1/namespaces/<ns>/pods/<name> (the allocation annotation)
    ("daemon.c", "patch"): {("", "pods", "patch")},
    # node_sync: GET /api/v1/nodes/<node>; devices_read: GET .../devices/<node>
    ("publish.c", "get"): {("", "nodes", "get"), ("worker.gpustack.ai", "devices", "get")},
    # node_sync: PATCH nodes/<node>/status and nodes/<node>; devices_write: devices/<node>
    # and devices/<node>/status
    ("publish.c", "patch"): {("", "nodes/status", "patch"), ("", "nodes", "patch"),
                             ("worker.gpustack.ai", "devices", "patch"),
                             ("worker.gpustack.ai", "devices/status", "patch")},
    # devices_read: POST /apis/worker.gpustack.ai/v1alpha1/devices when missing
    ("publish.c", "request"): {("worker.gpustack.ai", "devices", "create")},
    # post_event: POST /api/v1/namespaces/<ns>/events (refusals, carve failures, recovery)
    ("daemon.c", "event_post"): {("", "events", "create")},
}


# What the controller's caches list and watch (src/controller/controller.c CTL_RESOURCES).
CONTROLLER_WATCHED = {("", "nodes"), ("", "namespaces"), ("worker.gpustack.ai", "devices"),
                      ("kueue.x-k8s.io", "workloads"), ("kueue.x-k8s.io", "clusterqueues"),
                      ("kueue.x-k8s.io", "localqueues"), ("kueue.x-k8s.io", "resourceflavors"),
                      ("kueue.x-k8s.io", "topologies"), ("kueue.x-k8s.io", "admissionchecks"),
                      ("worker.gpustack.ai", "instancetypes"), ("gpustack.ai", "settings"),
                      ("worker.gpustack.ai", "instances")}
CHAIN_KINDS = ("resourceflavors", "clusterqueues", "localqueues", "topologies")

# What the controller asks of the API server besides its caches, by (source file, call).
CONTROLLER_CALLS = {
    # ctl_apply (server-side apply: PATCH, a create when missing) of the chain objects, the
    # AdmissionCheck, node labels; ctl_delete of retired chain objects; ctl_event
    ("controller.c", "patch"): {("kueue.x-k8s.io", k, v) for k in CHAIN_KINDS +
                                ("admissionchecks",) for v in ("patch", "create")} |
                               {("", "nodes", "patch"), ("", "nodes/status", "patch"),
                                ("kueue.x-k8s.io", "workloads/status",
                                                         "patch"),
                                ("kueue.x-k8s.io", "admissionchecks/status", "patch"),
                                ("", "services", "patch"), ("", "services", "create")},
    # ctl_put_status: the InstanceTypes' and Instances' status PUT
    ("controller.c", "request"): {("kueue.x-k8s.io", k, "delete") for k in CHAIN_KINDS} |
                                 {("", "pods", "delete"),
                                  ("", "services", "delete"),
                                  ("worker.gpustack.ai", "instancetypes/status", "update"),
                                  ("worker.gpustack.ai", "instances/status", "update")},
    # ctl_event: POST /api/v1/namespaces/<ns>/events (kube/event.h)
    ("controller.c", "event_post"): {("", "events", "create")},
    # leader.c: GET the Lease, POST it when missing, PUT it to renew, take over or release
    ("leader.c", "get"): {("coordination.k8s.io", "leases", "get")},
    ("leader.c", "request"): {("coordination.k8s.io", "leases", "create"),
                              ("coordination.k8s.io", "leases", "update")},
    # chain_reconciler.c: merge PATCH stopPolicy HoldAndDrain on a retired ClusterQueue
    ("chain_reconciler.c", "patch"): {("kueue.x-k8s.io", "clusterqueues", "patch")},
    # instancetype_reconciler.c: POST an authored InstanceType; JSON-patch its finalizer
    ("instancetype_reconciler.c", "request"): {("worker.gpustack.ai", "instancetypes", "create")},
    ("instancetype_reconciler.c", "patch"): {("worker.gpustack.ai", "instancetypes", "patch")},
    # instance_reconciler.c: an Instance's Pod and Service read (GET), the RuntimeClass looked
    # up before a Pod is made; the Pod created (POST); spec.stop JSON-patched (the Service
    # applied, the status PUT, the Pod and a stale Service deleted through controller.c)
    ("instance_reconciler.c", "get"): {("", "pods", "get"), ("", "services", "get"),
                                       ("node.k8s.io", "runtimeclasses", "get")},
    ("instance_reconciler.c", "request"): {("", "pods", "create")},
    ("instance_reconciler.c", "patch"): {("worker.gpustack.ai", "instances", "patch")},
    # node_devices_check.c: the judged nodes' Pods, uncached (fieldSelector spec.nodeName)
    ("node_devices_check.c", "list_all"): {("", "pods", "list")},
    # webhook_certs.c (--webhook-cert-secret): the webhook's Secret read, created when missing,
    # PUT when renewed; the webhook configurations read and their caBundles JSON-patched
    ("webhook_certs.c", "get"): {("", "secrets", "get"),
                                 ("admissionregistration.k8s.io", "mutatingwebhookconfigurations",
                                  "get"),
                                 ("admissionregistration.k8s.io",
                                  "validatingwebhookconfigurations", "get")},
    ("webhook_certs.c", "request"): {("", "secrets", "create"), ("", "secrets", "update")},
    ("webhook_certs.c", "patch"): {("admissionregistration.k8s.io",
                                    "mutatingwebhookconfigurations", "patch"),
                                   ("admissionregistration.k8s.io",
                                    "validatingwebhookconfigurations", "patch")},
}


def client_calls(src, module="devicemanager"):
    """(file, call) for every tsr_kube_client_<call>( and tsr_kube_event_post( (call "event_post",
    kube/event.h) in src/<module>/*.c."""
    found = set()
    for path in glob.glob(os.path.join(src, "src", module, "*.c")):
        with open(path) as f:
            text = f.read()
        for m in re.finditer(r"\btsr_kube_(?:client_(\w+)|(event_post))\s*\(", text):
            found.add((os.path.basename(path), m.group(1) or m.group(2)))
    return found


def granted(by_kind, sa_ns, sa_name, namespaced=False):
    """(group, resource, verb) the ClusterRoles bound to a service account grant; with
    namespaced, what the Roles bound in its own namespace grant instead."""
    role_kind, binding_kind = ("Role", "RoleBinding") if namespaced else \
        ("ClusterRole", "ClusterRoleBinding")
    roles = {(r["metadata"].get("namespace"), r["metadata"]["name"]): r
             for r in by_kind.get(role_kind, [])}
    out = set()
    for b in by_kind.get(binding_kind, []):
        ns = b["metadata"].get("namespace")
        if namespaced and ns != sa_ns:
            continue
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == sa_name and
                   s.get("namespace") == sa_ns for s in b.get("subjects", [])):
            continue
        for rule in roles.get((ns, b["roleRef"]["name"]), {}).get("rules", []):
            out |= {(g, r, v) for g in rule.get("apiGroups", [])
                    for r in rule.get("resources", []) for v in rule.get("verbs", [])}
    return out


def container_env(container, values):
    """The container's env as the kubelet would set it (fieldRefs from values)."""
    env = {}
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = e["value"]
        else:
            env[e["name"]] = values.get(e["valueFrom"]["fieldRef"]["fieldPath"], "x")
    return env


def expand(arg, env):
    """$(VAR) references expanded as the kubelet expands them in args."""
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), arg)


def parses(tessera, container, values):
    """(ok, detail): the binary accepts the container's args and environment."""
    env = container_env(container, values)
    args = [expand(a, env) for a in container.get("args", [])]
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSTACK_")}
    run_env.update(env)
    r = subprocess.run([tessera, *args, "--help"], capture_output=True, text=True, env=run_env)
    stray = [a for a in args[1:] if not a.startswith("--")]
    return r.returncode == 0 and not stray, (r.returncode, r.stderr.strip()[:300], stray)


def flag(args, name, default):
    for a in args:
        if a.startswith("--%s=" % name):
            return a.split("=", 1)[1]
    return default


def help_default(help_text, name):
    """The default the binary's --help states for --name ("(default /path)")."""
    m = re.search(r"--%s\b.*?\(default ([^)\s]+)\)" % re.escape(name), help_text, re.S)
    return m.group(1) if m else None


def mounted_host_path(pod_spec, container, path):
    """The volumeMount covering path and the hostPath of its volume, or (None, None)."""
    vols = {v["name"]: v for v in pod_spec.get("volumes", [])}
    best = None
    for m in container.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/")
        if path == mp or path.startswith(mp + "/"):
            if best is None or len(mp) > len(best["mountPath"].rstrip("/")):
                best = m
    if best is None:
        return None, None
    host = vols.get(best["name"], {}).get("hostPath", {}).get("path")
    return best, host


def check_device_manager(tessera, src, by_kind):
    sets = [d for d in by_kind.get("DaemonSet", [])
            if d["metadata"]["name"].startswith("gpustack-operator-device-manager-")]
    ok(len(sets) == 1, "one device-manager DaemonSet", [d["metadata"]["name"] for d in sets])
    if len(sets) != 1:
        return
    ds = sets[0]
    with open(os.path.join(src, "src", "sim", "commands.c")) as f:
        m = re.search(r'#define DEVICE_MANAGER_DS "ds/([^"]+)"', f.read())
    ok(m and ds["metadata"]["name"] == m.group(1) and
       ds["metadata"]["namespace"] == "gpustack-system",
       "the DaemonSet is gpustack-system's ds/%s, the one the runbooks restart" %
       (m.group(1) if m else "?"), ds["metadata"])
    pod_spec = ds["spec"]["template"]["spec"]
    container = pod_spec["containers"][0]
    args = container.get("args", [])
    env = container.get("env", [])

    # flags and environment, as the binary reads them
    good, detail = parses(tessera, container, {"spec.nodeName": "node-a"})
    ok(args[:1] == ["device-manager"] and good,
       "the device manager's args and environment are ones `tessera device-manager` accepts",
       detail)
    with open(os.path.join(src, "src", "cli", "device_manager_cmd.c")) as f:
        cmd_src = f.read()
    unknown = [e["name"] for e in env if e["name"].startswith("GPUSTACK_") and
               '"%s"' % e["name"] not in cmd_src]
    ok(not unknown, "every GPUSTACK_* variable set is one the device manager reads", unknown)
    node_env = [e for e in env if e["name"] == "NODE_NAME"]
    ok("--node-name=$(NODE_NAME)" in args and len(node_env) == 1 and
       node_env[0].get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName",
       "--node-name is $(NODE_NAME), the downward API's spec.nodeName", node_env)

    # the kubelet's paths, mounted from the host at the same paths
    help_text = subprocess.run([tessera, "device-manager", "--help"], check=True,
                               capture_output=True, text=True).stdout
    paths = {
        "plugin-dir": (flag(args, "plugin-dir", help_default(help_text, "plugin-dir")), True),
        "pods-dir": (flag(args, "pods-dir", help_default(help_text, "pods-dir")), True),
        "pod-resources-socket": (flag(args, "pod-resources-socket",
                                      help_default(help_text, "pod-resources-socket")), False),
    }
    for name, (path, writes) in paths.items():
        mount, host = mounted_host_path(pod_spec, container, path or "")
        sub = os.path.relpath(path, mount["mountPath"]) if mount else None
        same = host is not None and os.path.normpath(os.path.join(host, sub)) == path
        ok(path and mount and same and (not writes or not mount.get("readOnly")),
           "--%s %s is a hostPath mount of the same host path%s" %
           (name, path, ", writable" if writes else ""), (mount, host))
    pods_mount, _ = mounted_host_path(pod_spec, container, paths["pods-dir"][0] or "")
    ok(pods_mount and pods_mount.get("mountPropagation") in ("HostToContainer", "Bidirectional"),
       "the pods directory receives the host's mounts (no deleted Pod's volume kept mounted)",
       pods_mount)

    check_slice_isolation(src, pod_spec, container, args, help_text)

    # what NVML's MIG operations need
    sc = container.get("securityContext", {})
    privileged = bool(sc.get("privileged"))
    ok(privileged or "SYS_ADMIN" in sc.get("capabilities", {}).get("add", []),
       "the container may create and destroy MIG instances (CAP_SYS_ADMIN or privileged)", sc)
    ok(sc.get("runAsUser", 0) == 0 and not sc.get("runAsNonRoot"),
       "it runs as root, the owner of the kubelet's directories", sc)
    values = {e["name"]: e.get("value") for e in env}
    caps = (values.get("NVIDIA_DRIVER_CAPABILITIES") or "").split(",")
    ok(privileged or (pod_spec.get("runtimeClassName") == "nvidia" and
                      values.get("NVIDIA_VISIBLE_DEVICES") == "all" and
                      ("utility" in caps or "all" in caps) and
                      values.get("NVIDIA_MIG_CONFIG_DEVICES") == "all" and
                      values.get("NVIDIA_MIG_MONITOR_DEVICES") == "all"),
       "the NVIDIA runtime mounts NVML and the MIG capability devices (runtimeClassName nvidia, "
       "NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES utility, NVIDIA_MIG_*_DEVICES)",
       {"runtimeClassName": pod_spec.get("runtimeClassName"), "env": values})

    # placement on NVIDIA nodes
    terms = (pod_spec.get("affinity", {}).get("nodeAffinity", {})
             .get("requiredDuringSchedulingIgnoredDuringExecution", {})
             .get("nodeSelectorTerms", []))
    keys = [e["key"] for t in terms for e in t.get("matchExpressions", [])]
    keys += list(pod_spec.get("nodeSelector", {}))
    ok(keys and all("10de" in k or "nvidia" in k.lower() or k.endswith("vendor_id")
                    for k in keys),
       "it is placed only on NVIDIA GPU nodes", keys)
    ok(any(t.get("operator") == "Exists" and not t.get("key") and not t.get("effect")
           for t in pod_spec.get("tolerations", [])),
       "it tolerates every taint (as upstream's device manager)", pod_spec.get("tolerations"))

    # RBAC: exactly the calls the code makes
    found = client_calls(src)
    ok(found == set(CALLS), "CALLS lists every API call in src/devicemanager/",
       {"in source, not in CALLS": sorted(found - set(CALLS)),
        "in CALLS, not in source": sorted(set(CALLS) - found)})
    need = set().union(*CALLS.values())
    sa = pod_spec.get("serviceAccountName")
    ok(sa and any(s["metadata"]["name"] == sa and s["metadata"]["namespace"] ==
                  ds["metadata"]["namespace"] for s in by_kind.get("ServiceAccount", [])),
       "the DaemonSet's ServiceAccount %s exists in its namespace" % sa)
    have = granted(by_kind, ds["metadata"]["namespace"], sa)
    ok(have == need, "its ClusterRole grants exactly what the device manager calls",
       {"missing": sorted(need - have), "extra": sorted(have - need)})


def check_slice_isolation(src, pod_spec, container, args, help_text):
    """The slice interposer's install directory (--vgpu-dir) is a writable hostPath mount of the
    same host path, created when missing, and --vgpu-host-dir names that host path (the mounts a
    slice's Allocate answers are the host's paths); the image carries the library where
    --vgpu-library reads it. With sliceIsolation.mode off the flag says so and nothing is
    mounted."""
    mode = flag(args, "slice-isolation", help_default(help_text, "slice-isolation"))
    vgpu_dir = flag(args, "vgpu-dir", help_default(help_text, "vgpu-dir"))
    mount, host = mounted_host_path(pod_spec, container, vgpu_dir or "")
    vols = {v["name"]: v for v in pod_spec.get("volumes", [])}
    kind = vols.get(mount["name"], {}).get("hostPath", {}).get("type") if mount else None
    ok(mode == "preload" and mount and mount["mountPath"] == vgpu_dir and host == vgpu_dir and
       not mount.get("readOnly") and kind == "DirectoryOrCreate" and
       flag(args, "vgpu-host-dir", vgpu_dir) == host,
       "slice isolation (preload by default): --vgpu-dir %s is a writable hostPath mount of the "
       "same host path (DirectoryOrCreate), --vgpu-host-dir names it" % vgpu_dir,
       {"mode": mode, "mount": mount, "host": host, "type": kind})
    library = flag(args, "vgpu-library", help_default(help_text, "vgpu-library"))
    with open(os.path.join(src, "tools", "image.sh")) as f:
        image = f.read()
    ok(library and library in image, "the image carries the interposer at --vgpu-library %s "
       "(tools/image.sh)" % library, library)
    import chart
    off = [d for d in chart.render("--api-versions", "cert-manager.io/v1", "--set",
                                   "deviceManager.sliceIsolation.mode=off")
           if d["kind"] == "DaemonSet" and
           d["metadata"]["name"].startswith("gpustack-operator-device-manager-")]
    spec = off[0]["spec"]["template"]["spec"] if off else {}
    c = (spec.get("containers") or [{}])[0]
    ok(off and "--slice-isolation=off" in c.get("args", []) and
       not any(a.startswith("--vgpu-") for a in c.get("args", [])) and
       mounted_host_path(spec, c, vgpu_dir or "") == (None, None) and
       not any(v.get("hostPath", {}).get("path") == host for v in spec.get("volumes", [])),
       "sliceIsolation.mode=off: --slice-isolation=off, no interposer directory mounted",
       {"args": c.get("args"), "volumes": spec.get("volumes")})


def check_controller(tessera, src, by_kind):
    deps = [d for d in by_kind.get("Deployment", [])
            if d["metadata"]["name"] == "gpustack-worker-controller"]
    ok(len(deps) == 1 and deps[0]["metadata"]["namespace"] == "gpustack-system" and
       deps[0]["spec"]["replicas"] >= 2,
       "the controller's Deployment runs two replicas in gpustack-system (one leads, one stands "
       "by)")
    if len(deps) != 1:
        return
    dep = deps[0]
    pod_spec = dep["spec"]["template"]["spec"]
    container = pod_spec["containers"][0]
    args = container.get("args", [])
    good, detail = parses(tessera, container, {"metadata.name": "controller-0",
                                               "metadata.namespace": "gpustack-system"})
    ok(args[:1] == ["controller"] and good,
       "the controller's args and environment are ones `tessera controller` accepts", detail)
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
           for e in container.get("env", [])}
    ok(env.get("POD_NAME") == "metadata.name" and env.get("POD_NAMESPACE") ==
       "metadata.namespace", "its Lease identity and namespace come from the downward API", env)
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    probe_port = int(flag(args, "probe-port", "8081"))
    ok(ports.get(container["readinessProbe"]["httpGet"]["port"]) == probe_port and
       container["readinessProbe"]["httpGet"]["path"] == "/readyz" and
       container["livenessProbe"]["httpGet"]["path"] == "/healthz",
       "its probes reach /readyz and /healthz on --probe-port", container)

    found = client_calls(src, "controller")
    ok(found == set(CONTROLLER_CALLS), "CONTROLLER_CALLS lists every API call in src/controller/",
       {"in source, not in CONTROLLER_CALLS": sorted(found - set(CONTROLLER_CALLS)),
        "in CONTROLLER_CALLS, not in source": sorted(set(CONTROLLER_CALLS) - found)})
    sa = pod_spec.get("serviceAccountName")
    ns = dep["metadata"]["namespace"]
    # the Lease and the webhook's Secret live in the release namespace: a Role, not the ClusterRole
    lease = {p for p in set().union(*CONTROLLER_CALLS.values())
             if p[0] == "coordination.k8s.io" or p[1] == "secrets"}
    need = set().union(*CONTROLLER_CALLS.values()) - lease
    need |= {(g, r, v) for g, r in CONTROLLER_WATCHED for v in ("list", "watch")}
    have = granted(by_kind, ns, sa)
    ok(have == need, "its ClusterRole grants exactly what the controller calls and watches",
       {"missing": sorted(need - have), "extra": sorted(have - need)})
    have_ns = granted(by_kind, ns, sa, namespaced=True)
    ok(have_ns == lease, "its Role in %s grants exactly the Lease and Secret calls" % ns,
       {"missing": sorted(lease - have_ns), "extra": sorted(have_ns - lease)})


def main():
    tessera, src = sys.argv[1:3]
    sys.path.insert(0, os.path.join(src, "tests", "cluster"))
    import chart
    # cert-manager's API served: the chart's cert-manager certificates (test_chart.py renders
    # the other value sets).
    docs = [("%s %s" % (d["kind"], d["metadata"]["name"]), d)
            for d in chart.render("--api-versions", "cert-manager.io/v1")]
    api = client.ApiClient()
    for name, d in docs:
        model = MODELS.get((d["apiVersion"], d["kind"]))
        if model is None:  # cert-manager's and Kueue's kinds: no model in the Kubernetes client
            ok(d["apiVersion"] in ("cert-manager.io/v1", "kueue.x-k8s.io/v1beta2"),
               "%s: a cert-manager or Kueue object" % name)
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
    webhook = next(d for d in by_kind["Deployment"]
                   if d["metadata"]["name"] == "gpustack-worker-webhook")
    pod_spec = webhook["spec"]["template"]["spec"]
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

    grants = granted(by_kind, webhook["metadata"]["namespace"], pod_spec["serviceAccountName"])
    allowed = {(g, r) for g, r, v in grants if v == "list"} & \
        {(g, r) for g, r, v in grants if v == "watch"}
    ok(WATCHED <= allowed, "the ClusterRole lets the cache list and watch what it reads",
       WATCHED - allowed)
    good, detail = parses(tessera, container, {"metadata.namespace": "gpustack-system"})
    ok(container["args"][0] == "webhook" and good,
       "the webhook's args are ones `tessera webhook` accepts", detail)

    check_device_manager(tessera, src, by_kind)
    check_controller(tessera, src, by_kind)
    print("1..%d" % len(results))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
