#!/usr/bin/env python3
"""webhook_server.py TESSERA FAKE_APISERVER GEN_CERTS - the real `tessera webhook` binary, driven
the way the API server drives it (spec/kubernetes-contracts.md §1), against the fake API server
(tests/peers/fake_apiserver.py) that feeds its watch cache.

The client is Python's ssl over a socket to 127.0.0.1 with SNI and certificate verification for
gpustack-worker-webhook.gpustack-system.svc against the test CA, ALPN offering http/1.1 only, and
HTTP/1.1 keep-alive (http.client); AdmissionReview v1 bodies are POSTed with ?timeout=10s and the
returned JSON Patch is applied with python3-jsonpatch, as the API server applies it, to check the
object that results. The objects the handlers read are created through the fake's REST API, and a
change made there must reach the webhook through its watch.

Checked, in order: readiness (503 naming the resource while the cache has not listed, 200 after);
TLS (the negotiated version, the certificate chain and name, keep-alive reuse of one connection);
the InstanceType defaulting and validation (create shape, update immutability), persisted as the
API server would; gate 1 on Pods (the sliced fold into requests and limits, the partition fold,
the shared card-count pin, rule denials, a Pod without the queue label untouched); the Workload
fit pin, and its removal once the ClusterQueue loses the operator's mark (a watch event); the
Instance rules (the offered-profile message, the deletion guard); the KV-cache injection (the
record and the vLLM flag); the transport's refusals (malformed 400, oversized 413, wrong media
type 415, wrong method 405, unknown path 404, a review of the wrong kind denied); /metrics;
certificate reload (a renewed pair serves the next handshake, a broken one is refused and the
last good pair keeps serving); a second webhook against an API server that serves no KV-cache
kinds becoming ready all the same; and graceful shutdown (not ready while still answering, exit 0).

Prints TAP.
"""

import base64
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

import jsonpatch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers"))
from drivers import ApiServer, eventually, write_kubeconfig  # noqa: E402

SVC = "gpustack-worker-webhook.gpustack-system.svc"
GROUP = "nvidia-h100-80gb-hbm3"

results = []


def ok(cond, name, detail=""):
    results.append(bool(cond))
    print("%s %d - %s" % ("ok" if cond else "not ok", len(results), name), flush=True)
    if not cond and detail:
        for line in str(detail).splitlines():
            print("#   " + line, flush=True)
    return bool(cond)


def fnv1a64(text):
    h = 0xcbf29ce484222325
    for b in text.encode():
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def entrance(name):
    return "gpustack-fnv64-" + fnv1a64(name)


# ---- certificates -----------------------------------------------------------------------------

def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def make_webhook_ca(d):
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out",
            "wh-ca.key", cwd=d)
    openssl("req", "-x509", "-new", "-key", "wh-ca.key", "-out", "wh-ca.crt", "-days", "2",
            "-subj", "/CN=webhook-test-ca", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)


def make_webhook_leaf(d, serial, key, crt):
    """A leaf for SVC (DNS SAN only: the API server ignores the CN), signed by the webhook CA."""
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key,
            cwd=d)
    openssl("req", "-new", "-key", key, "-out", "leaf.csr", "-subj", "/CN=webhook", cwd=d)
    with open(os.path.join(d, "leaf.ext"), "w") as f:
        f.write("subjectAltName=DNS:%s,DNS:%s.cluster.local\nextendedKeyUsage=serverAuth\n"
                "basicConstraints=CA:FALSE\n" % (SVC, SVC))
    openssl("x509", "-req", "-in", "leaf.csr", "-CA", "wh-ca.crt", "-CAkey", "wh-ca.key",
            "-set_serial", str(serial), "-days", "2", "-extfile", "leaf.ext", "-out", crt, cwd=d)


def install_pair(d, crt, key):
    """Swaps tls.crt/tls.key in place by rename, as the kubelet swaps a Secret volume."""
    for src, dst in ((crt, "tls.crt"), (key, "tls.key")):
        shutil.copy(os.path.join(d, src), os.path.join(d, dst + ".new"))
        os.replace(os.path.join(d, dst + ".new"), os.path.join(d, dst))


# ---- the fake API server ----------------------------------------------------------------------

# ---- the webhook process ----------------------------------------------------------------------

