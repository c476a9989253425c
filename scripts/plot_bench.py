#!/usr/bin/env python3
"""Plot symmpin-bench's CSV (docs/bench.md): time per call against message size, log-log, one
panel per (collective, datatype, mode), one line per implementation found in the CSV: NCCL, NCCL
on a symmetric window (when the CSV has it), symmpin's staged and in-slot forms. Times are the
medians over the rounds (the CSV's median_us); a point whose result check failed is drawn as an x.
A CSV without a coll column (written before the collectives came) is all-reduce only. The size of
an all-gather or reduce-scatter is the per-rank chunk.

usage: plot_bench.py CSV [-o PNG|SVG] [--title TEXT] [--dtype DTYPE] [--coll COLL]
An output ending in .svg is drawn by this script alone (no matplotlib needed: the plot in the
README is made so); any other by matplotlib.
Exit status: 0 plot written; 2 bad usage or a CSV this script cannot read; 3 matplotlib is not
installed for a PNG (python3-matplotlib on Debian, or pip install matplotlib)."""
import argparse
import csv
import math
import os
import sys

PROG = "plot_bench.py"
NEEDED = ("mode", "dtype", "bytes", "variant", "median_us")
LABELS = {
    "nccl": "NCCL",
    "nccl_win": "NCCL symmetric window",
    "symmpin_staged": "symmpin (staged)",
    "symmpin_direct": "symmpin (in-slot)",
}
SVG_COLOURS = {"nccl": "#7f7f7f", "nccl_win": "#1f77b4", "symmpin_staged": "#ff7f0e",
               "symmpin_direct": "#2ca02c"}
STYLE = {  # colour and line per implementation: NCCL dashed, symmpin solid
    "nccl": ("tab:gray", "--"),
    "nccl_win": ("tab:blue", "--"),
    "symmpin_staged": ("tab:orange", "-"),
    "symmpin_direct": ("tab:green", "-"),
}
MODES = ("eager", "graph")
DEFAULT_COLL = "allreduce"  # a CSV without a coll column
COLL_TITLES = {"allreduce": "all-reduce", "allgather": "all-gather",
               "reducescatter": "reduce-scatter"}


class UsageError(Exception):
    pass


def fail(msg, rc):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(rc)


def number(text):
    try:
        x = float(text)
    except (TypeError, ValueError):
        return math.nan
    return x


