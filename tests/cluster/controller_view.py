"""controller_view.py - what the controller suites read back from the test control plane, written
once: the controller's Lease and holder, a Workload by the Pod that owns it, and the
gpustack-node-devices check's entry and a condition on such objects."""
KQ = "kueue.x-k8s.io"
KQ_API = "/apis/%s/v1beta2" % KQ
CHECK = "gpustack-node-devices"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/gpustack-system/leases/tessera-controller"


def get(cp, path):
    """The object at path, or None when it is absent (or the request fails)."""
    try:
        return cp.api("GET", path)
    except Exception:  # noqa: BLE001 - absent
        return None


def lease(cp):
    return get(cp, LEASE)


def holder(cp):
    return ((lease(cp) or {}).get("spec") or {}).get("holderIdentity")


def condition(obj, kind):
    """The status condition of type kind, or None."""
    for c in ((obj or {}).get("status") or {}).get("conditions", []):
        if c.get("type") == kind:
            return c
    return None


def workload_of(cp, ns, pod):
    """The Workload Kueue made for Pod ns/pod (its managedFields dropped), or None."""
    for w in cp.api("GET", "%s/namespaces/%s/workloads" % (KQ_API, ns))["items"]:
        if any(r["kind"] == "Pod" and r["name"] == pod
               for r in w["metadata"].get("ownerReferences", [])):
            w["metadata"].pop("managedFields", None)  # only noise in a failure's detail
            return w
    return None


def check_state(w):
    """The Workload's gpustack-node-devices entry in status.admissionChecks, or None."""
    for c in ((w or {}).get("status") or {}).get("admissionChecks", []):
        if c.get("name") == CHECK:
            return c
    return None


def check_stopped(t, ctls, rcs, last=60):
    """The suites' closing checks on their controller replicas (rcs: the exit statuses of those
    still alive when stopped; one that ended on its own fails tap.on_control_plane's check): each
    exited 0 on SIGTERM and none logged an error; on any failure of t, each replica's last lines
    are noted."""
    t.ok(all(rc == 0 for rc in rcs), "the live controller exits 0 on SIGTERM",
         [c.log() for c in ctls])
    logs = "\n".join(line for c in ctls for line in c.lines)
    t.ok("level=error" not in logs, "no controller logged an error",
         "\n".join(line for line in logs.splitlines() if "level=error" in line)[:3000])
    if t.failed():
        for c in ctls:
            t.note("---- %s ----\n%s" % (c.identity, c.log(last)))
