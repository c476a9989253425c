#!/usr/bin/env bash
# The CPU tests under AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer (CI):
# a CPU-only build (-Dcpu_only=true: no nvcc, no kernels, no libsymmpin.so) with
# -Db_sanitize=address,undefined, then every test it has. A test fails when meson says so or when
# its output holds a sanitizer report: Criterion runs each test in a worker process that has
# reported its result before it exits, so a leak found at that exit would not fail it otherwise.
# Closing line: "sanitizers: N passed, N failed". docs/testing.md has the details.
#
# Not run here (they are in scripts/test.sh's run), and why:
#   interpose, compat's banner_preload tests, tools_symmpin
#       preload libsymmpin.so into child programs (fake_app, fake_loader, compat_app, and through
#       `symmpin run` a shell): the library links the CUDA kernels (nvcc), and an ASan-built
#       library preloaded into a program built without ASan stops at once ("ASan runtime does not
#       come first in initial library list"); the runtime would have to be preloaded first, but
#       these tests start their children with a fresh minimal environment (PATH, LD_LIBRARY_PATH,
#       LD_PRELOAD=libsymmpin.so: tests/interpose/child.c) on purpose. The in-process halves of
#       compat (test_arch, test_banner) do run here.
#   interpose_exports       reads libsymmpin.so's exports (nm): no library, and nothing runs;
#   kernels_lists_cu_*      nvcc compile checks: nothing runs;
#   GPU programs            test_oneshot, test_pool, symmpin-bench, tests/apps: need GPUs.
# Without the CUDA toolkit's headers the build leaves out symmem_pool_vmm, engine and symmem's
# pool tests as well (it says so when configured); CI has them.
#
# Environment: SYMMPIN_ASAN_BUILD_DIR (default build-asan), CC (default gcc); extra arguments go
# to `meson test` (test names, --suite, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
SYMMPIN_SETUP_CPU_ONLY=1 scripts/setup.sh gcc # Debian's gcc brings libasan and libubsan
build=${SYMMPIN_ASAN_BUILD_DIR:-build-asan}
if [ ! -f "$build/build.ninja" ]; then
  CC=${CC:-gcc} meson setup "$build" -Dcpu_only=true -Db_sanitize=address,undefined \
    -Db_lundef=false >"$build.setup.log" 2>&1 || { cat "$build.setup.log"; exit 1; }
  grep -i 'cpu_only:' "$build.setup.log" || true
  rm -f "$build.setup.log"
fi
echo "== sanitizers: building $build (CPU only, ASan + UBSan)"
ninja -C "$build" >/dev/null

# halt_on_error: the first report ends the process (UBSan's too), so a test cannot pass over one.
# fast_unwind_on_malloc=0: allocation stacks go through libcriterion (built without frame
# pointers), so that the suppression can name Criterion's runner (tests/sanitize/lsan.supp).
# Not strict_string_checks: it makes the trace reader's strtoull calls read to the end of the
# whole file each time (a 60 s test instead of 1 s).
export ASAN_OPTIONS="halt_on_error=1:print_stacktrace=1:detect_leaks=1:detect_stack_use_after_return=1:fast_unwind_on_malloc=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitize/lsan.supp:print_suppressions=0"
echo "== sanitizers: ASAN_OPTIONS=$ASAN_OPTIONS"
echo "== sanitizers: UBSAN_OPTIONS=$UBSAN_OPTIONS LSAN_OPTIONS=$LSAN_OPTIONS"
echo "== sanitizers: not run here (need libsymmpin.so preloaded into other programs, nvcc or GPUs;" \
     "see this script): interpose, interpose_exports, tools_symmpin, compat's banner_preload," \
     "kernels_lists_cu_*, GPU programs"
set +e
# Sanitized code runs 2-5x slower: the tests' own timeouts, times 3.
meson test -C "$build" --timeout-multiplier 3 --print-errorlogs "$@"
set -e

# Per test: meson's verdict, and any sanitizer report in its output.
python3 - "$build/meson-logs/testlog.json" <<'EOF'
import json, re, sys
report = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer)|runtime error: |"
                    r"SUMMARY: (AddressSanitizer|UndefinedBehaviorSanitizer)")
ok = bad = 0
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    t = json.loads(line)
    out = (t.get("stdout") or "") + (t.get("stderr") or "")
    found = report.search(out)
    if t["result"] in ("OK", "EXPECTEDFAIL") and not found:
        ok += 1
        continue
    if t["result"] == "SKIP":
        continue
    bad += 1
    why = f"sanitizer report ({found.group(0).strip()})" if found else t["result"]
    print(f"sanitizers: {t['name']} FAILED: {why}")
    if found:  # the report itself, which --print-errorlogs shows only for tests meson failed
        lines = out.splitlines()
        first = next(i for i, l in enumerate(lines) if report.search(l))
        print("\n".join(lines[max(0, first - 3):first + 40]))
print(f"sanitizers: {ok} passed, {bad} failed")
sys.exit(1 if bad else 0)
EOF
