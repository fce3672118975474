#!/usr/bin/env python3
"""make_report.py's contract, called in this process (tests/cli/report*.sh and
test_malformed.py hold it through the command line): exit 0 with every file named, 2 for bad
input with one line naming the file, the line and the JSON path, 1 when a file cannot be
written, 128 + the signal when interrupted, one line and 1 for a bug (a traceback only when
TPB_REPORT_TRACEBACK asks); the last record of a case is the one reported, once; a plot left
from an earlier report whose data is gone is removed. In-process, so that
scripts/mutation_report.py (mutmut) sees which rule each test holds."""

import contextlib
import io
import json
import os
import signal
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "report"))
try:
    import matplotlib  # noqa: F401
except ImportError:
    print("skipped: matplotlib is not installed")
    sys.exit(77)
# make_report installs its signal handlers when imported; the test process keeps its own.
_saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
import make_report  # noqa: E402
for _signal, _handler in _saved.items():
    signal.signal(_signal, _handler)


def record(case_id, status="ok", **fields):
    return dict({"case_id": case_id, "status": status, "params": {}}, **fields)


# A case retried after a failure and a skipped case: nothing to plot (a plot takes half a
# second, and mutmut runs these tests for each mutant they reach).
RECORDS = [
    record("a", "failed", error="boom", params={"mode": "decode", "allreduce": "nccl"}),
    record("s", "skipped", error="needs 2 GPUs"),
    record("a", "ok", params={"mode": "decode", "allreduce": "nccl"}),
]
# One allreduce point: the allreduce plot is drawn.
PLOTTED = RECORDS + [record("ar", workload="allreduce", params={"allreduce": "nccl", "message_bytes": 1024},
                            latency={"p50": 10.0, "p99": 12.0}, throughput={"busbw_GBps": 1.5})]


