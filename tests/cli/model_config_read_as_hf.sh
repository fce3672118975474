# Issue 37, finding 8: a config.json is read as HF reads it. A field it leaves out takes HF's
# DeepseekV3Config default (a config without n_routed_experts was read as a dense model and
# took num_experts_per_tok 2000 beside it; HF builds 256 experts), a null is refused where
# HF's modelling code has no value for it, the cross-field rules hold against the defaults,
# and model_type / architectures must name a DeepSeek-V3, Kimi-K2 or Kimi-K2.5 model (a
# `llama` config was read as DeepSeek's fields). Each refusal is exit 2 naming the file, the
# JSON path and what was expected, from plan and logits alike; every preset and test
# checkpoint's config still loads.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
echo '[[1, 2, 3]]' >"$SCRATCH/ids.json"

# edit NAME PYTHON: $SCRATCH/NAME.json is tiny-dsv3 (Kimi-K2.5's nested form where NAME
# starts with k25) after the statement, which edits `c` (its text model: `t`).
edit() {
  python3 - "$SCRATCH/$1.json" "$2" <<'PY'
import json, os, sys
path, statement = sys.argv[1], sys.argv[2]
k25 = os.path.basename(path).startswith("k25")
c = json.load(open("scenarios/models/kimi-k2.5.json" if k25 else "scenarios/models/tiny-dsv3.json"))
t = c.get("text_config", c)
exec(statement)
json.dump(c, open(path, "w"))
PY
}

# refused NAME WHAT: plan and logits both exit 2, naming the file and WHAT.
refused() {
  local cfg="$SCRATCH/$1.json"
  expect_rc 2 "$TPBENCH" plan --model "$cfg" --tp 1 --gpu H200
  grep -qF "$cfg: $2" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "plan: $1 not refused with: $2"; }
  [[ $(wc -l <"$SCRATCH/last.out") -eq 1 ]] || { cat "$SCRATCH/last.out"; fail "plan: $1: more than one line"; }
  expect_rc 2 "$TPBENCH" logits --model "$cfg" --input-ids "$SCRATCH/ids.json" --out "$SCRATCH/l.safetensors"
  grep -qF "$cfg: $2" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "logits: $1 not refused with: $2"; }
  [[ ! -e "$SCRATCH/l.safetensors" ]] || fail "logits: $1 wrote logits"
}

# plan_json NAME: the plan of $SCRATCH/NAME.json at TP 1 on an H200, as JSON.
plan_json() {
  expect_rc 0 "$TPBENCH" plan --model "$SCRATCH/$1.json" --tp 1 --gpu H200 --json
  cp "$SCRATCH/last.out" "$SCRATCH/$1.plan.json"
}

# weights NAME: parameters and weight bytes of its plan.
weights() {
  python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); print(p["parameters_global"], p["weights_bytes_global"])' \
    "$SCRATCH/$1.plan.json"
}

# The finding as it was reported, then the default alone: the same model as 256 written out.
edit no-experts 'del c["n_routed_experts"]; c["num_experts_per_tok"] = 2000'
refused no-experts "num_experts_per_tok: expected <= n_routed_experts = 256 (HF's default: the config leaves n_routed_experts out), got 2000"
edit default-experts 'del c["n_routed_experts"]'
edit written-experts 'c["n_routed_experts"] = 256'
plan_json default-experts
plan_json written-experts
[[ $(weights default-experts) == "$(weights written-experts)" ]] ||
  fail "a config without n_routed_experts is not planned as HF's 256 experts: $(weights default-experts) vs $(weights written-experts)"
edit dense 'c["n_routed_experts"] = None'  # None: dense layers, as DeepSeek's modelling code builds them
plan_json dense
read -r dense_parameters _ < <(weights dense)
read -r moe_parameters _ < <(weights default-experts)
((dense_parameters * 10 < moe_parameters)) || fail "n_routed_experts null is not dense: $dense_parameters vs $moe_parameters parameters"

# Cross-field rules, against HF's n_group 8 and topk_group 4 where the config leaves them out.
edit groups 'del c["n_group"]; del c["topk_group"]; c["n_routed_experts"] = 12'
refused groups "n_group: expected a divisor of n_routed_experts = 12, got 8 (HF's default: the config leaves n_group out)"
edit topk 'c["n_group"] = 2; del c["topk_group"]'
refused topk "topk_group: expected <= n_group = 2, got 4 (HF's default: the config leaves topk_group out)"
edit heads 'del c["num_key_value_heads"]'
refused heads "num_key_value_heads: MLA expects it equal to num_attention_heads = 4, got 128 (HF's default"

# A null: HF's None. q_lora_rank's is "no q low-rank"; hidden_size has none.
edit null-qlora 'c["q_lora_rank"] = None'
plan_json null-qlora
edit null-hidden 'c["hidden_size"] = None'
refused null-hidden '$.hidden_size: expected an integer, got null'

# What the file is: model_type and architectures.
edit llama 'c["model_type"] = "llama"'
refused llama '$.model_type: expected "deepseek_v3" or "kimi_k2" (a DeepSeek-V3 or Kimi-K2 text model), got "llama"'
edit no-type 'del c["model_type"]'
refused no-type '$.model_type: expected "deepseek_v3" or "kimi_k2" (a DeepSeek-V3 or Kimi-K2 text model), got nothing'
edit llama-arch 'c["architectures"] = ["LlamaForCausalLM"]'
refused llama-arch '$.architectures[0]: expected "DeepseekV3ForCausalLM" or "DeepseekV3Model"'
edit k25-text-qwen 't["model_type"] = "qwen3_moe"'
refused k25-text-qwen '$.text_config.model_type: expected "deepseek_v3" or "kimi_k2"'
edit k25-wrapper 'c["model_type"] = "deepseek_v3"'
refused k25-wrapper "\$.model_type: expected \"kimi_k25\" (a config with text_config is Kimi-K2.5's"
edit kimi-k2 'c["model_type"] = "kimi_k2"'  # Kimi-K2's config.json: a DeepseekV3 one by another name
plan_json kimi-k2

# Every preset and every test checkpoint's config loads as before (a model too large for one
# H200 is planned infeasible, exit 1).
for model in scenarios/models/*.json tests/data/hf/*/; do
  set +e
  "$TPBENCH" plan --model "$model" --tp 1 --gpu H200 >"$SCRATCH/last.out" 2>&1
  rc=$?
  set -e
  [[ $rc -le 1 ]] || { cat "$SCRATCH/last.out"; fail "$model: exit $rc"; }
done
echo ok
