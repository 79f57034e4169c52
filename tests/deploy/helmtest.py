"""What the chart tests that render deploy/helm/hami share: helm from scripts/helm.sh (exits 77, ctest's
skip, when it is not available), a list of failures with check(), and `helm template` of the chart.
Imported by the tests next to it; run them from the repository root."""
import os
import subprocess
import sys

import yaml

ROOT = os.getcwd()
CHART = os.path.join(ROOT, "deploy/helm/hami")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL", what)


def _helm():
    r = subprocess.run([os.path.join(ROOT, "scripts/helm.sh")], capture_output=True, text=True)
    if r.returncode == 77:
        print(r.stderr.strip() or "helm not available", file=sys.stderr)
        sys.exit(77)
    return r.stdout.strip().splitlines()[-1]


HELM = _helm()


def template(*args):
    """`helm template hami <chart> -n hami-system ARGS`, whatever its exit status."""
    return subprocess.run([HELM, "template", "hami", CHART, "-n", "hami-system", *args], capture_output=True,
                          text=True)


def render(*args):
    """The rendered text and its documents; a failed render is a failure (and no documents)."""
    r = template(*args)
    check(r.returncode == 0, f"helm template {args}: {r.stderr.strip()}")
    return r.stdout, [d for d in yaml.safe_load_all(r.stdout) if d]
