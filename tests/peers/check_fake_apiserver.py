#!/usr/bin/env python3
"""check_fake_apiserver.py - proves fake_apiserver.py realistic with a client nobody here wrote:
python3-kubernetes (Debian's 22.6), loading a kubeconfig the way kubectl users do.

Starts the fake on loopback with certificates from gen_certs.sh, then checks, printing TAP:
  kubeconfig       config.load_kube_config reads our kubeconfig (certificate-authority-data,
                   token) and builds a working client
  create, get      CustomObjectsApi create/get of an InstanceType (201 then 200), a 404 as
                   ApiException 404, a duplicate as 409
  list             items and metadata.resourceVersion; a namespaced LocalQueue listed across all
                   namespaces and in its namespace; labelSelector
  pages            limit + continue walk one snapshot, even when objects change between pages
  patch, replace   merge-patch via the client; replace with a stale resourceVersion is 409
  watch            kubernetes.watch.Watch streams ADDED, MODIFIED, DELETED from a resourceVersion
                   in order, with each object's resourceVersion
  bookmarks        allow_watch_bookmarks gives BOOKMARK events carrying a resourceVersion
  timeout          timeout_seconds ends the stream cleanly
  410 event        after a compaction, a watch from an old resourceVersion raises ApiException
                   410 (Watch's own ERROR-event handling), and the raw stream shows the Status
  410 http         in "http" mode the watch request itself fails with ApiException 410
  dropped watch    /_test/drop cuts a live stream: the client sees it end (or break)
  401              a wrong token is ApiException 401
and, through CoreV1Api and CustomObjectsApi, what the node agent (the device manager) uses:
  discovery        /api/v1 lists pods, pods/status, nodes, nodes/status; the worker group lists
                   devices and devices/status
  pods             create defaults (uid, creationTimestamp, phase Pending); PodList items
                   without kind; fieldSelector spec.nodeName=/!=, metadata.*, status.phase
                   (AND of terms) on list_pod_for_all_namespaces and list_namespaced_pod; an
                   unsupported field is 400 "field label not supported" on list and watch
  pod watch        a fieldSelector watch sees a pod that comes to match as ADDED and one that
                   stops matching as DELETED; an initial-state watch lists only matches
  pod patches      patch_namespaced_pod (the client sends strategic-merge-patch+json for a
                   dict) sets and nulls annotations, ignores status; containers merge by
                   name; patch_namespaced_pod_status keeps only status, conditions merge by type
                   and $patch: delete drops one
  delete           delete_namespaced_pod(grace_period_seconds=0) removes at once; a failed
                   uid precondition is 409
  nodes            patch_node_status with a dict (strategic merge: extended resources added as
                   strings, null and $patch delete/replace) and with a list (json-patch, ~1);
                   merge-patch via call_api; patch_node ignores status; replace_node_status
                   keeps only status; list_node fieldSelector
  devices          CustomObjectsApi Devices: status dropped on create, status subresource
                   get/patch/replace, main patch ignores status, strategic merge is 415
and what `tessera controller` uses besides:
  discovery        kueue.x-k8s.io/v1beta2 lists workloads and admissionchecks with their
                   status, resourceflavors and topologies without; coordination.k8s.io Leases
  namespaces       create sets phase Active; Events are created with generateName
  leases           CoordinationV1Api create, replace with a stale resourceVersion is 409
  workloads        status dropped on create; server-side apply of status.admissionChecks on
                   workloads/status as a field manager merges by name beside another
                   writer's entry; a field the manager applied before and leaves out is
                   removed, the other's stay; a stale resourceVersion or another uid in the
                   apply body is 409; apply on the status of a missing Workload is 404; a
                   ResourceFlavor has no status subresource (404)
Skips (TAP "1..0 # SKIP") when the kubernetes module or openssl is missing.
"""

import base64
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))

try:
    import kubernetes
    from kubernetes import client, config, watch
    from kubernetes.client.rest import ApiException
except ImportError:
    print("1..0 # SKIP python3-kubernetes is not installed")
    sys.exit(0)
if not shutil.which("openssl"):
    print("1..0 # SKIP openssl is not installed")
    sys.exit(0)

IT = ("worker.gpustack.ai", "v1alpha1", "instancetypes")
DEV = ("worker.gpustack.ai", "v1alpha1", "devices")
SMP = "application/strategic-merge-patch+json"
LQ = ("kueue.x-k8s.io", "v1beta2", "localqueues")

n_tests = 0
n_failed = 0


def ok(cond, what):
    global n_tests, n_failed
    n_tests += 1
    if cond:
        print("ok %d - %s" % (n_tests, what))
    else:
        n_failed += 1
        print("not ok %d - %s" % (n_tests, what))
    sys.stdout.flush()
    return cond


def instancetype(name, labels=None, n=1):
    return {"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "InstanceType",
            "metadata": {"name": name, "labels": labels or {}}, "spec": {"n": n}}


