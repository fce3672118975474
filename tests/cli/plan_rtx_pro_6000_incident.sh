#!/usr/bin/env bash
# Issue 18: Kimi-K2.5 (int4) at TP 8 on 8 x RTX PRO 6000 Blackwell Server Edition (96 GB, PCIe,
# no NVLink) at mem_fraction 0.55 stopped at start-up with "not enough memory". `tpbench plan`
# names the board by an alias, counts the communicator buffers (custom allreduce + NCCL with
# PCIe P2P, NCCL alone with --interconnect pcie-no-p2p), gives each term and the budget, says
# the KV cache does not fit (exit 1) and which fraction would, in GiB with GB in parentheses.
# The incident's deployment ran its IPC allreduce over PCIe (--custom-on-pcie); without that the
# plan follows the rule SGLang, vLLM and tpbench apply to more than two PCIe-only GPUs: custom
# off, NCCL's buffers alone, said in the plan. An unknown GPU and a bad --interconnect exit 2
# naming what is allowed.
source "$(dirname "$0")/common.bash" "$@"

incident=(plan --model kimi-k2.5 --gpu rtx-pro-6000 --tp 8 --quant int4 --mem-fraction 0.55 --custom-on-pcie)

# 1. The incident's command: infeasible, every term and its source in the text.
expect_rc 1 "$TPBENCH" "${incident[@]}"
cp "$SCRATCH/last.out" "$SCRATCH/p2p.txt"
for want in "gpu           RTX-PRO-6000 = NVIDIA RTX PRO 6000 Blackwell Server Edition 96 GB" \
            "nvidia-smi 97887 MiB - 616 MiB driver reserve" "datasheet 96 GB: NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet" \
            "cuda context 1.15 GiB (1.24 GB): ESTIMATE" "interconnect  pcie-p2p (catalog default for RTX-PRO-6000" \
            "allreduce     auto: custom allreduce and NCCL buffers counted" \
            "= gpu total" "- cuda context" "- comm: custom allreduce" "- comm: nccl" "= total (free before weights)" \
            "- weights: routed_experts" "- weights: vision" "= avail (free after weights)" "- slack total*(1-fraction)" \
            "= rest (KV cache budget)" "max tokens         0" "feasible           NO" "Not enough memory: "; do
  grep -qF -- "$want" "$SCRATCH/p2p.txt" || { cat "$SCRATCH/p2p.txt" >&2; fail "'$want' missing from the incident's plan"; }
done
# Units: GiB first, GB (10^9 B) in parentheses; the old headline's bare GB is gone.
grep -qE '^weights +[0-9]+\.[0-9]{2} GiB \([0-9]+\.[0-9]{2} GB\) unsharded, [0-9]+\.[0-9]{2} GiB \([0-9]+\.[0-9]{2} GB\) per rank' \
  "$SCRATCH/p2p.txt" || fail "weights line not in GiB (GB): $(grep '^weights' "$SCRATCH/p2p.txt")"
grep -qE '^per rank +GiB +bytes' "$SCRATCH/p2p.txt" || fail "table not in GiB"
if grep -qE '^model: .* GB ' "$SCRATCH/p2p.txt"; then fail "the old GB headline is still printed"; fi

# 2. The numbers, from the formulas (JSON); aliases give the same plan.
expect_rc 1 "$TPBENCH" "${incident[@]}" --json
cp "$SCRATCH/last.out" "$SCRATCH/p2p.json"
for alias in "RTX PRO 6000" "NVIDIA RTX PRO 6000 Blackwell Server Edition" "Rtx_Pro_6000"; do
  expect_rc 1 "$TPBENCH" plan --model kimi-k2.5 --gpu "$alias" --tp 8 --quant int4 --mem-fraction 0.55 --custom-on-pcie --json
  cmp -s "$SCRATCH/p2p.json" "$SCRATCH/last.out" || fail "--gpu '$alias' plans differently from rtx-pro-6000"
