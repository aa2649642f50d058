#!/usr/bin/env python3
"""webhook_server.py TESSERA - the real `tessera webhook` binary, posted to by hand for what the
API server never sends or never shows its user (spec/kubernetes-contracts.md §1.1): the TLS and
HTTP/1.1 transport, the refusals of requests that are not an API server's AdmissionReview, the
metrics and the certificate reload. Everything a user does through the API server (the
InstanceType, Workload, Instance and KV-cache webhooks, readiness, Settings, shutdown, an API
server without the KV-cache kinds) is tests/cluster/test_webhook.py's, and gate 1's Pod rules are
tests/cluster/test_gate1.py's.

The webhook's watch cache reads a real kube-apiserver (tests/cluster/controlplane.py, no Kueue,
no scheduler; tessera's CRDs installed), where one upstream-shaped InstanceType with its entrance
label and computed status is stored (no webhook is registered there) so that Pod reviews fold.
The client is Python's ssl over a socket to 127.0.0.1 with SNI and certificate verification for
gpustack-worker-webhook.gpustack-system.svc against a CA of this test's own, ALPN offering
http/1.1 only, and HTTP/1.1 keep-alive (http.client), as the API server dials a Service;
AdmissionReview v1 bodies are POSTed with ?timeout=10s.

Checked, in order: ready once the cache has listed the real API server; TLS (GET /healthz over
it, the negotiated version, ALPN never h2, the certificate's DNS name verified against the CA);
the stored InstanceType reaches the cache (a sliced Pod review folds); the transport's refusals
(a malformed body 400 as a Status, an AdmissionReview of another version 400, a body over
--max-body 413, a body that is not application/json 415, GET on a webhook path 405 with Allow:
POST, POST on /healthz 405 with Allow: GET, HEAD, an unknown path 404, a review of the wrong kind
denied naming both kinds), the server still answering and running after them; /metrics (the Pod
fold reviews, the 413, the 405 and the 415 counted by code, denials by rule, the latency
histogram, patches) and every denial logged at info with its request uid; keep-alive (20 reviews
on one TLS connection, no new handshake); certificate reload (a renewed pair serves the next
handshake, a broken one is refused and logged while the last good pair keeps serving, a key that
is not the certificate's refused too); keep-alive through the drain (after SIGTERM, once the listening
socket is quiesced, a new connection queued on it is still answered, with Connection: close; a
review on the kept-alive connection is answered with Connection: close, and the process exits 0
once that connection has closed, well before the grace); the webhook's stderr holds only log lines.

Prints TAP.
"""

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
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cluster"))
from controlplane import ROOT, ControlPlane, eventually  # noqa: E402
from daemons import WebhookServer  # noqa: E402
from names import entrance  # noqa: E402
from tap import Tap  # noqa: E402

SVC = "gpustack-worker-webhook.gpustack-system.svc"
GROUP = "nvidia-h100-80gb-hbm3"
H100 = "gpustack--nvidia-h100-80gb-hbm3-linux-amd64"
MUTATE_POD = "/mutate-gpustack-worker-core-v1-pod"
POD_WEBHOOK = "mutate.gpustack-worker.core.v1.pod"

t = Tap()




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


# ---- the client -------------------------------------------------------------------------------

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
        self.n = 0

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

    def review(self, path, obj, kind=("", "v1", "Pod")):
        self.n += 1
        uid = "uid-%d" % self.n
        group, version, k = kind
        body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": uid, "kind": {"group": group, "version": version, "kind": k},
            "resource": {"group": group, "version": version, "resource": k.lower() + "s"},
            "requestKind": {"group": group, "version": version, "kind": k},
            "name": obj["metadata"]["name"], "namespace": "team-a", "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:team-a:default"},
            "object": obj, "oldObject": None, "dryRun": False}}
        status, doc = self.post(path + "?timeout=10s", body)
        if status != 200:
            raise AssertionError("HTTP %d: %r" % (status, doc))
        resp = doc["response"]
        if resp.get("uid") != uid:
            raise AssertionError("uid %r not echoed: %r" % (uid, resp))
        return resp


