#!/usr/bin/python3
"""Workload variants of the openb default trace, for checking that a placement policy generalizes.

Usage: scripts/gen-variants.py [--base FILE] [--menu FILE] [--seed N] [--out DIR] [NAME ...]

Writes DIR/openb_pod_list_<NAME>.csv for each NAME (default: all of FAMILIES below). Deterministic for
a given seed and base trace. Only the standard library is used. The families follow how the FGD paper
(Weng et al., ATC'23) describes its trace families; docs/sim-traces.md states each definition:

  gpuspecX   the default trace with a GPU-model constraint (gpu_spec) on X % of the GPU tasks (by
             count), drawn for each task from the model sets the released gpuspec10 trace uses for tasks
             with the same GPU count (data/openb/gpu_spec_menu.csv, weighted by how often each occurs).
  gpushareX  CPU-only tasks kept; every GPU task slot redrawn (with replacement) from the GPU-sharing
             tasks (gpu_milli < 1000) or from the other GPU tasks, so that sharing tasks request X % of
             the GPU milli (in expectation).
  multigpuX  as gpushareX, with multi-GPU tasks (num_gpu > 1) against single-GPU tasks.
  cpuX       GPU tasks kept; CPU-only tasks redrawn (with replacement) until they request X % of the
             CPU that the default trace's CPU-only tasks request.

Task names are renumbered openb-pod-NNNN in output order; other columns are copied from the drawn task.
"""
import argparse
import csv
import os
import random
import sys

FAMILIES = ["gpuspec20", "gpuspec25", "gpuspec33", "gpushare60", "gpushare80", "gpushare100",
            "cpu50", "cpu200", "cpu250", "multigpu20", "multigpu40", "multigpu50"]


def gpu_milli(task):
    n = int(task["num_gpu"])
    if n == 0:
        return 0
    return int(task["gpu_milli"]) if n == 1 else 1000 * n


def is_sharing(task):
    return int(task["num_gpu"]) == 1 and int(task["gpu_milli"]) < 1000


def is_multi(task):
    return int(task["num_gpu"]) > 1


def load_menu(path):
    menu = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            n, spec, count = int(row["num_gpu"]), row["gpu_spec"], int(row["tasks"])
            if n < 1 or count < 1 or not spec:
                raise ValueError(f"{path}: bad row {row}")
            menu.setdefault(n, []).append((spec, count))
    if not menu:
        raise ValueError(f"{path}: empty menu")
    return menu


def spec_for(menu, num_gpu, rng):
    # The menu lists the GPU counts the released trace constrained; a task of another count takes the
    # smallest listed count at or above its own (a model set that holds it), else the largest listed.
    counts = sorted(menu)
    key = next((c for c in counts if c >= num_gpu), counts[-1])
    specs, weights = zip(*menu[key])
    return rng.choices(specs, weights=weights)[0]


def redraw_gpu_slots(tasks, share, in_class, rng):
    """Keeps CPU-only tasks; each GPU task is redrawn from `in_class` tasks with probability p, else
    from the rest, p chosen so that in-class tasks request `share` of the GPU milli in expectation."""
    gpu = [t for t in tasks if int(t["num_gpu"]) > 0]
    pool_in = [t for t in gpu if in_class(t)]
    pool_out = [t for t in gpu if not in_class(t)]
    if not pool_in or (share < 1 and not pool_out):
        raise ValueError("the base trace has no tasks of one of the two classes")
    m_in = sum(map(gpu_milli, pool_in)) / len(pool_in)
    m_out = sum(map(gpu_milli, pool_out)) / len(pool_out) if pool_out else 0.0
    p = 1.0 if share >= 1 else share * m_out / (m_in * (1 - share) + share * m_out)
    out = []
    for t in tasks:
        if int(t["num_gpu"]) == 0:
            out.append(t)
        else:
            out.append(rng.choice(pool_in) if rng.random() < p else rng.choice(pool_out))
    return out


def variant(name, tasks, menu, rng):
    for family in ("gpuspec", "gpushare", "multigpu", "cpu"):
        if name.startswith(family) and name[len(family):].isdigit():
            x = int(name[len(family):]) / 100.0
            break
    else:
        raise ValueError(f"unknown variant {name!r} (families: gpuspecX, gpushareX, multigpuX, cpuX)")
    if family == "gpuspec":
        if x > 1:
            raise ValueError(f"{name}: more than 100 % of the GPU tasks")
        out = [dict(t) for t in tasks]
        gpu_idx = [i for i, t in enumerate(out) if int(t["num_gpu"]) > 0]
        for i in rng.sample(gpu_idx, round(x * len(gpu_idx))):
            out[i]["gpu_spec"] = spec_for(menu, int(out[i]["num_gpu"]), rng)
        return out
    if family == "gpushare":
        return redraw_gpu_slots(tasks, min(x, 1.0), is_sharing, rng)
    if family == "multigpu":
        return redraw_gpu_slots(tasks, min(x, 1.0), is_multi, rng)
    cpu_only = [t for t in tasks if int(t["num_gpu"]) == 0]
    target = x * sum(int(t["cpu_milli"]) for t in cpu_only)
    drawn, total = [], 0
    while total < target:
        t = rng.choice(cpu_only)
        drawn.append(t)
        total += int(t["cpu_milli"])
    return [t for t in tasks if int(t["num_gpu"]) > 0] + drawn


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default=os.path.join(here, "..", "data", "openb", "openb_pod_list_default.csv"))
    ap.add_argument("--menu", default=os.path.join(here, "..", "data", "openb", "gpu_spec_menu.csv"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="build/variants")
    ap.add_argument("names", nargs="*", default=FAMILIES)
    args = ap.parse_args()
    with open(args.base, newline="") as f:
        reader = csv.DictReader(f)
        fields = list(reader.fieldnames or [])
        tasks = list(reader)
    for col in ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"):
        if col not in fields:
            sys.exit(f"{args.base}: missing column {col}")
    if "gpu_spec" not in fields:
        fields.insert(5, "gpu_spec")
    menu = load_menu(args.menu)
    os.makedirs(args.out, exist_ok=True)
    for name in args.names:
        # One stream per variant (seed and name), so a variant does not change when others are added.
        rng = random.Random(f"{args.seed}:{name}")
        out = variant(name, tasks, menu, rng)
        path = os.path.join(args.out, f"openb_pod_list_{name}.csv")
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
            w.writeheader()
            for i, t in enumerate(out):
                row = {k: t.get(k, "") for k in fields}
                row["name"] = f"openb-pod-{i:04d}"
                w.writerow(row)
        gpu = [t for t in out if int(t["num_gpu"]) > 0]
        milli = sum(map(gpu_milli, gpu)) or 1
        print(f"{path}: {len(out)} tasks, {len(gpu)} GPU tasks, "
              f"sharing {100 * sum(gpu_milli(t) for t in gpu if is_sharing(t)) / milli:.1f} % of GPU milli, "
              f"multi-GPU {100 * sum(gpu_milli(t) for t in gpu if is_multi(t)) / milli:.1f} %, "
              f"gpu_spec on {100 * sum(1 for t in gpu if t.get('gpu_spec')) / max(1, len(gpu)):.1f} % of GPU tasks, "
              f"CPU-only CPU {sum(int(t['cpu_milli']) for t in out if int(t['num_gpu']) == 0) / 1000:.0f} cores",
              file=sys.stderr)


if __name__ == "__main__":
    main()
