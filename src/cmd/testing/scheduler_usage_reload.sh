#!/bin/bash
# hami scheduler --usage-recommendations re-reads the file when it changes (webhook/usage_reload.h),
# on the fake API server: the set it starts with, a new set renamed over the file, a file that does
# not parse (the previous set stays, the error is counted and logged), as /metrics reports them.
set -euo pipefail
hami=$1
fake=$2
src=$3  # the source tree
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; tail -20 "$dir/sched.log"; exit 1; }

"$fake" >"$dir/fake.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do grep -q listening "$dir/fake.log" && break; sleep 0.1; done
api=$(grep -o 'http://[0-9.:]*' "$dir/fake.log" | head -1)
[ -n "$api" ] || fail "fake-apiserver did not start"
cat >"$dir/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: $api
users:
- name: u
  user:
    token: t
contexts:
- name: c
  context:
    cluster: fake
    user: u
current-context: c
KC
# Valid recommendations: hami recommend's own JSON of a small trace, its workloads renamed into
# namespace ml (the file's keys are <namespace>/<workload>); recs N writes N workloads.
"$hami" recommend --usage "$src/src/usage/fuzz_corpus/workload.csv" --format json >"$dir/base.json"
recs() {
  python3 - "$dir/base.json" "$1" <<'PY'
import json, sys
base = json.load(open(sys.argv[1]))["workloads"]
one = next(iter(base.values()))
print(json.dumps({"workloads": {f"ml/w{i}": one for i in range(int(sys.argv[2]))}}))
PY
}
recs 2 >"$dir/recs.json"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
http=$(port)
"$hami" scheduler --kubeconfig "$dir/kubeconfig" --http-bind "127.0.0.1:$http" \
  --extender-bind "127.0.0.1:$(port)" --metrics-bind "" --usage-recommendations "$dir/recs.json" \
  --usage-recommendations-check-s 1 >"$dir/sched.log" 2>&1 &
pids+=($!)
# Waits up to 10 s for /metrics to carry the line $1.
expect_metric() {
  for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$http/metrics" 2>/dev/null | grep -qx "$1" && return 0
    sleep 0.1
  done
  fail "/metrics never showed '$1': $(curl -fsS "http://127.0.0.1:$http/metrics" 2>/dev/null | grep usage_recommendations)"
}
expect_metric "hami_scheduler_usage_recommendations 2"
expect_metric "hami_scheduler_usage_recommendations_loads_total 1"
echo "ok: started with 2 workloads"

recs 3 >"$dir/recs.new" && mv "$dir/recs.new" "$dir/recs.json"
expect_metric "hami_scheduler_usage_recommendations 3"
expect_metric "hami_scheduler_usage_recommendations_loads_total 2"
echo "ok: a new file renamed over it: 3 workloads"

printf '{"workloads": ' >"$dir/recs.new" && mv "$dir/recs.new" "$dir/recs.json"
expect_metric "hami_scheduler_usage_recommendations_reload_errors_total 1"
expect_metric "hami_scheduler_usage_recommendations 3"
grep -q "not reloaded, the previous 3 workloads stay: recommendations: not JSON" "$dir/sched.log" ||
  fail "no error logged"
echo "ok: a file that does not parse keeps the 3 workloads, counted and logged"

recs 1 >"$dir/recs.new" && mv "$dir/recs.new" "$dir/recs.json"
expect_metric "hami_scheduler_usage_recommendations 1"
expect_metric "hami_scheduler_usage_recommendations_loads_total 3"
echo "ok: the next good file loads (1 workload)"
