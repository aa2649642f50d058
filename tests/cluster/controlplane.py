#!/usr/bin/env python3
"""controlplane.py - a real Kubernetes control plane on loopback for tessera's cluster tests:
etcd, kube-apiserver, kube-scheduler and Kueue, built from their released Go modules by
tools/peers.sh (spec/real-control-plane.md), started the way controller-runtime's envtest starts
them, one fresh control plane per suite.

What it sets up, in a work directory of its own (pki/, data/, logs/, kubeconfigs):
  * certificates made with openssl: a serving CA (kube-apiserver's certificate, and every webhook
    server's: Kueue's, tessera's), a client CA with an admin certificate (O=system:masters), a
    service-account key pair, and a static token file: the admin token (system:masters) and one token
    per named user a test asks for (tokens(), so RBAC can be checked with real identities);
  * etcd (--unsafe-no-fsync) on free loopback ports, ready at /health;
  * kube-apiserver with TLS, client-certificate and token authentication, RBAC, the admission plugins
    of a real cluster minus ServiceAccount and TaintNodesByCondition (no controller-manager runs:
    nothing would make the default ServiceAccount or lift the not-ready taint), ready at /readyz;
  * kube-scheduler (no leader election), ready at /healthz;
  * kube-controller-manager running only the garbage collector and the namespace controller
    (optional): Kueue's pod integration leaves a deleted Pod's Workload to the garbage collector,
    so without it a deleted queued Pod would hold its quota forever;
  * Kueue (optional): its CRDs (established before the manager starts), its webhooks rewritten from
    Services to URLs with the serving CA's caBundle and the namespaceSelectors its kustomization adds,
    and the manager out of cluster with the Configuration of config_kueue() (what `$TSR_TESSERA
    kueue-config` prints -- the pod integration, TAS on, AssignQueueLabelsForPods off, every
    manufacturer's credits transformations -- plus the harness's own webhook, certificate, leader
    election, metrics and health fields), ready at its /readyz;
  * Nodes as a kubelet writes them (create_node: labels, then status.capacity / allocatable and a
    Ready condition through the status subresource).

Every process is started in its own process group and stopped (SIGTERM, then SIGKILL) by stop(),
by the context manager, at interpreter exit and on SIGTERM/SIGINT, even when a test dies. stop(failed=
True) keeps the work directory and prints where each component's log is; a clean stop removes it.

Use as a module:
    with ControlPlane("webhook") as cp:  cp.api("GET", "/api/v1/nodes"); cp.kubectl("get", "nodes")
or as a process, for tests written in C (tests/integration/cluster_apiserver.c):
    controlplane.py serve [--no-kueue] [--no-scheduler] [--no-controller-manager] [--user U]
                          [--crds DIR ...] [--kueue-crds]
prints one JSON line {"event": "ready", "url", "ca", "kubeconfig", "token", "tokens", "dir",
"client_cert", "client_key", "timings", "crds"} and runs until stdin reaches EOF (or a "fail" line:
keep the logs), then tears down. --crds DIR (repeatable) installs every CustomResourceDefinition of
DIR/*.yaml (install_crds) before the ready line; --kueue-crds installs Kueue's CRDs without starting
Kueue (for --no-kueue); "crds" lists the names installed either way, all Established and served.
"""

import atexit
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "peers"))
import drivers as _drivers  # noqa: E402
PEERS_SCRIPT = os.path.join(ROOT, "tools", "peers.sh")

ADMIN_TOKEN = "tessera-admin-token"
SYSTEM_NAMESPACES = ("kube-system", "kueue-system")

# The release namespace `tessera kueue-config` is told (its default, deploy/'s).
RELEASE_NAMESPACE = "gpustack-system"


class ApiError(Exception):
    """A non-2xx answer of the API server: .status (HTTP code) and .body (the decoded Status)."""

    def __init__(self, status, body, method, path):
        self.status, self.body = status, body
        msg = body.get("message") if isinstance(body, dict) else body
        super().__init__("%s %s: HTTP %d: %s" % (method, path, status, msg))


