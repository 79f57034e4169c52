#!/usr/bin/python3
"""Helm chart test: `helm lint --strict` and `helm template` of deploy/helm/hami with its defaults, with an
upstream-HAMi-style values file, and over the option matrix (cert-manager on/off x leader election on/off x
namespaceOverride), every rendering checked by deploy/check-refs.py for dangling references and by the
assertions below for what the components need. Helm comes from scripts/helm.sh (exit 77 = skipped when
it can be neither found nor fetched). Run from the repository root."""
import itertools
import os
import re
import subprocess
import sys
import tempfile

import yaml

ROOT = os.getcwd()
CHART = os.path.join(ROOT, "deploy/helm/hami")
UPSTREAM = os.path.join(ROOT, "tests/deploy/testdata/upstream-values.yaml")  # upstream's v2.10 layout
UPSTREAM_V211 = os.path.join(ROOT, "tests/deploy/testdata/upstream-v2.11-values.yaml")  # its v2.11 layout
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL", what)


def helm_path():
    r = subprocess.run([os.path.join(ROOT, "scripts/helm.sh")], capture_output=True, text=True)
    if r.returncode == 77:
        print(r.stderr.strip() or "helm not available", file=sys.stderr)
        sys.exit(77)
    if r.returncode != 0:
        print(r.stderr, file=sys.stderr)
        sys.exit(1)
    return r.stdout.strip().splitlines()[-1]


HELM = helm_path()


def helm(*args):
    r = subprocess.run([HELM, *args], capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f"helm {' '.join(args)}: {r.stderr.strip()}")
        print("FAIL helm", *args, "\n", r.stderr)
    return r.stdout


def render(name, ns, *args):
    text = helm("template", "hami", CHART, "-n", ns, *args)
    docs = [d for d in yaml.safe_load_all(text) if d]
    return text, docs


def refs(name, text, *args):
    r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "deploy/check-refs.py"), *args], input=text,
                       capture_output=True, text=True)
    check(r.returncode == 0, f"{name}: dangling references:\n{r.stdout}{r.stderr}")


def find(docs, kind, name_suffix=""):
    return [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(name_suffix)]


def container(docs, kind, cname):
    for d in docs:
        if d["kind"] == kind:
            spec = d["spec"]["template"]["spec"]
            for c in spec.get("containers", []) + spec.get("initContainers", []):
                if c["name"] == cname:
                    return c
    return None


def scheduler_config(docs):
    cm = find(docs, "ConfigMap", "-scheduler-config")
    return yaml.safe_load(cm[0]["data"]["config.yaml"]) if cm else {}


def fit_ignored(sc):
    """NodeResourcesFit's ignoredResources in the first profile of a KubeSchedulerConfiguration."""
    for pc in sc["profiles"][0].get("pluginConfig", []):
        if pc["name"] == "NodeResourcesFit":
            return pc["args"].get("ignoredResources", [])
    return []


# 1. lint
for extra in ([], ["-f", UPSTREAM], ["-f", UPSTREAM_V211]):
    helm("lint", "--strict", CHART, *extra)

# 2. the option matrix
for cm, le, nso in itertools.product([False, True], [True, False], ["", "gpu-system"]):
    name = f"certManager={cm} leaderElect={le} namespaceOverride={nso!r}"
    ns = nso or "hami-system"
    text, docs = render(name, "hami-system", "--set", f"scheduler.certManager.enabled={cm}",
                        "--set", f"scheduler.leaderElect={le}", "--set", "scheduler.replicas=3",
                        "--set", f"namespaceOverride={nso}", "--kube-version", "1.31.4")
    refs(name, text, "--namespace-exists", ns, "--only-namespace", ns)
    dep = find(docs, "Deployment", "-scheduler")
    check(len(dep) == 1, f"{name}: one scheduler Deployment")
    if not dep:
        continue
    check(dep[0]["spec"]["replicas"] == (3 if le else 1), f"{name}: replicas {dep[0]['spec']['replicas']}")
    check(bool(find(docs, "PodDisruptionBudget")) == le, f"{name}: PodDisruptionBudget only with leader election")
    ext = container(docs, "Deployment", "extender")
    args = ext["command"]
    for want in ["--extender-bind=127.0.0.1:9444", "--http-bind=0.0.0.0:8443", "--device-config-file=/device-config/device-config.yaml",
                 f"--scheduler-service-account={ns}:hami-scheduler", f"--leader-elect={str(le).lower()}"]:
        check(want in args, f"{name}: extender lacks {want}: {args}")
    ks = container(docs, "Deployment", "kube-scheduler")
    check(ks["image"] == "registry.k8s.io/kube-scheduler:v1.31.4", f"{name}: kube-scheduler image {ks['image']}")
    sc = scheduler_config(docs)
    check(sc["leaderElection"]["leaderElect"] == le, f"{name}: scheduler config leaderElect")
    check(sc.get("percentageOfNodesToScore") == 100, f"{name}: percentageOfNodesToScore")
    e = sc["extenders"][0]
    check(e["urlPrefix"] == "http://127.0.0.1:9444" and e["enableHTTPS"] is False, f"{name}: extender URL {e}")
    check((e.get("filterVerb"), e.get("bindVerb"), e.get("preemptVerb")) == ("filter", "bind", "preempt"),
          f"{name}: extender verbs {e}")
    roles = find(docs, "ClusterRole", "-scheduler")
    check(any("policy" in r.get("apiGroups", []) and "poddisruptionbudgets" in r.get("resources", [])
              and set(r.get("verbs", [])) >= {"list", "watch"} for c in roles for r in c.get("rules", [])),
          f"{name}: the scheduler may list and watch PodDisruptionBudgets")
    ignored = fit_ignored(sc)
    check("managedResources" not in e and len(ignored) >= 46,
          f"{name}: no managedResources (every pod reaches the extender), NodeResourcesFit ignores {len(ignored)}")
    wh = find(docs, "MutatingWebhookConfiguration")
    check(len(wh) == 1, f"{name}: one webhook configuration")
    w = wh[0]["webhooks"][0]
    check(w["rules"][0]["operations"] == ["CREATE", "UPDATE"], f"{name}: webhook operations")
    if cm:
        check(find(docs, "Certificate") and not find(docs, "Secret"), f"{name}: cert-manager Certificate, no Secret")
        check(wh[0]["metadata"]["annotations"].get("cert-manager.io/inject-ca-from") == f"{ns}/hami-scheduler-tls",
              f"{name}: inject-ca-from")
    else:
        sec = find(docs, "Secret", "-scheduler-tls")
        check(sec and w["clientConfig"].get("caBundle") == sec[0]["data"]["ca.crt"], f"{name}: generated Secret and caBundle")
    dp = container(docs, "DaemonSet", "device-plugin")
    check("--device-config-file=/device-config/device-config.yaml" in dp["command"], f"{name}: device plugin device config")
    init = container(docs, "DaemonSet", "install-libvgpu")
    check(init is not None and "libvgpu.so" in " ".join(init["command"]), f"{name}: libvgpu installed by an init container")

