"""drivers.py - the test peers as processes, for the integration tests that run tessera's real
binaries against them: the fake API server (fake_apiserver.py: prints "READY <port>", exits at
EOF on stdin) and the fake kubelets (fake_kubelet.py, grpc-js/kubelet.js or the kubelet-go
binary: a line-oriented JSON control protocol, documented in fake_kubelet.py), plus the
kubeconfig that points a client at the fake API server, and `eventually`, the polling wait the
checks share.

Nothing here checks anything: the drivers start, talk to and stop the peers.
"""
import json
import os
import ssl
import subprocess
import sys
import threading
import time
import urllib.request

TOKEN = "tessera-test-token"
PEERS_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                            "peers.sh")


def kubelet_go_binary():
    """The grpc-go fake kubelet (tests/peers/kubelet-go): $TSR_KUBELET_GO, else the one
    tools/peers.sh built; None when neither is an executable."""
    path = os.environ.get("TSR_KUBELET_GO")
    if not path:
        bindir = os.environ.get("TSR_PEERS_BIN")
        if not bindir:
            r = subprocess.run(["bash", PEERS_SCRIPT, "bin"], capture_output=True, text=True)
            bindir = r.stdout.strip() if r.returncode == 0 else ""
        path = os.path.join(bindir, "fake-kubelet-go") if bindir else ""
    return path if path and os.access(path, os.X_OK) else None


def eventually(pred, timeout=10.0, interval=0.05):
    """pred()'s first truthy value within timeout seconds, else its last value (an exception
    counts as "not yet")."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            v = pred()
        except Exception:  # noqa: BLE001 - a probe that fails is "not yet"
            v = None
        if v or time.monotonic() > deadline:
            return v
        time.sleep(interval)


class ApiServer:
    """fake_apiserver.py over TLS with the certificates gen_certs.sh made in d."""

    def __init__(self, script, d, token=TOKEN, extra=()):
        self.token = token
        self.proc = subprocess.Popen(
            [sys.executable, script, "--cert", os.path.join(d, "server.crt"), "--key",
             os.path.join(d, "server.key"), "--token", token, "--port", "0",
             "--bookmark-interval", "1", *extra],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "READY":
            raise RuntimeError("the fake API server did not start: %r" % line)
        self.port = int(line[1])
        self.ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.crt"))

    def request(self, method, path, body=None, content_type="application/json"):
        req = urllib.request.Request(
            "https://127.0.0.1:%d%s" % (self.port, path), method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": "Bearer " + self.token, "Content-Type": content_type})
        with urllib.request.urlopen(req, context=self.ctx, timeout=10) as r:
            return json.loads(r.read() or b"null")

    def create(self, path, obj):
        return self.request("POST", path, obj)

    def merge(self, path, patch):
        return self.request("PATCH", path, patch, "application/merge-patch+json")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def write_kubeconfig(path, port, ca, token=TOKEN):
    with open(path, "w") as f:
        json.dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "fake", "cluster": {
                "server": "https://127.0.0.1:%d" % port, "certificate-authority": ca}}],
            "users": [{"name": "tester", "user": {"token": token}}],
            "contexts": [{"name": "test", "context": {"cluster": "fake", "user": "tester"}}],
        }, f)


class Kubelet:
    """A fake kubelet process (argv: fake_kubelet.py, node kubelet.js or kubelet-go's binary with
    its flags), driven through its JSON control protocol; call() returns the reply object."""

    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     bufsize=1)
        self.replies = {}
        self.cv = threading.Condition()
        self.wlock = threading.Lock()
        self.next_id = 0
        first = self.proc.stdout.readline()
        self.ready = json.loads(first) if first else {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            msg = json.loads(line)
            with self.cv:
                self.replies[msg.get("id")] = msg
                self.cv.notify_all()

    def call(self, cmd, wait=60, **args):
        with self.cv:
            self.next_id += 1
            rid = self.next_id
        with self.wlock:    # one whole line at a time, whichever thread calls
            self.proc.stdin.write(json.dumps(dict(args, id=rid, cmd=cmd)) + "\n")
            self.proc.stdin.flush()
        deadline = time.monotonic() + wait
        with self.cv:
            while rid not in self.replies:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    return {"id": rid, "ok": False, "error": "no reply to %s" % cmd}
                self.cv.wait(min(left, 0.5))
            return self.replies.pop(rid)

    def close(self):
        try:
            self.call("quit", wait=5)
            self.proc.stdin.close()
            self.proc.wait(5)
        except Exception:  # noqa: BLE001 - a fake that will not quit is killed
            self.proc.kill()
            self.proc.wait()
