#!/usr/bin/env bash
# One device-machine call that runs the gpu label (or part of it) and lists what did not pass:
# CTEST_REGEX (default all) less CTEST_EXCLUDE (default none), natively or with
# TPB_KERNELS=portable when PORTABLE=1 (the path an sm_120 box takes), bounded by CTEST_BUDGET_S
# (default 480). The tests' run times go to OUTDIR/ctest-times.txt, slowest first.
#   usage: scripts/gpu_ctest.sh OUTDIR
# OUTDIR receives: build.log, ctest.log, ctest-times.txt.
source "$(dirname "$0")/gpu_call_common.bash" "$@"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
args=(-L gpu --timeout 240 --output-on-failure)
[ -n "${CTEST_REGEX:-}" ] && args+=(-R "$CTEST_REGEX")
[ -n "${CTEST_EXCLUDE:-}" ] && args+=(-E "$CTEST_EXCLUDE")
kernels=native
[ "${PORTABLE:-0}" = 1 ] && export TPB_KERNELS=portable && kernels=portable
step "ctest ${args[*]} ($kernels kernels)"
( cd build-cuda && bounded "${CTEST_BUDGET_S:-480}" ctest "${args[@]}" ) >"$OUT/ctest.log" 2>&1
echo "ctest: rc=$?"
grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|Timeout|Total Test time" "$OUT/ctest.log" | head -60
grep -E "^ *[0-9]+/[0-9]+ Test +#" "$OUT/ctest.log" | sed -E 's/.*Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec/\2 \1/' \
  | sort -rn >"$OUT/ctest-times.txt"
head -15 "$OUT/ctest-times.txt"
step done
