#!/usr/bin/env python3
"""controller_faults.py TESSERA - the real `tessera controller --leader-elect=false` against a
hostile or flaky API server: tests/peers/fake_apiserver.py, used for the faults a real server
does not make on demand (its header lists them). Each case starts a fresh fake and controller
on loopback with one managed node, node-a: a Node, its Devices object (one H100, as the
device manager publishes it) and, in team-a, a running Pod "holder" whose allocation record
takes 960000 units of the GPU, and a Workload "w1" holding quota on the H100 pool with a
topology assignment to node-a, asking for one 60 % slice (960000 units) with the
gpustack-node-devices check Pending. With the holder the only answer is Retry naming node-a;
without it, Ready.

Checked, each with a check that fails when the controller misbehaves:
  unlisted     while every list is answered 500, then while the Workloads' list is held:
               /readyz is 503 naming the cache and its error, /healthz 200, no write at all
               reaches the server, the lists back off; once they answer, it is ready and
               writes the chain and w1's Retry
  watch faults the Namespaces' or Workloads' watch is held and then answered HTTP 410,
               ERROR 410, cut, 500 or 429 with Retry-After while a namespace or a Workload
               changes: the watcher relists (410) or resumes, and the change shows in what it
               writes (the entrance LocalQueue in a new namespace, none left in a deleted one,
               a verdict on a new Workload); during a persistent 500 or 429 the re-watches
               back off (counted), a 429 no sooner than its Retry-After; while a relist after
               410 fails, /readyz is 503 and nothing is written
  ledger       w1 gets no verdict while node-a's Pods cannot be listed (500 on the list with
               fieldSelector spec.nodeName), and Ready once it clears (the holder went
               meanwhile): the verdict follows the node as it is when read; the reads back off
  conflict     a verdict judged on a stale copy of w1 (its watch held while w1 changed) is
               refused 409 by its resourceVersion and retried, backing off, then written on
               the fresh copy's resourceVersion; every verdict write names uid and
               resourceVersion
  gone         w1 deleted while its verdict's write is answered 404: the key that comes back
               finds no Workload and is dropped (nothing more written for it; the ASan + UBSan
               pass catches a batch that reads past its Workloads), and w2 is judged after it
  node order   node-0 (arm64, CPU only) added after the first list, so the cache holds it after
               node-a though its name sorts first: the pools keep each node's own arch (a
               generic arm64 pool; the H100 pool amd64)
  token        the token revoked mid-run: every request gets 401, /readyz turns 503 naming
               the refusal, nothing is written, requests back off; with the token valid again
               it is ready and acts on what changed meanwhile
Prints TAP; the request rates measured are printed as comments.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "peers"))
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))

from daemons import Controller  # noqa: E402
from drivers import TOKEN, ApiServer, eventually, write_kubeconfig  # noqa: E402
from tap import Tap  # noqa: E402

FAKE = os.path.join(ROOT, "tests", "peers", "fake_apiserver.py")
GEN_CERTS = os.path.join(ROOT, "tests", "peers", "gen_certs.sh")

KQ = "/apis/kueue.x-k8s.io/v1beta2"
IT_API = "/apis/worker.gpustack.ai/v1alpha1"
NS = "team-a"
CHECK = "gpustack-node-devices"
POOL = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"
FLAVOR = "gpustack--generic--nvidia-h100-80gb-hbm3-linux-amd64-1d"
GPU = "GPU-29a6860b-2ad5-33b3-89ab-da02d49f7722"
WRITES = ("POST", "PUT", "PATCH", "DELETE")


# ---- the world ----------------------------------------------------------------------------

def node(name):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                  "kubernetes.io/os": "linux",
                                                  "kubernetes.io/arch": "amd64"}},
            "status": {"capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
                       "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"}}}


def devices(name):
    """node's Devices object: one idle H100, as `tessera sim` prints what the device manager
    publishes (the controller reads the capability, spec; the ledger comes from Pods)."""
    logical = {"coresPercentageOvercommit": True, "count": 128}
    return {"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices",
            "metadata": {"name": name},
            "spec": {"groups": [{
                "id": "h100-80gb-hbm3", "manufacturer": "nvidia", "memory": 81920,
                "name": "NVIDIA H100 80GB HBM3", "acceleratorSlicedDetail": {"logical": logical},
                "accelerators": [{
                    "id": GPU, "index": 0, "physicalIndexes": [0],
                    "status": {"logicalSliced": logical, "unhealthy": False},
                    "topology": {"cpuAffinity": "", "numaAffinity": "",
                                 "pciBusId": "00000000:8D:00.0", "pciClass": "",
                                 "pciRootId": ""}}]}]}}


SLICE60 = {"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.cores-percentage": "100",
           "nvidia.com/gpu.sliced.memory-percentage": "60",
           "nvidia.com/gpu.sliced.units": "960000"}


def holder_pod():
    """A running Pod on node-a whose allocation record holds 960000 units of the GPU."""
    record = {"main": {"deviceIDs": ["h100-80gb-hbm3:%s:0000" % GPU], "devices": {"groups": [{
        "id": "h100-80gb-hbm3", "manufacturer": "nvidia", "accelerators": [{
            "allocated": 960000, "allocatedSlices": 1, "id": GPU, "index": 0, "mode": 3}]}]}}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "holder", "namespace": NS,
                         "labels": {"kueue.x-k8s.io/podset": "main",
                                    "kueue.x-k8s.io/managed": "true"},
                         "annotations": {
                             "device.gpustack.ai/accelerator.allocated": json.dumps(record),
                             "kueue.x-k8s.io/workload": "pod-holder-c7ef3"}},
            "spec": {"nodeName": "node-a", "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "ubuntu:24.04",
                                     "resources": {"limits": SLICE60, "requests": SLICE60}}]},
            "status": {"phase": "Running"}}


def workload(name):
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"active": True, "queueName": "gpustack-fnv64-e4768a65ca0ce96b",
                     "podSets": [{"name": "main", "count": 1, "template": {
                         "metadata": {}, "spec": {"restartPolicy": "Never", "containers": [{
                             "name": "main", "image": "ubuntu:24.04",
                             "resources": {"limits": SLICE60, "requests": SLICE60}}]}}}]}}


def reserved_status():
    """What Kueue writes on workloads/status once it reserves quota with TAS on node-a."""
    return {"status": {
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                        "message": "Quota reserved in ClusterQueue " + POOL,
                        "lastTransitionTime": "2026-01-01T00:00:05Z"}],
        "admission": {"clusterQueue": POOL, "podSetAssignments": [{
            "name": "main", "count": 1,
            "flavors": {"credits.gpustack.ai/nvidia": FLAVOR},
            "resourceUsage": {"credits.gpustack.ai/nvidia": "960k"},
            "topologyAssignment": {"levels": ["kubernetes.io/hostname"], "slices": [{
                "domainCount": 1, "valuesPerLevel": [{"universal": "node-a"}],
                "podCounts": {"universal": 1}}]}}]},
        "admissionChecks": [{"name": CHECK, "state": "Pending", "message": "",
                             "lastTransitionTime": "2026-01-01T00:00:05Z"}]}}


class World:
    """A fresh fake API server holding node-a's world, and (start()) the controller on it."""

    def __init__(self, tessera, d, holder=True):
        self.tessera, self.d = tessera, d
        self.api = ApiServer(FAKE, d)
        self.kubeconfig = os.path.join(d, "kubeconfig")
        write_kubeconfig(self.kubeconfig, self.api.port, os.path.join(d, "ca.crt"))
        self.ctl = None
        for ns in ("default", NS, "gpustack-system", "kube-system"):
            self.api.create("/api/v1/namespaces", {"metadata": {"name": ns}})
        self.api.create("/api/v1/nodes", node("node-a"))
        self.api.create("/apis/worker.gpustack.ai/v1alpha1/devices", devices("node-a"))
        if holder:
            self.api.create("/api/v1/namespaces/%s/pods" % NS, holder_pod())
        self.add_workload("w1")

    def add_workload(self, name):
        self.api.create("%s/namespaces/%s/workloads" % (KQ, NS), workload(name))
        self.api.merge("%s/namespaces/%s/workloads/%s/status" % (KQ, NS, name),
                       reserved_status())

    # -- the fake --

    def control(self, what, body=None):
        url = "https://127.0.0.1:%d/_test/%s" % (self.api.port, what)
        if body is None and not what.startswith(("stats", "requests")):
            body = {}
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method="GET" if data is None else "POST")
        with urllib.request.urlopen(req, context=self.api.ctx, timeout=10) as r:
            return json.loads(r.read())

    def seq(self):
        return self.control("requests?since=%d" % (1 << 60))["seq"]

    def requests(self, since=0):
        """The controller's requests (its User-Agent's) after since."""
        return [r for r in self.control("requests?since=%d" % since)["requests"]
                if r["agent"].startswith("tessera/")]

    def get(self, path):
        try:
            return self.api.request("GET", path)
        except urllib.error.HTTPError:
            return None

    def check_state(self, name="w1"):
        w = self.get("%s/namespaces/%s/workloads/%s" % (KQ, NS, name)) or {}
        for c in (w.get("status") or {}).get("admissionChecks", []):
            if c.get("name") == CHECK:
                return c
        return None

    def local_queues(self, ns):
        return [q["metadata"]["name"] for q in
                (self.get("%s/namespaces/%s/localqueues" % (KQ, ns)) or {}).get("items", [])]

    # -- the controller --

    def start(self, extra=()):
        self.ctl = Controller(self.tessera, None, "faults", kubeconfig=self.kubeconfig,
                              extra=("--leader-elect=false", *extra))

    @property
    def lines(self):
        return self.ctl.lines if self.ctl else []

    def probe(self, path):
        return self.ctl.probe(path)

    def ready(self):
        return self.probe("/readyz")[0] == 200

    def start_settled(self, t):
        """Starts the controller and checks it settles: ready, and w1 answered Retry (the holder
        has the GPU). False (a failed check of t) when it does not."""
        self.start()
        return t.ok(eventually(self.ready, 20) and eventually(
            lambda: (self.check_state() or {}).get("state") == "Retry", 20),
            "ready, and w1 answered Retry", self.log())

    def log(self, last=60):
        return self.ctl.log(last) if self.ctl else ""

    def stop(self):
        rc = self.ctl.stop() if self.ctl else None
        self.api.stop()
        return rc


