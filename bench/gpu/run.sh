#!/usr/bin/env bash
# libvgpu on a real GPU: builds libvgpu.so, runs a real CUDA workload (PyTorch if importable with CUDA, else a
# small CUDA program built with nvcc) under LD_PRELOAD at several memory and SM limits, and prints one table
# of achieved versus target. SM share is measured as throughput relative to an unlimited run of the same
# workload (its duty cycle), memory as what the workload could allocate and what it was told is total.
# usage: bench/gpu/run.sh [build dir] [seconds per SM run]    (default build/release, 10 s)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build/release}
SECS=${2:-10}
command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "warning: nvidia-smi not found" >&2
if [ ! -f "$B/build.ninja" ]; then cmake --preset release -B "$B" >/dev/null; fi
cmake --build "$B" -j"$(nproc)" --target vgpu >/dev/null
LIB=$(realpath "$B/src/vgpu/libvgpu.so")
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

n=0
run() {  # <env...> -- <workload args>: prints the workload's output line
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  n=$((n + 1))
  env "${envs[@]}" CUDA_DEVICE_MEMORY_SHARED_CACHE="$TMP/region$n.cache" LD_PRELOAD="$LIB" "${WORK[@]}" "$@"
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
