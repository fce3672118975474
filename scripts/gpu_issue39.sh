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
( cd build-cuda && bounded "${ALLREDUCE_BUDGET_S:-240}" ctest -L gpu -R "$ALLREDUCE_TESTS" --timeout "${ALLREDUCE_TEST_TIMEOUT_S:-120}" \
    --output-on-failure ) >"$OUT/ctest-allreduce.log" 2>&1
echo "ctest allreduce: rc=$?"
grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|Timeout" "$OUT/ctest-allreduce.log" | head -40
echo "passed: $(grep -cE " Passed +[0-9.]+ sec" "$OUT/ctest-allreduce.log"); the slowest:"
grep -E " Passed +[0-9.]+ sec" "$OUT/ctest-allreduce.log" | sed -E 's/.*Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec/\2 \1/' | sort -rn | head -8
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
# VARIANTS (with BENCH=1): ablations of this tree's kernel benched beside it, each this tree with
# one sed program applied to kernels/allreduce/custom_allreduce.cu (tpb_bench rebuilt, kept as
# /tmp/tpb-bench-NAME, the file restored): noinflight = no in_flight atomic at a call's start.
declare -A VARIANT_SED=([noinflight]='s/if (blockIdx.x == 0) s.was_in_flight = atomicExch(&self->in_flight, 1u);//')
for v in ${VARIANTS:-}; do
  step "variant $v"
  cp kernels/allreduce/custom_allreduce.cu /tmp/custom_allreduce.cu.orig
  sed -i "${VARIANT_SED[$v]}" kernels/allreduce/custom_allreduce.cu
  cmp -s kernels/allreduce/custom_allreduce.cu /tmp/custom_allreduce.cu.orig && echo "variant $v: the sed changed nothing"
  cmake --build build-cuda -j "$(nproc)" --target tpb_bench >"$OUT/build-$v.log" 2>&1 && cp build-cuda/bench/tpb_bench "/tmp/tpb-bench-$v" \
    || { tail -5 "$OUT/build-$v.log"; echo "variant $v: BUILD FAILED"; }
  cp /tmp/custom_allreduce.cu.orig kernels/allreduce/custom_allreduce.cu
done
[ -n "${VARIANTS:-}" ] && cmake --build build-cuda -j "$(nproc)" --target tpb_bench >>"$OUT/build.log" 2>&1
if [ "${BENCH:-0}" = 1 ] && [ -x build-before/src/build-cuda/bench/tpb_bench ]; then
  step "custom allreduce, this tree against the one before${VARIANTS:+ and $VARIANTS} (2 ranks on one GPU, MPS)"
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/tpb-bench-mps CUDA_MPS_LOG_DIRECTORY=/tmp/tpb-bench-mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d
  for round in $(seq "${ROUNDS:-2}"); do
    for tree in new old ${VARIANTS:-}; do
      bench=build-cuda/bench/tpb_bench
      [ "$tree" = old ] && bench=build-before/src/build-cuda/bench/tpb_bench
      [ -x "/tmp/tpb-bench-$tree" ] && bench=/tmp/tpb-bench-$tree
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
trees = ["new", "old"] + sorted({t for _, t in times} - {"new", "old"})
print("benchmark (median us; each tree / old)  " + "  ".join(trees))
for n in names:
    old = times.get((n, "old"))
    if not old:
        continue
    b = statistics.median(old)
    cells = []
    for t in trees:
        v = times.get((n, t))
        cells.append(f"{t} {statistics.median(v):6.2f} ({statistics.median(v) / b:5.3f})" if v else f"{t} -")
    print(n.replace("/iterations:20/manual_time", "").replace("allreduce/", ""), " ".join(cells))
PY
fi
step done
# The device tool returns few files: the logs go back as one archive.
tar czf "$OUT/logs.tgz" -C "$OUT" $(cd "$OUT" && ls *.log *.json 2>/dev/null) && (cd "$OUT" && rm -f -- *.log *.json)
