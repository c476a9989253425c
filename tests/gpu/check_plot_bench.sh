#!/usr/bin/env bash
# scripts/plot_bench.py on the CSV that symmpin-bench's own formatting writes (bench-format-sample,
# made-up numbers), on the CPU (TAP). The plot itself needs matplotlib, which CI does not install:
# without it that check is skipped (a TAP SKIP), and the script's "exit 3, say why" path is checked
# instead, with matplotlib hidden in any case so the path is always covered.
# Arguments: BENCH_FORMAT_SAMPLE PLOT_BENCH_PY
set -u
sample=$1 plot=$2
n=0 bad=0
ok() { n=$((n + 1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; bad=$((bad + 1)); fi; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$sample" "$tmp/bench.csv" >"$tmp/lines.txt"; rc=$?
ok "bench-format-sample writes the CSV" '[ $rc -eq 0 ] && [ -s "$tmp/bench.csv" ]'
ok "the CSV has a header and one row per (size, mode, implementation)" \
  '[ "$(head -n 1 "$tmp/bench.csv" | cut -d, -f1-5)" = "mode,dtype,bytes,count,variant" ] && [ "$(($(wc -l <"$tmp/bench.csv") - 1))" -eq 56 ]'
ok "the per-size lines have a '#' header and one line per (size, mode)" \
  '[ "$(grep -c "^#" "$tmp/lines.txt")" -eq 3 ] && [ "$(grep -vc "^#" "$tmp/lines.txt")" -eq 14 ]'

# matplotlib hidden: a module of that name that cannot be imported, first on the path
mkdir -p "$tmp/hide/matplotlib"
echo 'raise ImportError("hidden by check_plot_bench.sh")' >"$tmp/hide/matplotlib/__init__.py"
err=$(PYTHONPATH="$tmp/hide" python3 "$plot" "$tmp/bench.csv" -o "$tmp/x.png" 2>&1); rc=$?
ok "without matplotlib: exit 3 and a message that says so" \
  '[ $rc -eq 3 ] && [[ "$err" == *"matplotlib is not installed"* ]] && [ ! -e "$tmp/x.png" ]'

echo "not,a,bench,csv" >"$tmp/other.csv"
err=$(python3 "$plot" "$tmp/other.csv" 2>&1); rc=$?
ok "a CSV without the benchmark's columns: exit 2, named" '[ $rc -eq 2 ] && [[ "$err" == *"not a symmpin-bench CSV"* ]]'
err=$(python3 "$plot" "$tmp/no-such.csv" 2>&1); rc=$?
ok "a missing CSV: exit 2" '[ $rc -eq 2 ] && [[ "$err" == *"cannot read"* ]]'
err=$(python3 "$plot" --frobnicate "$tmp/bench.csv" 2>&1); rc=$?
ok "a bad option: exit 2, named" '[ $rc -eq 2 ] && [[ "$err" == *"--frobnicate"* ]]'
out=$(python3 "$plot" --help 2>&1); rc=$?
ok "--help: exit 0" '[ $rc -eq 0 ] && [[ "$out" == usage:* ]]'

# SVG: drawn by the script alone (the README's plot), so always checked: well-formed, one line per
# implementation and panel, every point inside the picture, matplotlib hidden.
out=$(PYTHONPATH="$tmp/hide" python3 "$plot" "$tmp/bench.csv" -o "$tmp/bench.svg" 2>&1); rc=$?
ok "an SVG without matplotlib" '[ $rc -eq 0 ] && [ -s "$tmp/bench.svg" ]'
ok "the SVG is well-formed, its lines and points inside it" 'python3 - "$tmp/bench.svg" "$tmp/bench.csv" <<"PY"
import csv, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
w, h = float(root.get("width")), float(root.get("height"))
rows = list(csv.DictReader(open(sys.argv[2])))
want = len({(r["dtype"], r["mode"], r["variant"]) for r in rows if float(r["median_us"] or 0) > 0})
lines = root.findall(ns + "polyline")
assert len(lines) == want, (len(lines), want)
for pl in lines:
    for pt in pl.get("points").split():
        x, y = map(float, pt.split(","))
        assert 0 <= x <= w and 0 <= y <= h, (x, y, w, h)
PY'
err=$(python3 "$plot" "$tmp/bench.csv" --dtype nosuch -o "$tmp/y.svg" 2>&1); rc=$?
ok "--dtype that the CSV lacks: exit 2, named" '[ $rc -eq 2 ] && [[ "$err" == *"no datatype nosuch"* ]]'

if python3 -c 'import matplotlib' 2>/dev/null; then
  out=$(python3 "$plot" "$tmp/bench.csv" -o "$tmp/bench.png" 2>&1); rc=$?
  ok "with matplotlib: a PNG is written" \
    '[ $rc -eq 0 ] && python3 -c "import sys; sys.exit(open(sys.argv[1], \"rb\").read(8) != b\"\\x89PNG\\r\\n\\x1a\\n\")" "$tmp/bench.png"'
  mkdir "$tmp/d" && cp "$tmp/bench.csv" "$tmp/d/sample.csv"
  python3 "$plot" "$tmp/d/sample.csv" >/dev/null 2>&1; rc=$?
  ok "the default output is the CSV's name with .png" '[ $rc -eq 0 ] && [ -s "$tmp/d/sample.png" ]'
else
  skip "with matplotlib: a PNG is written" "matplotlib not installed (python3-matplotlib)"
  skip "the default output is the CSV's name with .png" "matplotlib not installed"
fi

echo "1..$n"
[ $bad -eq 0 ]
