#!/usr/bin/env python3
"""Bad input gets one clear line naming the file, the line and the JSON path, exit 2, no
traceback and no partial report."""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_test_util as util  # noqa: E402


class Malformed(unittest.TestCase):
    def setUp(self):
        self.tmp = util.fixture_copy()
        self.dir = self.tmp.name
        self.results = os.path.join(self.dir, "results.jsonl")
        with open(self.results, encoding="utf-8") as f:
            self.lines = f.read().splitlines()

    def tearDown(self):
        self.tmp.cleanup()

    def write_lines(self, lines):
        with open(self.results, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")

    def replace_line(self, number, text):
        lines = list(self.lines)
        lines[number - 1] = text
        self.write_lines(lines)

    def edit_record(self, number, edit):
        rec = json.loads(self.lines[number - 1])
        edit(rec)
        self.replace_line(number, json.dumps(rec))

    def expect_error(self, *fragments):
        proc = util.run_report(self.dir)
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        for fragment in fragments:
            self.assertIn(fragment, proc.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "report.html")))
        return proc.stderr

    def test_truncated_line_names_its_number(self):
        self.replace_line(3, self.lines[2][: len(self.lines[2]) // 2])
        self.expect_error(f"{self.results}:3:", "not valid JSON")

    def test_garbage_line(self):
        self.replace_line(57, "this is not json")
        self.expect_error(f"{self.results}:57:", "not valid JSON")

    def test_not_an_object(self):
        self.replace_line(2, "[1, 2, 3]")
        self.expect_error(f"{self.results}:2:", "$:", "JSON object")

    def test_unknown_status(self):
        self.edit_record(5, lambda r: r.update(status="exploded"))
        self.expect_error(f"{self.results}:5:", "$.status", "ok, infeasible, failed, skipped",
                          '"exploded"')

    def test_missing_case_id(self):
        self.edit_record(4, lambda r: r.pop("case_id"))
        self.expect_error(f"{self.results}:4:", "$.case_id", "required")

    def test_wrong_type_deep_in_record(self):
        self.edit_record(6, lambda r: r["latency"].update(p50="fast"))
        self.expect_error(f"{self.results}:6:", "$.latency.p50", "expected number")

    def test_sample_not_a_number(self):
        self.edit_record(7, lambda r: r["latency"]["samples_us"].__setitem__(2, None))
        self.expect_error(f"{self.results}:7:", "$.latency.samples_us[2]")

    def test_check_without_status(self):
        self.edit_record(8, lambda r: r["checks"]["matches_reference"].pop("status"))
        self.expect_error(f"{self.results}:8:", "$.checks.matches_reference.status")

    def test_missing_results_file(self):
        os.remove(self.results)
        self.expect_error("results.jsonl: no such file")

    def test_malformed_run_json(self):
        with open(os.path.join(self.dir, "run.json"), "w") as f:
            f.write('{"provenance": {\n  "git_sha": }\n')
        self.expect_error(os.path.join(self.dir, "run.json") + ":2:", "not valid JSON")

    def test_blank_lines_are_not_errors(self):
        self.write_lines(self.lines[:10] + ["", "   "] + self.lines[10:] + [""])
        proc = util.run_report(self.dir)
        self.assertEqual(proc.returncode, 0, proc.stderr)

    def test_not_a_folder(self):
        proc = util.run_report(os.path.join(self.dir, "nope"))
        self.assertEqual(proc.returncode, 2)
        self.assertIn("not a folder", proc.stderr)


if __name__ == "__main__":
    unittest.main()
