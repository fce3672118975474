#!/usr/bin/env bash
# Quick shared-placement run on a GPU machine: builds tpbench only and runs the named
# scenarios (default: the tiny shared conformance scenario), printing each run's summary.
#   usage: scripts/gpu_smoke_shared.sh OUTDIR [SCENARIO...]
# SMOKE_FLAGS: extra `tpbench run` flags (e.g. "--baselines baselines --update-baselines");
# SMOKE_TIMEOUT: seconds per scenario (300); SMOKE_TAIL: log lines shown per scenario (12).
# Pass TPB_GIT_SHA / TPB_GIT_DIRTY: the copy on the GPU machine has no usable .git.
set -u -o pipefail
OUTDIR=${1:?usage: scripts/gpu_smoke_shared.sh OUTDIR [SCENARIO...]}
shift
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T0=$(date +%s)
{ cmake --preset cuda >/dev/null && cmake --build build-cuda -j "$(nproc)" --target tpbench; } >"$OUTDIR/build.log" 2>&1 \
  || { tail -30 "$OUTDIR/build.log"; echo "BUILD FAILED"; exit 1; }
echo "build: $(( $(date +%s) - T0 )) s"
for scenario in "${@:-scenarios/conformance/gpu-engine-tiny-shared.json}"; do
  T0=$(date +%s)
  name=$(basename "$scenario" .json)
  # shellcheck disable=SC2086
  timeout "${SMOKE_TIMEOUT:-300}" build-cuda/suite/tpbench run "$scenario" --results-dir "$OUTDIR/runs" --no-report ${SMOKE_FLAGS:-} \
    >"$OUTDIR/$name.log" 2>&1
  echo "== $scenario: rc=$? $(( $(date +%s) - T0 )) s"
  grep -vE "^\s*$" "$OUTDIR/$name.log" | tail -${SMOKE_TAIL:-12}
done
ps -eo pid,stat,comm | grep -E "mps|tpbench" || echo "no MPS daemon or tpbench process left"
[ -d baselines ] && tar -czf "$OUTDIR/baselines.tgz" baselines 2>/dev/null
tar -czf "$OUTDIR/runs.tgz" -C "$OUTDIR" runs 2>/dev/null
