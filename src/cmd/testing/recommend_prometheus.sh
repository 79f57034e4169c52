#!/bin/bash
# hami recommend --prometheus against Debian's real Prometheus (package prometheus; skipped with 77
# when it is absent): a six-hour usage trace is written both as a hami-usage-trace v1 file and as
# the series hami monitor exports (OpenMetrics, backfilled with promtool tsdb create-blocks-from),
# Prometheus serves them, and the recommendation read through query_range must be byte for byte the
# one read from the file. Then: a namespace filter, and what the user sees for a wrong URL and a
# forged namespace.
set -euo pipefail
hami=$1
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
  echo "prometheus or promtool not installed (Debian package prometheus): skipped"
  exit 77
fi
dir=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; [ -f "$dir/prom.log" ] && tail -20 "$dir/prom.log"; exit 1; }

# The UTC midnight two days ago: the data lies in the past, well within retention.
base=$(( ($(date +%s) / 86400 - 2) * 86400 ))
python3 - "$dir" "$base" <<'PY'
import random, sys
d, base = sys.argv[1], int(sys.argv[2])
rng = random.Random(27)
# (namespace, pod, workload, first minute, last minute, resident MiB, load spike MiB)
pods = [("ml", "web-5d4f8c7b9-x2x7k", "ml/web", 0, 359, 20000, 47000),
        ("ml", "web-5d4f8c7b9-q8vzt", "ml/web", 10, 300, 21000, 30000),
        ("ml", "web-5d4f8c7b9-m4nnb", "ml/web", 120, 359, 19500, 25000),
        ("ml", "db-0", "ml/db", 0, 359, 8000, 9000),
        ("ml", "db-1", "ml/db", 30, 200, 8100, 8100),
        ("other", "solo", "other/solo", 50, 250, 3000, 6000),
        # Workloads only the owners name (kube_pod_owner below): a Job's pod, whose name alone
        # would make it a workload of its own, and a pod of no controller whose name looks like a
        # StatefulSet's.
        ("ml", "train-x7k2p", "ml/train", 20, 330, 12000, 15000),
        ("ml", "worker-2", "ml/worker-2", 40, 359, 5000, 5500)]
# What kube-state-metrics exports: (namespace, object, owner kind, owner name, controller).
pod_owners = [("ml", "web-5d4f8c7b9-x2x7k", "ReplicaSet", "web-5d4f8c7b9", "true"),
              ("ml", "web-5d4f8c7b9-q8vzt", "ReplicaSet", "web-5d4f8c7b9", "true"),
              ("ml", "web-5d4f8c7b9-m4nnb", "ReplicaSet", "web-5d4f8c7b9", "true"),
              ("ml", "db-0", "StatefulSet", "db", "true"), ("ml", "db-1", "StatefulSet", "db", "true"),
              ("other", "solo", "<none>", "<none>", "<none>"),
              ("ml", "train-x7k2p", "Job", "train", "true"),
              ("ml", "worker-2", "<none>", "<none>", "<none>")]
rs_owners = [("ml", "web-5d4f8c7b9", "Deployment", "web", "true")]
rows, mem, duty = [], {}, {}
for ns, pod, wl, first, last, resident, spike in pods:
    for m in range(first, last + 1):
        mib = spike if m % 97 == 3 else resident + rng.randrange(0, 512)
        du = rng.randrange(0, 400) / 4 if rng.random() < 0.3 else 0.0  # quarter percents: exact
        rows.append((m, f"{ns}/{pod}", du, mib, wl))
        mem.setdefault((ns, pod), []).append((base + 60 * m, mib * 1048576))
        duty.setdefault((ns, pod), []).append((base + 60 * m, du))
rows.sort(key=lambda r: (r[0], r[1].encode()))
with open(f"{d}/trace.csv", "w") as f:
    f.write("minute,pod,duty_pct,mem_mib,workload\n")
    for m, pod, du, mib, wl in rows:
        f.write(f"{m},{pod},{du:.2f},{mib},{wl}\n")