class Webhook:
    def __init__(self, tessera, d, kubeconfig, extra=()):
        self.d = d
        self.lines = []
        self.proc = subprocess.Popen(
            [tessera, "webhook", "--bind", "127.0.0.1", "--port", "0", "--probe-port", "0",
             "--kubeconfig", kubeconfig, "--cert-file", os.path.join(d, "tls.crt"),
             "--key-file", os.path.join(d, "tls.key"), "--threads", "4",
             "--max-body", "1048576", "--shutdown-delay", "700ms", "--shutdown-grace", "5s",
             "--log-level", "debug", *extra],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        line = eventually(lambda: self.find("msg=listening"), timeout=10)
        if not line:
            raise RuntimeError("tessera webhook did not listen:\n" + "\n".join(self.lines))
        self.port = int(re.search(r" port=(\d+)", line).group(1))
        self.probe_port = int(re.search(r" probe_port=(\d+)", line).group(1))

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def find(self, needle):
        for line in list(self.lines):
            if needle in line:
                return line
        return None

    def probe(self, path):
        c = http.client.HTTPConnection("127.0.0.1", self.probe_port, timeout=5)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read().decode()
        finally:
            c.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(timeout=5)

    def check_stderr(self, what):
        """Everything on stderr is a log line: a sanitizer report or a stray print fails here."""
        stray = [l for l in self.lines if not l.startswith("time=")]
        ok(not stray, "%s: stderr holds only log lines" % what, "\n".join(stray[:40]))


class TLSConnection(http.client.HTTPSConnection):
    """Dials 127.0.0.1 but verifies and sends SNI for SVC, as the API server dials a Service."""

    def __init__(self, port, ctx):
        super().__init__("127.0.0.1", port, context=ctx, timeout=10)
        self._ctx = ctx
        self.handshakes = 0

    def connect(self):
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as Go's net.Dial does
        self.sock = self._ctx.wrap_socket(sock, server_hostname=SVC)
        self.handshakes += 1


def client_context(d):
    ctx = ssl.create_default_context(cafile=os.path.join(d, "wh-ca.crt"))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


class Client:
    def __init__(self, port, ctx):
        self.conn = TLSConnection(port, ctx)

    def post(self, path, body, content_type="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.conn.request("POST", path, body=data, headers={
            "Content-Type": content_type, "Accept": "application/json"})
        r = self.conn.getresponse()
        raw = r.read()
        self.headers = dict((k.lower(), v) for k, v in r.getheaders())
        if r.getheader("Connection", "").lower() == "close":
            self.conn.close()
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = raw
        return r.status, doc

    def get(self, path):
        self.conn.request("GET", path)
        r = self.conn.getresponse()
        self.last_allow = r.getheader("Allow")
        return r.status, r.read()

    def review(self, path, obj, op="CREATE", old=None, kind=("", "v1", "Pod"), ns="team-a",
               name=None, uid=None):
        uid = uid or "uid-%d" % len(results)
        group, version, k = kind
        body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": uid, "kind": {"group": group, "version": version, "kind": k},
            "resource": {"group": group, "version": version, "resource": k.lower() + "s"},
            "requestKind": {"group": group, "version": version, "kind": k},
            "name": name or (obj or old or {}).get("metadata", {}).get("name", ""),
            "namespace": ns, "operation": op,
            "userInfo": {"username": "system:serviceaccount:team-a:default"},
            "object": obj, "oldObject": old, "dryRun": False}}
        status, doc = self.post(path + "?timeout=10s", body)
        if status != 200:
            raise AssertionError("HTTP %d: %r" % (status, doc))
        resp = doc["response"]
        if resp.get("uid") != uid:
            raise AssertionError("uid %r not echoed: %r" % (uid, resp))
        return resp


def patched(obj, resp):
    """The object after the API server applies the response's patch (or obj when none)."""
    if "patch" not in resp:
        return obj
    assert resp.get("patchType") == "JSONPatch", resp
    ops = json.loads(base64.b64decode(resp["patch"]))
    return jsonpatch.JsonPatch(ops).apply(obj)


def denial(resp):
    st = resp.get("status", {})
    return st.get("code"), st.get("message", "")


# ---- the objects ------------------------------------------------------------------------------

IT_PATH = "/apis/worker.gpustack.ai/v1alpha1/instancetypes"
LQ_PATH = "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues"
CQ_PATH = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
KV = "/apis/worker.gpustack.ai/v1alpha1"
SETTINGS_PATH = "/apis/gpustack.ai/v1/namespaces/gpustack-system/settings"

