#!/usr/bin/env python3
"""What each row of the report says (report/tables.py and the rules it shares with plots.py
and markdown_report.py), rule by rule with inputs on both sides of each: the numbers a row
takes from its record (p50 or p99, throughput, message size, backend), the status of a case
(not ok, a fallback and what ran, shared placement, the headline's counts), the results
tables' grouping and order, the baseline comparisons (regressions first, the delta, the
geometric mean of the comparable ratios), the checks (failures first, groups that only
run.json names), capacity (largest batch, a custom allreduce's cost in KV tokens), and
summary.md's rows. In-process, so that scripts/mutation_report.py (mutmut) sees which rule
each test holds."""

import math
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "report"))
try:
    import matplotlib  # noqa: F401  (plots, which shares the ordering rules, needs it)
except ImportError:
    print("skipped: matplotlib is not installed")
    sys.exit(77)
import markdown_report  # noqa: E402
import plots  # noqa: E402
import results_io as rio  # noqa: E402
import tables  # noqa: E402


def rec(case_id, status="ok", line=1, **fields):
    out = {"case_id": case_id, "status": status, "params": {}, "_line": line}
    params = fields.pop("params", {})
    out["params"].update(params)
    out.update(fields)
    return out


class RowNumbers(unittest.TestCase):
    """results_io's accessors: which field of a record a row shows."""

    def test_latency_is_p50_unless_another_percentile_is_asked(self):
        r = rec("a", latency={"p50": 10, "p90": 11, "p99": 12.5, "mean": 9})
        self.assertEqual((rio.latency(r), rio.latency(r, "p99"), rio.latency(r, "p90")), (10, 12.5, 11))
        self.assertIsNone(rio.latency(rec("a", latency={"p50": None, "p99": True}), "p50"))
        self.assertIsNone(rio.latency(rec("a", latency={"p50": None, "p99": True}), "p99"))
        self.assertIsNone(rio.latency(rec("a", latency=None)))
        self.assertIsNone(rio.latency(rec("a")))

    def test_a_metric_comes_from_throughput_then_metrics_then_the_first_rank_that_has_it(self):
        both = rec("a", throughput={"tokens_per_s": 5}, metrics={"tokens_per_s": 6})
        self.assertEqual(rio.metric(both, "tokens_per_s"), 5)
        self.assertEqual(rio.metric(rec("a", throughput={"tokens_per_s": None}, metrics={"tokens_per_s": 6}),
                                    "tokens_per_s"), 6)
        self.assertEqual(rio.metric(rec("a", throughput={"x": 1}, metrics={"tokens_per_s": 6.5}), "tokens_per_s"), 6.5)
        per_rank = rec("a", metrics=[{"tokens_per_s": 7}, {"tokens_per_s": 8}])
        self.assertEqual(rio.metric(per_rank, "tokens_per_s"), 7)
        self.assertEqual(rio.metric(rec("a", metrics=[{}, {"tokens_per_s": 8}]), "tokens_per_s"), None)
        ranks = [{"metrics": {"x": 1}}, "not a rank", {"metrics": {"tokens_per_s": False}},
                 {"metrics": {"tokens_per_s": 9}}, {"metrics": {"tokens_per_s": 10}}]
        self.assertEqual(rio.metric(rec("a", metrics=[], ranks=ranks), "tokens_per_s"), 9)
        self.assertEqual(rio.metric(rec("a", rank_results=ranks), "tokens_per_s"), 9)
        self.assertEqual(rio.metric(rec("a", ranks=[{"metrics": {"t": 1}}], rank_results=[{"metrics": {"t": 2}}]),
                                    "t"), 1)
        self.assertEqual(rio.metric(rec("a", ranks={"0": {}}, rank_results=[{"metrics": {"t": 2}}]), "t"), 2)
        self.assertEqual(rio.metric(rec("a", ranks=[{"metrics": [1]}, {"metrics": {"t": 3}}]), "t"), 3)
        self.assertIsNone(rio.metric(rec("a", throughput={"t": "5"}, metrics={"t": True}), "t"))
        self.assertIsNone(rio.metric(rec("a"), "t"))

    def test_the_message_size_is_the_param_else_the_bytes_metric(self):
        self.assertEqual(rio.message_bytes(rec("a", params={"message_bytes": 4096}, metrics={"bytes": 8})), 4096)
        self.assertEqual(rio.message_bytes(rec("a", params={"message_bytes": None}, metrics={"bytes": 8})), 8)
        self.assertEqual(rio.message_bytes(rec("a", params={"message_bytes": "big"}, throughput={"bytes": 8.0})), 8.0)
        self.assertIsNone(rio.message_bytes(rec("a", metrics={"bytes": None})))

    def test_an_allreduce_case_is_one_by_workload_or_by_a_message_size(self):
        self.assertTrue(rio.is_allreduce(rec("a", workload="allreduce")))
        self.assertTrue(rio.is_allreduce(rec("a", params={"workload": "allreduce"})))
        self.assertTrue(rio.is_allreduce(rec("a", workload="engine", params={"message_bytes": 0})))
        self.assertTrue(rio.is_allreduce(rec("a", workload=None, metrics={"bytes": 64})))
        self.assertFalse(rio.is_allreduce(rec("a", workload="engine", params={"workload": "allreduce"})))
        self.assertFalse(rio.is_allreduce(rec("a", workload="engine", params={"mode": "decode"})))

    def test_param_backend_and_label(self):
        r = rec("a", params={"tp": 2, "allreduce": "custom-oneshot", "batch_size": 8})
        self.assertEqual((rio.param(r, "tp"), rio.param(r, "dtype"), rio.param(r, "dtype", "bf16")),
                         (2, None, "bf16"))
        self.assertEqual(rio.param({"case_id": "a"}, "tp", 3), 3)
        self.assertEqual(rio.backend(r), "custom-oneshot")
        self.assertEqual(rio.backend(rec("a", params={"allreduce": 3})), "3")
        self.assertEqual(rio.backend(rec("a", params={"allreduce": None})), "-")
        self.assertEqual(rio.backend(rec("a")), "-")
        self.assertEqual(rio.label(r), "allreduce=custom-oneshot batch_size=8 tp=2")
        self.assertEqual(rio.label(dict(r, label="mine")), "mine")
        self.assertEqual(rio.label(dict(r, label="")), "allreduce=custom-oneshot batch_size=8 tp=2")
        self.assertEqual(rio.label(dict(r, label=None)), "allreduce=custom-oneshot batch_size=8 tp=2")
        self.assertEqual(rio.label(rec("case-7")), "case-7")
        self.assertEqual(rio.label({"case_id": "case-8"}), "case-8")

    def test_bytes_are_written_exactly_in_the_largest_unit_that_divides_them(self):
        cases = {0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1536 B", 14336: "14 KiB",
                 2 ** 20 - 1024: "1023 KiB", 2 ** 20: "1 MiB", 14 * 2 ** 20: "14 MiB",
                 3 * 2 ** 20 + 1024: "3073 KiB", 2 ** 20 + 1: "1048577 B", 4096.0: "4 KiB"}
        for value, text in cases.items():
            self.assertEqual(rio.bytes_text(value), text, value)
        for value in (None, "1024", True):
            self.assertEqual(rio.bytes_text(value), "?")

    def test_what_ran_lists_each_backend_with_its_calls_and_sizes(self):
        ran = {"ran": [{"backend": "custom-oneshot", "calls": 24, "bytes_min": 14336, "bytes_max": 14336},
                       {"backend": "nccl", "calls": 1, "bytes_min": 1024, "bytes_max": 14 * 2 ** 20},
                       {"backend": "shm", "calls": 2, "bytes_min": None, "bytes_max": None}]}
        self.assertEqual(rio.ran_text(rec("a", allreduce_ran=ran)),
                         "custom-oneshot 24 calls (14 KiB), nccl 1 call (1 KiB to 14 MiB), shm 2 calls (?)")
        self.assertEqual(rio.ran_text(rec("a", allreduce_ran={"ran": []})), "no allreduce call counted")
        self.assertIsNone(rio.ran_text(rec("a", allreduce_ran={"ran": None})))
        self.assertIsNone(rio.ran_text(rec("a", allreduce_ran={"verdict": "as-requested"})))
        self.assertIsNone(rio.ran_text(rec("a", allreduce_ran=["ran"])))
        self.assertIsNone(rio.ran_text(rec("a")))
        self.assertEqual(rio.allreduce_ran(rec("a", allreduce_ran=ran)), ran)
        self.assertEqual(rio.allreduce_ran(rec("a", allreduce_ran="nccl")), {})

    def test_the_error_of_a_case_is_its_message_or_the_whole_object(self):
        self.assertEqual(rio.error_text(rec("a")), "")
        self.assertEqual(rio.error_text(rec("a", error=None)), "")
        self.assertEqual(rio.error_text(rec("a", error="out of memory")), "out of memory")
        self.assertEqual(rio.error_text(rec("a", error={"message": "timed out", "code": 3})), "timed out")
        self.assertEqual(rio.error_text(rec("a", error={"message": "", "z": 1, "code": 3})),
                         '{"code": 3, "message": "", "z": 1}')
        self.assertEqual(rio.error_text(rec("a", error={"z": 1, "code": 3})), '{"code": 3, "z": 1}')