class Report(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory(prefix="tpb-report-exit-")
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name

    def write(self, lines, name="results.jsonl"):
        with open(os.path.join(self.dir, name), "w", encoding="utf-8") as f:
            f.write("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))

    def run_report(self, *argv, entry=None):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = (entry or make_report.main)(list(argv))
        return rc, out.getvalue(), err.getvalue()

    def read(self, name, folder=None):
        with open(os.path.join(folder or self.dir, name), encoding="utf-8") as f:
            return f.read()


class Written(Report):
    def test_exit_0_names_every_file_written_and_the_last_record_of_a_case_counts_once(self):
        self.write(RECORDS)
        rc, out, err = self.run_report(self.dir)
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(out.splitlines(), [f"wrote {os.path.join(self.dir, name)}"
                                            for name in ("report.html", "summary.md")])
        summary = self.read("summary.md")
        self.assertIn("**PASS: 2 cases: 1 ok, 0 infeasible, 0 failed, 1 skipped, 0 fallback; 0 failed check(s); "
                      "no baseline compared**", summary)
        self.assertNotIn("boom", summary)
        self.assertIn("2 cases: 1 ok", self.read("report.html"))

    def test_quiet_prints_nothing_and_verbose_names_the_sections_left_empty(self):
        self.write(RECORDS)
        self.assertEqual(self.run_report(self.dir, "--quiet"), (0, "", ""))
        rc, out, _ = self.run_report(self.dir, "--verbose", "--quiet")
        self.assertEqual(rc, 0)
        lines = out.splitlines()
        self.assertEqual(len(lines), 10)
        self.assertIn("skipped baseline: no baseline comparisons with a ratio in this run", lines)
        self.assertTrue(all(line.startswith("skipped ") for line in lines), lines)
        self.assertEqual(self.run_report(self.dir, "--verbose")[1].splitlines()[10:],
                         [f"wrote {os.path.join(self.dir, name)}" for name in ("report.html", "summary.md")])

    def test_out_writes_elsewhere_and_a_stale_plot_is_removed_the_drawn_one_kept(self):
        self.write(PLOTTED)
        out_dir = os.path.join(self.dir, "new", "report")
        for name in ("decode_latency.png", "allreduce.png", "notes.png"):
            os.makedirs(out_dir, exist_ok=True)
            with open(os.path.join(out_dir, name), "wb") as f:
                f.write(b"old")
        rc, out, _ = self.run_report(self.dir, "--out", out_dir)
        self.assertEqual(rc, 0)
        self.assertEqual(sorted(os.listdir(out_dir)), ["allreduce.png", "notes.png", "report.html", "summary.md"])
        with open(os.path.join(out_dir, "allreduce.png"), "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "summary.md")))
        self.assertEqual(out.splitlines(), [f"wrote {os.path.join(out_dir, name)}"
                                            for name in ("allreduce.png", "report.html", "summary.md")])

    def test_make_report_returns_the_paths_and_the_figures(self):
        self.write(RECORDS)
        written, figures = make_report.make_report(self.dir, self.dir)
        self.assertEqual(written, [os.path.join(self.dir, n) for n in ("report.html", "summary.md")])
        self.assertEqual(sorted(f.key for f in figures if isinstance(f, make_report.plots.Skipped)),
                         sorted(make_report.PNG_NAMES))


class Refused(Report):
    def test_bad_input_is_exit_2_with_one_line_naming_the_file_line_and_path(self):
        self.write([record("a"), '{"case_id": "b", "status": "ok", "params": {"tp": "two"}}'])
        rc, out, err = self.run_report(self.dir)
        path = os.path.join(self.dir, "results.jsonl")
        self.assertEqual((rc, out), (2, ""))
        self.assertEqual(err, f"tpbench report: error: {path}:2: $.params.tp: expected number or null, "
                              'got string "two"\n')
        self.assertFalse(os.path.exists(os.path.join(self.dir, "summary.md")))

    def test_a_bad_run_json_and_a_missing_folder_are_exit_2(self):
        self.write(RECORDS)
        self.write(["[]"], "run.json")
        rc, _, err = self.run_report(self.dir)
        self.assertEqual((rc, err), (2, f"tpbench report: error: {os.path.join(self.dir, 'run.json')}: $: expected "
                                        "an object, got array\n"))
        missing = os.path.join(self.dir, "gone")
        rc, _, err = self.run_report(missing)
        self.assertEqual((rc, err), (2, f"tpbench report: error: {missing}: not a folder (expected a results folder "
                                        "with results.jsonl)\n"))
        rc, _, err = self.run_report(self.dir + "/results.jsonl")
        self.assertEqual(rc, 2)

    def test_a_file_that_cannot_be_written_is_exit_1_with_one_line(self):
        self.write(RECORDS)
        blocked = os.path.join(self.dir, "results.jsonl", "out")  # a folder under a file
        rc, out, err = self.run_report(self.dir, "--out", blocked)
        self.assertEqual((rc, out), (1, ""))
        self.assertEqual(err, f"tpbench report: failed: cannot create the folder {blocked} (Not a directory); the "
                              "report is not complete\n")


class Usage(Report):
    def test_a_usage_error_is_exit_2_naming_tpbench_report_and_help_describes_every_option(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as caught:
            make_report.main([])
        self.assertEqual(caught.exception.code, 2)
        self.assertEqual(err.getvalue().splitlines()[-1],
                         "tpbench report: error: the following arguments are required: results_dir")
        out = io.StringIO()
        columns = os.environ.get("COLUMNS")
        os.environ["COLUMNS"] = "200"  # argparse wraps at the terminal's width
        self.addCleanup(lambda: os.environ.pop("COLUMNS") if columns is None else os.environ.update(COLUMNS=columns))
        with contextlib.redirect_stdout(out), self.assertRaises(SystemExit) as caught:
            make_report.main(["--help"])
        self.assertEqual(caught.exception.code, 0)
        lines = [" ".join(line.split()) for line in out.getvalue().splitlines()]
        self.assertEqual(lines[0], "usage: tpbench report [-h] [--out OUT] [--quiet] [--verbose] results_dir")
        for described in ("Plots, report.html and summary.md from RESULTS_DIR/results.jsonl.",
                          "results_dir folder holding results.jsonl (and run.json)",
                          "--out OUT write here instead of RESULTS_DIR",
                          "--quiet print nothing on success (tpbench run names the report itself)",
                          "--verbose also list the sections left empty and why (the report says it too)"):
            self.assertIn(described, lines)


class Contract(Report):
    """run(): whatever main() does, one line and an exit status."""

    def with_main(self, effect):
        saved = make_report.main
        make_report.main = effect
        self.addCleanup(setattr, make_report, "main", saved)

    def raising(self, error):
        def main(argv):
            raise error
        self.with_main(main)

    def test_run_passes_main_on(self):
        self.with_main(lambda argv: len(argv) + 40)
        self.assertEqual(self.run_report("a", "b", entry=make_report.run), (42, "", ""))

    def test_an_interrupt_is_128_plus_the_signal_with_one_line(self):
        for signum, name in ((signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM"), (signal.SIGHUP, "SIGHUP")):
            self.raising(make_report.Interrupted(signum))
            self.assertEqual(self.run_report(entry=make_report.run),
                             (128 + signum, "", f"tpbench report: interrupted by {name}; the report is not complete\n"))

    def test_out_of_memory_and_a_bug_are_1_with_one_line(self):
        self.raising(MemoryError())
        self.assertEqual(self.run_report(entry=make_report.run),
                         (1, "", "tpbench report: failed: out of memory; the report is not complete\n"))
        self.raising(KeyError("x"))
        saved = os.environ.pop("TPB_REPORT_TRACEBACK", None)
        self.addCleanup(lambda: saved is None or os.environ.__setitem__("TPB_REPORT_TRACEBACK", saved))
        self.assertEqual(self.run_report(entry=make_report.run),
                         (1, "", "tpbench report: failed: internal error (KeyError) while making the report; "
                                 "TPB_REPORT_TRACEBACK=1 shows where\n"))
        os.environ["TPB_REPORT_TRACEBACK"] = "1"
        self.addCleanup(os.environ.pop, "TPB_REPORT_TRACEBACK", None)
        with self.assertRaises(KeyError):
            self.run_report(entry=make_report.run)

    def test_a_reader_that_stopped_reading_is_0_and_stdout_goes_to_dev_null(self):
        self.raising(BrokenPipeError())
        with tempfile.TemporaryFile() as f:
            class Stdout(io.StringIO):
                def fileno(self):
                    return f.fileno()

            saved = sys.stdout
            sys.stdout = Stdout()
            try:
                rc = make_report.run([])
            finally:
                sys.stdout = saved
            null = os.stat(os.devnull)
            now = os.fstat(f.fileno())
            self.assertEqual((rc, now.st_ino, now.st_dev), (0, null.st_ino, null.st_dev))


if __name__ == "__main__":
    unittest.main()