class Fake:
    def __init__(self, tmp):
        self.tmp = tmp
        subprocess.run(["sh", os.path.join(HERE, "gen_certs.sh"), tmp], check=True)
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "fake_apiserver.py"),
             "--cert", os.path.join(tmp, "server.crt"), "--key", os.path.join(tmp, "server.key"),
             "--token", "t1", "--bookmark-interval", "0.2"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        line = self.proc.stdout.readline().decode()
        if not line.startswith("READY "):
            raise RuntimeError("fake did not start: %r" % line)
        self.port = int(line.split()[1])
        self.url = "https://127.0.0.1:%d" % self.port
        self.ctx = ssl.create_default_context(cafile=os.path.join(tmp, "ca.crt"))

    def control(self, what, body=None):
        data = json.dumps(body or {}).encode() if body is not None or what != "stats" else None
        req = urllib.request.Request(self.url + "/_test/" + what, data=data,
                                     method="GET" if data is None else "POST")
        with urllib.request.urlopen(req, context=self.ctx, timeout=10) as r:
            return json.loads(r.read())

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def write_kubeconfig(fake, token):
    with open(os.path.join(fake.tmp, "ca.crt"), "rb") as f:
        ca = base64.b64encode(f.read()).decode()
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "fake",
           "clusters": [{"name": "fake", "cluster": {"server": fake.url,
                                                     "certificate-authority-data": ca}}],
           "users": [{"name": "u", "user": {"token": token}}],
           "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u",
                                                     "namespace": "team-a"}}]}
    path = os.path.join(fake.tmp, "kubeconfig-%s" % token)
    with open(path, "w") as f:
        json.dump(cfg, f)  # JSON is YAML
    return path


def api_client_for(path):
    """A python3-kubernetes ApiClient configured from the kubeconfig at path."""
    c = client.Configuration()
    config.load_kube_config(config_file=path, client_configuration=c)
    return client.ApiClient(c)


def api_for(path):
    return client.CustomObjectsApi(api_client_for(path))


def main():
    tmp = tempfile.mkdtemp(prefix="tsr-fake-apiserver-")
    fake = Fake(tmp)
    try:
        run(fake)
        run_core(fake)
        run_controller_kinds(fake)
    finally:
        fake.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print("1..%d" % n_tests)
    return 1 if n_failed else 0