MUTATE_IT = "/mutate-worker-gpustack-ai-v1alpha1-instancetype"
VALIDATE_IT = "/validate-worker-gpustack-ai-v1alpha1-instancetype"
MUTATE_INST = "/mutate-worker-gpustack-ai-v1alpha1-instance"
VALIDATE_INST = "/validate-worker-gpustack-ai-v1alpha1-instance"
MUTATE_KV = "/mutate-gpustack-worker-kvcache-core-v1-pod"
MUTATE_POD = "/mutate-gpustack-worker-core-v1-pod"
VALIDATE_POD = "/validate-gpustack-worker-core-v1-pod"
MUTATE_WL = "/mutate-gpustack-worker-kueue-x-k8s-io-v1beta2-workload"
IT_KIND = ("worker.gpustack.ai", "v1alpha1", "InstanceType")
INST_KIND = ("worker.gpustack.ai", "v1alpha1", "Instance")
WL_KIND = ("kueue.x-k8s.io", "v1beta2", "Workload")

# Upstream's shape: no spec.memory; the per-card VRAM is status.detail.memory, a quantity string.
H100_SPEC = {"displayName": "H100", "acceleratable": True, "acceleratorGroup": GROUP,
             "os": "linux", "arch": "amd64",
             "unitResources": {"cpu": "8", "ram": "64Gi"}, "localStorage": "100Gi"}
H100_STATUS = {
    "cpu": {"capacity": "224"}, "accelerator": {"capacity": "8"},
    "detail": {"manufacturer": "nvidia", "memory": "80Gi", "slicedDetail": {
        "logical": {"count": 0},
        "physical": {"count": 8, "profiles": [
            {"name": "1g.10gb", "count": 56, "memoryMib": 10240},
            {"name": "3g.40gb", "count": 16, "memoryMib": 40960}]}}}}


def pod(name, limits, labels=None, annotations=None, containers=None):
    """A Pod as the API server hands it to admission: requests already defaulted from limits."""
    labels = {"kueue.x-k8s.io/queue-name": entrance("h100")} if labels is None else labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": "team-a", "labels": labels,
        "annotations": annotations or {}},
        "spec": {"containers": containers or [
            {"name": "main", "image": "vllm/vllm-openai:v0.8.5",
             "resources": {"limits": dict(limits), "requests": dict(limits)}}]}}


def container_resources(obj, i=0):
    return obj["spec"]["containers"][i]["resources"]


# ---- the checks -------------------------------------------------------------------------------

