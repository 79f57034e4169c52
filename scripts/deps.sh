#!/usr/bin/env bash
# Installs the Debian 12 packages that hami-cpp builds and tests with, when any is missing.
# Idempotent and quiet when everything is already there. Needs root (or sudo) only to install.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  libabsl-dev nlohmann-json3-dev libfmt-dev libspdlog-dev libcli11-dev libyaml-cpp-dev
  libcurl4-openssl-dev libssl-dev libcpp-httplib-dev libboost-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  prometheus yamllint valgrind openssl
  prometheus-cpp-dev
  strace
  python3-yaml unzip
  libglpk-dev
  debootstrap
  clang-format clang-tidy
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "[deps] installing: ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
