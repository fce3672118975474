# Issue 17, finding 8: `compare` exited 1 ("regression") on a field of the wrong type with a raw
# type_error, and --latency-tol nan / --alpha nan turned a detected regression into exit 0.
# Now malformed input is exit 2 naming file:line and the JSON path, numeric options must be
# finite and in range (exit 2 naming the option), and a real regression stays exit 1.
source "$(dirname "$0")/common.bash" "$@"
cd "$SOURCE_DIR"
expect_rc 0 "$TPBENCH" run scenarios/conformance/cpu-shm-allreduce.json --no-report --results-dir "$SCRATCH/runs"
RUN=$(run_dir_of "$SCRATCH/runs")

# A copy of the run with one field changed: $1 output, $2 python statement on `recs`.
mutate() {
  python3 - "$RUN/results.jsonl" "$1" "$2" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
exec(sys.argv[3])
open(sys.argv[2], "w").write("".join(json.dumps(r) + "\n" for r in recs))
PY
}
ok_line() { python3 -c "
import json,sys
for i,l in enumerate(open(sys.argv[1])):
    r=json.loads(l)
    if r['status']=='ok' and r.get('latency') and r['latency'].get('samples_us'): print(i); break" "$1"; }
i=$(ok_line "$RUN/results.jsonl")
[[ -n "$i" ]] || fail "no ok record with latency samples"

mutate "$SCRATCH/p50.jsonl" "recs[$i]['latency']['p50'] = 'fast'"
expect_rc 2 "$TPBENCH" compare "$RUN" "$SCRATCH/p50.jsonl"
grep -q "p50.jsonl:$((i + 1)): \$.latency.p50: expected a number, got \"fast\"" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "wrong-type p50 not named"; }
mutate "$SCRATCH/reps.jsonl" "recs[$i]['latency']['samples_us'][1] = None"
expect_rc 2 "$TPBENCH" compare "$SCRATCH/reps.jsonl" "$RUN"
grep -q "\$.latency.samples_us\[1\]: expected a finite number, got null" "$SCRATCH/last.out" || fail "a null sample not named"
mutate "$SCRATCH/id.jsonl" "recs[$i]['case_id'] = 7"
expect_rc 2 "$TPBENCH" compare "$RUN" "$SCRATCH/id.jsonl"
grep -q "\$.case_id: expected a string, got 7" "$SCRATCH/last.out" || fail "a numeric case_id not named"
mutate "$SCRATCH/digest.jsonl" "recs[$i]['digests'] = [{'output': 12}] * len(recs[$i]['digests'])"
expect_rc 2 "$TPBENCH" compare "$RUN" "$SCRATCH/digest.jsonl"
grep -q "\$.digests\[0\].output: expected a digest string, got 12" "$SCRATCH/last.out" || fail "a numeric digest not named"
head -c -40 "$RUN/results.jsonl" >"$SCRATCH/truncated.jsonl"
expect_rc 2 "$TPBENCH" compare "$RUN" "$SCRATCH/truncated.jsonl"
grep -q "truncated.jsonl:[0-9]*: not valid JSON" "$SCRATCH/last.out" || fail "a truncated line not named"

# Options: NaN, out of range, not an integer.
for bad in "--latency-tol nan" "--alpha nan" "--alpha 2" "--memory-tol -1" "--kv-tol inf" "--min-repetitions 1" "--min-repetitions 9.5"; do
  # shellcheck disable=SC2086
  expect_rc 2 "$TPBENCH" compare "$RUN" "$RUN" $bad
  grep -q "tpbench compare: error: ${bad%% *}: expected" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "$bad not refused"; }
done

# A changed digest stays a regression (exit 1), also with tight valid options.
mutate "$SCRATCH/changed.jsonl" "recs[$i]['digests'][0] = {k: '0' * 16 for k in recs[$i]['digests'][0]}"
expect_rc 1 "$TPBENCH" compare "$RUN" "$SCRATCH/changed.jsonl" --alpha 0.01 --latency-tol 0.5
grep -q "mismatch" "$SCRATCH/last.out" || fail "the digest change is not a mismatch"

# Issue 37, finding 5: the last record of a case counts. A case that was ok and then failed
# (appended, as a resumed run appends) is not compared by its ok record: not-ok, exit 1 (it was
# "0 regression(s)", exit 0). The same record twice is compared once.
mutate "$SCRATCH/later_failed.jsonl" "f = dict(recs[$i]); f['status'] = 'failed'; f['error'] = 'planted'; recs.append(f)"
expect_rc 1 "$TPBENCH" compare "$RUN" "$SCRATCH/later_failed.jsonl"
grep -q "not-ok" "$SCRATCH/last.out" || { cat "$SCRATCH/last.out"; fail "a case that failed last was compared by its ok record"; }
mutate "$SCRATCH/twice.jsonl" "recs.append(dict(recs[$i]))"
expect_rc 0 "$TPBENCH" compare "$RUN" "$SCRATCH/twice.jsonl" --json
python3 - "$SCRATCH/last.out" "$(python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readlines()[$i])['case_id'])" "$RUN/results.jsonl")" <<'PY' || fail "a repeated record was compared twice"
import json, sys
out = json.loads(open(sys.argv[1]).read()[open(sys.argv[1]).read().index("{"):])
n = sum(1 for v in out["verdicts"] if v["case_id"] == sys.argv[2] and v["metric"] == "latency_us")
sys.exit(0 if n == 1 else 1)
PY
echo ok
