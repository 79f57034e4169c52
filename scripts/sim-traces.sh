#!/usr/bin/env bash
# Policy x trace comparison (issue 6): runs `hami sim` with 10 seeds on every openb pod trace found in
# a folder (default: ../shared/data/openb, else data/openb) and writes docs/sim-traces.md with the
# unallocated GPU % at 100 % arrived demand (100 - A(100)): median, mean and standard deviation over
# seeds. Usage: scripts/sim-traces.sh [TRACE_DIR] [POLICIES] [SEEDS]
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-../shared/data/openb}"
[ -d "$dir" ] || dir=data/openb
policies="${2:-default,fgd,best-fit,gpu-packing,gpu-clustering,dot-product,random,hami}"
seeds="${3:-10}"
bin="${HAMI_BIN:-}"   # a prebuilt hami binary, else the release preset is built
if [ -z "$bin" ]; then
  scripts/deps.sh
  scripts/build.sh release hami >&2
  bin=build/release/src/cmd/hami
fi
out="$(mktemp -d)"
nodes="$dir/openb_node_list_gpu_node.csv"
for pods in "$dir"/openb_pod_list_*.csv; do
  trace="$(basename "$pods" .csv)"; trace="${trace#openb_pod_list_}"
  echo "== $trace" >&2
  "$bin" sim --nodes "$nodes" --pods "$pods" --policy "$policies" --seeds "$seeds" \
    --jobs "$(nproc)" --json "$out/$trace.json" >&2
done
python3 - "$out" "$policies" "$seeds" > docs/sim-traces.md <<'PY'
import json, os, statistics, sys
out, policies, seeds = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
traces = sorted(f[:-5] for f in os.listdir(out) if f.endswith(".json"))
data = {t: json.load(open(os.path.join(out, t + ".json"))) for t in traces}
print("# Policies across the openb traces\n")
print("Unallocated GPU % when arrived GPU demand = 100 % of capacity (100 - A(100)): median, and mean ± sd")
print(f"over {seeds} seeds (42..). Produced by `scripts/sim-traces.sh` (one command; see the script for")
print("arguments). Lower is better. Published FGD-paper medians for reference are in docs/sim.md.\n")
print("| policy | " + " | ".join(traces) + " |")
print("|---|" + "---|" * len(traces))
for p in policies:
    cells = []
    for t in traces:
        vals = [100 - r["curve"][100][1] for r in data[t]["runs"] if r["policy"] == p]
        sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
        cells.append(f"{statistics.median(vals):.2f} ({statistics.mean(vals):.2f} ± {sd:.2f})")
    print(f"| {p} | " + " | ".join(cells) + " |")
PY
rm -rf "$out"
echo "wrote docs/sim-traces.md" >&2
