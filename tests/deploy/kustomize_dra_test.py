#!/usr/bin/python3
"""kustomize, DRA mode (docs/dra.md "Installing with kustomize"): `kubectl kustomize deploy/overlays/dra`
(production plus the component deploy/components/dra) holds what the chart's dra.enabled holds
(dra_manifest.py: DeviceClass, RBAC with 1.36's resourceclaims/driver restricted to the driver, the
dra-plugin DaemonSet's flags against the built binary, argv[1], and one owner per GPU over a table of
node labels), no dangling reference (check-refs.py), and the overlays without the component have no DRA
object. DRA placement (deploy/components/dra-placement, listed by the DRA overlay): --dra-placement, the
extender's prioritize verb with weight 21 and exactly the list/watch grants its informers need (read from
src/extender/dra_hook.cc), kube-scheduler's config otherwise the production overlay's; production and dev
have none of it. So that the checks can fail, a table of broken renderings (one defect each) must each be
reported with its reason. Exit 77 without kubectl. Run from the repository root."""
import copy
import shutil
import subprocess
import sys

import yaml

from dra_manifest import (DRIVER, DEFAULT_OWNERS, dra_problems, owner_problems, placement_api_problems, placement_problems,
                          scheduler_config)

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
    return (dra_problems(docs, hami=HAMI) + owner_problems(docs, DEFAULT_OWNERS) +
            placement_problems(docs, True, hami=HAMI))


text, docs = kustomize("deploy/overlays/dra")
for p in problems(docs):
    check(False, p)
for p in placement_api_problems():
    check(False, p)
r = subprocess.run(["/usr/bin/python3", "deploy/check-refs.py"], input=text, capture_output=True, text=True)
check(r.returncode == 0, f"dangling references: {r.stdout}{r.stderr}")
for overlay in ["deploy/overlays/production", "deploy/overlays/dev"]:
    _, plain = kustomize(overlay)
    check(not [d for d in plain if "dra" in d["metadata"]["name"] or d["kind"] == "DeviceClass"],
          f"{overlay} has DRA objects")
    for p in placement_problems(plain, False):
        check(False, f"{overlay}: {p}")
    if overlay.endswith("production"):
        production = plain
# The component changes only the extender's weight and verb in kube-scheduler's config (its replacement
# rewrites the end of the text): the rest is production's.
conf, want = scheduler_config(docs)[0], scheduler_config(production)[0]
if want and want.get("extenders"):
    want["extenders"][0].update(prioritizeVerb="prioritize", weight=21)
check(conf == want, "DRA overlay's kube-scheduler config is not production's plus the prioritize verb "
      f"(extenders {(conf or {}).get('extenders')})")


def find(docs, kind, name):
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def rules(docs):
    return find(docs, "ClusterRole", "hami-dra-plugin")["rules"]


def dra_pod(docs):
    return find(docs, "DaemonSet", "hami-dra-plugin")["spec"]["template"]["spec"]


def args(docs):
    return [c for c in dra_pod(docs)["containers"] if c["name"] == "dra-plugin"][0]["command"]


def extender_args(docs):
    return [c for c in find(docs, "Deployment", "hami-scheduler")["spec"]["template"]["spec"]["containers"]
            if c["name"] == "extender"][0]["command"]


def scheduler_rules(docs):
    return find(docs, "ClusterRole", "hami-scheduler")["rules"]


def edit_config(docs, edit):
    data = find(docs, "ConfigMap", "hami-scheduler-config")["data"]
    data["config.yaml"] = edit(data["config.yaml"])


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
    ("no --dra-placement", lambda d: extender_args(d).remove("--dra-placement=true"), "placement flags"),
    ("--dra-placement twice", lambda d: extender_args(d).append("--dra-placement=true"),
     "gets --dra-placement 2 times"),
    ("another driver placed",
     lambda d: extender_args(d).__setitem__(extender_args(d).index(f"--dra-driver-name={DRIVER}"),
                                            "--dra-driver-name=gpu.nvidia.com"), "placement flags"),
    ("no prioritize verb", lambda d: edit_config(d, lambda t: t.replace("prioritizeVerb: prioritize", "")),
     "(None, 21), want ('prioritize', 21)"),
    ("weight left at 1", lambda d: edit_config(d, lambda t: t.replace("weight: 21", "weight: 1")),
     "('prioritize', 1), want ('prioritize', 21)"),
    ("weight appended instead of replaced (kustomize's delimiter not found)",
     lambda d: edit_config(d, lambda t: t + "    weight: 21\n"), "duplicate key(s) ['weight']"),
    ("no watch on deviceclasses",
     lambda d: [x["verbs"].remove("watch") for x in scheduler_rules(d) if "deviceclasses" in x["resources"]],
     "resource.k8s.io grants"),
    ("a write on resourceclaims",
     lambda d: [x["verbs"].append("patch") for x in scheduler_rules(d) if "resourceclaims" in x["resources"]],
     "resource.k8s.io grants"),
]
for name, breakit, want in BROKEN:
    broken = copy.deepcopy(docs)
    try:
        breakit(broken)
    except (ValueError, KeyError, IndexError, StopIteration) as e:
        check(False, f"broken rendering '{name}' cannot be made from this rendering: {e!r}")
        continue
    got = problems(broken)
    check(any(want in p for p in got), f"broken rendering '{name}' not reported as '{want}': {got}")

print(f"kustomize_dra: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
