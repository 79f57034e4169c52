#!/usr/bin/python3
"""Checks rendered Kubernetes manifests (multi-document YAML on stdin or in FILE) for dangling references.

usage: check-refs.py [--namespace-exists NS]... [--only-namespace NS] [--allow-cluster-role NAME]... [FILE]

Every namespaced object must carry a namespace, and the namespace must be rendered too or named by
--namespace-exists (e.g. the Helm release namespace, created by `helm install --create-namespace`).
Followed references: a pod template's serviceAccountName, configMap/secret volumes, projected
sources and env/envFrom refs; RoleBinding/ClusterRoleBinding roleRef and ServiceAccount subjects;
webhook clientConfig.service (Service, port, and a workload its selector matches); Service selectors
and target ports; PodDisruptionBudget selectors; cert-manager issuerRef, Certificate secretName and
the cert-manager.io/inject-ca-from annotation. A Secret counts as present when rendered or when a
rendered cert-manager Certificate writes it. ClusterRoles named system:* are Kubernetes' own.
With --only-namespace every namespaced object (and every ServiceAccount subject) must be in NS.
Exit 0 when clean, 1 with one line per problem, 2 for unreadable input.
"""
import argparse
import sys

import yaml

NAMESPACED = {
    "ConfigMap", "Secret", "Service", "ServiceAccount", "Deployment", "DaemonSet", "StatefulSet", "Job",
    "CronJob", "Pod", "Role", "RoleBinding", "PodDisruptionBudget", "Certificate", "Issuer", "Lease",
    "ServiceMonitor", "NetworkPolicy", "ResourceQuota",
}
WORKLOADS = {"Deployment", "DaemonSet", "StatefulSet", "Job", "CronJob", "Pod"}


