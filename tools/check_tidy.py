#!/usr/bin/python3
"""clang-tidy over the production sources, grouped: the `tidy` ctest's driver (tools/check_tidy.sh).

Most of clang-tidy's time on a file goes to matching its checks over every declaration the file's
headers bring in (the standard library, Boost, gRPC, nlohmann/json), again for every file. So the
files that share one compile command are checked in groups: one generated source that #includes
up to GROUP files is parsed and matched once, and a finding in any of them is reported at its own
file and line (the sources match HeaderFilterRegex, so they count as the group's headers).

Two things a group cannot do, and how they are kept:
- Checks that look only at the main file (misc-unused-using-decls; bugprone-suspicious-include would
  report the group's own #includes) run file by file, with no other check, on the files where they
  could report (MAIN_FILE_TEXT: about one file in seven). Parsing is a third of a file's time alone.
- Files that do not compile together (two of them define the same name at file scope, one's `using`
  changes another's lookup) are not lost: a group that reports anything, finding or error, is split
  in halves and checked again, down to single files checked alone with every check, and only that
  verdict counts. A finding is therefore always one clang-tidy reports on the file alone.

  check_tidy.py TIDY BUILD_DIR ROOT JOBS FILE...      exit 0 clean, 1 findings or failures
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

GROUP = 8
# Checks that report only in the main file, so a group would hide their findings in its members.
PER_FILE_CHECKS = ["misc-unused-using-decls", "bugprone-suspicious-include"]
# Files where those checks could report: a using-declaration (not `using namespace`, not an alias),
# an #include of an implementation file. Only these get the file-by-file pass; the pattern errs on
# the side of matching.
MAIN_FILE_TEXT = re.compile(r'\busing\s+(?!namespace\b)(?!\w+\s*=)|'
                            r'#\s*include\s*[<"][^>"]*\.(c|cc|cpp|cxx|c\+\+|C)[>"]')
# GCC-only warning flags in the compile database are unknown to clang: not a finding. Every warning
# is an error, so clang-tidy's exit status says whether a run found anything.
BASE_ARGS = ["--quiet", "--warnings-as-errors=*", "--extra-arg=-Wno-unknown-warning-option"]


def entry_args(entry):
    if "arguments" in entry:
        return list(entry["arguments"])
    return shlex.split(entry["command"])


def load_commands(build, root):
    """Real source path -> (directory, arguments) from the build's compile database."""
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
        db = json.load(f)
    commands = {}
    for e in db:
        path = os.path.realpath(os.path.join(e["directory"], e["file"]))
        commands.setdefault(os.path.relpath(path, root), (e["directory"], entry_args(e), e["file"]))
    return commands


def group_key(directory, args, file):
    """The compile command without its file and outputs: files sharing it can share a TU."""
    key, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ", "-c"):
            skip = a != "-c"
            continue
        if a == file or a.startswith("-o") and len(a) > 2:
            continue
        key.append(a)
    return directory, tuple(key)


TRACE = os.environ.get("HAMI_TIDY_TRACE") == "1"


def read_source(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        return f.read()


def run(cmd):
    t = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       check=False)
    if TRACE:  # HAMI_TIDY_TRACE=1: each clang-tidy run's time, exit and first finding, on stderr
        first = (findings_of(p.stdout) or [""])[0][:160]
        print(f"tidy: {time.monotonic() - t:6.1f} s rc={p.returncode} {cmd[-1]} {first}",
              file=sys.stderr, flush=True)
    return p.returncode, p.stdout


def findings_of(output):
    return sorted({line for line in output.splitlines()
                   if (": warning: " in line or ": error: " in line)
                   and "warnings treated as errors" not in line})


