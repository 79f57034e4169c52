#!/usr/bin/python3
"""Helm chart, consolidation (docs/consolidation.md "Installing"): off by default (no object rendered);
with consolidate.enabled the chart renders `hami consolidate` as a Deployment whose every flag the binary
accepts (argv[1]: the built hami binary), a dry run unless consolidate.dryRun is false, and RBAC with
exactly the verbs the controller uses (the Eviction API, PDBs, nodes, Events, its Lease and history
ConfigMap). Helm from scripts/helm.sh (77 = skipped). Run from the repository root."""
import subprocess
import sys

from helmtest import check, failures, render as render_chart, template

HAMI = sys.argv[1] if len(sys.argv) > 1 else ""


def render(*args):
    return render_chart(*args)[1]


def mine(docs):
    return [d for d in docs if d["metadata"]["name"] == "hami-consolidate"]


check(mine(render()) == [], "the default render has no hami-consolidate object")

docs = mine(render("--set", "consolidate.enabled=true", "--set", "consolidate.usageNamespaces={serving,chat}"))
kinds = sorted(d["kind"] for d in docs)
check(kinds == ["ClusterRole", "ClusterRoleBinding", "Deployment", "Role", "RoleBinding", "ServiceAccount"],
      f"objects: {kinds}")
by_kind = {d["kind"]: d for d in docs}
rules = {(g, res): sorted(r["verbs"]) for r in by_kind["ClusterRole"]["rules"] for g in r["apiGroups"]
         for res in r["resources"]}
want = {("", "nodes"): ["list", "patch"], ("", "pods"): ["list"], ("", "namespaces"): ["list"],
        ("", "pods/eviction"): ["create"], ("policy", "poddisruptionbudgets"): ["list"],
        ("", "events"): ["create"]}
check(rules == want, f"ClusterRole rules: {rules}")
lease = {(g, res): sorted(r["verbs"]) for r in by_kind["Role"]["rules"] for g in r["apiGroups"]
         for res in r["resources"]}
check(lease == {("coordination.k8s.io", "leases"): ["create", "get", "update"],
               ("", "configmaps"): ["create", "get", "update"]}, f"Role rules: {lease}")
cmd = by_kind["Deployment"]["spec"]["template"]["spec"]["containers"][0]["command"]
check(cmd[:2] == ["/usr/local/bin/hami", "consolidate"], f"command: {cmd}")
check("--dry-run" in cmd, "a dry run by default")
check("--usage-namespaces=serving,chat" in cmd, f"usage namespaces: {cmd}")
check("--leader-elect-resource-namespace=hami-system" in cmd, f"lease namespace: {cmd}")
live = mine(render("--set", "consolidate.enabled=true", "--set", "consolidate.dryRun=false"))
live_cmd = [d for d in live if d["kind"] == "Deployment"][0]["spec"]["template"]["spec"]["containers"][0]["command"]
check("--dry-run" not in live_cmd, "dryRun=false moves pods")
# Each value reaches the command line (defaults: the binary's own 10 minutes and history ConfigMap).
FLAG_CASES = [  # (--set values, flags the container must get)
    ([], ["--reserve-min=10", "--history-configmap=hami-consolidate-history"]),
    (["reserveMin=0", "historyConfigMap=my-history"], ["--reserve-min=0", "--history-configmap=my-history"]),
    (["reserveMin=60", "historyConfigMap="], ["--reserve-min=60", "--history-configmap="]),
]
for sets, want in FLAG_CASES:
    args = [a for v in sets for a in ("--set", "consolidate." + v)]
    got = [d for d in mine(render("--set", "consolidate.enabled=true", *args)) if d["kind"] == "Deployment"]
    got_cmd = got[0]["spec"]["template"]["spec"]["containers"][0]["command"] if got else []
    for flag in want:
        check(flag in got_cmd, f"{sets}: command lacks {flag}: {got_cmd}")
# The schema keeps the values within what the flags accept (--reserve-min in 0..60).
for bad in ["reserveMin=-1", "reserveMin=61", "reserveMin=ten", "historyConfigMap=My_History"]:
    r = template("--set", "consolidate.enabled=true", "--set", "consolidate." + bad)
    check(r.returncode != 0 and bad.split("=")[0] in r.stderr, f"schema: consolidate.{bad} accepted")
if HAMI:
    help_text = subprocess.run([HAMI, "consolidate", "--help"], capture_output=True, text=True).stdout
    for arg in cmd[2:]:
        flag = arg.split("=")[0]
        check(flag in help_text, f"hami consolidate has no flag {flag}")
if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("helm consolidate: ok")