def writes(reqs):
    return [r for r in reqs if r["method"] in WRITES]


def brief(reqs, n=20):
    return "\n".join("%s %s?%s -> %s" % (r["method"], r["path"], r["query"], r["code"])
                     for r in reqs[:n])


def rate(reqs, seconds):
    return len(reqs) / seconds if seconds > 0 else float("inf")


# ---- the cases ----------------------------------------------------------------------------

def case_unlisted(t, w):
    """Not ready and no write before the caches have listed."""
    w.control("fail", {"status": 500, "count": -1, "method": "GET", "watch": False})
    s0 = w.seq()
    w.start()
    time.sleep(4)
    code, body = w.probe("/readyz")
    t.ok(code == 503 and "has not listed yet" in body and "500" in body,
         "lists answered 500: /readyz is 503 naming the cache and its error", body)
    t.ok(w.probe("/healthz")[0] == 200, "/healthz is 200 meanwhile")
    reqs = w.requests(s0)
    lists = [r for r in reqs if r["method"] == "GET" and not r["watch"]]
    per = {}
    for r in lists:
        per[r["path"]] = per.get(r["path"], 0) + 1
    t.note("lists answered 500 for 4 s: %d list requests over %d collections (%.1f/s), at most "
           "%d for one" % (len(lists), len(per), rate(lists, 4), max(per.values() or [0])))
    t.ok(not writes(reqs), "nothing is written while no cache has listed",
         brief(writes(reqs)))
    t.ok(len(per) >= 11 and max(per.values()) <= 6,
         "each cache retries its list with backoff (at most 6 lists in 4 s, not a hot loop)",
         per)

    # Every list but the Workloads' answers now: still not ready, still no write.
    w.control("pause", {"paused": True, "match": "/workloads", "lists": True})
    # The mark before the unfail: a list answered between the two would be missed, and its cache,
    # listed, goes on to watch and never lists again (CI's TSan pass saw it once).
    s1 = w.seq()
    w.control("unfail")

    others = {p for p in per if not p.endswith("/workloads")}

    def others_listed():
        done = {r["path"] for r in w.requests(s1)
                if r["method"] == "GET" and not r["watch"] and r["code"] == 200}
        return done >= others and not any(p.endswith("/workloads") for p in done)
    # After 4 s of 500s a cache's next list may be a doubled backoff away (8 s and more, with
    # jitter; slower under the sanitizers): wait past the 30 s cap.
    listed = eventually(others_listed, 45)
    time.sleep(1)
    code, body = w.probe("/readyz")
    t.ok(listed and code == 503 and "the workloads cache has not listed yet" in body,
         "the Workloads' list held, every other listed: /readyz is 503 naming the workloads "
         "cache", {"listed since the 500s stopped": sorted(
             {r["path"] for r in w.requests(s1) if r["method"] == "GET" and not r["watch"] and
              r["code"] == 200}), "readyz": (code, body)})
    t.ok(not writes(w.requests(s1)),
         "nothing is written while one cache (Workloads) has not listed, though the others have",
         brief(writes(w.requests(s1))))

    w.control("pause", {"paused": False})
    t.ok(eventually(w.ready, 20), "once every list answers, /readyz is 200", w.probe("/readyz"))
    retry = eventually(lambda: (w.check_state() or {}).get("state") == "Retry" and
                       len(w.local_queues(NS)) == 2 and w.check_state(), 20)
    t.ok(retry and 'node "node-a"' in retry.get("message", "") and
         retry.get("requeueAfterSeconds") == 30 and len(w.local_queues(NS)) == 2,
         "then it writes: the entrance LocalQueues, and w1's Retry naming node-a",
         {"check": w.check_state(), "lqs": w.local_queues(NS)})


