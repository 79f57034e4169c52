#!/usr/bin/python3
"""Helm chart, DRA mode (docs/dra.md "Installing"): with dra.enabled the chart renders the DeviceClass
upstream HAMi-DRA's claims name, least-privilege RBAC (exactly the verbs `hami dra-plugin` uses), and the
dra-plugin DaemonSet whose every flag `hami dra-plugin` accepts (argv[1]: the built hami binary); the
device plugin's DaemonSet keeps off the DRA nodes, so no node runs both (one owner per GPU), over a table
of node labels; renders with a bad driver name or no DRA node label fail; the default render has no DRA
object; the webhook's DRA conversion (dra.convert) passes its flags, grants exactly the template verbs and
declares NoneOnDryRun only when selected; DRA placement (dra.placement) is off by default and without
dra.enabled, and when on passes --dra-placement, adds the extender's prioritize verb with its weight and
grants exactly the list/watch its informers need (read from src/extender/dra_hook.cc), each of these
checks shown to fail on a rendering without it; the values schema refuses placement values of the wrong
type. Helm from scripts/helm.sh (77 = skipped). Run from the repository root."""
import os
import subprocess
import sys

from dra_manifest import DEFAULT_OWNERS, dra_problems, owner_problems, placement_api_problems, placement_problems
from helmtest import ROOT, check, failures, render as render_chart, template

HAMI = sys.argv[1] if len(sys.argv) > 1 else ""


def render(*args, fail=False):
    if fail:
        r = template(*args)
        return r.returncode, r.stderr
    return render_chart(*args)


def one(docs, kind, suffix=""):
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(suffix)]
    check(len(found) == 1, f"one {kind} *{suffix}: found {len(found)}")
    return found[0] if found else {}


# Default: no DRA object, the node agent unchanged.
_, docs = render()
check(not [d for d in docs if "dra" in d["metadata"]["name"] or d["kind"] == "DeviceClass"],
      "default render has DRA objects")
check("affinity" not in one(docs, "DaemonSet", "-node-agent")["spec"]["template"]["spec"],
      "default node agent has an affinity")

text, docs = render("--set", "dra.enabled=true")
for problem in dra_problems(docs, hami=HAMI):
    check(False, problem)
# The driver's name follows dra.driverName, so a renamed driver keeps its status writes.
_, renamed = render("--set", "dra.enabled=true", "--set", "dra.driverName=gpu.example.com")
names = [x.get("resourceNames") for x in one(renamed, "ClusterRole", "-dra-plugin")["rules"]
         if x["resources"] == ["resourceclaims/driver"]]
check(names == [["gpu.example.com"]], f"resourceclaims/driver resourceNames {names}")
r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "deploy/check-refs.py"), "--namespace-exists",
                    "hami-system"], input=text, capture_output=True, text=True)
check(r.returncode == 0, f"dangling references: {r.stdout}{r.stderr}")

# One owner per GPU: over node label sets, never both DaemonSets; GPU nodes get exactly one.
for extra, cases in [
    ([], DEFAULT_OWNERS),
    (["--set-json", 'dra.nodeSelector={"hami.io/dra":null,"pool":"dra","tier":"a"}'],
     [({"gpu": "on", "pool": "dra"}, "device-plugin"),
      ({"gpu": "on", "pool": "dra", "tier": "a"}, "dra"),
      ({"gpu": "on", "tier": "a"}, "device-plugin")]),
]:
    _, docs = render("--set", "dra.enabled=true", *extra)
    for problem in owner_problems(docs, cases, f"{extra} "):
        check(False, problem)

# Webhook conversion (docs/dra.md): off unless dra.convert selects pods; then the scheduler gets the
# flags, exactly get/list/create/delete on resourceclaimtemplates (list: the template GC) and list on
# resourceslices (the GPU sizes for gpumem-percentage), and the webhook says NoneOnDryRun.
def conversion(docs):
    sched = [c for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-scheduler")
             for c in d["spec"]["template"]["spec"]["containers"] if "hami" in " ".join(c.get("command", []))]
    flags = [a for c in sched for a in c.get("command", []) + c.get("args", []) if a.startswith("--dra-")]
    rules = [r for r in one(docs, "ClusterRole", "-scheduler")["rules"]
             if r["resources"] in (["resourceclaimtemplates"], ["resourceslices"])]
    effects = [w["sideEffects"] for d in docs if d["kind"] == "MutatingWebhookConfiguration"
               for w in d["webhooks"]]
    return flags, rules, effects