class Numbers(unittest.TestCase):
    def test_a_number_keeps_four_significant_digits_and_integers_stay_whole(self):
        self.assertEqual(tables.num(1.23456), 1.235)
        self.assertEqual(tables.num(1.23456, 3), 1.23)
        self.assertEqual(tables.num(123456.7), 123500.0)
        self.assertEqual(tables.num(-0.000123456), -0.0001235)
        for value, whole in ((2.0, 2), (-3.0, -3), (999999999999999.0, 999999999999999), (0.0, 0)):
            self.assertEqual(tables.num(value), whole)
            self.assertIs(type(tables.num(value)), int, value)
        self.assertIs(type(tables.num(1e15)), float)
        self.assertEqual(tables.num(1e15), 1e15)
        self.assertEqual(tables.num(12345678901), 12345678901)
        self.assertIs(type(tables.num(12345678901)), int)
        self.assertIsNone(tables.num(None))
        self.assertEqual((tables.num(True), tables.num(False)), ("true", "false"))
        self.assertEqual((tables.num(float("inf")), tables.num(float("-inf")), tables.num(float("nan"))),
                         ("inf", "-inf", "nan"))
        self.assertEqual(tables.num("x"), "x")

    def test_a_cell_prints_floats_with_six_digits_and_none_as_a_dash(self):
        self.assertEqual([tables.cell_text(v) for v in (None, 1.23456789, 2.0, 7, "s", 1234567.0)],
                         ["-", "1.23457", "2", "7", "s", "1.23457e+06"])

    def test_a_table_keeps_rows_and_their_classes_in_order(self):
        table = tables.Table(["a", "b"])
        self.assertEqual((table.headers, table.rows, table.classes), (["a", "b"], [], []))
        table.add([1, 2])
        table.add([3, 4], "bad")
        self.assertEqual((table.rows, table.classes), ([[1, 2], [3, 4]], ["", "bad"]))


def ran(verdict, requested="custom-oneshot", backend="nccl", fallback=None, **extra):
    return dict({"verdict": verdict, "requested": requested, "backend": backend, "fallback": fallback,
                 "ran": [{"backend": backend, "calls": 2, "bytes_min": 1024, "bytes_max": 1024}]}, **extra)


