# Issue 17, findings 1, 4 and 7: config dimensions of 2^62 overflowed the heap in the
# synthetic generator, crashed `logits`, hung `plan`; a negative n_shared_experts passed; a
# routed_scaling_factor of 1e308 made every logit NaN and the run "ok". Now each is refused at
# validation (exit 2, naming the file, the field and tpbench's limit), within seconds, by plan,
# logits and a scenario's overrides alike.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
BIG=4611686018427387904  # 2^62
echo '[[1, 2, 3]]' >"$SCRATCH/ids.json"
# $1: field, $2: value (JSON), $3: what the message must say
hostile() {
  python3 - scenarios/models/tiny-dsv3.json "$SCRATCH/cfg.json" "$1" "$2" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c[sys.argv[3]] = json.loads(sys.argv[4])
json.dump(c, open(sys.argv[2], "w"))
PY
  expect_rc 2 timeout 20 "$TPBENCH" plan --model "$SCRATCH/cfg.json" --tp 1 --gpu H200
  grep -q "cfg.json: $3" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "plan: $1=$2 not refused naming it"; }
  expect_rc 2 timeout 20 "$TPBENCH" logits --model "$SCRATCH/cfg.json" --input-ids "$SCRATCH/ids.json" --out "$SCRATCH/l.safetensors"
  grep -q "$3" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "logits: $1=$2 not refused naming it"; }
}
hostile kv_lora_rank $BIG "kv_lora_rank: expected 0..65536 (tpbench's limit)"
hostile qk_rope_head_dim $BIG "qk_rope_head_dim: expected 0..4096"
hostile qk_nope_head_dim $BIG "qk_nope_head_dim: expected 0..4096"
hostile vocab_size $BIG "vocab_size: expected 0..4194304"
hostile num_hidden_layers $BIG "num_hidden_layers: expected 0..1024"
hostile n_shared_experts -$BIG "n_shared_experts: expected 0..64"
hostile routed_scaling_factor 1e308 "routed_scaling_factor: expected a finite number in (0, 1000]"

# The same through a scenario's overrides: refused by --dry-run, nothing run.
python3 - scenarios/conformance/cpu-engine-observer.json "$SCRATCH/over.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["model"]["overrides"] = {"routed_scaling_factor": 1e308}
json.dump(s, open(sys.argv[2], "w"))
PY
expect_rc 2 timeout 20 "$TPBENCH" run "$SCRATCH/over.json" --dry-run
grep -q "routed_scaling_factor: expected a finite number" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "override not refused"; }

# A number too large for a double in a scenario: the file named, exit 2, no raw exception.
printf '{"schema": 1, "name": "x", "workload": "allreduce", "sweep": {"tp": [1e400]}}' >"$SCRATCH/huge.json"
expect_rc 2 "$TPBENCH" run "$SCRATCH/huge.json" --dry-run
grep -q "huge.json: not valid JSON: the number 1e400 is too large for a double" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "1e400 not named"; }
echo ok
