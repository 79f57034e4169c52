#!/usr/bin/env bash
# Policy x trace comparison: runs `hami sim` with 10 seeds on every openb pod trace found in
# a folder (default: data/openb; pass the folder holding the other released traces) and writes docs/sim-traces.md with the
# unallocated GPU % at 100 % arrived demand (100 - A(100)): median, mean and standard deviation over
# seeds. Usage: scripts/sim-traces.sh [TRACE_DIR] [POLICIES] [SEEDS]
# With VARIANTS=1 it also runs the workload variants of scripts/gen-variants.py (seed VARIANT_SEED,
# default 1), generated into a temporary folder from data/openb's default trace.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-data/openb}"
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
traces=("$dir"/openb_pod_list_*.csv)
if [ "${VARIANTS:-0}" = "1" ]; then
  python3 scripts/gen-variants.py --seed "${VARIANT_SEED:-1}" --out "$out/variants" >&2
  traces+=("$out"/variants/openb_pod_list_*.csv)
fi
for pods in "${traces[@]}"; do
  trace="$(basename "$pods" .csv)"; trace="${trace#openb_pod_list_}"
  echo "== $trace" >&2
  "$bin" sim --nodes "$nodes" --pods "$pods" --policy "$policies" --seeds "$seeds" \
    --jobs "$(nproc)" --json "$out/$trace.json" >&2
done
# How the table was made, for its header: the folder is named only when it is the repository's own.
shown_dir="$dir"; [ "$dir" = "data/openb" ] || shown_dir="<folder with the released openb traces>"
made="\`${VARIANTS:+VARIANTS=$VARIANTS }scripts/sim-traces.sh $shown_dir $policies $seeds\` at $(git rev-parse --short HEAD 2>/dev/null || echo '?') on $(date -u +%Y-%m-%d) ($("$bin" --version 2>/dev/null | head -1 || true))"
HAMI_REPO="$PWD" HAMI_MADE="$made" python3 - "$out" "$policies" "$seeds" > docs/sim-traces.md <<'PY'
import json, os, statistics, sys
out, policies, seeds = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
import re
def order(t):  # bundled traces first, then each variant family by its number
    m = re.fullmatch(r"([a-z]+?)(\d+)", t)
    return (t not in bundled, m.group(1) if m else t, int(m.group(2)) if m else 0)
bundled = {"cpu100", "default", "gpushare40", "gpuspec10", "multigpu30"}
# FGD's published medians (Weng et al., ATC'23) where the paper gives them, for comparison only.
published_fgd = {"cpu100": 4.79, "default": 4.77, "gpushare40": 6.05}
traces = sorted((f[:-5] for f in os.listdir(out) if f.endswith(".json")), key=order)
data = {t: json.load(open(os.path.join(out, t + ".json"))) for t in traces}
print("# Policies across the openb traces\n")
print("Unallocated GPU % when arrived GPU demand = 100 % of capacity (100 - A(100)): median, and mean ± sd")
print(f"over {seeds} seeds (42..). Produced by `scripts/sim-traces.sh` (one command; `VARIANTS=1` adds the")
print("workload variants of `scripts/gen-variants.py`, defined below). Lower is better; the lowest median of")
print("each row is in bold. Published FGD-paper medians for reference are in docs/sim.md.\n")
print("This table: " + os.environ["HAMI_MADE"] + ".\n")
print("| trace | " + " | ".join(policies) + " | FGD, published median |")
print("|---|" + "---|" * (len(policies) + 1))
for t in traces:
    stats = {}
    for p in policies:
        vals = [100 - r["curve"][100][1] for r in data[t]["runs"] if r["policy"] == p]
        sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
        stats[p] = (statistics.median(vals), statistics.mean(vals), sd)
    best = min(v[0] for v in stats.values())
    cells = []
    for p in policies:
        med, mean, sd = stats[p]
        cell = f"{med:.2f}"
        cells.append((f"**{cell}**" if med == best else cell) + f" ({mean:.2f} ± {sd:.2f})")
    pub = f"{published_fgd[t]:.2f}" if t in published_fgd else "–"
    print(f"| {t}{'' if t in bundled else ' (variant)'} | " + " | ".join(cells) + f" | {pub} |")
if any(t not in bundled for t in traces):
    print(open(os.path.join(os.environ["HAMI_REPO"], "docs", "sim-variants.inc.md")).read(), end="")
PY
rm -rf "$out"
echo "wrote docs/sim-traces.md" >&2
