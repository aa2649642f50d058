#!/usr/bin/env python3
"""test_harness.py - the control-plane harness itself (controlplane.py serve), as the suites rely on
it: a full control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager, Kueue)
comes up and reports each component's readiness time and the real server's version; killing the
harness with SIGKILL, the way a test runner ends a hung suite, takes every component down with it;
a suite that failed keeps its work directory with every component's log; one that passed leaves
nothing behind; etcd, kubectl and helm report their pinned releases; and tools/peers.sh, given a pin
the module proxy refuses, fails naming that module.

Prints TAP.
"""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tap import Tap  # noqa: E402

SERVE = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                      "controlplane.py"), "serve"]


def alive(pid):
    """True while pid runs (a zombie awaiting its reaper counts as gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def start(*args):
    p = subprocess.Popen(SERVE + list(args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    ready = json.loads(line) if line else {"event": "none", "stderr": p.stderr.read()}
    return p, ready


def wait_gone(pids, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(alive(pid) for pid in pids):
            return True
        time.sleep(0.1)
    return False


def main():
    t = Tap()
    p, ready = start("--suite", "harness")
    names = sorted(ready.get("pids", {}))
    t.ok(ready.get("event") == "ready" and names == sorted(
        ["etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kueue"]),
         "a full control plane comes up: %s" % ", ".join(names), ready)
    t.note("readiness: " + ", ".join("%s %.1f s" % kv for kv in ready.get("timings", {}).items()))
    if ready.get("event") == "ready":
        r = subprocess.run(["bash", os.path.join(os.path.dirname(__file__), "..", "..", "tools",
                                                 "peers.sh"), "bin"], capture_output=True,
                           text=True)
        kubectl = os.path.join(r.stdout.strip(), "kubectl") if not os.environ.get(
            "TSR_PEERS_BIN") else os.path.join(os.environ["TSR_PEERS_BIN"], "kubectl")
        v = subprocess.run([kubectl, "--kubeconfig", ready["kubeconfig"], "version", "-o",
                            "json"], capture_output=True, text=True)
        server = json.loads(v.stdout or "{}").get("serverVersion", {}) if v.returncode == 0 else {}
        t.ok(server.get("gitVersion") == "v1.36.3" and server.get("minor") == "36",
             "the API server reports its release (v1.36.3), as Kueue needs", v.stdout + v.stderr)
        pids = list(ready["pids"].values())
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        t.ok(wait_gone(pids), "SIGKILL of the harness takes every component down with it",
             {n: alive(pid) for n, pid in ready["pids"].items()})
        # The killed harness could not clean up: its directory is left; remove it here.
        subprocess.run(["rm", "-rf", ready["dir"]])

    p, ready = start("--suite", "harness-fail", "--no-kueue", "--no-scheduler",
                     "--no-controller-manager")
    p.stdin.write("fail\n")
    p.stdin.close()
    p.wait(60)
    logs = os.path.join(ready.get("dir", "/nonexistent"), "logs")
    kept = sorted(os.listdir(logs)) if os.path.isdir(logs) else []
    t.ok(kept == ["etcd.log", "kube-apiserver.log"] and all(
        os.path.getsize(os.path.join(logs, f)) > 0 for f in kept) and "logs kept in" in
         p.stderr.read(), "a failed suite keeps every component's log", kept)
    subprocess.run(["rm", "-rf", ready.get("dir", "/nonexistent")])

    p, ready = start("--suite", "harness-pass", "--no-kueue", "--no-scheduler",
                     "--no-controller-manager")
    pids = list(ready.get("pids", {}).values())
    p.stdin.close()
    p.wait(60)
    t.ok(ready.get("dir") and not os.path.exists(ready["dir"]) and wait_gone(pids, 5),
         "a passing suite stops every component and leaves no directory behind", ready)
    check_versions(t)
    check_refused_pin(t)
    sys.exit(t.done())


def check_versions(t):
    """Each client peer reports the release its wrapper module pins."""
    bindir = os.environ.get("TSR_PEERS_BIN") or subprocess.run(
        ["bash", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                              "peers.sh"), "bin"], capture_output=True, text=True).stdout.strip()
    for argv, want in ((["etcd", "--version"], "etcd Version: 3.6.16"),
                       (["kubectl", "version", "--client"], "Client Version: v1.36.3"),
                       (["helm", "version", "--short"], "v4.3.2"),
                       (["helm3", "version", "--short"], "v3.21.4")):
        r = subprocess.run([os.path.join(bindir, argv[0])] + argv[1:], capture_output=True,
                           text=True)
        t.ok(r.returncode == 0 and want in r.stdout,
             "%s reports %s" % (argv[0], want), r.stdout + r.stderr)


def check_refused_pin(t):
    """tools/peers.sh on a copy of tools/ whose etcd pin names a release the module proxy does
    not serve: the build fails and says which module the proxy refused."""
    import shutil
    import tempfile

    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    with tempfile.TemporaryDirectory(prefix="tsr-peers-") as d:
        shutil.copytree(os.path.join(root, "tools"), os.path.join(d, "tools"))
        mod = os.path.join(d, "tools", "peers", "etcd", "go.mod")
        with open(mod) as f:
            text = f.read().replace("go.etcd.io/etcd/server/v3 v3.6.16",
                                    "go.etcd.io/etcd/server/v3 v3.6.99")
        with open(mod, "w") as f:
            f.write(text)
        r = subprocess.run(["bash", os.path.join(d, "tools", "peers.sh"), "build", "etcd"],
                           capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, TESSERA_PEERS_CACHE=os.path.join(d, "cache")))
    t.ok(r.returncode != 0 and "refused:" in r.stderr and
         "go.etcd.io/etcd/server/v3@v3.6.99" in r.stderr.split("refused:", 1)[-1],
         "a pin the module proxy refuses fails the build, naming the module", r.stderr)


if __name__ == "__main__":
    main()