for extra, want_flags in [
    ([], []),
    (["--set-json", 'dra.convert={"namespaces":["ml","*"],"matchLabels":{"gpu":"dra"}}'],
     ["--dra-namespaces=ml,*", "--dra-pod-selector=gpu=dra",
      "--dra-device-class=hami-core-gpu.project-hami.io", "--dra-driver-name=hami-core-gpu.project-hami.io",
      "--dra-template-gc-grace-s=3600"]),
    (["--set-json", 'dra.convert={"namespaces":["ml"],"templateGcGraceS":0}', "--set", "dra.deviceClassName=gpus"],
     ["--dra-namespaces=ml", "--dra-device-class=gpus", "--dra-driver-name=hami-core-gpu.project-hami.io",
      "--dra-template-gc-grace-s=0"]),
]:
    _, docs = render("--set", "dra.enabled=true", *extra)
    flags, rules, effects = conversion(docs)
    check(flags == want_flags, f"{extra}: scheduler DRA flags {flags}, want {want_flags}")
    want_rules = [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaimtemplates"],
                   "verbs": ["get", "list", "create", "delete"]},
                  {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
                   "verbs": ["list"]}] if want_flags else []
    check(rules == want_rules, f"{extra}: scheduler resourceclaimtemplates rules {rules}")
    check(effects == (["NoneOnDryRun"] if want_flags else ["None"]), f"{extra}: sideEffects {effects}")
    if HAMI and flags:
        help_text = subprocess.run([HAMI, "scheduler", "--help"], capture_output=True, text=True).stdout
        for f in flags:
            check(f.split("=", 1)[0] in help_text, f"hami scheduler has no flag {f.split('=', 1)[0]}")
# Without dra.enabled the conversion values are ignored.
_, docs = render("--set-json", 'dra.convert={"namespaces":["ml"]}')
check(conversion(docs) == ([], [], ["None"]), f"dra.convert without dra.enabled: {conversion(docs)}")

# DRA placement (docs/dra.md, "Placement"): off by default, in DRA mode without dra.placement, and with
# dra.placement but without dra.enabled (ignored); on: the flags, the prioritize verb with the weight, the
# grants (exactly list/watch on what dra_hook.cc's informers hold; with the conversion, its grants too).
for problem in placement_api_problems(ROOT):
    check(False, problem)
CONVERT_GRANTS = {("resourceclaimtemplates", v) for v in ["get", "list", "create", "delete"]} | {("resourceslices", "list")}
rendered = []
for extra, on, kw in [
    ([], False, {}),
    (["--set", "dra.enabled=true"], False, {}),
    (["--set", "dra.placement.enabled=true"], False, {}),
    (["--set", "dra.enabled=true", "--set", "dra.placement.enabled=true"], True, {}),
    (["--set", "dra.enabled=true", "--set", "dra.placement.enabled=true", "--set", "dra.placement.weight=40",
      "--set", "dra.driverName=gpu.example.com"], True, {"weight": 40, "driver": "gpu.example.com"}),
    (["--set", "dra.enabled=true", "--set", "dra.placement.enabled=true",
      "--set-json", 'dra.convert={"namespaces":["ml"]}'], True, {"other_grants": CONVERT_GRANTS}),
]:
    _, docs = render(*extra)
    rendered.append(docs)
    for problem in placement_problems(docs, on, hami=HAMI, **kw):
        check(False, f"{extra}: {problem}")
# Each part of the check can fail: the default rendering read as "on", the "on" one (row 4) as "off".
for docs, on in [(rendered[0], True), (rendered[3], False)]:
    got = placement_problems(docs, on)
    for part in ["placement flags", "prioritizeVerb", "grants"]:
        check(any(part in p for p in got), f"placement_problems(on={on}) misses a wrong {part}: {got}")
# The values schema refuses wrong types (and a weight below 1, which kube-scheduler refuses).
for args, where in [(["--set", "dra.placement.enabled=yes"], "/dra/placement/enabled"),
                    (["--set-string", "dra.placement.enabled=true"], "/dra/placement/enabled"),
                    (["--set", "dra.placement.weight=heavy"], "/dra/placement/weight"),
                    (["--set", "dra.placement.weight=2.5"], "/dra/placement/weight"),
                    (["--set", "dra.placement.weight=0"], "/dra/placement/weight")]:
    rc, err = render("--set", "dra.enabled=true", *args, fail=True)
    check(rc != 0 and where in err, f"{args}: schema did not refuse it at {where}: rc {rc}, {err.strip()[-200:]}")

for args, msg in [(["--set", "dra.driverName=Bad_Name"], "is not a DNS subdomain"),
                  (["--set-json", "dra.nodeSelector=null"], "one owner per GPU")]:
    rc, err = render("--set", "dra.enabled=true", *args, fail=True)
    check(rc != 0 and msg in err, f"{args}: rc {rc}, {err.strip()[-200:]}")

print(f"helm_dra: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
