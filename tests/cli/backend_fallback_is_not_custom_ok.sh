# Issue 15, path 3: a custom backend that fell back to NCCL (no peer access) was recorded ok,
# and equal_across_allreduce, grouping by the requested backend, let "custom equals NCCL" pass
# as NCCL against itself; neither terminal nor report showed it.
#
# The CPU plants the same fault: TPB_TEST_PLANT_FALLBACK=1 offers "planted", which runs shm and
# says so, as a custom backend without peer access runs NCCL (reference_engine/comm/factory.cpp).
# The sweep asks for shm and planted; the planted case must read "fallback", not ok, in the terminal,
# results.jsonl, JUnit, summary.md and report.html, equal_across_allreduce must fail naming the
# pair, and the run must exit 1. Without the switch the table has no planted row, so the scenario is
# invalid: exit 2, naming the file, the JSON path and the backends there are.
source "$(dirname "$0")/common.bash" "$@"
unset TPB_TEST_PLANT_FALLBACK  # planted below, for one run only

scenario="$SCRATCH/fallback.json"
cat >"$scenario" <<'JSON'
{"schema": 1, "name": "backend-fallback", "workload": "allreduce", "device": "cpu",
 "sweep": {"tp": [2], "allreduce": ["shm", "planted"], "message_bytes": [4096]},
 "measure": {"warmup": 1, "iterations": 3},
 "checks": ["equal_across_allreduce", "matches_reference"]}
JSON

# Without the planted fault: planted is not a backend (the backend table has no such row).
expect_rc 2 "$TPBENCH" run "$scenario" --no-report --results-dir "$SCRATCH/plain"
grep -qF "$scenario: \$.sweep.allreduce[1]: expected an allreduce backend (one of shm, mpi, nccl, custom-oneshot, custom-twoshot, auto), got \"planted\"" \
  "$SCRATCH/last.out" || fail "planted not rejected naming the file, the path and the backends without the switch"

# With it: the planted case ran shm. Exit 1, and the terminal says so under the case's line.
TPB_TEST_PLANT_FALLBACK=1 expect_rc 1 "$TPBENCH" run "$scenario" --results-dir "$SCRATCH/results" \
  --junit "$SCRATCH/junit.xml"
cat "$SCRATCH/last.out"
out="$SCRATCH/last.out"
grep -Eq '^\[2/2\] [0-9a-f]{16} allreduce tp2 .*planted  fallback ' "$out" || fail "the planted case's line does not say fallback"
grep -q '^    planted requested, shm ran all 4 allreduce calls \[shm 4 calls (4 KiB)\] (planted by TPB_TEST_PLANT_FALLBACK: planted unavailable, using shm)' "$out" \
  || fail "no line saying what ran instead of planted"
grep -q 'check equal_across_allreduce FAILED: planted requested, shm ran (planted by TPB_TEST_PLANT_FALLBACK: planted unavailable, using shm): planted is not compared with shm' "$out" \
  || fail "equal_across_allreduce did not fail naming the pair"
grep -q '^fallback: 1 case(s) ran another allreduce backend than requested' "$out" || fail "no fallback count at the end"
grep -Eq '^\[1/2\] [0-9a-f]{16} allreduce tp2 .*shm  ok ' "$out" || fail "the shm case is not ok"

# results.jsonl: what ran, per case.
run=$(run_dir_of "$SCRATCH/results")
python3 - "$run" <<'PY' || fail "results.jsonl does not record what ran"
import json, os, sys
run = sys.argv[1]
recs = {r["params"]["allreduce"]: r for r in map(json.loads, open(os.path.join(run, "results.jsonl")))}
shm, planted = recs["shm"], recs["planted"]
assert shm["status"] == "ok", shm["status"]
assert shm["allreduce_ran"] == {"requested": "shm", "backend": "shm", "verdict": "as-requested", "fallback": None,
                                "ran": [{"backend": "shm", "calls": 4, "bytes_min": 4096, "bytes_max": 4096}]}, shm["allreduce_ran"]
assert planted["status"] == "fallback", planted["status"]
ran = planted["allreduce_ran"]
assert ran["requested"] == "planted" and ran["backend"] == "shm" and ran["verdict"] == "fallback", ran
assert ran["ran"] == [{"backend": "shm", "calls": 4, "bytes_min": 4096, "bytes_max": 4096}], ran["ran"]
assert ran["fallback"].startswith("planted by TPB_TEST_PLANT_FALLBACK"), ran["fallback"]
assert planted["error"].startswith("planted requested, shm ran all 4 allreduce calls"), planted["error"]
check = planted["checks"]["equal_across_allreduce"]
assert check["status"] == "fail" and "planted is not compared with shm" in check["detail"], check
summary = json.load(open(os.path.join(run, "run.json")))["summary"]
assert summary["fallback"] == 1 and summary["ok"] == 1 and summary["exit_code"] == 1, summary
print("results.jsonl: planted", planted["status"], "-", planted["error"])
PY

# JUnit: the fallback is a failure of the case's run testcase, and of the check.
python3 - "$SCRATCH/junit.xml" <<'PY' || fail "JUnit does not fail the fallback"
import sys, xml.dom.minidom
doc = xml.dom.minidom.parse(sys.argv[1])
fails = {}
for tc in doc.getElementsByTagName("testcase"):
    for f in tc.getElementsByTagName("failure"):
        fails[(tc.getAttribute("classname"), tc.getAttribute("name"))] = f.getAttribute("message")
# classname: tpbench.backend-fallback.allreduce.tp2.4KiB.<dtype>.<backend> (its label, dotted)
run = [m for (cls, name), m in fails.items() if name == "run" and cls.endswith(".planted")]
assert len(run) == 1 and run[0].startswith("fallback: planted requested, shm ran all 4 allreduce calls"), fails
assert any(name == "equal_across_allreduce" and "planted is not compared with shm" in m for (cls, name), m in fails.items()), fails
assert not any(name == "run" and cls.endswith(".shm") for (cls, name), m in fails.items()), fails
print("junit:", run[0])
PY

# summary.md and report.html: counted, listed among the cases not ok, and in the backends table.
grep -q '1 fallback;' "$run/summary.md" || fail "summary.md headline does not count the fallback"
section=$(sed -n '/^## Allreduce backends as they ran/,/^## /p' "$run/summary.md")
echo "$section"
grep -q '| fallback | planted | shm 4 calls (4 KiB) | fallback | planted by TPB_TEST_PLANT_FALLBACK' <<<"$section" \
  || fail "summary.md does not show what ran instead of planted"
grep -q '<h2 id="backends-ran">Allreduce backends as they ran</h2>' "$run/report.html" || fail "report.html has no backends section"
grep -Eq '<tr class="bad"><td>[0-9a-f]{16}</td><td>[^<]*planted</td><td>fallback</td><td>planted</td><td>shm 4 calls \(4 KiB\)</td>' "$run/report.html" \
  || fail "report.html does not show the fallback row"
echo ok
