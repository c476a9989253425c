#!/usr/bin/env python3
"""The kernels' device code as images a CUDA 12 driver loads (kernels/images/meson.build runs it).

    embed.py find-ptxas [--ptxas PATH]    print the ptxas of CUDA 12.8 to use, or say how to get one
    embed.py pin                          print the pinned wheel, its tools folder, its release
    embed.py cubin --ptxas P --arch sm_NN IN.ptx OUT.cubin
                                          lower IN, assemble it, check the cubin
    embed.py source OUT.c sm_NN=CUBIN... compute_NN=PTX...
                                          write images.c (kernels/images/images.h), the PTX
                                          lowered as for the cubins

Why this way (issue 27): the library carries no CUDA runtime, and its kernels must load on every
CUDA 12 driver (r525+). nvcc 13's cubins cannot: ptxas 13 writes ELF ABI version 8 cubins, which
CUDA 12 drivers refuse, and its PTX says `.version 9.0`, which every 12.x ptxas and driver JIT
refuses. So nvcc 13 makes only the PTX; its `.version` is lowered (the instructions in it are all
older than that line says) and ptxas of CUDA 12.8 assembles it. Not 12.0's ptxas: it crashes on the
sm_90 kernels above -O0 (issue 27); 12.8 is also the first that knows sm_100 and sm_120, and its
registers and spills are those of 13.0's. Python 3 standard library only.
"""
import os
import re
import struct
import subprocess
import sys

# The pinned ptxas: scripts/setup.sh fetches this wheel into TOOLS_SUBDIR (`embed.py pin`), and
# pyproject.toml's build-system requires names it too (keep the three in step).
PTXAS_WHEEL = "nvidia-cuda-nvcc-cu12==12.8.93"
PTXAS_RELEASE = "12.8"
TOOLS_SUBDIR = "cuda-nvcc-12.8.93"

# The .version the PTX is lowered to: PTX ISA 8.0, CUDA 12.0's, so the embedded PTX JITs on every
# CUDA 12 driver. Nothing in the kernels needs more: their newest instructions are
# griddepcontrol.* (PTX 7.8, sm_90) and ld.acquire/st.release (6.0). ptxas 12.8 takes these
# kernels at 8.0 (and would at 7.8), but lower gains nothing: every CUDA 12 driver reads 8.0. A
# .target has its own minimum, which ptxas enforces (measured with ptxas 12.8 on an empty kernel:
# 7.8 for sm_80..sm_90, 8.6 for sm_100/sm_101, 8.7 for sm_120; sm_103 and sm_121 refused at any
# version). Those Blackwell targets are newer than CUDA 12.0 anyway: only a driver that knows the
# GPUs (r570+, CUDA 12.8) ever loads their images.
PTX_FLOOR = (8, 0)
TARGET_MIN = {100: (8, 6), 101: (8, 6), 120: (8, 7)}
PTXAS_MAX_TARGET = 120

EM_CUDA = 190


def fail(msg):
    sys.exit(f"embed.py: {msg}")


# ---- ptxas 12.8

def ptxas_release(path):
    """'12.8' from `ptxas --version` ("Cuda compilation tools, release 12.8, V12.8.93"), or None."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    except OSError:
        return None
    m = re.search(r"release (\d+\.\d+)", out)
    return m.group(1) if m else None


def tools_dir():
    return os.path.join(os.environ.get("SYMMPIN_TOOLS_DIR") or
                        os.path.join(os.path.expanduser("~"), ".cache", "symmpin"), TOOLS_SUBDIR)


def find_ptxas(explicit):
    """The lookup order of docs/packaging.md: -Dptxas12, then this Python's nvidia.cuda_nvcc (what
    `pip wheel .` installs from pyproject.toml), then the tools folder of scripts/setup.sh."""
    tried = []
    if explicit:
        candidates = [("-Dptxas12", explicit)]
    else:
        candidates = []
        try:
            import importlib.util
            spec = importlib.util.find_spec("nvidia.cuda_nvcc")
        except ImportError:
            spec = None
        if spec and spec.submodule_search_locations:
            for loc in spec.submodule_search_locations:
                candidates.append((f"{sys.executable}'s nvidia.cuda_nvcc",
                                   os.path.join(loc, "bin", "ptxas")))
        else:
            tried.append(f"{sys.executable} (the Python meson runs) cannot import nvidia.cuda_nvcc")
        candidates.append(("the tools folder of scripts/setup.sh",
                           os.path.join(tools_dir(), "nvidia", "cuda_nvcc", "bin", "ptxas")))
    for what, path in candidates:
        if not os.path.isfile(path):
            tried.append(f"{what}: no {path}")
            continue
        release = ptxas_release(path)
        if release != PTXAS_RELEASE:
            tried.append(f"{what}: {path} is release {release or '(none: does not run)'}, "
                         f"not {PTXAS_RELEASE}")
            continue
        return os.path.abspath(path)
    sys.exit(f"""The kernels are assembled with the ptxas of CUDA {PTXAS_RELEASE}
