#!/usr/bin/env bash
# clang's thread-safety analysis (-Wthread-safety) over the C++ sources of src/ (tests and fuzz
# targets left out; the fake servers under testing/ included: they lock too) that use a lock
# annotation themselves or through a header of ours they include. The flags come from a configured
# build directory's compile database; any thread-safety warning fails, and so does a bare std lock
# outside the fake driver libraries and libvgpu. docs/design.md, "Lock annotations", says what to
# annotate.
#   tools/check_thread_safety.sh [SOURCE_DIR] [BUILD_DIR]   (default: this checkout, build/dev)
#   HAMI_TSA_FILES="src/a.cc src/b.cc" tools/check_thread_safety.sh   (only these files)
#   HAMI_TSA_LIST=1 tools/check_thread_safety.sh    (print the files it would check, and stop)
# Exit 77 (ctest: skipped) when no clang++ or no compile database is found. Files run in parallel,
# HAMI_JOBS (default: every core) at a time.
set -uo pipefail
root="$(cd "${1:-$(dirname "$0")/..}" && pwd)"
build="${2:-$root/build/dev}"
cxx=""
for c in clang++-14 clang++; do
  if command -v "$c" >/dev/null; then cxx="$c"; break; fi
done
[ -n "$cxx" ] || { echo "thread-safety: clang++ not installed; skipped"; exit 77; }
[ -f "$build/compile_commands.json" ] || { echo "thread-safety: no $build/compile_commands.json; skipped"; exit 77; }
# Unannotated std locks would pass the analysis unseen: production code locks with common/mutex.h
# (or absl::Mutex). Not in the fakes and libvgpu, which may include only the NVML ABI header.
bare="$(cd "$root" && grep -rnE --include='*.cc' --include='*.h' \
  'std::(mutex|shared_mutex|recursive_mutex|timed_mutex|condition_variable(_any)?|lock_guard|unique_lock|scoped_lock|shared_lock)\b' src |
  grep -vE '^src/(fakes|vgpu)/|^src/common/mutex\.h:|_test\.cc:|_fuzz\.cc:')"
if [ -n "$bare" ]; then
  echo "thread-safety: std locks without annotations (use hami::Mutex, MutexLock, CondVar of common/mutex.h):"
  printf '%s\n' "$bare"
  exit 1
fi
# Generated headers (protobuf) the sources include; nothing else is built. Absent without gRPC.
cmake --build "$build" --target hami_generated_sources >/dev/null 2>&1 || true
cmds="$(mktemp)"
log="$(mktemp)"
trap 'rm -f "$cmds" "$log"' EXIT
# One line per file: the file, a tab, then its clang command (NUL-free, shell-quoted).
HAMI_TSA_FILES="${HAMI_TSA_FILES:-}" /usr/bin/python3 - "$build/compile_commands.json" "$root" "$cxx" >"$cmds" <<'EOF'
import json, os, re, shlex, sys
db, root, cxx = sys.argv[1], os.path.realpath(sys.argv[2]), sys.argv[3]
src = os.path.join(root, 'src')
skip = re.compile(r'(_test|_fuzz)\.cc$|/fuzz_driver\.cc$')
# What marks a file as taking part: a capability, a lock requirement, or one of our lockables.
marker = re.compile(r'ABSL_(GUARDED_BY|PT_GUARDED_BY|[A-Z_]*LOCKS?_(REQUIRED|FUNCTION|EXCLUDED)|'
                    r'LOCKABLE|SCOPED_LOCKABLE|ACQUIRED_(AFTER|BEFORE)|LOCK_RETURNED|ASSERT_[A-Z_]*LOCK)|'
                    r'\bMutexLock\b|\bReaderLock\b|\bWriterLock\b|absl::Mutex\b')
include = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
memo = {}
def marked(path, seen):
    """True when `path` or a header of ours it includes (transitively) carries a marker."""
    if path in memo: return memo[path]
    if path in seen: return False
    seen.add(path)
    try:
        text = open(path, errors='replace').read()
    except OSError:
        return False
    hit = bool(marker.search(text))
    for inc in include.findall(text):
        if hit: break
        for base in (os.path.dirname(path), src):
            cand = os.path.normpath(os.path.join(base, inc))
            if os.path.isfile(cand):
                hit = marked(cand, seen)
                break
    memo[path] = hit
    return hit
wanted = set(os.environ.get('HAMI_TSA_FILES', '').split())
done = set()
for e in json.load(open(db)):
    f = os.path.realpath(os.path.join(e['directory'], e['file']))
    rel = os.path.relpath(f, root)
    if rel in done or not rel.startswith('src/') or not rel.endswith('.cc'): continue
    if wanted and rel not in wanted: continue
    if not wanted and (skip.search(rel) or not marked(f, set())): continue
    done.add(rel)
    args = e['arguments'] if 'arguments' in e else shlex.split(e['command'])
    keep, it = [], iter(args[1:])
    for a in it:
        if a in ('-o', '-MF', '-MT', '-MQ'): next(it, None); continue
        if a in ('-c', f, e['file']) or a.startswith(('-W', '-O', '-g', '-M')): continue
        keep.append(a)
    cmd = [cxx, '-fsyntax-only', *keep, '-Wno-everything', '-Wthread-safety',
           '-Werror=thread-safety', f]
    print(rel + '\t' + ' '.join(shlex.quote(a) for a in cmd))
EOF
n="$(wc -l <"$cmds")"
[ "$n" -gt 0 ] || { echo "thread-safety: no files"; exit 1; }
if [ -n "${HAMI_TSA_LIST:-}" ]; then cut -f1 "$cmds"; exit 0; fi
jobs="${HAMI_JOBS:-$(nproc)}"
cd "$build"
cut -f2- "$cmds" | tr '\n' '\0' | xargs -0 -P "$jobs" -n 1 sh -c >"$log" 2>&1
rc=$?
findings="$(grep -E '(warning|error): ' "$log" | sort -u)"
if [ -n "$findings" ]; then
  echo "thread-safety: findings (docs/design.md, \"Lock annotations\"):"
  printf '%s\n' "$findings"
  exit 1
fi
if [ $rc -ne 0 ]; then
  echo "thread-safety: clang failed without a finding:"
  cat "$log"
  exit 1
fi
echo "thread-safety: ok ($n files)"
