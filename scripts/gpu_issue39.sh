#!/usr/bin/env bash
# Issue 39's GPU checks in one device-machine call: EXTRA_TESTS first (a ctest regex, default
# none: another issue's tests in the same call), then the custom allreduce's stress tests and
# its own tests (tests/gpu/allreduce_stress_test.cpp, allreduce_conformance_test.cpp), each
# bounded. TPB_STRESS_SCALE scales the stress loops (default 1).
# BEFORE=1 then builds the tree as it was before the hardening (build-before/src, carried: made
# by `git archive e2a5467 | tar -x -C build-before/src`) with this tree's stress test copied
# in, and runs the stress tests there: each finding's test should fail or time out.
#   usage: scripts/gpu_issue39.sh OUTDIR
# OUTDIR receives: build.log, ctest-allreduce.log, ctest-extra.log, build-before.log,
# ctest-before.log.
# shellcheck disable=SC2034  # read by gpu_call_common.bash
GPU_CALL_TARGETS="tpbench tpb_gpu_tests"
source "$(dirname "$0")/gpu_call_common.bash" "$@"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
if [ -n "${EXTRA_TESTS:-}" ]; then
  step "extra tests ($EXTRA_TESTS)"
  ( cd build-cuda && bounded "${EXTRA_BUDGET_S:-600}" ctest -L gpu -R "$EXTRA_TESTS" --timeout 200 --output-on-failure ) \
    >"$OUT/ctest-extra.log" 2>&1
  echo "ctest extra: rc=$?"
  grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|Timeout" "$OUT/ctest-extra.log" | head -40
fi
step "allreduce tests (${ALLREDUCE_TESTS:=CustomAllreduceStress|Gpu/CustomAllreduce\.|AllreduceConformance})"
( cd build-cuda && bounded "${ALLREDUCE_BUDGET_S:-240}" ctest -L gpu -R "$ALLREDUCE_TESTS" --timeout 240 --output-on-failure ) \
  >"$OUT/ctest-allreduce.log" 2>&1
echo "ctest allreduce: rc=$?"
grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|Timeout|Passed +[0-9.]+ sec" "$OUT/ctest-allreduce.log" \
  | grep -E "Stress|failed|Failed|Timeout|Not Run|tests passed" | head -60
if [ "${BEFORE:-0}" = 1 ] && [ -d build-before/src ]; then
  step "the tree before the hardening, with the stress test"
  cp tests/gpu/allreduce_stress_test.cpp tests/gpu/allreduce_stress_kernels.h tests/gpu/allreduce_stress_kernels.cu \
    build-before/src/tests/gpu/
  ( cd build-before/src && cmake --preset cuda -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null \
      && cmake --build build-cuda -j "$(nproc)" --target tpbench tpb_gpu_tests ) >"$OUT/build-before.log" 2>&1 \
    || { tail -20 "$OUT/build-before.log"; echo "BEFORE BUILD FAILED"; }
  ( cd build-before/src/build-cuda && bounded "${BEFORE_BUDGET_S:-200}" ctest -L gpu -R "CustomAllreduceStress" \
      -E "BackToBack|GraphOf64" --timeout 60 --output-on-failure ) >"$OUT/ctest-before.log" 2>&1
  echo "ctest before: rc=$?"
  grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|Timeout|Passed" "$OUT/ctest-before.log" | head -30
fi
step done
