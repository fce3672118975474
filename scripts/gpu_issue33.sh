#!/usr/bin/env bash
# Issue 33's measurements on one GPU (H100 or H200), in one device-machine call:
#   1. GPU_TESTS (default: the INT4 kernels, the synthetic INT4 fill, the GPU engine at int4
#      against the CPU engine, TP 2/4 backends and HF parity) natively (NATIVE=0 leaves it out), then the same with
#      TPB_KERNELS=portable (the path an sm_120 box takes); PORTABLE=0 leaves the second out;
#   2. tpb_bench BENCH_FILTER (default expert_int4/ and the INT4 layers: the W4A16 expert GEMMs at Kimi's expert
#      shapes beside bf16, and the decode MoE layer) as JSON;
#   3. bench/int4_torch_reference.py: torch._weight_int4pack_mm and bf16 cuBLAS at the same shapes
#      (SKIP_TORCH=1 leaves it out);
#   4. SCENARIOS (default none): each `tpbench run` without baselines, its summary printed; an
#      entry FILE:F1:F2... runs FILE with --filter F1 --filter F2 ...
#   usage: scripts/gpu_issue33.sh OUTDIR
# OUTDIR receives: build.log, ctest.log, ctest-portable.log, bench.json, bench.log, int4_torch.json, runs.tgz.
# shellcheck disable=SC2034  # read by gpu_call_common.bash
GPU_CALL_TARGETS="tpbench tpb_gpu_tests tpb_bench"
source "$(dirname "$0")/gpu_call_common.bash" "$@"
RUNS=$(mktemp -d /tmp/tpb-issue33-runs.XXXXXX)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
GPU_TESTS=${GPU_TESTS:-Int4|SyntheticFill|GpuEngineVsCpu|GpuEngineTp|GpuHfParity}
if [ "${NATIVE:-1}" = 1 ]; then
  step "gpu tests, native ($GPU_TESTS)"
  ( cd build-cuda && bounded "${CTEST_BUDGET_S:-200}" ctest -L gpu -R "$GPU_TESTS" --timeout 200 --output-on-failure ) \
    >"$OUT/ctest.log" 2>&1
  echo "ctest native: rc=$?"
  grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|Timeout|measured\] .*(int4|INT4)" "$OUT/ctest.log" | head -40
fi
if [ "${PORTABLE:-1}" = 1 ]; then
  step "gpu tests, TPB_KERNELS=portable"
  ( cd build-cuda && TPB_KERNELS=portable bounded "${CTEST_PORTABLE_BUDGET_S:-150}" ctest -L gpu -R "${GPU_TESTS_PORTABLE:-$GPU_TESTS}" \
      --timeout 200 --output-on-failure ) >"$OUT/ctest-portable.log" 2>&1
  echo "ctest portable: rc=$?"
  grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|Timeout" "$OUT/ctest-portable.log" | head -20
fi
if [ -n "${BENCH_FILTER-expert_int4/|layer/moe_decode/.*/int4}" ]; then
  step "tpb_bench ${BENCH_FILTER:=expert_int4/|layer/moe_decode/.*/int4}"
  bench_json "${BENCH_BUDGET_S:-120}" "$BENCH_FILTER" "$OUT/bench.json" "$OUT/bench.log"
  grep -E "expert_int4|layer" "$OUT/bench.log" | head -60
fi
if [ "${SKIP_TORCH:-0}" != 1 ]; then
  step "torch int4 / bf16 anchors"
  bounded 90 python3 bench/int4_torch_reference.py --out "$OUT/int4_torch.json" >"$RUNS/int4_torch.log" 2>&1
  echo "int4_torch_reference.py: rc=$?"
  cat "$RUNS/int4_torch.log" | head -30
fi
for entry in ${SCENARIOS:-}; do
  IFS=: read -r -a parts <<<"$entry"
  s=${parts[0]} filter=()
  for f in "${parts[@]:1}"; do filter+=(--filter "$f"); done
  step "tpbench run $s ${filter[*]}"
  bounded "${SCENARIO_BUDGET_S:-150}" "$TPB" run "$s" "${filter[@]}" --results-dir "$RUNS/$(basename "$s" .json)" >"$RUNS/$(basename "$s" .json).log" 2>&1
  echo "$s: rc=$?"
  tail -25 "$RUNS/$(basename "$s" .json).log"
done
tar czf "$OUT/runs.tgz" -C "$RUNS" . 2>/dev/null
step done