with open(f"{d}/metrics.om", "w") as f:
    for name, series in (("hami_vgpu_memory_used_bytes", mem),
                         ("hami_container_device_utilization_ratio", duty)):
        f.write(f"# TYPE {name} gauge\n")
        for (ns, pod), points in sorted(series.items()):
            labels = (f'zone="vGPU",namespace="{ns}",pod="{pod}",container="main",'
                      f'vdevice_index="0",device_uuid="GPU-{pod}"')
            for t, v in points:
                f.write(f"{name}{{{labels}}} {v} {t}\n")
    for name, label, rows_of in (("kube_pod_owner", "pod", pod_owners),
                                 ("kube_replicaset_owner", "replicaset", rs_owners)):
        f.write(f"# TYPE {name} gauge\n")
        for ns, obj, kind, owner, ctl in rows_of:
            labels = (f'namespace="{ns}",{label}="{obj}",owner_kind="{kind}",'
                      f'owner_name="{owner}",owner_is_controller="{ctl}"')
            for m in range(0, 360, 5):
                f.write(f"{name}{{{labels}}} 1 {base + 60 * m}\n")
    f.write("# EOF\n")
PY
promtool tsdb create-blocks-from openmetrics "$dir/metrics.om" "$dir/data" >"$dir/backfill.log" 2>&1 ||
  fail "promtool backfill: $(tail -5 "$dir/backfill.log")"
printf 'global:\n  scrape_interval: 15s\nscrape_configs: []\n' >"$dir/prom.yml"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
prometheus --config.file="$dir/prom.yml" --storage.tsdb.path="$dir/data" \
  --storage.tsdb.retention.time=30d --web.listen-address="127.0.0.1:$port" >"$dir/prom.log" 2>&1 &
pid=$!
url="http://127.0.0.1:$port"
for _ in $(seq 1 150); do
  curl -fsS "$url/-/ready" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -fsS "$url/-/ready" >/dev/null || fail "prometheus did not become ready"

end=$((base + 359 * 60))
"$hami" recommend --usage "$dir/trace.csv" --format json >"$dir/file.json" || fail "recommend --usage"
"$hami" recommend --prometheus "$url" --window 359m --end "$end" --format json >"$dir/prom.json" ||
  fail "recommend --prometheus"
cmp -s "$dir/file.json" "$dir/prom.json" || {
  diff "$dir/file.json" "$dir/prom.json" | head -20
  fail "the recommendation read from Prometheus differs from the file's"
}
for w in ml/web ml/db other/solo ml/train ml/worker-2; do
  grep -q "\"$w\"" "$dir/prom.json" || fail "no workload $w"
done
echo "ok: --prometheus = --usage ($(wc -c <"$dir/prom.json") bytes of JSON, workloads ml/web ml/db other/solo ml/train ml/worker-2 from the owners)"

# By names alone the Job's pod is a workload of its own and worker-2 joins a StatefulSet "worker".
"$hami" recommend --prometheus "$url" --window 359m --end "$end" --workloads names --format json \
  >"$dir/names.json" || fail "recommend --workloads names"
python3 -c 'import json,sys; w=set(json.load(open(sys.argv[1]))["workloads"]); sys.exit(0 if {"ml/train-x7k2p","ml/worker"} <= w and "ml/train" not in w else 1)' \
  "$dir/names.json" || fail "--workloads names read $(head -c 300 "$dir/names.json")"
echo "ok: --workloads names: ml/train-x7k2p and ml/worker, as the pod names say"

# A namespace filter reads only that namespace.
"$hami" recommend --prometheus "$url" --window 359m --end "$end" --namespace other --format json \
  >"$dir/other.json" || fail "recommend --namespace other"
python3 -c 'import json,sys; w=json.load(open(sys.argv[1]))["workloads"]; sys.exit(0 if list(w)==["other/solo"] else 1)' \
  "$dir/other.json" || fail "--namespace other read $(head -c 300 "$dir/other.json")"
echo "ok: --namespace other reads other/solo only"

# What goes wrong says so (exit 1, one line naming the cause).
expect_error() {
  local want=$1
  shift
  if "$hami" recommend "$@" >"$dir/out" 2>"$dir/err"; then fail "recommend $* succeeded"; fi
  grep -q -- "$want" "$dir/err" || fail "recommend $*: stderr '$(cat "$dir/err")' lacks '$want'"
  echo "ok: $* -> $(head -c 160 "$dir/err")"
}
expect_error "Prometheus answered HTTP 404" --prometheus "$url/nothing-here" --window 1h --end "$end"
expect_error "is not a Kubernetes namespace name" --prometheus "$url" --namespace 'ml"} or vector(1) #' --end "$end"
expect_error "has no hami_vgpu_memory_used_bytes" --prometheus "$url" --window 1h --end $((base - 86400))
expect_error "is not a duration" --prometheus "$url" --window 6x
