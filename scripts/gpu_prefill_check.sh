#!/usr/bin/env bash
# Issue 20's tensor-core MLA prefill attention on one GPU, in one device-machine call:
#   1. the gpu tests that exercise it: MlaPrefill (every kernel variant against the CPU
#      reference, dispatch, determinism) and the GPU engine against the CPU engine, HF
#      transformers and the logits CLI (GpuEngineVsCpu, GpuHfParity, GpuLogitsCli);
#   2. tpb_bench's attention/mla_prefill/<variant>/... (tensor_core: what the engine is to run
#      once kTensorCoreByDefault in kernels/cuda/mla_prefill.cu is on; tensor_core_split_p;
#      cuda_core: the engine's kernel until then) and bench/sdpa_reference.py (torch
#      SDPA, cuDNN backend) at the same shapes: 1 x 8K and 4 x 2K, 64 and 32 heads, q/k 192, v 128;
#   3. one table: useful causal TFLOP/s of each, tensor_core / cuDNN (issue 20's target: >= 0.75)
#      and tensor_core / cuda_core.
#   usage: scripts/gpu_prefill_check.sh OUTDIR
# OUTDIR receives (at most 8 files): build.log, ctest.log, prefill_bench.json, bench.log,
# sdpa.json, sdpa.log, prefill_table.md. CTEST_BUDGET_S (default 300) bounds step 1.
# shellcheck disable=SC2034  # read by gpu_call_common.bash
GPU_CALL_TARGETS="tpbench tpb_gpu_tests tpb_bench"
source "$(dirname "$0")/gpu_call_common.bash" "$@"

step "gpu tests (MlaPrefill|GpuEngineVsCpu|GpuHfParity|GpuLogitsCli)"
( cd build-cuda && timeout "${CTEST_BUDGET_S:-300}" ctest -L gpu -R 'MlaPrefill|GpuEngineVsCpu|GpuHfParity|GpuLogitsCli' \
    --timeout 200 --output-on-failure ) >"$OUT/ctest.log" 2>&1
echo "ctest: rc=$?"
grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|Timeout" "$OUT/ctest.log" | head -20

step "tpb_bench attention/mla_prefill"
timeout 150 build-cuda/bench/tpb_bench --tpb_ranks=1 --benchmark_filter='attention/mla_prefill/' \
  --benchmark_out="$OUT/prefill_bench.json" --benchmark_out_format=json >"$OUT/bench.log" 2>&1
echo "tpb_bench: rc=$?"

step "torch SDPA, cuDNN backend"
timeout 120 python3 bench/sdpa_reference.py --out "$OUT/sdpa.json" >"$OUT/sdpa.log" 2>&1
echo "sdpa_reference.py: rc=$?"
tail -3 "$OUT/sdpa.log"

step table
python3 - "$OUT/prefill_bench.json" "$OUT/sdpa.json" <<'PY' | tee "$OUT/prefill_table.md"
import json, re, sys
def load(path):
    try:
        return json.load(open(path))["benchmarks"]
    except (OSError, ValueError, KeyError) as e:
        print(f"({path}: {e})")
        return []
tflops = {}  # (heads, batch, q_len) -> {column: TFLOP/s}
for b in load(sys.argv[1]):
    m = re.match(r"attention/mla_prefill/(\w+)/heads:(\d+)/batch:(\d+)/q_len:(\d+)", b.get("name", ""))
    if m and "TFLOPs" in b and not b.get("error_occurred"):
        tflops.setdefault(tuple(map(int, m.group(2, 3, 4))), {})[m.group(1)] = b["TFLOPs"]
for b in load(sys.argv[2]):
    tflops.setdefault((b["heads"], b["batch"], b["q_len"]), {})["cudnn"] = b["TFLOPs"]
def f(x):
    return "-" if x is None else f"{x:.1f}"
def ratio(a, b):
    return "-" if a is None or not b else f"{a / b:.2f}"
print("| shape (causal, q/k 192, v 128, bf16) | tensor_core TFLOP/s | split_p | cuda_core (old) | cuDNN SDPA | tensor_core / cuDNN | tensor_core / old |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for (heads, batch, q_len), c in sorted(tflops.items(), key=lambda kv: (-kv[0][0], kv[0][1])):
    tc = c.get("tensor_core")
    print(f"| {heads} heads, {batch} x {q_len} | {f(tc)} | {f(c.get('tensor_core_split_p'))} | "
          f"{f(c.get('cuda_core'))} | {f(c.get('cudnn'))} | {ratio(tc, c.get('cudnn'))} | {ratio(tc, c.get('cuda_core'))} |")
PY
step "done"
