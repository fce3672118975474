#!/usr/bin/env python3
"""Allreduce tables, two of them.

1. tpb_bench JSON: us per op per backend, eager and graph.
     allreduce_table.py BENCH_JSON [SIZES...]   (sizes in bytes; default: all)

2. tpbench against nccl-tests (issue 21): the stdout of nccl-tests' all_reduce_perf beside the
   results.jsonl of a `tpbench run` of the allreduce workload (scenarios/allreduce-sweep.json),
   one row per message size: nccl-tests' out-of-place time and busbw, tpbench's nccl,
   custom-oneshot, custom-twoshot and auto, and tpbench nccl / nccl-tests with a flag where
   it is more than 10 % off.
     allreduce_table.py --nccl-tests STDOUT --results RESULTS_JSONL [--tp N]
                        [--cuda-graph true|false] [--markdown OUT.md] [--json OUT.json]
   --tp defaults to the ranks nccl-tests ran (its "Rank" lines, else nThread x nGpus) and
   --cuda-graph to whether it replayed graphs (its header's "graph:"), so the two sides time
   the same thing. tpbench cases taken: status ok, role sweep (no control or repeat), the
   workload allreduce, that TP, that cuda_graph, nccl-tests' dtype, not shared placement
   (shared timings measure ranks contending for a GPU). Both sides' time is the mean per
   collective: nccl-tests divides a timed batch by its iterations and averages the ranks;
   tpbench's latency.mean is the mean of its per-batch samples (slowest rank per sample).
   tpbench times out-of-place collectives (separate in and out buffers), so the nccl-tests
   column is its out-of-place one; the JSON keeps in-place too.
   Bad input (a file missing, a row with the wrong columns, a record of the wrong type) is
   one line naming the file, the line and what was expected, exit 2.
"""

import argparse
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "report"))
import results_io as rio  # noqa: E402

BACKENDS = ["nccl", "custom-oneshot", "custom-twoshot", "auto"]
# Issue 21's acceptance: tpbench's own NCCL timing within 10 % of nccl-tests at every size.
NCCL_TESTS_AGREEMENT = 0.10
# nccl-tests' type names (src/common.cu, test_typenames) as tpbench spells the dtype.
NCCL_TESTS_DTYPES = {"bfloat16": "bf16", "half": "f16", "float": "f32"}
# A result row: size count type redop root, then time algbw busbw #wrong out-of-place and
# the same in-place (src/util.cu, writeBenchmarkLinePreamble / writeBenchmarkLineBody).
NCCL_TESTS_COLUMNS = 13


class InputError(Exception):
    """Bad input: main prints it as one line and exits 2."""


# ---- 1. tpb_bench JSON --------------------------------------------------------------------

def bench_table(path, sizes):
    with open(path) as f:
        bench = json.loads(f.read(), strict=False)  # tolerate raw control characters
    want = {int(s) for s in sizes}
    pat = re.compile(r"^allreduce/([a-z-]+)/bf16/(eager|graph)/(\d+)")
    t = {}
    for b in bench.get("benchmarks", []):
        m = pat.match(b.get("name", ""))
        if m and "us_per_op" in b:
            t[(m.group(1), m.group(2), int(m.group(3)))] = (float(b["us_per_op"]), float(b.get("busbw_GBps", 0)))
    rows = sorted({s for (_, _, s) in t if not want or s in want})
    head = "bytes".rjust(10) + "".join(f"{b[:14] + '/' + m[0]:>18}" for m in ("eager", "graph") for b in BACKENDS)
    print(head)
    for s in rows:
        row = str(s).rjust(10)
        for m in ("eager", "graph"):
            for b in BACKENDS:
                v = t.get((b, m, s))
                row += f"{v[0]:>12.2f}us{v[1]:>4.0f}" if v else " " * 18
        print(row)
    print("(each cell: us per op, then busbw GB/s)")


# ---- 2. against nccl-tests ----------------------------------------------------------------

def _number(text, where, column):
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{where}: column {column}: expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise InputError(f"{where}: column {column}: expected a finite number, got {text!r}")
    return value


def _is_integer(text):
    return text.isdigit()


