#!/usr/bin/env bash
# Issue 20's measurements on one GPU, in one device-machine call:
#   1. the gpu tests of the attention kernels and the engine around them (GPU_TESTS; default
#      MlaPrefill: every prefill variant against the CPU reference, dispatch, determinism; and
#      the GPU engine against the CPU engine, HF transformers and the logits CLI). The scenario
#      steps (5, 6) are left out when they fail;
#   2. tpb_bench attention/: mla_prefill/<variant>/... at 1 x 8K and 4 x 2K, 64 and 32 heads,
#      and mla_decode/<split kernel>/heads:{64,32,8}/... (BENCH_FILTER narrows them; vs_copy_bw: the cache read rate over the copy
#      bandwidth measured in the same process), and bench/sdpa_reference.py (torch SDPA,
#      cuDNN backend) at the prefill shapes (SKIP_SDPA=1 leaves it out, for decode-only filters);
#   3. one table: useful causal TFLOP/s of each prefill variant, each / cuDNN (issue 20's
#      target: >= 0.75), and the decode kernel's share of copy bandwidth (target: >= 0.85);
#   4. NCU=1: Nsight Compute on one launch of the engine's prefill kernel (split P) and of the
#      decode kernels (NCU_DECODE, default the 64-head wgmma one at batch 64 x 8K; speed of
#      light, occupancy, warp states, source counters), and their SASS (ncu.txt, sass.txt.gz);
#   5. SCENARIOS="prefill-1gpu decode-1gpu": each against the stored baselines/h200x1 (the
#      before/after: latency ratios and digest verdicts), then with RECORD=1 recorded anew
#      (--update-baselines; pass TPB_GIT_SHA=<sha> TPB_GIT_DIRTY=0 from a clean commit, the sha
#      written out: `git rev-parse HEAD` on the GPU machine's copy gave an older commit) and
#      compared once more with what was just recorded (each case's latency printed); baselines
#      come back in runs.tgz. PASSES overrides the passes; one named *-nopdl (e.g. before-nopdl)
#      runs with TPB_PROGRAMMATIC_LAUNCH=0, the A of an A/B with programmatic dependent launch.
#   6. PLAIN_SCENARIOS="observer-1gpu": run without baselines (timing's cost on a real decode
#      step, observer_invariant's verdicts).
#   LAYERS=1 (before 5): each layer of a decode step timed inside one engine, x its weight-read
#      time (bench/layer_bench.cpp); STEP_PROFILE="tp:1/batch:1 ...": Nsight Compute on each
#      kernel of one replayed step (durations, DRAM bytes; the tables are printed, the CSVs go
#      into runs.tgz).
# Every step is bounded by what is left of BUDGET_S (560 s, gpu_call_common.bash's `bounded`), so
# that runs.tgz is packed and comes back even when a step runs long.
#   usage: scripts/gpu_issue20.sh OUTDIR
# OUTDIR receives at most 8 files: build.log, ctest.log, attention_bench.json, sdpa.json,
# attention_table.md, ncu.txt, sass.txt.gz, runs.tgz. CTEST_BUDGET_S (default 240) bounds step 1.
# shellcheck disable=SC2034  # read by gpu_call_common.bash
GPU_CALL_TARGETS="tpbench tpb_gpu_tests tpb_bench"
source "$(dirname "$0")/gpu_call_common.bash" "$@"
RUNS=$(mktemp -d /tmp/tpb-issue20-runs.XXXXXX)
BENCH=build-cuda/bench/tpb_bench

step "gpu tests (${GPU_TESTS:=MlaPrefill|GpuEngineVsCpu|GpuHfParity|GpuLogitsCli|GpuEngineTp})"
( cd build-cuda && bounded "${CTEST_BUDGET_S:-240}" ctest -L gpu -R "$GPU_TESTS" --timeout 200 --output-on-failure ) \
  >"$OUT/ctest.log" 2>&1
TESTS_RC=$?
echo "ctest: rc=$TESTS_RC"
grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|Timeout" "$OUT/ctest.log" | head -20

if [ "${SKIP_BENCH:-0}" != 1 ]; then
step "tpb_bench ${BENCH_FILTER:=attention/}"
bench_json 200 "$BENCH_FILTER" "$OUT/attention_bench.json" "$RUNS/bench.log"  # OUT takes 8 files at most

if [ "${SKIP_SDPA:-0}" != 1 ]; then
  step "torch SDPA, cuDNN backend"
  bounded 120 python3 bench/sdpa_reference.py --out "$OUT/sdpa.json" >"$RUNS/sdpa.log" 2>&1
  echo "sdpa_reference.py: rc=$?"