# 3. webhook off: plain HTTP, no TLS secret needed
text, docs = render("no webhook", "hami-system", "--set", "scheduler.admissionWebhook.enabled=false")
refs("no webhook", text, "--namespace-exists", "hami-system")
check(not find(docs, "MutatingWebhookConfiguration") and not find(docs, "Secret"), "no webhook: no webhook objects")
check("--cert-file=/tls/tls.crt" not in container(docs, "Deployment", "extender")["command"], "no webhook: no TLS flags")

# 3a. NUMA refit: the device plugin calls the scheduler's Service over HTTPS with the webhook CA, the
# scheduler may review tokens, and it knows the node agents' account
for extra, ca_path, secret in (([], "/numa-refit-ca/ca.crt", "hami-scheduler-tls"),
                               (["--set", "devicePlugin.numaRefit.caSecret=my-ca"], "/numa-refit-ca/ca.crt", "my-ca"),
                               (["--set", "devicePlugin.numaRefit.caFile=/etc/ca.pem",
                                 "--set", "devicePlugin.numaRefit.schedulerEndpoint=https://sched.example:8443"], "/etc/ca.pem", None)):
    name = f"numaRefit {extra}"
    text, docs = render(name, "hami-system", "--set", "devicePlugin.numaRefit.enabled=true", *extra)
    if secret != "my-ca":  # a Secret of the user's, not rendered
        refs(name, text, "--namespace-exists", "hami-system")
    dp = container(docs, "DaemonSet", "device-plugin")
    endpoint = "https://sched.example:8443" if secret is None else "https://hami-scheduler.hami-system.svc:443"
    for want in [f"--numa-refit-endpoint={endpoint}", f"--numa-refit-ca-file={ca_path}"]:
        check(want in dp["command"], f"{name}: device plugin lacks {want}: {dp['command']}")
    ds = find(docs, "DaemonSet")[0]["spec"]["template"]["spec"]
    vols = {v["name"]: v for v in ds["volumes"]}
    if secret:
        check(vols.get("numa-refit-ca", {}).get("secret", {}).get("secretName") == secret, f"{name}: CA volume {vols.get('numa-refit-ca')}")
        check({"name": "numa-refit-ca", "mountPath": "/numa-refit-ca", "readOnly": True} in dp["volumeMounts"], f"{name}: CA mount")
    else:
        check("numa-refit-ca" not in vols, f"{name}: no CA volume with caFile")
    role = find(docs, "ClusterRole", "-scheduler")[0]
    check({"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]} in role["rules"],
          f"{name}: the scheduler may create tokenreviews")
    args = container(docs, "Deployment", "extender")["command"]
    check("--node-agent-service-account=hami-system:hami-node-agent" in args, f"{name}: node agent account {args}")
text, docs = render("numaRefit off", "hami-system")
check(not any("numa-refit" in a for a in container(docs, "DaemonSet", "device-plugin")["command"]), "numaRefit off: no refit flags")
check(not any("tokenreviews" in r["resources"] for r in find(docs, "ClusterRole", "-scheduler")[0]["rules"]),
      "numaRefit off: no tokenreviews permission")
r = subprocess.run([HELM, "template", "hami", CHART, "--set", "devicePlugin.numaRefit.enabled=true",
                    "--set", "scheduler.admissionWebhook.enabled=false"], capture_output=True, text=True)
check(r.returncode != 0 and "numaRefit" in r.stderr, "numaRefit without the HTTPS listener is refused")

# 3b. ServiceMonitors select the metrics Services (check-refs follows selector and port)
text, docs = render("serviceMonitor", "hami-system", "--set", "serviceMonitor.enabled=true")
refs("serviceMonitor", text, "--namespace-exists", "hami-system")
check(len(find(docs, "ServiceMonitor")) == 2, "serviceMonitor: two ServiceMonitors")

# 3c. a vendor section from the values: Enflame vGCU with its split factor
text, docs = render("enflamevgcu", "hami-system", "--set", "devices.enflamevgcu.enabled=true",
                    "--set", "devices.enflamevgcu.factor=2")
dc = yaml.safe_load(find(docs, "ConfigMap", "-device-config")[0]["data"]["device-config.yaml"])
check(dc.get("enflamevgcu") == {"resourceNameVGCU": "enflame.com/vgcu",
                                "resourceNameVGCUPercentage": "enflame.com/vgcu-percentage", "factor": 2},
      f"enflamevgcu: device-config section {dc.get('enflamevgcu')}")

MPS_DIR = tempfile.TemporaryDirectory()  # removed at exit
MPS_VALUES = os.path.join(MPS_DIR.name, "mps-values.yaml")
with open(MPS_VALUES, "w") as f:
    yaml.safe_dump({"devicePlugin": {"nodeConfiguration": {
        "config": '{"nodeconfig": [{"name": "gpu-node-1", "operatingmode": "mps"}]}'}}}, f)
# 3d. operating mode mps: off by default; on through devicePlugin.mps.enabled or a node config naming
# operatingmode mps, the device plugin gets the daemon's directories and the pipe directory read-only
dp = container(render("defaults", "hami-system")[1], "DaemonSet", "device-plugin")
check(not any(a.startswith("--mps-") for a in dp["command"]), "defaults: no MPS flags")
for name, args in {"mps.enabled": ["--set", "devicePlugin.mps.enabled=true", "--set", "devicePlugin.mps.shmDir="],
                   "node config mps": ["-f", MPS_VALUES]}.items():
    text, docs = render(name, "hami-system", *args)
    refs(name, text, "--namespace-exists", "hami-system")
    dp = container(docs, "DaemonSet", "device-plugin")
    check("--mps-pipe-dir=/tmp/nvidia-mps" in dp["command"], f"{name}: --mps-pipe-dir: {dp['command']}")
    check(("--mps-shm-dir=" if name == "mps.enabled" else "--mps-shm-dir=/dev/shm") in dp["command"],
          f"{name}: --mps-shm-dir: {dp['command']}")
    check({"name": "mps-pipe", "mountPath": "/tmp/nvidia-mps", "readOnly": True} in dp["volumeMounts"],
          f"{name}: pipe directory mounted read-only: {dp['volumeMounts']}")
    vols = find(docs, "DaemonSet")[0]["spec"]["template"]["spec"]["volumes"]
    check({"name": "mps-pipe", "hostPath": {"path": "/tmp/nvidia-mps", "type": "DirectoryOrCreate"}} in vols,
          f"{name}: pipe directory volume: {vols}")
r = subprocess.run([HELM, "template", "hami", CHART, "--set", "devicePlugin.mps.pipeDir=nvidia-mps"], capture_output=True, text=True)
check(r.returncode != 0 and "pipeDir" in r.stderr, "schema: a relative mps.pipeDir is refused")
# 3e. NVIDIA's static MIG strategy reaches the device plugin (default none); the schema refuses others
for value in ["none", "single", "mixed"]:
    text, docs = render(f"migStrategy={value}", "hami-system", *([] if value == "none" else ["--set", f"devicePlugin.migStrategy={value}"]))
    dp = container(docs, "DaemonSet", "device-plugin")
    check(f"--mig-strategy={value}" in dp["command"], f"migStrategy={value}: device plugin args {dp['command']}")
r = subprocess.run([HELM, "template", "hami", CHART, "--set", "devicePlugin.migStrategy=Mixed"], capture_output=True, text=True)
check(r.returncode != 0 and "migStrategy" in r.stderr, f"schema: migStrategy Mixed is refused: {r.stderr}")

# 3f. upstream's host PID broker: the device plugin serves it on a hostPath; it needs hostPID
text, docs = render("hostPIDBroker", "hami-system", "--set", "devicePlugin.hostPIDBroker.enabled=true")
refs("hostPIDBroker", text, "--namespace-exists", "hami-system")
dp = container(docs, "DaemonSet", "device-plugin")
check("--host-pid-broker-dir=/var/run/hami/hostpid" in dp["command"], f"hostPIDBroker: device plugin args {dp['command']}")
check({"name": "hostpid-broker", "mountPath": "/var/run/hami/hostpid"} in dp["volumeMounts"], "hostPIDBroker: socket directory mounted")
vols = find(docs, "DaemonSet")[0]["spec"]["template"]["spec"]["volumes"]
check({"name": "hostpid-broker", "hostPath": {"path": "/var/run/hami/hostpid", "type": "DirectoryOrCreate"}} in vols,
      "hostPIDBroker: hostPath volume")
text, docs = render("no hostPIDBroker", "hami-system")
check(not any("host-pid-broker" in a for a in container(docs, "DaemonSet", "device-plugin")["command"]), "defaults: no broker")
r = subprocess.run([HELM, "template", "hami", CHART, "--set", "devicePlugin.hostPIDBroker.enabled=true", "--set", "devicePlugin.hostPID=false"],
                   capture_output=True, text=True)
check(r.returncode != 0 and "devicePlugin.hostPIDBroker.enabled needs devicePlugin.hostPID: true" in r.stderr,
      f"hostPIDBroker without hostPID is refused: {r.stderr}")
# 3f'. IMEX channels: the values become the device plugin's flags and the host's channel directory is
# mounted read-only where --imex-dev-root looks; upstream's env in extraEnvs gets the mount too
text, docs = render("imex", "hami-system", "--set", "devicePlugin.imex.channelIDs={0,3}",
                    "--set", "devicePlugin.imex.required=true")
refs("imex", text, "--namespace-exists", "hami-system")
dp = container(docs, "DaemonSet", "device-plugin")
for arg in ("--imex-channel-ids=0,3", "--imex-required", "--imex-dev-root=/host-imex"):
    check(arg in dp["command"], f"imex: {arg} missing from {dp['command']}")
check({"name": "imex-channels", "mountPath": "/host-imex/dev/nvidia-caps-imex-channels", "readOnly": True}
      in dp["volumeMounts"], f"imex: channel directory mount {dp['volumeMounts']}")
vols = find(docs, "DaemonSet")[0]["spec"]["template"]["spec"]["volumes"]
check({"name": "imex-channels", "hostPath": {"path": "/dev/nvidia-caps-imex-channels", "type": "Directory"}} in vols,
      f"imex: hostPath volume {vols}")
text, docs = render("imex env", "hami-system", "--set", "devicePlugin.extraEnvs[0].name=IMEX_CHANNEL_IDS",
                    "--set-string", "devicePlugin.extraEnvs[0].value=0")
dp = container(docs, "DaemonSet", "device-plugin")
check("--imex-dev-root=/host-imex" in dp["command"] and not any(a.startswith("--imex-channel-ids") for a in dp["command"]),
      f"imex from upstream's env: {dp['command']}")
vols = find(docs, "DaemonSet")[0]["spec"]["template"]["spec"]["volumes"]
check({"name": "imex-channels", "hostPath": {"path": "/dev/nvidia-caps-imex-channels"}} in vols,
      f"imex from upstream's env: hostPath volume without a type check {vols}")
text, docs = render("no imex", "hami-system")
dp = container(docs, "DaemonSet", "device-plugin")
check(not any("imex" in a for a in dp["command"]) and not any(m["name"] == "imex-channels" for m in dp["volumeMounts"]),
      "defaults: no IMEX")
r = subprocess.run([HELM, "template", "hami", CHART, "--set", "devicePlugin.imex.channelIDs={-1}"], capture_output=True, text=True)
check(r.returncode != 0 and "channelIDs" in r.stderr, f"schema: a negative IMEX channel is refused: {r.stderr}")
# 3g. the remote-GPU section: the library image defaults to the node image, "" turns delivery off
text, docs = render("remotegpu", "hami-system", "--set", "devices.remotegpu.enabled=true")
dc = yaml.safe_load(find(docs, "ConfigMap", "-device-config")[0]["data"]["device-config.yaml"])
rg = dc.get("remotegpu") or {}
check(rg.get("resourceCountName") == "nvidia.com/remote-gpu" and rg.get("defaultPort") == 14833
      and "hami-cpp/hami-node:" in rg.get("libImage", ""), f"remotegpu: device-config section {rg}")
text, docs = render("remotegpu off", "hami-system", "--set", "devices.remotegpu.enabled=true",
                    "--set", "devices.remotegpu.libImage=")
dc = yaml.safe_load(find(docs, "ConfigMap", "-device-config")[0]["data"]["device-config.yaml"])
check(dc["remotegpu"]["libImage"] == "", f"remotegpu: libImage \"\" {dc['remotegpu']}")

# 4. upstream-style values
text, docs = render("upstream values", "hami-system", "-f", UPSTREAM, "--kube-version", "1.30.2")
refs("upstream values", text, "--namespace-exists", "hami-system")
check("map[" not in text, "upstream values: an image map rendered as a Go map")
ext = container(docs, "Deployment", "extender")
check(ext["image"] == "docker.io/projecthami/hami:v2.6.0", f"upstream values: extender image {ext['image']}")
for want in ["--debug", "-v=4", "--http-bind=0.0.0.0:9443", "--kube-qps=20", "--node-label-selector=gpu=on"]:
    check(want in ext["command"], f"upstream values: extender lacks {want}")
ks = container(docs, "Deployment", "kube-scheduler")
check(ks["image"] == "registry.cn-hangzhou.aliyuncs.com/google_containers/kube-scheduler:v1.30.2", f"upstream values: {ks['image']}")
check(not any("policy-config-file" in a for a in ks["command"]) and ks["command"].count("--config=/config/config.yaml") == 1,
      f"upstream values: kube-scheduler args {ks['command']}")
svc = find(docs, "Service", "-scheduler")[0]
check(svc["spec"]["type"] == "NodePort" and svc["spec"]["ports"][0]["nodePort"] == 31998, "upstream values: NodePort service")
dc = yaml.safe_load(find(docs, "ConfigMap", "-device-config")[0]["data"]["device-config.yaml"])
check(set(dc) == {"nvidia", "kunlun", "enflame", "mthreads"}, f"upstream values: device-config sections {sorted(dc)}")
check(find(docs, "ConfigMap", "-device-config")[0]["data"]["config.json"].find("gpu-node-1") > 0, "upstream values: nodeConfiguration")
names = set(fit_ignored(scheduler_config(docs)))
check("hygon.com/hcunum" in names, "upstream values: hcuResourceName in NodeResourcesFit ignoredResources")
w = find(docs, "MutatingWebhookConfiguration")[0]["webhooks"][0]
check({"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]} in w["namespaceSelector"]["matchExpressions"],
      "upstream values: whitelistNamespaces")
check(container(docs, "Deployment", "extender").get("livenessProbe") is not None, "upstream values: livenessProbe")
dep = find(docs, "Deployment", "-scheduler")[0]
check(dep["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "regcred"}], "upstream values: imagePullSecrets")
notes = helm("install", "hami", CHART, "-n", "hami-system", "--dry-run=client", "-f", UPSTREAM)
for want in ["devicePlugin.nvidiaDriverRoot=/run/nvidia/driver", "devices.vastai.enabled=true", "names upstream's image"]:
    check(want in notes, f"upstream values: NOTES lack the warning {want!r}")
notes = helm("install", "hami", CHART, "-n", "hami-system", "--dry-run=client")
check("WARNING" not in notes, "defaults: NOTES warn")
notes = helm("install", "hami", CHART, "-n", "hami-system", "--dry-run=client", "-f", UPSTREAM_V211)
check("scheduler.profilingBindAddress" not in notes and "reportNodeCapacity" not in notes,
      "upstream v2.11 values: NOTES warn about v2.11 keys left at upstream's defaults")
notes = helm("install", "hami", CHART, "-n", "hami-system", "--dry-run=client", "--set", "scheduler.profilingBindAddress=0.0.0.0:6060",
             "--set", "devicePlugin.reportNodeCapacity=true")
check("scheduler.profilingBindAddress=0.0.0.0:6060" in notes, "NOTES do not name scheduler.profilingBindAddress as without meaning here")
check("reportNodeCapacity" not in notes.split("NOTES:")[-1], "NOTES call devicePlugin.reportNodeCapacity without meaning (it is served)")
notes = helm("install", "hami", CHART, "-n", "hami-system", "--dry-run=client", "--set", "scheduler.leaderElect=false",
             "--set", "scheduler.replicas=2")
check("one scheduler replica is rendered" in notes, "leaderElect=false replicas=2: NOTES say replicas are forced to 1")

# 4b. renderings are clean YAML (no trailing spaces or blank-line noise from the templates)
if subprocess.run(["sh", "-c", "command -v yamllint"], capture_output=True).returncode == 0:
    conf = "{extends: default, rules: {line-length: {max: 160}, document-start: disable, comments: disable, indentation: {indent-sequences: whatever}}}"
    for name, args in {"defaults": [], "upstream values": ["-f", UPSTREAM], "upstream v2.11 values": ["-f", UPSTREAM_V211],
                       "cert-manager": ["--set", "scheduler.certManager.enabled=true"]}.items():
        text = helm("template", "hami", CHART, "-n", "hami-system", *args)
        text = "\n".join(l for l in text.splitlines() if not l.startswith("      caBundle:") and not l.startswith("  tls.") and not l.startswith("  ca.crt:")) + "\n"
        r = subprocess.run(["yamllint", "-s", "-d", conf, "-"], input=text, capture_output=True, text=True)
        check(r.returncode == 0, f"{name}: yamllint of the rendering:\n{r.stdout}")
else:
    print("NOTE: yamllint missing, renderings not linted")

# 4c. CPU-only pods opt-in (scheduler.admissionWebhook.cpuPods): off by default; flags when set; the
# release namespace refused (its own pods would wait for hami-scheduler).
text, docs = render("defaults", "hami-system")
check(not any(a.startswith("--cpu-pods") for a in container(docs, "Deployment", "extender")["command"]),
      "cpuPods: default renders a --cpu-pods flag")
text, docs = render("cpuPods", "hami-system", "--set", "scheduler.admissionWebhook.cpuPods.namespaces={ml,batch}",
                    "--set", "scheduler.admissionWebhook.cpuPods.matchLabels.team=ml")
cmd = container(docs, "Deployment", "extender")["command"]
for want in ["--cpu-pods-namespaces=ml,batch", "--cpu-pods-selector=team=ml"]:
    check(want in cmd, f"cpuPods: extender lacks {want}")
r = subprocess.run([HELM, "template", "hami", CHART, "-n", "hami-system", "--set",
                    "scheduler.admissionWebhook.cpuPods.namespaces={hami-system}"], capture_output=True, text=True)
check(r.returncode != 0 and "release namespace" in r.stderr, "cpuPods: the release namespace is refused")

# 4d. Usage recommendations (scheduler.usageRecommendations): no flag and no volume by default; with a
# ConfigMap, its key mounted read-only and every value on the extender's command line; the schema keeps
# checkS within the flag's 1..3600.
text, docs = render("usageRecommendations defaults", "hami-system")
ext = container(docs, "Deployment", "extender")
check(not any(a.startswith("--usage-") for a in ext["command"]), "usageRecommendations: default renders a --usage- flag")
check(not any(m["name"] == "usage-recommendations" for m in ext["volumeMounts"]), "usageRecommendations: default mounts")
USAGE_CASES = [  # (--set values, flags the extender must get)
    (["configMap=recs"], ["--usage-recommendations=/usage-recommendations/recommendations.json",
                          "--usage-recommendations-check-s=10"]),
    (["configMap=recs", "key=r.json", "checkS=300", "applyNamespaces={ml,serving}"],
     ["--usage-recommendations=/usage-recommendations/r.json", "--usage-recommendations-check-s=300",
      "--usage-apply-namespaces=ml,serving"]),
    (["configMap=recs", "checkS=3600", "applyNamespaces={*}"],
     ["--usage-recommendations-check-s=3600", "--usage-apply-namespaces=*"]),
]
for sets, want in USAGE_CASES:
    args = [a for v in sets for a in ("--set", "scheduler.usageRecommendations." + v)]
    text, docs = render(f"usageRecommendations {sets}", "hami-system", *args)
    dep = [d for d in docs if d["kind"] == "Deployment" and any(
        c["name"] == "extender" for c in d["spec"]["template"]["spec"]["containers"])][0]
    ext = container(docs, "Deployment", "extender")
    for flag in want:
        check(flag in ext["command"], f"usageRecommendations {sets}: extender lacks {flag}: {ext['command']}")
    check({"name": "usage-recommendations", "mountPath": "/usage-recommendations", "readOnly": True}
          in ext["volumeMounts"], f"usageRecommendations {sets}: not mounted")
    check({"name": "usage-recommendations", "configMap": {"name": "recs"}} in dep["spec"]["template"]["spec"]["volumes"],
          f"usageRecommendations {sets}: no ConfigMap volume")
for bad in ["checkS=0", "checkS=3601", "checkS=ten", "configMap=Recs_1", "applyNamespaces={ML}"]:
    r = subprocess.run([HELM, "template", "hami", CHART, "-n", "hami-system", "--set",
                        "scheduler.usageRecommendations." + bad], capture_output=True, text=True)
    check(r.returncode != 0 and "usageRecommendations" in r.stderr, f"schema: usageRecommendations.{bad} accepted")

# 4e. PrometheusRule (upstream's prometheus.enabled + prometheus.alerts.enabled): off by default, and off
# where the cluster has no PrometheusRule API (NOTES says so); the rendered rules pass `promtool check
# rules`, and promtool's rule unit tests fire each alert on series shaped as hami-cpp exports them.
PR_API = ["--api-versions", "monitoring.coreos.com/v1/PrometheusRule"]
PR_ON = ["--set", "prometheus.enabled=true", "--set", "prometheus.alerts.enabled=true"]
check(not find(render("defaults", "hami-system", *PR_API)[1], "PrometheusRule"), "prometheusRule: rendered by default")
check(not find(render("no API", "hami-system", *PR_ON)[1], "PrometheusRule"), "prometheusRule: rendered without the API")
notes = helm("install", "hami", CHART, "-n", "hami-system", "--dry-run=client", *PR_ON)
check("serves no monitoring.coreos.com/v1 PrometheusRule" in notes, "prometheusRule: NOTES do not say the API is missing")
text, docs = render("prometheusRule", "hami-system", *PR_ON, *PR_API, "--set", "prometheus.alerts.labels.release=kps")
refs("prometheusRule", text, "--namespace-exists", "hami-system")
rules = find(docs, "PrometheusRule")
check(len(rules) == 1 and rules[0]["metadata"]["labels"].get("release") == "kps", "prometheusRule: one rule object with alerts.labels")
alerts = [r["alert"] for g in rules[0]["spec"]["groups"] for r in g["rules"]] if rules else []
check(alerts == ["HAMiGPUMemoryNearlyExhausted", "HAMiGPUCoresNearlyExhausted", "HAMivGPUMemoryNearLimit",
                 "HAMiSchedulerMetricsAbsent", "HAMiSchedulerNoLeader", "HAMiExtenderErrors", "HAMiFilterLatencyHigh"],
      f"prometheusRule: alerts {alerts}")
exported = open(os.path.join(ROOT, "src/extender/metrics.cc")).read() + open(os.path.join(ROOT, "src/monitor/exporter.cc")).read()
for g in (rules[0]["spec"]["groups"] if rules else []):
    for r in g["rules"]:
        for metric in re.findall(r"hami_[a-z_]+", r["expr"]):
            family = re.sub(r"_bucket$", "", metric)  # a histogram's series
            check(f'"{family}"' in exported, f"prometheusRule: {r['alert']} reads {metric}, which hami-cpp does not export")
text, docs = render("prometheusRule off", "hami-system", *PR_ON, *PR_API, "--set", "prometheus.alerts.rules.extenderErrors.enabled=false")
check("HAMiExtenderErrors" not in text and "HAMiFilterLatencyHigh" in text, "prometheusRule: a rule's enabled=false drops it")
if subprocess.run(["sh", "-c", "command -v promtool"], capture_output=True).returncode == 0 and rules:
    PROM_DIR = tempfile.TemporaryDirectory()
    with open(os.path.join(PROM_DIR.name, "rules.yaml"), "w") as f:
        yaml.safe_dump(rules[0]["spec"], f)
    gpu = 'node="n1",device_index="0",device_uuid="GPU-a",device_type="A100"'
    ctr = 'namespace="ml",pod="p",container="c",device_index="0",device_uuid="GPU-a"'
    # (name, series, alert, evaluated at, alerts expected to fire)
    cases = [
        ("memory 95 %", [(f"hami_node_gpu_memory_allocated_ratio{{{gpu}}}", "0.95x20")], "HAMiGPUMemoryNearlyExhausted", "12m", 1),
        ("memory 50 %", [(f"hami_node_gpu_memory_allocated_ratio{{{gpu}}}", "0.5x20")], "HAMiGPUMemoryNearlyExhausted", "12m", 0),
        ("cores 100", [(f"hami_gpu_core_allocated_ratio{{{gpu}}}", "100x20")], "HAMiGPUCoresNearlyExhausted", "12m", 1),
        ("container at 97 %", [(f"hami_vgpu_memory_used_bytes{{{ctr}}}", "97x10"), (f"hami_vgpu_memory_limit_bytes{{{ctr}}}", "100x10")],
         "HAMivGPUMemoryNearLimit", "7m", 1),
        ("container without a limit", [(f"hami_vgpu_memory_used_bytes{{{ctr}}}", "97x10"), (f"hami_vgpu_memory_limit_bytes{{{ctr}}}", "0x10")],
         "HAMivGPUMemoryNearLimit", "7m", 0),
        ("no scheduler", [], "HAMiSchedulerMetricsAbsent", "12m", 1),
        ("a follower only", [('hami_scheduler_is_leader{pod="a"}', "0x10"), ('hami_scheduler_cache_synced{pod="a"}', "0x10")],
         "HAMiSchedulerNoLeader", "7m", 1),
        ("a synced leader", [('hami_scheduler_is_leader{pod="a"}', "1x10"), ('hami_scheduler_cache_synced{pod="a"}', "1x10"),
                             ('hami_scheduler_is_leader{pod="b"}', "0x10")], "HAMiSchedulerNoLeader", "7m", 0),
        ("one error a second", [("hami_extender_filter_errors_total", "0+60x20"), ("hami_extender_bind_errors_total", "0x20")],
         "HAMiExtenderErrors", "16m", 1),
        ("filter calls of 1-2.5 s", [('hami_scheduler_filter_duration_seconds_bucket{result="success",le="1"}', "0x20"),
                                     ('hami_scheduler_filter_duration_seconds_bucket{result="success",le="2.5"}', "0+60x20"),
                                     ('hami_scheduler_filter_duration_seconds_bucket{result="success",le="+Inf"}', "0+60x20")],
         "HAMiFilterLatencyHigh", "16m", 1),
        ("filter calls under 10 ms", [('hami_scheduler_filter_duration_seconds_bucket{result="success",le="0.01"}', "0+60x20"),
                                      ('hami_scheduler_filter_duration_seconds_bucket{result="success",le="+Inf"}', "0+60x20")],
         "HAMiFilterLatencyHigh", "16m", 0),
    ]
    for name, series, alert, at, n in cases:
        test = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m",
                "tests": [{"interval": "1m", "input_series": [{"series": k, "values": v} for k, v in series],
                           "alert_rule_test": [{"eval_time": at, "alertname": alert, "exp_alerts": []}]}]}
        path = os.path.join(PROM_DIR.name, "test.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(test, f)
        # Expecting no alert: promtool passes when none fires and lists the one that fired otherwise.
        r = subprocess.run(["promtool", "test", "rules", path], capture_output=True, text=True)
        fired = r.returncode != 0 and alert in r.stdout + r.stderr and "got:" in r.stdout + r.stderr
        check(r.returncode == 0 or fired, f"prometheusRule: {name}: promtool failed:\n{r.stdout}{r.stderr}")
        check(fired == (n > 0), f"prometheusRule: {name}: {alert} {'did not fire' if n else 'fired'} at {at}:\n{r.stdout}{r.stderr}")
else:
    print("NOTE: promtool missing, alert rules not checked")

# 4g. NetworkPolicy (upstream's scheduler.networkPolicy.enabled): off by default; on, the scheduler pods'
# HTTPS port admits kube-system and the release's node agents, the metrics port anyone
check(not find(render("defaults", "hami-system")[1], "NetworkPolicy"), "networkPolicy: rendered by default")
text, docs = render("networkPolicy", "hami-system", "--set", "scheduler.networkPolicy.enabled=true")
refs("networkPolicy", text, "--namespace-exists", "hami-system")
np = find(docs, "NetworkPolicy")
dep = find(docs, "Deployment", "-scheduler")[0]
check(len(np) == 1 and all(dep["spec"]["template"]["metadata"]["labels"].get(k) == v
                           for k, v in np[0]["spec"]["podSelector"]["matchLabels"].items()), "networkPolicy: selects the scheduler pods")
ing = np[0]["spec"]["ingress"] if np else []
ds = find(docs, "DaemonSet")[0]["spec"]["template"]["metadata"]["labels"]
https = [r for r in ing if r["ports"] == [{"port": "https"}]]
check(len(https) == 1 and {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}} in https[0]["from"]
      and any(all(ds.get(k) == v for k, v in f.get("podSelector", {}).get("matchLabels", {"x": "y"}).items()) for f in https[0]["from"]),
      f"networkPolicy: https from kube-system and the node agents: {ing}")
check({"ports": [{"port": "metrics"}]} in ing, f"networkPolicy: metrics open: {ing}")
ports = {p["name"] for c in dep["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
check({"https", "metrics"} <= ports, f"networkPolicy: named ports {ports} of the scheduler pod")

# 4f. the extender's loopback port (upstream's scheduler.extenderPort, default 9444) reaches both the flag
# and kube-scheduler's extender URL; one the pod's other listeners use is refused
text, docs = render("extenderPort", "hami-system", "--set", "scheduler.extenderPort=9555")
check("--extender-bind=127.0.0.1:9555" in container(docs, "Deployment", "extender")["command"], "extenderPort: flag")
check(scheduler_config(docs)["extenders"][0]["urlPrefix"] == "http://127.0.0.1:9555", "extenderPort: kube-scheduler's URL")
for port in ("8443", "9395"):
    r = subprocess.run([HELM, "template", "hami", CHART, "--set", f"scheduler.extenderPort={port}"], capture_output=True, text=True)
    check(r.returncode != 0 and "scheduler.extenderPort" in r.stderr, f"extenderPort={port}: a port taken in the pod is accepted")

# 4h. per-image pullSecrets (upstream's image maps, PR #2976) join global.imagePullSecrets on the pod
# that runs the image, each name once; none anywhere: no imagePullSecrets
text, docs = render("pullSecrets", "hami-system", "--set", "global.imagePullSecrets={regcred}",
                    "--set", "scheduler.kubeScheduler.image.pullSecrets={ks,regcred}",
                    "--set", "scheduler.extender.image.pullSecrets[0].name=ext",
                    "--set", "devicePlugin.image.pullSecrets={dp}")
pod = find(docs, "Deployment", "-scheduler")[0]["spec"]["template"]["spec"]
check(pod.get("imagePullSecrets") == [{"name": "regcred"}, {"name": "ext"}, {"name": "ks"}],
      f"pullSecrets: scheduler pod {pod.get('imagePullSecrets')}")
pod = find(docs, "DaemonSet")[0]["spec"]["template"]["spec"]
check(pod.get("imagePullSecrets") == [{"name": "regcred"}, {"name": "dp"}], f"pullSecrets: node agent {pod.get('imagePullSecrets')}")
docs = render("no pullSecrets", "hami-system")[1]
check(not any("imagePullSecrets" in d["spec"]["template"]["spec"] for d in find(docs, "Deployment") + find(docs, "DaemonSet")),
      "pullSecrets: rendered without any")

# 4i. the monitor: upstream's probes (off by default) on /healthz of the metrics port; a loopback
# metricsBindAddress is refused, as upstream's (#3162)
mon = container(render("defaults", "hami-system")[1], "DaemonSet", "monitor")
check("livenessProbe" not in mon and "readinessProbe" not in mon, "monitor probes: rendered by default")
mon = container(render("probes", "hami-system", "--set", "devicePlugin.monitor.probes.enabled=true")[1], "DaemonSet", "monitor")
for probe in ("livenessProbe", "readinessProbe"):
    check(mon.get(probe, {}).get("httpGet") == {"path": "/healthz", "port": "metrics"}, f"monitor probes: {probe} {mon.get(probe)}")
for addr in ("127.0.0.1:9394", "127.0.0.2:9394", "localhost:9394"):
    r = subprocess.run([HELM, "template", "hami", CHART, "--set", f"devicePlugin.monitor.metricsBindAddress={addr}"],
                       capture_output=True, text=True)
    check(r.returncode != 0 and "is loopback" in r.stderr, f"monitor: metricsBindAddress {addr} accepted")

# 4l. upstream's devicePlugin.reportNodeCapacity (#2874): the flag on the device plugin and patch on
# nodes/status for the node agent only when it is on, or when a node config may turn it on per node
def node_status_rule(docs):
    role = [d for d in find(docs, "ClusterRole") if d["metadata"]["name"].endswith("node-agent")][0]
    return [r for r in role["rules"] if "nodes/status" in r.get("resources", [])]
docs = render("defaults", "hami-system")[1]
check("--report-node-capacity" not in container(docs, "DaemonSet", "device-plugin")["command"] and not node_status_rule(docs),
      "reportNodeCapacity: flag or nodes/status by default")
docs = render("capacity", "hami-system", "--set", "devicePlugin.reportNodeCapacity=true")[1]
check("--report-node-capacity" in container(docs, "DaemonSet", "device-plugin")["command"]
      and node_status_rule(docs) == [{"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]}],
      f"reportNodeCapacity=true: {node_status_rule(docs)}")
with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
    f.write('devicePlugin:\n  nodeConfiguration:\n    config: |\n      {"nodeconfig":[{"name":"*","reportnodecapacity":true}]}\n')
    f.flush()
    docs = render("capacity per node", "hami-system", "-f", f.name)[1]
    check("--report-node-capacity" not in container(docs, "DaemonSet", "device-plugin")["command"] and node_status_rule(docs),
          "node config reportnodecapacity: no nodes/status patch")

# 4j. SELinux (upstream's selinux.{enabled,type,level}): off by default; on, a privileged init container
# labels the libvgpu directory; the schema keeps shell and option syntax out of type and level
check(container(render("defaults", "hami-system")[1], "DaemonSet", "selinux-relabel") is None, "selinux: relabel by default")
docs = render("selinux", "hami-system", "--set", "selinux.enabled=true", "--set", "selinux.level=s0:c1\\,c2")[1]
init = container(docs, "DaemonSet", "selinux-relabel")
check(init is not None and init["command"] == ["chcon", "-R", "-t", "container_file_t", "-l", "s0:c1,c2", "/host-vgpu"]
      and init["securityContext"].get("privileged") is True, f"selinux: relabel container {init}")
for bad in ("selinux.type=x;rm", "selinux.level=-R"):
    r = subprocess.run([HELM, "template", "hami", CHART, "--set", "selinux.enabled=true", "--set", bad], capture_output=True, text=True)
    check(r.returncode != 0 and "selinux" in r.stderr, f"selinux: {bad} accepted")

# 4k. OpenShift (upstream's platform.openshift, openshift.securityContextConstraints.{create,name}): the
# node agent's account may use an SCC that allows what its pod asks for; the scheduler pod leaves its UID
# to the namespace's range
docs = render("defaults", "hami-system")[1]
check(not find(docs, "SecurityContextConstraints") and not find(docs, "RoleBinding", "-scc"), "openshift: rendered by default")
check(find(docs, "Deployment", "-scheduler")[0]["spec"]["template"]["spec"]["securityContext"].get("runAsUser") == 65532,
      "openshift: scheduler UID by default")
for extra, privileged in (([], False), (["--set", "selinux.enabled=true"], True)):
    text, docs = render("openshift", "hami-system", "--set", "platform.openshift=true", *extra)
    refs("openshift", text, "--namespace-exists", "hami-system")
    scc = find(docs, "SecurityContextConstraints")
    ds = find(docs, "DaemonSet")[0]["spec"]["template"]["spec"]
    caps = {c for k in ds["containers"] + ds["initContainers"] for c in k.get("securityContext", {}).get("capabilities", {}).get("add", [])}
    vol_types = {next(k for k in v if k != "name") for v in ds["volumes"]}
    vol_types = {"configMap" if t == "configMap" else t for t in vol_types}
    check(len(scc) == 1 and scc[0]["allowHostPID"] is True and set(scc[0]["allowedCapabilities"]) >= caps
          and set(scc[0]["volumes"]) >= vol_types and scc[0]["allowPrivilegedContainer"] is privileged,
          f"openshift {extra}: SCC {scc} for caps {caps}, volumes {vol_types}")
    role = find(docs, "ClusterRole", "system:openshift:scc:hami-node-agent")
    check(role and role[0]["rules"] == [{"apiGroups": ["security.openshift.io"], "resources": ["securitycontextconstraints"],
                                         "resourceNames": ["hami-node-agent"], "verbs": ["use"]}], f"openshift: use role {role}")
    rb = find(docs, "RoleBinding", "-scc")
    check(rb and rb[0]["subjects"][0]["name"] == ds["serviceAccountName"]
          and rb[0]["roleRef"]["name"] == "system:openshift:scc:hami-node-agent", f"openshift: binding {rb}")
    sec = find(docs, "Deployment", "-scheduler")[0]["spec"]["template"]["spec"]["securityContext"]
    check("runAsUser" not in sec and sec.get("runAsNonRoot") is True, f"openshift: scheduler securityContext {sec}")
docs = render("openshift privileged", "hami-system", "--set", "platform.openshift=true",
              "--set", "openshift.securityContextConstraints.create=false",
              "--set", "openshift.securityContextConstraints.name=privileged")[1]
rb = find(docs, "RoleBinding", "-scc")
check(not find(docs, "SecurityContextConstraints") and rb and rb[0]["roleRef"]["name"] == "system:openshift:scc:privileged",
      f"openshift: an existing SCC is bound, not created: {rb}")
notes = helm("install", "hami", CHART, "-n", "hami-system", "--dry-run=client", "--set", "platform.openshift=true")
check("platform.openshift=true" not in notes, "openshift: NOTES call platform.openshift without meaning")

# 4d. upstream's two values layouts (v2.10: root keys and devicePlugin.*; v2.11: devices.<vendor>.*).
# Rendered with cert-manager so that no generated certificate differs between renderings.
def template(*args):
    r = subprocess.run([HELM, "template", "hami", CHART, "-n", "hami-system", "--set", "scheduler.certManager.enabled=true",
                        *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


rc10, v210, err = template("-f", UPSTREAM)
rc11, v211, err11 = template("-f", UPSTREAM_V211)
check(rc10 == 0 and rc11 == 0, f"layouts: both upstream files render: {err}{err11}")
check(v210 == v211, "layouts: upstream's v2.10 and v2.11 values files render different manifests")
rc, defaults, _ = template()
# One row per moved key: (v2.10 path, v2.11 path, a value other than the default, the vendor to enable or
# None; False: a key without meaning here, checked for conflicts only; "runtimeClass": needs a class name).
LAYOUT_KEYS = [
    ("resourceName", "devices.nvidia.resourceCountName", "example.com/gpu", None),
    ("resourceMem", "devices.nvidia.resourceMemoryName", "example.com/gpumem", None),
    ("resourceMemPercentage", "devices.nvidia.resourceMemoryPercentageName", "example.com/gpumem-pct", None),
    ("resourceCores", "devices.nvidia.resourceCoreName", "example.com/gpucores", None),
    ("resourcePriority", "devices.nvidia.resourcePriorityName", "example.com/priority", None),
    ("devicePlugin.deviceSplitCount", "devices.nvidia.deviceSplitCount", "4", None),
    ("devicePlugin.deviceMemoryScaling", "devices.nvidia.deviceMemoryScaling", "2", None),
    ("devicePlugin.deviceCoreScaling", "devices.nvidia.deviceCoreScaling", "3", None),
    ("devicePlugin.preConfiguredDeviceMemory", "devices.nvidia.preConfiguredDeviceMemory", "8192", None),
    ("devicePlugin.enableNumaTopology", "devices.nvidia.enableNumaTopology", "true", None),
    ("devicePlugin.runtimeClassName", "devices.nvidia.runtimeClassName", "nvidia", None),
    ("devicePlugin.createRuntimeClass", "devices.nvidia.createRuntimeClass", "true", "runtimeClass"),
    ("mluResourceName", "devices.cambricon.resourceCountName", "example.com/mlu", "cambricon"),
    ("mluResourceMem", "devices.cambricon.resourceMemoryName", "example.com/mlumem", "cambricon"),
    ("mluResourceCores", "devices.cambricon.resourceCoreName", "example.com/mlucores", "cambricon"),
    ("hcuResourceName", "devices.hygon.resourceCountName", "hygon.com/hcunum", "hygon"),
    ("hcuResourceMem", "devices.hygon.resourceMemoryName", "hygon.com/hcumem", "hygon"),
    ("hcuResourceCores", "devices.hygon.resourceCoreName", "hygon.com/hcucores", "hygon"),
    ("metaxResourceName", "devices.metax.resourceVCountName", "example.com/sgpu", "metax"),
    ("metaxResourceCore", "devices.metax.resourceVCoreName", "example.com/vcore", "metax"),
    ("metaxResourceMem", "devices.metax.resourceVMemoryName", "example.com/vmemory", "metax"),
    ("metaxsGPUTopologyAware", "devices.metax.sgpuTopologyAware", "true", "metax"),
    ("enflameResourceNameDRSGCU", "devices.enflame.resourceNameDRSGCU", "example.com/drs", "enflame"),
    ("enflameResourceNameGCUMemory", "devices.enflame.resourceNameGCUMemory", "example.com/gcumem", "enflame"),
    ("enflameResourceNameGCUCore", "devices.enflame.resourceNameGCUCore", "example.com/gcucore", "enflame"),
    ("kunlunResourceName", "devices.kunlun.resourceCountName", "example.com/xpu", "kunlun"),
    ("kunlunResourceVCountName", "devices.kunlun.resourceVCountName", "example.com/vxpu", "kunlun"),
    ("kunlunResourceVMemoryName", "devices.kunlun.resourceVMemoryName", "example.com/vxpu-mem", "kunlun"),
    ("vastaiResourceName", "devices.vastai.resourceCountName", "example.com/va", False),
    ("birenResourceName", "devices.biren.resourceCountName", "example.com/biren", False),
]
for old, new, value, vendor in LAYOUT_KEYS:
    on = ["--set", f"devices.{vendor}.enabled=true"] if vendor else []
    if vendor == "runtimeClass":
        on = ["--set", "devices.nvidia.runtimeClassName=nvidia", "--set", "devicePlugin.runtimeClassName=nvidia"]
    rc_old, out_old, err_old = template(*on, "--set", f"{old}={value}")
    rc_new, out_new, err_new = template(*on, "--set", f"{new}={value}")
    check(rc_old == 0 and rc_new == 0, f"layouts: {old} / {new} render: {err_old}{err_new}")
    check(out_old == out_new, f"layouts: {old}={value} and {new}={value} render different manifests")
    if vendor is not False:
        check(out_new != template(*on)[1], f"layouts: {new}={value} changes nothing")
    rc_both, out_both, _ = template(*on, "--set", f"{old}={value}", "--set", f"{new}={value}")
    check(rc_both == 0 and out_both == out_new, f"layouts: {old} and {new} set alike are no conflict")
    other = "8" if value[0].isdigit() else ("false" if value == "true" else value + "-other")
    rc_c, _, err_c = template(*on, "--set", f"{old}={value}", "--set", f"{new}={other}")
    check(rc_c != 0 and old in err_c and new in err_c, f"layouts: {old}={value} with {new}={other} is not refused naming both: {err_c}")
# extraEnvs: upstream's v2.10 map and its v2.11 list render the same env entries
rc_m, out_m, _ = template("--set", "devicePlugin.extraEnvs.FOO=bar", "--set", "devicePlugin.monitor.extraEnvs.BAZ=1")
rc_l, out_l, _ = template("--set", "devicePlugin.extraEnvs[0].name=FOO", "--set", "devicePlugin.extraEnvs[0].value=bar",
                          "--set", "devicePlugin.monitor.extraEnvs[0].name=BAZ", "--set-string", "devicePlugin.monitor.extraEnvs[0].value=1")
docs = [d for d in yaml.safe_load_all(out_m) if d]
check(rc_m == 0 and rc_l == 0 and docs == [d for d in yaml.safe_load_all(out_l) if d] and out_m != defaults,
      "extraEnvs: the map and the list render differently")
check({"name": "FOO", "value": "bar"} in container(docs, "DaemonSet", "device-plugin")["env"], "extraEnvs: FOO missing")
check({"name": "BAZ", "value": "1"} in container(docs, "DaemonSet", "monitor")["env"], "extraEnvs: BAZ missing")
rc_x, _, err_x = template("--set", "devicePlugin.extraEnvs[0].value=bar")
check(rc_x != 0 and "extraEnvs" in err_x, f"extraEnvs: a list entry without a name is refused: {err_x}")

# 5. the schema refuses wrong types
r = subprocess.run([HELM, "template", "hami", CHART, "--set", "devicePlugin.deviceSplitCount=ten"], capture_output=True, text=True)
check(r.returncode != 0 and "deviceSplitCount" in r.stderr, "schema: a string deviceSplitCount is refused")

print(f"helm_chart_test: {len(failures)} failures")
sys.exit(1 if failures else 0)
