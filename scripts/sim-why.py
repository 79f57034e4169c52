#!/usr/bin/env python3
"""Where the unallocated GPUs of a `hami sim` run are at 100 % arrival, and why pods failed before.

Replays the decisions that `hami sim --placements FILE` wrote (one row per task event) on the node
list and, for every run (policy, seed) in the file, reports:

  * the failed task events up to the report point (the last event whose arrived GPU demand is <= the
    capacity, i.e. arrival 100 %), each classified by the cluster state at the moment it failed:
      cpu      GPUs that fit the task (accepted model, enough GPUs with enough free milli) exist,
               but only on nodes without the task's free CPU (some of them with its memory)
      memory   the same, for node memory (some of them with the CPU); cpu+memory: neither
      fits     a node has all it needs: the decisions do not belong to this node list
      model    no accepted GPU fits, but a GPU of another model would (with CPU and memory)
      gpu      no node at all has the GPUs the task needs, CPU and model aside:
                 whole    one whole GPU and no fully free GPU anywhere
                 share    a share m < 1000 and no GPU with m milli free, though the cluster's free
                          milli adds up to more
                 multi    n > 1 GPUs and no node with n of them free (counted fully free GPUs
                          in the cluster: see `scattered`)
      none     a task without GPUs that no node has the CPU and memory for
  * the idle GPU milli at the report point (equal to the failed demand up to there, plus the
    demand short of 100 %): on partly used GPUs (fragments, by free milli) and on fully free GPUs
    (by model and by the free CPU per free GPU of their node).

Usage: scripts/sim-why.py --nodes data/openb/openb_node_list_gpu_node.csv --placements P.csv
       [--policy NAME] [--seed N] [--failures OUT.csv]
"""
import argparse
import collections
import csv
import sys


def read_nodes(path):
    nodes = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            nodes[row["sn"]] = (int(row["cpu_milli"]), int(row["memory_mib"]), int(row["gpu"]),
                                row.get("model", ""))
    return nodes


class Node:
    __slots__ = ("sn", "cpu", "mem", "model", "cpu_used", "mem_used", "free")

    def __init__(self, sn, spec):
        self.sn = sn
        self.cpu, self.mem, gpus, self.model = spec
        self.cpu_used = self.mem_used = 0
        self.free = [1000] * gpus


def accepts(spec, model):
    if not spec:
        return True
    low = model.lower()
    return any(s.lower() in low for s in spec)


def classify(t, nodes):
    """Why task `t` fits no node (see the module doc)."""
    n, m, cpu, mem, spec = t["num_gpu"], t["gpu_milli"], t["cpu_milli"], t["memory_mib"], t["spec"]
    if n == 0:
        return "none", ""
    gpu_fit_any = False       # some node (any model) has the GPUs
    fit_accepted = []         # accepted nodes with the GPUs
    other_model_full = False  # a node of another model fits completely
    for nd in nodes:
        if sum(1 for f in nd.free if f >= m) < n:
            continue
        gpu_fit_any = True
        ok_cpu = nd.cpu - nd.cpu_used >= cpu
        ok_mem = nd.mem - nd.mem_used >= mem
        if accepts(spec, nd.model):
            fit_accepted.append((ok_cpu, ok_mem))
        elif ok_cpu and ok_mem:
            other_model_full = True
    if fit_accepted:
        if any(ok_cpu and ok_mem for ok_cpu, ok_mem in fit_accepted):
            return "fits", ""  # the decisions do not match the node list
        if any(ok_mem and not ok_cpu for ok_cpu, ok_mem in fit_accepted):
            return "cpu", ""
        if any(ok_cpu and not ok_mem for ok_cpu, ok_mem in fit_accepted):
            return "memory", ""
        return "cpu+memory", ""
    if gpu_fit_any and (other_model_full or spec):
        return "model", ""
    if n > 1:
        return "gpu", "multi"
    if m >= 1000:
        return "gpu", "whole"
    return "gpu", "share"


def bucket_cpu_per_gpu(cpu_free, gpus):
    per = cpu_free / 1000 / gpus
    for lim in (1, 2, 4, 8):
        if per < lim:
            return f"< {lim} cores"
    return ">= 8 cores"