def collection(plural):
    """A substring of plural's collection path and of no other the controller watches: the
    Namespaces' is a prefix of every namespaced path (the Settings' included)."""
    return "/api/v1/namespaces" if plural == "namespaces" else "/" + plural


def hold_watch(w, plural):
    """Holds plural's re-watch and cuts its live watch: the cache sees nothing new."""
    w.control("pause", {"paused": True, "match": collection(plural)})
    w.control("drop", {"match": collection(plural)})


def case_watch_faults(t, w):
    """Watches answered 410 / ERROR 410 / cut / 500 / 429: relist or resume, converge, back off."""
    if not w.start_settled(t):
        return
    prev = None
    rounds = [("410 http", "namespaces"), ("ERROR 410", "workloads"), ("cut", "namespaces"),
              ("500", "namespaces"), ("429 Retry-After", "workloads")]
    for i, (mode, plural) in enumerate(rounds):
        stats0 = w.control("stats")
        hold_watch(w, plural)
        time.sleep(0.3)
        # What changes while the cache cannot see it.
        if plural == "namespaces":
            ns = "round-%d" % i
            w.api.create("/api/v1/namespaces", {"metadata": {"name": ns}})
            if prev:
                w.api.request("DELETE", "/api/v1/namespaces/" + prev)
        else:
            wl = "w-round-%d" % i
            w.add_workload(wl)
        if mode.startswith("410") or mode == "ERROR 410":
            w.control("watch410", {"mode": "http" if mode == "410 http" else "event"})
            w.control("compact")
        elif mode == "500":
            w.control("fail", {"status": 500, "count": -1, "watch": True,
                               "match": collection(plural)})
        elif mode.startswith("429"):
            w.control("fail", {"status": 429, "retry_after": 2, "count": -1, "watch": True,
                               "match": collection(plural)})
        s0 = w.seq()
        w.control("pause", {"paused": False})
        if mode in ("500", "429 Retry-After"):
            time.sleep(8)
            rewatch = [r for r in w.requests(s0)
                       if r["watch"] and r["path"].endswith(collection(plural))]
            gaps = [b["t"] - a["t"] for a, b in zip(rewatch, rewatch[1:])]
            t.note("%s on the %s watch for 8 s: %d re-watches (%.2f/s), gaps %s" % (
                mode, plural, len(rewatch), rate(rewatch, 8), ["%.2f" % g for g in gaps]))
            if mode == "500":
                t.ok(2 <= len(rewatch) <= 7 and all(b >= a * 0.9 for a, b in
                                                    zip(gaps, gaps[1:]) if b < 20),
                     "watch answered 500: re-watches back off, growing (%d in 8 s)"
                     % len(rewatch), gaps)
            else:
                t.ok(2 <= len(rewatch) <= 5 and all(g >= 1.9 for g in gaps),
                     "watch answered 429 Retry-After: 2: no re-watch sooner than 2 s (%d in 8 s)"
                     % len(rewatch), gaps)
            w.control("unfail")
        if plural == "namespaces":
            ok = eventually(lambda: w.local_queues(ns) and
                            (not prev or not w.local_queues(prev)), 40)
            t.ok(ok, "watch %s on Namespaces: the cache converges; a namespace made meanwhile "
                 "gets its LocalQueues%s" % (mode, ", the deleted one's are removed"
                                            if prev else ""),
                 {"new": w.local_queues(ns), "deleted": prev and w.local_queues(prev),
                  "log": w.log(20)})
            prev = ns
        else:
            st = eventually(lambda: (w.check_state(wl) or {}).get("state") == "Retry" and
                            w.check_state(wl), 40)
            t.ok(st, "watch %s on Workloads: the cache converges; a Workload reserved meanwhile "
                 "is judged (Retry: the holder has the GPU)" % mode, w.log(20))
        stats1 = w.control("stats")
        if mode.startswith("410") or mode == "ERROR 410":
            t.ok(stats1["gone_sent"] > stats0["gone_sent"] and
                 stats1["lists"].get(plural, 0) > stats0["lists"].get(plural, 0),
                 "%s: the fake sent 410 and the %s were listed again" % (mode, plural),
                 {"before": stats0["lists"], "after": stats1["lists"]})

    # While a relist after 410 fails, the cache is known to be incomplete: not ready, no write.
    hold_watch(w, "namespaces")
    w.control("watch410", {"mode": "http"})
    w.control("compact")
    w.control("fail", {"status": 500, "count": -1, "method": "GET", "watch": False,
                       "match": "/api/v1/namespaces"})
    w.api.create("/api/v1/namespaces", {"metadata": {"name": "late"}})
    w.control("pause", {"paused": False})
    unready = eventually(lambda: w.probe("/readyz")[0] == 503, 10)
    s0 = w.seq()
    w.add_workload("w-late")  # would be judged, were the controller writing
    time.sleep(4)
    code, body = w.probe("/readyz")
    t.ok(unready and code == 503 and "namespaces" in body,
         "while the relist after a 410 fails, /readyz is 503 naming the namespaces cache",
         body)
    t.ok(not writes(w.requests(s0)) and w.check_state("w-late")["state"] == "Pending",
         "and nothing is written meanwhile (the new Workload waits)", brief(writes(
             w.requests(s0))))
    w.control("unfail")
    t.ok(eventually(w.ready, 40) and eventually(lambda: w.local_queues("late"), 20) and
         eventually(lambda: w.check_state("w-late")["state"] == "Retry", 20),
         "once the relist answers: ready, the namespace's LocalQueues, the Workload judged",
         {"readyz": w.probe("/readyz"), "w-late": w.check_state("w-late")})