def read_csv(path):
    """{(coll, dtype, mode): {variant: [(bytes, us, check_ok)]}}, and the (coll, dtype) pairs
    (collectives in CSV order, each with its datatypes in CSV order), the datatypes and the
    variants in CSV order."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in NEEDED if c not in (reader.fieldnames or [])]
            if missing:
                raise UsageError(
                    f"{path}: not a symmpin-bench CSV (no column {', '.join(missing)})")
            panels, colls, dtypes, variants, seen = {}, [], [], [], set()
            for n, row in enumerate(reader, start=2):
                try:
                    size = int(row["bytes"])
                except (TypeError, ValueError):
                    raise UsageError(f"{path}:{n}: bad bytes '{row['bytes']}'")
                coll = row.get("coll") or DEFAULT_COLL
                dtype, mode, variant = row["dtype"], row["mode"], row["variant"]
                if coll not in colls:
                    colls.append(coll)
                if dtype not in dtypes:
                    dtypes.append(dtype)
                seen.add((coll, dtype))
                if variant not in variants:
                    variants.append(variant)
                ok = row.get("check_ok", "1") != "0"
                us = number(row["median_us"])
                if math.isnan(us) or us <= 0:
                    continue  # not measured (or not run: the form does not exist)
                panels.setdefault((coll, dtype, mode), {}).setdefault(variant, []).append(
                    (size, us, ok))
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}")
    except csv.Error as e:
        raise UsageError(f"{path}: {e}")
    if not panels:
        raise UsageError(f"{path}: no measured time in it")
    rows = [(c, d) for c in colls for d in dtypes if (c, d) in seen]
    return panels, rows, variants


def panel_modes(panels):
    modes = [m for m in MODES if any(k[2] == m for k in panels)]
    return modes + sorted({k[2] for k in panels} - set(modes))


def heading_of(rows, title):
    """The figure's title: the collective's when there is one, else a general one."""
    if title:
        return title
    colls = list(dict.fromkeys(c for c, _ in rows))
    if len(colls) == 1:
        return f"{COLL_TITLES.get(colls[0], colls[0])} time per call: NCCL against symmpin"
    return "time per call: NCCL against symmpin"


def panel_title(rows, coll, dtype, mode):
    """mode, dtype; led by the collective where the figure has several."""
    if len({c for c, _ in rows}) > 1:
        return f"{coll}, {mode}, {dtype}"
    return f"{mode}, {dtype}"


def size_axis(coll):
    return "bytes per rank" if coll == DEFAULT_COLL else "bytes per rank (the chunk)"


def size_label(x, _pos=None):
    for unit, name in ((1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")):
        if x >= unit:
            v = x / unit
            return f"{v:g}{name}"
    return f"{x:g}"


def plot(panels, rows, variants, out, title):
    try:
        import matplotlib
    except ImportError:
        fail("matplotlib is not installed; install python3-matplotlib (Debian) or "
             "'pip install matplotlib', then run this again", 3)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    modes = panel_modes(panels)
    fig, axes = plt.subplots(len(rows), len(modes), squeeze=False, sharex=True,
                             figsize=(5.5 * len(modes), 4.2 * len(rows)))
    any_bad = False
    for r, (coll, dtype) in enumerate(rows):
        for c, mode in enumerate(modes):
            ax = axes[r][c]
            lines = panels.get((coll, dtype, mode), {})
            for variant in variants:
                pts = sorted(lines.get(variant, []))
                if not pts:
                    continue
                colour, ls = STYLE.get(variant, (None, "-."))
                xs, ys = [p[0] for p in pts], [p[1] for p in pts]
                ax.plot(xs, ys, ls, color=colour, marker="o", markersize=3,
                        label=LABELS.get(variant, variant))
                bad = [p for p in pts if not p[2]]
                if bad:
                    any_bad = True
                    ax.plot([p[0] for p in bad], [p[1] for p in bad], "x", color="red",
                            markersize=8)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(size_label))
            plain = FuncFormatter(lambda y, _pos: f"{y:g}")  # 20, not 2 x 10^1
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain)
            ax.set_title(panel_title(rows, coll, dtype, mode))
            ax.set_xlabel(size_axis(coll))
            ax.set_ylabel("us per call (median of rounds)")
            ax.grid(True, which="both", alpha=0.3)
            if lines:
                ax.legend(fontsize="small")
    heading = heading_of(rows, title)
    if any_bad:
        heading += "  (x: a result check failed)"
    fig.suptitle(heading)
    fig.tight_layout()
    try:
        fig.savefig(out, dpi=120)
    except OSError as e:
        fail(f"cannot write {out}: {e.strerror}", 2)
    print(f"{PROG}: wrote {out}")


def plot_svg(panels, rows, variants, out, title):
    """The same panels as plot(), as a plain SVG written here (log2 sizes, log10 times)."""
    modes = panel_modes(panels)
    W, H, ML, MR, MT, MB = 560, 380, 62, 12, 34, 48  # one panel and its margins
    xs = [p[0] for lines in panels.values() for pts in lines.values() for p in pts]
    ys = [p[1] for lines in panels.values() for pts in lines.values() for p in pts]
    x0, x1 = math.log2(min(xs)), math.log2(max(xs))
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    x1 = max(x1, x0 + 1)
    y1 = max(y1, y0 + 1)
    head = 40
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W * len(modes)}" '
           f'height="{H * len(rows) + head}" font-family="sans-serif" font-size="11">',
           f'<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{W * len(modes) / 2}" y="24" text-anchor="middle" font-size="15">'
           f'{heading_of(rows, title)}</text>']
    for r, (coll, dtype) in enumerate(rows):
        for c, mode in enumerate(modes):
            ox, oy = c * W, head + r * H
            pw, ph = W - ML - MR, H - MT - MB

            def X(b):
                return ox + ML + (math.log2(b) - x0) / (x1 - x0) * pw

            def Y(us):
                return oy + MT + (1 - (math.log10(us) - y0) / (y1 - y0)) * ph
            svg.append(f'<text x="{ox + W / 2}" y="{oy + 20}" text-anchor="middle" '
                       f'font-size="13">{panel_title(rows, coll, dtype, mode)}</text>')
            svg.append(f'<rect x="{ox + ML}" y="{oy + MT}" width="{pw}" height="{ph}" '
                       f'fill="none" stroke="black"/>')
            for e in range(int(y0), int(y1) + 1):
                for m in (1, 2, 5):
                    v = m * 10 ** e
                    if not 10 ** y0 <= v <= 10 ** y1:
                        continue
                    y = Y(v)
                    svg.append(f'<line x1="{ox + ML}" x2="{ox + ML + pw}" y1="{y:.1f}" '
                               f'y2="{y:.1f}" stroke="#ddd"/>')
                    svg.append(f'<text x="{ox + ML - 4}" y="{y + 4:.1f}" '
                               f'text-anchor="end">{v:g}</text>')
            for k in range(math.ceil(x0), math.floor(x1) + 1, 2):
                x = X(2 ** k)
                svg.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{oy + MT}" y2="{oy + MT + ph}" '
                           f'stroke="#ddd"/>')
                svg.append(f'<text x="{x:.1f}" y="{oy + MT + ph + 14}" '
                           f'text-anchor="middle">{size_label(2 ** k)}</text>')
            svg.append(f'<text x="{ox + ML + pw / 2}" y="{oy + H - 10}" '
                       f'text-anchor="middle">{size_axis(coll)}</text>')
            svg.append(f'<text x="{ox + 14}" y="{oy + MT + ph / 2}" text-anchor="middle" '
                       f'transform="rotate(-90 {ox + 14} {oy + MT + ph / 2})">us per call '
                       f'(median of rounds)</text>')
            lines = panels.get((coll, dtype, mode), {})
            ly = oy + MT + 14
            for variant in variants:
                pts = sorted(lines.get(variant, []))
                if not pts:
                    continue
                colour = SVG_COLOURS.get(variant, "black")
                dash = ' stroke-dasharray="6,4"' if variant.startswith("nccl") else ""
                path = " ".join(f"{X(b):.1f},{Y(us):.1f}" for b, us, _ in pts)
                svg.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                           f'stroke-width="1.8"{dash}/>')
                for b, us, ok in pts:
                    svg.append(f'<circle cx="{X(b):.1f}" cy="{Y(us):.1f}" r="2.2" '
                               f'fill="{colour if ok else "red"}"/>')
                svg.append(f'<line x1="{ox + ML + 10}" x2="{ox + ML + 34}" y1="{ly - 4}" '
                           f'y2="{ly - 4}" stroke="{colour}" stroke-width="1.8"{dash}/>')
                svg.append(f'<text x="{ox + ML + 40}" y="{ly}">'
                           f'{LABELS.get(variant, variant)}</text>')
                ly += 15
    svg.append("</svg>")
    try:
        with open(out, "w") as f:
            f.write("\n".join(svg) + "\n")
    except OSError as e:
        fail(f"cannot write {out}: {e.strerror}", 2)
    print(f"{PROG}: wrote {out}")


def main():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="the CSV symmpin-bench wrote (--csv)")
    ap.add_argument("-o", "--output", help="the PNG to write (default: CSV with .png)")
    ap.add_argument("--title", help="the figure's title")
    ap.add_argument("--dtype", help="only this datatype's panels (e.g. bf16)")
    ap.add_argument("--coll", help="only this collective's panels (allreduce, allgather, "
                    "reducescatter)")
    args = ap.parse_args()  # exits 2 on a bad option, naming it
    out = args.output or os.path.splitext(args.csv)[0] + ".png"
    try:
        panels, rows, variants = read_csv(args.csv)
    except UsageError as e:
        fail(str(e), 2)
    for what, value, col in (("datatype", args.dtype, 1), ("collective", args.coll, 0)):
        if not value:
            continue
        have = list(dict.fromkeys(r[col] for r in rows))
        if value not in have:
            fail(f"no {what} {value} in {args.csv} (it has {', '.join(have)})", 2)
        rows = [r for r in rows if r[col] == value]
        panels = {k: v for k, v in panels.items() if k[col] == value}
    if not panels:
        fail(f"{args.csv}: no measured time for {args.coll or 'any collective'} in "
             f"{args.dtype or 'any datatype'}", 2)
    if out.endswith(".svg"):
        plot_svg(panels, rows, variants, out, args.title)
    else:
        plot(panels, rows, variants, out, args.title)


if __name__ == "__main__":
    main()
