#!/usr/bin/env python3
"""The report scripts on the committed fixture: every file written, report.html
self-contained with results first and provenance last, numbers traceable to their record by case_id, and
sections without data one line each (and their stale PNG removed). Results first and the
rest of issue 18's point 7: test_results_first.py."""

import base64
import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_test_util as util  # noqa: E402


class FixtureReport(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = util.fixture_copy()
        cls.dir = cls.tmp.name
        cls.proc = util.run_report(cls.dir)
        cls.records = util.read_records(cls.dir)
        with open(os.path.join(cls.dir, "report.html"), encoding="utf-8") as f:
            cls.html = f.read()
        with open(os.path.join(cls.dir, "summary.md"), encoding="utf-8") as f:
            cls.md = f.read()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_exit_status_and_every_file(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)
        for name in util.PNG_NAMES + ("report.html", "summary.md"):
            path = os.path.join(self.dir, name)
            self.assertTrue(os.path.isfile(path), name)
            self.assertIn(f"wrote {path}", self.proc.stdout)
        for name in util.PNG_NAMES:
            width, height = util.png_size(os.path.join(self.dir, name))
            self.assertGreaterEqual(width, 600, name)
            self.assertGreaterEqual(height, 300, name)

    def test_html_is_self_contained(self):
        self.assertNotRegex(self.html, r"(?i)<script|<link|<iframe|src=\"(?!data:)|url\(")
        images = re.findall(r'<img class="plot" alt="[^"]*" src="data:image/png;base64,([^"]+)"',
                            self.html)
        self.assertEqual(len(images), len(util.PNG_NAMES))
        for data in images:
            self.assertTrue(base64.b64decode(data).startswith(b"\x89PNG"))

    def test_results_first_provenance_last(self):
        sha = self.records[0]["provenance"]["git_sha"]
        first_plot = self.html.index("<img")
        self.assertLess(self.html.index('id="results"'), first_plot)
        self.assertGreater(self.html.index('id="provenance"'), self.html.rindex("<img"))
        self.assertGreater(self.html.index(sha), self.html.index('id="provenance"'))
        sections = re.findall(r"^## (.+)$", self.md, re.M)
        self.assertEqual(sections[0], "Results")
        self.assertEqual(sections[-2:], ["Provenance", "Run"])
        self.assertLess(self.md.index("## Provenance"), self.md.index(sha))
        self.assertIn("FIXTURE", self.html.split("<h2")[0])
        self.assertIn("FIXTURE", self.md.split("## Results")[0])

    def test_numbers_traceable_to_case_id(self):
        rows = {}
        for line in self.md.splitlines():
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            ids = [c for c in cells if re.fullmatch(r"[0-9a-f]{16}", c)]
            if ids:
                rows.setdefault(ids[0], []).append(cells)
        ids = {r["case_id"] for r in self.records}
        self.assertTrue(set(rows) <= ids | {"00000000000dead0"}, set(rows) - ids)
        checked = 0
        for rec in self.records:
            if rec["status"] != "ok" or rec.get("role") != "sweep" or not rec.get("latency"):
                continue
            value = rec["latency"]["p50"]
            p50 = f"{float(f'{value:.4g}'):.6g}"
            self.assertTrue(any(p50 in row for row in rows.get(rec["case_id"], [])),
                            f"{rec['case_id']}: p50 {p50} not in its summary.md row")
            checked += 1
        self.assertGreater(checked, 50)

    def test_failures_regressions_and_checks_shown(self):
        for rec in self.records:
            if rec["status"] in ("failed", "skipped", "infeasible"):
                self.assertIn(rec["case_id"], self.md)
                self.assertIn(rec["error"].split(";")[0], self.html)
        regressions = [(r["case_id"], m) for r in self.records
                       for m, e in (r.get("baseline") or {}).items()
                       if e["verdict"] == "regression"]
        self.assertTrue(regressions)
        for case_id, metric in regressions:
            self.assertRegex(self.html, rf'<tr class="bad"><td>{case_id}</td><td>[^<]*</td>'
                                        rf"<td>{metric}</td><td>regression</td>")
        failed = [(r["case_id"], n) for r in self.records
                  for n, c in (r.get("checks") or {}).items() if c["status"] == "fail"]
        self.assertTrue(failed)
        for case_id, name in failed:
            self.assertRegex(self.html, rf'<tr class="bad"><td>{case_id}</td><td>[^<]*</td>'
                                        rf"<td>{name}</td><td>fail</td>")
        # A group result only run.json's summary has is still reported.
        self.assertIn("control_drift", self.md)


class PartialData(unittest.TestCase):
    def test_sparse_records_are_tolerated(self):
        """Only case_id, status and params are required; everything else may be missing,
        null, or shaped as the runner writes it today."""
        tmp = util.fixture_copy()
        try:
            records = [
                {"case_id": "a1", "status": "ok", "params": {}},
                {"case_id": "a2", "status": "ok", "params": {"mode": "decode", "batch_size": 1},
                 "latency": {"p50": 10.0}},
                {"case_id": "a3", "status": "ok", "params": {"mode": "decode", "batch_size": 2,
                                                              "allreduce": "shm"},
                 "latency": {"p50": 12.0, "p99": None}, "memory": [{}, {}], "metrics": [],
                 "throughput": {"tokens_per_s": 3.0, "basis": "p50"}},
                {"case_id": "a4", "status": "ok", "params": {"message_bytes": 64, "allreduce": "nccl"},
                 "latency": {"p50": 5.0}, "checks": {"odd": {"status": "weird-status"}},
                 "baseline": {"latency_p50": {"verdict": "regression", "ratio": 1.2}}},
                {"case_id": "a5", "status": "failed", "params": {}, "error": {"message": "boom"}},
                {"case_id": "a6", "status": "infeasible", "params": {"mem_fraction": 0.5},
                 "plan": {"feasible": False, "max_tokens": 0, "breakdown": {"weights": 1 << 30,
                                                                           "total_bytes": 5}}},
            ]
            util.write_records(tmp.name, records)
            os.remove(os.path.join(tmp.name, "run.json"))
            proc = util.run_report(tmp.name)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertNotIn("Traceback", proc.stderr)
            with open(os.path.join(tmp.name, "summary.md"), encoding="utf-8") as f:
                md = f.read()
            self.assertIn("boom", md)
            self.assertIn("weird-status", md)  # shown, not treated as a pass
            self.assertIn("1 baseline regression(s)", md)
        finally:
            tmp.cleanup()

    def test_missing_sections_skipped_with_note_and_stale_png_removed(self):
        tmp = util.fixture_copy()
        try:
            self.assertEqual(util.run_report(tmp.name).returncode, 0)
            self.assertTrue(os.path.isfile(os.path.join(tmp.name, "decode_latency.png")))
            allreduce_only = [r for r in util.read_records(tmp.name)
                              if r.get("workload") == "allreduce"]
            util.write_records(tmp.name, allreduce_only)
            os.remove(os.path.join(tmp.name, "run.json"))
            proc = util.run_report(tmp.name)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            for name in ("decode_latency.png", "prefill_latency.png", "roofline.png",
                         "throughput_latency.png", "prefill_ttft.png",
                         "speedup_heatmap.png", "memory.png", "kv_tokens.png"):
                self.assertFalse(os.path.exists(os.path.join(tmp.name, name)), name)
            self.assertTrue(os.path.isfile(os.path.join(tmp.name, "allreduce.png")))
            with open(os.path.join(tmp.name, "report.html"), encoding="utf-8") as f:
                html = f.read()
            self.assertEqual(len(re.findall(r'<p class="empty" id="[^"]+"><strong>[^<]*</strong>: '
                                            r"not drawn: [^\n]*</p>\n", html)), 8)
            self.assertNotIn("No plot", html)
            # Without run.json the provenance comes from the records.
            self.assertIn("from results.jsonl (first record)", html)
            self.assertIn(allreduce_only[0]["provenance"]["git_sha"], html)
        finally:
            tmp.cleanup()

    def test_provenance_lists_each_host(self):
        # run.json's provenance.hosts: one block of lines per host id (two virtual hosts of
        # one machine stay apart), not one JSON blob.
        tmp = util.fixture_copy()
        try:
            util.write_records(tmp.name, util.read_records(tmp.name)[:8])
            path = os.path.join(tmp.name, "run.json")
            with open(path, encoding="utf-8") as f:
                run = json.load(f)
            run["provenance"]["hosts"] = [{"host_id": f"vhost{i}", "hostname": "box", "env": {"NCCL_DEBUG": "WARN"}}
                                          for i in (0, 1)]
            with open(path, "w", encoding="utf-8") as f:
                json.dump(run, f)
            proc = util.run_report(tmp.name)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            with open(os.path.join(tmp.name, "summary.md"), encoding="utf-8") as f:
                md = f.read()
            for i in (0, 1):
                self.assertIn(f"| hosts.vhost{i}.hostname | box |", md)
                self.assertIn(f"| hosts.vhost{i}.env.NCCL_DEBUG | WARN |", md)
        finally:
            tmp.cleanup()

    def test_out_folder(self):
        tmp = util.fixture_copy()
        try:
            # A few records keep this quick; the full fixture runs in FixtureReport.
            util.write_records(tmp.name, util.read_records(tmp.name)[:8])
            out = os.path.join(tmp.name, "elsewhere")
            proc = util.run_report(tmp.name, "--out", out)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertTrue(os.path.isfile(os.path.join(out, "report.html")))
            self.assertFalse(os.path.exists(os.path.join(tmp.name, "report.html")))
        finally:
            tmp.cleanup()


class Accessors(unittest.TestCase):
    """The record shapes the runner writes (suite/runner/runner.cpp) map onto the report's terms."""

    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, os.path.join(util.ROOT, "report"))
        import results_io
        cls.rio = results_io

    def test_memory_from_rank_metrics_and_comm(self):
        rec = {"memory": [{}, {}],
               "metrics": [{"weight_bytes": 100, "kv_cache_bytes": 30, "bytes": 7},
                           {"weight_bytes": 101, "kv_cache_bytes": 31}],
               "comm": [{"memory_bytes": 5}, {"memory_bytes": 6}]}
        got = self.rio.measured_memory(rec)
        self.assertEqual(got[0]["breakdown"], {"weights": 100, "kv_cache": 30, "comm_buffers": 5})
        self.assertEqual(got[1]["breakdown"], {"weights": 101, "kv_cache": 31, "comm_buffers": 6})

    def test_memory_from_meter_phases(self):
        gib = 2 ** 30
        phases = {"after_init": 1, "after_comm": 2, "after_weights": 12, "after_kv": 20,
                  "peak": 23}
        rec = {"memory": [{k: {"used_bytes": v * gib, "free_bytes": 0} for k, v in phases.items()}]}
        got = self.rio.measured_memory(rec)[0]["breakdown"]
        self.assertEqual(got, {"comm_buffers": gib, "weights": 10 * gib, "kv_cache": 8 * gib,
                               "activations": 3 * gib})

    def test_largest_batch_from_kv_tokens_and_case_context(self):
        import tables
        # A case of batch 64 asking for 64 x (8192 + 13) tokens: 1,000,000 KV tokens hold 121
        # such sequences; without the plan's request or the batch there is no answer.
        rec = {"params": {"batch_size": 64}, "plan": {"requested_tokens": 64 * 8205}}
        self.assertEqual(tables.largest_batch(rec, 1_000_000), 121)
        self.assertEqual(tables.largest_batch(rec, 8204), 0)
        self.assertIsNone(tables.largest_batch(rec, None))
        self.assertIsNone(tables.largest_batch({"params": {"batch_size": 64}, "plan": {}}, 10))

    def test_empty_rank_memory_is_no_measurement(self):
        self.assertEqual(self.rio.measured_memory({"memory": [{}, {}]}), {})

    def test_metric_lookup_order(self):
        rec = {"throughput": {"busbw_GBps": 2.0, "basis": "p50"},
               "metrics": [{"busbw_GBps": 1.0, "bytes": 64}]}
        self.assertEqual(self.rio.metric(rec, "busbw_GBps"), 2.0)
        self.assertEqual(self.rio.message_bytes({"params": {}, "metrics": [{"bytes": 64}]}), 64)


if __name__ == "__main__":
    unittest.main()
