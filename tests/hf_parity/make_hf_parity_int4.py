#!/usr/bin/env python3
"""Builds small random Kimi-K2.5-style INT4 checkpoints with the real libraries and writes, per
model, tests/data/hf/<name>/{config.json, model-0000N-of-00002.safetensors,
model.safetensors.index.json, input_ids.json, reference_logits.safetensors, meta.json}: the
INT4 counterpart of make_hf_parity.py's data (same files and meta.json keys, plus "quant":
"int4" and the library versions), read by tests/unit/hf_parity_test.cpp the same way.

How a model is made:
  1. A tiny DeepseekV3ForCausalLM (transformers, fp32, eager attention) with make_hf_parity.py's
     weight scales; every weight rounded to bf16, except the routers' e_score_correction_bias,
     kept (and stored) in F32 as in the released checkpoints.
  2. compressed-tensors quantizes it: the text model's per-expert layout is rebuilt as a module
     tree with the HF module names (nn.Linear for every projection and lm_head, nn.Embedding for
     the embedding, plain modules for norms and the router), `apply_quantization_config` applies
     Kimi-K2.5's QuantizationConfig to it (targets ["Linear"] with MODEL.md's ignore list: the
     library, not this script, decides what is quantized; the script asserts that this is exactly
     the routed experts' gate/up/down of layers >= first_k_dense_replace), the library's own
     min-max qparams (`compute_dynamic_scales_and_zp`: bf16 scale = max|w| / 7.5 per group of 32)
     calibrate each module, and `ModelCompressor.compress_model` (PackedQuantizationCompressor:
     `quantize` then `pack_to_int32`) compresses it. The tensors written are the compressed
     module tree's state dict, renamed with `language_model.`; the quantization_config written is
     what `ModelCompressor.update_config` writes (llm-compressor's save path).
  3. Checks, each an assert: the packed words follow MODEL.md (input j of a row in word j/8,
     bits 4(j%8).., nibble = q + 8; unpacked here independently of the library) and hold the q
     that the library's `quantize` gives; this script's dequantization bf16((nibble - 8) * scale)
     equals the library's `PackedQuantizationCompressor.decompress` bit for bit; transformers'
     own from_pretrained (Kimi_K25ForConditionalGeneration, CompressedTensorsConfig(dequantize=
     True)) loads the written folder, its fused experts equal this script's dequantized weights
     exactly, every other weight equals the stored one, and its logits equal the reference's
     once its experts are cast to fp32 (asserted < 1e-6; 0 in practice); HF prefill+decode
     through its KV cache matches the full forward (< 1e-5); the files read back with
     safetensors equal the tensors written.
  4. The reference logits: the step-1 model with its experts replaced by the dequantized weights
     (fp32 holding the bf16 values), forward over input_ids.json.

Surprises relative to MODEL.md, and what compressed-tensors 0.20.1 does at ragged widths (the
library's behaviour probed and asserted by `probe_library` below, transformers' by
`load_with_transformers`; both recorded in meta.json):
  * weight_shape: the library writes torch.tensor(weight.shape), an I64 [2]; the released
    K2.x checkpoints are listed with tensor types F32, I32 and BF16 only (no I64), and
    tpbench's loader reads I32 [2]. The files here store it as I32 (the one change made to the
    library's output; values asserted equal; transformers reads either).
  * group strategy with in % 32 != 0: the library refuses. compute_dynamic_scales_and_zp fails
    (RuntimeError: unflatten cannot split in into ceil(in/32) x 32) and quantize/dequantize raise
    ValueError ("tensor column shape must be divisble by the given group_size"), although
    initialize_qparams only warns and sizes weight_scale [out, ceil(in/32)]. So neither
    compress nor decompress handles a ragged last group: a pack-quantized group-32 file
    always has every expert width (hidden_size and moe_intermediate_size, which are both an
    input width of some expert projection) a multiple of 32, and no ragged word arises.
  * pack_to_int32 itself packs a ragged word: ceil(in/8) words, the padding nibbles 0 (raw 0,
    not the nibble 8 of q = 0; the padding is added after the +8 offset); unpack_from_int32
    drops them by weight_shape.
  * quantize computes x / scale in the weight's dtype (bf16), clamps to [-8, 7] and rounds half
    to even; with scale = bf16(max|w| / 7.5) the extreme of each group lands near +-7.5, so a
    group's negative extreme becomes -8 and its positive one +7: q spans [-8, 7] (the QAT
    checkpoints use -7..7; meta.json has the histogram).
  * Kimi_K25Config (transformers) defaults tie_word_embeddings to True at the top level: the
    config.json here sets it false both there and in text_config (else transformers ties
    lm_head to the embedding and the check above fails).
  * transformers 5.25 loads these folders itself: from_pretrained finds quantization_config
    at the top level and inside text_config alike; with CompressedTensorsConfig(dequantize=True)
    its converter decompresses the per-expert tensors with compressed-tensors and fuses them,
    but leaves the fused experts in bf16 (the scale's dtype) even with dtype=float32 (its dense
    path casts, its experts path does not): as loaded, its forward runs the experts in bf16
    (rel-L2 vs the fp32 reference 3.9e-3 for odd, 3.0e-3 for g32); cast to fp32 it
    is the reference exactly. Its default route (dequantize=False) fails at the first forward:
    MODEL.md's ignore list has no vision_tower / mm_projector entry, so compressed-tensors
    takes the vision tower's Linears (not in the checkpoint; in = 16 here) for INT4 modules and
    cannot decompress them (with "re:.*vision_tower.*" and "re:.*mm_projector.*" added to the
    ignore list it runs; Kimi-K3's published list has both entries).

Models:
  k25-int4-odd  widths the format allows that are not the usual ones: hidden 96 and
                moe_intermediate 96 (3 groups of 32: a down_proj group straddles the ranks at
                TP 2, 48 inputs per rank, and at TP 4, 24), intermediate 100 (25 per rank at
                TP 4), q/kv LoRA ranks 28 / 20, odd head dims (nope 11, v 13; rope 6), vocab 252,
                8 experts top-2, 3 layers (dense first), yarn mscale 0.707 / mscale_all_dim 1
                (rope_parameters form); quantization_config inside text_config.
  k25-int4-g32  every expert K a multiple of 32 at TP 1, 2 and 4 (hidden 128; moe_intermediate
                128 -> 64 / 32 per rank), intermediate 128, 8 heads, q/kv LoRA 64 / 32, 16 experts
                top-4, routed_scaling_factor 2.827, 3 layers (dense first, then 2 MoE), yarn in the
                older rope_scaling form (rope_theta 50000, mscale 1 / 1), rms_norm_eps 1e-5, as
                K2.5; quantization_config beside text_config at the top level.
Both: K2.5's nested config.json (model_type kimi_k25, text_config = the deepseek_v3 config, a
tiny vision_config of transformers' kimi_k25_vision), tensor names under `language_model.`,
routed experts per expert (`...mlp.experts.E.{gate,up,down}_proj.{weight_packed, weight_scale,
weight_shape}`), everything else BF16 but the F32 router bias, two shards with
model.safetensors.index.json.

Usage: python3 tests/hf_parity/make_hf_parity_int4.py [--out tests/data/hf] [--only NAME ...]
Needs torch, transformers (>= 5.25: Kimi_K25 and compressed-tensors' dequantize route),
compressed-tensors and safetensors. Written with torch 2.15.0+cu132 on the CPU (the PyPI wheel
installed with --no-deps, plus its pure-Python deps and the four nvidia-* wheels whose
libraries libtorch_cuda.so links and the machine's CUDA 13.0 lacks or has too old:
nvidia-cusparselt-cu13, nvidia-nvshmem-cu13, nvidia-cufile, nvidia-nccl-cu13; transformers and
compressed-tensors also --no-deps, as their resolver would pull the whole CUDA stack through
torch), transformers 5.25.0, compressed-tensors 0.20.1, safetensors 0.8.0. Runs in ~10 s;
deterministic for given library versions.
"""
import argparse
import json
import os
import re
import shutil
import tempfile
import warnings

