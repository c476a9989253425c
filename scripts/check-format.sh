#!/usr/bin/env bash
# Check that the C, CUDA and header lines a change touches follow .clang-format; untouched lines
# are left as they are (the tree is not reformatted as a whole, so that concurrent work merges).
#
# Usage: scripts/check-format.sh [BASE]
#   BASE: the revision to compare with (default: HEAD~1, the last commit; in CI's fresh clone of
#   main that is what the last push brought, and for a merge commit its whole branch). The lines
#   compared are those of `git diff BASE`: committed and uncommitted changes alike, so
#   `scripts/check-format.sh main` checks a branch before it is merged.
# Exit 0 when every changed line is formatted; else 1, with the diff clang-format wants (apply
# it with `git diff -U0 BASE | clang-format-diff -p1 -i`). Installs the Debian package
# clang-format when it is missing (apt-get as root or with sudo). Formatting differs between
# clang-format versions: the format was derived with clang-format 14 (Debian 12's).
set -euo pipefail
cd "$(dirname "$0")/.."

find_diff_tool() {
  command -v clang-format-diff || compgen -c clang-format-diff- | sort -V | tail -1 || true
}

if ! command -v clang-format >/dev/null || [ -z "$(find_diff_tool)" ]; then
  if [ "$(id -u)" -eq 0 ]; then sudo=(); elif command -v sudo >/dev/null; then sudo=(sudo); else
    echo "check-format: clang-format is missing; install it as root: apt-get install -y clang-format" >&2
    exit 1
  fi
  echo "== installing clang-format (apt-get)" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq clang-format >/dev/null
fi
diff_tool=$(find_diff_tool)
[ -n "$diff_tool" ] || { echo "check-format: no clang-format-diff after installing clang-format" >&2; exit 1; }

base=${1:-HEAD~1}
if ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
  # A shallow clone without the parent: fetch it once, else say why nothing was checked.
  git fetch --quiet --deepen=1 2>/dev/null || true
  if ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
    echo "check-format: $base is no revision of this clone (a shallow clone, or no such branch): nothing checked" >&2
    exit 0
  fi
fi

paths=('*.c' '*.h' '*.cu' '*.cuh')
changed=$(git diff --name-only --diff-filter=ACMR "$base" -- "${paths[@]}")
if [ -z "$changed" ]; then
  echo "check-format: no C/CUDA lines changed since $base"
  exit 0
fi
want=$(git diff -U0 --no-color --diff-filter=ACMR "$base" -- "${paths[@]}" |
       "$diff_tool" -p1 -binary "$(command -v clang-format)" -style=file)
if [ -n "$want" ]; then
  echo "check-format: lines changed since $base are not formatted as .clang-format says:" >&2
  echo "$want" >&2
  exit 1
fi
echo "check-format: the lines changed since $base in $(echo "$changed" | wc -l) file(s) are formatted ($(clang-format --version | sed 's/.*version \([0-9.]*\).*/clang-format \1/'))"
