#!/usr/bin/env python3
"""Issue 18 point 7 on generated reports: results lead (a results table before anything
else, provenance collapsed at the end, data tables open), empty sections are one line,
failed and fallback cases are marked on the plots, the memory plot's sides have the same
terms, an engine run with decode and prefill gets throughput-vs-latency and TTFT plots,
every results number is its record's, and summary.md keeps the same order.

Runs on the synthetic fixture and on two real CPU runs (tests/data/real_cpu_runs)."""

import json
import math
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_test_util as util  # noqa: E402

sys.path.insert(0, os.path.join(util.ROOT, "report"))
import results_io  # noqa: E402
import tables  # noqa: E402

QUICKSTART = os.path.join(util.REAL_RUNS, "quickstart-cpu")
CI_SMOKE = os.path.join(util.REAL_RUNS, "ci-smoke")


class Report:
    """One generated report: its folder, records, report.html and summary.md."""

    def __init__(self, source, edit=None):
        self.tmp = util.fixture_copy(source)
        self.dir = self.tmp.name
        self.records = util.read_records(self.dir)
        if edit:
            edit(self.records)
            util.write_records(self.dir, self.records)
        self.proc = util.run_report(self.dir)
        if self.proc.returncode != 0:
            raise AssertionError(self.proc.stderr)
        self.html = self.read("report.html")
        self.md = self.read("summary.md")

    def read(self, name):
        with open(os.path.join(self.dir, name), encoding="utf-8") as f:
            return f.read()

    def meta(self, png):
        return json.loads(util.png_text(os.path.join(self.dir, png))["tpbench"])


def md_rows(md):
    """Markdown table rows as lists of cells."""
    return [[c.strip() for c in line.strip().strip("|").split(" | ")]
            for line in md.splitlines() if line.startswith("| ")]


