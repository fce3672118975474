#!/usr/bin/env bash
# tpbench plan: --from-measured applies the serving formula to two log readings; bad flags
# and bad values exit 2 with a message naming the flag. Args: tpbench-binary scratch-dir.
set -uo pipefail
tpbench=$1
scratch=$2
mkdir -p "$scratch"
fail() { echo "FAIL: $*"; exit 1; }

# expect_error STATUS PATTERN ARGS...: runs tpbench plan ARGS, wants STATUS and PATTERN on stderr.
expect_error() {
  local want=$1 pattern=$2
  shift 2
  "$tpbench" plan "$@" > "$scratch/out.txt" 2> "$scratch/err.txt"
  local rc=$?
  [ "$rc" -eq "$want" ] || fail "plan $* exited $rc, expected $want: $(cat "$scratch/err.txt")"
  grep -qF -- "$pattern" "$scratch/err.txt" || fail "plan $*: stderr lacks '$pattern': $(cat "$scratch/err.txt")"
}

expect_error 2 "--quant: expected bf16, fp8, int4 or f32, got 'int5'" --model kimi-k2.5 --tp 8 --gpu H200 --quant int5
expect_error 2 "give exactly one of --gpu NAME or --gpu-mem-gib X" --model kimi-k2.5 --tp 8
expect_error 2 "give exactly one of --gpu NAME or --gpu-mem-gib X" --model kimi-k2.5 --tp 8 --gpu H200 --gpu-mem-gib 90
expect_error 2 "unknown option '--frac'" --model kimi-k2.5 --tp 8 --gpu H200 --frac 0.8
expect_error 2 "--mem-fraction: expected a value in (0, 1], got 1.5" --model kimi-k2.5 --tp 8 --gpu H200 --mem-fraction 1.5
expect_error 2 "--mem-fraction: expected a number, got 'abc'" --model kimi-k2.5 --tp 8 --gpu H200 --mem-fraction abc
expect_error 2 "tp 3 does not divide num_attention_heads 64" --model kimi-k2.5 --tp 3 --gpu H200
expect_error 2 "unknown GPU 'V100'" --model kimi-k2.5 --tp 8 --gpu V100
expect_error 2 "--allreduce" --model kimi-k2.5 --tp 8 --gpu H200 --allreduce gloo
expect_error 2 "--tp N is required" --model kimi-k2.5 --gpu H200
expect_error 2 "neither a path nor a preset" --model no-such-model --tp 8 --gpu H200
expect_error 2 "--overrides: not valid JSON" --model kimi-k2.5 --tp 8 --gpu H200 --overrides '{bad'
expect_error 2 "--from-measured needs --total-gib and --avail-gib" --from-measured --mem-fraction 0.8
expect_error 2 "--from-measured needs --mem-fraction" --from-measured --total-gib 90 --avail-gib 20
expect_error 2 "--tp does not apply to --from-measured" --from-measured --total-gib 90 --avail-gib 20 --mem-fraction 0.8 --tp 8

# --from-measured: total 80, avail 20, fraction 0.85 -> rest 8 GiB -> 122238 tokens of 70272 B.
"$tpbench" plan --from-measured --total-gib 80 --avail-gib 20 --mem-fraction 0.85 --model kimi-k2.5 --json \
  > "$scratch/measured.json" || fail "feasible --from-measured plan did not exit 0"
python3 - "$scratch/measured.json" <<'PY' || exit 1
import json, sys
p = json.load(open(sys.argv[1]))
assert abs(p["rest_gib"] - 8.0) < 1e-9, p
assert p["max_tokens"] == 122238, p
assert p["feasible"] is True
assert abs(p["min_mem_fraction"] - (1 - (20 - 70272 / 2**30) / 80)) < 1e-9, p
PY
# avail 10: rest -2 GiB -> infeasible, exit 1, fraction 1 - (10 - cell)/80 ~ 0.8750 named.
"$tpbench" plan --from-measured --total-gib 80 --avail-gib 10 --mem-fraction 0.85 --model kimi-k2.5 > "$scratch/neg.txt"
rc=$?
[ "$rc" -eq 1 ] || fail "infeasible --from-measured exited $rc, expected 1"
grep -q "rest = -2.00 GiB and no KV token fits; mem_fraction >= 0.8751 gives at least one token." "$scratch/neg.txt" \
  || fail "no sentence: $(cat "$scratch/neg.txt")"

# Fraction sweep: one point per (backend, fraction); the custom buffers cost tokens.
expect_error 2 "--sweep-fractions: expected values in (0, 1], got 1.2" --model kimi-k2.5 --tp 8 --gpu H200 --sweep-fractions 0.8,1.2
expect_error 2 "--sweep-backends needs --sweep-fractions" --model kimi-k2.5 --tp 8 --gpu H200 --sweep-backends nccl
"$tpbench" plan --model kimi-k2.5 --tp 8 --quant int4 --gpu H20-96GB --sweep-fractions 0.8,0.9 \
  --sweep-backends nccl,auto --json > "$scratch/sweep.json" || fail "sweep plan failed"
python3 - "$scratch/sweep.json" <<'PY' || exit 1
import json, sys
pts = json.load(open(sys.argv[1]))["fraction_sweep"]
assert [(p["allreduce"], p["mem_fraction"]) for p in pts] == [("nccl", 0.8), ("nccl", 0.9), ("auto", 0.8), ("auto", 0.9)], pts
for a, b in ((pts[0], pts[2]), (pts[1], pts[3])):
    assert b["comm_bytes_per_rank"] - a["comm_bytes_per_rank"] == 24 * 2**20 + 4096, (a, b)
    assert 0 < b["max_tokens"] < a["max_tokens"], (a, b)
PY

# Tiny preset with overrides works end to end on a small GPU size.
"$tpbench" plan --model tiny-dsv3 --tp 2 --gpu-mem-gib 4 --overrides '{"num_hidden_layers": 2}' --json > "$scratch/tiny.json" \
  || fail "tiny plan failed"
python3 -c "import json,sys; p=json.load(open(sys.argv[1])); assert p['kv_cell_bytes'] == 40*2*2, p['kv_cell_bytes']" "$scratch/tiny.json" || exit 1
echo "ok"