(kernels/images/embed.py says why), and none was found:
  - {(chr(10) + '  - ').join(tried)}
Get it in one of these ways, then run meson setup again:
  scripts/setup.sh                          (fetches it into {tools_dir()})
  {sys.executable} -m pip install {PTXAS_WHEEL}
                                            (into the Python meson runs, e.g. its venv)
  meson setup ... -Dptxas12=/path/to/ptxas  (a ptxas of release {PTXAS_RELEASE})""")


# ---- PTX

VERSION_LINE = re.compile(rb"^\.version (\d+)\.(\d+)[ \t]*$", re.M)
TARGET_LINE = re.compile(rb"^\.target sm_(\d+)", re.M)


def ptx_version_for(sm):
    if sm > PTXAS_MAX_TARGET or (sm >= 100 and sm not in TARGET_MIN):
        fail(f"ptxas {PTXAS_RELEASE} knows no sm_{sm}")
    return max(PTX_FLOOR, TARGET_MIN.get(sm, PTX_FLOOR))


# nvcc 13 writes `.pragma "used_bytes_mask M";` before some vector loads (PTX ISA 8.3+): a hint
# to ptxas of which bytes of the next load are used. It changes no result (the load still loads
# every byte), and older ISAs refuse it, so it goes where the version is lowered below 8.3.
USED_BYTES_MASK = re.compile(rb'^[ \t]*\.pragma "used_bytes_mask [0-9]+";[ \t]*\n', re.M)


def lower(text):
    """The PTX with its .version line lowered to what its .target needs, and the hints that
    version does not know removed (USED_BYTES_MASK); no other byte changes."""
    v, t = VERSION_LINE.search(text), TARGET_LINE.search(text)
    if not v or not t:
        fail("no .version or .target line in the PTX")
    have = (int(v.group(1)), int(v.group(2)))
    want = min(have, ptx_version_for(int(t.group(1))))
    text = text[:v.start()] + b".version %d.%d" % want + text[v.end():]
    if want < (8, 3):
        text = USED_BYTES_MASK.sub(b"", text)
    return text


# ---- cubins

def elf_sections(data):
    """{name: bytes} of a 64-bit little-endian ELF file."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = heads[shstrndx]
    names = data[strtab[4]:strtab[4] + strtab[5]]
    return {names[h[0]:names.index(b"\0", h[0])].decode(): data[h[4]:h[4] + h[5]] for h in heads}


def check_cubin(data, sm, what):
    """Fails unless DATA is a cubin for sm_SM in the format a CUDA 12 driver loads.

    ELF ABI version (e_ident[8]) 7 is the format of every CUDA 12 build, which r525+ loads. ptxas
    13 writes 8 for every target. ptxas 12.8 writes 8 too, but only for the Blackwell targets
    (sm_100 and newer, which need r570+, CUDA 12.8, anyway); there the toolkit note that such
    cubins carry (.note.nv.tkinfo: "release 12.8") tells them from ptxas 13's ("release 13.0").
    """
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1 or len(data) < 64:
        fail(f"{what}: not a 64-bit little-endian ELF file")
    machine, = struct.unpack_from("<H", data, 18)
    flags, = struct.unpack_from("<I", data, 48)
    abi = data[8]
    if machine != EM_CUDA:
        fail(f"{what}: ELF machine {machine}, not NVIDIA CUDA ({EM_CUDA})")
    want_abi = 7 if sm < 100 else 8
    if abi != want_abi:
        fail(f"{what}: ELF ABI version {abi}, not {want_abi}: not a CUDA 12 cubin for sm_{sm} "
             f"(ptxas 13 writes 8; this must come from the ptxas of CUDA {PTXAS_RELEASE})")
    # The SASS architecture in e_flags: bits 0-7 in ABI 7, bits 8-15 in ABI 8 (as ptxas writes).
    arch = flags & 0xFF if abi == 7 else (flags >> 8) & 0xFF
    if arch != sm:
        fail(f"{what}: code for sm_{arch}, not sm_{sm} (e_flags {flags:#x})")
    note = elf_sections(data).get(".note.nv.tkinfo", b"")
    m = re.search(rb"release (\d+)\.(\d+)", note)
    if m and int(m.group(1)) != 12:
        fail(f"{what}: made by the ptxas of CUDA {m.group(1).decode()}.{m.group(2).decode()}, "
             f"not CUDA 12 (.note.nv.tkinfo)")


