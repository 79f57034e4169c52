#!/usr/bin/env bash
# libvgpu on a real GPU: builds libvgpu.so, runs a real CUDA workload (PyTorch if importable with CUDA, else a
# small CUDA program built with nvcc) under LD_PRELOAD at several memory and SM limits, and prints one table
# of achieved versus target. SM share is measured as throughput relative to an unlimited run of the same
# workload (its duty cycle), memory as what the workload could allocate and what it was told is total.
# Last: the metering check (issue 33), libvgpu's busy counter against CUDA-event time and NVML's sampled figure.
# usage: [VGPU_LIB=libvgpu.so] bench/gpu/run.sh [build dir] [seconds per SM run]    (default build/release, 10 s; about 3 min in all)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build/release}
SECS=${2:-10}
command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "warning: nvidia-smi not found" >&2
# VGPU_LIB: a libvgpu.so built elsewhere (a GPU machine without the Debian build dependencies of the rest).
if [ -n "${VGPU_LIB:-}" ]; then
  LIB=$(realpath "$VGPU_LIB")
else
  if [ ! -f "$B/build.ninja" ]; then cmake --preset release -B "$B" >/dev/null; fi
  cmake --build "$B" -j"$(nproc)" --target vgpu >/dev/null
  LIB=$(realpath "$B/src/vgpu/libvgpu.so")
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  WORK=(python3 bench/gpu/torch_workload.py); KIND="PyTorch $(python3 -c 'import torch; print(torch.__version__)')"
elif NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null) && [ -n "$NVCC" ]; then
  "$NVCC" -O2 -o "$TMP/gpu_workload" bench/gpu/gpu_workload.cu
  WORK=("$TMP/gpu_workload"); KIND="CUDA runtime program ($("$NVCC" --version | tail -1 | awk '{print $NF}'))"
else
  echo "neither PyTorch with CUDA nor nvcc is available" >&2
  exit 1
fi

run() {  # <env...> -- <workload args>: prints the workload's output line
  # Each run is its own container (its own region): runs are called in $(...) subshells, so a
  # counter would not advance (every run shared the first run's region and its 1 GiB limit).
  local envs=() region
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  region=$(mktemp -u "$TMP/region.XXXXXX")
  env "${envs[@]}" CUDA_DEVICE_MEMORY_SHARED_CACHE="$region.cache" LD_PRELOAD="$LIB" "${WORK[@]}" "$@"
}
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }

echo "workload: $KIND; libvgpu: $LIB"
echo
echo "| check | target | achieved | note |"
echo "|---|---|---|---|"
for lim in 1024 4096 16384; do
  out=$(run CUDA_DEVICE_MEMORY_LIMIT=${lim}m -- mem)
  alloc=$(echo "$out" | field allocated); total=$(echo "$out" | field total); alloc=${alloc:-0}; total=${total:-0}
  printf "| memory limit %s MiB | <= %s MiB allocatable, total %s MiB | %s MiB allocated, total %s MiB | context overhead counted |\n" \
    "$lim" "$lim" "$lim" "$((alloc >> 20))" "$((total >> 20))"
done
base=$(run GPU_CORE_UTILIZATION_POLICY=disable -- sm "$SECS" | field kernels_per_s)
echo "| SM unlimited | 100 % | $base kernels/s (reference) | |"
for pct in 30 50 70; do
  got=$(run CUDA_DEVICE_SM_LIMIT=$pct GPU_CORE_UTILIZATION_POLICY=force -- sm "$SECS" | field kernels_per_s)
  share=$(awk -v a="$got" -v b="$base" 'BEGIN { printf "%.1f", 100 * a / b }')
  echo "| SM limit $pct % (1 container) | $pct % | $share % | $got kernels/s over ${SECS} s |"
done
# Two containers at 30 and 70 on the same GPU, at the same time.
a_out="$TMP/a.out"; b_out="$TMP/b.out"
run CUDA_DEVICE_SM_LIMIT=30 GPU_CORE_UTILIZATION_POLICY=force -- sm "$SECS" >"$a_out" &
run CUDA_DEVICE_SM_LIMIT=70 GPU_CORE_UTILIZATION_POLICY=force -- sm "$SECS" >"$b_out" &
wait
a=$(field kernels_per_s <"$a_out"); b=$(field kernels_per_s <"$b_out")
sa=$(awk -v a="$a" -v b="$base" 'BEGIN { printf "%.1f", 100 * a / b }')
sb=$(awk -v a="$b" -v b="$base" 'BEGIN { printf "%.1f", 100 * a / b }')
echo "| SM limits 30 % + 70 % (2 containers) | 30 % / 70 % | $sa % / $sb % | concurrent |"

