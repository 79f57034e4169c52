#!/usr/bin/env bash
# Fails when a module under src/ includes a module (or third-party header) its layer must not see.
# Rules: tools/layering.txt. Includes of our code are written "module/file.h" relative to src/.
set -uo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
table="$root/tools/layering.txt"
declare -A allowed forbidden
while IFS= read -r line; do
  line="${line%%#*}"; [ -z "${line// }" ] && continue
  key="${line%%:*}"; val="${line#*:}"
  if [[ "$key" == !* ]]; then forbidden["${key#!}"]="$val"; else allowed["$key"]="$val"; fi
done < "$table"

fail=0
for dir in "$root"/src/*/; do
  mod="$(basename "$dir")"
  if [ -z "${allowed[$mod]+x}" ]; then
    echo "layering: module src/$mod is not in tools/layering.txt"; fail=1; continue
  fi
  ok=" $mod ${allowed[$mod]} "
  while IFS= read -r hit; do
    file="${hit%%:*}"; rest="${hit#*:}"; lineno="${rest%%:*}"; text="${rest#*:}"
    inc="$(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/p' <<<"$text")"
    [ -z "$inc" ] && continue
    [[ "$inc" != */* ]] && continue          # same-folder include
    target="${inc%%/*}"
    [ -d "$root/src/$target" ] || continue   # not one of our modules (e.g. a generated path)
    if [[ "$ok" != *" $target "* ]]; then
      echo "layering: ${file#$root/}:$lineno: module '$mod' must not include '$inc' (allowed: ${allowed[$mod]:-nothing})"
      fail=1
    fi
  done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include' "$dir" --include='*.h' --include='*.cc' --include='*.c' --include='*.hpp' --include='*.cpp' || true)
  if [ -n "${forbidden[$mod]+x}" ]; then
    for pat in ${forbidden[$mod]}; do
      re="${pat//./\\.}"
      if [[ "$pat" == \<* ]]; then re="include[[:space:]]*${re}"; else re="include[[:space:]]*[<\"]${re}"; fi
      # tests of a module may use anything; only production sources are held to the rule
      while IFS= read -r hit; do
        case "$hit" in *_test.cc:*|*_fuzz.cc:*|*/testing/*) continue ;; esac
        echo "layering: ${hit#$root/}: module '$mod' must not include third-party header matching '$pat'"
        fail=1
      done < <(grep -rnE "^[[:space:]]*#[[:space:]]*${re}" "$dir" 2>/dev/null || true)
    done
  fi
done
[ $fail -eq 0 ] && echo "layering: ok"
exit $fail
