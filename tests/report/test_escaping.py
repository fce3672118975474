#!/usr/bin/env python3
"""Every string from a scenario or a result is escaped: markup planted in labels, errors,
check names and details, backend names, baseline metrics, the scenario and the provenance
appears as text in report.html and summary.md, never as markup; '|' does not break a
Markdown table and '$' does not break a plot."""

import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_test_util as util  # noqa: E402

PAYLOAD = '<script>alert("planted")</script>"><img src=x onerror=alert(1)> $5 | `x` [y](z)'
ESCAPED = "&lt;script&gt;alert(&quot;planted&quot;)&lt;/script&gt;"


def plant(folder):
    records = util.read_records(folder)
    for rec in records:
        rec["label"] = "label " + PAYLOAD
        if rec["status"] in ("failed", "skipped", "infeasible"):
            rec["error"] = "error " + PAYLOAD
        if rec.get("workload") == "allreduce" and rec["params"]["allreduce"] == "auto":
            rec["params"]["allreduce"] = "auto" + PAYLOAD  # a backend name, drawn in plots
        for check in (rec.get("checks") or {}).values():
            check["detail"] = "detail " + PAYLOAD
        if rec.get("checks"):
            rec["checks"]["name" + PAYLOAD] = {"status": "fail", "detail": PAYLOAD,
                                               "cases": [PAYLOAD]}
        if rec.get("baseline"):
            rec["baseline"]["metric" + PAYLOAD] = {"verdict": "regression", "ratio": 1.5,
                                                   "ci_low": 1.4, "ci_high": 1.6}
    util.write_records(folder, records)
    path = os.path.join(folder, "run.json")
    with open(path, encoding="utf-8") as f:
        run = json.load(f)
    run["scenario"]["name"] = "scenario " + PAYLOAD
    run["scenario"]["document"]["description"] = "description " + PAYLOAD
    run["provenance"]["host"] = "host " + PAYLOAD
    run["provenance"]["env"]["NCCL_" + PAYLOAD] = PAYLOAD
    with open(path, "w", encoding="utf-8") as f:
        json.dump(run, f)


class Escaping(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = util.fixture_copy()
        plant(cls.tmp.name)
        cls.proc = util.run_report(cls.tmp.name)
        with open(os.path.join(cls.tmp.name, "report.html"), encoding="utf-8") as f:
            cls.html = f.read()
        with open(os.path.join(cls.tmp.name, "summary.md"), encoding="utf-8") as f:
            cls.md = f.read()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_report_written(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)
        for name in util.PNG_NAMES:
            self.assertTrue(os.path.isfile(os.path.join(self.tmp.name, name)), name)

    def test_html_has_no_planted_markup(self):
        self.assertNotRegex(self.html, r"(?i)<script")
        self.assertNotIn("<img src=x", self.html)
        self.assertNotIn('"><img', self.html)
        # Present as text, in every place it was planted.
        for where in ("label ", "error ", "detail ", "name", "metric", "scenario ",
                      "description ", "host ", "NCCL_", "auto"):
            self.assertIn(where + ESCAPED, self.html, where)
        self.assertIn("<title>tpbench report: scenario " + ESCAPED, self.html)

    def test_markdown_has_no_planted_markup(self):
        self.assertNotRegex(self.md, r"(?i)<script")
        self.assertNotIn("<img src=x", self.md)
        self.assertIn("label &lt;script&gt;", self.md)

    def test_markdown_tables_keep_their_columns(self):
        header_cells = None
        for line in self.md.splitlines():
            if not line.startswith("|"):
                header_cells = None
                continue
            # Cells are split by pipes that are not escaped.
            cells = len(re.findall(r"(?<!\\)\|", line))
            if header_cells is None:
                header_cells = cells
            self.assertEqual(cells, header_cells, line)


if __name__ == "__main__":
    unittest.main()
