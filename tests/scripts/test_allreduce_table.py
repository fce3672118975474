#!/usr/bin/env python3
"""scripts/allreduce_table.py --nccl-tests: nccl-tests' stdout beside tpbench's records, one row
per size, and the 10 % flag on tpbench nccl / nccl-tests.

The nccl-tests side is tests/data/nccl_tests/*.format-fixture.txt, written by hand in the
layout all_reduce_perf prints (its times are chosen, not measured); the tpbench side is the
report fixture (tests/data/results_fixture: a synthetic 2-GPU allreduce sweep, eager). The
expected ratios are computed here from the two inputs, not copied from the script's output."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "allreduce_table.py")
PEER = os.path.join(ROOT, "tests", "data", "nccl_tests", "all_reduce_perf_g2_bf16_G1.format-fixture.txt")
RESULTS = os.path.join(ROOT, "tests", "data", "results_fixture", "results.jsonl")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def peer_times():
    """{bytes: out-of-place time} read straight from the fixture's rows."""
    times = {}
    with open(PEER) as f:
        for line in f:
            fields = line.split()
            if fields and not line.startswith("#"):
                times[int(fields[0])] = float(fields[5])
    return times


def tpbench_nccl_means():
    """{bytes: latency.mean} of the fixture's ok nccl sweep cases at TP 2, eager."""
    means = {}
    with open(RESULTS) as f:
        for line in f:
            rec = json.loads(line)
            p = rec["params"]
            if (rec["status"] == "ok" and rec["workload"] == "allreduce" and rec["role"] == "sweep"
                    and p.get("allreduce") == "nccl" and p.get("tp") == 2 and not p.get("cuda_graph")):
                means[p["message_bytes"]] = rec["latency"]["mean"]
    return means


