#!/usr/bin/env python3
"""A case whose requested allreduce backend fell back to another (status "fallback",
record.allreduce_ran) never reads as the requested backend ok: summary.md and report.html count
it in the headline, list it among the cases not ok, and show what ran in "Allreduce backends as
they ran", beside the partial fallbacks; cases that ran as requested stay out of that table."""

import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "report"))
import report_test_util as util  # noqa: E402
import tables  # noqa: E402

NOTE = ("custom-oneshot requested, nccl ran all 31 allreduce calls [nccl 31 calls (14 KiB to 14 MiB)] "
        "(no peer access between GPU 0 and GPU 1: using nccl)")


def ran(requested, entries, verdict, why=None):
    return {"requested": requested, "backend": entries[0]["backend"] if len(entries) == 1 else requested,
            "ran": entries, "verdict": verdict, "fallback": why}


def entry(backend, calls, lo, hi):
    return {"backend": backend, "calls": calls, "bytes_min": lo, "bytes_max": hi}


def records():
    base = {"role": "sweep", "workload": "engine", "device": "cuda", "error": None}
    return [
        dict(base, case_id="f000000000000001", label="decode tp2 b1 s1024 custom-oneshot", status="fallback",
             error=NOTE, params={"tp": 2, "allreduce": "custom-oneshot"},
             allreduce_ran=ran("custom-oneshot", [entry("nccl", 31, 14336, 14680064)], "fallback",
                               "no peer access between GPU 0 and GPU 1: using nccl")),
        dict(base, case_id="f000000000000002", label="decode tp2 b1 s1024 custom-twoshot", status="ok",
             params={"tp": 2, "allreduce": "custom-twoshot"},
             allreduce_ran=ran("custom-twoshot", [entry("custom-twoshot", 24, 14336, 14336),
                                                  entry("nccl", 7, 14680064, 14680064)], "partial-fallback",
                               "7 message(s) exceeded the registered buffer of 8388608 bytes")),
        dict(base, case_id="f000000000000003", label="decode tp2 b1 s1024 nccl", status="ok",
             params={"tp": 2, "allreduce": "nccl"},
             allreduce_ran=ran("nccl", [entry("nccl", 31, 14336, 14680064)], "as-requested")),
    ]


class BackendsRanTable(unittest.TestCase):
    def test_fallbacks_first_then_partial_and_as_requested_left_out(self):
        recs = records()
        for i, rec in enumerate(recs):
            rec["_line"] = i + 1
        table = tables.backends_ran_table(recs)
        self.assertEqual([row[0] for row in table.rows], ["f000000000000001", "f000000000000002"])
        self.assertEqual(table.classes, ["bad", "warn"])
        self.assertEqual(table.rows[0][3:6], ["custom-oneshot", "nccl 31 calls (14 KiB to 14 MiB)", "fallback"])
        self.assertEqual(table.rows[1][4], "custom-twoshot 24 calls (14 KiB), nccl 7 calls (14 MiB)")
        self.assertIn("3 case(s) recorded", tables.backends_ran_caption(recs))
        self.assertIn("1 fallback", tables.backends_ran_caption(recs))


class BackendsRanReport(unittest.TestCase):
    def test_report_shows_the_fallback(self):
        tmp = util.fixture_copy()
        self.addCleanup(tmp.cleanup)
        util.write_records(tmp.name, util.read_records(tmp.name) + records())
        result = util.run_report(tmp.name)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(os.path.join(tmp.name, "summary.md"), encoding="utf-8") as f:
            md = f.read()
        with open(os.path.join(tmp.name, "report.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertRegex(md, r"\*\*FAIL: \d+ cases: .*, 1 fallback;")
        self.assertIn("## Allreduce backends as they ran", md)
        section = md.split("## Allreduce backends as they ran", 1)[1].split("\n## ", 1)[0]
        self.assertIn("| f000000000000001 | decode tp2 b1 s1024 custom-oneshot | fallback | custom-oneshot | "
                      "nccl 31 calls (14 KiB to 14 MiB) | fallback |", section)
        self.assertIn("f000000000000002", section)
        self.assertNotIn("f000000000000003", section)
        # Among the cases not ok, with the sentence that says what ran.
        not_ok = md.split("## Cases not ok", 1)[1].split("\n## ", 1)[0]
        self.assertIn("f000000000000001", not_ok)
        self.assertIn("custom-oneshot requested, nccl ran all 31 allreduce calls", not_ok)
        self.assertIn('<h2 id="backends-ran">Allreduce backends as they ran</h2>', page)
        self.assertRegex(page, r'<tr class="bad"><td>f000000000000001</td><td>[^<]*</td><td>fallback</td>')


class BackendsRanValidation(unittest.TestCase):
    def test_malformed_allreduce_ran_is_named(self):
        tmp = util.fixture_copy()
        self.addCleanup(tmp.cleanup)
        bad = records()[:1]
        bad[0]["allreduce_ran"]["ran"] = [{"calls": 3}]
        util.write_records(tmp.name, bad)
        result = util.run_report(tmp.name)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("$.allreduce_ran.ran[0].backend", result.stderr)


if __name__ == "__main__":
    unittest.main()