def run(fake):
    print("# python3-kubernetes %s against %s" % (kubernetes.__version__, fake.url))
    api = api_for(write_kubeconfig(fake, "t1"))
    ok(True, "kubeconfig: load_kube_config built a client")

    # create, get, 404, 409
    a = api.create_cluster_custom_object(*IT, instancetype("a", {"q": "x"}))
    ok(a["metadata"]["resourceVersion"] and a["metadata"]["uid"], "create returns the object "
       "with resourceVersion and uid")
    got = api.get_cluster_custom_object(*IT, "a")
    ok(got == a, "get returns what create returned")
    try:
        api.get_cluster_custom_object(*IT, "missing")
        ok(False, "get of a missing object raises ApiException 404")
    except ApiException as e:
        ok(e.status == 404 and json.loads(e.body)["reason"] == "NotFound",
           "get of a missing object raises ApiException 404 NotFound")
    try:
        api.create_cluster_custom_object(*IT, instancetype("a"))
        ok(False, "duplicate create raises 409")
    except ApiException as e:
        ok(e.status == 409 and json.loads(e.body)["reason"] == "AlreadyExists",
           "duplicate create raises ApiException 409 AlreadyExists")

    # list, namespaced, label selector
    api.create_cluster_custom_object(*IT, instancetype("b", {"q": "y"}))
    lq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
          "metadata": {"name": "lq1"}, "spec": {"clusterQueue": "cq"}}
    api.create_namespaced_custom_object(*LQ[:2], "team-a", LQ[2], lq)
    lst = api.list_cluster_custom_object(*IT)
    ok(lst["kind"] == "InstanceTypeList" and [i["metadata"]["name"] for i in lst["items"]] ==
       ["a", "b"] and lst["metadata"]["resourceVersion"],
       "list gives InstanceTypeList with items and metadata.resourceVersion")
    all_ns = api.list_cluster_custom_object(*LQ)
    in_ns = api.list_namespaced_custom_object(LQ[0], LQ[1], "team-a", LQ[2])
    other = api.list_namespaced_custom_object(LQ[0], LQ[1], "team-b", LQ[2])
    ok(len(all_ns["items"]) == 1 and all_ns["items"][0]["metadata"]["namespace"] == "team-a" and
       len(in_ns["items"]) == 1 and len(other["items"]) == 0,
       "LocalQueues list across all namespaces and per namespace")
    sel = api.list_cluster_custom_object(*IT, label_selector="q=y")
    ok([i["metadata"]["name"] for i in sel["items"]] == ["b"], "labelSelector filters the list")

    # pages over one snapshot
    for n in ("c", "d", "e"):
        api.create_cluster_custom_object(*IT, instancetype(n))
    p1 = api.list_cluster_custom_object(*IT, limit=2)
    api.create_cluster_custom_object(*IT, instancetype("bb"))  # lands between pages
    api.delete_cluster_custom_object(*IT, "e")
    p2 = api.list_cluster_custom_object(*IT, limit=2, _continue=p1["metadata"]["continue"])
    p3 = api.list_cluster_custom_object(*IT, limit=2, _continue=p2["metadata"]["continue"])
    names = [i["metadata"]["name"] for p in (p1, p2, p3) for i in p["items"]]
    ok(names == ["a", "b", "c", "d", "e"] and "continue" not in p3["metadata"] and
       p1["metadata"]["remainingItemCount"] == 3 and
       p2["metadata"]["resourceVersion"] == p1["metadata"]["resourceVersion"],
       "limit/continue pages one snapshot (%s)" % names)

    # patch, stale replace
    pa = api.patch_cluster_custom_object(*IT, "a", {"spec": {"n": 7}, "metadata": {
        "labels": {"q": None}}})
    ok(pa["spec"]["n"] == 7 and "q" not in pa["metadata"]["labels"] and
       pa["metadata"]["generation"] == 2, "merge patch through the client (null deletes)")
    stale = dict(a)
    try:
        api.replace_cluster_custom_object(*IT, "a", stale)
        ok(False, "replace with a stale resourceVersion raises 409")
    except ApiException as e:
        ok(e.status == 409 and json.loads(e.body)["reason"] == "Conflict",
           "replace with a stale resourceVersion raises ApiException 409 Conflict")

    # watch from a resourceVersion: ADDED, MODIFIED, DELETED in order
    rv0 = api.list_cluster_custom_object(*IT)["metadata"]["resourceVersion"]
    api.create_cluster_custom_object(*IT, instancetype("w"))
    api.patch_cluster_custom_object(*IT, "w", {"spec": {"n": 2}})
    api.delete_cluster_custom_object(*IT, "w")
    w = watch.Watch()
    seen = []
    for ev in w.stream(api.list_cluster_custom_object, *IT, resource_version=rv0,
                       timeout_seconds=5):
        seen.append((ev["type"], ev["raw_object"]["metadata"].get("name"),
                     ev["raw_object"]["metadata"]["resourceVersion"]))
        if len([s for s in seen if s[0] != "BOOKMARK"]) == 3:
            w.stop()
    types = [s[0] for s in seen if s[0] != "BOOKMARK"]
    rvs = [int(s[2]) for s in seen if s[0] != "BOOKMARK"]
    ok(types == ["ADDED", "MODIFIED", "DELETED"] and rvs == sorted(rvs) and rvs[0] > int(rv0),
       "Watch streams ADDED, MODIFIED, DELETED after the resourceVersion (%s)" % seen)

    # bookmarks
    w = watch.Watch()
    bookmarks = []
    start = time.monotonic()
    for ev in w.stream(api.list_cluster_custom_object, *IT, resource_version=rvs[-1],
                       allow_watch_bookmarks=True, timeout_seconds=5):
        if ev["type"] == "BOOKMARK":
            bookmarks.append(ev["raw_object"]["metadata"]["resourceVersion"])
            if len(bookmarks) == 2:
                w.stop()
    ok(len(bookmarks) == 2 and all(int(b) >= rvs[-1] for b in bookmarks) and
       time.monotonic() - start < 4, "allow_watch_bookmarks gives BOOKMARK events with a "
       "resourceVersion (%s)" % bookmarks)
    w = watch.Watch()
    start = time.monotonic()
    events = list(w.stream(api.list_cluster_custom_object, *IT, resource_version=rvs[-1],
                           timeout_seconds=1))
    ok(events == [] and 0.8 < time.monotonic() - start < 3,
       "timeout_seconds ends a quiet watch cleanly")

    # 410 after compaction, as an ERROR event
    old = rv0
    fake.control("compact", {})
    w = watch.Watch()
    try:
        list(w.stream(api.list_cluster_custom_object, *IT, resource_version=old,
                      timeout_seconds=5))
        ok(False, "watch from a compacted resourceVersion raises 410")
    except ApiException as e:
        ok(e.status == 410 and "too old resource version" in e.reason,
           "watch from a compacted resourceVersion raises ApiException 410 (%s)" % e.reason)
    resp = api.list_cluster_custom_object(*IT, watch=True, resource_version=old,
                                          _preload_content=False)
    raw = [json.loads(line) for line in resp.read().decode().splitlines() if line]
    ok(resp.status == 200 and len(raw) == 1 and raw[0]["type"] == "ERROR" and
       raw[0]["object"]["kind"] == "Status" and raw[0]["object"]["code"] == 410 and
       raw[0]["object"]["reason"] == "Expired",
       "the 410 arrives as 200 + one ERROR event carrying a Status")
    try:
        api.list_cluster_custom_object(*IT, limit=1, _continue=p1["metadata"]["continue"])
        ok(False, "an expired continue token is 410")
    except ApiException as e:
        ok(e.status == 410 and json.loads(e.body)["reason"] == "Expired",
           "a continue token older than the compaction is ApiException 410 Expired")
    fake.control("watch410", {"mode": "http"})
    try:
        list(watch.Watch().stream(api.list_cluster_custom_object, *IT, resource_version=old,
                                  timeout_seconds=5))
        ok(False, "http mode: watch raises 410")
    except ApiException as e:
        ok(e.status == 410, "in http mode the watch request itself is ApiException 410")
    fake.control("watch410", {"mode": "event"})

    # a relist then watch from the new resourceVersion works again
    rv1 = api.list_cluster_custom_object(*IT)["metadata"]["resourceVersion"]
    api.create_cluster_custom_object(*IT, instancetype("after"))
    w = watch.Watch()
    got = None
    for ev in w.stream(api.list_cluster_custom_object, *IT, resource_version=rv1,
                       timeout_seconds=5):
        got = ev
        w.stop()
    ok(got and got["type"] == "ADDED" and got["raw_object"]["metadata"]["name"] == "after",
       "after the 410, watching from a fresh list's resourceVersion works")

    # dropped watch
    def drop_soon():
        time.sleep(0.5)
        fake.control("drop", {})

    threading.Thread(target=drop_soon, daemon=True).start()
    w = watch.Watch()
    start = time.monotonic()
    ended = "cleanly"
    try:
        for ev in w.stream(api.list_cluster_custom_object, *IT, resource_version=rv1,
                           timeout_seconds=20):
            pass
    except Exception as e:  # urllib3 ProtocolError: the chunked body was cut short
        ended = type(e).__name__
    ok(time.monotonic() - start < 5 and fake.control("stats")["dropped"] >= 1,
       "a dropped watch ends the client's stream (%s)" % ended)

    # 401
    bad = api_for(write_kubeconfig(fake, "wrong"))
    try:
        bad.list_cluster_custom_object(*IT)
        ok(False, "a wrong token is 401")
    except ApiException as e:
        ok(e.status == 401, "a wrong token is ApiException 401")


