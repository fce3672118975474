# Issue 15, path 7: observer_invariant compared outputs, plan and allocation bytes only, so a
# debug path that changed the control flow but not the final digest (the incident's print
# that changed which path ran) passed. Now every rank of the CPU engine records, at every
# level, its communicator calls (op, count, dtype) and its allocations (bytes, in order),
# and the check compares them with `off`. The reduced cpu-engine-observer scenario passes
# clean; each test-only planted fault of TPB_TEST_ENGINE_DEBUG_FAULT fails it naming what
# differed: a changed value (the outputs), an extra allreduce (the call, where, how many
# extra), an allocation moved (which allocation, both sides).
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
unset TPB_TEST_ENGINE_DEBUG_FAULT

# The check's result on every record of a run, one line each: "<tp> <level> <status> <detail>".
check_lines() {
  python3 - "$1/results.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    c = r.get("checks", {}).get("observer_invariant")
    if c is not None:
        print(r["params"].get("tp"), r["params"].get("instrumentation"), c["status"], c.get("detail", ""))
PY
}

# A reduced copy of the conformance scenario: TP 2 (the calls cross ranks), off and debug.
scenario=scenarios/conformance/cpu-engine-observer.json
grep -q '"observer_invariant"' "$scenario" || fail "$scenario does not name observer_invariant"
python3 - "$scenario" "$SCRATCH/reduced.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["name"] += "-reduced"
s["sweep"]["tp"] = [2]
s["sweep"]["instrumentation"] = ["off", "debug"]
s["measure"].update({"iterations": 2, "repetitions": 1})
s["checks"] = ["observer_invariant"]
json.dump(s, open(sys.argv[2], "w"))
PY

# 1. Clean: passes, and says the call and allocation sequences were compared.
expect_rc 0 "$TPBENCH" run "$SCRATCH/reduced.json" --no-report --results-dir "$SCRATCH/clean"
check_lines "$(run_dir_of "$SCRATCH/clean")" >"$SCRATCH/clean.txt"
cat "$SCRATCH/clean.txt"
[[ -s "$SCRATCH/clean.txt" ]] || fail "no record carries observer_invariant"
if grep -v '^2 [a-z]* pass ' "$SCRATCH/clean.txt"; then fail "observer_invariant did not pass without a fault"; fi
grep -q "same communicator calls ([0-9]* on rank 0) and allocations in the same order" "$SCRATCH/clean.txt" ||
  fail "the pass does not say the call and allocation sequences were compared"

# 2. Each planted fault fails the check, naming what differed. $1: the fault; $2: a regex
# the detail must match.
planted() {
  TPB_TEST_ENGINE_DEBUG_FAULT=$1 expect_rc 1 "$TPBENCH" run "$SCRATCH/reduced.json" --no-report --results-dir "$SCRATCH/$1"
  check_lines "$(run_dir_of "$SCRATCH/$1")" >"$SCRATCH/$1.txt"
  echo "--- $1"; cat "$SCRATCH/$1.txt"
  [[ -s "$SCRATCH/$1.txt" ]] || fail "$1: no record carries observer_invariant"
  if grep -v '^2 [a-z]* fail ' "$SCRATCH/$1.txt"; then fail "$1: a record did not fail"; fi
  if grep -Ev "$2" "$SCRATCH/$1.txt"; then fail "$1: the failure does not name what differed"; fi
}
planted value "off vs debug: outputs differ: rank 0 output 'logits': \"[0-9a-f]+\" \(.*\) vs \"[0-9a-f]+\" \(.*\)"
planted allreduce "off vs debug: communicator calls differ on rank 0: first difference at call [0-9]+: off all_(reduce|gather) [0-9]+ f32, debug all_reduce 1 f32; off made ([0-9]+) calls, debug [0-9]+ \(([0-9]+) extra\)"
planted allocation "off vs debug: allocation sequences differ on rank 0: first difference at allocation [0-9]+: off [0-9]+ B debug_snapshot, debug [0-9]+ B call_sequence"
# The allreduce fault adds one call per step: as many extra calls as steps. An instrumentation
# sweep measures in interleaved halves (suite/measure/measure.h): 1 warm-up + 2 timed recorded + 2 timed paused.
python3 - "$SCRATCH/allreduce.txt" <<'PY' || fail "the extra calls are not one per step (1 warm-up + 2 + 2 timed)"
import re, sys
for line in open(sys.argv[1]):
    assert re.search(r"\(5 extra\)", line), line
PY

# 3. A malformed fault name is refused, not ignored.
TPB_TEST_ENGINE_DEBUG_FAULT=print expect_rc 1 "$TPBENCH" run "$SCRATCH/reduced.json" --no-report --results-dir "$SCRATCH/bad"
grep -q "TPB_TEST_ENGINE_DEBUG_FAULT: expected value, allreduce or allocation, got 'print'" "$SCRATCH/bad"/*/results.jsonl ||
  fail "a malformed TPB_TEST_ENGINE_DEBUG_FAULT was not refused"
echo ok