done
expect_rc 1 "$TPBENCH" "${incident[@]}" --interconnect pcie-no-p2p
cp "$SCRATCH/last.out" "$SCRATCH/nop2p.txt"
grep -qF "allreduce     auto asked, nccl planned. The custom allreduce cannot run on pcie-no-p2p: it needs CUDA IPC peer access" \
  "$SCRATCH/nop2p.txt" || { cat "$SCRATCH/nop2p.txt" >&2; fail "pcie-no-p2p plan does not say the custom allreduce cannot run"; }
grep -qE '^  comm: custom allreduce +0\.000 +0  cannot run on pcie-no-p2p' "$SCRATCH/nop2p.txt" \
  || fail "pcie-no-p2p breakdown lacks the zero custom line"
expect_rc 1 "$TPBENCH" "${incident[@]}" --interconnect pcie-no-p2p --json
cp "$SCRATCH/last.out" "$SCRATCH/nop2p.json"
# Not forced: more than two PCIe-only GPUs keep the custom allreduce off; two do not.
unforced=(plan --model kimi-k2.5 --gpu rtx-pro-6000 --quant int4 --mem-fraction 0.55)
expect_rc 1 "$TPBENCH" "${unforced[@]}" --tp 8
grep -qF "allreduce     auto asked, nccl planned. The custom allreduce does not run on pcie-p2p: on more than two GPUs joined only by PCIe" \
  "$SCRATCH/last.out" || { cat "$SCRATCH/last.out" >&2; fail "the unforced TP 8 plan does not say the custom allreduce stays off"; }
grep -qE '^  comm: custom allreduce +0\.000 +0  does not run on pcie-p2p \(more than two PCIe-only GPUs, not forced\)' \
  "$SCRATCH/last.out" || fail "the unforced TP 8 breakdown lacks the zero custom line"
expect_rc 1 "$TPBENCH" "${unforced[@]}" --tp 8 --json
cp "$SCRATCH/last.out" "$SCRATCH/unforced.json"
expect_rc 1 "$TPBENCH" "${unforced[@]}" --tp 2 --json
cp "$SCRATCH/last.out" "$SCRATCH/tp2.json"
python3 - "$SCRATCH/p2p.json" "$SCRATCH/nop2p.json" "$SCRATCH/unforced.json" "$SCRATCH/tp2.json" <<'PY' || fail "plan numbers do not follow the formulas"
import json, sys
p, n, u, two = (json.load(open(f)) for f in sys.argv[1:5])
MiB, GiB = 2**20, 2**30
custom, nccl = 3 * 8 * MiB + 4096, 32 * 10 * MiB
for j in (p, n):
    assert j["gpu"] == "RTX-PRO-6000" and j["mem_fraction"] == 0.55 and j["tp"] == 8, j["gpu"]
    g = j["gpu_spec"]
    assert (g["datasheet_gb"], g["smi_total_mib"], g["reserved_mib"], g["measured"]) == (96, 97887, 616, False), g
    assert "RTX PRO 6000 Blackwell Server Edition" in g["datasheet"] and g["interconnect"] == "pcie-p2p", g
    assert j["gpu_total_bytes"] == (97887 - 616) * MiB, j["gpu_total_bytes"]
    assert j["cuda_context_source"].startswith("ESTIMATE"), j["cuda_context_source"]
    assert j["comm_nccl_bytes_per_rank"] == nccl, j["comm_nccl_bytes_per_rank"]
    assert j["total_bytes"] == j["gpu_total_bytes"] - j["cuda_context_bytes"] - j["comm_bytes_per_rank"]
    assert j["avail_bytes"] == j["total_bytes"] - j["weights_bytes_per_rank"]
    rest = j["avail_gib"] - j["total_gib"] * (1 - 0.55)
    assert abs(j["rest_gib"] - rest) < 1e-9 and rest < 0, (j["rest_gib"], rest)
    assert j["max_tokens"] == 0 and j["feasible"] is False and j["kv_cell_bytes"] == 70272
    f = j["min_mem_fraction"]
    assert 0.55 < f < 1 and abs(j["avail_gib"] - j["total_gib"] * (1 - f) - 70272 / GiB) < 1e-9, f
    assert j["verdict"].startswith("Not enough memory: "), j["verdict"]
    assert 70e9 < j["weights_bytes_per_rank"] < 80e9, j["weights_bytes_per_rank"]
