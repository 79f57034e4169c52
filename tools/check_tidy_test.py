#!/usr/bin/python3
"""The `tidy_driver` ctest: tools/check_tidy.py loses no finding by checking files in groups.

A throwaway tree whose files share one compile command, so they land in one group: two of them
define the same file-scope name (the group does not compile), one has a finding only clang-tidy's
main-file pass sees (an unused using-declaration), others ordinary findings, others none. The driver
must report exactly the findings clang-tidy reports on each file alone, and pass the clean files.

  check_tidy_test.py REPO_ROOT        exit 0 pass, 1 fail, 77 skipped (no clang-tidy 14)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

FILES = {
    # misc-unused-using-decls (main file only) and a name b.cc defines too
    "src/a.cc": "#include <vector>\nusing std::vector;\nnamespace {\nconst int kLimit = 1;\n}"
                "  // namespace\nint A() { return kLimit; }\n",
    # the second kLimit breaks the group; modernize-use-nullptr
    "src/b.cc": "namespace {\nconst int kLimit = 2;\n}  // namespace\n"
                "int B() {\n  int* p = 0;\n  return p != nullptr ? kLimit : 0;\n}\n",
    "src/c.cc": "int C() { return 3; }\n",
    # a using-declaration that is used: the main-file pass runs and finds nothing
    "src/d.cc": "#include <string>\nusing std::string;\n"
                "std::string D() { return string(\"d\"); }\n",
    # readability-identifier-naming, found by the group once b.cc is out of it
    "src/e.cc": "class badName {};\nint E() { return sizeof(badName); }\n",
    # performance-unnecessary-value-param
    "src/f.cc": "#include <string>\nunsigned long F(std::string s) { return s.size(); }\n",
}
EXPECTED = {
    ("src/a.cc", "misc-unused-using-decls"),
    ("src/b.cc", "modernize-use-nullptr"),
    ("src/e.cc", "readability-identifier-naming"),
    ("src/f.cc", "performance-unnecessary-value-param"),
}


def tidy_binary():
    for c in ("clang-tidy-14", "clang-tidy"):
        path = shutil.which(c)
        if path:
            out = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
            if "version 14." in out.stdout:
                return path
    return None


def run_driver(repo, tidy, root, files):
    return subprocess.run(["/usr/bin/python3", os.path.join(repo, "tools", "check_tidy.py"), tidy,
                           os.path.join(root, "build"), root, "2", *files],
                          capture_output=True, text=True, check=False)


def main():
    repo = os.path.realpath(sys.argv[1])
    tidy = tidy_binary()
    if not tidy:
        print("tidy_driver: clang-tidy 14 not installed; skipped")
        return 77
    root = tempfile.mkdtemp(prefix="tidy-driver-")
    try:
        shutil.copy(os.path.join(repo, ".clang-tidy"), root)
        os.makedirs(os.path.join(root, "src"))
        os.makedirs(os.path.join(root, "build"))
        db = []
        for rel, text in FILES.items():
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
            path = os.path.join(root, rel)
            db.append({"directory": os.path.join(root, "build"), "file": path,
                       "command": f"/usr/bin/c++ -std=c++20 -O2 -o {rel}.o -c {path}"})
        with open(os.path.join(root, "build", "compile_commands.json"), "w", encoding="utf-8") as f:
            json.dump(db, f)

        failures = []
        p = run_driver(repo, tidy, root, list(FILES))
        print(p.stdout + p.stderr)
        found = set()
        for line in p.stdout.splitlines():
            for rel in FILES:
                if line.startswith(os.path.join(root, rel) + ":") and "[" in line:
                    found.add((rel, line.rsplit("[", 1)[1].split(",")[0].rstrip("]")))
        if p.returncode != 1:
            failures.append(f"exit {p.returncode}, want 1")
        if found != EXPECTED:
            failures.append(f"findings {sorted(found)}, want {sorted(EXPECTED)}")
        if "redefinition" in p.stdout:
            failures.append("a group's own compile error was reported as a finding")

        clean = run_driver(repo, tidy, root, ["src/c.cc", "src/d.cc"])
        print(clean.stdout + clean.stderr)
        if clean.returncode != 0 or "tidy: ok" not in clean.stdout:
            failures.append(f"clean files: exit {clean.returncode}, want 0 and 'tidy: ok'")
        left = os.listdir(os.path.join(root, "build"))
        if left != ["compile_commands.json"]:
            failures.append(f"left behind in the build directory: {left}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
