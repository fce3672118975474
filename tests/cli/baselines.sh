#!/usr/bin/env bash
# tpbench run --baselines / --update-baselines: a missing folder is exit 2, a missing baseline
# is no-baseline and fails the run (never a pass) unless --allow-missing-baseline, a recorded one is compared metric by metric, and a planted slowdown (the stored
# latencies divided by 100) is a regression that fails the run; a changed output digest too.
set -u
tpbench=$1 scratch=$2
rm -rf "$scratch" && mkdir -p "$scratch"
fail() { echo "FAIL: $*"; exit 1; }
S=scenarios/conformance/cpu-baseline-control.json
B=$scratch/baselines
# The build under test may be dirty (a developer's tree): its baselines are then forced and
# not like-for-like with themselves, which baseline_from_another_build.sh tests; here only
# the metric verdicts count.
run() { "$tpbench" run $S --no-report --results-dir "$scratch/runs" --baselines "$B" --allow-unlike-baseline "$@" > "$scratch/out.txt" 2>&1; }
# The folder of the run just made, from its own output: run ids have one-second resolution
# and a random suffix, so two runs in the same second do not sort in time order.
last_run() { sed -n 's|^results: \(.*\)/results.jsonl$|\1|p' "$scratch/out.txt" | tail -1; }

# A folder that is not there compares nothing: refused before any case (exit 2), named.
run; rc=$?
[ $rc -eq 2 ] || { cat "$scratch/out.txt"; fail "a missing --baselines folder: expected exit 2, got $rc"; }
grep -qF -- "--baselines $B: no such folder" "$scratch/out.txt" || { cat "$scratch/out.txt"; fail "the missing folder is not named"; }
[ -d "$scratch/runs" ] && fail "a case ran before the missing folder was refused"
# A folder without this scenario's baseline: the cases run and read no-baseline, and the run
# fails naming the file it looked for (a comparison that compared nothing is no pass), in the
# terminal and in the JUnit; --allow-missing-baseline accepts it with a warning.
mkdir -p "$B"
run --junit "$scratch/missing.xml"; rc=$?
[ $rc -eq 1 ] || { cat "$scratch/out.txt"; fail "no stored baseline: expected exit 1, got $rc"; }
grep -q "no-baseline" "$scratch/out.txt" || { cat "$scratch/out.txt"; fail "first run: expected no-baseline"; }
grep -qF "FAIL: no baseline stored for this scenario on this hardware at $B/cpu-ref/cpu-baseline-control.jsonl" \
  "$scratch/out.txt" || { cat "$scratch/out.txt"; fail "the missing baseline's path is not printed"; }
python3 - "$scratch/missing.xml" <<'PY' || fail "the JUnit does not fail the missing baseline"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
failures = [tc for tc in root.iter("testcase") if tc.get("name") == "baseline" and tc.find("failure") is not None]
assert failures and "no baseline stored" in failures[0].find("failure").get("message"), ET.tostring(root)[:400]
assert sum(int(s.get("failures", "0")) for s in root.iter("testsuite")) >= 1
PY
# (Its exit status is also the control's drift within the run, timing on a loaded runner: the
# missing baseline's part is read from run.json.)
run --allow-missing-baseline
grep -qF "(allowed by --allow-missing-baseline)" "$scratch/out.txt" || { cat "$scratch/out.txt"; fail "no warning with --allow-missing-baseline"; }
grep -qF "FAIL: no baseline stored" "$scratch/out.txt" && { cat "$scratch/out.txt"; fail "--allow-missing-baseline still fails the missing baseline"; }
python3 - "$(last_run)/run.json" <<'PY' || fail "run.json: the allowed missing baseline"
import json, sys
b = json.load(open(sys.argv[1]))["summary"]["baselines"]
assert b["missing"] is True and b["missing_fails"] is False, b
PY
run --update-baselines --force-dirty-baseline "cli test: the build under test may be dirty" || true
stored=$B/cpu-ref/cpu-baseline-control.jsonl
[ -s "$stored" ] || fail "--update-baselines wrote no $stored"
[ -s "${stored%.jsonl}.provenance.json" ] || fail "no provenance next to the baseline"

# Against itself the latest records carry a verdict per metric.
run
last=$(last_run)
python3 - "$last/results.jsonl" <<'PY' || fail "records carry no baseline verdicts"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
ok = [r for r in recs if r["status"] == "ok"]
assert ok and all(isinstance(r["baseline"], dict) and "latency_us" in r["baseline"] for r in ok), "missing verdicts"
assert all(r["baseline"]["digest.rank0.output"]["verdict"] == "ok" for r in ok), "digest differs from itself"
assert all(r["baseline"]["latency_us"]["p_value"] >= 0 for r in ok), "no Mann-Whitney p-value"
PY

# Planted: the stored run's sweep cases were 10,000x faster, its control as now -> this run is
# a regression. (A 2x plant was flaky on a loaded 2-core CI runner: a stored run taken under
# load, halved, still overlapped an unloaded rerun, and Mann-Whitney rightly did not reject;
# 100x was not enough either when other builds loaded the cores: a stored run can be 640x
# slower than the next.
# The control is left alone: a control 100x faster too would read machine-drift, which
# machine_drift_is_not_a_regression.sh tests.)
python3 - "$stored" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
for r in recs:
    if r["role"].startswith("control"): continue
    r["latency"]["repetitions_us"] = [x / 10000 for x in r["latency"]["repetitions_us"]]
open(sys.argv[1], "w").write("".join(json.dumps(r) + "\n" for r in recs))
PY
run; rc=$?
[ $rc -eq 1 ] || { cat "$scratch/out.txt"; fail "planted 10,000x slowdown: exit $rc, expected 1"; }
grep -Eq "[1-9][0-9]* regression" "$scratch/out.txt" || fail "regressions not counted"

# Planted: a changed output digest is a mismatch.
python3 - "$stored" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
for r in recs:
    if not r["role"].startswith("control"):
        r["latency"]["repetitions_us"] = [x * 10000 for x in r["latency"]["repetitions_us"]]
    r["digests"][0]["output"] = "0000000000000000"
open(sys.argv[1], "w").write("".join(json.dumps(r) + "\n" for r in recs))
PY
run; rc=$?
[ $rc -eq 1 ] || fail "planted digest change: exit $rc, expected 1"
last=$(last_run)
grep -q '"mismatch"' "$last/results.jsonl" || fail "digest mismatch not recorded"
echo "baselines: ok"
