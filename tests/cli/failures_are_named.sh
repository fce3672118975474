#!/usr/bin/env bash
# Issue 34, point 4: a failing run says what failed, as pytest's short summary does: after the
# table one "FAILED <what>: <why>" line per failed case, failing check group and regressed
# metric, each case's followed by its reproduce command; run.json's summary.failures holds the
# same lines (the report shows them), and a run that passes prints none.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
# Two CPU allreduce cases whose outputs are finite while the scenario expects NaN: both fail.
python3 - "$SCRATCH" <<'PY'
import json, sys
s = json.load(open("scenarios/ci-smoke.json"))
s.update(name="fails-twice", nonfinite="expected", checks=[])
s["sweep"] = {"tp": [2], "allreduce": ["shm"], "dtype": ["f32"], "message_bytes": [1024, 2048]}
s.pop("control")
json.dump(s, open(sys.argv[1] + "/fails.json", "w"))
s.update(name="passes", nonfinite="fail")
json.dump(s, open(sys.argv[1] + "/passes.json", "w"))
PY
expect_rc 1 "$TPBENCH" run "$SCRATCH/fails.json" --no-report --results-dir "$SCRATCH/fails"
[[ $(grep -c '^FAILED allreduce tp2 .*: failed: ' "$SCRATCH/last.out") -eq 2 ]] \
  || { cat "$SCRATCH/last.out" >&2; fail "expected one FAILED line per failed case"; }
[[ $(grep -c '^  reproduce: .*tpbench run .* --case ' "$SCRATCH/last.out") -eq 2 ]] \
  || { cat "$SCRATCH/last.out" >&2; fail "expected a reproduce command under each failed case"; }
python3 - "$(run_dir_of "$SCRATCH/fails")" "$SCRATCH/last.out" <<'PY' || fail "run.json's failures differ from the terminal's"
import json, sys
failures = json.load(open(sys.argv[1] + "/run.json"))["summary"]["failures"]
printed = [l.rstrip("\n") for l in open(sys.argv[2]) if l.startswith(("FAILED ", "  reproduce: "))]
assert failures == printed and len(failures) == 4, (failures, printed)
PY
# A run that passes names nothing.
expect_rc 0 "$TPBENCH" run "$SCRATCH/passes.json" --no-report --results-dir "$SCRATCH/passes"
grep -q '^FAILED ' "$SCRATCH/last.out" && { cat "$SCRATCH/last.out" >&2; fail "a passing run printed FAILED lines"; }
python3 -c "import json,sys; assert json.load(open(sys.argv[1] + '/run.json'))['summary']['failures'] == []" \
  "$(run_dir_of "$SCRATCH/passes")" || fail "a passing run's run.json lists failures"
echo ok
