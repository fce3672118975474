#!/usr/bin/env python3
"""Builds small random DeepseekV3 models with HF transformers and writes, per model,
tests/data/hf/<name>/{config.json, *.safetensors, input_ids.json, reference_logits.safetensors,
meta.json}: the data tests/unit/hf_parity_test.cpp compares tpbench's CPU engine against.

Transformers is the independent implementation here: the script only chooses weights and
file layouts; every reference logit comes from DeepseekV3ForCausalLM's forward (fp32, eager
attention). Weights get non-trivial scales (unit-variance activations, a router whose
sigmoid scores spread out) so that expert choices depend on the input, and are rounded to
the dtype they are stored in, so the stored file holds exactly the model that produced the
logits.

Models (each covers yarn rope and a dense first layer):
  dsv3-grouped-bf16   plain deepseek_v3 config.json, grouped routing (n_group 4, topk_group 2),
                      per-expert tensor names, BF16, one model.safetensors, the yarn block in
                      the older `rope_scaling` form (rope_theta at the top level)
  k25-fused-f16       Kimi-K2.5 nested config (text_config + vision_config), tensor names with
                      the `language_model.` prefix, fused experts (gate_up_proj / down_proj),
                      F16, sharded into 2 files with model.safetensors.index.json,
                      yarn with mscale != mscale_all_dim (cos/sin scaled)
  dsv3-noqlora-f32    q_lora_rank = null (q_proj), F32, grouped routing (n_group 2, top-3)
  dsv3-odd-widths-bf16
                      no width a multiple of 8: hidden 52, intermediate 100 (25 per rank at
                      TP 4), moe_intermediate 20 (5 per rank at TP 4), q/kv LoRA ranks 28 / 20,
                      odd head dims (nope 11, v 13; rope 6), vocab 252 (63 per rank at TP 4),
                      BF16: the GPU engine's padded and unaligned paths
The other two keep transformers 5's `rope_parameters` block.

Usage: python3 tests/hf_parity/make_hf_parity.py [--out tests/data/hf] [--only NAME ...]
Needs torch, transformers (>= 5) and safetensors. Deterministic for a given torch version.
"""
import argparse
import json
import os
import re
import shutil

import torch
from safetensors.torch import save_file

from transformers import AutoModelForCausalLM, DeepseekV3Config

BATCH, SEQ = 2, 12


def base_config(**overrides):
    cfg = dict(
        vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
        num_hidden_layers=3, first_k_dense_replace=1, num_attention_heads=4, num_key_value_heads=4,
        q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
        n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2, n_group=1, topk_group=1,
        routed_scaling_factor=2.5, norm_topk_prob=True, rms_norm_eps=1e-6,
        max_position_embeddings=256, tie_word_embeddings=False, rope_interleave=True,
        rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                             original_max_position_embeddings=64, beta_fast=32.0, beta_slow=1.0,
                             mscale=1.0, mscale_all_dim=1.0),
    )
    cfg.update(overrides)
    return cfg


MODELS = [
    dict(name="dsv3-grouped-bf16", seed=11, dtype=torch.bfloat16, experts="per-expert", nested=False,
         shards=1, rope_key="rope_scaling", config=base_config(n_group=4, topk_group=2)),
    dict(name="k25-fused-f16", seed=12, dtype=torch.float16, experts="fused", nested=True, shards=2,
         config=base_config(rope_parameters=dict(
             rope_type="yarn", rope_theta=50000.0, factor=4.0, original_max_position_embeddings=64,
             beta_fast=32.0, beta_slow=1.0, mscale=0.707, mscale_all_dim=1.0))),
    dict(name="dsv3-noqlora-f32", seed=13, dtype=torch.float32, experts="per-expert", nested=False,
         shards=1, config=base_config(vocab_size=128, hidden_size=32, intermediate_size=64,
                                      moe_intermediate_size=16, num_hidden_layers=2, q_lora_rank=None,
                                      kv_lora_rank=16, n_routed_experts=8, num_experts_per_tok=3,
                                      n_group=2, topk_group=1)),
    dict(name="dsv3-odd-widths-bf16", seed=14, dtype=torch.bfloat16, experts="per-expert", nested=False,
         shards=1, config=base_config(vocab_size=252, hidden_size=52, intermediate_size=100,
                                      moe_intermediate_size=20, q_lora_rank=28, kv_lora_rank=20,
                                      qk_nope_head_dim=11, qk_rope_head_dim=6, v_head_dim=13)),
]


