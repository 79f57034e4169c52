"""What a DRA-mode rendering must hold, whichever renders it (the chart's dra.enabled, helm_dra_test.py;
the kustomize component deploy/components/dra, kustomize_dra_test.py): the DeviceClass upstream
HAMi-DRA's claims name, exactly the RBAC `hami dra-plugin` uses (with 1.36's resourceclaims/driver
restricted to the driver), the dra-plugin DaemonSet's service account, flags, mounts and NODE_NAME, and
one owner per GPU (over a table of node labels, the node agent's DaemonSet and the dra-plugin's never
run on the same node). Each function returns the problems it finds; an empty list is a pass."""
import subprocess

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
