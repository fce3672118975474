# Issue 15, path 1: a GPU scenario where no GPU is visible used to end "0 ok, 0 failed,
# 18 skipped", exit 0, as if it had passed. Now a run (or qualification) in which no case
# could run exits 3, "nothing ran", says why in one line, and its JUnit says so; a run where
# some cases ran and others were skipped keeps exit 0. The GPUs are hidden
# (CUDA_VISIBLE_DEVICES=) so that the test means the same on a GPU machine.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
export CUDA_VISIBLE_DEVICES=

# Exit 3 is documented wherever exit statuses are.
for help in "--help" "run --help" "qualify --help"; do
  expect_rc 0 "$TPBENCH" $help
  grep -q "3 nothing ran" "$SCRATCH/last.out" || fail "tpbench $help does not document exit 3 (nothing ran)"
done
grep -q "exits 3" README.md || fail "README.md does not document exit 3"

# 1. The issue's command: memory-fraction (a GPU scenario) with no GPU visible.
expect_rc 3 "$TPBENCH" run memory-fraction --no-report --results-dir "$SCRATCH/runs" --junit "$SCRATCH/mf.xml"
cat "$SCRATCH/last.out"
grep -Eq '^cases: 0 ok, 0 failed, ([0-9]+) skipped, 0 infeasible' "$SCRATCH/last.out" || fail "not every case skipped"
n=$(sed -nE 's/^cases: 0 ok, 0 failed, ([0-9]+) skipped.*/\1/p' "$SCRATCH/last.out")
grep -Eq "^nothing ran: all $n cases skipped: device cuda: (no GPU is visible|this tpbench was built without CUDA)\$" \
  "$SCRATCH/last.out" || fail "no one-line 'nothing ran: all $n cases skipped: <reason>'"
run=$(run_dir_of "$SCRATCH/runs")
python3 - "$run/run.json" "$SCRATCH/mf.xml" "$n" <<'PY' || fail "run.json or the JUnit does not say that nothing ran"
import json, sys, xml.dom.minidom
summary = json.load(open(sys.argv[1]))["summary"]
n = int(sys.argv[3])
assert summary["exit_code"] == 3 and summary["nothing_ran"].startswith(f"all {n} cases skipped: device cuda: "), summary
doc = xml.dom.minidom.parse(sys.argv[2])
props = {p.getAttribute("name"): p.getAttribute("value") for p in doc.getElementsByTagName("property")}
assert props["tpbench.nothing_ran"] == summary["nothing_ran"] and props["tpbench.exit_code"] == "3", props
cases = doc.getElementsByTagName("testcase")
first = cases[0]
assert first.getAttribute("name") == "nothing ran", first.toxml()
(skip,) = first.getElementsByTagName("skipped")
assert skip.getAttribute("message") == "nothing ran: " + summary["nothing_ran"], skip.toxml()
assert not doc.getElementsByTagName("failure") and not doc.getElementsByTagName("error")
runs = [c for c in cases if c.getAttribute("name") == "run"]
assert len(runs) == n and all(c.getElementsByTagName("skipped") for c in runs), "a case testcase is not skipped"
PY

# ... and with --update-baselines it stores nothing: no empty baseline replaces a stored one.
expect_rc 3 "$TPBENCH" run memory-fraction --no-report --results-dir "$SCRATCH/runs-b" \
  --baselines "$SCRATCH/baselines" --update-baselines \
  --force-dirty-baseline "test: the tree may be dirty while developing"
grep -q '; not updated: nothing ran$' "$SCRATCH/last.out" || { cat "$SCRATCH/last.out" >&2; fail "baseline line"; }
stored=$(sed -n 's/^baseline \(.*\): [0-9]* regression.*/\1/p' "$SCRATCH/last.out")
[[ -n $stored && ! -e $stored ]] || fail "a run in which nothing ran wrote a baseline ($stored)"

# 2. Some cases ran, others skipped (a CPU backend and a GPU backend under "auto"): exit 0.
cat >"$SCRATCH/mixed.json" <<'JSON'
{"schema": 1, "name": "mixed", "workload": "allreduce", "device": "auto",
 "sweep": {"tp": [1], "allreduce": ["shm", "nccl"], "message_bytes": [64]}, "measure": {"iterations": 2}}
JSON
expect_rc 0 "$TPBENCH" run "$SCRATCH/mixed.json" --no-report --results-dir "$SCRATCH/mixed" --junit "$SCRATCH/mixed.xml"
grep -q '^cases: 1 ok, 0 failed, 1 skipped' "$SCRATCH/last.out" || { cat "$SCRATCH/last.out" >&2; fail "mixed run"; }
! grep -q "nothing ran" "$SCRATCH/last.out" "$SCRATCH/mixed.xml" || fail "a run where a case ran says nothing ran"

# 3. qualify: a GPU profile with no GPU visible measures nothing: exit 3, not FAIL (1).
expect_rc 3 "$TPBENCH" qualify scenarios/qualify/h200x1.json --out "$SCRATCH/q-gate"
grep -q '^qualify: NOTHING RAN (1 rows, 1 not passing)' "$SCRATCH/last.out" || { cat "$SCRATCH/last.out" >&2; fail "qualify summary"; }
grep -qx 'nothing ran: profile needs 1 GPU(s), found 0' "$SCRATCH/last.out" || { cat "$SCRATCH/last.out" >&2; fail "qualify line"; }
grep -q 'name="tpbench.nothing_ran" value="profile needs 1 GPU(s), found 0"' "$SCRATCH/q-gate/qualify.junit.xml" \
  || fail "qualify's JUnit does not say that nothing ran"

# 4. qualify: a CPU profile whose only probe is a GPU scenario: every case skipped, exit 3.
cat >"$SCRATCH/gpu-conformance.json" <<'JSON'
{"schema": 1, "name": "gpu-conformance-on-cpu", "device": "cpu",
 "probes": [{"probe": "conformance", "scenario": "scenarios/conformance/gpu-engine-tiny-shared.json"}]}
JSON
expect_rc 3 "$TPBENCH" qualify "$SCRATCH/gpu-conformance.json" --out "$SCRATCH/q-skipped"
grep -Eq '^nothing ran: device cuda: (no GPU is visible|this tpbench was built without CUDA)$' "$SCRATCH/last.out" \
  || { cat "$SCRATCH/last.out" >&2; fail "qualify of skipped cases: no 'nothing ran' line"; }
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['verdict']=='NOTHING RAN' and d['nothing_ran'], d" \
  "$SCRATCH/q-skipped/qualify.json" || fail "qualify.json does not say that nothing ran"
echo "nothing ran is not a pass: ok"
