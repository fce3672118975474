#!/usr/bin/env bash
# Issue 21 on one machine of N >= 2 GPUs, in one device-machine call (10 minutes):
#   1. tpbench's allreduce against nccl-tests, side by side: nccl-tests' all_reduce_perf
#      (-b 8K -e 256M -f 2 -g TP -d bfloat16 -G 1) and tpbench's allreduce-sweep scenario at
#      the same TP with CUDA-graph replay (nccl, custom-oneshot, custom-twoshot, auto), then
#      the table per size (scripts/allreduce_table.py --nccl-tests): nccl-tests time and
#      busbw, tpbench's four backends, tpbench nccl / nccl-tests flagged beyond 10 %.
#      TP: the largest of 2, 4, 8 that the GPUs hold.
#   2. Exclusive against shared placement: the Kimi-K2.5 shared conformance scenario
#      (scenarios/conformance/gpu-engine-shared.json) at TP 2 (and 4, 8 where the GPUs hold
#      them) run with --placement exclusive on all GPUs, and with --placement shared on one
#      GPU (CUDA_VISIBLE_DEVICES=0: ranks packed onto it; on two GPUs a shared TP 2 would put
#      one rank per GPU, as exclusive does), then `tpbench compare --placements`: digests
#      equal at TP 2, within the numerics policy above; step times per backend and custom vs
#      NCCL per placement.
#   usage: scripts/gpu_issue21.sh OUTDIR
# nccl-tests: its source is NOT part of this repository and is never committed to it. The
# device machine receives only the repository checkout, so the script builds nccl-tests from
# NCCL_TESTS_DIR (default .peers/nccl-tests in the repository root). Put a copy of the peer
# source there, keep it out of git, and carry it with the call:
#   mkdir -p .peers && cp -r /path/to/peers/nccl-tests .peers/    (the source only: no build/)
#   echo /.peers/ >> "$(git rev-parse --git-path info/exclude)"
#   run(command="TPB_GIT_SHA=<full sha of HEAD, written out: the copy there has no .git>
#                TPB_GIT_DIRTY=0 scripts/gpu_issue21.sh $OUT",
#       carry=[".peers/nccl-tests"], kind="nvidia-h200-x2", timeout_s=600)
# It is built with `make MPI=0 CUDA_HOME=$CUDA_HOME NCCL_HOME=$NCCL_HOME -j16` (defaults:
# /usr/local/cuda, and /usr or wherever nccl.h is: the toolkit, the Python wheel) for sm_90
# only (NVCC_GENCODE, which nccl-tests' common.mk asks to narrow; its default set of
# architectures takes minutes), into NCCL_TESTS_DIR/build, in the background while tpbench
# builds (cmake --preset cuda, target tpbench only).
# Environment: ISSUE21_TPS="2 4" chooses the TPs of step 2 (default: 2, 4, 8 up to the GPU
# count); ISSUE21_SKIP_ALLREDUCE=1 / ISSUE21_SKIP_PLACEMENT=1 leave a step out;
# ISSUE21_BASELINES=1 also records the exclusive runs' baselines (baselines/h200x<N>/, packed
# into baselines.tgz; needs TPB_GIT_SHA and TPB_GIT_DIRTY=0, as --update-baselines refuses a
# dirty build); BUDGET_S (default 560) is the time the steps may take in all: each run gets a
# share of what is left, and a run cut short (SIGTERM, then SIGKILL 20 s later: the case in
# flight is lost) keeps the records it wrote, which the tables still read.
# OUTDIR receives (at most 8 files): build.log, nccl_tests.txt, allreduce_vs_nccl_tests.md and
# .json, placements.txt and .json, runs.tgz (the run folders, without logs and traces) and
# baselines.tgz when recorded.
set -u -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NT=${NCCL_TESTS_DIR:-$ROOT/.peers/nccl-tests}
mkdir -p "${1:?usage: scripts/gpu_issue21.sh OUTDIR}"
NT_LOG=$(mktemp /tmp/nccl-tests-build.XXXXXX.log)
if [ -z "${NCCL_HOME:-}" ]; then
  # Where NCCL's header is: the system, the CUDA toolkit, or the image's Python wheel (as
  # scripts/gpu_run.sh looks for it).
  NCCL_HOME=/usr
  [ -f /usr/include/nccl.h ] || { [ -f /usr/local/cuda/include/nccl.h ] && NCCL_HOME=/usr/local/cuda; }
  if [ ! -f "$NCCL_HOME/include/nccl.h" ]; then
    NCCL_PY=$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "nccl"))' 2>/dev/null)
    [ -n "$NCCL_PY" ] && [ -f "$NCCL_PY/include/nccl.h" ] && NCCL_HOME=$NCCL_PY
  fi
