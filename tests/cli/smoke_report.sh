#!/usr/bin/env bash
# Issue 8's CI acceptance: the CPU smoke sweep ends with its report, and every case id in
# summary.md is a record of results.jsonl (numbers trace back to records).
set -u
tpbench=$1 scratch=$2
rm -rf "$scratch" && mkdir -p "$scratch"
fail() { echo "FAIL: $*"; exit 1; }
"$tpbench" run scenarios/ci-smoke.json --results-dir "$scratch/results" > "$scratch/out.txt" 2>&1 \
  || { cat "$scratch/out.txt"; fail "ci-smoke run failed"; }
run=$(ls -d "$scratch"/results/*/ | head -1)
for f in report.html summary.md allreduce.png; do
  [ -s "$run/$f" ] || { cat "$scratch/out.txt"; fail "the run did not write $f"; }
done
python3 - "$run" <<'PY' || fail "summary.md names cases that results.jsonl does not hold"
import json, re, sys, os
run = sys.argv[1]
ids = {json.loads(l)["case_id"] for l in open(os.path.join(run, "results.jsonl"))}
named = set(re.findall(r"\b[0-9a-f]{16}\b", open(os.path.join(run, "summary.md")).read()))
assert named, "summary.md names no case id"
assert named <= ids, sorted(named - ids)[:5]
PY
echo "smoke report: ok"
