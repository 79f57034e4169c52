#!/usr/bin/env bash
# The 30 % + 70 % pair on a real GPU over 30 s, twice, against a 10 s solo reference, and two processes
# without limits (what time-slicing alone leaves). usage: VGPU_LIB=libvgpu.so bench/gpu/pair.sh (PyTorch needed)
set -u
LIB=$(realpath "${VGPU_LIB:-.gpucarry/libvgpu.so}"); T=$(mktemp -d)
w() { python3 bench/gpu/torch_workload.py "$@"; }
base=$(CUDA_DEVICE_MEMORY_SHARED_CACHE=$T/b.cache GPU_CORE_UTILIZATION_POLICY=disable LD_PRELOAD=$LIB w sm 10 2>/dev/null | sed 's/.*=//')
echo "solo: $base kernels/s"
for r in 1 2; do
  CUDA_DEVICE_MEMORY_SHARED_CACHE=$T/a$r.cache CUDA_DEVICE_SM_LIMIT=30 GPU_CORE_UTILIZATION_POLICY=force LD_PRELOAD=$LIB w sm 30 > $T/a 2>/dev/null &
  CUDA_DEVICE_MEMORY_SHARED_CACHE=$T/c$r.cache CUDA_DEVICE_SM_LIMIT=70 GPU_CORE_UTILIZATION_POLICY=force LD_PRELOAD=$LIB w sm 30 > $T/c 2>/dev/null &
  wait
  a=$(sed 's/.*=//' $T/a); c=$(sed 's/.*=//' $T/c)
  awk -v a=$a -v c=$c -v b=$base 'BEGIN { printf "pair run: 30%% one %.1f %%, 70%% one %.1f %%, sum %.1f %%, split %.1f / %.1f\n", 100*a/b, 100*c/b, 100*(a+c)/b, 100*a/(a+c), 100*c/(a+c) }'
done
# Two unlimited processes: what time-slicing alone gives.
CUDA_DEVICE_MEMORY_SHARED_CACHE=$T/u1.cache GPU_CORE_UTILIZATION_POLICY=disable LD_PRELOAD=$LIB w sm 15 > $T/a 2>/dev/null &
CUDA_DEVICE_MEMORY_SHARED_CACHE=$T/u2.cache GPU_CORE_UTILIZATION_POLICY=disable LD_PRELOAD=$LIB w sm 15 > $T/c 2>/dev/null &
wait
a=$(sed 's/.*=//' $T/a); c=$(sed 's/.*=//' $T/c)
awk -v a=$a -v c=$c -v b=$base 'BEGIN { printf "two unlimited: %.1f %% / %.1f %%, sum %.1f %%\n", 100*a/b, 100*c/b, 100*(a+c)/b }'
