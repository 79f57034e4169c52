"""What a DRA-mode rendering must hold, whichever renders it (the chart's dra.enabled, helm_dra_test.py;
the kustomize component deploy/components/dra, kustomize_dra_test.py): the DeviceClass upstream
HAMi-DRA's claims name, exactly the RBAC `hami dra-plugin` uses (with 1.36's resourceclaims/driver
restricted to the driver), the dra-plugin DaemonSet's service account, flags, mounts and NODE_NAME, and
one owner per GPU (over a table of node labels, the node agent's DaemonSet and the dra-plugin's never
run on the same node), and DRA placement on or off (`hami scheduler --dra-placement`: its flag, the
extender's prioritize verb and weight, and exactly the RBAC its informers need). Each function returns the
problems it finds; an empty list is a pass."""
import os
import re
import subprocess

import yaml

DRIVER = "hami-core-gpu.project-hami.io"
# (node labels, the DaemonSet that runs there) with the default DRA node label hami.io/dra=true.
DEFAULT_OWNERS = [({"gpu": "on"}, "device-plugin"),
                  ({"gpu": "on", "hami.io/dra": "true"}, "dra"),
                  ({"gpu": "on", "hami.io/dra": "false"}, "device-plugin"),
                  ({"hami.io/dra": "true"}, None),
                  ({}, None)]


def one(docs, kind, suffix, problems):
    found = [d for d in docs if d.get("kind") == kind and d["metadata"]["name"].endswith(suffix)]
    if len(found) != 1:
        problems.append(f"one {kind} *{suffix}: found {len(found)}")
    return found[0] if len(found) == 1 else None


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
        return {"In": v in e.get("values", []), "NotIn": v not in e.get("values", []),
                "Exists": v is not None, "DoesNotExist": v is None}[e["operator"]]
    return any(all(expr_ok(e) for e in t.get("matchExpressions", [])) for t in req["nodeSelectorTerms"])


def want_rules(driver):
    return sorted([(("",), ("nodes",), ("get",), ()),
                   (("",), ("pods",), ("get",), ()),
                   (("resource.k8s.io",), ("resourceclaims",), ("get",), ()),
                   (("resource.k8s.io",), ("resourceclaims/status",), ("patch",), ()),
                   # 1.36: status.devices writes need the driver on resourceclaims/driver, node-aware
                   # (only claims allocated to the plugin's own node).
                   (("resource.k8s.io",), ("resourceclaims/driver",), ("associated-node:patch",), (driver,)),
                   (("resource.k8s.io",), ("resourceslices",), ("get", "create", "update"), ())])