def pod(name, limits):
    """A queued Pod as the API server hands it to admission: requests defaulted from limits."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": "team-a",
        "labels": {"kueue.x-k8s.io/queue-name": entrance(H100)}},
        "spec": {"containers": [{"name": "main", "image": "vllm/vllm-openai:v0.8.5",
                                 "resources": {"limits": dict(limits),
                                               "requests": dict(limits)}}]}}


SLICE = {"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-percentage": "50"}


def stray_lines(w):
    return [line for line in w.lines if not line.startswith("time=")]


# ---- the fixture on the API server ------------------------------------------------------------

def store_instancetype(cp):
    """An H100 InstanceType as the operator leaves it: labels stamped, status computed."""
    def view(capacity, once, remaining):
        return {"capacity": capacity, "onceMaxRequest": once, "remaining": remaining}

    cp.create({"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "InstanceType",
               "metadata": {"name": H100,
                            "labels": {"schedule.gpustack.ai/queue-entrance": entrance(H100)}},
               "spec": {"acceleratable": True, "acceleratorGroup": GROUP, "generalGroup": "generic",
                        "os": "linux", "arch": "amd64",
                        "unitResources": {"cpu": "12", "ram": "192Gi"}, "localStorage": "100Gi"}})
    cp.merge_patch("/apis/worker.gpustack.ai/v1alpha1/instancetypes/%s/status" % H100, {"status": {
        "phase": "Active", "entrance": entrance(H100),
        "accelerator": view(8, 8, 8), "acceleratorShared": view(80, 8, 80),
        "acceleratorSliced": view(800, 100, 800),
        "acceleratorPartitioned": dict(view(0, 0, 0), remainingProfiles=[]), "cpu": view(0, 0, 0),
        "detail": {"manufacturer": "nvidia", "memory": "81920Mi", "slicedDetail": {
            "logical": {"coresPercentageOvercommit": True, "count": 128},
            "physical": {"count": 7, "profiles": [
                {"name": "3g.40gb", "count": 2, "memoryMib": 40960}]}}}}})


# ---- the checks -------------------------------------------------------------------------------

def check_tls(c):
    st, body = c.get("/healthz")
    sock = c.conn.sock
    t.ok(st == 200 and body == b"ok\n", "GET /healthz over TLS")
    t.ok(sock.version() in ("TLSv1.2", "TLSv1.3"), "TLS version %s" % sock.version())
    t.ok(sock.selected_alpn_protocol() in (None, "http/1.1"),
         "ALPN: %s (HTTP/1.1, never h2)" % sock.selected_alpn_protocol())
    cert = sock.getpeercert()
    sans = [v for k, v in cert.get("subjectAltName", ()) if k == "DNS"]
    t.ok(SVC in sans, "the certificate names %s and verifies against the CA" % SVC, sans)


def check_transport_errors(c, w):
    status, doc = c.post(MUTATE_POD, b"{not json")
    t.ok(status == 400 and isinstance(doc, dict) and doc.get("kind") == "Status" and
         doc.get("code") == 400 and "not an AdmissionReview" in doc.get("message", ""),
         "malformed body: 400 Status", doc)
    status, doc = c.post(MUTATE_POD, {"apiVersion": "admission.k8s.io/v1beta1",
                                      "kind": "AdmissionReview", "request": {"uid": "x"}})
    t.ok(status == 400, "an AdmissionReview of another version: 400", doc)
    status, doc = c.post(MUTATE_POD, b"{" + b" " * (1 << 20) + b"}")
    t.ok(status == 413 and isinstance(doc, dict) and doc.get("reason") == "RequestEntityTooLarge",
         "a body over --max-body: 413", doc)
    status, doc = c.post(MUTATE_POD, {"apiVersion": "admission.k8s.io/v1"}, "text/plain")
    t.ok(status == 415, "a body that is not application/json: 415", doc)
    status, _ = c.get(MUTATE_POD)
    t.ok(status == 405 and c.last_allow == "POST", "GET on a webhook path: 405, Allow: POST")
    status, _ = c.post("/healthz", {})
    t.ok(status == 405 and c.headers.get("allow") == "GET, HEAD",
         "POST on /healthz: 405, Allow: GET, HEAD", c.headers)
    status, doc = c.post("/mutate-nothing", {"apiVersion": "admission.k8s.io/v1"})
    t.ok(status == 404, "an unknown path: 404", doc)
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}
    resp = c.review(MUTATE_POD, dep, kind=("apps", "v1", "Deployment"))
    st = resp.get("status", {})
    t.ok(not resp["allowed"] and st.get("code") == 400 and st.get("message") == (
        "webhook %s admits Pod core/v1, not Deployment apps/v1" % POD_WEBHOOK),
         "a review of the wrong kind is denied naming both kinds", resp)
    resp = c.review(MUTATE_POD, pod("after", {"cpu": "1"}))
    t.ok(resp["allowed"], "the server keeps answering after every refusal")
    t.ok(w.alive(), "and is still running")


def check_metrics(w, tessera):
    st, text = w.probe("/metrics")
    _, version, _, revision = subprocess.run([tessera, "--version"], capture_output=True,
                                             text=True, check=True).stdout.split()
    build = 'tessera_build_info{component="webhook",version="%s",revision="%s"} 1' % (
        version, revision.rstrip(")"))
    t.ok(build in text.splitlines() and "# TYPE tessera_build_info gauge" in text,
         "/metrics has tessera_build_info with the binary's version and revision", text[-600:])
    started = next((ln for ln in w.lines if "msg=listening" in ln), "")
    t.ok(("version=%s" % version) in started and ("revision=%s" % revision.rstrip(")")) in
         started, "the start line logs the version and revision", started)

    def value(pattern):
        m = re.search(r"^%s (\d+(?:\.\d+)?)$" % re.escape(pattern), text, re.M)
        return float(m.group(1)) if m else None

    def requests(code):
        return value('tessera_webhook_requests_total{webhook="%s",code="%s"}' % (POD_WEBHOOK,
                                                                                  code))

    pod_ok = requests("200")
    t.ok(st == 200 and pod_ok is not None and pod_ok >= 5,
         "/metrics counts the Pod fold reviews (%s)" % pod_ok, text[:2000])
    t.ok(requests("413") == 1, "/metrics counts the 413", text[:3000])
    t.ok(value('tessera_webhook_denials_total{webhook="%s",rule="wrong-kind"}' % POD_WEBHOOK)
         == 1, "/metrics counts denials by rule", text[:3000])
    t.ok(requests("405") == 1 and requests("415") == 1, "/metrics counts the 405 and the 415",
         text[:3000])
    count = value('tessera_webhook_request_duration_seconds_count{webhook="%s"}' % POD_WEBHOOK)
    t.ok(count is not None and count >= pod_ok, "/metrics has the latency histogram")
    patches = value('tessera_webhook_patches_total{webhook="%s"}' % POD_WEBHOOK)
    t.ok(patches is not None and patches >= 3, "/metrics counts patches (%s)" % patches)
    denied = [line for line in w.lines if "msg=review" in line and "allowed=false" in line]
    t.ok(denied and all(re.search(r"uid=\S+", line) for line in denied) and
         any("level=info" in line for line in denied),
         "every denial is logged at info with its request uid", w.log(20))


def serial_of(port, ctx):
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    with ctx.wrap_socket(sock, server_hostname=SVC) as s:
        return int(s.getpeercert()["serialNumber"], 16)


def check_cert_reload(w, d):
    ctx = client_context(d)
    t.ok(serial_of(w.port, ctx) == 1, "serving certificate generation 1")
    time.sleep(1.1)
    install_pair(d, "leaf2.crt", "leaf2.key")
    t.ok(eventually(lambda: serial_of(w.port, ctx) == 2, timeout=5),
         "a renewed pair serves the next handshake, no restart")
    with open(os.path.join(d, "tls.crt"), "w") as f:
        f.write("-----BEGIN CERTIFICATE-----\nbroken\n")
    time.sleep(1.1)
    t.ok(serial_of(w.port, ctx) == 2 and serial_of(w.port, ctx) == 2,
         "a broken pair is refused and the last good one keeps serving")
    t.ok(eventually(lambda: w.find("certificate reload refused")),
         "the refusal is logged", w.log(5))
    install_pair(d, "leaf1.crt", "leaf2.key")
    time.sleep(1.1)
    t.ok(serial_of(w.port, ctx) == 2 and eventually(lambda: w.find("does not match certificate")),
         "a key that is not the certificate's is refused too")


def check_drain(w, c, ctx):
    """Keep-alive through the shutdown: what a kept-alive connection sees, what a connection that
    arrives after the listening socket was quiesced sees, and how long it takes."""
    t0 = time.monotonic()
    w.proc.send_signal(signal.SIGTERM)
    eventually(lambda: w.probe("/readyz")[0] == 503, timeout=2)
    time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))  # past the 0.7 s delay: quiesced
    late = Client(w.port, ctx)
    try:
        resp = late.review(MUTATE_POD, pod("queued", {"cpu": "1"}))
        queued = resp["allowed"] and late.headers.get("connection") == "close"
    except Exception as e:  # noqa: BLE001 - a reset or a timeout is the failure shown
        queued, resp = False, e
    t.ok(queued, "a connection queued after the quiesce is taken in and answered, closing it "
         "(it was reset)", resp)
    resp = c.review(MUTATE_POD, pod("late", {"cpu": "1"}))
    t.ok(resp["allowed"] and c.headers.get("connection") == "close",
         "after SIGTERM a review on the kept-alive connection is answered, closing it",
         c.headers)
    try:
        rc = w.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        rc = None
    took = time.monotonic() - t0
    t.ok(rc == 0 and w.find("msg=stopped"), "exits 0 after the drain", rc)
    t.ok(took < 4.0, "the drain ends once the last kept-alive connection has closed (%.1f s; "
         "delay 0.7 s, a second's wait for the queued connection, grace 5 s)" % took)


def run(tessera, cp, d):
    cp.install_crds([os.path.join(ROOT, "deploy", "chart", "tessera", "files", "crds")])
    store_instancetype(cp)
    w = WebhookServer(tessera, cp, cert=os.path.join(d, "tls.crt"), key=os.path.join(d, "tls.key"),
                      extra=["--threads", "4", "--max-body", "1048576",
                             "--shutdown-delay", "700ms", "--shutdown-grace", "5s"])
    try:
        t.ok(eventually(lambda: w.probe("/readyz")[0] == 200, 30),
             "ready once the cache has listed the real API server", w.probe("/readyz"))
        c = Client(w.port, client_context(d))
        check_tls(c)
        probe = pod("probe", SLICE)
        t.ok(eventually(lambda: "patch" in c.review(MUTATE_POD, probe), 30),
             "the stored InstanceType reaches the cache: a sliced Pod review folds")
        for i in range(3):
            c.review(MUTATE_POD, pod("fold-%d" % i, SLICE))
        check_transport_errors(c, w)
        check_metrics(w, tessera)
        handshakes = c.conn.handshakes
        for i in range(20):
            c.review(MUTATE_POD, pod("keepalive-%d" % i, {"cpu": "1"}))
        t.ok(c.conn.handshakes == handshakes,
             "keep-alive: 20 reviews on one TLS connection (%d handshakes in all, 413 and 405 "
             "closing theirs)" % c.conn.handshakes)
        check_cert_reload(w, d)
        install_pair(d, "leaf2.crt", "leaf2.key")
        check_drain(w, c, client_context(d))
        stray = stray_lines(w)
        t.ok(not stray, "the webhook's stderr holds only log lines", "\n".join(stray[:40]))
    except Exception:  # noqa: BLE001 - any failure is one failed TAP line with its cause
        t.crash("webhook_server")
        t.note("webhook log tail:\n" + w.log(30))
    finally:
        w.stop()


def in_control_plane(name, tap, leaves, body):
    """Runs body(cp, d) against a fresh control plane (no Kueue, scheduler or controller
    manager) with the webhook CA and leaves leaf1..leafN in d, leaf1 installed as tls.*;
    reports a crash on tap and returns tap.done()."""
    d = tempfile.mkdtemp(prefix="tsr-%s-" % name)
    cp = ControlPlane(name, kueue=False, scheduler=False, controller_manager=False)
    try:
        make_webhook_ca(d)
        for i in range(1, leaves + 1):
            make_webhook_leaf(d, i, "leaf%d.key" % i, "leaf%d.crt" % i)
        install_pair(d, "leaf1.crt", "leaf1.key")
        cp.start()
        body(cp, d)
    except Exception:  # noqa: BLE001 - reported as a failed check
        tap.crash(name)
    finally:
        cp.stop(failed=tap.failed())
        shutil.rmtree(d, ignore_errors=True)
    return tap.done()


def main():
    tessera = sys.argv[1]
    return in_control_plane("webhook-server", t, 2, lambda cp, d: run(tessera, cp, d))


if __name__ == "__main__":
    sys.exit(main())
