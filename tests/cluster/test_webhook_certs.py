#!/usr/bin/env python3
"""test_webhook_certs.py TESSERA - tessera's own webhook certificates (`tessera controller
--webhook-cert-secret`) on a real kube-apiserver with tessera's and Kueue's CRDs (Kueue itself not
running), the controller as the admin.

Checked, in order: with a MutatingWebhookConfiguration (two webhooks) and a
ValidatingWebhookConfiguration registered with empty caBundles, a leading controller creates the
kubernetes.io/tls Secret with tls.crt (serving certificate, then the CA), tls.key, ca.crt and
ca.key, and patches every caBundle to ca.crt; a real `tessera webhook` serving the Secret's
tls.crt / tls.key accepts a TLS connection that Python's ssl verifies against the caBundle for
the Service's DNS name (connecting to 127.0.0.1 with server_hostname); a controller restart keeps
the same certificate; a second controller that does not lead writes nothing; a caBundle reset to
empty is patched again; garbage in tls.crt is replaced by a certificate of the same CA; a 90 s
serving validity renews (a new serial, same CA, still verifying, the webhook serving it after its
files change); the metrics report the expiry and the rotations. Prints TAP.
"""
import base64
import glob
import os
import socket
import ssl
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from controlplane import ROOT, ApiError, eventually  # noqa: E402
from daemons import Controller, WebhookServer  # noqa: E402
from tap import Tap, on_control_plane  # noqa: E402

CRDS = sorted(glob.glob(os.path.join(ROOT, "deploy", "chart", "tessera", "files", "crds", "*.yaml")))
NS = "gpustack-system"
SECRET = "tessera-webhook-certs"
SVC = "tessera-webhook"
HOST = SVC + "." + NS + ".svc"
MWC, VWC = "tessera-certs-mutation", "tessera-certs-validation"
ADM = "/apis/admissionregistration.k8s.io/v1/"
SECRET_PATH = "/api/v1/namespaces/%s/secrets/%s" % (NS, SECRET)


def hook(name):
    return {"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Ignore",
            "clientConfig": {"service": {"namespace": NS, "name": SVC, "path": "/x", "port": 443}},
            "rules": [{"apiGroups": ["example.test"], "apiVersions": ["v1"],
                       "operations": ["CREATE"], "resources": ["widgets"]}]}


def configurations():
    return [{"apiVersion": "admissionregistration.k8s.io/v1",
             "kind": "MutatingWebhookConfiguration", "metadata": {"name": MWC},
             "webhooks": [hook("a.tessera.test"), hook("b.tessera.test")]},
            {"apiVersion": "admissionregistration.k8s.io/v1",
             "kind": "ValidatingWebhookConfiguration", "metadata": {"name": VWC},
             "webhooks": [hook("c.tessera.test")]}]


def flags(validity=None):
    extra = ["--webhook-cert-secret", NS + "/" + SECRET, "--webhook-service", NS + "/" + SVC,
             "--webhook-configurations", MWC + "," + VWC]
    if validity:
        extra += ["--webhook-cert-validity", validity]
    return extra


def secret(cp):
    try:
        return cp.api("GET", SECRET_PATH)
    except ApiError:
        return None


def field(s, key):
    return base64.b64decode(((s or {}).get("data") or {}).get(key, "")).decode()


def bundles(cp):
    out = []
    for kind, name in (("mutatingwebhookconfigurations", MWC),
                       ("validatingwebhookconfigurations", VWC)):
        for w in cp.api("GET", ADM + kind + "/" + name)["webhooks"]:
            out.append(w["clientConfig"].get("caBundle", ""))
    return out


def serial(pem):
    """The serial of the first certificate of pem, via Python's ssl test helper."""
    d = tempfile.mkdtemp(prefix="tsr-certs-")
    path = os.path.join(d, "c.pem")
    with open(path, "w") as f:
        f.write(pem)
    return ssl._ssl._test_decode_cert(path)["serialNumber"]


def write_files(d, s):
    for key in ("tls.crt", "tls.key"):
        tmp = os.path.join(d, key + ".new")
        with open(tmp, "w") as f:
            f.write(field(s, key))
        os.replace(tmp, os.path.join(d, key))


def handshake(port, ca_pem):
    """The serial of the certificate a TLS connection to 127.0.0.1:port verified against ca_pem
    for HOST shows, or the error as a string."""
    ctx = ssl.create_default_context(cadata=ca_pem)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            with ctx.wrap_socket(sock, server_hostname=HOST) as tls:
                der = tls.getpeercert(binary_form=True)
                return serial(ssl.DER_cert_to_PEM_cert(der))
    except (OSError, ssl.SSLError) as e:
        return "error: %s" % e


