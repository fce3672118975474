#!/usr/bin/env python3
"""scripts/mutation_report.py without running mutmut (CI runs it, .ci/run): the committed list
names every function of a planted module once, curated or left out with a reason, and a
function it misses, names twice or that does not exist is bad input (exit 2); a slice is the
mutants whose number ends in its digits; the staged copy leaves every function that is not
curated to mutmut's "no mutate" pragma and changes nothing else; a survivor is equivalent only
when its function, line and mutated line are those of an entry."""

import ast
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "mutation_report.py")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import mutation_report as mr  # noqa: E402


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


class TheList(unittest.TestCase):
    def setUp(self):
        with open(mr.DEFAULT_LIST, encoding="utf-8") as f:
            self.doc = json.load(f)
        tmp = tempfile.TemporaryDirectory(prefix="tpb-mutation-report-test-")
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name

    def refusal(self, doc):
        path = os.path.join(self.tmp, "list.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        p = run("--list-file", path, "--list")
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        return p.stderr

    def test_the_committed_list_decides_every_function_of_the_planted_modules(self):
        p = run("--list")
        self.assertEqual(p.returncode, 0, p.stderr)
        _, curated, excluded, modules = mr.load_list(mr.DEFAULT_LIST)
        self.assertEqual(modules, ["make_report", "markdown_report", "plots", "results_io", "tables"])
        self.assertIn("results_io.latest_per_case", curated)
        self.assertIn("results_io._Validator.expect", curated)
        for entry in self.doc["equivalent"]:
            self.assertIn(entry["function"], curated)

    def test_a_new_function_must_be_curated_or_excluded(self):
        self.doc["rules"][0]["functions"].remove("results_io._cut")
        self.assertIn("results_io._cut is neither curated (rules) nor excluded with a reason", self.refusal(self.doc))

    def test_a_function_listed_twice_or_missing_is_refused(self):
        self.doc["rules"][1]["functions"].append("results_io._cut")
        self.assertIn("results_io._cut listed twice", self.refusal(self.doc))
        self.doc["rules"][1]["functions"][-1] = "results_io.no_such_function"
        self.assertIn("results_io.no_such_function: no such function in report/", self.refusal(self.doc))

    def test_an_equivalent_entry_needs_its_reason_and_a_curated_function(self):
        self.doc["equivalent"].append({"function": "results_io._cut", "line": "a", "mutant": "b", "reason": " "})
        self.assertIn("$.equivalent[", self.refusal(self.doc))
        self.doc["equivalent"][-1].update(function="results_io.scenario_name", reason="why")
        self.assertIn("results_io.scenario_name is not a curated function", self.refusal(self.doc))


class Mechanics(unittest.TestCase):
    def test_names_are_mutmuts(self):
        self.assertEqual(mr.mangled("tables.num"), "tables.x_num")
        self.assertEqual(mr.mangled("results_io._Validator.fail"), "results_io.x\u01c1_Validator\u01c1fail")

    def test_a_slice_is_the_numbers_ending_in_its_digits(self):
        self.assertIsNone(mr.digits_of_slice(None))
        self.assertEqual(mr.digits_of_slice("0/1"), "0123456789")
        self.assertEqual(mr.digits_of_slice("3/5"), "38")
        self.assertEqual(mr.digits_of_slice("1/2"), "13579")
        self.assertEqual(mr.digits_of_slice("9/10"), "9")
        covered = "".join(mr.digits_of_slice(f"{n}/5") for n in range(5))
        self.assertEqual(sorted(covered), list("0123456789"))
        self.assertIn(mr.digits_of_slice("auto/5"), [mr.digits_of_slice(f"{n}/5") for n in range(5)])
        for bad in ("3/4", "5/5", "x/5", "1"):
            p = run("--slice", bad)
            self.assertEqual(p.returncode, 2, bad)

    def test_the_staged_copy_marks_exactly_the_functions_not_curated(self):
        source = ('"""doc"""\n\n\ndef kept(a):\n    return a + 1\n\n\n'
                  'def left(a,\n         b):  # noqa: E501\n    """says why"""\n    return a - b\n\n\n'
                  'class C:\n    def m(self):\n        return 2\n\n    def n(self): return 3\n')
        out = mr.unplanted(source, "mod", {"mod.kept", "mod.C.m"})
        ast.parse(out)
        lines = out.split("\n")
        self.assertEqual(len(lines), len(source.split("\n")))
        marked = [line for line in lines if "no mutate" in line]
        self.assertEqual(marked, ["         b):  # pragma: no mutate block; noqa: E501",
                                  "    def n(self): return 3  # pragma: no mutate block"])
        self.assertEqual([a for a, b in zip(source.split("\n"), lines) if a != b],
                         ["         b):  # noqa: E501", "    def n(self): return 3"])

    def test_a_survivor_is_equivalent_only_as_its_entry_says(self):
        entry = {"function": "tables.num", "line": "x = 1", "mutant": "x = 2", "reason": "why"}
        by_mangled = {"tables.x_num": "tables.num", "tables.x_text": "tables.text"}
        verdicts = {"tables.x_num__mutmut_1": 0, "tables.x_num__mutmut_2": 0, "tables.x_num__mutmut_3": 1,
                    "tables.x_text__mutmut_1": 0, "tables.x_num__mutmut_4": 33, "tables.x_num__mutmut_5": None}
        lines = {"tables.x_num__mutmut_1": ("x = 1", "x = 2"), "tables.x_num__mutmut_2": ("x = 1", "x = 3"),
                 "tables.x_text__mutmut_1": ("x = 1", "x = 2")}
        equivalent, survivors, unclear, matched = mr.judge(verdicts, lines, [entry], by_mangled)
        self.assertEqual(equivalent, [("tables.x_num__mutmut_1", "why")])
        self.assertEqual([(s[0], s[2]) for s in survivors],
                         [("tables.x_num__mutmut_2", "survived"), ("tables.x_num__mutmut_4", "no listed test calls it"),
                          ("tables.x_text__mutmut_1", "survived")])
        self.assertEqual((unclear, matched), ([("tables.x_num__mutmut_5", None)], {0}))
        self.assertEqual(mr.changed_lines("--- a\n+++ b\n@@ -1 +1 @@\n ctx\n-    x = 1\n+    x = 2\n"),
                         ("x = 1", "x = 2"))


if __name__ == "__main__":
    unittest.main()
