#!/usr/bin/env bash
# scripts/plot_bench.py on the CSV that symmpin-bench's own formatting writes (bench-format-sample,
# made-up numbers of all three collectives), on the CPU (TAP); and on a CSV from before the coll
# column (all-reduce only). The plot itself needs matplotlib, which CI does not install:
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
ok "the CSV has a header and one row per (collective, size, mode, implementation)" \
  '[ "$(head -n 1 "$tmp/bench.csv" | cut -d, -f1-6)" = "coll,mode,dtype,bytes,count,variant" ] && [ "$(($(wc -l <"$tmp/bench.csv") - 1))" -eq 168 ]'
ok "the coll column: 56 rows of each collective, in the order run" \
  '[ "$(tail -n +2 "$tmp/bench.csv" | cut -d, -f1 | uniq -c | tr -s " " | tr "\n" /)" = " 56 allreduce/ 56 allgather/ 56 reducescatter/" ]'
ok "the direct rows of allgather and reducescatter are there, all nan (not run)" \
  '[ "$(grep -cE "^(allgather|reducescatter),.*,symmpin_direct,2,500,3,nan,nan,nan,nan,nan,.*,nan;nan;nan$" "$tmp/bench.csv")" -eq 28 ]'
ok "the per-size lines have a '#' header and one line per (collective, size, mode)" \
  '[ "$(grep -c "^#" "$tmp/lines.txt")" -eq 3 ] && [ "$(grep -vc "^#" "$tmp/lines.txt")" -eq 42 ] && [ "$(grep -v "^#" "$tmp/lines.txt" | awk "{print \$1}" | uniq -c | tr -s " " | tr "\n" /)" = " 14 allreduce/ 14 allgather/ 14 reducescatter/" ]'
ok "n/a in the direct columns of allgather and reducescatter only" \
  '[ "$(grep -c " n/a " "$tmp/lines.txt")" -eq 28 ] && ! grep -q "^ *allreduce .* n/a " "$tmp/lines.txt"'

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
# implementation and panel (a panel per collective, datatype and mode), one point per measured row,
# every point inside the picture, matplotlib hidden.
out=$(PYTHONPATH="$tmp/hide" python3 "$plot" "$tmp/bench.csv" -o "$tmp/bench.svg" 2>&1); rc=$?
ok "an SVG without matplotlib" '[ $rc -eq 0 ] && [ -s "$tmp/bench.svg" ]'
# svg_check SVG CSV [COLL]: the SVG's lines and points against the CSV's measured rows (of COLL)
svg_check() { python3 - "$@" <<"PY"
import csv, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
w, h = float(root.get("width")), float(root.get("height"))
rows = [r for r in csv.DictReader(open(sys.argv[2])) if float(r["median_us"] or 0) > 0]
if len(sys.argv) > 3:
    rows = [r for r in rows if r.get("coll", "allreduce") == sys.argv[3]]
want = len({(r.get("coll"), r["dtype"], r["mode"], r["variant"]) for r in rows})
lines = root.findall(ns + "polyline")
assert len(lines) == want, (len(lines), want)
assert len(root.findall(ns + "circle")) == len(rows), (len(root.findall(ns + "circle")), len(rows))
for pl in lines:
    for pt in pl.get("points").split():
        x, y = map(float, pt.split(","))
        assert 0 <= x <= w and 0 <= y <= h, (x, y, w, h)
PY
}
ok "the SVG is well-formed, a line per (collective, mode, implementation), its points inside it" \
  'svg_check "$tmp/bench.svg" "$tmp/bench.csv"'
ok "the SVG has a panel per collective and mode, each titled with its collective" 'python3 - "$tmp/bench.svg" <<"PY"
import sys, xml.etree.ElementTree as ET
texts = [t.text for t in ET.parse(sys.argv[1]).getroot().iter("{http://www.w3.org/2000/svg}text")]
want = {f"{c}, {m}, bf16" for c in ("allreduce", "allgather", "reducescatter") for m in ("eager", "graph")}
assert want <= set(texts), sorted(want - set(texts))
assert texts.count("bytes per rank") == 2 and texts.count("bytes per rank (the chunk)") == 4, texts
assert "time per call: NCCL against symmpin" in texts, texts
PY'
out=$(python3 "$plot" "$tmp/bench.csv" --coll allgather -o "$tmp/ag.svg" 2>&1); rc=$?
ok "--coll allgather: the all-gather's panels alone, titled so" \
  '[ $rc -eq 0 ] && svg_check "$tmp/ag.svg" "$tmp/bench.csv" allgather && grep -q ">all-gather time per call: NCCL against symmpin<" "$tmp/ag.svg" && ! grep -q "allreduce\|reducescatter" "$tmp/ag.svg"'
err=$(python3 "$plot" "$tmp/bench.csv" --coll nosuch -o "$tmp/z.svg" 2>&1); rc=$?
ok "--coll that the CSV lacks: exit 2, named" \
  '[ $rc -eq 2 ] && [[ "$err" == *"no collective nosuch"* ]] && [[ "$err" == *"allreduce, allgather, reducescatter"* ]]'

# A CSV from before the coll column: all-reduce; drawn exactly as the new CSV's all-reduce panels.
{ head -n 1 "$tmp/bench.csv" | cut -d, -f2-; grep "^allreduce," "$tmp/bench.csv" | cut -d, -f2-; } >"$tmp/old.csv"
out=$(python3 "$plot" "$tmp/old.csv" -o "$tmp/old.svg" 2>&1); rc=$?
python3 "$plot" "$tmp/bench.csv" --coll allreduce -o "$tmp/ar.svg" >/dev/null 2>&1
ok "a CSV without a coll column is the all-reduce's: the same SVG as --coll allreduce" \
  '[ $rc -eq 0 ] && [ "$(head -c 4 "$tmp/old.csv")" = "mode" ] && svg_check "$tmp/old.svg" "$tmp/old.csv" && cmp -s "$tmp/old.svg" "$tmp/ar.svg" && grep -q ">all-reduce time per call: NCCL against symmpin<" "$tmp/old.svg"'
err=$(python3 "$plot" "$tmp/old.csv" --coll allgather -o "$tmp/z.svg" 2>&1); rc=$?
ok "a CSV without a coll column has no all-gather" '[ $rc -eq 2 ] && [[ "$err" == *"no collective allgather"*"(it has allreduce)"* ]]'
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
