#!/usr/bin/env bash
# usage: docker/base-images.sh [CACHE_DIR]
#
# Makes the images docker/Dockerfile starts FROM, without any registry but Debian's archive:
#   debian:12, debian:12-slim   a Debian 12 (bookworm) minbase root from debootstrap, `docker import`ed
#                               (slimmed as debian:12-slim is: no docs, man pages or locales)
#   hami-cpp/cuda-headers:local this machine's CUDA include directory at /usr/local/cuda/include, the
#                               image to pass as --build-arg CUDA_HEADERS_IMAGE (headers only, nothing
#                               of it is linked or shipped)
# An image already present is kept. The debootstrapped root is cached in CACHE_DIR (default
# build/tools) as a tarball, so a second machine-local run costs seconds.
# Environment: CUDA_INCLUDE (default /usr/local/cuda/include), HAMI_DEBIAN_MIRROR (default: the
# archive this machine's apt uses, else deb.debian.org), DOCKER (default docker).
# Exit 77 when debootstrap is missing or the archive cannot be reached (nothing to test with).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${1:-$here/../build/tools}"
docker="${DOCKER:-docker}"
cuda_include="${CUDA_INCLUDE:-/usr/local/cuda/include}"
mirror="${HAMI_DEBIAN_MIRROR:-$(. "$here/runtime-stage.sh" && apt_mirror)}"
mirror="${mirror:-http://deb.debian.org/debian}"
PATH_ENV='ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

have() { "$docker" image inspect "$1" >/dev/null 2>&1; }

if ! have debian:12 || ! have debian:12-slim; then
  command -v debootstrap >/dev/null || { echo "base-images: no debootstrap (scripts/deps.sh installs it)" >&2; exit 77; }
  tarball="$cache/debian-bookworm-minbase.tar"
  if [ ! -s "$tarball" ]; then
    mkdir -p "$cache"
    root="$(mktemp -d "$cache/minbase.XXXXXX")"
    trap 'rm -rf "$root"' EXIT
    echo "base-images: debootstrap --variant=minbase bookworm from $mirror"
    if ! debootstrap --variant=minbase bookworm "$root" "$mirror" >"$cache/minbase.log" 2>&1; then
      echo "base-images: debootstrap failed (log: $cache/minbase.log):" >&2
      tail -5 "$cache/minbase.log" >&2
      exit 77
    fi
    # What debian:12-slim leaves out, and keeps out of later apt installs.
    rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
      "$root"/usr/share/locale/* "$root"/var/cache/apt/*.bin "$root"/var/lib/apt/lists/*
    printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
      'path-exclude /usr/share/man/*' 'path-exclude /usr/share/info/*' 'path-exclude /usr/share/locale/*' \
      >"$root/etc/dpkg/dpkg.cfg.d/docker-slim"
    tar -C "$root" --numeric-owner -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    rm -rf "$root"
    trap - EXIT
  fi
  for name in debian:12 debian:12-slim; do
    have "$name" || "$docker" import --change "$PATH_ENV" --change 'CMD ["bash"]' "$tarball" "$name" >/dev/null
    echo "base-images: $name from $tarball"
  done
fi

if ! have hami-cpp/cuda-headers:local; then
  [ -f "$cuda_include/cuda.h" ] || { echo "base-images: no cuda.h in $cuda_include (set CUDA_INCLUDE)" >&2; exit 77; }
  # -h: /usr/local/cuda is usually a link to /usr/local/cuda-<version>; the image holds the files.
  tar -C "$cuda_include" -chf - --transform 's,^\.,usr/local/cuda/include,' . \
    | "$docker" import --change "$PATH_ENV" - hami-cpp/cuda-headers:local >/dev/null
  echo "base-images: hami-cpp/cuda-headers:local from $cuda_include"
fi
