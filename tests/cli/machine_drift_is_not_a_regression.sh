#!/usr/bin/env bash
# Issue 15, path 5: "an unchanged re-run on a loaded machine flagged 4 latency regressions
# (5.57 -> 17.8 us): the whole machine slowed, the control case too". Now latency against a
# baseline is judged relative to the control case of the same run: a run slowed as a whole
# reads `machine-drift` (exit 0, the raw ratio kept in the record), one slowed case with a
# steady control is a `regression` (exit 1). Exactly through `tpbench compare` on files
# fabricated from one run; through `tpbench run --baselines` against a fabricated stored
# baseline as far as two real runs on a loaded runner allow (see 3.).
#
# The slowed side is fabricated by dividing the stored latencies (the baseline was faster),
# so the test does not depend on loading the machine. The build under test may be dirty:
# --force-dirty-baseline and --allow-unlike-baseline (baseline_from_another_build.sh tests
# the builds).
source "$(dirname "$0")/common.bash" "$@"

# The conformance scenario with a 50 % latency tolerance: steps 3 and 4 compare two real runs,
# whose cases move against the control by tens of percent on a loaded 2-core runner (a
# 3.5 us allreduce); the planted factors (10x everywhere, 100x on one case) are far beyond.
S=$SCRATCH/cpu-baseline-control.json
python3 - "$SOURCE_DIR/scenarios/conformance/cpu-baseline-control.json" "$S" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["baseline"]["latency_rel_tol"] = 0.5
json.dump(doc, open(sys.argv[2], "w"), indent=1)
EOF
B=$SCRATCH/baselines
stored=$B/cpu-ref/cpu-baseline-control.jsonl
out=$SCRATCH/last.out
last_run() { sed -n 's|^results: \(.*\)/results.jsonl$|\1|p' "$out" | tail -1; }
has() { grep -qF -- "$1" "$out" || { cat "$out" >&2; fail "expected the line: $1"; }; }
run() { "$TPBENCH" run "$S" --no-report --results-dir "$SCRATCH/runs" --baselines "$B" --allow-unlike-baseline "$@"; }

# scale IN OUT FACTOR WHICH: IN's latency samples times FACTOR, for every record (all) or
# for the sweep cases of 262144 bytes only (one).
scale() {
  python3 - "$@" <<'PY'
import json, sys
src, dst, factor, which = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
recs = [json.loads(l) for l in open(src)]
for r in recs:
    if r.get("status") != "ok": continue
    if which == "one" and not (r["role"] == "sweep" and r["params"]["message_bytes"] == 262144): continue
    lat = r["latency"]
    lat["repetitions_us"] = [x * factor for x in lat["repetitions_us"]]
    for k in ("p50", "mean", "min", "max", "p90", "p99"):
        if isinstance(lat.get(k), (int, float)): lat[k] *= factor
open(dst, "w").write("".join(json.dumps(r) + "\n" for r in recs))
PY
}

# verdicts FILE: "role bytes verdict" per ok record's latency verdict against its baseline.
verdicts() {
  python3 - "$1" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["status"] == "ok":
        print(r["role"], r["params"]["message_bytes"], r["baseline"]["latency_us"]["verdict"])
PY
}

# (Its exit status is control_drift's on a 3.5 us allreduce: not this test's subject.)
set +e; run --update-baselines --force-dirty-baseline "cli test: the build under test may be dirty" >"$out" 2>&1; set -e
[[ -s $stored ]] || fail "--update-baselines wrote no $stored"
R1=$(last_run)/results.jsonl

# The compare steps judge fabricated samples, not this machine's timing: on a loaded 2-core
# runner a 3.6 us allreduce's per-repetition medians spread over 10x within one run (a
# preemption is milliseconds), and the U test then rightly cannot tell two sides apart. NEW
# is the run with each case's repetitions replaced by its median x (1 + 0.01 i).
python3 - "$R1" "$SCRATCH/steady.jsonl" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
for r in recs:
    if r.get("status") != "ok": continue
    lat = r["latency"]
    m = statistics.median(lat["repetitions_us"])
    lat["repetitions_us"] = [m * (1 + 0.01 * i) for i in range(len(lat["repetitions_us"]))]
open(sys.argv[2], "w").write("".join(json.dumps(r) + "\n" for r in recs))
PY
R1=$SCRATCH/steady.jsonl

# 1. compare, exact: OLD is the run 3x faster everywhere (control included) -> machine-drift.
scale "$R1" "$SCRATCH/fast-all.jsonl" 0.3333333333 all
expect_rc 0 "$TPBENCH" compare "$SCRATCH/fast-all.jsonl" "$R1"
cp "$out" "$SCRATCH/compare-drift.out"
has "machine-drift"
grep -q " regression$" "$out" && { cat "$out" >&2; fail "uniform slowdown read as a regression"; }
expect_rc 0 "$TPBENCH" compare --json "$SCRATCH/fast-all.jsonl" "$R1"
python3 - "$out" <<'PY' || fail "compare --json: machine-drift verdicts without both ratios"
import json, sys
doc = json.load(open(sys.argv[1]))
lat = [v for v in doc["verdicts"] if v["metric"] == "latency_us"]
assert lat and all(v["verdict"] == "machine-drift" for v in lat), [v["verdict"] for v in lat]
assert all(abs(v["ratio"] - 3) < 1e-6 and abs(v["normalised_ratio"] - 1) < 1e-6 for v in lat), lat
assert all(v["control"]["ratio"] > 2.9 for v in lat)
PY

