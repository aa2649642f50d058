#!/usr/bin/env python3
"""test_dm_chaos.py TESSERA - the real `tessera device-manager` killed with SIGKILL at random
points while Allocates and Pod deletions run against it and its API server fails at random; after
every restart an invariant checker proves that no GPU, share, slice or MIG placement is granted
twice and that nothing granted is lost or left behind.

The ground: a real API server (tests/cluster/controlplane.py: etcd and kube-apiserver, tessera's
CRDs), the python fake kubelet (tests/peers/fake_kubelet.py, pod-resources served) and eight fake
H100 80GB HBM3 (GPUs 0-2 MIG on, 3-7 off; --fake with its state in a file that survives the
kills). The device manager talks to the API server through tests/cluster/api_proxy.py, which fails
a share of its requests with HTTP 500: before forwarding (the request never happened) or after
(it happened and the client is told it failed): writes 15 %, reads 3 %.

Each round (TSR_CHAOS_ROUNDS, default 16; TSR_CHAOS_SEED, default 1):
  * 3-5 new Pods of random families (a whole GPU, a share, a slice of 200k-480k units, a 1g.10gb
    or 2g.20gb partition), listed in pod-resources;
  * their Allocates run with preferred allocation, the four families' at once (one thread each,
    so several reach the device manager together; within a family one at a time, oldest first,
    as the kubelet admits them), beside a thread deleting up to two granted Pods (the user's
    delete, the kubelet's release, the final delete) and a killer that sends SIGKILL to the
    device manager after a random 20-600 ms;
  * the device manager is started again over the same state (its grant journal, the MIG markers,
    the fake GPUs) and every plugin registers again; each Allocate the kill cut off (the kubelet
    got no answer) is asked again, as the kubelet retries it; an Allocate refused, or a retry
    refused, fails its Pod, which is then deleted (as its owner would);
  * the checker waits for the device manager to settle (every answer's annotation recorded, the
    journal empty) and then checks, over what every live container was really given (the
    kubelet's answers) and what the Pods record:
      - a whole GPU is one container's and nobody else's; at most 10 shares on a card; slices'
        units within the card's 1,600,000; no card in two modes; no MIG card given whole, shared
        or sliced;
      - every MIG device is one container's, live on its card at the placement recorded, and
        no two recorded placements overlap;
      - nothing lost: every container the kubelet holds devices for has its allocation annotation
        naming exactly what it was given; nothing stranded: no live Pod's annotation names a
        container the kubelet holds nothing for, and the grant journal holds nothing.
At the end every Pod is deleted: no MIG instance, marker or journal grant may remain.

TSR_CHAOS_VERBOSE=1 notes every Allocate's reply and keeps each killed process's log in
/tmp/chaos-dm-N.log. Against the device manager before its grant journal and retries (413ca96) the
same 16 rounds found 26 double grants and 113 violations.

Prints TAP; the last lines give the rounds run, the kills, the Allocates retried after a kill,
and the double grants found (must be 0).
"""
import glob
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import yaml  # noqa: E402

import chart  # noqa: E402
from api_proxy import Recorder  # noqa: E402
from controlplane import ROOT, ApiError, eventually  # noqa: E402
from daemons import DeviceManager, gpu_state, markers  # noqa: E402
from kubelet import KubeletNode  # noqa: E402
from names import ALLOC_ANNOTATION, NVIDIA_RESOURCES  # noqa: E402
from tap import Tap, on_control_plane  # noqa: E402

NODE = "node-a"
NS = "team-a"
FAKE = "NVIDIA H100 80GB HBM3:8:11100000"
UNITS = 1600000  # TSR_UNITS_PER_ACCEL: a card's units (10 shares of 160,000)
SHARES = 10
RES = NVIDIA_RESOURCES
ALLOC = ALLOC_ANNOTATION
CRDS = sorted(glob.glob(os.path.join(ROOT, "deploy", "chart", "tessera", "files", "crds", "*.yaml")))
FAMILIES = ("exclusive", "shared", "sliced", "partitioned")
PROFILES = {"1g.10gb": (200000, 1), "2g.20gb": (400000, 2)}  # units, memory slices

t = Tap()


