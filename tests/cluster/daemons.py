"""daemons.py - tessera's own daemons as the cluster suites run them against the test control plane:
`tessera webhook` (serving with a certificate the control plane's CA signed for 127.0.0.1, and
registered with the API server by the chart's webhook configurations rewritten from its Service to
that URL with the CA as caBundle, as envtest does), `tessera device-manager` on a KubeletNode
(its plugin, pod-resources and pods directories; fake GPUs) and `tessera controller` (campaigning
for its Lease in gpustack-system, probes on an ephemeral port).

Each keeps its stderr lines (find() searches them) and stops with SIGTERM, then SIGKILL.
"""
import copy
import json
import os
import re
import signal
import subprocess
import threading

import chart
from controlplane import eventually


STARTED = []  # every Daemon made in this process, in order: died_since() reads it


def died_since(mark):
    """The daemons made after the first mark ones that ended on their own (died())."""
    return [d for d in STARTED[mark:] if d.died() is not None]


class Daemon:
    def __init__(self, argv, env=None):
        self.argv = argv
        self.lines = []
        self.ended_by_test = False  # stop() or kill() ended it, not the daemon itself
        full = dict(os.environ)
        full.update(env or {})
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, env=full)
        threading.Thread(target=self._read, daemon=True).start()
        STARTED.append(self)

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def find(self, needle):
        for line in list(self.lines):
            if needle in line:
                return line
        return None

    def alive(self):
        return self.proc.poll() is None

    def stop(self, timeout=15):
        """SIGTERM and the exit status (None when it had to be killed)."""
        if self.proc.poll() is None:
            self.ended_by_test = True
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode

    def signal(self, sig):
        """Sends sig as the test's own act (an end it causes is not died())."""
        self.ended_by_test = True
        self.proc.send_signal(sig)

    def kill(self):
        """SIGKILL, as a crashed node would end it."""
        self.signal(signal.SIGKILL)

    def died(self):
        """Its exit status when it ended on its own (a crash, a sanitizer's report, a lost
        Lease) before the test stopped or killed it; None while it runs or when the test ended
        it."""
        rc = self.proc.poll()
        return None if rc is None or self.ended_by_test else rc

    def crash_report(self, last=40):
        """The lines of its log that say why it ended: sanitizer reports and their first stack
        frames, error-level lines; the last lines when none does."""
        keep = [ln for ln in self.lines
                if re.search(r"Sanitizer|runtime error|SUMMARY|^\s*#[0-9] |level=error", ln)]
        return "\n".join((keep or self.lines)[-last:])

    def log(self, last=40):
        return "\n".join(self.lines[-last:])

    def probe(self, path):
        """GET path on the probe port (self.probe_port): (HTTP status, body text)."""
        import urllib.error
        import urllib.request

        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.probe_port, path),
                                        timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def wait_ready(self, timeout=30):
        if not eventually(lambda: self.probe("/readyz")[0] == 200, timeout):
            raise RuntimeError("%s was not ready:\n%s" % (" ".join(self.argv[:2]), self.log()))


class WebhookServer(Daemon):
    """`tessera webhook` on 127.0.0.1 with the control plane's webhook certificate (or cert and
    key), reading the API server as the admin (or as kubeconfig's user)."""

    def __init__(self, tessera, cp, extra=(), cert=None, key=None, kubeconfig=None):
        super().__init__([tessera, "webhook", "--bind", "127.0.0.1", "--port", "0",
                          "--probe-port", "0", "--kubeconfig", kubeconfig or cp.kubeconfig,
                          "--cert-file", cert or cp.webhook_cert,
                          "--key-file", key or cp.webhook_key, "--log-level", "debug", *extra])
        line = eventually(lambda: self.find("msg=listening"), timeout=15)
        if not line:
            raise RuntimeError("tessera webhook did not listen:\n" + self.log())
        self.port = int(re.search(r" port=(\d+)", line).group(1))
        self.probe_port = int(re.search(r" probe_port=(\d+)", line).group(1))



def webhook_configurations(port, ca_bundle):
    """The chart's webhook configurations with every webhook's Service rewritten to
    https://127.0.0.1:port<path> and the caBundle set (any annotation dropped)."""
    out = []
    for doc in chart.webhook_configurations():
        doc = copy.deepcopy(doc)
        doc["metadata"].pop("annotations", None)
        for w in doc["webhooks"]:
            svc = w["clientConfig"].pop("service")
            w["clientConfig"] = {"url": "https://127.0.0.1:%d%s" % (port, svc["path"]),
                                 "caBundle": ca_bundle}
        out.append(doc)
    return out


