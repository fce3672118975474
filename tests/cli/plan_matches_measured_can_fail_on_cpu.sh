# Issue 15, path 10: plan_matches_measured on the CPU engine used to compare the planner with
# the engine's own accounting under a 256 MiB floor, so tripling rank 1's weights still
# passed. Now the measured side is the process's heap (glibc mallinfo2) around the weights'
# loading and the floor is the allocator's granularity: the conformance scenario passes, and
# the test-only TPB_TEST_PLANT_WEIGHTS_FACTOR=3 (rank 1 allocates 3x its weights) fails it
# naming the term, the rank and both numbers.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
unset TPB_TEST_PLANT_WEIGHTS_FACTOR

# The check's result on every record of a run, one line each: "<status> <detail>".
check_lines() {
  python3 - "$1/results.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    c = r.get("checks", {}).get("plan_matches_measured")
    if c is not None:
        print(r["params"].get("tp"), c["status"], c.get("detail", ""))
PY
}

# 1. Without the fault the conformance scenario's cases pass, measured by host allocations.
scenario=scenarios/conformance/cpu-engine-decode.json
grep -q '"plan_matches_measured"' "$scenario" || fail "$scenario does not name plan_matches_measured"
expect_rc 0 "$TPBENCH" run "$scenario" --no-report --results-dir "$SCRATCH/clean"
check_lines "$(run_dir_of "$SCRATCH/clean")" >"$SCRATCH/clean.txt"
cat "$SCRATCH/clean.txt"
[[ -s "$SCRATCH/clean.txt" ]] || fail "no record carries plan_matches_measured"
if grep -v '^[0-9]* pass ' "$SCRATCH/clean.txt"; then fail "plan_matches_measured did not pass without the fault"; fi
grep -q "weights .* (host allocations (" "$SCRATCH/clean.txt" ||  # glibc mallinfo2, or the ASan allocator
  fail "the measured side is not labelled as host allocations"

# 2. The same scenario at TP 2 with rank 1 allocating 3x its weights: the check fails.
python3 - "$scenario" "$SCRATCH/tp2.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["name"] += "-tp2"
s["sweep"]["tp"] = [2]
s["checks"] = ["plan_matches_measured"]
json.dump(s, open(sys.argv[2], "w"))
PY
TPB_TEST_PLANT_WEIGHTS_FACTOR=3 expect_rc 1 "$TPBENCH" run "$SCRATCH/tp2.json" --no-report --results-dir "$SCRATCH/planted"
check_lines "$(run_dir_of "$SCRATCH/planted")" >"$SCRATCH/planted.txt"
cat "$SCRATCH/planted.txt"
[[ -s "$SCRATCH/planted.txt" ]] || fail "no record carries plan_matches_measured"
if grep -v '^2 fail ' "$SCRATCH/planted.txt"; then fail "a planted case did not fail"; fi
if grep -Ev "term 'weights' on rank 1: planned [0-9.]+ MiB \(([0-9]+) B\), measured [0-9.]+ MiB \(([0-9]+) B\) \(host allocations" \
  "$SCRATCH/planted.txt"; then fail "a failure does not name the term 'weights', rank 1 and both numbers"; fi
# ... and the measured number is about 3x the planned one (the whole weights, tripled).
python3 - "$SCRATCH/planted.txt" <<'PY' || fail "the measured weights are not about 3x the planned"
import re, sys
for line in open(sys.argv[1]):
    planned, measured = map(int, re.search(r"planned [0-9.]+ MiB \((\d+) B\), measured [0-9.]+ MiB \((\d+) B\)", line).groups())
    assert 2.9 < measured / planned < 3.1, (planned, measured)
PY

# 3. A malformed factor is refused, not ignored.
TPB_TEST_PLANT_WEIGHTS_FACTOR=three expect_rc 1 "$TPBENCH" run "$SCRATCH/tp2.json" --no-report --results-dir "$SCRATCH/bad"
grep -q "TPB_TEST_PLANT_WEIGHTS_FACTOR: expected a number >= 1, got 'three'" "$SCRATCH/bad"/*/results.jsonl ||
  fail "a malformed TPB_TEST_PLANT_WEIGHTS_FACTOR was not refused"
echo ok
