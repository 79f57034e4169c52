#!/usr/bin/env bash
# Instruction counts (callgrind) and system calls (strace) per call of the hot CUDA entry points, on the fake
# driver, without and with libvgpu.so. Prints one markdown table (docs/benchmarks.md, section "libvgpu").
# usage: bench/vgpu/run_callgrind.sh [build dir]      (default build/dev; needs valgrind and strace)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=$(realpath "${1:-build/dev}")
BIN=$B/bench/vgpu/vgpu_bench
LIB=$B/src/vgpu/libvgpu.so
FAKES=$B/src/fakes
for f in "$BIN" "$LIB" "$FAKES/libcuda.so.1"; do
  [ -e "$f" ] || { echo "missing $f: cmake --build $B --target vgpu_bench vgpu fakecuda fakenvml" >&2; exit 1; }
done
command -v valgrind >/dev/null || { echo "valgrind not installed (scripts/deps.sh)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# run <tag> <preload 0|1> <extra env...> -- <bench args>: sets IR (instructions in bench_<name>) and SYS.
run() {
  local tag=$1 preload=$2; shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local name=$1
  local base=(env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$FAKES" FAKEGPU_DEVICES="NVIDIA A100-SXM4-80GB:81920:108"
              FAKEGPU_STATE="$TMP/$tag.state" FAKEGPU_WAVE_US=1 CUDA_DEVICE_MEMORY_SHARED_CACHE="$TMP/$tag.cache"
              LIBCUDA_LOG_LEVEL=0 "${envs[@]}")
  if [ "$preload" = 1 ]; then base+=(LD_PRELOAD="$PRELOAD"); fi
  "${base[@]}" valgrind --tool=callgrind --callgrind-out-file="$TMP/$tag.cg" --toggle-collect="bench_$name" \
    "$BIN" "$@" >/dev/null 2>&1
  IR=$(callgrind_annotate "$TMP/$tag.cg" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  rm -f "$TMP/$tag.state" "$TMP/$tag.cache"
  SYS="n/a"
  if command -v strace >/dev/null; then
    "${base[@]}" strace -f -qq -o "$TMP/$tag.st" "$BIN" "$@" >/dev/null 2>&1 || true
    # System calls of the measuring thread between the two markers (markers excluded).
    SYS=$(awk '/vgpu-bench begin/ {tid=$1; on=1; next} /vgpu-bench end/ {on=0} on && $1==tid {n++} END {print n+0}' \
          "$TMP/$tag.st")
  fi
}

ROW=0
row() {  # <label> <n> <env...> -- <bench args>
  local label=$1 n=$2; shift 2
  ROW=$((ROW + 1))
  run "row${ROW}_base" 0 "$@"; local b=$IR bs=$SYS
  run "row${ROW}_vgpu" 1 "$@"; local v=$IR vs=$SYS
  printf "| %s | %s | %s | %s | %s | %s | %s |\n" "$label" "$n" "$((b / n))" "$((v / n))" "$(((v - b) / n))" \
    "$bs" "$vs"
}

PRELOAD=$LIB
# Armed (as the device plugin mounts it: the limits file beside libvgpu.so): libvgpu's watcher meters the
# device from the first CUDA call (issue 33), with no SM limit too; the launch path is the unarmed one.
mkdir -p "$TMP/armed"
cp "$LIB" "$TMP/armed/libvgpu.so"
printf 'CUDA_DEVICE_MEMORY_SHARED_CACHE=%s\nGPU_CORE_UTILIZATION_POLICY=default\n' "$TMP/armed.cache" \
  >"$TMP/armed/vgpu.limits"
row_armed() { PRELOAD=$TMP/armed/libvgpu.so; row "$@"; PRELOAD=$LIB; rm -f "$TMP/armed.cache"; }

N=20000
echo "| path | calls | Ir/call without libvgpu | Ir/call with libvgpu | added Ir/call | syscalls in loop without | with |"
echo "|---|---|---|---|---|---|---|"
row "cuLaunchKernel, no SM limit" $N -- launch $N
row_armed "cuLaunchKernel, no SM limit, armed (metered)" $N -- launch $N
row "cuLaunchKernel, SM limit 50% force" $N CUDA_DEVICE_SM_LIMIT=50 GPU_CORE_UTILIZATION_POLICY=force -- launch $N
row "cuMemAlloc+cuMemFree, 0 live" $N CUDA_DEVICE_MEMORY_LIMIT=8Gi -- alloc_free $N 0
row "cuMemAlloc+cuMemFree, 2000 live" $N CUDA_DEVICE_MEMORY_LIMIT=8Gi -- alloc_free $N 2000
row "cuMemAlloc+cuMemFree, virtual device memory, within the share" $N CUDA_DEVICE_MEMORY_LIMIT=8Gi \
  CUDA_OVERSUBSCRIBE=true CUDA_DEVICE_MEMORY_SCALING=2 -- alloc_free $N 0
# A share of 8 MiB, below the context: every allocation is managed memory (the "without" column makes
# cuMemAlloc calls, so "added" includes the driver's managed path).
row "cuMemAlloc+cuMemFree, virtual device memory, spilled" $N CUDA_DEVICE_MEMORY_LIMIT=8Gi \
  CUDA_OVERSUBSCRIBE=true CUDA_DEVICE_MEMORY_SCALING=1000 -- alloc_free $N 0
row "cuMemGetInfo" $N CUDA_DEVICE_MEMORY_LIMIT=8Gi -- meminfo $N
row "cuInit to first alloc+free" 1 CUDA_DEVICE_MEMORY_LIMIT=8Gi -- startup 1
