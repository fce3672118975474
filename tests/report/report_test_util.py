"""Helpers shared by the report tests (not a test itself: ctest runs tests/report/test_*.py).

Each test copies the committed fixture (tests/data/results_fixture) into a temporary folder,
edits it there when it needs to, and runs report/make_report.py as `tpbench report` does:
a separate interpreter process, judged by exit status, stdout/stderr and the files written.
"""

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "report", "make_report.py")
FIXTURE = os.path.join(ROOT, "tests", "data", "results_fixture")
PNG_NAMES = ("allreduce.png", "decode_latency.png", "prefill_latency.png",
             "throughput_latency.png", "prefill_ttft.png", "roofline.png",
             "speedup_heatmap.png", "memory.png", "kv_tokens.png", "baseline.png")
# Real CPU runs (tests/data/real_cpu_runs/trim.py): engine decode + prefill at TP 1/2, and the
# allreduce sweep.
REAL_RUNS = os.path.join(ROOT, "tests", "data", "real_cpu_runs")


def fixture_copy(source=FIXTURE):
    """A temporary results folder holding the fixture (or another folder of results.jsonl and
    run.json); removed by the caller (tmp.cleanup)."""
    tmp = tempfile.TemporaryDirectory(prefix="tpb-report-test-")
    for name in ("results.jsonl", "run.json"):
        shutil.copy(os.path.join(source, name), tmp.name)
    return tmp


def png_text(path):
    """{keyword: text} of a PNG's tEXt chunks (the report's "tpbench" chunk names the
    case_ids a plot draws and marks)."""
    out = {}
    with open(path, "rb") as f:
        data = f.read()
    pos = 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"tEXt":
            key, _, value = data[pos + 8:pos + 8 + length].partition(b"\0")
            out[key.decode("latin-1")] = value.decode("latin-1")
        pos += 12 + length
    return out


def read_records(folder):
    with open(os.path.join(folder, "results.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_records(folder, records):
    with open(os.path.join(folder, "results.jsonl"), "w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")


def run_report(folder, *extra):
    return subprocess.run([sys.executable, SCRIPT, folder, *extra], capture_output=True,
                          text=True, timeout=240)


def png_size(path):
    """(width, height) from a PNG header; raises when the file is not a PNG."""
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        raise AssertionError(f"{path}: not a PNG")
    return struct.unpack(">II", head[16:24])
