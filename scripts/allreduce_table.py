#!/usr/bin/env python3
"""Prints the allreduce table (us per op, per backend, eager and graph) from tpb_bench JSON.

usage: allreduce_table.py BENCH_JSON [SIZES...]   (sizes in bytes; default: all)
"""
import json
import re
import sys


def main(argv):
    with open(argv[1]) as f:
        bench = json.loads(f.read(), strict=False)  # tolerate raw control characters
    want = {int(s) for s in argv[2:]}
    pat = re.compile(r"^allreduce/([a-z-]+)/bf16/(eager|graph)/(\d+)")
    t = {}
    for b in bench.get("benchmarks", []):
        m = pat.match(b.get("name", ""))
        if m and "us_per_op" in b:
            t[(m.group(1), m.group(2), int(m.group(3)))] = (float(b["us_per_op"]), float(b.get("busbw_GBps", 0)))
    backends = ["nccl", "custom-oneshot", "custom-twoshot", "auto"]
    sizes = sorted({s for (_, _, s) in t if not want or s in want})
    head = "bytes".rjust(10) + "".join(f"{b[:14] + '/' + m[0]:>18}" for m in ("eager", "graph") for b in backends)
    print(head)
    for s in sizes:
        row = str(s).rjust(10)
        for m in ("eager", "graph"):
            for b in backends:
                v = t.get((b, m, s))
                row += f"{v[0]:>12.2f}us{v[1]:>4.0f}" if v else " " * 18
        print(row)
    print("(each cell: us per op, then busbw GB/s)")


if __name__ == "__main__":
    main(sys.argv)
