#!/usr/bin/python3
"""`hami dra-plugin` held to the chart's RBAC (issue 29: an RBAC-enforcing end-to-end run). Renders the
chart with dra.enabled, takes every ClusterRole, ClusterRoleBinding, Role and RoleBinding and the dra-plugin
DaemonSet's service account, and runs DraDaemonTest.ChartRbacSuffices (argv[1]: the dra_daemon_test
binary) with them: the fake API server then authenticates the plugin as that service account, bound to
its node as the kubelet's projected tokens are, and refuses (403) whatever the rendered RBAC does not
grant, the 1.36 per-driver check on claim status included. Helm from scripts/helm.sh (77 = skipped).
Run from the repository root."""
import json
import os
import subprocess
import sys
import tempfile

from helmtest import check, failures, render

BINARY = sys.argv[1]

_, docs = render("--set", "dra.enabled=true")
rbac = [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")]
plugins = [d for d in docs if d["kind"] == "DaemonSet" and "dra" in d["metadata"]["name"]]
check(len(plugins) == 1, f"one dra-plugin DaemonSet, found {[d['metadata']['name'] for d in plugins]}")
check(len(rbac) > 0, "no RBAC objects rendered")
if failures:
    sys.exit(1)
pod = plugins[0]["spec"]["template"]["spec"]
sa = pod.get("serviceAccountName", "default")
ns = plugins[0]["metadata"].get("namespace", "hami-system")
user = {"username": f"system:serviceaccount:{ns}:{sa}",
        "groups": ["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"]}
with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    json.dump({"rbac": rbac, "user": user}, f)
    path = f.name
try:
    r = subprocess.run([BINARY, "--gtest_filter=DraDaemonTest.ChartRbacSuffices"],
                       env={**os.environ, "HAMI_DRA_RBAC_FILE": path}, capture_output=True, text=True)
    print(r.stdout[-6000:], r.stderr[-3000:])
    check(r.returncode == 0, "DraDaemonTest.ChartRbacSuffices failed under the rendered RBAC")
    check("[  SKIPPED ]" not in r.stdout and "1 test." in r.stdout, "the test did not run")
finally:
    os.unlink(path)
sys.exit(1 if failures else 0)