def analyse(rows, node_specs, out_failures, key):
    nodes = {}
    # Every node of the list takes part, placed or not: name them by sn (the prefix is only order).
    for sn, spec in node_specs.items():
        nodes[sn] = Node(sn, spec)
    node_list = list(nodes.values())
    capacity = sum(len(nd.free) for nd in node_list) * 1000
    # The report point: the last event whose arrived demand <= capacity.
    arrived, last = 0, -1
    for i, row in enumerate(rows):
        arrived += row["num_gpu"] * row["gpu_milli"]
        if arrived <= capacity:
            last = i
    fails = collections.Counter()
    fail_milli = collections.Counter()
    arrived = used = 0
    for i, t in enumerate(rows[: last + 1]):
        arrived += t["num_gpu"] * t["gpu_milli"]
        if t["node"]:
            nd = nodes[t["node"].split("-", 1)[1]]
            nd.cpu_used += t["cpu_milli"]
            nd.mem_used += t["memory_mib"]
            for d in t["devices"].split("|") if t["devices"] else []:
                idx, milli = d.split(":")
                nd.free[int(idx)] -= int(milli)
            used += t["num_gpu"] * t["gpu_milli"]
            continue
        why, sub = classify(t, node_list)
        shape = ("multi" if t["num_gpu"] > 1 else "whole" if t["gpu_milli"] >= 1000
                 else "share" if t["num_gpu"] == 1 else "cpu-only")
        k = (why, sub or shape)
        fails[k] += 1
        fail_milli[k] += t["num_gpu"] * t["gpu_milli"]
        if out_failures is not None:
            out_failures.writerow([key[0], key[1], t["event"], round(100 * arrived / capacity, 2),
                                   t["name"], t["cpu_milli"], t["memory_mib"], t["num_gpu"],
                                   t["gpu_milli"], "|".join(t["spec"]), why, sub or shape])
    # Idle capacity at the report point.
    frag = collections.Counter()
    frag_exact = collections.Counter()  # free milli -> GPUs
    whole = collections.Counter()
    whole_cpu = collections.Counter()
    scattered = 0
    for nd in node_list:
        fully = sum(1 for f in nd.free if f == 1000)
        for f in nd.free:
            if 0 < f < 1000:
                frag_exact[f] += 1
                frag[f"{(f - 1) // 250 * 250 + 1}-{(f - 1) // 250 * 250 + 250}"] += f
        if fully:
            whole[nd.model] += fully
            whole_cpu[bucket_cpu_per_gpu(nd.cpu - nd.cpu_used, fully)] += fully
            scattered += fully
    idle = capacity - used
    print(f"## {key[0]} seed {key[1]}: report point event {last} (arrived {100 * arrived / capacity:.2f} %),"
          f" allocated {100 * used / capacity:.2f} %, idle {idle / 1000:.1f} GPUs ({100 * idle / capacity:.2f} %)")
    total_n, total_m = sum(fails.values()), sum(fail_milli.values())
    print(f"failed task events up to there: {total_n} ({total_m / 1000:.1f} GPUs, {100 * total_m / capacity:.2f} %)")
    print("| why | shape | tasks | GPUs | % of capacity |")
    print("|---|---|---|---|---|")
    for k, v in sorted(fails.items(), key=lambda kv: -fail_milli[kv[0]]):
        print(f"| {k[0]} | {k[1]} | {v} | {fail_milli[k] / 1000:.1f} | {100 * fail_milli[k] / capacity:.2f} |")
    print(f"idle on partly used GPUs: {sum(frag.values()) / 1000:.1f} GPUs; by free milli per GPU: "
          + ", ".join(f"{b}: {v / 1000:.1f}" for b, v in sorted(frag.items(), key=lambda kv: int(kv[0].split('-')[0]))))
    print("most idle milli on partly used GPUs, by free milli: " + ", ".join(
        f"{f}: {n} GPUs" for f, n in sorted(frag_exact.items(), key=lambda kv: -kv[0] * kv[1])[:8]))
    print(f"idle fully free GPUs: {scattered}; by model: "
          + ", ".join(f"{m} {v}" for m, v in whole.most_common())
          + "; by free CPU per free GPU of their node: "
          + ", ".join(f"{b} {v}" for b, v in sorted(whole_cpu.items())))
    print()
    return fails, fail_milli, idle


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", required=True)
    ap.add_argument("--placements", required=True)
    ap.add_argument("--policy")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--failures", help="write every classified failure as CSV here")
    a = ap.parse_args()
    node_specs = read_nodes(a.nodes)
    runs = collections.OrderedDict()
    with open(a.placements, newline="") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            try:
                key = (row["policy"], int(row["seed"]))
                t = {"event": int(row["event"]), "name": row["name"], "cpu_milli": int(row["cpu_milli"]),
                     "memory_mib": int(row["memory_mib"]), "num_gpu": int(row["num_gpu"]),
                     "gpu_milli": int(row["gpu_milli"]),
                     "spec": [s for s in row["gpu_spec"].split("|") if s],
                     "node": row["node"], "devices": row["devices"]}
                if t["node"] and t["node"].split("-", 1)[-1] not in node_specs:
                    raise ValueError(f"node {t['node']} is not in {a.nodes}")
            except (KeyError, ValueError, TypeError, AttributeError) as e:
                sys.exit(f"{a.placements}:{line}: {e}")
            if (a.policy and key[0] != a.policy) or (a.seed is not None and key[1] != a.seed):
                continue
            runs.setdefault(key, []).append(t)
    if not runs:
        sys.exit(f"{a.placements}: no run matches")
    out = None
    if a.failures:
        fh = open(a.failures, "w", newline="")
        out = csv.writer(fh)
        out.writerow(["policy", "seed", "event", "arrived_pct", "name", "cpu_milli", "memory_mib",
                      "num_gpu", "gpu_milli", "gpu_spec", "why", "shape"])
    for key, rows in runs.items():
        analyse(rows, node_specs, out, key)


if __name__ == "__main__":
    main()