class Status(unittest.TestCase):
    def records(self):
        return [rec("a", "ok", 1), rec("b", "failed", 2, error="boom"),
                rec("c", "skipped", 3, error={"message": "no gpu"}),
                rec("d", "infeasible", 4), rec("e", "fallback", 5, allreduce_ran=ran("fallback")),
                rec("f", "failed", 6), rec("g", "ok", 7, label="seven")]

    def test_statuses_are_counted_each_once_and_all_five_named(self):
        self.assertEqual(tables.status_counts(self.records()),
                         {"ok": 2, "infeasible": 1, "failed": 2, "skipped": 1, "fallback": 1})
        self.assertEqual(tables.status_counts([]), {"ok": 0, "infeasible": 0, "failed": 0, "skipped": 0, "fallback": 0})

    def test_the_headline_counts_cases_failed_checks_and_regressions(self):
        records = self.records()
        records[0]["checks"] = {"x": {"status": "fail"}, "y": {"status": "pass"}, "z": {"status": "skipped"},
                                "v": {"status": "pass"}}
        records[1]["checks"] = {"x": {"status": "fail"}}
        records[0]["baseline"] = {"latency.p50": {"verdict": "regression"}, "tokens": {"verdict": "improvement"},
                                  "p90": {"verdict": "ok"}}
        records[6]["baseline"] = {"latency.p50": {"verdict": "regression"}, "p99": {"verdict": "noise"}}
        run = {"summary": {"checks": {"w": [{"status": "fail", "cases": ["q"]}, {"status": "pass", "cases": ["r"]},
                                            {"status": "pass", "cases": ["s"]}]}}}
        self.assertEqual(tables.headline(records, run),
                         "7 cases: 2 ok, 1 infeasible, 2 failed, 1 skipped, 1 fallback; 3 failed check(s); "
                         "2 baseline regression(s)")
        self.assertEqual(tables.headline(records),
                         "7 cases: 2 ok, 1 infeasible, 2 failed, 1 skipped, 1 fallback; 2 failed check(s); "
                         "2 baseline regression(s)")
        self.assertEqual(tables.headline([]), "0 cases: 0 ok, 0 infeasible, 0 failed, 0 skipped, 0 fallback; "
                         "0 failed check(s); no baseline compared")
        compared_clean = self.records()[:1]
        compared_clean[0]["baseline"] = {"latency_us": {"verdict": "ok"}}
        self.assertTrue(tables.headline(compared_clean).endswith("; 0 baseline regression(s)"),
                        "compared and clean: the count, not 'no baseline compared'")

    def test_the_banner_is_the_runs_exit_status_and_its_failure_lines(self):
        ok = self.records()[:1]
        self.assertEqual(ok[0]["status"], "ok")
        failures = ["FAILED x: failed: boom", "  reproduce: tpbench run s.json --case x"]
        for code, word in ((0, "PASS"), (1, "FAIL"), (3, "NOTHING RAN"), (130, "FAIL")):
            run = {"summary": {"exit_code": code, "failures": failures if code else []}}
            got = tables.verdict_banner(ok, run)
            self.assertEqual(got[0], word, code)
            self.assertEqual(got[1], tables.headline(ok, run))
            self.assertEqual(got[2], failures if code else [])
        # Without a finished run.json: derived from the records, each reason alone.
        self.assertEqual(tables.verdict_banner(ok)[0], "PASS")
        self.assertEqual(tables.verdict_banner(ok, {"summary": {"exit_code": True}})[0], "PASS",
                         "a boolean is no exit status")
        for plant in ({"status": "failed"}, {"status": "fallback"},
                      {"checks": {"x": {"status": "fail"}}},
                      {"baseline": {"latency_us": {"verdict": "regression"}}},
                      {"baseline": {"digest.rank0.logits": {"verdict": "mismatch"}}},
                      {"baseline": {"case": {"verdict": "not-ok"}}}):
            recs = [dict(ok[0], **plant)]
            self.assertEqual(tables.verdict_banner(recs)[0], "FAIL", plant)
        self.assertEqual(tables.verdict_banner([dict(ok[0], baseline={"p": {"verdict": "noise"}})])[0], "PASS")
        self.assertEqual(tables.verdict_banner(ok, {"summary": {"failures": ["a", 3, None]}})[2], ["a"],
                         "only text lines are shown")
        # A check group that failed in run.json alone (no record carries it): the counts and,
        # without an exit status, the word come from the run too.
        run_checks = {"summary": {"checks": {"w": [{"status": "fail", "cases": ["q"]}]}}}
        word, line, _ = tables.verdict_banner(ok, run_checks)
        self.assertEqual(word, "FAIL")
        self.assertIn("; 1 failed check(s);", line)

    def test_cases_not_ok_are_listed_failures_and_fallbacks_bad_the_rest_a_warning(self):
        table = tables.not_ok_table(self.records())
        self.assertEqual(table.headers, ["case_id", "label", "status", "error / reason"])
        self.assertEqual(table.rows, [["b", "b", "failed", "boom"], ["c", "c", "skipped", "no gpu"],
                                      ["d", "d", "infeasible", ""], ["e", "e", "fallback", ""],
                                      ["f", "f", "failed", ""]])
        self.assertEqual(table.classes, ["bad", "warn", "warn", "bad", "bad"])

    def test_a_status_names_what_a_fallback_ran_on_and_a_case_that_is_no_sweep_point(self):
        self.assertEqual(tables.status_text(rec("a", "fallback", allreduce_ran=ran("fallback"))),
                         "fallback (ran on nccl)")
        self.assertEqual(tables.status_text(rec("a", "fallback", allreduce_ran={"verdict": "fallback"})), "fallback")
        self.assertEqual(tables.status_text(rec("a", "failed", allreduce_ran=ran("fallback"))), "failed")
        self.assertEqual(tables.status_text(rec("a", "ok", role="control")), "ok [control]")
        self.assertEqual(tables.status_text(rec("a", "fallback", role="repeat", allreduce_ran=ran("fallback"))),
                         "fallback (ran on nccl) [repeat]")
        for role in (None, "", "sweep"):
            self.assertEqual(tables.status_text(rec("a", "skipped", role=role)), "skipped")

    def test_backends_that_did_not_run_as_requested_are_listed_fallbacks_first(self):
        records = [
            rec("as-asked", line=1, allreduce_ran=ran("as-requested", requested="nccl")),
            rec("other", line=2, allreduce_ran=ran("auto-nccl", requested="auto")),
            rec("partial", line=3, label="p", allreduce_ran=ran("partial-fallback", fallback="above the buffer")),
            rec("differ", line=4, allreduce_ran=ran("as-requested", requested="nccl", ranks_differ=[0, 1])),
            rec("asked-but-why", line=5, allreduce_ran=ran("as-requested", requested="nccl", fallback="noted")),
            rec("none", line=6),
            rec("fell", "fallback", line=9, allreduce_ran=ran("fallback", fallback="no P2P", ranks_differ="r1")),
            rec("fell-early", "fallback", line=8, allreduce_ran=ran("fallback", fallback="no P2P")),
        ]
        table = tables.backends_ran_table(records)
        self.assertEqual(table.headers, ["case_id", "label", "status", "requested", "ran", "verdict", "why"])
        two = "nccl 2 calls (1 KiB)"
        self.assertEqual(table.rows, [
            ["fell-early", "fell-early", "fallback", "custom-oneshot", two, "fallback", "no P2P"],
            ["fell", "fell", "fallback", "custom-oneshot", two, "fallback", "no P2P; ranks differ: r1"],
            ["partial", "p", "ok", "custom-oneshot", two, "partial-fallback", "above the buffer"],
            ["other", "other", "ok", "auto", two, "auto-nccl", None],
            ["differ", "differ", "ok", "nccl", two, "as-requested", "ranks differ: [0, 1]"],
            ["asked-but-why", "asked-but-why", "ok", "nccl", two, "as-requested", "noted"],
        ])
        self.assertEqual(table.classes, ["bad", "bad", "warn", "", "", ""])

    def test_the_caption_counts_the_cases_that_recorded_what_ran_by_verdict(self):
        records = [rec("a", allreduce_ran=ran("fallback")), rec("b", allreduce_ran=ran("as-requested")),
                   rec("c", allreduce_ran=ran("fallback")), rec("d", allreduce_ran={"backend": "nccl"}), rec("e")]
        self.assertEqual(tables.backends_ran_caption(records),
                         "4 case(s) recorded which backend carried their allreduces: 1 ?, 1 as-requested, "
                         "2 fallback. A fallback's numbers are the other backend's; it is never compared as the "
                         "requested one.")
        self.assertEqual(tables.backends_ran_caption([rec("e")]),
                         "No record says which backend carried its allreduces (recorded from this build on).")

    def test_shared_placement_is_said_once_with_its_cases(self):
        def placed(n, **extra):
            return rec("a", placement=dict({"ranks_ran_on": "x", "ranks_per_gpu": n}, **extra))
        records = [placed(4, mps="private"), placed(2, mps="shared"), placed(2), placed(1), rec("b"),
                   rec("c", placement={"mps": "x"}), rec("d", placement="shared")]
        self.assertEqual(tables.placement_note(records),
                         "Shared placement: 3 of 7 cases ran with 2, 4 ranks per GPU (MPS: ?, private, shared). Their "
                         "latencies and bandwidths measure ranks contending for one GPU, not an interconnect; they "
                         "are never compared with exclusive-placement baselines.")
        self.assertIsNone(tables.placement_note([placed(1), rec("b"), rec("c", placement={"mps": "x"})]))