def init_weights(model, gen):
    """Non-trivial scales: N(0, 1/fan_in) linears, N(0,1) embeddings, norms 1 + N(0, 0.1^2),
    a router with logits of std ~2 and a bias of std 0.05."""
    hidden = model.config.hidden_size
    for name, p in model.named_parameters():
        with torch.no_grad():
            if name.endswith("embed_tokens.weight"):
                p.copy_(torch.randn(p.shape, generator=gen))
            elif "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith("mlp.gate.weight"):
                p.copy_(torch.randn(p.shape, generator=gen) * (2.0 / hidden ** 0.5))
            elif p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[-1] ** 0.5)
            else:
                raise RuntimeError(f"no init rule for parameter {name} {tuple(p.shape)}")
    for name, b in model.named_buffers():
        if name.endswith("e_score_correction_bias"):
            with torch.no_grad():
                b.copy_(0.05 * torch.randn(b.shape, generator=gen))


def round_to(model, dtype):
    """Rounds every weight to the storage dtype (the model then computes in fp32 on exactly
    the stored values)."""
    with torch.no_grad():
        for _, t in list(model.named_parameters()) + list(model.named_buffers()):
            if t.is_floating_point() and t.dim() >= 1 and "inv_freq" not in _:
                t.copy_(t.to(dtype).to(torch.float32))


def checkpoint_tensors(model, experts, prefix, dtype):
    """The state dict in the requested expert layout. transformers 5 holds experts fused in
    memory ([E, 2I, H] gate rows then up rows; [E, H, I]); the per-expert layout splits them
    into the checkpoint names DeepSeek and Kimi publish (and that save_pretrained writes:
    transformers 5.24 converts its fused experts back to per-expert names on save)."""
    out = {}
    fused_re = re.compile(r"^(.*\.mlp\.experts)\.(gate_up_proj|down_proj)$")
    for name, t in model.state_dict().items():
        if "rotary_emb" in name:
            continue
        t = t.detach().to(torch.float32)
        m = fused_re.match(name)
        if m and experts == "per-expert":
            base, kind = m.groups()
            for e in range(t.shape[0]):
                if kind == "gate_up_proj":
                    inter = t.shape[1] // 2
                    out[f"{base}.{e}.gate_proj.weight"] = t[e, :inter]
                    out[f"{base}.{e}.up_proj.weight"] = t[e, inter:]
                else:
                    out[f"{base}.{e}.down_proj.weight"] = t[e]
        else:
            if experts == "fused" and re.search(r"\.mlp\.experts\.\d+\.", name):
                raise RuntimeError(f"expected fused experts in memory, found {name}")
            out[name] = t
    # The router stays fp32 in real checkpoints (_keep_in_fp32_modules_strict); we store it in
    # the file's dtype like everything else, having rounded it to that dtype above.
    return {prefix + k: v.to(dtype).contiguous() for k, v in out.items()}


