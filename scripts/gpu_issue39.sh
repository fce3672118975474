#!/usr/bin/env bash
# Issue 39's GPU checks in one device-machine call: EXTRA_TESTS first (a ctest regex, default
# none: another issue's tests in the same call), then the custom allreduce's stress tests and
# its own tests (tests/gpu/allreduce_stress_test.cpp, allreduce_conformance_test.cpp), each
# bounded. TPB_STRESS_SCALE scales the stress loops (default 1).
# BEFORE=1 then builds the tree as it was before the hardening (build-before/src, carried: made
# by `git archive e2a5467 | tar -x -C build-before/src`) with this tree's stress test copied
# in, and runs the stress tests there: each finding's test should fail or time out.
# BENCH=1 (with BEFORE=1) times the custom one-shot and two-shot allreduce, 1 KiB to 2 MiB, CUDA
# graphs, 2 ranks on this one GPU under MPS, this tree and the one before, ROUNDS (default 2) times each, alternating
# (tpb_bench --tpb_ranks=2); bench-{new,old}-{1,2}.json and the ratios new / old.
#   usage: scripts/gpu_issue39.sh OUTDIR
# OUTDIR receives: build.log, ctest-allreduce.log, ctest-extra.log, build-before.log,
# ctest-before.log.
# shellcheck disable=SC2034  # read by gpu_call_common.bash
GPU_CALL_TARGETS="tpbench tpb_gpu_tests${BENCH:+ tpb_bench}"
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
  # The bench's shared placement, with the grid that tree took from CommOptions (this one counts
  # the ranks on a GPU itself), so that both trees launch the same grid.
  cp bench/allreduce_bench.cpp build-before/src/bench/
  sed -i 's|    o.device = device;|    o.device = device;\n    o.ranks_per_device = std::max(1, ctx->world / std::max(1, [] { int n = 0; cudaGetDeviceCount(\&n); return n; }()));|' \
    build-before/src/bench/allreduce_bench.cpp
  ( cd build-before/src && cmake --preset cuda -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null \
      && cmake --build build-cuda -j "$(nproc)" --target ${BEFORE_TARGETS:-tpbench tpb_gpu_tests} ${BENCH:+tpb_bench} ) >"$OUT/build-before.log" 2>&1 \
    || { tail -20 "$OUT/build-before.log"; echo "BEFORE BUILD FAILED"; }
  [ "${BEFORE_TESTS:-}" != none ] && ( cd build-before/src/build-cuda && bounded "${BEFORE_BUDGET_S:-200}" ctest -L gpu -R "${BEFORE_TESTS:-CustomAllreduceStress}" \
      -E "BackToBack|GraphOf64" --timeout 60 --output-on-failure ) >"$OUT/ctest-before.log" 2>&1
  echo "ctest before: rc=$?"
  grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|Timeout|Passed" "$OUT/ctest-before.log" | head -30
fi
if [ "${BENCH:-0}" = 1 ] && [ -x build-before/src/build-cuda/bench/tpb_bench ]; then
  step "custom allreduce, this tree against the one before (2 ranks on one GPU, MPS)"
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/tpb-bench-mps CUDA_MPS_LOG_DIRECTORY=/tmp/tpb-bench-mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d
  for round in $(seq "${ROUNDS:-2}"); do
    for tree in new old; do
      bench=build-cuda/bench/tpb_bench
      [ "$tree" = old ] && bench=build-before/src/build-cuda/bench/tpb_bench
      TPB_BENCH_BACKENDS=custom-oneshot,custom-twoshot bounded 60 "$bench" --tpb_ranks=2 --tpb_max_mib=2 \
        --benchmark_filter='allreduce/.*/graph/' --benchmark_out="$OUT/bench-$tree-$round.json" \
        --benchmark_out_format=json >"$OUT/bench-$tree-$round.log" 2>&1
      echo "bench $tree $round: rc=$?"
    done
  done
  echo quit | nvidia-cuda-mps-control
  python3 - "$OUT" <<'PY'
import glob, json, statistics, sys
times = {}
for f in glob.glob(sys.argv[1] + "/bench-*-*.json"):
    tree = f.rsplit("/", 1)[1].split("-")[1]
    for b in json.load(open(f)).get("benchmarks", []):
        times.setdefault((b["name"], tree), []).append(b["real_time"])
names = sorted({n for n, _ in times}, key=lambda n: (n.split("/")[1], [int(p) for p in n.split("/") if p.isdigit()]))
print("benchmark                                   new us   old us  new/old")
for n in names:
    new, old = times.get((n, "new")), times.get((n, "old"))
    if new and old:
        a, b = statistics.median(new), statistics.median(old)
        print(f"{n:70s} {a:8.2f} {b:8.2f}  {a / b:6.3f}")
PY
fi
step done