def peers_bin():
    """The folder of the peers' binaries (tools/peers.sh bin), or an exception that says how to
    build them."""
    env = os.environ.get("TSR_PEERS_BIN")
    if env:
        return env
    r = subprocess.run(["bash", PEERS_SCRIPT, "bin"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("the control-plane peers are not built: %s(run tools/peers.sh build)"
                           % r.stderr)
    return r.stdout.strip()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def eventually(pred, timeout=30.0, interval=0.1):
    """drivers.eventually with the control plane's longer patience: pred()'s first truthy value
    within timeout seconds, else its last value."""
    return _drivers.eventually(pred, timeout, interval)


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE)


def make_ca(d, name, cn):
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out",
             name + ".key", cwd=d)
    _openssl("req", "-x509", "-new", "-key", name + ".key", "-out", name + ".crt", "-days", "7",
             "-subj", "/CN=" + cn, "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)


def make_leaf(d, ca, name, subject, sans=None, client=False, days=7):
    """A leaf certificate d/name.{crt,key} signed by d/ca.{crt,key}; sans like
    "IP:127.0.0.1,DNS:localhost"."""
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out",
             name + ".key", cwd=d)
    _openssl("req", "-new", "-key", name + ".key", "-out", name + ".csr", "-subj", subject, cwd=d)
    with open(os.path.join(d, name + ".ext"), "w") as f:
        f.write("basicConstraints=CA:FALSE\n")
        f.write("extendedKeyUsage=%s\n" % ("clientAuth" if client else "serverAuth"))
        if sans:
            f.write("subjectAltName=%s\n" % sans)
    _openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
             "-CAcreateserial", "-days", str(days), "-extfile", name + ".ext", "-out",
             name + ".crt", cwd=d)
    return os.path.join(d, name + ".crt"), os.path.join(d, name + ".key")


def _detach_and_die_with_parent():
    """In the child, before exec: a process group of its own (stop() signals the group), and
    SIGKILL when the harness dies, even by SIGKILL, so no component outlives its suite."""
    import ctypes

    os.setsid()
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the harness already died between fork and prctl
        os._exit(1)


class Process:
    """One component: its command, its log file, its own process group, killed with the
    harness."""

    def __init__(self, name, argv, log_dir, env=None):
        self.name = name
        self.log_path = os.path.join(log_dir, name + ".log")
        self.log = open(self.log_path, "ab")
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, env=full_env,
                                     preexec_fn=_detach_and_die_with_parent)

    def alive(self):
        return self.proc.poll() is None

    def tail(self, lines=30):
        try:
            with open(self.log_path, "rb") as f:
                return b"\n".join(f.read().splitlines()[-lines:]).decode(errors="replace")
        except OSError:
            return ""

    def stop(self, grace=5.0):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        self.log.close()


_LIVE = []  # every control plane not yet stopped, for the exit and signal handlers


def _stop_all(*_args):
    for cp in list(_LIVE):
        cp.stop(failed=True)


def _on_signal(signum, _frame):
    _stop_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


atexit.register(_stop_all)
for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    if signal.getsignal(_sig) in (signal.SIG_DFL, signal.default_int_handler):
        signal.signal(_sig, _on_signal)


