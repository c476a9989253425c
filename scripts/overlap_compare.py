"""The overlap table: GEMM slowdown under concurrent all-reduces, NCCL's kernels against symmpin's.

Usage: overlap_compare.py NCCL_OUTPUT SYMMPIN_OUTPUT   (the OVL-TIME lines of tests/apps/overlap.py)
Prints one "= " line per size (the GPU suite shows those) and exits 1 if a size lacks a side.
ratio = symmpin's slowdown / NCCL's: above 1, symmpin's kernels cost the GEMM more than NCCL's.
"""
import re
import sys

LINE = re.compile(r"OVL-TIME bytes=(\d+) gemm_alone_us=([\d.]+) gemm_with_us=([\d.]+) "
                  r"slowdown=([\d.]+) allreduce_us=([\d.]+)")


def read(path):
    with open(path) as f:
        return {int(m[1]): (float(m[4]), float(m[5])) for m in LINE.finditer(f.read())}


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    nccl, sym = read(argv[1]), read(argv[2])
    print("= bytes     GEMM slowdown: NCCL  symmpin  ratio   all-reduce us: NCCL  symmpin")
    for b in sorted(set(nccl) | set(sym)):
        if b in nccl and b in sym:
            (sn, an), (ss, as_) = nccl[b], sym[b]
            print(f"= {b:>8} {sn:>20.3f} {ss:>8.3f} {ss / sn:>6.3f} {an:>19.2f} {as_:>8.2f}")
        else:
            print(f"= {b:>8} missing on one side")
    return 0 if nccl and set(nccl) == set(sym) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
