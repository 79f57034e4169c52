#!/usr/bin/env python3
"""The usage-aware sharing chain, live, with the real binaries (README.md; issue 27's end-to-end test):

  fake GPU + libvgpu + `hami monitor`  ->  Debian's `prometheus` scraping it every second
  ->  `hami recommend --prometheus`  ->  `hami scheduler` (webhook + extender) re-reading the
  recommendations, applying them at admission and placing by profile on the fake API server.

Each step asserts what it got, so a broken link fails the test with the step's name. Exit 77
(ctest SKIP) only when prometheus is not installed.

Usage: usage_chain_test.py HAMI FAKE_APISERVER LIBVGPU FAKES_DIR USAGE_WORKLOAD
"""
import base64
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HAMI, FAKE_API, LIBVGPU, FAKES, WORKLOAD = sys.argv[1:6]

CARD_MIB = 15360  # the fake Tesla T4, as the scheduler's nodes register it
UUID = {"node-a": "GPU-7e570000-0000-4000-8000-00000000000a",
        "node-b": "GPU-7e570000-0000-4000-8000-00000000000b"}
DECLARED_MIB = 7168  # the careful request of the Deployment's template: two fit a card, three do not
RESIDENT_MIB, LOAD_MIB = 1024, 4096  # what a replica holds, and one model load on top
CONTEXT_MIB = 300  # what the fake driver charges a CUDA context (FAKEGPU_CTX_OVERHEAD_MIB)
BUSY_MS, IDLE_MS = 100, 400  # a replica's kernels: busy a fifth of the time
RS = "web-5d4f8c7b9"  # the Deployment's ReplicaSet


def fail(step, what):
    print(f"FAIL [{step}]: {what}")
    raise SystemExit(1)


def ok(step, what):
    print(f"ok [{step}]: {what}", flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http(url, body=None, method=None, timeout=10):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method or ("POST" if data else "GET"),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def wait_for(step, what, probe, timeout_s=20, every_s=0.2):
    deadline = time.time() + timeout_s
    last = None
    while time.time() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every_s)
    fail(step, f"{what} (waited {timeout_s} s)")


def json_patch(obj, ops):
    """RFC 6902 add/replace/remove, enough for the webhook's patches."""
    obj = json.loads(json.dumps(obj))
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = obj
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        last = parts[-1]
        if op["op"] in ("add", "replace"):
            if isinstance(parent, list):
                if last == "-":
                    parent.append(op["value"])
                elif op["op"] == "add":
                    parent.insert(int(last), op["value"])
                else:
                    parent[int(last)] = op["value"]
            else:
                parent[last] = op["value"]
        elif op["op"] == "remove":
            del parent[int(last) if isinstance(parent, list) else last]
        else:
            raise ValueError(f"patch op {op['op']}")
    return obj


def node(name):
    devs = [{"id": UUID[name], "index": 0, "count": 10, "devmem": CARD_MIB, "devcore": 100,
             "type": "NVIDIA-Tesla-T4", "health": True, "mode": "hami-core"}]
    alloc = {"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": "10"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {"hami.io/node-nvidia-register": json.dumps(devs)}},
            "status": {"capacity": alloc, "allocatable": alloc, "conditions": [{"type": "Ready", "status": "True"}]}}