def case_ledger(t, w):
    """No verdict while the node's Pods cannot be read; the right one once they can."""
    w.control("fail", {"status": 500, "count": -1, "method": "GET", "match": "/api/v1/pods",
                       "query": "fieldSelector=spec.nodeName"})
    s0 = w.seq()
    w.start()
    t.ok(eventually(w.ready, 20), "ready (the caches list; the Pods are read per judgement)",
         w.probe("/readyz"))
    time.sleep(6)
    reqs = w.requests(s0)
    verdicts = [r for r in writes(reqs) if r["path"].endswith("/workloads/w1/status")]
    reads = [r for r in reqs if r["path"] == "/api/v1/pods"]
    t.note("node-a's Pods answered 500 for 6 s: %d reads (%.1f/s)" % (len(reads),
                                                                      rate(reads, 6)))
    t.ok(reads and not verdicts and w.check_state()["state"] == "Pending",
         "w1 gets no verdict while node-a's Pods cannot be read", brief(verdicts))
    t.ok(len(reads) <= 15, "the failed judgement is retried with backoff (%d reads in 6 s)"
         % len(reads), brief(reads, 30))
    t.ok(any("not judged" in x and "w1" in x for x in w.lines),
         "the log says the Workload was not judged", w.log(20))
    w.api.request("DELETE", "/api/v1/namespaces/%s/pods/holder" % NS)
    w.control("unfail")
    ready = eventually(lambda: (w.check_state() or {}).get("state") == "Ready" and
                       w.check_state(), 40)
    t.ok(ready and "requeueAfterSeconds" not in ready,
         "once the Pods read, w1 is answered Ready (the holder went meanwhile)",
         {"check": w.check_state(), "log": w.log(20)})