def md_table_after(md, heading):
    """The rows (header first) of the first table after a heading line."""
    lines = md.split(heading + "\n", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| "))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return md_rows("\n".join(lines[start:end]))


def cell(value):
    return tables.cell_text(tables.num(value))


class FixtureResultsFirst(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.r = Report(util.FIXTURE)

    @classmethod
    def tearDownClass(cls):
        cls.r.tmp.cleanup()

    def test_results_table_precedes_everything_and_provenance_is_collapsed_last(self):
        html = self.r.html
        results = html.index('<h2 id="results">')
        table = html.index("<table", results)
        self.assertLess(table, html.index('id="cases"'))
        self.assertLess(table, html.index("<img"))
        self.assertEqual(html[:results].count("<table"), 0)
        provenance = html.index('<h2 id="provenance">')
        self.assertGreater(provenance, html.rindex("<img"))
        self.assertGreater(provenance, html.index('id="conformance"'))
        # The provenance table is inside <details>; the git sha appears only there and in the
        # one-line identity under the headline.
        details = html.index("<details>", provenance)
        sha = self.r.records[0]["provenance"]["git_sha"]
        self.assertLess(details, html.index(sha, details))
        self.assertLess(html.index("</details>", details), html.index('<h2 id="run">'))
        self.assertIn(sha[:12], html[:results])
        self.assertNotIn(sha, html[:provenance])

    def test_data_tables_open(self):
        # Only provenance and the run's bookkeeping are folded.
        self.assertEqual(self.r.html.count("<details>"), 2)
        memory = self.r.html.index('id="memory-data"')
        self.assertLess(memory, self.r.html.index("<table", memory))
        self.assertLess(self.r.html.index("<table", memory), self.r.html.index("<details>"))

    def test_allreduce_results_like_nccl_tests(self):
        html = self.r.html
        section = html[html.index('id="results-allreduce"'):html.index('id="results-decode"')]
        self.assertEqual(re.findall(r"<h4>([^<]*)</h4>", section),
                         ["nccl", "custom-oneshot", "custom-twoshot", "auto"])
        self.assertIn("<th>size (B)</th><th>size</th><th>type</th><th>time p50 µs</th>"
                      "<th>time p99 µs</th><th>time mean µs</th><th>algbw GB/s</th><th>busbw GB/s</th>", section)

    def test_engine_results_per_mode_with_roofline(self):
        decode = md_table_after(self.r.md, "### Decode: step latency and throughput")
        self.assertIn("x roofline", decode[0])
        self.assertIn("step p50 µs", decode[0])
        prefill = md_table_after(self.r.md, "### Prefill: time to first token and throughput")
        self.assertIn("TTFT p50 µs", prefill[0])
        self.assertNotIn("x roofline", prefill[0])
        # The failed case keeps its row, marked, with no numbers.
        failed = [r for r in self.r.records if r["status"] == "failed"][0]
        row = next(r for r in decode if r[-1] == failed["case_id"])
        self.assertEqual(row[-2], "failed")

    def test_regressions_with_deltas_and_geomean(self):
        rows = md_table_after(self.r.md, "### Against the baseline")
        self.assertEqual(rows[0][:6], ["label", "metric", "old", "new", "Δ %", "ratio"])
        self.assertEqual(rows[1][6], "regression")  # regressions first
        twoshot = next(r for r in rows if r[1] == "latency_us" and r[5] == "1.12")
        self.assertEqual(twoshot[4], "12")
        geomeans = md_table_after(self.r.md.split("### Against the baseline", 1)[1], "")
        ratios = [e["ratio"] for rec in self.r.records
                  for m, e in (rec.get("baseline") or {}).items()
                  if m == "latency_us" and isinstance(e.get("ratio"), (int, float))]
        expected = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        row = next(r for r in md_rows(self.r.md) if r[0] == "latency_us" and r[1] == str(len(ratios)))
        self.assertEqual(row[2], cell(expected))
        self.assertTrue(geomeans)

    def test_failed_cases_marked_on_plots(self):
        failed = [r["case_id"] for r in self.r.records if r["status"] == "failed"]
        self.assertEqual(len(failed), 1)
        for png in ("decode_latency.png", "roofline.png"):
            self.assertEqual(self.r.meta(png)["failed"], failed, png)
        # The heatmap has no panel of the failed backend: it is named in its legend.
        self.assertEqual(self.r.meta("speedup_heatmap.png")["failed"], failed)
        self.assertIn(failed[0], self.r.html[self.r.html.index('id="decode"'):])
        self.assertRegex(self.r.html, r"Marked: failed cases as a red X")

    def test_summary_md_same_order(self):
        headings = re.findall(r"^## (.+)$", self.r.md, re.M)
        self.assertEqual(headings[0], "Results")
        self.assertEqual(headings[-2:], ["Provenance", "Run"])
        html_ids = re.findall(r'<h2 id="([^"]+)"', self.r.html)
        self.assertEqual(html_ids[0], "results")
        self.assertEqual(html_ids[-2:], ["provenance", "run"])
        self.assertLess(self.r.md.index("## Results"), self.r.md.index("![" ))


class FallbackMarked(unittest.TestCase):
    def test_fallback_and_failed_allreduce_cases_on_the_plot(self):
        def edit(records):
            twoshot = [r for r in records if r["params"].get("allreduce") == "custom-twoshot"
                       and r.get("workload") == "allreduce"]
            twoshot[2]["status"] = "fallback"
            twoshot[2]["allreduce_ran"] = {"requested": "custom-twoshot", "backend": "nccl",
                                           "verdict": "fallback", "fallback": "no IPC",
                                           "ran": []}
            twoshot[3]["status"] = "failed"
            twoshot[3]["latency"] = None
            twoshot[3]["throughput"] = None
            twoshot[3]["error"] = "rank 1: boom"

        r = Report(util.FIXTURE, edit)
        try:
            twoshot = [x for x in r.records if x["params"].get("allreduce") == "custom-twoshot"
                       and x.get("workload") == "allreduce"]
            meta = r.meta("allreduce.png")
            self.assertEqual(meta["fallback"], [twoshot[2]["case_id"]])
            self.assertEqual(meta["failed"], [twoshot[3]["case_id"]])
            self.assertNotIn(twoshot[2]["case_id"], meta["cases"])  # not on the series line
            section = r.html[r.html.index('<h2 id="allreduce">'):]
            self.assertIn("hollow orange diamond", section)
            self.assertIn(twoshot[2]["case_id"], section.split("<img", 1)[0])
            rows = md_rows(r.md)
            self.assertIn("fallback (ran on nccl)", next(x for x in rows if x[-1] == twoshot[2]["case_id"]))
            # The legend entries are drawn: the plot function says what it marked.
            sys.path.insert(0, os.path.join(util.ROOT, "report"))
            import plots
            recs = results_io.latest_per_case(results_io.load_results(
                os.path.join(r.dir, "results.jsonl")))
            fig = plots.allreduce_figure(recs, r.dir)
            self.assertEqual({(m["case_id"], m["status"], m["how"]) for m in fig.marked},
                             {(twoshot[2]["case_id"], "fallback", "at its value"),
                              (twoshot[3]["case_id"], "failed", "bottom edge")})
        finally:
            r.tmp.cleanup()


class RealEngineRun(unittest.TestCase):
    """tpbench run quickstart-cpu: decode and prefill, TP 1 and 2, shm, on a CPU."""

    @classmethod
    def setUpClass(cls):
        cls.r = Report(QUICKSTART)

    @classmethod
    def tearDownClass(cls):
        cls.r.tmp.cleanup()

    def test_throughput_and_ttft_plots_exist_with_their_cases(self):
        sweep = [x for x in self.r.records if x["status"] == "ok" and x.get("role") == "sweep"]
        for png, mode in (("throughput_latency.png", "decode"), ("prefill_ttft.png", "prefill")):
            width, height = util.png_size(os.path.join(self.r.dir, png))
            self.assertGreaterEqual(width, 600)
            self.assertEqual(self.r.meta(png)["cases"],
                             sorted(x["case_id"] for x in sweep if x["params"]["mode"] == mode))
        self.assertIn('<h2 id="throughput">', self.r.html)
        self.assertIn('<h2 id="ttft">', self.r.html)

    def test_empty_sections_are_one_line(self):
        lines = self.r.html.splitlines()
        for key in ("allreduce", "roofline", "speedup", "kv_tokens", "backends-ran",
                    "baseline-table", "cases"):
            hits = [line for line in lines if f'id="{key}"' in line]
            self.assertEqual(len(hits), 1, key)
            self.assertTrue(hits[0].startswith('<p class="empty"') and hits[0].endswith("</p>"),
                            hits[0])
            self.assertNotIn(f'<h2 id="{key}"', self.r.html)
        self.assertNotIn("No plot", self.r.html)
        self.assertNotIn("No plot", self.r.md)
        self.assertIn("**Allreduce: latency, bus bandwidth and custom/NCCL ratio vs message "
                      "size**: not drawn:", self.r.md)

    def test_memory_sides_have_the_same_terms(self):
        checked = 0
        for rec in self.r.records:
            for rank, side in results_io.memory_sides(rec).items():
                if side["plan"] and side["measured"]:
                    self.assertEqual(set(side["plan"]), set(side["measured"]), rec["case_id"])
                    self.assertIn("comm_buffers", side["plan"])
                    self.assertEqual(side["plan"]["comm_buffers"], rec["comm"][rank]["memory_bytes"])
                    checked += 1
        self.assertGreater(checked, 8)
        section = self.r.html[self.r.html.index('<h2 id="memory">'):]
        self.assertIn("both sides show the buffers the communicator reported", section)
        self.assertIn("plan + comm[0].memory_bytes", section)

    def test_results_numbers_are_the_records(self):
        by_id = {x["case_id"]: x for x in self.r.records}
        for heading in ("### Decode: step latency and throughput",
                        "### Prefill: time to first token and throughput"):
            rows = md_table_after(self.r.md, heading)
            self.assertEqual(len(rows) - 1, 8)  # header, then a row per case
            for row in rows[1:]:
                rec = by_id[row[-1]]
                self.assertEqual(row[:4], [rec["params"]["allreduce"], str(rec["params"]["tp"]),
                                           str(rec["params"]["batch_size"]),
                                           str(rec["params"]["seq_len"])])
                self.assertEqual(row[4], cell(rec["latency"]["p50"]))
                self.assertEqual(row[5], cell(rec["latency"]["p99"]))
                self.assertEqual(row[6], cell(rec["latency"]["mean"]))
                self.assertEqual(row[7], cell(rec["throughput"]["tokens_per_s"]))


class RealAllreduceRun(unittest.TestCase):
    """tpbench run ci-smoke: the shm allreduce over sizes, TP 1/2/4, bf16 and f32."""

    def test_nccl_tests_tables_trace_to_records(self):
        r = Report(CI_SMOKE)
        try:
            by_id = {x["case_id"]: x for x in r.records}
            rows = [row for row in md_rows(r.md) if row[-1] in by_id and row[0].isdigit()]
            self.assertEqual(len(rows), len(r.records))  # every case, control and repeat too
            for row in rows:
                rec = by_id[row[-1]]
                self.assertEqual(row[0], str(rec["params"]["message_bytes"]))
                self.assertEqual(row[3], cell(rec["latency"]["p50"]))
                self.assertEqual(row[5], cell(rec["latency"]["mean"]))
                self.assertEqual(row[6], cell(rec["throughput"]["algbw_GBps"]))
                self.assertEqual(row[7], cell(rec["throughput"]["busbw_GBps"]))
            groups = re.findall(r"^#### (.+)$", r.md, re.M)
            self.assertEqual(len(groups), 6)  # tp 1/2/4 x bf16/f32
            self.assertTrue(all(g.startswith("shm · ") for g in groups), groups)
            for key in ("decode", "prefill", "throughput", "ttft", "memory"):
                self.assertRegex(r.html, rf'\n<p class="empty" id="{key}">[^\n]*</p>\n')
        finally:
            r.tmp.cleanup()


if __name__ == "__main__":
    unittest.main()
