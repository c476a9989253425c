#!/usr/bin/env bash
# No pipeline whose reader may quit early in a script that runs under pipefail (TAP, CPU; issue
# 39). `CMD | grep -q PAT` (also grep -m, -l, -L, --quiet, and `| head`) stops reading once it
# knows; CMD's next write then gets SIGPIPE, CMD exits 141 and pipefail turns the match into a
# failure, or a failure into a pass (`! CMD | grep -q`), at random: setup.sh's ptxas check failed
# a right ptxas about one time in forty. Read the whole output first, then match
# (`out=$(CMD)` and `grep -q PAT <<<"$out"`), or use a glob instead of `ls | head`.
# Scanned: the shell scripts of scripts/, .ci/ and tests/ that set pipefail, and the files they
# source (their functions run under it). A made-up tree first shows that the scan finds what it
# must and passes what it must.
# Arguments: SOURCE_ROOT
set -u
root=$1
n=0 bad=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
no() { n=$((n + 1)); echo "not ok $n - $1"; bad=$((bad + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# scan_lines FILE...: one record per fact, fields tab-separated, for scan below to combine:
#   P FILE              FILE sets pipefail
#   S FILE WORDS        FILE sources WORDS (`. WORDS`, `source WORDS`)
#   F FILE LINE TEXT    a pipeline into an early-quitting reader at FILE:LINE
# Comments, heredoc bodies (other languages' code, made-up scripts) and single-quoted text (no
# code of this shell: `bash -c '...'` runs in a child without pipefail) are left out; a pipeline
# continued on the next line (`CMD |` at the end of one) counts.
scan_lines() {
  awk -v OFS='\t' '
    FNR == 1 { sq = 0; dq = 0; hd = ""; pipe_open = 0 }
    hd != "" { t = $0; if (hd_tabs) sub(/^\t+/, "", t); if (t == hd) hd = ""; next }
    {
      # code: the line without its comment, single-quoted text masked; quotes carry over lines.
      code = ""; len = length($0)
      for (i = 1; i <= len; i++) {
        c = substr($0, i, 1)
        if (sq) { if (c == "\047") { sq = 0; code = code c } else code = code "_"; continue }
        if (c == "\\") { code = code substr($0, i, 2); i++; continue }
        if (dq) { if (c == "\"") dq = 0; code = code c; continue }
        if (c == "\047") sq = 1
        else if (c == "\"") dq = 1
        else if (c == "#" && (i == 1 || substr($0, i - 1, 1) ~ /[ \t;&|(]/)) break
        else if (c == "<" && hd == "" && substr($0, i, 3) ~ /^<<[^<]/ && (i == 1 || substr($0, i - 1, 1) != "<")) {
          rest = substr($0, i + 2)
          hd_tabs = (substr(rest, 1, 1) == "-"); if (hd_tabs) rest = substr(rest, 2)
          sub(/^[ \t]*/, "", rest)
          if (match(rest, /^["\047]?[A-Za-z_][A-Za-z0-9_]*/)) {
            hd = substr(rest, RSTART, RLENGTH); gsub(/["\047]/, "", hd)
          }
        }
        code = code c
      }
      gsub(/\|\|/, "  ", code)
      if (pipe_open) code = "| " code
      t = code; sub(/[ \t]+$/, "", t); pipe_open = (t ~ /\|&?$/ && !sq)
      if (code ~ /(^|[;&|({ \t])set[ \t][^;]*pipefail/) print "P", FILENAME
      if (match(code, /(^|[;&|({])[ \t]*(\.|source)[ \t]+/)) {
        w = substr(code, RSTART + RLENGTH); sub(/[;&|].*/, "", w); sub(/[ \t]+$/, "", w)
        print "S", FILENAME, w
      }
      if (code ~ /\|&?[ \t]*(grep|egrep|fgrep)([ \t]+[^ \t|;&]+)*[ \t]+(-[A-Za-z0-9]*[qlLm]|--quiet|--silent|--max-count|--files-with(out)?-match)/ ||
          code ~ /\|&?[ \t]*head([ \t)]|$)/) {
        text = $0; sub(/^[ \t]+/, "", text)
        print "F", FILENAME, FNR, text
      }
    }' "$@"
}

# scan DIR: the findings (FILE:LINE: TEXT, FILE under DIR) in the shell scripts of DIR's scripts/,
# .ci/ and tests/ that set pipefail, and in the files those source (a sourced WORD names its file
# by the end of its path: `. "$SUITE_ROOT/scripts/suite_lib.sh"` is any scripts/suite_lib.sh);
# the files under pipefail go to $scanned_list.
scan() {
  local dir=$1 f first
  local -a files=()
  while IFS= read -r -d '' f; do
    case $f in
      *.sh | *.bash) files+=("$f") ;;
      *) first=; IFS= read -r first <"$f" 2>/dev/null
         [[ $first =~ ^#!.*(bash|/sh)([[:space:]]|$) ]] && files+=("$f") ;;
    esac
  done < <(cd "$dir" && find scripts .ci tests -type f -print0 2>/dev/null)
  [ ${#files[@]} -gt 0 ] || return 0
  (cd "$dir" && scan_lines "${files[@]}") >"$tmp/records"
  # The files under pipefail: those that set it, then what they source, until nothing is added.
  awk -F'\t' '$1 == "P" { print $2 }' "$tmp/records" | sort -u >"$tmp/under"
  local before=-1 w suffix
  while [ "$(wc -l <"$tmp/under")" -ne "$before" ]; do
    before=$(wc -l <"$tmp/under")
    awk -F'\t' 'NR == FNR { u[$1] = 1; next } $1 == "S" && ($2 in u) { print $3 }' "$tmp/under" "$tmp/records" |
      while IFS= read -r w; do
        w=${w//\"/}; w=${w//\'/}
        suffix=${w##*[\$\})]} # the literal end of the path
        suffix=${suffix#./}; suffix=${suffix#/}
        [ -n "$suffix" ] || continue
        for f in "${files[@]}"; do
          [[ $f == "$suffix" || $f == */"$suffix" ]] && echo "$f"
        done
      done >"$tmp/sourced"
    sort -u -o "$tmp/under" "$tmp/under" "$tmp/sourced"
  done
  cp "$tmp/under" "$scanned_list"
  awk -F'\t' 'NR == FNR { u[$1] = 1; next } $1 == "F" && ($2 in u) { print $2 ":" $3 ": " $4 }' \
    "$tmp/under" "$tmp/records" | sort -t: -k1,1 -k2,2n
}

# ---- a made-up tree: what the scan must find, and what it must pass
mk="$tmp/made-up"
mkdir -p "$mk/scripts" "$mk/tests/tools"
cat >"$mk/scripts/bad.sh" <<'EOF'
#!/usr/bin/env bash
set -euo pipefail
. "$(dirname "$0")/lib.sh"
if "$tool" --version 2>/dev/null | grep -qF "release 12.8,"; then :; fi
if ! ls "$dir/artifacts" | grep -q .; then :; fi
first=$(ls "$dir"/*.whl | head -n 1)
n=$(seq 100 | grep -m1 7)
make 2>&1 |
  grep --quiet FAILED && exit 1
prog |& grep -Eqx 'ok' || true
EOF
cat >"$mk/scripts/lib.sh" <<'EOF'
# sourced by bad.sh: runs under its pipefail
newest() { ls -t "$1" | head -1; }
EOF
cat >"$mk/scripts/good.sh" <<'EOF'
#!/usr/bin/env bash
set -eu -o pipefail
out=$("$tool" --version 2>&1)
grep -qF "release 12.8," <<<"$out"
grep -q x "$file" || grep -q y "$file"
[[ $out == *"release 12.8,"* ]] # not: "$tool" --version | grep -q
files=("$dir"/*.whl); first=${files[0]}
bash -c 'prog | grep -q ok' # a child shell: no pipefail there
python3 - <<'PY'
print("a" | head)
PY
n=$(seq 100 | grep -c 7)
seq 100 | tail -n 1
EOF
cat >"$mk/tests/tools/plain.sh" <<'EOF'
#!/usr/bin/env bash
set -eu # no pipefail: an early reader is harmless here
prog | grep -q ok
EOF
scanned_list="$tmp/made-up.scanned"
found=$(scan "$mk" | cut -d: -f1,2 | tr '\n' ' ')
want="scripts/bad.sh:4 scripts/bad.sh:5 scripts/bad.sh:6 scripts/bad.sh:7 scripts/bad.sh:9 scripts/bad.sh:10 scripts/lib.sh:2 "
if [ "$found" = "$want" ]; then
  ok "a made-up script: every early reader under pipefail found (grep -q/-qF/-m1/--quiet/-Eqx, head, a pipe at a line's end, a sourced file's function), none elsewhere"
else
  no "a made-up script: the scan found '$found', not '$want'"
fi
if [ "$(tr '\n' ' ' <"$scanned_list")" = "scripts/bad.sh scripts/good.sh scripts/lib.sh " ]; then
  ok "a made-up script: the files under pipefail are the two that set it and the one sourced"
else
  no "a made-up script: the files under pipefail: $(tr '\n' ' ' <"$scanned_list")"
fi

# ---- this tree
scanned_list="$tmp/tree.scanned"
found=$(scan "$root")
if grep -qx "scripts/setup.sh" "$scanned_list" && grep -qx "scripts/test.sh" "$scanned_list"; then
  ok "this tree: $(wc -l <"$scanned_list") scripts under pipefail scanned (setup.sh and test.sh among them)"
else
  no "this tree: setup.sh and test.sh not among the scanned: $(tr '\n' ' ' <"$scanned_list")"
fi
if [ -z "$found" ]; then
  ok "this tree: no pipeline into an early-quitting reader under pipefail"
else
  no "this tree: pipelines into an early-quitting reader under pipefail (read the whole output first):"
  while IFS= read -r f; do echo "# $f"; done <<<"$found"
fi
echo "1..$n"
[ $bad -eq 0 ]