fi
# nccl-tests links -L$NCCL_HOME/lib; the toolkit and distributions keep it in lib64 or the
# multiarch folder, and the wheel only as libnccl.so.2 (no libnccl.so for -lnccl).
NCCL_LIBDIRS="$NCCL_HOME/lib:$NCCL_HOME/lib64:/usr/lib/x86_64-linux-gnu"
if [ ! -e "$NCCL_HOME/lib/libnccl.so" ] && [ -e "$NCCL_HOME/lib/libnccl.so.2" ]; then
  NCCL_LINK=$(mktemp -d /tmp/nccl-link.XXXXXX)
  ln -s "$NCCL_HOME/lib/libnccl.so.2" "$NCCL_LINK/libnccl.so"
  NCCL_LIBDIRS="$NCCL_LINK:$NCCL_LIBDIRS"
fi
export LIBRARY_PATH="$NCCL_LIBDIRS:${LIBRARY_PATH:-}" LD_LIBRARY_PATH="$NCCL_LIBDIRS:${LD_LIBRARY_PATH:-}"
if [ "${ISSUE21_SKIP_ALLREDUCE:-0}" != 1 ]; then
  if [ -f "$NT/Makefile" ]; then
    echo "nccl-tests from $NT, NCCL_HOME=$NCCL_HOME"
    NVCC_GENCODE=${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90} \
      make -C "$NT" MPI=0 CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}" NCCL_HOME="$NCCL_HOME" -j16 >"$NT_LOG" 2>&1 &
    NT_PID=$!
  else
    echo "no nccl-tests source at $NT (set NCCL_TESTS_DIR, or carry .peers/nccl-tests): step 1 is skipped"
    ISSUE21_SKIP_ALLREDUCE=1
  fi
fi
# shellcheck disable=SC2034  # read by gpu_call_common.bash
GPU_CALL_TARGETS=tpbench
source "$ROOT/scripts/gpu_call_common.bash" "$@"
share() { local s=$(( $(left) / $1 )); [ "$s" -ge 30 ] || s=30; echo "$s"; }  # seconds, at least 30
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
HW=h200x$NGPU
echo "$NGPU GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | xargs)"
[ "$NGPU" -ge 2 ] || echo "fewer than 2 GPUs: exclusive TP 2 cannot run here (its cases are recorded skipped)"
TPS_UP_TO_NGPU=""
for tp in 2 4 8; do [ "$tp" -le "$NGPU" ] && TPS_UP_TO_NGPU="$TPS_UP_TO_NGPU $tp"; done
RUNS=$(mktemp -d /tmp/tpb-issue21-runs.XXXXXX)