def case_conflict(t, w):
    """A verdict on a stale copy is refused 409 and retried on a fresh one."""
    w.control("fail", {"status": 500, "count": -1, "method": "GET", "match": "/api/v1/pods",
                       "query": "fieldSelector=spec.nodeName"})
    w.start()
    if not t.ok(eventually(w.ready, 20), "ready", w.probe("/readyz")):
        return
    path = "%s/namespaces/%s/workloads/w1" % (KQ, NS)
    stale_rv = w.get(path)["metadata"]["resourceVersion"]
    hold_watch(w, "workloads")
    time.sleep(0.3)
    fresh = w.api.merge(path, {"metadata": {"labels": {"touched": "yes"}}})
    fresh_rv = fresh["metadata"]["resourceVersion"]
    s0 = w.seq()
    w.control("unfail")  # judged now, on the cached copy of resourceVersion stale_rv
    conflicts = eventually(lambda: [r for r in w.requests(s0) if r["method"] == "PATCH" and
                                    r["path"] == path + "/status" and r["code"] == 409], 40)
    time.sleep(4)
    during = [r for r in w.requests(s0) if r["method"] == "PATCH" and
              r["path"] == path + "/status"]
    t.note("verdict writes on a stale copy: %d in %.1f s, answered %s" % (
        len(during), during[-1]["t"] - during[0]["t"] if during else 0,
        sorted({r["code"] for r in during})))
    t.ok(conflicts and all(r["code"] == 409 and r["body"]["metadata"]["resourceVersion"] ==
                           stale_rv for r in during),
         "the verdict judged on the stale copy carries its resourceVersion and is refused 409",
         brief(during))
    t.ok(len(during) <= 10, "the refused write is retried with backoff (%d in ~4 s)"
         % len(during))
    w.control("pause", {"paused": False})
    done = eventually(lambda: (w.check_state() or {}).get("state") == "Retry", 40)
    final = [r for r in w.requests(s0) if r["method"] == "PATCH" and
             r["path"] == path + "/status" and r["code"] == 200]
    obj = w.get(path)
    t.ok(done and final and final[-1]["body"]["metadata"]["resourceVersion"] == fresh_rv and
         obj["metadata"]["labels"].get("touched") == "yes",
         "once the cache has the fresh copy, the verdict is written on its resourceVersion, "
         "and the change made meanwhile stands", {"final": brief(final), "obj": obj})
    every = [r for r in w.requests(0) if r["method"] == "PATCH" and
             r["path"].endswith("/status") and "/workloads/" in r["path"]]
    t.ok(every and all(r["body"]["metadata"].get("uid") and
                       r["body"]["metadata"].get("resourceVersion") for r in every),
         "every verdict write names the Workload's uid and resourceVersion", brief(every))