import torch
from torch import nn
from safetensors.torch import load_file, save_file

import compressed_tensors
import safetensors
import transformers
from compressed_tensors.compressors import ModelCompressor, PackedQuantizationCompressor, pack_to_int32, unpack_from_int32
from compressed_tensors.quantization import (QuantizationArgs, QuantizationConfig, QuantizationScheme,
                                             apply_quantization_config)
from compressed_tensors.quantization.lifecycle.forward import dequantize, quantize
from compressed_tensors.quantization.utils import compute_dynamic_scales_and_zp
from compressed_tensors.quantization.utils.helpers import is_module_quantized
from transformers import AutoModelForCausalLM, CompressedTensorsConfig, DeepseekV3Config

BATCH, SEQ = 2, 12
GROUP = 32
IGNORE = ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", r"re:.*mlp\.(gate|up|gate_up|down)_proj.*"]
# K2.5's own vision tower is MoonViT; this is transformers' kimi_k25_vision config, tiny (the
# vision weights are not in the checkpoint; tpbench reads the text model only).
VISION = {"model_type": "kimi_k25_vision", "patch_size": 14, "hidden_size": 16, "intermediate_size": 32,
          "num_hidden_layers": 1, "num_attention_heads": 2, "pos_emb_height": 4, "pos_emb_width": 4,
          "pos_emb_time": 2, "merge_kernel_size": [2, 2]}


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
    dict(name="k25-int4-odd", seed=21, quant_in_text_config=True, config=base_config(
        vocab_size=252, hidden_size=96, intermediate_size=100, moe_intermediate_size=96, q_lora_rank=28,
        kv_lora_rank=20, qk_nope_head_dim=11, qk_rope_head_dim=6, v_head_dim=13,
        rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=64,
                             beta_fast=32.0, beta_slow=1.0, mscale=0.707, mscale_all_dim=1.0))),
    dict(name="k25-int4-g32", seed=22, quant_in_text_config=False, rope_key="rope_scaling", config=base_config(
        hidden_size=128, intermediate_size=128, moe_intermediate_size=128, num_hidden_layers=3,
        num_attention_heads=8, num_key_value_heads=8, q_lora_rank=64, kv_lora_rank=32, n_routed_experts=16,
        num_experts_per_tok=4, routed_scaling_factor=2.827, rms_norm_eps=1e-5,
        rope_parameters=dict(rope_type="yarn", rope_theta=50000.0, factor=4.0, original_max_position_embeddings=64,
                             beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0))),
]


