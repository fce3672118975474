#!/usr/bin/env bash
# Issue 34, point 11: `tpbench run ... | head` closed tpbench's stdout early and SIGPIPE killed
# the run mid-sweep, leaving run.json without a summary or a resume hint. Now a closed stdout
# only fails the writes: every case runs, run.json gets its summary, the exit status is the run's.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
smoke_tp2 "$SCRATCH/s.json"
set +e
"$TPBENCH" run "$SCRATCH/s.json" --no-report --results-dir "$SCRATCH/runs" | head -1 >"$SCRATCH/head.out"
statuses=("${PIPESTATUS[@]}")
set -e
[[ ${statuses[0]} -eq 0 ]] || fail "tpbench exited ${statuses[0]} with its stdout closed early (141 is SIGPIPE)"
[[ -s $SCRATCH/head.out ]] || fail "head read nothing"
run=$(run_dir_of "$SCRATCH/runs")
python3 - "$run" <<'PY' || fail "the run is incomplete after its stdout closed"
import json, sys
run = json.load(open(sys.argv[1] + "/run.json"))
s = run["summary"]
assert s["exit_code"] == 0 and s["ok"] == s["cases"] > 1 and s.get("end_time"), s
lines = [l for l in open(sys.argv[1] + "/results.jsonl") if l.strip()]
assert len(lines) == s["cases"], (len(lines), s["cases"])
PY
echo ok
