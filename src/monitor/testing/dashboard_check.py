#!/usr/bin/env python3
"""Checks the Grafana dashboard against what `hami monitor` exports.

usage: dashboard_check.py EXPOSITION_PROGRAM DASHBOARD_JSON [--self-test]

EXPOSITION_PROGRAM prints the exporter's output for a small node (monitor_sample_exposition). The
dashboard fails when a query (panel target or template variable) names a hami_* metric the exporter
does not export, selects or reads a label that metric does not carry, or when one of the panels
the issues ask for is missing: used vs allocated compute per container (the busy meter against the
SM limit) and memory used / peak vs the limit. --self-test runs the table of broken dashboards
below, each of which must fail with its message, and the real one, which must pass.
"""
import copy
import json
import re
import subprocess
import sys

METRIC = re.compile(r"\bhami_[a-z0-9_]+")
SELECTOR = re.compile(r"\b(hami_[a-z0-9_]+)\s*\{([^}]*)\}")
MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
LABEL_VALUES = re.compile(r"label_values\(\s*(hami_[a-z0-9_]+)[^,]*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)")
SAMPLE_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"')

# Panels the dashboard must have: (what, every group of which one metric must appear in a panel).
REQUIRED = [
    ("used vs allocated compute per container",
     [("hami_container_device_busy_ratio", "hami_container_device_busy_seconds_total"),
      ("hami_container_device_sm_limit_ratio",)]),
    ("memory used / peak vs limit per container",
     [("hami_vgpu_memory_used_bytes",), ("hami_container_device_memory_peak_bytes",),
      ("hami_vgpu_memory_limit_bytes",)]),
]


def exported(text):
    """Metric name -> set of its label names, from an exposition text."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0)
        labels = out.setdefault(name, set())
        if line[len(name):].startswith("{"):
            labels.update(SAMPLE_LABEL.findall(line[len(name) + 1:line.rindex("}")]))
    return out


def panels(node):
    for p in node.get("panels", []):
        yield p
        yield from panels(p)


def queries(dash):
    """(where, PromQL text) of every panel target and template variable."""
    for p in panels(dash):
        for t in p.get("targets", []):
            if "expr" in t:
                yield (f"panel {p.get('title')!r}", t["expr"])
    for v in dash.get("templating", {}).get("list", []):
        q = v.get("query")
        if isinstance(q, dict):
            q = q.get("query")
        if isinstance(q, str) and "hami_" in q:
            yield (f"variable {v.get('name')!r}", q)


def problems(dash, metrics):
    out = []
    for where, q in queries(dash):
        for m in sorted(set(METRIC.findall(q))):
            if m not in metrics:
                out.append(f"{where} queries {m}, which the exporter does not export")
        for m, body in SELECTOR.findall(q):
            for label in MATCHER.findall(body):
                if m in metrics and label not in metrics[m]:
                    out.append(f"{where} selects label {label} of {m}, which it does not carry")
        for m, label in LABEL_VALUES.findall(q):
            if m in metrics and label not in metrics[m]:
                out.append(f"{where} reads label {label} of {m}, which it does not carry")
    for what, groups in REQUIRED:
        if not any(all(any(m in " ".join(t.get("expr", "") for t in p.get("targets", []))
                           for m in group) for group in groups) for p in panels(dash)):
            out.append(f"no panel shows {what} ({' / '.join(g[0] for g in groups)})")
    return out


def target(dash, metric):
    for p in panels(dash):
        for t in p.get("targets", []):
            if metric in t.get("expr", ""):
                return p, t
    raise KeyError(metric)


def drop_targets(metric):
    def f(d):
        for p in panels(d):
            p["targets"] = [t for t in p.get("targets", []) if metric not in t.get("expr", "")]
    return f


def rename(old, new):
    def f(d):
        _, t = target(d, old)
        t["expr"] = t["expr"].replace(old, new)
    return f


def add_matcher(metric, matcher):
    def f(d):
        _, t = target(d, metric)
        t["expr"] = t["expr"].replace(metric + "{", metric + "{" + matcher + ", ", 1)
    return f


def variable_label(old, new):
    def f(d):
        for v in d["templating"]["list"]:
            q = v.get("query")
            if isinstance(q, dict) and old in q.get("query", ""):
                q["query"] = q["query"].replace(old, new)
    return f


# Broken dashboards and the message each must fail with.
SELF_TEST = [
    ("a panel queries a metric that is not exported",
     rename("hami_container_device_busy_ratio", "hami_container_device_busy_fraction"),
     "queries hami_container_device_busy_fraction, which the exporter does not export"),
    ("a panel selects a label the metric does not carry",
     add_matcher("hami_vgpu_memory_used_bytes", 'gpu_index=~".*"'),
     "selects label gpu_index of hami_vgpu_memory_used_bytes"),
    ("a host metric filtered by a container label",
     add_matcher("hami_host_gpu_utilization_ratio", 'pod=~"$pod"'),
     "selects label pod of hami_host_gpu_utilization_ratio"),
    ("a variable reads a label the metric does not carry",
     variable_label("hami_host_gpu_memory_used_bytes, node)", "hami_host_gpu_memory_used_bytes, host)"),
     "reads label host of hami_host_gpu_memory_used_bytes"),
    ("no compute used vs allocated panel", drop_targets("hami_container_device_sm_limit_ratio"),
     "no panel shows used vs allocated compute per container"),
    ("no peak memory in any panel", drop_targets("hami_container_device_memory_peak_bytes"),
     "no panel shows memory used / peak vs limit per container"),
]


def main(argv):
    if len(argv) not in (3, 4) or (len(argv) == 4 and argv[3] != "--self-test"):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    text = subprocess.run([argv[1]], check=True, capture_output=True, text=True).stdout
    metrics = exported(text)
    with open(argv[2], encoding="utf-8") as f:
        dash = json.load(f)
    found = problems(dash, metrics)
    if len(argv) == 3:
        for p in found:
            print(f"dashboard {argv[2]}: {p}")
        if not found:
            print(f"dashboard {argv[2]}: every metric and label it queries is exported; "
                  "used vs allocated compute and memory shown")
        return 1 if found else 0
    failures = [f"the real dashboard: {p}" for p in found]
    for name, mutate, want in SELF_TEST:
        broken = copy.deepcopy(dash)
        mutate(broken)
        got = problems(broken, metrics)
        if not any(want in p for p in got):
            failures.append(f"{name}: want a problem with {want!r}, got {got}")
    for f in failures:
        print("FAIL", f)
    if not failures:
        print(f"{len(SELF_TEST)} broken dashboards fail as they should; the real one passes")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