def replica(name, apply="true", gpumem=DECLARED_MIB):
    """A pod of Deployment web as its ReplicaSet makes it: the template asks one GPU and the careful
    gpumem, and opts the workload in (hami.io/usage-apply)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml", "labels": {"app": "web", "pod-template-hash": RS[4:]},
                         "annotations": {"hami.io/usage-apply": apply},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": RS,
                                              "uid": "rs-web-1", "controller": True}]},
            "spec": {"containers": [{"name": "main", "image": "serving",
                                     "resources": {"limits": {"nvidia.com/gpu": "1",
                                                              "nvidia.com/gpumem": str(gpumem)}}}]}}


def kube_state_metrics(api):
    """A stand-in for kube-state-metrics (not part of the fakes): kube_pod_owner of every pod the fake
    API server holds, read at each scrape, and kube_replicaset_owner of web's ReplicaSet (the fakes
    run no Deployment controller), in kube-state-metrics' names and labels."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            pods = json.loads(http(f"{api}/api/v1/namespaces/ml/pods")[1]).get("items", [])
            out = ["# TYPE kube_pod_owner gauge"]
            for p in pods:
                md = p["metadata"]
                for o in md.get("ownerReferences") or [{"kind": "<none>", "name": "<none>", "controller": None}]:
                    ctl = "<none>" if o.get("controller") is None else str(o["controller"]).lower()
                    out.append(f'kube_pod_owner{{namespace="ml",pod="{md["name"]}",uid="{md.get("uid", "")}",'
                               f'owner_kind="{o["kind"]}",owner_name="{o["name"]}",owner_is_controller="{ctl}"}} 1')
            out += ["# TYPE kube_replicaset_owner gauge",
                    f'kube_replicaset_owner{{namespace="ml",replicaset="{RS}",owner_kind="Deployment",'
                    'owner_name="web",owner_is_controller="true"} 1', ""]
            body = "\n".join(out).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main():
    if not shutil.which("prometheus"):
        print("prometheus not installed (Debian package prometheus): skipped")
        return 77
    tmp = tempfile.mkdtemp(prefix="hami-usage-chain-")
    procs, logs, keep = [], {}, False
    started = time.time()

    def spawn(name, argv, env=None, stdin=None):
        log = open(f"{tmp}/{name}.log", "w")
        logs[name] = f"{tmp}/{name}.log"
        p = subprocess.Popen(argv, stdout=log if stdin is None else subprocess.PIPE, stderr=log,
                             stdin=stdin, env=env, text=True)
        procs.append(p)
        return p

    try:
        # ---- The fake API server: namespace ml, two nodes of one 15,360 MiB card each.
        seed = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}, node("node-a"), node("node-b")]
        json.dump(seed, open(f"{tmp}/seed.json", "w"))
        api_p = subprocess.Popen([FAKE_API, "--host", "127.0.0.1", "--port", "0", "--seed", f"{tmp}/seed.json"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(api_p)
        m = re.search(r"(http://127\.0\.0\.1:\d+)", api_p.stdout.readline())
        if not m:
            fail("setup", "fake-apiserver did not start")
        api = m.group(1)
        open(f"{tmp}/kubeconfig", "w").write(
            f"apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: c\n  cluster:\n    server: {api}\n"
            "users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: t\n  context:\n    cluster: c\n    user: u\n")

        # ---- hami scheduler: the usage rule on for ml, recommendations re-read every second (none yet).
        recs_path = f"{tmp}/recs.json"
        json.dump({"workloads": {}}, open(recs_path, "w"))
        sport, eport = free_port(), free_port()
        sched = f"http://127.0.0.1:{sport}"
        ext = f"http://127.0.0.1:{eport}"
        spawn("scheduler", [HAMI, "scheduler", "--kubeconfig", f"{tmp}/kubeconfig", "--http-bind", f"127.0.0.1:{sport}",
                            "--extender-bind", f"127.0.0.1:{eport}", "--metrics-bind", "",
                            "--usage-overcommit-pct", "200", "--usage-namespaces", "ml",
                            "--usage-recommendations", recs_path, "--usage-recommendations-check-s", "1"])

        # ---- The node: fake GPU (one T4) seen by hami monitor and the replicas through libvgpu.
        fake_env = dict(os.environ, FAKEGPU_DEVICES=f"Tesla T4:{CARD_MIB}:40:{UUID['node-a']}",
                        FAKEGPU_STATE=f"{tmp}/fakegpu.state", FAKEGPU_CTX_OVERHEAD_MIB=str(CONTEXT_MIB),
                        LD_LIBRARY_PATH=FAKES)
        regions = f"{tmp}/containers"
        os.makedirs(regions)
        mport = free_port()
        spawn("monitor", [HAMI, "monitor", "--metrics-bind", f"127.0.0.1:{mport}", "--region-root", regions,
                          "--node-name", "node-a", "--kubeconfig", f"{tmp}/kubeconfig",
                          "--nvml-library", f"{FAKES}/libnvidia-ml.so.1"], env=fake_env)

        # ---- Prometheus (Debian's) scraping the monitor (and the pods' owners) every second.
        ksm = kube_state_metrics(api)
        pport = free_port()
        prom = f"http://127.0.0.1:{pport}"
        open(f"{tmp}/prometheus.yml", "w").write(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n"
            f"- job_name: hami-monitor\n  static_configs:\n  - targets: ['127.0.0.1:{mport}']\n"
            f"- job_name: kube-state-metrics\n  static_configs:\n  - targets: ['127.0.0.1:{ksm.server_port}']\n")
        spawn("prometheus", ["prometheus", f"--config.file={tmp}/prometheus.yml", f"--storage.tsdb.path={tmp}/tsdb",
                             f"--web.listen-address=127.0.0.1:{pport}"])

        def up(url):
            try:
                return http(url, timeout=2)[0] == 200
            except OSError:
                return False
        wait_for("setup", "hami scheduler /readyz", lambda: up(f"{sched}/readyz"), 30)
        wait_for("setup", "hami monitor /healthz", lambda: up(f"http://127.0.0.1:{mport}/healthz"), 30)
        wait_for("setup", "prometheus /-/ready", lambda: up(f"{prom}/-/ready"), 30)
        ok("setup", f"fake API server, hami scheduler, hami monitor and prometheus up in {time.time() - started:.1f} s")

        def admit(pod):
            review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                      "request": {"uid": "r-" + pod["metadata"]["name"], "kind": {"group": "", "version": "v1", "kind": "Pod"},
                                  "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": "ml",
                                  "name": pod["metadata"]["name"], "operation": "CREATE",
                                  "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
                                  "object": pod}}
            code, body = http(f"{sched}/webhook", review)
            resp = json.loads(body).get("response", {}) if code == 200 else {}
            if resp.get("allowed") is not True:
                fail("webhook", f"{pod['metadata']['name']}: {code} {body[:400]}")
            patched = json_patch(pod, json.loads(base64.b64decode(resp.get("patch", "")) or "[]"))
            code, body = http(f"{api}/api/v1/namespaces/ml/pods", patched)
            if code not in (200, 201):
                fail("create", f"{pod['metadata']['name']}: {code} {body[:300]}")
            return json.loads(body)

        def filter_(pod, nodes):
            code, body = http(f"{ext}/filter", {"Pod": pod, "NodeNames": nodes})
            if code != 200:
                fail("filter", f"{pod['metadata']['name']}: {code} {body[:300]}")
            return json.loads(body)

        def bind(pod, node_name):
            md = pod["metadata"]
            code, body = http(f"{ext}/bind", {"PodName": md["name"], "PodNamespace": "ml", "PodUID": md["uid"],
                                              "Node": node_name})
            if code != 200 or json.loads(body).get("Error"):
                fail("bind", f"{md['name']}: {code} {body[:300]}")
            stored = json.loads(http(f"{api}/api/v1/namespaces/ml/pods/{md['name']}")[1])
            if stored["spec"].get("nodeName") != node_name:
                fail("bind", f"{md['name']} not on {node_name}")
            return stored

        def booked(stored):
            """(GPU uuid, MiB) of the decision the extender wrote on the pod."""
            ann = stored["metadata"].get("annotations", {}).get("hami.io/vgpu-devices-to-allocate", "")
            m = re.match(r"([^,]+),NVIDIA,(\d+),", ann)
            if not m:
                fail("decision", f"{stored['metadata']['name']}: hami.io/vgpu-devices-to-allocate = {ann!r}")
            return m.group(1), int(m.group(2))

        # ---- Phase 1: two replicas of ml/web placed as the user declared them (7,168 MiB, no
        # recommendation yet), running under libvgpu on node-a's GPU.
        first = [f"{RS}-x2x7k", f"{RS}-q8vzt"]
        workers = {}
        for name in first:
            created = admit(replica(name))
            if "hami.io/usage-profile" in created["metadata"].get("annotations", {}):
                fail("webhook", f"{name} got a profile before there is a recommendation")
            res = filter_(created, ["node-a"])
            if res.get("NodeNames") != ["node-a"]:
                fail("filter", f"{name}: {res}")
            stored = bind(created, "node-a")
            gpu, mib = booked(stored)
            if (gpu, mib) != (UUID["node-a"], DECLARED_MIB):
                fail("decision", f"{name}: booked {mib} MiB on {gpu}")
            uid = stored["metadata"]["uid"]
            cache = f"{regions}/{uid}_main"
            os.makedirs(cache)  # as the device plugin's Allocate does
            env = dict(fake_env, LD_PRELOAD=LIBVGPU, CUDA_DEVICE_MEMORY_SHARED_CACHE=f"{cache}/vgpu.cache",
                       CUDA_DEVICE_MEMORY_LIMIT_0=f"{mib}m", LIBCUDA_LOG_LEVEL="1")
            w = spawn(name, [WORKLOAD, str(RESIDENT_MIB), str(BUSY_MS), str(IDLE_MS)], env=env, stdin=subprocess.PIPE)
            if w.stdout.readline().strip() != "ready":
                fail("workload", f"{name} did not start: {open(logs[name]).read()[-500:]}")
            workers[name] = w
        ok("phase 1", f"{', '.join(first)} admitted as declared ({DECLARED_MIB} MiB), bound to node-a, "
                      f"running under libvgpu ({RESIDENT_MIB} MiB resident, busy {BUSY_MS}/{BUSY_MS + IDLE_MS} ms)")

        def prom_query(q, at=None):
            params = {"query": q}
            if at is not None:
                params["time"] = str(at)
            code, body = http(f"{prom}/api/v1/query?" + urllib.parse.urlencode(params))
            if code != 200:
                fail("prometheus", f"{q}: {code} {body[:300]}")
            return {r["metric"].get("pod", ""): float(r["value"][1]) for r in json.loads(body)["data"]["result"]}

        mem_q = 'sum by (pod) (hami_vgpu_memory_used_bytes{namespace="ml"})'
        seen = wait_for("prometheus", "both replicas' memory scraped from hami monitor",
                        lambda: (lambda r: r if set(r) == set(first) and min(r.values()) > 0 else None)(prom_query(mem_q)),
                        30, 0.5)
        resident = {p: int(v) >> 20 for p, v in seen.items()}
        if set(resident.values()) != {RESIDENT_MIB + CONTEXT_MIB}:
            fail("prometheus", f"resident {resident} MiB, want {RESIDENT_MIB} + the {CONTEXT_MIB} MiB context each")
        t_seen = time.time()
        ok("prometheus", f"scraped hami monitor: resident {resident} MiB")

        # ---- The model load lands in the minute after the first resident samples (recommend reads
        # one step a minute, each step's peak): resident-only minute, then the minute with the load.
        boundary = (int(t_seen) // 60 + 1) * 60
        if (boundary + 60) % 3600 == 0:
            boundary += 60  # the step of the load and a resident-only step in one hour (a profile level per hour)
        print(f"waiting {boundary + 1 - time.time():.0f} s for the minute boundary", flush=True)
        time.sleep(max(0.0, boundary + 1 - time.time()))
        loader = workers[first[0]]
        loader.stdin.write(f"load {LOAD_MIB}\n")
        loader.stdin.flush()
        if loader.stdout.readline().strip() != f"loaded {LOAD_MIB}":
            fail("workload", f"{first[0]} could not load {LOAD_MIB} MiB: {open(logs[first[0]]).read()[-500:]}")
        high = wait_for("prometheus", f"{first[0]}'s load scraped",
                        lambda: (lambda r: r if r.get(first[0], 0) >= (resident[first[0]] + LOAD_MIB) * 2**20 else None)(
                            prom_query(mem_q)), 15, 0.5)
        peak_mib = int(high[first[0]]) >> 20
        if peak_mib != RESIDENT_MIB + CONTEXT_MIB + LOAD_MIB:
            fail("prometheus", f"{first[0]} held {peak_mib} MiB with the load, want {RESIDENT_MIB + CONTEXT_MIB + LOAD_MIB}")
        time.sleep(2)  # a few more samples at the peak
        loader.stdin.write("unload\n")
        loader.stdin.flush()
        if loader.stdout.readline().strip() != "unloaded":
            fail("workload", f"{first[0]} could not unload")
        if time.time() >= boundary + 59:
            fail("timing", "the load did not stay within one minute")
        ok("workload", f"{first[0]} loaded a model: {peak_mib} MiB, scraped, unloaded")

        # ---- hami recommend --prometheus: the window's last step is the minute holding the load.
        end = boundary + 60
        argv = [HAMI, "recommend", "--prometheus", prom, "--window", "2m", "--end", str(end),
                "--gpu-memory-gib", str(CARD_MIB / 1024)]
        rec = subprocess.run(argv + ["--format", "json"], capture_output=True, text=True, timeout=60)
        if rec.returncode != 0 or rec.stderr:
            fail("recommend", f"rc {rec.returncode}: {rec.stderr}")  # no stderr: the owners were read
        table = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        print(table.stdout, end="")
        out = json.loads(rec.stdout)
        web = out["workloads"].get("ml/web")
        if web is None:
            fail("recommend", f"no workload ml/web: {rec.stdout[:400]}")
        want_pods = {f"ml/{p}" for p in first}
        if set(out["pods"]) != want_pods or any(out["pods"][p]["workload"] != "ml/web" for p in want_pods):
            fail("recommend", f"pods {out['pods']}")
        r_mib = web["gpumem_mib"]
        want_r = math.ceil(peak_mib * 105 / 100 / 256) * 256  # the peak + 5 %, in 256 MiB steps
        if r_mib != want_r:
            fail("recommend", f"gpumem {r_mib} MiB, want {want_r} (peak {peak_mib} MiB + 5 %)")
        prof = dict(kv.split("=", 1) for kv in web["profile"].split(";")[1:])
        hour_mem = [v for v in prof["mem"].split(",") if v != "-"]
        if int(prof["peak"]) != peak_mib or set(hour_mem) != {str(max(resident.values()))}:
            fail("recommend", f"profile {web['profile'][:200]}: want peak {peak_mib}, hour level {max(resident.values())}")
        duty = int(prof["all"].split(",")[1])
        if not 500 <= duty <= 4000:
            fail("recommend", f"duty {duty / 100} %, want about {100 * BUSY_MS // (BUSY_MS + IDLE_MS)} %")
        if not (2 * r_mib <= CARD_MIB < 3 * r_mib):
            fail("scenario", f"recommended {r_mib} MiB: 3 x it must pass the {CARD_MIB} MiB card and 2 x not")
        ok("recommend", f"ml/web (pods by their owners, kube_pod_owner): gpumem {r_mib} MiB (peak {peak_mib} + 5 %), profile level "
                        f"{hour_mem[0]} MiB, peak {prof['peak']} MiB, duty {duty / 100} %")

        # ---- The scheduler re-reads the file (renamed over it, as kubelet updates a ConfigMap).
        open(f"{tmp}/recs.new", "w").write(rec.stdout)
        os.rename(f"{tmp}/recs.new", recs_path)

        def metric(name):
            body = http(f"{sched}/metrics")[1]
            m = re.search(rf"^{name} (\S+)$", body, re.M)
            return float(m.group(1)) if m else None
        wait_for("reload", "hami_scheduler_usage_recommendations 1",
                 lambda: metric("hami_scheduler_usage_recommendations") == 1, 15)
        ok("reload", "hami scheduler loaded the recommendation (hami_scheduler_usage_recommendations 1)")

        # ---- Phase 2: the Deployment scales up; each new replica goes through the webhook, which
        # sets the recommendation, and /filter + /bind place it by its profile.
        second = [f"{RS}-m4nnb", f"{RS}-t7wzl", f"{RS}-b9kcd"]
        placed = []
        for i, name in enumerate(second):
            if i == 2:
                # Control: the same limit without a profile (the workload opted out of the
                # recommendation, asking the recommended gpumem itself) fits nowhere.
                ctl = admit(replica(f"{RS}-ctl00", apply="false", gpumem=r_mib))
                res = filter_(ctl, ["node-a", "node-b"])
                if res.get("NodeNames"):
                    fail("control", f"{r_mib} MiB without a profile was placed: {res}")
                ok("control", f"{r_mib} MiB without a profile fits neither card: {res.get('FailedNodes')}")
            created = admit(replica(name))
            ann = created["metadata"].get("annotations", {})
            lim = created["spec"]["containers"][0]["resources"]["limits"]
            if lim.get("nvidia.com/gpumem") != str(r_mib) or ann.get("hami.io/usage-profile") != web["profile"]:
                fail("webhook", f"{name}: gpumem {lim.get('nvidia.com/gpumem')}, profile "
                                f"{ann.get('hami.io/usage-profile', '')[:80]!r}; want {r_mib} and the recommended profile")
            applied = json.loads(ann.get("hami.io/usage-applied", "{}"))
            if applied.get("workload") != "ml/web" or applied.get("was_gpumem") != DECLARED_MIB:
                fail("webhook", f"{name}: hami.io/usage-applied {applied}")
            res = filter_(created, ["node-a", "node-b"])
            if res.get("NodeNames") != ["node-b"]:
                fail("filter", f"{name}: {res}")
            stored = bind(created, "node-b")
            if booked(stored) != (UUID["node-b"], r_mib):
                fail("decision", f"{name}: booked {booked(stored)}")
            placed.append(name)
            ok("placed", f"{name}: gpumem {DECLARED_MIB} -> {r_mib} MiB + profile -> node-b, its GPU booked "
                         f"{r_mib * len(placed)} / {CARD_MIB} MiB")

        # Events: one per new replica, naming the change.
        def events():
            items = json.loads(http(f"{api}/api/v1/namespaces/ml/events")[1]).get("items", [])
            got = {e["involvedObject"]["name"]: e["message"] for e in items if e.get("reason") == "UsageRecommendationApplied"}
            return got if set(second) <= set(got) else None
        got = wait_for("event", "an UsageRecommendationApplied Event for each new replica", events, 15)
        for name in second:
            if f"nvidia.com/gpumem {r_mib} (was {DECLARED_MIB})" not in got[name]:
                fail("event", f"{name}: {got[name]}")
        if set(got) != set(second):
            fail("event", f"Events for {sorted(set(got) - set(second))} too")
        ok("event", f"UsageRecommendationApplied on {len(second)} pods: {got[second[0]][:140]}")
        profiled = metric("hami_scheduler_usage_profiled_pods")
        over = metric("hami_scheduler_usage_overcommitted_gpus")
        if profiled != 3 or over != 1:
            fail("metrics", f"profiled pods {profiled}, overcommitted GPUs {over}; want 3 and 1")
        ok("metrics", f"hami_scheduler_usage_profiled_pods 3, overcommitted GPUs 1 "
                      f"({3 * r_mib} MiB booked on a {CARD_MIB} MiB card)")
        print(f"usage_chain: passed in {time.time() - started:.1f} s")
        return 0
    except BaseException:
        keep = True
        raise
    finally:
        if "ksm" in locals():
            ksm.shutdown()
        for p in reversed(procs):
            if p.stdin:
                try:
                    p.stdin.close()
                except OSError:
                    pass
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if keep:
            for name, path in logs.items():
                print(f"---- {name} log (last 1500 bytes):\n{open(path).read()[-1500:]}")
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
