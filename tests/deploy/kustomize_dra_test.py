#!/usr/bin/python3
"""kustomize, DRA mode (docs/dra.md "Installing with kustomize"): `kubectl kustomize deploy/overlays/dra`
(production plus the component deploy/components/dra) holds what the chart's dra.enabled holds
(dra_manifest.py: DeviceClass, RBAC with 1.36's resourceclaims/driver restricted to the driver, the
dra-plugin DaemonSet's flags against the built binary, argv[1], and one owner per GPU over a table of
node labels), no dangling reference (check-refs.py), and the overlays without the component have no DRA
object. So that the checks can fail, a table of broken renderings (one defect each) must each be
reported with its reason. Exit 77 without kubectl. Run from the repository root."""
import copy
import shutil
import subprocess
import sys

import yaml

from dra_manifest import DEFAULT_OWNERS, dra_problems, owner_problems

HAMI = sys.argv[1] if len(sys.argv) > 1 else ""
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL", what)


if not shutil.which("kubectl"):
    print("kubectl missing: kustomize not rendered", file=sys.stderr)
    sys.exit(77)


def kustomize(overlay):
    r = subprocess.run(["kubectl", "kustomize", overlay], capture_output=True, text=True)
    check(r.returncode == 0, f"kubectl kustomize {overlay}: {r.stderr.strip()}")
    return r.stdout, [d for d in yaml.safe_load_all(r.stdout) if d]


def problems(docs):
    return dra_problems(docs, hami=HAMI) + owner_problems(docs, DEFAULT_OWNERS)


text, docs = kustomize("deploy/overlays/dra")
for p in problems(docs):
    check(False, p)
r = subprocess.run(["/usr/bin/python3", "deploy/check-refs.py"], input=text, capture_output=True, text=True)
check(r.returncode == 0, f"dangling references: {r.stdout}{r.stderr}")
for overlay in ["deploy/overlays/production", "deploy/overlays/dev"]:
    _, plain = kustomize(overlay)
    check(not [d for d in plain if "dra" in d["metadata"]["name"] or d["kind"] == "DeviceClass"],
          f"{overlay} has DRA objects")


def find(docs, kind, name):
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def rules(docs):
    return find(docs, "ClusterRole", "hami-dra-plugin")["rules"]


def dra_pod(docs):
    return find(docs, "DaemonSet", "hami-dra-plugin")["spec"]["template"]["spec"]


def args(docs):
    return [c for c in dra_pod(docs)["containers"] if c["name"] == "dra-plugin"][0]["command"]


# (defect, how to make it, a fragment of the problem it must produce)
BROKEN = [
    ("no DeviceClass", lambda d: d.remove(next(x for x in d if x["kind"] == "DeviceClass")),
     "one DeviceClass"),
    ("DeviceClass selects another driver",
     lambda d: find(d, "DeviceClass", "hami-core-gpu.project-hami.io")["spec"]["selectors"][0]["cel"].update(
         expression='device.driver == "gpu.nvidia.com"'), "DeviceClass selectors"),
    ("DeviceClass namespaced",
     lambda d: find(d, "DeviceClass", "hami-core-gpu.project-hami.io")["metadata"].update(namespace="x"),
     "has a namespace"),
    ("resourceclaims/driver for every driver",
     lambda d: [x.pop("resourceNames") for x in rules(d) if "resourceNames" in x], "ClusterRole rules"),
    ("no resourceclaims/status patch",
     lambda d: rules(d).remove(next(x for x in rules(d) if x["resources"] == ["resourceclaims/status"])),
     "ClusterRole rules"),
    ("a list verb too many", lambda d: rules(d)[0]["verbs"].append("list"), "ClusterRole rules"),
    ("binding to another account",
     lambda d: find(d, "ClusterRoleBinding", "hami-dra-plugin")["subjects"][0].update(name="default"), "binding"),
    ("wrong CDI root", lambda d: args(d).__setitem__(args(d).index("--cdi-root=/var/run/cdi"), "--cdi-root=/etc/cdi"),
     "--cdi-root=/etc/cdi"),
    ("no NODE_NAME",
     lambda d: [c.__setitem__("env", []) for c in dra_pod(d)["containers"]], "NODE_NAME"),
    ("dra-plugin on every GPU node", lambda d: dra_pod(d)["nodeSelector"].pop("hami.io/dra"),
     "'gpu': 'on'}: runs ['device-plugin', 'dra']"),
    ("device plugin not kept off DRA nodes",
     lambda d: find(d, "DaemonSet", "hami-node-agent")["spec"]["template"]["spec"].pop("affinity"),
     "'hami.io/dra': 'true'}: runs ['device-plugin', 'dra']"),
]
for name, breakit, want in BROKEN:
    broken = copy.deepcopy(docs)
    breakit(broken)
    got = problems(broken)
    check(any(want in p for p in got), f"broken rendering '{name}' not reported as '{want}': {got}")

print(f"kustomize_dra: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
