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
