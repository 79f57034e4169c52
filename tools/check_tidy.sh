#!/usr/bin/env bash
# clang-tidy with the repository's .clang-tidy over the production C++ sources (src/**/*.cc and .c
# without tests, fuzz targets, test helpers and the e2e test programs), using the compile commands of
# a configured build directory; its generated headers (protobuf) are built first. Any finding, or any
# file clang-tidy cannot process, fails.
# Exit 77 (ctest: skipped) when clang-tidy 14 or the compile database is missing. The `tidy` ctest.
#   tools/check_tidy.sh [SOURCE_DIR] [BUILD_DIR]       (default: this checkout, build/dev)
#   HAMI_TIDY_FILES="src/a.cc src/b.cc" tools/check_tidy.sh   (only these files)
#   HAMI_TIDY_JOBS=N: files checked at once (default: the number of cores, at most 2: the ctest
#   reserves two processors for it)
# Files sharing a compile command are checked in groups of up to eight, parsed and matched once
# (tools/check_tidy.py says how no finding is lost that way); see .clang-tidy for why the static
# analyzer is off, docs/benchmarks.md "clang-tidy" for the cost.
set -uo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
build="${2:-$root/build/dev}"
tidy=""
for c in clang-tidy-14 clang-tidy; do
  if command -v "$c" >/dev/null && "$c" --version | grep -q 'version 14\.'; then tidy="$c"; break; fi
done
[ -n "$tidy" ] || { echo "tidy: clang-tidy 14 not installed; skipped"; exit 77; }
[ -f "$build/compile_commands.json" ] || { echo "tidy: no $build/compile_commands.json; skipped"; exit 77; }
cd "$root"
# Generated headers (protobuf) the sources include; nothing else is built. Absent without gRPC.
cmake --build "$build" --target hami_generated_sources >/dev/null 2>&1 || true
if [ -n "${HAMI_TIDY_FILES:-}" ]; then
  read -r -a files <<<"$HAMI_TIDY_FILES"
else
  # Only files the build compiles (the compile database), so optional parts that are not built are skipped.
  mapfile -t files < <(/usr/bin/python3 - "$build/compile_commands.json" "$root" <<'EOF'
import json, os, re, sys
db, root = sys.argv[1], os.path.realpath(sys.argv[2])
skip = re.compile(r'(_test|_fuzz)\.cc$|/testing/|/fakes/|/e2e/|/fuzz_driver\.cc$')
seen = set()
for e in json.load(open(db)):
    f = os.path.realpath(os.path.join(e['directory'], e['file']))
    rel = os.path.relpath(f, root)
    if rel.startswith('src/') and rel.endswith(('.cc', '.c')) and not skip.search(rel) and rel not in seen:
        seen.add(rel)
        print(rel)
EOF
  )
fi
[ ${#files[@]} -gt 0 ] || { echo "tidy: no files"; exit 1; }
jobs="${HAMI_TIDY_JOBS:-$(( $(nproc) < 2 ? $(nproc) : 2 ))}"
exec /usr/bin/python3 "$root/tools/check_tidy.py" "$tidy" "$build" "$root" "$jobs" "${files[@]}"
