#!/usr/bin/env bash
# Shared placement on a single GPU, end to end, in one device-machine call: builds tpbench and
# the gpu tests; records the shared scenarios' baselines (baselines/<hw>-shared/) and
# re-compares the small ones; qualifies the box with scenarios/qualify/h200x1.json (recording
# its baseline, against it, and once with a tightened HBM floor that must FAIL); Ctrl-C in a
# shared run; then as many of the TP >= 2 gpu tests as time allows (GPU_TESTS regex).
#   usage: TPB_GIT_SHA=<sha> TPB_GIT_DIRTY=0|1 scripts/gpu_shared_acceptance.sh OUTDIR
# Everything lands in OUTDIR (logs; baselines and run records packed as .tgz).
set -u -o pipefail
OUT=${1:?usage: scripts/gpu_shared_acceptance.sh OUTDIR}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
START=$(date +%s)
left() { echo $(( ${BUDGET_S:-520} - ($(date +%s) - START) )); }
step() { echo "== $1 ($(( $(date +%s) - START )) s)"; }
step build
{ cmake --preset cuda >/dev/null && cmake --build build-cuda -j "$(nproc)" --target tpbench tpb_gpu_tests; } >"$OUT/build.log" 2>&1 \
  || { tail -30 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
TPB=build-cuda/suite/tpbench
R="$OUT/runs"
run() {  # name pass flags...
  local scenario=$1 pass=$2; shift 2
  local name; name=$(basename "$scenario" .json)
  timeout 300 "$TPB" run "$scenario" --results-dir "$R" --no-report "$@" >"$OUT/$name-$pass.log" 2>&1
  echo "tpbench run $name ($pass): rc=$?"; grep -E "^(cases|checks|nothing ran|baseline|mps|control):" "$OUT/$name-$pass.log"
}
step "scenarios: record baselines"
for s in scenarios/incident-custom-buffers-shared.json scenarios/memory-fraction-shared.json scenarios/conformance/gpu-engine-shared.json; do
  run "$s" record --baselines baselines --update-baselines
done
step "scenarios: compare with what was just recorded"
for s in scenarios/incident-custom-buffers-shared.json scenarios/memory-fraction-shared.json; do
  run "$s" compare --baselines baselines
done
step qualify
Q=scenarios/qualify/h200x1.json
timeout 200 "$TPB" qualify $Q --out "$OUT/qualify-record" --update-baseline >"$OUT/qualify-record.log" 2>&1
echo "qualify (recording): rc=$?"
timeout 200 "$TPB" qualify $Q --out "$OUT/qualify" >"$OUT/qualify.log" 2>&1
echo "qualify (against the baseline): rc=$?"; cat "$OUT/qualify.log"
python3 -c "
import json; p=json.load(open('$Q'))
p['probes'] = [dict(x, min_GBps=6000) if x['probe'] == 'memory_bandwidth' else x for x in p['probes'] if x['probe'] != 'conformance']
json.dump(p, open('$OUT/h200x1-tight.json', 'w'), indent=1)"
timeout 100 "$TPB" qualify "$OUT/h200x1-tight.json" --out "$OUT/qualify-tight" >"$OUT/qualify-tight.log" 2>&1
echo "qualify (HBM floor 6000 GB/s, above the H200's datasheet): rc=$?"; grep -E "memory_bandwidth|^qualify|verdict" "$OUT/qualify-tight.log"
step "Ctrl-C"
scripts/gpu_sigint_demo.sh "$TPB" "$OUT/sigint"
tar -czf "$OUT/baselines.tgz" baselines/h200x1 baselines/h200x1-shared 2>/dev/null
step "gpu tests (${GPU_TESTS:-.}), $(left) s left"
( cd build-cuda && timeout "$(left)" ctest -L gpu -R "${GPU_TESTS:-.}" --timeout 200 --output-on-failure ) >"$OUT/ctest.log" 2>&1
echo "ctest: rc=$?"
grep -E "Test +#[0-9]+: " "$OUT/ctest.log" | sed -E 's/ +/ /g' | cut -c1-150
grep -E "tests passed|tests failed" "$OUT/ctest.log"
ps -eo pid,ppid,stat,comm | grep -E "mps|tpbench" || echo "no MPS daemon or tpbench process left"
tar -czf "$OUT/runs.tgz" --exclude='*/logs' -C "$OUT" runs 2>/dev/null
step done