def check_readiness_before_sync(tessera, d):
    """A webhook whose API server is not there: not ready, and reviews are refused with 503."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    kc = os.path.join(d, "nowhere.kubeconfig")
    write_kubeconfig(kc, port, os.path.join(d, "ca.crt"))
    w = Webhook(tessera, d, kc)
    try:
        st, text = eventually(lambda: w.probe("/readyz"), timeout=5)
        ok(st == 503 and "waiting for the first list of instancetypes" in text,
           "not ready while the cache has not listed: %s" % text.strip(), text)
        c = Client(w.port, client_context(d))
        status, doc = c.post(MUTATE_POD, {"apiVersion": "admission.k8s.io/v1",
                                          "kind": "AdmissionReview",
                                          "request": {"uid": "u", "operation": "CREATE"}})
        ok(status == 503 and doc.get("reason") == "ServiceUnavailable",
           "a review before the first list is refused with 503 (failurePolicy decides)", doc)
        st, _ = w.probe("/healthz")
        ok(st == 200, "alive while not ready")
    finally:
        w.stop()
    ok(w.proc.returncode == 0, "SIGTERM ends it with status 0", w.proc.returncode)
    w.check_stderr("the webhook without an API server")


def check_tls(c, w):
    st, body = c.get("/healthz")
    sock = c.conn.sock
    ok(st == 200 and body == b"ok\n", "GET /healthz over TLS")
    ok(sock.version() in ("TLSv1.2", "TLSv1.3"), "TLS version %s" % sock.version())
    ok(sock.selected_alpn_protocol() in (None, "http/1.1"),
       "ALPN: %s (HTTP/1.1, never h2)" % sock.selected_alpn_protocol())
    cert = sock.getpeercert()
    sans = [v for k, v in cert.get("subjectAltName", ()) if k == "DNS"]
    ok(SVC in sans, "the certificate names %s and verifies against the CA" % SVC, sans)


def check_instancetype(c, fake):
    it = {"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "InstanceType",
          "metadata": {"name": "h100"}, "spec": dict(H100_SPEC)}
    resp = c.review(MUTATE_IT, it, kind=IT_KIND, ns="")
    out = patched(it, resp)
    labels = out["metadata"].get("labels", {})
    ok(resp["allowed"] and labels.get("schedule.gpustack.ai/queue-entrance") == entrance("h100"),
       "InstanceType defaulting: queue-entrance %s" % entrance("h100"), labels)
    ok(out["spec"].get("generalGroup") == "generic" and
       labels.get("acceleratable.feature.gpustack.ai/" + GROUP) == "true" and
       labels.get("feature.gpustack.ai/acceleratable") == "true",
       "InstanceType defaulting: generalGroup and the pool's schedule labels", out)
    resp = c.review(VALIDATE_IT, out, kind=IT_KIND, ns="")
    ok(resp["allowed"] and "patch" not in resp, "the defaulted InstanceType validates", resp)

    bad = {"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "InstanceType",
           "metadata": {"name": "bad"}, "spec": {"acceleratable": True,
                                                 "acceleratorGroup": GROUP}}
    resp = c.review(VALIDATE_IT, bad, kind=IT_KIND, ns="")
    code, msg = denial(resp)
    ok(not resp["allowed"] and code == 422 and
       msg.startswith('InstanceType.worker.gpustack.ai "bad" is invalid: [') and
       "spec.os: Required value: must be specified" in msg and
       "spec.arch: Required value: must be specified" in msg,
       "an incomplete InstanceType is refused with every broken rule in one 422", resp)

    changed = json.loads(json.dumps(out))
    changed["spec"]["acceleratorGroup"] = "nvidia-a100-80gb"
    resp = c.review(VALIDATE_IT, changed, op="UPDATE", old=out, kind=IT_KIND, ns="")
    code, msg = denial(resp)
    ok(not resp["allowed"] and
       msg == 'InstanceType.worker.gpustack.ai "h100" is invalid: spec: Forbidden: is immutable '
              'except displayName and inactive',
       "InstanceType update: the spec is immutable", msg)
    renamed = json.loads(json.dumps(out))
    renamed["spec"]["displayName"] = "H100 80GB"
    renamed["spec"]["inactive"] = True
    resp = c.review(VALIDATE_IT, renamed, op="UPDATE", old=out, kind=IT_KIND, ns="")
    ok(resp["allowed"], "InstanceType update: displayName and inactive may change", resp)

    # Persist what the API server would: the mutated object, then its status.
    created = fake.create(IT_PATH, out)
    fake.merge(IT_PATH + "/h100/status", {"status": H100_STATUS})
    return created


def check_pods(c):
    p = pod("sliced", {"nvidia.com/gpu.sliced": "1",
                       "nvidia.com/gpu.sliced.memory-percentage": "50"})
    resp = c.review(MUTATE_POD, p)
    out = patched(p, resp)
    res = container_resources(out)
    want = {"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-percentage": "50",
            "nvidia.com/gpu.sliced.cores-percentage": "100",
            "nvidia.com/gpu.sliced.units": "800000"}
    ok(resp["allowed"] and res.get("limits") == want and res.get("requests") == want,
       "gate 1 folds a 50% slice into 800000 units in requests and limits, cores 100", res)
    resp = c.review(VALIDATE_POD, out)
    ok(resp["allowed"] and "patch" not in resp, "the folded slice validates", resp)

    p = pod("partition", {"nvidia.com/gpu.partitioned": "1",
                          "nvidia.com/gpu.partitioned.mig-3g.40gb": "1"})
    resp = c.review(MUTATE_POD, p)
    out = patched(p, resp)
    units = container_resources(out)["limits"].get("nvidia.com/gpu.partitioned.units")
    ok(resp["allowed"] and units == "800000" and
       container_resources(out)["requests"].get("nvidia.com/gpu.partitioned.units") == units,
       "gate 1 folds a 3g.40gb partition into %s units" % units, out)

    p = pod("shared", {"nvidia.com/gpu.shared": "2"})
    resp = c.review(MUTATE_POD, p)
    out = patched(p, resp)
    terms = (out["spec"].get("affinity", {}).get("nodeAffinity", {})
             .get("requiredDuringSchedulingIgnoredDuringExecution", {})
             .get("nodeSelectorTerms", []))
    want = {"key": "acceleratable.feature.gpustack.ai/%s.count" % GROUP, "operator": "Gt",
            "values": ["1"]}
    ok(resp["allowed"] and len(terms) == 1 and want in terms[0].get("matchExpressions", []),
       "a 2-card shared request is pinned to nodes with more than 1 such card", terms)

    p = pod("two-slices", {"nvidia.com/gpu.sliced": "2",
                           "nvidia.com/gpu.sliced.memory-percentage": "50"})
    resp = c.review(VALIDATE_POD, p)
    code, msg = denial(resp)
    ok(not resp["allowed"] and
       "spec.containers[0].resources.limits[nvidia.com/gpu.sliced]: Invalid value: \"2\": a "
       "logical slice request is always a single accelerator; multi-accelerator logical slicing "
       "is not supported yet" in msg,
       "rule 2: a slice of two accelerators is denied (%d)" % (code or 0), msg)

    p = pod("mixed", {"nvidia.com/gpu": "1", "nvidia.com/gpu.sliced": "1",
                      "nvidia.com/gpu.sliced.memory-percentage": "50"})
    resp = c.review(VALIDATE_POD, p)
    ok(not resp["allowed"] and "spec: Forbidden: a Pod may request only one accelerator family, "
       "found [exclusive sliced]" in denial(resp)[1], "rule 1: two families are denied", resp)

    p = pod("plain", {"cpu": "1"}, labels={})
    resp = c.review(MUTATE_POD, p)
    ok(resp["allowed"] and "patch" not in resp, "a Pod without the queue label is untouched", resp)


def check_workload(c, fake):
    fake.create(CQ_PATH, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                          "metadata": {"name": "h100",
                                       "labels": {"resource.gpustack.ai/type": "instancetypes"}},
                          "spec": {}})
    fake.create(LQ_PATH, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                          "metadata": {"name": entrance("h100"), "namespace": "team-a"},
                          "spec": {"clusterQueue": "h100"}})
    wl = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
          "metadata": {"name": "pod-sliced-1", "namespace": "team-a"},
          "spec": {"queueName": entrance("h100"), "podSets": [{
              "name": "main", "count": 1, "template": {"spec": {"containers": [{
                  "name": "main", "image": "x", "resources": {
                      "requests": {"nvidia.com/gpu.sliced": "1",
                                   "nvidia.com/gpu.sliced.units": "800000"},
                      "limits": {"nvidia.com/gpu.sliced": "1",
                                 "nvidia.com/gpu.sliced.units": "800000"}}}]}}}]}}
    pin = {"key": "sliced-max-free-units.fit.gpustack.ai/" + GROUP, "operator": "Gt",
           "values": ["799999"]}

    def pinned():
        resp = c.review(MUTATE_WL, wl, kind=WL_KIND)
        out = patched(wl, resp)
        terms = (out["spec"]["podSets"][0]["template"]["spec"].get("affinity", {})
                 .get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", {})
                 .get("nodeSelectorTerms", []))
        return resp["allowed"], any(pin in t.get("matchExpressions", []) for t in terms)

    ok(eventually(lambda: pinned() == (True, True)),
       "the Workload fit pin: sliced-max-free-units Gt 799999 (queues seen through the watch)",
       pinned())
    fake.merge(CQ_PATH + "/h100", {"metadata": {"labels": {"resource.gpustack.ai/type": None}}})
    ok(eventually(lambda: pinned() == (True, False)),
       "once the ClusterQueue loses the operator's mark, the Workload passes unpinned",
       pinned())
    fake.merge(CQ_PATH + "/h100",
               {"metadata": {"labels": {"resource.gpustack.ai/type": "instancetypes"}}})
    ok(eventually(lambda: pinned() == (True, True)), "and is pinned again when it is back")

    # The runtime Setting wins over the value the webhook started with (the default, true).
    fake.create(SETTINGS_PATH, {"apiVersion": "gpustack.ai/v1", "kind": "Setting",
                                "metadata": {"name": "workload-fit-affinity",
                                             "namespace": "gpustack-system"},
                                "spec": {"value": "false"}})
    ok(eventually(lambda: pinned() == (True, False)),
       "Setting workload-fit-affinity=false (a watch event): the Workload passes unpinned")
    fake.merge(SETTINGS_PATH + "/workload-fit-affinity", {"spec": {"value": "true"}})
    ok(eventually(lambda: pinned() == (True, True)), "and true pins it again")


def check_instance(c):
    inst = {"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Instance",
            "metadata": {"name": "dev", "namespace": "team-a"},
            "spec": {"type": "h100", "image": "ubuntu:24.04",
                     "resources": {"accelerator": "1",
                                   "acceleratorPartitionedProfile": "2g.20gb"},
                     "volume": {"ephemeral": {"capacity": "10Gi"}}}}
    resp = c.review(VALIDATE_INST, inst, kind=INST_KIND)
    code, msg = denial(resp)
    ok(not resp["allowed"] and code == 422 and
       "does not offer this partition profile; offered: [1g.10gb 3g.40gb]" in msg,
       "Instance: an unoffered profile is refused naming the offered set", msg)
    inst["spec"]["resources"]["acceleratorPartitionedProfile"] = "3g.40gb"
    resp = c.review(VALIDATE_INST, inst, kind=INST_KIND)
    ok(resp["allowed"], "Instance: an offered profile is admitted", resp)

    gone = json.loads(json.dumps(inst))
    gone["spec"]["type"] = "deleted-type"
    gone["metadata"]["deletionTimestamp"] = "2026-12-02T00:00:00Z"
    old = json.loads(json.dumps(gone))
    old["metadata"]["finalizers"] = ["worker.gpustack.ai/instance"]
    for path in (MUTATE_INST, VALIDATE_INST):
        resp = c.review(path, gone, op="UPDATE", old=old, kind=INST_KIND)
        ok(resp["allowed"] and "patch" not in resp,
           "%s: an Instance being deleted updates freely (its type is gone)" % path, resp)
    gone["metadata"].pop("deletionTimestamp")
    resp = c.review(MUTATE_INST, gone, op="CREATE", kind=INST_KIND)
    ok(not resp["allowed"], "without the deletion, the missing type is refused", resp)


def check_kvcache(c, fake):
    fake.create(KV + "/kvcachebackends", {
        "apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "KVCacheBackend",
        "metadata": {"name": "be-tcp"}, "spec": {"transport": {"protocol": "TCP"}}})
    fake.create(KV + "/kvcachepools", {
        "apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "KVCachePool",
        "metadata": {"name": "pool-a"}, "spec": {"backends": ["be-tcp"]}})
    fake.merge(KV + "/kvcachepools/pool-a/status", {"status": {
        "clientEndpoint": "pool-a.gpustack-system:50051",
        "conditions": [{"type": "QuotaLedgerAvailable", "status": "True"}]}})
    fake.create(KV + "/namespaces/team-a/kvcachepoolbindings", {
        "apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "KVCachePoolBinding",
        "metadata": {"name": "chat", "namespace": "team-a"},
        "spec": {"poolRef": {"name": "pool-a"},
                 "domain": {"name": "team-a-chat", "blockSize": 16, "dtype": "fp8"}}})
    p = pod("chat-0", {}, labels={"kvcache.gpustack.ai/inject": "true"},
            annotations={"kvcache.gpustack.ai/binding": "chat",
                         "kvcache.gpustack.ai/engine": "vLLM"},
            containers=[{"name": "server", "image": "vllm/vllm-openai:v0.8.5",
                         "command": ["vllm"], "args": ["serve", "m"]}])

    def injected():
        resp = c.review(MUTATE_KV, p)
        return (resp, patched(p, resp)) if resp["allowed"] else None

    got = eventually(injected)  # the objects reach the cache through its watch
    resp, out = got if got else (c.review(MUTATE_KV, p), p)
    args = out["spec"]["containers"][0].get("args", [])
    record = out["metadata"]["annotations"].get("kvcache.gpustack.ai/injected")
    ok(resp["allowed"] and "--kv-transfer-config" in args and record,
       "KV-cache injection: --kv-transfer-config added and the record written", out)
    env = {e["name"]: e.get("value") for e in out["spec"]["containers"][0].get("env", [])}
    ok(env.get("MOONCAKE_CONFIG_PATH") == "/etc/gpustack/kvcache/mooncake.json",
       "KV-cache injection: MOONCAKE_CONFIG_PATH points at the projected file", env)
    p2 = json.loads(json.dumps(p))
    p2["metadata"]["annotations"]["kvcache.gpustack.ai/domain"] = "other"
    resp = c.review(MUTATE_KV, p2)
    ok(not resp["allowed"] and "kvcache.gpustack.ai/domain" in denial(resp)[1],
       "KV-cache: a Pod naming its own domain is refused", resp)


def check_transport_errors(c, w):
    status, doc = c.post(MUTATE_POD, b"{not json")
    ok(status == 400 and doc.get("kind") == "Status" and doc.get("code") == 400 and
       "not an AdmissionReview" in doc.get("message", ""), "malformed body: 400 Status", doc)
    status, doc = c.post(MUTATE_POD, {"apiVersion": "admission.k8s.io/v1beta1",
                                      "kind": "AdmissionReview", "request": {"uid": "x"}})
    ok(status == 400, "an AdmissionReview of another version: 400", doc)
    status, doc = c.post(MUTATE_POD, b"{" + b" " * (1 << 20) + b"}")
    ok(status == 413 and doc.get("reason") == "RequestEntityTooLarge",
       "a body over --max-body: 413", doc)
    status, doc = c.post(MUTATE_POD, {"apiVersion": "admission.k8s.io/v1"}, "text/plain")
    ok(status == 415, "a body that is not application/json: 415", doc)
    status, _ = c.get(MUTATE_POD)
    ok(status == 405 and c.last_allow == "POST", "GET on a webhook path: 405, Allow: POST")
    status, _ = c.post("/healthz", {})
    ok(status == 405 and c.headers.get("allow") == "GET, HEAD",
       "POST on /healthz: 405, Allow: GET, HEAD", c.headers)
    status, doc = c.post("/mutate-nothing", {"apiVersion": "admission.k8s.io/v1"})
    ok(status == 404, "an unknown path: 404", doc)
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}
    resp = c.review(MUTATE_POD, dep, kind=("apps", "v1", "Deployment"))
    code, msg = denial(resp)
    ok(not resp["allowed"] and code == 400 and msg == (
        "webhook mutate.gpustack-worker.core.v1.pod admits Pod core/v1, not Deployment apps/v1"),
       "a review of the wrong kind is denied naming both kinds", msg)
    resp = c.review(MUTATE_POD, pod("after", {"cpu": "1"}))
    ok(resp["allowed"], "the server keeps answering after every refusal")
    ok(w.proc.poll() is None, "and is still running")


def check_metrics(w):
    st, text = w.probe("/metrics")

    def value(pattern):
        m = re.search(r"^%s (\d+(?:\.\d+)?)$" % re.escape(pattern), text, re.M)
        return float(m.group(1)) if m else None

    pod_ok = value('tessera_webhook_requests_total{webhook="mutate.gpustack-worker.core.v1.pod",'
                   'code="200"}')
    ok(st == 200 and pod_ok is not None and pod_ok >= 5,
       "/metrics counts the Pod fold reviews (%s)" % pod_ok, text[:2000])
    ok(value('tessera_webhook_requests_total{webhook="mutate.gpustack-worker.core.v1.pod",'
             'code="413"}') == 1, "/metrics counts the 413", text[:3000])
    ok(value('tessera_webhook_denials_total{webhook="mutate.gpustack-worker.core.v1.pod",'
             'rule="wrong-kind"}') == 1, "/metrics counts denials by rule", text[:3000])
    ok(value('tessera_webhook_requests_total{webhook="mutate.gpustack-worker.core.v1.pod",'
             'code="405"}') == 1 and
       value('tessera_webhook_requests_total{webhook="mutate.gpustack-worker.core.v1.pod",'
             'code="415"}') == 1, "/metrics counts the 405 and the 415", text[:3000])
    count = value('tessera_webhook_request_duration_seconds_count'
                  '{webhook="mutate.gpustack-worker.core.v1.pod"}')
    ok(count is not None and count >= pod_ok, "/metrics has the latency histogram")
    ok(value('tessera_webhook_patches_total{webhook="mutate.gpustack-worker.core.v1.pod"}') >= 3,
       "/metrics counts patches")
    denied = [l for l in w.lines if "msg=review" in l and "allowed=false" in l]
    ok(denied and all(re.search(r"uid=\S+", l) for l in denied) and
       any("level=info" in l for l in denied),
       "every denial is logged at info with its request uid", "\n".join(w.lines[-20:]))


def serial_of(port, ctx):
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    with ctx.wrap_socket(sock, server_hostname=SVC) as s:
        return int(s.getpeercert()["serialNumber"], 16)


def check_cert_reload(w, d):
    ctx = client_context(d)
    ok(serial_of(w.port, ctx) == 1, "serving certificate generation 1")
    time.sleep(1.1)
    install_pair(d, "leaf2.crt", "leaf2.key")
    ok(eventually(lambda: serial_of(w.port, ctx) == 2, timeout=5),
       "a renewed pair serves the next handshake, no restart")
    with open(os.path.join(d, "tls.crt"), "w") as f:
        f.write("-----BEGIN CERTIFICATE-----\nbroken\n")
    time.sleep(1.1)
    ok(serial_of(w.port, ctx) == 2 and serial_of(w.port, ctx) == 2,
       "a broken pair is refused and the last good one keeps serving")
    ok(eventually(lambda: w.find("certificate reload refused")),
       "the refusal is logged", "\n".join(w.lines[-5:]))
    install_pair(d, "leaf1.crt", "leaf2.key")
    time.sleep(1.1)
    ok(serial_of(w.port, ctx) == 2 and eventually(lambda: w.find("does not match certificate")),
       "a key that is not the certificate's is refused too")


def check_unserved_kinds(tessera, fake_script, d, settings_status):
    """Without the KV-cache CRDs, and with a Settings API that answers settings_status."""
    extra = ["--unserved", "kvcachebackends", "--unserved", "kvcachepools"]
    if settings_status == 404:
        extra += ["--unserved", "settings"]
    fake = ApiServer(fake_script, d, extra=extra)
    if settings_status != 404:  # an aggregated API whose operator is down
        fake.request("POST", "/_test/fail", {"status": settings_status, "count": 1000000,
                                             "match": "/settings"})
    kc = os.path.join(d, "unserved.kubeconfig")
    write_kubeconfig(kc, fake.port, os.path.join(d, "ca.crt"))
    w = Webhook(tessera, d, kc)
    try:
        ok(eventually(lambda: w.probe("/readyz")[0] == 200),
           "an API server without the KV-cache CRDs, its Settings API answering %d: ready all "
           "the same" % settings_status, w.probe("/readyz"))
    finally:
        w.stop()
        fake.stop()
    w.check_stderr("the webhook without KV-cache kinds")


def check_shutdown(w, c):
    t0 = time.monotonic()
    w.proc.send_signal(signal.SIGTERM)
    st = eventually(lambda: w.probe("/readyz")[0] == 503 or None, timeout=2)
    ok(st, "after SIGTERM: /readyz reports 503 while draining")
    resp = c.review(MUTATE_POD, pod("late", {"cpu": "1"}))
    ok(resp["allowed"] and c.headers.get("connection") == "close",
       "reviews are still answered during the shutdown delay, closing their connection",
       c.headers)
    try:
        rc = w.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        rc = None
    took = time.monotonic() - t0
    ok(rc == 0 and w.find("msg=stopped"), "exits 0 after the drain", rc)
    ok(took < 3.0, "the drain ends once the last kept-alive connection has closed (%.1f s; "
       "delay 0.7 s, grace 5 s)" % took)
    w.stop()
    w.check_stderr("the webhook")


def main():
    tessera, fake_script, gen_certs = sys.argv[1:4]
    d = tempfile.mkdtemp(prefix="tsr-webhook-")
    fake = w = None
    try:
        subprocess.run(["sh", gen_certs, d], check=True)
        make_webhook_ca(d)
        make_webhook_leaf(d, 1, "leaf1.key", "leaf1.crt")
        make_webhook_leaf(d, 2, "leaf2.key", "leaf2.crt")
        install_pair(d, "leaf1.crt", "leaf1.key")

        check_readiness_before_sync(tessera, d)

        fake = ApiServer(fake_script, d)
        kc = os.path.join(d, "kubeconfig")
        write_kubeconfig(kc, fake.port, os.path.join(d, "ca.crt"))
        w = Webhook(tessera, d, kc)
        ok(eventually(lambda: w.probe("/readyz")[0] == 200), "ready once the cache has synced")
        c = Client(w.port, client_context(d))
        check_tls(c, w)
        check_instancetype(c, fake)
        probe = pod("probe", {"nvidia.com/gpu.partitioned": "1",
                              "nvidia.com/gpu.partitioned.mig-1g.10gb": "1"})
        ok(eventually(lambda: "patch" in c.review(MUTATE_POD, probe)),
           "the InstanceType and its status reach the webhook through the watch")
        check_pods(c)
        check_workload(c, fake)
        check_instance(c)
        check_kvcache(c, fake)
        check_transport_errors(c, w)
        check_metrics(w)
        handshakes = c.conn.handshakes
        for i in range(20):
            c.review(MUTATE_POD, pod("keepalive-%d" % i, {"cpu": "1"}))
        ok(c.conn.handshakes == handshakes,
           "keep-alive: 20 reviews on one TLS connection (%d handshakes in all, 413 and 405 "
           "closing theirs)" % c.conn.handshakes)
        check_cert_reload(w, d)
        install_pair(d, "leaf2.crt", "leaf2.key")
        check_unserved_kinds(tessera, fake_script, d, 404)
        check_unserved_kinds(tessera, fake_script, d, 503)
        check_shutdown(w, c)
    except Exception as e:  # noqa: BLE001 - any failure is one failed TAP line with its cause
        ok(False, "the run completed", "%s: %s" % (type(e).__name__, e))
        if w:
            print("# webhook log tail:\n#   " + "\n#   ".join(w.lines[-30:]))
    finally:
        if w:
            w.stop()
        if fake:
            fake.stop()
        shutil.rmtree(d, ignore_errors=True)
    print("1..%d" % len(results))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