fi
# cuDNN's numbers go into tpb_bench's JSON beside ours (attention/sdpa_cudnn/...), its context
# under context.sdpa_reference: one file holds every number of the table.
python3 - "$OUT/attention_bench.json" "$OUT/sdpa.json" <<'PY'
import json, sys
try:
    bench, sdpa = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
except (OSError, ValueError) as e:
    sys.exit(f"cuDNN's numbers not merged: {e}")
bench.setdefault("context", {})["sdpa_reference"] = sdpa.get("context", {})
for b in sdpa.get("benchmarks", []):
    name = "attention/" + b["name"]
    bench["benchmarks"].append({"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
                                "iterations": sdpa.get("context", {}).get("iters", 0), "real_time": b["us_per_op"],
                                "time_unit": "us", "heads": b["heads"], "batch": b["batch"], "q_len": b["q_len"],
                                "past": b["past"], "flops": b["flops"], "TFLOPs": b["TFLOPs"], "us_per_op": b["us_per_op"],
                                "label": "torch SDPA, cuDNN backend (bench/sdpa_reference.py)"})
json.dump(bench, open(sys.argv[1], "w"), indent=1)
print(f"merged {len(sdpa.get('benchmarks', []))} cuDNN benchmarks into {sys.argv[1]}")
PY

step table
python3 - "$OUT/attention_bench.json" <<'PY' | tee "$OUT/attention_table.md"
import json, re, sys
def load(path):
    try:
        return json.load(open(path))["benchmarks"]
    except (OSError, ValueError, KeyError) as e:
        print(f"({path}: {e})")
        return []
tflops, variants, decode = {}, [], []  # prefill: (heads, batch, q_len) -> {column: TFLOP/s}
sweep = []  # (heads, batch, seq_len, tiles per split, splits, us, read / copy)
for b in load(sys.argv[1]):
    name = b.get("name", "")
    if b.get("error_occurred"):
        continue
    m = re.match(r"attention/mla_prefill/(\w+)/heads:(\d+)/batch:(\d+)/q_len:(\d+)", name)
    if m and "TFLOPs" in b:
        tflops.setdefault(tuple(map(int, m.group(2, 3, 4))), {})[m.group(1)] = b["TFLOPs"]
        if m.group(1) not in variants:
            variants.append(m.group(1))
    m = re.match(r"attention/mla_decode/(\w+)/heads:(\d+)/batch:(\d+)/seq_len:(\d+)", name)
    if m and "vs_copy_bw" in b:
        decode.append((*map(int, m.group(2, 3, 4)), m.group(1), b["us_per_op"], b["GBps"], b["copy_GBps"], b["vs_copy_bw"]))
    m = re.match(r"attention/mla_decode_splits/(\w+)/heads:(\d+)/batch:(\d+)/seq_len:(\d+)/tiles_per_split:(\d+)", name)
    if m and "vs_copy_bw" in b:
        sweep.append((*map(int, m.group(2, 3, 4, 5)), b.get("splits", 0), b["us_per_op"], b["vs_copy_bw"]))
    m = re.match(r"attention/sdpa_cudnn/heads:(\d+)/batch:(\d+)/q_len:(\d+)", name)
    if m and "TFLOPs" in b:
        tflops.setdefault(tuple(map(int, m.groups())), {})["cudnn"] = b["TFLOPs"]
f = lambda x: "-" if x is None else f"{x:.1f}"
ratio = lambda a, b: "-" if a is None or not b else f"{a / b:.2f}"
print("Prefill attention, causal, q/k 192, v 128, bf16: useful causal TFLOP/s (each / cuDNN SDPA)\n")
print("| shape | " + " | ".join(variants) + " | cuDNN SDPA |")
print("| --- |" + " --- |" * (len(variants) + 1))
for (heads, batch, q_len), c in sorted(tflops.items(), key=lambda kv: (-kv[0][0], kv[0][1])):
    cells = [f"{f(c.get(v))} ({ratio(c.get(v), c.get('cudnn'))})" for v in variants]
    print(f"| {heads} heads, {batch} x {q_len} | " + " | ".join(cells) + f" | {f(c.get('cudnn'))} |")