def write_model(spec, out_root):
    torch.manual_seed(spec["seed"])
    gen = torch.Generator().manual_seed(spec["seed"])
    config = DeepseekV3Config(**spec["config"])
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    init_weights(model, gen)
    round_to(model, spec["dtype"])

    input_ids = torch.randint(0, config.vocab_size, (BATCH, SEQ), generator=gen)
    chosen = []
    hooks = [m.register_forward_hook(lambda mod, inp, out: chosen.append(out[2].flatten()))
             for n, m in model.named_modules() if type(m).__name__ == "DeepseekV3TopkRouter"]
    with torch.no_grad():
        logits = model(input_ids=input_ids).logits.to(torch.float32).contiguous()
    for h in hooks:
        h.remove()
    hits = torch.bincount(torch.cat(chosen), minlength=config.n_routed_experts)
    print(f"{spec['name']}: logits {tuple(logits.shape)} std {logits.std().item():.3f}; "
          f"tokens per expert (all MoE layers) {hits.tolist()}")
    assert (hits > 0).all(), "routing does not reach every expert: scale the router up"

    # Prefill + decode through HF's own KV cache must give the same logits (a check of the
    # reference itself, not of tpbench).
    with torch.no_grad():
        k = SEQ // 2
        out = model(input_ids=input_ids[:, :k], use_cache=True)
        steps = [out.logits]
        cache = out.past_key_values
        for i in range(k, SEQ):
            out = model(input_ids=input_ids[:, i:i + 1], past_key_values=cache, use_cache=True)  # `cache` from 5.2x on
            cache = out.past_key_values
            steps.append(out.logits)
        incremental = torch.cat(steps, dim=1)
    rel = ((incremental - logits).norm() / logits.norm()).item()
    print(f"{spec['name']}: HF prefill+decode vs full forward rel-L2 {rel:.3g}")
    assert rel < 1e-5

    d = os.path.join(out_root, spec["name"])
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    text_cfg = json.loads(config.to_json_string(use_diff=False))
    for key in ("transformers_version", "_name_or_path", "torch_dtype", "dtype"):
        text_cfg.pop(key, None)
    text_cfg["architectures"] = ["DeepseekV3ForCausalLM"]
    if spec.get("rope_key") == "rope_scaling":  # the pre-5 form DeepSeek-V3 and Kimi ship
        rope = text_cfg.pop("rope_parameters")
        text_cfg["rope_theta"] = rope.pop("rope_theta")
        rope["type"] = rope.pop("rope_type")
        text_cfg["rope_scaling"] = rope
    prefix = ""
    if spec["nested"]:
        prefix = "language_model."
        cfg = {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
               "text_config": text_cfg,
               "vision_config": {"model_type": "moonvit", "_note": "stub; tpbench reads the text model only"}}
    else:
        cfg = text_cfg
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)

    tensors = checkpoint_tensors(model, spec["experts"], prefix, spec["dtype"])
    names = sorted(tensors)
    if spec["shards"] == 1:
        save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    else:
        per = (len(names) + spec["shards"] - 1) // spec["shards"]
        weight_map = {}
        for s in range(spec["shards"]):
            fname = f"model-{s + 1:05d}-of-{spec['shards']:05d}.safetensors"
            part = {n: tensors[n] for n in names[s * per:(s + 1) * per]}
            save_file(part, os.path.join(d, fname), metadata={"format": "pt"})
            weight_map.update({n: fname for n in part})
        total = sum(t.numel() * t.element_size() for t in tensors.values())
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)

    if not spec["nested"]:
        # The files must be what HF itself reads: load them back through from_pretrained
        # (which maps per-expert names onto its fused experts) and recompute the logits.
        reloaded = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager", dtype=torch.float32)
        reloaded.eval()
        with torch.no_grad():
            again = reloaded(input_ids=input_ids).logits.to(torch.float32)
        rel_reload = ((again - logits).norm() / logits.norm()).item()
        print(f"{spec['name']}: from_pretrained(files) vs in-memory model rel-L2 {rel_reload:.3g}")
        assert rel_reload < 1e-6, "the written checkpoint is not the model that produced the logits"

    with open(os.path.join(d, "input_ids.json"), "w") as f:
        json.dump(input_ids.tolist(), f)
    save_file({"logits": logits}, os.path.join(d, "reference_logits.safetensors"))
    import transformers
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump({"generator": "tests/hf_parity/make_hf_parity.py", "torch": torch.__version__,
                   "transformers": transformers.__version__, "storage_dtype": str(spec["dtype"]),
                   "experts": spec["experts"], "prefix": prefix, "shards": spec["shards"],
                   "tokens_per_expert": hits.tolist(), "hf_incremental_rel_l2": rel}, f, indent=2)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(here, "..", "data", "hf"))
    ap.add_argument("--only", nargs="+", metavar="NAME", help="write these models only")
    args = ap.parse_args()
    names = [m["name"] for m in MODELS]
    for n in args.only or []:
        if n not in names:
            ap.error(f"--only: unknown model {n!r} (known: {', '.join(names)})")
    torch.set_num_threads(1)  # deterministic reductions
    for spec in MODELS:
        if not args.only or spec["name"] in args.only:
            write_model(spec, args.out)


if __name__ == "__main__":
    main()
