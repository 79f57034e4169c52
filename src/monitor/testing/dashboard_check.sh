#!/bin/sh
# Every hami_* metric the Grafana dashboard ($2) queries must be in the exporter's output ($1 prints it).
set -eu
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$1" >"$out"
missing=0
for m in $(grep -o 'hami_[a-z_]*' "$2" | sort -u); do
  if ! grep -q "^$m[{ ]" "$out"; then
    echo "dashboard $2 queries $m, which the exporter does not export"
    missing=1
  fi
done
[ "$missing" -eq 0 ] && echo "all dashboard metrics exported"
exit "$missing"
