#!/usr/bin/env python3
"""The exports of libsymmpin.so against the one list of wrapped functions (interpose/wrapped.h).

Three sets must be equal, so that no wrapper is defined without being exported (the bug that
left ncclGroupSimulateEnd local: programs reached NCCL directly and symmpin's group depth went
wrong) and nothing is exported that is not a wrapper:
  - the list (printed by list_wrapped, built from wrapped.h);
  - the functions the wrappers' objects define with default visibility (SYMMPIN_EXPORT);
  - the dynamic symbols the built library defines (nm -D).
TAP output. usage: check_exports.py LIST_PROGRAM WRAPPERS_STATIC_LIB LIBSYMMPIN"""
import subprocess
import sys


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def default_visible_definitions(archive):
    """Functions an archive's objects define GLOBAL with DEFAULT visibility (readelf -s)."""
    names = set()
    for line in run("readelf", "-sW", archive).splitlines():
        f = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(f) >= 8 and f[3] == "FUNC" and f[4] == "GLOBAL" and f[5] == "DEFAULT" and f[6] != "UND":
            names.add(f[7])
    return names


def dynamic_definitions(lib):
    names = set()
    for line in run("nm", "-D", "--defined-only", lib).splitlines():
        f = line.split()
        if len(f) >= 3:
            names.add(f[2].split("@")[0])
    return names


def main():
    lister, archive, lib = sys.argv[1:4]
    listed = set(run(lister).split())
    marked = default_visible_definitions(archive)
    exported = dynamic_definitions(lib)
    checks = [
        ("the list is not empty", bool(listed), ""),
        ("every wrapper the objects define for export is in the list", marked <= listed,
         "defined with SYMMPIN_EXPORT but not listed in interpose/wrapped.h: %s" % sorted(marked - listed)),
        ("every listed function has a wrapper", listed <= marked,
         "listed but no exported wrapper: %s" % sorted(listed - marked)),
        ("the library exports every listed function", listed <= exported,
         "listed but not exported by the library (nm -D): %s" % sorted(listed - exported)),
        ("the library exports nothing else", exported <= listed,
         "exported but not listed: %s" % sorted(exported - listed)),
    ]
    print("1..%d" % len(checks))
    bad = 0
    for i, (name, ok, why) in enumerate(checks, 1):
        print("%s %d - %s" % ("ok" if ok else "not ok", i, name))
        if not ok:
            bad += 1
            print("# " + why)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
