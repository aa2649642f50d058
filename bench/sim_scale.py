#!/usr/bin/env python3
"""sim_scale.py - how `tessera sim` grows with the Pods it is given.

Writes one scenario per Pod count: NODES nodes of eight H100s each, then the Pods, each a queued
25 % slice (`nvidia.com/gpu.sliced`) that sleeps: once with one `kubectl apply` step per Pod, as
a runbook that adds Pods one at a time would, once with all of them in one apply. Runs `tessera
sim` on each, back to back, and prints the wall and CPU seconds, the CPU microseconds per Pod,
the Pods Running at the end, and each run's CPU time over the smallest run's of the same mode
scaled by the Pod ratio (1.0 is linear growth in Pods; P^2 growth shows as the Pod ratio).

    bench/sim_scale.py [--tessera build-rel/src/cli/tessera] [--nodes 200] [--pods 250,2000]
"""
import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

QUEUE = "gpustack-fnv64-e4768a65ca0ce96b"  # the H100 pool's LocalQueue (examples/)


def pod(k):
    return ["    apiVersion: v1", "    kind: Pod", "    metadata:", f"      name: slice-{k:05d}",
            "      labels:", f"        kueue.x-k8s.io/queue-name: {QUEUE}", "    spec:",
            "      containers:", "      - name: main", "        image: ubuntu:24.04",
            '        command: ["sleep", "100000"]', "        resources:", "          limits:",
            '            nvidia.com/gpu.sliced: "1"',
            '            nvidia.com/gpu.sliced.memory-percentage: "25"']


def scenario(nodes, pods, per_apply=1):
    out = ["cluster:", "  nodes:"]
    for i in range(nodes):
        out += [f"  - name: node-{i:04d}", "    cpu: 256", "    memory: 2048Gi",
                "    accelerators:", "      model: NVIDIA H100 80GB HBM3", "      count: 8"]
    out.append("steps:")
    for first in range(0, pods, per_apply):
        out += ["- run: kubectl apply -f -", "  stdin: |"]
        for k in range(first, min(first + per_apply, pods)):
            if k > first:
                out.append("    ---")
            out += pod(k)
    out += ["- run: kubectl get pods"]
    return "\n".join(out) + "\n"


def run(tessera, path):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run([tessera, "sim", path], capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        sys.exit(f"tessera sim {path}: exit {p.returncode}\n{p.stderr[-2000:]}")
    running = sum(1 for l in p.stdout.splitlines() if l.startswith("slice-") and " Running " in l)
    return wall, cpu, running


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera", default="build-rel/src/cli/tessera")
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--pods", default="250,2000")
    a = ap.parse_args()
    counts = [int(x) for x in a.pods.split(",")]
    print(f"# {platform.machine()} {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; "
          f"{a.tessera}; {a.nodes} nodes x 8 H100")
    print("applies | pods | wall s | cpu s | cpu us/pod | running | growth vs linear")
    with tempfile.TemporaryDirectory() as d:
        for mode in ("one per Pod", "one for all"):
            base = None
            for n in counts:
                path = os.path.join(d, f"scale-{n}.yaml")
                with open(path, "w") as f:
                    f.write(scenario(a.nodes, n, 1 if mode == "one per Pod" else n))
                wall, cpu, running = run(a.tessera, path)
                if base is None:
                    base = (n, cpu)
                growth = (cpu / base[1]) / (n / base[0]) if base[1] > 0 else float("nan")
                print(f"{mode} | {n} | {wall:.2f} | {cpu:.2f} | {cpu / n * 1e6:.0f} | {running} "
                      f"| {growth:.2f}")


if __name__ == "__main__":
    main()