# PCIe with P2P (the catalog's default): both sets of buffers.
assert p["interconnect"] == "pcie-p2p" and p["interconnect_source"].startswith("catalog"), p["interconnect_source"]
assert p["custom_allreduce_can_run"] is True and p["allreduce"] == p["allreduce_planned"] == "auto"
assert p["allreduce_note"] == "" and p["comm_custom_bytes_per_rank"] == custom
# No P2P: NCCL's alone, and the plan says why.
assert n["interconnect"] == "pcie-no-p2p" and n["interconnect_source"] == "as given, --interconnect"
assert n["custom_allreduce_can_run"] is False and n["allreduce"] == "auto" and n["allreduce_planned"] == "nccl"
assert "cannot run on pcie-no-p2p" in n["allreduce_note"] and "peer access" in n["allreduce_note"], n["allreduce_note"]
assert n["comm_custom_bytes_per_rank"] == 0 and n["total_bytes"] - p["total_bytes"] == custom
zero = [t for t in n["breakdown"] if t["term"] == "comm: custom allreduce"]
assert len(zero) == 1 and zero[0]["bytes_per_rank"] == 0 and zero[0]["sign"] == " ", zero
assert p["custom_on_pcie"] is True and n["custom_on_pcie"] is True
# Not forced at TP 8: NCCL's alone, like no P2P; at TP 2 both, as forced at TP 8.
assert u["custom_on_pcie"] is False and u["custom_allreduce_can_run"] is False and u["allreduce_planned"] == "nccl"
assert "more than two GPUs joined only by PCIe" in u["allreduce_note"], u["allreduce_note"]
assert u["comm_custom_bytes_per_rank"] == 0 and u["total_bytes"] == n["total_bytes"]
assert two["custom_allreduce_can_run"] is True and two["comm_custom_bytes_per_rank"] == custom, two["allreduce_note"]
PY

# 3. The fraction the sentence names (rounded up to 4 decimals) starts the server.
f=$(sed -n 's/^Not enough memory: .* mem_fraction >= \(0\.[0-9]*\) gives at least one token\.$/\1/p' "$SCRATCH/p2p.txt")
[[ -n $f ]] || fail "no fraction in the sentence: $(tail -1 "$SCRATCH/p2p.txt")"
expect_rc 0 "$TPBENCH" plan --model kimi-k2.5 --gpu rtx-pro-6000 --tp 8 --quant int4 --mem-fraction "$f" --custom-on-pcie

# 4. Refusals: exit 2, naming what is allowed.
expect_rc 2 "$TPBENCH" plan --model kimi-k2.5 --gpu "RTX PRO 5000" --tp 8
grep -qF "unknown GPU 'RTX PRO 5000'; did you mean 'RTX-PRO-6000'? (known: " "$SCRATCH/last.out" || fail "no unknown-GPU message: $(cat "$SCRATCH/last.out")"
for name in H100-80GB H100-PCIe H100-NVL H200 H20-96GB H20-141GB A100-80GB B200 L40S RTX-PRO-6000; do
  grep -qE "known: .*\b$name\b" "$SCRATCH/last.out" || fail "unknown-GPU message does not list $name: $(cat "$SCRATCH/last.out")"
done
expect_rc 2 "$TPBENCH" "${incident[@]}" --interconnect pcie
grep -qF "tpbench plan: error: --interconnect: expected nvlink, pcie-p2p or pcie-no-p2p, got 'pcie'" "$SCRATCH/last.out" \
  || fail "bad --interconnect message: $(cat "$SCRATCH/last.out")"
expect_rc 2 "$TPBENCH" plan --from-measured --total-gib 90 --avail-gib 20 --mem-fraction 0.8 --interconnect nvlink
grep -qF -- "--interconnect does not apply to --from-measured" "$SCRATCH/last.out" || fail "$(cat "$SCRATCH/last.out")"
expect_rc 2 "$TPBENCH" plan --from-measured --total-gib 90 --avail-gib 20 --mem-fraction 0.8 --custom-on-pcie
grep -qF -- "--custom-on-pcie does not apply to --from-measured" "$SCRATCH/last.out" || fail "$(cat "$SCRATCH/last.out")"
echo ok
