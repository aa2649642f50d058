"""sim_json.py - runs `tessera sim` over a scenario whose steps each print JSON (`kubectl ... -o
json`) and returns those objects in step order, for the suites that send the simulator's chain
objects and Nodes to the real control plane."""
import json
import os
import subprocess
import tempfile


def sim_outputs(tessera, scenario, timeout=120):
    """The JSON each step of the scenario text printed, in order; RuntimeError when the run fails."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(scenario)
    try:
        r = subprocess.run([tessera, "sim", f.name], capture_output=True, text=True,
                           timeout=timeout)
    finally:
        os.unlink(f.name)
    if r.returncode != 0:
        raise RuntimeError("tessera sim failed: %s" % r.stderr)
    blocks, cur = [], None
    for line in r.stdout.splitlines():
        if line.startswith("$ "):
            cur = []
            blocks.append(cur)
        elif cur is not None:
            cur.append(line)
    return [json.loads("\n".join(b)) for b in blocks]