def case_gone(t, w):
    """A Workload deleted between its judgement and its verdict's write (answered 404): its key
    comes back in a batch that no longer finds it and is dropped; the next one is judged."""
    path = "%s/namespaces/%s/workloads/w1" % (KQ, NS)
    w.control("fail", {"status": 404, "count": -1, "method": "PATCH", "match": path + "/status"})
    s0 = w.seq()
    w.start()
    refused = eventually(lambda: [r for r in w.requests(s0) if r["method"] == "PATCH" and
                                  r["path"] == path + "/status" and r["code"] == 404] and
                         any("verdict not written" in x and "404" in x for x in w.lines), 20)
    t.ok(refused, "w1's verdict write is answered 404, and the log says it was not written",
         w.log(20))
    w.api.request("DELETE", path)
    w.control("unfail")
    seen = len(w.lines)

    def judged_gone():
        return any("judging Workloads" in x and "first=workload/%s/w1" % NS in x
                   for x in w.lines[seen:])
    t.ok(eventually(judged_gone, 20) and w.ctl.alive(),
         "its key comes back after the deletion (its backoff) and the batch drops it", w.log(20))
    time.sleep(1.5)  # a judgement begun before the cache saw the deletion writes once more
    s1 = w.seq()
    time.sleep(2.5)
    t.ok(not [r for r in writes(w.requests(s1)) if r["path"] == path + "/status"],
         "then nothing more is written for the gone Workload", brief(writes(w.requests(s1))))
    w.add_workload("w2")
    t.ok(eventually(lambda: (w.check_state("w2") or {}).get("state") == "Retry", 30) and
         w.ctl.alive(), "the next Workload is judged (Retry: the holder has the GPU)",
         {"w2": w.check_state("w2"), "log": w.log(20)})


