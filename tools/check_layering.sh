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
declare -A used   # "mod target" pairs some include actually uses
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
    [ "$target" != "$mod" ] && used["$mod $target"]=1
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
# The table is the real graph: an allowance no include uses is an error (remove it from the table).
for mod in "${!allowed[@]}"; do
  [ -d "$root/src/$mod" ] || { echo "layering: tools/layering.txt names '$mod', which is not a module under src/"; fail=1; continue; }
  for target in ${allowed[$mod]}; do
    if [ -z "${used["$mod $target"]+x}" ]; then
      echo "layering: tools/layering.txt allows '$mod' to include '$target', but no file of src/$mod does; remove the allowance"
      fail=1
    fi
  done
done
# docs/design.md carries the same table for readers; it must say what the table says.
doc="$root/docs/design.md"
if [ -f "$doc" ]; then
  want="$(for mod in $(grep -vE '^[[:space:]]*(#|!|$)' "$table" | cut -d: -f1); do
    echo "$mod:$(sed -E 's/#.*//' <<<"${allowed[$mod]}" | xargs)"; done)"
  have="$(sed -n '/<!-- layers:begin/,/<!-- layers:end/p' "$doc" | sed -nE 's/^\| `([a-z0-9_]+)` \| (.*) \|$/\1:\2/p' |
    sed -E 's/nothing of ours//; s/`//g; s/,//g' | awk -F: '{ $2 = $2; gsub(/ +/, " ", $2); sub(/^ /, "", $2); print $1 ":" $2 }')"
  if [ "$want" != "$have" ]; then
    echo "layering: the layer table in docs/design.md differs from tools/layering.txt:"
    diff <(echo "$want") <(echo "$have") | sed 's/^/  /'
    fail=1
  fi
fi
[ $fail -eq 0 ] && echo "layering: ok"
exit $fail