def limits(family, rng):
    """The limits of one container of family, and its units (0: a whole GPU or a share)."""
    if family == "exclusive":
        return {RES["exclusive"]: "1"}, 0
    if family == "shared":
        return {RES["shared"]: "1"}, 0
    if family == "sliced":
        units = rng.choice((200000, 300000, 480000))
        return {RES["sliced"]: "1", RES["sliced"] + ".units": str(units)}, units
    profile = rng.choice(sorted(PROFILES))
    units = PROFILES[profile][0]
    return {RES["partitioned"]: "1", RES["partitioned"] + ".mig-" + profile: "1",
            RES["partitioned"] + ".units": str(units)}, units


class Cluster:
    """The Pods this test made and what the kubelet gave each."""

    def __init__(self, cp, kn):
        self.cp, self.kn, self.lock = cp, kn, threading.Lock()
        self.pods = {}   # name -> {"family", "units", "uid", "reply" (granted), "dead"}
        self.seq = 0

    def create(self, family, rng):
        lim, units = limits(family, rng)
        with self.lock:
            self.seq += 1
            name = "p%03d-%s" % (self.seq, family[:2])
        p = self.cp.create({"apiVersion": "v1", "kind": "Pod",
                            "metadata": {"name": name, "namespace": NS},
                            "spec": {"nodeName": NODE, "restartPolicy": "Never",
                                     "containers": [{"name": "main",
                                                     "image": "registry.example/cuda:12",
                                                     "resources": {"limits": lim}}]}})
        with self.lock:
            self.pods[name] = {"family": family, "units": units, "uid": p["metadata"]["uid"],
                               "reply": None, "dead": False, "rejected": False}
        return name

    def live(self):
        with self.lock:
            return [n for n, p in self.pods.items() if not p["dead"]]

    def reject(self, name):
        """The kubelet rejected the Pod (UnexpectedAdmissionError): no longer one it runs."""
        with self.lock:
            self.pods[name]["rejected"] = True
        self.publish()

    def publish(self):
        """pod-resources lists every Pod the kubelet runs."""
        with self.lock:
            running = [n for n, p in self.pods.items() if not p["dead"] and not p["rejected"]]
        self.kn.call("set_pods", pods=[{"namespace": NS, "name": n, "containers": [{"name": "main"}]}
                                       for n in running])

    def delete(self, name):
        """The user's delete, the kubelet's release once the containers are gone, the final
        delete with grace 0."""
        with self.lock:
            if self.pods[name]["dead"]:
                return
            self.pods[name]["dead"] = True
            uid = self.pods[name]["uid"]
        path = "/api/v1/namespaces/%s/pods/%s" % (NS, name)
        try:
            self.cp.api("DELETE", path)
        except ApiError as e:
            if e.status != 404:
                raise
        self.kn.call("release", namespace=NS, pod=name)
        self.publish()
        try:
            self.cp.api("DELETE", path, {"kind": "DeleteOptions", "apiVersion": "v1",
                                         "gracePeriodSeconds": 0, "preconditions": {"uid": uid}})
        except ApiError as e:
            if e.status not in (404, 409):
                raise

    def allocate(self, name):
        with self.lock:
            family = self.pods[name]["family"]
        return self.kn.call("allocate", resource=RES[family], namespace=NS, pod=name,
                            container="main", size=1, concurrent=True)

    def annotations(self):
        """{name: the decoded allocation annotation} of every live Pod that has one."""
        out = {}
        items = self.cp.api("GET", "/api/v1/namespaces/%s/pods" % NS)["items"]
        live = set(self.live())
        for p in items:
            v = p["metadata"].get("annotations", {}).get(ALLOC)
            if p["metadata"]["name"] in live and v:
                out[p["metadata"]["name"]] = json.loads(v)
        return out


def admit(cluster, names, family, alloc):
    """The kubelet's admission of one resource's containers: one at a time, oldest first, the
    order the device manager names waiting containers in (the Allocate call carries only device
    IDs, so admitting a younger Pod first would have the plugin name the older one). A Pod whose
    Allocate is refused is rejected at once, as the kubelet rejects it: it leaves pod-resources
    before the next admission (its deletion follows). One cut off by the kill stays, to be asked
    again."""
    for name in names:
        if name.endswith("-" + family[:2]):
            r = alloc(name)
            if not r.get("ok") and not cut_off(r):
                cluster.reject(name)


def cut_off(reply):
    """Whether an Allocate failed because the device manager was gone (no answer reached the
    kubelet), not because it refused."""
    if reply.get("ok"):
        return False
    code, text = reply.get("code"), "%s %s" % (reply.get("details"), reply.get("error"))
    if reply.get("stage") == "select" and "no healthy devices" not in text and \
            "unavailable" not in text:
        return "unregistered" in text or "unknown Device Plugin" in text
    return code in ("UNAVAILABLE", "CANCELLED", "UNKNOWN", None) and \
        code not in ("FAILED_PRECONDITION", "INVALID_ARGUMENT", "INTERNAL")


