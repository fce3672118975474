#!/usr/bin/env python3
"""A failing check whose sides were rerun at instrumentation=digests shows where they part:
summary.md and report.html carry a "Where failing checks' sides part" table built from
run.json's summary.checks[].localization (site, layer, forward, inputs, differences) with the
ids of the rerun records; a run without localizations has no such section."""

import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "report"))
import report_test_util as util  # noqa: E402
import tables  # noqa: E402

LOCALIZATION = {
    "compared": True, "found": True, "sides": ["decode tp2 b3 s17 graph nccl", "decode tp2 b3 s17 graph custom-oneshot"],
    "site": "layer 2 moe all_reduce", "layer": 2, "forward": 0, "call": 6, "rank": 0, "mode": "bitwise",
    "inputs_equal": True, "max_abs_diff": 0.0312, "max_rel_diff": 0.0625, "rel_l2": 0.0625, "samples": 64,
    "calls_agreeing": 6, "reruns": ["aaaaaaaaaaaaaaaa.digests", "bbbbbbbbbbbbbbbb.digests"],
    "sentence": "first divergence at layer 2 moe all_reduce (collective 6 of the case, forward 0, rank 0; the 6 "
                "before it agree): inputs equal, outputs differ: the collective itself returned another result",
}


def run_with_localization(run):
    run = json.loads(json.dumps(run))
    summary = run.setdefault("summary", {}) or {}
    run["summary"] = summary
    checks = summary.setdefault("checks", {}) or {}
    summary["checks"] = checks
    checks["equal_across_allreduce"] = [{"status": "fail", "detail": "nccl vs custom-oneshot: digests differ\nlocalized: "
                                         + LOCALIZATION["sentence"], "cases": ["aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"],
                                         "localization": LOCALIZATION}]
    return run


class LocalizationTable(unittest.TestCase):
    def test_rows_from_run_json(self):
        table = tables.localization_table(run_with_localization({}))
        self.assertEqual(len(table.rows), 1)
        self.assertEqual(table.rows[0][:6], ["equal_across_allreduce", "decode tp2 b3 s17 graph nccl vs decode tp2 b3 "
                                             "s17 graph custom-oneshot", "layer 2 moe all_reduce", 2, 0, "equal"])
        self.assertEqual(table.rows[0][-1], "aaaaaaaaaaaaaaaa.digests, bbbbbbbbbbbbbbbb.digests")
        self.assertEqual(tables.localization_table({}).rows, [])


class LocalizationReport(unittest.TestCase):
    def test_report_shows_where_the_sides_part(self):
        tmp = util.fixture_copy()
        self.addCleanup(tmp.cleanup)
        path = os.path.join(tmp.name, "run.json")
        with open(path, encoding="utf-8") as f:
            run = json.load(f)
        result = util.run_report(tmp.name)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(os.path.join(tmp.name, "summary.md"), encoding="utf-8") as f:
            self.assertNotIn("sides part", f.read())
        with open(path, "w", encoding="utf-8") as f:
            json.dump(run_with_localization(run), f)
        result = util.run_report(tmp.name)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(os.path.join(tmp.name, "summary.md"), encoding="utf-8") as f:
            md = f.read()
        with open(os.path.join(tmp.name, "report.html"), encoding="utf-8") as f:
            page = f.read()
        section = md.split("## Where failing checks' sides part", 1)[1]
        self.assertIn("| equal_across_allreduce | decode tp2 b3 s17 graph nccl vs decode tp2 b3 s17 graph custom-oneshot "
                      "| layer 2 moe all_reduce | 2 | 0 | equal | 0.0312 | 0.0625 | 0.0625 |", section)
        self.assertIn('<h2 id="localization">', page)
        self.assertIn("layer 2 moe all_reduce", page)


if __name__ == "__main__":
    unittest.main()
