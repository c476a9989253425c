#!/usr/bin/env python3
"""Whether ELF files (x86_64) load on an older glibc, checked without one: every glibc version
each file needs (its version needs) is one that glibc's library of that name defines there, and
every versioned symbol it imports is defined, with that version, by a library of that glibc the
file names in NEEDED (the dynamic linker takes a versioned symbol from any object loaded, but only
from those). glibc's libraries of the version asked for are the link stubs that `zig cc -target
x86_64-linux-gnu.VERSION` makes from glibc's symbol lists (PyPI's `ziglang`, imported by the Python
that runs this script). Used by scripts/ci-wheel.sh on the wheel's library and symmpin-replay
(docs/packaging.md: the wheel is tagged manylinux_2_28, so glibc 2.28).

  check-glibc.py VERSION FILE...     one line per file; exit status 0 where every file passes
"""
import os
import re
import subprocess
import sys
import tempfile

GLIBC_VERSION = re.compile(r"^GLIBC_\d+(\.\d+)*$")


def readelf(*args):
    return subprocess.run(["readelf", "-W", *args], check=True, capture_output=True,
                          text=True).stdout


def soname(path):
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", readelf("-d", path))
    return m.group(1) if m else os.path.basename(path)


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf("-d", path))


def dyn_symbols(path):
    """(defined, imported): {(name, version)} of the dynamic symbols with a version."""
    defined, imported = set(), set()
    for line in readelf("--dyn-syms", path).splitlines():
        f = line.split()
        if len(f) < 8 or not f[0].endswith(":") or "@" not in f[7]:
            continue
        name, _, version = f[7].partition("@")
        version = version.lstrip("@")
        (imported if f[6] == "UND" else defined).add((name, version))
    return defined, imported


def version_needs(path):
    """{file: {version}} of the version needs section."""
    needs, current = {}, None
    for line in readelf("-V", path).splitlines():
        m = re.search(r"Version: \d+\s+File: (\S+)", line)
        if m:
            current = needs.setdefault(m.group(1), set())
            continue
        m = re.search(r"Name: (\S+)\s+Flags:", line)
        if m and current is not None:
            current.add(m.group(1))
    return needs


def version_definitions(path):
    text = readelf("-V", path)
    section = text.split(".gnu.version_d", 1)[1].split(".gnu.version_r", 1)[0] \
        if ".gnu.version_d" in text else ""
    return set(re.findall(r"Name: (\S+)", section))


def glibc_stubs(version, folder):
    """{soname: (version definitions, defined symbols)} of glibc `version`'s libraries."""
    src = os.path.join(folder, "probe.c")
    with open(src, "w") as f:
        f.write("int symmpin_probe(void) { return 0; }\n")
    env = dict(os.environ, ZIG_GLOBAL_CACHE_DIR=os.path.join(folder, "zig-cache"),
               ZIG_LOCAL_CACHE_DIR=os.path.join(folder, "zig-cache"))
    cmd = [sys.executable, "-m", "ziglang", "cc", "-target", f"x86_64-linux-gnu.{version}",
           "-fno-sanitize=undefined", "-shared", "-o", os.path.join(folder, "probe.so"), src,
           "-lm", "-ldl", "-lpthread", "-lrt"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"check-glibc: {' '.join(cmd)} failed:\n{p.stdout}{p.stderr}")
    stubs = {}
    for root, _, files in os.walk(env["ZIG_GLOBAL_CACHE_DIR"]):
        for name in files:
            if re.match(r"^lib[a-z]+\.so\.\d+$", name):
                path = os.path.join(root, name)
                stubs[soname(path)] = (version_definitions(path), dyn_symbols(path)[0])
    if "libc.so.6" not in stubs:
        sys.exit(f"check-glibc: no libc.so.6 among zig's stubs in {env['ZIG_GLOBAL_CACHE_DIR']}")
    return stubs


def check(path, version, stubs):
    names = needed(path)
    problems = []
    for lib, versions in version_needs(path).items():
        if lib not in stubs:
            continue  # not glibc's
        if lib not in names:
            problems.append(f"needs versions of {lib}, which is not in NEEDED")
        missing = sorted(v for v in versions if v not in stubs[lib][0])
        if missing:
            problems.append(f"{lib} of glibc {version} has no version {', '.join(missing)}")
    have = set()
    for lib in names:
        if lib in stubs:
            have |= stubs[lib][1]
    imports = sorted((n, v) for n, v in dyn_symbols(path)[1] if GLIBC_VERSION.match(v))
    absent = [f"{n}@{v}" for n, v in imports if (n, v) not in have]
    if absent:
        problems.append(f"not defined by its NEEDED libraries of glibc {version}: "
                        + " ".join(absent))
    newest = max((v for _, v in imports), default="none",
                 key=lambda v: [int(x) for x in v[len("GLIBC_"):].split(".")])
    what = (f"{len(imports)} glibc symbols, the newest version {newest}; NEEDED "
            + " ".join(names))
    if problems:
        print(f"FAILED {path} on glibc {version}: {what}")
        for p in problems:
            print(f"       | {p}")
        return False
    print(f"ok     {path} loads on glibc {version}: {what}")
    return True


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    version, files = sys.argv[1], sys.argv[2:]
    with tempfile.TemporaryDirectory(prefix="symmpin-check-glibc-") as folder:
        stubs = glibc_stubs(version, folder)
        results = [check(f, version, stubs) for f in files]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
