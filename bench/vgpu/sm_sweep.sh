#!/usr/bin/env bash
# SM-limit accuracy by kernel length on the fake driver, in real time: for each kernel length (one wave of
# FAKEGPU_WAVE_US), graph launches and a mix of shapes, one container at 30 % (force) and two at 30/70
# (default) on their own simulated device; every configuration runs at once for the same window. The share
# is the container's device time in the window (fakegpu_busy_ns: the fake's device clock) over the window.
# Prints one markdown table (docs/benchmarks.md, section "libvgpu").
# usage: bench/vgpu/sm_sweep.sh [build dir] [window ms] [label regex]   (default build/dev, 60000, all)
# Kernels of 2 s need a window of a minute or more: a share is exact only to about one kernel per window.
# FAKEGPU_TIME_SCALE=N (e.g. 20): everything runs on libfakegpu_time.so's clock, N times faster than the
# wall clock (src/fakes/README.md, "Scaled time"); the window is in that time, so 240000 takes 12 s.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=$(realpath "${1:-build/dev}")
WINDOW_MS=${2:-60000}
ONLY=${3:-.}
PROG=$B/src/vgpu/vgpu_e2e_prog
LIB=$B/src/vgpu/libvgpu.so
FAKES=$B/src/fakes
for f in "$PROG" "$LIB" "$FAKES/libcuda.so.1" "$FAKES/libnvidia-ml.so.1"; do
  [ -e "$f" ] || { echo "missing $f: cmake --build $B --target vgpu_e2e_prog vgpu fakecuda fakenvml" >&2; exit 1; }
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# label wave_us path sms_alone sms_pair
CONFIGS=(
  "10us 10 one 20 188"
  "100us 100 one 132 20"
  "1ms 1000 one 188 132"
  "10ms 10000 one 20 188"
  "100ms 100000 one 132 20"
  "500ms 500000 one 188 132"
  "2s 2000000 one 20 188"
  "graph_4x5ms 5000 graph 132 20"
  "mixed_250us..100ms 250 mixed 188 132"
)
SCALE=${FAKEGPU_TIME_SCALE:-1}
PRELOAD=$LIB
NOW=$(date +%s%6N)
if [ "$SCALE" != 1 ]; then
  [ -e "$FAKES/libfakegpu_time.so" ] || { echo "missing $FAKES/libfakegpu_time.so: target fakegpu_time" >&2; exit 1; }
  PRELOAD="$FAKES/libfakegpu_time.so $LIB"
  # Now on the children's clock: date reads it through the same preload.
  NOW=$(env FAKEGPU_TIME_SCALE="$SCALE" LD_PRELOAD="$FAKES/libfakegpu_time.so" date +%s%6N)
fi
START=$((NOW + 3000000 * SCALE)) # 3 s of wall time from now
n=0
for c in "${CONFIGS[@]}"; do
  read -r label wave path sms_alone sms_pair <<<"$c"
  [[ $label =~ $ONLY ]] || continue
  for run in "30:$sms_alone:force" "30,70:$sms_pair:default"; do
    IFS=: read -r pcts sms policy <<<"$run"
    n=$((n + 1))
    k=0
    for pct in ${pcts//,/ }; do
      k=$((k + 1))
      env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$FAKES" LD_PRELOAD="$PRELOAD" FAKEGPU_TIME_SCALE="$SCALE" \
        FAKEGPU_DEVICES="SimGPU:16384:$sms" \
        FAKEGPU_STATE="$TMP/dev$n.state" FAKEGPU_WAVE_US="$wave" CUDA_DEVICE_MEMORY_SHARED_CACHE="$TMP/r${n}_$k" \
        CUDA_DEVICE_SM_LIMIT="$pct" GPU_CORE_UTILIZATION_POLICY="$policy" LIBCUDA_LOG_LEVEL=1 \
        "$PROG" launch "$START" "$WINDOW_MS" "$path" >"$TMP/out_${n}_$k" 2>&1 &
      echo "$label $sms ${pcts//,/+} $pct $TMP/out_${n}_$k" >>"$TMP/index"
    done
  done
done
wait
echo "| kernels | SMs | containers (targets) | target | achieved | launches |"
echo "|---|---|---|---|---|---|"
while read -r label sms pcts pct out; do
  busy=$(sed -n 's/.*busy_window_ns=\([0-9]*\).*/\1/p' "$out")
  win=$(sed -n 's/.*window_ns=\([0-9]*\) .*/\1/p' "$out")
  launches=$(sed -n 's/^launches=\([0-9]*\).*/\1/p' "$out")
  if [ -z "$busy" ] || [ -z "$win" ]; then
    echo "| $label | $sms | $pcts | $pct | failed: $(tr '\n' ' ' <"$out" | cut -c1-80) | |"
    continue
  fi
  awk -v l="$label" -v s="$sms" -v c="$pcts" -v p="$pct" -v b="$busy" -v w="$win" -v n="$launches" \
    'BEGIN {printf "| %s | %s | %s | %s | %.2f | %s |\n", l, s, c, p, 100 * b / w, n}'
done <"$TMP/index"
