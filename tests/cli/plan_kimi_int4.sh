#!/usr/bin/env bash
# tpbench plan for the full Kimi-K2.5 with INT4 experts at TP 8 on a 96 GB-class (H20) and a
# 141 GB-class (H200) GPU: the table and the JSON form carry every key of issue 6, the numbers
# chain (total - weights = avail, avail - slack = rest, floor(rest / cell) = max_tokens), and
# the exit status follows feasibility. Args: tpbench-binary scratch-dir.
set -euo pipefail
tpbench=$1
scratch=$2
mkdir -p "$scratch"

for gpu in H20-96GB H200; do
  "$tpbench" plan --model kimi-k2.5 --tp 8 --quant int4 --gpu "$gpu" --mem-fraction 0.85 \
    --allreduce auto > "$scratch/$gpu.txt"
  for want in "gpu total" "cuda context" "comm: custom allreduce" "comm: nccl" "total (free before weights)" \
              "weights: routed_experts" "avail (free after weights)" "cuda-graph pool" "activation peak" \
              "rest (KV cache budget)" "max tokens" "feasible           yes" "Feasible:"; do
    grep -qF "$want" "$scratch/$gpu.txt" || { echo "FAIL: '$want' missing from the $gpu table"; cat "$scratch/$gpu.txt"; exit 1; }
  done
  "$tpbench" plan --model kimi-k2.5 --tp 8 --quant int4 --gpu "$gpu" --mem-fraction 0.85 \
    --allreduce auto --json > "$scratch/$gpu.json"
done

python3 - "$scratch" <<'PY'
import json, math, sys
d = sys.argv[1]
plans = {g: json.load(open(f"{d}/{g}.json")) for g in ("H20-96GB", "H200")}
keys = ["weights_bytes_per_rank", "comm_bytes_per_rank", "kv_cell_bytes", "total_gib", "avail_gib",
        "rest_gib", "max_tokens", "feasible", "min_mem_fraction", "breakdown"]
for g, p in plans.items():
    for k in keys:
        assert k in p, f"{g}: key {k} missing"
    assert p["kv_cell_bytes"] == 70272, p["kv_cell_bytes"]
    GiB = 2**30
    assert abs(p["avail_gib"] - (p["total_gib"] - p["weights_bytes_per_rank"] / GiB)) < 1e-9, g
    rest = p["avail_gib"] - p["total_gib"] * (1 - 0.85)
    assert abs(p["rest_gib"] - rest) < 1e-9, (g, p["rest_gib"], rest)
    assert p["max_tokens"] == math.floor(rest * GiB / 70272), (g, p["max_tokens"])
    assert p["feasible"] is True, g
    # min_mem_fraction solves avail - total (1 - f) = one cell.
    f = p["min_mem_fraction"]
    assert abs(p["avail_gib"] - p["total_gib"] * (1 - f) - 70272 / GiB) < 1e-9, (g, f)
    # INT4 Kimi at TP 8: about 77 GB of weights per rank (594 GB text model / 8 + replicated + vision).
    assert 70e9 < p["weights_bytes_per_rank"] < 80e9, p["weights_bytes_per_rank"]
    terms = [t["term"] for t in p["breakdown"]]
    assert "weights: routed_experts" in terms and "rest (KV cache budget)" in terms, terms
# Same weights on both boards; the bigger board holds more tokens.
assert plans["H20-96GB"]["weights_bytes_per_rank"] == plans["H200"]["weights_bytes_per_rank"]
assert plans["H200"]["max_tokens"] > plans["H20-96GB"]["max_tokens"] > 0
print("H20-96GB max_tokens", plans["H20-96GB"]["max_tokens"], "H200 max_tokens", plans["H200"]["max_tokens"])
PY

# Too small a fraction on the 96 GB board: infeasible, exit 1, one sentence with both fractions.
set +e
"$tpbench" plan --model kimi-k2.5 --tp 8 --quant int4 --gpu H20-96GB --mem-fraction 0.70 \
  --tokens 200000 --allreduce auto > "$scratch/infeasible.txt"
rc=$?
set -e
[ "$rc" -eq 1 ] || { echo "FAIL: infeasible plan exited $rc, expected 1"; exit 1; }
grep -q "^Not enough memory: .* mem_fraction >= 0\.[0-9]* gives at least one token and >= 0\.[0-9]* gives the requested 200000\.$" \
  "$scratch/infeasible.txt" || { echo "FAIL: no one-sentence reason"; cat "$scratch/infeasible.txt"; exit 1; }
grep -q "feasible           NO" "$scratch/infeasible.txt"

# The fraction the sentence names (rounded up to 4 decimals) works.
f=$(sed -n 's/^Not enough memory: .* mem_fraction >= \(0\.[0-9]*\) gives at least one token.*/\1/p' "$scratch/infeasible.txt")
"$tpbench" plan --model kimi-k2.5 --tp 8 --quant int4 --gpu H20-96GB --mem-fraction "$f" --allreduce auto > /dev/null \
  || { echo "FAIL: the suggested mem_fraction $f is not feasible"; exit 1; }
echo "ok"