def parse_nccl_tests(path):
    """nccl-tests' stdout -> {"ranks", "graph", "rows": [{bytes, count, type, redop, root,
    out_of_place: {time_us, algbw_GBps, busbw_GBps, wrong}, in_place: {...}}]}. Lines starting
    with '#' are its header and footer; a line whose first two fields are integers is a
    result row and must have all 13 columns; anything else (NCCL's own log lines) is skipped."""
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file (expected the stdout of nccl-tests' all_reduce_perf)")
    n_thread = n_gpus = graph = None
    rank_lines = 0
    rows = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, start=1):
            where = f"{path}:{number}"
            if line.startswith("#"):
                m = re.search(r"nThread (\d+) nGpus (\d+)", line)
                if m:
                    n_thread, n_gpus = int(m.group(1)), int(m.group(2))
                m = re.search(r"graph: (\d+)", line)
                if m:
                    graph = int(m.group(1))
                if re.match(r"#\s+Rank\s+\d+ ", line):
                    rank_lines += 1
                continue
            fields = line.split()
            if len(fields) < 2 or not (_is_integer(fields[0]) and _is_integer(fields[1])):
                continue
            if len(fields) != NCCL_TESTS_COLUMNS:
                raise InputError(
                    f"{where}: expected {NCCL_TESTS_COLUMNS} columns (size count type redop root, then time "
                    f"algbw busbw #wrong out-of-place and in-place), got {len(fields)}")
            sides = {}
            for name, first in (("out_of_place", 5), ("in_place", 9)):
                time_s, algbw, busbw, wrong = fields[first:first + 4]
                sides[name] = {"time_us": _number(time_s, where, first + 1),
                               "algbw_GBps": _number(algbw, where, first + 2),
                               "busbw_GBps": _number(busbw, where, first + 3),
                               "wrong": None if wrong == "N/A" else _number(wrong, where, first + 4)}
            rows.append(dict({"bytes": int(fields[0]), "count": int(fields[1]), "type": fields[2],
                              "redop": fields[3], "root": fields[4]}, **sides))
    if not rows:
        raise InputError(f"{path}: no result row (expected lines of 'size count type redop root time algbw busbw "
                         "#wrong ...' as all_reduce_perf prints them)")
    ranks = rank_lines or (n_thread * n_gpus if n_thread and n_gpus else None)
    return {"ranks": ranks, "graph": graph, "rows": rows}


def tpbench_cells(records, tp, cuda_graph, dtype):
    """{bytes: {backend: {mean_us, p50_us, busbw_GBps, case_id}}} of the records that time
    what nccl-tests timed (see the module's doc)."""
    cells = {}
    for rec in rio.latest_per_case(records):
        placement = rec.get("placement") if isinstance(rec.get("placement"), dict) else {}
        if (rec["status"] != "ok" or rec.get("role", "sweep") != "sweep" or rec.get("workload") != "allreduce"
                or rio.param(rec, "tp") != tp or bool(rio.param(rec, "cuda_graph", False)) != cuda_graph
                or (dtype and rio.param(rec, "dtype") != dtype) or placement.get("placement") == "shared"):
            continue
        size, backend, mean = rio.message_bytes(rec), rio.backend(rec), rio.latency(rec, "mean")
        if size is None or mean is None:
            continue
        cells.setdefault(int(size), {})[backend] = {
            "mean_us": mean, "p50_us": rio.latency(rec), "busbw_GBps": rio.metric(rec, "busbw_GBps"),
            "case_id": rec["case_id"]}
    return cells


def compare_with_nccl_tests(nccl_tests, cells, tolerance=NCCL_TESTS_AGREEMENT):
    """One row per size either side measured, smallest first; ratio = tpbench nccl mean /
    nccl-tests out-of-place time, outside = |ratio - 1| > tolerance (None without both)."""
    by_size = {r["bytes"]: r for r in nccl_tests["rows"]}
    rows = []
    for size in sorted(set(by_size) | set(cells)):
        peer = by_size.get(size)
        ours = cells.get(size, {})
        ratio = None
        if peer and "nccl" in ours and peer["out_of_place"]["time_us"] > 0:
            ratio = ours["nccl"]["mean_us"] / peer["out_of_place"]["time_us"]
        rows.append({"bytes": size, "nccl_tests": peer, "tpbench": {b: ours.get(b) for b in BACKENDS},
                     "ratio": ratio, "outside": None if ratio is None else abs(ratio - 1) > tolerance})
    return rows


