#!/usr/bin/env python3
"""Measured thresholds for the `auto` allreduce backend, from tpb_bench JSON.

Reads the graph-replay bf16 results of nccl, custom-oneshot and custom-twoshot and writes
allreduce_thresholds.json (schema tpb.allreduce_thresholds.v1, read by
reference_engine/comm/auto): one-shot up to the largest size of the leading run of sizes
where one-shot is the fastest, two-shot from there up to the largest size of the following
run where two-shot beats NCCL, NCCL above. The per-size times go into the file too.

usage: allreduce_thresholds.py BENCH_JSON OUT_JSON
"""
import json
import re
import sys
from datetime import datetime, timezone


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    with open(argv[1]) as f:
        bench = json.loads(f.read(), strict=False)  # tolerate raw control characters
    times = {}  # (backend, bytes) -> us per op
    pat = re.compile(r"^allreduce/([a-z-]+)/bf16/graph/(\d+)")
    for b in bench.get("benchmarks", []):
        m = pat.match(b.get("name", ""))
        if m and "us_per_op" in b:
            times[(m.group(1), int(m.group(2)))] = float(b["us_per_op"])
    sizes = sorted({s for (k, s) in times if k == "nccl"})
    rows = [s for s in sizes if all((k, s) in times for k in ("nccl", "custom-oneshot", "custom-twoshot"))]
    if not rows:
        sys.exit(f"{argv[1]}: no graph-mode nccl/custom-oneshot/custom-twoshot results")
    oneshot_max = 0
    i = 0
    while i < len(rows):
        s = rows[i]
        one, two, nccl = times[("custom-oneshot", s)], times[("custom-twoshot", s)], times[("nccl", s)]
        if one <= two and one <= nccl:
            oneshot_max = s
            i += 1
        else:
            break
    twoshot_max = oneshot_max
    while i < len(rows):
        s = rows[i]
        if times[("custom-twoshot", s)] <= times[("nccl", s)]:
            twoshot_max = s
            i += 1
        else:
            break
    ctx = bench.get("context", {})
    out = {
        "schema": "tpb.allreduce_thresholds.v1",
        "hardware": {
            "gpu": ctx.get("gpu", "unknown"),
            "gpu_count": int(ctx.get("gpu_count", "0")),
            "cuda_driver": ctx.get("cuda_driver", ""),
            "nccl": ctx.get("nccl", ""),
            "peer_access": ctx.get("peer_access", ""),
        },
        "world_size": int(ctx.get("ranks", "0")),
        "dtype": "bf16",
        "mode": "graph",
        "oneshot_max_bytes": oneshot_max,
        "twoshot_max_bytes": twoshot_max,
        "measured_at": ctx.get("date", datetime.now(timezone.utc).isoformat()),
        "measured_by": "tpb_bench (bench/allreduce_bench.cpp) via scripts/gpu_run.sh; scripts/allreduce_thresholds.py",
        "samples_us_per_op": [
            {"bytes": s, "nccl": times[("nccl", s)], "custom-oneshot": times[("custom-oneshot", s)],
             "custom-twoshot": times[("custom-twoshot", s)]}
            for s in rows
        ],
    }
    with open(argv[2], "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"oneshot_max_bytes={oneshot_max} twoshot_max_bytes={twoshot_max} -> {argv[2]}")


if __name__ == "__main__":
    main(sys.argv)
