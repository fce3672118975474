#!/usr/bin/env python3
"""torch SDPA's cuDNN backend at the shapes of tpb_bench's attention/mla_prefill benchmarks.

The anchor of issue 20's prefill-attention target: causal attention with Kimi-K2.5's widths
(q/k head dim 192 = nope 128 + rope 64, v 128), bf16, 1 x 8K and 4 x 2K new tokens, 64 heads
(TP1) and 32 (TP2), timed with CUDA events (warm-up first, the mean of `--iters` calls) under
torch.nn.attention.sdpa_kernel(SDPBackend.CUDNN_ATTENTION), so no other backend stands in.
Inputs are [batch, seq, heads, dim] tensors seen as [batch, heads, seq, dim] (the engine's
layout, as tpb_bench's kernel reads it; contiguous [batch, heads, seq, dim] where cuDNN refuses
the strided view, noted per result as "layout"). TFLOPs counts the useful causal FLOPs as tpb_bench
does: batch * heads * q_len (q_len + 1) / 2 * 2 * (qk + v).

    python3 bench/sdpa_reference.py --out sdpa.json

Writes JSON {"context": {...}, "benchmarks": [{"name", "batch", "q_len", "heads", "us_per_op",
"flops", "TFLOPs"}, ...]}. Exits with status 2 and one line on stderr when torch or a CUDA
device is missing, or when the cuDNN backend refuses the shape.
"""
import argparse
import json
import sys

QK, V = 192, 128
HEADS = (64, 32)
SIZES = ((1, 8192), (4, 2048))  # (batch, q_len)


def useful_flops(batch, heads, q_len, past=0):
    return batch * heads * (q_len * (q_len + 1) / 2 + past * q_len) * 2 * (QK + V)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--scale", type=float, default=0.1352, help="softmax scale (tpb_bench's)")
    args = ap.parse_args()

    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print(f"sdpa_reference.py: torch with torch.nn.attention is needed ({e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("sdpa_reference.py: no CUDA device visible to torch", file=sys.stderr)
        return 2

    dev = torch.device("cuda")
    context = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "device": torch.cuda.get_device_name(dev),
        "backend": "CUDNN_ATTENTION",
        "qk_head_dim": QK,
        "v_head_dim": V,
        "causal": True,
        "dtype": "bfloat16",
        "iters": args.iters,
    }
    results = []
    gen = torch.Generator(device=dev).manual_seed(20)

    def time_s(q, k, v):
        call = lambda: torch.nn.functional.scaled_dot_product_attention(  # noqa: E731
            q, k, v, is_causal=True, scale=args.scale)
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            for _ in range(args.warmup):
                call()
            torch.cuda.synchronize()
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.iters):
                call()
            stop.record()
            torch.cuda.synchronize()
        return start.elapsed_time(stop) * 1e-3 / args.iters

    for heads in HEADS:
        for batch, q_len in SIZES:
            def rand(d):
                x = torch.rand((batch, q_len, heads, d), generator=gen, device=dev, dtype=torch.float32) * 2 - 1
                return x.to(torch.bfloat16).transpose(1, 2)

            q, k, v = rand(QK), rand(QK), rand(V)
            layout = "bshd"
            try:
                s = time_s(q, k, v)
            except RuntimeError as e:  # the strided view refused: the contiguous [b, h, s, d] layout
                print(f"sdpa_reference.py: strided layout refused ({str(e).splitlines()[0]}), "
                      "retrying contiguous", file=sys.stderr)
                q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
                layout = "bhsd"
                try:
                    s = time_s(q, k, v)
                except RuntimeError as e2:
                    print(f"sdpa_reference.py: the cuDNN backend refused batch {batch} x {q_len}, {heads} heads: "
                          f"{str(e2).splitlines()[0]}", file=sys.stderr)
                    return 2
            flops = useful_flops(batch, heads, q_len)
            name = f"sdpa_cudnn/heads:{heads}/batch:{batch}/q_len:{q_len}"
            results.append({"name": name, "batch": batch, "q_len": q_len, "past": 0, "heads": heads,
                            "layout": layout, "us_per_op": s * 1e6, "flops": flops, "TFLOPs": flops / s / 1e12})
            print(f"{name} ({layout}): {s * 1e6:.1f} us, {flops / s / 1e12:.1f} TFLOP/s")
            del q, k, v
    with open(args.out, "w") as f:
        json.dump({"context": context, "benchmarks": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