def allreduce(case_id, backend, size, line, status="ok", p50=None, p99=None, mean=None, **fields):
    params = dict({"allreduce": backend, "message_bytes": size, "dtype": "bf16"}, **fields.pop("params", {}))
    return rec(case_id, status, line, workload="allreduce", params=params,
               latency={"p50": p50, "p99": p99, "mean": mean}, **fields)


def engine(case_id, backend, mode, line, status="ok", tp=2, batch=1, seq=128, p50=None, **fields):
    params = dict({"allreduce": backend, "mode": mode, "tp": tp, "batch_size": batch, "seq_len": seq},
                  **fields.pop("params", {}))
    return rec(case_id, status, line, workload="engine", params=params,
               latency={"p50": p50, "p99": None if p50 is None else p50 * 2,
                        "mean": None if p50 is None else p50 * 1.5}, **fields)


class ResultsTables(unittest.TestCase):
    def test_allreduce_tables_are_per_backend_in_backend_order_rows_by_size_sweep_first(self):
        records = [
            allreduce("c1", "custom-oneshot", 2048, 1, p50=3.0, p99=4.0),
            allreduce("n2", "nccl", 2 ** 20, 2, p50=20.123456, p99=30.0, mean=21.5,
                      throughput={"algbw_GBps": 52.4288, "busbw_GBps": 78.6432}),
            allreduce("n1c", "nccl", 1024, 3, p50=9.0, role="control"),
            allreduce("n1", "nccl", 1024, 4, p50=10.0, p99=12.0),
            allreduce("n0", "nccl", 512, 5, "failed"),
            allreduce("z1", "zeta", 512, 6, p50=1.0),
            allreduce("f1", "custom-oneshot", 1024, 7, "fallback", p50=8.0, allreduce_ran=ran("fallback")),
            engine("e1", "nccl", "decode", 8, p50=1.0),
        ]
        out = tables.allreduce_results(records)
        self.assertEqual([title for title, _ in out], ["nccl", "custom-oneshot", "zeta"])
        nccl = out[0][1]
        self.assertEqual(nccl.headers, ["size (B)", "size", "type", "time p50 µs", "time p99 µs", "time mean µs",
                                        "algbw GB/s", "busbw GB/s", "status", "case_id"])
        self.assertEqual(nccl.rows, [
            [512, "512 B", "bf16", None, None, None, None, None, "failed", "n0"],
            [1024, "1 KiB", "bf16", 10, 12, None, None, None, "ok", "n1"],
            [1024, "1 KiB", "bf16", 9, None, None, None, None, "ok [control]", "n1c"],
            [1048576, "1 MiB", "bf16", 20.12, 30, 21.5, 52.43, 78.64, "ok", "n2"],
        ])
        self.assertEqual(nccl.classes, ["bad", "", "", ""])
        custom = out[1][1]
        self.assertEqual([r[-2:] for r in custom.rows], [["fallback (ran on nccl)", "f1"], ["ok", "c1"]])
        self.assertEqual(custom.classes, ["bad", ""])
        self.assertEqual(tables.allreduce_results([engine("e1", "nccl", "decode", 1)]), [])

    def test_allreduce_rows_without_a_size_come_first_and_sweep_cases_before_control_and_repeat(self):
        records = [allreduce("one", "nccl", 1, 1, p50=1.0), allreduce("sized-not", "nccl", None, 2, "failed"),
                   allreduce("ctl", "nccl", 64, 3, role="control"), allreduce("sw", "nccl", 64, 4, role="sweep"),
                   allreduce("none", "nccl", 64, 5), allreduce("empty", "nccl", 64, 6, role=""),
                   allreduce("dec", "nccl", 64, 7, params={"mode": "decode"})]
        records[1]["params"].pop("message_bytes")
        (title, table), = tables.allreduce_results(records)
        self.assertEqual(title, "nccl")
        self.assertEqual([(r[0], r[1], r[-1]) for r in table.rows],
                         [(None, None, "sized-not"), (1, "1 B", "one"), (64, "64 B", "sw"), (64, "64 B", "none"),
                          (64, "64 B", "empty"), (64, "64 B", "dec"), (64, "64 B", "ctl")])

    def test_a_param_that_varies_splits_the_allreduce_tables_and_names_them(self):
        records = [allreduce("a", "nccl", 1024, 1, params={"tp": 2}), allreduce("b", "nccl", 1024, 2, params={"tp": 4}),
                   allreduce("c", "nccl", 2048, 3, params={"tp": 2}), allreduce("d", "shm", 1024, 4, params={"tp": 2})]
        out = tables.allreduce_results(records)
        self.assertEqual([(title, [r[-1] for r in t.rows]) for title, t in out],
                         [("nccl · tp=2", ["a", "c"]), ("nccl · tp=4", ["b"]), ("shm · tp=2", ["d"])])
        self.assertEqual(tables._group_name(records[0], []), "nccl")
        self.assertEqual(tables._group_name(records[0], ["tp", "dtype"]), "nccl · tp=2 · dtype=bf16")

    def test_engine_tables_are_per_mode_rows_by_backend_tp_seq_len_batch_sweep_first(self):
        records = [
            engine("s8", "shm", "decode", 1, batch=8, p50=4.0),
            engine("n8", "nccl", "decode", 2, batch=8, p50=3.0, throughput={"tokens_per_s": 1234.5678}),
            engine("n1r", "nccl", "decode", 3, batch=1, p50=1.1, role="repeat"),
            engine("n1", "nccl", "decode", 4, batch=1, p50=1.0),
            engine("n1t1", "nccl", "decode", 5, tp=1, batch=1, seq=256, p50=2.0),
            engine("n1s", "nccl", "decode", 6, batch=1, seq=64, p50=2.5),
            engine("x", "nccl", "decode", 7, "failed", batch=2),
            engine("p", "nccl", "prefill", 8, p50=9.0),
            allreduce("ar", "nccl", 1024, 9, p50=1.0, params={"mode": "decode"}),
        ]
        table = tables.engine_results(records, "decode")
        self.assertEqual(table.headers, ["backend", "tp", "batch", "seq_len", "step p50 µs", "p99 µs", "mean µs",
                                         "tokens/s", "status", "case_id"])
        self.assertEqual(table.rows, [
            ["nccl", 1, 1, 256, 2, 4, 3, None, "ok", "n1t1"],
            ["nccl", 2, 1, 64, 2.5, 5, 3.75, None, "ok", "n1s"],
            ["nccl", 2, 1, 128, 1, 2, 1.5, None, "ok", "n1"],
            ["nccl", 2, 1, 128, 1.1, 2.2, 1.65, None, "ok [repeat]", "n1r"],
            ["nccl", 2, 2, 128, None, None, None, None, "failed", "x"],
            ["nccl", 2, 8, 128, 3, 6, 4.5, 1235, "ok", "n8"],
            ["shm", 2, 8, 128, 4, 8, 6, None, "ok", "s8"],
        ])
        self.assertEqual(table.classes, ["", "", "", "", "bad", "", ""])
        prefill = tables.engine_results(records, "prefill")
        self.assertEqual(prefill.headers[4], "TTFT p50 µs")
        self.assertEqual(prefill.rows, [["nccl", 2, 1, 128, 9, 18, 13.5, None, "ok", "p"]])
        missing = [engine("all", "nccl", "decode", 1, tp=1, seq=1, batch=1),
                   engine("no-tp", "nccl", "decode", 2, tp=None, seq=1, batch=1),
                   engine("no-seq", "nccl", "decode", 3, tp=1, seq=None, batch=1),
                   engine("no-batch", "nccl", "decode", 4, tp=1, seq=1, batch=None)]
        self.assertEqual([r[-1] for r in tables.engine_results(missing, "decode").rows],
                         ["no-tp", "no-seq", "no-batch", "all"])
        roles = [engine("ctl", "nccl", "decode", 0, role="control"), engine("sw", "nccl", "decode", 1, role="sweep"),
                 engine("none", "nccl", "decode", 2), engine("empty", "nccl", "decode", 3, role="")]
        self.assertEqual([r[-1] for r in tables.engine_results(roles, "decode").rows], ["sw", "none", "empty", "ctl"])
        empty = tables.engine_results(records, "train")
        self.assertEqual((empty.headers, empty.rows), ([], []))

    def test_engine_tables_show_the_roofline_where_a_case_has_it_and_split_by_other_params(self):
        records = [engine("a", "nccl", "decode", 1, p50=2.0, metrics={"x_weight_read_time": 1.4},
                          params={"quant": "int4", "dtype": "bf16"}),
                   engine("b", "nccl", "decode", 2, p50=3.0, params={"quant": "bf16", "dtype": "bf16"}),
                   engine("c", "custom-oneshot", "decode", 3, p50=2.5, params={"quant": "bf16", "dtype": "fp8"})]
        table = tables.engine_results(records, "decode")
        self.assertEqual(table.headers, ["backend", "tp", "batch", "seq_len", "config", "step p50 µs", "p99 µs",
                                         "mean µs", "tokens/s", "x roofline", "status", "case_id"])
        self.assertEqual(table.rows, [["nccl", 2, 1, 128, "dtype=bf16 quant=bf16", 3, 6, 4.5, None, None, "ok", "b"],
                                      ["nccl", 2, 1, 128, "dtype=bf16 quant=int4", 2, 4, 3, None, 1.4, "ok", "a"],
                                      ["custom-oneshot", 2, 1, 128, "dtype=fp8 quant=bf16", 2.5, 5, 3.75, None, None,
                                       "ok", "c"]])

    def test_backends_rank_in_a_fixed_order_then_by_name(self):
        names = ["zeta", "mpi", "alpha", "shm", "auto", "custom-twoshot", "custom-oneshot", "nccl"]
        self.assertEqual(sorted(names, key=plots._backend_rank),
                         ["nccl", "custom-oneshot", "custom-twoshot", "auto", "shm", "mpi", "alpha", "zeta"])
        self.assertEqual(plots._backend_rank("nccl"), (0, "nccl"))
        self.assertEqual(plots._backend_rank("zeta"), (6, "zeta"))

    def test_a_param_varies_when_it_takes_two_values_or_is_missing_somewhere(self):
        records = [{"params": {"tp": 2, "dtype": "bf16", "quant": "a", "case_id": 1, "label": 1, "repetition": 1,
                               "workload": 1, "batch_size": 1}},
                   {"params": {"tp": 4, "dtype": "bf16", "case_id": 2, "label": 2, "repetition": 2, "workload": 2,
                               "batch_size": 2}},
                   {"params": {"tp": 2, "dtype": "bf16", "quant": "a", "batch_size": 3}}]
        self.assertEqual(plots.varying_params(records, {"batch_size"}), ["quant", "tp"])
        self.assertEqual(plots.varying_params(records, {"batch_size", "tp"}), ["quant"])
        self.assertEqual(plots.varying_params(records[:1], set()), [])
        self.assertEqual(plots.varying_params([{"params": {"x": 1}}, {}], set()), ["x"])