class AgainstNcclTests(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="tpb-allreduce-table-")
        self.json_out = os.path.join(self.tmp.name, "table.json")
        self.md_out = os.path.join(self.tmp.name, "table.md")

    def tearDown(self):
        self.tmp.cleanup()

    def table(self, *extra):
        proc = run("--nccl-tests", PEER, "--results", RESULTS, "--json", self.json_out, "--markdown", self.md_out,
                   *extra)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(self.json_out) as f:
            return proc, json.load(f)

    def test_rows_ratios_and_flags(self):
        proc, table = self.table("--cuda-graph", "false")
        peer, ours = peer_times(), tpbench_nccl_means()
        both = sorted(set(peer) & set(ours))
        self.assertGreaterEqual(len(both), 4)
        rows = {r["bytes"]: r for r in table["rows"]}
        self.assertEqual(sorted(rows), sorted(set(peer) | set(ours)))  # every size either side has
        flagged = []
        for size in both:
            ratio = ours[size] / peer[size]
            self.assertAlmostEqual(rows[size]["ratio"], ratio, places=9)
            self.assertEqual(rows[size]["outside"], abs(ratio - 1) > 0.10, size)
            self.assertEqual(rows[size]["nccl_tests"]["out_of_place"]["time_us"], peer[size])
            self.assertEqual(rows[size]["tpbench"]["nccl"]["mean_us"], ours[size])
            for backend in ("custom-oneshot", "custom-twoshot", "auto"):
                self.assertIsNotNone(rows[size]["tpbench"][backend], (size, backend))
            if rows[size]["outside"]:
                flagged.append(size)
        # The fixture holds sizes on both sides of the line, so a flag that is always (or never)
        # set fails here.
        self.assertTrue(flagged)
        self.assertLess(len(flagged), len(both))
        self.assertEqual(table["outside"], flagged)
        for size in set(peer) - set(ours):
            self.assertIsNone(rows[size]["ratio"])
            self.assertIsNone(rows[size]["outside"])
        self.assertEqual((table["tp"], table["cuda_graph"], table["dtype"]), (2, False, "bf16"))
        # The markdown says it per row, on stdout and in the file alike.
        with open(self.md_out) as f:
            self.assertEqual(f.read(), proc.stdout)
        for size in both:
            line = next(l for l in proc.stdout.splitlines() if l.startswith(f"| {size} |"))
            self.assertTrue(line.endswith("| OUTSIDE 10% |" if size in flagged else "| ok |"), line)
        self.assertIn(f"outside 10% of nccl-tests at {len(flagged)} of {len(both)} size(s)", proc.stdout)

    def test_defaults_follow_nccl_tests(self):
        # nccl-tests ran 2 ranks with graphs (-G 1); the fixture's cases are eager: nothing pairs,
        # and the table says so rather than compare eager with graph replay.
        proc, table = self.table()
        self.assertEqual((table["tp"], table["cuda_graph"]), (2, True))
        self.assertTrue(all(r["ratio"] is None for r in table["rows"]))
        self.assertIn("no size has both", proc.stdout)

    def test_other_tp_pairs_nothing(self):
        _, table = self.table("--cuda-graph", "false", "--tp", "4")
        self.assertTrue(all(r["ratio"] is None for r in table["rows"]))

    def test_control_repeat_and_shared_cases_are_left_out(self):
        records = []
        with open(RESULTS) as f:
            for line in f:
                rec = json.loads(line)
                p = rec["params"]
                if p.get("allreduce") == "nccl" and p.get("message_bytes") in (16384, 65536):
                    rec["latency"]["mean"] *= 100  # would flag loudly if taken
                    if p["message_bytes"] == 16384:
                        rec["role"] = "control-start"
                    else:
                        rec["placement"] = {"placement": "shared", "ranks_per_gpu": 2}
                records.append(rec)
        edited = os.path.join(self.tmp.name, "results.jsonl")
        with open(edited, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in records))
        proc = run("--nccl-tests", PEER, "--results", edited, "--cuda-graph", "false", "--json", self.json_out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(self.json_out) as f:
            rows = {r["bytes"]: r for r in json.load(f)["rows"]}
        for size in (16384, 65536):
            self.assertIsNone(rows[size]["tpbench"]["nccl"], size)
            self.assertIsNotNone(rows[size]["tpbench"]["custom-oneshot"], size)


class BadInput(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="tpb-allreduce-table-")

    def tearDown(self):
        self.tmp.cleanup()

    def expect_error(self, peer, results, *fragments):
        proc = run("--nccl-tests", peer, "--results", results)
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        for fragment in fragments:
            self.assertIn(fragment, proc.stderr)

    def peer_with(self, edit):
        with open(PEER) as f:
            lines = f.read().splitlines()
        path = os.path.join(self.tmp.name, "peer.txt")
        with open(path, "w") as f:
            f.write("\n".join(edit(lines)) + "\n")
        return path

    def first_row(self, lines):
        return next(i for i, l in enumerate(lines) if l and not l.startswith("#"))

    def test_cut_row_names_its_line(self):
        def cut(lines):
            i = self.first_row(lines)
            lines[i] = " ".join(lines[i].split()[:9])
            return lines
        peer = self.peer_with(cut)
        with open(PEER) as f:
            row = self.first_row(f.read().splitlines()) + 1
        self.expect_error(peer, RESULTS, f"{peer}:{row}:", "expected 13 columns", "got 9")

    def test_not_a_number(self):
        def garble(lines):
            i = self.first_row(lines)
            fields = lines[i].split()
            fields[5] = "fast"
            lines[i] = "  ".join(fields)
            return lines
        self.expect_error(self.peer_with(garble), RESULTS, "column 6: expected a number, got 'fast'")

    def test_no_rows(self):
        peer = self.peer_with(lambda lines: [l for l in lines if l.startswith("#")])
        self.expect_error(peer, RESULTS, peer, "no result row")

    def test_nccl_log_lines_are_not_rows(self):
        peer = self.peer_with(lambda lines: lines[:12] + ["host:123:456 [0] NCCL INFO Channel 00/24 : 0 1"] + lines[12:])
        proc = run("--nccl-tests", peer, "--results", RESULTS)
        self.assertEqual(proc.returncode, 0, proc.stderr)

    def test_bad_record(self):
        results = os.path.join(self.tmp.name, "results.jsonl")
        shutil.copy(RESULTS, results)
        with open(results, "a") as f:
            f.write('{"case_id": "x", "status": "ok", "params": {}, "latency": {"mean": "slow"}}\n')
        self.expect_error(PEER, results, "$.latency.mean", "expected number")

    def test_missing_results(self):
        self.expect_error(PEER, os.path.join(self.tmp.name, "none.jsonl"), "none.jsonl: no such file")


if __name__ == "__main__":
    unittest.main()
