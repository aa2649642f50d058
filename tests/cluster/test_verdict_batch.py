#!/usr/bin/env python3
"""test_verdict_batch.py TESSERA - `tessera controller` judging Workloads queued together, on a real
control plane (etcd and kube-apiserver, tessera's and Kueue's CRDs; Kueue itself does not run:
the test writes what Kueue writes). One managed node, node-a: its Node and its Devices object (one
H100, as the device manager publishes it; the controller reads the capability there and the
ledger from the node's Pods), and no Pod on it.

Checked: three Workloads asking for a 60 % slice each, reserved on node-a by TAS and waiting for
the gpustack-node-devices check before the controller starts, are judged together (one snapshot:
node-a's Pods read once) and get exactly one Ready and two Retry, the Retries naming node-a: a
Ready given inside the batch takes the accelerator from the next verdicts, as one given in an
earlier batch does. A fourth, reserved later, is judged on its own and answered Retry too. The
controller's metrics count the verdicts and the snapshots. Prints TAP.
"""
import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from controlplane import ROOT, eventually  # noqa: E402
from controller_faults import (CHECK, KQ, NS, devices, node,  # noqa: E402
                               reserved_status, workload)
from daemons import Controller  # noqa: E402
from tap import Tap, on_control_plane  # noqa: E402

CRDS = sorted(glob.glob(os.path.join(ROOT, "deploy", "chart", "tessera", "files", "crds",
                                     "*.yaml")))


def add_workload(cp, name):
    cp.create(workload(name))
    cp.merge_patch("%s/namespaces/%s/workloads/%s/status" % (KQ, NS, name), reserved_status())


def check_of(cp, name):
    w = cp.api("GET", "%s/namespaces/%s/workloads/%s" % (KQ, NS, name)) or {}
    for c in (w.get("status") or {}).get("admissionChecks", []):
        if c.get("name") == CHECK:
            return c
    return {}


def states(cp, names):
    return {n: check_of(cp, n).get("state") for n in names}


def metric(ctl, name):
    code, body = ctl.probe("/metrics")
    for line in body.splitlines() if code == 200 else []:
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def run(t, tessera, cp):
    cp.install_crds([os.path.join(cp.kueue_share(), "crds")])
    cp.install_crds(CRDS)
    for ns in (NS, "gpustack-system"):
        cp.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    n = node("node-a")
    cp.create_node("node-a", labels=n["metadata"]["labels"],
                   capacity=n["status"]["capacity"], allocatable=n["status"]["allocatable"])
    cp.create(devices("node-a"))
    first = ["w1", "w2", "w3"]
    for name in first:
        add_workload(cp, name)

    ctl = Controller(tessera, cp, "batch", extra=("--leader-elect", "false"))
    try:
        judged = eventually(lambda: all(states(cp, first).values()) and
                            "Pending" not in states(cp, first).values() and states(cp, first), 60)
        got = sorted((judged or {}).values())
        t.ok(got == ["Ready", "Retry", "Retry"],
             "three 60 % slices queued together on one H100: one Ready, two Retry", judged)
        retries = [check_of(cp, w) for w in first if check_of(cp, w).get("state") == "Retry"]
        t.ok(len(retries) == 2 and all('node "node-a"' in r.get("message", "") and
                                        r.get("requeueAfterSeconds") == 30 for r in retries),
             "each Retry names node-a and asks to be looked at again in 30 s", retries)
        batches = [l for l in ctl.lines if "judging Workloads" in l]
        t.ok(batches and " count=3 " in batches[0] + " ",
             "the three are judged in one batch (the first the controller takes)", batches)
        snapshots = metric(ctl, "tessera_controller_verdict_snapshots_total")

        add_workload(cp, "w4")
        late = eventually(lambda: check_of(cp, "w4").get("state") not in (None, "Pending") and
                          check_of(cp, "w4"), 30)
        t.ok((late or {}).get("state") == "Retry",
             "a fourth reserved later is judged against the first batch's Ready: Retry", late)
        ready = metric(ctl, 'tessera_controller_verdicts_total{state="Ready"}')
        retry = metric(ctl, 'tessera_controller_verdicts_total{state="Retry"}')
        after = metric(ctl, "tessera_controller_verdict_snapshots_total")
        t.ok(ready == 1 and retry == 3 and after is not None and snapshots is not None and
             snapshots >= 1 and after > snapshots,
             "the metrics count one Ready, three Retry, and the snapshots judged",
             {"ready": ready, "retry": retry, "snapshots": (snapshots, after)})
    finally:
        t.ok(ctl.stop() == 0, "the controller exits 0 on SIGTERM", ctl.log(120))


def main():
    tessera = os.path.abspath(sys.argv[1])
    t = Tap()
    on_control_plane(t, "verdict-batch", lambda cp: run(t, tessera, cp), kueue=False,
                     scheduler=False, controller_manager=False)
    sys.exit(t.done())


if __name__ == "__main__":
    main()
