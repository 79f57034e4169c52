#!/usr/bin/env python3
"""Checks scripts/sim-why.py on a hand-made three-GPU cluster (ctest sim_why_script)."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
NODES = """sn,cpu_milli,memory_mib,gpu,model
a,8000,65536,2,T4
b,32000,65536,1,P100
"""
# Capacity 3000 milli. a: an 810 share (190 left) and a whole GPU, 1000 CPU left. The 180 share fits
# the 190 left and b's GPU but asks more CPU than either node has: cpu. The T4-only whole GPU finds
# only b's P100 free: model. Event 4 makes the arrived demand 3990 > 3000: the report point is
# event 3 (2990 arrived).
PLACEMENTS = """policy,seed,event,task,name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,node,devices
x,1,0,0,s810,6000,1024,1,810,,0001-a,0:810
x,1,1,1,w1,1000,1024,1,1000,,0001-a,1:1000
x,1,2,2,s180,40000,1024,1,180,,,
x,1,3,3,t4,1000,1024,1,1000,T4,,
x,1,4,4,w2,1000,1024,1,1000,,0000-b,0:1000
"""
CASES = [  # (what, text the report must contain)
    ("report point", "report point event 3 (arrived 99.67 %), allocated 60.33 %, idle 1.2 GPUs"),
    ("failures", "failed task events up to there: 2 (1.2 GPUs, 39.33 %)"),
    ("cpu", "| cpu | share | 1 | 0.2 | 6.00 |"),
    ("model", "| model | whole | 1 | 1.0 | 33.33 |"),
    ("fragment", "190: 1 GPUs"),
    ("free GPU", "idle fully free GPUs: 1; by model: P100 1"),
]


def run(nodes, placements, *extra):
    with tempfile.TemporaryDirectory() as d:
        n, p = os.path.join(d, "n.csv"), os.path.join(d, "p.csv")
        open(n, "w").write(nodes)
        open(p, "w").write(placements)
        return subprocess.run([sys.executable, os.path.join(HERE, "sim-why.py"), "--nodes", n,
                               "--placements", p, *extra], capture_output=True, text=True)


def main():
    failed = 0
    r = run(NODES, PLACEMENTS)
    for what, want in CASES:
        if r.returncode != 0 or want not in r.stdout:
            print(f"FAIL {what}: want {want!r} in\n{r.stdout}{r.stderr}")
            failed += 1
    # Garbage is a clear error naming file and line.
    bad = run(NODES, PLACEMENTS.replace("x,1,2,2,s180,40000", "x,1,2,2,s180,lots"))
    if bad.returncode == 0 or "p.csv:4:" not in bad.stderr:
        print(f"FAIL garbage: rc {bad.returncode}, stderr {bad.stderr!r}")
        failed += 1
    unknown = run(NODES, PLACEMENTS.replace("0001-a", "0001-zz"))
    if unknown.returncode == 0 or "not in" not in unknown.stderr:
        print(f"FAIL unknown node: rc {unknown.returncode}, stderr {unknown.stderr!r}")
        failed += 1
    print("sim_why_test:", "FAILED" if failed else "ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
