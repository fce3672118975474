#!/usr/bin/env python3
"""tpbench report: plots (PNG), report.html and summary.md for one results folder.

usage: make_report.py RESULTS_DIR [--out DIR]

Reads RESULTS_DIR/results.jsonl (required) and RESULTS_DIR/run.json (optional: provenance,
scenario, case list) and writes into RESULTS_DIR (or --out). It holds the contract of
tpbench's C++ commands: every problem is one line on stderr, never a traceback.
Exit status: 0 written; 1 a file could not be written (a full or read-only disk: the line
names the file and the reason; each file is whole or left as it was); 2 bad input (the line
names the file, the line number and the JSON path); 3 Python older than 3.8 or no matplotlib
(the report cannot be made on this machine: `tpbench run` says so and keeps its verdict);
128 + the signal when interrupted (Ctrl-C, SIGTERM, SIGHUP).
`tpbench report RESULTS_DIR` runs this script; so does `tpbench run` unless --no-report.
"""

import argparse
import os
import signal
import sys

PROG = "tpbench report"
EXIT_UNAVAILABLE = 3  # suite/cli/report.h kReportUnavailable


class Interrupted(BaseException):
    """Ctrl-C, SIGTERM or SIGHUP: unwinds (so a half-written file is removed), then exits
    128 + the signal with one line."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum, _frame):
    # A second signal while the first unwinds ends at once.
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, lambda n, _f: os._exit(128 + n))
    raise Interrupted(signum)


for _signal in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(_signal, _on_signal)

if sys.version_info < (3, 8):
    sys.stderr.write(f"{PROG}: error: needs Python 3.8 or newer\n")
    sys.exit(EXIT_UNAVAILABLE)


def _load_modules():
    """The report's modules (matplotlib among them), imported where an interrupt is caught."""
    try:
        import matplotlib  # noqa: F401  (imported here only to give a clear message)
    except ImportError:
        sys.stderr.write(
            f"{PROG}: error: matplotlib is not installed for {sys.executable}; "
            "install it with `apt-get install python3-matplotlib` (or `pip install matplotlib`)\n")
        sys.exit(EXIT_UNAVAILABLE)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    global html_report, markdown_report, output_files, plots, results_io
    import html_report
    import markdown_report
    import output_files
    import plots
    import results_io


PNG_NAMES = {"allreduce": "allreduce.png", "decode": "decode_latency.png",
             "prefill": "prefill_latency.png", "roofline": "roofline.png",
             "speedup": "speedup_heatmap.png", "throughput": "throughput_latency.png",
             "ttft": "prefill_ttft.png",
             "memory": "memory.png", "kv_tokens": "kv_tokens.png", "baseline": "baseline.png"}


def make_report(results_dir, out_dir):
    """Writes every output file; returns their paths. Raises ReportInputError (bad input,
    before anything is written) or ReportOutputError (a file could not be written)."""
    if not os.path.isdir(results_dir):
        raise results_io.ReportInputError(f"{results_dir}: not a folder (expected a results "
                                          "folder with results.jsonl)")
    records = results_io.latest_per_case(
        results_io.load_results(os.path.join(results_dir, "results.jsonl")))
    run = results_io.load_run(os.path.join(results_dir, "run.json"))
    output_files.make_folder(out_dir)
    figures = plots.all_figures(records, out_dir)
    written = []
    for fig in figures:
        if isinstance(fig, plots.Figure):
            written.append(fig.path)
        else:
            # A plot from an earlier report of this folder would now be stale.
            stale = os.path.join(out_dir, PNG_NAMES.get(fig.key, ""))
            if os.path.isfile(stale):
                output_files.remove(stale)
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
    _load_modules()
    try:
        written, figures = make_report(args.results_dir, args.out or args.results_dir)
    except results_io.ReportInputError as err:
        sys.stderr.write(f"{PROG}: error: {err}\n")
        return 2
    except output_files.ReportOutputError as err:
        sys.stderr.write(f"{PROG}: failed: {err}; the report is not complete\n")
        return 1
    # Sections without data are said in the report itself; the terminal gets them on request.
    for fig in figures:
        if isinstance(fig, plots.Skipped) and args.verbose:
            print(f"skipped {fig.key}: {fig.note}")
    for path in written:
        if not args.quiet:
            print(f"wrote {path}")
    return 0


def run(argv):
    """main() with the contract held whatever happens: one line, never a traceback."""
    try:
        return main(argv)
    except Interrupted as err:
        name = signal.Signals(err.signum).name
        sys.stderr.write(f"{PROG}: interrupted by {name}; the report is not complete\n")
        return 128 + err.signum
    except BrokenPipeError:
        # Whoever read the list of files stopped reading; the files are written.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except MemoryError:
        sys.stderr.write(f"{PROG}: failed: out of memory; the report is not complete\n")
        return 1
    except Exception as err:  # a bug in these scripts; still one line, and how to see more
        if os.environ.get("TPB_REPORT_TRACEBACK"):
            raise
        sys.stderr.write(f"{PROG}: failed: internal error ({type(err).__name__}) while making "
                         "the report; TPB_REPORT_TRACEBACK=1 shows where\n")
        return 1


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