def raw_call(api_client, method, path, body=None, ctype=None):
    """A request through the client's own transport with a Content-Type of our choosing (the
    generated methods pick theirs)."""
    headers = {"Accept": "application/json"}
    if ctype:
        headers["Content-Type"] = ctype
    return api_client.call_api(path, method, header_params=headers, body=body,
                               response_type="object", auth_settings=["BearerToken"],
                               _return_http_data_only=True)


def names(items):
    return [(i.metadata.namespace, i.metadata.name) if i.metadata.namespace
            else i.metadata.name for i in items]


def expect_error(fn, code):
    """(True, body) when fn raises ApiException with status code."""
    try:
        fn()
        return False, None
    except ApiException as e:
        try:
            body = json.loads(e.body)
        except (TypeError, ValueError):
            body = {}
        return e.status == code, body


def pod(name, node=None, labels=None, containers=None, status=None):
    p = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
         "spec": {"containers": containers or [{"name": "c", "image": "busybox"}]}}
    if node:
        p["spec"]["nodeName"] = node
    if status:
        p["status"] = status
    return p


def run_core(fake):
    ac = api_client_for(write_kubeconfig(fake, "t1"))
    core = client.CoreV1Api(ac)
    cust = client.CustomObjectsApi(ac)

    def last_patch_type():
        return fake.control("stats")["last_patch_type"]

    # discovery
    rl = core.get_api_resources()
    ok(rl.group_version == "v1" and sorted(r.name for r in rl.resources) ==
       ["events", "namespaces", "namespaces/status", "nodes", "nodes/status", "pods",
        "pods/status"] and
       [r.namespaced for r in rl.resources if r.name == "pods"] == [True] and
       [r.kind for r in rl.resources if r.name == "nodes"] == ["Node"],
       "GET /api/v1 is an APIResourceList of events, namespaces(/status), nodes(/status), "
       "pods(/status)")
    wg = raw_call(ac, "GET", "/apis/worker.gpustack.ai/v1alpha1")
    wnames = [r["name"] for r in wg["resources"]]
    ok(wg["kind"] == "APIResourceList" and "devices" in wnames and "devices/status" in wnames and
       [r["kind"] for r in wg["resources"] if r["name"] == "devices"] == ["Devices"],
       "the worker.gpustack.ai/v1alpha1 discovery lists devices and devices/status")

    # pod creation defaults
    p1 = core.create_namespaced_pod("team-a", pod("p1", "n1", containers=[
        {"name": "c", "image": "busybox"}, {"name": "d", "image": "alpine"}]))
    ok(p1.metadata.uid and len(p1.metadata.uid) == 36 and p1.metadata.uid[14] == "4" and
       p1.metadata.creation_timestamp is not None and p1.status.phase == "Pending" and
       p1.metadata.namespace == "team-a" and p1.metadata.resource_version,
       "create_namespaced_pod fills in a uuid4 uid, creationTimestamp, status.phase Pending")
    core.create_namespaced_pod("team-a", pod("p2", "n2"))
    core.create_namespaced_pod("team-b", pod("p3", "n1"))
    core.create_namespaced_pod("team-a", pod("p4"))
    p5 = core.create_namespaced_pod("team-b", pod("p5", "n1", status={"phase": "Running"}))
    ok(p5.status.phase == "Running", "a status sent on create keeps its phase (this fake's "
       "documented shortcut)")
    ok(expect_error(lambda: core.create_namespaced_pod("team-a", pod("p1")), 409)[0],
       "a duplicate pod is 409")

    # list and fieldSelector
    resp = core.list_pod_for_all_namespaces(_preload_content=False)
    rawlist = json.loads(resp.data)
    ok(rawlist["kind"] == "PodList" and rawlist["apiVersion"] == "v1" and
       len(rawlist["items"]) == 5 and all("kind" not in i and "apiVersion" not in i
                                          for i in rawlist["items"]),
       "list_pod_for_all_namespaces: PodList over namespaces, items without kind/apiVersion")
    got = names(core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1").items)
    ok(got == [("team-a", "p1"), ("team-b", "p3"), ("team-b", "p5")],
       "fieldSelector spec.nodeName=n1 across namespaces (%s)" % got)
    got = names(core.list_namespaced_pod("team-a", field_selector="spec.nodeName=").items)
    got2 = names(core.list_namespaced_pod("team-a", field_selector="spec.nodeName!=").items)
    ok(got == [("team-a", "p4")] and got2 == [("team-a", "p1"), ("team-a", "p2")],
       "spec.nodeName= is the unscheduled pods, spec.nodeName!= the scheduled (%s, %s)"
       % (got, got2))
    got = names(core.list_pod_for_all_namespaces(
        field_selector="spec.nodeName=n1,status.phase!=Running").items)
    got2 = names(core.list_pod_for_all_namespaces(
        field_selector="metadata.namespace=team-b,metadata.name=p3").items)
    got3 = names(core.list_pod_for_all_namespaces(field_selector="status.phase==Running").items)
    ok(got == [("team-a", "p1"), ("team-b", "p3")] and got2 == [("team-b", "p3")] and
       got3 == [("team-b", "p5")],
       "comma-separated terms AND; metadata.name/namespace, status.phase ==/!= (%s %s %s)"
       % (got, got2, got3))
    bad, body = expect_error(lambda: core.list_pod_for_all_namespaces(
        field_selector="spec.foo=bar"), 400)
    ok(bad and body.get("reason") == "BadRequest" and
       body.get("message") == "field label not supported: spec.foo",
       "an unsupported field label is 400 BadRequest 'field label not supported' (%s)"
       % body.get("message"))
    bad, body = expect_error(lambda: list(watch.Watch().stream(
        core.list_namespaced_pod, "team-a", field_selector="status.hostIP=x",
        timeout_seconds=2)), 400)
    ok(bad and "field label not supported: status.hostIP" in body.get("message", ""),
       "a watch with an unsupported field label is 400 too")

    # watch with a field selector: transitions in and out
    rv = core.list_pod_for_all_namespaces().metadata.resource_version
    core.create_namespaced_pod("team-a", pod("p6", "n1"))
    core.create_namespaced_pod("team-a", pod("p7", "n2"))
    core.patch_namespaced_pod_status("p1", "team-a", {"status": {"phase": "Succeeded"}})
    core.patch_namespaced_pod("p5", "team-b", {"metadata": {"labels": {"seen": "yes"}}})
    core.delete_namespaced_pod("p3", "team-b")
    w = watch.Watch()
    seen = []
    for ev in w.stream(core.list_pod_for_all_namespaces, resource_version=rv,
                       field_selector="spec.nodeName=n1,status.phase!=Succeeded",
                       timeout_seconds=5):
        seen.append((ev["type"], ev["object"].metadata.name))
        if len(seen) == 4:
            w.stop()
    ok(seen == [("ADDED", "p6"), ("DELETED", "p1"), ("MODIFIED", "p5"), ("DELETED", "p3")],
       "a fieldSelector watch: ADDED on match, DELETED when a pod stops matching, nothing for "
       "other nodes (%s)" % seen)
    w = watch.Watch()
    initial = [(ev["type"], ev["object"].metadata.name) for ev in
               w.stream(core.list_namespaced_pod, "team-a", field_selector="spec.nodeName=n2",
                        timeout_seconds=1)]
    ok(initial == [("ADDED", "p2"), ("ADDED", "p7")],
       "a watch without resourceVersion starts with only the matching pods (%s)" % initial)

    # pod patches: strategic merge from the client, status ignored on the main resource
    pa = core.patch_namespaced_pod("p2", "team-a", {"metadata": {"annotations": {
        "tessera.io/devices": "gpu-0,gpu-1", "x": "1"}}})
    ptype = last_patch_type()
    pb = core.patch_namespaced_pod("p2", "team-a", {"metadata": {"annotations": {"x": None}}})
    ok(ptype == SMP and pa.metadata.annotations == {"tessera.io/devices": "gpu-0,gpu-1",
                                                    "x": "1"} and
       pb.metadata.annotations == {"tessera.io/devices": "gpu-0,gpu-1"},
       "patch_namespaced_pod sends %s for a dict; annotations set, null removes one" % ptype)
    pc = core.patch_namespaced_pod("p2", "team-a", {"metadata": {"labels": {"l": "v"}},
                                                    "status": {"phase": "Failed"}})
    ok(pc.metadata.labels == {"l": "v"} and pc.status.phase == "Pending",
       "a patch of the pod itself ignores status")
    pd = core.patch_namespaced_pod("p1", "team-a", {"spec": {"containers": [
        {"name": "d", "image": "alpine:3"}]}})
    ok([(x.name, x.image) for x in pd.spec.containers] == [("c", "busybox"), ("d", "alpine:3")],
       "strategic merge merges spec.containers by name")
    ps = core.patch_namespaced_pod_status("p2", "team-a", {
        "metadata": {"labels": {"z": "1"}}, "status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True"}]}})
    ps = core.patch_namespaced_pod_status("p2", "team-a", {"status": {"conditions": [
        {"type": "PodScheduled", "status": "True"}]}})
    ok(ps.status.phase == "Running" and "z" not in (ps.metadata.labels or {}) and
       sorted(x.type for x in ps.status.conditions) == ["PodScheduled", "Ready"],
       "patch_namespaced_pod_status keeps only status; conditions merge by type")
    ps = core.patch_namespaced_pod_status("p2", "team-a", {"status": {"conditions": [
        {"type": "Ready", "$patch": "delete"}]}})
    ok([x.type for x in ps.status.conditions] == ["PodScheduled"],
       "a condition with $patch: delete is removed")

    # delete
    dp = core.delete_namespaced_pod("p6", "team-a", grace_period_seconds=0)
    gone = expect_error(lambda: core.read_namespaced_pod("p6", "team-a"), 404)
    ok(dp.metadata.name == "p6" and gone[0] and gone[1].get("message") == 'pods "p6" not found',
       "delete_namespaced_pod(grace_period_seconds=0) removes the pod at once (%s)"
       % gone[1].get("message"))
    conflict = expect_error(lambda: core.delete_namespaced_pod(
        "p7", "team-a", body=client.V1DeleteOptions(
            grace_period_seconds=30, preconditions=client.V1Preconditions(uid="not-it"))), 409)
    still = core.read_namespaced_pod("p7", "team-a")
    core.delete_namespaced_pod("p7", "team-a", body=client.V1DeleteOptions(
        preconditions=client.V1Preconditions(uid=still.metadata.uid)))
    ok(conflict[0] and still.metadata.name == "p7" and
       expect_error(lambda: core.read_namespaced_pod("p7", "team-a"), 404)[0],
       "a DeleteOptions uid precondition: 409 when wrong, deleted when right")

    # nodes and extended resources
    n1 = core.create_node({"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": "n1", "labels": {"kubernetes.io/os": "linux"}},
                           "status": {"capacity": {"cpu": "8"}, "allocatable": {"cpu": "8"}}})
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"},
                      "spec": {"unschedulable": True}})
    ok(n1.status.capacity == {"cpu": "8"} and n1.metadata.uid,
       "create_node keeps the status it is sent")
    ns1 = core.patch_node_status("n1", {"status": {
        "capacity": {"example.com/dongle": "4"}, "allocatable": {"example.com/dongle": "4"}}})
    ptype = last_patch_type()
    ok(ptype == SMP and ns1.status.capacity == {"cpu": "8", "example.com/dongle": "4"} and
       ns1.status.allocatable == {"cpu": "8", "example.com/dongle": "4"},
       "patch_node_status with a dict: the client sends %s and the fake merges capacity and "
       "allocatable" % ptype)
    raw = json.loads(core.read_node_status("n1", _preload_content=False).data)
    ok(raw["status"]["capacity"]["example.com/dongle"] == "4",
       "extended resource quantities stay strings")
    ns2 = core.patch_node_status("n1", [
        {"op": "add", "path": "/status/capacity/example.com~1widget", "value": "2"},
        {"op": "remove", "path": "/status/allocatable/example.com~1dongle"}])
    ptype = last_patch_type()
    ok(ptype == "application/json-patch+json" and
       ns2.status.capacity.get("example.com/widget") == "2" and
       "example.com/dongle" not in ns2.status.allocatable,
       "patch_node_status with a list: %s, ~1 escapes, add and remove" % ptype)
    ns3 = core.patch_node_status("n1", {"status": {"capacity": {"example.com/widget": None}}})
    ok(ns3.status.capacity == {"cpu": "8", "example.com/dongle": "4"},
       "strategic merge: null removes a capacity entry")
    ns4 = core.patch_node_status("n1", {"status": {"allocatable": {"$patch": "delete"},
                                                   "capacity": {"$patch": "replace",
                                                                "cpu": "16"}}})
    ok(ns4.status.allocatable is None and ns4.status.capacity == {"cpu": "16"},
       "strategic merge: $patch: delete drops a map, $patch: replace replaces it")
    mp = raw_call(ac, "PATCH", "/api/v1/nodes/n1/status",
                  {"status": {"capacity": {"example.com/dongle": "2", "cpu": None}}},
                  "application/merge-patch+json")
    ptype = last_patch_type()
    ok(ptype == "application/merge-patch+json" and
       mp["status"]["capacity"] == {"example.com/dongle": "2"},
       "merge-patch on nodes/status (null deletes)")
    nl = core.patch_node("n1", {"metadata": {"labels": {"tessera.io/gpu": "h100"}},
                                "status": {"capacity": {"cpu": "1"}}})
    ok(nl.metadata.labels == {"kubernetes.io/os": "linux", "tessera.io/gpu": "h100"} and
       nl.status.capacity == {"example.com/dongle": "2"},
       "patch_node sets labels and ignores status")
    body = core.read_node("n1")
    body.metadata.labels = {"dropped": "yes"}
    body.status.capacity = {"example.com/dongle": "3"}
    nr = core.replace_node_status("n1", body)
    ok(nr.status.capacity == {"example.com/dongle": "3"} and
       nr.metadata.labels == {"kubernetes.io/os": "linux", "tessera.io/gpu": "h100"},
       "replace_node_status changes only status")
    got = names(core.list_node(field_selector="metadata.name=n1").items)
    got2 = names(core.list_node(field_selector="spec.unschedulable=true").items)
    bad = expect_error(lambda: core.list_node(field_selector="spec.nodeName=n1"), 400)
    ok(got == ["n1"] and got2 == ["n2"] and bad[0] and
       bad[1].get("message") == "field label not supported: spec.nodeName",
       "list_node: metadata.name, spec.unschedulable; a pod-only field is 400")

    # devices
    dev = {"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices",
           "metadata": {"name": "n1"}, "spec": {"nodeName": "n1"},
           "status": {"devices": [{"id": "stale"}]}}
    d0 = cust.create_cluster_custom_object(*DEV, dev)
    ok(d0["kind"] == "Devices" and "status" not in d0 and d0["metadata"]["uid"],
       "create Devices: the status sent is dropped (status subresource)")
    st = {"devices": [{"id": "gpu-0", "vendor": "nvidia", "memory": "80Gi"}]}
    d1 = cust.patch_cluster_custom_object_status(*DEV, "n1", {"status": st,
                                                              "spec": {"nodeName": "x"}})
    d2 = cust.get_cluster_custom_object_status(*DEV, "n1")
    ok(d1["status"] == st and d1["spec"] == {"nodeName": "n1"} and d2["status"] == st,
       "patch_cluster_custom_object_status changes only status; the status GET shows it")
    d3 = cust.patch_cluster_custom_object(*DEV, "n1", {"spec": {"nodeName": "n1", "x": 1},
                                                       "status": {"devices": []}})
    ok(d3["spec"]["x"] == 1 and d3["status"] == st,
       "a patch of Devices itself ignores status")
    d3["status"] = {"devices": []}
    d3["spec"] = {"nodeName": "other"}
    d4 = cust.replace_cluster_custom_object_status(*DEV, "n1", d3)
    ok(d4["status"] == {"devices": []} and d4["spec"]["nodeName"] == "n1",
       "replace_cluster_custom_object_status changes only status")
    dl = cust.list_cluster_custom_object(*DEV, field_selector="metadata.name=n1")
    ok(dl["kind"] == "DevicesList" and [i["metadata"]["name"] for i in dl["items"]] == ["n1"]
       and dl["items"][0]["kind"] == "Devices",
       "list Devices with a metadata.name fieldSelector; CRD items carry kind")
    smp = expect_error(lambda: raw_call(ac, "PATCH", "/apis/worker.gpustack.ai/v1alpha1/"
                                        "devices/n1/status", {"status": {}}, SMP), 415)
    ok(smp[0] and smp[1].get("reason") == "UnsupportedMediaType",
       "a strategic merge patch on Devices is 415 UnsupportedMediaType")