# ---- 1. allreduce against nccl-tests --------------------------------------------------------
if [ "${ISSUE21_SKIP_ALLREDUCE:-0}" != 1 ]; then
  TP=$(echo "$TPS_UP_TO_NGPU" | awk '{print $NF}')
  step "nccl-tests build"
  wait "$NT_PID"; rc=$?
  cp "$NT_LOG" "$OUT/build.log.nccl-tests" 2>/dev/null
  echo "nccl-tests build: rc=$rc"
  [ "$rc" = 0 ] || tail -20 "$NT_LOG"
  if [ -n "$TP" ] && [ -x "$NT/build/all_reduce_perf" ]; then
    step "nccl-tests all_reduce_perf, $TP GPUs"
    timeout -k 10 120 "$NT/build/all_reduce_perf" -b 8K -e 256M -f 2 -g "$TP" -d bfloat16 -G 1 >"$OUT/nccl_tests.txt" 2>&1
    echo "all_reduce_perf: rc=$?"
    grep -E "^#  Rank|Avg bus bandwidth|Out of bounds" "$OUT/nccl_tests.txt"
    step "tpbench allreduce-sweep, TP $TP, graph replay"
    timeout -k 20 "$(share 3)" "$TPB" run scenarios/allreduce-sweep.json --filter "tp=$TP" --filter cuda_graph=true \
      --results-dir "$RUNS/allreduce" --no-report >"$RUNS/allreduce.log" 2>&1
    echo "tpbench run allreduce-sweep: rc=$?"; grep -E "^(cases|checks \(|nothing ran)" "$RUNS/allreduce.log"
    python3 scripts/allreduce_table.py --nccl-tests "$OUT/nccl_tests.txt" --results "$RUNS"/allreduce/*/results.jsonl \
      --markdown "$OUT/allreduce_vs_nccl_tests.md" --json "$OUT/allreduce_vs_nccl_tests.json"
    echo "allreduce_table: rc=$?"
  else
    echo "step 1 not run: no TP of 2, 4, 8 fits $NGPU GPU(s), or all_reduce_perf was not built"
  fi
fi
# A merged log keeps OUTDIR within its file count.
[ -f "$OUT/build.log.nccl-tests" ] && { echo "==== nccl-tests build"; cat "$OUT/build.log.nccl-tests"; } >>"$OUT/build.log" \
  && rm -f "$OUT/build.log.nccl-tests"

# ---- 2. exclusive against shared placement --------------------------------------------------
if [ "${ISSUE21_SKIP_PLACEMENT:-0}" != 1 ]; then
  SCENARIO=scenarios/conformance/gpu-engine-shared.json
  FILTERS=()
  for tp in ${ISSUE21_TPS:-$TPS_UP_TO_NGPU}; do FILTERS+=(--filter "tp=$tp"); done
  [ ${#FILTERS[@]} -gt 0 ] || FILTERS=(--filter tp=2)
  BASE=()
  if [ "${ISSUE21_BASELINES:-0}" = 1 ]; then
    BASE=(--baselines baselines --update-baselines)
  fi
  step "$SCENARIO exclusive, ${FILTERS[*]}, $(left) s left"
  timeout -k 20 "$(share 2)" "$TPB" run "$SCENARIO" --placement exclusive "${FILTERS[@]}" "${BASE[@]}" \
    --results-dir "$RUNS/exclusive" --no-report >"$RUNS/exclusive.log" 2>&1
  echo "tpbench run exclusive: rc=$?"; grep -E "^(cases|checks \(|nothing ran|baseline)" "$RUNS/exclusive.log"
  step "$SCENARIO shared on GPU 0, ${FILTERS[*]}, $(left) s left"
  CUDA_VISIBLE_DEVICES=0 timeout -k 20 "$(( $(share 1) - 20 ))" "$TPB" run "$SCENARIO" --placement shared "${FILTERS[@]}" \
    --results-dir "$RUNS/shared" --no-report >"$RUNS/shared.log" 2>&1
  echo "tpbench run shared: rc=$?"; grep -E "^(cases|checks \(|nothing ran|mps)" "$RUNS/shared.log"
  step "compare --placements"
  EXCL=("$RUNS"/exclusive/*/)
  SHRD=("$RUNS"/shared/*/)
  if [ -d "${EXCL[0]}" ] && [ -d "${SHRD[0]}" ]; then
    "$TPB" compare --placements "${EXCL[0]}" "${SHRD[0]}" >"$OUT/placements.txt" 2>&1
    echo "compare --placements: rc=$? (0 all equal, 1 a mismatch, 2 nothing comparable)"
    "$TPB" compare --placements "${EXCL[0]}" "${SHRD[0]}" --json >"$OUT/placements.json" 2>/dev/null
    grep -vE " equal$" "$OUT/placements.txt" | cut -c1-250 | tail -60
  else
    echo "compare --placements not run: a run left no folder"
  fi
  [ "${ISSUE21_BASELINES:-0}" = 1 ] && tar -czf "$OUT/baselines.tgz" "baselines/$HW" 2>/dev/null
fi
[ -f "$OUT/allreduce_vs_nccl_tests.md" ] && cat "$OUT/allreduce_vs_nccl_tests.md"
tar -czf "$OUT/runs.tgz" --exclude='*/logs' --exclude='*/traces' --exclude='*/mps-log' -C "$RUNS" . 2>/dev/null
step finished
