# Issue 15, path 9 "Reproduce any record": run.json records the command line, the working
# directory and the environment that matters; every record's `reproduce` command reruns
# just its case (with its repeat and the control) with the same digests; --case and
# --filter select cases without changing their ids (unknown ones: exit 2); and
# --resume --retry-failed runs a failed case again, its new record superseding the old.
source "$(dirname "$0")/common.bash" "$@"

SCENARIO=scenarios/ci-smoke.json

# 1. The full sweep, with a TPB_* and an NCCL_* variable that run.json must record.
TPB_REPRO_MARKER=path9 NCCL_DEBUG=WARN expect_rc 0 \
  "$TPBENCH" run "$SCENARIO" --no-report --results-dir "$SCRATCH/full"
full=$(run_dir_of "$SCRATCH/full")
python3 - "$full" "$TPBENCH" "$PWD" "$SOURCE_DIR/$SCENARIO" <<'PY'
import json, os, sys
run, binary, cwd, scenario = sys.argv[1:]
inv = json.load(open(f"{run}/run.json"))["invocation"]
assert inv["argv"][1:] == ["run", "scenarios/ci-smoke.json", "--no-report", "--results-dir", inv["argv"][-1]], inv["argv"]
assert os.path.realpath(inv["argv"][0]) == os.path.realpath(binary), inv["argv"][0]
assert os.path.realpath(inv["cwd"]) == os.path.realpath(cwd), inv["cwd"]
assert inv["environment"]["TPB_REPRO_MARKER"] == "path9", inv["environment"]
assert inv["environment"]["NCCL_DEBUG"] == "WARN", inv["environment"]
assert all(k.startswith(("TPB_", "NCCL_", "CUDA_")) for k in inv["environment"]), inv["environment"]
assert inv["case_options"] == [], inv["case_options"]
for line in open(f"{run}/results.jsonl"):
    r = json.loads(line)
    assert os.path.realpath(r["reproduce"].split()[2]) == os.path.realpath(scenario), r["reproduce"]
    assert r["reproduce"].split()[3:] == ["--case", r["case_id"]], r["reproduce"]
PY

# 2. One record's command, run as it is written: that case, its repeat and the control.
read -r case_id repeat_id reproduce < <(python3 - "$full" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(f"{sys.argv[1]}/results.jsonl")]
sweep = next(r for r in recs if r["role"] == "sweep" and r["params"]["tp"] == 4 and r["params"]["dtype"] == "f32")
repeat = next(r for r in recs if r["role"] == "repeat" and r["params"] == sweep["params"])
print(sweep["case_id"], repeat["case_id"], sweep["reproduce"])
PY
)
echo "reproduce: $reproduce"
[[ $reproduce == "tpbench run "*" --case $case_id" ]] || fail "unexpected reproduce line: $reproduce"
eval "expect_rc 0 \"\$TPBENCH\" ${reproduce#tpbench } --no-report --results-dir \"\$SCRATCH/one\""
cat "$SCRATCH/last.out"
grep -q "4 cases (4 of 26 selected: --case $case_id)" "$SCRATCH/last.out" || fail "the selection was not announced"
one=$(run_dir_of "$SCRATCH/one")
python3 - "$full" "$one" "$case_id" "$repeat_id" <<'PY'
import json, sys
full, one, case_id, repeat_id = sys.argv[1:]
old = {r["case_id"]: r for r in map(json.loads, open(f"{full}/results.jsonl"))}
new = [json.loads(l) for l in open(f"{one}/results.jsonl")]
roles = [r["role"] for r in new]
assert roles == ["control-start", "sweep", "repeat", "control-end"], roles
assert [r["case_id"] for r in new][1:3] == [case_id, repeat_id]
for r in new:
    assert r["status"] == "ok", r
    assert r["case_id"] in old, "a selected case changed its id"
    assert r["digests"] == old[r["case_id"]]["digests"], (r["label"], r["digests"], old[r["case_id"]]["digests"])
    assert r["reproduce"] == old[r["case_id"]]["reproduce"], r["reproduce"]
run = json.load(open(f"{one}/run.json"))
assert run["selection"]["case"] == [case_id] and run["selection"]["selected_cases"] == 4, run["selection"]
assert run["summary"]["checks"]["deterministic"], "the repeat was not judged"
PY

# 3. --filter tp=2: only TP 2 cases (the control is TP 2 in ci-smoke), ids as in the full run.
expect_rc 0 "$TPBENCH" run "$SCENARIO" --dry-run --filter tp=2
grep -q "10 cases (10 of 26 selected: --filter tp=2)" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "dry run of --filter tp=2"; }
expect_rc 0 "$TPBENCH" run "$SCENARIO" --filter tp=2 --no-report --results-dir "$SCRATCH/tp2"
python3 - "$full" "$(run_dir_of "$SCRATCH/tp2")" <<'PY'
import json, sys
full, tp2 = sys.argv[1:]
want = [r["case_id"] for r in map(json.loads, open(f"{full}/results.jsonl")) if r["params"]["tp"] == 2]
got = [json.loads(l) for l in open(f"{tp2}/results.jsonl")]
assert all(r["params"]["tp"] == 2 for r in got), [r["label"] for r in got]
assert [r["case_id"] for r in got] == want, ([r["label"] for r in got], want)
PY

