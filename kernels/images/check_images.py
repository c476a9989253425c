#!/usr/bin/env python3
"""The embedded kernel images as the library links them, checked with readelf (TAP).

    check_images.py --readelf READELF --expect sm_80,sm_90,compute_90 [--names] DUMP

DUMP is kernels_images_dump (dump_images.c): it writes every image of the compiled images.c. The
images must be those of gpu_archs then gpu_ptx (--expect), in that order. Each cubin must be what a
CUDA 12 driver loads: machine NVIDIA CUDA, code for its architecture, ELF ABI version 7 (CUDA 12's
format; ptxas 13 writes 8), or for Blackwell (sm_100+, where ptxas 12.8 itself writes version 8)
a toolkit note of release 12. The PTX must be one NUL-terminated text whose .version is no newer
than embed.py lowers it to. With --names, instead: the kernel entry points of every cubin are
exactly the extern "C" symmpin_* names of kernels/names.h, which kernels/launch.c asks the driver
for (DUMP --names lists them). A separate check from
embed.py's own, on purpose: readelf is another reading of the same bytes.
"""
import argparse
import re
import subprocess
import sys
import tempfile

# embed.py's PTX_FLOOR and TARGET_MIN, repeated: a change of the version there must be made here.
PTX_MAX = {100: (8, 6), 101: (8, 6), 120: (8, 7)}
PTX_FLOOR = (8, 0)
STO_CUDA_ENTRY = 0x10  # st_other bit of a kernel entry point (readelf: "[<other>: 10]")

results = []


def check(ok, what, detail=""):
    results.append((ok, what + (f": {detail}" if detail and not ok else "")))


def readelf(args):
    return subprocess.run([opts.readelf] + args, capture_output=True, text=True).stdout


def check_cubin(name, sm, path):
    if opts.names:
        entries = re.findall(r"^\s*\d+:\s+\S+\s+\S+\s+FUNC\s+\S+\s+\S+\s+\[<other>: ([0-9a-f]+)\]"
                             r"\s+\S+\s+(\S+)\s*$", readelf(["-W", "-s", path]), re.M)
        entries = {n for other, n in entries if int(other, 16) & STO_CUDA_ENTRY}
        missing, extra = sorted(expected_names - entries), sorted(entries - expected_names)
        check(bool(entries) and not missing and not extra,
              f"{name}: its kernel entry points are exactly kernels/names.h's "
              f"{len(expected_names)} extern \"C\" names",
              f"{len(entries)} entry points; missing {len(missing)} {missing[:2]}, "
              f"not in names.h {len(extra)} {extra[:2]}")
        return
    field = dict(re.findall(r"^\s*([A-Za-z/ ]+):\s*(.*?)\s*$", readelf(["-h", path]), re.M))
    check("NVIDIA CUDA" in field.get("Machine", ""), f"{name}: machine NVIDIA CUDA",
          field.get("Machine", "not an ELF file"))
    abi = field.get("ABI Version", "?")
    want = "7" if sm < 100 else "8"
    check(abi == want, f"{name}: ELF ABI version {want} (" +
          ("CUDA 12's cubin format)" if sm < 100 else "what ptxas 12.8 writes for Blackwell)"),
          f"version {abi} (a ptxas 13 cubin?)")
    flags = int(field.get("Flags", "0").split(",")[0], 16)
    arch = flags & 0xFF if abi == "7" else (flags >> 8) & 0xFF
    check(arch == sm, f"{name}: code for sm_{sm}", f"e_flags {flags:#x} say sm_{arch}")
    # ptxas 12.8 writes no toolkit note for sm_8x/sm_9x, one of "release 12.8" for Blackwell;
    # ptxas 13 one of "release 13.0" for every target.
    m = re.search(r"release (\d+)\.(\d+)", readelf(["-p", ".note.nv.tkinfo", path]))
    check(m.group(1) == "12" if m else sm < 100, f"{name}: made by a CUDA 12 ptxas (toolkit note)",
          f"release {m.group(1)}.{m.group(2)}" if m else "no toolkit note")


def check_ptx(name, num, path):
    data = open(path, "rb").read()
    check(data.endswith(b"\0") and data.count(b"\0") == 1, f"{name}: one NUL-terminated text")
    lines = [l.strip() for l in data.rstrip(b"\0").decode("ascii", "replace").split("\n")]
    first = next((l for l in lines if l and not l.startswith("//")), "")
    m = re.fullmatch(r"\.version (\d+)\.(\d+)", first)
    limit = PTX_MAX.get(num, PTX_FLOOR)
    check(bool(m) and (int(m.group(1)), int(m.group(2))) <= limit,
          f"{name}: starts (after comments) with a .version no newer than {limit[0]}.{limit[1]}",
          repr(first[:40]))


parser = argparse.ArgumentParser()
parser.add_argument("--readelf", required=True)
parser.add_argument("--expect", required=True, help="gpu_archs then gpu_ptx, comma-separated")
parser.add_argument("--names", action="store_true")
parser.add_argument("dump")
opts = parser.parse_args()

if opts.names:
    listed = subprocess.run([opts.dump, "--names"], capture_output=True, text=True)
    expected_names = set(listed.stdout.split())
    check(listed.returncode == 0 and bool(expected_names) and
          all(n.startswith("symmpin_") for n in expected_names),
          "kernels/names.h lists symmpin_* entry points", listed.stderr.strip())

with tempfile.TemporaryDirectory() as tmp:
    out = subprocess.run([opts.dump, tmp], capture_output=True, text=True)
    check(out.returncode == 0, "the images can be written out", out.stderr.strip())
    images = [line.split(" ", 4) for line in out.stdout.splitlines()]
    got = [("compute_" if is_ptx == "1" else "sm_") + arch for _, arch, is_ptx, _, _ in images]
    check(got == opts.expect.split(","), "the images are gpu_archs' cubins, then gpu_ptx's PTX",
          f"{got}, expected {opts.expect.split(',')}")
    for _, arch, is_ptx, size, path in images:
        name = ("compute_" if is_ptx == "1" else "sm_") + arch + f" ({int(size)} bytes)"
        if is_ptx == "1":
            if not opts.names:
                check_ptx(name, int(arch), path)
        else:
            check_cubin(name, int(arch), path)

print(f"1..{len(results)}")
for i, (ok, what) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {what}")
sys.exit(0 if results and all(ok for ok, _ in results) else 1)
