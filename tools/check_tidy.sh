#!/usr/bin/env bash
# clang-tidy with the repository's .clang-tidy over the production C++ sources (src/**/*.cc without
# tests, fuzz targets and test helpers), using the compile commands of a configured build directory.
# Any warning fails. Exit 77 (ctest: skipped) when clang-tidy 14 or the compile database is missing.
#   tools/check_tidy.sh [SOURCE_DIR] [BUILD_DIR]       (default: this checkout, build/dev)
#   HAMI_TIDY_FILES="src/a.cc src/b.cc" tools/check_tidy.sh   (only these files)
# Cost: parsing dominates (about 5-20 s of CPU per file); files run in parallel, one per core.
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
if [ -n "${HAMI_TIDY_FILES:-}" ]; then
  read -r -a files <<<"$HAMI_TIDY_FILES"
else
  # Only files the build compiles (the compile database), so optional parts that are not built are skipped.
  mapfile -t files < <(/usr/bin/python3 - "$build/compile_commands.json" "$root" <<'EOF'
import json, os, re, sys
db, root = sys.argv[1], os.path.realpath(sys.argv[2])
skip = re.compile(r'(_test|_fuzz)\.cc$|/testing/|/fakes/|/fuzz_driver\.cc$')
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
jobs="${HAMI_JOBS:-$(nproc)}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# GCC-only warning flags in the compile database are unknown to clang: not a finding.
printf '%s\0' "${files[@]}" |
  xargs -0 -P "$jobs" -n 1 "$tidy" -p "$build" --quiet --extra-arg=-Wno-unknown-warning-option \
    >"$log" 2>&1
warnings="$(grep -E '^[^ ].*: (warning|error): ' "$log" | sort -u)"
if [ -n "$warnings" ]; then
  echo "tidy: findings (fix them, or NOLINT(check) with the reason on the line):"
  printf '%s\n' "$warnings"
  exit 1
fi
echo "tidy: ok (${#files[@]} files)"