# 2. compare, exact: only the 262144-byte case was 3x faster before -> a regression, exit 1.
scale "$R1" "$SCRATCH/fast-one.jsonl" 0.3333333333 one
expect_rc 1 "$TPBENCH" compare "$SCRATCH/fast-one.jsonl" "$R1"
cp "$out" "$SCRATCH/compare-regression.out"
[[ $(grep -Ec "latency_us .* regression$" "$out") -eq 1 ]] || { cat "$out" >&2; fail "expected one latency regression"; }
grep -E "latency_us .* regression$" "$out" | grep -qv "control" || { cat "$out" >&2; fail "the control reads a regression"; }

# 3. run --baselines: the stored run 10,000x faster everywhere -> the control reads machine-drift
# and the run counts machine drift. Its exit status and the sweep cases' verdicts are not
# asserted: two real runs of a 3.5 us allreduce on a loaded 2-core runner differ case
# against control by more than any tolerance (measured: the control alone moved 3x between
# runs and drifted within one); the exact proof is 1. above. (10,000x, not 100x: a stored run
# taken while other builds loaded the 2 cores was 640x slower than the next, so 100x faster
# still read as slower.)
scale "$stored" "$stored.tmp" 0.0001 all && mv "$stored.tmp" "$stored"
set +e; run >"$out" 2>&1; set -e
cp "$out" "$SCRATCH/run-drift.out"
has "latency judged relative to it"
grep -Eq "regression\(s\).*, [1-9][0-9]* machine-drift" "$out" || { cat "$out" >&2; fail "no machine-drift counted"; }
verdicts "$(last_run)/results.jsonl" >"$SCRATCH/verdicts.txt"
grep -q "^control-start 4096 machine-drift$" "$SCRATCH/verdicts.txt" || { cat "$SCRATCH/verdicts.txt" >&2; fail "control not machine-drift"; }
# ... but a control 10,000x its stored self is beyond the drift ceiling (default 1.5x either
# way): not the machine the baseline measured, so the run is unstable and fails (issue 34:
# "control x984 ... machine-drift" exited 0 with three `yes` on the cores).
has "FAIL: the control "
has "beyond the ceiling of x1.5 either way"
python3 - "$(last_run)/run.json" <<'PY' || fail "run.json does not carry the ceiling verdict"
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
c = s["baselines"]["control_vs_baseline"]
assert c["ratio"] > 1000 and c["ceiling"] == 1.5 and c["beyond_ceiling"] is True, c
assert s["stability"] == "unstable" and s["exit_code"] == 1, (s["stability"], s["exit_code"])
PY
# A scenario that allows its control more drift keeps the control-normalised verdicts as they
# were (the exit status is this machine's timing then: not asserted).
python3 - "$S" "$SCRATCH/lenient.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["baseline"]["control_ceiling"] = 100000
json.dump(doc, open(sys.argv[2], "w"), indent=1)
PY
set +e; "$TPBENCH" run "$SCRATCH/lenient.json" --no-report --results-dir "$SCRATCH/runs" --baselines "$B" --allow-unlike-baseline \
  >"$out" 2>&1; set -e
grep -qF "FAIL: the control " "$out" && { cat "$out" >&2; fail "a control within its scenario's ceiling failed the run"; }
python3 - "$(last_run)/run.json" <<'PY' || fail "run.json: the lenient ceiling"
import json, sys
c = json.load(open(sys.argv[1]))["summary"]["baselines"]["control_vs_baseline"]
assert c["ceiling"] == 100000 and c["beyond_ceiling"] is False, c
PY

# 4. run --baselines: only the 262144-byte case was 10,000x faster before -> regression, exit 1.
scale "$stored" "$stored.tmp" 10000 all && mv "$stored.tmp" "$stored"  # back to as measured
scale "$stored" "$stored.tmp" 0.0001 one && mv "$stored.tmp" "$stored"
set +e; run --junit "$SCRATCH/regression.xml" >"$out" 2>&1; rc=$?; set -e
cp "$out" "$SCRATCH/run-regression.out"
[[ $rc -eq 1 ]] || { cat "$out" >&2; fail "one slowed case: exit $rc, expected 1"; }
verdicts "$(last_run)/results.jsonl" >"$SCRATCH/verdicts.txt"
grep -q "^sweep 262144 regression$" "$SCRATCH/verdicts.txt" || { cat "$SCRATCH/verdicts.txt" >&2; fail "slowed case not a regression"; }
grep -Eq "^FAILED .*: latency_us regression x[0-9.e+]+ \(p [0-9.e-]+\)$" "$out" || { cat "$out" >&2; fail "no FAILED line names the regression"; }
# The JUnit says so too (issue 34: every suite read failures="0" while the run exited 1): a
# failing "baseline latency_us" testcase in the slowed case's suite, its ratio in the message,
# and the counts a CI adds up.
python3 - "$SCRATCH/regression.xml" "$(last_run)/results.jsonl" <<'PY' || fail "the JUnit does not fail the regression"
import json, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
regressed = [json.loads(l) for l in open(sys.argv[2])]
regressed = [r["label"] for r in regressed if r.get("status") == "ok" and r["baseline"]["latency_us"]["verdict"] == "regression"]
failing = {}
for suite in root.iter("testsuite"):
    for tc in suite.iter("testcase"):
        f = tc.find("failure")
        if tc.get("name") == "baseline latency_us" and f is not None:
            failing[suite.get("name")] = f.get("message")
assert regressed and set(regressed) <= set(failing), (regressed, failing)
assert all("regression (x" in m for m in failing.values()), failing
assert sum(int(s.get("failures", "0")) for s in root.iter("testsuite")) >= len(regressed)
PY
echo "machine_drift_is_not_a_regression: ok"