def main():
    tidy, build, root, jobs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    files = sys.argv[5:]
    commands = load_commands(build, root)
    groups = {}
    alone = []
    for rel in files:
        if rel not in commands:
            alone.append(rel)  # not in the database: clang-tidy infers a command, file by file
            continue
        if rel.endswith(".c") or rel.endswith("_main.cc"):
            # libvgpu's C files parse in well under a second each and disagree on feature macros
            # (_GNU_SOURCE); every program's main defines the same file-scope names (g_stop, Fail).
            alone.append(rel)
            continue
        directory, args, file = commands[rel]
        groups.setdefault(group_key(directory, args, file), []).append(rel)

    work = tempfile.mkdtemp(prefix="tidy-groups-", dir=build)
    db = []

    def unit_for(directory, key, chunk):
        """A generated source that #includes the chunk, with the group's compile command."""
        ext = ".c" if chunk[0].endswith(".c") else ".cc"
        unit = os.path.join(work, f"group{len(db)}{ext}")
        with open(unit, "w", encoding="utf-8") as f:
            f.write("".join(f'#include "{os.path.join(root, m)}"\n' for m in chunk))
        db.append({"directory": directory, "file": unit, "arguments": list(key) + ["-c", unit]})
        return unit

    tasks = []  # (directory, key, chunk)
    for (directory, key), members in sorted(groups.items(), key=lambda g: g[1]):
        for i in range(0, len(members), GROUP):
            chunk = members[i:i + GROUP]
            if len(chunk) == 1:
                alone.append(chunk[0])
            else:
                tasks.append((directory, key, chunk))
    grouped = [r for t in tasks for r in t[2]]
    main_only = [r for r in grouped if MAIN_FILE_TEXT.search(read_source(root, r))]

    off = ",".join("-" + c for c in PER_FILE_CHECKS)
    only = "-*," + ",".join(PER_FILE_CHECKS)

    def check_group(unit, chunk):
        """([], []) when clean; else (the members a diagnostic names, the rest)."""
        rc, out = run([tidy, "-p", work, f"--checks={off}", *BASE_ARGS, unit])
        lines = findings_of(out)
        if rc == 0 and not lines:
            return [], []
        named = [m for m in chunk if any(line.startswith(os.path.join(root, m) + ":")
                                         for line in lines)]
        return named, [m for m in chunk if m not in named]

    def check_alone(rel, checks=None):
        only_these = [f"--checks={checks}"] if checks else []
        rc, out = run([tidy, "-p", build, *only_these, *BASE_ARGS, os.path.join(root, rel)])
        return (findings_of(out) or [f"{rel}: clang-tidy exit {rc}:\n{out}"]) if rc else []

    start = time.monotonic()
    found, split = [], 0
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            singles = [pool.submit(check_alone, r) for r in alone]
            singles += [pool.submit(check_alone, r, only) for r in main_only]
            while tasks:
                # One round of groups; what a failed group leaves is the next round's.
                units_now = [unit_for(directory, key, chunk) for directory, key, chunk in tasks]
                with open(os.path.join(work, "compile_commands.json"), "w", encoding="utf-8") as f:
                    json.dump(db, f)
                results = [pool.submit(check_group, u, t[2]) for u, t in zip(units_now, tasks)]
                next_tasks = []
                for fut, (directory, key, _) in zip(results, tasks):
                    named, rest = fut.result()
                    if not named and not rest:
                        continue
                    split += 1
                    # The members a diagnostic names (a finding, or the second definition of a
                    # name two of them define) go alone; the rest is checked again as a group.
                    # When none is named (an error in a header), the group is halved.
                    if named:
                        parts = [[m] for m in named] + [rest]
                    else:
                        half = (len(rest) + 1) // 2
                        parts = [rest[:half], rest[half:]]
                    for part in parts:
                        if len(part) == 1:
                            singles.append(pool.submit(check_alone, part[0]))
                        elif part:
                            next_tasks.append((directory, key, part))
                tasks = next_tasks
            for fut in singles:
                found += fut.result()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    elapsed = time.monotonic() - start
    if found:
        print("tidy: findings (fix them, or NOLINT(check) with the reason on the line where the "
              "check is wrong):")
        print("\n".join(sorted(set(found))))
        print(f"tidy: {split} groups split; {elapsed:.0f} s")
        return 1
    print(f"tidy: ok ({len(files)} files: {len(grouped)} in groups, {split} groups split, "
          f"{len(alone)} alone, {len(main_only)} also alone for {only}; {jobs} at once, "
          f"{elapsed:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
