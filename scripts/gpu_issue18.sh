#!/usr/bin/env bash
# Issue 18's GPU parts on one GPU machine, in one device call (at most 8 files in OUTDIR):
#   1. (GEN_HF=1) new HF parity data: tests/hf_parity/make_hf_parity.py --only $GEN_HF_MODELS
#      with the machine's torch and transformers, packed as hf.tgz (commit it under tests/data/hf);
#   2. the gpu tests (GPU_TESTS_REGEX / GPU_TESTS_EXCLUDE narrow them);
#   3. `tpbench` with no arguments from an empty folder (the main job: quickstart-gpu), its
#      terminal output and run folder (report included) packed as main.tgz;
#   4. `tpbench logits --device cuda` at TP 1/2/4 (shared placement) on every model of
#      tests/data/hf, each compared with HF's reference logits (rel-L2, worst |diff|) and with
#      the CPU reference engine's logits from the same binary.
# SKIP_TESTS=1 / SKIP_MAIN=1 / SKIP_LOGITS=1 leave a part out.
#   usage: scripts/gpu_issue18.sh OUTDIR
set -u -o pipefail
OUT0=${1:?usage: $(basename "$0") OUTDIR}
mkdir -p "$OUT0"
if [ "${GEN_HF:-0}" = 1 ]; then
  T0=$(date +%s)
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
  # shellcheck disable=SC2086
  python3 "$(dirname "$0")/../tests/hf_parity/make_hf_parity.py" --out "$OUT0/hf" --only ${GEN_HF_MODELS:-dsv3-odd-widths-bf16} \
    >"$OUT0/hf.log" 2>&1
  echo "== make_hf_parity: rc=$? $(( $(date +%s) - T0 )) s"; tail -6 "$OUT0/hf.log"
  tar -czf "$OUT0/hf.tgz" -C "$OUT0" hf && rm -rf "$OUT0/hf"
fi
source "$(dirname "$0")/gpu_call_common.bash" "$@"
ROOT=$PWD

if [ "${SKIP_TESTS:-0}" != 1 ]; then
  step "gpu tests (${GPU_TESTS_REGEX:=.}, excluding ${GPU_TESTS_EXCLUDE:=Repeated1000TimesFreshInputs/(nccl|auto)_tp[48]})"
  ( cd build-cuda && timeout "${CTEST_BUDGET_S:-240}" ctest -L gpu -R "$GPU_TESTS_REGEX" -E "$GPU_TESTS_EXCLUDE" \
      --timeout 200 --output-on-failure ) >"$OUT/ctest.log" 2>&1
  echo "ctest: rc=$?"
  grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|Timeout|Failed  " "$OUT/ctest.log" | head -30
fi

if [ "${SKIP_MAIN:-0}" != 1 ]; then
  step "tpbench (no arguments) from an empty folder"
  MAIN=$(mktemp -d /tmp/tpb-main.XXXXXX)
  ( cd "$MAIN" && timeout "${MAIN_BUDGET_S:-200}" "$ROOT/$TPB" ) >"$MAIN/terminal.txt" 2>&1
  echo "tpbench: rc=$?"
  tail -40 "$MAIN/terminal.txt"
  tar -czf "$OUT/main.tgz" --exclude='*/logs' --exclude='*/traces' --exclude='*/mps-log' -C "$MAIN" . 2>/dev/null
fi

if [ "${SKIP_LOGITS:-0}" != 1 ]; then
  step "tpbench logits --device cuda against HF (and the CPU engine)"
  LOG=$(mktemp -d /tmp/tpb-logits.XXXXXX)
  for dir in tests/data/hf/*/; do
    model=$(basename "$dir")
    [ -f "$dir/reference_logits.safetensors" ] || continue
    timeout 120 "$TPB" logits --model "$dir" --input-ids "$dir/input_ids.json" --out "$LOG/$model-cpu.safetensors" \
      --tp 2 --prefill 6 >>"$LOG/logits.log" 2>&1 || echo "$model cpu: rc=$?"
    for tp in 1 2 4; do
      for prefill in 0 6; do
        timeout 120 "$TPB" logits --device cuda --model "$dir" --input-ids "$dir/input_ids.json" --tp "$tp" \
          --prefill "$prefill" --out "$LOG/$model-tp$tp-p$prefill.safetensors" >>"$LOG/logits.log" 2>&1 \
          || { echo "$model tp $tp prefill $prefill: rc=$?"; tail -3 "$LOG/logits.log"; }
      done
    done
  done
  python3 - "$LOG" tests/data/hf <<'PY' | tee "$OUT/logits_parity.txt"
import glob, json, os, struct, sys
import numpy as np
def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        t = head["logits"]
        f.seek(8 + n + t["data_offsets"][0])
        return np.frombuffer(f.read(t["data_offsets"][1] - t["data_offsets"][0]), dtype=np.float32).reshape(t["shape"])
log, data = sys.argv[1], sys.argv[2]
print(f"{'model':24} {'engine':14} {'rel-L2 vs HF':>13} {'max |diff|':>11} {'argmax = HF':>12}")
for ref_path in sorted(glob.glob(f"{data}/*/reference_logits.safetensors")):
    model = os.path.basename(os.path.dirname(ref_path))
    ref = load(ref_path)
    for path in sorted(glob.glob(f"{log}/{model}-*.safetensors")):
        got = load(path)
        rel = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
        agree = float((got.argmax(-1) == ref.argmax(-1)).mean())
        tag = os.path.basename(path)[len(model) + 1:-len(".safetensors")]
        print(f"{model:24} {tag:14} {rel:13.3e} {float(np.abs(got - ref).max()):11.3e} {agree:12.3f}")
PY
  tar -czf "$OUT/logits.tgz" -C "$LOG" . 2>/dev/null
fi
ls /dev/shm | grep -c tpb || true
step done