def dra_problems(docs, driver=DRIVER, namespace="hami-system", hami=""):
    """DeviceClass, RBAC, binding and the dra-plugin DaemonSet; with `hami` (the built binary), every
    flag the DaemonSet passes exists in `hami dra-plugin --help`."""
    p = []
    dc = one(docs, "DeviceClass", "", p)
    if dc:
        if dc.get("apiVersion") != "resource.k8s.io/v1":
            p.append(f"DeviceClass apiVersion {dc.get('apiVersion')}")
        if dc["metadata"]["name"] != driver:
            p.append(f"DeviceClass name {dc['metadata']['name']}, want {driver}")
        if "namespace" in dc["metadata"]:
            p.append(f"cluster-scoped DeviceClass has a namespace {dc['metadata']['namespace']}")
        want = [{"cel": {"expression": f'device.driver == "{driver}" && '
                                       f'device.attributes["{driver}"].type == "hami-gpu"'}}]
        if dc["spec"]["selectors"] != want:
            p.append(f"DeviceClass selectors {dc['spec']['selectors']}")
    role = one(docs, "ClusterRole", "-dra-plugin", p)
    if role:
        rules = sorted((tuple(x["apiGroups"]), tuple(x["resources"]), tuple(x["verbs"]),
                        tuple(x.get("resourceNames", ()))) for x in role["rules"])
        if rules != want_rules(driver):
            p.append(f"DRA ClusterRole rules are not exactly what the plugin calls: {rules}")
    ds = one(docs, "DaemonSet", "-dra-plugin", p)
    sa = ds["spec"]["template"]["spec"].get("serviceAccountName") if ds else None
    b = one(docs, "ClusterRoleBinding", "-dra-plugin", p)
    if b and role and (b["roleRef"]["name"] != role["metadata"]["name"] or
                       b["subjects"] != [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}]):
        p.append(f"binding {b.get('roleRef')} {b.get('subjects')}, want the DaemonSet's {sa} in {namespace}")
    if not ds:
        return p
    if ds["metadata"].get("namespace") != namespace:
        p.append(f"dra-plugin DaemonSet namespace {ds['metadata'].get('namespace')}")
    ctrs = [c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "dra-plugin"]
    if len(ctrs) != 1:
        return p + ["no dra-plugin container"]
    ctr = ctrs[0]
    if ctr["command"][:2] != ["/usr/local/bin/hami", "dra-plugin"]:
        p.append(f"command {ctr['command'][:2]}")
    args = dict(a[2:].split("=", 1) for a in ctr["command"][2:] if a.startswith("--"))
    for k, v in {"driver-name": driver, "registry-dir": "/var/lib/kubelet/plugins_registry",
                 "plugin-dir": f"/var/lib/kubelet/plugins/{driver}", "cdi-root": "/var/run/cdi",
                 "libvgpu-path": "/usr/local/vgpu/libvgpu.so",
                 "region-root": "/usr/local/vgpu/containers"}.items():
        if args.get(k) != v:
            p.append(f"--{k}={args.get(k)}, want {v}")
    mounts = {m["mountPath"] for m in ctr["volumeMounts"]}
    for m in ["/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins", "/var/run/cdi", "/usr/local/vgpu"]:
        if m not in mounts:
            p.append(f"dra-plugin does not mount {m}")
    if not any(e["name"] == "NODE_NAME" for e in ctr.get("env", [])):
        p.append("no NODE_NAME from the downward API")
    if hami:
        help_text = subprocess.run([hami, "dra-plugin", "--help"], capture_output=True, text=True).stdout
        p += [f"hami dra-plugin has no flag --{k}" for k in args if f"--{k}" not in help_text]
    return p


def owner_problems(docs, cases=DEFAULT_OWNERS, what=""):
    """One owner per GPU: on each node of `cases`, exactly the DaemonSet named (or none)."""
    p = []
    na, dra = one(docs, "DaemonSet", "-node-agent", p), one(docs, "DaemonSet", "-dra-plugin", p)
    if not (na and dra):
        return p
    for labels, want in cases:
        got = [n for n, d in [("device-plugin", na), ("dra", dra)] if runs_on(d, labels)]
        if got != ([want] if want else []):
            p.append(f"{what}node {labels}: runs {got}, want {want}")
    return p


# --dra-placement's use of the API (src/extender/dra_hook.cc): an informer, that is list and watch, on
# each of these resource.k8s.io resources, and no other call (it writes no claim; kube-scheduler does).
PLACEMENT_RESOURCES = ("resourceslices", "resourceclaims", "deviceclasses")
PLACEMENT_VERBS = ("list", "watch")


def placement_api_problems(root="."):
    """PLACEMENT_RESOURCES against the code: the resources whose informers dra_hook.cc makes (their
    names from k8s/client.h), and no API call of its own there besides the informers."""
    hook = open(os.path.join(root, "src/extender/dra_hook.cc")).read()
    client_h = open(os.path.join(root, "src/k8s/client.h")).read()
    names = dict(re.findall(r'Resource\s+(k\w+)\s*\{\s*"/apis/resource\.k8s\.io/v1",\s*"(\w+)"', client_h))
    informed = sorted(names.get(k, k) for k in re.findall(r"\bmake\(k8s::(k\w+)", hook))
    p = []
    if informed != sorted(PLACEMENT_RESOURCES):
        p.append(f"dra_hook.cc keeps informers on {informed}, the RBAC checks grant {sorted(PLACEMENT_RESOURCES)}")
    calls = re.findall(r"\bclient\s*(?:\.|->)\s*(\w+)\s*\(", hook)
    if calls:
        p.append(f"dra_hook.cc calls the API itself ({calls}): grant those verbs and list them here")
    return p


