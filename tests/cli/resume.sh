# --resume: a run cut short (some records, a half-written line) is completed without
# re-running finished cases; every planned case ends with exactly one record.
source "$(dirname "$0")/common.bash" "$@"

expect_rc 0 "$TPBENCH" run scenarios/ci-smoke.json --no-report --results-dir "$SCRATCH/results"
run=$(run_dir_of "$SCRATCH/results")
total=$(wc -l <"$run/results.jsonl")
head -n 10 "$run/results.jsonl" >"$SCRATCH/head"
keep=$(head -n 10 "$run/results.jsonl" | md5sum)
{ cat "$SCRATCH/head"; printf '{"case_id": "half-writ'; } >"$run/results.jsonl"

hosts_before=$(python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["provenance"]["hosts"]))' "$run/run.json")

expect_rc 0 "$TPBENCH" run --resume "$run" --no-report
cat "$SCRATCH/last.out"
grep -q "(10 resumed" "$SCRATCH/last.out" || fail "expected 10 resumed cases"
grep -q "damaged line" "$SCRATCH/last.out" || fail "the damaged line was not reported"
[[ $(head -n 10 "$run/results.jsonl" | md5sum) == "$keep" ]] || fail "resume rewrote earlier records"
python3 - "$run" "$total" "$hosts_before" <<'PY'
import json, sys
run, total = sys.argv[1], int(sys.argv[2])
records = []
for line in open(f"{run}/results.jsonl"):
    try:
        records.append(json.loads(line))
    except json.JSONDecodeError:
        pass  # the half-written line stays, skipped
ids = [r["case_id"] for r in records]
planned = [c["case_id"] for c in json.load(open(f"{run}/run.json"))["cases"]]
assert len(ids) == len(set(ids)) == total, (len(ids), len(set(ids)), total)
assert set(ids) == set(planned)
assert len({r["run_id"] for r in records}) == 1, "resume must keep the run id"
# provenance.hosts spans the invocations: the one host, its first report kept, the resumed
# invocation's groups counted into it.
before, after = json.loads(sys.argv[3]), json.load(open(f"{run}/run.json"))["provenance"]["hosts"]
assert len(before) == len(after) == 1, (before, after)
assert after[0]["reported_by"] == before[0]["reported_by"] and after[0]["reports"] > before[0]["reports"], (before, after)
PY
# Resuming a finished run runs nothing.
expect_rc 0 "$TPBENCH" run scenarios/ci-smoke.json --resume "$run" --no-report
grep -q "($total resumed" "$SCRATCH/last.out" || fail "a finished run re-ran cases"
# Resuming a run of another scenario is refused.
expect_rc 2 "$TPBENCH" run scenarios/conformance/cpu-shm-allreduce.json --resume "$run"
grep -q "not 'cpu-shm-allreduce'" "$SCRATCH/last.out" || fail "other scenario accepted"
echo ok