def visible(reply):
    return [v for v in reply["response"]["envs"].get("NVIDIA_VISIBLE_DEVICES", "").split(",") if v]


def journal(d):
    path = os.path.join(d, "pods", ".tessera-grants.json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f)["grants"]


def accels(ann):
    return ann.get("main", {}).get("devices", {}).get("groups", [{}])[0].get("accelerators", [])


def check(cluster, d, mig_cards):
    """Every invariant of the file comment over the settled node; returns the violations."""
    bad = []
    anns = cluster.annotations()
    state = gpu_state(d)
    live_mig = {}
    for g, gpu in enumerate(state["gpus"]):
        for gi in gpu["instances"]:
            for ci in gi["cis"]:
                live_mig[ci["uuid"]] = (g, gi["start"], gi["size"])
    holders = {}   # GPU UUID -> [(pod, family, units)]
    migs = {}      # MIG UUID -> pod
    placements = {}  # GPU index -> [(start, length, pod)]
    with cluster.lock:
        pods = {n: dict(p) for n, p in cluster.pods.items() if not p["dead"]}
    for name, p in sorted(pods.items()):
        reply, ann = p["reply"], anns.get(name)
        if reply is None:
            if ann is not None:
                bad.append("%s: its annotation records a grant the kubelet never got (stranded): %s"
                           % (name, ann))
            continue
        got = visible(reply)
        if ann is None or "main" not in ann:
            bad.append("%s: the kubelet holds %s but no annotation records it (lost)" % (name, got))
            continue
        acc = accels(ann)
        if p["family"] == "partitioned":
            if len(got) != 1 or not got[0].startswith("MIG-"):
                bad.append("%s: a partition answered %s, not one MIG device" % (name, got))
                continue
            if got[0] in migs:
                bad.append("%s: MIG device %s also given to %s (double grant)"
                           % (name, got[0], migs[got[0]]))
            migs[got[0]] = name
            rec = acc[0] if len(acc) == 1 else {}
            if rec.get("allocatedPhysicalID") != got[0]:
                bad.append("%s: annotation records %s, the container got %s"
                           % (name, rec.get("allocatedPhysicalID"), got[0]))
            live = live_mig.get(got[0])
            pl = (rec.get("allocatedPhysicalPlacements") or [{}])[0]
            if live is None:
                bad.append("%s: MIG device %s is not live" % (name, got[0]))
            elif live[0] != rec.get("index") or live[1] != pl.get("start"):
                bad.append("%s: MIG device %s lives at GPU %d start %d, recorded %s"
                           % (name, got[0], live[0], live[1], rec))
            placements.setdefault(rec.get("index"), []).append(
                (pl.get("start", -1), pl.get("length", 0), name))
            continue
        if sorted(a["id"] for a in acc) != sorted(got):
            bad.append("%s: annotation records %s, the container got %s"
                       % (name, [a["id"] for a in acc], got))
        for u in got:
            holders.setdefault(u, []).append((name, p["family"], p["units"],
                                              [a.get("allocated") for a in acc]))
    for u, hs in sorted(holders.items()):
        fams = {h[1] for h in hs}
        if u in mig_cards:
            bad.append("MIG GPU %s given whole, shared or sliced to %s" % (u, hs))
        if len(fams) > 1:
            bad.append("GPU %s held in two modes: %s (double grant)" % (u, hs))
        if "exclusive" in fams and len(hs) > 1:
            bad.append("GPU %s held exclusively and by others: %s (double grant)" % (u, hs))
        if "shared" in fams and len(hs) > SHARES:
            bad.append("GPU %s holds %d shares (double grant)" % (u, len(hs)))
        if "sliced" in fams and sum(h[2] for h in hs) > UNITS:
            bad.append("GPU %s slices hold %d units (double grant): %s"
                       % (u, sum(h[2] for h in hs), hs))
    for g, ps in sorted(placements.items()):
        ps.sort()
        for a, b in zip(ps, ps[1:]):
            if a[0] + a[1] > b[0]:
                bad.append("GPU %s: placements of %s and %s overlap (double grant)" % (g, a[2], b[2]))
    return bad


def settled(cluster, d):
    """Whether the device manager caught up: every granted live Pod annotated, nothing
    annotated that the kubelet lacks, the journal empty."""
    anns = cluster.annotations()
    with cluster.lock:
        pods = {n: p for n, p in cluster.pods.items() if not p["dead"]}
    for name, p in pods.items():
        if (p["reply"] is not None) != ("main" in anns.get(name, {})):
            return False
    return not journal(d)


def run(tessera, cp):
    rounds = int(os.environ.get("TSR_CHAOS_ROUNDS", "16"))
    rng = random.Random(int(os.environ.get("TSR_CHAOS_SEED", "1")))
    fault_rng = random.Random(rng.random())
    fault_lock = threading.Lock()

    def fault(method, path):
        with fault_lock:
            x = fault_rng.random()
        rate = 0.03 if method == "GET" else 0.15
        if x < rate / 2:
            return "before"
        if x < rate:
            return "after"
        return None

    proxy = kn = dm = None
    stats = {"kills": 0, "allocates": 0, "granted": 0, "refused": 0, "retried": 0,
             "retry_ok": 0, "deleted": 0, "double": 0, "violations": 0, "served_again": 0,
             "restored": 0, "t_start": 0.0, "t_settle": 0.0}
    try:
        cp.apply_files(CRDS)
        names = []
        for p in CRDS:
            with open(p) as f:
                names += [x["metadata"]["name"] for x in yaml.safe_load_all(f)
                          if x and x.get("kind") == "CustomResourceDefinition"]
        cp.wait_established(names)
        cp.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        token = chart.token(cp, "device-manager")
        proxy = Recorder(cp, fault=fault)
        kc = proxy.kubeconfig("device-manager.kubeconfig", token)
        kn = KubeletNode(cp, NODE, "python", pods=False).start()
        d = kn.dir
        cluster = Cluster(cp, kn)
        starts = 0

        def start():
            nonlocal dm, starts
            if dm is not None and os.environ.get("TSR_CHAOS_VERBOSE"):
                with open("/tmp/chaos-dm-%d.log" % starts, "w") as f:
                    f.write("\n".join(dm.lines))
            if dm is not None:  # what the killed one did
                stats["served_again"] += sum("asked again for what it was granted" in x
                                             for x in dm.lines)
                stats["restored"] += sum("restored" in x and "grant journal" in x
                                         for x in dm.lines)
            t_begin = time.monotonic()
            before = {r: v.get("updates", 0) for r, v in kn.call("state")["resources"].items()}
            dm = DeviceManager(tessera, cp, kn, FAKE, kubeconfig=kc)
            starts += 1
            for res in RES.values():
                r = kn.call("wait_registered", resource=res, count=starts, timeout=30)
                if not r.get("ok"):
                    raise RuntimeError("%s did not register: %s\n%s" % (res, r, dm.log()))
            t_reg = time.monotonic()
            # a new registration lists nothing until the plugin's first ListAndWatch
            for res in RES.values():
                r = kn.call("wait_update", resource=res, after=before.get(res, 0), timeout=30)
                if not r.get("ok"):
                    raise RuntimeError("%s listed nothing: %s\n%s" % (res, r, dm.log()))
            if os.environ.get("TSR_CHAOS_VERBOSE"):
                t.note("start: registered after %.2f s, listed after %.2f s more" % (
                    t_reg - t_begin, time.monotonic() - t_reg))

        start()
        mig_cards = {x["id"].split(":")[1]
                     for x in kn.call("state")["resources"][RES["partitioned"]]["devices"]}
        t0 = time.monotonic()
        round_ok = True
        for rnd in range(rounds):
            new = [cluster.create(rng.choice(FAMILIES), rng) for _ in range(rng.randint(3, 5))]
            cluster.publish()
            replies = {}

            def alloc(name):
                replies[name] = cluster.allocate(name)
                return replies[name]

            with cluster.lock:
                granted = [n for n, p in cluster.pods.items() if p["reply"] and not p["dead"]]
            doomed = rng.sample(granted, min(len(granted), rng.randint(0, 2)))

            def deleter():
                for name in doomed:
                    cluster.delete(name)

            delay = rng.uniform(0.02, 0.6)
            threads = [threading.Thread(target=admit, args=(cluster, new, family, alloc))
                       for family in FAMILIES]
            threads.append(threading.Thread(target=deleter))
            for th in threads:
                th.start()
            time.sleep(delay)
            dm.kill()
            dm.proc.wait()
            stats["kills"] += 1
            for th in threads:
                th.join(60)
            stats["deleted"] += len(doomed)
            t1 = time.monotonic()
            start()
            stats["t_start"] += time.monotonic() - t1
            first = dict(replies)
            retry = []
            for name in new:
                r = replies.get(name, {"ok": False, "error": "no reply"})
                stats["allocates"] += 1
                if r.get("ok"):
                    cluster.pods[name]["reply"] = r
                    stats["granted"] += 1
                elif cut_off(r):
                    retry.append(name)
                else:
                    stats["refused"] += 1
                    cluster.delete(name)
            threads = [threading.Thread(target=admit, args=(cluster, retry, family, alloc))
                       for family in FAMILIES]
            for th in threads:
                th.start()
            for th in threads:
                th.join(60)
            if os.environ.get("TSR_CHAOS_VERBOSE"):
                t.note("round %d replies: %s" % (rnd + 1, json.dumps(
                    {n: (r.get("ok"), r.get("stage"), r.get("code"), (r.get("details") or
                         r.get("error") or "")[:100], r.get("devices"),
                         r.get("response") and visible(r))
                     for n, r in sorted(list(first.items()) + [(k + "'", v) for k, v in
                                                               replies.items() if k in retry])})))
            for name in retry:
                r = replies[name]
                stats["retried"] += 1
                if r.get("ok"):
                    cluster.pods[name]["reply"] = r
                    stats["retry_ok"] += 1
                else:
                    cluster.delete(name)
            t1 = time.monotonic()
            calm = eventually(lambda: settled(cluster, d), 30, 0.2)
            stats["t_settle"] += time.monotonic() - t1
            bad = check(cluster, d, mig_cards)
            if not calm:
                bad.append("not settled in 30 s (journal: %s)" % journal(d))
            stats["double"] += sum("double grant" in b for b in bad)
            stats["violations"] += len(bad)
            round_ok &= not bad
            t.ok(not bad, "round %d: killed after %.0f ms; %d new Pods, %d retried after the "
                 "kill, %d deleted; no double grant, nothing lost or stranded"
                 % (rnd + 1, delay * 1000, len(new), len(retry), len(doomed)), bad[:6])
        elapsed = time.monotonic() - t0
        stats["served_again"] += sum("asked again for what it was granted" in x for x in dm.lines)
        stats["restored"] += sum("restored" in x and "grant journal" in x for x in dm.lines)

        for name in cluster.live():
            cluster.delete(name)

        def empty():
            st = gpu_state(d)
            return not any(g["instances"] for g in st["gpus"]) and not markers(d) and \
                not journal(d)

        ok = eventually(empty, 30, 0.2)
        st = gpu_state(d)
        t.ok(ok, "every Pod deleted: no MIG instance, marker or journal grant remains",
             ([[gi["start"] for gi in g["instances"]] for g in st["gpus"]], markers(d),
              journal(d)))
        faults = sum(1 for c in proxy.snapshot() if c.get("fault"))
        t.ok(stats["kills"] == rounds and stats["granted"] > 0 and faults > 0,
             "the chaos happened: %d kills, %d grants, %d API failures injected"
             % (stats["kills"], stats["granted"], faults))
        t.note("%d rounds in %.1f s (restarts %.1f s, settling %.1f s): %d kills (SIGKILL), "
               "%d Allocates (%d granted, %d refused), %d asked again after a kill (%d granted; "
               "%d of them served again from a grant whose answer was lost), %d restarts "
               "restoring journaled grants, %d Pods deleted mid-round, %d API failures "
               "injected; double grants found: %d, violations: %d"
               % (rounds, elapsed, stats["t_start"], stats["t_settle"], stats["kills"],
                  stats["allocates"], stats["granted"], stats["refused"], stats["retried"],
                  stats["retry_ok"], stats["served_again"], stats["restored"],
                  stats["deleted"], faults, stats["double"], stats["violations"]))
        t.ok(stats["double"] == 0, "zero double grants over %d chaos rounds" % rounds)
    finally:
        if dm is not None and dm.proc.poll() is None:
            dm.stop()
        if kn is not None:
            kn.stop()
        if proxy is not None:
            proxy.stop()


def main():
    if len(sys.argv) < 2:
        sys.stderr.write("usage: test_dm_chaos.py TESSERA\n")
        return 2
    tessera = os.path.abspath(sys.argv[1])
    on_control_plane(t, "dm-chaos", lambda cp: run(tessera, cp), kueue=False, scheduler=False,
                     controller_manager=False)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
