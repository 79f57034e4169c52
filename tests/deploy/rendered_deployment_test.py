#!/usr/bin/python3
"""Deployment test: the control plane as the Helm chart renders it (defaults), run against the fake API
server. `hami scheduler` gets exactly the rendered container args, with the rendered files where the pod
mounts them (the chart-generated TLS Secret at /tls, the device-config ConfigMap at /device-config) and
only the listen hosts moved to 127.0.0.1 on free ports. The node is the one the rendered device plugin
registers (its --dry-run annotation against the fake NVML); the Lease is kube-scheduler's, held by this
pod. Checked: /readyz over HTTPS verified with the rendered caBundle for the Service's DNS name (what the
API server does); the webhook sends a GPU pod to schedulerName; /filter picks the node and writes the decision; /bind binds it; /metrics
names the build.

The same run with the kustomize dev overlay (plain HTTP, no webhook) when given `--kustomize-dev`.

With `--node FAKE_KUBELET LIBVGPU FAKES_DIR CONTAINER_PROG` the node agent runs too, as the chart renders
it: the node's filesystem is a directory (every hostPath volume below it), the init container's command
installs libvgpu.so and ld.so.preload there (its `cp` source is the image's libvgpu path, checked against
the Dockerfile), the device plugin runs with its rendered args and env (paths remapped to that directory,
plus what a cluster provides: kubeconfig, node name, the fake NVML), a fake kubelet admits the bound pod's
container (GetPreferredAllocation + Allocate), and a CUDA program runs with exactly the environment and
preload Allocate returned, under libvgpu with the fake driver: it must see 3000 MiB and be refused a
byte more.

usage: rendered_deployment_test.py HAMI FAKE_APISERVER FAKE_NVML [--kustomize-dev]
                                   [--node FAKE_KUBELET LIBVGPU FAKES_DIR CONTAINER_PROG]
(repository root; exit 77 without helm, or without kubectl for --kustomize-dev)"""
import base64
import datetime
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

HAMI, FAKE_API, FAKE_NVML = sys.argv[1:4]
ROOT = os.getcwd()
NS = "hami-system"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL", what)
    return cond


KUSTOMIZE_DEV = "--kustomize-dev" in sys.argv[4:]
NODE = sys.argv[sys.argv.index("--node") + 1:sys.argv.index("--node") + 5] if "--node" in sys.argv else None
CUDA_ERROR_OUT_OF_MEMORY = 2
MIB = 1 << 20
if KUSTOMIZE_DEV:
    if subprocess.run(["sh", "-c", "command -v kubectl"], capture_output=True).returncode != 0:
        print("kubectl missing: kustomize rendering not run", file=sys.stderr)
        sys.exit(77)
    rendered = subprocess.run(["kubectl", "kustomize", "deploy/overlays/dev"], capture_output=True, text=True, check=True).stdout
else:
    r = subprocess.run([os.path.join(ROOT, "scripts/helm.sh")], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr.strip(), file=sys.stderr)
        sys.exit(77 if r.returncode == 77 else 1)
    HELM = r.stdout.strip().splitlines()[-1]
    rendered = subprocess.run([HELM, "template", "hami", "deploy/helm/hami", "-n", NS], capture_output=True, text=True,
                              check=True).stdout
docs = [d for d in yaml.safe_load_all(rendered) if d]
by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
dep = by[("Deployment", "hami-scheduler")]
pod_spec = dep["spec"]["template"]["spec"]
ext = next(c for c in pod_spec["containers"] if c["name"] == "extender")
vols = {v["name"]: v for v in pod_spec["volumes"]}
mwc = by.get(("MutatingWebhookConfiguration", "hami-webhook"))
webhook = mwc["webhooks"][0] if mwc else None
check(bool(webhook) != KUSTOMIZE_DEV, "a webhook configuration exactly when not the dev overlay")
TLS = any(a.startswith("--cert-file=") for a in ext["command"])
if TLS:
    ca_pem = base64.b64decode(webhook["clientConfig"]["caBundle"]).decode()
    svc = webhook["clientConfig"]["service"]
    server_name = f"{svc['name']}.{svc['namespace']}.svc"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config_map(name, dst):
    os.makedirs(dst, exist_ok=True)
    for k, val in by[("ConfigMap", name)]["data"].items():
        open(os.path.join(dst, k), "w").write(val)


