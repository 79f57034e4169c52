#!/bin/sh
# Runs `promtool check metrics` (lint included) on the exposition printed by $1.
# Exit 77 (ctest SKIP_RETURN_CODE) only when promtool is not installed.
set -eu
command -v promtool >/dev/null 2>&1 || { echo "promtool not installed (Debian package prometheus)"; exit 77; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$1" >"$out"
printf 'checking %s lines of exposition\n' "$(wc -l <"$out")"
promtool check metrics <"$out"
