#!/usr/bin/env python3
"""The GPU engine's KV pool in a record (memory[rank].kv_pool, sized from mem_fraction) is the
measured side of the plan's max_tokens, and its breakdown term stacks as the KV cache; an
exact-size cache (mem_fraction 0) falls back to what the metrics say."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "report"))
import results_io as rio  # noqa: E402


class KvPool(unittest.TestCase):
    def record(self, fraction):
        return {"memory": [{"kv_pool": {"tokens": 123456, "mem_fraction": fraction},
                            "breakdown": {"weights": 10, "kv_pool": 20}}],
                "metrics": [{"kv_tokens": 17}]}

    def test_pool_tokens_are_the_measured_capacity(self):
        self.assertEqual(rio.measured_kv_tokens(self.record(0.9)), 123456)

    def test_exact_cache_falls_back_to_metrics(self):
        self.assertEqual(rio.measured_kv_tokens(self.record(0.0)), 17)

    def test_pool_term_stacks_as_kv_cache(self):
        self.assertEqual(rio.normalize_breakdown({"weights": 10, "kv_pool": 20}), {"weights": 10, "kv_cache": 20})


if __name__ == "__main__":
    unittest.main()