def _cell(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def markdown_table(rows, tolerance=NCCL_TESTS_AGREEMENT):
    head = ["bytes", "nccl-tests µs", "nccl-tests busbw GB/s"] + [f"tpbench {b} µs" for b in BACKENDS] + [
        "tpbench nccl / nccl-tests", "flag"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        peer = r["nccl_tests"]["out_of_place"] if r["nccl_tests"] else {}
        flag = "" if r["outside"] is None else (f"OUTSIDE {tolerance:.0%}" if r["outside"] else "ok")
        cells = [str(r["bytes"]), _cell(peer.get("time_us")), _cell(peer.get("busbw_GBps"))]
        cells += [_cell((r["tpbench"][b] or {}).get("mean_us")) for b in BACKENDS]
        cells += [_cell(r["ratio"], 3), flag]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _bool(text):
    if text not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text == "true"


def nccl_tests_main(argv):
    parser = argparse.ArgumentParser(prog="allreduce_table.py", description=__doc__.split("\n\n")[2])
    parser.add_argument("--nccl-tests", required=True, help="stdout of all_reduce_perf")
    parser.add_argument("--results", required=True, help="results.jsonl of a tpbench allreduce run")
    parser.add_argument("--tp", type=int, help="tpbench cases of this TP (default: nccl-tests' ranks)")
    parser.add_argument("--cuda-graph", type=_bool, help="true|false (default: as nccl-tests ran)")
    parser.add_argument("--markdown", help="also write the table here")
    parser.add_argument("--json", help="write the rows as JSON here")
    args = parser.parse_args(argv)
    peer = parse_nccl_tests(args.nccl_tests)
    tp = args.tp or peer["ranks"]
    if not tp:
        raise InputError(f"{args.nccl_tests}: no 'nThread N nGpus N' header and no '#  Rank' lines: pass --tp")
    cuda_graph = args.cuda_graph if args.cuda_graph is not None else bool(peer["graph"])
    types = {r["type"] for r in peer["rows"]}
    dtype = NCCL_TESTS_DTYPES.get(types.pop()) if len(types) == 1 else None
    try:
        records = rio.load_results(args.results)
    except rio.ReportInputError as err:
        raise InputError(str(err)) from None
    rows = compare_with_nccl_tests(peer, tpbench_cells(records, tp, cuda_graph, dtype))
    table = markdown_table(rows)
    caption = (f"tpbench TP {tp}, cuda_graph {str(cuda_graph).lower()}, dtype {dtype or 'any'} "
               f"({args.results}) against nccl-tests ({args.nccl_tests}, {peer['ranks']} ranks, graph "
               f"{peer['graph']}); times are the mean µs per collective, nccl-tests out-of-place.\n")
    outside = [r["bytes"] for r in rows if r["outside"]]
    compared = sum(r["ratio"] is not None for r in rows)
    if not compared:
        verdict = "no size has both a nccl-tests row and a tpbench nccl case of that TP, graph mode and dtype\n"
    elif outside:
        verdict = (f"tpbench nccl outside {NCCL_TESTS_AGREEMENT:.0%} of nccl-tests at {len(outside)} of {compared} "
                   f"size(s): {', '.join(map(str, outside))}\n")
    else:
        verdict = f"tpbench nccl within {NCCL_TESTS_AGREEMENT:.0%} of nccl-tests at all {compared} size(s) both measured\n"
    sys.stdout.write(caption + "\n" + table + "\n" + verdict)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(caption + "\n" + table + "\n" + verdict)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"tp": tp, "cuda_graph": cuda_graph, "dtype": dtype, "tolerance": NCCL_TESTS_AGREEMENT,
                       "nccl_tests": {"file": args.nccl_tests, "ranks": peer["ranks"], "graph": peer["graph"]},
                       "results": args.results, "outside": outside, "rows": rows}, f, indent=1)
            f.write("\n")
    return 0


def main(argv):
    try:
        if any(a.startswith("--nccl-tests") for a in argv[1:]):
            return nccl_tests_main(argv[1:])
        if len(argv) < 2:
            sys.stderr.write(__doc__)
            return 2
        bench_table(argv[1], argv[2:])
        return 0
    except InputError as err:
        sys.stderr.write(f"allreduce_table.py: error: {err}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
