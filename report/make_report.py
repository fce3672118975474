#!/usr/bin/env python3
"""tpbench report: plots (PNG), report.html and summary.md for one results folder.

usage: make_report.py RESULTS_DIR [--out DIR]

Reads RESULTS_DIR/results.jsonl (required) and RESULTS_DIR/run.json (optional: provenance,
scenario, case list) and writes into RESULTS_DIR (or --out). Exit status: 0 written,
2 bad input (a malformed line names the file and line) or a missing dependency.
`tpbench report RESULTS_DIR` runs this script; so does `tpbench run` unless --no-report.
"""

import argparse
import os
import sys

if sys.version_info < (3, 8):
    sys.stderr.write("tpbench report: needs Python 3.8 or newer\n")
    sys.exit(2)

try:
    import matplotlib  # noqa: F401  (imported here only to give a clear message)
except ImportError:
    sys.stderr.write(
        f"tpbench report: error: matplotlib is not installed for {sys.executable}; "
        "install it with `apt-get install python3-matplotlib` (or `pip install matplotlib`)\n")
    sys.exit(2)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import html_report  # noqa: E402
import markdown_report  # noqa: E402
import plots  # noqa: E402
import results_io  # noqa: E402

PNG_NAMES = {"allreduce": "allreduce.png", "decode": "decode_latency.png",
             "prefill": "prefill_latency.png", "roofline": "roofline.png",
             "speedup": "speedup_heatmap.png", "throughput": "throughput_latency.png",
             "ttft": "prefill_ttft.png",
             "memory": "memory.png", "kv_tokens": "kv_tokens.png", "baseline": "baseline.png"}


def make_report(results_dir, out_dir):
    """Writes every output file; returns their paths. Raises ReportInputError."""
    if not os.path.isdir(results_dir):
        raise results_io.ReportInputError(f"{results_dir}: not a folder (expected a results "
                                          "folder with results.jsonl)")
    records = results_io.latest_per_case(
        results_io.load_results(os.path.join(results_dir, "results.jsonl")))
    run = results_io.load_run(os.path.join(results_dir, "run.json"))
    os.makedirs(out_dir, exist_ok=True)
    figures = plots.all_figures(records, out_dir)
    written = []
    for fig in figures:
        if isinstance(fig, plots.Figure):
            written.append(fig.path)
        else:
            # A plot from an earlier report of this folder would now be stale.
            stale = os.path.join(out_dir, PNG_NAMES.get(fig.key, ""))
            if os.path.isfile(stale):
                os.remove(stale)
    html_path = os.path.join(out_dir, "report.html")
    md_path = os.path.join(out_dir, "summary.md")
    html_report.write(html_path, run, records, figures)
    markdown_report.write(md_path, run, records, figures)
    return written + [html_path, md_path], figures


def main(argv):
    parser = argparse.ArgumentParser(
        prog="tpbench report",
        description="Plots, report.html and summary.md from RESULTS_DIR/results.jsonl.")
    parser.add_argument("results_dir", help="folder holding results.jsonl (and run.json)")
    parser.add_argument("--out", help="write here instead of RESULTS_DIR")
    parser.add_argument("--quiet", action="store_true",
                        help="print nothing on success (tpbench run names the report itself)")
    parser.add_argument("--verbose", action="store_true",
                        help="also list the sections left empty and why (the report says it too)")
    args = parser.parse_args(argv)
    try:
        written, figures = make_report(args.results_dir, args.out or args.results_dir)
    except results_io.ReportInputError as err:
        sys.stderr.write(f"tpbench report: error: {err}\n")
        return 2
    # Sections without data are said in the report itself; the terminal gets them on request.
    for fig in figures:
        if isinstance(fig, plots.Skipped) and args.verbose:
            print(f"skipped {fig.key}: {fig.note}")
    for path in written:
        if not args.quiet:
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
