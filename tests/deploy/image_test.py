#!/usr/bin/python3
"""Real images: both images built by a Docker daemon exactly as docs/install.md says, then run.

1. A Docker daemon: the one `docker info` reaches, else `dockerd` started here (as root, nice 15,
   --iptables=false --bridge=none, its own data/exec root and socket under HAMI_DOCKERD_DIR) and
   stopped at the end.
2. The lines of docs/install.md's image-build block, run as written (docker/base-images.sh makes the
   base images from Debian's archive and this machine's CUDA headers; `docker build --target
   control-plane` and `--target node`), with <registry> and <tag> filled in with the chart's defaults
   (global.imageRegistry, appVersion): the images are then the ones the default manifests name.
3. The control-plane image, as its own user: `hami --version` names the commit of this tree and the
   chart's version; every subcommand's --help runs.
4. The manifests (Helm defaults, kustomize production and dev) against `docker inspect` and the images:
   each hami-cpp image they name is one the documented build made; a `hami` command is the image's
   ENTRYPOINT; every container runs as a user the image has (runAsNonRoot: a non-zero uid) and
   `hami <subcommand> --help` there knows each flag its args pass; no mount hides the command or what
   the init container copies; each absolute path an arg names is under one of its mounts or in the image.
5. The node image as the manifests run it (Helm defaults, kustomize production): the init container's
   command installs libvgpu.so (byte-identical to the image's) and ld.so.preload into the node
   directory that its hostPath volume names; the device plugin container, with its rendered command,
   env and mounts (plus what a cluster provides: kubeconfig, node name, and the fake NVML mounted
   read-only), finds both where its flags say, registers nvidia.com/gpu with the fake kubelet (its
   socket in the mounted device-plugin directory) and annotates the node in the fake API server.

Image sizes and build times are printed at the end (docs/benchmarks.md).

Skips (77) unless HAMI_IMAGE_TEST=1 (a cold build compiles the project in the image: minutes of every
core), when not root, or with no Docker daemon and no dockerd.

usage: image_test.py FAKE_KUBELET FAKE_APISERVER FAKE_NVML   (from the repository root)"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

FAKE_KUBELET, FAKE_API, FAKE_NVML = sys.argv[1:4]
ROOT = os.getcwd()
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL", what, flush=True)
    return cond


def skip(why):
    print(f"image_test: {why}: skipped")
    sys.exit(77)


if os.environ.get("HAMI_IMAGE_TEST") != "1":
    skip("set HAMI_IMAGE_TEST=1 to build and run both images (README, 'Tests')")
if os.geteuid() != 0:
    skip("needs root (dockerd, files the containers write)")
DOCKER = shutil.which("docker")
if not DOCKER:
    skip("no docker client")
ENV = dict(os.environ)


def docker(*args, check_rc=True, timeout=120, **kw):
    r = subprocess.run([DOCKER, *args], capture_output=True, text=True, env=ENV, timeout=timeout, **kw)
    if check_rc and r.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()[-2000:]}")
    return r


def daemon_up():
    return subprocess.run([DOCKER, "info"], capture_output=True, env=ENV).returncode == 0


# 1. The daemon.
dockerd = None
if not daemon_up():
    exe = shutil.which("dockerd")
    if not exe:
        skip("no Docker daemon and no dockerd (Debian: apt-get install docker.io)")
    ddir = os.environ.get("HAMI_DOCKERD_DIR", "/tmp/hami-image-test-dockerd")
    os.makedirs(ddir, exist_ok=True)
    ENV["DOCKER_HOST"] = f"unix://{ddir}/docker.sock"
    if not daemon_up():  # else: one this test left running earlier serves there; use it, leave it
        log = open(f"{ddir}/dockerd.log", "a")
        # nice: the image builds run in the daemon's children and must not starve the machine.
        dockerd = subprocess.Popen(["nice", "-n", "15", exe, "--iptables=false", "--bridge=none",
                                    f"--data-root={ddir}/data", f"--exec-root={ddir}/exec",
                                    f"--pidfile={ddir}/dockerd.pid", "-H", ENV["DOCKER_HOST"]],
                                   stdout=log, stderr=log, start_new_session=True)
        for _ in range(120):  # bounded: 60 s
            if daemon_up() or dockerd.poll() is not None:
                break
            time.sleep(0.5)
        if not daemon_up():
            print(f"image_test: dockerd did not start; its log ({ddir}/dockerd.log):")
            print(open(f"{ddir}/dockerd.log").read()[-3000:])
            dockerd.kill()
            sys.exit(1)
        print(f"image_test: started dockerd (pid {dockerd.pid}, {ENV['DOCKER_HOST']})")


def stop(p, grace_s=10):
    """SIGTERM, then SIGKILL after grace_s: a process this test started."""
    if p and p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


tmp = tempfile.mkdtemp(prefix="hami-image-test-")
procs, containers = [], []
try:
    # 2. docs/install.md's commands.
    values = yaml.safe_load(open("deploy/helm/hami/values.yaml"))
    chart = yaml.safe_load(open("deploy/helm/hami/Chart.yaml"))
    registry, tag = values["global"]["imageRegistry"], str(chart["appVersion"])
    doc = open("docs/install.md").read()
    m = re.search(r"<!-- image-build:begin.*?-->\s*```sh\n(.*?)```", doc, re.S)
    if not check(m is not None, "docs/install.md: no ```sh block after <!-- image-build:begin -->"):
        raise SystemExit
    commands = []
    for line in re.sub(r"\\\n\s*", " ", m.group(1)).splitlines():
        line = line.split(" #", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        if line:
            commands.append(line.replace("<registry>", registry).replace("<tag>", tag))
    images, build_s = {}, {}
    for cmd in commands:
        print(f"image_test: $ {cmd}", flush=True)
        start = time.monotonic()
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", cmd], cwd=ROOT, env=ENV, capture_output=True, text=True,
                           timeout=3600)
        took = time.monotonic() - start
        if r.returncode == 77 and cmd.startswith("docker/base-images.sh"):
            skip(f"docker/base-images.sh: {r.stdout.strip()} {r.stderr.strip()}")
        if not check(r.returncode == 0, f"`{cmd}` exits {r.returncode}:\n{(r.stdout + r.stderr)[-4000:]}"):
            raise SystemExit
        target = re.search(r"--target[ =](\S+)", cmd)
        if cmd.startswith("docker build") and target:
            images[target.group(1)] = re.search(r"(?:-t|--tag)[ =](\S+)", cmd).group(1)
            build_s[target.group(1)] = took
        print(f"image_test: done in {took:.0f} s", flush=True)
    if not check(set(images) == {"control-plane", "node"}, f"install.md builds targets {sorted(images)}"):
        raise SystemExit
    inspect = {t: json.loads(docker("image", "inspect", ref).stdout)[0] for t, ref in images.items()}
    by_ref = {ref: t for t, ref in images.items()}

    def image_uid(t):
        return (inspect[t]["Config"].get("User") or "0").split(":")[0]

    def run_in(t, *args, user=None, entrypoint=None):
        opts = ["--rm", "--network", "none"] + (["--user", user] if user else []) + \
               (["--entrypoint", entrypoint] if entrypoint else [])
        return docker("run", *opts, images[t], *args, check_rc=False, timeout=60)

    # 3. The control-plane image as its own user.
    cp = "control-plane"
    check(image_uid(cp) not in ("0", "root", ""), f"control-plane image runs as root ({inspect[cp]['Config'].get('User')!r})")
    r = run_in(cp, "--version")
    version_line = r.stdout.strip()
    print(f"image_test: control-plane `hami --version` as uid {image_uid(cp)}: {version_line}")
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if os.path.exists(os.path.join(ROOT, ".git")) and head.returncode == 0:
        check(f"(revision {head.stdout.strip()}," in version_line,
              f"hami --version in the image does not name this tree's commit {head.stdout.strip()}: {version_line!r}")
    else:
        print("NOTE: not a git checkout: the revision in the image is not checked")
    check(version_line.startswith(f"hami-cpp {tag} "), f"hami --version names a version other than the chart's {tag}: {version_line!r}")
    r = run_in(cp, "--help")
    subcommands = re.findall(r"^  (\S+)\s{2,}", r.stdout, re.M)
    check(r.returncode == 0 and "device-plugin" in subcommands, f"hami --help in the image: {r.stdout}{r.stderr}")
    for sub in subcommands:
        r = run_in(cp, sub, "--help")
        check(r.returncode == 0, f"control-plane: hami {sub} --help exits {r.returncode}: {r.stderr[-500:]}")
    print(f"image_test: control-plane: hami --version and {len(subcommands)} subcommands' --help ({' '.join(subcommands)}) ran")

    # 4. The manifests against the images.
    renderings = {}
    hr = subprocess.run([os.path.join(ROOT, "scripts/helm.sh")], capture_output=True, text=True)
    if hr.returncode == 0:
        helm = hr.stdout.strip().splitlines()[-1]
        renderings["helm defaults"] = subprocess.run([helm, "template", "hami", "deploy/helm/hami", "-n", "hami-system"],
                                                     capture_output=True, text=True, check=True).stdout
    else:
        print(f"NOTE: no helm ({hr.stderr.strip()}): the chart is not checked")
    if shutil.which("kubectl"):
        for o in ("production", "dev"):
            renderings[f"kustomize {o}"] = subprocess.run(["kubectl", "kustomize", f"deploy/overlays/{o}"],
                                                          capture_output=True, text=True, check=True).stdout
    else:
        print("NOTE: no kubectl: the kustomize overlays are not checked")
    check(renderings, "no manifests rendered (neither helm nor kubectl)")

    help_cache, exists_cache = {}, {}

    def flags_of(t, user, exe, sub):
        key = (t, user, exe, sub)
        if key not in help_cache:
            r = run_in(t, sub, "--help", user=user, entrypoint=exe)
            check(r.returncode == 0, f"{t}: {exe} {sub} --help as uid {user} exits {r.returncode}: {r.stderr[-400:]}")
            help_cache[key] = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", r.stdout))
        return help_cache[key]

    def in_image(t, path):
        if (t, path) not in exists_cache:
            exists_cache[(t, path)] = run_in(t, "-c", f'test -e "{path}"', entrypoint="/bin/sh").returncode == 0
        return exists_cache[(t, path)]

    def under(path, dirs):
        return any(path == d or path.startswith(d.rstrip("/") + "/") for d in dirs)

    def effective_user(pod_sc, c):
        sc = c.get("securityContext") or {}
        uid = sc.get("runAsUser", pod_sc.get("runAsUser"))
        non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot", False))
        return uid, non_root

    node_runs = []
    for name, text in renderings.items():
        docs = [d for d in yaml.safe_load_all(text) if d]
        for d in docs:
            if d["kind"] not in ("Deployment", "DaemonSet"):
                continue
            spec = d["spec"]["template"]["spec"]
            pod_sc = spec.get("securityContext") or {}
            where = f"{name}: {d['kind']}/{d['metadata']['name']}"
            ours = False
            for c in spec.get("initContainers", []) + spec["containers"]:
                if "hami-cpp/" not in c["image"]:
                    continue
                ours = True
                cw = f"{where} container {c['name']}"
                t = by_ref.get(c["image"])
                if not check(t is not None, f"{cw}: image {c['image']} is none the documented build makes ({sorted(by_ref)})"):
                    continue
                cfg = inspect[t]["Config"]
                cmd = (c.get("command") or cfg.get("Entrypoint") or []) + (c.get("args") or [])
                uid, non_root = effective_user(pod_sc, c)
                uid = str(uid) if uid is not None else image_uid(t)
                if non_root:
                    check(uid.isdigit() and uid != "0", f"{cw}: runAsNonRoot, but it would run as {uid!r} (image USER {cfg.get('User')!r})")
                mounts = [mm["mountPath"] for mm in c.get("volumeMounts", [])]
                check(not under(cmd[0], mounts), f"{cw}: a volume mount hides its command {cmd[0]}")
                if cmd[0].endswith("/hami"):
                    check(cmd[0] == (cfg.get("Entrypoint") or [None])[0],
                          f"{cw}: command {cmd[0]} is not the image's ENTRYPOINT {cfg.get('Entrypoint')}")
                    known = flags_of(t, uid, cmd[0], cmd[1])
                    for a in cmd[2:]:
                        flag, eq, val = a.partition("=")
                        if flag.startswith("-"):
                            check(flag in known, f"{cw}: hami {cmd[1]} in the image has no flag {flag}")
                        if eq and val.startswith("/"):
                            check(under(val, mounts) or in_image(t, val),
                                  f"{cw}: {flag}={val} is neither under a mount ({mounts}) nor in the image")
                else:
                    check(in_image(t, cmd[0]), f"{cw}: its command {cmd[0]} is not in image {c['image']}")
                    for src in re.findall(r"cp -f (/\S+) ", " ".join(cmd)):
                        check(not under(src, mounts), f"{cw}: a mount hides {src}, which it copies")
                        check(in_image(t, src), f"{cw}: copies {src}, which image {c['image']} does not have")
            if ours and d["kind"] == "DaemonSet" and not name.endswith(" dev") and \
                    all(c["image"] in by_ref for c in spec.get("initContainers", []) + spec["containers"]
                        if "hami-cpp/" in c["image"]):  # an image the build did not make: reported above
                node_runs.append((name, d, docs))
    print(f"image_test: images, commands, users, flags and mount paths of {len(renderings)} renderings checked"
          f" ({len(help_cache)} --help runs in the images)")

    # 5. The node agent as the manifests run it.
    fakes = os.path.dirname(os.path.realpath(FAKE_NVML))
    for name, ds, docs in node_runs:
        spec = ds["spec"]["template"]["spec"]
        pod_sc = spec.get("securityContext") or {}
        cms = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
        run_dir = tempfile.mkdtemp(dir=tmp)
        host = run_dir + "/host"
        vols = {v["name"]: v for v in spec["volumes"]}

        def volume_args(c):
            out = []
            for mm in c.get("volumeMounts", []):
                v = vols[mm["name"]]
                if "hostPath" in v:
                    src = host + v["hostPath"]["path"]
                elif "configMap" in v:
                    src = f"{run_dir}/configmap-{mm['name']}"
                    os.makedirs(src, exist_ok=True)
                    for k, val in cms[v["configMap"]["name"]].get("data", {}).items():
                        open(os.path.join(src, k), "w").write(val)
                else:
                    src = f"{run_dir}/volume-{mm['name']}"
                os.makedirs(src, exist_ok=True)
                out += ["-v", f"{src}:{mm['mountPath']}{':ro' if mm.get('readOnly') else ''}"]
            return out

        def user_args(c, t):
            uid, _ = effective_user(pod_sc, c)
            return ["--user", str(uid)] if uid is not None else []

        os.makedirs(host + "/var/lib/kubelet/device-plugins", exist_ok=True)
        init = next((c for c in spec.get("initContainers", []) if "hami-cpp/" in c["image"]), None)
        if not check(init is not None, f"{name}: the node agent has no init container of ours"):
            continue
        t = by_ref[init["image"]]
        r = docker("run", "--rm", "--network", "none", *user_args(init, t), *volume_args(init),
                   "--entrypoint", init["command"][0], images[t], *init["command"][1:], *(init.get("args") or []),
                   check_rc=False)
        if not check(r.returncode == 0, f"{name}: init container {init['name']} exits {r.returncode}: {r.stderr}"):
            continue
        dp = next(c for c in spec["containers"] if (c.get("command") or [""])[1:2] == ["device-plugin"])
        t = by_ref[dp["image"]]
        flags = dict(a.partition("=")[::2] for a in dp["command"][2:] if "=" in a)
        same_place = {v["hostPath"]["path"] for mm in dp["volumeMounts"] for v in [vols[mm["name"]]]
                      if "hostPath" in v and v["hostPath"]["path"] == mm["mountPath"]}
        lib = flags.get("--libvgpu-path", "/usr/local/vgpu/libvgpu.so")
        preload = flags.get("--ld-preload-path", "/usr/local/vgpu/ld.so.preload")
        hook_dir = flags.get("--container-hook-dir", "/usr/local/vgpu")
        ok = True
        for flag, path in (("--libvgpu-path", lib), ("--ld-preload-path", preload)):
            # Host paths the plugin hands to kubelet: its container must see them where the host has them.
            ok &= check(under(path, same_place), f"{name}: device plugin {flag}={path} is not mounted at its host path")
            ok &= check(os.path.isfile(host + path), f"{name}: after the init container, {flag}={path} does not exist on the node")
        if ok:
            src = re.search(r"cp -f (/\S+) ", " ".join(init["command"])).group(1)
            cat = subprocess.run([DOCKER, "run", "--rm", "--network", "none", "--entrypoint", "/bin/cat", images[t], src],
                                 capture_output=True, env=ENV, timeout=60)
            check(cat.returncode == 0 and cat.stdout == open(host + lib, "rb").read() and cat.stdout[:4] == b"\x7fELF",
                  f"{name}: {lib} on the node is not the image's {src}")
            lines = [x.strip() for x in open(host + preload) if x.strip() and not x.startswith("#")]
            check(lines == [hook_dir.rstrip("/") + "/libvgpu.so"],
                  f"{name}: {preload} names {lines}, not libvgpu.so where Allocate mounts it ({hook_dir})")

        # The fake API server (the node to annotate) and the fake kubelet, on this machine.
        seed = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "hami-system"}},
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1", "labels": {"gpu": "on"}},
                 "status": {"conditions": [{"type": "Ready", "status": "True"}]}}]
        open(run_dir + "/seed.json", "w").write(json.dumps(seed))
        api = subprocess.Popen([FAKE_API, "--host", "127.0.0.1", "--port", "0", "--seed", run_dir + "/seed.json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(api)
        url = re.search(r"(http://127\.0\.0\.1:\d+)", api.stdout.readline() or "")
        if not check(url is not None, f"{name}: the fake API server did not start"):
            continue
        url = url.group(1)
        open(run_dir + "/kubeconfig", "w").write(
            f"apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: c\n  cluster:\n    server: {url}\n"
            "users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: t\n  context:\n    cluster: c\n    user: u\n")
        plugin_dir = flags.get("--plugin-dir", "/var/lib/kubelet/device-plugins")
        pd_mount = max((mm for mm in dp["volumeMounts"] if under(plugin_dir, [mm["mountPath"]])),
                       key=lambda mm: len(mm["mountPath"]), default=None)
        if not check(pd_mount is not None and "hostPath" in vols[pd_mount["name"]],
                     f"{name}: --plugin-dir={plugin_dir} is not on a hostPath mount"):
            continue
        kubelet_dir = host + vols[pd_mount["name"]]["hostPath"]["path"] + plugin_dir[len(pd_mount["mountPath"]):]
        kubelet = subprocess.Popen([FAKE_KUBELET, "--plugin-dir", kubelet_dir, "--min-devices", "1", "--timeout-s", "60"],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(kubelet)
        check("serving" in (kubelet.stdout.readline() or ""), f"{name}: the fake kubelet did not start")
        env = []
        for e in dp.get("env", []):
            if "value" in e:
                env += ["-e", f"{e['name']}={e['value']}"]
            elif e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
                env += ["-e", f"{e['name']}=gpu-1"]
        cname = f"hami-image-test-dp-{os.getpid()}-{len(containers)}"
        containers.append(cname)
        docker("run", "-d", "--name", cname, "--network", "host", *user_args(dp, t), *volume_args(dp),
               "-v", f"{fakes}:/opt/hami-test/fakes:ro", "-v", f"{run_dir}/kubeconfig:/opt/hami-test/kubeconfig:ro",
               "-e", "NODE_NAME=gpu-1", *env,
               "-e", "FAKEGPU_DEVICES=NVIDIA A100-SXM4-80GB:81920:108;NVIDIA A100-SXM4-80GB:81920:108",
               "-e", "FAKEGPU_STATE=/tmp/fakegpu-state",
               "--entrypoint", dp["command"][0], images[t], *dp["command"][1:], *(dp.get("args") or []),
               "--kubeconfig=/opt/hami-test/kubeconfig",
               f"--nvml-library=/opt/hami-test/fakes/{os.path.basename(FAKE_NVML)}", "--register-interval=1")
        reg = json.loads(kubelet.stdout.readline() or "{}")
        logs = lambda: docker("logs", cname, check_rc=False).stderr[-3000:]  # noqa: E731
        if not check(reg.get("registered") == "nvidia.com/gpu" and reg.get("devices", 0) >= 2,
                     f"{name}: device plugin in the node image did not register with the fake kubelet: {reg}\n{logs()}"):
            continue
        annotation = None
        for _ in range(100):  # bounded: 20 s
            node = json.loads(urllib.request.urlopen(f"{url}/api/v1/nodes/gpu-1", timeout=10).read())
            annotation = node["metadata"].get("annotations", {}).get("hami.io/node-nvidia-register")
            if annotation:
                break
            time.sleep(0.2)
        check(annotation and annotation.count("GPU-") == 2,
              f"{name}: node gpu-1 not annotated with both fake GPUs: {annotation}\n{logs()}")
        print(f"image_test: {name}: node image: init container installed {lib} and {preload}; the device plugin "
              f"container registered nvidia.com/gpu ({reg['devices']} devices) and annotated the node")
        docker("rm", "-f", cname, check_rc=False)
        stop(kubelet)
        stop(api)

    sizes = {t: inspect[t]["Size"] / 1e6 for t in images}
    print("image_test: " + "; ".join(f"{t} {images[t]}: {sizes[t]:.0f} MB, `docker build` {build_s[t]:.0f} s"
                                     for t in images))
except SystemExit:
    pass
except (RuntimeError, subprocess.SubprocessError, OSError, KeyError, ValueError) as e:
    check(False, f"{type(e).__name__}: {e}")
finally:
    for c in containers:
        subprocess.run([DOCKER, "rm", "-f", c], capture_output=True, env=ENV)
    for p in procs:
        stop(p)
    shutil.rmtree(tmp, ignore_errors=True)
    if dockerd:
        stop(dockerd, grace_s=60)
        print("image_test: stopped the dockerd it started")

print(f"image_test: {len(failures)} failures")
sys.exit(1 if failures else 0)
