# Exit status: 0 all ok; 1 a case failed (a timeout) with the sweep going on and the
# failure recorded; 2 usage errors. JUnit output is well-formed and counts the failure.
# `tpbench` with no arguments runs the quickstart scenario.
source "$(dirname "$0")/common.bash" "$@"

expect_rc 0 "$TPBENCH" run --help
expect_rc 0 "$TPBENCH" list
grep -q "ci-smoke" "$SCRATCH/last.out" || fail "list does not show ci-smoke"
expect_rc 2 "$TPBENCH" run --bogus-flag
expect_rc 2 "$TPBENCH" run no-such-scenario-anywhere
grep -q "no-such-scenario-anywhere" "$SCRATCH/last.out" || fail "missing scenario not named"
expect_rc 2 "$TPBENCH" run scenarios/ci-smoke.json --results-dir
expect_rc 2 "$TPBENCH" run scenarios/ci-smoke.json --resume "$SCRATCH/not-a-run"

# A case that cannot finish in its timeout fails; the next case still runs.
cat >"$SCRATCH/timeout.json" <<'JSON'
{"schema": 1, "name": "timeout", "workload": "allreduce", "device": "cpu",
 "sweep": {"tp": [2], "message_bytes": [4, 8388608]},
 "measure": {"warmup": 0, "iterations": 5000, "timeout_s": 0.3}}
JSON
cat >"$SCRATCH/ok.json" <<'JSON'
{"schema": 1, "name": "fine", "workload": "allreduce", "device": "cpu",
 "sweep": {"tp": [1, 2], "message_bytes": [64]}, "measure": {"iterations": 2},
 "checks": ["matches_reference", "plan_matches_measured"]}
JSON
expect_rc 1 "$TPBENCH" run "$SCRATCH/timeout.json" --no-report --results-dir "$SCRATCH/r1" --junit "$SCRATCH/t.xml"
run=$(run_dir_of "$SCRATCH/r1")
python3 - "$run" "$SCRATCH/t.xml" <<'PY'
import json, sys, xml.dom.minidom
records = [json.loads(l) for l in open(f"{sys.argv[1]}/results.jsonl")]
assert len(records) == 2, records
big = [r for r in records if r["params"]["message_bytes"] == 8388608][0]
assert big["status"] == "failed" and "timeout" in big["error"], big["error"]
doc = xml.dom.minidom.parse(sys.argv[2])
assert len(doc.getElementsByTagName("failure")) >= 1
PY
expect_rc 0 "$TPBENCH" run "$SCRATCH/ok.json" --results-dir "$SCRATCH/r2" --junit "$SCRATCH/ok.xml"
grep -q "^report: " "$SCRATCH/last.out" || fail "no report line"
grep -q "2 skipped" "$SCRATCH/last.out" || fail "a check with nothing to compare is not counted as skipped"
python3 - "$SCRATCH/ok.xml" <<'PY'
import sys, xml.dom.minidom
doc = xml.dom.minidom.parse(sys.argv[1])
cases = doc.getElementsByTagName("testcase")
# 2 cases x (run + matches_reference + plan_matches_measured)
assert len(cases) == 6, len(cases)
assert len(doc.getElementsByTagName("failure")) == 0
assert len(doc.getElementsByTagName("skipped")) == 2  # plan_matches_measured: no memory plan in an allreduce case, not a pass
PY

# A check that applies to no case of the sweep is reported as skipped, never silently dropped.
sed 's/"plan_matches_measured"/"tp_invariant"/' "$SCRATCH/ok.json" >"$SCRATCH/na.json"
expect_rc 0 "$TPBENCH" run "$SCRATCH/na.json" --no-report --results-dir "$SCRATCH/r3" --junit "$SCRATCH/na.xml"
grep -q "1 skipped" "$SCRATCH/last.out" || fail "a check that applies to no case is not counted as skipped"
grep -q "applies to no case" "$SCRATCH/na.xml" || fail "JUnit does not say the check applied to no case"

# instrumentation=trace writes one Chrome trace per rank into the run folder's traces/.
cat >"$SCRATCH/trace.json" <<'JSON'
{"schema": 1, "name": "trace", "workload": "allreduce", "device": "cpu",
 "sweep": {"tp": [2], "message_bytes": [64], "instrumentation": ["trace"]}, "measure": {"iterations": 2}}
JSON
expect_rc 0 "$TPBENCH" run "$SCRATCH/trace.json" --no-report --results-dir "$SCRATCH/r4"
run=$(run_dir_of "$SCRATCH/r4")
python3 - "$run" <<'PY'
import glob, json, sys
files = sorted(glob.glob(f"{sys.argv[1]}/traces/trace-*-rank*.json"))
assert len(files) == 2, files
for f in files:
    assert json.load(open(f))["traceEvents"], f
PY

# No arguments: the main job, the engine (quickstart-cpu on a machine without a GPU: decode
# and prefill, TP 1 and 2, its checks), a table of numbers and a report, under ./results.
# A sanitized build (the asan preset, CI's second stage) leaves it to the unsanitized one: it
# takes 3 of CI's 15 minutes there, and the engine's paths run under ASan in the unit tests.
if "$TPBENCH" --version | grep -q -- "-fsanitize"; then
  echo "ok (the no-argument run is left to the unsanitized build)"
  exit 0
fi
(cd "$SCRATCH" && expect_rc 0 "$TPBENCH")
grep -q "the default scenario here is quickstart-cpu" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "no word of the default scenario"; }
grep -q "^decode: one step" "$SCRATCH/last.out" && grep -q "^prefill: time to first token" "$SCRATCH/last.out" ||
  { cat "$SCRATCH/last.out"; fail "tpbench without arguments printed no decode and prefill tables"; }
grep -q "checks (case x check): [1-9][0-9]* pass, 0 fail" "$SCRATCH/last.out" || fail "tpbench without arguments checked nothing"
! grep -q "skipped" <(grep -v "0 skipped" "$SCRATCH/last.out") || { cat "$SCRATCH/last.out"; fail "the default run talks of skipped things"; }
ls "$SCRATCH"/results/*/results.jsonl "$SCRATCH"/results/*/report.html >/dev/null || fail "tpbench without arguments wrote no results or report"
echo ok