def compared(case_id, line, **entries):
    return rec(case_id, "ok", line, baseline=entries)


class Baselines(unittest.TestCase):
    def records(self):
        return [
            compared("a", 1, **{"latency.p50": {"verdict": "ok", "ratio": 1.01, "old": 10, "new": 10.1},
                                "tokens": {"verdict": "improvement", "ratio": 0.5, "p_value": 0.001},
                                "digest.logits": {"verdict": "regression", "ratio": 2.0},
                                "note": {"verdict": "ok"}}),
            compared("b", 2, **{"latency.p50": {"verdict": "regression", "ratio": 1.25, "ci_low": 1.2, "ci_high": 1.3,
                                                "p_value": 0.0001, "old": 8, "new": 10},
                                "latency.p99": {"verdict": "noise", "ratio": 1.1},
                                "memory": {"verdict": "no-baseline", "new": 3}}),
            compared("c", 3, **{"latency.p50": {"verdict": "not-like-for-like", "ratio": 0.9},
                                "tokens": {"verdict": "machine-drift", "ratio": 1.2},
                                "x": {"verdict": "insufficient-data", "ratio": None, "old": 1},
                                "y": {"verdict": "brand-new", "ratio": 0.0}}),
            compared("d", 4, **{"latency.p50": {"verdict": "regression", "ratio": 1.5},
                                "zero": {"verdict": "ok", "ratio": -1}}),
            rec("e", line=5),
        ]

    def test_the_comparisons_are_the_entries_with_a_verdict_and_a_ratio_or_values(self):
        entries = tables.baseline_metric_entries(self.records())
        self.assertEqual([(r["case_id"], m) for r, m, _ in entries],
                         [("a", "digest.logits"), ("a", "latency.p50"), ("a", "tokens"),
                          ("b", "latency.p50"), ("b", "latency.p99"), ("b", "memory"),
                          ("c", "latency.p50"), ("c", "tokens"), ("c", "x"), ("c", "y"),
                          ("d", "latency.p50"), ("d", "zero")])
        # The build and hardware notes beside the comparisons are no comparison.
        notes = compared("z", 1, m={"ratio": 2}, n={"verdict": "ok", "old": 1}, o={"verdict": "ok", "new": 2},
                         build="abc", p={"verdict": "ok", "note": "x"})
        self.assertEqual([m for _, m, _ in tables.baseline_metric_entries([notes])], ["n", "o"])

    def test_a_ratio_is_comparable_when_positive_and_not_a_digest(self):
        self.assertEqual(tables._comparable_ratio("latency.p50", {"ratio": 1.5}), 1.5)
        self.assertEqual(tables._comparable_ratio("latency.p50", {"ratio": 1e-9}), 1e-9)
        for name, entry in (("digest.logits", {"ratio": 1.5}), ("latency.p50", {"ratio": 0}),
                            ("latency.p50", {"ratio": -2}), ("latency.p50", {"ratio": None}),
                            ("latency.p50", {"ratio": True}), ("latency.p50", {})):
            self.assertIsNone(tables._comparable_ratio(name, entry), (name, entry))

    def test_comparisons_not_ok_are_listed_regressions_first_with_their_delta(self):
        table = tables.regression_table(self.records())
        self.assertEqual(table.headers,
                         ["label", "metric", "old", "new", "Δ %", "ratio", "verdict", "p-value", "case_id"])
        self.assertEqual(table.rows, [
            ["a", "digest.logits", None, None, None, 2, "regression", None, "a"],
            ["b", "latency.p50", 8, 10, 25, 1.25, "regression", 0.0001, "b"],
            ["d", "latency.p50", None, None, 50, 1.5, "regression", None, "d"],
            ["c", "latency.p50", None, None, -10, 0.9, "not-like-for-like", None, "c"],
            ["c", "tokens", None, None, 20, 1.2, "machine-drift", None, "c"],
            ["a", "tokens", None, None, -50, 0.5, "improvement", 0.001, "a"],
            ["b", "latency.p99", None, None, 10, 1.1, "noise", None, "b"],
            ["c", "x", 1, None, None, None, "insufficient-data", None, "c"],
            ["c", "y", None, None, None, 0, "brand-new", None, "c"],
        ])
        self.assertEqual(table.classes, ["bad", "bad", "bad", "bad", "warn", "", "warn", "warn", ""])
        one = compared("q", 1, m={"verdict": "regression", "ratio": 1.23456})
        self.assertEqual(tables.regression_table([one]).rows[0][4], 23.5)

    def test_the_geometric_mean_of_comparable_ratios_per_metric_and_their_verdicts(self):
        table = tables.geomean_table(self.records())
        self.assertEqual(table.headers, ["metric", "cases", "geomean new/old", "Δ %", "verdicts"])
        p50 = math.exp((math.log(1.01) + math.log(1.25) + math.log(0.9) + math.log(1.5)) / 4)
        tok = math.exp((math.log(0.5) + math.log(1.2)) / 2)
        self.assertEqual(table.rows, [
            ["latency.p50", 4, tables.num(p50), tables.num((p50 - 1) * 100, 3),
             "1 not-like-for-like, 1 ok, 2 regression"],
            ["latency.p99", 1, 1.1, 10, "1 noise"],
            ["tokens", 2, tables.num(tok), tables.num((tok - 1) * 100, 3), "1 improvement, 1 machine-drift"],
        ])
        self.assertEqual(table.classes, ["bad", "", ""])
        self.assertEqual(table.rows[0][2:4], [1.143, 14.3])
        self.assertEqual(tables.geomean_table([compared("q", 1, m={"verdict": "ok", "ratio": 0})]).rows, [])

    def test_baseline_verdicts_put_regressions_first_then_by_line_and_metric(self):
        order = [(r["case_id"], m, e["verdict"]) for r, m, e in plots.baseline_rows(self.records())]
        self.assertEqual(order, [
            ("a", "digest.logits", "regression"), ("b", "latency.p50", "regression"),
            ("d", "latency.p50", "regression"), ("a", "tokens", "improvement"), ("b", "latency.p99", "noise"),
            ("c", "x", "insufficient-data"), ("a", "latency.p50", "ok"), ("a", "note", "ok"), ("d", "zero", "ok"),
            ("b", "memory", "no-baseline"), ("c", "latency.p50", "not-like-for-like"), ("c", "tokens", "machine-drift"),
            ("c", "y", "brand-new")])

    def test_the_verdict_orders_the_rows_before_the_line_does(self):
        # Lines run against the verdict order, so each place is the verdict's, not the file's.
        verdicts = ["brand-new", "insufficient-data", "noise", "improvement", "machine-drift", "not-like-for-like",
                    "ok", "no-baseline", "regression"]
        records = [compared(v, i, **{"m": {"verdict": v, "ratio": 1.5}}) for i, v in enumerate(verdicts)]
        records[-1]["baseline"]["a"] = {"verdict": "regression", "ratio": 2.0}
        self.assertEqual([(r["case_id"], m) for r, m, _ in plots.baseline_rows(records)],
                         [("regression", "a"), ("regression", "m"), ("improvement", "m"), ("noise", "m"),
                          ("insufficient-data", "m"), ("ok", "m"),
                          ("brand-new", "m"), ("machine-drift", "m"), ("not-like-for-like", "m"), ("no-baseline", "m")])
        self.assertEqual([(r[-1], r[1]) for r in tables.regression_table(records).rows],
                         [("regression", "a"), ("regression", "m"), ("not-like-for-like", "m"), ("machine-drift", "m"),
                          ("improvement", "m"), ("noise", "m"), ("insufficient-data", "m"), ("brand-new", "m")])

    def test_the_baseline_table_shows_each_verdict_and_its_numbers(self):
        records = [r for r in self.records() if r["case_id"] in ("b", "c")]
        table = tables.baseline_table(records)
        self.assertEqual(table.headers,
                         ["case_id", "label", "metric", "verdict", "ratio", "CI low", "CI high", "p-value"])
        self.assertEqual(table.rows, [
            ["b", "b", "latency.p50", "regression", 1.25, 1.2, 1.3, 0.0001],
            ["b", "b", "latency.p99", "noise", 1.1, None, None, None],
            ["c", "c", "x", "insufficient-data", None, None, None, None],
            ["b", "b", "memory", "no-baseline", None, None, None, None],
            ["c", "c", "latency.p50", "not-like-for-like", 0.9, None, None, None],
            ["c", "c", "tokens", "machine-drift", 1.2, None, None, None],
            ["c", "c", "y", "brand-new", 0, None, None, None],
        ])
        self.assertEqual(table.classes, ["bad", "warn", "warn", "", "bad", "", ""])
        notable = tables.baseline_table(self.records(), only_notable=True)
        self.assertNotIn("ok", [row[3] for row in notable.rows])
        self.assertNotIn("no-baseline", [row[3] for row in notable.rows])
        self.assertEqual(len(notable.rows), 13 - 4)


