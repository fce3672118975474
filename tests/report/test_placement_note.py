#!/usr/bin/env python3
"""A run whose ranks shared a GPU says at the top of summary.md and report.html that its
timings measure contention, not an interconnect; an exclusive run says nothing of the kind."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "report"))
import tables  # noqa: E402


def record(ranks_per_gpu):
    return {"status": "ok", "placement": {"placement": "shared" if ranks_per_gpu > 1 else "exclusive",
                                          "ranks_per_gpu": ranks_per_gpu, "mps": "private"}}


def pooled(backend, batch, planned, measured, role="sweep"):
    return {"status": "ok", "role": role, "params": {"tp": 2, "mem_fraction": 0.9, "allreduce": backend,
                                                      "batch_size": batch},
            "plan": {"max_tokens": planned}, "memory": [{"kv_pool": {"tokens": measured, "mem_fraction": 0.9}}]}


class CommCost(unittest.TestCase):
    def test_pairs_cases_that_differ_only_in_the_backend(self):
        rows = tables.comm_cost_table([pooled("nccl", 1, 100, 90), pooled("custom-oneshot", 1, 96, 87),
                                       pooled("nccl", 8, 50, 40), pooled("custom-oneshot", 8, 45, 36),
                                       pooled("custom-oneshot", 1, 1, 1, role="repeat")]).rows
        self.assertEqual(len(rows), 2)
        costs = sorted((r[5], r[8]) for r in rows)
        self.assertEqual(costs, [(4, 3), (5, 4)])


class PlacementNote(unittest.TestCase):
    def test_shared_run_is_labelled(self):
        note = tables.placement_note([record(4), record(2), record(1)])
        self.assertIn("2 of 3 cases", note)
        self.assertIn("2, 4 ranks per GPU", note)
        self.assertIn("not an interconnect", note)

    def test_exclusive_run_has_no_note(self):
        self.assertIsNone(tables.placement_note([record(1), {"status": "skipped"}]))


if __name__ == "__main__":
    unittest.main()