def cmd_cubin(ptxas, arch, src, out):
    if not arch.startswith("sm_") or not arch[3:].isdigit():
        fail(f"--arch {arch}: not sm_NN")
    # nvcc's PTX stays as nvcc wrote it (an edit of this script reruns ptxas, not nvcc); ptxas gets
    # a lowered copy, removed with the unchecked cubin whatever happens.
    with open(src, "rb") as f:
        text = lower(f.read())
    tmp_ptx, tmp_cubin = out + ".ptx.tmp", out + ".tmp"
    try:
        with open(tmp_ptx, "wb") as f:
            f.write(text)
        cmd = [ptxas, f"-arch={arch}", "-O3", tmp_ptx, "-o", tmp_cubin]
        if subprocess.run(cmd).returncode != 0:
            fail(f"ptxas failed: {' '.join(cmd)}\n(if it says an instruction needs a newer PTX "
                 f"ISA, raise that target's .version in embed.py and name the instruction there)")
        with open(tmp_cubin, "rb") as f:
            check_cubin(f.read(), int(arch[3:]), out)
        os.replace(tmp_cubin, out)
    finally:
        for t in (tmp_ptx, tmp_cubin):
            if os.path.exists(t):
                os.remove(t)


# ---- images.c

def c_literal_lines(data, width=64):
    """DATA as C string literals, WIDTH bytes a line. Octal escapes, as short as the next byte
    allows (an escape takes up to three octal digits, so one followed by a digit has all three);
    '?' escaped too, against trigraphs (-std=c11). Measured with gcc 12 -O2 -g, a 4 MB cubin: 0.8 s
    and 65 MB as this, 10 s and 690 MB as a list of hex numbers (xxd -i's form)."""
    short, full = [], []
    for b in range(256):
        c = chr(b)
        if 32 <= b < 127 and c not in '\\"?':
            short.append(c), full.append(c)
        elif c in "\n\t":
            short.append(repr(c)[1:-1]), full.append(repr(c)[1:-1])
        else:
            short.append("\\%o" % b), full.append("\\%03o" % b)
    digits = frozenset(b"01234567")
    for i in range(0, len(data), width):
        chunk = data[i:i + width]
        yield '"' + "".join([full[b] if n in digits else short[b]
                             for b, n in zip(chunk, chunk[1:] + b"x")]) + '"\n'


def cmd_source(out, specs):
    images = []
    for spec in specs:
        name, _, path = spec.partition("=")
        kind, _, num = name.partition("_")
        if kind not in ("sm", "compute") or not num.isdigit() or not path:
            fail(f"{spec}: not sm_NN=PATH or compute_NN=PATH")
        with open(path, "rb") as f:
            data = f.read()
        if kind == "sm":
            check_cubin(data, int(num), path)
        else:
            if b"\0" in data:
                fail(f"{path}: not PTX text")
            data = lower(data) + b"\0"  # the driver takes PTX as a C string
        images.append((name, int(num), kind == "compute", os.path.basename(path), data))
    with open(out + ".tmp", "w") as f:
        f.write("/* Generated by kernels/images/embed.py: do not edit. The kernels' images, in\n"
                " * the order of gpu_archs, then gpu_ptx's PTX (kernels/images/images.h). */\n"
                '#include "kernels/images/images.h"\n')
        for i, (name, num, is_ptx, base, data) in enumerate(images):
            # One byte more than the image, for the literal's own NUL (a literal that exactly fills
            # its array draws -Wunterminated-string-initialization from newer compilers). Aligned
            # like an ELF file's headers want to be: the driver reads them in place.
            f.write(f"\n/* {name}: {base}, {len(data)} bytes */\n"
                    f"static _Alignas(64) const unsigned char image_{i}[{len(data) + 1}] =\n")
            f.writelines(c_literal_lines(data))
            f.write(";\n")
        f.write("\nconst symmpin_kernel_image symmpin_kernel_images[] = {\n")
        for i, (name, num, is_ptx, base, data) in enumerate(images):
            f.write(f"  {{{num}, {int(is_ptx)}, image_{i}, {len(data)}}}, /* {name} */\n")
        f.write("};\n"
                f"const int symmpin_kernel_image_count = {len(images)};\n")
    os.replace(out + ".tmp", out)


def main(argv):
    if len(argv) >= 1 and argv[0] == "find-ptxas":
        explicit = argv[2] if len(argv) == 3 and argv[1] == "--ptxas" else ""
        print(find_ptxas(explicit))
    elif argv == ["pin"]:
        print(PTXAS_WHEEL, TOOLS_SUBDIR, PTXAS_RELEASE)
    elif len(argv) == 7 and argv[0] == "cubin" and argv[1] == "--ptxas" and argv[3] == "--arch":
        cmd_cubin(argv[2], argv[4], argv[5], argv[6])
    elif len(argv) >= 2 and argv[0] == "source":
        cmd_source(argv[1], argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