def pod_spec(obj):
    kind, spec = obj["kind"], obj.get("spec") or {}
    if kind == "Pod":
        return spec, obj["metadata"].get("labels") or {}
    if kind == "CronJob":
        tmpl = ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}
    else:
        tmpl = spec.get("template") or {}
    return tmpl.get("spec") or {}, (tmpl.get("metadata") or {}).get("labels") or {}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--namespace-exists", action="append", default=[])
    ap.add_argument("--allow-cluster-role", action="append", default=[])
    ap.add_argument("--only-namespace")
    ap.add_argument("file", nargs="?")
    a = ap.parse_args()
    try:
        text = open(a.file).read() if a.file else sys.stdin.read()
        docs = [d for d in yaml.safe_load_all(text) if d]
    except (OSError, yaml.YAMLError) as e:
        print(f"check-refs: cannot read manifests: {e}", file=sys.stderr)
        return 2
    problems = []
    objs = {}  # (kind, ns, name) -> obj
    for d in docs:
        if not isinstance(d, dict) or "kind" not in d or not isinstance(d.get("metadata"), dict):
            problems.append(f"not a Kubernetes object: {str(d)[:80]}")
            continue
        if d["kind"].endswith("List"):
            problems.append(f"unexpected {d['kind']}")
            continue
        md = d["metadata"]
        ns = md.get("namespace") or ""
        if d["kind"] in NAMESPACED and not ns:
            problems.append(f"{d['kind']}/{md.get('name')}: namespaced object without a namespace")
        key = (d["kind"], ns, md.get("name"))
        if key in objs:
            problems.append(f"{d['kind']}/{md.get('name')} in '{ns}': rendered twice")
        objs[key] = d

    def has(kind, ns, name):
        return (kind, ns, name) in objs

    namespaces = {n for (k, _, n) in objs if k == "Namespace"} | set(a.namespace_exists)
    cert_secrets = {(ns, (o.get("spec") or {}).get("secretName")) for (k, ns, _), o in objs.items() if k == "Certificate"}

    def secret_ok(ns, name):
        return has("Secret", ns, name) or (ns, name) in cert_secrets

    for (kind, ns, name), o in objs.items():
        where = f"{kind}/{name}" + (f" in {ns}" if ns else "")
        if a.only_namespace and ns and ns != a.only_namespace:
            problems.append(f"{where}: not in namespace {a.only_namespace}")
        if a.only_namespace and kind in ("RoleBinding", "ClusterRoleBinding"):
            for sub in o.get("subjects") or []:
                if sub.get("kind") == "ServiceAccount" and sub.get("namespace", ns) != a.only_namespace:
                    problems.append(f"{where}: subject {sub['name']} is in {sub.get('namespace')}, not {a.only_namespace}")
        if ns and ns not in namespaces:
            problems.append(f"{where}: namespace {ns} is neither rendered nor declared present")
        if kind in WORKLOADS:
            spec, _ = pod_spec(o)
            sa = spec.get("serviceAccountName")
            if sa and not has("ServiceAccount", ns, sa):
                problems.append(f"{where}: serviceAccountName {sa} has no ServiceAccount in {ns}")
            for v in spec.get("volumes") or []:
                if "configMap" in v and not v["configMap"].get("optional") and not has("ConfigMap", ns, v["configMap"]["name"]):
                    problems.append(f"{where}: volume {v['name']} names missing ConfigMap {v['configMap']['name']}")
                if "secret" in v and not v["secret"].get("optional") and not secret_ok(ns, v["secret"]["secretName"]):
                    problems.append(f"{where}: volume {v['name']} names missing Secret {v['secret']['secretName']}")
                for src in (v.get("projected") or {}).get("sources") or []:
                    if "configMap" in src and not has("ConfigMap", ns, src["configMap"]["name"]):
                        problems.append(f"{where}: projected volume names missing ConfigMap {src['configMap']['name']}")
                    if "secret" in src and not secret_ok(ns, src["secret"]["name"]):
                        problems.append(f"{where}: projected volume names missing Secret {src['secret']['name']}")
            for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
                mounts = {m["name"] for m in c.get("volumeMounts") or []}
                vols = {v["name"] for v in spec.get("volumes") or []}
                for m in sorted(mounts - vols):
                    problems.append(f"{where}: container {c['name']} mounts undefined volume {m}")
                for e in c.get("env") or []:
                    vf = e.get("valueFrom") or {}
                    if "configMapKeyRef" in vf and not vf["configMapKeyRef"].get("optional") and not has("ConfigMap", ns, vf["configMapKeyRef"]["name"]):
                        problems.append(f"{where}: env {e['name']} names missing ConfigMap {vf['configMapKeyRef']['name']}")
                    if "secretKeyRef" in vf and not vf["secretKeyRef"].get("optional") and not secret_ok(ns, vf["secretKeyRef"]["name"]):
                        problems.append(f"{where}: env {e['name']} names missing Secret {vf['secretKeyRef']['name']}")
        if kind in ("RoleBinding", "ClusterRoleBinding"):
            ref = o.get("roleRef") or {}
            rk, rn = ref.get("kind"), ref.get("name")
            if rk == "ClusterRole":
                if not has("ClusterRole", "", rn) and not rn.startswith("system:") and rn not in a.allow_cluster_role:
                    problems.append(f"{where}: roleRef ClusterRole {rn} is not rendered")
            elif not has("Role", ns, rn):
                problems.append(f"{where}: roleRef Role {rn} is not rendered in {ns}")
            for s in o.get("subjects") or []:
                if s.get("kind") == "ServiceAccount":
                    sns = s.get("namespace") or ns
                    if not has("ServiceAccount", sns, s["name"]):
                        problems.append(f"{where}: subject ServiceAccount {sns}/{s['name']} is not rendered")
        if kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            inject = (o["metadata"].get("annotations") or {}).get("cert-manager.io/inject-ca-from")
            if inject:
                cns, _, cname = inject.partition("/")
                if not has("Certificate", cns, cname):
                    problems.append(f"{where}: inject-ca-from {inject} names no rendered Certificate")
            for w in o.get("webhooks") or []:
                cc = w.get("clientConfig") or {}
                svc = cc.get("service")
                if not svc:
                    continue
                if not inject and not cc.get("caBundle"):
                    problems.append(f"{where}: webhook {w['name']} has neither caBundle nor inject-ca-from")
                s = objs.get(("Service", svc.get("namespace"), svc.get("name")))
                if not s:
                    problems.append(f"{where}: webhook {w['name']} calls missing Service {svc.get('namespace')}/{svc.get('name')}")
                    continue
                ports = [p.get("port") for p in (s.get("spec") or {}).get("ports") or []]
                if svc.get("port", 443) not in ports:
                    problems.append(f"{where}: webhook {w['name']} port {svc.get('port', 443)} is not a port of Service {svc['name']} {ports}")
        if kind in ("Service", "PodDisruptionBudget"):
            spec = o.get("spec") or {}
            sel = spec.get("selector") if kind == "Service" else (spec.get("selector") or {}).get("matchLabels")
            if not sel:
                continue
            matched = []
            for (wk, wns, _), w in objs.items():
                if wk in WORKLOADS and wns == ns:
                    wspec, labels = pod_spec(w)
                    if all(labels.get(k) == v for k, v in sel.items()):
                        matched.append(wspec)
            if not matched:
                problems.append(f"{where}: selector {sel} matches no rendered workload in {ns}")
            if kind == "Service" and matched:
                cports = {p.get("name"): p.get("containerPort") for ws in matched for c in ws.get("containers") or [] for p in c.get("ports") or []}
                for p in spec.get("ports") or []:
                    t = p.get("targetPort", p.get("port"))
                    if (isinstance(t, str) and t not in cports) or (isinstance(t, int) and t not in cports.values()):
                        problems.append(f"{where}: port {p.get('name')} targets {t}, which no selected container declares")
        if kind in ("Role", "ClusterRole"):
            for rule in o.get("rules") or []:
                for field in ("apiGroups", "resources", "verbs", "resourceNames"):
                    if "*" in (rule.get(field) or []):
                        problems.append(f"{where}: wildcard in {field} (least privilege: name each one)")
                if kind == "ClusterRole" and "secrets" in (rule.get("resources") or []):
                    problems.append(f"{where}: cluster-wide access to secrets")
        if kind == "ServiceMonitor":
            spec = o.get("spec") or {}
            sel = (spec.get("selector") or {}).get("matchLabels") or {}
            nss = (spec.get("namespaceSelector") or {}).get("matchNames") or [ns]
            svcs = [s for (k, sns, _), s in objs.items() if k == "Service" and sns in nss
                    and all(((s["metadata"].get("labels") or {}).get(lk)) == lv for lk, lv in sel.items())]
            if not svcs:
                problems.append(f"{where}: selector {sel} matches no rendered Service in {nss}")
            for ep in spec.get("endpoints") or []:
                if ep.get("port") and not any(ep["port"] in [p.get("name") for p in (s.get("spec") or {}).get("ports") or []] for s in svcs):
                    problems.append(f"{where}: endpoint port {ep['port']} is not a port of the selected Services")
        if kind == "Certificate":
            ir = (o.get("spec") or {}).get("issuerRef") or {}
            if ir.get("kind", "Issuer") == "Issuer" and not has("Issuer", ns, ir.get("name")):
                problems.append(f"{where}: issuerRef Issuer {ir.get('name')} is not rendered in {ns}")
            if ir.get("kind") == "ClusterIssuer" and not has("ClusterIssuer", "", ir.get("name")):
                problems.append(f"{where}: issuerRef ClusterIssuer {ir.get('name')} is not rendered")
    for p in problems:
        print(p)
    print(f"check-refs: {len(objs)} objects, {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
