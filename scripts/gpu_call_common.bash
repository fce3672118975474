# Shared by the scripts that do one device-machine call (sourced, not run): the output folder,
# the repository root as working directory, NCCL's multicast off, a timed `step` printer, and
# the CUDA build of tpbench and the gpu tests (GPU_CALL_TARGETS: other targets), its log in
# $OUT/build.log.
#   source "$(dirname "$0")/gpu_call_common.bash" "$@"   (sets OUT, START, TPB; defines step,
#   left, bounded, baseline_verdicts and observer_verdicts)
set -u -o pipefail
OUT=${1:?usage: $(basename "$0") OUTDIR}
mkdir -p "$OUT"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export NCCL_NVLS_ENABLE=0
START=$(date +%s)
step() { echo "== $1 ($(( $(date +%s) - START )) s)"; }
# Seconds left of the call's budget (BUDGET_S, default 560: the device tool stops a command at
# 600 s and what the script packs at its end must still come back).
left() { echo $(( ${BUDGET_S:-560} - ($(date +%s) - START) )); }
# bounded SECONDS CMD...: CMD for at most SECONDS and never past the budget less 30 s (SIGTERM,
# then SIGKILL 15 s later: a tpbench run finishes its case in flight on the first signal);
# exit 124 without running it when less than 30 s would be left for it.
bounded() {
  local want=$1 room; shift
  room=$(( $(left) - 30 ))
  [ "$room" -lt "$want" ] && want=$room
  [ "$want" -ge 30 ] || { echo "left out, the budget is spent: $*"; return 124; }
  timeout -k 15 "$want" "$@"
}
# The GPU's clocks, power limit and temperature on one line, at the start and the end of the
# call: the H200s lent from one call to the next ran the same step up to 2.5 % apart (10 % for
# one layer) at the same copy bandwidth, and this is what tells such machines apart. Never fails.
gpu_clocks() {
  echo "gpu clocks ($1): $(nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu \
    --format=csv,noheader 2>/dev/null || echo unavailable)"
}
# A warm machine may hold ranks of an earlier call whose ctest a time bound killed (forked
# test ranks, a kernel that holds SMs): the next test then meets "device busy". End them and
# any MPS daemon they used. By process name, never by command line: a pattern matched against
# command lines also matches the shell that started this script with such a word in its
# arguments (it killed the call twice).
for name in tpb_gpu_tests tpb_bench tpbench; do pkill -9 -x "$name" 2>/dev/null; done
for pipe in /tmp/tpb-mps-* /tmp/tpb-bench-mps; do
  [ -d "$pipe" ] && echo quit | CUDA_MPS_PIPE_DIRECTORY=$pipe timeout 5 nvidia-cuda-mps-control >/dev/null 2>&1
done
gpu_clocks start
trap 'gpu_clocks end' EXIT
step build
read -r -a GPU_CALL_TARGET_LIST <<<"${GPU_CALL_TARGETS:-tpbench tpb_gpu_tests}"
# GPU_ARCHS (default 90a, the H100/H200 lent: the stored h200x1 baselines were built so, and one
# architecture builds in a third of the time): the architectures of this call's build; "" keeps
# the cuda preset's multi-architecture list.
arch_args=()
[ -n "${GPU_ARCHS-90a}" ] && arch_args=(-DCMAKE_CUDA_ARCHITECTURES="${GPU_ARCHS-90a}")
{ cmake --preset cuda "${arch_args[@]}" >/dev/null && cmake --build build-cuda -j "$(nproc)" --target "${GPU_CALL_TARGET_LIST[@]}"; } >"$OUT/build.log" 2>&1 \
  || { tail -30 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
TPB=build-cuda/suite/tpbench

# bench_json SECONDS FILTER JSON [LOG]: tpb_bench ($BENCH, default this build's) on one rank over
# the benchmarks FILTER selects, bounded, its JSON into JSON and its output into LOG (default
# JSON's .log beside it); prints "tpb_bench FILTER: rc=N" and returns N.
bench_json() {
  local seconds=$1 filter=$2 json=$3 log=${4:-${3%.json}.log} rc
  bounded "$seconds" "${BENCH:-build-cuda/bench/tpb_bench}" --tpb_ranks=1 --benchmark_filter="$filter" \
    --benchmark_out="$json" --benchmark_out_format=json >"$log" 2>&1
  rc=$?
  echo "tpb_bench $filter: rc=$rc"
  return "$rc"
}

# $1 a --results-dir of one `tpbench run --baselines`: the digest verdicts counted (those not ok
# named) and the latency ratios' range; with $2 = --cases, each case's latency against the
# stored baseline as well (new, stored, ratio, verdict).
baseline_verdicts() {
  python3 - "$1" "${2:-}" <<'PY'
import collections, glob, json, sys
counts, lat = collections.Counter(), []
found = glob.glob(sys.argv[1] + "/*/results.jsonl")
if not found:
    sys.exit(f"  no results.jsonl under {sys.argv[1]}")
for line in open(found[0]):
    r = json.loads(line)
    for metric, v in (r.get("baseline") or {}).items():
        if metric.startswith("digest."):
            counts[v.get("verdict")] += 1
            if v.get("verdict") != "ok":
                print("  ", r["label"], metric, v.get("verdict"), v.get("detail", ""))
        elif metric == "latency_us" and v.get("ratio"):
            lat.append(v["ratio"])
            if sys.argv[2] == "--cases":
                print(f"   {r['label']}: latency {v.get('new'):.1f} vs stored {v.get('old'):.1f} us, "
                      f"ratio {v['ratio']:.3f} {v.get('verdict')}")
print("  digest verdicts:", dict(counts), "| latency ratios new/stored: min %.3f max %.3f over %d" %
      (min(lat), max(lat), len(lat)) if lat else "")
PY
}

# $1 a --results-dir of one `tpbench run`: its observer_invariant verdicts, one line per group,
# "<status> <detail>".
observer_verdicts() {
  python3 - "$1" <<'PY'
import glob, json, sys
found = glob.glob(sys.argv[1] + "/*/run.json")
if not found:
    sys.exit(f"  no run.json under {sys.argv[1]}")
run = json.load(open(found[0]))
for g in run["summary"]["checks"].get("observer_invariant", []):
    print(" ", g["status"], g["detail"])
PY
}
