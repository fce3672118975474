#!/usr/bin/env bash
# Issue 17, finding 10: SIGINT/SIGTERM ended the controller silently (exit 130/143) with no
# summary in run.json and no hint to resume. Now, in the case loop:
# - the first signal lets the case in flight finish and records it, then stops: run.json's
#   summary says `interrupted` {signal, case_cut_short: null, not_run, resume}, the resume
#   command is printed, the exit status is 128 + the signal;
# - a second signal stops the case in flight at once (its ranks are killed; it stays
#   unrecorded, named in case_cut_short);
# either way nothing is left running or in /dev/shm, and --resume then finishes the run, each
# case once. A scenario of three ~1-3 s cases, so that the signals land inside a case.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
set -m  # background jobs get SIGINT delivered (a non-interactive shell starts them ignoring it)

# A sanitized build (ASan+UBSan, CI's second stage) runs each 4 MiB allreduce about 40 times
# slower: a tenth of the iterations keeps its cases a few seconds long, as here.
iterations=1000
"$TPBENCH" --version | grep -q -- "-fsanitize" && iterations=100
python3 - "$SCRATCH/slow.json" "$iterations" <<'PY'
import json, sys
s = {"schema": 1, "name": "slow-cases", "workload": "allreduce", "device": "cpu",
     "model": {"preset": "tiny-dsv3", "weights": "synthetic", "seed": 7},
     "sweep": {"tp": [2], "allreduce": ["shm"], "dtype": ["f32"], "message_bytes": [4194304, 4194300, 4194296]},
     "measure": {"warmup": 1, "iterations": int(sys.argv[2]), "timeout_s": 120}, "checks": []}
json.dump(s, open(sys.argv[1], "w"))
PY

# drill SIG COUNT: starts the run, sends SIG COUNT times once the first case is in flight
# (its ranks' logs exist, no record yet), checks the summary; leaves the run folder in $run.
drill() {
  local sig=$1 count=$2 root="$SCRATCH/$1-$2"
  TPB_TEST_MARK=$MARK "$TPBENCH" run "$SCRATCH/slow.json" --no-report --results-dir "$root" >"$root.out" 2>&1 &
  local pid=$!
  for _ in $(seq 400); do
    compgen -G "$root/*/logs/*rank1.log" >/dev/null && break
    sleep 0.02
  done
  local f
  f=$(compgen -G "$root/*/results.jsonl" | head -1 || true)
  [[ -z $f || ! -s $f ]] || fail "SIG$sig x$count: the first case ended before the signal; the drill needs it in flight"
  for ((k = 0; k < count; ++k)); do
    kill -"$sig" "$pid"
    sleep 0.3
  done
  set +e; wait "$pid"; local rc=$?; set -e
  local want=$((128 + $(kill -l "$sig")))
  [[ $rc -eq $want ]] || { cat "$root.out"; fail "SIG$sig x$count: exit $rc, expected $want"; }
  run=$(run_dir_of "$root")
  grep -q "^interrupted by SIG$sig: .*Resume with: tpbench run --resume $run" "$root.out" ||
    { cat "$root.out"; fail "SIG$sig x$count: no resume hint"; }
  expect_nothing_left "$pid" "SIG$sig x$count"
}

# One signal: the case in flight finishes and is recorded, the other two are not run.
for sig in INT TERM; do
  drill "$sig" 1
  grep -q "the case in flight finishes and is recorded" "$SCRATCH/$sig-1.out" || fail "SIG$sig: no word of what happens next"
  python3 - "$run" "$sig" <<'PY' || fail "SIG$sig: the case in flight was not finished and recorded"
import json, sys
run, sig = sys.argv[1], sys.argv[2]
s = json.load(open(run + "/run.json"))["summary"]
i = s["interrupted"]
assert i and i["signal"] == "SIG" + sig and i["case_cut_short"] is None, i
assert i["resume"] == "tpbench run --resume " + run and i["not_run"] == 2, i
assert s["failed"] == 0, s  # cases not run are not failures
recs = [json.loads(l) for l in open(run + "/results.jsonl")]
assert [r["status"] for r in recs] == ["ok"], [(r["case_id"], r["status"]) for r in recs]
PY
done

# Two signals: the case in flight is stopped and left unrecorded.
drill INT 2
python3 - "$run" <<'PY' || fail "SIGINT x2: the case in flight was not cut short and left unrecorded"
import json, sys
run = sys.argv[1]
s = json.load(open(run + "/run.json"))["summary"]
i = s["interrupted"]
assert i and i["signal"] == "SIGINT" and i["case_cut_short"] and i["not_run"] == 3, i
assert s["failed"] == 0, s
import os
p = run + "/results.jsonl"
assert not os.path.exists(p) or open(p).read() == "", "a cut-short case was recorded"
PY
grep -q "cut short and not recorded" "$SCRATCH/INT-2.out" || fail "SIGINT x2: the summary line does not say the case was cut short"

# --resume completes it: every planned case exactly once.
expect_rc 0 "$TPBENCH" run --resume "$run" --no-report
python3 - "$run" <<'PY' || fail "after --resume the run is not complete, each case once"
import json, sys
planned = [c["case_id"] for c in json.load(open(sys.argv[1] + "/run.json"))["cases"]]
ids = [json.loads(l)["case_id"] for l in open(sys.argv[1] + "/results.jsonl")]
assert sorted(ids) == sorted(planned), (len(ids), len(planned))
PY
echo ok