# 4. Bad selections: exit 2 naming them, nothing written.
expect_rc 2 "$TPBENCH" run "$SCENARIO" --case "$case_id,00000000deadbeef" --results-dir "$SCRATCH/bad"
grep -q "has no case with id 00000000deadbeef" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "unknown id not named"; }
grep -q "$case_id" "$SCRATCH/last.out" && fail "a known id was named as unknown"
expect_rc 2 "$TPBENCH" run "$SCENARIO" --filter tp=3 --results-dir "$SCRATCH/bad"
grep -q "\-\-filter tp=3 matches no case (tp takes 1, 2, 4)" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "tp=3"; }
expect_rc 2 "$TPBENCH" run "$SCENARIO" --filter colour=blue --results-dir "$SCRATCH/bad"
grep -q "'colour' is not a parameter" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "unknown key"; }
expect_rc 2 "$TPBENCH" run "$SCENARIO" --retry-failed --results-dir "$SCRATCH/bad"
grep -q "needs --resume" "$SCRATCH/last.out" || fail "--retry-failed without --resume"
# A selection would store only the selected cases as the scenario's whole baseline.
expect_rc 2 "$TPBENCH" run "$SCENARIO" --filter tp=2 --baselines "$SCRATCH/baselines" --update-baselines \
  --results-dir "$SCRATCH/bad"
grep -q "update-baselines stores the whole scenario's records" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "selected re-record"; }
[[ ! -e "$SCRATCH/baselines" ]] || fail "a refused re-record wrote a baseline"
[[ ! -e "$SCRATCH/bad" ]] || fail "a rejected selection wrote results"

# 5. A planted failure (TPB_TEST_FAIL_CASE, test-only: the ranks fail that case) in a TP 1 run.
target=$(python3 - "$full" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(f"{sys.argv[1]}/results.jsonl")]
print(next(r["case_id"] for r in recs if r["role"] == "sweep" and r["params"]["tp"] == 1))
PY
)
TPB_TEST_FAIL_CASE=$target expect_rc 1 "$TPBENCH" run "$SCENARIO" --filter tp=1 --no-report --results-dir "$SCRATCH/retry"
cat "$SCRATCH/last.out"
grep -q "retry-failed" "$SCRATCH/last.out" || fail "the failed run does not say how to retry"
run=$(run_dir_of "$SCRATCH/retry")
lines=$(wc -l <"$run/results.jsonl")
# --resume alone never retries a failed case; the selection (--filter tp=1) is kept.
expect_rc 1 "$TPBENCH" run --resume "$run" --no-report
grep -q "($lines resumed" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "plain --resume re-ran cases"; }
[[ $(wc -l <"$run/results.jsonl") -eq $lines ]] || fail "plain --resume appended records"
expect_rc 2 "$TPBENCH" run --resume "$run" --retry-failed --case "$target"
grep -q "keeps the selection" "$SCRATCH/last.out" || fail "--case with --resume"
# Resuming a selected run cannot store its selection as the scenario's baseline either.
expect_rc 2 "$TPBENCH" run --resume "$run" --baselines "$SCRATCH/baselines" --update-baselines
grep -q "the run resumed was started with --case or --filter" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "resumed selection re-recorded"; }
[[ ! -e "$SCRATCH/baselines" ]] || fail "a refused re-record wrote a baseline"
expect_rc 0 "$TPBENCH" run --resume "$run" --no-report --retry-failed
cat "$SCRATCH/last.out"
grep -q "$((lines - 1)) resumed from the earlier run, 1 failed case(s) run again" "$SCRATCH/last.out" || fail "retry summary"
python3 - "$run" "$target" "$full" <<'PY'
import json, sys
sys.path.insert(0, "report")
import results_io
run, target, full = sys.argv[1:]
recs = [json.loads(l) for l in open(f"{run}/results.jsonl")]
mine = [r for r in recs if r["case_id"] == target]
assert [r["status"] for r in mine] == ["failed", "ok"], [r["status"] for r in mine]
assert "planted failure" in mine[0]["error"], mine[0]["error"]
assert recs[-1]["case_id"] == target, "the new record was not appended"
old = {r["case_id"]: r for r in map(json.loads, open(f"{full}/results.jsonl"))}
assert mine[1]["digests"] == old[target]["digests"]
rj = json.load(open(f"{run}/run.json"))
assert rj["summary"]["failed"] == 0 and rj["summary"]["exit_code"] == 0, rj["summary"]
assert all(g["status"] == "pass" for g in rj["summary"]["checks"]["deterministic"]), rj["summary"]["checks"]
assert rj["invocation"]["environment"]["TPB_TEST_FAIL_CASE"] == target
assert rj["resumed"][-1]["retried"] == [target] and rj["resumed"][-1]["invocation"]["argv"][-1] == "--retry-failed"
assert "TPB_TEST_FAIL_CASE" not in rj["resumed"][-1]["invocation"]["environment"]
assert all(r["params"]["tp"] == 1 for r in recs if not r["role"].startswith("control")), "the resumed run lost its selection"
latest = results_io.latest_per_case(recs)
assert len(latest) == len(recs) - 1 and [r["status"] for r in latest if r["case_id"] == target] == ["ok"]
PY
echo ok
