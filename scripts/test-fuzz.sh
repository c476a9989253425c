#!/usr/bin/env bash
# The libFuzzer targets of tests/fuzz (CI): a CPU-only clang build with -Dfuzz=true and
# ASan + UBSan, then each target for a bounded time over its seed corpus (tests/fuzz/corpus/<target>,
# copied: new inputs stay in the build folder). Prints each target's executions (libFuzzer's
# stat::number_of_executed_units) and the closing line "fuzz: N passed, N failed". A crash, a
# sanitizer report, a leak, a timeout or the memory limit fails the target, and the input that did
# it is printed in hex (and kept under <build>/fuzz/<target>/artifacts). docs/testing.md has the
# details and how to reproduce one.
#
# Usage: scripts/test-fuzz.sh [target...]   (default: all four)
# Environment: SYMMPIN_FUZZ_SECONDS (per target, default 60), SYMMPIN_FUZZ_BUILD_DIR (default
# build-fuzz), CC (default clang).
set -euo pipefail
cd "$(dirname "$0")/.."
SYMMPIN_SETUP_CPU_ONLY=1 scripts/setup.sh clang
cc=${CC:-clang}
# libFuzzer and clang's sanitizer runtimes are a package of their own (Debian: libclang-rt-N-dev).
# Debian 12's clang is clang-14, which only recommends it.
SYMMPIN_SETUP_CPU_ONLY=1 scripts/setup.sh "libclang-rt-$("$cc" -dumpversion | cut -d. -f1)-dev"

build=${SYMMPIN_FUZZ_BUILD_DIR:-build-fuzz}
secs=${SYMMPIN_FUZZ_SECONDS:-60}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_trace fuzz_board fuzz_record fuzz_config)
if [ ! -f "$build/build.ninja" ]; then
  CC=$cc meson setup "$build" -Dcpu_only=true -Dfuzz=true -Db_sanitize=address,undefined \
    -Db_lundef=false >"$build.setup.log" 2>&1 || { cat "$build.setup.log"; exit 1; }
  rm -f "$build.setup.log"
fi
echo "== fuzz: building ${targets[*]} ($build: $cc, libFuzzer, ASan + UBSan)"
ninja -C "$build" "${targets[@]/#/tests/fuzz/}" >/dev/null

export ASAN_OPTIONS="halt_on_error=1:print_stacktrace=1:detect_leaks=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# Per target: the largest input (the seeds' largest: board images are ~110 KB; -max_len defaults
# to it), and its dictionary where it has one.
declare -A max_len=([fuzz_trace]=24576 [fuzz_board]=131072 [fuzz_record]=4096 [fuzz_config]=2048)
passed=0 failed=0
for t in "${targets[@]}"; do
  dir=$build/fuzz/$t
  rm -rf "$dir"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  args=(-max_total_time="$secs" -timeout=60 -rss_limit_mb=2048 -malloc_limit_mb=2048
        -max_len="${max_len[$t]:-4096}" -print_final_stats=1 -artifact_prefix="$dir/artifacts/")
  dict=tests/fuzz/${t#fuzz_}.dict
  [ -f "$dict" ] && args+=(-dict="$dict")
  set +e
  "$build/tests/fuzz/$t" "${args[@]}" "$dir/corpus" "tests/fuzz/corpus/$t" >"$dir/log" 2>&1
  rc=$?
  set -e
  stat_of() { awk -v k="stat::$1:" '$1 == k { n = $2 } END { print n + 0 }' "$dir/log"; }
  runs=$(stat_of number_of_executed_units)
  rate=$(stat_of average_exec_per_sec)
  cov=$(grep -o 'cov: [0-9]*' "$dir/log" | tail -1 | cut -d' ' -f2 || true)
  units=$(find "$dir/corpus" -type f | wc -l)
  # The listing whole, then tested: `ls | grep -q .` under pipefail could fail ls (SIGPIPE) and
  # pass a target that left an input there (issue 39).
  if [ "$rc" -eq 0 ] && [ -z "$(ls "$dir/artifacts")" ]; then
    passed=$((passed + 1))
    echo "fuzz: $t: ok, $runs executions in ${secs}s ($rate/s), coverage ${cov:-0}, $units new inputs"
  else
    failed=$((failed + 1))
    echo "fuzz: $t: FAILED (exit $rc) after $runs executions; libFuzzer's report:"
    grep -v -E '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse)|Uses: |NEW_FUNC' "$dir/log" | tail -80
    for a in "$dir"/artifacts/*; do
      [ -f "$a" ] || continue
      echo "fuzz: $t: the input ($(stat -c %s "$a") bytes, $a), in hex:"
      # od folds repeated lines into '*' (board images are mostly zeros); long inputs are cut.
      od -A x -t x1z "$a" | awk 'NR <= 4096 { print } NR == 4097 { print "(cut: the whole input is in that file)" }'
    done
    echo "fuzz: $t: reproduce with: $build/tests/fuzz/$t <that file>"
  fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
