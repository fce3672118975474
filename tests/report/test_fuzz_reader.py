#!/usr/bin/env python3
"""A plain fuzz loop over the report's reader (issue 37): mutated results lines and run.json,
read as `tpbench report` reads them, may only be accepted or refused with ReportInputError,
never end in another exception (a traceback). What is accepted is then made into both
reports' text (tables, report.html, summary.md) without plots, the part that runs per record;
a few accepted mutants are plotted too.

The mutations: bytes flipped, inserted, cut; values at random JSON paths replaced by values
of another type, NaN and Infinity, numbers past a double, 5,000-digit integers, deep nesting,
NUL, invalid UTF-8; keys given twice; lines doubled. Seeded, so a run is repeatable:
TPB_REPORT_FUZZ_SEED picks another seed, TPB_REPORT_FUZZ_S the time (default 10 s). A finding
is left in a temporary folder named in the failure, with the exception.
"""

import copy
import json
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_test_util as util  # noqa: E402

try:
    import matplotlib  # noqa: F401
except ImportError:
    print("skipped: matplotlib is not installed")
    sys.exit(77)

sys.path.insert(0, os.path.join(util.ROOT, "report"))
import html_report  # noqa: E402
import markdown_report  # noqa: E402
import plots  # noqa: E402
import results_io  # noqa: E402

SEED = int(os.environ.get("TPB_REPORT_FUZZ_SEED", "37"))
SECONDS = float(os.environ.get("TPB_REPORT_FUZZ_S", "10"))
PLOTTED = 3  # accepted mutants also plotted (about a second each)

ODD_VALUES = [None, True, False, 0, -1, 2 ** 63, 2 ** 64, -2 ** 63 - 1, 1e308, -1e-308, 0.5,
              "", "x" * 5000, "\u202e", "<script>", [], {}, [None], {"": None}, [[[]]],
              float("nan"), float("inf"), float("-inf")]
ODD_TOKENS = [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e400", b"9" * 5000, b"0" * 30 + b"1",
              b'"\\u0000"', b'"\xff"', b'"\xc3\x28"', b'"\xed\xa0\x80"', b"[" * 70 + b"]" * 70,
              b"[" * 5000 + b"]" * 5000, b'{"a": 1, "a": 2}', b"null", b"true", b"-0", b"1E+2",
              b'"\\ud800"']


def base_lines():
    lines = []
    for folder in (util.FIXTURE, os.path.join(util.REAL_RUNS, "quickstart-cpu"),
                   os.path.join(util.REAL_RUNS, "ci-smoke")):
        with open(os.path.join(folder, "results.jsonl"), "rb") as f:
            lines += [line for line in f.read().split(b"\n") if line.strip()]
    return lines


def paths_of(value, path=()):
    yield path
    if isinstance(value, dict):
        for key, child in value.items():
            yield from paths_of(child, path + (key,))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from paths_of(child, path + (i,))


def replace_at(value, path, new):
    if not path:
        return new
    value[path[0]] = replace_at(value[path[0]], path[1:], new)
    return value


def mutate(rng, line):
    kind = rng.randrange(6)
    if kind == 0:  # bytes flipped
        data = bytearray(line)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data).replace(b"\n", b" ")
    if kind == 1:  # bytes cut
        a = rng.randrange(len(line))
        return line[:a] + line[a + rng.randint(1, 40):]
    if kind == 2:  # an odd token after a colon
        colons = [i for i, c in enumerate(line) if c == ord(":")]
        at = rng.choice(colons) + 1
        end = at
        depth = 0
        while end < len(line) and not (depth == 0 and line[end] in b",}"):
            depth += line[end] in b"[{"
            depth -= line[end] in b"]}"
            end += 1
        return line[:at] + rng.choice(ODD_TOKENS) + line[end:]
    if kind == 3:  # a key twice
        return line[:1] + b'"status": "ok", ' + line[1:]
    record = json.loads(line)
    paths = list(paths_of(record))
    for _ in range(rng.randint(1, 3)):  # values of another type at random paths
        record = replace_at(record, rng.choice(paths[1:]), copy.deepcopy(rng.choice(ODD_VALUES)))
        paths = list(paths_of(record))
        if len(paths) < 2:
            break
    return json.dumps(record).encode()


class FuzzReader(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tpb-report-fuzz-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def finding(self, files, err):
        kept = tempfile.mkdtemp(prefix="tpb-report-fuzz-finding-")
        for name, data in files.items():
            with open(os.path.join(kept, name), "wb") as f:
                f.write(data)
        self.fail(f"{type(err).__name__} on the input in {kept}:\n{traceback.format_exc()}")

    def test_reader_refuses_or_reads(self):
        rng = random.Random(SEED)
        lines = base_lines()
        with open(os.path.join(util.FIXTURE, "run.json"), "rb") as f:
            run_json = f.read()
        counts = {"runs": 0, "refused": 0, "accepted": 0, "plotted": 0}
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline:
            chosen = rng.sample(lines, 3)
            chosen[0] = mutate(rng, chosen[0])
            if rng.random() < 0.1:
                chosen.append(chosen[0])  # a case recorded twice
            files = {"results.jsonl": b"\n".join(chosen) + b"\n",
                     "run.json": mutate(rng, run_json) if rng.random() < 0.1 else run_json}
            for name, data in files.items():
                with open(os.path.join(self.tmp, name), "wb") as f:
                    f.write(data)
            counts["runs"] += 1
            try:
                records = results_io.latest_per_case(
                    results_io.load_results(os.path.join(self.tmp, "results.jsonl")))
                run = results_io.load_run(os.path.join(self.tmp, "run.json"))
            except results_io.ReportInputError as err:
                self.assertNotIn("\n", str(err))
                counts["refused"] += 1
                continue
            except Exception as err:  # noqa: BLE001  (anything else is the finding)
                self.finding(files, err)
            counts["accepted"] += 1
            try:
                figures = []
                if counts["plotted"] < PLOTTED and rng.random() < 0.05:
                    figures = plots.all_figures(records, self.tmp)
                    counts["plotted"] += 1
                html_report.write(os.path.join(self.tmp, "report.html"), run, records, figures)
                markdown_report.write(os.path.join(self.tmp, "summary.md"), run, records, figures)
            except Exception as err:  # noqa: BLE001
                self.finding(files, err)
        print(f"report reader fuzz, seed {SEED}: {counts['runs']} inputs in {SECONDS:g} s, "
              f"{counts['refused']} refused, {counts['accepted']} accepted and reported "
              f"({counts['plotted']} plotted)")
        self.assertGreater(counts["refused"], 0)
        self.assertGreater(counts["accepted"], 0)


if __name__ == "__main__":
    unittest.main()