# Metering (issue 33): an armed container without SM limit (the limits file beside its copy of libvgpu.so, as
# the device plugin mounts it) runs a varying load of mixed kernel lengths; libvgpu's busy counter (its region,
# hdr.metered_mask and devices[0].busy_ms) against the workload's own CUDA-event time (ground truth: the only
# work on the GPU) and against NVML's sampled per-process figure (nvidia-smi pmon, 1 s samples of sm %).
NVCC=${NVCC:-$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)}
if [ -n "$NVCC" ]; then
  [ -x "$TMP/gpu_workload" ] || "$NVCC" -O2 -o "$TMP/gpu_workload" bench/gpu/gpu_workload.cu
  mkdir -p "$TMP/armed"
  cp "$LIB" "$TMP/armed/libvgpu.so"
  printf 'CUDA_DEVICE_MEMORY_SHARED_CACHE=%s\nGPU_CORE_UTILIZATION_POLICY=default\n' "$TMP/meter.cache" \
    >"$TMP/armed/vgpu.limits"
  for load in "300 900" "1100 700" "50 50"; do
    set -- $load
    rm -f "$TMP/meter.cache"
    LD_PRELOAD="$TMP/armed/libvgpu.so" "$TMP/gpu_workload" duty "$SECS" "$1" "$2" >"$TMP/duty.out" &
    wpid=$!
    pmon=""
    if command -v nvidia-smi >/dev/null; then
      nvidia-smi pmon -s u -d 1 >"$TMP/pmon.out" 2>/dev/null &
      pmon=$!
    fi
    wait "$wpid"
    [ -n "$pmon" ] && kill "$pmon" 2>/dev/null && wait "$pmon" 2>/dev/null || true
    truth=$(field gpu_busy_ms <"$TMP/duty.out")
    mask=$(od -An -t u4 -j 120 -N 4 "$TMP/meter.cache" | tr -d ' ')
    meter=$(od -An -t u4 -j 372 -N 4 "$TMP/meter.cache" | tr -d ' ')
    # pmon columns: gpu pid type sm mem ...; one line per process and second ("-" when not sampled).
    nvml=$(awk -v p="$wpid" '$2 == p && $4 ~ /^[0-9]+$/ { s += $4 * 10 } END { printf "%.0f", s }' \
      "$TMP/pmon.out" 2>/dev/null || echo n/a)
    err=$(awk -v m="$meter" -v t="$truth" 'BEGIN { if (t > 0) printf "%+.1f", 100 * (m - t) / t; else print "n/a" }')
    nerr=$(awk -v m="$nvml" -v t="$truth" 'BEGIN { if (t > 0 && m != "n/a") printf "%+.1f", 100 * (m - t) / t; else print "n/a" }')
    echo "| metering, busy $1 ms / idle $2 ms, no SM limit (armed) | busy = CUDA events: $truth ms | meter $meter ms ($err %), NVML pmon $nvml ms ($nerr %) | metered_mask $mask over ${SECS} s |"
  done
else
  echo "| metering | | skipped: no nvcc | |"
fi
# NVML's per-process sampling period (what libvgpu's controller and meter read; bench/gpu/nvml_probe.c).
if command -v cc >/dev/null && cc -O2 -Isrc -o "$TMP/nvml_probe" bench/gpu/nvml_probe.c -ldl 2>/dev/null; then
  gaps=$("$TMP/nvml_probe" device | awk '/^dev ts/ && $NF > 0 { print $NF / 1000 }' | sort -n)
  med=$(echo "$gaps" | awk '{ a[NR] = $1 } END { if (NR) printf "%.1f", a[int((NR + 1) / 2)]; else print "n/a" }')
  echo "| NVML sampling period | | median gap $med ms between device utilisation samples | nvmlDeviceGetSamples |"
fi
