#!/usr/bin/python3
"""Helm chart, DRA mode (docs/dra.md "Installing"): with dra.enabled the chart renders the DeviceClass
upstream HAMi-DRA's claims name, least-privilege RBAC (exactly the verbs `hami dra-plugin` uses), and the
dra-plugin DaemonSet whose every flag `hami dra-plugin` accepts (argv[1]: the built hami binary); the
device plugin's DaemonSet keeps off the DRA nodes, so no node runs both (one owner per GPU), over a table
of node labels; renders with a bad driver name or no DRA node label fail; the default render has no DRA
object. Helm from scripts/helm.sh (77 = skipped). Run from the repository root."""
import os
import subprocess
import sys

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


def runs_on(ds, labels):
    """Whether a DaemonSet's pod may run on a node with these labels: nodeSelector, and the required
    nodeAffinity terms (ORed; the expressions of a term ANDed; In / NotIn / Exists / DoesNotExist)."""
    spec = ds["spec"]["template"]["spec"]
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    req = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
           .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if not req:
        return True

    def expr_ok(e):
        v = labels.get(e["key"])
        op = e["operator"]
        return {"In": v in e.get("values", []), "NotIn": v not in e.get("values", []),
                "Exists": v is not None, "DoesNotExist": v is None}[op]
    return any(all(expr_ok(e) for e in t.get("matchExpressions", [])) for t in req["nodeSelectorTerms"])


# Default: no DRA object, the node agent unchanged.
_, docs = render()
check(not [d for d in docs if "dra" in d["metadata"]["name"] or d["kind"] == "DeviceClass"],
      "default render has DRA objects")
check("affinity" not in one(docs, "DaemonSet", "-node-agent")["spec"]["template"]["spec"],
      "default node agent has an affinity")

text, docs = render("--set", "dra.enabled=true")
dc = one(docs, "DeviceClass")
check(dc.get("apiVersion") == "resource.k8s.io/v1", f"DeviceClass apiVersion {dc.get('apiVersion')}")
check(dc["metadata"]["name"] == "hami-core-gpu.project-hami.io", "DeviceClass name is upstream's")
check(dc["spec"]["selectors"] == [{"cel": {"expression":
      'device.driver == "hami-core-gpu.project-hami.io" && '
      'device.attributes["hami-core-gpu.project-hami.io"].type == "hami-gpu"'}}],
      f"DeviceClass selectors {dc['spec']['selectors']}")
role = one(docs, "ClusterRole", "-dra-plugin")
rules = sorted((tuple(x["apiGroups"]), tuple(x["resources"]), tuple(x["verbs"])) for x in role["rules"])
check(rules == sorted([(("",), ("nodes",), ("get",)),
                       (("",), ("pods",), ("get",)),
                       (("resource.k8s.io",), ("resourceclaims",), ("get",)),
                       (("resource.k8s.io",), ("resourceslices",), ("get", "create", "update"))]),
      f"DRA ClusterRole rules are exactly what the plugin calls: {rules}")
b = one(docs, "ClusterRoleBinding", "-dra-plugin")
check(b["roleRef"]["name"] == role["metadata"]["name"] and
      b["subjects"] == [{"kind": "ServiceAccount", "name": "hami-dra-plugin", "namespace": "hami-system"}],
      f"binding {b.get('roleRef')} {b.get('subjects')}")
ds = one(docs, "DaemonSet", "-dra-plugin")
pod = ds["spec"]["template"]["spec"]
check(pod["serviceAccountName"] == "hami-dra-plugin", "DaemonSet service account")
ctr = [c for c in pod["containers"] if c["name"] == "dra-plugin"][0]
check(ctr["command"][:2] == ["/usr/local/bin/hami", "dra-plugin"], f"command {ctr['command'][:2]}")
args = dict(a[2:].split("=", 1) for a in ctr["command"][2:] if a.startswith("--"))
want = {"driver-name": "hami-core-gpu.project-hami.io", "registry-dir": "/var/lib/kubelet/plugins_registry",
        "plugin-dir": "/var/lib/kubelet/plugins/hami-core-gpu.project-hami.io", "cdi-root": "/var/run/cdi",
        "libvgpu-path": "/usr/local/vgpu/libvgpu.so", "region-root": "/usr/local/vgpu/containers"}
for k, v in want.items():
    check(args.get(k) == v, f"--{k}={args.get(k)}, want {v}")
mounts = {m["mountPath"] for m in ctr["volumeMounts"]}
for p in ["/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins", "/var/run/cdi", "/usr/local/vgpu"]:
    check(p in mounts, f"dra-plugin mounts {p}")
check(any(e["name"] == "NODE_NAME" for e in ctr["env"]), "NODE_NAME from the downward API")
if HAMI:
    help_text = subprocess.run([HAMI, "dra-plugin", "--help"], capture_output=True, text=True).stdout
    for k in args:
        check(f"--{k}" in help_text, f"hami dra-plugin has no flag --{k}")
r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "deploy/check-refs.py"), "--namespace-exists",
                    "hami-system"], input=text, capture_output=True, text=True)
check(r.returncode == 0, f"dangling references: {r.stdout}{r.stderr}")

# One owner per GPU: over node label sets, never both DaemonSets; GPU nodes get exactly one.
for extra, cases in [
    ([], [({"gpu": "on"}, "device-plugin"),
          ({"gpu": "on", "hami.io/dra": "true"}, "dra"),
          ({"gpu": "on", "hami.io/dra": "false"}, "device-plugin"),
          ({"hami.io/dra": "true"}, None),
          ({}, None)]),
    (["--set-json", 'dra.nodeSelector={"hami.io/dra":null,"pool":"dra","tier":"a"}'],
     [({"gpu": "on", "pool": "dra"}, "device-plugin"),
      ({"gpu": "on", "pool": "dra", "tier": "a"}, "dra"),
      ({"gpu": "on", "tier": "a"}, "device-plugin")]),
]:
    _, docs = render("--set", "dra.enabled=true", *extra)
    na, dra = one(docs, "DaemonSet", "-node-agent"), one(docs, "DaemonSet", "-dra-plugin")
    for labels, want in cases:
        got = [n for n, d in [("device-plugin", na), ("dra", dra)] if runs_on(d, labels)]
        check(got == ([want] if want else []), f"{extra} node {labels}: runs {got}, want {want}")

for args, msg in [(["--set", "dra.driverName=Bad_Name"], "is not a DNS subdomain"),
                  (["--set-json", "dra.nodeSelector=null"], "one owner per GPU")]:
    rc, err = render("--set", "dra.enabled=true", *args, fail=True)
    check(rc != 0 and msg in err, f"{args}: rc {rc}, {err.strip()[-200:]}")

print(f"helm_dra: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
