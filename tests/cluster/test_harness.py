#!/usr/bin/env python3
"""test_harness.py - the control-plane harness itself (controlplane.py serve), as the suites rely on
it: a full control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager, Kueue)
comes up and reports each component's readiness time and the real server's version; killing the
harness with SIGKILL, the way a test runner ends a hung suite, takes every component down with it;
a suite that failed keeps its work directory with every component's log; one that passed leaves
nothing behind.

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
    sys.exit(t.done())


if __name__ == "__main__":
    main()
