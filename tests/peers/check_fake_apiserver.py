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


def api_for(path):
    c = client.Configuration()
    config.load_kube_config(config_file=path, client_configuration=c)
    return client.CustomObjectsApi(client.ApiClient(c))


def main():
    tmp = tempfile.mkdtemp(prefix="tsr-fake-apiserver-")
    fake = Fake(tmp)
    try:
        run(fake)
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


if __name__ == "__main__":
    sys.exit(main())
