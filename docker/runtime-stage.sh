# Sourced by docker/check-runtime-*.sh and docker/base-images.sh: what the Dockerfile's runtime stage (`FROM ... AS runtime-base`,
# up to the next FROM) says.

# The stage's lines.
runtime_stage() { awk '/^FROM /{ s = ($0 ~ / AS runtime-base$/) } s' "$1"; }

# The packages its `apt-get install` names, one per line, sorted (nothing when there is none).
runtime_stage_packages() {
  runtime_stage "$1" | awk '{ line = line " " $0; if ($0 !~ /\\$/) { print line; line = "" } }' \
    | grep -o 'apt-get install[^&]*' | sed 's/apt-get install//; s/\\//g' \
    | tr ' ' '\n' | grep -v '^-' | grep -v '^$' | sort -u || true
}

# The archive this machine's apt uses for Debian (deb822 or one-line sources); nothing when none.
apt_mirror() {
  { { grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}'
    grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk '{print $2}'; } \
    | grep -v -- '-security' | grep -E '^https?://' | head -1; } || true
}
