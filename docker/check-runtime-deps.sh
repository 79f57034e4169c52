#!/usr/bin/env bash
# usage: docker/check-runtime-deps.sh DOCKERFILE BINARY...
# Fails when the Dockerfile's runtime stage (`FROM ... AS runtime-base`) does not install a Debian
# package that one of the built BINARIES loads. The needed set is derived, not listed: every library
# `ldd` resolves for a binary is mapped to its package with `dpkg -S`. A package counts as installed
# in the image when the runtime stage's `apt-get install` names it, when it is a dependency (Depends
# or Pre-Depends, recursively, as dpkg knows them here) of one that is named, or when it is of
# Priority required (the debian:12-slim base). Run on the build machine, where the binaries were
# linked against these very packages. No Docker daemon needed.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 DOCKERFILE BINARY..." >&2; exit 2; }
dockerfile="$1"; shift
command -v dpkg-query >/dev/null || { echo "check-runtime-deps: no dpkg here, skipping"; exit 77; }

# Packages named by apt-get install in the runtime-base stage (up to the next FROM).
. "$(dirname "$0")/runtime-stage.sh"
named="$(runtime_stage_packages "$dockerfile")"
[ -n "$named" ] || { echo "check-runtime-deps: no apt-get install in the runtime-base stage of $dockerfile" >&2; exit 1; }

# Closure over Depends/Pre-Depends of what is installed on this machine.
declare -A have=()
queue=($named $(dpkg-query -W -f='${Package} ${Priority}\n' | awk '$2 == "required" {print $1}'))
while [ ${#queue[@]} -gt 0 ]; do
  p="${queue[0]}"; queue=("${queue[@]:1}")
  [ -n "${have[$p]:-}" ] && continue
  have[$p]=1
  deps="$(dpkg-query -W -f='${Depends},${Pre-Depends}\n' "$p" 2>/dev/null || true)"
  # "a (>= 1) | b, c:any" -> every alternative counts (apt installs the first; either satisfies us).
  for d in $(echo "$deps" | tr ',|' '\n\n' | sed 's/(.*)//; s/:any//; s/ //g' | grep -v '^$'); do
    [ -z "${have[$d]:-}" ] && queue+=("$d")
  done
done

# library path -> owning package, from one dpkg -S over every spelling of every path (merged /usr:
# dpkg may know a file as /lib/... or /usr/lib/..., and ldd may print either or a symlink).
declare -A owner_of=()
resolve_owners() {
  local cands=() lib real
  for lib in "$@"; do
    real="$(readlink -f "$lib")"
    cands+=("$lib" "$real" "${lib#/usr}" "/usr${lib#/usr}" "${real#/usr}" "/usr${real#/usr}")
  done
  while IFS= read -r line; do
    case "$line" in diversion*) continue ;; esac
    owner_of["${line#*: }"]="${line%%:*}"
  done < <(dpkg -S "${cands[@]}" 2>/dev/null || true)
}
owner() {
  local lib="$1" real cand
  real="$(readlink -f "$lib")"
  for cand in "$lib" "$real" "${lib#/usr}" "/usr${lib#/usr}" "${real#/usr}" "/usr${real#/usr}"; do
    [ -n "${owner_of[$cand]:-}" ] && { echo "${owner_of[$cand]}"; return; }
  done
  return 1
}

missing=0
for bin in "$@"; do
  [ -e "$bin" ] || { echo "check-runtime-deps: $bin does not exist" >&2; exit 2; }
  libs="$(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)"
  if ldd "$bin" | grep -q 'not found'; then
    echo "check-runtime-deps: $bin has unresolved libraries here:" >&2; ldd "$bin" | grep 'not found' >&2; exit 1
  fi
  resolve_owners $libs
  n=0
  for lib in $libs; do
    pkg="$(owner "$lib")" || { echo "FAIL $bin: $lib belongs to no Debian package (not installable in the image)"; missing=1; continue; }
    n=$((n + 1))
    if [ -z "${have[$pkg]:-}" ]; then
      echo "FAIL $bin needs $(basename "$lib") from package $pkg, which the runtime stage of $dockerfile does not install"
      missing=1
    fi
  done
  echo "$(basename "$bin"): $n libraries checked"
done
[ "$missing" -eq 0 ] || { echo "check-runtime-deps: add the packages above to the runtime-base apt-get install"; exit 1; }
echo "check-runtime-deps: ok (runtime stage installs: $(echo $named))"
