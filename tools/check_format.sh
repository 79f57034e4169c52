#!/usr/bin/env bash
# Fails when a C/C++ source differs from what clang-format makes of it with the repository's .clang-format.
# Formatting is version-dependent: the reference is Debian 12's clang-format 14. Exit 77 (ctest: skipped)
# when no clang-format 14 is installed. Fix a failure with: tools/check_format.sh --fix
set -uo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
fix=0
if [ "${1:-}" = "--fix" ]; then fix=1; root="$(cd "$(dirname "$0")/.." && pwd)"; fi
cf=""
for c in clang-format-14 clang-format; do
  if command -v "$c" >/dev/null && "$c" --version | grep -q 'version 14\.'; then cf="$c"; break; fi
done
[ -n "$cf" ] || { echo "format: clang-format 14 not installed; skipped"; exit 77; }
cd "$root"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -co --exclude-standard -- '*.c' '*.cc' '*.h' '*.cpp' '*.hpp' | grep -v '^build/')
else
  mapfile -t files < <(find src tests bench tools -name '*.c' -o -name '*.cc' -o -name '*.h' -o -name '*.cpp' -o -name '*.hpp')
fi
existing=()
for f in "${files[@]}"; do [ -f "$f" ] && existing+=("$f"); done
if [ $fix -eq 1 ]; then
  printf '%s\0' "${existing[@]}" | xargs -0 "$cf" -i
  exit 0
fi
bad="$(printf '%s\0' "${existing[@]}" | xargs -0 "$cf" --dry-run 2>&1 | sed -nE 's/^([^:]+):[0-9]+:[0-9]+: warning: code should be clang-formatted.*/\1/p' | sort -u)"
if [ -n "$bad" ]; then
  echo "format: these files differ from clang-format's output (run tools/check_format.sh --fix):"
  printf '  %s\n' $bad
  exit 1
fi
echo "format: ok (${#existing[@]} files)"
