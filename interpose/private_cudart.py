#!/usr/bin/env python3
"""Make libsymmpin's private copy of the static CUDA runtime (libcudart_static.a).

The toolkit's archive is one object (cudart_static.o) that also defines cudaMalloc, cudaFree,
cudaMallocAsync and cudaFreeAsync: the very names of symmpin's exported wrappers, whose job is to
pass the PROGRAM's calls on to the program's own runtime. Linking the archive as it is would be a
duplicate definition; so the copy renames those definitions (and the runtime's own references to
them, consistently) to symmpin_static_<name>. The pairs come from the one list of wrapped
functions (interpose/wrapped.h, through interpose/cudart_renames.in and the C preprocessor).

The result is checked: the copy defines none of the old names, so the link cannot pick the
runtime's function where a wrapper belongs.

usage: private_cudart.py OBJCOPY NM RENAMES IN.a OUT.a"""
import os
import subprocess
import sys


def defined_names(nm, archive):
    out = subprocess.run([nm, "--defined-only", archive], check=True, capture_output=True,
                         text=True).stdout
    return {f[-1] for f in (line.split() for line in out.splitlines()) if len(f) >= 3}


def main():
    objcopy, nm, renames, src, dst = sys.argv[1:6]
    words = open(renames, encoding="utf-8").read().split()
    if not words or len(words) % 2:
        sys.exit(f"{renames}: expected 'old new' pairs, got {words!r}")
    pairs = list(zip(words[0::2], words[1::2]))
    args = [objcopy]
    for old, new in pairs:
        args += ["--redefine-sym", f"{old}={new}"]
    tmp = dst + ".tmp"
    subprocess.run(args + [src, tmp], check=True)
    left = defined_names(nm, tmp) & {old for old, _ in pairs}
    if left:
        os.unlink(tmp)
        sys.exit(f"{dst}: still defines {sorted(left)} after renaming")
    os.replace(tmp, dst)


if __name__ == "__main__":
    main()