def scheduler_flags(docs):
    """The arguments of the `hami scheduler` container(s) of the *-scheduler Deployment."""
    return [a for d in docs if d.get("kind") == "Deployment" and d["metadata"]["name"].endswith("-scheduler")
            for c in d["spec"]["template"]["spec"]["containers"] if c.get("command", [])[1:2] == ["scheduler"]
            for a in c["command"] + c.get("args", [])]


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key twice in one mapping, as kube-scheduler's strict decoding does (PyYAML
    would keep the last one)."""

    def construct_mapping(self, node, deep=False):
        keys = [self.construct_object(k, deep=deep) for k, _ in node.value]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key(s) {dup}", node.start_mark)
        return super().construct_mapping(node, deep=deep)


def scheduler_config(docs):
    """kube-scheduler's configuration (ConfigMap *-scheduler-config) and "", or None and what is wrong."""
    cms = [d for d in docs if d.get("kind") == "ConfigMap" and d["metadata"]["name"].endswith("-scheduler-config")]
    if len(cms) != 1:
        return None, f"{len(cms)} ConfigMaps *-scheduler-config"
    try:
        return yaml.load(cms[0]["data"]["config.yaml"], Loader=_StrictLoader), ""
    except yaml.YAMLError as e:
        return None, f"kube-scheduler config does not load: {e}"


def resource_grants(docs):
    """(resource, verb) pairs the *-scheduler ClusterRole grants on resource.k8s.io."""
    roles = [d for d in docs if d.get("kind") == "ClusterRole" and d["metadata"]["name"].endswith("-scheduler")]
    return {(r, v) for role in roles for rule in role.get("rules", []) if "resource.k8s.io" in rule["apiGroups"]
            for r in rule["resources"] for v in rule["verbs"]}


def placement_problems(docs, on, weight=21, driver=DRIVER, other_grants=frozenset(), hami=""):
    """DRA placement as rendered. On: `--dra-placement=true` and `--dra-driver-name=<driver>` once each
    on hami scheduler, the (one) extender with prioritizeVerb prioritize and `weight`, and the scheduler's
    resource.k8s.io grants exactly list/watch on PLACEMENT_RESOURCES plus `other_grants` (those of the
    webhook's conversion, when on). Off: none of the flag, the verb and those grants, weight 1. With
    `hami` (the built binary), the flags exist in `hami scheduler --help`."""
    p = []
    flags = scheduler_flags(docs)
    names = [f.split("=", 1)[0] for f in flags if f.startswith("--")]
    p += [f"hami scheduler gets {n} {names.count(n)} times" for n in sorted(set(names)) if names.count(n) > 1]
    want_flags = ["--dra-placement=true", f"--dra-driver-name={driver}"] if on else []
    got_flags = [f for f in flags if f.startswith("--dra-placement")]
    if on:
        got_flags += [f for f in flags if f.startswith("--dra-driver-name")]
    if got_flags != want_flags:
        p.append(f"hami scheduler placement flags {got_flags}, want {want_flags}")
    conf, err = scheduler_config(docs)
    ext = (conf or {}).get("extenders")
    if err or not ext or len(ext) != 1:
        p.append(err or f"kube-scheduler extenders {ext}, want one")
    else:
        got = (ext[0].get("prioritizeVerb"), ext[0].get("weight"))
        want = ("prioritize", weight) if on else (None, 1)
        if got != want:
            p.append(f"extender (prioritizeVerb, weight) {got}, want {want}")
    placement = {(r, v) for r in PLACEMENT_RESOURCES for v in PLACEMENT_VERBS} if on else set()
    grants = resource_grants(docs)
    if grants != placement | set(other_grants):
        p.append(f"scheduler ClusterRole resource.k8s.io grants {sorted(grants)}, "
                 f"want {sorted(placement | set(other_grants))}")
    if hami and on:
        help_text = subprocess.run([hami, "scheduler", "--help"], capture_output=True, text=True).stdout
        p += [f"hami scheduler has no flag {f.split('=', 1)[0]}" for f in want_flags
              if f.split("=", 1)[0] not in help_text]
    return p