def int4_args():
    return QuantizationArgs(num_bits=4, type="int", symmetric=True, strategy="group", group_size=GROUP)


def kimi_quant_config():
    """Kimi-K2.5's quantization_config (MODEL.md) as a compressed-tensors QuantizationConfig."""
    return QuantizationConfig(
        config_groups={"group_0": QuantizationScheme(targets=["Linear"], weights=int4_args())},
        format="pack-quantized", ignore=list(IGNORE))


# ---------------------------------------------------------------------------------------------
# The HF model (as make_hf_parity.py makes it)

def init_weights(model, gen):
    """Non-trivial scales: N(0, 1/fan_in) linears, N(0,1) embeddings, norms 1 + N(0, 0.1^2),
    a router with logits of std ~2 and a bias of std 0.05 (make_hf_parity.py's rules)."""
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


def round_params_to_bf16(model):
    """Every parameter to bf16 values (the model computes in fp32 on exactly the stored values);
    the buffers (router bias: stored F32) stay fp32."""
    with torch.no_grad():
        for _, p in model.named_parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))


def per_expert_state(model):
    """The text model's tensors in the checkpoint layout (per-expert names), fp32. transformers 5
    holds experts fused ([E, 2I, H] gate rows then up rows; [E, H, I])."""
    out = {}
    fused_re = re.compile(r"^(.*\.mlp\.experts)\.(gate_up_proj|down_proj)$")
    for name, t in model.state_dict().items():
        if "rotary_emb" in name:
            continue
        t = t.detach().to(torch.float32)
        m = fused_re.match(name)
        if m:
            base, kind = m.groups()
            for e in range(t.shape[0]):
                if kind == "gate_up_proj":
                    inter = t.shape[1] // 2
                    out[f"{base}.{e}.gate_proj.weight"] = t[e, :inter].clone()
                    out[f"{base}.{e}.up_proj.weight"] = t[e, inter:].clone()
                else:
                    out[f"{base}.{e}.down_proj.weight"] = t[e].clone()
        else:
            if re.search(r"\.mlp\.experts\.\d+\.", name):
                raise RuntimeError(f"expected fused experts in memory, found {name}")
            out[name] = t
    return out