class Checks(unittest.TestCase):
    def records(self):
        return [rec("a", line=1, label="A", checks={"zeta": {"status": "pass", "detail": "max diff 0"},
                                                     "alpha": {"status": "fail", "detail": {"max": 3},
                                                               "cases": ["a", "b"]}}),
                rec("b", line=2, checks={"mid": {"status": "skipped", "cases": "a,b"}}),
                rec("c", line=3)]

    def run_json(self):
        return {"summary": {"checks": {
            "alpha": ["not a group", {"status": "fail", "cases": ["a", "b"], "detail": "again"},
                      {"status": "fail", "cases": ["x", 7], "detail": "never completed"}],
            "beta": [{"status": "pass"}],
            "gamma": [{"status": "not-implemented", "cases": []}]}}}

    def test_every_check_is_a_row_and_groups_only_run_json_names_are_added(self):
        rows = tables.check_rows(self.records(), self.run_json())
        self.assertEqual(rows, [
            ["a", "A", "alpha", "fail", '{"max": 3}', "a, b"],
            ["a", "A", "zeta", "pass", "max diff 0", None],
            ["b", "b", "mid", "skipped", None, None],
            ["x", "(run.json summary)", "alpha", "fail", "never completed", "x, 7"],
            [None, "(run.json summary)", "beta", "pass", None, None],
            [None, "(run.json summary)", "gamma", "not-implemented", None, None],
        ])
        self.assertEqual(tables.check_rows(self.records()), rows[:3])
        self.assertEqual(tables.check_rows([], {"summary": None}), [])

    def test_failures_come_first_passes_last_and_only_failures_can_be_asked(self):
        table = tables.conformance_table(self.records(), self.run_json())
        self.assertEqual(table.headers, ["case_id", "label", "check", "status", "detail", "group cases"])
        self.assertEqual([(r[2], r[3]) for r in table.rows],
                         [("alpha", "fail"), ("alpha", "fail"), ("gamma", "not-implemented"), ("mid", "skipped"),
                          ("beta", "pass"), ("zeta", "pass")])
        self.assertEqual(table.classes, ["bad", "bad", "warn", "warn", "", ""])
        failures = tables.conformance_table(self.records(), self.run_json(), only_failures=True)
        self.assertEqual([(r[2], r[3]) for r in failures.rows],
                         [("alpha", "fail"), ("alpha", "fail"), ("gamma", "not-implemented"), ("mid", "skipped")])
        self.assertEqual(failures.classes, ["bad", "bad", "warn", "warn"])

    def test_a_failure_comes_before_any_other_status_whatever_its_name(self):
        records = [rec("a", checks={"zz": {"status": "fail"}, "aa": {"status": "skipped"}, "ab": {"status": "pass"}})]
        self.assertEqual([(r[2], r[3]) for r in tables.conformance_table(records).rows],
                         [("zz", "fail"), ("aa", "skipped"), ("ab", "pass")])

    def test_results_are_counted_per_check(self):
        self.assertEqual(tables.check_summary(self.records(), self.run_json()),
                         {"alpha": {"fail": 2}, "zeta": {"pass": 1}, "mid": {"skipped": 1}, "beta": {"pass": 1},
                          "gamma": {"not-implemented": 1}})
        self.assertEqual(tables.check_summary([]), {})

    def test_where_failing_checks_sides_part_is_one_row_per_localized_group(self):
        found = {"found": True, "sides": ["nccl", "custom"], "site": "layer 2 all_reduce", "layer": 2, "forward": 0,
                 "inputs_equal": True, "max_abs_diff": 0.031234, "max_rel_diff": 0.0625, "rel_l2": 0.06251,
                 "reruns": ["a.digests", "b.digests"]}
        run = {"summary": {"checks": {
            "z": [{"status": "fail", "localization": found}],
            "a": [{"status": "fail", "localization": "text"}, {"status": "fail"}, "x",
                  {"status": "fail", "localization": {"found": False, "sentence": "no divergence", "sides": ["x", "y"],
                                                      "reruns": ["r"]}},
                  {"status": "fail",
                   "localization": dict(found, inputs_equal=False, layer=None, sides=None, reruns=None)},
                  {"status": "fail", "localization": dict(found, inputs_equal="?")}],
            "b": "not a list", "c": None}}}
        table = tables.localization_table(run)
        self.assertEqual(table.headers, ["check", "sides", "where", "layer", "forward", "inputs", "max abs diff",
                                         "max rel diff", "rel-L2", "reruns"])
        self.assertEqual(table.rows, [
            ["a", "x vs y", "no divergence", None, None, None, None, None, None, "r"],
            ["a", "", "layer 2 all_reduce", None, 0, "differ", 0.03123, 0.0625, 0.06251, ""],
            ["a", "nccl vs custom", "layer 2 all_reduce", 2, 0, "-", 0.03123, 0.0625, 0.06251, "a.digests, b.digests"],
            ["z", "nccl vs custom", "layer 2 all_reduce", 2, 0, "equal", 0.03123, 0.0625, 0.06251,
             "a.digests, b.digests"],
        ])
        self.assertEqual(table.classes, ["warn", "bad", "bad", "bad"])
        self.assertEqual(tables.localization_table().rows, [])
        self.assertEqual(tables.localization_table({"summary": None}).rows, [])


