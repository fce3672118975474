#!/usr/bin/env bash
# Issue 15, requirement 5: on one H200 observer_invariant failed timing's 1 % limit on "A/B
# p50 ratio timing/off 1.0241 ... p = 4.11e-05" while the marks cost 0.02 % of a step: the off
# and timing cases ran one after the other and the machine drifted between them. Now every
# case of an instrumentation sweep measures in interleaved halves, ABBA, in one process (marks
# recorded in A, paused in B; suite/measure/measure.h); the check enforces the limit on those halves and
# only reports the cross-case ratio.
#
# A small CPU allreduce sweep, off and timing, 9 repetitions:
# 1. as is: the check's detail names the interleaved A/B and its verdict (pass or fail: on a
#    loaded 2-core runner the halves are what they are; the wording is what is tested);
# 2. with a planted drift (TEST-ONLY TPB_TEST_PLANT_DRIFT_NS_PER_STEP: each timed sample of a
#    worker is longer than the one before, at every level alike, as a machine slowing over
#    the sweep): the timing case, run later, is slower than off by far more than 1 % (the old
#    cross-case rule failed such a pair), yet the verdict is pass, with the cross-case ratio
#    reported as not enforced;
# 3. a malformed value of the planted drift is refused, not ignored.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
unset TPB_TEST_PLANT_DRIFT_NS_PER_STEP

# The conformance observer scenario, reduced: TP 2, off and timing, 9 repetitions of 5.
scenario=scenarios/conformance/cpu-allreduce-observer.json
python3 - "$scenario" "$SCRATCH/drift.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["name"] += "-drift"
s["sweep"].update({"tp": [2], "message_bytes": [65536], "instrumentation": ["off", "timing"]})
s["measure"].update({"warmup": 2, "iterations": 5, "repetitions": 9})
s["checks"] = ["observer_invariant"]
json.dump(s, open(sys.argv[2], "w"))
PY

# The check's result on the timing record, and the facts around it, as JSON lines.
summary() {
  python3 - "$1/results.jsonl" <<'PY'
import json, sys
recs = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    recs[r["params"]["instrumentation"]] = r
for level, r in recs.items():
    c = r["checks"].get("observer_invariant", {})
    lat = r["latency"]
    print(json.dumps({"level": level, "status": c.get("status"), "detail": c.get("detail", ""),
                      "p50": lat["p50"], "reps": lat.get("repetitions_us"),
                      "off_halves": lat.get("interleaved_off_repetitions_us"), "order": lat.get("interleaving")}))
PY
}

# 1. As is: the detail names the in-process, interleaved A/B and its verdict.
set +e
"$TPBENCH" run "$SCRATCH/drift.json" --no-report --results-dir "$SCRATCH/clean" >"$SCRATCH/clean.out" 2>&1
rc=$?
set -e
[[ $rc -eq 0 || $rc -eq 1 ]] || { cat "$SCRATCH/clean.out" >&2; fail "clean run: exit $rc"; }
summary "$(run_dir_of "$SCRATCH/clean")" >"$SCRATCH/clean.jsonl"
cat "$SCRATCH/clean.jsonl"
python3 - "$SCRATCH/clean.jsonl" <<'PY' || fail "the detail does not name the interleaved A/B and its verdict"
import json, re, sys
recs = {r["level"]: r for r in map(json.loads, open(sys.argv[1]))}
for level in ("off", "timing"):
    assert recs[level]["order"] == "ABBAABBAABBAABBAAB", recs[level]["order"]  # every level, off included
    assert len(recs[level]["off_halves"]) == 9, recs[level]
d = recs["timing"]["detail"]
assert "interleaved A/B in one process (ABBAABBA..., recorded vs paused): ratio of repetition medians" in d, d
assert re.search(r"Mann-Whitney p = \S+ over 9 \+ 9 repetitions: (within the 1% limit or not significant|above the 1% limit and significant)", d), d
assert "cross-case p50 ratio timing/off" in d and "reported, not enforced" in d, d
PY

# 2. A planted drift over the sweep: the later case is slower, the verdict is not a fail.
TPB_TEST_PLANT_DRIFT_NS_PER_STEP=100000 expect_rc 0 "$TPBENCH" run "$SCRATCH/drift.json" --no-report --results-dir "$SCRATCH/drift"
summary "$(run_dir_of "$SCRATCH/drift")" >"$SCRATCH/drift.jsonl"
cat "$SCRATCH/drift.jsonl"
python3 - "$SCRATCH/drift.jsonl" <<'PY' || fail "a drift over the sweep was judged as instrumentation overhead"
import json, re, sys
recs = {r["level"]: r for r in map(json.loads, open(sys.argv[1]))}
off, timing = recs["off"], recs["timing"]
# The drift is real where it matters: the timing case, run after off, is far more than 1 %
# slower, what the old cross-case rule failed on. (100 us x ~90 timed steps per case, added to
# the samples: off's median sample carries ~4.5 ms of plant, timing's ~13.5 ms, against a step
# of 40-90 us, or ~4 ms time slices on a runner with 3 busy threads per core. A 300 ns spin
# did not survive a CI runner that was busy during the off case only: off came out slower.)
# Within the off case the trend is not asserted: on a loaded runner a worker's first
# repetitions stalled for 3.5 ms (54 us after), which no order statistic survives.
from statistics import median
assert median(timing["reps"]) > 1.05 * median(off["reps"]), (off["reps"], timing["reps"])
ratio = float(re.search(r"cross-case p50 ratio timing/off ([0-9.]+)", timing["detail"]).group(1))
assert ratio > 1.05, ratio
# The verdict: pass, on the interleaved halves; the cross-case ratio reported, not enforced.
assert timing["status"] == "pass", timing
assert re.search(r"over 9 \+ 9 repetitions: within the 1% limit or not significant", timing["detail"]), timing["detail"]
assert "reported, not enforced" in timing["detail"], timing["detail"]
print(f"planted drift: cross-case ratio {ratio} reported; interleaved halves judged: pass")
PY

# 3. A malformed planted drift is refused.
TPB_TEST_PLANT_DRIFT_NS_PER_STEP=fast expect_rc 1 "$TPBENCH" run "$SCRATCH/drift.json" --no-report --results-dir "$SCRATCH/bad"
grep -q "TPB_TEST_PLANT_DRIFT_NS_PER_STEP: expected a number >= 0, got 'fast'" "$SCRATCH/bad"/*/results.jsonl ||
  fail "a malformed TPB_TEST_PLANT_DRIFT_NS_PER_STEP was not refused"
echo ok