def case_node_order(t, w):
    """A Node added after the first list, its name sorting first: each node keeps its own
    os and arch in the pools derived from them."""
    if not w.start_settled(t):
        return
    arm = node("node-0")
    arm["metadata"]["labels"]["kubernetes.io/arch"] = "arm64"
    w.api.create("/api/v1/nodes", arm)

    def types():
        return sorted(i["metadata"]["name"] for i in
                      (w.get(IT_API + "/instancetypes") or {}).get("items", []))
    got = eventually(lambda: "gpustack--generic-linux-arm64" in types() and types(), 30)
    time.sleep(2)  # every pool derived from the new view is authored by then
    got = got and types()
    t.ok(got and "gpustack--nvidia-h100-80gb-hbm3-linux-amd64" in got and
         not [n for n in got if "h100" in n and "arm64" in n],
         "node-0 (arm64, CPU only) added after node-a (amd64, an H100): a generic arm64 pool, "
         "the H100 pool still amd64 and none arm64", {"types": types(), "log": w.log(20)})


def case_token(t, w):
    """The token revoked mid-run: 401s, not ready, no write, backoff; recovery."""
    if not w.start_settled(t):
        return
    w.control("token", {"tokens": ["someone-else"]})
    w.control("drop")  # the live watches end, as a server that revoked the token ends them
    s0 = w.seq()
    w.api.token = "someone-else"
    w.api.create("/api/v1/namespaces", {"metadata": {"name": "while-revoked"}})
    w.api.request("DELETE", "/api/v1/namespaces/%s/pods/holder" % NS)
    w.add_workload("w2")
    unready = eventually(lambda: w.probe("/readyz")[0] == 503, 15)
    t_unready = time.monotonic()
    code, body = w.probe("/readyz")
    t.ok(unready and "401" in body, "requests refused 401: /readyz is 503 and says why", body)
    time.sleep(8)
    reqs = w.requests(s0)
    refused = [r for r in reqs if r["code"] == 401]
    late = [r for r in writes(reqs) if r["t"] > t_unready + 1.0]  # a pass under way ends
    t.note("token revoked for ~10 s: %d requests refused 401 (%.1f/s), %d of them writes, "
           "%d after /readyz turned 503" % (len(refused), rate(refused, 10),
                                            len(writes(reqs)), len(late)))
    t.ok(refused and all(r["code"] == 401 for r in writes(reqs)) and not late and
         (w.check_state("w2") or {}).get("state") == "Pending",
         "no write is accepted while the token is refused, and none is tried a second after "
         "/readyz says so", {"writes": brief(writes(reqs)), "w2": w.check_state("w2")})
    t.ok(len(refused) <= 9 * 8, "the refused requests back off (%d in ~10 s over 9 caches)"
         % len(refused))
    w.control("token", {"tokens": [TOKEN]})
    w.api.token = TOKEN
    t.ok(eventually(w.ready, 40), "with the token valid again, /readyz is 200",
         w.probe("/readyz"))

    def states():
        return sorted((w.check_state(n) or {}).get("state") for n in ("w1", "w2"))
    t.ok(eventually(lambda: w.local_queues("while-revoked"), 30) and
         eventually(lambda: states() == ["Ready", "Retry"], 30),
         "and it acts on what changed meanwhile: the new namespace's LocalQueues; the holder "
         "gone, one of w1 and w2 is Ready and the other, left no GPU, Retry",
         {"states": states(), "log": w.log(20)})


CASES = [("unlisted", case_unlisted, True), ("watch faults", case_watch_faults, True),
         ("ledger", case_ledger, True), ("conflict", case_conflict, True),
         ("gone", case_gone, True), ("node order", case_node_order, True),
         ("token", case_token, True)]


def main():
    tessera = sys.argv[1]
    only = sys.argv[2:]
    t = Tap()
    d = tempfile.mkdtemp(prefix="tsr-controller-faults-")
    try:
        subprocess.run(["sh", GEN_CERTS, d], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        for name, case, holder in CASES:
            if only and name not in only:
                continue
            w = None
            failed = t.failed()
            try:
                w = World(tessera, d, holder)
                t0 = time.monotonic()
                case(t, w)
                t.note("%s: %.1f s" % (name, time.monotonic() - t0))
            except Exception:  # noqa: BLE001 - reported as a failed check
                t.crash(name)
            finally:
                rc = w.stop() if w else None
                if w and w.ctl:
                    t.ok(rc == 0, "%s: the controller exits 0 on SIGTERM" % name, w.log(20))
                if w and t.failed() and not failed:
                    t.note("---- %s: the controller's log ----\n%s" % (name, w.log(80)))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    sys.exit(t.done())


if __name__ == "__main__":
    main()