def run_node_agent(by, tmp, procs, bound):
    """The rendered node agent on a node whose filesystem is tmp/host: install, register, Allocate, run."""
    fake_kubelet, libvgpu, fakes_dir, container_prog = NODE
    spec = by[("DaemonSet", "hami-node-agent")]["spec"]["template"]["spec"]
    vols = {v["name"]: v for v in spec["volumes"]}
    host = tmp + "/host"

    def view(c):  # a container's mount paths -> where they are here
        out = {}
        for m in c.get("volumeMounts", []):
            v = vols[m["name"]]
            if "hostPath" in v:
                out[m["mountPath"]] = host + v["hostPath"]["path"]
                os.makedirs(out[m["mountPath"]], exist_ok=True)
            elif "configMap" in v:
                out[m["mountPath"]] = f"{tmp}/volume-{m['name']}"
                write_config_map(v["configMap"]["name"], out[m["mountPath"]])
        return out

    def remap(path, mounts):  # a path inside the container -> here (longest mount path first)
        for mp in sorted(mounts, key=len, reverse=True):
            if path == mp or path.startswith(mp + "/"):
                return mounts[mp] + path[len(mp):]
        return None

    # Init container: its copy's source must be where the image puts libvgpu.so.
    init = next(c for c in spec["initContainers"] if c["name"] == "install-libvgpu")
    script = init["command"][-1]
    src = re.search(r"cp -f (\S+) ", script)
    dockerfile = open(os.path.join(ROOT, "docker/Dockerfile")).read()
    if not check(src is not None and re.search(r"COPY .*libvgpu\.so " + re.escape(src.group(1)) + r"\s", dockerfile),
                 f"init container copies {src.group(1) if src else '?'}, not where the image has libvgpu.so"):
        return
    script = script.replace(f"cp -f {src.group(1)} ", f"cp -f {libvgpu} ", 1)
    for mp, here in sorted(view(init).items(), key=lambda kv: -len(kv[0])):
        script = script.replace(mp + "/", here + "/").replace(mp + " ", here + " ")
    out = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=60)
    if not check(out.returncode == 0, f"init container: {out.stderr}"):
        return

    # Device plugin: rendered args; the host-path flags must be paths its container sees at the same
    # place as the host (mountPath == hostPath), since it hands them to kubelet as host paths.
    dp = next(c for c in spec["containers"] if c["name"] == "device-plugin")
    mounts = view(dp)
    same_place = {m["mountPath"] for m in dp["volumeMounts"]
                  if "hostPath" in vols[m["name"]] and vols[m["name"]]["hostPath"]["path"] == m["mountPath"]}
    args = []
    for a in dp["command"][2:]:
        flag, eq, val = a.partition("=")
        if eq and val.startswith("/"):
            if flag in ("--libvgpu-path", "--ld-preload-path", "--region-root"):
                check(any(val == mp or val.startswith(mp + "/") for mp in same_place),
                      f"device plugin {flag}={val}: not visible to it at its host path")
            here = remap(val, mounts)
            check(here is not None, f"device plugin {flag}={val}: no volume mounted there")
            a = f"{flag}={here}"
        args.append(a)
    os.makedirs(host + "/tmp/vgpulock", exist_ok=True)  # the default --lock-dir, a host path
    args += [f"--lock-dir={host}/tmp/vgpulock", "--kubeconfig", tmp + "/kubeconfig", f"--nvml-library={FAKE_NVML}",
             "--register-interval=1"]
    node_env = dict(os.environ, FAKEGPU_DEVICES="NVIDIA A100-SXM4-80GB:81920:108;NVIDIA A100-SXM4-80GB:81920:108",
                    FAKEGPU_STATE=tmp + "/fakegpu", LD_LIBRARY_PATH=fakes_dir)
    dp_env = dict(node_env, NODE_NAME="gpu-1")
    dp_env.update({e["name"]: e["value"] for e in dp.get("env", []) if "value" in e})
    plugin_dir = next(v for k, v in mounts.items() if k.endswith("device-plugins"))
    kubelet = subprocess.Popen([fake_kubelet, "--plugin-dir", plugin_dir, "--min-devices", "1", "--timeout-s", "60"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs.append(kubelet)
    check("serving" in kubelet.stdout.readline(), "fake kubelet did not start")
    dp_log = open(tmp + "/device-plugin.log", "w")
    procs.append(subprocess.Popen([HAMI, "device-plugin", *args], stdout=dp_log, stderr=dp_log, env=dp_env))
    reg = json.loads(kubelet.stdout.readline() or "{}")
    if not check(reg.get("registered") == "nvidia.com/gpu",
                 f"device plugin registration: {reg}; log:\n{open(tmp + '/device-plugin.log').read()[-2000:]}"):
        return

    kubelet.stdin.write("allocate default train c 1\n")
    kubelet.stdin.flush()
    alloc = json.loads(kubelet.stdout.readline() or "{}")
    if not check("envs" in alloc, f"Allocate: {alloc}; log:\n{open(tmp + '/device-plugin.log').read()[-2000:]}"):
        return
    envs = alloc["envs"]
    decided = bound["metadata"]["annotations"]["hami.io/vgpu-devices-to-allocate"]
    check(envs.get("CUDA_DEVICE_MEMORY_LIMIT_0") == "3000m", f"Allocate: limit {envs.get('CUDA_DEVICE_MEMORY_LIMIT_0')}")
    check(envs.get("NVIDIA_VISIBLE_DEVICES", "?") in decided, f"Allocate: GPU {envs.get('NVIDIA_VISIBLE_DEVICES')} "
                                                             f"is not the decided one ({decided})")

    def host_of(path):  # a path in the workload container -> the host file behind it (longest mount)
        best = max((m for m in alloc["mounts"] if path == m["container_path"] or path.startswith(m["container_path"] + "/")),
                   key=lambda m: len(m["container_path"]), default=None)
        return best["host_path"] + path[len(best["container_path"]):] if best else path

    preload = [host_of(line.strip()) for m in alloc["mounts"] if m["container_path"] == "/etc/ld.so.preload"
               for line in open(m["host_path"]) if line.strip() and not line.startswith("#")]
    if not check(preload and all(os.path.exists(p) for p in preload), f"ld.so.preload mount names {preload}"):
        return
    c_env = dict(node_env)
    c_env.update({k: host_of(v) if v.startswith("/") else v for k, v in envs.items()})
    c_env["CUDA_VISIBLE_DEVICES"] = envs["NVIDIA_VISIBLE_DEVICES"]  # what the NVIDIA container runtime exposes
    c_env["LD_PRELOAD"] = ":".join(preload)
    prog = subprocess.Popen([container_prog, "256"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=c_env)
    procs.append(prog)
    kv, lines = {}, []
    deadline = time.time() + 120
    while time.time() < deadline:
        line = prog.stdout.readline()
        if not line:
            break
        lines.append(line)
        k, _, v = line.strip().partition("=")
        kv[k] = v
        if line.strip() == "ready":
            break
    out = "".join(lines)
    check(kv.get("total") == str(3000 * MIB), f"container: cuMemGetInfo total {kv.get('total')}, want 3000 MiB\n{out}")
    check(kv.get("over_rc") == str(CUDA_ERROR_OUT_OF_MEMORY), f"container: limit + 1 MiB allowed\n{out}")
    check(kv.get("fill_rc") == "0" and kv.get("one_more_rc") == str(CUDA_ERROR_OUT_OF_MEMORY),
          f"container: not refused exactly at the limit\n{out}")
    prog.stdin.close()
    prog.wait(timeout=30)
    for _ in range(50):
        pod = json.loads(urllib.request.urlopen(f"{API_URL[0]}/api/v1/namespaces/default/pods/train", timeout=10).read())
        if pod["metadata"].get("annotations", {}).get("hami.io/bind-phase") == "success":
            break
        time.sleep(0.1)
    check(pod["metadata"].get("annotations", {}).get("hami.io/bind-phase") == "success",
          f"bind phase after Allocate: {pod['metadata'].get('annotations', {}).get('hami.io/bind-phase')}")
    print(f"node agent: init container installed libvgpu, device plugin registered {reg.get('devices')} devices, "
          f"Allocate armed {envs.get('NVIDIA_VISIBLE_DEVICES')} with 3000m, the container saw {kv.get('total')} bytes")


API_URL = []
help_text = subprocess.run([HAMI, "scheduler", "--help"], capture_output=True, text=True).stdout
tmp = tempfile.mkdtemp(prefix="hami-deploy-")
procs = []
try:
    # Mounted files below tmp, where the container sees them.
    mounts = {}
    for m in ext["volumeMounts"]:
        v = vols[m["name"]]
        dst = tmp + m["mountPath"]
        os.makedirs(dst, exist_ok=True)
        if "configMap" in v:
            write_config_map(v["configMap"]["name"], dst)
        elif "secret" in v:
            for k, val in by[("Secret", v["secret"]["secretName"])]["data"].items():
                open(os.path.join(dst, k), "wb").write(base64.b64decode(val))
        mounts[m["mountPath"]] = dst

    # The node, as the rendered device plugin registers it.
    dp = next(c for c in by[("DaemonSet", "hami-node-agent")]["spec"]["template"]["spec"]["containers"] if c["name"] == "device-plugin")
    dc_dir = tmp + "/node-agent"
    write_config_map("hami-device-config", dc_dir)
    dp_args = [re.sub(r"=/(device-config|node-config)/", f"={dc_dir}/", a) for a in dp["command"][2:]]
    env = dict(os.environ, FAKEGPU_DEVICES="NVIDIA A100-SXM4-80GB:81920:108;NVIDIA A100-SXM4-80GB:81920:108",
               FAKEGPU_STATE=tmp + "/fakegpu")
    out = subprocess.run([HAMI, "device-plugin", *dp_args, "--dry-run", "--node-name=gpu-1", f"--nvml-library={FAKE_NVML}"],
                         capture_output=True, text=True, env=env, timeout=60)
    check(out.returncode == 0, f"device plugin dry run: {out.stderr}")
    annotations = dict(line.split(": ", 1) for line in out.stdout.strip().splitlines() if ": " in line)
    now = datetime.datetime.now(datetime.timezone.utc)
    annotations["hami.io/node-handshake"] = "Reported_" + now.strftime("%Y-%m-%d %H:%M:%S")
    pod_name = "hami-scheduler-7d9f-abcde"
    # The GPU pod, as the webhook leaves it (created before the scheduler starts; filter writes its decision on it).
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train", "namespace": "default"},
           "spec": {"schedulerName": "default-scheduler", "containers": [{"name": "c", "image": "cuda",
                    "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}}}]}}
    stored_pod = json.loads(json.dumps(pod))
    stored_pod["spec"]["schedulerName"] = "hami-scheduler"
    seed = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1", "labels": {"gpu": "on"}, "annotations": annotations},
         "status": {"allocatable": {"nvidia.com/gpu": "20", "cpu": "32", "memory": "128Gi"},
                    "capacity": {"nvidia.com/gpu": "20", "cpu": "32", "memory": "128Gi"},
                    "conditions": [{"type": "Ready", "status": "True"}]}},
        # kube-scheduler's Lease (resourceName = schedulerName), held by the kube-scheduler of this pod.
        {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "hami-scheduler", "namespace": NS},
         "spec": {"holderIdentity": f"{pod_name}_0f7c", "leaseDurationSeconds": 3600,
                  "renewTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}},
        stored_pod,
    ]
    open(tmp + "/seed.json", "w").write(json.dumps(seed))
    api = subprocess.Popen([FAKE_API, "--host", "127.0.0.1", "--port", "0", "--seed", tmp + "/seed.json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs.append(api)
    line = api.stdout.readline()
    m = re.search(r"(http://127\.0\.0\.1:\d+)", line)
    if not check(m is not None, f"fake API server did not start: {line} {api.stderr.read() if api.poll() is not None else ''}"):
        raise SystemExit
    API_URL.append(m.group(1))
    open(tmp + "/kubeconfig", "w").write(
        f"apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: c\n  cluster:\n    server: {m.group(1)}\n"
        "users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: t\n  context:\n    cluster: c\n    user: u\n")

    # The scheduler with its rendered args.
    ports = {}
    args = []
    for a in ext["command"][2:]:
        flag, _, val = a.partition("=")
        if flag in ("--http-bind", "--extender-bind", "--metrics-bind"):
            ports[flag] = free_port()
            a = f"{flag}=127.0.0.1:{ports[flag]}"
        if flag.startswith("--") and flag not in help_text:
            print(f"NOTE: hami scheduler has no {flag} yet (in flight); left out")
            continue
        for mp, dst in mounts.items():
            a = a.replace("=" + mp + "/", "=" + dst + "/")
        args.append(a)
    env = dict(os.environ, POD_NAME=pod_name, POD_NAMESPACE=NS)
    log = open(tmp + "/scheduler.log", "w")
    sched = subprocess.Popen([HAMI, "scheduler", *args, "--kubeconfig", tmp + "/kubeconfig"], stdout=log, stderr=log, env=env)
    procs.append(sched)

    def https(path, body=None):  # the --http-bind listener: TLS verified as the API server does, or plain
        if not TLS:
            res = urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{ports['--http-bind']}{path}", data=body,
                                                                headers={"Content-Type": "application/json"}), timeout=10)
            return res.status, res.read().decode()
        conn_ctx = ssl.create_default_context(cadata=ca_pem)
        req = urllib.request.Request(f"https://127.0.0.1:{ports['--http-bind']}{path}", data=body,
                                     headers={"Content-Type": "application/json"})
        # Verify the certificate for the Service's name, as the API server does.
        import http.client
        c = http.client.HTTPSConnection("127.0.0.1", ports["--http-bind"], context=conn_ctx, timeout=10)
        c.sock = conn_ctx.wrap_socket(socket.create_connection(("127.0.0.1", ports["--http-bind"]), timeout=10),
                                      server_hostname=server_name)
        c.request("POST" if body is not None else "GET", path, body=body, headers=req.headers)
        resp = c.getresponse()
        return resp.status, resp.read().decode()

    ready = None
    for _ in range(150):  # bounded: 30 s
        if sched.poll() is not None:
            break
        try:
            ready = https("/readyz")
            if ready[0] == 200:
                break
        except (OSError, ssl.SSLError) as e:
            ready = (0, str(e))
        time.sleep(0.2)
    if not check(ready and ready[0] == 200, f"/readyz ({'TLS' if TLS else 'plain'}): {ready}; log:\n{open(tmp + '/scheduler.log').read()}"):
        raise SystemExit

    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "r-1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                          "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": "default",
                          "operation": "CREATE", "userInfo": {"username": "alice"}, "object": pod}}
    if webhook:
        code, body = https(webhook["clientConfig"]["service"]["path"], json.dumps(review).encode())
        resp = json.loads(body).get("response", {}) if code == 200 else {}
        patch = json.loads(base64.b64decode(resp.get("patch", "")) or "[]")
        check(resp.get("allowed") is True and any(p.get("path") == "/spec/schedulerName" and p.get("value") == "hami-scheduler"
                                                  for p in patch), f"webhook: {code} {body[:400]}")

    pod = None
    for _ in range(50):  # the informer's copy carries the uid the fake server gave the pod
        code, listed = 200, urllib.request.urlopen(f"{m.group(1)}/api/v1/namespaces/default/pods/train", timeout=10).read()
        pod = json.loads(listed)
        if pod.get("metadata", {}).get("uid"):
            break
        time.sleep(0.1)
    filter_port = ports.get("--extender-bind") if "--extender-bind" in help_text else ports["--http-bind"]

    def extender(path, body):  # kube-scheduler's call: the loopback listener once the binary has it
        if "--extender-bind" not in help_text:
            return https(path, body)
        res = urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{filter_port}{path}", data=body,
                                                            headers={"Content-Type": "application/json"}), timeout=10)
        return res.status, res.read().decode()

    code, body = extender("/filter", json.dumps({"Pod": pod, "NodeNames": ["gpu-1"]}).encode())
    check(code == 200 and json.loads(body).get("NodeNames") == ["gpu-1"], f"filter: {code} {body[:400]}")

    code, body = extender("/bind", json.dumps({"PodName": "train", "PodNamespace": "default",
                                               "PodUID": pod["metadata"]["uid"], "Node": "gpu-1"}).encode())
    check(code == 200 and not json.loads(body).get("Error"), f"bind: {code} {body[:400]}")
    bound = json.loads(urllib.request.urlopen(f"{m.group(1)}/api/v1/namespaces/default/pods/train", timeout=10).read())
    check(bound["spec"].get("nodeName") == "gpu-1", f"bind: pod not on gpu-1: {bound['spec'].get('nodeName')}")
    check("hami.io/vgpu-devices-to-allocate" in bound["metadata"].get("annotations", {}),
          f"filter: no decision annotation on the pod: {bound['metadata'].get('annotations')}")

    if NODE:
        run_node_agent(by, tmp, procs, bound)

    res = urllib.request.urlopen(f"http://127.0.0.1:{ports['--metrics-bind']}/metrics", timeout=10).read().decode()
    check(re.search(r'hami_build_info\{component="scheduler",version="[^"]+",revision="[^"]+"', res) is not None,
          "metrics: hami_build_info{component=\"scheduler\"} missing")
    if not failures:
        print(f"rendered_deployment_test ({'kustomize dev' if KUSTOMIZE_DEV else 'helm'}): scheduler with the rendered args "
              f"served /readyz ({'TLS, chart CA' if TLS else 'plain HTTP'}){', /webhook' if webhook else ''}, /filter, /bind, /metrics")
finally:
    for p in reversed(procs):
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if failures and os.path.exists(tmp + "/scheduler.log"):
        print("scheduler log:\n" + open(tmp + "/scheduler.log").read()[-3000:])
    subprocess.run(["rm", "-rf", tmp])

print(f"rendered_deployment_test: {len(failures)} failures")
sys.exit(1 if failures else 0)
