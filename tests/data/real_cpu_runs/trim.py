#!/usr/bin/env python3
"""Copies a real `tpbench run` folder's results.jsonl and run.json here, trimmed of what the
report never reads (engine outputs, per-rank call sequences and instrumentation detail) so
the fixture stays small; every number the report shows is kept as the run wrote it.

usage: trim.py RUN_DIR NAME    (writes tests/data/real_cpu_runs/NAME/)
Made from: tpbench run quickstart-cpu / tpbench run ci-smoke on a 2-core CPU machine.
"""

import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def trim(rec):
    rec.pop("outputs", None)
    for entry in rec.get("metrics") or []:
        if isinstance(entry, dict):
            entry.pop("sequence", None)
            entry.pop("instrumentation", None)
    return rec


def main(run_dir, name):
    out = os.path.join(HERE, name)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(run_dir, "results.jsonl"), encoding="utf-8") as f, \
            open(os.path.join(out, "results.jsonl"), "w", encoding="utf-8") as g:
        for line in f:
            if line.strip():
                g.write(json.dumps(trim(json.loads(line)), sort_keys=True) + "\n")
    shutil.copy(os.path.join(run_dir, "run.json"), os.path.join(out, "run.json"))


if __name__ == "__main__":
    main(*sys.argv[1:3])