class ControlPlane:
    def __init__(self, suite, kueue=True, scheduler=True, controller_manager=True, workdir=None,
                 users=(), kueue_config=None):
        self.suite = suite
        self.with_kueue = kueue
        self.with_scheduler = scheduler
        self.with_controller_manager = controller_manager
        self.kueue_config_extra = kueue_config or {}
        self.dir = workdir or tempfile.mkdtemp(prefix="tsr-%s-" % suite)
        self.own_dir = workdir is None
        self.pki = os.path.join(self.dir, "pki")
        self.logs = os.path.join(self.dir, "logs")
        self.users = {"admin": ADMIN_TOKEN}
        for u in users:
            self.users[u] = "tok-" + u.replace(":", "-")
        self.procs = {}
        self.started = False
        self.bin = None
        self.timings = {}

    # ---- lifecycle -----------------------------------------------------------------------------

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop(failed=True)
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        self.stop(failed=exc_type is not None)
        return False

    def start(self):
        _LIVE.append(self)
        self.bin = peers_bin()
        os.makedirs(self.pki, exist_ok=True)
        os.makedirs(self.logs, exist_ok=True)
        t0 = time.monotonic()
        self._certs()
        self._etcd()
        self._apiserver()
        self.timings["apiserver"] = time.monotonic() - t0
        self._namespaces()
        if self.with_scheduler:
            t = time.monotonic()
            self._scheduler()
            self.timings["scheduler"] = time.monotonic() - t
        if self.with_controller_manager:
            t = time.monotonic()
            self._controller_manager()
            self.timings["controller-manager"] = time.monotonic() - t
        if self.with_kueue:
            t = time.monotonic()
            self._kueue()
            self.timings["kueue"] = time.monotonic() - t
        self.timings["total"] = time.monotonic() - t0
        self.started = True

    def stop(self, failed=False):
        if self in _LIVE:
            _LIVE.remove(self)
        for name in reversed(list(self.procs)):
            self.procs[name].stop()
        if failed or os.environ.get("TSR_KEEP_CLUSTER"):
            sys.stderr.write("controlplane %s: logs kept in %s:\n" % (self.suite, self.logs))
            for name, p in self.procs.items():
                sys.stderr.write("    %-15s %s\n" % (name, p.log_path))
        elif self.own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        self.procs = {}

    # ---- components ----------------------------------------------------------------------------

    def _certs(self):
        d = self.pki
        make_ca(d, "ca", "tessera-test-serving-ca")
        make_ca(d, "client-ca", "tessera-test-client-ca")
        make_leaf(d, "ca", "apiserver", "/CN=kube-apiserver",
                  "IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
                  "DNS:kubernetes.default.svc")
        make_leaf(d, "client-ca", "admin", "/O=system:masters/CN=admin", client=True)
        make_leaf(d, "ca", "webhook", "/CN=webhook", "IP:127.0.0.1,DNS:localhost")
        _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out",
                 "sa.key", cwd=d)
        _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)
        with open(os.path.join(d, "tokens.csv"), "w") as f:
            for i, (user, token) in enumerate(self.users.items()):
                groups = "system:masters" if user == "admin" else "system:authenticated"
                f.write('%s,%s,uid-%d,"%s"\n' % (token, user, i, groups))
        self.ca = os.path.join(d, "ca.crt")
        self.client_cert = os.path.join(d, "admin.crt")
        self.client_key = os.path.join(d, "admin.key")
        self.webhook_cert = os.path.join(d, "webhook.crt")
        self.webhook_key = os.path.join(d, "webhook.key")
        with open(self.ca) as f:
            self.ca_pem = f.read()

    def _start(self, name, argv, env=None):
        p = Process(name, argv, self.logs, env)
        self.procs[name] = p
        return p

    def _wait_ready(self, name, probe, timeout):
        p = self.procs[name]

        def ready():
            if not p.alive():
                raise RuntimeError("%s exited (%s):\n%s" % (name, p.proc.returncode, p.tail()))
            return probe()

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if ready():
                    return
            except RuntimeError:
                raise
            except Exception:  # noqa: BLE001 - not answering yet
                pass
            time.sleep(0.2)
        raise RuntimeError("%s was not ready within %d s:\n%s" % (name, timeout, p.tail()))

    def _etcd(self):
        self.etcd_port, peer = free_port(), free_port()
        url = "http://127.0.0.1:%d" % self.etcd_port
        peer_url = "http://127.0.0.1:%d" % peer
        self._start("etcd", [
            os.path.join(self.bin, "etcd"), "--name", "default",
            "--data-dir", os.path.join(self.dir, "data", "etcd"),
            "--listen-client-urls", url, "--advertise-client-urls", url,
            "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", "default=" + peer_url, "--unsafe-no-fsync=true",
            "--log-level", "warn"])
        self._wait_ready("etcd", lambda: json.loads(
            urllib.request.urlopen(url + "/health", timeout=2).read()).get("health") == "true", 30)

    def _apiserver(self):
        self.port = free_port()
        self.url = "https://127.0.0.1:%d" % self.port
        d = self.pki
        self._start("kube-apiserver", [
            os.path.join(self.bin, "kube-apiserver"),
            "--etcd-servers", "http://127.0.0.1:%d" % self.etcd_port,
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(self.port), "--cert-dir", os.path.join(self.dir, "apiserver"),
            "--tls-cert-file", os.path.join(d, "apiserver.crt"),
            "--tls-private-key-file", os.path.join(d, "apiserver.key"),
            "--client-ca-file", os.path.join(d, "client-ca.crt"),
            "--token-auth-file", os.path.join(d, "tokens.csv"),
            "--authorization-mode", "RBAC",
            "--service-account-issuer", self.url + "/",
            "--service-account-key-file", os.path.join(d, "sa.pub"),
            "--service-account-signing-key-file", os.path.join(d, "sa.key"),
            "--service-cluster-ip-range", "10.0.0.0/24", "--allow-privileged=true",
            "--disable-admission-plugins", "ServiceAccount,TaintNodesByCondition",
            "--endpoint-reconciler-type", "none", "--v", "1"])
        self.ssl = ssl.create_default_context(cafile=self.ca)
        self.ssl.load_cert_chain(self.client_cert, self.client_key)
        self._wait_ready("kube-apiserver", lambda: self._get_text("/readyz") == "ok", 90)
        self.kubeconfig = self.write_kubeconfig("admin.kubeconfig")

    def _get_text(self, path):
        with urllib.request.urlopen(self.url + path, context=self.ssl, timeout=5) as r:
            return r.read().decode()

    def write_kubeconfig(self, name, token=None):
        """dir/name: a kubeconfig for the admin's client certificate, or for a bearer token."""
        user = {"token": token} if token else {
            "client-certificate": self.client_cert, "client-key": self.client_key}
        cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "test",
               "clusters": [{"name": "test", "cluster": {
                   "server": self.url, "certificate-authority": self.ca}}],
               "users": [{"name": "test", "user": user}],
               "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}]}
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            json.dump(cfg, f, indent=1)
        return path

    def _namespaces(self):
        for ns in ("default",) + SYSTEM_NAMESPACES + ("gpustack-system",):
            self.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    def _kube_component(self, name, *flags):
        """kube-scheduler or kube-controller-manager: the admin's kubeconfig for its client, its
        delegated authentication and authorization, no leader election, its secure port on
        loopback; ready when /healthz answers ok."""
        port = free_port()
        self._start(name, [
            os.path.join(self.bin, name), "--kubeconfig", self.kubeconfig,
            "--authentication-kubeconfig", self.kubeconfig,
            "--authorization-kubeconfig", self.kubeconfig, "--leader-elect=false",
            "--bind-address", "127.0.0.1", "--secure-port", str(port),
            "--cert-dir", os.path.join(self.dir, name), *flags])
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        self._wait_ready(name, lambda: urllib.request.urlopen(
            "https://127.0.0.1:%d/healthz" % port, context=insecure, timeout=2).read() == b"ok",
            60)

    def _scheduler(self):
        self._kube_component("kube-scheduler", "--v", "2")

    def _controller_manager(self):
        self._kube_component("kube-controller-manager", "--controllers",
                             "garbagecollector,namespace",
                             "--use-service-account-credentials=false", "--v", "1")


    # ---- Kueue ---------------------------------------------------------------------------------

    def kueue_share(self):
        return os.path.join(os.path.dirname(os.path.realpath(
            os.path.join(self.bin, "kueue"))), "..", "share", "kueue")

    @staticmethod
    def product_config_kueue():
        """What `$TSR_TESSERA kueue-config -o json` prints: the Kueue Configuration tessera's
        chain needs (the credits transformations, the feature gates, the pod integration, the
        namespaces Kueue leaves alone)."""
        tessera = os.environ.get("TSR_TESSERA")
        if not tessera:
            raise RuntimeError("TSR_TESSERA is not set: the harness runs Kueue with the "
                               "Configuration `tessera kueue-config` prints")
        r = subprocess.run([tessera, "kueue-config", "-o", "json", "--namespace",
                            RELEASE_NAMESPACE], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError("tessera kueue-config failed (%d): %s" % (r.returncode, r.stderr))
        return json.loads(r.stdout)

    def config_kueue(self):
        """The Kueue Configuration this harness runs the manager with: the product's
        (product_config_kueue) with the harness's own fields merged in."""
        cfg = self.product_config_kueue()
        # The harness's fields, none of them the product's: Kueue runs out of cluster in its own
        # namespace (which it then also leaves alone), without leader election, its webhook on a
        # loopback port with the test CA's certificate instead of its internal certificate
        # management, no metrics listener, its health probes on a free loopback port, and no
        # visibility API server to register (VisibilityOnDemand off).
        cfg["namespace"] = "kueue-system"
        for expr in cfg["managedJobsNamespaceSelector"]["matchExpressions"]:
            expr["values"] += [ns for ns in SYSTEM_NAMESPACES if ns not in expr["values"]]
        cfg.update({
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"host": "127.0.0.1", "port": self.kueue_webhook_port,
                        "certDir": os.path.join(self.dir, "kueue-certs")},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": "127.0.0.1:%d" % self.kueue_health_port},
        })
        cfg["featureGates"]["VisibilityOnDemand"] = False
        cfg.update(self.kueue_config_extra)
        return cfg

    def _kueue_webhooks(self):
        """Kueue's webhook configurations as deployed (the kueue- name prefix, the
        namespaceSelectors of its kustomization) with each service rewritten to a URL, keeping only
        the webhooks of what this Kueue serves: its own kinds and Pods."""
        import yaml

        with open(os.path.join(self.kueue_share(), "webhooks.yaml")) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                                          "operator": "NotIn",
                                          "values": list(SYSTEM_NAMESPACES)}]}
        out = []
        for doc in docs:
            doc["metadata"]["name"] = "kueue-" + doc["metadata"]["name"]
            kept = []
            for w in doc["webhooks"]:
                groups = {g for r in w.get("rules", []) for g in r.get("apiGroups", [])}
                if not groups <= {"", "kueue.x-k8s.io"}:
                    continue
                path = w["clientConfig"]["service"]["path"]
                w["clientConfig"] = {"url": "https://127.0.0.1:%d%s" % (
                    self.kueue_webhook_port, path), "caBundle": self.ca_bundle()}
                if w["name"] in ("mpod.kb.io", "vpod.kb.io"):
                    w["namespaceSelector"] = selector
                kept.append(w)
            doc["webhooks"] = kept
            out.append(doc)
        return out

    def _kueue(self):
        share = self.kueue_share()
        crds = sorted(os.path.join(share, "crds", f) for f in os.listdir(os.path.join(share, "crds")))
        self.apply_files(crds)
        self.wait_established([os.path.basename(c)[len("kueue.x-k8s.io_"):-len(".yaml")] +
                               ".kueue.x-k8s.io" for c in crds])
        certs = os.path.join(self.dir, "kueue-certs")
        os.makedirs(certs, exist_ok=True)
        shutil.copy(self.webhook_cert, os.path.join(certs, "tls.crt"))
        shutil.copy(self.webhook_key, os.path.join(certs, "tls.key"))
        # Kueue reads its metrics certificate from a fixed path when it does not manage its own.
        metrics = "/etc/kueue/metrics/certs"
        if not os.path.exists(os.path.join(metrics, "tls.crt")):
            os.makedirs(metrics, exist_ok=True)
            shutil.copy(self.webhook_cert, os.path.join(metrics, "tls.crt.tmp"))
            shutil.copy(self.webhook_key, os.path.join(metrics, "tls.key"))
            os.replace(os.path.join(metrics, "tls.crt.tmp"), os.path.join(metrics, "tls.crt"))
        self.kueue_webhook_port, self.kueue_health_port = free_port(), free_port()
        cfg_path = os.path.join(self.dir, "kueue-config.yaml")
        with open(cfg_path, "w") as f:
            json.dump(self.config_kueue(), f, indent=1)
        for doc in self._kueue_webhooks():
            self.ensure(doc)
        self._start("kueue", [os.path.join(self.bin, "kueue"), "--config", cfg_path,
                              "--zap-log-level", "2"],
                    env={"KUBECONFIG": self.kubeconfig})
        self._wait_ready("kueue", lambda: urllib.request.urlopen(
            "http://127.0.0.1:%d/readyz" % self.kueue_health_port, timeout=2).status == 200, 90)
        # The webhooks answer once the manager's webhook server listens: a dry-run create of a
        # LocalQueue goes through them.
        self.wait_dry_run({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                           "metadata": {"name": "tessera-canary"}, "spec": {}}, 60)

    def ca_bundle(self):
        import base64

        return base64.b64encode(self.ca_pem.encode()).decode()

    def wait_dry_run(self, obj, timeout=30):
        """Waits until a ?dryRun=All create of obj goes through (dry run still calls
        sideEffects: None webhooks, so a webhook's reachability shows)."""
        last = [None]

        def try_create():
            try:
                self.api("POST", self.collection_path(obj) + "?dryRun=All", obj)
                return True
            except ApiError as e:
                last[0] = e
                return e.status == 409
        if not eventually(try_create, timeout, 0.3):
            raise RuntimeError("a dry-run create of %s %s did not go through: %s" % (
                obj["kind"], obj["metadata"]["name"], last[0]))

    # ---- REST ----------------------------------------------------------------------------------

    def api(self, method, path, body=None, content_type=None, token=None, raw=False, timeout=30):
        """One REST call as the admin (client certificate) or with a bearer token. Returns the
        decoded JSON (or the text when raw); raises ApiError on a non-2xx answer."""
        data = None
        headers = {"Accept": "application/json"}
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            data = data.encode() if isinstance(data, str) else data
            headers["Content-Type"] = content_type or "application/json"
        if token:
            headers["Authorization"] = "Bearer " + token
            ctx = ssl.create_default_context(cafile=self.ca)
        else:
            ctx = self.ssl
        req = urllib.request.Request(self.url + path, method=method, data=data, headers=headers)
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=timeout) as r:
                text = r.read().decode()
        except urllib.error.HTTPError as e:
            text = e.read().decode()
            try:
                decoded = json.loads(text)
            except ValueError:
                decoded = text
            raise ApiError(e.code, decoded, method, path) from None
        if raw:
            return text
        return json.loads(text) if text else None

    def resources(self, group_version):
        """{kind: (plural, namespaced)} of a group version, from discovery."""
        path = "/api/v1" if group_version == "v1" else "/apis/" + group_version
        out = {}
        for r in self.api("GET", path)["resources"]:
            if "/" not in r["name"]:
                out[r["kind"]] = (r["name"], r["namespaced"])
        return out

    def collection_path(self, obj, namespace=None):
        gv = obj["apiVersion"]
        plural, namespaced = self.resources(gv)[obj["kind"]]
        base = "/api/v1" if gv == "v1" else "/apis/" + gv
        if namespaced:
            ns = namespace or obj.get("metadata", {}).get("namespace") or "default"
            return "%s/namespaces/%s/%s" % (base, ns, plural)
        return "%s/%s" % (base, plural)

    def object_path(self, obj):
        return self.collection_path(obj) + "/" + urllib.parse.quote(obj["metadata"]["name"])

    def create(self, obj, **kw):
        return self.api("POST", self.collection_path(obj), obj, **kw)

    def ensure(self, obj):
        """Creates obj, or replaces the stored one's spec with it (keeping its resourceVersion)."""
        try:
            return self.create(obj)
        except ApiError as e:
            if e.status != 409:
                raise
        cur = self.api("GET", self.object_path(obj))
        obj = dict(obj)
        obj["metadata"] = dict(obj["metadata"], resourceVersion=cur["metadata"]["resourceVersion"])
        return self.api("PUT", self.object_path(obj), obj)

    def merge_patch(self, path, patch):
        return self.api("PATCH", path, patch, content_type="application/merge-patch+json")

    def apply_files(self, paths):
        """Creates (or updates) every object of the YAML files at paths."""
        import yaml

        for p in paths:
            with open(p) as f:
                for doc in yaml.safe_load_all(f):
                    if doc:
                        self.ensure(doc)

    def wait_established(self, crd_names, timeout=30):
        def established(name):
            crd = self.api("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + name)
            return any(c["type"] == "Established" and c["status"] == "True"
                       for c in crd.get("status", {}).get("conditions", []))
        for name in crd_names:
            if not eventually(lambda: established(name), timeout):
                raise RuntimeError("CRD %s was not Established within %d s" % (name, timeout))
        # Discovery follows the Established condition by a moment.
        for name in crd_names:
            plural, group = name.split(".", 1)
            crd = self.api("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + name)
            version = crd["spec"]["versions"][0]["name"]
            eventually(lambda: any(r["name"] == plural for r in self.api(
                "GET", "/apis/%s/%s" % (group, version))["resources"]), timeout)

    def install_crds(self, paths, timeout=60):
        """Creates (or updates) the objects of the YAML files at paths (a directory stands for
        its *.yaml, sorted) and waits until every CustomResourceDefinition among them is
        Established and in discovery. Returns the CRD names, in order."""
        import yaml

        files = []
        for p in paths:
            if os.path.isdir(p):
                files.extend(sorted(os.path.join(p, f) for f in os.listdir(p)
                                    if f.endswith((".yaml", ".yml"))))
            else:
                files.append(p)
        names = []
        for p in files:
            with open(p) as f:
                for doc in yaml.safe_load_all(f):
                    if doc:
                        self.ensure(doc)
                        if doc.get("kind") == "CustomResourceDefinition":
                            names.append(doc["metadata"]["name"])
        self.wait_established(names, timeout)
        return names

    def kubectl(self, *args, stdin=None, check=False, kubeconfig=None):
        """Runs the real kubectl against this control plane; returns the CompletedProcess."""
        r = subprocess.run([os.path.join(self.bin, "kubectl"), "--kubeconfig",
                            kubeconfig or self.kubeconfig, *args], input=stdin,
                           capture_output=True, text=True, timeout=60)
        if check and r.returncode != 0:
            raise RuntimeError("kubectl %s: %s" % (" ".join(args), r.stderr))
        return r

    # ---- Nodes ---------------------------------------------------------------------------------

    def create_node(self, name, labels=None, capacity=None, allocatable=None, taints=None):
        """A Node as a kubelet registers it: metadata and spec, then its status (capacity,
        allocatable, addresses, a Ready condition) through the status subresource."""
        cap = {"cpu": "16", "memory": "64Gi", "pods": "110"}
        cap.update(capacity or {})
        alloc = dict(cap)
        alloc.update(allocatable or {})
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": dict({
                    "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64"}, **(labels or {}))},
                "spec": {"taints": taints} if taints else {}}
        self.create(node)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {"status": {
            "capacity": cap, "allocatable": alloc,
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                          {"type": "Hostname", "address": name}],
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "kubelet is posting ready status",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                         "kubeletVersion": "v1.36.3", "kubeProxyVersion": "", "bootID": "",
                         "containerRuntimeVersion": "fake://1", "kernelVersion": "",
                         "machineID": "", "osImage": "", "systemUUID": ""}}}
        return self.merge_patch("/api/v1/nodes/%s/status" % name, status)


