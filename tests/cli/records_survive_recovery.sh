# Issue 17, finding 5: a record cut short by a crash stayed in results.jsonl after --resume,
# after which report and compare refused the folder; two concurrent --resume of one run were
# not detected (cases ran twice). Now --resume moves damaged lines to results.jsonl.damaged and
# reruns their cases (the run reads again), and a run folder has one writer at a time: a
# second exits 2 naming the first's pid.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
S=scenarios/ci-smoke.json
expect_rc 0 "$TPBENCH" run $S --no-report --results-dir "$SCRATCH/runs" --filter tp=2
RUN=$(run_dir_of "$SCRATCH/runs")
lines=$(wc -l <"$RUN/results.jsonl")

# 1. A crash in mid-record: the last line cut short, no newline.
head -c -40 "$RUN/results.jsonl" >"$SCRATCH/cut" && cp "$SCRATCH/cut" "$RUN/results.jsonl"
expect_rc 2 "$TPBENCH" report "$RUN"  # unreadable as it is
expect_rc 0 "$TPBENCH" run --resume "$RUN" --no-report
grep -q "1 damaged line(s) (a case cut short) moved to results.jsonl.damaged" "$SCRATCH/last.out" ||
  { cat "$SCRATCH/last.out"; fail "the repair is not said"; }
[[ -s "$RUN/results.jsonl.damaged" ]] || fail "the removed line was not kept"
python3 - "$RUN/results.jsonl" "$lines" <<'PY' || fail "results.jsonl is not whole records, one per case"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]  # every line parses
ids = [r["case_id"] for r in recs]
assert len(ids) == len(set(ids)) == int(sys.argv[2]), (len(ids), len(set(ids)), sys.argv[2])
PY
expect_rc 0 "$TPBENCH" report "$RUN"
expect_rc 0 "$TPBENCH" compare "$RUN" "$RUN"

# 2. Two writers: the records of all but the first two cases dropped, so that a --resume has
# cases to run; a second --resume while it runs must stop at once, naming the first's pid.
head -n 2 "$RUN/results.jsonl" >"$SCRATCH/two" && cp "$SCRATCH/two" "$RUN/results.jsonl"
"$TPBENCH" run --resume "$RUN" --no-report >"$SCRATCH/first.out" 2>&1 &
first=$!
for _ in $(seq 50); do [[ -s "$RUN/.tpbench.lock" ]] && break; sleep 0.1; done
[[ -s "$RUN/.tpbench.lock" ]] || fail "the first --resume took no lock"
expect_rc 2 "$TPBENCH" run --resume "$RUN" --no-report
grep -q "in use by another tpbench (pid $first)" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "the holder is not named"; }
wait "$first" || { cat "$SCRATCH/first.out"; fail "the first --resume failed"; }
python3 - "$RUN/results.jsonl" "$lines" <<'PY' || fail "cases ran twice or went missing"
import json, sys
ids = [json.loads(l)["case_id"] for l in open(sys.argv[1])]
assert len(ids) == len(set(ids)) == int(sys.argv[2]), (len(ids), len(set(ids)))
PY
[[ ! -s "$RUN/.tpbench.lock" ]] || fail "the lock file still names a pid after the run"
ls "$RUN" | grep -q '\.tmp\.' && fail "a temporary file was left"
echo ok