def pooled(backend, tokens_planned, pools, status="ok", role="sweep", **params):
    params = dict({"tp": 2, "mem_fraction": 0.9, "allreduce": backend}, **params)
    memory = [{"kv_pool": {"tokens": t, "mem_fraction": 0.9}} for t in pools]
    return dict(rec(backend, status, params=params, plan={"max_tokens": tokens_planned}, memory=memory),
                **({"role": role} if role != "sweep" else {}))


class Capacity(unittest.TestCase):
    def test_the_largest_batch_is_the_kv_tokens_over_one_sequence(self):
        r = rec("a", params={"batch_size": 4}, plan={"requested_tokens": 400})
        self.assertEqual(tables.largest_batch(r, 1050), 10)
        self.assertEqual(tables.largest_batch(r, 1000), 10)
        self.assertEqual(tables.largest_batch(r, 999.9), 9)
        self.assertEqual(tables.largest_batch(r, 99), 0)
        self.assertEqual(tables.largest_batch(rec("a", params={"batch_size": 3}, plan={"requested_tokens": 2}), 7), 10)
        self.assertEqual(tables.largest_batch(rec("a", params={"batch_size": 1}, plan={"requested_tokens": 1}), 7), 7)
        for kv in (None, True, "1000"):
            self.assertIsNone(tables.largest_batch(r, kv))
        for batch, requested in ((0, 400), (4, 0), (-1, 400), (4, -400), (None, 400), (4, None)):
            self.assertIsNone(tables.largest_batch(rec("a", params={"batch_size": batch},
                                                       plan={"requested_tokens": requested}), 1000), (batch, requested))
        self.assertIsNone(tables.largest_batch(rec("a", params={"batch_size": 4}), 1000))

    def test_a_custom_allreduces_cost_is_nccls_kv_tokens_minus_its_own_at_the_same_point(self):
        records = [pooled("nccl", 1000, [900, 880]), pooled("custom-oneshot", 960, [870, 850]),
                   pooled("custom-twoshot", 950, []), pooled("shm", 10, [1]),
                   pooled("nccl", 500, [400], tp=4), pooled("custom-oneshot", 450, [360, 350], tp=4),
                   pooled("custom-oneshot", 1, [1], role="repeat"),
                   pooled("nccl", 700, [600], mem_fraction=0.5), pooled("custom-oneshot", 650, [550], "failed",
                                                                        mem_fraction=0.5),
                   pooled("custom-oneshot", 100, [90], mem_fraction=0.7),
                   pooled("nccl", 100, [90], mem_fraction=True), pooled("custom-oneshot", 50, [45], mem_fraction=True),
                   pooled("nccl", 100, [90], batch_size=8), pooled("custom-oneshot", 40, [30], batch_size=8),
                   rec("noplan", params={"tp": 2, "mem_fraction": 0.9, "allreduce": "custom-oneshot"})]
        table = tables.comm_cost_table(records)
        self.assertEqual(table.headers, ["tp", "mem_fraction", "custom backend", "planned nccl", "planned custom",
                                         "planned cost", "measured nccl", "measured custom", "measured cost"])
        self.assertEqual(table.rows, [
            [2, 0.5, "custom-oneshot", 700, 650, 50, 600, None, None],
            [2, 0.9, "custom-oneshot", 100, 40, 60, 90, 30, 60],
            [2, 0.9, "custom-oneshot", 1000, 960, 40, 880, 850, 30],
            [2, 0.9, "custom-twoshot", 1000, 950, 50, 880, None, None],
            [4, 0.9, "custom-oneshot", 500, 450, 50, 400, 350, 50],
        ])

    def test_cases_pair_on_their_params_in_any_order_and_a_missing_tp_is_a_point_of_its_own(self):
        nccl = pooled("nccl", 100, [90], batch_size=8)
        custom = pooled("custom-oneshot", 80, [70])
        custom["params"] = {"batch_size": 8, "allreduce": "custom-oneshot", "mem_fraction": 0.9, "tp": 2}
        auto = pooled("auto", 10, [9], batch_size=8)
        untp = [pooled("nccl", 60, [50], tp=None), pooled("custom-twoshot", 55, [45], tp=None)]
        self.assertEqual(tables.comm_cost_table([auto, nccl, custom] + untp).rows,
                         [[2, 0.9, "custom-oneshot", 100, 80, 20, 90, 70, 20],
                          [None, 0.9, "custom-twoshot", 60, 55, 5, 50, 45, 5]])

    def test_the_smallest_pool_is_the_groups_and_numbers_are_not_booleans(self):
        self.assertEqual(tables._smallest_pool(pooled("nccl", 1, [900, 880, 890])), 880)
        self.assertIsNone(tables._smallest_pool(pooled("nccl", 1, [900], "failed")))
        self.assertIsNone(tables._smallest_pool(pooled("nccl", 1, [])))
        self.assertIsNone(tables._smallest_pool(rec("a", memory={"kv_pool": {"tokens": 5}})))
        self.assertIsNone(tables._smallest_pool(rec("a", memory={"kv_tokens": 7})))
        self.assertIsNone(tables._smallest_pool(rec("a")))
        self.assertTrue(tables.is_number_like(0) and tables.is_number_like(-1.5))
        for value in (True, None, "1"):
            self.assertFalse(tables.is_number_like(value))