def run(t, tessera, cp):
    cp.install_crds(CRDS + [os.path.join(cp.kueue_share(), "crds")])
    cp.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for doc in configurations():
        cp.ensure(doc)
    t.ok(bundles(cp) == ["", "", ""], "the webhook configurations start with empty caBundles")
    d = tempfile.mkdtemp(prefix="tsr-webhook-certs-")
    ctl = Controller(tessera, cp, "controller-a", extra=flags())
    hook_server = None
    others = []
    try:
        ctl.wait_ready()
        s = eventually(lambda: secret(cp), 30)
        t.ok(s and s["type"] == "kubernetes.io/tls" and
             set(s["data"]) == {"tls.crt", "tls.key", "ca.crt", "ca.key"},
             "the Secret is created, kubernetes.io/tls with tls.crt, tls.key, ca.crt and ca.key",
             s and {k: v for k, v in s.items() if k != "data"})
        ca = field(s, "ca.crt")
        crt = field(s, "tls.crt")
        t.ok(crt.count("BEGIN CERTIFICATE") == 2 and crt.endswith(ca) and
             "PRIVATE KEY" in field(s, "tls.key") and "PRIVATE KEY" in field(s, "ca.key"),
             "tls.crt is the serving certificate then the CA; the keys are PEM")
        want = base64.b64encode(ca.encode()).decode()
        t.ok(eventually(lambda: bundles(cp) == [want] * 3, 30),
             "every webhook's caBundle is ca.crt", bundles(cp))
        first = serial(crt)

        write_files(d, s)
        hook_server = WebhookServer(tessera, cp, cert=os.path.join(d, "tls.crt"),
                                    key=os.path.join(d, "tls.key"))
        got = handshake(hook_server.port, ca)
        t.ok(got == first, "tessera webhook serving the Secret verifies against the caBundle "
             "for %s" % HOST, got)
        other_ctx = ssl.create_default_context(cadata=ca)
        try:
            with socket.create_connection(("127.0.0.1", hook_server.port), timeout=5) as sock:
                other_ctx.wrap_socket(sock, server_hostname="other.example.test").close()
            wrong = "accepted"
        except ssl.SSLError as e:
            wrong = "refused: %s" % e
        t.ok(wrong.startswith("refused"), "a name the certificate does not carry is refused",
             wrong)

        rv = s["metadata"]["resourceVersion"]
        ctl.stop()
        ctl = Controller(tessera, cp, "controller-a", extra=flags())
        ctl.wait_ready()
        time.sleep(3)
        s2 = secret(cp)
        t.ok(s2["metadata"]["resourceVersion"] == rv and field(s2, "tls.crt") == crt,
             "a controller restart keeps the same certificate (the Secret is not written)")

        standby = Controller(tessera, cp, "controller-b", extra=flags())
        others.append(standby)
        standby.wait_ready()
        cp.api("PATCH", ADM + "validatingwebhookconfigurations/" + VWC,
               [{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": ""}],
               content_type="application/json-patch+json")
        t.ok(eventually(lambda: bundles(cp) == [want] * 3, 90),
             "a caBundle reset to empty is patched again (the resync)", bundles(cp))
        t.ok("tessera_controller_leader 0" in standby.probe("/metrics")[1] and
             not standby.find("webhook caBundle patched") and
             not standby.find("certificate issued"),
             "the standby replica writes nothing", standby.log(20))
        metrics = ctl.probe("/metrics")[1]
        t.ok('tessera_webhook_cert_expiry_timestamp_seconds{cert="serving"}' in metrics and
             'tessera_webhook_cert_bundle_patches_total' in metrics,
             "the leader's metrics report the certificates",
             [ln for ln in metrics.splitlines() if "webhook_cert" in ln])
        standby.stop()
        others.remove(standby)
        ctl.stop()

        # garbage in tls.crt, then a 90 s serving validity: replaced at once with the same CA,
        # renewed about a minute later
        s5 = secret(cp)
        s5["data"]["tls.crt"] = base64.b64encode(b"garbage").decode()
        cp.api("PUT", SECRET_PATH, s5)
        ctl = Controller(tessera, cp, "controller-a", extra=flags("90s"))
        ctl.wait_ready()
        s6 = eventually(lambda: (lambda x: x if "BEGIN CERTIFICATE" in field(x, "tls.crt")
                                 else None)(secret(cp)), 30)
        t.ok(s6 and field(s6, "ca.crt") == ca and ctl.find("material replaced"),
             "garbage in tls.crt is replaced (logged) by a certificate of the same CA",
             ctl.log(10))
        if s6:
            second = serial(field(s6, "tls.crt"))
            s7 = eventually(lambda: (lambda x: x if serial(field(x, "tls.crt")) != second
                                     else None)(secret(cp)), 120, interval=1)
            t.ok(s7 and field(s7, "ca.crt") == ca and second != first,
                 "a 90 s serving certificate is renewed before it expires (new serial, same CA)")
            if s7:
                write_files(d, s7)
                renewed = serial(field(s7, "tls.crt"))
                t.ok(eventually(lambda: handshake(hook_server.port, ca) == renewed, 30),
                     "the webhook serves the renewed certificate, which verifies",
                     handshake(hook_server.port, ca))
        metrics = ctl.probe("/metrics")[1]
        t.ok('tessera_webhook_cert_rotations_total{cert="serving"} 2' in metrics and
             'tessera_webhook_cert_rotations_total{cert="ca"} 0' in metrics,
             "the metrics count the rotations",
             [ln for ln in metrics.splitlines() if "webhook_cert" in ln])
    finally:
        for c in [ctl] + others:
            if c.alive():
                c.stop()
        if hook_server:
            hook_server.stop()
    if t.failed():
        t.note(ctl.log(60))


def main():
    tessera = sys.argv[1]
    t = Tap()
    on_control_plane(t, "webhook-certs", lambda cp: run(t, tessera, cp), kueue=False,
                     scheduler=False)
    sys.exit(t.done())


if __name__ == "__main__":
    main()