def apply_call(api_client, path, body, manager):
    """Server-side apply (application/apply-patch+yaml, JSON is YAML) as manager, forced. The
    body goes as text: the client encodes only JSON content types itself."""
    return api_client.call_api(path, "PATCH", header_params={
        "Accept": "application/json", "Content-Type": "application/apply-patch+yaml"},
        query_params=[("fieldManager", manager), ("force", "true")], body=json.dumps(body),
        response_type="object", auth_settings=["BearerToken"], _return_http_data_only=True)


def run_controller_kinds(fake):
    ac = api_client_for(write_kubeconfig(fake, "t1"))
    core = client.CoreV1Api(ac)
    cust = client.CustomObjectsApi(ac)
    coord = client.CoordinationV1Api(ac)
    kq = "/apis/kueue.x-k8s.io/v1beta2"

    rl = raw_call(ac, "GET", kq)
    got = sorted(r["name"] for r in rl["resources"])
    ok({"workloads", "workloads/status", "admissionchecks", "admissionchecks/status",
        "resourceflavors", "topologies"} <= set(got) and "resourceflavors/status" not in got and
       "topologies/status" not in got and
       [r["namespaced"] for r in rl["resources"] if r["name"] == "workloads"] == [True],
       "discovery: Kueue's workloads and admissionchecks with status, flavors and topologies "
       "without")
    ok([r.name for r in coord.get_api_resources().resources] == ["leases"],
       "discovery: coordination.k8s.io/v1 serves leases")

    ns = core.create_namespace({"metadata": {"name": "team-c"}})
    ok(ns.status.phase == "Active" and ns.spec.finalizers == ["kubernetes"] and
       "team-c" in names(core.list_namespace().items),
       "create_namespace: phase Active, the kubernetes finalizer; listed")
    ev = core.create_namespaced_event("team-c", {
        "metadata": {"generateName": "tessera-"}, "involvedObject": {"kind": "Workload",
                                                                     "name": "w"},
        "reason": "NodeDevicesReady", "message": "m", "type": "Normal"})
    ok(ev.metadata.name.startswith("tessera-") and ev.metadata.name != "tessera-" and
       ev.reason == "NodeDevicesReady", "create_namespaced_event with generateName")

    lease = coord.create_namespaced_lease("team-c", {
        "metadata": {"name": "l"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}})
    lease.spec.holder_identity = "b"
    l2 = coord.replace_namespaced_lease("l", "team-c", lease)
    lease.spec.holder_identity = "c"
    stale = expect_error(lambda: coord.replace_namespaced_lease("l", "team-c", lease), 409)
    ok(l2.spec.holder_identity == "b" and stale[0],
       "Leases: create, replace, and a replace with a stale resourceVersion is 409")

    wl = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
          "metadata": {"name": "w", "namespace": "team-c"},
          "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1,
                                                 "template": {"spec": {"containers": []}}}]},
          "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}]}}
    w0 = cust.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "team-c",
                                              "workloads", wl)
    ok("status" not in w0, "create Workload: the status sent is dropped (status subresource)")
    path = kq + "/namespaces/team-c/workloads/w/status"
    w1 = raw_call(ac, "PATCH", path, {"status": {"admissionChecks": [
        {"name": "other-check", "state": "Pending", "message": ""},
        {"name": "gpustack-node-devices", "state": "Pending", "message": ""}]}},
        "application/merge-patch+json")
    retry = {"name": "gpustack-node-devices", "state": "Retry", "message": "short",
             "requeueAfterSeconds": 30}
    w2 = apply_call(ac, path, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                               "metadata": {"name": "w", "namespace": "team-c",
                                            "uid": w1["metadata"]["uid"],
                                            "resourceVersion": w1["metadata"]["resourceVersion"]},
                               "status": {"admissionChecks": [retry]}}, "gpustack-node-devices")
    checks = {e["name"]: e for e in w2["status"]["admissionChecks"]}
    ok(checks["gpustack-node-devices"] == retry and checks["other-check"]["state"] == "Pending"
       and w2["spec"] == w0["spec"],
       "apply on workloads/status merges the entry by name beside another writer's")
    ready = {"name": "gpustack-node-devices", "state": "Ready", "message": "fits"}
    w3 = apply_call(ac, path, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                               "metadata": {"name": "w", "namespace": "team-c"},
                               "status": {"admissionChecks": [ready]}}, "gpustack-node-devices")
    checks = {e["name"]: e for e in w3["status"]["admissionChecks"]}
    ok(checks["gpustack-node-devices"] == ready and "other-check" in checks,
       "a field the manager applied before and leaves out (requeueAfterSeconds) is removed")
    body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "team-c",
                         "resourceVersion": w2["metadata"]["resourceVersion"]},
            "status": {"admissionChecks": [retry]}}
    stale = expect_error(lambda: apply_call(ac, path, body, "gpustack-node-devices"), 409)
    body["metadata"] = {"name": "w", "namespace": "team-c", "uid": "0000"}
    other = expect_error(lambda: apply_call(ac, path, body, "gpustack-node-devices"), 409)
    ok(stale[0] and other[0] and "UID in precondition" in other[1].get("message", ""),
       "an apply with a stale resourceVersion or another uid is 409 Conflict")
    body["metadata"] = {"name": "gone", "namespace": "team-c"}
    missing = expect_error(lambda: apply_call(
        ac, kq + "/namespaces/team-c/workloads/gone/status", body, "gpustack-node-devices"), 404)
    rf = expect_error(lambda: raw_call(ac, "GET", kq + "/resourceflavors/x/status"), 404)
    ok(missing[0] and rf[0], "apply on a missing Workload's status is 404; a ResourceFlavor has "
       "no status subresource")


if __name__ == "__main__":
    sys.exit(main())