# ---------------------------------------------------------------------------------------------
# compressed-tensors

def module_tree(state):
    """A module tree with the HF module names and classes that matter to compressed-tensors'
    matching (targets ["Linear"] and the ignore list): nn.Linear for every *_proj and lm_head,
    nn.Embedding for embed_tokens, plain modules (not Linear, as in HF: RMSNorm,
    DeepseekV3TopkRouter) holding the norms and the router. bf16, as the released model."""
    root = nn.Module()

    def parent_of(path):
        mod = root
        for part in path:
            if not hasattr(mod, part):
                mod.add_module(part, nn.Module())
            mod = getattr(mod, part)
        return mod

    for name, t in state.items():
        parts = name.split(".")
        mod_path, pname = parts[:-1], parts[-1]
        leaf = mod_path[-1]
        is_linear = pname == "weight" and t.dim() == 2 and (leaf.endswith("_proj") or leaf == "lm_head")
        is_embedding = leaf == "embed_tokens"
        if is_linear or is_embedding:
            parent = parent_of(mod_path[:-1])
            if is_linear:
                m = nn.Linear(t.shape[1], t.shape[0], bias=False, dtype=torch.bfloat16)
            else:
                m = nn.Embedding(t.shape[0], t.shape[1], dtype=torch.bfloat16)
            with torch.no_grad():
                m.weight.copy_(t.to(torch.bfloat16))
            m.weight.requires_grad_(False)
            parent.add_module(leaf, m)
        else:
            holder = parent_of(mod_path)
            dtype = torch.float32 if pname == "e_score_correction_bias" else torch.bfloat16
            holder.register_parameter(pname, nn.Parameter(t.to(dtype).clone(), requires_grad=False))
    return root


