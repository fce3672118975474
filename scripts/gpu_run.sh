#!/usr/bin/env bash
# Builds and runs the GPU work on a GPU machine (H200s: the baseline and profile names say
# h200x<N>) in one go, writing logs and JSON into OUTDIR (the device tool brings back at most
# 8 files: pack the rest).
#   usage: scripts/gpu_run.sh OUTDIR
# The gpu tests, the benchmarks, then the suite end to end: `tpbench run` of the GPU
# scenarios (records, checks, report), `tpbench qualify` of the h200x<N> profile (baseline
# recorded, re-checked, and once with a threshold tightened beyond the machine), all packed
# into OUTDIR/suite.tgz.
# GPU_RUN_SKIP_BENCH=1 / GPU_RUN_SKIP_SUITE=1 / GPU_RUN_SKIP_QUALIFY=1 leave a part out;
# GPU_RUN_BENCH_FILTER=REGEX runs one pass of those benchmarks instead of the allreduce passes;
# GPU_RUN_CTEST_REGEX, GPU_RUN_SCENARIOS choose the tests and scenarios.
# Defaults follow the GPU count: every gpu test; with one GPU the engine benchmarks (GEMMs,
# experts, attention, one MoE layer per TP size) and the single-GPU scenarios (decode-1gpu,
# prefill-1gpu, memory-fraction-1gpu; baselines under h200x1); with two
# or more the allreduce passes, the 2-GPU scenarios (allreduce, decode and prefill sweeps,
# memory-fraction; baselines under h200x<N>; with 4 or more the allreduce sweep and
# decode-sweep-tp48 instead) and the h200x<N> qualification profile when one exists.
# Within the device tool's 10 minutes a 2-GPU session takes two calls:
#   GPU_RUN_SKIP_SUITE=1 (build, tests, benchmarks), then GPU_RUN_SKIP_TESTS=1
#   GPU_RUN_SKIP_BENCH=1 GPU_RUN_BASELINES=1 (scenarios recorded and re-compared, qualify).
# Pass TPB_GIT_SHA=<full sha> TPB_GIT_DIRTY=0|1: the copy on the GPU machine has no usable
# .git, and baselines carry the commit they were recorded at.
# Steps: configure (cmake --preset cuda, Ninja, sm_90a) and build tpb_gpu_tests + tpb_bench
# with all cores; ctest -L gpu (every gpu test unless GPU_RUN_CTEST_REGEX narrows it);
# tpb_bench pass 1 (nccl, one-shot, two-shot) -> measured auto thresholds
# (scripts/allreduce_thresholds.py) -> tpb_bench pass 2 (all four backends side by side,
# auto reading the fresh thresholds); prints the table last.
# Dependencies the GPU image may lack (GoogleTest, Google Benchmark, nlohmann_json) are taken
# from .gpudeps/ when present (a prefix copied from this repo's build machine, git-ignored);
# NCCL from the image's Python wheel when the toolkit has none.
set -u -o pipefail
OUTDIR=${1:?usage: scripts/gpu_run.sh OUTDIR}
mkdir -p "$OUTDIR"
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
HW=h200x$NGPU
if [ "$NGPU" -ge 4 ]; then
  DEFAULT_SCENARIOS="scenarios/allreduce-sweep.json scenarios/decode-sweep-tp48.json"
elif [ "$NGPU" -ge 2 ]; then
  DEFAULT_SCENARIOS="scenarios/allreduce-sweep.json scenarios/decode-sweep.json scenarios/prefill-sweep.json scenarios/memory-fraction.json"
else
  # One GPU: TP 1 as it is, and every TP >= 2 path in shared placement (docs/placement.md).
  DEFAULT_SCENARIOS="scenarios/decode-1gpu.json scenarios/prefill-1gpu.json scenarios/memory-fraction-1gpu.json scenarios/conformance/gpu-engine-shared.json scenarios/memory-fraction-shared.json scenarios/incident-custom-buffers-shared.json"
  : "${GPU_RUN_BENCH_FILTER:=^expert/|attention|gemm|^layer/}"  # no peer for the allreduce passes
fi
cd "$(dirname "$0")/.."
ROOT=$PWD
# NVLink multicast stays off (shared machines; see the device notes). Never create multicast objects.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ENV_LOG=$OUTDIR/env.txt
{
  date -u; uname -a; nvidia-smi; nvidia-smi topo -m; nvcc --version; cmake --version | head -1
  env | grep -E '^(NCCL|CUDA|TPB)_' | sort
} >"$ENV_LOG" 2>&1

CMAKE_ARGS=()
if [ -d "$ROOT/.gpudeps" ]; then
  CMAKE_ARGS+=("-DCMAKE_PREFIX_PATH=$ROOT/.gpudeps")
  export LD_LIBRARY_PATH="$ROOT/.gpudeps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi
if ! ls /usr/local/cuda/lib64/libnccl.so* >/dev/null 2>&1; then
  NCCL_PY=$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "nccl"))' 2>/dev/null)
  if [ -n "$NCCL_PY" ] && [ -e "$NCCL_PY/lib/libnccl.so.2" ]; then
    NCCL_INC=$NCCL_PY/include
    [ -f "$NCCL_INC/nccl.h" ] || NCCL_INC=$ROOT/.gpudeps/nccl/include
    CMAKE_ARGS+=("-DNCCL_INCLUDE_DIR=$NCCL_INC" "-DNCCL_LIBRARY=$NCCL_PY/lib/libnccl.so.2")
    export LD_LIBRARY_PATH="$NCCL_PY/lib:${LD_LIBRARY_PATH:-}"
  fi
fi
echo "cmake args: ${CMAKE_ARGS[*]}" >>"$ENV_LOG"

BUILD_LOG=$OUTDIR/build.log
T0=$(date +%s)
if ! { cmake --preset cuda "${CMAKE_ARGS[@]}" && cmake --build build-cuda -j "$(nproc)" --target ${GPU_RUN_FIRST_TARGETS:-tpb_bench}; } >"$BUILD_LOG" 2>&1; then
  tail -40 "$BUILD_LOG"; echo "BUILD FAILED (see build.log)"; exit 1
fi
TESTS_BUILT=1
cmake --build build-cuda -j "$(nproc)" --target tpb_gpu_tests tpbench >>"$BUILD_LOG" 2>&1 || { TESTS_BUILT=0; grep -E "error" "$BUILD_LOG" | head -20; echo "TEST BUILD FAILED"; }
echo "build: $(( $(date +%s) - T0 )) s"

if [ "$TESTS_BUILT" = 1 ] && [ "${GPU_RUN_SKIP_TESTS:-0}" != 1 ]; then
  T0=$(date +%s)
  # Tests that read device-wide free memory (memory footprints, the KV pool's serving
  # formula) see every other process's allocations: run them alone, after the rest.
  SERIAL='MemoryBytes|KvPool'
  # The full-width shared conformance scenario (minutes) runs with the suite below, with baselines.
  ( cd build-cuda && timeout "${GPU_RUN_CTEST_TIMEOUT:-300}" ctest -L gpu -R "${GPU_RUN_CTEST_REGEX:-.}" \
      -E "$SERIAL|conformance.gpu-engine-shared$" -j "${GPU_RUN_CTEST_JOBS:-4}" --timeout 200 --output-on-failure ) >"$OUTDIR/ctest.log" 2>&1
  echo "ctest (parallel): rc=$? $(( $(date +%s) - T0 )) s"
  ( cd build-cuda && timeout "${GPU_RUN_CTEST_SERIAL_TIMEOUT:-120}" ctest -L gpu -R "$SERIAL" -j 1 --timeout 120 --output-on-failure ) >>"$OUTDIR/ctest.log" 2>&1
  echo "ctest (memory, serial): rc=$? $(( $(date +%s) - T0 )) s"
  grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|Not Run|Passed|Skipped" "$OUTDIR/ctest.log" | grep -v "tp4\|tp8" | tail -60
fi

BENCH=build-cuda/bench/tpb_bench
MAX_MIB=${GPU_RUN_MAX_MIB:-256}
if [ "${GPU_RUN_SKIP_BENCH:-0}" != 1 ] && [ -n "${GPU_RUN_BENCH_FILTER:-}" ]; then
  # One pass of the named benchmarks only (e.g. the engine's GEMM, expert and attention ones
  # on a single GPU, where the allreduce benchmarks have no peer).
  T0=$(date +%s)
  timeout ${GPU_RUN_BENCH_TIMEOUT:-100} "$BENCH" --benchmark_filter="$GPU_RUN_BENCH_FILTER" \
    --benchmark_out="$OUTDIR/bench.json" --benchmark_out_format=json >"$OUTDIR/bench.log" 2>&1
  echo "bench ($GPU_RUN_BENCH_FILTER): rc=$? $(( $(date +%s) - T0 )) s"
  grep -vE "^\*\*\*|^-+$" "$OUTDIR/bench.log" | tail -60
elif [ "${GPU_RUN_SKIP_BENCH:-0}" != 1 ]; then
T0=$(date +%s)
TPB_BENCH_BACKENDS=nccl,custom-oneshot,custom-twoshot timeout ${GPU_RUN_BENCH_TIMEOUT:-100} "$BENCH" --tpb_max_mib="$MAX_MIB" \
  --benchmark_out="$OUTDIR/bench_pass1.json" --benchmark_out_format=json >"$OUTDIR/bench.log" 2>&1
