#!/bin/bash
# hami scheduler --dra-placement on the fake API server (docs/dra.md, "Placement"): the real binary's
# /filter drops the node whose GPU an allocated claim fills and /prioritize ranks the other first for
# a pod with a pending claim of our driver; without the flag /prioritize answers 0 everywhere and
# /filter does not judge the claims.
set -euo pipefail
hami=$1
fake=$2
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; tail -20 "$dir"/sched*.log; exit 1; }

python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
D = "hami-core-gpu.project-hami.io"
def gpu():
    return {"name": "gpu-0", "allowMultipleAllocations": True,
            "attributes": {"type": {"string": "hami-gpu"}, "productName": {"string": "A100"}},
            "capacity": {"memory": {"value": "16Gi", "requestPolicy": {"default": "16Gi", "validRange": {"min": "1Mi", "step": "1Mi"}}},
                         "cores": {"value": "100", "requestPolicy": {"default": "100", "validRange": {"min": "0", "max": "100", "step": "1"}}}}}
def slice_(node):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": node + "-gpu"},
            "spec": {"driver": D, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": [gpu()]}}
def claim(name, mem, cores, node=None):
    c = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": "ml"},
         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": D, "count": 1,
                  "capacity": {"requests": {"memory": mem, "cores": str(cores)}}}}]}}}
    if node:
        c["status"] = {"allocation": {"devices": {"results": [{"request": "gpu", "driver": D, "pool": node, "device": "gpu-0",
                       "shareID": "8f3a7c1e-1234-4abc-8def-0123456789ab", "consumedCapacity": {"memory": mem, "cores": str(cores)}}]},
                       "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    return c
objs = [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": D},
         "spec": {"selectors": [{"cel": {"expression": 'device.driver == "%s"' % D}}]}},
        slice_("n1"), slice_("n2"), claim("full", "16Gi", 100, "n1"), claim("want", "4Gi", 25),
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}}]
json.dump(objs, open(d + "/seed.json", "w"))
pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml", "uid": "uid-p"},
       "spec": {"schedulerName": "hami-scheduler", "containers": [{"name": "c", "image": "x"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": "want"}]}}
json.dump({"Pod": pod, "Nodes": None, "NodeNames": ["n1", "n2"]}, open(d + "/args.json", "w"))
PY

"$fake" --seed "$dir/seed.json" >"$dir/fake.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do grep -q listening "$dir/fake.log" && break; sleep 0.1; done
api=$(grep -o 'http://[0-9.:]*' "$dir/fake.log" | head -1)
[ -n "$api" ] || fail "fake-apiserver did not start"
printf 'apiVersion: v1\nkind: Config\nclusters: [{name: f, cluster: {server: "%s"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: f, user: u}}]\ncurrent-context: c\n' \
  "$api" >"$dir/kubeconfig"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# Starts hami scheduler with "$@" and sets $ext to its extender's address.
start() {
  ext="127.0.0.1:$(port)"
  "$hami" scheduler --kubeconfig "$dir/kubeconfig" --http-bind "127.0.0.1:$(port)" --extender-bind "$ext" \
    --metrics-bind "" "$@" >"$dir/sched$#.log" 2>&1 &
  pids+=($!)
}
call() { curl -sS -XPOST --data @"$dir/args.json" "http://$ext/$1"; }
# Waits up to 10 s for /filter to answer without an Error.
settled() {
  for _ in $(seq 1 100); do
    call filter 2>/dev/null | grep -q '"Error":""' && return 0
    sleep 0.1
  done
  fail "/filter never answered without an error: $(call filter 2>&1)"
}

start --dra-placement true
settled
filter=$(call filter)
echo "$filter" | grep -q '"NodeNames":\["n2"\]' || fail "with --dra-placement, /filter: $filter"
echo "$filter" | grep -q '"n1":"DRA claims do not fit' || fail "with --dra-placement, /filter: $filter"
prio=$(call prioritize)
[ "$prio" = '[{"Host":"n1","Score":0},{"Host":"n2","Score":10}]' ] || fail "with --dra-placement, /prioritize: $prio"
echo "ok: --dra-placement drops n1 and ranks n2 first"

start
settled
filter=$(call filter)
echo "$filter" | grep -q 'DRA claims' && fail "without --dra-placement, /filter judged the claims: $filter"
prio=$(call prioritize)
[ "$prio" = '[{"Host":"n1","Score":0},{"Host":"n2","Score":0}]' ] || fail "without --dra-placement, /prioritize: $prio"
echo "ok: without the flag, claims are not judged and /prioritize is 0"