def serve(argv):
    import argparse

    ap = argparse.ArgumentParser(prog="controlplane.py serve")
    ap.add_argument("--no-kueue", action="store_true")
    ap.add_argument("--no-scheduler", action="store_true")
    ap.add_argument("--no-controller-manager", action="store_true")
    ap.add_argument("--suite", default="serve")
    ap.add_argument("--user", action="append", default=[], help="a user with a token of its own")
    ap.add_argument("--crds", action="append", default=[], metavar="DIR",
                    help="install the CRDs of DIR/*.yaml (repeatable)")
    ap.add_argument("--kueue-crds", action="store_true",
                    help="install Kueue's CRDs without starting Kueue")
    args = ap.parse_args(argv)
    cp = ControlPlane(args.suite, kueue=not args.no_kueue, scheduler=not args.no_scheduler,
                      controller_manager=not args.no_controller_manager, users=args.user)
    crds = []
    try:
        cp.start()
        t = time.monotonic()
        if args.kueue_crds and args.no_kueue:
            crds += cp.install_crds([os.path.join(cp.kueue_share(), "crds")])
        if args.crds:
            crds += cp.install_crds(args.crds)
        if crds:
            cp.timings["crds"] = time.monotonic() - t
    except Exception as e:  # noqa: BLE001 - reported to the caller as one line
        print(json.dumps({"event": "error", "error": str(e)}), flush=True)
        cp.stop(failed=True)
        return 1
    print(json.dumps({"event": "ready", "pids": {n: p.proc.pid for n, p in cp.procs.items()},
                      "url": cp.url, "ca": cp.ca, "kubeconfig": cp.kubeconfig,
                      "token": ADMIN_TOKEN, "tokens": cp.users, "dir": cp.dir,
                      "client_cert": cp.client_cert, "client_key": cp.client_key,
                      "timings": cp.timings, "crds": crds}), flush=True)
    failed = False
    for line in sys.stdin:
        if line.strip() == "fail":
            failed = True
    cp.stop(failed=failed)
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "serve":
        sys.exit(serve(sys.argv[2:]))
    sys.stderr.write("usage: controlplane.py serve [--no-kueue] [--no-scheduler] [--no-controller-manager] [--user U] [--crds DIR] [--kueue-crds]\n")
    sys.exit(2)
