#!/usr/bin/env bash
# The routed-expert GEMM's tuning variants side by side at decode sizes (tpb_bench
# expert_variant/* and expert/*, Kimi TP2 shapes), and Nsight Compute on the engine's gate_up
# launch at one token (speed of light, occupancy, warp states).
#   usage: scripts/gpu_expert_variants.sh OUTDIR   (EXPERT_FILTER overrides the filter)
# shellcheck disable=SC2034  # read by gpu_call_common.bash
GPU_CALL_TARGETS="tpb_bench"
source "$(dirname "$0")/gpu_call_common.bash" "$@"
BENCH=build-cuda/bench/tpb_bench
step "tpb_bench ${EXPERT_FILTER:=expert(_variant)?/.*(gate_up|down)/tokens:(1|8|16|32|64)/}"
bench_json 200 "$EXPERT_FILTER" "$OUT/expert_bench.json"
python3 - "$OUT/expert_bench.json" <<'PY'
import sys
sys.path.insert(0, "scripts")
from bench_rows import rows, short_name
for b in rows(sys.argv[1], "expert benchmarks", ["benchmark", "us", "GB/s", "vs copy bw"]):
    print(f"| {short_name(b)} | {b['us_per_op']:.1f} | {b['GBps']:.0f} | {b['vs_copy_bw']:.3f} |")
PY
step "Nsight Compute: expert/gate_up/tokens:1"
bounded 120 ncu --launch-skip 4 --launch-count 1 -k regex:expert_gemm_grouped --section SpeedOfLight \
  --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis \
  "$BENCH" --tpb_ranks=1 --benchmark_filter='expert/gate_up/tokens:1/' >"$OUT/ncu_expert.txt" 2>&1
echo "ncu: rc=$?"
grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Stall|No Eligible|Issued Warp|Waves Per SM|Grid Size" "$OUT/ncu_expert.txt" | head -40
step done
