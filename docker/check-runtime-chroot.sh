#!/usr/bin/env bash
# usage: docker/check-runtime-chroot.sh DOCKERFILE HAMI LIBVGPU [CACHE_DIR]
#
# The image's runtime stage built for real, without a Docker daemon: a minimal Debian 12 root
# (debootstrap --variant=minbase: the Priority-required set plus apt, what debian:12-slim holds) with
# exactly the packages the runtime stage's `apt-get install` names (their Depends resolved, no
# Recommends, as `--no-install-recommends` does), the built binaries copied where the Dockerfile's
# COPY lines put them; then, inside the chroot and as the image's USER: every library of every binary
# resolves, `hami --version` runs, and each subcommand's `--help` runs. Where check-runtime-deps.sh
# derives the package set from this machine, this proves the image's own root can run the binaries.
#
# The root is cached in CACHE_DIR (default build/tools) per package list, so a rerun costs seconds.
# Skips (77) when not root, without debootstrap, or when the Debian archive cannot be reached.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 DOCKERFILE HAMI LIBVGPU [CACHE_DIR]" >&2; exit 2; }
dockerfile="$1" hami="$2" libvgpu="$3"
cache="${4:-$(dirname "$0")/../build/tools}"
. "$(dirname "$0")/runtime-stage.sh"
mirror="${HAMI_DEBIAN_MIRROR:-$(apt_mirror)}"
mirror="${mirror:-http://deb.debian.org/debian}"

[ "$(id -u)" -eq 0 ] || { echo "check-runtime-chroot: needs root (chroot, debootstrap): skipped"; exit 77; }
command -v debootstrap >/dev/null || { echo "check-runtime-chroot: no debootstrap (scripts/deps.sh installs it): skipped"; exit 77; }
for f in "$dockerfile" "$hami" "$libvgpu"; do [ -e "$f" ] || { echo "check-runtime-chroot: $f does not exist" >&2; exit 2; }; done

# The runtime stage: its apt-get install list, its COPY destinations and its USER.
packages="$(runtime_stage_packages "$dockerfile")"
[ -n "$packages" ] || { echo "check-runtime-chroot: no apt-get install in the runtime-base stage" >&2; exit 1; }
dest_of() {  # the COPY destination of a build output whose path ends in $1, in any stage
  grep -E "^COPY --from=build [^ ]*/$1 " "$dockerfile" | awk '{print $NF}' | head -1
}
hami_dest="$(dest_of src/cmd/hami)"
vgpu_dest="$(dest_of src/vgpu/libvgpu.so)"
user="$(runtime_stage "$dockerfile" | awk '/^USER /{print $2}' | head -1)"
[ -n "$hami_dest" ] && [ -n "$vgpu_dest" ] && [ -n "$user" ] \
  || { echo "check-runtime-chroot: Dockerfile: COPY of hami ($hami_dest), of libvgpu.so ($vgpu_dest) or USER ($user) not found" >&2; exit 1; }

host="$(echo "$mirror" | sed -E 's#^[a-z]+://([^/:]+).*#\1#')"
port="$(echo "$mirror" | sed -nE 's#^[a-z]+://[^/:]+:([0-9]+).*#\1#p')"
[ -n "$port" ] || { case "$mirror" in https:*) port=443 ;; *) port=80 ;; esac; }
if ! timeout 20 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null; then
  echo "check-runtime-chroot: $mirror unreachable: skipped"; exit 77
fi

key="$(echo "$packages" | sha256sum | cut -c1-12)"
root="$cache/runtime-chroot-$key"
if [ ! -e "$root/.complete" ]; then
  rm -rf "$root" "$root.tmp"
  mkdir -p "$cache"
  echo "check-runtime-chroot: debootstrap bookworm minbase + $(echo $packages | wc -w) packages (cached in $root)"
  if ! debootstrap --variant=minbase --include="$(echo $packages | tr ' ' ',')" bookworm "$root.tmp" "$mirror" \
      > "$cache/runtime-chroot-$key.log" 2>&1; then
    log="$cache/runtime-chroot-$key.log"
    rm -rf "$root.tmp"
    # The archive going away mid-run says nothing about the image: skip. Anything else (a package name
    # the archive does not have, a dependency it cannot resolve) is the Dockerfile's fault: fail.
    if grep -qiE "couldn't download|failed getting release|temporary failure|connection (refused|timed out)|unable to connect" "$log" \
       && ! grep -qiE "couldn't find these debs|unable to locate package" "$log"; then
      echo "check-runtime-chroot: the Debian archive failed during debootstrap: skipped"; tail -5 "$log"; exit 77
    fi
    echo "FAIL debootstrap of the runtime stage's packages failed (a package name the archive does not have?):"
    tail -20 "$log"
    exit 1
  fi
  mv "$root.tmp" "$root"
  touch "$root/.complete"
fi

install -D -m 0755 "$hami" "$root$hami_dest"
install -D -m 0644 "$libvgpu" "$root$vgpu_dest"
fail=0
chroot="$(command -v chroot)"
for bin in "$hami_dest" "$vgpu_dest"; do
  if out="$(chroot "$root" /usr/bin/ldd "$bin" 2>&1)" && ! grep -q 'not found' <<<"$out"; then
    echo "ok: $bin: $(grep -c '=>' <<<"$out") libraries resolve in the image root"
  else
    echo "FAIL $bin in the image root:"; grep 'not found' <<<"$out" || echo "$out"; fail=1
  fi
done
run() {  # as the image's user, with nothing of this machine's environment
  if out="$(env -i PATH=/usr/local/bin:/usr/bin:/bin "$chroot" --userspec="$user" "$root" "$@" 2>&1)"; then
    echo "ok: $* ($(head -1 <<<"$out" | cut -c1-60))"
  else
    echo "FAIL $* exits non-zero in the image root:"; echo "$out" | tail -5; fail=1
  fi
}
run "$hami_dest" --version
for sub in scheduler device-plugin monitor sim; do run "$hami_dest" "$sub" --help; done
[ "$fail" -eq 0 ] || exit 1
echo "check-runtime-chroot: ok (Debian 12 minbase + $(echo $packages))"