print("\nDecode attention (absorbed MLA, latent cache 576 x bf16 per token): cache read rate vs copy bandwidth\n")
print("| heads | batch x seq_len | split kernel | us | GB/s | copy GB/s | read / copy |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for heads, batch, seq, kernel, us, gbps, copy, share in sorted(decode, key=lambda d: (-d[0], d[1], d[2], d[3])):
    print(f"| {heads} | {batch} x {seq} | {kernel} | {us:.1f} | {gbps:.0f} | {copy:.0f} | {share:.3f} |")
if sweep:
    print("\nDecode attention, split count swept (each split's key range fixed; the plan's choice is above)\n")
    print("| heads | batch x seq_len | tiles per split | splits | us | read / copy |")
    print("| --- | --- | --- | --- | --- | --- |")
    for heads, batch, seq, tiles, splits, us, share in sorted(sweep, key=lambda d: (-d[0], d[1], d[2], d[3])):
        print(f"| {heads} | {batch} x {seq} | {tiles} | {splits:.0f} | {us:.1f} | {share:.3f} |")
PY
fi

if [ "${NCU:-0}" = 1 ]; then
  # NCU_PREFILL: the prefill variants profiled (64 heads, 1 x 8K; "" for none); NCU_DECODE: the
  # decode cases, each "kernel:heads:batch:seq_len": every kernel of one call (split and merge).
  step "Nsight Compute: prefill (${NCU_PREFILL=wgmma_split_p_overlap}, 64 heads, 1 x 8K), decode (${NCU_DECODE:=wgmma:64:64:8192})"
  NCU_SECTIONS=(--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats
                --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
                --section SourceCounters)
  {
    for v in $NCU_PREFILL; do
      bounded 120 ncu --clock-control none --kernel-name regex:mla_prefill_wgmma --launch-skip 1 --launch-count 1 \
        "${NCU_SECTIONS[@]}" "$BENCH" --tpb_ranks=1 \
        --benchmark_filter="attention/mla_prefill/$v/heads:64/batch:1/q_len:8192/"
    done
    for spec in $NCU_DECODE; do
      IFS=: read -r kernel heads batch seq_len <<<"$spec"
      bounded 120 ncu --clock-control none --kernel-name regex:mla_decode --launch-skip 4 --launch-count 2 \
        "${NCU_SECTIONS[@]}" "$BENCH" --tpb_ranks=1 \
        --benchmark_filter="attention/mla_decode/$kernel/heads:$heads/batch:$batch/seq_len:$seq_len/"
    done
  } >"$OUT/ncu.txt" 2>&1
  echo "ncu: rc=$?"; grep -E "^  [a-z_:<>0-9 ]+\(|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|No Eligible" "$OUT/ncu.txt" | head -60
  cuobjdump -sass "$BENCH" 2>/dev/null | awk '/Function : .*(mla_prefill_wgmma|mla_decode)/{p=1} /Function : /{if (!/mla_prefill_wgmma|mla_decode/) p=0} p' \
    | gzip >"$OUT/sass.txt.gz"
fi

# LAYERS=1: the layers of a decode step, each timed inside one engine (bench/layer_bench.cpp),
# LAYER_FILTER (default layer/moe_decode/): the table of each layer's time over its weight-read
# time; layer_bench.json goes into runs.tgz.
# LAYER_PDL="0 1 0 1" runs it once per value with TPB_PROGRAMMATIC_LAUNCH set to it (an A/B).
if [ "${LAYERS:-0}" = 1 ]; then
  n=0
  for pdl in ${LAYER_PDL:-1}; do
    n=$((n + 1))
    step "tpb_bench ${LAYER_FILTER:=layer/moe_decode/}, programmatic launch $pdl ($(left) s left)"
    TPB_PROGRAMMATIC_LAUNCH=$pdl bench_json 300 "$LAYER_FILTER" "$RUNS/layer_bench_$n.json"
    python3 - "$RUNS/layer_bench_$n.json" <<'PY'
import sys
sys.path.insert(0, "scripts")
from bench_rows import rows, short_name
header = ["benchmark", "MoE layer us (x read)", "routed/layer", "dense us (x)", "head us (x)", "step us (x)",
          "plain step us", "events' cost"]
for b in rows(sys.argv[1], "layer benchmarks", header):
    g = lambda k: b.get(k, float('nan'))
    print(f"| {short_name(b)} | {g('moe_layer_us'):.1f} ({g('moe_x_weight_read_time'):.3f}) | {g('routed_reads'):.0f} "
          f"| {g('dense_layer_us'):.1f} ({g('dense_x_weight_read_time'):.3f}) | {g('head_us'):.1f} ({g('head_x_weight_read_time'):.3f}) "
          f"| {g('step_us'):.1f} ({g('step_x_weight_read_time'):.3f}) | {g('step_us_plain'):.1f} | {g('phase_timing_cost'):.4f} |")
PY
  done
fi

# STEP_PROFILE="tp:1/batch:1 tp:2/batch:1": Nsight Compute on every kernel of one replayed
# decode step of that layer benchmark (TPB_BENCH_PROFILE_STEP), no clock or cache control:
# each kernel's duration and DRAM bytes, and the sum of the kernels against the step.
for sel in ${STEP_PROFILE:-}; do
  tag=$(echo "$sel" | tr ':/' '__')
  step "Nsight Compute: one decode step, $sel ($(left) s left)"
  TPB_BENCH_PROFILE_STEP=1 bounded 200 ncu --profile-from-start off --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__block_size \
    --csv --page raw "$BENCH" --tpb_ranks=1 --benchmark_filter="layer/moe_decode/$sel/context:8192/iterations" \
    >"$RUNS/step_profile_$tag.csv" 2>"$RUNS/step_profile_$tag.log"
  echo "ncu step profile: rc=$?"
  python3 - "$RUNS/step_profile_$tag.csv" <<'PY'
import csv, io, re, sys
text = open(sys.argv[1]).read()
start = text.find('"ID"')
if start < 0:
    sys.exit("no ncu rows")
rows = list(csv.DictReader(io.StringIO(text[start:])))
rows = [r for r in rows if r.get("ID", "").isdigit()]
def num(r, k):
    try: return float(r[k].replace(",", ""))
    except (KeyError, ValueError): return 0.0
total_us = total_rd = 0.0
groups = {}
print("| # | kernel | grid x block | us | MB read | GB/s read |")
print("| --- | --- | --- | --- | --- | --- |")
for r in rows:
    us = num(r, "gpu__time_duration.sum") / 1e3  # ns
    rd = num(r, "dram__bytes_read.sum")
    name = re.sub(r"\(.*", "", r.get("Kernel Name", "?"))[:70]
    total_us += us; total_rd += rd
    g = groups.setdefault(name, [0, 0.0, 0.0]); g[0] += 1; g[1] += us; g[2] += rd
    print(f"| {r['ID']} | {name} | {r.get('launch__grid_size','')} x {r.get('launch__block_size','')} | {us:.1f} | {rd/1e6:.2f} | {rd/us/1e3 if us else 0:.0f} |")
print(f"\n{len(rows)} kernels: {total_us:.1f} us of kernel time, {total_rd/1e6:.1f} MB read ({total_rd/total_us/1e3:.0f} GB/s over the kernels)\n")
print("| kernel | launches | us | share | MB read | GB/s |")
print("| --- | --- | --- | --- | --- | --- |")
for name, (n, us, rd) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
    print(f"| {name} | {n} | {us:.1f} | {us/total_us:.3f} | {rd/1e6:.1f} | {rd/us/1e3 if us else 0:.0f} |")
PY
done

if [ -n "${SCENARIOS:-}" ]; then
  if [ "$TESTS_RC" != 0 ]; then
    echo "SCENARIOS not run: the gpu tests failed"
  else
    for name in $SCENARIOS; do
      passes="before"
      [ "${RECORD:-0}" = 1 ] && passes="before record after"
      passes=${PASSES:-$passes}  # e.g. PASSES="record after" when an earlier call ran "before" on the same code
      for pass in $passes; do
        step "$name: $pass ($(left) s left)"
        flags=(--baselines baselines --allow-unlike-baseline)
        [ "$pass" = record ] && flags=(--baselines baselines --update-baselines)
        # A pass named *-nopdl runs without programmatic dependent launch (the A of an A/B).
        pdl=1
        case "$pass" in *-nopdl) pdl=0 ;; esac
        TPB_PROGRAMMATIC_LAUNCH=$pdl bounded 240 "$TPB" run "scenarios/$name.json" --results-dir "$RUNS/$name-$pass" \
          --no-report "${flags[@]}" >"$RUNS/$name-$pass.log" 2>&1
        echo "tpbench run $name ($pass): rc=$?"
        grep -E "^(cases|checks \(|baseline |builds|not like)" "$RUNS/$name-$pass.log" | cut -c1-300
        [ "$pass" != record ] && baseline_verdicts "$RUNS/$name-$pass" --cases
      done
    done
    cp -r baselines/h200x1 "$RUNS/baselines-h200x1"
  fi
fi
# PLAIN_SCENARIOS (e.g. observer-1gpu): run as they are, no baselines; the summary lines and
# each observer_invariant verdict.
for name in ${PLAIN_SCENARIOS:-}; do
  [ "$TESTS_RC" = 0 ] || { echo "$name not run: the gpu tests failed"; continue; }
  step "$name ($(left) s left)"
  bounded 240 "$TPB" run "scenarios/$name.json" --results-dir "$RUNS/$name" --no-report >"$RUNS/$name.log" 2>&1
  echo "tpbench run $name: rc=$?"
  grep -E "^(cases|checks \()" "$RUNS/$name.log"
  observer_verdicts "$RUNS/$name"
done
tar -czf "$OUT/runs.tgz" --exclude='*/logs' --exclude='*/traces' --exclude='*/mps-log' -C "$RUNS" . 2>/dev/null
step done
