#!/usr/bin/env bash
# scripts/build.sh PRESET [targets...]: configure (once) and build one CMake preset.
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-dev}"; shift || true
if [ ! -f "build/$preset/build.ninja" ]; then
  cmake --preset "$preset" >/dev/null
fi
jobs="${HAMI_JOBS:-$(nproc)}"
if [ $# -gt 0 ]; then
  cmake --build "build/$preset" -j "$jobs" --target "$@"
else
  cmake --build "build/$preset" -j "$jobs"
fi