def register_webhooks(cp, port):
    """Registers tessera's webhook configurations for a server on port; returns them."""
    docs = webhook_configurations(port, cp.ca_bundle())
    for doc in docs:
        cp.ensure(doc)
    return docs


# Slice isolation as the suites run it: the interposer is a stand-in (Allocate never loads it),
# node.dir/vgpu-library.so, installed into node.dir/vgpu, which the mounts name by VGPU_HOST_DIR,
# the chart's hostPath.
VGPU_STAND_IN = b"\x7fELF tessera-vgpu stand-in for the cluster suites\n"
VGPU_HOST_DIR = "/usr/local/tessera/vgpu"


class DeviceManager(Daemon):
    """`tessera device-manager` on node (a KubeletNode) with fake GPUs (--fake SPEC), its state in
    node.dir/gpus.json, slice isolation on (preload) with the stand-in interposer installed into
    node.dir/vgpu (self.vgpu_dir); extra flags come last and win."""

    def __init__(self, tessera, cp, node, fake, extra=(), kubeconfig=None):
        podres = node.podres_socket
        self.vgpu_library = os.path.join(node.dir, "vgpu-library.so")
        self.vgpu_dir = os.path.join(node.dir, "vgpu")
        if not os.path.exists(self.vgpu_library):
            with open(self.vgpu_library, "wb") as f:
                f.write(VGPU_STAND_IN)
        super().__init__([tessera, "device-manager", "--node-name", node.name,
                          "--plugin-dir", node.plugin_dir, "--pod-resources-socket", podres,
                          "--pods-dir", node.pods_dir, "--fake", fake,
                          "--fake-state", os.path.join(node.dir, "gpus.json"),
                          "--vgpu-library", self.vgpu_library, "--vgpu-dir", self.vgpu_dir,
                          "--vgpu-host-dir", VGPU_HOST_DIR,
                          "--kubeconfig", kubeconfig or cp.kubeconfig,
                          "--poll-interval", "200ms", "--reclaim-interval", "300ms",
                          "--probe-port", "0", "--probe-bind", "127.0.0.1",
                          "--log-level", "debug", *extra])
        line = eventually(lambda: self.find("msg=serving"), timeout=15)
        if not line:
            raise RuntimeError("tessera device-manager did not start:\n" + self.log())
        self.probe_port = int(re.search(r" probe_port=(\d+)", line).group(1))

    def wait_registered(self, node, resources, timeout=30):
        for res in resources:
            r = node.call("wait_registered", resource=res, timeout=timeout)
            if not r.get("ok"):
                raise RuntimeError("%s did not register: %s\n%s" % (res, r, self.log()))


class Controller(Daemon):
    """`tessera controller` as identity, reading the API server as the admin (or as kubeconfig's
    user), campaigning for the Lease with short timings (lease 3 s, renew 2 s, retry 500 ms)
    unless extra says otherwise."""

    def __init__(self, tessera, cp, identity="controller-a", extra=(), kubeconfig=None):
        super().__init__([tessera, "controller", "--kubeconfig", kubeconfig or cp.kubeconfig,
                          "--identity", identity, "--probe-port", "0", "--probe-bind",
                          "127.0.0.1", "--lease-duration", "3s", "--renew-deadline", "2s",
                          "--retry-period", "500ms", "--log-level", "debug", *extra])
        self.identity = identity
        line = eventually(lambda: self.find("msg=serving"), timeout=15)
        if not line:
            raise RuntimeError("tessera controller did not start:\n" + self.log())
        self.probe_port = int(re.search(r" probe_port=(\d+)", line).group(1))


def gpu_state(d):
    """The fake GPUs' state file (--fake-state) of the node directory d, as the device manager
    last wrote it."""
    with open(os.path.join(d, "gpus.json")) as f:
        return json.load(f)


def markers(d):
    """Every MIG ownership marker file under the node directory d's pods directory."""
    found = []
    for root, _, files in os.walk(os.path.join(d, "pods")):
        found += [os.path.join(root, f) for f in files if f.startswith("nvidia-mig-")]
    return found