def unpack_model_md(packed, shape):
    """MODEL.md's reading of weight_packed, independent of the library: input j of a row sits in
    word j // 8, bits 4 (j % 8) .. + 3; nibble = q + 8. Returns (q int8 [out, in], padding nibbles)."""
    out, inn = int(shape[0]), int(shape[1])
    assert packed.dtype == torch.int32 and tuple(packed.shape) == (out, (inn + 7) // 8), (packed.dtype, packed.shape)
    words = packed.to(torch.int64) & 0xFFFFFFFF
    nib = torch.stack([(words >> (4 * j)) & 0xF for j in range(8)], dim=-1).reshape(out, -1)
    return (nib[:, :inn] - 8).to(torch.int8), nib[:, inn:]


def dequant_model_md(q, scale):
    """bf16((nibble - 8) x scale): the product in fp32 (exact), rounded once to bf16."""
    out, inn = q.shape
    s = scale.to(torch.float32).repeat_interleave(GROUP, dim=1)[:, :inn]
    return (q.to(torch.float32) * s).to(torch.bfloat16)


def quantize_experts(hf_state, first_dense, num_layers, num_experts):
    """Runs compressed-tensors over the text model. Returns (the checkpoint tensors without the
    `language_model.` prefix, {projection name: dequantized bf16 weight}, the quantization_config
    dict as llm-compressor's save path writes it)."""
    qcfg = kimi_quant_config()
    tree = module_tree(hf_state)
    apply_quantization_config(tree, qcfg, show_progress=False)
    quantized = {n for n, m in tree.named_modules() if is_module_quantized(m)}
    expected = {f"model.layers.{l}.mlp.experts.{e}.{p}" for l in range(first_dense, num_layers)
                for e in range(num_experts) for p in ("gate_proj", "up_proj", "down_proj")}
    assert quantized == expected, f"the ignore list quantized {sorted(quantized ^ expected)[:5]} unexpectedly"

    # Calibration: the library's min-max qparams on each weight (what llm-compressor's minmax
    # observer computes for a weight, here without llm-compressor).
    args = int4_args()
    originals = {}
    for name in sorted(quantized):
        m = tree.get_submodule(name)
        scale, zp = compute_dynamic_scales_and_zp(m.weight.data, args, m)
        assert scale.shape == m.weight_scale.shape and scale.dtype == torch.bfloat16, (scale.shape, scale.dtype)
        m.weight_scale.data.copy_(scale)
        m.weight_zero_point.data.copy_(zp)
        originals[name] = m.weight.data.clone()

    compressor = ModelCompressor(quantization_config=qcfg)
    compressor.compress_model(tree)
    compressor.remove_decompression_hook(tree)
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump({}, f)
        compressor.update_config(tmp)
        with open(os.path.join(tmp, "config.json")) as f:
            quant_json = json.load(f)["quantization_config"]

    state = {k: v.detach().clone() for k, v in tree.state_dict().items()}
    scheme = QuantizationScheme(targets=["Linear"], weights=args)
    dequantized = {}
    q_hist = torch.zeros(16, dtype=torch.int64)
    for name in sorted(quantized):
        packed, scale, shape = (state[f"{name}.weight_packed"], state[f"{name}.weight_scale"],
                                state[f"{name}.weight_shape"])
        w = originals[name]
        assert f"{name}.weight" not in state and f"{name}.weight_zero_point" not in state
        assert shape.dtype == torch.int64 and shape.tolist() == list(w.shape), (shape.dtype, shape)
        assert scale.dtype == torch.bfloat16 and tuple(scale.shape) == (w.shape[0], (w.shape[1] + GROUP - 1) // GROUP)
        # The packed words as MODEL.md reads them hold the library's q.
        q, pad = unpack_model_md(packed, shape.tolist())
        q_lib = quantize(x=w, scale=scale, zero_point=None, args=args, dtype=torch.int8)
        assert torch.equal(q, q_lib), f"{name}: weight_packed does not read as MODEL.md says"
        assert pad.numel() == 0 or (pad == 0).all()
        assert torch.equal(unpack_from_int32(packed, 4, torch.Size(shape.tolist())), q)
        # This script's dequantization is the library's decompression, bit for bit.
        mine = dequant_model_md(q, scale)
        lib = PackedQuantizationCompressor.decompress(
            {"weight_packed": packed, "weight_scale": scale, "weight_shape": shape}, scheme)["weight"]
        assert lib.dtype == torch.bfloat16 and torch.equal(mine.view(torch.int16), lib.view(torch.int16)), \
            f"{name}: dequantized weight differs from compressed-tensors' decompress"
        assert torch.equal(lib, dequantize(x_q=q, scale=scale, args=args))
        dequantized[name] = mine
        q_hist += torch.bincount((q.flatten().to(torch.int64) + 8), minlength=16)
        # The released format's weight_shape is I32 (see the docstring).
        state[f"{name}.weight_shape"] = shape.to(torch.int32)
    return state, dequantized, quant_json, q_hist.tolist()


def probe_library():
    """What compressed-tensors does at widths that are not multiples of 8 or 32 (asserted, so a
    library version that changes it is noticed; the result goes into meta.json)."""
    args = int4_args()
    found = {}
    # A ragged word from pack_to_int32: 12 inputs -> 2 words, padding nibbles 0.
    q = torch.tensor([[1, -2, 3, -4, 5, -6, 7, -8, 0, 1, 2, 3]], dtype=torch.int8)
    p = pack_to_int32(q, 4)
    words = [w & 0xFFFFFFFF for w in p[0].tolist()]
    assert words == [0x0F2D4B69, 0x0000BA98], [hex(w) for w in words]
    assert torch.equal(unpack_from_int32(p, 4, torch.Size([1, 12])), q)
    found["pack_to_int32_ragged_word"] = "ceil(in/8) words; padding nibbles are 0 (raw), not 8; unpack drops them by weight_shape"
    # A ragged group: in = 52 (and 20).
    for inn in (52, 20):
        w = (torch.randn(3, inn, generator=torch.Generator().manual_seed(inn)) / inn ** 0.5).to(torch.bfloat16)
        try:
            compute_dynamic_scales_and_zp(w, args, None)
            raise AssertionError("compressed-tensors now computes group scales for a ragged last group")
        except RuntimeError as e:
            assert "unflatten" in str(e), e
        scale = torch.ones(3, (inn + GROUP - 1) // GROUP, dtype=torch.bfloat16)
        for fn, kw in ((quantize, dict(x=w, scale=scale, zero_point=None, args=args, dtype=torch.int8)),
                       (dequantize, dict(x_q=torch.zeros(3, inn, dtype=torch.int8), scale=scale, args=args))):
            try:
                fn(**kw)
                raise AssertionError(f"compressed-tensors now {fn.__name__}s a ragged last group")
            except ValueError as e:
                assert "divisble" in str(e) or "divisible" in str(e), e
    found["group_32_ragged_in"] = ("refused: compute_dynamic_scales_and_zp raises RuntimeError (unflatten), "
                                   "quantize and dequantize raise ValueError (column count not divisible by "
                                   "group_size), for in = 52 and 20")
    # weight_shape dtype as the compressor writes it.
    w = torch.randn(2, 32, dtype=torch.bfloat16)
    s, zp = compute_dynamic_scales_and_zp(w, args, None)
    sd = PackedQuantizationCompressor.compress({"weight": w, "weight_scale": s, "weight_zero_point": zp},
                                               QuantizationScheme(targets=["Linear"], weights=args))
    assert sd["weight_shape"].dtype == torch.int64 and sorted(sd) == ["weight_packed", "weight_scale", "weight_shape"]
    found["weight_shape_dtype_written"] = "int64 (stored here as int32, the released format's)"
    return found


# ---------------------------------------------------------------------------------------------

def text_config_json(config, spec):
    text_cfg = json.loads(config.to_json_string(use_diff=False))
    for key in ("transformers_version", "_name_or_path", "torch_dtype", "dtype"):
        text_cfg.pop(key, None)
    text_cfg["architectures"] = ["DeepseekV3ForCausalLM"]
    if spec.get("rope_key") == "rope_scaling":  # the pre-5 form DeepSeek-V3 and Kimi ship
        rope = text_cfg.pop("rope_parameters")
        text_cfg["rope_theta"] = rope.pop("rope_theta")
        rope["type"] = rope.pop("rope_type")
        text_cfg["rope_scaling"] = rope
    return text_cfg


def rel_l2(a, b):
    return ((a - b).norm() / b.norm()).item()


def write_model(spec, out_root, probe):
    torch.manual_seed(spec["seed"])
    gen = torch.Generator().manual_seed(spec["seed"])
    config = DeepseekV3Config(**spec["config"])
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    init_weights(model, gen)
    round_params_to_bf16(model)
    first_dense, layers = config.first_k_dense_replace, config.num_hidden_layers

    hf_state = per_expert_state(model)
    ckpt, dequantized, quant_json, q_hist = quantize_experts(hf_state, first_dense, layers, config.n_routed_experts)

    # The reference model: the experts replaced by their dequantized weights.
    with torch.no_grad():
        for l in range(first_dense, layers):
            experts = model.model.layers[l].mlp.experts
            for e in range(config.n_routed_experts):
                base = f"model.layers.{l}.mlp.experts.{e}"
                g, u, d = (dequantized[f"{base}.{p}"].to(torch.float32) for p in ("gate_proj", "up_proj", "down_proj"))
                experts.gate_up_proj[e].copy_(torch.cat([g, u], dim=0))
                experts.down_proj[e].copy_(d)
    # Everything else in the checkpoint is exactly the model's (bf16 values; F32 bias).
    for name, t in ckpt.items():
        if name in hf_state:
            assert torch.equal(t.to(torch.float32), hf_state[name]), name

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
          f"tokens per expert (all MoE layers) {hits.tolist()}; q histogram -8..7 {q_hist}")
    assert (hits > 0).all(), "routing does not reach every expert: scale the router up"

    with torch.no_grad():
        k = SEQ // 2
        out = model(input_ids=input_ids[:, :k], use_cache=True)
        steps = [out.logits]
        cache = out.past_key_values
        for i in range(k, SEQ):
            out = model(input_ids=input_ids[:, i:i + 1], past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            steps.append(out.logits)
        incremental = torch.cat(steps, dim=1)
    rel = rel_l2(incremental, logits)
    print(f"{spec['name']}: HF prefill+decode vs full forward rel-L2 {rel:.3g}")
    assert rel < 1e-5

    # The folder.
    d = os.path.join(out_root, spec["name"])
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    text_cfg = text_config_json(config, spec)
    cfg = {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
           "text_config": text_cfg, "vision_config": dict(VISION),
           "projection_hidden_size": VISION["hidden_size"] * VISION["merge_kernel_size"][0] * VISION["merge_kernel_size"][1],
           "tie_word_embeddings": False}
    if spec["quant_in_text_config"]:
        text_cfg["quantization_config"] = quant_json
    else:
        cfg["quantization_config"] = quant_json
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)

    prefix = "language_model."
    tensors = {prefix + k: v.contiguous() for k, v in ckpt.items()}
    names = sorted(tensors)
    shards = 2
    per = (len(names) + shards - 1) // shards
    weight_map = {}
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[s * per:(s + 1) * per]}
        save_file(part, os.path.join(d, fname), metadata={"format": "pt"})
        weight_map.update({n: fname for n in part})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    # The files read back (safetensors) are the tensors written.
    back = {}
    for fname in sorted(set(weight_map.values())):
        back.update(load_file(os.path.join(d, fname)))
    assert sorted(back) == names and all(torch.equal(back[n], tensors[n]) and back[n].dtype == tensors[n].dtype
                                         for n in names)

    # transformers' own loader: Kimi_K25 with the compressed-tensors quantizer, dequantizing.
    hf_load = load_with_transformers(d, spec, cfg, model, input_ids, logits)

    with open(os.path.join(d, "input_ids.json"), "w") as f:
        json.dump(input_ids.tolist(), f)
    save_file({"logits": logits}, os.path.join(d, "reference_logits.safetensors"))
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump({"generator": "tests/hf_parity/make_hf_parity_int4.py", "torch": torch.__version__,
                   "transformers": transformers.__version__, "compressed_tensors": compressed_tensors.__version__,
                   "safetensors": safetensors.__version__, "quant": "int4",
                   "storage_dtype": "torch.bfloat16 (routed experts int4 pack-quantized, group 32; "
                                    "e_score_correction_bias F32)",
                   "experts": "per-expert", "prefix": prefix, "shards": shards,
                   "quantization_config_at": "text_config" if spec["quant_in_text_config"] else "top level",
                   "tokens_per_expert": hits.tolist(), "q_histogram_minus8_to_7": q_hist,
                   "hf_incremental_rel_l2": rel, "transformers_load": hf_load,
                   "compressed_tensors_at_ragged_widths": probe}, f, indent=2)
    return d


def load_with_transformers(d, spec, cfg, ref_model, input_ids, ref_logits):
    """Loads the folder with transformers' from_pretrained (Kimi_K25ForConditionalGeneration and
    its compressed-tensors quantizer, which finds the quantization_config in the file at either
    place; dequantize=True is the only thing passed) and checks it against the reference."""
    from transformers import Kimi_K25ForConditionalGeneration
    how = "Kimi_K25ForConditionalGeneration.from_pretrained(quantization_config=CompressedTensorsConfig(dequantize=True))"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded, info = Kimi_K25ForConditionalGeneration.from_pretrained(
            d, dtype=torch.float32, attn_implementation="eager", output_loading_info=True,
            quantization_config=CompressedTensorsConfig(dequantize=True))
    loaded.eval()
    missing = [k for k in info["missing_keys"] if not k.startswith(("model.vision_tower.", "model.mm_projector."))]
    assert not missing and not info["unexpected_keys"] and not info.get("mismatched_keys"), info
    lm = loaded.model.language_model
    ref = ref_model.model
    got_sd, ref_sd = lm.state_dict(), ref.state_dict()
    assert sorted(got_sd) == sorted(ref_sd), sorted(set(got_sd) ^ set(ref_sd))
    for n, t in ref_sd.items():
        assert torch.equal(got_sd[n].to(torch.float32), t), f"transformers loaded {n} differently"
    dtypes = sorted({f"{n.split('.')[-1]}: {str(t.dtype)}" for n, t in got_sd.items() if ".mlp.experts." in n})
    other = sorted({str(t.dtype) for n, t in got_sd.items() if ".mlp.experts." not in n})
    print(f"{spec['name']}: transformers' dtypes: experts {dtypes}, the rest {other}")
    assert torch.equal(loaded.lm_head.weight, ref_model.lm_head.weight)
    # transformers 5.25's dequantizing converter returns the fused experts in the scale's dtype
    # (bf16) whatever `dtype` asks for (its dense path casts, its experts path does not), so
    # that model's forward runs its experts in bf16: recorded, not a reference. Cast to fp32,
    # it is the reference model.
    with torch.no_grad():
        as_loaded = rel_l2(loaded(input_ids=input_ids).logits.to(torch.float32), ref_logits)
        loaded.to(torch.float32)
        r = rel_l2(loaded(input_ids=input_ids).logits.to(torch.float32), ref_logits)
    print(f"{spec['name']}: transformers {how} vs reference logits: rel-L2 {as_loaded:.3g} as loaded "
          f"(bf16 experts), {r:.3g} with the experts cast to fp32")
    assert r < 1e-6
    # The default route (dequantize=False: compressed modules, decompressed on the first
    # forward), recorded, not asserted. MODEL.md's ignore list has no vision_tower /
    # mm_projector entry, so compressed-tensors takes the vision tower's Linears for INT4 too.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compressed = Kimi_K25ForConditionalGeneration.from_pretrained(d, dtype=torch.float32,
                                                                          attn_implementation="eager")
            with torch.no_grad():
                default_route = f"forward ran, rel-L2 {rel_l2(compressed(input_ids=input_ids).logits, ref_logits):.3g}"
    except Exception as e:  # noqa: BLE001 (recorded)
        default_route = f"{type(e).__name__}: {e}"
    print(f"{spec['name']}: transformers' default (compressed) route: {default_route}")
    return {"loaded": True, "how": how, "class": type(loaded).__name__,
            "weights_equal_reference": True, "loaded_dtypes": {"experts": dtypes, "rest": other},
            "logits_rel_l2_as_loaded": as_loaded, "logits_rel_l2_experts_fp32": r,
            "default_route_dequantize_false": default_route}


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
    probe = probe_library()
    for spec in MODELS:
        if not args.only or spec["name"] in args.only:
            write_model(spec, args.out, probe)


if __name__ == "__main__":
    main()
