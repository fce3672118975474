# Shared by the scripts that do one device-machine call (sourced, not run): the output folder,
# the repository root as working directory, NCCL's multicast off, a timed `step` printer, and
# the CUDA build of tpbench and the gpu tests (GPU_CALL_TARGETS: other targets), its log in
# $OUT/build.log.
#   source "$(dirname "$0")/gpu_call_common.bash" "$@"   (sets OUT, START, TPB; defines step)
set -u -o pipefail
OUT=${1:?usage: $(basename "$0") OUTDIR}
mkdir -p "$OUT"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export NCCL_NVLS_ENABLE=0
START=$(date +%s)
step() { echo "== $1 ($(( $(date +%s) - START )) s)"; }
step build
read -r -a GPU_CALL_TARGET_LIST <<<"${GPU_CALL_TARGETS:-tpbench tpb_gpu_tests}"
{ cmake --preset cuda >/dev/null && cmake --build build-cuda -j "$(nproc)" --target "${GPU_CALL_TARGET_LIST[@]}"; } >"$OUT/build.log" 2>&1 \
  || { tail -30 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
TPB=build-cuda/suite/tpbench