echo "bench pass 1: rc=$? $(( $(date +%s) - T0 )) s"
python3 scripts/allreduce_thresholds.py "$OUTDIR/bench_pass1.json" "$OUTDIR/allreduce_thresholds.json"
T0=$(date +%s)
TPB_ALLREDUCE_THRESHOLDS=$OUTDIR/allreduce_thresholds.json timeout ${GPU_RUN_BENCH_TIMEOUT:-100} "$BENCH" --tpb_max_mib="$MAX_MIB" \
  --benchmark_out="$OUTDIR/bench.json" --benchmark_out_format=json >>"$OUTDIR/bench.log" 2>&1
echo "bench pass 2: rc=$? $(( $(date +%s) - T0 )) s"
tail -5 "$OUTDIR/bench.log"
python3 scripts/allreduce_table.py "$OUTDIR/bench.json" 1024 8192 32768 524288 2097152 33554432 268435456
fi

# --- the suite end to end: scenarios through tpbench run, then qualification -------------
if [ "${GPU_RUN_SKIP_SUITE:-0}" != 1 ]; then
  TPB=$ROOT/build-cuda/suite/tpbench
  SUITE=$OUTDIR/suite
  mkdir -p "$SUITE"
  T0=$(date +%s)
  # With GPU_RUN_BASELINES=1 each scenario runs twice: once recording baselines/<hw>/ (with
  # provenance), once compared with what was just recorded (verdicts, control stability).
  for scenario in ${GPU_RUN_SCENARIOS:-$DEFAULT_SCENARIOS}; do
    name=$(basename "$scenario" .json)
    passes="plain"
    [ "${GPU_RUN_BASELINES:-0}" = 1 ] && passes="record compare"
    for pass in $passes; do
      flags=()
      [ "$pass" = record ] && flags=(--baselines baselines --update-baselines)
      [ "$pass" = compare ] && flags=(--baselines baselines)
      timeout "${GPU_RUN_SCENARIO_TIMEOUT:-240}" "$TPB" run "$scenario" --results-dir "$SUITE/runs" \
        --junit "$SUITE/$name-$pass.junit.xml" "${flags[@]}" >"$SUITE/$name-$pass.log" 2>&1
      echo "tpbench run $scenario ($pass): rc=$? $(( $(date +%s) - T0 )) s"; grep "^nothing ran:" "$SUITE/$name-$pass.log"; tail -4 "$SUITE/$name-$pass.log"
    done
  done
  [ "${GPU_RUN_BASELINES:-0}" = 1 ] && cp -r "baselines/$HW" "$SUITE/baselines-$HW"
  [ "${GPU_RUN_BASELINES:-0}" = 1 ] && [ -d "baselines/$HW-shared" ] && cp -r "baselines/$HW-shared" "$SUITE/baselines-$HW-shared"
  Q=scenarios/qualify/$HW.json
  if [ "${GPU_RUN_SKIP_QUALIFY:-0}" != 1 ] && [ -f "$Q" ]; then
  if [ "${GPU_RUN_UPDATE_BASELINE:-1}" = 1 ]; then
    "$TPB" qualify $Q --out "$SUITE/qualify-record" --update-baseline >"$SUITE/qualify-record.log" 2>&1
    echo "qualify (recording the baseline): rc=$?"
    cp "baselines/$HW/qualify-$HW.json" "$SUITE/" 2>/dev/null
  fi
  "$TPB" qualify $Q --out "$SUITE/qualify" >"$SUITE/qualify.log" 2>&1
  echo "qualify (against the baseline): rc=$?"; cat "$SUITE/qualify.log"
  # The same profile with the HBM floor tightened beyond what an H200 does: must FAIL.
  python3 - "$Q" "$SUITE/$HW-tight.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for probe in p["probes"]:
    if probe["probe"] == "memory_bandwidth":
        probe["min_GBps"] = 6000  # above the H200's 4.8 TB/s HBM3e datasheet peak
json.dump(p, open(sys.argv[2], "w"), indent=1)
PY
  (cd "$ROOT" && "$TPB" qualify "$SUITE/$HW-tight.json" --out "$SUITE/qualify-tight" >"$SUITE/qualify-tight.log" 2>&1)
  echo "qualify (tightened HBM floor 6000 GB/s): rc=$?"; grep -E "memory_bandwidth|^qualify" "$SUITE/qualify-tight.log"
  fi
  echo "suite: $(( $(date +%s) - T0 )) s"
  tar -czf "$OUTDIR/suite.tgz" -C "$OUTDIR" suite && rm -rf "$SUITE"
fi
