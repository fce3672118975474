#!/usr/bin/env python3
"""torch's INT4 weight-only GEMM and bf16 cuBLAS at Kimi-K2.5's routed-expert shapes: the anchors
of issue 33's W4A16 expert GEMM (tpb_bench expert_int4/...).

Shapes: gate|up 7168 -> 2 x 2048 (N 4096, K 7168) and down 2048 -> 7168 (N 7168, K 2048), group
32, for 1, 4, 16, 64 and 256 tokens. Eight experts' weights rotate from call to call, so the
weights come from HBM, not L2 (8 x 14.7 MB int4 > an H100's 50 MB L2), as tpb_bench's do.
  int4: torch._weight_int4pack_mm(x bf16 [M, K], packed, 32, scales_and_zeros) on weights
        made by torch._convert_weight_to_int4pack (tinygemm's layout, random nibbles);
  bf16: torch.matmul(x, W^T) with W bf16 [N, K] (cuBLAS).
Each time is the mean of --iters calls between CUDA events after --warmup calls. weight_read_us
is the INT4 format's bytes (N K / 2 + N K / 32 x 2: tpbench's packed words and bf16 scales) at
the copy bandwidth measured in this process (a 1 GiB device-to-device copy, read + write), so
`vs_read` = us / weight_read_us is the share the issue's targets speak of.

    python3 bench/int4_torch_reference.py --out int4_torch.json

Writes JSON {"context": {...}, "benchmarks": [{"name", "impl", "proj", "tokens", "us_per_op",
"weight_read_us", "vs_read"}, ...]}; a shape torch refuses is listed with "error". Exits 2 with
one line on stderr when torch or a CUDA device is missing.
"""
import argparse
import json
import sys

PROJS = {"gate_up": (4096, 7168), "down": (7168, 2048)}  # name -> (N out, K in)
TOKENS = (1, 4, 16, 64, 256)
EXPERTS = 8
GROUP = 32


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"int4_torch_reference.py: torch is needed ({e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("int4_torch_reference.py: no CUDA device visible to torch", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(33)

    def mean_us(call):
        for _ in range(args.warmup):
            call()
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(args.iters):
            call()
        stop.record()
        torch.cuda.synchronize()
        return start.elapsed_time(stop) * 1e3 / args.iters

    src = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    copy_us = mean_us(lambda: dst.copy_(src))
    copy_gbps = 2 * src.numel() / (copy_us * 1e-6) / 1e9
    del src, dst
    context = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(dev),
               "copy_GBps": copy_gbps, "experts_rotating": EXPERTS, "group_size": GROUP, "iters": args.iters}
    results = []
    for proj, (n, k) in PROJS.items():
        read_us = (n * k // 2 + n * k // GROUP * 2) / (copy_gbps * 1e9) * 1e6
        packed, bf16_w, error = [], [], None
        try:
            for _ in range(EXPERTS):
                nibbles = torch.randint(0, 256, (n, k // 2), generator=gen, device=dev, dtype=torch.int32).to(torch.uint8)
                packed.append(torch._convert_weight_to_int4pack(nibbles, 8))
            scales = (torch.rand((k // GROUP, n, 2), generator=gen, device=dev) * 0.01).to(torch.bfloat16)
        except (RuntimeError, AttributeError) as e:
            error = str(e).splitlines()[0]
        for _ in range(EXPERTS):
            bf16_w.append((torch.rand((n, k), generator=gen, device=dev) * 0.02 - 0.01).to(torch.bfloat16))
        for tokens in TOKENS:
            x = (torch.rand((tokens, k), generator=gen, device=dev) * 2 - 1).to(torch.bfloat16)
            state = {"i": 0}

            def next_expert():
                state["i"] = (state["i"] + 1) % EXPERTS
                return state["i"]

            rows = {"bf16_cublas": lambda: torch.matmul(x, bf16_w[next_expert()].t())}
            if error is None:
                rows["torch_int4pack"] = lambda: torch._weight_int4pack_mm(x, packed[next_expert()], GROUP, scales)
            else:
                results.append({"name": f"int4_torch/torch_int4pack/{proj}/tokens:{tokens}", "impl": "torch_int4pack",
                                "proj": proj, "tokens": tokens, "error": error})
            for impl, call in rows.items():
                try:
                    us = mean_us(call)
                except RuntimeError as e:
                    results.append({"name": f"int4_torch/{impl}/{proj}/tokens:{tokens}", "impl": impl, "proj": proj,
                                    "tokens": tokens, "error": str(e).splitlines()[0]})
                    continue
                name = f"int4_torch/{impl}/{proj}/tokens:{tokens}"
                results.append({"name": name, "impl": impl, "proj": proj, "tokens": tokens, "us_per_op": us,
                                "weight_read_us": read_us, "vs_read": us / read_us})
                print(f"{name}: {us:.1f} us, {us / read_us:.2f} x the int4 read time ({read_us:.1f} us)")
    with open(args.out, "w") as f:
        json.dump({"context": context, "benchmarks": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