class SummaryMarkdown(unittest.TestCase):
    def test_every_row_is_written_and_cut_rows_are_counted(self):
        table = tables.Table(["case", "p50 µs"])
        table.add(["a", 1.23456789])
        table.add(["b|c", None])
        table.add(["d", 3])
        self.assertEqual(markdown_report.render_table(table),
                         "| case | p50 µs |\n|---|---|\n| a | 1.23457 |\n| b\\|c | - |\n| d | 3 |\n")
        self.assertEqual(markdown_report.render_table(table, limit=2),
                         "| case | p50 µs |\n|---|---|\n| a | 1.23457 |\n| b\\|c | - |\n"
                         "\n_1 more rows in report.html._\n")
        self.assertEqual(markdown_report.render_table(table, limit=3), markdown_report.render_table(table))
        self.assertEqual(markdown_report.render_table(tables.Table(["x"])), "_none_\n")
        self.assertEqual(markdown_report.render_table(tables.Table(["x"]), "no *rows*"), "_no \\*rows\\*_\n")

    def test_text_is_escaped_for_markdown_tables_and_the_html_they_pass(self):
        self.assertEqual(markdown_report.md(None), "-")
        self.assertEqual(markdown_report.md(0), "0")
        self.assertEqual(markdown_report.md('<script>&"x"</script>'), '&lt;script&gt;&amp;"x"&lt;/script&gt;')
        self.assertEqual(markdown_report.md("a|b`c[d]e*f\\g\nh\ri"), "a\\|b\\`c\\[d\\]e\\*f\\\\g<br>hi")


if __name__ == "__main__":
    unittest.main()
